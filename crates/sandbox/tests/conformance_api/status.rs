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
use crate::common::{self, client, client_for, sandbox_with};
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

/// What kube-apiserver answers for a path nothing serves — measured on kube-apiserver v1.32.13
/// (issue 29: `kubectl lien plan --apply` deleted a CRD and its instance in one step and then
/// failed to read the instance, whose path was gone): under a group no built-in API serves
/// (an unknown one, a CRD's group with an unknown resource or version, a namespaced custom
/// resource named without its namespace, the path of a kind whose CRD was deleted) it is the
/// not-found handler's bare `404 page not found` as text — no `Status`, so clients that read
/// `reason` (kube-rs's `is_not_found`) do not see NotFound — while a built-in group answers its
/// own unknown paths with a `Status`, and a served kind's missing object is NotFound.
#[tokio::test]
async fn a_path_nothing_serves_is_a_bare_404_outside_the_built_in_groups() {
    let sandbox = common::sandbox().await;
    let admin = client(&sandbox).await;
    let ar = widget_crd(&admin).await;
    let bare = |reply: Reply, path: &str| {
        assert_eq!(
            (
                reply.status,
                reply.content_type.as_str(),
                String::from_utf8_lossy(&reply.body).as_ref()
            ),
            (404, "text/plain; charset=utf-8", "404 page not found\n"),
            "{path}"
        );
    };
    for path in [
        "/apis/nonexistent.example",
        "/apis/nonexistent.example/v1",
        "/apis/nonexistent.example/v1/namespaces/default/foos/x",
        "/apis/example.com/v1/namespaces/default/gadgets/x",
        "/apis/example.com/v2/namespaces/default/widgets/x",
        "/apis/example.com/v1/widgets/x",
    ] {
        for method in ["GET", "DELETE"] {
            bare(request(&admin, method, path, &[], vec![]).await, path);
        }
    }
    for path in [
        "/apis/apps/v1/namespaces/default/foos/x",
        "/apis/apps/v9/deployments",
    ] {
        assert_eq!(
            send(&admin, "DELETE", path, Value::Null).await,
            (
                404,
                failure(
                    "the server could not find the requested resource",
                    "NotFound",
                    json!({}),
                    404
                )
            ),
            "{path}"
        );
    }
    let widgets = "/apis/example.com/v1/namespaces/default/widgets/x";
    let (code, body) = send(&admin, "GET", widgets, Value::Null).await;
    assert_eq!((code, body["reason"].as_str()), (404, Some("NotFound")));
    assert_eq!(body["message"], "widgets.example.com \"x\" not found");
    // The CRD deleted: its kind's paths go with it.
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(admin.clone());
    crds.delete(&format!("{}.{}", ar.plural, ar.group), &Default::default())
        .await
        .expect("the CRD's DELETE");
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let reply = request(&admin, "GET", widgets, &[], vec![]).await;
        if reply.content_type.starts_with("text/plain") {
            bare(reply, widgets);
            break;
        }
        assert!(std::time::Instant::now() < end, "{widgets} still served");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let gone = Api::<kube::api::DynamicObject>::namespaced_with(admin, "default", &ar)
        .get_opt("x")
        .await;
    assert!(
        matches!(&gone, Err(kube::Error::Api(s)) if s.code == 404 && s.reason != "NotFound"),
        "kube-rs does not take a bare 404 for NotFound: {gone:?}"
    );
}
