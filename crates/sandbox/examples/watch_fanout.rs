//! Watch fan-out benchmark: N watches on one label selector, M ConfigMap creates, and how long
//! each event takes from the start of its write to each watcher.
//!
//! ```text
//! cargo run --release -p lien-sandbox --example watch_fanout -- \
//!     --kubeconfig /tmp/x --watches 100 --writes 1000 [--rate 200]
//! ```
//!
//! Against a running `lien sandbox` (its kubeconfig); without `--kubeconfig` it starts a sandbox
//! in this process. `--rate` paces the writes (per second); 0, the default, writes back to back.
//! It prints the delivery latency percentiles over all N×M deliveries and the events delivered
//! per second, and deletes what it created.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

type Error = Box<dyn std::error::Error + Send + Sync>;

struct Args {
    kubeconfig: Option<String>,
    watches: usize,
    writes: usize,
    rate: f64,
}

fn args() -> Result<Args, Error> {
    let mut a = Args {
        kubeconfig: None,
        watches: 100,
        writes: 1000,
        rate: 0.0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--kubeconfig" => a.kubeconfig = Some(value()?),
            "--watches" => a.watches = value()?.parse()?,
            "--writes" => a.writes = value()?.parse()?,
            "--rate" => a.rate = value()?.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(a)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
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
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let run = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    let selector = format!("fanout-run={run}");

    // Write start times by sequence number; sequence 0 is the warm-up write that tells when
    // every watch is established.
    let sent: Arc<Mutex<HashMap<u64, Instant>>> = Arc::default();
    let rv = cms
        .list(&ListParams::default().labels(&selector))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let expected = args.writes + 1;
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let mut watchers = Vec::new();
    for _ in 0..args.watches {
        let cms = cms.clone();
        let (selector, rv, sent, ready) =
            (selector.clone(), rv.clone(), sent.clone(), ready_tx.clone());
        watchers.push(tokio::spawn(async move {
            let wp = WatchParams::default().labels(&selector).timeout(290);
            let mut stream = cms.watch(&wp, &rv).await?.boxed();
            let mut latencies = Vec::with_capacity(expected);
            let mut seen = 0;
            while seen < expected {
                let Some(event) = stream.try_next().await? else {
                    return Err::<_, Error>("watch ended early".into());
                };
                let WatchEvent::Added(cm) = event else {
                    continue;
                };
                let now = Instant::now();
                seen += 1;
                let seq: u64 = cm
                    .data
                    .as_ref()
                    .and_then(|d| d.get("seq"))
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                if seq == 0 {
                    let _ = ready.send(());
                    continue;
                }
                let start = sent.lock().map_err(|_| "poisoned")?.get(&seq).copied();
                if let Some(start) = start {
                    latencies.push(now - start);
                }
            }
            Ok(latencies)
        }));
    }
    drop(ready_tx);

    let object = |seq: u64| {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(format!("fanout-{run}-{seq}"));
        cm.metadata.labels = Some([("fanout-run".to_string(), run.clone())].into());
        cm.data = Some([("seq".to_string(), seq.to_string())].into());
        cm
    };
    // Warm-up: retried until every watcher has seen it, so no watch starts after the writes.
    cms.create(&PostParams::default(), &object(0)).await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    for _ in 0..args.watches {
        tokio::time::timeout_at(deadline.into(), ready_rx.recv())
            .await
            .map_err(|_| "watches did not start within 60 s")?;
    }

    let started = Instant::now();
    let interval = (args.rate > 0.0).then(|| Duration::from_secs_f64(1.0 / args.rate));
    for seq in 1..=args.writes as u64 {
        if let Some(every) = interval {
            tokio::time::sleep_until((started + every * (seq as u32 - 1)).into()).await;
        }
        sent.lock()
            .map_err(|_| "poisoned")?
            .insert(seq, Instant::now());
        cms.create(&PostParams::default(), &object(seq)).await?;
    }
    let writes_done = started.elapsed();

    let mut all = Vec::with_capacity(args.watches * args.writes);
    for w in watchers {
        let latencies = tokio::time::timeout_at(deadline.into(), w)
            .await
            .map_err(|_| "watchers did not get every event within 60 s")???;
        all.extend(latencies);
    }
    let delivered = started.elapsed();
    all.sort();
    println!(
        "watches={} writes={} rate={} deliveries={}",
        args.watches,
        args.writes,
        if args.rate > 0.0 {
            format!("{}/s", args.rate)
        } else {
            "max".to_string()
        },
        all.len()
    );
    println!(
        "writes: {:.0}/s ({} in {:.2} s)",
        args.writes as f64 / writes_done.as_secs_f64(),
        args.writes,
        writes_done.as_secs_f64()
    );
    println!(
        "events delivered: {:.0}/s (last delivery {:.2} s after the first write)",
        all.len() as f64 / delivered.as_secs_f64(),
        delivered.as_secs_f64()
    );
    println!(
        "delivery latency: p50 {} p90 {} p99 {} max {}",
        ms(percentile(&all, 0.50)),
        ms(percentile(&all, 0.90)),
        ms(percentile(&all, 0.99)),
        ms(all.last().copied().unwrap_or_default())
    );

    // Clean up what this run created.
    let deleted = cms
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels(&selector),
        )
        .await?;
    let _ = deleted;
    Ok(())
}
