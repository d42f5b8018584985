//! `/mutate` in-process (`oneshot`, no sockets): deletion requests sealed after an access check
//! (a fake [`AccessCheck`] that records what it is asked), hand-written replay records refused,
//! on UPDATE reviews shaped as kube-apiserver sends them. Callers without a client certificate:
//! refused before any access check where a client CA is configured, their access checks bounded
//! where none is. And what a 409 says will happen, by how the webhook authenticates the API
//! server.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use base64::Engine;
use lien_core::seams::{
    DELETE_WHEN_FREE_ANNOTATION, DELETION_ATTEMPT_ANNOTATION, DeletionRequest, RecordSealer,
};
use lien_core::{ObjectKey, Relation, RelationIndex, Source};
use lien_webhook::{
    AccessCheck, AccessCheckError, AccessDecision, AccessRequest, BoxFuture, ReviewAuth, Webhook,
};
use parking_lot::{Mutex, RwLock};
use serde_json::{Value, json};
use tower::ServiceExt;

const LIEN: &str = "system:serviceaccount:lien-system:lien";
const UID: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

#[derive(Clone, Copy)]
enum Verdict {
    Allow,
    Deny,
    Fail,
    Hang,
}

struct FakeAccess {
    verdict: Verdict,
    asked: Mutex<Vec<AccessRequest>>,
}

impl AccessCheck for FakeAccess {
    fn check<'a>(
        &'a self,
        request: &'a AccessRequest,
    ) -> BoxFuture<'a, Result<AccessDecision, AccessCheckError>> {
        self.asked.lock().push(request.clone());
        let verdict = self.verdict;
        Box::pin(async move {
            match verdict {
                Verdict::Allow => Ok(AccessDecision::Allowed),
                Verdict::Deny => Ok(AccessDecision::Denied {
                    reason: "no RBAC rule matched".into(),
                }),
                Verdict::Fail => Err(AccessCheckError::Review("connection refused".into())),
                Verdict::Hang => std::future::pending().await,
            }
        })
    }
}

/// Seals as JSON of what it was given, so the test can read the record back.
struct FakeSealer(Mutex<Vec<DeletionRequest>>);

impl RecordSealer for FakeSealer {
    fn seal(&self, r: &DeletionRequest) -> String {
        self.0.lock().push(r.clone());
        json!({"object": r.object.to_string(), "uid": r.uid, "user": r.user,
               "propagationPolicy": r.propagation_policy, "signature": "sealed"})
        .to_string()
    }
}

struct Harness {
    router: Router,
    access: Arc<FakeAccess>,
    sealer: Arc<FakeSealer>,
}

fn harness(verdict: Verdict) -> Harness {
    harness_with(verdict, ReviewAuth::ClientCertificate, |b| b)
}

fn harness_with(
    verdict: Verdict,
    auth: ReviewAuth,
    tune: impl FnOnce(lien_webhook::WebhookBuilder) -> lien_webhook::WebhookBuilder,
) -> Harness {
    let access = Arc::new(FakeAccess {
        verdict,
        asked: Mutex::new(Vec::new()),
    });
    let sealer = Arc::new(FakeSealer(Mutex::new(Vec::new())));
    let webhook = Webhook::builder(Arc::new(RwLock::new(RelationIndex::new())))
        .when_free(sealer.clone(), access.clone())
        .access_check(access.clone(), Duration::from_millis(100))
        .own_username(LIEN)
        .review_auth(auth)
        .ready(true);
    Harness {
        router: tune(webhook).build().router(),
        access,
        sealer,
    }
}

/// An UPDATE of ConfigMap team-a/settings as kube-apiserver sends it to a mutating webhook
/// (`kubectl annotate`, a merge patch): the old and new objects whole, the requester's whole
/// `userInfo`, `UpdateOptions`.
fn update(user: &str, old: Value, new: Value) -> Value {
    let object = |annotations: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"big": "x"},
            "metadata": {"name": "settings", "namespace": "team-a", "uid": UID,
                "resourceVersion": "812", "creationTimestamp": "2026-01-05T10:00:00Z",
                "labels": {"lien.dev/in-use": "true"}, "annotations": annotations,
                "managedFields": [{"manager": "kubectl-annotate", "operation": "Update",
                    "apiVersion": "v1", "time": "2026-01-05T10:01:00Z",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}]}})
    };
    json!({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
      "request": {"uid": "3b5e0c6a-8f2e-4bd4-9a51-6a1f1c4c2b10",
        "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
        "resource": {"group": "", "version": "v1", "resource": "configmaps"},
        "requestKind": {"group": "", "version": "v1", "kind": "ConfigMap"},
        "requestResource": {"group": "", "version": "v1", "resource": "configmaps"},
        "name": "settings", "namespace": "team-a", "operation": "UPDATE",
        "userInfo": {"username": user, "uid": "a1b2",
            "groups": ["developers", "system:authenticated"],
            "extra": {"authentication.kubernetes.io/credential-id": ["X509SHA256=ab"]}},
        "object": object(new), "oldObject": object(old), "dryRun": false,
        "options": {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1",
            "fieldManager": "kubectl-annotate"}}})
}

fn when_free(policy: &str) -> Value {
    json!({DELETE_WHEN_FREE_ANNOTATION: policy})
}

/// The API server, with the client certificate the TLS layer verified (the extension
/// `lien_serve` puts on each request of such a connection).
async fn post_raw(router: &Router, content_type: &str, body: Vec<u8>) -> Value {
    post_as(router, content_type, body, true).await
}

async fn post_as(
    router: &Router,
    content_type: &str,
    body: Vec<u8>,
    with_certificate: bool,
) -> Value {
    let mut request = Request::post("/mutate")
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from(body))
        .expect("request");
    if with_certificate {
        request
            .extensions_mut()
            .insert(lien_serve::ClientCertificates(Arc::from(Vec::new())));
    }
    let resp = router.clone().oneshot(request).await.expect("infallible");
    assert_eq!(resp.status(), StatusCode::OK, "always HTTP 200");
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .expect("body");
    let review: Value = serde_json::from_slice(&bytes).expect("an AdmissionReview");
    assert_eq!(review["kind"], "AdmissionReview");
    review["response"].clone()
}

async fn post(router: &Router, review: &Value) -> Value {
    let r = post_raw(
        router,
        "application/json",
        serde_json::to_vec(review).expect("json"),
    )
    .await;
    assert_eq!(r["uid"], review["request"]["uid"], "uid echoed");
    r
}

/// The JSON Patch of an allowed answer.
fn patch(r: &Value) -> Value {
    assert_eq!(r["patchType"], "JSONPatch", "{r}");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(r["patch"].as_str().expect("a patch"))
        .expect("base64");
    serde_json::from_slice(&bytes).expect("JSON")
}

#[tokio::test]
async fn a_deletion_request_is_sealed_for_a_requester_allowed_to_delete() {
    let h = harness(Verdict::Allow);
    let r = post(
        &h.router,
        &update("alice", json!({}), when_free("Foreground")),
    )
    .await;
    assert_eq!(r["allowed"], true, "{r}");
    let ops = patch(&r);
    assert_eq!(
        ops[0],
        json!({"op": "remove", "path": "/metadata/annotations/lien.dev~1delete-when-free"})
    );
    assert_eq!(ops[1]["op"], "add");
    assert_eq!(
        ops[1]["path"],
        "/metadata/annotations/lien.dev~1deletion-attempt"
    );
    let record: Value = serde_json::from_str(ops[1]["value"].as_str().expect("a string"))
        .expect("the sealed record");
    assert_eq!(record["signature"], "sealed");
    let sealed = h.sealer.0.lock().clone();
    assert_eq!(sealed.len(), 1);
    assert_eq!(
        sealed[0].object,
        ObjectKey::new("", "ConfigMap", Some("team-a"), "settings")
    );
    assert_eq!(sealed[0].uid, UID);
    assert_eq!(sealed[0].user, "alice");
    assert_eq!(sealed[0].propagation_policy.as_deref(), Some("Foreground"));
    // The question, with the requester's whole userInfo.
    let asked = h.access.asked.lock().clone();
    assert_eq!(asked.len(), 1);
    let q = &asked[0];
    assert_eq!(
        (
            q.verb.as_str(),
            q.group.as_str(),
            q.resource.as_str(),
            q.namespace.as_deref(),
            q.name.as_deref()
        ),
        ("delete", "", "configmaps", Some("team-a"), Some("settings"))
    );
    assert_eq!(q.user.username, "alice");
    assert_eq!(q.user.uid, "a1b2");
    assert_eq!(q.user.groups, ["developers", "system:authenticated"]);
    assert_eq!(
        q.user.extra["authentication.kubernetes.io/credential-id"],
        ["X509SHA256=ab"]
    );
    let warning = r["warnings"][0].as_str().expect("a warning");
    assert!(
        warning.contains("will be deleted when free") && warning.contains("alice"),
        "{warning}"
    );
    // An empty value: the API server's default policy.
    let h = harness(Verdict::Allow);
    let r = post(&h.router, &update("alice", json!({}), when_free(""))).await;
    assert_eq!(r["allowed"], true, "{r}");
    assert_eq!(h.sealer.0.lock()[0].propagation_policy, None);
}

#[tokio::test]
async fn a_requester_who_may_not_delete_is_refused_403_and_nothing_is_sealed() {
    let h = harness(Verdict::Deny);
    let r = post(
        &h.router,
        &update("bob", json!({}), when_free("Background")),
    )
    .await;
    assert_eq!(r["allowed"], false, "{r}");
    assert_eq!(r["status"]["code"], 403);
    assert_eq!(r["status"]["reason"], "Forbidden");
    let message = r["status"]["message"].as_str().expect("message");
    for part in [
        "ConfigMap team-a/settings",
        "user \"bob\"",
        "delete configmaps \"settings\" in namespace \"team-a\"",
        "you must be allowed to delete it yourself",
        "Lien deletes only what its requester could",
        "no RBAC rule matched",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    assert!(r.get("patch").is_none(), "{r}");
    assert!(h.sealer.0.lock().is_empty());
}

#[tokio::test]
async fn an_access_check_that_fails_or_hangs_refuses_500() {
    for verdict in [Verdict::Fail, Verdict::Hang] {
        let h = harness(verdict);
        let r = post(&h.router, &update("alice", json!({}), when_free(""))).await;
        assert_eq!(r["allowed"], false, "{r}");
        assert_eq!(r["status"]["code"], 500, "{r}");
        assert!(
            r["status"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("retry shortly")),
            "{r}"
        );
        assert!(h.sealer.0.lock().is_empty());
    }
    // No sealer or access check configured: fail closed as well.
    let router = Webhook::builder(Arc::new(RwLock::new(RelationIndex::new())))
        .ready(true)
        .build()
        .router();
    let r = post(&router, &update("alice", json!({}), when_free(""))).await;
    assert_eq!(r["status"]["code"], 500, "{r}");
}

#[tokio::test]
async fn a_policy_that_is_not_one_is_refused_422_naming_the_annotation_and_the_values() {
    let h = harness(Verdict::Allow);
    let r = post(&h.router, &update("alice", json!({}), when_free("Later"))).await;
    assert_eq!(r["status"]["code"], 422, "{r}");
    let message = r["status"]["message"].as_str().expect("message");
    for part in [
        "metadata.annotations[lien.dev/delete-when-free]",
        "\"Later\"",
        "Background, Foreground, Orphan",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    assert!(h.access.asked.lock().is_empty(), "not asked");
}

#[tokio::test]
async fn a_hand_written_deletion_record_is_refused_403() {
    let h = harness(Verdict::Allow);
    let forged = json!({DELETION_ATTEMPT_ANNOTATION: "{\"uid\":\"x\",\"signature\":\"AAAA\"}"});
    // Added, and changed.
    for old in [
        json!({}),
        json!({DELETION_ATTEMPT_ANNOTATION: "{\"uid\":\"y\"}"}),
    ] {
        let r = post(&h.router, &update("mallory", old, forged.clone())).await;
        assert_eq!(r["allowed"], false, "{r}");
        assert_eq!(r["status"]["code"], 403, "{r}");
        let message = r["status"]["message"].as_str().expect("message");
        for part in [
            "lien.dev/deletion-attempt",
            "written by Lien only",
            "\"mallory\"",
            "kubectl lien delete --when-free",
        ] {
            assert!(message.contains(part), "{part:?} not in {message}");
        }
    }
}

#[tokio::test]
async fn removing_a_record_and_lien_writing_one_are_allowed_without_a_patch() {
    let h = harness(Verdict::Deny);
    let record = json!({DELETION_ATTEMPT_ANNOTATION: "{\"uid\":\"y\",\"source\":\"refusal\"}"});
    for (user, old, new) in [
        // Removal cancels a pending replay: anyone who may update the object may.
        ("mallory", record.clone(), json!({})),
        // Lien's own service account records refusals.
        (LIEN, json!({}), record.clone()),
        // Unchanged: an unrelated update of an object carrying a record.
        ("mallory", record.clone(), record.clone()),
    ] {
        let r = post(&h.router, &update(user, old, new)).await;
        assert_eq!(r["allowed"], true, "{user}: {r}");
        assert!(r.get("patch").is_none(), "{r}");
    }
    assert!(h.access.asked.lock().is_empty());
}

/// A deletion request's record is stored only by the API server applying `/mutate`'s patch to
/// the requester's own write; it never arrives in a write's object. One that does was had from
/// a forged review and is being written by whoever can act as Lien: refused, whatever it says,
/// and so is one that says no source (sealed by an earlier Lien).
#[tokio::test]
async fn lien_itself_may_not_write_a_deletion_requests_record() {
    let h = harness(Verdict::Allow);
    for record in [
        "{\"uid\":\"y\",\"user\":\"admin\",\"replay\":true,\"source\":\"request\",\"signature\":\"AAAA\"}",
        "{\"uid\":\"y\",\"user\":\"admin\",\"replay\":true,\"signature\":\"AAAA\"}",
    ] {
        let r = post(
            &h.router,
            &update(
                LIEN,
                json!({}),
                json!({DELETION_ATTEMPT_ANNOTATION: record}),
            ),
        )
        .await;
        assert_eq!(r["allowed"], false, "{r}");
        assert_eq!(r["status"]["code"], 403, "{r}");
        let message = r["status"]["message"].as_str().expect("message");
        assert!(
            message.contains("writes only the records of refused DELETEs")
                && message.contains("stored only by the API server's write"),
            "{message}"
        );
    }
}

/// With a client CA configured, a caller without a verified certificate gets 401 before
/// anything is asked: a forged review makes Lien ask the API server nothing, and gets no
/// sealed record.
#[tokio::test]
async fn with_a_client_ca_an_unauthenticated_caller_is_refused_before_any_access_check() {
    let h = harness(Verdict::Allow);
    let review = update("alice", json!({}), when_free("Foreground"));
    let r = post_as(
        &h.router,
        "application/json",
        serde_json::to_vec(&review).expect("json"),
        false,
    )
    .await;
    assert_eq!(r["allowed"], false, "{r}");
    assert_eq!(r["status"]["code"], 401, "{r}");
    assert_eq!(r["uid"], review["request"]["uid"], "uid echoed");
    assert!(r.get("patch").is_none(), "{r}");
    assert!(h.access.asked.lock().is_empty(), "no SubjectAccessReview");
    assert!(h.sealer.0.lock().is_empty(), "nothing sealed");
}

/// Without a client CA every caller is answered, and each deletion request asks the API server
/// a SubjectAccessReview: those are bounded (here 1 a second, a burst of 2), the rest refused
/// 429 without asking and counted. A caller that presented a certificate is never bounded.
#[tokio::test]
async fn without_a_client_ca_access_checks_for_unauthenticated_callers_are_bounded() {
    let h = harness_with(Verdict::Allow, ReviewAuth::AnswerOnly, |b| {
        b.unauthenticated_access_checks(1)
    });
    let review = serde_json::to_vec(&update("alice", json!({}), when_free(""))).expect("json");
    let started = std::time::Instant::now();
    let mut throttled = 0;
    for _ in 0..20 {
        let r = post_as(&h.router, "application/json", review.clone(), false).await;
        if r["status"]["code"] == 429 {
            throttled += 1;
            let message = r["status"]["message"].as_str().expect("message");
            assert!(
                message.contains("cannot have ConfigMap team-a/settings deleted when free")
                    && message.contains("retry shortly"),
                "{message}"
            );
        } else {
            assert_eq!(r["allowed"], true, "{r}");
        }
    }
    let asked = h.access.asked.lock().len();
    // The burst, plus one a second for however long the loop took.
    let allowed = 2 + started.elapsed().as_secs() as usize;
    assert!(
        asked <= allowed,
        "{asked} access checks for 20 forged requests"
    );
    assert_eq!(asked + throttled, 20);
    let metrics = get_metrics(&h.router).await;
    assert!(
        metrics.contains(&format!(
            "lien_webhook_unauthenticated_reviews_total{{action=\"throttled\"}} {throttled}"
        )),
        "{metrics}"
    );
    // The API server, authenticated, is not bounded.
    let before = h.access.asked.lock().len();
    for _ in 0..5 {
        let r = post_as(&h.router, "application/json", review.clone(), true).await;
        assert_eq!(r["allowed"], true, "{r}");
    }
    assert_eq!(h.access.asked.lock().len(), before + 5);
}

async fn get_metrics(router: &Router) -> String {
    let resp = router
        .clone()
        .oneshot(
            Request::get("/metrics")
                .body(Body::empty())
                .expect("request"),
        )
        .await
        .expect("infallible");
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .expect("body");
    String::from_utf8(bytes.to_vec()).expect("utf-8")
}

#[tokio::test]
async fn a_dry_run_is_sealed_alike() {
    let h = harness(Verdict::Allow);
    let mut review = update("alice", json!({}), when_free("Orphan"));
    review["request"]["dryRun"] = json!(true);
    let r = post(&h.router, &review).await;
    assert_eq!(r["allowed"], true, "{r}");
    assert_eq!(patch(&r).as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn forged_and_malformed_bodies_get_an_answer() {
    let h = harness(Verdict::Allow);
    for body in [
        b"{not json".to_vec(),
        b"{}".to_vec(),
        br#"{"request":{"uid":"u","operation":"UPDATE","userInfo":{"groups":"x"}}}"#.to_vec(),
        br#"{"request":{"uid":"u","operation":"UPDATE","name":"x","kind":{"kind":"ConfigMap"},"object":{"metadata":{"annotations":{"lien.dev/delete-when-free":""}}},"oldObject":null}}"#.to_vec(),
        Vec::new(),
    ] {
        let r = post_raw(&h.router, "application/json", body.clone()).await;
        assert_eq!(r["allowed"], false, "{}: {r}", String::from_utf8_lossy(&body));
        let code = r["status"]["code"].as_u64().expect("a code");
        assert_eq!(code, 400, "{}: {r}", String::from_utf8_lossy(&body));
    }
    let r = post_raw(&h.router, "text/plain", b"{}".to_vec()).await;
    assert_eq!(r["status"]["code"], 415);
    assert!(h.sealer.0.lock().is_empty());
}

/// What a refused DELETE says happens next, on its second line: with the API server
/// authenticated (or every caller trusted) and a relation asking for replay, that Lien will
/// delete it when its last user is gone; otherwise the command that asks for that.
#[tokio::test]
async fn a_refusal_says_what_will_happen() {
    let settings = ObjectKey::new("", "ConfigMap", Some("fixtures"), "settings");
    let web = ObjectKey::new("apps", "Deployment", Some("fixtures"), "web");
    let delete = serde_json::from_slice::<Value>(
        &std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/delete-configmap.json"
        ))
        .expect("fixture"),
    )
    .expect("json");
    let ask = "not replayed: to have Lien delete it once free, run \
               `kubectl lien delete --when-free configmap/settings -n fixtures`.";
    for (auth, replay, next) in [
        (
            ReviewAuth::TrustAll,
            true,
            "Lien will delete it when its last user is gone.",
        ),
        (ReviewAuth::TrustAll, false, ask),
        (ReviewAuth::AnswerOnly, true, ask),
    ] {
        let mut idx = RelationIndex::new();
        let source = Source::usage("fixtures", "web-uses-settings");
        idx.apply(
            &source,
            [Relation::uses(source.clone(), settings.clone(), web.clone()).with_replay(replay)],
        )
        .expect("apply");
        let router = Webhook::builder(Arc::new(RwLock::new(idx)))
            .review_auth(auth)
            .ready(true)
            .build()
            .router();
        let resp = router
            .oneshot(
                Request::post("/validate")
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Body::from(delete.to_string()))
                    .expect("request"),
            )
            .await
            .expect("infallible");
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .expect("body");
        let r: Value = serde_json::from_slice(&bytes).expect("review");
        let message = r["response"]["status"]["message"]
            .as_str()
            .expect("message");
        assert_eq!(r["response"]["status"]["code"], 409);
        assert_eq!(
            message.lines().nth(1),
            Some(next),
            "{auth:?} {replay}: {message}"
        );
    }
}
