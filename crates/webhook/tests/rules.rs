//! DependencyRule and CascadeRule admission (CEL compiles, the creator consents), and what the
//! webhook does with relations a rule derives: refusals listing many dependents, namespaces,
//! dry runs, the tamper guard and break-glass — all through `Webhook::answer`, with a fake
//! access check and an index holding `Source::Rule` relations directly (no controller).

use std::sync::Arc;
use std::time::Duration;

use lien_core::{ObjectKey, Relation, RelationIndex, Source};
use lien_webhook::{
    AccessCheck, AccessCheckError, AccessDecision, AccessRequest, BoxFuture, Policy, Record, Scope,
    StaticKinds, Webhook,
};
use parking_lot::{Mutex, RwLock};
use serde_json::{Value, json};
use tokio::sync::mpsc;

struct FakeAccess {
    allow: bool,
    /// A resource refused even when `allow`.
    deny_resource: Option<&'static str>,
    asked: Mutex<Vec<AccessRequest>>,
}

impl FakeAccess {
    fn new(allow: bool) -> Arc<Self> {
        Arc::new(Self {
            allow,
            deny_resource: None,
            asked: Mutex::new(Vec::new()),
        })
    }

    fn denying(resource: &'static str) -> Arc<Self> {
        Arc::new(Self {
            allow: true,
            deny_resource: Some(resource),
            asked: Mutex::new(Vec::new()),
        })
    }
}

impl AccessCheck for FakeAccess {
    fn check<'a>(
        &'a self,
        request: &'a AccessRequest,
    ) -> BoxFuture<'a, Result<AccessDecision, AccessCheckError>> {
        self.asked.lock().push(request.clone());
        let allow = self.allow && self.deny_resource != Some(request.resource.as_str());
        Box::pin(async move {
            Ok(if allow {
                AccessDecision::Allowed
            } else {
                AccessDecision::Denied {
                    reason: "no RBAC policy matched".into(),
                }
            })
        })
    }
}

fn kinds() -> StaticKinds {
    StaticKinds::default()
        .with("ceph.rook.io/v1", "CephBlockPool", Scope::Namespaced)
        .with_resource(
            "v1",
            "PersistentVolume",
            Scope::Cluster,
            "persistentvolumes",
        )
        .with("v1", "ConfigMap", Scope::Namespaced)
        .with("v1", "Secret", Scope::Namespaced)
}

struct Harness {
    webhook: Webhook,
    records: mpsc::Receiver<Record>,
}

fn harness(index: RelationIndex, access: Option<Arc<FakeAccess>>) -> Harness {
    let (tx, records) = mpsc::channel(16);
    let mut b = Webhook::builder(Arc::new(RwLock::new(index)))
        .kinds(Arc::new(kinds()))
        .policy(Policy {
            break_glass_groups: vec!["lien:break-glass".into()],
            ..Policy::default()
        })
        .records(tx)
        .ready(true);
    if let Some(access) = access {
        b = b.access_check(access, Duration::from_millis(200));
    }
    Harness {
        webhook: b.build(),
        records,
    }
}

fn review(request: Value) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}),
    )
    .expect("json")
}

fn rule_review(operation: &str, kind: &str, spec: Value, old: Option<Value>) -> Vec<u8> {
    let object = json!({"apiVersion": "lien.dev/v1alpha1", "kind": kind, "metadata": {"name": "r"}, "spec": spec});
    let old_object = old.map(|spec| {
        let mut o = object.clone();
        o["spec"] = spec;
        o
    });
    review(json!({
        "uid": "r-1", "operation": operation,
        "kind": {"group": "lien.dev", "version": "v1alpha1", "kind": kind},
        "resource": {"group": "lien.dev", "version": "v1alpha1", "resource": format!("{}s", kind.to_lowercase())},
        "name": "r",
        "userInfo": {"username": "alice", "uid": "a-1", "groups": ["dev"]},
        "object": object, "oldObject": old_object,
    }))
}

fn pool_rule(keys_by: &str) -> Value {
    json!({
        "of": {"apiVersion": "ceph.rook.io/v1", "kind": "CephBlockPool"},
        "by": {"apiVersion": "v1", "kind": "PersistentVolume"},
        "scope": "Cluster",
        "keys": {"of": "[self.metadata.name]", "by": keys_by},
        "reason": "its data lives in the pool",
    })
}

fn message(answer: &lien_webhook::Answer) -> (u16, String) {
    let status = answer.status.as_ref().expect("a status");
    (status.code, status.message.clone())
}

#[tokio::test]
async fn a_rule_whose_cel_does_not_compile_is_refused_naming_the_field() {
    let h = harness(RelationIndex::new(), Some(FakeAccess::new(true)));
    let body = rule_review(
        "CREATE",
        "DependencyRule",
        pool_rule("[self.spec.csi.volumeAttributes.pool"),
        None,
    );
    let answer = h.webhook.answer(&body).await;
    assert!(!answer.allowed);
    let (code, m) = message(&answer);
    assert_eq!(code, 422, "{m}");
    assert!(m.starts_with("spec.keys.by: "), "{m}");
    assert!(m.contains("correct the CEL expression"), "{m}");
    assert!(!m.contains('\n'), "one line: {m}");
    // Not only syntax: an identifier other than `self` is refused too (lien-cel's check).
    let answer = h
        .webhook
        .answer(&rule_review(
            "CREATE",
            "DependencyRule",
            pool_rule("[object.spec.pool]"),
            None,
        ))
        .await;
    let (code, m) = message(&answer);
    assert_eq!(code, 422, "{m}");
    assert!(m.starts_with("spec.keys.by: "), "{m}");
    // `when` and a CascadeRule's `children` are named the same way.
    let mut spec = pool_rule("[self.spec.csi.volumeAttributes.pool]");
    spec["when"] = json!("self.spec.x ==");
    let answer = h
        .webhook
        .answer(&rule_review("CREATE", "DependencyRule", spec, None))
        .await;
    assert!(message(&answer).1.starts_with("spec.when: "), "{answer:?}");
    let cascade = json!({
        "parent": {"apiVersion": "v1", "kind": "ConfigMap"},
        "children": "[self.spec.ref",
        "childKinds": [{"apiVersion": "v1", "kind": "Secret", "backReference": "self.metadata.ownerRef"}],
    });
    let answer = h
        .webhook
        .answer(&rule_review("CREATE", "CascadeRule", cascade, None))
        .await;
    assert!(
        message(&answer).1.starts_with("spec.children: "),
        "{answer:?}"
    );
}

#[tokio::test]
async fn a_good_rule_is_allowed_after_a_cluster_wide_access_check() {
    let access = FakeAccess::new(true);
    let h = harness(RelationIndex::new(), Some(access.clone()));
    let body = rule_review(
        "CREATE",
        "DependencyRule",
        pool_rule("[self.spec.csi.volumeAttributes.pool]"),
        None,
    );
    let answer = h.webhook.answer(&body).await;
    assert!(answer.allowed, "{answer:?}");
    let asked = access.asked.lock().clone();
    assert_eq!(asked.len(), 1);
    let q = &asked[0];
    assert_eq!(
        (
            q.verb.as_str(),
            q.group.as_str(),
            q.resource.as_str(),
            &q.namespace,
            &q.name
        ),
        ("update", "ceph.rook.io", "cephblockpools", &None, &None)
    );
    assert_eq!(q.user.username, "alice");
    // An unknown kind is allowed (the controller reports it until its CRD appears); consent is
    // then asked over every resource of its group.
    let mut spec = pool_rule("[self.spec.pool]");
    spec["of"] = json!({"apiVersion": "example.org/v1", "kind": "NotYet"});
    let answer = h
        .webhook
        .answer(&rule_review("CREATE", "DependencyRule", spec, None))
        .await;
    assert!(answer.allowed, "{answer:?}");
    let asked = access.asked.lock().clone();
    assert_eq!(
        (asked[1].group.as_str(), asked[1].resource.as_str()),
        ("example.org", "*")
    );
}

#[tokio::test]
async fn consent_denied_is_403_naming_user_verb_resource_and_fix() {
    let h = harness(RelationIndex::new(), Some(FakeAccess::new(false)));
    let body = rule_review(
        "CREATE",
        "DependencyRule",
        pool_rule("[self.spec.csi.volumeAttributes.pool]"),
        None,
    );
    let answer = h.webhook.answer(&body).await;
    assert!(!answer.allowed);
    let (code, m) = message(&answer);
    assert_eq!(code, 403, "{m}");
    for part in [
        "spec.of: user \"alice\" may not update every object of cephblockpools.ceph.rook.io in every namespace",
        "can make any CephBlockPool undeletable",
        "Grant \"update\" on cephblockpools.ceph.rook.io cluster-wide",
        "ask someone who has it to apply this DependencyRule",
        "(authorizer: no RBAC policy matched)",
    ] {
        assert!(m.contains(part), "{part:?} in {m}");
    }
    // A CascadeRule needs `delete` on every parent.
    let cascade = json!({
        "parent": {"apiVersion": "v1", "kind": "ConfigMap"},
        "children": "[self.data]",
        "childKinds": [{"apiVersion": "v1", "kind": "Secret", "backReference": "self.data"}],
    });
    let answer = h
        .webhook
        .answer(&rule_review("CREATE", "CascadeRule", cascade, None))
        .await;
    let (code, m) = message(&answer);
    assert_eq!(code, 403, "{m}");
    assert!(
        m.starts_with(
            "spec.parent: user \"alice\" may not delete every object of configmaps in every namespace"
        ),
        "{m}"
    );
}

#[tokio::test]
async fn changing_only_the_reason_needs_no_consent() {
    let access = FakeAccess::new(false);
    let h = harness(RelationIndex::new(), Some(access.clone()));
    let old = pool_rule("[self.spec.csi.volumeAttributes.pool]");
    let mut new = old.clone();
    new["reason"] = json!("reworded");
    new["replayDeletion"] = json!(true);
    let answer = h
        .webhook
        .answer(&rule_review(
            "UPDATE",
            "DependencyRule",
            new,
            Some(old.clone()),
        ))
        .await;
    assert!(answer.allowed, "{answer:?}");
    assert!(access.asked.lock().is_empty());
    // Changing what it relates does.
    let moved = pool_rule("[self.spec.csi.volumeAttributes.journalPool]");
    let answer = h
        .webhook
        .answer(&rule_review("UPDATE", "DependencyRule", moved, Some(old)))
        .await;
    assert_eq!(message(&answer).0, 403);
}

#[tokio::test]
async fn switching_a_rule_from_warn_to_deny_needs_consent_and_back_does_not() {
    let access = FakeAccess::new(false);
    let h = harness(RelationIndex::new(), Some(access.clone()));
    let mut warn = pool_rule("[self.spec.csi.volumeAttributes.pool]");
    warn["enforcement"] = json!("Warn");
    let mut deny = warn.clone();
    deny["enforcement"] = json!("Deny");
    let answer = h
        .webhook
        .answer(&rule_review(
            "UPDATE",
            "DependencyRule",
            warn.clone(),
            Some(deny.clone()),
        ))
        .await;
    assert!(answer.allowed, "Deny to Warn lifts: {answer:?}");
    assert!(access.asked.lock().is_empty());
    let answer = h
        .webhook
        .answer(&rule_review("UPDATE", "DependencyRule", deny, Some(warn)))
        .await;
    assert_eq!(message(&answer).0, 403, "Warn to Deny starts refusing");
}

#[tokio::test]
async fn a_rule_over_lien_kinds_or_without_a_reason_is_refused() {
    let h = harness(RelationIndex::new(), None);
    let mut spec = pool_rule("[self.spec.pool]");
    spec["of"] = json!({"apiVersion": "lien.dev/v1alpha1", "kind": "Usage"});
    spec["reason"] = json!("  ");
    let answer = h
        .webhook
        .answer(&rule_review("CREATE", "DependencyRule", spec, None))
        .await;
    let (code, m) = message(&answer);
    assert_eq!(code, 422);
    assert!(
        m.contains("spec.of: Usage (lien.dev/v1alpha1) is one of Lien's own kinds"),
        "{m}"
    );
    assert!(m.contains("spec.reason: must not be blank"), "{m}");
}

// ----- relations derived by rules ----------------------------------------------------------

const POOL_UID: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

fn pool() -> ObjectKey {
    ObjectKey::new(
        "ceph.rook.io",
        "CephBlockPool",
        Some("rook-ceph"),
        "replicapool",
    )
}

fn pv(i: usize) -> ObjectKey {
    ObjectKey::new("", "PersistentVolume", None, format!("pvc-{i:03}"))
}

fn rule() -> Source {
    Source::rule("rook-ceph-pv-uses-blockpool")
}

/// A pool held by `n` PersistentVolumes through a rule (with replay).
fn pool_index(n: usize) -> RelationIndex {
    let mut idx = RelationIndex::new();
    idx.apply(
        &rule(),
        (0..n).map(|i| {
            Relation::uses(rule(), pool(), pv(i))
                .with_reason("its data lives in the pool")
                .with_replay(true)
                .with_uids(Some(POOL_UID), None)
        }),
    )
    .expect("valid");
    idx
}

fn object_review(
    operation: &str,
    old_meta: Value,
    new_meta: Option<Value>,
    dry_run: bool,
) -> Vec<u8> {
    let object = |meta: Value| json!({"apiVersion": "ceph.rook.io/v1", "kind": "CephBlockPool", "metadata": meta});
    review(json!({
        "uid": "d-1", "operation": operation,
        "kind": {"group": "ceph.rook.io", "version": "v1", "kind": "CephBlockPool"},
        "resource": {"group": "ceph.rook.io", "version": "v1", "resource": "cephblockpools"},
        "name": "replicapool", "namespace": "rook-ceph",
        "userInfo": {"username": "bob", "groups": ["ops", "lien:break-glass"]},
        "dryRun": dry_run,
        "oldObject": object(old_meta),
        "object": new_meta.map(object),
    }))
}

fn pool_meta(labels: Value, annotations: Value) -> Value {
    json!({"name": "replicapool", "namespace": "rook-ceph", "uid": POOL_UID,
           "resourceVersion": "7", "labels": labels, "annotations": annotations})
}

#[tokio::test]
async fn a_delete_held_by_150_rule_dependents_names_the_rule_once_and_bounds_the_list() {
    let mut h = harness(pool_index(150), None);
    let body = object_review(
        "DELETE",
        pool_meta(json!({"lien.dev/in-use": "true"}), json!({})),
        None,
        false,
    );
    let answer = h.webhook.answer(&body).await;
    let (code, m) = message(&answer);
    assert_eq!(code, 409);
    let listed: Vec<String> = (0..10)
        .map(|i| format!("PersistentVolume pvc-{i:03}"))
        .collect();
    assert_eq!(
        m,
        format!(
            "cannot delete ceph.rook.io/CephBlockPool rook-ceph/replicapool: it is in use by 150 \
             objects.\n\
             Lien will delete it when its last user is gone.\n\
             To free it now, delete its 150 users first (listed below); for the other ways: \
             `kubectl lien why cephblockpool.ceph.rook.io/replicapool -n rook-ceph`.\n\
             held by:\n  \
             in use by {} (DependencyRule rook-ceph-pv-uses-blockpool: its data lives in the pool)\n  \
             and 140 more",
            listed.join(", ")
        )
    );
    let Ok(Record::Denied(d)) = h.records.try_recv() else {
        panic!("a denial record");
    };
    assert!(d.replay, "the rule asks for replay");
    assert_eq!(d.uid.as_deref(), Some(POOL_UID));
}

#[tokio::test]
async fn a_dry_run_delete_of_a_rule_held_object_is_refused_without_a_record() {
    let mut h = harness(pool_index(2), None);
    let body = object_review(
        "DELETE",
        pool_meta(json!({"lien.dev/in-use": "true"}), json!({})),
        None,
        true,
    );
    let answer = h.webhook.answer(&body).await;
    assert_eq!(message(&answer).0, 409);
    assert!(h.records.try_recv().is_err(), "a dry run leaves no trace");
}

#[tokio::test]
async fn the_tamper_guard_keeps_the_label_of_a_rule_held_object() {
    let h = harness(pool_index(1), None);
    let body = object_review(
        "UPDATE",
        pool_meta(json!({"lien.dev/in-use": "true"}), json!({})),
        Some(pool_meta(json!({}), json!({}))),
        false,
    );
    let answer = h.webhook.answer(&body).await;
    let (code, m) = message(&answer);
    assert_eq!(code, 409);
    assert_eq!(
        m,
        "cannot remove label lien.dev/in-use from ceph.rook.io/CephBlockPool rook-ceph/replicapool: \
         Lien manages it and it is in use by PersistentVolume pvc-000 \
         (DependencyRule rook-ceph-pv-uses-blockpool: its data lives in the pool); \
         the label goes when the last relation does"
    );
    // Once the rule's relation is gone, the label may go.
    let h = harness(RelationIndex::new(), None);
    assert!(h.webhook.answer(&body).await.allowed);
}

#[tokio::test]
async fn break_glass_overrides_a_rule_and_names_it_in_the_audit() {
    let mut h = harness(pool_index(3), None);
    let glass = json!({"lien.dev/break-glass": "INC-42 pool is corrupt"});
    let body = object_review(
        "DELETE",
        pool_meta(json!({"lien.dev/in-use": "true"}), glass),
        None,
        false,
    );
    let answer = h.webhook.answer(&body).await;
    assert!(answer.allowed, "{answer:?}");
    let Ok(Record::BreakGlass(used)) = h.records.try_recv() else {
        panic!("an audit record");
    };
    assert_eq!(used.sources, [rule()]);
    assert!(
        used.overridden
            .contains("DependencyRule rook-ceph-pv-uses-blockpool")
    );
}

// ----- namespaces ---------------------------------------------------------------------------

fn namespace_review(name: &str) -> Vec<u8> {
    review(json!({
        "uid": "n-1", "operation": "DELETE",
        "kind": {"group": "", "version": "v1", "kind": "Namespace"},
        "resource": {"group": "", "version": "v1", "resource": "namespaces"},
        "name": name, "namespace": name,
        "userInfo": {"username": "bob", "groups": ["ops"]},
        "oldObject": {"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": name, "uid": "11111111-2222-4333-8444-555555555555"}},
    }))
}

#[tokio::test]
async fn a_namespace_whose_pool_is_used_by_volumes_outside_it_is_refused_and_recorded() {
    // 150 cluster-scoped PVs use a pool in rook-ceph: they leave the namespace.
    let mut h = harness(pool_index(150), None);
    let answer = h.webhook.answer(&namespace_review("rook-ceph")).await;
    let (code, m) = message(&answer);
    assert_eq!(code, 409);
    let lines: Vec<&str> = m.lines().collect();
    assert_eq!(
        lines[..2],
        [
            "cannot delete Namespace rook-ceph: 150 liens hold what is in it (protections, or \
             users outside the namespace).",
            "Lien will delete it once nothing holds it.",
        ],
        "{m}"
    );
    assert!(
        lines[2].starts_with("To free it now, lift each one listed below (its command follows it)"),
        "{m}"
    );
    // The detail: the policy's ten, one line each, and the count of the rest.
    assert_eq!(lines[3], "held by:", "{m}");
    assert_eq!(
        lines[4],
        "  ceph.rook.io/CephBlockPool rook-ceph/replicapool is in use by PersistentVolume pvc-000 \
         (DependencyRule rook-ceph-pv-uses-blockpool: its data lives in the pool) — lift it: \
         `kubectl delete persistentvolume/pvc-000`"
    );
    assert_eq!(lines[14..], ["  and 140 more"], "{m}");
    let Ok(Record::Denied(d)) = h.records.try_recv() else {
        panic!("a denial record");
    };
    assert_eq!(d.object, ObjectKey::new("", "Namespace", None, "rook-ceph"));
    assert!(d.replay, "replayed once nothing in it is used from outside");
    // Another namespace is free to go.
    assert!(h.webhook.answer(&namespace_review("team-a")).await.allowed);
}

#[tokio::test]
async fn a_namespace_whose_relations_stay_inside_it_may_go() {
    let mut idx = RelationIndex::new();
    let cm = |name: &str| ObjectKey::new("", "ConfigMap", Some("rook-ceph"), name);
    idx.apply(
        &rule(),
        [Relation::uses(rule(), pool(), cm("nfs")).with_reason("inside")],
    )
    .expect("valid");
    let h = harness(idx, None);
    let answer = h.webhook.answer(&namespace_review("rook-ceph")).await;
    assert!(answer.allowed, "{answer:?}");
}

/// A CascadeRule whose parents are CephBlockPools and whose children are PersistentVolumes
/// (cluster-scoped) and Secrets.
fn claim_rule() -> serde_json::Value {
    json!({
        "parent": {"apiVersion": "ceph.rook.io/v1", "kind": "CephBlockPool"},
        "children": "[self.spec.resourceRef]",
        "childKinds": [
            {"apiVersion": "v1", "kind": "PersistentVolume", "backReference": "self.spec.claimRef"},
            {"apiVersion": "v1", "kind": "Secret", "backReference": "self.metadata.annotations['owner']"},
        ],
    })
}

#[tokio::test]
async fn a_cascade_rule_must_list_its_child_kinds_each_with_a_back_reference_that_compiles() {
    let h = harness(RelationIndex::new(), Some(FakeAccess::new(true)));
    let refused = |spec: serde_json::Value| {
        let webhook = &h.webhook;
        async move {
            let answer = webhook
                .answer(&rule_review("CREATE", "CascadeRule", spec, None))
                .await;
            let (code, m) = message(&answer);
            assert_eq!(code, 422, "{m}");
            m
        }
    };
    let mut spec = claim_rule();
    spec.as_object_mut().expect("map").remove("childKinds");
    let m = refused(spec).await;
    assert!(
        m.starts_with("spec.childKinds: must list at least one kind"),
        "{m}"
    );
    let mut spec = claim_rule();
    spec["childKinds"][1]["backReference"] = json!("self.spec.(");
    let m = refused(spec).await;
    assert!(m.contains("spec.childKinds[1].backReference: "), "{m}");
    let mut spec = claim_rule();
    spec["childKinds"][0]["kind"] = json!("not a kind");
    let m = refused(spec).await;
    assert!(m.contains("spec.childKinds[0]"), "{m}");
}

#[tokio::test]
async fn a_cascade_rule_needs_delete_on_its_parent_kind_and_every_child_kind() {
    // Allowed: one question per kind, the parent's first, then each child kind in order.
    let access = FakeAccess::new(true);
    let h = harness(RelationIndex::new(), Some(access.clone()));
    let answer = h
        .webhook
        .answer(&rule_review("CREATE", "CascadeRule", claim_rule(), None))
        .await;
    assert!(answer.allowed, "{answer:?}");
    let asked: Vec<(String, String, String)> = access
        .asked
        .lock()
        .iter()
        .map(|q| (q.verb.clone(), q.group.clone(), q.resource.clone()))
        .collect();
    assert_eq!(
        asked,
        [
            ("delete", "ceph.rook.io", "cephblockpools"),
            ("delete", "", "persistentvolumes"),
            ("delete", "", "secrets"),
        ]
        .map(|(v, g, r)| (v.to_owned(), g.to_owned(), r.to_owned()))
    );
    // The author may delete the parents and PersistentVolumes but not Secrets: refused,
    // naming the child kind's field and the fix, and nothing after it is asked.
    let access = FakeAccess::denying("secrets");
    let h = harness(RelationIndex::new(), Some(access.clone()));
    let answer = h
        .webhook
        .answer(&rule_review("CREATE", "CascadeRule", claim_rule(), None))
        .await;
    let (code, m) = message(&answer);
    assert_eq!(code, 403, "{m}");
    for part in [
        "spec.childKinds[1]: user \"alice\" may not delete every object of secrets",
        "must be allowed to delete every Secret (or remove the kind from spec.childKinds)",
        "Grant \"delete\" on secrets cluster-wide",
        "apply this CascadeRule",
    ] {
        assert!(m.contains(part), "{part:?} in {m}");
    }
    assert_eq!(access.asked.lock().len(), 3);
    // Refused on the parent: the child kinds are not asked.
    let access = FakeAccess::denying("cephblockpools");
    let h = harness(RelationIndex::new(), Some(access.clone()));
    let answer = h
        .webhook
        .answer(&rule_review("CREATE", "CascadeRule", claim_rule(), None))
        .await;
    assert!(
        message(&answer).1.starts_with("spec.parent: "),
        "{answer:?}"
    );
    assert_eq!(access.asked.lock().len(), 1);
}
