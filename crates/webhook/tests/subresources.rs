//! Writes through subresources, on reviews shaped as kube-apiserver sends them (`subResource`
//! set; for `status` and `finalize` the whole object as `object` and `oldObject`; for
//! `pods/binding` a CREATE of a Binding). kube-apiserver keeps metadata written through most
//! status subresources and `namespaces/finalize`, and copies a Binding's annotations onto its
//! Pod, so Lien's label, break-glass annotation and replay records must not change that way:
//! `/validate` (tamper and break-glass hooks) and `/mutate` (seal hook) refuse it, whoever asks.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, header};
use lien_core::seams::{DELETE_WHEN_FREE_ANNOTATION, DELETION_ATTEMPT_ANNOTATION};
use lien_core::{ObjectKey, Relation, RelationIndex, Source};
use lien_webhook::{BREAK_GLASS_ANNOTATION, Policy, Webhook};
use parking_lot::RwLock;
use serde_json::{Value, json};
use tower::ServiceExt;

const LIEN: &str = "system:serviceaccount:lien-system:lien";

/// A Service in use (a Usage of a ConfigMap `app`), answered as kube-apiserver's webhooks are.
fn router() -> Router {
    let mut idx = RelationIndex::new();
    let source = Source::usage("shop", "app-uses-db");
    let db = ObjectKey::new("", "Service", Some("shop"), "db");
    let app = ObjectKey::new("", "ConfigMap", Some("shop"), "app");
    idx.apply(&source, [Relation::uses(source.clone(), db, app)])
        .expect("apply");
    Webhook::builder(Arc::new(RwLock::new(idx)))
        .policy(Policy {
            break_glass_groups: vec!["sre".into()],
            ..Policy::default()
        })
        .own_username(LIEN)
        .ready(true)
        .build()
        .router()
}

/// The Service `shop/db` with `labels` and `annotations`, whole, as a status write's review
/// carries it.
fn service(labels: Value, annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "db", "namespace": "shop", "uid": "2f1c7a52-5a56-4d7e-9f0d-1c2b3a4d5e6f",
            "resourceVersion": "4711", "creationTimestamp": "2026-01-05T10:00:00Z",
            "labels": labels, "annotations": annotations},
        "spec": {"ports": [{"port": 5432, "protocol": "TCP", "targetPort": 5432}],
            "type": "ClusterIP", "clusterIP": "10.96.0.20"},
        "status": {"loadBalancer": {}}})
}

/// An UPDATE of `shop/db` through `sub` by `user`.
fn status_update(sub: &str, user: &str, old: Value, new: Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
      "request": {"uid": "a8a5bc83-4d3c-4a44-9d3a-0b6c1f6f0e11",
        "kind": {"group": "", "version": "v1", "kind": "Service"},
        "resource": {"group": "", "version": "v1", "resource": "services"},
        "subResource": sub,
        "requestKind": {"group": "", "version": "v1", "kind": "Service"},
        "requestResource": {"group": "", "version": "v1", "resource": "services"},
        "requestSubResource": sub,
        "name": "db", "namespace": "shop", "operation": "UPDATE",
        "userInfo": {"username": user, "groups": ["system:authenticated"]},
        "object": new, "oldObject": old, "dryRun": false,
        "options": {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}}})
}

async fn post(router: &Router, path: &str, review: &Value) -> Value {
    let resp = router
        .clone()
        .oneshot(
            Request::post(path)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(review.to_string()))
                .expect("request"),
        )
        .await
        .expect("infallible");
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .expect("body");
    let r: Value = serde_json::from_slice(&bytes).expect("an AdmissionReview");
    r["response"].clone()
}

fn refused(r: &Value, code: u16, parts: &[&str]) {
    assert_eq!(r["allowed"], false, "{r}");
    assert_eq!(r["status"]["code"], code, "{r}");
    let message = r["status"]["message"].as_str().expect("a message");
    for part in parts {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
}

const IN_USE: &str = "lien.dev/in-use";

/// The tamper hook: the in-use label removed through `services/status` is refused, by anyone
/// (Lien never writes it there); added that way, too. A status write that leaves the label
/// alone is not Lien's business.
#[tokio::test]
async fn the_in_use_label_does_not_change_through_a_subresource() {
    let router = router();
    let labelled = service(json!({IN_USE: "true", "app": "db"}), json!({}));
    let stripped = service(json!({"app": "db"}), json!({}));
    for user in ["mallory", LIEN] {
        let r = post(
            &router,
            "/validate",
            &status_update("status", user, labelled.clone(), stripped.clone()),
        )
        .await;
        refused(
            &r,
            403,
            &[
                "cannot change label lien.dev/in-use through services/status \"db\" in namespace \"shop\"",
                &format!("user {user:?}"),
                "on the object itself",
            ],
        );
    }
    let r = post(
        &router,
        "/validate",
        &status_update("status", "mallory", stripped.clone(), labelled.clone()),
    )
    .await;
    refused(&r, 403, &["through services/status"]);
    let r = post(
        &router,
        "/validate",
        &status_update("status", "mallory", labelled.clone(), labelled.clone()),
    )
    .await;
    assert_eq!(r["allowed"], true, "{r}");
}

/// The break-glass hook: armed through a subresource is refused, even by a member of a
/// break-glass group (it is vetted and audited on the object itself).
#[tokio::test]
async fn break_glass_is_not_armed_through_a_subresource() {
    let router = router();
    let plain = service(json!({IN_USE: "true"}), json!({}));
    let armed = service(
        json!({IN_USE: "true"}),
        json!({BREAK_GLASS_ANNOTATION: "incident 42"}),
    );
    let mut review = status_update("status", "oncall", plain, armed);
    review["request"]["userInfo"]["groups"] = json!(["sre", "system:authenticated"]);
    let r = post(&router, "/validate", &review).await;
    refused(
        &r,
        403,
        &[
            "cannot set annotation lien.dev/break-glass through services/status",
            "on the object itself",
        ],
    );
}

/// The seal hook: a replay record added, changed or removed through `status` or `finalize` is
/// refused whoever asks, Lien's own identity included; a deletion request there is refused
/// too; an unchanged record (a status write of an object that carries one) passes.
#[tokio::test]
async fn replay_records_do_not_change_through_a_subresource() {
    let router = router();
    let record = json!({DELETION_ATTEMPT_ANNOTATION: "{\"uid\":\"2f1c7a52\",\"source\":\"refusal\",\"signature\":\"AAAA\"}"});
    let other = json!({DELETION_ATTEMPT_ANNOTATION: "{\"uid\":\"2f1c7a52\",\"source\":\"request\",\"signature\":\"BBBB\"}"});
    let none = json!({});
    for (sub, user, old, new, verb) in [
        ("status", "mallory", &none, &record, "set"),
        ("status", LIEN, &none, &record, "set"),
        ("status", "mallory", &record, &other, "set"),
        ("status", "mallory", &record, &none, "remove"),
        ("finalize", "mallory", &none, &record, "set"),
    ] {
        let r = post(
            &router,
            "/mutate",
            &status_update(
                sub,
                user,
                service(json!({}), old.clone()),
                service(json!({}), new.clone()),
            ),
        )
        .await;
        refused(
            &r,
            403,
            &[
                &format!(
                    "cannot {verb} annotation lien.dev/deletion-attempt through services/{sub}"
                ),
                "Lien writes it on the object itself only",
                &format!("user {user:?}"),
            ],
        );
    }
    let r = post(
        &router,
        "/mutate",
        &status_update(
            "status",
            "mallory",
            service(json!({}), none.clone()),
            service(json!({}), json!({DELETE_WHEN_FREE_ANNOTATION: ""})),
        ),
    )
    .await;
    refused(
        &r,
        400,
        &[
            "cannot be set through services/status",
            "on the object itself",
        ],
    );
    let r = post(
        &router,
        "/mutate",
        &status_update(
            "status",
            "kubelet",
            service(json!({}), record.clone()),
            service(json!({}), record.clone()),
        ),
    )
    .await;
    assert_eq!(r["allowed"], true, "{r}");
    assert!(r.get("patch").is_none(), "{r}");
}

/// `pods/binding` (a CREATE of a Binding, whose annotations kube-apiserver copies onto the Pod)
/// cannot carry a replay record or break-glass either.
#[tokio::test]
async fn a_binding_cannot_carry_lien_annotations() {
    let router = router();
    let binding = |annotations: Value| {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
          "request": {"uid": "c4f3a1e2-7b1d-4c55-8d0e-2f3a4b5c6d7e",
            "kind": {"group": "", "version": "v1", "kind": "Binding"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "binding",
            "requestKind": {"group": "", "version": "v1", "kind": "Binding"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "requestSubResource": "binding",
            "name": "web-0", "namespace": "shop", "operation": "CREATE",
            "userInfo": {"username": "system:kube-scheduler", "groups": ["system:authenticated"]},
            "object": {"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": "web-0", "namespace": "shop", "annotations": annotations},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}},
            "oldObject": null, "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}}})
    };
    let r = post(
        &router,
        "/mutate",
        &binding(json!({DELETION_ATTEMPT_ANNOTATION: "{}"})),
    )
    .await;
    refused(
        &r,
        403,
        &["through pods/binding \"web-0\" in namespace \"shop\""],
    );
    let mut review = binding(json!({BREAK_GLASS_ANNOTATION: "now"}));
    review["request"]["userInfo"]["groups"] = json!(["sre"]);
    let r = post(&router, "/validate", &review).await;
    refused(&r, 403, &["through pods/binding"]);
    let r = post(&router, "/mutate", &binding(json!({"other": "x"}))).await;
    assert_eq!(r["allowed"], true, "{r}");
}

/// Status strategies keep finalizers too: removing the last one of an object in use being
/// deleted through `status` would complete a deletion Lien refuses, and is refused by state as
/// on the object itself (issue 27's guard, through a subresource).
#[tokio::test]
async fn the_last_finalizer_is_guarded_through_a_subresource_too() {
    let router = router();
    let deleting = |finalizers: Value| {
        let mut s = service(json!({IN_USE: "true"}), json!({}));
        s["metadata"]["deletionTimestamp"] = json!("2026-01-05T11:00:00Z");
        s["metadata"]["finalizers"] = finalizers;
        s
    };
    let r = post(
        &router,
        "/validate",
        &status_update(
            "status",
            "mallory",
            deleting(json!(["example.com/cleanup"])),
            deleting(json!([])),
        ),
    )
    .await;
    refused(
        &r,
        409,
        &["cannot remove the last finalizer of Service shop/db"],
    );
}
