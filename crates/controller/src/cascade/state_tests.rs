//! `CascadeState` driven event by event, without a runtime: the unit-level equivalents of
//! `e2e/cascade.rs` and `e2e/cascade_rbac.rs`. Each test feeds the watch events the API server
//! would send, echoes Lien's own writes back as their watch events would, and asserts on the
//! effects (`Effect`, `CascadeWrite`) the state asks for.

use std::time::Duration;

use kube::api::DynamicObject;
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher::Event;
use lien_api::{CASCADE_FINALIZER, CascadeRule, PropagationPolicy};
use lien_core::GroupKind;
use serde_json::{Value, json};

use super::*;

const GROUP: &str = "example.org";
const V: &str = "example.org/v1";
const NS: &str = "team";
const RULE: &str = "claims";

fn gk(kind: &str) -> GroupKind {
    GroupKind::from_api_version(V, kind)
}

fn ar(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(GROUP, "v1", kind))
}

fn config() -> CascadeConfig {
    CascadeConfig {
        // The first report soon, so a pass a moment later shows it.
        report_after: Duration::from_millis(10),
        ..CascadeConfig::default()
    }
}

/// Seed 001's rule: a Claim names its child in `spec.resourceRef`; children of `child_kinds`
/// name their claim back in `spec.claimRef`; the policy comes from the claim.
fn rule(child_kinds: &[&str], meta: Value) -> CascadeRule {
    let back = "has(self.spec.claimRef) ? self.spec.claimRef : null";
    let kinds: Vec<Value> = child_kinds
        .iter()
        .map(|k| json!({"apiVersion": V, "kind": k, "backReference": back}))
        .collect();
    let mut metadata = json!({"name": RULE, "uid": "rule-uid", "resourceVersion": "1",
        "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"});
    merge(&mut metadata, meta);
    serde_json::from_value(json!({"apiVersion": "lien.dev/v1alpha1", "kind": "CascadeRule",
        "metadata": metadata,
        "spec": {"parent": {"apiVersion": V, "kind": "Claim"},
                 "children": "[self.spec.resourceRef]",
                 "childKinds": kinds,
                 "propagationPolicyExpression":
                    "has(self.spec.compositeDeletePolicy) ? self.spec.compositeDeletePolicy : 'Background'"}}))
    .expect("rule")
}

fn merge(into: &mut Value, from: Value) {
    if let (Some(into), Value::Object(from)) = (into.as_object_mut(), from) {
        for (k, v) in from {
            into.insert(k, v);
        }
    }
}

fn object(kind: &str, ns: Option<&str>, name: &str, meta: Value, spec: Value) -> DynamicObject {
    let mut metadata = json!({"name": name, "uid": format!("{name}-uid"), "resourceVersion": "1"});
    if let Some(ns) = ns {
        metadata["namespace"] = json!(ns);
    }
    merge(&mut metadata, meta);
    serde_json::from_value(json!({"apiVersion": V, "kind": kind, "metadata": metadata,
        "spec": spec}))
    .expect("object")
}

/// A claim in [`NS`] referencing `target` (`{apiVersion, kind, name, namespace?}`).
fn claim(name: &str, target: Value, policy: Option<&str>, meta: Value) -> DynamicObject {
    let mut spec = json!({ "resourceRef": target });
    if let Some(p) = policy {
        spec["compositeDeletePolicy"] = json!(p);
    }
    object("Claim", Some(NS), name, meta, spec)
}

fn composite_ref(name: &str) -> Value {
    json!({"apiVersion": V, "kind": "Composite", "name": name})
}

/// A composite naming claim `claim` of [`NS`] back (`None`: naming nothing).
fn composite(name: &str, claim: Option<&str>, meta: Value) -> DynamicObject {
    let spec = match claim {
        Some(c) => {
            json!({"claimRef": {"apiVersion": V, "kind": "Claim", "name": c, "namespace": NS}})
        }
        None => json!({}),
    };
    object("Composite", None, name, meta, spec)
}

/// Composite `name` (bound to `claim`) deleted with Foreground: held while its dependents
/// exist.
fn held_by_its_dependents(name: &str, claim: &str) -> DynamicObject {
    composite(
        name,
        Some(claim),
        json!({"deletionTimestamp": "2026-01-01T00:00:00Z", "resourceVersion": "2",
               "finalizers": ["foregroundDeletion"]}),
    )
}

fn id(name: &str) -> ParentId {
    (gk("Claim"), NS.to_owned(), name.to_owned())
}

/// The state, and the claims as the API server holds them (to echo Lien's writes).
struct World {
    st: CascadeState,
    claims: HashMap<String, DynamicObject>,
}

impl World {
    /// A state that has listed `rule` and is asked to watch its parent kind.
    fn new(config: CascadeConfig, rule: CascadeRule) -> Self {
        let mut st = CascadeState::new(config);
        st.handle(Msg::Rule(Event::Init));
        st.handle(Msg::Rule(Event::InitApply(rule)));
        st.handle(Msg::Rule(Event::InitDone));
        let fx = st.decide();
        assert!(
            fx.iter()
                .any(|e| matches!(e, Effect::WatchParents { gk: g, .. } if *g == gk("Claim"))),
            "the parent kind is watched: {fx:?}"
        );
        st.handle(Msg::ParentKind(
            gk("Claim"),
            Ok(Discovered {
                ar: ar("Claim"),
                namespaced: true,
            }),
        ));
        World {
            st,
            claims: HashMap::new(),
        }
    }

    fn list_claims(&mut self, claims: Vec<DynamicObject>) {
        self.st.handle(Msg::Parent(gk("Claim"), Event::Init));
        for c in claims {
            self.claims.insert(c.name_any(), c.clone());
            self.st
                .handle(Msg::Parent(gk("Claim"), Event::InitApply(c)));
        }
        self.st.handle(Msg::Parent(gk("Claim"), Event::InitDone));
    }

    fn list_children(&mut self, kind: &str, namespaced: bool, objects: Vec<DynamicObject>) {
        self.st.handle(Msg::ChildKind(
            gk(kind),
            Ok(Discovered {
                ar: ar(kind),
                namespaced,
            }),
        ));
        self.st.handle(Msg::Child(gk(kind), Event::Init));
        for o in objects {
            self.st.handle(Msg::Child(gk(kind), Event::InitApply(o)));
        }
        self.st.handle(Msg::Child(gk(kind), Event::InitDone));
    }

    fn child(&mut self, kind: &str, ev: Event<DynamicObject>) {
        self.st.handle(Msg::Child(gk(kind), ev));
    }

    /// A claim changed by someone else (its watch event).
    fn claim_changed(&mut self, name: &str, change: impl FnOnce(&mut DynamicObject)) {
        let c = self.claims.get_mut(name).expect("claim");
        change(c);
        bump(c);
        let c = c.clone();
        self.st.handle(Msg::Parent(gk("Claim"), Event::Apply(c)));
    }

    /// The user's DELETE of a claim Lien holds: its deletion starts.
    fn delete_claim(&mut self, name: &str) {
        self.claim_changed(name, |c| {
            c.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
        });
    }

    fn decide(&mut self) -> Vec<Effect> {
        self.st.decide()
    }

    /// Lien's parent write as the API server applies it: the response, its watch event, then
    /// the write's end (DELETEs of children are answered by the children's watch events).
    fn apply(&mut self, w: &CascadeWrite) {
        let CascadeWrite::Parent { id, meta, .. } = w else {
            panic!("not a parent write: {w:?}");
        };
        if let Some(meta) = meta {
            let c = self.claims.get_mut(&id.2).expect("claim");
            assert_eq!(
                meta.resource_version, c.metadata.resource_version,
                "the write carries the resourceVersion it was computed from"
            );
            c.metadata.finalizers = Some(meta.finalizers.clone());
            match &meta.record {
                Some(Some(r)) => {
                    c.annotations_mut()
                        .insert(CHILDREN_ANNOTATION.to_owned(), r.clone());
                }
                Some(None) => {
                    c.annotations_mut().remove(CHILDREN_ANNOTATION);
                }
                None => {}
            }
            bump(c);
            let c = c.clone();
            if c.metadata.deletion_timestamp.is_some() && meta.finalizers.is_empty() {
                // Its last finalizer went: the API server deletes it.
                self.claims.remove(&id.2);
                self.st.handle(Msg::Parent(gk("Claim"), Event::Delete(c)));
            } else {
                self.st.handle(Msg::Written(gk("Claim"), c.clone()));
                self.st.handle(Msg::Parent(gk("Claim"), Event::Apply(c)));
            }
        }
        self.st.handle(Msg::Done(id.clone(), None));
    }

    /// Decides, applies the one parent write asked for and returns it.
    fn step(&mut self) -> (CascadeWrite, Vec<Effect>) {
        let fx = self.decide();
        let w = parent_writes(&fx);
        assert_eq!(w.len(), 1, "one parent write: {fx:?}");
        let w = w[0].clone();
        self.apply(&w);
        (w, fx)
    }

    /// Adopts every listed claim (finalizer and record written and echoed).
    fn adopt(&mut self) {
        let fx = self.decide();
        for w in parent_writes(&fx) {
            let CascadeWrite::Parent { meta, deletes, .. } = &w else {
                unreachable!()
            };
            let meta = meta.as_ref().expect("adoption writes the finalizer");
            assert!(meta.finalizers.iter().any(|f| f == CASCADE_FINALIZER));
            assert!(
                deletes.is_empty(),
                "nothing is deleted while the claim lives"
            );
            self.apply(&w);
        }
    }
}

fn bump(o: &mut DynamicObject) {
    let rv: u64 = o
        .metadata
        .resource_version
        .as_deref()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    o.metadata.resource_version = Some((rv + 1).to_string());
}

/// The writes asked for.
fn all_writes(fx: &[Effect]) -> Vec<&CascadeWrite> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Write(w) => Some(&**w),
            _ => None,
        })
        .collect()
}

fn parent_writes(fx: &[Effect]) -> Vec<CascadeWrite> {
    all_writes(fx)
        .into_iter()
        .filter_map(|e| match e {
            w @ CascadeWrite::Parent { .. } => Some(w.clone()),
            _ => None,
        })
        .collect()
}

/// The Warning events asked for: (reason, note).
fn events(fx: &[Effect]) -> Vec<(String, String)> {
    all_writes(fx)
        .into_iter()
        .filter_map(|e| match e {
            CascadeWrite::Event { reason, note, .. } => Some((reason.clone(), note.clone())),
            _ => None,
        })
        .collect()
}

fn deletes(w: &CascadeWrite) -> Vec<(String, String, PropagationPolicy)> {
    match w {
        CascadeWrite::Parent { deletes, .. } => deletes
            .iter()
            .map(|(d, _)| (d.child.name.clone(), d.uid.clone(), d.policy))
            .collect(),
        _ => Vec::new(),
    }
}

/// Asserts a Warning `reason` among `ev` whose note contains every one of `needles`.
#[track_caller]
fn said(ev: &[(String, String)], reason: &str, needles: &[&str]) {
    assert!(
        ev.iter()
            .any(|(r, note)| r == reason && needles.iter().all(|n| note.contains(n))),
        "a {reason} event containing {needles:?}: {ev:?}"
    );
}

/// Whether the write takes Lien's finalizer and record off the parent.
fn releases(w: &CascadeWrite) -> bool {
    matches!(w, CascadeWrite::Parent { releasing: true, meta: Some(m), .. }
        if !m.finalizers.iter().any(|f| f == CASCADE_FINALIZER)
            && !matches!(m.record, Some(Some(_))))
}

fn record_of(w: &CascadeWrite) -> Option<Record> {
    match w {
        CascadeWrite::Parent {
            meta:
                Some(ParentMeta {
                    record: Some(Some(r)),
                    ..
                }),
            ..
        } => Some(Record::parse(Some(r))),
        _ => None,
    }
}

/// One claim `db` referencing composite `xr` (bound back), listed and adopted.
fn adopted(policy: Option<&str>) -> World {
    let mut w = World::new(config(), rule(&["Composite"], json!({})));
    w.list_claims(vec![claim("db", composite_ref("xr"), policy, json!({}))]);
    let fx = w.decide();
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::WatchChildren { gk: g, .. } if *g == gk("Composite"))),
        "the listed child kind is watched: {fx:?}"
    );
    w.list_children(
        "Composite",
        false,
        vec![composite("xr", Some("db"), json!({}))],
    );
    let (write, _) = w.step();
    let record = record_of(&write).expect("the record");
    assert_eq!(record.deleting, None);
    assert_eq!(
        record
            .children
            .iter()
            .map(|c| c.uid.as_str())
            .collect::<Vec<_>>(),
        ["xr-uid"]
    );
    w
}

/// e2e `cascade_foreground_claim_waits_for_composite_which_waits_for_composed` and
/// `cascade_background_claim_waits_for_composite`: the claim's deletion deletes the composite
/// (UID precondition, the claim's policy), holds the claim while the composite exists, and
/// releases it once the composite is gone.
#[test]
fn deleting_a_parent_deletes_its_child_with_its_policy_and_waits_for_it() {
    for (policy, expected) in [
        (Some("Foreground"), PropagationPolicy::Foreground),
        (None, PropagationPolicy::Background),
    ] {
        let mut w = adopted(policy);
        w.delete_claim("db");
        let (write, _) = w.step();
        assert_eq!(
            deletes(&write),
            [("xr".to_owned(), "xr-uid".to_owned(), expected)]
        );
        assert_eq!(record_of(&write).expect("record").deleting, Some(expected));
        assert!(!releases(&write));
        // The composite's deletion starts (Foreground: held by its dependents).
        let deleting = held_by_its_dependents("xr", "db");
        w.child("Composite", Event::Apply(deleting.clone()));
        let fx = w.decide();
        assert!(
            parent_writes(&fx).is_empty(),
            "the claim waits, and the composite's DELETE is not sent twice: {fx:?}"
        );
        // Gone: the claim is released.
        w.child("Composite", Event::Delete(deleting));
        let (write, _) = w.step();
        assert!(releases(&write), "{write:?}");
        assert!(deletes(&write).is_empty());
        assert!(!w.claims.contains_key("db"), "the claim went");
        assert!(parent_writes(&w.decide()).is_empty());
    }
}

/// e2e `cascade_child_that_never_finishes_is_reported_on_the_parent`: a waiting claim is
/// reported, naming the child and what holds it; once the child has not progressed for
/// `stuck_after` it is stuck, in the report and in the rule's status.
#[test]
fn a_child_that_never_finishes_is_reported_then_stuck() {
    let mut w = adopted(Some("Foreground"));
    w.st.config.stuck_after = Duration::ZERO;
    w.delete_claim("db");
    w.step();
    w.child(
        "Composite",
        Event::Apply(held_by_its_dependents("xr", "db")),
    );
    w.decide();
    let fx = w.st.decide_at(w.st.now + Duration::from_secs(1));
    let reports: Vec<_> = all_writes(&fx)
        .into_iter()
        .filter_map(|e| match e {
            CascadeWrite::Report {
                jobs,
                foreground_uids,
            } => Some((jobs.clone(), foreground_uids.clone())),
            _ => None,
        })
        .collect();
    let (jobs, foreground) = reports.first().expect("a report").clone();
    assert_eq!(foreground, ["xr-uid"], "its dependents are looked for");
    let (reference, waiting) = &jobs[0];
    assert_eq!(reference.name.as_deref(), Some("db"));
    let (child, _) = &waiting.children_uids[0];
    assert_eq!(child.name, "xr");
    assert!(child.held_by.contains("foregroundDeletion"), "{child:?}");
    assert!(child.stuck, "{child:?}");
    let status = w.st.status_of(RULE).expect("status");
    assert_eq!(status.waiting, 1);
    assert_eq!(status.waiting_parents[0].name, "db");
    assert!(status.waiting_parents[0].children[0].stuck);
}

/// e2e `cascade_dangling_reference_releases_the_parent_with_a_warning`.
#[test]
fn a_dangling_reference_releases_the_parent_with_a_warning() {
    let mut w = World::new(config(), rule(&["Composite"], json!({})));
    w.list_claims(vec![claim(
        "lost",
        composite_ref("never-created"),
        None,
        json!({}),
    )]);
    w.decide();
    w.list_children("Composite", false, vec![]);
    w.adopt();
    w.delete_claim("lost");
    let (write, fx) = w.step();
    assert!(releases(&write), "{write:?}");
    assert!(deletes(&write).is_empty());
    let ev = events(&fx);
    said(
        &ev,
        "CascadeDanglingReference",
        &["Composite never-created does not exist"],
    );
}

/// e2e `cascade_re_created_child_is_not_deleted`: a child re-created under the recorded name
/// (another UID) is not deleted; the claim is released with a Warning.
#[test]
fn a_re_created_child_is_not_deleted() {
    let mut w = adopted(None);
    let old = composite("xr", Some("db"), json!({}));
    w.child("Composite", Event::Delete(old));
    w.decide();
    w.child(
        "Composite",
        Event::Apply(composite("xr", Some("db"), json!({"uid": "newcomer"}))),
    );
    w.decide();
    w.delete_claim("db");
    let (write, fx) = w.step();
    assert!(deletes(&write).is_empty(), "the newcomer is not deleted");
    assert!(releases(&write), "{write:?}");
    let ev = events(&fx);
    said(&ev, "CascadeChildRecreated", &["re-created"]);
}

/// e2e `cascade_rule_deleted_while_a_parent_waits_releases_every_parent`: the rule carries
/// Lien's finalizer; deleted, it releases every parent (the waiting one goes at once), deletes
/// nothing more, then loses its finalizer.
#[test]
fn a_rule_deleted_while_a_parent_waits_releases_every_parent_then_goes() {
    let rule_meta = json!({"finalizers": [CASCADE_FINALIZER]});
    let mut w = World::new(config(), rule(&["Composite"], rule_meta.clone()));
    w.list_claims(vec![
        claim("db", composite_ref("xr"), Some("Foreground"), json!({})),
        claim("other", composite_ref("xr2"), None, json!({})),
    ]);
    w.decide();
    w.list_children(
        "Composite",
        false,
        vec![
            composite("xr", Some("db"), json!({})),
            composite("xr2", Some("other"), json!({})),
        ],
    );
    w.adopt();
    w.delete_claim("db");
    let (write, _) = w.step();
    assert_eq!(deletes(&write).len(), 1);
    w.child(
        "Composite",
        Event::Apply(held_by_its_dependents("xr", "db")),
    );
    w.decide();
    // The rule is deleted.
    let mut deleting = rule_meta;
    deleting["deletionTimestamp"] = json!("2026-01-02T00:00:00Z");
    deleting["resourceVersion"] = json!("2");
    w.st.handle(Msg::Rule(Event::Apply(rule(&["Composite"], deleting))));
    let fx = w.decide();
    let writes = parent_writes(&fx);
    assert_eq!(writes.len(), 2, "{fx:?}");
    for write in &writes {
        assert!(releases(write), "{write:?}");
        assert!(deletes(write).is_empty(), "releasing deletes nothing");
    }
    assert!(
        !all_writes(&fx)
            .into_iter()
            .any(|e| matches!(e, CascadeWrite::RuleFinalizers { .. })),
        "the rule keeps its finalizer until every parent is released"
    );
    for write in &writes {
        w.apply(write);
    }
    let fx = w.decide();
    let rule_writes: Vec<_> = all_writes(&fx)
        .into_iter()
        .filter_map(|e| match e {
            CascadeWrite::RuleFinalizers {
                name,
                resource_version,
                finalizers,
            } => Some((name.clone(), resource_version.clone(), finalizers.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        rule_writes,
        [(RULE.to_owned(), Some("2".to_owned()), Vec::<String>::new())]
    );
    assert!(!w.claims.contains_key("db"), "the waiting claim went");
    let other = &w.claims["other"];
    assert!(other.finalizers().is_empty());
    assert!(!other.annotations().contains_key(CHILDREN_ANNOTATION));
}

/// A rule without Lien's finalizer gets it, with the resourceVersion it was seen at; its
/// status follows.
#[test]
fn a_rule_gets_lien_s_finalizer() {
    let mut st = CascadeState::new(config());
    st.handle(Msg::Rule(Event::Apply(rule(&["Composite"], json!({})))));
    let fx = st.decide();
    assert!(
        all_writes(&fx).into_iter().any(|e| matches!(e,
            CascadeWrite::RuleFinalizers { name, resource_version, finalizers }
                if name == RULE && resource_version.as_deref() == Some("1")
                    && finalizers == &[CASCADE_FINALIZER.to_owned()])),
        "{fx:?}"
    );
    // Its status (throttled: at most one write per interval), with the resourceVersion it was
    // computed from.
    let later = st.now + Duration::from_secs(1);
    let fx = st.decide_at(later);
    assert!(
        all_writes(&fx).into_iter().any(|w| matches!(w,
            CascadeWrite::RuleStatus { name, resource_version, .. }
                if name == RULE && resource_version.as_deref() == Some("1"))),
        "{fx:?}"
    );
}

/// e2e `cascade_lien_restarted_while_a_parent_waits_picks_up_where_it_left_off`: a fresh state
/// lists a deleting claim whose record names a composite that went meanwhile and a newcomer of
/// the same name: the claim is released, the newcomer not deleted.
#[test]
fn a_restarted_state_picks_up_a_waiting_parent_from_its_record() {
    let mut w = World::new(config(), rule(&["Composite"], json!({})));
    let record = json!({"deleting": "Foreground",
        "children": [{"apiVersion": V, "kind": "Composite", "name": "xr", "uid": "xr-uid"}]});
    w.list_claims(vec![claim(
        "db",
        composite_ref("xr"),
        Some("Foreground"),
        json!({"finalizers": [CASCADE_FINALIZER],
               "deletionTimestamp": "2026-01-01T00:00:00Z",
               "annotations": {CHILDREN_ANNOTATION: record.to_string()}}),
    )]);
    w.decide();
    w.list_children(
        "Composite",
        false,
        vec![composite("xr", Some("db"), json!({"uid": "newcomer"}))],
    );
    let (write, _) = w.step();
    assert!(deletes(&write).is_empty(), "the newcomer is not deleted");
    assert!(releases(&write));
}

/// e2e `cascade_child_in_use_is_reported_and_retried`: a child's DELETE refused (a Usage) is
/// said at once on the parent, not sent again before its backoff ends (the state wakes then,
/// no tick), then sent again.
#[test]
fn a_refused_child_delete_is_reported_and_retried_after_its_backoff() {
    let mut w = adopted(None);
    w.st.config.retry_base = Duration::from_millis(50);
    w.delete_claim("db");
    let (write, _) = w.step();
    assert_eq!(deletes(&write).len(), 1);
    w.st.handle(Msg::Refused(
        "xr-uid".into(),
        "DELETE refused: in use by ClusterUsage keep".into(),
        Some((id("db"), "Composite xr".into())),
    ));
    let fx = w.decide();
    let ev = events(&fx);
    said(
        &ev,
        "CascadeChildRefused",
        &["Composite xr", "ClusterUsage keep"],
    );
    assert!(parent_writes(&fx).is_empty(), "not retried at once: {fx:?}");
    let retry_at = w.st.now + Duration::from_millis(50);
    let wake = w.st.next_wake().expect("a wake");
    assert!(
        wake <= retry_at,
        "the state wakes by the end of the backoff"
    );
    let fx = w.st.decide_at(retry_at - Duration::from_millis(1));
    assert!(
        parent_writes(&fx).is_empty(),
        "not before the backoff ends: {fx:?}"
    );
    let fx = w.st.decide_at(retry_at);
    let writes = parent_writes(&fx);
    assert_eq!(writes.len(), 1, "{fx:?}");
    assert_eq!(deletes(&writes[0])[0].0, "xr", "the DELETE is sent again");
}

/// e2e `a_tenant_cannot_make_lien_delete_what_the_rule_does_not_bind` (and
/// `the_example_cascade_rule_deletes_its_composite_and_never_the_crown_jewels`): a claim
/// naming a kind the rule does not list (never watched), a composite naming no claim, one
/// naming another claim and a namespaced child in another namespace: none is deleted, each is
/// named in a Warning and in the rule's status; a bound composite is deleted.
#[test]
fn only_children_of_listed_kinds_that_name_the_parent_back_are_deleted() {
    let mut w = World::new(config(), rule(&["Composite", "Bucket"], json!({})));
    let cases = [
        (
            "jewels",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "crown-jewels", "namespace": "kube-system"}),
            "ConfigMap kube-system/crown-jewels",
            "spec.childKinds",
        ),
        (
            "unbound",
            composite_ref("unbound"),
            "Composite unbound",
            "does not name this parent back",
        ),
        (
            "others",
            composite_ref("others"),
            "Composite others",
            "does not name this parent back",
        ),
        (
            "bucket",
            json!({"apiVersion": V, "kind": "Bucket", "name": "data", "namespace": "kube-system"}),
            "Bucket kube-system/data",
            "does not name this parent back",
        ),
    ];
    let mut claims: Vec<DynamicObject> = cases
        .iter()
        .map(|(name, target, _, _)| claim(name, target.clone(), None, json!({})))
        .collect();
    claims.push(claim("mine", composite_ref("bound"), None, json!({})));
    w.list_claims(claims);
    let fx = w.decide();
    let watched: Vec<GroupKind> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::WatchChildren { gk, .. } => Some(gk.clone()),
            _ => None,
        })
        .collect();
    assert!(
        !watched.contains(&GroupKind::from_api_version("v1", "ConfigMap")),
        "a kind the rule does not list is never watched: {watched:?}"
    );
    w.list_children(
        "Composite",
        false,
        vec![
            composite("unbound", None, json!({})),
            composite("others", Some("someone-elses"), json!({})),
            composite("bound", Some("mine"), json!({})),
        ],
    );
    let bucket = object("Bucket", Some("kube-system"), "data", json!({}), json!({}));
    w.list_children("Bucket", true, vec![bucket]);
    // A claim naming only a kind outside the rule is decided (and warned about) at once.
    let mut ev = events(&fx);
    for write in parent_writes(&fx) {
        w.apply(&write);
    }
    let fx = w.st.decide();
    ev.extend(events(&fx));
    for (_, _, child, why) in &cases {
        said(
            &ev,
            "CascadeChildNotAllowed",
            &[child, why, "is not deleted"],
        );
    }
    for write in parent_writes(&fx) {
        w.apply(&write);
    }
    let status = w.st.status_of(RULE).expect("status");
    assert_eq!(status.refused_children, cases.len() as u64);
    for (claim, _, child, _) in &cases {
        assert!(
            status
                .refused
                .iter()
                .any(|r| r.parent_name == *claim && r.parent_namespace == NS && r.child == *child),
            "{child} for {claim}: {:?}",
            status.refused
        );
    }
    assert!(
        status
            .refused
            .iter()
            .any(|r| r.parent_name == "jewels" && r.reason == "KindNotAllowed")
    );
    // Deleting each refused claim deletes nothing.
    for (claim, _, _, _) in &cases {
        w.delete_claim(claim);
        let (write, _) = w.step();
        assert!(deletes(&write).is_empty(), "{claim}: {write:?}");
        assert!(releases(&write), "{claim}: {write:?}");
    }
    // The bound composite goes with its claim.
    w.delete_claim("mine");
    let (write, _) = w.step();
    assert_eq!(
        deletes(&write),
        [(
            "bound".to_owned(),
            "bound-uid".to_owned(),
            PropagationPolicy::Background
        )]
    );
}

/// e2e `a_claim_written_while_lien_was_down_deletes_only_what_names_it_back`: a record forged
/// on the claim (an annotation its writer controls) naming an unbound composite binds nothing.
#[test]
fn a_forged_record_deletes_only_what_names_the_parent_back() {
    let mut w = World::new(config(), rule(&["Composite"], json!({})));
    let forged = json!({"deleting": "Background",
        "children": [{"apiVersion": V, "kind": "Composite", "name": "unbound", "uid": "unbound-uid"}]});
    w.list_claims(vec![
        claim(
            "forged",
            composite_ref("unbound"),
            None,
            json!({"annotations": {CHILDREN_ANNOTATION: forged.to_string()}}),
        ),
        claim("bound", composite_ref("bound"), None, json!({})),
    ]);
    w.decide();
    w.list_children(
        "Composite",
        false,
        vec![
            composite("unbound", None, json!({})),
            composite("bound", Some("bound"), json!({})),
        ],
    );
    let fx = w.decide();
    let ev = events(&fx);
    said(
        &ev,
        "CascadeChildNotAllowed",
        &["Composite unbound", "does not name this parent back"],
    );
    for write in parent_writes(&fx) {
        w.apply(&write);
    }
    w.delete_claim("forged");
    let (write, _) = w.step();
    assert!(deletes(&write).is_empty(), "{write:?}");
    w.delete_claim("bound");
    let (write, _) = w.step();
    assert_eq!(deletes(&write)[0].0, "bound");
}

/// No tick: with nothing pending, the state waits for an event; a throttled status or a due
/// report is a wake it computes.
#[test]
fn an_idle_state_waits_for_events_only() {
    let mut w = adopted(None);
    // The statuses of the passes so far are written once their interval allows.
    let mut passes = 0;
    while let Some(at) = w.st.next_wake() {
        w.st.decide_at(at);
        passes += 1;
        assert!(passes < 10, "the wakes end");
    }
    assert_eq!(w.st.next_wake(), None);
    let later = w.st.now + Duration::from_secs(3600);
    assert!(parent_writes(&w.st.decide_at(later)).is_empty());
    assert_eq!(
        w.st.next_wake(),
        None,
        "a pass with nothing new sets no wake"
    );
}

/// Issue 28, finding 4 (name reuse): a composite left over from an earlier claim `team/db`
/// (created long before) still names `team/db` in its `claimRef`, which has no uid. A new claim
/// `db` naming that composite must not have it deleted: it is older than the claim. One made
/// after the claim is its child as before. The rule's status warns that its back reference
/// yields no uid.
#[test]
fn a_leftover_child_naming_a_reused_claim_name_is_not_deleted() {
    let mut w = World::new(config(), rule(&["Composite"], json!({})));
    let created = |t: &str| json!({"creationTimestamp": t});
    w.list_claims(vec![
        claim(
            "db",
            composite_ref("leftover"),
            None,
            created("2026-03-01T00:00:00Z"),
        ),
        claim(
            "fresh",
            composite_ref("made-for-fresh"),
            None,
            created("2026-03-01T00:00:00Z"),
        ),
    ]);
    w.decide();
    w.list_children(
        "Composite",
        false,
        vec![
            composite("leftover", Some("db"), created("2025-01-01T00:00:00Z")),
            composite(
                "made-for-fresh",
                Some("fresh"),
                created("2026-03-01T00:00:05Z"),
            ),
        ],
    );
    let fx = w.decide();
    said(
        &events(&fx),
        "CascadeChildNotAllowed",
        &["Composite leftover", "created before this parent"],
    );
    for write in parent_writes(&fx) {
        w.apply(&write);
    }
    let status = w.st.status_of(RULE).expect("status");
    assert!(
        status.refused.iter().any(|r| r.parent_name == "db"
            && r.child == "Composite leftover"
            && r.reason == "CreatedBeforeParent"),
        "{:?}",
        status.refused
    );
    let warning = status
        .conditions
        .iter()
        .find(|c| c.type_ == "BackReferenceUID")
        .unwrap_or_else(|| panic!("a warning about back references without uid: {status:?}"));
    assert_eq!(warning.status, "False");
    assert!(
        warning
            .message
            .contains("spec.childKinds[0].backReference (Composite) yields no uid on 2 children"),
        "{}",
        warning.message
    );
    w.delete_claim("db");
    let (write, _) = w.step();
    assert!(
        deletes(&write).is_empty(),
        "the leftover is not deleted: {write:?}"
    );
    assert!(releases(&write), "{write:?}");
    w.delete_claim("fresh");
    let (write, _) = w.step();
    assert_eq!(
        deletes(&write),
        [(
            "made-for-fresh".to_owned(),
            "made-for-fresh-uid".to_owned(),
            PropagationPolicy::Background
        )]
    );
}

/// A rule whose parents name their children in `spec.refs` (a list of composite names).
fn rule_of_many() -> CascadeRule {
    let mut r = rule(&["Composite"], json!({}));
    r.spec.children =
        "self.spec.refs.map(n, {'apiVersion': 'example.org/v1', 'kind': 'Composite', 'name': n})"
            .into();
    r
}

/// A claim naming `n` composites `<prefix>-<i>` of `len` characters each.
fn claim_of_many(name: &str, n: usize, len: usize) -> DynamicObject {
    let refs: Vec<String> = (0..n)
        .map(|i| {
            let s = format!("{name}-{i}-");
            format!("{s}{}", "x".repeat(len.saturating_sub(s.len())))
        })
        .collect();
    object("Claim", Some(NS), name, json!({}), json!({ "refs": refs }))
}

/// Issue 28, finding 6: 40 parents naming 20,000 children each took `lien run` to 1,452 MiB.
/// A parent naming more than `MAX_CHILDREN_PER_PARENT` keeps none (nothing in the reverse
/// index, no child kind watched for it), gets a Warning, and the rule's status names the
/// field, the bound and the fix.
#[test]
fn a_parent_naming_more_children_than_the_bound_keeps_none() {
    let mut w = World::new(config(), rule_of_many());
    w.list_claims(vec![
        claim_of_many("huge", 20_000, 20),
        claim_of_many("fine", 3, 20),
    ]);
    let fx = w.decide();
    assert!(
        w.st.by_child
            .values()
            .flat_map(HashMap::values)
            .all(|parents| parents.iter().all(|p| p.2 != "huge")),
        "the huge parent's references are not kept"
    );
    assert_eq!(
        w.st.by_child.values().map(HashMap::len).sum::<usize>(),
        3,
        "the fine parent's are"
    );
    said(
        &events(&fx),
        "CascadeInvalidChildren",
        &["spec.children yields 20000 children", "at most 256"],
    );
    for write in parent_writes(&fx) {
        w.apply(&write);
    }
    let status = w.st.status_of(RULE).expect("status");
    let ready = &status.conditions[0];
    assert_eq!(
        (
            ready.type_.as_str(),
            ready.status.as_str(),
            ready.reason.as_str()
        ),
        ("Ready", "False", "BoundExceeded"),
        "{ready:?}"
    );
    for part in [
        "1 parents keep no children",
        "team/huge",
        "spec.children yields 20000 children",
        "MAX_CHILDREN_PER_PARENT",
        "make the expression name fewer",
    ] {
        assert!(
            ready.message.contains(part),
            "{part:?} not in {}",
            ready.message
        );
    }
}

/// Issue 28, finding 6: within the per-parent bound, parents still add up; the rule keeps at
/// most `MAX_REFERENCE_BYTES_PER_RULE` of references, the parents beyond it keep none (and
/// say so), and a parent that goes makes room for the next change of another.
#[test]
fn a_rules_references_are_bounded_in_bytes() {
    let mut w = World::new(config(), rule_of_many());
    // 256 children of 253-character names: ≈ 205 KB counted per parent.
    let per_parent = decide::MAX_CHILDREN_PER_PARENT;
    let cost = decide::reference_cost(["example.org/v1", "Composite", &"x".repeat(253)]);
    let fit = decide::MAX_REFERENCE_BYTES_PER_RULE / (per_parent * cost);
    let claims: Vec<DynamicObject> = (0..fit + 2)
        .map(|i| claim_of_many(&format!("p{i:04}"), per_parent, 253))
        .collect();
    w.list_claims(claims);
    let fx = w.decide();
    let pk = &w.st.parents[&gk("Claim")];
    assert!(
        pk.bytes <= decide::MAX_REFERENCE_BYTES_PER_RULE,
        "{}",
        pk.bytes
    );
    let kept = pk.objects.values().filter(|p| p.refs.is_ok()).count();
    assert_eq!(kept, fit, "as many parents as fit keep their children");
    said(
        &events(&fx),
        "CascadeInvalidChildren",
        &["MAX_REFERENCE_BYTES_PER_RULE", "32 MiB"],
    );
    let status = w.st.status_of(RULE).expect("status");
    assert_eq!(status.conditions[0].reason, "BoundExceeded");
    assert!(
        status.conditions[0]
            .message
            .contains("2 parents keep no children"),
        "{}",
        status.conditions[0].message
    );
    // One kept parent goes; a left-out one's next change is admitted.
    let gone = w.claims["p0000"].clone();
    w.st.handle(Msg::Parent(gk("Claim"), Event::Delete(gone)));
    let left_out = w.st.parents[&gk("Claim")]
        .objects
        .iter()
        .find(|(_, p)| p.refs.is_err())
        .map(|(k, _)| k.1.clone())
        .expect("a parent left out");
    w.claim_changed(&left_out, |c| {
        c.labels_mut().insert("touched".into(), "yes".into());
    });
    let pk = &w.st.parents[&gk("Claim")];
    assert!(pk.objects[&(NS.to_owned(), left_out)].refs.is_ok());
    assert!(pk.bytes <= decide::MAX_REFERENCE_BYTES_PER_RULE);
}
