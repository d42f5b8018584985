//! The decision for one parent of a CascadeRule, as a pure function: no I/O, no clock read
//! (the caller passes what it observed), so every case is a unit test.
//!
//! # Data model
//!
//! A parent carries Lien's finalizer ([`CASCADE_FINALIZER`]) and Lien's record
//! ([`CHILDREN_ANNOTATION`], a [`Record`]): the UID of every child the parent referenced when
//! Lien first saw it, and — once the parent's deletion started — the policy its children are
//! deleted with. The record lives on the parent so that a restarted Lien picks up where it left
//! off, and so that a child re-created under the same name (another UID) is never deleted.
//!
//! While the parent lives, its record follows its references (a child appears: its UID is
//! recorded; a reference goes: its entry goes). When its deletion starts, the children to wait
//! for are fixed (the record's children, with their recorded UIDs); nothing else is ever
//! deleted. A child is gone when it is absent or holds another UID; the parent is released
//! (finalizer and record removed) when every child is gone.
//!
//! # What Lien may delete
//!
//! Lien deletes with its own rights, so what a parent names is only a candidate: whoever may
//! write a parent could name anything (a Secret in `kube-system`). A child is deleted only
//! when both hold, checked every time a DELETE is about to be sent:
//! - its kind is one the rule lists in `childKinds` (the rule's author, who had to be allowed
//!   to delete every object of those kinds, bound them), and
//! - the child names this parent back (`childKinds[].backReference`, evaluated on the child):
//!   a binding written on the child, so the parent's writer cannot forge it alone.
//!
//! Anything else is [`Refusal`]: never deleted, never waited for, reported.

use std::collections::BTreeMap;

use crate::program::ParentRef;
use lien_api::{CASCADE_FINALIZER, PropagationPolicy};
use serde::{Deserialize, Serialize};

/// The annotation on a parent where Lien records its children's UIDs (Lien's own: only Lien
/// writes it).
pub const CHILDREN_ANNOTATION: &str = "lien.dev/cascade-children";

/// The finalizer kube-apiserver adds to an object deleted with `propagationPolicy: Foreground`
/// (`kubectl delete --cascade=foreground`).
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// A child, resolved: its namespace is the parent's when the reference has none and the kind
/// is namespaced, and empty for cluster-scoped kinds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub struct ChildKey {
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
}

impl ChildKey {
    /// The API group (empty for the core group).
    pub fn group(&self) -> &str {
        self.api_version.rsplit_once('/').map_or("", |(g, _)| g)
    }
}

impl std::fmt::Display for ChildKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.kind, self.name)
        } else {
            write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// A recorded child: where it is and the UID it had when first seen.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct RecordedChild {
    #[serde(flatten)]
    pub key: ChildKey,
    pub uid: String,
}

/// What Lien records on a parent ([`CHILDREN_ANNOTATION`]).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// Set when the parent's deletion started: the policy its children are deleted with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleting: Option<PropagationPolicy>,
    #[serde(default)]
    pub children: Vec<RecordedChild>,
}

impl Record {
    /// Reads the annotation; a record Lien cannot read counts as none (Lien then records again
    /// from what it observes).
    pub fn parse(annotation: Option<&str>) -> Record {
        annotation
            .and_then(|a| serde_json::from_str(a).ok())
            .unwrap_or_default()
    }

    pub fn to_annotation(&self) -> String {
        // A struct of strings always serialises.
        serde_json::to_string(self).unwrap_or_default()
    }

    fn uid_of(&self, key: &ChildKey) -> Option<&str> {
        self.children
            .iter()
            .find(|c| &c.key == key)
            .map(|c| c.uid.as_str())
    }
}

/// What is known of a child object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observed {
    /// Its kind's watch has not listed yet: nothing is decided from its absence.
    Unknown,
    Absent,
    Present(ChildMeta),
}

/// A present child's metadata, and the parents it names back under the rule in question.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChildMeta {
    pub uid: String,
    pub deleting: bool,
    pub finalizers: Vec<String>,
    /// What the rule's `backReference` yields on the child.
    pub back_refs: Vec<ParentRef>,
    /// Why the `backReference` failed on the child (then it names no parent).
    pub back_ref_error: Option<String>,
}

/// Who a parent is, for matching a child's back reference.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParentIdentity {
    pub group: String,
    pub kind: String,
    /// Empty for a cluster-scoped parent.
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl ParentIdentity {
    /// Whether `r`, read on a child in `child_namespace`, names this parent: same kind, group
    /// (when the reference has an apiVersion), name, namespace (none: the child's own) and UID
    /// (when the reference has one).
    pub fn is_named_by(&self, r: &ParentRef, child_namespace: &str) -> bool {
        r.kind == self.kind
            && r.group.as_deref().is_none_or(|g| g == self.group)
            && r.name == self.name
            && r.namespace.as_deref().unwrap_or(child_namespace) == self.namespace
            && r.uid.as_deref().is_none_or(|u| u == self.uid)
    }
}

/// Why a child a parent names is not deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Its kind is not in the rule's `childKinds`.
    KindNotAllowed,
    /// It does not name the parent back (or its back reference failed: the error).
    NotBound(Option<String>),
}

impl Refusal {
    /// The short reason, for the rule's status.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::KindNotAllowed => "KindNotAllowed",
            Refusal::NotBound(_) => "NotBound",
        }
    }
}

/// A child Lien will not delete for this parent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    pub child: ChildKey,
    pub why: Refusal,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let child = &self.child;
        match &self.why {
            Refusal::KindNotAllowed => write!(
                f,
                "{child} ({}) is not deleted: its kind is not in the CascadeRule's spec.childKinds, so Lien never deletes it for this parent; list the kind there (its author must be allowed to delete it) or delete it yourself",
                child.api_version
            ),
            Refusal::NotBound(None) => write!(
                f,
                "{child} is not deleted: it does not name this parent back (spec.childKinds[].backReference), so nothing shows it belongs to this parent; whoever manages it must set that reference, or delete it yourself"
            ),
            Refusal::NotBound(Some(e)) => write!(
                f,
                "{child} is not deleted: its back reference cannot be read ({e}), so nothing shows it belongs to this parent"
            ),
        }
    }
}

/// Why a parent's children, or what a child names back, cannot be known. Each displays as the
/// text the parent's Warning and the rule's status show.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CascadeError {
    /// The rule's expressions do not compile (every error, joined).
    #[error("{0}")]
    InvalidExpression(String),
    /// An expression failed on this object.
    #[error("{0}")]
    Evaluation(String),
    /// A child's kind is not served (discovery's answer).
    #[error("{0}")]
    KindNotServed(String),
    /// No rule is in charge of the parent's kind.
    #[error("no rule")]
    NoRule,
}

/// A parent as observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parent {
    /// Who it is: what a child's back reference must name.
    pub identity: ParentIdentity,
    /// `deletionTimestamp` is set.
    pub deleting: bool,
    /// `metadata.finalizers`.
    pub finalizers: Vec<String>,
    /// Lien's record, parsed.
    pub record: Record,
    /// The children of kinds the rule lists that its `children` expression yields now,
    /// resolved; or why they cannot be known (a CEL error, an unknown kind).
    pub children: Result<Vec<ChildKey>, CascadeError>,
    /// What its `children` expression names of kinds the rule does not list: never deleted.
    pub outside: Vec<ChildKey>,
    /// The rule's `childKinds`, as (group, kind): the only kinds ever deleted. Checked again
    /// on the record's children, because the record is an annotation the parent's writer can
    /// write too.
    pub allowed: Vec<(String, String)>,
    /// The policy the rule gives it (the expression's value, else the spec's).
    pub policy: PropagationPolicy,
    /// Why `propagationPolicyExpression` failed on it (then `policy` is the spec's).
    pub policy_error: Option<String>,
}

impl Parent {
    fn has(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| f == finalizer)
    }

    /// Whether the rule lists the child's kind.
    pub fn allows(&self, key: &ChildKey) -> bool {
        self.allowed
            .iter()
            .any(|(g, k)| g == key.group() && *k == key.kind)
    }

    /// Whether a present child names this parent back; `Err`: why not.
    fn binds(&self, key: &ChildKey, meta: &ChildMeta) -> Result<(), Refusal> {
        if meta
            .back_refs
            .iter()
            .any(|r| self.identity.is_named_by(r, &key.namespace))
        {
            Ok(())
        } else {
            Err(Refusal::NotBound(meta.back_ref_error.clone()))
        }
    }
}

/// A child to delete: with a UID precondition, so a re-created child is never deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delete {
    pub child: ChildKey,
    pub uid: String,
    pub policy: PropagationPolicy,
}

/// A child the parent waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    pub child: ChildKey,
    pub uid: String,
    /// `None` while its kind's watch has not listed yet.
    pub meta: Option<ChildMeta>,
}

/// What to do with a parent. The write (`finalizer` + `record`) goes first, in one request;
/// the deletes only once it landed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// Whether Lien's finalizer should be on the parent (`Some(false)`: remove it).
    pub finalizer: Option<bool>,
    /// The record to write (`Some(None)`: remove the annotation).
    pub record: Option<Option<Record>>,
    pub deletes: Vec<Delete>,
    pub waiting: Vec<Waiting>,
    /// Warnings for the parent's events (Lien de-duplicates them).
    pub warnings: Vec<String>,
    /// Children named but never deleted, and why (Warning events, the rule's status).
    pub refused: Vec<Refused>,
}

impl Decision {
    /// Whether this releases the parent.
    pub fn releases(&self) -> bool {
        self.finalizer == Some(false)
    }

    fn release(mut self) -> Self {
        self.finalizer = Some(false);
        self.record = Some(None);
        self.deletes.clear();
        self.waiting.clear();
        self
    }

    fn refuse(&mut self, child: &ChildKey, why: Refusal) {
        self.refused.push(Refused {
            child: child.clone(),
            why,
        });
    }
}

/// Decides for one parent given what is observed of its children (`observe` answers for a
/// child key).
pub fn decide(parent: &Parent, observe: impl Fn(&ChildKey) -> Observed) -> Decision {
    let mut d = Decision::default();
    if !parent.deleting {
        return alive(parent, observe);
    }
    // Deleting without Lien's finalizer: Lien never adopted it (or already released it); the
    // API server removes it whatever Lien does.
    if !parent.has(CASCADE_FINALIZER) {
        return d;
    }
    for key in &parent.outside {
        d.refuse(key, Refusal::KindNotAllowed);
    }
    let record = &parent.record;
    let (policy, targets) = match record.deleting {
        Some(policy) => (policy, record.children.clone()),
        None => {
            // The deletion starts now: fix the children and the policy.
            let refs = match &parent.children {
                Ok(refs) => refs,
                Err(e) => {
                    d.warnings.push(format!(
                        "released without deleting any child: its children cannot be known ({e})"
                    ));
                    return d.release();
                }
            };
            // kube-apiserver put `foregroundDeletion` on a parent deleted with
            // `--cascade=foreground`: the user asked for Foreground all the way down.
            let policy = if parent.has(FOREGROUND_FINALIZER) {
                PropagationPolicy::Foreground
            } else {
                if let Some(e) = &parent.policy_error {
                    d.warnings.push(format!(
                        "spec.propagationPolicyExpression failed ({e}): children are deleted with spec.propagationPolicy {:?}",
                        parent.policy
                    ));
                }
                parent.policy
            };
            let mut targets = Vec::new();
            for key in refs {
                let recorded = record.uid_of(key);
                match (observe(key), recorded) {
                    // Re-created since it was recorded: kept as recorded, said below.
                    (Observed::Present(m), Some(uid)) if m.uid != uid => {
                        targets.push(RecordedChild {
                            key: key.clone(),
                            uid: uid.to_owned(),
                        });
                    }
                    // Not bound back: never a target (checked again before each DELETE too).
                    (Observed::Present(m), _) => match parent.binds(key, &m) {
                        Ok(()) => targets.push(RecordedChild {
                            key: key.clone(),
                            uid: m.uid,
                        }),
                        Err(why) => d.refuse(key, why),
                    },
                    (_, Some(uid)) => targets.push(RecordedChild {
                        key: key.clone(),
                        uid: uid.to_owned(),
                    }),
                    (Observed::Absent, None) => d.warnings.push(format!(
                        "{key} does not exist: nothing to delete, the parent does not wait for it"
                    )),
                    // Not listed yet: decide later.
                    (Observed::Unknown, None) => return d,
                }
            }
            if targets.is_empty() {
                return d.release();
            }
            d.record = Some(Some(Record {
                deleting: Some(policy),
                children: targets.clone(),
            }));
            (policy, targets)
        }
    };
    for RecordedChild { key, uid } in targets {
        if !parent.allows(&key) {
            d.refuse(&key, Refusal::KindNotAllowed);
            continue;
        }
        match observe(&key) {
            Observed::Absent => {}
            Observed::Present(m) if m.uid != uid => d.warnings.push(format!(
                "{key} was re-created (UID {} instead of {uid}): the new object is not deleted",
                m.uid
            )),
            Observed::Present(m) => {
                if !m.deleting {
                    // The binding can be undone after the deletion started: a child that no
                    // longer names the parent is neither deleted nor waited for.
                    if let Err(why) = parent.binds(&key, &m) {
                        d.refuse(&key, why);
                        continue;
                    }
                    d.deletes.push(Delete {
                        child: key.clone(),
                        uid: uid.clone(),
                        policy,
                    });
                }
                d.waiting.push(Waiting {
                    child: key,
                    uid,
                    meta: Some(m),
                });
            }
            Observed::Unknown => d.waiting.push(Waiting {
                child: key,
                uid,
                meta: None,
            }),
        }
    }
    if d.waiting.is_empty() {
        return d.release();
    }
    d
}

/// A live parent: Lien's finalizer on it, and the UIDs of its present children recorded (the
/// first UID seen of each stays recorded).
fn alive(parent: &Parent, observe: impl Fn(&ChildKey) -> Observed) -> Decision {
    let mut d = Decision::default();
    if !parent.has(CASCADE_FINALIZER) {
        d.finalizer = Some(true);
    }
    for key in &parent.outside {
        d.refuse(key, Refusal::KindNotAllowed);
    }
    let refs = match &parent.children {
        Ok(refs) => refs,
        Err(e) => {
            // Keep the record as it is: a transient error must not forget UIDs.
            d.warnings
                .push(format!("its children cannot be known ({e})"));
            return d;
        }
    };
    // Recorded: the children that name the parent back (a child bound later is recorded
    // then). Said early, while the parent lives: what would not be deleted with it.
    let mut children: BTreeMap<ChildKey, String> = BTreeMap::new();
    for key in refs {
        if !parent.allows(key) {
            d.refuse(key, Refusal::KindNotAllowed);
            continue;
        }
        let observed = observe(key);
        if let Observed::Present(m) = &observed {
            if let Err(why) = parent.binds(key, m) {
                d.refuse(key, why);
                continue;
            }
        }
        if let Some(uid) = parent.record.uid_of(key) {
            children.insert(key.clone(), uid.to_owned());
        } else if let Observed::Present(m) = observed {
            children.insert(key.clone(), m.uid);
        }
    }
    let record = Record {
        deleting: None,
        children: children
            .into_iter()
            .map(|(key, uid)| RecordedChild { key, uid })
            .collect(),
    };
    let mut current = parent.record.clone();
    current.children.sort_by(|a, b| a.key.cmp(&b.key));
    if record != current {
        d.record = Some((!record.children.is_empty()).then_some(record));
    }
    d
}

fn has_record_annotation(parent: &Parent) -> bool {
    parent.record != Record::default()
}

/// A parent whose rule is gone: Lien's finalizer and record go, whatever state it is in (a
/// finalizer without a rule would hold it forever).
pub fn orphaned(parent: &Parent) -> Decision {
    if parent.has(CASCADE_FINALIZER) || has_record_annotation(parent) {
        Decision::default().release()
    } else {
        Decision::default()
    }
}

/// The wording of "what holds this child" for events and status.
pub fn held_by(meta: Option<&ChildMeta>, refused: Option<&str>, dependents: &[String]) -> String {
    let mut parts = Vec::new();
    match meta {
        None => parts.push("not known yet (its kind is not listed yet)".to_owned()),
        Some(m) if !m.deleting => parts.push("not being deleted yet".to_owned()),
        Some(m) => {
            let own: Vec<&str> = m
                .finalizers
                .iter()
                .map(String::as_str)
                .filter(|f| *f != FOREGROUND_FINALIZER)
                .collect();
            if !own.is_empty() {
                parts.push(format!("finalizers {}", own.join(", ")));
            }
            if m.finalizers.iter().any(|f| f == FOREGROUND_FINALIZER) {
                if dependents.is_empty() {
                    parts.push("foregroundDeletion (its dependents)".to_owned());
                } else {
                    parts.push(format!(
                        "foregroundDeletion: its dependents {}",
                        dependents.join("; ")
                    ));
                }
            }
        }
    }
    if let Some(r) = refused {
        parts.push(format!("DELETE refused: {r}"));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kind: &str, ns: &str, name: &str) -> ChildKey {
        ChildKey {
            api_version: "example.org/v1".into(),
            kind: kind.into(),
            namespace: ns.into(),
            name: name.into(),
        }
    }

    fn identity() -> ParentIdentity {
        ParentIdentity {
            group: "example.org".into(),
            kind: "Claim".into(),
            namespace: "team-a".into(),
            name: "p".into(),
            uid: "pu".into(),
        }
    }

    /// What a child bound to the test parent says back.
    fn back_ref() -> ParentRef {
        ParentRef {
            group: Some("example.org".into()),
            kind: "Claim".into(),
            name: "p".into(),
            namespace: Some("team-a".into()),
            uid: None,
        }
    }

    /// A present child that names the test parent back.
    fn present(uid: &str, deleting: bool, finalizers: &[&str]) -> Observed {
        Observed::Present(ChildMeta {
            uid: uid.into(),
            deleting,
            finalizers: finalizers.iter().map(|f| (*f).to_owned()).collect(),
            back_refs: vec![back_ref()],
            back_ref_error: None,
        })
    }

    /// A present child that names no parent.
    fn unbound(uid: &str) -> Observed {
        Observed::Present(ChildMeta {
            uid: uid.into(),
            ..ChildMeta::default()
        })
    }

    fn parent(
        deleting: bool,
        finalizers: &[&str],
        record: Record,
        children: Vec<ChildKey>,
    ) -> Parent {
        Parent {
            identity: identity(),
            deleting,
            finalizers: finalizers.iter().map(|f| (*f).to_owned()).collect(),
            record,
            children: Ok(children),
            outside: vec![],
            allowed: vec![
                ("example.org".into(), "XComposite".into()),
                ("example.org".into(), "Secret".into()),
                ("example.org".into(), "X".into()),
            ],
            policy: PropagationPolicy::Background,
            policy_error: None,
        }
    }

    /// A parent Lien already holds (its finalizer on it), with no record yet.
    fn held(deleting: bool, children: Vec<ChildKey>) -> Parent {
        parent(deleting, &[CASCADE_FINALIZER], Record::default(), children)
    }

    fn recorded(deleting: Option<PropagationPolicy>, children: &[(ChildKey, &str)]) -> Record {
        Record {
            deleting,
            children: children
                .iter()
                .map(|(k, u)| RecordedChild {
                    key: k.clone(),
                    uid: (*u).to_owned(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_new_parent_gets_the_finalizer_and_its_children_uids() {
        let c = key("XComposite", "", "c1");
        let p = parent(false, &[], Record::default(), vec![c.clone()]);
        let d = decide(&p, |_| present("u1", false, &[]));
        assert_eq!(d.finalizer, Some(true));
        assert_eq!(d.record, Some(Some(recorded(None, &[(c, "u1")]))));
        assert!(d.deletes.is_empty());
    }

    #[test]
    fn a_live_parent_keeps_the_first_uid_seen_and_forgets_dropped_references() {
        let c = key("XComposite", "", "c1");
        let gone = key("XComposite", "", "old");
        let rec = recorded(None, &[(c.clone(), "u1"), (gone, "u0")]);
        let p = parent(false, &[CASCADE_FINALIZER], rec, vec![c.clone()]);
        // The child now holds another UID: the first one stays recorded.
        let d = decide(&p, |_| present("u2", false, &[]));
        assert_eq!(d.finalizer, None);
        assert_eq!(d.record, Some(Some(recorded(None, &[(c, "u1")]))));
    }

    #[test]
    fn a_live_parent_whose_record_is_current_needs_no_write() {
        let c = key("XComposite", "", "c1");
        let p = parent(
            false,
            &[CASCADE_FINALIZER],
            recorded(None, &[(c.clone(), "u1")]),
            vec![c],
        );
        assert_eq!(
            decide(&p, |_| present("u1", false, &[])),
            Decision::default()
        );
        // An absent child is not recorded (nor is it an error while the parent lives).
        let p = held(false, vec![key("X", "", "a")]);
        assert_eq!(decide(&p, |_| Observed::Absent), Decision::default());
    }

    #[test]
    fn deletion_records_the_policy_and_deletes_each_child_with_its_uid() {
        let c = key("XComposite", "", "c1");
        let s = key("Secret", "team-a", "s");
        let mut p = parent(
            true,
            &[CASCADE_FINALIZER],
            recorded(None, &[(c.clone(), "u1")]),
            vec![c.clone(), s.clone()],
        );
        p.policy = PropagationPolicy::Foreground;
        let d = decide(&p, |k| {
            if k == &c {
                present("u1", false, &["x"])
            } else {
                present("u9", false, &[])
            }
        });
        assert_eq!(
            d.record,
            Some(Some(recorded(
                Some(PropagationPolicy::Foreground),
                &[(c.clone(), "u1"), (s.clone(), "u9")]
            )))
        );
        assert_eq!(
            d.deletes,
            vec![
                Delete {
                    child: c,
                    uid: "u1".into(),
                    policy: PropagationPolicy::Foreground
                },
                Delete {
                    child: s,
                    uid: "u9".into(),
                    policy: PropagationPolicy::Foreground
                },
            ]
        );
        assert!(!d.releases());
        assert_eq!(d.waiting.len(), 2);
    }

    #[test]
    fn kubectl_cascade_foreground_on_the_parent_means_foreground_for_its_children() {
        let c = key("XComposite", "", "c1");
        let p = parent(
            true,
            &[CASCADE_FINALIZER, FOREGROUND_FINALIZER],
            Record::default(),
            vec![c.clone()],
        );
        let d = decide(&p, |_| present("u1", false, &[]));
        assert_eq!(d.deletes[0].policy, PropagationPolicy::Foreground);
    }

    #[test]
    fn a_failing_policy_expression_falls_back_to_the_spec_with_a_warning() {
        let c = key("XComposite", "", "c1");
        let mut p = held(true, vec![c]);
        p.policy = PropagationPolicy::Foreground;
        p.policy_error = Some("no such key: compositeDeletePolicy".into());
        let d = decide(&p, |_| present("u1", false, &[]));
        assert_eq!(d.deletes[0].policy, PropagationPolicy::Foreground);
        assert!(d.warnings[0].contains("no such key"), "{:?}", d.warnings);
    }

    #[test]
    fn the_parent_waits_while_a_child_is_being_deleted_and_is_released_when_it_is_gone() {
        let c = key("XComposite", "", "c1");
        let rec = recorded(Some(PropagationPolicy::Background), &[(c.clone(), "u1")]);
        let p = parent(true, &[CASCADE_FINALIZER], rec, vec![c.clone()]);
        let d = decide(&p, |_| present("u1", true, &["example.org/external"]));
        assert!(d.deletes.is_empty(), "already being deleted");
        assert!(d.record.is_none());
        assert_eq!(d.waiting.len(), 1);
        assert!(!d.releases());
        let d = decide(&p, |_| Observed::Absent);
        assert!(d.releases());
        assert_eq!(d.record, Some(None));
    }

    #[test]
    fn a_re_created_child_is_never_deleted_and_counts_as_gone() {
        let c = key("XComposite", "", "c1");
        let rec = recorded(Some(PropagationPolicy::Background), &[(c.clone(), "u1")]);
        let p = parent(true, &[CASCADE_FINALIZER], rec, vec![c.clone()]);
        let d = decide(&p, |_| present("u2", false, &[]));
        assert!(d.deletes.is_empty());
        assert!(d.releases());
        assert!(d.warnings[0].contains("re-created"), "{:?}", d.warnings);
        // Recorded while alive, re-created before the deletion: also not deleted.
        let p = parent(
            true,
            &[CASCADE_FINALIZER],
            recorded(None, &[(c.clone(), "u1")]),
            vec![c],
        );
        let d = decide(&p, |_| present("u2", false, &[]));
        assert!(d.deletes.is_empty());
        assert!(d.releases());
    }

    #[test]
    fn a_dangling_reference_or_a_cel_error_releases_the_parent_at_once_with_a_warning() {
        let c = key("XComposite", "", "missing");
        let p = held(true, vec![c]);
        let d = decide(&p, |_| Observed::Absent);
        assert!(d.releases());
        assert!(d.warnings[0].contains("XComposite missing does not exist"));
        let mut p = held(true, vec![]);
        p.children = Err(CascadeError::Evaluation("no such key: resourceRef".into()));
        let d = decide(&p, |_| present("u", false, &[]));
        assert!(d.releases());
        assert!(d.deletes.is_empty());
        assert!(d.warnings[0].contains("no such key"));
    }

    #[test]
    fn a_dangling_reference_does_not_hold_a_parent_that_waits_for_others() {
        let real = key("XComposite", "", "real");
        let missing = key("XComposite", "", "missing");
        let p = held(true, vec![real.clone(), missing]);
        let d = decide(&p, |k| {
            if k == &real {
                present("u1", false, &[])
            } else {
                Observed::Absent
            }
        });
        assert_eq!(d.deletes.len(), 1);
        assert_eq!(d.deletes[0].child, real);
        assert_eq!(d.warnings.len(), 1);
        assert!(!d.releases());
    }

    #[test]
    fn nothing_is_decided_from_a_kind_not_listed_yet() {
        let c = key("XComposite", "", "c1");
        let p = held(true, vec![c.clone()]);
        assert_eq!(decide(&p, |_| Observed::Unknown), Decision::default());
        let rec = recorded(Some(PropagationPolicy::Background), &[(c, "u1")]);
        let p = parent(true, &[CASCADE_FINALIZER], rec, vec![]);
        let d = decide(&p, |_| Observed::Unknown);
        assert!(!d.releases());
        assert!(d.deletes.is_empty());
        assert_eq!(d.waiting[0].meta, None);
    }

    #[test]
    fn once_deletion_started_only_recorded_children_count() {
        let c = key("XComposite", "", "c1");
        let later = key("XComposite", "", "added-later");
        let rec = recorded(Some(PropagationPolicy::Background), &[(c.clone(), "u1")]);
        let p = parent(true, &[CASCADE_FINALIZER], rec, vec![c.clone(), later]);
        let d = decide(&p, |k| {
            if k == &c {
                Observed::Absent
            } else {
                present("u5", false, &[])
            }
        });
        assert!(d.deletes.is_empty());
        assert!(d.releases());
    }

    #[test]
    fn a_deleting_parent_without_the_finalizer_is_left_alone() {
        let c = key("XComposite", "", "c1");
        let p = parent(true, &["other"], Record::default(), vec![c]);
        assert_eq!(
            decide(&p, |_| present("u1", false, &[])),
            Decision::default()
        );
    }

    #[test]
    fn a_parent_whose_rule_is_gone_is_released_even_while_waiting() {
        let c = key("XComposite", "", "c1");
        let rec = recorded(Some(PropagationPolicy::Foreground), &[(c, "u1")]);
        let p = parent(true, &[CASCADE_FINALIZER, "other"], rec, vec![]);
        let d = orphaned(&p);
        assert!(d.releases());
        assert_eq!(d.record, Some(None));
        let p = parent(false, &["other"], Record::default(), vec![]);
        assert_eq!(orphaned(&p), Decision::default());
    }

    #[test]
    fn the_record_round_trips_and_garbage_reads_as_none() {
        let rec = recorded(
            Some(PropagationPolicy::Foreground),
            &[(key("Secret", "ns", "s"), "u1"), (key("X", "", "c"), "u2")],
        );
        assert_eq!(Record::parse(Some(&rec.to_annotation())), rec);
        assert_eq!(Record::parse(Some("{not json")), Record::default());
        assert_eq!(Record::parse(None), Record::default());
    }

    #[test]
    fn a_child_of_a_kind_outside_the_rule_is_never_deleted_and_is_reported() {
        let cm = key("ConfigMap", "kube-system", "crown-jewels");
        let mut p = held(true, vec![]);
        p.outside = vec![cm.clone()];
        let d = decide(&p, |_| present("u1", false, &[]));
        assert!(d.deletes.is_empty());
        assert!(d.releases(), "nothing to wait for");
        assert_eq!(
            d.refused,
            vec![Refused {
                child: cm.clone(),
                why: Refusal::KindNotAllowed
            }]
        );
        assert!(d.refused[0].to_string().contains("spec.childKinds"));
        // Said while the parent lives, too.
        let mut p = held(false, vec![]);
        p.outside = vec![cm];
        assert_eq!(decide(&p, |_| Observed::Absent).refused.len(), 1);
    }

    #[test]
    fn a_child_that_does_not_name_its_parent_back_is_never_deleted() {
        let c = key("XComposite", "", "c1");
        // Never bound: not recorded while alive, not deleted, not waited for.
        let p = held(false, vec![c.clone()]);
        let d = decide(&p, |_| unbound("u1"));
        assert_eq!(d.record, None);
        assert_eq!(d.refused[0].why, Refusal::NotBound(None));
        let p = held(true, vec![c.clone()]);
        let d = decide(&p, |_| unbound("u1"));
        assert!(d.deletes.is_empty());
        assert!(d.releases());
        assert_eq!(d.refused.len(), 1);
        // Recorded while bound (or by a record Lien did not write), unbound since: the same.
        let rec = recorded(Some(PropagationPolicy::Background), &[(c.clone(), "u1")]);
        let p = parent(true, &[CASCADE_FINALIZER], rec, vec![c.clone()]);
        let d = decide(&p, |_| unbound("u1"));
        assert!(d.deletes.is_empty());
        assert!(d.releases());
        // A record the parent's writer wrote naming a kind outside the rule, bound or not.
        let cm = ChildKey {
            api_version: "v1".into(),
            ..key("ConfigMap", "kube-system", "crown-jewels")
        };
        let rec = recorded(Some(PropagationPolicy::Background), &[(cm, "u1")]);
        let p = parent(true, &[CASCADE_FINALIZER], rec, vec![]);
        let d = decide(&p, |_| present("u1", false, &[]));
        assert!(d.deletes.is_empty());
        assert!(d.releases());
        assert_eq!(d.refused[0].why, Refusal::KindNotAllowed);
        // Naming another parent (another name, namespace, UID or kind) is not naming this one.
        for other in [
            ParentRef {
                name: "q".into(),
                ..back_ref()
            },
            ParentRef {
                namespace: Some("team-b".into()),
                ..back_ref()
            },
            ParentRef {
                uid: Some("another".into()),
                ..back_ref()
            },
            ParentRef {
                group: Some("other.org".into()),
                ..back_ref()
            },
            ParentRef {
                kind: "Other".into(),
                ..back_ref()
            },
        ] {
            let d = decide(&held(true, vec![c.clone()]), |_| {
                Observed::Present(ChildMeta {
                    uid: "u1".into(),
                    back_refs: vec![other.clone()],
                    ..ChildMeta::default()
                })
            });
            assert!(d.deletes.is_empty(), "{other:?} bound it");
        }
        // The matching UID, or a namespace-less reference on a child in the parent's
        // namespace, does.
        let same_ns = key("XComposite", "team-a", "c2");
        for (child, r) in [
            (
                c.clone(),
                ParentRef {
                    uid: Some("pu".into()),
                    ..back_ref()
                },
            ),
            (
                same_ns,
                ParentRef {
                    namespace: None,
                    group: None,
                    ..back_ref()
                },
            ),
        ] {
            let d = decide(&held(true, vec![child]), |_| {
                Observed::Present(ChildMeta {
                    uid: "u1".into(),
                    back_refs: vec![r.clone()],
                    ..ChildMeta::default()
                })
            });
            assert_eq!(d.deletes.len(), 1, "{r:?} binds it");
        }
    }

    #[test]
    fn a_child_unbound_after_the_deletion_started_is_not_deleted() {
        let c = key("XComposite", "", "c1");
        let p = held(true, vec![c.clone()]);
        let d = decide(&p, |_| present("u1", false, &[]));
        assert_eq!(d.deletes.len(), 1);
        let Some(Some(rec)) = d.record else {
            panic!("the record is written first")
        };
        let p = parent(true, &[CASCADE_FINALIZER], rec, vec![c]);
        let d = decide(&p, |_| unbound("u1"));
        assert!(d.deletes.is_empty());
        assert!(d.releases());
        assert_eq!(d.refused.len(), 1);
    }

    mod property {
        use std::collections::HashMap;

        use proptest::prelude::*;

        use super::*;

        /// The kinds children are drawn from: (apiVersion, kind).
        const KINDS: [(&str, &str); 3] = [
            ("example.org/v1", "XComposite"),
            ("v1", "ConfigMap"),
            ("v1", "Secret"),
        ];
        const NAMESPACES: [&str; 3] = ["", "team-a", "kube-system"];
        /// How many children [`universe`] has: every kind in every namespace, twice.
        const N: usize = KINDS.len() * NAMESPACES.len() * 2;

        fn universe() -> Vec<ChildKey> {
            let mut out = Vec::new();
            for (api_version, kind) in KINDS {
                for ns in NAMESPACES {
                    for name in ["a", "b"] {
                        out.push(ChildKey {
                            api_version: api_version.into(),
                            kind: kind.into(),
                            namespace: ns.into(),
                            name: name.into(),
                        });
                    }
                }
            }
            out
        }

        /// A back reference variant, and whether it names the test parent on a child in
        /// `ns` (the oracle, written independently of `is_named_by`).
        fn variant(i: u8, ns: &str) -> (ParentRef, bool) {
            let exact = back_ref();
            match i % 8 {
                0 => (exact, true),
                1 => (
                    ParentRef {
                        uid: Some("pu".into()),
                        ..exact
                    },
                    true,
                ),
                2 => (
                    ParentRef {
                        namespace: None,
                        ..exact
                    },
                    ns == "team-a",
                ),
                3 => (
                    ParentRef {
                        uid: Some("someone-else".into()),
                        ..exact
                    },
                    false,
                ),
                4 => (
                    ParentRef {
                        name: "q".into(),
                        ..exact
                    },
                    false,
                ),
                5 => (
                    ParentRef {
                        namespace: Some("kube-system".into()),
                        ..exact
                    },
                    false,
                ),
                6 => (
                    ParentRef {
                        kind: "Other".into(),
                        ..exact
                    },
                    false,
                ),
                _ => (
                    ParentRef {
                        group: Some("evil.org".into()),
                        ..exact
                    },
                    false,
                ),
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1024))]

            /// Whatever a parent names, records or observes, what Lien deletes is a subset of
            /// what the rule's author bound (a listed kind, consented to at admission: the
            /// author may delete it) that names this very parent back, at the UID observed.
            #[test]
            fn deletes_only_what_the_rule_binds_and_names_the_parent_back(
                deleting in any::<bool>(),
                finalizer in any::<bool>(),
                listed in prop::collection::vec(any::<bool>(), KINDS.len()),
                children in prop::collection::vec(any::<bool>(), N),
                outside in prop::collection::vec(any::<bool>(), N),
                recorded in prop::collection::vec(prop::option::of(0u8..2), N),
                record_deleting in any::<bool>(),
                // Per child: 0 unknown, 1 absent, else present with this UID choice.
                observed_as in prop::collection::vec(0u8..4, N),
                child_deleting in prop::collection::vec(any::<bool>(), N),
                back_refs in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..3), N),
            ) {
                let all = universe();
                let uid = |choice: u8| format!("u{choice}");
                let mut observed: HashMap<ChildKey, Observed> = HashMap::new();
                let mut binds: HashMap<ChildKey, bool> = HashMap::new();
                for (i, key) in all.iter().enumerate() {
                    let (refs, named): (Vec<ParentRef>, Vec<bool>) = back_refs[i]
                        .iter()
                        .map(|v| variant(*v, &key.namespace))
                        .unzip();
                    binds.insert(key.clone(), named.iter().any(|b| *b));
                    observed.insert(key.clone(), match observed_as[i] {
                        0 => Observed::Unknown,
                        1 => Observed::Absent,
                        c => Observed::Present(ChildMeta {
                            uid: uid(c - 2),
                            deleting: child_deleting[i],
                            finalizers: vec![],
                            back_refs: refs,
                            back_ref_error: None,
                        }),
                    });
                }
                let allowed: Vec<(String, String)> = KINDS
                    .iter()
                    .zip(&listed)
                    .filter(|(_, a)| **a)
                    .map(|((v, k), _)| {
                        (v.rsplit_once('/').map_or("", |(g, _)| g).to_owned(), (*k).to_owned())
                    })
                    .collect();
                let pick = |mask: &[bool]| -> Vec<ChildKey> {
                    all.iter().zip(mask).filter(|(_, m)| **m).map(|(k, _)| k.clone()).collect()
                };
                let record = Record {
                    deleting: record_deleting.then_some(PropagationPolicy::Background),
                    children: all
                        .iter()
                        .zip(&recorded)
                        .filter_map(|(k, r)| r.map(|c| RecordedChild { key: k.clone(), uid: uid(c) }))
                        .collect(),
                };
                let p = Parent {
                    identity: identity(),
                    deleting,
                    finalizers: if finalizer { vec![CASCADE_FINALIZER.into()] } else { vec![] },
                    record,
                    // Not trusted to be split by kind: the decision checks again.
                    children: Ok(pick(&children)),
                    outside: pick(&outside),
                    allowed: allowed.clone(),
                    policy: PropagationPolicy::Background,
                    policy_error: None,
                };
                let d = decide(&p, |k| observed[k].clone());
                for del in &d.deletes {
                    let kind_bound = allowed
                        .iter()
                        .any(|(g, k)| g == del.child.group() && *k == del.child.kind);
                    prop_assert!(kind_bound, "deleted {} of a kind the rule does not list", del.child);
                    prop_assert!(binds[&del.child], "deleted {} which does not name the parent", del.child);
                    match &observed[&del.child] {
                        Observed::Present(m) => {
                            prop_assert_eq!(&m.uid, &del.uid);
                            prop_assert!(!m.deleting);
                        }
                        other => prop_assert!(false, "deleted {} observed {:?}", del.child, other),
                    }
                }
            }
        }
    }

    #[test]
    fn held_by_names_finalizers_dependents_and_refusals() {
        let m = ChildMeta {
            uid: "u".into(),
            deleting: true,
            finalizers: vec!["example.org/external".into(), FOREGROUND_FINALIZER.into()],
            ..ChildMeta::default()
        };
        let s = held_by(
            Some(&m),
            None,
            &["Composed r1 (finalizers example.org/x)".into()],
        );
        assert_eq!(
            s,
            "finalizers example.org/external; foregroundDeletion: its dependents Composed r1 (finalizers example.org/x)"
        );
        let live = ChildMeta {
            deleting: false,
            ..m
        };
        assert_eq!(
            held_by(Some(&live), Some("in use by Usage ns/u"), &[]),
            "not being deleted yet; DELETE refused: in use by Usage ns/u"
        );
    }
}
