//! The router in-process (`oneshot`, no sockets) on reviews shaped as kube-apiserver sends them
//! (`tests/fixtures`, captured from the sandbox by `tests/fixtures.rs`).

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use lien_core::{Decision, ObjectKey, Relation, RelationIndex, Source, decide_delete};
use lien_webhook::{
    BoxFuture, BreakGlassAction, LiveCheck, LiveCheckError, Policy, Record, Scope, SharedIndex,
    StaticKinds, Webhook,
};
use parking_lot::RwLock;
use rstest::rstest;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tower::ServiceExt;

const NS: &str = "fixtures";

fn settings() -> ObjectKey {
    ObjectKey::new("", "ConfigMap", Some(NS), "settings")
}

fn flags() -> ObjectKey {
    ObjectKey::new("", "ConfigMap", Some(NS), "flags")
}

fn web() -> ObjectKey {
    ObjectKey::new("apps", "Deployment", Some(NS), "web")
}

fn review(name: &str) -> Value {
    serde_json::from_slice(&common::fixture(name)).expect("fixture")
}

/// An index in which `settings` and `flags` are used by `web` through a Usage.
fn index() -> SharedIndex {
    let mut idx = RelationIndex::new();
    let source = Source::usage(NS, "web-uses-settings");
    idx.apply(
        &source,
        [
            Relation::uses(source.clone(), settings(), web())
                .with_reason("web reads its settings")
                .with_replay(true),
            Relation::uses(source.clone(), flags(), web()),
        ],
    )
    .expect("apply");
    Arc::new(RwLock::new(idx))
}

struct Harness {
    router: Router,
    records: mpsc::Receiver<Record>,
}

fn harness_with(index: SharedIndex, policy: Policy, live: Arc<dyn LiveCheck>) -> Harness {
    let (tx, records) = mpsc::channel(16);
    let kinds = StaticKinds::default()
        .with("v1", "ConfigMap", Scope::Namespaced)
        .with("apps/v1", "Deployment", Scope::Namespaced)
        .with("v1", "Node", Scope::Cluster);
    let webhook = Webhook::builder(index)
        .policy(policy)
        .live_check(live, Duration::from_millis(200))
        .kinds(Arc::new(kinds))
        .records(tx)
        .ready(true)
        .build();
    Harness {
        router: webhook.router(),
        records,
    }
}

fn harness() -> Harness {
    harness_with(index(), policy(), Arc::new(lien_webhook::NoLiveCheck))
}

fn policy() -> Policy {
    Policy {
        break_glass_groups: vec!["lien:break-glass".into()],
        ..Policy::default()
    }
}

async fn post_raw(router: &Router, content_type: Option<&str>, body: Vec<u8>) -> Value {
    let mut req = Request::post("/validate");
    if let Some(ct) = content_type {
        req = req.header(header::CONTENT_TYPE, ct);
    }
    let resp = router
        .clone()
        .oneshot(req.body(Body::from(body)).expect("request"))
        .await
        .expect("infallible");
    assert_eq!(resp.status(), StatusCode::OK, "always HTTP 200");
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .expect("body");
    let review: Value = serde_json::from_slice(&bytes).expect("an AdmissionReview");
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(review["kind"], "AdmissionReview");
    review["response"].clone()
}

async fn post(router: &Router, review: &Value) -> Value {
    let response = post_raw(
        router,
        Some("application/json"),
        serde_json::to_vec(review).expect("json"),
    )
    .await;
    assert_eq!(response["uid"], review["request"]["uid"], "uid echoed");
    response
}

/// The 409 of the settings' DELETE: who holds it, what happens next, what to do.
const SETTINGS_REFUSAL: &str = "cannot delete ConfigMap fixtures/settings: it is in use by \
     apps/Deployment fixtures/web (Usage fixtures/web-uses-settings: web reads its settings).\n\
     Lien will delete it when its last user is gone.\n\
     To free it now, delete the user first: `kubectl delete deployment.apps/web -n fixtures`; \
     for the other ways: `kubectl lien why configmap/settings -n fixtures`.";

/// The same on one line, for the refusal's Event.
const SETTINGS_DENIAL: &str = "cannot delete ConfigMap fixtures/settings: it is in use by \
     apps/Deployment fixtures/web (Usage fixtures/web-uses-settings: web reads its settings); \
     Lien will delete it when its last user is gone";

#[tokio::test]
async fn delete_in_use_is_refused_with_409_and_recorded() {
    let mut h = harness();
    let r = post(&h.router, &review("delete-configmap.json")).await;
    assert_eq!(r["allowed"], false);
    assert_eq!(
        r["status"],
        json!({"code": 409, "reason": "Conflict", "message": SETTINGS_REFUSAL})
    );
    let Ok(Record::Denied(d)) = h.records.try_recv() else {
        panic!("a denial record");
    };
    assert_eq!(d.object, settings());
    assert_eq!(d.propagation_policy.as_deref(), Some("Foreground"));
    assert_eq!(d.user, "sandbox-admin");
    assert!(d.replay);
    assert_eq!(d.message, SETTINGS_DENIAL);
    let fixture = review("delete-configmap.json");
    assert_eq!(
        d.uid.as_deref(),
        fixture["request"]["oldObject"]["metadata"]["uid"].as_str()
    );
}

/// Without a client CA the webhook cannot tell the API server from anyone else: it still
/// answers (protection does not stop) but records nothing; with one, a client without a verified
/// certificate is refused (401) and records nothing either.
#[tokio::test]
async fn unauthenticated_reviews_are_answered_or_refused_but_never_recorded() {
    use lien_webhook::ReviewAuth;
    for (auth, code) in [
        (ReviewAuth::AnswerOnly, 409),
        (ReviewAuth::ClientCertificate, 401),
    ] {
        let (tx, mut records) = mpsc::channel(16);
        let router = Webhook::builder(index())
            .policy(policy())
            .records(tx)
            .review_auth(auth)
            .ready(true)
            .build()
            .router();
        // The router alone: no TLS layer, so no verified client certificate on the request.
        let r = post(&router, &review("delete-configmap.json")).await;
        assert_eq!(r["allowed"], false, "{auth:?}");
        assert_eq!(r["status"]["code"], code, "{auth:?}: {r}");
        assert!(records.try_recv().is_err(), "{auth:?}: recorded");
        // Probes need no certificate.
        let health = router
            .clone()
            .oneshot(
                Request::get("/healthz")
                    .body(Body::empty())
                    .expect("request"),
            )
            .await
            .expect("infallible");
        assert_eq!(health.status(), StatusCode::OK);
    }
}

#[tokio::test]
async fn dry_run_is_refused_alike_but_records_nothing() {
    let mut h = harness();
    let r = post(&h.router, &review("delete-configmap-dry-run.json")).await;
    assert_eq!(r["allowed"], false);
    assert_eq!(r["status"]["message"], SETTINGS_REFUSAL);
    assert!(h.records.try_recv().is_err());
}

#[tokio::test]
async fn unused_unlabelled_object_is_allowed() {
    let h = harness_with(
        Arc::new(RwLock::new(RelationIndex::new())),
        policy(),
        Arc::new(lien_webhook::NoLiveCheck),
    );
    let mut rv = review("delete-configmap.json");
    rv["request"]["oldObject"]["metadata"]["labels"] = json!({"app": "web"});
    let r = post(&h.router, &rv).await;
    assert_eq!(r, json!({"uid": rv["request"]["uid"], "allowed": true}));
}

#[tokio::test]
async fn many_blockers_are_bounded() {
    let mut idx = RelationIndex::new();
    for i in 0..25 {
        let s = Source::usage(NS, format!("u{i:02}"));
        let by = ObjectKey::new("apps", "Deployment", Some(NS), format!("web-{i:02}"));
        idx.apply(&s, [Relation::uses(s.clone(), settings(), by)])
            .expect("apply");
    }
    let h = harness_with(
        Arc::new(RwLock::new(idx)),
        policy(),
        Arc::new(lien_webhook::NoLiveCheck),
    );
    let r = post(&h.router, &review("delete-configmap.json")).await;
    let msg = r["status"]["message"].as_str().expect("message");
    let lines: Vec<&str> = msg.lines().collect();
    assert_eq!(
        lines[..4],
        [
            "cannot delete ConfigMap fixtures/settings: it is in use by 25 objects.",
            "not replayed: to have Lien delete it once free, run \
             `kubectl lien delete --when-free configmap/settings -n fixtures`.",
            "To free it now, delete its 25 users first (listed below); \
             for the other ways: `kubectl lien why configmap/settings -n fixtures`.",
            "held by:",
        ],
        "{msg}"
    );
    // The policy's ten, one line each, then the count of the rest.
    assert_eq!(
        lines[4],
        "  in use by apps/Deployment fixtures/web-00 (Usage fixtures/u00)"
    );
    assert_eq!(lines.len(), 15, "{msg}");
    assert_eq!(lines[14], "  and 15 more");
}

/// A live check with a fixed answer.
struct Live(Result<Decision, &'static str>);

impl LiveCheck for Live {
    fn check<'a>(
        &'a self,
        _object: &'a ObjectKey,
        _uid: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Decision, LiveCheckError>> {
        let answer = self.0.clone().map_err(|e| LiveCheckError::Read(e.into()));
        Box::pin(async move { answer })
    }
}

/// A live check that never answers.
struct Hang;

impl LiveCheck for Hang {
    fn check<'a>(
        &'a self,
        _object: &'a ObjectKey,
        _uid: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Decision, LiveCheckError>> {
        Box::pin(std::future::pending())
    }
}

fn empty_index() -> SharedIndex {
    Arc::new(RwLock::new(RelationIndex::new()))
}

#[tokio::test]
async fn labelled_but_unknown_is_confirmed_live_and_fails_closed() {
    let rv = review("delete-configmap.json");
    // No live check configured: refused, saying why.
    let h = harness_with(empty_index(), policy(), Arc::new(lien_webhook::NoLiveCheck));
    let r = post(&h.router, &rv).await;
    assert_eq!(r["allowed"], false);
    assert_eq!(r["status"]["code"], 500);
    assert_eq!(
        r["status"]["message"],
        "cannot delete ConfigMap fixtures/settings: it carries lien.dev/in-use=true, Lien's index \
         has no relation for it and the live check failed (no live check is configured); \
         refusing until Lien can confirm, retry shortly"
    );
    // The check errors.
    let h = harness_with(empty_index(), policy(), Arc::new(Live(Err("forbidden"))));
    let r = post(&h.router, &rv).await;
    assert_eq!(r["status"]["code"], 500);
    assert!(
        r["status"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("(live read failed: forbidden)"))
    );
    // The check hangs: the timeout answers.
    let h = harness_with(empty_index(), policy(), Arc::new(Hang));
    let r = post(&h.router, &rv).await;
    assert_eq!(r["status"]["code"], 500);
    assert!(
        r["status"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no answer within 200ms"))
    );
    // The live read says it is in use after all: the index was behind.
    let live = decide_delete(&index().read(), &settings(), None);
    let mut h = harness_with(empty_index(), policy(), Arc::new(Live(Ok(live))));
    let r = post(&h.router, &rv).await;
    assert_eq!(r["status"]["code"], 409);
    assert_eq!(r["status"]["message"], SETTINGS_REFUSAL);
    assert!(matches!(h.records.try_recv(), Ok(Record::Denied(_))));
    // The live read confirms it is not in use: allowed, with a warning about the stale label.
    let h = harness_with(
        empty_index(),
        policy(),
        Arc::new(Live(Ok(Decision::Allowed))),
    );
    let r = post(&h.router, &rv).await;
    assert_eq!(r["allowed"], true);
    assert!(
        r["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("stale"))
    );
}

/// A labelled object whose last relation this index removed is allowed at once: the label is
/// stale for a reason this replica saw, and no live read (which a DependencyRule over 100,000
/// objects would make slow) is needed. One it never saw protected is still confirmed live.
#[tokio::test]
async fn a_label_the_index_saw_go_stale_needs_no_live_read() {
    let rv = review("delete-configmap.json");
    let index = index();
    index
        .write()
        .delete(&Source::usage(NS, "web-uses-settings"));
    // A live check that never answers would make this a 500 after 200 ms.
    let h = harness_with(index, policy(), Arc::new(Hang));
    let r = post(&h.router, &rv).await;
    assert_eq!(r["allowed"], true, "{r}");
    assert!(
        r["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("Lien saw its last relation go")),
        "{r}"
    );
    // Never protected in this index: the live read decides (here: it hangs, so 500).
    let h = harness_with(empty_index(), policy(), Arc::new(Hang));
    let r = post(&h.router, &rv).await;
    assert_eq!(r["status"]["code"], 500, "{r}");
}

#[tokio::test]
async fn stripping_the_label_of_an_object_in_use_is_refused() {
    let h = harness();
    let rv = review("update-strip-label.json");
    let r = post(&h.router, &rv).await;
    assert_eq!(r["allowed"], false);
    assert_eq!(
        r["status"],
        json!({"code": 409, "reason": "Conflict", "message":
            "cannot remove label lien.dev/in-use from ConfigMap fixtures/flags: Lien manages it \
             and it is in use by apps/Deployment fixtures/web (Usage fixtures/web-uses-settings); \
             the label goes when the last relation does"})
    );
    // Nor may Lien's own service account (or whoever impersonates it): the guard decides by
    // state, and Lien never removes the label while a relation holds.
    let mut by_lien = rv.clone();
    by_lien["request"]["userInfo"]["username"] = json!("system:serviceaccount:lien-system:lien");
    by_lien["request"]["userInfo"]["groups"] = json!([
        "system:serviceaccounts",
        "system:serviceaccounts:lien-system"
    ]);
    let r = post(&h.router, &by_lien).await;
    assert_eq!(r["allowed"], false, "{r}");
    assert_eq!(r["status"]["code"], 409);
    // Not in use: anyone may.
    let h = harness_with(empty_index(), policy(), Arc::new(lien_webhook::NoLiveCheck));
    assert_eq!(post(&h.router, &rv).await["allowed"], true);
}

/// Issue 27: a reason-only Usage in the namespace of the object it protects. Deleting the
/// namespace would take the Usage and the object with it, so the DELETE is refused up front,
/// naming the object, the Usage, the reason and the command that lifts it.
#[tokio::test]
async fn namespace_holding_an_object_protected_by_its_own_usage_is_refused() {
    let rv = review("delete-namespace.json");
    let idx = Arc::new(RwLock::new(RelationIndex::new()));
    let keep = Source::usage(NS, "keep-data");
    idx.write()
        .apply(
            &keep,
            [Relation::protects(
                keep.clone(),
                settings(),
                "never delete: customer data",
            )],
        )
        .expect("apply");
    let h = harness_with(idx.clone(), policy(), Arc::new(lien_webhook::NoLiveCheck));
    let r = post(&h.router, &rv).await;
    assert_eq!(
        r["status"],
        json!({"code": 409, "reason": "Conflict", "message":
            "cannot delete Namespace fixtures: a lien holds what is in it: ConfigMap \
             fixtures/settings is protected (Usage fixtures/keep-data: never delete: customer \
             data).\n\
             not replayed: to have Lien delete it once free, run \
             `kubectl lien delete --when-free namespace/fixtures`.\n\
             To free it now, lift it: `kubectl delete usage.lien.dev/keep-data -n fixtures`; \
             users inside the namespace go with it and do not count; for the other ways: \
             `kubectl lien why namespace/fixtures`."})
    );
    // Being deleted already, and kept by Lien's finalizer: deleting it again lifts nothing,
    // so the command is the finalizer's removal.
    assert!(idx.write().set_kept(&keep, Some(1)));
    let r = post(&h.router, &rv).await;
    let message = r["status"]["message"].as_str().expect("a message");
    assert!(
        message.contains(
            "To free it now, lift it: `kubectl patch usage.lien.dev/keep-data -n fixtures \
             --type=json -p '[{\"op\":\"test\",\"path\":\"/metadata/finalizers/1\",\
             \"value\":\"lien.dev/usage\"},{\"op\":\"remove\",\"path\":\
             \"/metadata/finalizers/1\"}]'`;"
        ),
        "{message}"
    );
    // Lifted: the namespace may go.
    idx.write().delete(&keep);
    assert_eq!(post(&h.router, &rv).await["allowed"], true);
}

#[tokio::test]
async fn namespace_with_objects_used_from_outside_is_refused() {
    let rv = review("delete-namespace.json");
    // Used from inside only: the namespace goes with its users.
    let h = harness();
    assert_eq!(post(&h.router, &rv).await["allowed"], true);
    // Used from another namespace, and protected by a ClusterUsage.
    let idx = index();
    {
        let mut idx = idx.write();
        let s = Source::usage("other", "uses-settings");
        let by = ObjectKey::new("apps", "Deployment", Some("other"), "api");
        idx.apply(&s, [Relation::uses(s.clone(), settings(), by)])
            .expect("apply");
        let p = Source::cluster_usage("keep-flags");
        idx.apply(&p, [Relation::protects(p.clone(), flags(), "audit")])
            .expect("apply");
    }
    let mut h = harness_with(idx, policy(), Arc::new(lien_webhook::NoLiveCheck));
    let r = post(&h.router, &rv).await;
    assert_eq!(
        r["status"],
        json!({"code": 409, "reason": "Conflict", "message":
            "cannot delete Namespace fixtures: 2 liens hold what is in it (protections, or users \
             outside the namespace).\n\
             not replayed: to have Lien delete it once free, run \
             `kubectl lien delete --when-free namespace/fixtures`.\n\
             To free it now, lift each one listed below (its command follows it); users inside \
             the namespace go with it and do not count; `kubectl lien why namespace/fixtures` \
             lists them all.\n\
             held by:\n  \
             ConfigMap fixtures/flags is protected (ClusterUsage keep-flags: audit) — lift it: \
             `kubectl delete clusterusage.lien.dev/keep-flags`\n  \
             ConfigMap fixtures/settings is in use by apps/Deployment other/api (Usage \
             other/uses-settings) — lift it: `kubectl delete deployment.apps/api -n other`"})
    );
    let Ok(Record::Denied(d)) = h.records.try_recv() else {
        panic!("a denial record");
    };
    assert_eq!(d.object, ObjectKey::new("", "Namespace", None, NS));
}

fn with_break_glass(mut rv: Value, field: &str, reason: &str) -> Value {
    rv["request"][field]["metadata"]["annotations"] = json!({"lien.dev/break-glass": reason});
    rv
}

#[tokio::test]
async fn break_glass_is_authorised_and_audited() {
    let mut h = harness();
    // Setting the annotation: only break-glass group members.
    let mut set = review("update-strip-label.json");
    set["request"]["object"]["metadata"]["labels"] = json!({"lien.dev/in-use": "true"});
    let set = with_break_glass(set, "object", "INC-1234 restore from backup");
    let r = post(&h.router, &set).await;
    assert_eq!(
        r["status"],
        json!({"code": 403, "reason": "Forbidden", "message":
            "cannot set annotation lien.dev/break-glass on ConfigMap fixtures/flags: user \
             \"sandbox-admin\" is not in a break-glass group (lien:break-glass); ask a member to set it"})
    );
    let mut member = set.clone();
    member["request"]["userInfo"]["groups"] = json!(["lien:break-glass", "system:authenticated"]);
    let r = post(&h.router, &member).await;
    assert_eq!(r["allowed"], true);
    let Ok(Record::BreakGlass(armed)) = h.records.try_recv() else {
        panic!("an audit record");
    };
    assert_eq!(armed.action, BreakGlassAction::Armed);
    assert_eq!(armed.reason, "INC-1234 restore from backup");
    assert_eq!(armed.sources, [Source::usage(NS, "web-uses-settings")]);
    // The same request again (as the tamper hook sends it too): allowed, audited once.
    assert_eq!(post(&h.router, &member).await["allowed"], true);
    assert!(h.records.try_recv().is_err(), "one override, one record");

    // Deleting under the annotation: allowed, warned, audited.
    let del = with_break_glass(review("delete-configmap.json"), "oldObject", "INC-1234");
    let r = post(&h.router, &del).await;
    assert_eq!(r["allowed"], true);
    assert!(
        r["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("deleted under lien.dev/break-glass (INC-1234)"))
    );
    let Ok(Record::BreakGlass(used)) = h.records.try_recv() else {
        panic!("an audit record");
    };
    assert_eq!(used.action, BreakGlassAction::Used);
    // What was overridden, without what a refusal says would happen next.
    assert_eq!(
        Some(used.overridden.as_str()),
        SETTINGS_DENIAL.strip_suffix("; Lien will delete it when its last user is gone")
    );
    // The overridden Usages travel with the record: the audit must reach them after the
    // object (and with it its relations) is gone.
    assert_eq!(used.sources, [Source::usage(NS, "web-uses-settings")]);
    let (_, metrics) = get(&h.router, "/metrics").await;
    for action in ["armed", "used"] {
        assert!(
            metrics.contains(&format!(
                "lien_webhook_break_glass_total{{action=\"{action}\"}} 1"
            )),
            "{metrics}"
        );
    }

    // Break-glass off: the annotation is ignored and cannot be set.
    let h = harness_with(
        index(),
        Policy::default(),
        Arc::new(lien_webhook::NoLiveCheck),
    );
    assert_eq!(post(&h.router, &del).await["status"]["code"], 409);
    assert_eq!(post(&h.router, &member).await["status"]["code"], 403);
}

#[rstest]
#[case::known_kinds(json!({"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "settings"}}), None)]
#[case::unknown_kind(
    json!({"apiVersion": "eks.example.io/v1", "kind": "Cluster", "resourceRef": {"name": "c"}}),
    Some("spec.of: kind Cluster is not served in eks.example.io/v1; install its CRD first, or correct spec.of.apiVersion and spec.of.kind")
)]
#[case::cluster_scoped_with_namespace(
    json!({"apiVersion": "v1", "kind": "Node", "resourceRef": {"name": "n1", "namespace": "x"}}),
    Some("spec.of.resourceRef.namespace: Node (v1) is cluster-scoped; remove the namespace")
)]
#[tokio::test]
async fn usage_checks_kinds_and_scopes(#[case] of: Value, #[case] problem: Option<&str>) {
    let h = harness();
    let mut rv = review("create-usage.json");
    rv["request"]["object"]["spec"]["of"] = of;
    let r = post(&h.router, &rv).await;
    match problem {
        None => assert_eq!(r["allowed"], true, "{r}"),
        Some(message) => assert_eq!(
            r["status"],
            json!({"code": 422, "reason": "Invalid", "message": message})
        ),
    }
}

#[tokio::test]
async fn cluster_usage_must_name_namespaces_of_namespaced_kinds() {
    let h = harness();
    let mut rv = review("create-usage.json");
    rv["request"]["kind"]["kind"] = json!("ClusterUsage");
    let r = post(&h.router, &rv).await;
    assert_eq!(
        r["status"]["message"],
        "spec.of.resourceRef.namespace: ConfigMap (v1) is namespaced, and a ClusterUsage has no \
         namespace of its own; set the object's namespace; spec.by.resourceRef.namespace: \
         Deployment (apps/v1) is namespaced, and a ClusterUsage has no namespace of its own; set \
         the object's namespace"
    );
}

#[rstest]
#[case::garbage(Some("application/json"), b"\x00\xffnot json".to_vec(), 400, "malformed AdmissionReview")]
#[case::empty(Some("application/json"), Vec::new(), 400, "lien: empty request body")]
#[case::no_request(Some("application/json"), b"{\"kind\":\"AdmissionReview\"}".to_vec(), 400, "malformed AdmissionReview: no request")]
#[case::no_operation(Some("application/json"), b"{\"request\":{\"uid\":\"abc\"}}".to_vec(), 400, "malformed AdmissionReview: request.operation is required")]
#[case::wrong_type(Some("application/json"), b"{\"request\":{\"uid\":\"abc\",\"operation\":\"DELETE\",\"dryRun\":\"yes\"}}".to_vec(), 400, "malformed AdmissionReview: request.dryRun: invalid type")]
#[case::content_type(Some("text/plain"), b"{}".to_vec(), 415, "lien: expected Content-Type application/json, got text/plain")]
#[case::no_content_type(None, b"{}".to_vec(), 415, "lien: expected Content-Type application/json, got none")]
#[case::huge(Some("application/json"), vec![b' '; 8 * 1024 * 1024], 413, "lien: request body unreadable or larger than 7340032 bytes")]
#[case::delete_without_name(Some("application/json"), br#"{"request":{"uid":"abc","operation":"DELETE","kind":{"group":"","version":"v1","kind":"ConfigMap"}}}"#.to_vec(), 400, "request.name is empty")]
#[tokio::test]
async fn malformed_input_gets_an_answer(
    #[case] content_type: Option<&str>,
    #[case] body: Vec<u8>,
    #[case] code: u16,
    #[case] message: &str,
) {
    let h = harness();
    let r = post_raw(&h.router, content_type, body).await;
    assert_eq!(r["allowed"], false);
    assert_eq!(r["status"]["code"], code);
    let got = r["status"]["message"].as_str().expect("message");
    assert!(
        got.starts_with(message),
        "{got:?} does not start with {message:?}"
    );
    // The UID is salvaged when the review has one.
    assert!(r["uid"] == "" || r["uid"] == "abc", "{r}");
}

#[tokio::test]
async fn a_review_without_uid_still_gets_an_answer() {
    let h = harness();
    let mut rv = review("delete-configmap.json");
    rv["request"].as_object_mut().expect("object").remove("uid");
    let r = post_raw(
        &h.router,
        Some("application/json; charset=utf-8"),
        serde_json::to_vec(&rv).expect("json"),
    )
    .await;
    assert_eq!(r["uid"], "");
    assert_eq!(r["status"]["code"], 409);
}

async fn get(router: &Router, path: &str) -> (StatusCode, String) {
    let resp = router
        .clone()
        .oneshot(Request::get(path).body(Body::empty()).expect("request"))
        .await
        .expect("infallible");
    let status = resp.status();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .expect("body");
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn health_readiness_and_metrics() {
    let webhook = Webhook::builder(index()).build();
    let router = webhook.router();
    assert_eq!(get(&router, "/healthz").await.0, StatusCode::OK);
    assert_eq!(
        get(&router, "/readyz").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    webhook.set_ready(true);
    assert_eq!(get(&router, "/readyz").await.0, StatusCode::OK);
    post(&router, &review("delete-configmap.json")).await;
    post_raw(&router, Some("application/json"), b"junk".to_vec()).await;
    let (status, text) = get(&router, "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        text.contains("lien_webhook_requests_total{operation=\"DELETE\",outcome=\"denied\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("lien_webhook_requests_total{operation=\"unknown\",outcome=\"invalid\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("lien_webhook_request_duration_seconds_bucket"),
        "{text}"
    );
}

/// Issue 7 §4: a Usage is never itself protected.
#[tokio::test]
async fn a_usage_of_a_usage_is_refused_naming_spec_of() {
    let h = harness();
    let mut rv = review("create-usage.json");
    rv["request"]["object"]["spec"]["of"] = json!({
        "apiVersion": "lien.dev/v1alpha1", "kind": "Usage", "resourceRef": {"name": "other"}
    });
    let r = post(&h.router, &rv).await;
    assert_eq!(r["allowed"], false, "{r}");
    assert_eq!(r["status"]["code"], 422);
    let message = r["status"]["message"].as_str().expect("message");
    assert!(
        message.starts_with("spec.of: Usage (lien.dev/v1alpha1) is one of Lien's own kinds"),
        "{message}"
    );
}

/// Issue 7 §4: a relation of a Usage that got into the index (created before the check, or with
/// the webhook down) never blocks the deletion of the Usage, nor of its namespace.
#[tokio::test]
async fn deleting_a_lien_object_is_never_blocked() {
    let idx = index();
    let usage = ObjectKey::new("lien.dev", "Usage", Some(NS), "web-uses-settings");
    {
        let mut idx = idx.write();
        let s = Source::usage("other", "uses-a-usage");
        let by = ObjectKey::new("apps", "Deployment", Some("other"), "api");
        idx.apply(&s, [Relation::uses(s.clone(), usage, by)])
            .expect("apply");
    }
    let h = harness_with(idx, policy(), Arc::new(lien_webhook::NoLiveCheck));
    let mut rv = review("delete-configmap.json");
    rv["request"]["kind"] = json!({"group": "lien.dev", "version": "v1alpha1", "kind": "Usage"});
    rv["request"]["resource"] =
        json!({"group": "lien.dev", "version": "v1alpha1", "resource": "usages"});
    rv["request"]["name"] = json!("web-uses-settings");
    rv["request"]["oldObject"]["metadata"]["name"] = json!("web-uses-settings");
    let r = post(&h.router, &rv).await;
    assert_eq!(r["allowed"], true, "{r}");
    let r = post(&h.router, &review("delete-namespace.json")).await;
    assert_eq!(r["allowed"], true, "{r}");
}

/// Issue 7 §4: what the schema cannot hold back, the webhook refuses, naming the field.
#[rstest]
#[case::blank_reason(json!({"reason": "   "}), "spec.reason: must not be blank")]
#[case::long_reason(json!({"reason": "x".repeat(1025)}), "spec.reason: 1025 characters is too long: at most 1024")]
#[case::of_is_by(json!({"by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "settings"}}}), "spec.by: is identical to spec.of")]
#[case::of_is_by_at_another_version(json!({"by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "settings", "namespace": "fixtures"}}}), "spec.by: is identical to spec.of")]
#[case::empty_selector(json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceSelector": {}}}), "spec.of.resourceSelector: an empty selector selects every ConfigMap")]
#[case::namespace_only_selector(json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceSelector": {"namespace": "fixtures"}}}), "spec.of.resourceSelector: an empty selector")]
#[case::bad_label_key(json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceSelector": {"matchLabels": {"bad key!": "x"}}}}), "spec.of.resourceSelector.matchLabels: invalid label key \"bad key!\"")]
#[case::bad_label_value(json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceSelector": {"matchLabels": {"app": "-x"}}}}), "spec.of.resourceSelector.matchLabels[app]: invalid label value \"-x\"")]
#[case::too_many_labels(json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceSelector": {"matchLabels": (0..33).map(|i| (format!("k{i}"), json!("v"))).collect::<serde_json::Map<_, _>>()}}}), "spec.of.resourceSelector.matchLabels: 33 labels is too many: at most 32")]
#[case::bad_name(json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "Not_A_Name"}}}), "spec.of.resourceRef.name: invalid name \"Not_A_Name\"")]
#[case::bad_namespace(json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "s", "namespace": "a.b"}}, "by": {"apiVersion": "apps/v1", "kind": "Deployment", "resourceRef": {"name": "web"}}}), "spec.of.resourceRef.namespace: invalid namespace \"a.b\"")]
#[case::bad_kind(json!({"of": {"apiVersion": "v1", "kind": "Config Map", "resourceRef": {"name": "s"}}}), "spec.of.kind: invalid value \"Config Map\"")]
#[case::bad_api_version(json!({"of": {"apiVersion": "Apps/v1/", "kind": "ConfigMap", "resourceRef": {"name": "s"}}}), "spec.of.apiVersion: invalid value \"Apps/v1/\"")]
#[tokio::test]
async fn malformed_usages_are_refused_naming_the_field(
    #[case] patch: Value,
    #[case] message: &str,
) {
    let h = harness();
    let mut rv = review("create-usage.json");
    let spec = &mut rv["request"]["object"]["spec"];
    for (k, v) in patch.as_object().expect("object") {
        spec[k] = v.clone();
    }
    let r = post(&h.router, &rv).await;
    assert_eq!(r["allowed"], false, "{r}");
    assert_eq!(r["status"]["code"], 422, "{r}");
    let got = r["status"]["message"].as_str().expect("message");
    assert!(
        got.starts_with(message),
        "{got:?} does not start with {message:?}"
    );
}

/// RBAC's kinds are named like paths (`system:…`), as kube-apiserver allows.
#[tokio::test]
async fn rbac_names_are_path_segments() {
    let kinds = StaticKinds::default()
        .with("apps/v1", "Deployment", Scope::Namespaced)
        .with(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            Scope::Cluster,
        );
    let router = Webhook::builder(index())
        .kinds(Arc::new(kinds))
        .ready(true)
        .build()
        .router();
    let mut rv = review("create-usage.json");
    rv["request"]["object"]["spec"]["of"] = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "resourceRef": {"name": "system:aggregate-to-edit"}
    });
    let r = post(&router, &rv).await;
    assert_eq!(r["allowed"], true, "{r}");
}

/// Issue 27: the Eviction API deletes a pod without admitting a DELETE; its CREATE (the
/// Eviction as the object, the pod's name and namespace in the request) is refused with 429
/// while the pod is in use, as a PodDisruptionBudget refuses, and records nothing.
#[tokio::test]
async fn an_eviction_of_a_pod_in_use_is_refused_with_429() {
    let pod = ObjectKey::new("", "Pod", Some(NS), "db-0");
    let idx = Arc::new(RwLock::new(RelationIndex::new()));
    let keep = Source::usage(NS, "keep-db-0");
    idx.write()
        .apply(
            &keep,
            [Relation::protects(keep.clone(), pod, "the primary")],
        )
        .expect("apply");
    let mut h = harness_with(idx.clone(), policy(), Arc::new(lien_webhook::NoLiveCheck));
    let eviction = |name: &str| {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "e-1",
            "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "eviction",
            "requestKind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "requestSubResource": "eviction",
            "name": name, "namespace": NS, "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:cluster-autoscaler"},
            "object": {"apiVersion": "policy/v1", "kind": "Eviction",
                       "metadata": {"name": name, "namespace": NS}},
            "oldObject": null, "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}})
    };
    let r = post(&h.router, &eviction("db-0")).await;
    assert_eq!(r["allowed"], false, "{r}");
    assert_eq!(r["status"]["code"], 429);
    assert_eq!(r["status"]["reason"], "TooManyRequests");
    let message = r["status"]["message"].as_str().expect("a message");
    assert!(
        message.starts_with(
            "cannot evict: cannot delete Pod fixtures/db-0: it is protected (Usage fixtures/keep-db-0: the primary)."
        ),
        "{message}"
    );
    assert!(h.records.try_recv().is_err(), "an eviction records nothing");
    // Another pod, and the same pod once the lien is lifted: evicted.
    assert_eq!(post(&h.router, &eviction("web-0")).await["allowed"], true);
    idx.write().delete(&keep);
    assert_eq!(post(&h.router, &eviction("db-0")).await["allowed"], true);
}

/// Issue 27: an object whose deletion began before it was protected goes when its last
/// finalizer goes; the tamper guard refuses removing it while the object is in use.
#[tokio::test]
async fn removing_the_last_finalizer_of_an_object_in_use_being_deleted_is_refused() {
    let h = harness();
    let mut rv = review("update-strip-label.json");
    let labelled = json!({"app": "web", "lien.dev/in-use": "true"});
    for side in ["object", "oldObject"] {
        rv["request"][side]["metadata"]["labels"] = labelled.clone();
        rv["request"][side]["metadata"]["deletionTimestamp"] = json!("2026-11-27T10:00:00Z");
    }
    rv["request"]["oldObject"]["metadata"]["finalizers"] = json!(["example.org/hold"]);
    rv["request"]["object"]["metadata"]["finalizers"] = json!([]);
    let r = post(&h.router, &rv).await;
    assert_eq!(r["allowed"], false, "{r}");
    assert_eq!(r["status"]["code"], 409);
    let message = r["status"]["message"].as_str().expect("a message");
    assert!(
        message.starts_with(
            "cannot remove the last finalizer of ConfigMap fixtures/flags: it is being deleted and \
             it is in use by apps/Deployment fixtures/web (Usage fixtures/web-uses-settings)"
        ),
        "{message}"
    );
    // One finalizer of two: nothing completes.
    rv["request"]["oldObject"]["metadata"]["finalizers"] = json!(["a", "b"]);
    rv["request"]["object"]["metadata"]["finalizers"] = json!(["b"]);
    assert_eq!(post(&h.router, &rv).await["allowed"], true);
    // Not being deleted: removing finalizers deletes nothing.
    for side in ["object", "oldObject"] {
        rv["request"][side]["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove("deletionTimestamp");
    }
    rv["request"]["oldObject"]["metadata"]["finalizers"] = json!(["a"]);
    rv["request"]["object"]["metadata"]["finalizers"] = json!([]);
    assert_eq!(post(&h.router, &rv).await["allowed"], true);
    // Not in use: the deletion may complete.
    let h = harness_with(empty_index(), policy(), Arc::new(lien_webhook::NoLiveCheck));
    for side in ["object", "oldObject"] {
        rv["request"][side]["metadata"]["deletionTimestamp"] = json!("2026-11-27T10:00:00Z");
    }
    assert_eq!(post(&h.router, &rv).await["allowed"], true);
}

/// A relation in warn mode (`spec.enforcement: Warn`), of a Usage or a rule alike: the DELETE is
/// allowed, with the warning kubectl prints, and nothing is recorded; the metric counts it.
#[tokio::test]
async fn a_delete_held_only_in_warn_mode_is_allowed_with_a_warning() {
    for source in [
        Source::usage(NS, "web-uses-settings"),
        Source::rule("settings-readers"),
    ] {
        let mut idx = RelationIndex::new();
        idx.apply(
            &source,
            [Relation::uses(source.clone(), settings(), web())
                .with_reason("web reads its settings")
                .with_replay(true)
                .with_warn(true)],
        )
        .expect("apply");
        let mut h = harness_with(
            Arc::new(RwLock::new(idx)),
            policy(),
            Arc::new(lien_webhook::NoLiveCheck),
        );
        let r = post(&h.router, &review("delete-configmap.json")).await;
        assert_eq!(r["allowed"], true, "{r}");
        let warning = r["warnings"][0].as_str().unwrap_or_default();
        assert!(
            warning.starts_with(
                "Lien would refuse this DELETE, but only warns (spec.enforcement: Warn): ConfigMap fixtures/settings: it is in use by apps/Deployment fixtures/web ("
            ),
            "{r}"
        );
        assert!(warning.contains(&source.to_string()), "{warning}");
        assert!(h.records.try_recv().is_err(), "nothing recorded");
    }
}
