//! The committed `AdmissionReview` fixtures are shaped exactly as the API server sends them.
//!
//! This test drives the sandbox (which builds reviews as kube-apiserver's
//! `CreateV1AdmissionReview` does) through every request kind the router handles, captures what
//! a recording webhook receives, and checks each committed fixture has the same structure: the
//! same set of JSON paths. Values (UIDs, timestamps) differ from run to run and are not
//! compared. `LIEN_WEBHOOK_WRITE_FIXTURES=1` rewrites the fixtures from the capture.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use lien_sandbox::testing::{TestWebhook, Verdict};
use serde_json::{Value, json};

fn paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let p = format!("{prefix}.{k}");
                out.insert(p.clone());
                paths(v, &p, out);
            }
        }
        Value::Array(a) => {
            for v in a {
                paths(v, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

fn shape(v: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    paths(v, "", &mut out);
    out
}

fn deployment(name: &str, env_vars: usize) -> Deployment {
    let env: Vec<Value> = (0..env_vars)
        .map(|i| json!({"name": format!("SETTING_{i:04}"), "value": format!("value-{i}-abcdefgh")}))
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "labels": {"app": name, "lien.dev/in-use": "true", "team": "platform"},
            "annotations": {"deployment.kubernetes.io/revision": "1"},
        },
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{
                    "name": "app",
                    "image": "registry.example.com/app:1.2.3",
                    "ports": [{"containerPort": 8080, "name": "http"}],
                    "env": env,
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                }]},
            },
        },
    }))
    .expect("deployment")
}

#[tokio::test]
async fn fixtures_have_the_shape_the_api_server_sends() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let hook = TestWebhook::start(|_| Verdict::Allow)
        .await
        .expect("test webhook");
    let rules = json!([{
        "operations": ["CREATE", "UPDATE", "DELETE"],
        "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "*",
    }]);
    // The CRDs first, so their own creation is not recorded.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in lien_api::crds() {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("crd");
    }
    let vwc: Api<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration> =
        Api::all(client.clone());
    let config = hook.configuration("capture", rules, "Fail", None);
    vwc.create(
        &PostParams::default(),
        &serde_json::from_value(config).expect("vwc"),
    )
    .await
    .expect("register");

    let ns = "fixtures";
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).expect("ns"),
        )
        .await
        .expect("namespace");

    // ConfigMaps in use: "settings" is deleted (dry run, then Foreground), "flags" loses its label.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for name in ["settings", "flags"] {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"lien.dev/in-use": "true", "app": "web"}},
            "data": {"mode": "production"},
        }))
        .expect("cm");
        cms.create(&PostParams::default(), &cm).await.expect("cm");
    }
    let patch = json!({"metadata": {"labels": {"lien.dev/in-use": null}}});
    cms.patch("flags", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("strip label");
    let dry = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    cms.delete("settings", &dry).await.expect("dry-run delete");
    cms.delete("settings", &DeleteParams::foreground())
        .await
        .expect("delete");

    // Deployments of two sizes, for the benchmarks.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    for (name, vars) in [("web-5k", 23), ("web-20k", 153)] {
        deployments
            .create(&PostParams::default(), &deployment(name, vars))
            .await
            .expect("deployment");
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        deployments.delete(name, &dp).await.expect("delete");
    }

    // A Usage, once its CRD is served.
    let usages: Api<lien_api::Usage> = Api::namespaced(client.clone(), ns);
    let usage: lien_api::Usage = serde_json::from_value(json!({
        "apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
        "metadata": {"name": "web-uses-settings"},
        "spec": {
            "of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "settings"}},
            "by": {"apiVersion": "apps/v1", "kind": "Deployment", "resourceRef": {"name": "web"}},
            "replayDeletion": true,
        },
    }))
    .expect("usage");
    common::wait_for(
        "the Usage CRD to serve",
        Duration::from_secs(10),
        || async { usages.create(&PostParams::default(), &usage).await.ok() },
    )
    .await;

    // Deleting the namespace last.
    namespaces
        .delete(ns, &DeleteParams::default())
        .await
        .expect("delete namespace");

    let requests = hook.requests();
    let find = |op: &str, kind: &str, name: &str, dry: bool| -> Value {
        let request = requests
            .iter()
            .find(|r| {
                r["operation"] == op
                    && r["kind"]["kind"] == kind
                    && r["name"] == name
                    && r["dryRun"] == dry
            })
            .unwrap_or_else(|| panic!("no {op} {kind} {name} captured"))
            .clone();
        json!({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": request})
    };
    let captured = [
        (
            "delete-configmap.json",
            find("DELETE", "ConfigMap", "settings", false),
        ),
        (
            "delete-configmap-dry-run.json",
            find("DELETE", "ConfigMap", "settings", true),
        ),
        (
            "update-strip-label.json",
            find("UPDATE", "ConfigMap", "flags", false),
        ),
        (
            "delete-deployment-5k.json",
            find("DELETE", "Deployment", "web-5k", false),
        ),
        (
            "delete-deployment-20k.json",
            find("DELETE", "Deployment", "web-20k", false),
        ),
        (
            "create-usage.json",
            find("CREATE", "Usage", "web-uses-settings", false),
        ),
        (
            "delete-namespace.json",
            find("DELETE", "Namespace", ns, false),
        ),
    ];
    let write = std::env::var_os("LIEN_WEBHOOK_WRITE_FIXTURES").is_some();
    for (file, review) in &captured {
        if write {
            // The benchmark bodies stay compact, as the API server sends them; the others are
            // pretty for reading.
            let text = if file.contains("k.json") {
                serde_json::to_string(review)
            } else {
                serde_json::to_string_pretty(review)
            };
            let text = text.expect("json") + "\n";
            std::fs::write(common::fixture_path(file), text).expect("write fixture");
        }
        let committed: Value =
            serde_json::from_slice(&common::fixture(file)).expect("fixture is JSON");
        assert_eq!(
            shape(&committed),
            shape(review),
            "{file} differs in shape from what the API server sends; rerun with LIEN_WEBHOOK_WRITE_FIXTURES=1"
        );
    }
    hook.stop().await;
    sandbox.shutdown().await;
}
