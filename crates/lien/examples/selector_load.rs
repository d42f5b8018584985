//! One selector Usage over many ConfigMaps, then a new Usage: how long until the new one is
//! enforced, and the webhook's latency meanwhile — against a real `lien run` process (issue 28,
//! finding 1; docs/benchmarks.md "A selector Usage over many objects").
//!
//! `scripts/selector-load.sh N [pinned]` does all of this with a fresh sandbox; by hand:
//!
//! ```text
//! cargo build --release -p lien --example selector_load --bin lien
//! target/release/lien sandbox --no-lien --port 0 --kubeconfig /tmp/sl.kubeconfig \
//!     --service lien-system/lien-webhook=127.0.0.1:18443 &
//! target/release/examples/selector_load --kubeconfig /tmp/sl.kubeconfig \
//!     --lien target/release/lien --webhook-addr 127.0.0.1:18443 --objects 10000
//! ```
//!
//! What it does, in order:
//! 1. creates the namespace `sel`, `--objects` ConfigMaps there labelled `app: big`, and the
//!    ConfigMaps `warm` and `late` (no label), and installs Lien's CRDs;
//! 2. starts `lien run` under `/usr/bin/time -v`, creates a Usage protecting `warm` and waits
//!    until a dry-run DELETE of `warm` is refused (Lien is up, synced and writing);
//! 3. reads the webhook's CA from Lien's ValidatingWebhookConfiguration and, from then to the
//!    end, POSTs a dry-run DELETE review of `warm` straight to the webhook every
//!    `1/--rate` seconds over one kept-alive TLS connection, timing each answer (a 409, from
//!    the index);
//! 4. idle: `--idle-seconds` with nothing else happening;
//! 5. creates the Usage `big` (`of: {resourceSelector: {matchLabels: {app: big}}}`), and
//!    `--late-after` seconds later the Usage `late` protecting ConfigMap `late`; from that
//!    create returning, sends a dry-run DELETE of `late` through the API server every
//!    millisecond until it is refused (409 — the webhook sees only labelled objects, so this is
//!    "labelled and refused"): **the time until a new Usage is enforced**;
//! 6. waits until every ConfigMap of `big` carries the in-use label (the resolution's end, as
//!    far as anyone can see it), then prints the webhook's p50/p99/max idle and during the
//!    resolution (from `big`'s create to its last label) — and beside them the floor, a
//!    `GET /healthz` of the same server on a second connection right after each review —
//!    Lien's RSS and CPU, and stops it.
//!
//! `--reuse` skips step 1 against a sandbox an earlier run filled (the Usages are deleted at the
//! end of every run; the labels they left are removed by the next Lien while it starts, so a
//! reused sandbox is for iterating only: the published numbers are from a fresh one).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

#[path = "load/mod.rs"]
mod load;
#[path = "load/measure.rs"]
mod measure;

use load::{Error, create_all, resource};
use measure::{child_of, dry_delete, percentile, rss};

const NAMESPACE: &str = "sel";

struct Args {
    kubeconfig: PathBuf,
    lien: PathBuf,
    webhook_addr: String,
    objects: usize,
    concurrency: usize,
    /// Webhook reviews per second, paced (one connection, one at a time).
    rate: u64,
    idle_seconds: u64,
    late_after: f64,
    reuse: bool,
    /// Give up waiting for the resolution's end after this long (seconds).
    deadline: u64,
}

fn args() -> Result<Args, Error> {
    let mut a = Args {
        kubeconfig: PathBuf::from("/tmp/sl.kubeconfig"),
        lien: PathBuf::from("target/release/lien"),
        webhook_addr: "127.0.0.1:18443".into(),
        objects: 10_000,
        concurrency: 32,
        rate: 200,
        idle_seconds: 5,
        late_after: 3.0,
        reuse: false,
        deadline: 900,
    };
    load::flags(|flag, value| {
        match flag {
            "--kubeconfig" => a.kubeconfig = value()?.into(),
            "--lien" => a.lien = value()?.into(),
            "--webhook-addr" => a.webhook_addr = value()?,
            "--objects" => a.objects = value()?.parse()?,
            "--concurrency" => a.concurrency = value()?.parse()?,
            "--rate" => a.rate = value()?.parse()?,
            "--idle-seconds" => a.idle_seconds = value()?.parse()?,
            "--late-after" => a.late_after = value()?.parse()?,
            "--deadline" => a.deadline = value()?.parse()?,
            "--reuse" => a.reuse = true,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok(a)
}

fn configmaps(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        NAMESPACE,
        &resource("", "v1", "ConfigMap", "configmaps"),
    )
}

fn usages(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        NAMESPACE,
        &resource("lien.dev", "v1alpha1", "Usage", "usages"),
    )
}

fn usage(name: &str, of: Value) -> Result<DynamicObject, Error> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"of": of, "reason": "measured"},
    }))?)
}

fn configmap(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
           "data": {"settings": "x".repeat(64)}})
}

/// Step 1.
async fn create_objects(client: &Client, a: &Args) -> Result<(), Error> {
    let namespaces: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource("", "v1", "Namespace", "namespaces"),
    );
    let ns = [NAMESPACE, "lien-system"]
        .iter()
        .map(|n| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}))
        .collect();
    create_all(&namespaces, ns, a.concurrency).await?;
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        ),
    );
    for crd in lien_api::crds() {
        let mut value = serde_json::to_value(&crd)?;
        value["apiVersion"] = json!("apiextensions.k8s.io/v1");
        value["kind"] = json!("CustomResourceDefinition");
        crds.create(&PostParams::default(), &serde_json::from_value(value)?)
            .await?;
    }
    let started = Instant::now();
    let mut objects: Vec<Value> = (0..a.objects)
        .map(|i| configmap(&format!("big-{i}"), json!({"app": "big"})))
        .collect();
    objects.push(configmap("warm", json!({})));
    objects.push(configmap("late", json!({})));
    create_all(&configmaps(client), objects, a.concurrency).await?;
    println!(
        "created {} ConfigMaps in {:.1} s",
        a.objects + 2,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Polls until a dry-run DELETE of `name` is refused; the time it took.
async fn until_refused(
    cms: &Api<DynamicObject>,
    name: &str,
    deadline: Duration,
) -> Result<Duration, Error> {
    let start = Instant::now();
    loop {
        if dry_delete(cms, name).await? == 409 {
            return Ok(start.elapsed());
        }
        if start.elapsed() > deadline {
            return Err(format!("{name}: not refused within {deadline:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The webhook's serving CA, as Lien published it in its ValidatingWebhookConfiguration.
async fn webhook_roots(client: &Client) -> Result<rustls::RootCertStore, Error> {
    use base64::Engine;
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let vwcs: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
    );
    let list = vwcs.list(&ListParams::default()).await?;
    let bundle = list
        .items
        .iter()
        .find_map(|c| c.data["webhooks"][0]["clientConfig"]["caBundle"].as_str())
        .ok_or("no ValidatingWebhookConfiguration with a caBundle")?;
    let pem = base64::engine::general_purpose::STANDARD.decode(bundle)?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        roots.add(cert?)?;
    }
    Ok(roots)
}

type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

async fn connect(addr: &str, roots: rustls::RootCertStore) -> Result<BufReader<Tls>, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    // The serving certificate names the Service, as kube-apiserver calls it.
    let name = rustls::pki_types::ServerName::try_from("lien-webhook.lien-system.svc")?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await?;
    Ok(BufReader::new(tls))
}

/// One review on a kept-alive HTTP/1.1 connection; the answer's status line.
async fn post(conn: &mut BufReader<Tls>, body: &str) -> Result<String, Error> {
    let request = format!(
        "POST /validate HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    conn.get_mut().write_all(request.as_bytes()).await?;
    let (status, answer) = response(conn).await?;
    let review: Value = serde_json::from_slice(&answer)?;
    if review["response"]["allowed"] != json!(false) || review["response"]["status"]["code"] != 409
    {
        return Err(format!("unexpected answer: {review}").into());
    }
    Ok(status)
}

/// Each `period` until `stop`: a review, then the floor (`/healthz` of the same server on its
/// own connection), so both see the same moments of the run. Returns (start, review, floor).
async fn review_loop(
    addr: String,
    roots: rustls::RootCertStore,
    body: String,
    period: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Result<Vec<(Instant, Duration, Duration)>, Error> {
    let mut conn = connect(&addr, roots.clone()).await?;
    let mut floor_conn = connect(&addr, roots).await?;
    let mut samples = Vec::new();
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = tick.tick() => {}
        }
        let start = Instant::now();
        post(&mut conn, &body).await?;
        let review = start.elapsed();
        let floor_start = Instant::now();
        healthz(&mut floor_conn).await?;
        samples.push((start, review, floor_start.elapsed()));
    }
    Ok(samples)
}

/// `GET /healthz` on a kept-alive connection to the same server: the floor, a static answer
/// that touches neither the index nor the decision, timed beside each review.
async fn healthz(conn: &mut BufReader<Tls>) -> Result<(), Error> {
    conn.get_mut()
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        .await?;
    let (status, _) = response(conn).await?;
    if !status.contains(" 200 ") {
        return Err(format!("/healthz answered {status}").into());
    }
    Ok(())
}

/// One HTTP/1.1 response on a kept-alive connection: its status line and its body (the
/// server gives a `content-length`).
async fn response(conn: &mut BufReader<Tls>) -> Result<(String, Vec<u8>), Error> {
    let mut status = String::new();
    conn.read_line(&mut status).await?;
    let mut length = 0;
    loop {
        let mut line = String::new();
        conn.read_line(&mut line).await?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse()?;
        }
    }
    let mut body = vec![0; length];
    conn.read_exact(&mut body).await?;
    Ok((status, body))
}

/// A dry-run DELETE review of `object`, as kube-apiserver sends it.
fn review(object: &Value) -> String {
    let meta = &object["metadata"];
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "7a3c0f0e-2f1d-4b8a-9d2a-5d1f3e4c6b7a",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "requestKind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "requestResource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": meta["name"], "namespace": meta["namespace"], "operation": "DELETE",
            "userInfo": {"username": "sandbox-admin", "groups": ["system:masters", "system:authenticated"]},
            "object": null, "oldObject": object, "dryRun": true,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions", "dryRun": ["All"]},
        }
    })
    .to_string()
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

fn summary(mut took: Vec<Duration>) -> (String, Duration) {
    took.sort();
    let p99 = percentile(&took, 0.99);
    (
        format!(
            "{} reviews: p50 {} p99 {} p99.9 {} max {}",
            took.len(),
            us(percentile(&took, 0.50)),
            us(p99),
            us(percentile(&took, 0.999)),
            us(percentile(&took, 1.0))
        ),
        p99,
    )
}

/// Sends SIGTERM to `lien run` when dropped: on an error too, so no Lien outlives a run.
struct Stop(u32);

impl Drop for Stop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.0.to_string()])
            .status();
    }
}

async fn labelled(cms: &Api<DynamicObject>) -> Result<usize, Error> {
    Ok(cms
        .list_metadata(&ListParams::default().labels("app=big,lien.dev/in-use=true"))
        .await?
        .items
        .len())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let a = args()?;
    let client = load::client(&a.kubeconfig).await?;
    if !a.reuse {
        create_objects(&client, &a).await?;
    }
    let cms = configmaps(&client);
    let usages = usages(&client);

    // 2. Lien, up and writing.
    let lien = tokio::process::Command::new("/usr/bin/time")
        .arg("-v")
        .arg(&a.lien)
        .args([
            "run",
            "--webhook-addr",
            &a.webhook_addr,
            "--no-leader-election",
        ])
        .env("KUBECONFIG", &a.kubeconfig)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let time_pid = lien.id().ok_or("no pid")?;
    let t0 = Instant::now();
    let lien_pid = loop {
        if let Some(pid) = child_of(time_pid) {
            break pid;
        }
        if t0.elapsed() > Duration::from_secs(10) {
            return Err("lien did not start".into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    // Whatever happens from here on, `lien run` stops with this process.
    let _stop = Stop(lien_pid);
    let warm = usage(
        "warm",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "warm"}}),
    )?;
    // The Usage CRD's webhook answers once Lien serves it: retry the create until then.
    loop {
        match usages.create(&PostParams::default(), &warm).await {
            Ok(_) => break,
            Err(kube::Error::Api(e)) if e.code == 409 => break,
            Err(_) if t0.elapsed() < Duration::from_secs(60) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    until_refused(&cms, "warm", Duration::from_secs(120)).await?;
    println!(
        "lien run up, synced and writing after {:.2} s",
        t0.elapsed().as_secs_f64()
    );

    // 3. The webhook, timed from now on.
    let warm_object: Value = serde_json::to_value(cms.get("warm").await?)?;
    let body = review(&warm_object);
    let roots = webhook_roots(&client).await?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let period = Duration::from_micros(1_000_000 / a.rate.max(1));
    let addr = a.webhook_addr.clone();
    // The reviewer has an OS thread and a runtime of its own: on the load generator's runtime
    // its answers would wait behind the generator's own work (decoding lists of 100,000
    // objects while it polls the labels) and be timed as the webhook's.
    let reviewer = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(review_loop(addr, roots, body, period, stop_rx))
    });
    // 4. Idle.
    let idle_from = Instant::now();
    tokio::time::sleep(Duration::from_secs(a.idle_seconds)).await;

    // 5. The selector Usage, then a new one.
    let big = usage(
        "big",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "resourceSelector": {"matchLabels": {"app": "big"}}}),
    )?;
    usages.create(&PostParams::default(), &big).await?;
    let big_at = Instant::now();
    tokio::time::sleep(Duration::from_secs_f64(a.late_after)).await;
    let late = usage(
        "late",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "late"}}),
    )?;
    usages.create(&PostParams::default(), &late).await?;
    let enforced = until_refused(&cms, "late", Duration::from_secs(a.deadline)).await?;
    let late_labelled_at = big_at.elapsed();
    println!(
        "new Usage `late` created {:.1} s after `big`: enforced (labelled, DELETE refused) after {:.1} ms; {} of {} objects of `big` labelled then",
        a.late_after,
        enforced.as_secs_f64() * 1e3,
        labelled(&cms).await?,
        a.objects
    );

    // 6. The resolution's end.
    loop {
        let n = labelled(&cms).await?;
        if n == a.objects {
            break;
        }
        if big_at.elapsed() > Duration::from_secs(a.deadline) {
            return Err(format!("{n} of {} labelled after {} s", a.objects, a.deadline).into());
        }
        // Each poll lists every labelled object: once a second keeps the generator's own
        // work off the machine the run measures.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let done = big_at.elapsed();
    let _ = stop_tx.send(true);
    let samples = reviewer.join().map_err(|_| "the reviewer panicked")??;
    let (idle, during): (Vec<_>, Vec<_>) = samples
        .into_iter()
        .filter(|(at, _, _)| *at >= idle_from)
        .partition(|(at, _, _)| *at < big_at);
    let (idle_floor, idle_floor_p99) = summary(idle.iter().map(|(_, _, f)| *f).collect());
    let (during_floor, during_floor_p99) = summary(during.iter().map(|(_, _, f)| *f).collect());
    let (idle, idle_p99) = summary(idle.into_iter().map(|(_, d, _)| d).collect());
    let (during, during_p99) = summary(during.into_iter().map(|(_, d, _)| d).collect());
    println!(
        "`big`: all {} objects labelled {:.1} s after its create (the new Usage was enforced at {:.1} s)",
        a.objects,
        done.as_secs_f64(),
        late_labelled_at.as_secs_f64()
    );
    println!("webhook idle:                 {idle}");
    println!("webhook during the resolution: {during}");
    println!(
        "p99 during / idle: {:.2}",
        during_p99.as_secs_f64() / idle_p99.as_secs_f64().max(1e-9)
    );
    println!("floor (/healthz) idle:         {idle_floor}");
    println!("floor (/healthz) during:       {during_floor}");
    println!(
        "floor p99 during / idle: {:.2}",
        during_floor_p99.as_secs_f64() / idle_floor_p99.as_secs_f64().max(1e-9)
    );
    println!(
        "lien RSS at the end (VmRSS, VmHWM): {:?} KiB",
        rss(lien_pid)
    );

    // The Usages go (for `--reuse`; the labels left are removed by the next Lien as it
    // starts, which is why a reused sandbox is for iterating only), then Lien stops.
    for name in ["big", "late", "warm"] {
        usages.delete(name, &DeleteParams::default()).await?;
    }
    std::process::Command::new("kill")
        .args(["-TERM", &lien_pid.to_string()])
        .status()?;
    let out = lien.wait_with_output().await?;
    let report = String::from_utf8_lossy(&out.stderr);
    for line in report.lines().filter(|l| {
        l.contains("Maximum resident")
            || l.contains("Elapsed")
            || l.contains("User time")
            || l.contains("System time")
    }) {
        println!("/usr/bin/time: {}", line.trim());
    }
    Ok(())
}
