//! `lien uninstall` end to end (issue 12): install → protect → uninstall refused → uninstall
//! `--force` → everything that was protected can be deleted, no Lien object, CRD or finalizer
//! left, and what others wrote on the objects kept. And the Helm chart's pre-delete hook
//! (issue 31): rendered by Helm's engine, applied as `helm uninstall` applies it, its Job's
//! command run as its ServiceAccount — refused while something is protected, and with
//! `uninstallHook.force` every DELETE works afterwards.

#[path = "ha/cluster.rs"]
mod cluster;
#[path = "support/helm.rs"]
mod helm;

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
    output(
        c.lien("uninstall.log")
            .arg("uninstall")
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("lien uninstall runs"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn install_protect_uninstall_then_everything_protected_can_be_deleted() {
    let mut c = Cluster::start(1).await;
    let client = c.client.clone();
    install(&client).await;
    // The sandbox runs no pods: Lien runs as a process against it.
    start_lien(&mut c).await;

    // Protect: `used` (with a label and an annotation of someone else's) is used by `user`;
    // `other` carries someone else's finalizer.
    let (cms, _) = protect(&client).await;
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({"metadata": {"name": "other", "labels": {"team": "a"},
            "annotations": {"note": "keep"}, "finalizers": ["example.com/keep"]}}),
        )
        .expect("cm"),
    )
    .await
    .expect("configmap");
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

/// Applies every object of `lien manifests` the cluster serves, as `kubectl apply
/// --server-side -k deploy/` would (the sandbox has no PodDisruptionBudgets).
async fn install(client: &kube::Client) {
    let mut installed = 0;
    for object in lien::manifests::objects() {
        let Some(api) = api_of(client, &object).await else {
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
}

/// Starts replica `a` as the only one, and waits for it to lead.
async fn start_lien(c: &mut Cluster) {
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
}

/// `app/used` used by `app/user` (a Usage with replay; both labelled `team: a` and annotated
/// `note: keep` by someone else), refused, and the Usage `InUse`.
async fn protect(client: &kube::Client) -> (Api<ConfigMap>, Api<DynamicObject>) {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "app"}})).expect("ns"),
        )
        .await
        .expect("namespace");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "app");
    for name in ["used", "user"] {
        cms.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name, "labels": {"team": "a"},
                "annotations": {"note": "keep"}}}))
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
    let usages = api_of(client, &usage).await.expect("Usages served");
    usages
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
    wait_for("the Usage to say InUse", || async {
        usages.get("user-uses-used").await.is_ok_and(|u| {
            u.data["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "InUse" && c["status"] == "True")
        })
    })
    .await;
    (cms, usages)
}

/// The chart's pre-delete hook as Helm's engine renders it with these values, in the order
/// `helm uninstall` creates it (by `helm.sh/hook-weight`).
fn rendered_hook(sets: &[&str]) -> Vec<serde_json::Value> {
    let out = helm::template(sets);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let mut hook: Vec<serde_json::Value> = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("YAML"))
        .filter(|o: &serde_json::Value| {
            o["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete"
        })
        .collect();
    hook.sort_by_key(|o| {
        o["metadata"]["annotations"]["helm.sh/hook-weight"]
            .as_str()
            .and_then(|w| w.parse::<i32>().ok())
            .unwrap_or(0)
    });
    assert_eq!(hook.last().map(|o| &o["kind"]), Some(&json!("Job")));
    hook
}

/// Creates the hook's objects as Helm does (`before-hook-creation`: one left from an earlier
/// run is deleted first), and returns the Job's container arguments.
async fn create_hook(client: &kube::Client, hook: &[serde_json::Value]) -> Vec<String> {
    for object in hook {
        let api = api_of(client, object).await.expect("served");
        let name = object["metadata"]["name"].as_str().expect("name");
        if api.get_opt(name).await.expect("get").is_some() {
            api.delete(name, &DeleteParams::background())
                .await
                .expect("delete");
            wait_for("the old hook object to go", || async {
                api.get_opt(name).await.ok().flatten().is_none()
            })
            .await;
        }
        api.create(
            &PostParams::default(),
            &serde_json::from_value(object.clone()).expect("object"),
        )
        .await
        .unwrap_or_else(|e| panic!("creating {} {name}: {e}", object["kind"]));
    }
    let job = hook.last().expect("the Job");
    serde_json::from_value(job["spec"]["template"]["spec"]["containers"][0]["args"].clone())
        .expect("args")
}

/// The hook Job's container as a kubelet runs it: `lien ARGS…` as the ServiceAccount.
fn hook_process(
    c: &Cluster,
    kubeconfig: &std::path::Path,
    args: &[String],
    log: &str,
) -> std::process::Child {
    c.lien(log)
        .env("KUBECONFIG", kubeconfig)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("lien runs")
}

fn output(child: std::process::Child) -> (bool, String) {
    let out = child.wait_with_output().expect("lien exits");
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
async fn helm_pre_delete_hook_refuses_while_protected_and_then_frees_every_delete() {
    let mut c = Cluster::start(1).await;
    let client = c.client.clone();
    install(&client).await;
    start_lien(&mut c).await;
    let (cms, usages) = protect(&client).await;
    let webhooks = api_of(
        &client,
        &json!({"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration"}),
    )
    .await
    .expect("served");

    // `helm uninstall` with the chart's defaults: the hook refuses, naming what is protected;
    // its Job fails (backoffLimit 0), and with it the uninstall — nothing is removed.
    let args = create_hook(&client, &rendered_hook(&[])).await;
    assert!(!args.iter().any(|a| a == "--force"), "{args:?}");
    let kubeconfig = c
        .service_account_kubeconfig(lien::manifests::UNINSTALL_HOOK)
        .await;
    let (ok, out) = output(hook_process(&c, &kubeconfig, &args, "hook-refused.log"));
    assert!(!ok, "the hook refused: {out}");
    assert!(out.contains("Usage app/user-uses-used"), "{out}");
    assert!(
        matches!(
            cms.delete("used", &DeleteParams::default().dry_run()).await,
            Err(kube::Error::Api(s)) if s.code == 409
        ),
        "still protected after the refused hook"
    );
    assert!(webhooks.get_opt("lien").await.expect("get").is_some());
    assert_eq!(c.lease_holder().await.as_deref(), Some("a"));

    // `helm upgrade --set uninstallHook.force=true`, then `helm uninstall`: the hook made anew
    // (before-hook-creation), run as its ServiceAccount with exactly the chart's RBAC.
    let args = create_hook(&client, &rendered_hook(&["uninstallHook.force=true"])).await;
    assert!(args.iter().any(|a| a == "--force"), "{args:?}");
    let kubeconfig = c
        .service_account_kubeconfig(lien::manifests::UNINSTALL_HOOK)
        .await;
    let mut hook = hook_process(&c, &kubeconfig, &args, "hook.log");
    // The kubelet's part: Lien's pod stops (SIGTERM) once its Deployment is deleted.
    let deployments = api_of(
        &client,
        &json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"namespace": cluster::NAMESPACE}}),
    )
    .await
    .expect("served");
    let end = Instant::now() + Duration::from_secs(120);
    let mut stopped = false;
    loop {
        if let Some(status) = hook.try_wait().expect("try_wait") {
            assert!(status.success(), "the hook failed: {}", output(hook).1);
            break;
        }
        if !stopped
            && deployments
                .get_opt(lien::manifests::NAME)
                .await
                .expect("get")
                .is_none()
        {
            c.sigterm(0);
            stopped = true;
        }
        assert!(Instant::now() < end, "the hook is still running");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(stopped, "the hook finished before Lien's Deployment went");

    // Nothing is refused any more: no webhook configuration, no label, no finalizer.
    assert!(webhooks.get_opt("lien").await.expect("get").is_none());
    let mutating = api_of(
        &client,
        &json!({"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration"}),
    )
    .await
    .expect("served");
    assert!(mutating.get_opt("lien").await.expect("get").is_none());
    let used = cms.get("used").await.expect("used");
    assert!(
        !used
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key(lien_api::IN_USE_LABEL)
    );
    // What Helm deletes next is still there for it (the hook keeps installed objects), and
    // the CRDs stay as Helm keeps a chart's crds/: the Usage is kept, without Lien's finalizer.
    let usage = usages
        .get("user-uses-used")
        .await
        .expect("the Usage is kept");
    assert!(
        !usage
            .metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == lien_api::USAGE_FINALIZER)
    );
    assert!(
        Api::<Namespace>::all(client.clone())
            .get_opt(cluster::NAMESPACE)
            .await
            .expect("get")
            .is_some()
    );
    cms.delete("used", &DeleteParams::default())
        .await
        .expect("used can be deleted");
    wait_for("used to be gone", || async {
        cms.get_opt("used").await.ok().flatten().is_none()
    })
    .await;
}
