//! The Grafana dashboard and the PrometheusRule alerts in `deploy/monitoring/` use only metrics
//! a running `lien run` serves (issue 12): a renamed metric fails here, not silently in a
//! platform team's dashboards.

#[path = "ha/cluster.rs"]
mod cluster;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use cluster::Cluster;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

/// The metric families a `/metrics` body declares (`# TYPE <name> <type>`).
fn families(body: &str) -> BTreeSet<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// Every `lien_…` name a file mentions, as its family name (a sample's `_total`, `_bucket`,
/// `_sum` or `_count` suffix removed).
fn referenced(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("lien_") {
        let start = i + at;
        let boundary =
            start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        let end = text[start..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(text.len(), |n| start + n);
        if boundary {
            let mut name = &text[start..end];
            for suffix in ["_total", "_bucket", "_sum", "_count"] {
                if let Some(stripped) = name.strip_suffix(suffix) {
                    name = stripped;
                    break;
                }
            }
            out.insert(name.to_owned());
        }
        i = end;
    }
    out
}

/// Whether a family that has no sample yet (prometheus-client leaves a labelled family out of
/// the exposition until it has one, e.g. watch restarts) is registered under that name.
fn registered(name: &str) -> bool {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let (file, rest) = if let Some(rest) = name.strip_prefix("lien_webhook_") {
        ("crates/webhook/src/server.rs", rest)
    } else if let Some(rest) = name.strip_prefix("lien_controller_") {
        ("crates/controller/src/metrics.rs", rest)
    } else {
        return false;
    };
    std::fs::read_to_string(root.join(file))
        .expect("the metrics' source")
        .contains(&format!("\"{rest}\""))
}

#[tokio::test]
async fn every_metric_the_dashboard_and_alerts_use_is_served() {
    let mut cluster = Cluster::start(1).await;
    cluster.spawn(0, "a", &[]);
    // Traffic, so that the labelled families have samples: a protected ConfigMap (a label
    // write), a refused DELETE (a review, a decision).
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "kept"}, "data": {"a": "b"}}))
            .expect("a ConfigMap"),
    )
    .await
    .expect("create");
    let usages: Api<DynamicObject> = Api::all_with(
        cluster.client.clone(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "lien.dev",
            "v1alpha1",
            "ClusterUsage",
        )),
    );
    usages
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "lien.dev/v1alpha1", "kind": "ClusterUsage",
                "metadata": {"name": "keep"},
                "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap",
                                "resourceRef": {"name": "kept", "namespace": "default"}},
                         "reason": "monitoring test"}}))
            .expect("a ClusterUsage"),
        )
        .await
        .expect("create");
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        // Dry run: an early DELETE, before the label is written, must not delete it.
        match cms.delete("kept", &DeleteParams::default().dry_run()).await {
            Err(kube::Error::Api(e)) if e.code == 409 => break,
            _ if Instant::now() > end => panic!("the ConfigMap was not protected within 60 s"),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let body = cluster.get(0, "/metrics").await.expect("/metrics");
    let served = families(&body);
    let monitoring = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/monitoring");
    let mut checked = 0;
    for file in ["grafana-dashboard.json", "prometheus-rules.yaml"] {
        let text = std::fs::read_to_string(monitoring.join(file)).expect("the file");
        let used = referenced(&text);
        assert!(!used.is_empty(), "{file} uses no metric");
        let missing: Vec<&String> = used
            .iter()
            .filter(|m| !served.contains(*m) && !registered(m))
            .collect();
        assert!(
            missing.is_empty(),
            "{file} uses metrics lien does not serve: {missing:?}\nserved: {served:?}"
        );
        checked += used.len();
    }
    assert!(checked >= 10, "only {checked} metric uses found");
}
