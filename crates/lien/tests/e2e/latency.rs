//! Protection in force: how long from a Usage's create returning to a DELETE being refused.

use std::time::{Duration, Instant};

use kube::api::DeleteParams;
use serde_json::json;

use crate::harness::*;

const USAGES: usize = 50;

/// Over 50 Usages, one at a time: the time from the Usage's create returning to the first
/// refused (dry-run) DELETE of its object. Prints p50/p99 (docs/benchmarks.md "Protection in
/// force"; targets p50 ≤ 100 ms, p99 ≤ 1 s) — a measurement, asserted only to complete.
#[tokio::test]
async fn protection_in_force_latency_from_usage_create_to_refused_delete() {
    let mut env = Env::start("in-force").await;
    for i in 0..USAGES {
        env.configmap(&format!("cm-{i}"), json!({})).await;
    }
    let cms = env.configmaps();
    let mut took = Vec::with_capacity(USAGES);
    for i in 0..USAGES {
        let name = format!("cm-{i}");
        env.usage(
            &format!("keep-{i}"),
            json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": name}},
                   "reason": "measured"}),
        )
        .await;
        let start = Instant::now();
        wait_for(&format!("{name} refused"), DEADLINE, || async {
            match cms.delete(&name, &DeleteParams::default().dry_run()).await {
                Err(kube::Error::Api(s)) if s.code == 409 => Some(()),
                Err(e) => panic!("unexpected error: {e}"),
                Ok(_) => None,
            }
        })
        .await;
        took.push(start.elapsed());
    }
    took.sort();
    let pct = |p: usize| took[(took.len() * p).div_ceil(100).saturating_sub(1)];
    let (p50, p99, max) = (pct(50), pct(99), took[took.len() - 1]);
    println!(
        "protection in force over {USAGES} Usages: p50 {p50:?}, p99 {p99:?}, max {max:?} \
         (targets: p50 ≤ 100 ms, p99 ≤ 1 s)"
    );
    assert!(max < DEADLINE + Duration::from_secs(1));
    env.finish().await;
}
