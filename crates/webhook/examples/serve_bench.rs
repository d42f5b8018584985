//! The real webhook server over HTTPS on loopback, for load and memory benchmarks
//! (`scripts/bench-webhook.sh` drives it with oha):
//!
//! ```text
//! cargo build --release -p lien-webhook --example serve_bench
//! target/release/examples/serve_bench --out /tmp/lien-bench --seconds 120
//! ```
//!
//! It fills a `RelationIndex` with the `lien-core` fixture (100,000 relations, see
//! `crates/core/benches/fixture/mod.rs`) plus three users of each DELETE fixture's Deployment,
//! builds the webhook as `lien run` does (`Webhook::builder(index).build().router()`, a fresh
//! `CertManager` CA and serving certificate for `127.0.0.1`, `Server::start` on 127.0.0.1:0),
//! and writes into `--out`:
//!
//! - `ca.pem`: the CA bundle to verify the server with;
//! - `denied-5k.json`: the committed 5 KB DELETE review of `fixtures/web-5k` (in use → 409);
//! - `allowed-5k.json`: the same review of a Deployment the index does not know, without the
//!   in-use label (not in use → allowed).
//!
//! It prints `port <n>` once serving, then serves until SIGINT/SIGTERM or `--seconds` (a hard
//! bound, so a forgotten run ends), and prints the index's heap and the process's peak RSS.

#[path = "../../core/benches/fixture/mod.rs"]
mod fixture;
#[path = "support/mod.rs"]
mod support;

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use lien_core::RelationIndex;
use lien_webhook::{CertManager, Server, TlsSettings, Webhook};
use parking_lot::RwLock;
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};

type Error = Box<dyn std::error::Error>;

/// A line of `/proc/self/status` in KiB (`VmRSS`, `VmHWM`).
fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn memory(label: &str) {
    println!(
        "{label}: VmRSS {} KiB, VmHWM {} KiB",
        status_kib("VmRSS:").unwrap_or(0),
        status_kib("VmHWM:").unwrap_or(0)
    );
}

/// The core fixture, applied one source at a time as the controller would, plus the users of
/// the review fixtures' Deployments.
fn index() -> Result<RelationIndex, Error> {
    let mut idx = RelationIndex::new();
    for ns in 0..fixture::NAMESPACES {
        for (source, relations) in fixture::namespace_usages(ns) {
            idx.apply(&source, relations)?;
        }
    }
    for (source, relations) in fixture::rules() {
        idx.apply(&source, relations)?;
    }
    support::use_web_5k(&mut idx)?;
    Ok(idx)
}

struct Args {
    out: PathBuf,
    seconds: u64,
}

fn args() -> Result<Args, Error> {
    let mut out = PathBuf::from("/tmp/lien-serve-bench");
    let mut seconds = 600;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--out" => out = it.next().ok_or("--out needs a directory")?.into(),
            "--seconds" => seconds = it.next().ok_or("--seconds needs a number")?.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(Args { out, seconds })
}

fn write_bodies(out: &std::path::Path) -> Result<(), Error> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/delete-deployment-5k.json"
    );
    let denied = std::fs::read_to_string(path)?;
    let allowed = denied
        .replace("web-5k", "api-5k")
        .replace("\"lien.dev/in-use\":\"true\",", "")
        .replace("\"f:lien.dev/in-use\":{},", "");
    if allowed.contains("lien.dev/in-use") || !allowed.contains("api-5k") {
        return Err("the 5 KB fixture changed shape; update write_bodies".into());
    }
    std::fs::write(out.join("denied-5k.json"), denied)?;
    std::fs::write(out.join("allowed-5k.json"), allowed)?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args = args()?;
    std::fs::create_dir_all(&args.out)?;
    write_bodies(&args.out)?;

    memory("start");
    let started = std::time::Instant::now();
    let idx = index()?;
    let (relations, heap) = (idx.len(), idx.heap_bytes());
    println!(
        "index: {relations} relations, {} objects, {} sources in {:.2} s; heap {heap} bytes = {:.2} MiB = {:.1} bytes/relation",
        idx.key_count(),
        idx.source_count(),
        started.elapsed().as_secs_f64(),
        heap as f64 / 1_048_576.0,
        heap as f64 / relations as f64,
    );
    memory("index built");

    let certs = CertManager::new(TlsSettings::new(vec!["127.0.0.1".to_owned()]))?;
    std::fs::write(args.out.join("ca.pem"), certs.ca_bundle_pem())?;
    let webhook = Webhook::builder(Arc::new(RwLock::new(idx)))
        .ready(true)
        .build();
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let server = Server::start(listener, certs.server_config()?, webhook.router())?;
    memory("serving");
    println!("pid {}", std::process::id());
    println!("port {}", server.addr().port());
    std::io::stdout().flush()?;

    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => println!("stopping: SIGINT"),
        _ = term.recv() => println!("stopping: SIGTERM"),
        _ = tokio::time::sleep(Duration::from_secs(args.seconds)) => println!("stopping: --seconds elapsed"),
    }
    memory("end");
    server.shutdown().await;
    Ok(())
}
