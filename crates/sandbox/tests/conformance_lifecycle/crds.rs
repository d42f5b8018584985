//! CustomResourceDefinition lifecycle.
//!
//! Pages: "Extend the Kubernetes API with CustomResourceDefinitions" (create a CRD; delete a
//! CRD: "the server will uninstall the RESTful API endpoint and delete all custom objects
//! stored in it") and apiextensions-apiserver's CRD finalizer and custom resource handler.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionCondition,
};
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;

use crate::common;
use crate::support::{
    HOLD, is_deleting, namespace, remove_finalizer, status, wait_gone, wait_until,
};

const CRD: &str = "widgets.lifecycle.test";

fn crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD},
        "spec": {
            "group": "lifecycle.test",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}},
                }},
            }],
        },
    }))
    .expect("CRD")
}

fn widgets(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("lifecycle.test", "v1", "Widget"),
        "widgets",
    );
    Api::namespaced_with(client.clone(), ns, &resource)
}

fn widget(name: &str, finalizers: &[&str]) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "lifecycle.test/v1",
        "kind": "Widget",
        "metadata": {"name": name, "finalizers": finalizers},
        "spec": {"size": 1},
    }))
    .expect("widget")
}

fn condition<'a>(
    crd: &'a CustomResourceDefinition,
    type_: &str,
) -> Option<&'a CustomResourceDefinitionCondition> {
    crd.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// The CRD, created and `Established`.
async fn established(client: &kube::Client) -> Api<CustomResourceDefinition> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd())
        .await
        .expect("create CRD");
    wait_until(&crds, CRD, "Established", |c| {
        condition(c, "Established").is_some_and(|e| e.status == "True")
    })
    .await;
    crds
}

/// "Extend the Kubernetes API with CustomResourceDefinitions" › Create a CustomResourceDefinition:
/// the new endpoint is served once the CRD is `Established` (with `NamesAccepted`).
#[tokio::test]
async fn created_crd_is_established_and_served() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    namespace(&client, "crd-serve").await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd())
        .await
        .expect("create CRD");
    let established = wait_until(&crds, CRD, "Established", |c| {
        condition(c, "Established").is_some_and(|e| e.status == "True")
    })
    .await;
    let names = condition(&established, "NamesAccepted").expect("NamesAccepted");
    assert_eq!(names.status, "True");
    assert_eq!(names.reason.as_deref(), Some("NoConflicts"));
    let e = condition(&established, "Established").expect("Established");
    assert_eq!(e.reason.as_deref(), Some("InitialNamesAccepted"));
    assert_eq!(
        established.finalizers(),
        ["customresourcecleanup.apiextensions.k8s.io"]
    );

    let api = widgets(&client, "crd-serve");
    api.create(&PostParams::default(), &widget("w", &[]))
        .await
        .expect("create widget");
    let read = api.get("w").await.expect("get widget");
    assert_eq!(read.data["spec"]["size"], 1);
    sandbox.shutdown().await;
}

/// "Extend the Kubernetes API with CustomResourceDefinitions" › Delete a CustomResourceDefinition:
/// the CRD stays (`Terminating`, with the `customresourcecleanup.apiextensions.k8s.io`
/// finalizer) while its objects are deleted — an object with a finalizer holds it — then the
/// endpoint stops being served (404). While terminating, the endpoint refuses creates.
#[tokio::test]
async fn deleting_a_crd_deletes_its_objects_first_then_stops_serving() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    namespace(&client, "crd-a").await;
    namespace(&client, "crd-b").await;
    let crds = established(&client).await;
    let in_a = widgets(&client, "crd-a");
    let in_b = widgets(&client, "crd-b");
    in_a.create(&PostParams::default(), &widget("plain", &[]))
        .await
        .expect("create widget");
    in_b.create(&PostParams::default(), &widget("held", &[HOLD]))
        .await
        .expect("create held widget");

    crds.delete(CRD, &DeleteParams::default())
        .await
        .expect("delete CRD");
    wait_gone(&in_a, "plain").await;
    let held = wait_until(&in_b, "held", "being deleted", is_deleting).await;
    assert_eq!(held.finalizers(), [HOLD]);

    let terminating = wait_until(&crds, CRD, "Terminating", |c| {
        condition(c, "Terminating").is_some_and(|t| t.status == "True")
    })
    .await;
    assert!(is_deleting(&terminating));
    assert_eq!(
        terminating.finalizers(),
        ["customresourcecleanup.apiextensions.k8s.io"]
    );
    let t = condition(&terminating, "Terminating").expect("Terminating");
    assert_eq!(t.reason.as_deref(), Some("InstanceDeletionInProgress"));
    assert_eq!(
        t.message.as_deref(),
        Some("CustomResource deletion is in progress")
    );

    // Still served for reads and finalizer removal, but not for new objects.
    assert!(in_b.get_opt("held").await.expect("get").is_some());
    let s = status(
        in_a.create(&PostParams::default(), &widget("late", &[]))
            .await,
    );
    assert_eq!(s.code, 405);
    assert_eq!(s.reason, "MethodNotAllowed");
    assert_eq!(
        s.message,
        "create not allowed while custom resource definition is terminating"
    );

    remove_finalizer(&in_b, "held", HOLD).await;
    wait_gone(&in_b, "held").await;
    wait_gone(&crds, CRD).await;
    let s = status(in_a.list(&Default::default()).await);
    assert_eq!(s.code, 404);
    // Gone with its CRD, the kind's path is kube-apiserver's bare "404 page not found" (text,
    // no Status: kube-rs reports it with its own reason).
    let s = status(in_b.get("held").await);
    assert_eq!(s.code, 404);
    assert_eq!(
        (s.message.as_str(), s.reason.as_str()),
        ("404 page not found", "Failed to parse error data")
    );
    sandbox.shutdown().await;
}

/// A watch of a custom resource ends when its CRD is deleted (kube-apiserver's CRD handler
/// destroys the storage, closing its watches), and the client's list again is answered 404 —
/// it never waits on a watch of a kind that is no longer served, and a CRD made again is
/// listed afresh.
#[tokio::test]
async fn a_watch_of_a_custom_resource_ends_when_its_crd_is_deleted() {
    use futures::StreamExt;
    use kube::api::WatchParams;

    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    namespace(&client, "crd-w").await;
    let crds = established(&client).await;
    let in_w = widgets(&client, "crd-w");
    in_w.create(&PostParams::default(), &widget("plain", &[]))
        .await
        .expect("create widget");
    let all = widgets(&client, "crd-w");
    let mut events = all
        .watch(&WatchParams::default().timeout(290), "0")
        .await
        .expect("watch")
        .boxed();
    crds.delete(CRD, &DeleteParams::default())
        .await
        .expect("delete CRD");
    let mut seen = Vec::new();
    let ended = tokio::time::timeout(crate::support::DEADLINE, async {
        while let Some(e) = events.next().await {
            seen.push(format!("{e:?}"));
        }
    })
    .await;
    assert!(ended.is_ok(), "the watch is still open: {seen:#?}");
    assert!(
        seen.iter().any(|e| e.contains("Deleted")),
        "the object's deletion is seen before the end: {seen:#?}"
    );
    assert_eq!(status(in_w.list(&Default::default()).await).code, 404);
    sandbox.shutdown().await;
}

/// "Kubernetes API Aggregation Layer": the API server registers an APIService for each group
/// version it serves itself — the built-in ones as it starts (`automanaged: onstart`, kube's
/// priorities), a CRD's while a CRD serves it (`automanaged: "true"`, priority 1000/100) — all
/// "Local" and available; `kubectl get apiservices v1.apps` finds one. Checked against
/// kube-apiserver v1.32.13 (differential case `kinds/get-apiservices-v1-apps-o-wide`).
#[tokio::test]
async fn every_group_version_served_has_a_local_api_service() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let services: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService"),
            "apiservices",
        ),
    );
    let apps = services.get("v1.apps").await.expect("v1.apps");
    assert_eq!(
        apps.data["spec"],
        json!({"group": "apps", "version": "v1", "groupPriorityMinimum": 17800, "versionPriority": 15})
    );
    assert_eq!(
        apps.labels()
            .get("kube-aggregator.kubernetes.io/automanaged"),
        Some(&"onstart".to_string())
    );
    let available = &apps.data["status"]["conditions"][0];
    assert_eq!(
        (
            &available["type"],
            &available["status"],
            &available["reason"]
        ),
        (&json!("Available"), &json!("True"), &json!("Local"))
    );
    let core = services.get("v1.").await.expect("the core group's");
    assert_eq!(core.data["spec"]["groupPriorityMinimum"], 18000);
    assert!(core.data["spec"].get("group").is_none());

    let crds = established(&client).await;
    let custom = wait_until(&services, "v1.lifecycle.test", "registered", |_| true).await;
    assert_eq!(
        custom.data["spec"],
        json!({"group": "lifecycle.test", "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 100})
    );
    assert_eq!(
        custom
            .labels()
            .get("kube-aggregator.kubernetes.io/automanaged"),
        Some(&"true".to_string())
    );
    crds.delete(CRD, &DeleteParams::default())
        .await
        .expect("delete CRD");
    wait_gone(&services, "v1.lifecycle.test").await;
    assert!(services.get_opt("v1.apps").await.expect("get").is_some());
    sandbox.shutdown().await;
}
