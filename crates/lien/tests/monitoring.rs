//! The Grafana dashboard and the PrometheusRule alerts in `deploy/monitoring/` use only metrics
//! a running `lien run` serves (issue 12): a renamed metric fails here, not silently in a
//! platform team's dashboards.

#[path = "ha/cluster.rs"]
mod cluster;
#[path = "support/helm.rs"]
mod helm;

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
    for file in [
        "grafana-dashboard.json",
        "prometheus-rules.yaml",
        "alerts.yaml",
    ] {
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

/// The value of the sample `series` (name and labels exactly as served), if served.
fn sample(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Day one (issue 21): before anything happened, every counter a dashboard or an alert reads is
/// served at 0 — with each known label value of a labelled family — so panels show 0, not "No
/// data", and `rate()` sees the first error as an increase. The log names who leads, and has no
/// colour codes (stderr is a file here, not a terminal).
#[tokio::test]
async fn every_counter_is_served_at_zero_from_start_and_the_log_names_the_leader() {
    let mut cluster = Cluster::start(1).await;
    cluster.spawn(0, "day-one", &[]);
    let end = Instant::now() + Duration::from_secs(60);
    let body = loop {
        match cluster.get(0, "/metrics").await {
            Ok(body) => break body,
            Err(e) if Instant::now() > end => panic!(
                "/metrics not served within 60 s: {e}\n{}",
                cluster.log("day-one")
            ),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    let mut zero: Vec<String> = [
        "lien_webhook_records_dropped_total",
        "lien_webhook_requests_throttled_total",
        "lien_controller_replays_total",
        "lien_controller_replays_expired_total",
        "lien_controller_forged_records_total",
        "lien_controller_index_errors_total",
    ]
    .map(str::to_owned)
    .to_vec();
    for result in ["in_use", "not_in_use", "failed"] {
        zero.push(format!(
            "lien_webhook_live_checks_total{{result=\"{result}\"}}"
        ));
    }
    for result in ["allowed", "denied", "failed"] {
        zero.push(format!(
            "lien_webhook_access_checks_total{{result=\"{result}\"}}"
        ));
    }
    for action in ["armed", "used"] {
        zero.push(format!(
            "lien_webhook_break_glass_total{{action=\"{action}\"}}"
        ));
    }
    for what in ["record", "events"] {
        zero.push(format!(
            "lien_controller_refusals_coalesced_total{{what=\"{what}\"}}"
        ));
    }
    for action in ["refused", "unrecorded"] {
        zero.push(format!(
            "lien_webhook_unauthenticated_reviews_total{{action=\"{action}\"}}"
        ));
    }
    for result in ["sealed", "allowed", "forbidden", "invalid", "error"] {
        zero.push(format!(
            "lien_webhook_mutations_total{{result=\"{result}\"}}"
        ));
    }
    for operation in ["CREATE", "UPDATE", "DELETE", "CONNECT", "unknown"] {
        for outcome in ["invalid", "error"] {
            zero.push(format!(
                "lien_webhook_requests_total{{operation=\"{operation}\",outcome=\"{outcome}\"}}"
            ));
        }
    }
    zero.push("lien_webhook_delete_decisions_total{result=\"allowed\",source=\"none\"}".to_owned());
    for source in ["Usage", "ClusterUsage", "DependencyRule"] {
        zero.push(format!(
            "lien_webhook_delete_decisions_total{{result=\"denied\",source=\"{source}\"}}"
        ));
    }
    for watch in ["usage", "object"] {
        zero.push(format!(
            "lien_controller_watch_restarts_total{{watch=\"{watch}\"}}"
        ));
    }
    for category in [
        "label",
        "usage_meta",
        "usage_delete",
        "status",
        "replay",
        "record",
        "timeout",
        "event",
    ] {
        zero.push(format!(
            "lien_controller_errors_total{{category=\"{category}\"}}"
        ));
    }
    for kind in [
        "label",
        "usage_meta",
        "usage_delete",
        "status",
        "rule_status",
        "replay",
        "record_forget",
        "record_forged",
        "cascade_parent",
        "cascade_rule",
        "cascade_status",
        "cascade_event",
        "cascade_report",
    ] {
        zero.push(format!(
            "lien_controller_writes_total{{kind=\"{kind}\",result=\"error\"}}"
        ));
    }
    let wrong: Vec<String> = zero
        .iter()
        .filter(|s| sample(&body, s) != Some(0.0))
        .map(|s| format!("{s} = {:?}", sample(&body, s)))
        .collect();
    assert!(
        wrong.is_empty(),
        "not served at 0 from start: {wrong:#?}\n{body}"
    );
    // Served, whatever their value by now (the sandbox may already have sent reviews).
    for operation in ["CREATE", "UPDATE", "DELETE", "CONNECT", "unknown"] {
        for outcome in ["allowed", "denied"] {
            let series = format!(
                "lien_webhook_requests_total{{operation=\"{operation}\",outcome=\"{outcome}\"}}"
            );
            assert!(sample(&body, &series).is_some(), "{series} not served");
        }
    }
    for source in ["Usage", "ClusterUsage", "DependencyRule"] {
        let series = format!("lien_controller_relations_by_source{{source=\"{source}\"}}");
        assert!(sample(&body, &series).is_some(), "{series} not served");
    }

    // Process metrics, as every Prometheus client names them.
    for series in [
        "process_cpu_seconds_total",
        "process_start_time_seconds",
        "process_resident_memory_bytes",
        "process_virtual_memory_bytes",
        "process_threads",
        "process_open_fds",
        "process_max_fds",
    ] {
        assert!(
            sample(&body, series).is_some_and(|v| v >= 0.0),
            "{series} not served"
        );
    }
    assert!(
        sample(&body, "process_resident_memory_bytes").is_some_and(|v| v > 1e6),
        "a resident set under 1 MB"
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64();
    let started = sample(&body, "process_start_time_seconds").expect("start time");
    assert!(
        (now - 120.0..now + 5.0).contains(&started),
        "lien started at {started}, now is {now}"
    );

    let end = Instant::now() + Duration::from_secs(60);
    while !cluster.log("day-one").contains("leadership gained") {
        assert!(
            Instant::now() < end,
            "no leadership line within 60 s:\n{}",
            cluster.log("day-one")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cluster.sigterm(0);
    let end = Instant::now() + Duration::from_secs(60);
    while cluster.exited(0).is_none() {
        assert!(Instant::now() < end, "lien did not stop within 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = cluster.log("day-one");
    let gained = log
        .lines()
        .find(|l| l.contains("leadership gained"))
        .expect("a leadership line");
    assert!(
        gained.contains("INFO")
            && gained.contains("day-one")
            && gained.contains("lien-system/lien-controller"),
        "the line names the level, the identity and the Lease: {gained}"
    );
    let lost = log
        .lines()
        .find(|l| l.contains("leadership lost"))
        .unwrap_or_else(|| panic!("no line says leadership was lost on shutdown:\n{log}"));
    assert!(lost.contains("day-one"), "{lost}");
    assert!(
        !log.contains('\x1b'),
        "colour codes in a log that is not a terminal:\n{log}"
    );
}

/// The dashboard serves a platform team with many clusters and installs: `cluster` and
/// `namespace` variables (multi-valued, "All" by default), and every metric of every panel
/// filtered by both — a panel that forgets one sums every cluster's Lien into one line.
#[test]
fn the_dashboard_filters_every_query_by_cluster_and_namespace() {
    let text = std::fs::read_to_string(monitoring_dir().join("grafana-dashboard.json"))
        .expect("the dashboard");
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("variables");
    for name in ["cluster", "namespace"] {
        let v = variables
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no {name} variable"));
        assert_eq!(v["includeAll"], true, "{v}");
        assert_eq!(v["allValue"], ".*", "{v}");
        let query = v["definition"].as_str().expect("definition");
        assert!(query.starts_with("label_values(lien_"), "{query}");
    }
    let mut exprs = 0;
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("expr");
            exprs += 1;
            for metric in referenced(expr) {
                let at = expr.find(&metric).expect("the metric");
                let selector = &expr[at..];
                let selector = &selector[..selector.find('}').map_or(0, |i| i + 1)];
                assert!(
                    selector.contains("cluster=~\"$cluster\"")
                        && selector.contains("namespace=~\"$namespace\""),
                    "{metric} in panel {:?} is not filtered by $cluster and $namespace: {expr}",
                    panel["title"]
                );
            }
        }
    }
    assert!(exprs >= 10, "only {exprs} queries");
}

/// The machine's `promtool`, or a failure that says how to get one.
fn tool(name: &str) -> std::path::PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "{name} is not on PATH: the monitoring tests check the alerts with the real \
                 Prometheus tools. Install them (Debian: `apt-get install -y prometheus`; CI's \
                 .ci/run does) and run them again."
            )
        })
}

fn monitoring_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/monitoring")
}

/// The alert rules are valid Prometheus rules, every alert fires and stays quiet where its unit
/// tests (deploy/monitoring/alerts-test.yaml) say, and the PrometheusRule carries the very same
/// groups as the plain rule file promtool checks.
#[test]
fn alert_rules_pass_promtool_check_and_their_unit_tests() {
    let promtool = tool("promtool");
    let dir = monitoring_dir();
    for args in [
        ["check", "rules", "alerts.yaml"],
        ["test", "rules", "alerts-test.yaml"],
    ] {
        let out = std::process::Command::new(&promtool)
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("promtool runs");
        assert!(
            out.status.success(),
            "promtool {}:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let yaml = |file: &str| -> serde_yaml_ng::Value {
        serde_yaml_ng::from_str(&std::fs::read_to_string(dir.join(file)).expect("the file"))
            .expect("YAML")
    };
    let plain = yaml("alerts.yaml");
    let operator = yaml("prometheus-rules.yaml");
    assert_eq!(
        operator["spec"]["groups"], plain["groups"],
        "prometheus-rules.yaml's spec.groups differ from alerts.yaml's groups"
    );
    // Every alert has unit tests, and a runbook: its section of docs/operations.md, under the
    // workspace's repository URL (one setting).
    let tests = std::fs::read_to_string(dir.join("alerts-test.yaml")).expect("the tests");
    let operations =
        std::fs::read_to_string(workspace().join("docs/operations.md")).expect("operations.md");
    let cargo = std::fs::read_to_string(workspace().join("Cargo.toml")).expect("Cargo.toml");
    let repository = cargo
        .lines()
        .find_map(|l| l.strip_prefix("repository = "))
        .map(|v| v.trim().trim_matches('"'))
        .expect("the workspace's repository");
    for rule in plain["groups"][0]["rules"].as_sequence().expect("rules") {
        let alert = rule["alert"].as_str().expect("an alert");
        assert!(
            tests.contains(&format!("alertname: {alert}\n")),
            "alerts-test.yaml has no case for {alert}"
        );
        assert_eq!(
            rule["annotations"]["runbook_url"].as_str(),
            Some(
                format!(
                    "{repository}/blob/main/docs/operations.md#{}",
                    alert.to_lowercase()
                )
                .as_str()
            ),
            "{alert}'s runbook_url"
        );
        assert!(
            operations.contains(&format!("\n### {alert}\n")),
            "docs/operations.md has no section for {alert}"
        );
    }
}

fn workspace() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The objects of a YAML stream.
fn yaml_objects(text: &str) -> Vec<serde_json::Value> {
    use serde::Deserialize;
    serde_yaml_ng::Deserializer::from_str(text)
        .filter_map(|doc| serde_json::Value::deserialize(doc).ok())
        .filter(|v| !v.is_null())
        .collect()
}

/// deploy/monitoring/servicemonitor.yaml is the ServiceMonitor `lien manifests` knows, and the
/// kustomize component deploy/monitoring adds it and the PrometheusRule to the install.
#[test]
fn the_service_monitor_file_and_the_kustomize_component_add_it() {
    let want = lien::manifests::service_monitor("lien-system");
    let file = std::fs::read_to_string(monitoring_dir().join("servicemonitor.yaml"))
        .expect("servicemonitor.yaml");
    assert_eq!(
        yaml_objects(&file),
        vec![want.clone()],
        "deploy/monitoring/servicemonitor.yaml differs from lien::manifests::service_monitor"
    );
    // kustomize only follows relative paths: an overlay under target/tmp using deploy/ and the
    // component, as a user's kustomization would.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("lien-monitoring-overlay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let up = pathdiff(&dir, &workspace());
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
             resources:\n  - {up}/deploy\ncomponents:\n  - {up}/deploy/monitoring\n"
        ),
    )
    .expect("kustomization");
    let out = std::process::Command::new(tool("kubectl"))
        .arg("kustomize")
        .arg(&dir)
        .output()
        .expect("kubectl runs");
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        out.status.success(),
        "kubectl kustomize: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let objects = yaml_objects(&String::from_utf8(out.stdout).expect("UTF-8"));
    let installed = lien::manifests::objects().len();
    assert_eq!(
        objects.len(),
        installed + 2,
        "the install, a ServiceMonitor and a PrometheusRule"
    );
    assert!(
        objects.contains(&want),
        "no ServiceMonitor as lien knows it"
    );
    assert!(
        objects.iter().any(|o| o["kind"] == "PrometheusRule"),
        "no PrometheusRule"
    );
}

/// `..` steps from `from` up to a common ancestor, then down to `to`: both are absolute paths
/// in the workspace.
fn pathdiff(from: &Path, to: &Path) -> String {
    let from = from.canonicalize().expect("from");
    let to = to.canonicalize().expect("to");
    let common = from
        .ancestors()
        .find(|a| to.starts_with(a))
        .expect("a common ancestor");
    let ups = from
        .strip_prefix(common)
        .expect("prefix")
        .components()
        .count();
    let mut parts = vec![".."; ups].join("/");
    let down = to.strip_prefix(common).expect("prefix");
    if !down.as_os_str().is_empty() {
        parts.push('/');
        parts.push_str(&down.to_string_lossy());
    }
    parts
}

/// The chart installs the same ServiceMonitor with `serviceMonitor.enabled=true`, in the chosen
/// namespace; by default it installs none (tests/manifests.rs: the default render is `lien
/// manifests`).
#[test]
fn the_helm_chart_installs_the_service_monitor_when_enabled() {
    let render = |sets: &[&str]| {
        let out = helm::template(sets);
        assert!(
            out.status.success(),
            "helm render {sets:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        yaml_objects(&String::from_utf8(out.stdout).expect("UTF-8"))
    };
    let monitors = |objects: &[serde_json::Value]| -> Vec<serde_json::Value> {
        objects
            .iter()
            .filter(|o| o["kind"] == "ServiceMonitor")
            .cloned()
            .collect()
    };
    assert!(
        monitors(&render(&[])).is_empty(),
        "a ServiceMonitor by default"
    );
    // With Helm's standard labels added, as on every object the chart templates.
    let mut want = lien::manifests::service_monitor("monitored");
    let labels = want["metadata"]["labels"].as_object_mut().expect("labels");
    labels.insert(
        "helm.sh/chart".into(),
        concat!("lien-", env!("CARGO_PKG_VERSION")).into(),
    );
    labels.insert("app.kubernetes.io/managed-by".into(), "Helm".into());
    labels.insert("app.kubernetes.io/instance".into(), "lien".into());
    assert_eq!(
        monitors(&render(&[
            "serviceMonitor.enabled=true",
            "namespace=monitored"
        ])),
        vec![want]
    );
}

/// A Prometheus server this test started; killed and its data removed when dropped.
struct Prometheus {
    child: std::process::Child,
    dir: std::path::PathBuf,
    addr: std::net::SocketAddr,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Prometheus {
    /// `GET path` from its HTTP API, as JSON (`None` while it does not answer).
    async fn get(&self, path: &str) -> Option<serde_json::Value> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut tcp = tokio::net::TcpStream::connect(self.addr).await.ok()?;
        let request = format!("GET {path} HTTP/1.0\r\nhost: {}\r\n\r\n", self.addr);
        tcp.write_all(request.as_bytes()).await.ok()?;
        let mut out = Vec::new();
        tcp.read_to_end(&mut out).await.ok()?;
        let out = String::from_utf8(out).ok()?;
        let (head, body) = out.split_once("\r\n\r\n")?;
        if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
            return None;
        }
        serde_json::from_str(body).ok()
    }

    /// The state (`pending`, `firing`) of `alert`, if Prometheus has it active.
    async fn alert_state(&self, alert: &str) -> Option<String> {
        let alerts = self.get("/api/v1/alerts").await?;
        alerts["data"]["alerts"]
            .as_array()?
            .iter()
            .find(|a| a["labels"]["alertname"] == alert)
            .and_then(|a| a["state"].as_str().map(str::to_owned))
    }
}

/// Polls `check` every 100 ms until it returns `Some`, or fails naming `what` after `secs`.
async fn until<T, F: std::future::Future<Output = Option<T>>>(
    secs: u64,
    what: &str,
    mut check: impl FnMut() -> F,
    context: impl Fn() -> String,
) -> T {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < end,
            "{what} within {secs} s\n{}",
            context()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Day one with a real Prometheus (Debian's `prometheus` package): it scrapes a running `lien
/// run` over TLS (skipping verification, as deploy/monitoring/servicemonitor.yaml does), sees
/// Lien's metrics in its query API, evaluates deploy/monitoring/alerts.yaml, and fires
/// `LienWebhookDown` once Lien stops.
#[tokio::test]
async fn a_real_prometheus_scrapes_lien_and_fires_lien_webhook_down_when_it_stops() {
    let binary = tool("prometheus");
    let mut cluster = Cluster::start(1).await;
    cluster.spawn(0, "scraped", &[]);
    // One such test per test process: the pid names its directory.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("lien-prometheus-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("data")).expect("temp dir");
    // The rules as shipped, but for LienWebhookDown's `for: 2m`: the test waits for `firing`,
    // not two minutes (its `for` is checked by alerts-test.yaml).
    let rules = std::fs::read_to_string(monitoring_dir().join("alerts.yaml")).expect("rules");
    let (head, tail) = rules
        .split_once("- alert: LienWebhookDown")
        .expect("LienWebhookDown in alerts.yaml");
    let tail = tail.replacen("for: 2m", "for: 1s", 1);
    std::fs::write(
        dir.join("alerts.yaml"),
        format!("{head}- alert: LienWebhookDown{tail}"),
    )
    .expect("rules");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    std::fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - alerts.yaml\n\
             scrape_configs:\n  - job_name: lien-webhook\n    scheme: https\n\
             \x20   tls_config:\n      insecure_skip_verify: true\n\
             \x20   static_configs:\n      - targets: ['{}']\n",
            cluster.addrs[0]
        ),
    )
    .expect("config");
    let log = std::fs::File::create(dir.join("prometheus.log")).expect("log");
    let child = std::process::Command::new(binary)
        .arg(format!(
            "--config.file={}",
            dir.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address={addr}"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log.try_clone().expect("log"))
        .spawn()
        .expect("prometheus starts");
    let prometheus = Prometheus {
        child,
        dir: dir.clone(),
        addr,
    };
    let context = |cluster: &Cluster| {
        format!(
            "prometheus log:\n{}\nlien log:\n{}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default(),
            cluster.log("scraped")
        )
    };

    // Lien's metrics reach Prometheus through the scrape.
    let value = until(
        90,
        "lien_webhook_client_authentication in Prometheus",
        || async {
            let v = prometheus
                .get("/api/v1/query?query=lien_webhook_client_authentication%3D%3D1")
                .await?;
            let result = v["data"]["result"].as_array()?.first()?.clone();
            Some(result)
        },
        || context(&cluster),
    )
    .await;
    assert_eq!(value["metric"]["job"], "lien-webhook", "{value}");
    assert_eq!(value["metric"]["mode"], "client_certificate", "{value}");
    let up = prometheus.get("/api/v1/query?query=up").await.expect("up");
    assert_eq!(up["data"]["result"][0]["value"][1], "1", "{up}");
    // While Lien answers, LienWebhookDown is not firing (before the first scrape it may have
    // been: nothing was scraped yet).
    until(
        60,
        "LienWebhookDown resolved while Lien is up",
        || async {
            prometheus.get("/api/v1/alerts").await?;
            prometheus
                .alert_state("LienWebhookDown")
                .await
                .is_none()
                .then_some(())
        },
        || context(&cluster),
    )
    .await;

    // Lien stops: the scrape fails, its series go stale, the alert fires.
    cluster.sigterm(0);
    let end = Instant::now() + Duration::from_secs(60);
    while cluster.exited(0).is_none() {
        assert!(Instant::now() < end, "lien did not stop within 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    until(
        90,
        "LienWebhookDown firing after Lien stopped",
        || async {
            (prometheus.alert_state("LienWebhookDown").await.as_deref() == Some("firing"))
                .then_some(())
        },
        || context(&cluster),
    )
    .await;
    let up = prometheus.get("/api/v1/query?query=up").await.expect("up");
    assert_eq!(up["data"]["result"][0]["value"][1], "0", "{up}");
    drop(prometheus);
    assert!(!dir.exists(), "Prometheus's data dir left behind");
}
