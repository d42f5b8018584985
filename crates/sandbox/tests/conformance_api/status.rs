//! Failures are `Status` objects encoded exactly as kube-apiserver encodes them
//! (<https://kubernetes.io/docs/reference/using-api/api-concepts/#responses>,
//! `metav1.Status` and `k8s.io/apimachinery/pkg/api/errors`): `kind`, `apiVersion`, empty
//! `metadata`, `status: Failure`, `message`, `reason`, `details` with the `name`, `group` (only
//! when not core), `kind` (the resource for most errors, the Kind for Invalid) and `causes`
//! (only when there are any), and `code`. Typed clients (the Python client's `ApiException`,
//! client-go's `StatusError`) read these fields.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use super::support::*;
use crate::common::{client, client_for, sandbox_with};
use lien_sandbox::apiserver::Authorization;

async fn send(client: &kube::Client, method: &str, path: &str, body: Value) -> (u16, Value) {
    let body = if body.is_null() {
        vec![]
    } else {
        serde_json::to_vec(&body).expect("json")
    };
    let reply = request(
        client,
        method,
        path,
        &[("content-type", "application/json")],
        body,
    )
    .await;
    (reply.status, reply.json_or_null())
}

fn failure(message: &str, reason: &str, details: Value, code: u16) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "details": details, "code": code})
}

#[tokio::test]
async fn status_errors_are_encoded_as_kube_apiserver_encodes_them() {
    let sandbox = sandbox_with(|c| c.authorization = Authorization::Rbac).await;
    let admin = client(&sandbox).await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    Api::<ConfigMap>::namespaced(admin.clone(), "default")
        .create(
            &PostParams::default(),
            &serde_json::from_value(cm.clone()).expect("cm"),
        )
        .await
        .expect("created");

    assert_eq!(
        send(&admin, "GET", &format!("{cms}/missing"), Value::Null).await,
        (
            404,
            failure(
                "configmaps \"missing\" not found",
                "NotFound",
                json!({"name": "missing", "kind": "configmaps"}),
                404
            )
        )
    );
    assert_eq!(
        send(
            &admin,
            "GET",
            "/apis/apps/v1/namespaces/default/deployments/missing",
            Value::Null
        )
        .await,
        (
            404,
            failure(
                "deployments.apps \"missing\" not found",
                "NotFound",
                json!({"name": "missing", "group": "apps", "kind": "deployments"}),
                404
            )
        )
    );
    assert_eq!(
        send(&admin, "POST", cms, cm.clone()).await,
        (
            409,
            failure(
                "configmaps \"c\" already exists",
                "AlreadyExists",
                json!({"name": "c", "kind": "configmaps"}),
                409
            )
        )
    );
    let mut stale = cm.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    assert_eq!(
        send(&admin, "PUT", &format!("{cms}/c"), stale).await,
        (
            409,
            failure(
                "Operation cannot be fulfilled on configmaps \"c\": the object has been modified; please apply your changes to the latest version and try again",
                "Conflict",
                json!({"name": "c", "kind": "configmaps"}),
                409
            )
        )
    );
    let bad = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad_Name"}});
    assert_eq!(
        send(&admin, "POST", cms, bad).await,
        (
            422,
            failure(
                "ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                "Invalid",
                json!({"name": "Bad_Name", "kind": "ConfigMap", "causes": [{
                    "reason": "FieldValueInvalid",
                    "message": "Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                    "field": "metadata.name"}]}),
                422
            )
        )
    );
    let user = client_for(&sandbox, "sandbox-user").await;
    assert_eq!(
        send(&user, "GET", &format!("{cms}/c"), Value::Null).await,
        (
            403,
            failure(
                "configmaps \"c\" is forbidden: User \"sandbox-user\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"default\"",
                "Forbidden",
                json!({"name": "c", "kind": "configmaps"}),
                403
            )
        )
    );
    assert_eq!(
        send(&admin, "POST", &format!("{cms}/c"), Value::Null).await,
        (
            405,
            failure(
                "the server does not allow this method on the requested resource",
                "MethodNotAllowed",
                json!({}),
                405
            )
        )
    );
}
