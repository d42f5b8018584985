//! `lien uninstall` end to end (issue 12): install → protect → uninstall refused → uninstall
//! `--force` → everything that was protected can be deleted, no Lien object, CRD or finalizer
//! left, and what others wrote on the objects kept.

#[path = "ha/cluster.rs"]
mod cluster;

use std::time::{Duration, Instant};

use cluster::Cluster;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(30);

async fn wait_for<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let end = Instant::now() + DEADLINE;
    while !check().await {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn api_of(client: &kube::Client, object: &serde_json::Value) -> Option<Api<DynamicObject>> {
    let api_version = object["apiVersion"].as_str()?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, object["kind"].as_str()?);
    let (ar, _) = kube::discovery::pinned_kind(client, &gvk).await.ok()?;
    Some(match object["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    })
}

fn uninstall(c: &Cluster, args: &[&str]) -> (bool, String) {
    let out = c
        .lien("uninstall.log")
        .arg("uninstall")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("lien uninstall runs");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn install_protect_uninstall_then_everything_protected_can_be_deleted() {
    let mut c = Cluster::start(1).await;
    let client = c.client.clone();
    // Install: every object of `lien manifests` the sandbox serves (it has no
    // PodDisruptionBudgets), as `kubectl apply --server-side -k deploy/` would.
    let mut installed = 0;
    for object in lien::manifests::objects() {
        let Some(api) = api_of(&client, &object).await else {
            continue;
        };
        let name = object["metadata"]["name"].as_str().expect("name");
        api.patch(
            name,
            &PatchParams::apply("kubectl").force(),
            &Patch::Apply(&object),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {name}: {e}"));
        installed += 1;
    }
    assert!(installed > 10, "{installed} objects installed");
    // The sandbox runs no pods: Lien runs as a process against it.
    c.spawn(
        0,
        "a",
        &[
            "--lease-duration=2s",
            "--lease-renew-deadline=1500ms",
            "--lease-retry-period=200ms",
        ],
    );
    wait_for("Lien to lead", || async {
        c.lease_holder().await.as_deref() == Some("a")
    })
    .await;

    // Protect: `used` (with a label and an annotation of someone else's) is used by `user`.
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "app"}})).expect("ns"),
        )
        .await
        .expect("namespace");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "app");
    for (name, finalizers) in [
        ("used", json!([])),
        ("user", json!([])),
        ("other", json!(["example.com/keep"])),
    ] {
        cms.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name, "labels": {"team": "a"},
                "annotations": {"note": "keep"}, "finalizers": finalizers}}))
            .expect("cm"),
        )
        .await
        .expect("configmap");
    }
    let usage = json!({"apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
        "metadata": {"name": "user-uses-used", "namespace": "app"},
        "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "used"}},
                 "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "user"}},
                 "replayDeletion": true}});
    api_of(&client, &usage)
        .await
        .expect("Usages served")
        .create(
            &PostParams::default(),
            &serde_json::from_value(usage).expect("usage"),
        )
        .await
        .expect("usage");
    wait_for("used's DELETE to be refused", || async {
        matches!(
            cms.delete("used", &DeleteParams::default().dry_run()).await,
            Err(kube::Error::Api(s)) if s.code == 409
        )
    })
    .await;
    let refused = cms.delete("used", &DeleteParams::default()).await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(s)) if s.code == 409),
        "{refused:?}"
    );
    wait_for("the refusal to be recorded", || async {
        cms.get("used")
            .await
            .ok()
            .and_then(|cm| cm.metadata.annotations)
            .is_some_and(|a| a.contains_key(lien_controller::replay::DELETION_ATTEMPT_ANNOTATION))
    })
    .await;
    // Its status says InUse=True once Lien has written it: then uninstall refuses.
    wait_for("uninstall to refuse", || async {
        !uninstall(&c, &["--dry-run"]).0
    })
    .await;

    // Refused while something is protected, naming it.
    let (ok, out) = uninstall(&c, &[]);
    assert!(!ok, "uninstall refused: {out}");
    assert!(out.contains("Usage app/user-uses-used"), "{out}");
    assert!(out.contains("--force"), "{out}");
    // A dry run says what it would do and changes nothing.
    let (ok, out) = uninstall(&c, &["--force", "--dry-run"]);
    assert!(ok, "{out}");
    assert!(
        out.contains("would delete ValidatingWebhookConfiguration lien"),
        "{out}"
    );
    assert!(
        out.contains("would remove Lien's label/record/finalizers from ConfigMap app/used"),
        "{out}"
    );
    assert!(matches!(
        cms.delete("used", &DeleteParams::default().dry_run()).await,
        Err(kube::Error::Api(s)) if s.code == 409
    ));
    // `--namespace` names the install to remove: nothing of the one in lien-system is touched
    // by an uninstall of another namespace's (an install made with `lien manifests --namespace`).
    let (ok, out) = uninstall(&c, &["--force", "--dry-run", "--namespace", "elsewhere"]);
    assert!(ok, "{out}");
    assert!(
        !out.contains("lien-system/") && !out.contains("Namespace lien-system"),
        "{out}"
    );
    assert!(
        out.contains("would delete ValidatingWebhookConfiguration lien"),
        "{out}"
    );

    // Lien stops first (uninstall waits for its Lease to be free), then uninstall --force.
    c.sigterm(0);
    wait_for("Lien to exit", || {
        let exited = c.exited(0).is_some();
        async move { exited }
    })
    .await;
    let (ok, out) = uninstall(&c, &["--force", "--timeout-seconds=30"]);
    assert!(ok, "uninstall --force: {out}");

    // What Lien wrote is gone, what others wrote is kept.
    let used = cms.get("used").await.expect("used");
    let labels = used.metadata.labels.clone().unwrap_or_default();
    assert!(!labels.contains_key(lien_api::IN_USE_LABEL), "{labels:?}");
    assert_eq!(labels.get("team").map(String::as_str), Some("a"));
    let annotations = used.metadata.annotations.clone().unwrap_or_default();
    assert!(!annotations.contains_key(lien_controller::replay::DELETION_ATTEMPT_ANNOTATION));
    assert_eq!(annotations.get("note").map(String::as_str), Some("keep"));
    let other = cms.get("other").await.expect("other");
    assert_eq!(
        other.metadata.finalizers,
        Some(vec!["example.com/keep".to_owned()])
    );
    // Nothing of Lien's is left: no webhook configuration, no CRD, no namespace.
    let vwc = api_of(
        &client,
        &json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration"}),
    )
    .await
    .expect("served");
    assert!(
        vwc.list(&Default::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let left: Vec<String> = crds
        .list(&Default::default())
        .await
        .expect("crds")
        .items
        .into_iter()
        .filter(|c| c.spec.group == lien_api::GROUP)
        .filter_map(|c| c.metadata.name)
        .collect();
    assert!(left.is_empty(), "CRDs left: {left:?}");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    wait_for("lien-system to be gone", || async {
        namespaces
            .get_opt(cluster::NAMESPACE)
            .await
            .ok()
            .flatten()
            .is_none()
    })
    .await;
    // Everything that was protected can be deleted, and goes.
    for name in ["used", "user"] {
        cms.delete(name, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("deleting {name}: {e}"));
    }
    wait_for("used and user to be gone", || async {
        cms.get_opt("used").await.ok().flatten().is_none()
            && cms.get_opt("user").await.ok().flatten().is_none()
    })
    .await;
}
