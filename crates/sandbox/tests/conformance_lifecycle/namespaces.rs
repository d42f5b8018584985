//! Namespace deletion.
//!
//! Pages: "Namespaces" (concepts/overview/working-with-objects/namespaces), "Namespaces
//! Walkthrough" / deleting a namespace (tasks/administer-cluster/namespaces), the
//! `NamespaceLifecycle` admission plugin, and kube-controller-manager's namespace controller
//! (`namespaced_resources_deleter`, its status conditions).

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, NamespaceCondition};
use kube::api::{Api, DeleteParams, PostParams};
use lien_sandbox::testing::{TestWebhook, Verdict};

use crate::common;
use crate::support::{
    DEADLINE, HOLD, configmap, is_deleting, namespace, present, remove_finalizer, status,
    wait_gone, wait_until, watch_configmap_deletes,
};

fn condition<'a>(ns: &'a Namespace, type_: &str) -> Option<&'a NamespaceCondition> {
    ns.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

fn phase(ns: &Namespace) -> Option<&str> {
    ns.status.as_ref()?.phase.as_deref()
}

/// "Namespaces" / deleting a namespace: the namespace enters phase `Terminating`, new content
/// is refused by the `NamespaceLifecycle` admission plugin with its exact 403, and the
/// namespace controller deletes the content through the API (so admission webhooks see it, as
/// `system:serviceaccount:kube-system:namespace-controller`).
#[tokio::test]
async fn terminating_namespace_refuses_content_and_deletes_it_through_admission() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    namespace(&client, "doomed").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "doomed");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let webhook = TestWebhook::start(|_| Verdict::Allow)
        .await
        .expect("webhook starts");
    watch_configmap_deletes(&client, &webhook, "watch-deletes", None).await;
    configmap(&cms, "content", vec![], &[], &[]).await;
    configmap(&cms, "held", vec![], &[HOLD], &[]).await;

    namespaces
        .delete("doomed", &DeleteParams::default())
        .await
        .expect("delete namespace");
    let terminating = present(&namespaces, "doomed").await;
    assert!(is_deleting(&terminating));
    assert_eq!(phase(&terminating), Some("Terminating"));

    let mut fresh = ConfigMap::default();
    fresh.metadata.name = Some("late".into());
    let s = status(cms.create(&PostParams::default(), &fresh).await);
    assert_eq!(s.code, 403);
    assert_eq!(s.reason, "Forbidden");
    assert_eq!(
        s.message,
        "configmaps \"late\" is forbidden: unable to create new content in namespace doomed because it is being terminated"
    );
    let details = s.details.as_ref().expect("details");
    assert_eq!(details.name, "late");
    assert_eq!(details.kind, "configmaps");
    assert_eq!(details.causes.len(), 1);
    assert_eq!(details.causes[0].reason, "NamespaceTerminating");
    assert_eq!(
        details.causes[0].message,
        "namespace doomed is being terminated"
    );
    assert_eq!(details.causes[0].field, "metadata.namespace");
    // With generateName, admission names the object by its prefix (no name is generated yet).
    let mut generated = ConfigMap::default();
    generated.metadata.generate_name = Some("gen-".into());
    let s = status(cms.create(&PostParams::default(), &generated).await);
    assert_eq!(
        s.message,
        "configmaps \"gen-\" is forbidden: unable to create new content in namespace doomed because it is being terminated"
    );

    wait_gone(&cms, "content").await;
    // Each object of the controller's DELETE of a collection is reviewed with the collection's
    // name, none (`request.name` omitted, Go's `omitempty`), and the object in `oldObject`
    // (kube-apiserver v1.32.13, measured).
    let deletes: Vec<_> = webhook
        .requests()
        .into_iter()
        .filter(|r| r["operation"] == "DELETE" && r["oldObject"]["metadata"]["name"] == "content")
        .collect();
    assert!(
        !deletes.is_empty(),
        "the content was deleted through admission"
    );
    for r in &deletes {
        assert!(r["name"].is_null(), "{r}");
        assert_eq!(r["namespace"], "doomed");
        assert_eq!(
            r["userInfo"]["username"],
            "system:serviceaccount:kube-system:namespace-controller"
        );
    }
    webhook.stop().await;
    sandbox.shutdown().await;
}

/// kube-controller-manager's namespace controller: content with finalizers keeps the namespace
/// `Terminating`, reported in the `NamespaceContentRemaining` and `NamespaceFinalizersRemaining`
/// conditions; when the last finalizer is removed the content goes, then the namespace.
#[tokio::test]
async fn content_with_finalizers_holds_the_namespace_and_is_reported() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    namespace(&client, "held-open").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "held-open");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    configmap(&cms, "content", vec![], &[], &[]).await;
    configmap(&cms, "held", vec![], &[HOLD, "lifecycle.test/other"], &[]).await;

    namespaces
        .delete("held-open", &DeleteParams::default())
        .await
        .expect("delete namespace");
    wait_gone(&cms, "content").await;
    let ns = wait_until(&namespaces, "held-open", "content conditions", |ns| {
        condition(ns, "NamespaceFinalizersRemaining").is_some_and(|c| c.status == "True")
    })
    .await;
    assert_eq!(phase(&ns), Some("Terminating"));

    let remaining = condition(&ns, "NamespaceContentRemaining").expect("content condition");
    assert_eq!(remaining.status, "True");
    assert_eq!(remaining.reason.as_deref(), Some("SomeResourcesRemain"));
    // The controller names a resource "<resource>.<group>": "configmaps." for the core group.
    assert_eq!(
        remaining.message.as_deref(),
        Some("Some resources are remaining: configmaps. has 1 resource instances")
    );
    let finalizers = condition(&ns, "NamespaceFinalizersRemaining").expect("finalizer condition");
    assert_eq!(finalizers.reason.as_deref(), Some("SomeFinalizersRemain"));
    assert_eq!(
        finalizers.message.as_deref(),
        Some(
            "Some content in the namespace has finalizers remaining: lifecycle.test/hold in 1 resource instances, lifecycle.test/other in 1 resource instances"
        )
    );
    let failure = condition(&ns, "NamespaceDeletionContentFailure").expect("failure condition");
    assert_eq!(failure.status, "False");
    assert_eq!(failure.reason.as_deref(), Some("ContentDeleted"));
    let held = present(&cms, "held").await;
    assert!(is_deleting(&held));

    remove_finalizer(&cms, "held", "lifecycle.test/other").await;
    let ns = wait_until(&namespaces, "held-open", "one finalizer reported", |ns| {
        condition(ns, "NamespaceFinalizersRemaining")
            .and_then(|c| c.message.as_deref())
            .is_some_and(|m| !m.contains("lifecycle.test/other"))
    })
    .await;
    assert_eq!(phase(&ns), Some("Terminating"));
    remove_finalizer(&cms, "held", HOLD).await;
    wait_gone(&cms, "held").await;
    common::wait_for("the namespace to go", DEADLINE, || async {
        namespaces
            .get_opt("held-open")
            .await
            .expect("get")
            .is_none()
            .then_some(())
    })
    .await;
    sandbox.shutdown().await;
}

/// "Namespaces" (finalizers in `spec`): a namespace's `spec.finalizers` written through its
/// `finalize` subresource with another owner's token instead of `kubernetes` — the namespace
/// controller still deletes its content on deletion (it stops only at an empty list), then the
/// namespace waits, Terminating, for that owner; its name label stays through the write;
/// finalizing it empty lets it go. Checked against kube-apiserver and kube-controller-manager
/// v1.32.13 (differential case `kubectl-delete/delete-namespace-with-finalizer-in-spec`).
#[tokio::test]
async fn a_namespace_finalized_to_another_owner_still_loses_its_content_then_waits() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    namespace(&client, "foreign").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "foreign");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    configmap(&cms, "content", vec![], &[], &[]).await;
    let finalize = |finalizers: serde_json::Value| {
        let namespaces = namespaces.clone();
        async move {
            let body: Namespace = serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "foreign"}, "spec": {"finalizers": finalizers}}))
            .expect("namespace");
            namespaces
                .replace_subresource("finalize", "foreign", &PostParams::default(), &body)
                .await
                .expect("finalize")
        }
    };
    let written = finalize(serde_json::json!(["example.com/mine"])).await;
    assert_eq!(
        written
            .metadata
            .labels
            .unwrap_or_default()
            .get("kubernetes.io/metadata.name"),
        Some(&"foreign".to_string()),
        "the name label is defaulted on the finalize write too"
    );
    namespaces
        .delete("foreign", &DeleteParams::default())
        .await
        .expect("delete namespace");
    wait_gone(&cms, "content").await;
    let ns = wait_until(&namespaces, "foreign", "content conditions", |ns| {
        condition(ns, "NamespaceContentRemaining").is_some_and(|c| c.status == "False")
    })
    .await;
    assert_eq!(phase(&ns), Some("Terminating"));
    assert_eq!(
        ns.spec.clone().and_then(|s| s.finalizers),
        Some(vec!["example.com/mine".to_string()])
    );
    // Waiting is quiet: the controller's no-op finalize and conditions write nothing new.
    let settled = wait_until(&namespaces, "foreign", "settled", |ns| {
        condition(ns, "NamespaceContentRemaining").is_some_and(|c| c.status == "False")
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let later = namespaces.get("foreign").await.expect("get");
    assert_eq!(
        later.metadata.resource_version, settled.metadata.resource_version,
        "a waiting namespace is not rewritten"
    );
    finalize(serde_json::json!([])).await;
    common::wait_for("the namespace to go", DEADLINE, || async {
        namespaces
            .get_opt("foreign")
            .await
            .expect("get")
            .is_none()
            .then_some(())
    })
    .await;
    sandbox.shutdown().await;
}

/// "Namespaces" › Initial namespaces, and the `NamespaceLifecycle` admission plugin: `default`,
/// `kube-system` and `kube-public` may not be deleted (`kube-node-lease` may).
#[tokio::test]
async fn initial_namespaces_may_not_be_deleted() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in ["default", "kube-system", "kube-public"] {
        let s = status(namespaces.delete(name, &DeleteParams::default()).await);
        assert_eq!(s.code, 403, "{name}");
        assert_eq!(s.reason, "Forbidden");
        assert_eq!(
            s.message,
            format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted")
        );
        let ns = present(&namespaces, name).await;
        assert!(!is_deleting(&ns), "{name}");
    }
    namespaces
        .delete("kube-node-lease", &DeleteParams::default())
        .await
        .expect("kube-node-lease may be deleted");
    sandbox.shutdown().await;
}

/// kube-controller-manager's namespace controller empties a namespace with one DELETE of a
/// collection per resource type (`deleteAllContentForGroupVersionResource`; no per-object
/// fallback), and kube-apiserver deletes a collection's objects in name order with one worker
/// (`--delete-collection-workers=1`) that returns on its first error: an object refused stops
/// the objects after it, pass after pass, until it is let through. Measured on kube-apiserver
/// v1.32.13 (issue 29: a namespace whose ConfigMap `a`, used by ConfigMap `c`, was refused kept
/// `c` for good; the sandbox had deleted each object on its own and gone on past a refusal).
#[tokio::test]
async fn a_refused_object_stops_its_collection_until_it_is_let_through() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    namespace(&client, "stuck").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "stuck");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let refuse = Arc::new(AtomicBool::new(true));
    let webhook = {
        let refuse = refuse.clone();
        TestWebhook::start(move |r| {
            if refuse.load(Ordering::SeqCst) && r["oldObject"]["metadata"]["name"] == "b" {
                Verdict::Deny {
                    code: 409,
                    message: "b is in use".into(),
                }
            } else {
                Verdict::Allow
            }
        })
        .await
        .expect("webhook starts")
    };
    watch_configmap_deletes(&client, &webhook, "refuse-b", None).await;
    for name in ["a", "b", "c"] {
        configmap(&cms, name, vec![], &[], &[]).await;
    }
    namespaces
        .delete("stuck", &DeleteParams::default())
        .await
        .expect("delete namespace");
    let ns = wait_until(&namespaces, "stuck", "the refusal reported", |ns| {
        condition(ns, "NamespaceDeletionContentFailure").is_some_and(|c| c.status == "True")
    })
    .await;
    let failure = condition(&ns, "NamespaceDeletionContentFailure").expect("failure condition");
    assert!(
        failure
            .message
            .as_deref()
            .is_some_and(|m| m.contains("b is in use")),
        "{failure:?}"
    );
    // `a` came before the refusal; `c`, after it, was not tried.
    wait_gone(&cms, "a").await;
    assert!(!is_deleting(&present(&cms, "b").await));
    assert!(!is_deleting(&present(&cms, "c").await));
    // Let through, the next pass deletes the rest.
    refuse.store(false, Ordering::SeqCst);
    wait_gone(&cms, "b").await;
    wait_gone(&cms, "c").await;
    common::wait_for("the namespace to go", DEADLINE, || async {
        namespaces
            .get_opt("stuck")
            .await
            .expect("get")
            .is_none()
            .then_some(())
    })
    .await;
    webhook.stop().await;
    sandbox.shutdown().await;
}
