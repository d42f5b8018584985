//! What a write through a subresource keeps of the metadata it writes, as kube-apiserver v1.32's
//! strategies decide it (`pkg/registry/<group>/<resource>/strategy.go`, the status strategy's
//! `PrepareForUpdate`; custom resources: `apiextensions-apiserver/pkg/registry/customresource/
//! status_strategy.go`). Most status strategies reset only spec (`newX.Spec = oldX.Spec`), so
//! labels and annotations written through `pods/status` are stored; admission webhooks that
//! guard metadata must therefore match subresources (`*/*`) and see them, with `subResource`
//! set and the whole object as `object` and `oldObject`.

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use lien_sandbox::testing::{TestWebhook, Verdict};
use serde_json::{Value, json};

use super::support::*;
use crate::common;

/// One kind: its resource, namespace, the object to create, the spec change and status to write
/// through `status`, and what the write should keep.
struct Case(ApiResource, Option<&'static str>, Value, Value, Value, Kept);

/// What a status write did to the labels and annotations it wrote.
#[derive(Debug, PartialEq, Eq)]
enum Kept {
    /// Both stored (the strategy resets spec only).
    Both,
    /// Annotations stored, labels reset (Deployments).
    AnnotationsOnly,
    /// Neither (the strategy resets metadata).
    Neither,
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Creates `object`, writes labels, annotations, a spec change and a status through its
/// `status` subresource (a merge patch, as controllers and kubectl send), and reads back what
/// was stored: the object as created, and after.
async fn write_through_status(
    client: &kube::Client,
    ar: &ApiResource,
    namespace: Option<&str>,
    object: Value,
    spec: Value,
    status: Value,
) -> (DynamicObject, DynamicObject) {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    };
    let mut object: DynamicObject = serde_json::from_value(object).expect("object parses");
    object.types = Some(kube::api::TypeMeta {
        api_version: ar.api_version.clone(),
        kind: ar.kind.clone(),
    });
    let name = object.metadata.name.clone().expect("a name");
    let created = api
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create {}: {e:?}", ar.kind));
    let mut patch = json!({
        "metadata": {
            "labels": {"via-status": "label"},
            "annotations": {"via-status": "annotation"},
        },
        "status": status,
    });
    if !spec.is_null() {
        patch["spec"] = spec;
    }
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap_or_else(|e| panic!("{}/status: {e:?}", ar.plural));
    (created, api.get(&name).await.expect("read back"))
}

fn kept(o: &DynamicObject) -> Kept {
    let label = o
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.get("via-status").is_some_and(|v| v == "label"));
    let annotation = o
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.get("via-status").is_some_and(|v| v == "annotation"));
    match (label, annotation) {
        (true, true) => Kept::Both,
        (false, true) => Kept::AnnotationsOnly,
        (false, false) => Kept::Neither,
        (true, false) => panic!("labels kept but not annotations: {:?}", o.metadata),
    }
}

/// Labels and annotations written through `status`, kind by kind, with the strategy each
/// follows (v1.32): `podStatusStrategy` (spec, owner references), `namespaceStatusStrategy`,
/// `serviceStatusStrategy`, `persistentvolumeclaimStatusStrategy`, `nodeStatusStrategy`,
/// `rcStatusStrategy` (spec only: metadata stored), `deploymentStatusStrategy` (spec and
/// labels), the CRD's `statusStrategy` (calls `ResetObjectMetaForStatus` with the new metadata
/// twice, so metadata is stored), a custom resource's `statusStrategy` (only status taken) and
/// `volumeAttachmentStatusStrategy` (`ResetObjectMetaForStatus`). Spec is never taken.
#[tokio::test]
async fn status_writes_keep_metadata_where_kube_apiservers_status_strategies_do() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let widgets = widget_crd(&client).await;
    let containers = json!([{"name": "app", "image": "nginx:1.27"}]);
    let cases: Vec<Case> = vec![
        Case(
            resource("", "v1", "Pod", "pods"),
            Some("default"),
            json!({"metadata": {"name": "p"}, "spec": {"containers": containers}}),
            json!({"activeDeadlineSeconds": 5}),
            json!({"phase": "Running"}),
            Kept::Both,
        ),
        Case(
            resource("", "v1", "Namespace", "namespaces"),
            None,
            json!({"metadata": {"name": "status-ns"}}),
            json!({"finalizers": ["example.com/x"]}),
            json!({"phase": "Active"}),
            Kept::Both,
        ),
        Case(
            resource("", "v1", "Service", "services"),
            Some("default"),
            json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}}),
            json!({"ports": [{"port": 81}]}),
            json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Checked",
                "message": "ok", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
            Kept::Both,
        ),
        Case(
            resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
            Some("default"),
            json!({"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}),
            json!({"volumeName": "elsewhere"}),
            json!({"phase": "Bound"}),
            Kept::Both,
        ),
        Case(
            resource("", "v1", "Node", "nodes"),
            None,
            json!({"metadata": {"name": "n1"}}),
            json!({"unschedulable": true}),
            json!({"phase": "Running"}),
            Kept::Both,
        ),
        Case(
            resource("", "v1", "ReplicationController", "replicationcontrollers"),
            Some("default"),
            json!({"metadata": {"name": "rc"}, "spec": {"selector": {"app": "rc"},
                "template": {"metadata": {"labels": {"app": "rc"}}, "spec": {"containers": containers}}}}),
            json!({"replicas": 4}),
            json!({"replicas": 0}),
            Kept::Both,
        ),
        Case(
            resource("apps", "v1", "Deployment", "deployments"),
            Some("default"),
            json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "d"}},
                "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": containers}}}}),
            json!({"replicas": 4}),
            json!({"observedGeneration": 1}),
            Kept::AnnotationsOnly,
        ),
        Case(
            resource(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
                "customresourcedefinitions",
            ),
            None,
            serde_json::to_value(
                Api::<DynamicObject>::all_with(
                    client.clone(),
                    &resource(
                        "apiextensions.k8s.io",
                        "v1",
                        "CustomResourceDefinition",
                        "customresourcedefinitions",
                    ),
                )
                .get("widgets.example.com")
                .await
                .expect("the widgets CRD"),
            )
            .map(|mut crd| {
                // The same definition under another name: a CRD of its own to write to.
                crd["metadata"] = json!({"name": "gadgets.example.com"});
                crd["spec"]["names"] = json!({"plural": "gadgets", "singular": "gadget",
                    "kind": "Gadget", "listKind": "GadgetList"});
                crd.as_object_mut().map(|m| m.remove("status"));
                crd
            })
            .expect("json"),
            Value::Null,
            // Its conditions are the CRD controller's, written back at once: none set here.
            json!({}),
            Kept::Both,
        ),
        Case(
            widgets.clone(),
            Some("default"),
            json!({"metadata": {"name": "w"}, "spec": {"size": 1}}),
            json!({"size": 2}),
            json!({"ready": true}),
            Kept::Neither,
        ),
        Case(
            resource(
                "storage.k8s.io",
                "v1",
                "VolumeAttachment",
                "volumeattachments",
            ),
            None,
            json!({"metadata": {"name": "va"}, "spec": {"attacher": "csi.example.com",
                "nodeName": "n1", "source": {"persistentVolumeName": "pv1"}}}),
            json!({"nodeName": "n2"}),
            json!({"attached": true}),
            Kept::Neither,
        ),
    ];
    for Case(ar, namespace, object, spec, status, want) in cases {
        let (created, stored) =
            write_through_status(&client, &ar, namespace, object, spec, status.clone()).await;
        assert_eq!(kept(&stored), want, "{}: {:?}", ar.plural, stored.metadata);
        assert_eq!(
            stored.data["spec"], created.data["spec"],
            "{}: spec is never taken through status",
            ar.plural
        );
        for (field, value) in status.as_object().into_iter().flatten() {
            assert_eq!(
                &stored.data["status"][field], value,
                "{}: status.{field} is taken",
                ar.plural
            );
        }
    }
    sandbox.shutdown().await;
}

/// `podStatusStrategy` resets owner references ("old kubelets corrupt them") while it stores
/// labels: the two halves of one write.
/// `ValidateLoadBalancerStatus` (v1.32): ingress points only on a `LoadBalancer` Service — a
/// ClusterIP Service's `status.loadBalancer.ingress` is refused 422 (found by the real tier:
/// the sandbox took it).
#[tokio::test]
async fn a_cluster_ip_services_status_takes_no_load_balancer_ingress() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let services = resource("", "v1", "Service", "services");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &services);
    for (name, type_) in [("internal", "ClusterIP"), ("public", "LoadBalancer")] {
        let service: DynamicObject = serde_json::from_value(json!({"apiVersion": "v1",
            "kind": "Service", "metadata": {"name": name},
            "spec": {"type": type_, "ports": [{"port": 80}]}}))
        .expect("service");
        api.create(&PostParams::default(), &service)
            .await
            .expect("create");
        let written = api
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}]}}}),
                ),
            )
            .await;
        match (type_, written) {
            ("LoadBalancer", Ok(_)) => {}
            ("ClusterIP", Err(kube::Error::Api(s))) => {
                assert_eq!(s.code, 422, "{s:?}");
                assert_eq!(
                    s.message,
                    format!(
                        "Service \"{name}\" is invalid: status.loadBalancer.ingress: Forbidden: may only be used when `spec.type` is 'LoadBalancer'"
                    )
                );
            }
            (t, other) => panic!("{t}: {other:?}"),
        }
    }
    sandbox.shutdown().await;
}

#[tokio::test]
async fn a_pod_status_write_keeps_labels_but_not_owner_references() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let pods = resource("", "v1", "Pod", "pods");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &pods);
    let pod: DynamicObject = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "owned"},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}))
    .expect("pod");
    api.create(&PostParams::default(), &pod)
        .await
        .expect("create");
    let owner = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "o",
        "uid": "6b1c2d3e-0000-4000-8000-000000000001"}]);
    let written = api
        .patch_status(
            "owned",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"ownerReferences": owner,
                "labels": {"lien.dev/in-use": "true"}}})),
        )
        .await
        .expect("pods/status");
    assert_eq!(written.metadata.owner_references, None);
    assert_eq!(
        written
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("lien.dev/in-use"))
            .map(String::as_str),
        Some("true")
    );
    sandbox.shutdown().await;
}

/// `namespaceFinalizeStrategy.PrepareForUpdate` resets status only: the finalizers and the
/// metadata a `finalize` write carries are stored.
#[tokio::test]
async fn a_namespace_finalize_write_keeps_its_metadata() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let namespaces = resource("", "v1", "Namespace", "namespaces");
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &namespaces);
    let ns: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fin"}}),
    )
    .expect("namespace");
    let mut ns = api
        .create(&PostParams::default(), &ns)
        .await
        .expect("create");
    ns.metadata
        .annotations
        .get_or_insert_default()
        .insert("via-finalize".into(), "yes".into());
    ns.data["spec"]["finalizers"] = json!([]);
    ns.data["status"]["phase"] = json!("Terminating");
    let body = serde_json::to_vec(&ns).expect("json");
    let reply = request(
        &client,
        "PUT",
        "/api/v1/namespaces/fin/finalize",
        &[("content-type", "application/json")],
        body,
    )
    .await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let stored = api.get("fin").await.expect("get");
    assert_eq!(
        stored
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("via-finalize"))
            .map(String::as_str),
        Some("yes")
    );
    assert_eq!(stored.data["spec"]["finalizers"], json!([]));
    assert_eq!(stored.data["status"]["phase"], "Active", "status is reset");
    sandbox.shutdown().await;
}

/// "Dynamic Admission Control", matching requests: rules: `pods` and `*` match the main
/// resource only, `*/*` and `pods/status` its subresources too; a status write is reviewed with
/// `subResource: status` and the whole Pod, old and new, as the webhook must see it to guard
/// metadata written that way.
#[tokio::test]
async fn a_status_write_reaches_subresource_rules_with_the_whole_object() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let main_only = TestWebhook::start(|_| Verdict::Allow)
        .await
        .expect("webhook");
    let every = TestWebhook::start(|_| Verdict::Allow)
        .await
        .expect("webhook");
    let rule = |resources: Value| {
        json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
            "resources": resources, "scope": "*"}])
    };
    register(
        &client,
        main_only.configuration("main", rule(json!(["*"])), "Fail", None),
    )
    .await;
    register(
        &client,
        every.configuration("every", rule(json!(["*/*"])), "Fail", None),
    )
    .await;
    let pods = resource("", "v1", "Pod", "pods");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &pods);
    let pod: DynamicObject = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "watched", "labels": {"lien.dev/in-use": "true"}},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}))
    .expect("pod");
    api.create(&PostParams::default(), &pod)
        .await
        .expect("create");
    api.patch_status(
        "watched",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"lien.dev/in-use": null}},
            "status": {"phase": "Running"}})),
    )
    .await
    .expect("pods/status");
    assert!(
        main_only.requests().is_empty(),
        "`*` excludes subresources: {:?}",
        main_only.requests()
    );
    let seen = every.requests();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let r = &seen[0];
    assert_eq!(r["subResource"], "status");
    assert_eq!(r["kind"]["kind"], "Pod");
    assert_eq!(r["object"]["kind"], "Pod");
    assert_eq!(r["object"]["spec"]["containers"][0]["name"], "app");
    assert_eq!(
        r["oldObject"]["metadata"]["labels"]["lien.dev/in-use"],
        "true"
    );
    assert!(
        r["object"]["metadata"]["labels"]
            .get("lien.dev/in-use")
            .is_none(),
        "the label's removal is what the webhook is asked about: {r}"
    );
    main_only.stop().await;
    every.stop().await;
    sandbox.shutdown().await;
}
