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

use std::collections::BTreeMap;

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

/// A present child's metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChildMeta {
    pub uid: String,
    pub deleting: bool,
    pub finalizers: Vec<String>,
}

/// A parent as observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parent {
    /// `deletionTimestamp` is set.
    pub deleting: bool,
    /// `metadata.finalizers`.
    pub finalizers: Vec<String>,
    /// Lien's record, parsed.
    pub record: Record,
    /// The children its `children` expression yields now, resolved; or why they cannot be
    /// known (a CEL error, an unknown kind).
    pub children: Result<Vec<ChildKey>, String>,
    /// The policy the rule gives it (the expression's value, else the spec's).
    pub policy: PropagationPolicy,
    /// Why `propagationPolicyExpression` failed on it (then `policy` is the spec's).
    pub policy_error: Option<String>,
}

impl Parent {
    fn has(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| f == finalizer)
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
                match (record.uid_of(key), observe(key)) {
                    (Some(uid), _) => targets.push(RecordedChild {
                        key: key.clone(),
                        uid: uid.to_owned(),
                    }),
                    (None, Observed::Present(m)) => targets.push(RecordedChild {
                        key: key.clone(),
                        uid: m.uid,
                    }),
                    (None, Observed::Absent) => d.warnings.push(format!(
                        "{key} does not exist: nothing to delete, the parent does not wait for it"
                    )),
                    // Not listed yet: decide later.
                    (None, Observed::Unknown) => return d,
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
        match observe(&key) {
            Observed::Absent => {}
            Observed::Present(m) if m.uid != uid => d.warnings.push(format!(
                "{key} was re-created (UID {} instead of {uid}): the new object is not deleted",
                m.uid
            )),
            Observed::Present(m) => {
                if !m.deleting {
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
    let refs = match &parent.children {
        Ok(refs) => refs,
        Err(e) => {
            // Keep the record as it is: a transient error must not forget UIDs.
            d.warnings
                .push(format!("its children cannot be known ({e})"));
            return d;
        }
    };
    let mut children: BTreeMap<ChildKey, String> = BTreeMap::new();
    for key in refs {
        if let Some(uid) = parent.record.uid_of(key) {
            children.insert(key.clone(), uid.to_owned());
        } else if let Observed::Present(m) = observe(key) {
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

    fn present(uid: &str, deleting: bool, finalizers: &[&str]) -> Observed {
        Observed::Present(ChildMeta {
            uid: uid.into(),
            deleting,
            finalizers: finalizers.iter().map(|f| (*f).to_owned()).collect(),
        })
    }

    fn parent(
        deleting: bool,
        finalizers: &[&str],
        record: Record,
        children: Vec<ChildKey>,
    ) -> Parent {
        Parent {
            deleting,
            finalizers: finalizers.iter().map(|f| (*f).to_owned()).collect(),
            record,
            children: Ok(children),
            policy: PropagationPolicy::Background,
            policy_error: None,
        }
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
        let p = parent(
            false,
            &[CASCADE_FINALIZER],
            Record::default(),
            vec![key("X", "", "a")],
        );
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
        let mut p = parent(true, &[CASCADE_FINALIZER], Record::default(), vec![c]);
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
        let p = parent(true, &[CASCADE_FINALIZER], Record::default(), vec![c]);
        let d = decide(&p, |_| Observed::Absent);
        assert!(d.releases());
        assert!(d.warnings[0].contains("XComposite missing does not exist"));
        let mut p = parent(true, &[CASCADE_FINALIZER], Record::default(), vec![]);
        p.children = Err("no such key: resourceRef".into());
        let d = decide(&p, |_| present("u", false, &[]));
        assert!(d.releases());
        assert!(d.deletes.is_empty());
        assert!(d.warnings[0].contains("no such key"));
    }

    #[test]
    fn a_dangling_reference_does_not_hold_a_parent_that_waits_for_others() {
        let real = key("XComposite", "", "real");
        let missing = key("XComposite", "", "missing");
        let p = parent(
            true,
            &[CASCADE_FINALIZER],
            Record::default(),
            vec![real.clone(), missing],
        );
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
        let p = parent(
            true,
            &[CASCADE_FINALIZER],
            Record::default(),
            vec![c.clone()],
        );
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
    fn held_by_names_finalizers_dependents_and_refusals() {
        let m = ChildMeta {
            uid: "u".into(),
            deleting: true,
            finalizers: vec!["example.org/external".into(), FOREGROUND_FINALIZER.into()],
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
