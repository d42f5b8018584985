//! Create, update, patch and delete semantics.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common;
use crate::support::{configmap, names, status, widget, widget_crd};

/// "Object Names and IDs" (generateName, UIDs) and "API Concepts" (resourceVersion): a create
/// fills the name from `generateName` with a 5-character random suffix, and sets uid,
/// creationTimestamp and resourceVersion.
#[tokio::test]
async fn create_generates_name_and_fills_system_metadata() {
    let sandbox = common::sandbox().await;
    let cms: Api<ConfigMap> = Api::namespaced(common::client(&sandbox).await, "default");
    let mut cm = ConfigMap::default();
    cm.metadata.generate_name = Some("gen-".into());
    let a = cms
        .create(&PostParams::default(), &cm)
        .await
        .expect("create a");
    let b = cms
        .create(&PostParams::default(), &cm)
        .await
        .expect("create b");
    let name = a.metadata.name.clone().expect("a name");
    assert!(
        name.starts_with("gen-") && name.len() == "gen-".len() + 5,
        "{name}"
    );
    assert_ne!(a.metadata.name, b.metadata.name);
    assert_eq!(a.metadata.generate_name.as_deref(), Some("gen-"));
    assert!(a.metadata.uid.as_deref().is_some_and(|u| !u.is_empty()));
    assert_ne!(a.metadata.uid, b.metadata.uid);
    assert!(a.metadata.creation_timestamp.is_some());
    let rv_a: u64 = a
        .metadata
        .resource_version
        .as_deref()
        .expect("rv")
        .parse()
        .expect("numeric rv");
    let rv_b: u64 = b
        .metadata
        .resource_version
        .as_deref()
        .expect("rv")
        .parse()
        .expect("numeric rv");
    assert!(
        rv_b > rv_a,
        "resourceVersions follow write order: {rv_a} then {rv_b}"
    );
    let read = cms.get(&name).await.expect("get");
    assert_eq!(read.metadata.uid, a.metadata.uid);
    assert_eq!(read.metadata.resource_version, a.metadata.resource_version);
    sandbox.shutdown().await;
}

/// "API Concepts" (create): a second create of a name is 409 AlreadyExists with the resource's
/// qualified name, and a namespaced create in a namespace that does not exist is 404.
#[tokio::test]
async fn create_conflicts_and_missing_namespace() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let ar = widget_crd(&client).await;
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let w = widget(&ar, "w", json!({"size": 1}));
    widgets
        .create(&PostParams::default(), &w)
        .await
        .expect("create");
    let s = status(widgets.create(&PostParams::default(), &w).await);
    assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(s.message, "widgets.example.com \"w\" already exists");

    let missing: Api<ConfigMap> = Api::namespaced(client, "nowhere");
    let s = status(
        missing
            .create(&PostParams::default(), &configmap("c", &[]))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
    assert_eq!(s.message, "namespaces \"nowhere\" not found");
    sandbox.shutdown().await;
}

/// "API Concepts" (resource versions, optimistic concurrency): an update carrying a
/// resourceVersion that is no longer current fails with 409 Conflict.
#[tokio::test]
async fn update_with_stale_resource_version_conflicts() {
    let sandbox = common::sandbox().await;
    let cms: Api<ConfigMap> = Api::namespaced(common::client(&sandbox).await, "default");
    let created = cms
        .create(&PostParams::default(), &configmap("occ", &[]))
        .await
        .expect("create");
    let mut first = created.clone();
    first.data = Some(BTreeMap::from([("k".to_string(), "1".to_string())]));
    let updated = cms
        .replace("occ", &PostParams::default(), &first)
        .await
        .expect("update");
    assert_ne!(
        updated.metadata.resource_version,
        created.metadata.resource_version
    );
    let mut stale = created.clone();
    stale.data = Some(BTreeMap::from([("k".to_string(), "2".to_string())]));
    let s = status(cms.replace("occ", &PostParams::default(), &stale).await);
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        s.message,
        "Operation cannot be fulfilled on configmaps \"occ\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let now = cms.get("occ").await.expect("get");
    assert_eq!(now.data, first.data, "the stale update changed nothing");
    sandbox.shutdown().await;
}

/// "Extend the Kubernetes API with CustomResourceDefinitions" (status subresource): with the
/// status subresource, PUT/PATCH on the main resource ignores status changes, /status ignores
/// everything but status, and metadata.generation is bumped only by spec changes.
#[tokio::test]
async fn generation_and_status_subresource() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let ar = widget_crd(&client).await;
    let widgets: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
    let created = widgets
        .create(
            &PostParams::default(),
            &widget(&ar, "g", json!({"size": 1}))
                .data(json!({"spec": {"size": 1}, "status": {"ready": true}})),
        )
        .await
        .expect("create");
    assert_eq!(created.metadata.generation, Some(1));
    assert!(
        created.data.get("status").is_none(),
        "status is dropped on create: {:?}",
        created.data
    );

    let pp = PatchParams::default();
    let labelled = widgets
        .patch(
            "g",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .expect("label");
    assert_eq!(
        labelled.metadata.generation,
        Some(1),
        "metadata changes keep the generation"
    );

    let via_main = widgets
        .patch("g", &pp, &Patch::Merge(json!({"status": {"ready": true}})))
        .await
        .expect("status through the main resource");
    assert!(
        via_main.data.get("status").is_none(),
        "ignored: {:?}",
        via_main.data
    );
    assert_eq!(via_main.metadata.generation, Some(1));

    let via_status = widgets
        .patch_status(
            "g",
            &pp,
            &Patch::Merge(json!({"spec": {"size": 5}, "status": {"ready": true}})),
        )
        .await
        .expect("status through /status");
    assert_eq!(via_status.data["status"], json!({"ready": true}));
    assert_eq!(
        via_status.data["spec"],
        json!({"size": 1}),
        "spec is ignored through /status"
    );
    assert_eq!(
        via_status.metadata.generation,
        Some(1),
        "status changes keep the generation"
    );

    let spec = widgets
        .patch("g", &pp, &Patch::Merge(json!({"spec": {"size": 2}})))
        .await
        .expect("spec");
    assert_eq!(spec.metadata.generation, Some(2));
    assert_eq!(
        spec.data["status"],
        json!({"ready": true}),
        "status survives a spec write"
    );
    sandbox.shutdown().await;
}

/// A JSON patch in kube-rs's own `json_patch` version.
fn json_patch(ops: serde_json::Value) -> Patch<()> {
    Patch::Json(serde_json::from_value(ops).expect("json patch parses"))
}

/// "API Concepts" / JSON Patch (RFC 6902): operations apply in order; a failing `test`
/// operation fails the whole patch and changes nothing.
#[tokio::test]
async fn json_patch_and_failing_test_operation() {
    let sandbox = common::sandbox().await;
    let cms: Api<ConfigMap> = Api::namespaced(common::client(&sandbox).await, "default");
    let mut cm = configmap("jp", &[]);
    cm.data = Some(BTreeMap::from([("a".to_string(), "1".to_string())]));
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("create");
    let patch = json_patch(json!([
        {"op": "test", "path": "/data/a", "value": "1"},
        {"op": "replace", "path": "/data/a", "value": "2"},
        {"op": "add", "path": "/data/b", "value": "3"},
    ]));
    let out = cms
        .patch("jp", &PatchParams::default(), &patch)
        .await
        .expect("json patch");
    let data = out.data.expect("data");
    assert_eq!((data["a"].as_str(), data["b"].as_str()), ("2", "3"));
    let rv = out.metadata.resource_version;

    let failing = json_patch(json!([
        {"op": "replace", "path": "/data/a", "value": "9"},
        {"op": "test", "path": "/data/b", "value": "wrong"},
    ]));
    let s = status(cms.patch("jp", &PatchParams::default(), &failing).await);
    assert_eq!(s.code, 422, "{s:?}");
    let now = cms.get("jp").await.expect("get");
    assert_eq!(
        now.metadata.resource_version, rv,
        "a failed patch writes nothing"
    );
    assert_eq!(now.data.expect("data")["a"], "2");
    sandbox.shutdown().await;
}

/// "Update API Objects in Place Using kubectl patch" (merge patch, RFC 7386): maps merge,
/// `null` deletes a key, lists are replaced whole.
#[tokio::test]
async fn merge_patch_merges_maps_and_deletes_nulls() {
    let sandbox = common::sandbox().await;
    let cms: Api<ConfigMap> = Api::namespaced(common::client(&sandbox).await, "default");
    let mut cm = configmap("mp", &[("keep", "1"), ("drop", "1")]);
    cm.data = Some(BTreeMap::from([("a".to_string(), "1".to_string())]));
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("create");
    let out = cms
        .patch(
            "mp",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {"drop": null, "new": "2"}}, "data": {"b": "2"}}),
            ),
        )
        .await
        .expect("merge");
    let labels = out.metadata.labels.expect("labels");
    assert_eq!(
        labels.into_iter().collect::<Vec<_>>(),
        vec![
            ("keep".to_string(), "1".to_string()),
            ("new".to_string(), "2".to_string())
        ]
    );
    assert_eq!(out.data.expect("data").len(), 2);
    sandbox.shutdown().await;
}

fn deployment(name: &str, containers: serde_json::Value) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": containers}
            }
        }
    }))
    .expect("deployment")
}

/// "Update API Objects in Place Using kubectl patch" (strategic merge patch): a Deployment's
/// containers merge by their `name` key instead of being replaced.
#[tokio::test]
async fn strategic_merge_patch_merges_containers_by_name() {
    let sandbox = common::sandbox().await;
    let deploys: Api<Deployment> = Api::namespaced(common::client(&sandbox).await, "default");
    deploys
        .create(
            &PostParams::default(),
            &deployment("web", json!([{"name": "app", "image": "app:1"}])),
        )
        .await
        .expect("create");
    let out = deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "sidecar", "image": "side:1"},
                {"name": "app", "image": "app:2"},
            ]}}}})),
        )
        .await
        .expect("strategic");
    let containers = out.spec.template.spec.expect("pod spec").containers;
    let mut got: Vec<(String, String)> = containers
        .into_iter()
        .map(|c| (c.name, c.image.unwrap_or_default()))
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("app".into(), "app:2".into()),
            ("sidecar".into(), "side:1".into())
        ]
    );
    sandbox.shutdown().await;
}

/// "Server-Side Apply": apply creates, a second apply by the same manager updates, another
/// manager changing an owned field conflicts with 409 naming the owner, and `force` takes it.
#[tokio::test]
async fn server_side_apply_create_update_conflict_force() {
    let sandbox = common::sandbox().await;
    let cms: Api<ConfigMap> = Api::namespaced(common::client(&sandbox).await, "default");
    let body = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": v}});
    let created = cms
        .patch(
            "ssa",
            &PatchParams::apply("alice"),
            &Patch::Apply(body("1")),
        )
        .await
        .expect("apply creates");
    assert!(created.metadata.uid.is_some());
    let managers: Vec<_> = created
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|m| {
            (
                m.manager.clone().unwrap_or_default(),
                m.operation.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(managers, vec![("alice".to_string(), "Apply".to_string())]);
    let updated = cms
        .patch(
            "ssa",
            &PatchParams::apply("alice"),
            &Patch::Apply(body("2")),
        )
        .await
        .expect("apply updates");
    assert_eq!(updated.data.expect("data")["a"], "2");

    let s = status(
        cms.patch("ssa", &PatchParams::apply("bob"), &Patch::Apply(body("3")))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"), "{s:?}");
    assert_eq!(
        s.message,
        "Apply failed with 1 conflict: conflict with \"alice\": .data.a"
    );
    assert_eq!(
        cms.get("ssa").await.expect("get").data.expect("data")["a"],
        "2"
    );

    let forced = cms
        .patch(
            "ssa",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(body("3")),
        )
        .await
        .expect("forced apply");
    assert_eq!(forced.data.expect("data")["a"], "3");
    let owners: Vec<_> = forced
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.fields_v1
                .as_ref()
                .is_some_and(|f| f.0.to_string().contains("f:a"))
        })
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(owners, vec!["bob".to_string()], "force moves ownership");
    sandbox.shutdown().await;
}

/// "API Concepts" (dry-run): `dryRun=All` on create, update, patch and delete answers as the
/// real request would and persists nothing.
#[tokio::test]
async fn dry_run_changes_nothing() {
    let sandbox = common::sandbox().await;
    let cms: Api<ConfigMap> = Api::namespaced(common::client(&sandbox).await, "default");
    let dry_post = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let would = cms
        .create(&dry_post, &configmap("dry", &[]))
        .await
        .expect("dry create");
    assert_eq!(would.metadata.name.as_deref(), Some("dry"));
    assert!(
        would.metadata.uid.is_some(),
        "a dry-run create still fills system fields"
    );
    assert!(
        cms.get_opt("dry").await.expect("get").is_none(),
        "dry create persisted"
    );

    let real = cms
        .create(&PostParams::default(), &configmap("real", &[]))
        .await
        .expect("create");
    let rv = real.metadata.resource_version.clone();
    let mut changed = real.clone();
    changed.data = Some(BTreeMap::from([("x".to_string(), "y".to_string())]));
    let out = cms
        .replace("real", &dry_post, &changed)
        .await
        .expect("dry update");
    assert_eq!(out.data, changed.data);
    let out = cms
        .patch(
            "real",
            &PatchParams::default().dry_run(),
            &Patch::Merge(json!({"data": {"p": "q"}})),
        )
        .await
        .expect("dry patch");
    assert_eq!(out.data.expect("data")["p"], "q");
    cms.delete("real", &DeleteParams::default().dry_run())
        .await
        .expect("dry delete");
    let now = cms.get("real").await.expect("still there");
    assert_eq!(now.metadata.resource_version, rv, "nothing was written");
    assert_eq!(now.data, None);
    sandbox.shutdown().await;
}

/// "API Concepts" (collections: deletecollection) and "Labels and Selectors": DELETE on a
/// collection with a label selector deletes exactly the matching objects.
#[tokio::test]
async fn delete_collection_with_label_selector() {
    let sandbox = common::sandbox().await;
    let cms: Api<ConfigMap> = Api::namespaced(common::client(&sandbox).await, "default");
    for (n, tier) in [("a", "web"), ("b", "web"), ("c", "db")] {
        cms.create(&PostParams::default(), &configmap(n, &[("tier", tier)]))
            .await
            .expect("create");
    }
    cms.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("tier=web"),
    )
    .await
    .expect("deletecollection");
    let left = cms
        .list(&ListParams::default().labels("tier"))
        .await
        .expect("list");
    assert_eq!(names(&left.items), vec!["c".to_string()]);
    sandbox.shutdown().await;
}

/// "Server-Side Apply" (field management): a create's writer owns what it sent and what
/// decoding defaulted, not what the server sets after — the strategy (a Namespace's
/// `kubernetes` finalizer), the admission plugins (a Pod's service account, its token volume,
/// priority and tolerations) and the allocators (a Service's cluster IPs) — as kube-apiserver's
/// field manager, which runs before them, records it (checked against v1.32.13: differential
/// entry `managed-fields-owned`).
#[tokio::test]
async fn a_create_owns_what_was_sent_and_defaulted_not_what_the_server_added() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let owned =
        |object: &serde_json::Value| object["metadata"]["managedFields"][0]["fieldsV1"].clone();
    let send = |path: &'static str, body: serde_json::Value| {
        let client = client.clone();
        async move {
            let body = serde_json::to_vec(&body).expect("json");
            crate::support::request(
                &client,
                "POST",
                path,
                &[("content-type", "application/json")],
                body,
            )
            .await
            .json()
        }
    };
    let ns = send(
        "/api/v1/namespaces",
        serde_json::json!({"metadata": {"name": "owned"}}),
    )
    .await;
    assert_eq!(ns["spec"]["finalizers"], serde_json::json!(["kubernetes"]));
    assert!(owned(&ns).get("f:spec").is_none(), "{}", owned(&ns));
    let pod = send(
        "/api/v1/namespaces/owned/pods",
        serde_json::json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
    )
    .await;
    assert_eq!(pod["spec"]["serviceAccountName"], "default");
    let spec = &owned(&pod)["f:spec"];
    assert!(
        spec.get("f:dnsPolicy").is_some(),
        "a decode default is the writer's: {spec}"
    );
    for server_set in [
        "f:serviceAccountName",
        "f:serviceAccount",
        "f:volumes",
        "f:tolerations",
        "f:priority",
    ] {
        assert!(spec.get(server_set).is_none(), "{server_set}: {spec}");
    }
    // A status sent with a create of a kind that has a status subresource is reset, and
    // nobody's: a custom resource's here (a built-in's is also left out of every main-resource
    // write's fields).
    widget_crd(&client).await;
    let widget = send(
        "/apis/example.com/v1/namespaces/owned/widgets",
        serde_json::json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w"}, "spec": {"size": 1}, "status": {"ready": true}}),
    )
    .await;
    assert!(widget.get("status").is_none(), "{widget}");
    assert!(
        owned(&widget).get("f:status").is_none(),
        "{}",
        owned(&widget)
    );
    let svc = send(
        "/api/v1/namespaces/owned/services",
        serde_json::json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}}),
    )
    .await;
    assert!(svc["spec"]["clusterIP"].is_string());
    let spec = &owned(&svc)["f:spec"];
    assert!(spec.get("f:type").is_some(), "{spec}");
    for server_set in [
        "f:clusterIP",
        "f:clusterIPs",
        "f:ipFamilies",
        "f:ipFamilyPolicy",
    ] {
        assert!(spec.get(server_set).is_none(), "{server_set}: {spec}");
    }
    sandbox.shutdown().await;
}

/// What a deletion answers, as kube-apiserver v1.32 answers it (each measured by the
/// differential corpus): a Pod deleted at once comes back marked as its graceful deletion marked
/// it (`deletionTimestamp`, `deletionGracePeriodSeconds: 0`); a ConfigMap held by a finalizer is
/// marked with a zero grace period, and the update that removes its last finalizer answers the
/// object as that update left it — without the finalizer — though it is gone; a Namespace being
/// deleted has only its deletion timestamp (its registry's own code).
#[tokio::test]
async fn deletion_answers_carry_what_kube_apiserver_marks() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "default");
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "gone"},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
    let deleted = pods
        .delete("gone", &DeleteParams::default())
        .await
        .expect("delete pod")
        .left()
        .expect("a Pod's DELETE answers the Pod");
    assert!(deleted.metadata.deletion_timestamp.is_some());
    assert_eq!(deleted.metadata.deletion_grace_period_seconds, Some(0));

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut held = configmap("held", &[]);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &held)
        .await
        .expect("create");
    let marked = cms
        .delete("held", &DeleteParams::default())
        .await
        .expect("delete")
        .left()
        .expect("held: the object comes back");
    assert_eq!(marked.metadata.deletion_grace_period_seconds, Some(0));
    let last = cms
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([{"op": "remove", "path": "/metadata/finalizers"}]))
                    .expect("patch"),
            ),
        )
        .await
        .expect("the finalizer removed");
    assert_eq!(last.metadata.finalizers, None, "{last:?}");
    assert!(cms.get_opt("held").await.expect("get").is_none());

    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "leaving"}})).expect("ns"),
        )
        .await
        .expect("create namespace");
    let leaving = namespaces
        .delete("leaving", &DeleteParams::default())
        .await
        .expect("delete namespace")
        .left()
        .expect("a Namespace being deleted");
    assert!(leaving.metadata.deletion_timestamp.is_some());
    assert_eq!(leaving.metadata.deletion_grace_period_seconds, None);
}
