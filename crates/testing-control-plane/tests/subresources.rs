//! The referee for issue 28 §2, on kube-apiserver v1.32.13 itself: what a write through a
//! subresource keeps of the metadata it writes (the sandbox's `Strategy::status_metadata`,
//! `sandbox/tests/conformance_api/status_metadata.rs`), and that Lien's generated webhook
//! configurations — `*/*` rules, CEL match conditions reading `request.subResource` — are
//! accepted and send exactly the subresource writes that change Lien's label or annotations.

use std::time::{Duration, Instant};

use base64::Engine;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use lien_testing_control_plane::ControlPlane;
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(60);

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

fn api(client: &kube::Client, ar: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    }
}

async fn create(client: &kube::Client, ar: &ApiResource, ns: Option<&str>, object: Value) {
    let mut object = object;
    object["apiVersion"] = json!(ar.api_version);
    object["kind"] = json!(ar.kind);
    let object: DynamicObject = serde_json::from_value(object).expect("object");
    api(client, ar, ns)
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create {}: {e:?}", ar.kind));
}

fn pods() -> ApiResource {
    resource("", "v1", "Pod", "pods")
}

fn pod(name: &str, labels: Value) -> Value {
    json!({"metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}})
}

/// A CRD `widgets.example.com` with a status subresource, served.
async fn widgets(client: &kube::Client) -> ApiResource {
    let crds = resource(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    create(
        client,
        &crds,
        None,
        json!({"metadata": {"name": "widgets.example.com"}, "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}}),
    )
    .await;
    let ar = resource("example.com", "v1", "Widget", "widgets");
    let served = api(client, &ar, Some("default"));
    let deadline = Instant::now() + DEADLINE;
    while served.list(&Default::default()).await.is_err() {
        assert!(Instant::now() < deadline, "widgets are not served");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ar
}

fn via_status() -> Value {
    json!({"metadata": {"labels": {"via-status": "label"},
        "annotations": {"via-status": "annotation"}}})
}

/// (label kept, annotation kept) after a write of both through `status`.
async fn kept(
    client: &kube::Client,
    ar: &ApiResource,
    ns: Option<&str>,
    name: &str,
) -> (bool, bool) {
    let api = api(client, ar, ns);
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(via_status()))
        .await
        .unwrap_or_else(|e| panic!("{}/status: {e:?}", ar.plural));
    let o = api.get(name).await.expect("read back");
    let has = |m: &Option<std::collections::BTreeMap<String, String>>| {
        m.as_ref().is_some_and(|m| m.contains_key("via-status"))
    };
    (has(&o.metadata.labels), has(&o.metadata.annotations))
}

/// The sandbox's table, on kube-apiserver: labels and annotations written through `status` are
/// stored for Pods, Services, Namespaces, PVCs, ReplicationControllers and CRDs; a Deployment
/// keeps the annotations only; a custom resource neither. A Pod's owner references written
/// there are not kept; `namespaces/finalize` keeps metadata.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_writes_keep_the_metadata_the_sandbox_says() {
    let cp = ControlPlane::start().expect("the control plane starts");
    let client = cp.client().await.expect("an admin client");
    let ns = Some("default");
    let containers = json!([{"name": "app", "image": "registry.k8s.io/pause:3.10"}]);
    create(&client, &pods(), ns, pod("p", json!({}))).await;
    let services = resource("", "v1", "Service", "services");
    create(
        &client,
        &services,
        ns,
        json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}}),
    )
    .await;
    let namespaces = resource("", "v1", "Namespace", "namespaces");
    create(
        &client,
        &namespaces,
        None,
        json!({"metadata": {"name": "status-ns"}}),
    )
    .await;
    let pvcs = resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims");
    create(
        &client,
        &pvcs,
        ns,
        json!({"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}}),
    )
    .await;
    let rcs = resource("", "v1", "ReplicationController", "replicationcontrollers");
    create(
        &client,
        &rcs,
        ns,
        json!({"metadata": {"name": "rc"}, "spec": {"replicas": 0, "selector": {"app": "rc"},
            "template": {"metadata": {"labels": {"app": "rc"}}, "spec": {"containers": containers}}}}),
    )
    .await;
    let deployments = resource("apps", "v1", "Deployment", "deployments");
    create(
        &client,
        &deployments,
        ns,
        json!({"metadata": {"name": "d"}, "spec": {"replicas": 0,
            "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": containers}}}}),
    )
    .await;
    let widgets = widgets(&client).await;
    create(
        &client,
        &widgets,
        ns,
        json!({"metadata": {"name": "w"}, "spec": {"size": 1}}),
    )
    .await;
    let crds = resource(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    for (ar, ns, name, want) in [
        (&pods(), ns, "p", (true, true)),
        (&services, ns, "s", (true, true)),
        (&namespaces, None, "status-ns", (true, true)),
        (&pvcs, ns, "c", (true, true)),
        (&rcs, ns, "rc", (true, true)),
        (&deployments, ns, "d", (false, true)),
        (&crds, None, "widgets.example.com", (true, true)),
        (&widgets, ns, "w", (false, false)),
    ] {
        assert_eq!(kept(&client, ar, ns, name).await, want, "{}", ar.plural);
    }

    // A Pod's owner references are not taken through `status`.
    let owned = api(&client, &pods(), ns)
        .patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"ownerReferences": [{"apiVersion": "v1",
                "kind": "ConfigMap", "name": "o", "uid": "6b1c2d3e-0000-4000-8000-000000000001"}]}})),
        )
        .await
        .expect("pods/status");
    assert_eq!(owned.metadata.owner_references, None);

    // `namespaces/finalize` keeps the metadata it writes.
    let ns_api = api(&client, &namespaces, None);
    let mut finalize =
        serde_json::to_value(ns_api.get("status-ns").await.expect("get")).expect("json");
    finalize["metadata"]["annotations"]["via-finalize"] = json!("yes");
    ns_api
        .replace_subresource("finalize", "status-ns", &PostParams::default(), &finalize)
        .await
        .expect("namespaces/finalize");
    let stored = ns_api.get("status-ns").await.expect("get");
    assert_eq!(
        stored
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("via-finalize"))
            .map(String::as_str),
        Some("yes")
    );
}

/// Lien's configurations, generated as `lien run` writes them, pointing at a port where nothing
/// answers: a write a hook matches fails ("failed calling webhook"), any other goes through. So
/// kube-apiserver accepts their CEL, and sends status, finalize and binding writes that change
/// Lien's label or annotations — and no other write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lien_hooks_see_subresource_writes_of_its_label_and_annotations_only() {
    let cp = ControlPlane::start().expect("the control plane starts");
    let client = cp.client().await.expect("an admin client");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let opts = lien_webhook::ConfigurationOptions::new(lien_webhook::ClientConfig::Url(format!(
        "https://127.0.0.1:{port}/validate"
    )));
    let ca = std::fs::read(&cp.ready().ca).expect("the cluster CA");
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca);
    let ns = Some("default");
    create(
        &client,
        &pods(),
        ns,
        pod("in-use", json!({"lien.dev/in-use": "true"})),
    )
    .await;
    create(&client, &pods(), ns, pod("unscheduled", json!({}))).await;
    let namespaces = resource("", "v1", "Namespace", "namespaces");
    create(
        &client,
        &namespaces,
        None,
        json!({"metadata": {"name": "hooked"}}),
    )
    .await;
    for (configuration, ar) in [
        (
            lien_webhook::validating_webhook_configuration(&opts, &bundle),
            resource(
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingWebhookConfiguration",
                "validatingwebhookconfigurations",
            ),
        ),
        (
            lien_webhook::mutating_webhook_configuration(&opts, &bundle),
            resource(
                "admissionregistration.k8s.io",
                "v1",
                "MutatingWebhookConfiguration",
                "mutatingwebhookconfigurations",
            ),
        ),
    ] {
        create(&client, &ar, None, configuration).await;
    }

    let pods = api(&client, &pods(), ns);
    let pp = PatchParams::default();
    let record = "lien.dev/deletion-attempt";
    let sent_to = |result: Result<DynamicObject, kube::Error>, hook: &str| match result {
        Err(kube::Error::Api(s)) => assert!(
            s.message
                .contains(&format!("failed calling webhook \"{hook}\"")),
            "{hook}: {s:?}"
        ),
        other => panic!("{hook} was not called: {other:?}"),
    };
    // kube-apiserver reads hooks a moment after their creation: the first matched write may
    // still go through, so wait until one fails as it should.
    let deadline = Instant::now() + DEADLINE;
    loop {
        let r = pods
            .patch_status(
                "in-use",
                &pp,
                &Patch::Merge(json!({"metadata": {"labels": {"lien.dev/in-use": null}}})),
            )
            .await;
        if r.is_err() {
            sent_to(r, "tamper.lien.dev");
            break;
        }
        // It went through unseen: put the label back and try again.
        pods.patch(
            "in-use",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"lien.dev/in-use": "true"}}})),
        )
        .await
        .expect("relabel");
        assert!(Instant::now() < deadline, "the hooks never took effect");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let status_patch = |metadata: Value| Patch::Merge(json!({"metadata": metadata}));
    sent_to(
        pods.patch_status(
            "in-use",
            &pp,
            &status_patch(json!({"annotations": {record: "{}"}})),
        )
        .await,
        "seal.lien.dev",
    );
    sent_to(
        pods.patch_status(
            "in-use",
            &pp,
            &status_patch(json!({"annotations": {"lien.dev/break-glass": "now"}})),
        )
        .await,
        "break-glass.lien.dev",
    );
    // On a Pod no hook watches (no label) the record is still Lien's business.
    sent_to(
        pods.patch_status(
            "unscheduled",
            &pp,
            &status_patch(json!({"annotations": {record: "{}"}})),
        )
        .await,
        "seal.lien.dev",
    );
    // A Binding's annotations land on the Pod.
    let binding = json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "unscheduled", "annotations": {record: "{}"}},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}});
    let request = kube::core::Request::new("/api/v1/namespaces/default/pods/unscheduled/binding")
        .create(
            &PostParams::default(),
            serde_json::to_vec(&binding).expect("json"),
        )
        .expect("request");
    let r = client.request::<Value>(request).await;
    match r {
        Err(kube::Error::Api(s)) => assert!(
            s.message
                .contains("failed calling webhook \"seal.lien.dev\""),
            "{s:?}"
        ),
        other => panic!("seal.lien.dev was not called for pods/binding: {other:?}"),
    }
    let ns_api = api(&client, &namespaces, None);
    let mut finalize =
        serde_json::to_value(ns_api.get("hooked").await.expect("get")).expect("json");
    finalize["metadata"]["annotations"] = json!({record: "{}"});
    sent_to(
        ns_api
            .replace_subresource("finalize", "hooked", &PostParams::default(), &finalize)
            .await,
        "seal.lien.dev",
    );

    // Nothing else reaches Lien: an ordinary status write of a Pod in use, a record on a new
    // object (it names no UID yet), a scale.
    pods.patch_status(
        "in-use",
        &pp,
        &Patch::Merge(json!({"status": {"conditions": [{"type": "Example", "status": "True"}]}})),
    )
    .await
    .expect("an ordinary status write");
    create(
        &client,
        &resource("", "v1", "ConfigMap", "configmaps"),
        ns,
        json!({"metadata": {"name": "carries-one", "annotations": {record: "{}"}}}),
    )
    .await;
    let after = pods.get("in-use").await.expect("get");
    assert_eq!(
        after
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("lien.dev/in-use"))
            .map(String::as_str),
        Some("true"),
        "the label stayed"
    );
    assert!(
        after
            .metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key(record)),
        "no record was stored"
    );
}
