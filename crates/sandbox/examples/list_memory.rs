//! List memory benchmark (issue 22, item 4): fill the sandbox with N ConfigMaps, then list them
//! all without `limit` R times each as JSON, as protobuf (what client-go informers ask for) and
//! as a Table (what `kubectl get` asks for),
//! printing the sandbox's resident memory (VmRSS) and its peak (VmHWM) after each step.
//!
//! ```text
//! cargo run --release -p lien-sandbox --example list_memory -- --objects 100000 --repeat 3
//! ```
//!
//! Without `--kubeconfig` it starts a sandbox in this process and reads `/proc/self/status`
//! (the client side only drains each answer, counting its bytes, so what grows is the
//! sandbox). With `--kubeconfig K --pid P` it lists a running `lien sandbox` and reads
//! `/proc/P/status`. `--keep` leaves the ConfigMaps in place (a second run against the same
//! sandbox then skips the fill); otherwise they are deleted with one deletecollection.

use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

type Error = Box<dyn std::error::Error + Send + Sync>;

const NS: &str = "list-memory";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

struct Args {
    kubeconfig: Option<String>,
    pid: Option<u32>,
    objects: usize,
    repeat: usize,
    keep: bool,
}

fn args() -> Result<Args, Error> {
    let mut a = Args {
        kubeconfig: None,
        pid: None,
        objects: 100_000,
        repeat: 3,
        keep: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--kubeconfig" => a.kubeconfig = Some(value()?),
            "--pid" => a.pid = Some(value()?.parse()?),
            "--objects" => a.objects = value()?.parse()?,
            "--repeat" => a.repeat = value()?.parse()?,
            "--keep" => a.keep = true,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    if a.kubeconfig.is_some() != a.pid.is_some() {
        return Err(
            "--kubeconfig and --pid go together (the sandbox to list and its process)".into(),
        );
    }
    Ok(a)
}

/// VmRSS and VmHWM of the sandbox's process, in MiB.
fn memory(pid: Option<u32>) -> Result<(f64, f64), Error> {
    let path = pid.map_or("/proc/self/status".to_string(), |p| {
        format!("/proc/{p}/status")
    });
    let status = std::fs::read_to_string(&path)?;
    let kib = |field: &str| -> Result<f64, Error> {
        let line = status
            .lines()
            .find(|l| l.starts_with(field))
            .ok_or_else(|| format!("{path} has no {field}"))?;
        let n: f64 = line
            .trim_start_matches(field)
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()?;
        Ok(n / 1024.0)
    };
    Ok((kib("VmRSS:")?, kib("VmHWM:")?))
}

fn report(step: &str, pid: Option<u32>, took: Option<Duration>, bytes: Option<u64>) {
    let (rss, hwm) = memory(pid).unwrap_or((f64::NAN, f64::NAN));
    let mut line = format!("{step:<24} RSS {rss:>7.0} MiB  peak {hwm:>7.0} MiB");
    if let Some(took) = took {
        line.push_str(&format!("  {:>6.2} s", took.as_secs_f64()));
    }
    if let Some(bytes) = bytes {
        line.push_str(&format!("  {:>6.1} MiB answered", bytes as f64 / 1048576.0));
    }
    println!("{line}");
}

/// One unlimited list, drained frame by frame so the client keeps nothing.
async fn list(client: &kube::Client, accept: &str) -> Result<u64, Error> {
    let req = http::Request::get(format!("/api/v1/namespaces/{NS}/configmaps"))
        .header(http::header::ACCEPT, accept)
        .body(Vec::new())?;
    let resp = client.send(req.map(kube::client::Body::from)).await?;
    if !resp.status().is_success() {
        return Err(format!("list answered {}", resp.status()).into());
    }
    let mut body = resp.into_body();
    let mut bytes = 0u64;
    while let Some(frame) = body.frame().await {
        if let Some(data) = frame?.data_ref() {
            bytes += data.len() as u64;
        }
    }
    Ok(bytes)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = args()?;
    let (_sandbox, kubeconfig) = match &args.kubeconfig {
        Some(path) => (None, Kubeconfig::read_from(path)?),
        None => {
            let sandbox = lien_sandbox::Sandbox::start(Default::default()).await?;
            let kc: Kubeconfig = serde_json::from_value(sandbox.kubeconfig())?;
            (Some(sandbox), kc)
        }
    };
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    let client = kube::Client::try_from(config)?;
    let pid = args.pid;
    report("started", pid, None, None);

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(NS.into());
    match namespaces.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let present = cms
        .list_metadata(&ListParams::default().limit(1))
        .await?
        .metadata
        .remaining_item_count
        .map_or(0, |n| n as usize + 1);
    let started = Instant::now();
    let mut failed = stream::iter(present..args.objects)
        .map(|i| {
            let cms = cms.clone();
            async move {
                let mut cm = ConfigMap::default();
                cm.metadata.name = Some(format!("cm-{i:06}"));
                cm.metadata.labels =
                    Some([("bench".to_string(), "list-memory".to_string())].into());
                cm.data = Some(
                    [
                        ("index".to_string(), i.to_string()),
                        ("payload".to_string(), "x".repeat(64)),
                    ]
                    .into(),
                );
                cms.create(&PostParams::default(), &cm).await.err()
            }
        })
        .buffer_unordered(64)
        .filter_map(|e| async move { e })
        .boxed();
    if let Some(e) = failed.next().await {
        return Err(e.into());
    }
    drop(failed);
    report(
        &format!("filled {}", args.objects),
        pid,
        Some(started.elapsed()),
        None,
    );

    for (what, accept) in [
        ("json", "application/json"),
        ("protobuf", "application/vnd.kubernetes.protobuf"),
        ("table", TABLE),
    ] {
        for round in 1..=args.repeat {
            let started = Instant::now();
            let bytes = list(&client, accept).await?;
            report(
                &format!("list {what} #{round}"),
                pid,
                Some(started.elapsed()),
                Some(bytes),
            );
        }
    }
    // What stays once the answers are gone (an allocator that keeps freed memory shows here).
    tokio::time::sleep(Duration::from_secs(2)).await;
    report("after 2 s idle", pid, None, None);

    if !args.keep {
        cms.delete_collection(&DeleteParams::default(), &ListParams::default())
            .await?;
    }
    Ok(())
}
