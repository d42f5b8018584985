//! The built-in API of Kubernetes 1.32: discovery of every resource with its subresources,
//! short names and categories; OpenAPI definitions; strict field validation of built-in kinds.

use serde_json::{Value, json};

use super::common;
use crate::support::request;

/// One raw request through the test client: status, `Warning` headers and the JSON body.
async fn send(
    client: &kube::Client,
    method: &str,
    uri: &str,
    content_type: &str,
    body: Option<Value>,
) -> (u16, Vec<String>, Value) {
    let bytes = body.map_or_else(Vec::new, |b| serde_json::to_vec(&b).expect("body"));
    send_raw(client, method, uri, content_type, bytes).await
}

async fn send_raw(
    client: &kube::Client,
    method: &str,
    uri: &str,
    content_type: &str,
    bytes: Vec<u8>,
) -> (u16, Vec<String>, Value) {
    let reply = request(
        client,
        method,
        uri,
        &[("content-type", content_type)],
        bytes,
    )
    .await;
    let json = reply.json_or_null();
    (reply.status, reply.warnings, json)
}

async fn get(client: &kube::Client, uri: &str) -> (u16, Vec<String>, Value) {
    send(client, "GET", uri, "application/json", None).await
}

async fn post(client: &kube::Client, uri: &str, body: Value) -> (u16, Vec<String>, Value) {
    send(client, "POST", uri, "application/json", Some(body)).await
}

fn entry<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["resources"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["name"] == name))
        .unwrap_or_else(|| panic!("{name} not in {list}"))
}

/// "Discovering the Kubernetes API" / kube-apiserver's `APIResourceList`: every built-in
/// resource with its verbs, short names and categories, and every subresource, naming the
/// group, version and kind of a subresource of another kind (k/k
/// staging/src/k8s.io/apiserver/pkg/endpoints/installer.go, pkg/registry/*/storage/storage.go).
#[tokio::test]
async fn discovery_lists_builtins_subresources_short_names_and_categories() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let (code, _, core) = get(&client, "/api/v1").await;
    assert_eq!(code, 200);
    let pods = entry(&core, "pods");
    assert_eq!(pods["shortNames"], json!(["po"]));
    assert_eq!(pods["categories"], json!(["all"]));
    assert_eq!(pods["singularName"], "pod");
    let eviction = entry(&core, "pods/eviction");
    assert_eq!(
        (&eviction["group"], &eviction["version"], &eviction["kind"]),
        (&json!("policy"), &json!("v1"), &json!("Eviction"))
    );
    assert_eq!(eviction["verbs"], json!(["create"]));
    assert_eq!(entry(&core, "pods/log")["verbs"], json!(["get"]));
    assert_eq!(
        entry(&core, "pods/status")["verbs"],
        json!(["get", "patch", "update"])
    );
    assert_eq!(
        entry(&core, "serviceaccounts/token")["kind"],
        "TokenRequest"
    );
    assert_eq!(entry(&core, "nodes")["namespaced"], false);
    assert_eq!(
        entry(&core, "componentstatuses")["verbs"],
        json!(["get", "list"])
    );
    assert_eq!(entry(&core, "bindings")["verbs"], json!(["create"]));

    let (_, _, apps) = get(&client, "/apis/apps/v1").await;
    // Listed in the order kube-apiserver's installer registers them: sorted by name
    // (`deployments`, `deployments/scale`, `deployments/status`; `namespaces/finalize` before
    // `namespaces/status`).
    for list in [&core, &apps] {
        let names: Vec<&str> = list["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
    }
    let scale = entry(&apps, "deployments/scale");
    assert_eq!(
        (&scale["group"], &scale["kind"]),
        (&json!("autoscaling"), &json!("Scale"))
    );
    let (_, _, batch) = get(&client, "/apis/batch/v1").await;
    assert_eq!(entry(&batch, "cronjobs")["shortNames"], json!(["cj"]));
    assert_eq!(entry(&batch, "jobs")["categories"], json!(["all"]));

    // autoscaling is served at v2 (preferred) and v1; alpha and beta versions are off by
    // default in 1.32, as in kube-apiserver.
    let (_, _, autoscaling) = get(&client, "/apis/autoscaling").await;
    assert_eq!(autoscaling["preferredVersion"]["version"], "v2");
    let versions: Vec<&str> = autoscaling["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .filter_map(|v| v["version"].as_str())
        .collect();
    assert_eq!(versions, ["v2", "v1"]);
    let (_, _, groups) = get(&client, "/apis").await;
    let all = groups.to_string();
    assert!(!all.contains("v1beta") && !all.contains("v1alpha"), "{all}");
    sandbox.shutdown().await;
}

/// A method kube-apiserver installs no route for answers 405 MethodNotAllowed
/// (staging/src/k8s.io/apiserver/pkg/endpoints/installer.go installs one route per verb the
/// storage implements): listing a create-only review. A subresource listed in discovery that
/// the sandbox cannot serve (it runs no containers) answers 405 too (docs/sandbox.md).
#[tokio::test]
async fn unimplemented_verbs_and_unserved_subresources_answer_405() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let (code, _, s) = get(
        &client,
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
    )
    .await;
    assert_eq!(
        (code, &s["reason"]),
        (405, &json!("MethodNotAllowed")),
        "{s}"
    );
    assert_eq!(
        s["message"],
        "the server does not allow this method on the requested resource"
    );
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let (code, _, _) = post(&client, "/api/v1/namespaces/default/pods", pod).await;
    assert_eq!(code, 201);
    let (code, _, s) = get(&client, "/api/v1/namespaces/default/pods/p/log").await;
    assert_eq!(
        (code, &s["reason"]),
        (405, &json!("MethodNotAllowed")),
        "{s}"
    );
    sandbox.shutdown().await;
}

/// "Kubernetes API" (OpenAPI): `/openapi/v3/apis/apps/v1` carries kube-apiserver's definitions
/// with descriptions and `x-kubernetes-group-version-kind`; `/openapi/v2` the same definitions
/// in Swagger 2.0 form (`#/definitions/` refs); its protobuf form is in `openapi_v2.rs`.
#[tokio::test]
async fn openapi_documents_carry_builtin_definitions() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let (code, _, doc) = get(&client, "/openapi/v3/apis/apps/v1").await;
    assert_eq!(code, 200);
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["io.k8s.api.apps.v1.Deployment"]["x-kubernetes-group-version-kind"],
        json!([{"group": "apps", "version": "v1", "kind": "Deployment"}])
    );
    let spec = &schemas["io.k8s.api.apps.v1.Deployment"]["properties"]["spec"];
    assert_eq!(
        spec["allOf"],
        json!([{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"}])
    );
    assert!(
        schemas["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["replicas"]["description"]
            .as_str()
            .is_some_and(|d| d.starts_with("Number of desired pods.")),
    );
    assert!(
        schemas["io.k8s.api.core.v1.PodSpec"].is_object(),
        "reachable definitions are included"
    );

    let (code, _, v2) = get(&client, "/openapi/v2").await;
    assert_eq!(code, 200);
    assert_eq!(v2["swagger"], "2.0");
    assert_eq!(
        v2["definitions"]["io.k8s.api.apps.v1.Deployment"]["properties"]["spec"]["$ref"],
        "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
    );
    sandbox.shutdown().await;
}

/// "API Concepts" (field validation) and k/k staging/src/k8s.io/apiserver/pkg/endpoints/handlers
/// (create.go, update.go, patch.go with rest.go's strict decoding): an unknown field of a
/// built-in kind is 400 under `fieldValidation=Strict` (a POST/PUT body's error wrapped as
/// undecodable, a patch's bare), a `Warning` under `Warn`, nothing under `Ignore`; in every case
/// the field is not stored (the Go struct has nowhere to keep it). `metadata` is checked too.
#[tokio::test]
async fn builtin_unknown_fields_strict_warn_ignore() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let cm = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}, "bogus": 1});

    let (code, _, s) = post(&client, &format!("{cms}?fieldValidation=Strict"), cm("s")).await;
    assert_eq!((code, &s["reason"]), (400, &json!("BadRequest")), "{s}");
    assert_eq!(
        s["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"bogus\""
    );
    let mut meta = cm("m");
    meta.as_object_mut().expect("object").remove("bogus");
    meta["metadata"]["bogus"] = json!("x");
    let (code, _, s) = post(&client, &format!("{cms}?fieldValidation=Strict"), meta).await;
    assert_eq!(code, 400, "{s}");
    assert!(
        s["message"].as_str().is_some_and(|m| m.ends_with("strict decoding error: unknown field \"metadata.bogus\"")),
        "{s}"
    );

    let (code, warnings, created) =
        post(&client, &format!("{cms}?fieldValidation=Warn"), cm("w")).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(warnings, [r#"299 - "unknown field \"bogus\"""#]);
    assert!(created.get("bogus").is_none(), "{created}");
    assert_eq!(created["data"]["a"], "b");

    let (code, warnings, created) =
        post(&client, &format!("{cms}?fieldValidation=Ignore"), cm("i")).await;
    assert_eq!(code, 201, "{created}");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(created.get("bogus").is_none(), "{created}");

    // Duplicate fields exist only in the body as sent; strict decoding reports them with the
    // unknown ones in document order (k/k test/integration/apiserver/field_validation_test.go).
    let dup = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup","name":"dup"},"data":{"a":"b"},"bogus":1}"#;
    let (code, _, s) = send_raw(
        &client,
        "POST",
        &format!("{cms}?fieldValidation=Strict"),
        "application/json",
        dup.to_vec(),
    )
    .await;
    assert_eq!(code, 400, "{s}");
    assert_eq!(
        s["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: duplicate field \"metadata.name\", unknown field \"bogus\""
    );
    let (code, warnings, _) = send_raw(
        &client,
        "POST",
        &format!("{cms}?fieldValidation=Warn"),
        "application/json",
        dup.to_vec(),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(
        warnings,
        [
            r#"299 - "duplicate field \"metadata.name\"""#,
            r#"299 - "unknown field \"bogus\"""#
        ]
    );

    // PUT: wrapped like a POST body.
    let mut update = created.clone();
    update["bogus"] = json!(2);
    let (code, _, s) = send(
        &client,
        "PUT",
        &format!("{cms}/i?fieldValidation=Strict"),
        "application/json",
        Some(update),
    )
    .await;
    assert_eq!(code, 400, "{s}");
    assert_eq!(
        s["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"bogus\""
    );

    // A merge patch of a Deployment: the bare strict decoding error with the field's path.
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    let (code, _, s) = post(
        &client,
        "/apis/apps/v1/namespaces/default/deployments?fieldValidation=Strict",
        deploy,
    )
    .await;
    assert_eq!(code, 201, "{s}");
    let (code, _, s) = send(
        &client,
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/d?fieldValidation=Strict",
        "application/merge-patch+json",
        Some(json!({"spec": {"replicas": 2, "bogus": true, "template": {"spec": {"containers": [{"name": "c", "image": "nginx", "imagePullPolicyy": "Always"}]}}}})),
    )
    .await;
    assert_eq!(code, 400, "{s}");
    assert_eq!(
        s["message"],
        "strict decoding error: unknown field \"spec.bogus\", unknown field \"spec.template.spec.containers[0].imagePullPolicyy\""
    );
    sandbox.shutdown().await;
}
