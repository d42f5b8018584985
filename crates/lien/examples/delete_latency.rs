//! The end-to-end DELETE latency through a real kube-apiserver, with and without Lien's
//! webhooks, at a fixed rate; and the CPU each process spent (issue 29; docs/benchmarks.md
//! "DELETE through kube-apiserver, with and without Lien").
//!
//! ```text
//! cargo build --release --workspace --bin lien --example delete_latency
//! LIEN_BIN=target/release/lien target/release/examples/delete_latency [--rate 200] [--seconds 30] [--in-use 100]
//! ```
//!
//! It starts its own control plane (`scripts/control-plane.sh`, the API server presenting the
//! admission client certificate) and Lien's install as the tests do (`tests/support/real.rs`:
//! `lien run` as the ServiceAccount `lien-system/lien`, `--webhook-url https://127.0.0.1:PORT`,
//! `--client-ca-file`), and sends DELETEs open-loop: request `i` is due at `start + i/rate`
//! and its latency is counted from then, so a slow answer delays none of the next requests'
//! clocks (no coordinated omission). Each measured series is preceded by one unmeasured second
//! at the same rate (warm connections). Series, in order:
//!
//! 1. no Lien (no webhook configuration): DELETE of free ConfigMaps (each deleted once), and
//!    dry-run DELETE of `--in-use` ConfigMaps carrying `lien.dev/in-use=true`, round robin
//!    (allowed: nobody refuses them);
//! 2. `lien run` started and a Usage protecting those `--in-use` ConfigMaps: DELETE of free
//!    ConfigMaps (the hooks' objectSelector leaves them out: Lien is not called), dry-run
//!    DELETE of the in-use ones (Lien is called and refuses: 409), and real DELETE of them
//!    (refused; Lien records each refusal, as with a client certificate it does).
//!
//! For each series: answers by status, p50 / p90 / p99 / max latency, and the CPU time of
//! kube-apiserver, etcd and `lien run` (`/proc/PID/stat`, utime + stime) per request. The
//! difference between a dry-run DELETE of an in-use object with and without Lien is what Lien's
//! webhook adds to a DELETE it is called for: the same read and admission, no write either way.

#[path = "../tests/support/real.rs"]
mod real;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

type Error = Box<dyn std::error::Error + Send + Sync>;

const NS: &str = "bench";

struct Args {
    rate: u32,
    seconds: u32,
    in_use: usize,
}

fn args() -> Result<Args, Error> {
    let mut a = Args {
        rate: 200,
        seconds: 30,
        in_use: 100,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--rate" => a.rate = value()?.parse()?,
            "--seconds" => a.seconds = value()?.parse()?,
            "--in-use" => a.in_use = value()?.parse()?,
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    if a.rate == 0 || a.seconds == 0 || a.in_use == 0 {
        return Err("--rate, --seconds and --in-use must be positive".into());
    }
    Ok(a)
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) in parentheses: state is the 3rd
    // field of the whole line, utime the 14th and stime the 15th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    field(14).unwrap_or(0) + field(15).unwrap_or(0)
}

fn clock_ticks_per_second() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// One request's outcome: the HTTP status (0: no answer) and its latency from when it was due.
type Sample = (u16, Duration);

/// Sends `n` requests at `rate` per second, open-loop; `request(i)` makes request `i`.
async fn open_loop<F, Fut>(rate: u32, n: usize, request: F) -> Vec<Sample>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = u16> + Send + 'static,
{
    let start = tokio::time::Instant::now();
    let period = Duration::from_secs(1) / rate;
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let due = start + period * u32::try_from(i).unwrap_or(u32::MAX);
        tokio::time::sleep_until(due).await;
        let fut = request(i);
        tasks.push(tokio::spawn(async move {
            let code = fut.await;
            (code, due.elapsed())
        }));
    }
    let mut out = Vec::with_capacity(n);
    for t in tasks {
        out.push(t.await.unwrap_or((0, Duration::ZERO)));
    }
    out
}

fn code_of(r: Result<impl Sized, kube::Error>) -> u16 {
    match r {
        Ok(_) => 200,
        Err(kube::Error::Api(s)) => s.code,
        Err(_) => 0,
    }
}

struct Series {
    name: String,
    codes: BTreeMap<u16, usize>,
    p50: Duration,
    p90: Duration,
    p99: Duration,
    max: Duration,
    cpu_ms_per_request: BTreeMap<&'static str, f64>,
    load: String,
}

fn pct(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p).div_ceil(100).saturating_sub(1)]
}

struct Bench {
    rate: u32,
    seconds: u32,
    pids: Vec<(&'static str, u32)>,
    ticks: u64,
}

impl Bench {
    /// One warm-up second, then the measured series; `request(i)` for i from 0.
    async fn series<F, Fut>(&self, name: &str, request: F) -> Series
    where
        F: Fn(usize) -> Fut,
        Fut: std::future::Future<Output = u16> + Send + 'static,
    {
        let warm = self.rate as usize;
        let n = (self.rate * self.seconds) as usize;
        let _ = open_loop(self.rate, warm, &request).await;
        let before: Vec<u64> = self.pids.iter().map(|(_, p)| cpu_ticks(*p)).collect();
        let samples = open_loop(self.rate, n, |i| request(warm + i)).await;
        let after: Vec<u64> = self.pids.iter().map(|(_, p)| cpu_ticks(*p)).collect();
        let mut codes = BTreeMap::new();
        for (c, _) in &samples {
            *codes.entry(*c).or_insert(0) += 1;
        }
        let mut lat: Vec<Duration> = samples.iter().map(|(_, d)| *d).collect();
        lat.sort();
        let cpu_ms_per_request = self
            .pids
            .iter()
            .zip(before.iter().zip(&after))
            .map(|((name, _), (b, a))| {
                let ms = (a - b) as f64 * 1000.0 / self.ticks as f64;
                (*name, ms / n as f64)
            })
            .collect();
        let s = Series {
            name: name.to_owned(),
            codes,
            p50: pct(&lat, 50),
            p90: pct(&lat, 90),
            p99: pct(&lat, 99),
            max: lat[lat.len() - 1],
            cpu_ms_per_request,
            load: load_average(),
        };
        print_series(&s);
        s
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

fn print_series(s: &Series) {
    let codes: Vec<String> = s.codes.iter().map(|(c, n)| format!("{c}×{n}")).collect();
    let cpu: Vec<String> = s
        .cpu_ms_per_request
        .iter()
        .map(|(p, v)| format!("{p} {v:.3}"))
        .collect();
    println!(
        "| {} | {} | {} | {} | {} | {} | {} | {} |",
        s.name,
        codes.join(" "),
        ms(s.p50),
        ms(s.p90),
        ms(s.p99),
        ms(s.max),
        cpu.join(", "),
        s.load
    );
}

async fn create_configmaps(
    api: &Api<ConfigMap>,
    names: Vec<String>,
    labels: serde_json::Value,
) -> Result<(), Error> {
    stream::iter(names)
        .map(|name| {
            let labels = labels.clone();
            async move {
                let cm: ConfigMap = serde_json::from_value(
                    json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}),
                )?;
                api.create(&PostParams::default(), &cm).await?;
                Ok::<_, Error>(())
            }
        })
        .buffer_unordered(16)
        .try_for_each(|()| async { Ok(()) })
        .await
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    let a = args()?;
    let n = (a.rate * (a.seconds + 1)) as usize;
    eprintln!(
        "starting a control plane and Lien's install (load average {})",
        load_average()
    );
    let cluster = real::RealCluster::start(true).await;
    let client = cluster.client.clone();
    real::apply_all(
        &client,
        [json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let used: Vec<String> = (0..a.in_use).map(|i| format!("used-{i}")).collect();
    eprintln!("creating {} ConfigMaps", 2 * n + a.in_use);
    create_configmaps(
        &cms,
        used.clone(),
        serde_json::Value::Object(
            [
                ("role".to_owned(), json!("used")),
                (lien_api::IN_USE_LABEL.to_owned(), json!("true")),
            ]
            .into_iter()
            .collect(),
        ),
    )
    .await?;
    for phase in ["a", "b"] {
        create_configmaps(
            &cms,
            (0..n).map(|i| format!("free-{phase}-{i}")).collect(),
            json!({}),
        )
        .await?;
    }
    let pids = cluster.pids();
    let mut bench = Bench {
        rate: a.rate,
        seconds: a.seconds,
        pids: vec![
            ("kube-apiserver", pids["kube-apiserver"]),
            ("etcd", pids["etcd"]),
        ],
        ticks: clock_ticks_per_second(),
    };
    println!(
        "{} DELETEs/s for {} s per series; latency in ms from when each request was due; CPU in ms per request",
        a.rate, a.seconds
    );
    println!("| series | answers | p50 | p90 | p99 | max | CPU ms/request | load |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");

    let free = |phase: &'static str| {
        let cms = cms.clone();
        move |i: usize| {
            let cms = cms.clone();
            async move {
                code_of(
                    cms.delete(&format!("free-{phase}-{i}"), &DeleteParams::default())
                        .await,
                )
            }
        }
    };
    let in_use = |dry_run: bool| {
        let cms = cms.clone();
        let used = used.clone();
        move |i: usize| {
            let cms = cms.clone();
            let name = used[i % used.len()].clone();
            async move {
                let params = if dry_run {
                    DeleteParams::default().dry_run()
                } else {
                    DeleteParams::default()
                };
                code_of(cms.delete(&name, &params).await)
            }
        }
    };

    let a_free = bench.series("no Lien: DELETE, free", free("a")).await;
    let a_dry = bench
        .series("no Lien: dry-run DELETE, labelled in use", in_use(true))
        .await;

    // Lien, and a Usage over the labelled ConfigMaps.
    let args = vec![
        format!(
            "--client-ca-file={}",
            cluster.admission_client_ca().display()
        ),
        "--no-leader-election".to_owned(),
    ];
    let lien = real::LienProcess::start(&cluster, "lien", &args).await;
    bench
        .pids
        .push(("lien", lien.pid().ok_or("lien run is running")?));
    let usages: Api<lien_api::Usage> = Api::namespaced(client.clone(), NS);
    usages
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
                "metadata": {"name": "keep"},
                "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap",
                                "resourceSelector": {"matchLabels": {"role": "used"}}},
                         "reason": "measured"}}))?,
        )
        .await?;
    let end = Instant::now() + Duration::from_secs(60);
    for name in &used {
        while code_of(cms.delete(name, &DeleteParams::default().dry_run()).await) != 409 {
            if Instant::now() > end {
                return Err(format!("{name} not refused within 60 s").into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let b_free = bench.series("Lien: DELETE, free", free("b")).await;
    let b_dry = bench
        .series("Lien: dry-run DELETE, in use (refused)", in_use(true))
        .await;
    let b_refused = bench
        .series("Lien: DELETE, in use (refused, recorded)", in_use(false))
        .await;

    println!();
    for (what, with, without) in [
        ("free DELETE (Lien not called)", &b_free, &a_free),
        ("dry-run DELETE of an in-use object", &b_dry, &a_dry),
        (
            "DELETE of an in-use object (refused) vs dry-run without Lien",
            &b_refused,
            &a_dry,
        ),
    ] {
        let api = |s: &Series| s.cpu_ms_per_request["kube-apiserver"];
        println!(
            "added by Lien, {what}: p50 {:+.2} ms, p99 {:+.2} ms; kube-apiserver CPU {:+.3} ms/request",
            (with.p50.as_secs_f64() - without.p50.as_secs_f64()) * 1000.0,
            (with.p99.as_secs_f64() - without.p99.as_secs_f64()) * 1000.0,
            api(with) - api(without),
        );
    }
    eprintln!("lien run forbidden lines: {:?}", lien.forbidden());
    lien.stop().await;
    cluster.stop().await;
    Ok(())
}
