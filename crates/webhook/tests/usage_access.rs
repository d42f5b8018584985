//! "May the creator protect that object?": the Usage access check, with a fake
//! [`AccessCheck`] that records every question and answers as the test says.

use std::sync::Arc;
use std::time::Duration;

use lien_core::RelationIndex;
use lien_webhook::review::Review;
use lien_webhook::validate::validate_usage;
use lien_webhook::{
    AccessCheck, AccessCheckError, AccessDecision, AccessRequest, Authorize, BoxFuture, Outcome,
    Requester, Scope, StaticKinds, Webhook,
};
use parking_lot::{Mutex, RwLock};
use serde_json::{Value, json};

#[derive(Clone, Copy)]
enum Answer {
    Allow,
    Deny,
    Fail,
    Hang,
}

struct FakeAccess {
    answer: Answer,
    asked: Mutex<Vec<AccessRequest>>,
}

impl FakeAccess {
    fn new(answer: Answer) -> Arc<Self> {
        Arc::new(Self {
            answer,
            asked: Mutex::new(Vec::new()),
        })
    }

    fn asked(&self) -> Vec<AccessRequest> {
        self.asked.lock().clone()
    }
}

impl AccessCheck for FakeAccess {
    fn check<'a>(
        &'a self,
        request: &'a AccessRequest,
    ) -> BoxFuture<'a, Result<AccessDecision, AccessCheckError>> {
        self.asked.lock().push(request.clone());
        let answer = self.answer;
        Box::pin(async move {
            match answer {
                Answer::Allow => Ok(AccessDecision::Allowed),
                Answer::Deny => Ok(AccessDecision::Denied {
                    reason: String::new(),
                }),
                Answer::Fail => Err(AccessCheckError::Review(
                    "subjectaccessreviews.authorization.k8s.io is forbidden".into(),
                )),
                Answer::Hang => std::future::pending().await,
            }
        })
    }
}

fn kinds() -> StaticKinds {
    StaticKinds::default()
        .with("v1", "ConfigMap", Scope::Namespaced)
        .with("apps/v1", "Deployment", Scope::Namespaced)
        .with_resource(
            "storage.k8s.io/v1",
            "StorageClass",
            Scope::Cluster,
            "storageclasses",
        )
}

fn webhook(access: Arc<FakeAccess>) -> Webhook {
    Webhook::builder(Arc::new(RwLock::new(RelationIndex::new())))
        .kinds(Arc::new(kinds()))
        .access_check(access, Duration::from_millis(100))
        .ready(true)
        .build()
}

fn cm_ref(name: &str, ns: Option<&str>) -> Value {
    let mut r = json!({"name": name});
    if let Some(ns) = ns {
        r["namespace"] = json!(ns);
    }
    json!({"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": r})
}

fn by_web() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "resourceRef": {"name": "web"}})
}

fn alice() -> Value {
    json!({"username": "alice", "uid": "a-1", "groups": ["dev", "system:authenticated"]})
}

/// A Usage review as kube-apiserver sends it.
fn review(
    operation: &str,
    kind: &str,
    ns: Option<&str>,
    spec: Value,
    old: Option<Value>,
) -> Vec<u8> {
    let mut object = json!({"apiVersion": "lien.dev/v1alpha1", "kind": kind,
        "metadata": {"name": "u"}, "spec": spec});
    if let Some(ns) = ns {
        object["metadata"]["namespace"] = json!(ns);
    }
    let old_object = old.map(|spec| {
        let mut o = object.clone();
        o["spec"] = spec;
        o
    });
    let mut request = json!({"uid": "r-1", "operation": operation,
        "kind": {"group": "lien.dev", "version": "v1alpha1", "kind": kind},
        "resource": {"group": "lien.dev", "version": "v1alpha1", "resource": format!("{}s", kind.to_lowercase())},
        "name": "u", "userInfo": alice(), "object": object, "oldObject": old_object});
    if let Some(ns) = ns {
        request["namespace"] = json!(ns);
    }
    serde_json::to_vec(
        &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": request}),
    )
    .expect("json")
}

fn alice_requester() -> Requester {
    Requester {
        username: "alice".into(),
        uid: "a-1".into(),
        groups: vec!["dev".into(), "system:authenticated".into()],
        extra: Default::default(),
    }
}

#[tokio::test]
async fn an_allowed_creator_gets_the_usage_and_the_question_names_the_object() {
    let access = FakeAccess::new(Answer::Allow);
    let body = review(
        "CREATE",
        "Usage",
        Some("team-a"),
        json!({"of": cm_ref("settings", Some("team-b")), "by": by_web()}),
        None,
    );
    let answer = webhook(access.clone()).answer(&body).await;
    assert!(answer.allowed, "{answer:?}");
    assert_eq!(
        access.asked(),
        vec![AccessRequest {
            user: alice_requester(),
            verb: "update".into(),
            group: String::new(),
            resource: "configmaps".into(),
            namespace: Some("team-b".into()),
            name: Some("settings".into()),
        }]
    );
}

#[tokio::test]
async fn a_denied_creator_gets_403_naming_user_verb_resource_object_field_and_fix() {
    let access = FakeAccess::new(Answer::Deny);
    let body = review(
        "CREATE",
        "Usage",
        Some("team-a"),
        json!({"of": cm_ref("settings", Some("team-b")), "by": by_web()}),
        None,
    );
    let answer = webhook(access).answer(&body).await;
    assert!(!answer.allowed);
    let status = answer.status.expect("status");
    assert_eq!((status.code, status.reason), (403, "Forbidden"));
    let m = &status.message;
    for part in [
        "spec.of",
        "user \"alice\"",
        "update configmaps \"settings\" in namespace \"team-b\"",
        "blockOwnerDeletion",
        "Grant \"update\" on configmaps in namespace \"team-b\"",
        "ask someone who has it to create this Usage",
    ] {
        assert!(m.contains(part), "{part:?} in {m}");
    }
}

#[tokio::test]
async fn a_failed_or_slow_check_refuses_with_500() {
    for answer in [Answer::Fail, Answer::Hang] {
        let access = FakeAccess::new(answer);
        let body = review(
            "CREATE",
            "Usage",
            Some("team-a"),
            json!({"of": cm_ref("settings", None), "reason": "r"}),
            None,
        );
        let got = webhook(access).answer(&body).await;
        assert!(!got.allowed);
        let status = got.status.expect("status");
        assert_eq!((status.code, status.reason), (500, "InternalError"));
        assert!(status.message.contains("cannot check whether user \"alice\" may update configmaps \"settings\" in namespace \"team-a\""), "{}", status.message);
        assert!(status.message.contains("retry"), "{}", status.message);
    }
}

#[tokio::test]
async fn a_selector_asks_for_every_object_of_the_kind_in_the_namespace() {
    let access = FakeAccess::new(Answer::Deny);
    let body = review(
        "CREATE",
        "Usage",
        Some("team-a"),
        json!({"of": {"apiVersion": "v1", "kind": "ConfigMap",
            "resourceSelector": {"matchLabels": {"app": "web"}}}, "reason": "r"}),
        None,
    );
    let answer = webhook(access.clone()).answer(&body).await;
    let asked = access.asked();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].name, None, "no name: every object");
    assert_eq!(
        asked[0].namespace.as_deref(),
        Some("team-a"),
        "the Usage's own"
    );
    let m = answer.status.expect("denied").message;
    assert!(
        m.contains("update every object of configmaps in namespace \"team-a\""),
        "{m}"
    );
    assert!(m.contains("resourceSelector"), "{m}");
}

#[tokio::test]
async fn a_cluster_scoped_of_is_asked_without_a_namespace() {
    let access = FakeAccess::new(Answer::Deny);
    let body = review(
        "CREATE",
        "Usage",
        Some("team-a"),
        json!({"of": {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "resourceRef": {"name": "fast"}}, "reason": "r"}),
        None,
    );
    let answer = webhook(access.clone()).answer(&body).await;
    let asked = access.asked();
    assert_eq!(
        (
            asked[0].group.as_str(),
            asked[0].resource.as_str(),
            asked[0].namespace.as_deref(),
            asked[0].name.as_deref()
        ),
        ("storage.k8s.io", "storageclasses", None, Some("fast"))
    );
    let m = answer.status.expect("denied").message;
    assert!(
        m.contains("update storageclasses.storage.k8s.io \"fast\" at the cluster scope"),
        "{m}"
    );
}

#[tokio::test]
async fn a_cluster_usage_selector_without_namespace_asks_for_every_namespace() {
    let access = FakeAccess::new(Answer::Deny);
    let body = review(
        "CREATE",
        "ClusterUsage",
        None,
        json!({"of": {"apiVersion": "v1", "kind": "ConfigMap",
            "resourceSelector": {"matchLabels": {"app": "web"}}}, "reason": "r"}),
        None,
    );
    let answer = webhook(access.clone()).answer(&body).await;
    assert_eq!(access.asked()[0].namespace, None);
    let m = answer.status.expect("denied").message;
    assert!(m.contains("in every namespace"), "{m}");
    assert!(m.contains("this ClusterUsage"), "{m}");
}

#[tokio::test]
async fn an_update_is_checked_only_when_spec_of_changes() {
    let access = FakeAccess::new(Answer::Deny);
    let hook = webhook(access.clone());
    let same = review(
        "UPDATE",
        "Usage",
        Some("team-a"),
        json!({"of": cm_ref("settings", None), "reason": "new reason"}),
        Some(json!({"of": cm_ref("settings", None), "reason": "old reason"})),
    );
    assert!(hook.answer(&same).await.allowed, "only the reason changed");
    assert!(access.asked().is_empty(), "the check was not called");
    let moved = review(
        "UPDATE",
        "Usage",
        Some("team-a"),
        json!({"of": cm_ref("other", None), "reason": "r"}),
        Some(json!({"of": cm_ref("settings", None), "reason": "r"})),
    );
    assert!(!hook.answer(&moved).await.allowed);
    assert_eq!(access.asked()[0].name.as_deref(), Some("other"));
}

/// Warn mode lifted to Deny starts refusing: the right is asked again, as for a new Usage; the
/// other way round (or warn to warn) lifts nothing and asks nothing.
#[tokio::test]
async fn an_update_from_warn_to_deny_is_checked() {
    let access = FakeAccess::new(Answer::Deny);
    let hook = webhook(access.clone());
    let spec = |enforcement: &str| json!({"of": cm_ref("settings", None), "reason": "r", "enforcement": enforcement});
    let update = |new: &str, old: &str| {
        review(
            "UPDATE",
            "Usage",
            Some("team-a"),
            spec(new),
            Some(spec(old)),
        )
    };
    assert!(hook.answer(&update("Warn", "Deny")).await.allowed);
    assert!(hook.answer(&update("Warn", "Warn")).await.allowed);
    assert!(access.asked().is_empty(), "lifting asks nothing");
    let answer = hook.answer(&update("Deny", "Warn")).await;
    assert!(!answer.allowed);
    assert_eq!(access.asked()[0].name.as_deref(), Some("settings"));
}

#[tokio::test]
async fn an_invalid_usage_is_refused_before_any_check() {
    let access = FakeAccess::new(Answer::Allow);
    let body = review(
        "CREATE",
        "Usage",
        Some("team-a"),
        json!({"of": {"apiVersion": "example.org/v1", "kind": "Widget",
            "resourceRef": {"name": "w"}}, "reason": "r"}),
        None,
    );
    let answer = webhook(access.clone()).answer(&body).await;
    assert_eq!(answer.status.expect("denied").code, 422);
    assert!(access.asked().is_empty());
}

#[test]
fn the_validator_stays_pure_and_passes_extra_through() {
    let mut body: Value = serde_json::from_slice(&review(
        "CREATE",
        "Usage",
        Some("team-a"),
        json!({"of": cm_ref("settings", None), "reason": "r"}),
        None,
    ))
    .expect("json");
    body["request"]["userInfo"] = json!({
        "username": "system:serviceaccount:ci:deployer",
        "groups": ["system:serviceaccounts"],
        "extra": {"authentication.kubernetes.io/pod-name": ["runner-1"]}});
    let bytes = serde_json::to_vec(&body).expect("json");
    let req = Review::parse(&bytes).expect("parses");
    let kinds = kinds();
    // Without an access check configured, a valid Usage is simply allowed.
    assert!(matches!(
        validate_usage(&kinds, &req, &bytes, false),
        Outcome::Allow { .. }
    ));
    let Outcome::Authorize(Authorize { request, .. }) = validate_usage(&kinds, &req, &bytes, true)
    else {
        panic!("expected a question for the access check");
    };
    assert_eq!(request.user.username, "system:serviceaccount:ci:deployer");
    assert_eq!(
        request
            .user
            .extra
            .get("authentication.kubernetes.io/pod-name"),
        Some(&vec!["runner-1".to_string()])
    );
}

#[tokio::test]
async fn without_an_access_check_usages_are_not_asked_about() {
    let hook = Webhook::builder(Arc::new(RwLock::new(RelationIndex::new())))
        .kinds(Arc::new(kinds()))
        .ready(true)
        .build();
    let body = review(
        "CREATE",
        "Usage",
        Some("team-a"),
        json!({"of": cm_ref("settings", Some("team-b")), "by": by_web()}),
        None,
    );
    assert!(hook.answer(&body).await.allowed);
}

/// Without a client CA a forged Usage review makes Lien ask the API server too: those questions
/// are bounded like `/mutate`'s (a burst of twice the rate), the rest refused 429 unasked. The
/// API server, or any caller the webhook trusts, is never bounded.
#[tokio::test]
async fn access_checks_for_unauthenticated_callers_are_bounded() {
    let access = FakeAccess::new(Answer::Allow);
    let webhook = Webhook::builder(Arc::new(RwLock::new(RelationIndex::new())))
        .kinds(Arc::new(kinds()))
        .access_check(access.clone(), Duration::from_millis(100))
        .review_auth(lien_webhook::ReviewAuth::AnswerOnly)
        .unauthenticated_access_checks(1)
        .ready(true)
        .build();
    let body = review(
        "CREATE",
        "Usage",
        Some("team-a"),
        json!({"of": cm_ref("settings", None), "by": by_web()}),
        None,
    );
    let started = std::time::Instant::now();
    let mut throttled = 0;
    for _ in 0..10 {
        let answer = webhook.answer_from(&body, false).await;
        match answer.status.as_ref().map(|s| s.code) {
            None => assert!(answer.allowed, "{answer:?}"),
            Some(429) => {
                throttled += 1;
                let message = &answer.status.as_ref().expect("status").message;
                assert!(
                    message.contains("cannot check whether user \"alice\" may update configmaps")
                        && message.contains("retry shortly"),
                    "{message}"
                );
            }
            Some(other) => panic!("{other}: {answer:?}"),
        }
    }
    let asked = access.asked().len();
    assert!(asked <= 2 + started.elapsed().as_secs() as usize, "{asked}");
    assert_eq!(asked + throttled, 10);
    let before = access.asked().len();
    for _ in 0..3 {
        assert!(webhook.answer_from(&body, true).await.allowed);
    }
    assert_eq!(access.asked().len(), before + 3);
}
