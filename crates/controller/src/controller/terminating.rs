//! Cycles never deadlock a namespace being deleted.
//!
//! When a Namespace is deleted, kube-apiserver's namespace controller deletes everything in it
//! and retries what was refused until the namespace is empty. Relations whose both ends are
//! inside the namespace only *order* those deletions — users go first, then what they used,
//! each refused DELETE retried — so they never keep the namespace for long. A cycle of them
//! (A uses B and B uses A, through Usages or rules) can never be ordered: every DELETE is
//! refused forever, each Usage's finalizer waits for its user, and the namespace stays
//! `Terminating` until someone edits finalizers by hand.
//!
//! So, while a namespace is being deleted, the event loop finds the cycles whose every relation
//! is inside it (`lien_core::cycles_in_namespace`) and breaks them in the index
//! (`RelationIndex::set_broken_cycles`): a relation between two members of one such cycle no
//! longer blocks a DELETE. Nothing else changes — a relation from outside the namespace, a
//! protection by reason, a cycle through an object elsewhere all hold as before (the first two
//! keep the namespace `Terminating` on purpose, and say so in the Namespace DELETE's refusal).
//! The relations stay in the index until their sources go with the namespace.
//!
//! Every replica breaks the cycles in its own index, because each replica's webhook answers
//! DELETEs; the leader announces each newly broken cycle once, as a Warning Event on the
//! Namespace naming its objects and the Usages and rules that made it.
//!
//! Cost: one scan of the index's keys (an interned-namespace comparison each) plus Tarjan over
//! the namespace's keys, under the read lock — only while some namespace is being deleted,
//! and only after the index or a Namespace changed. The write lock is taken only when the
//! broken set changes, for the members of the cycles.

use std::collections::BTreeMap;

use lien_core::{ObjectKey, RelationIndex, Source, cycles_in_namespace, sources_within};
use parking_lot::RwLock;

use super::state::State;
use crate::cache::GroupKind;

/// Why an Event announces a broken cycle.
pub const CYCLE_BROKEN_REASON: &str = "CycleBroken";

/// A cycle just broken inside a namespace being deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokenCycle {
    /// The namespace.
    pub namespace: String,
    /// Its UID, for the Event's reference.
    pub namespace_uid: String,
    /// The objects that use each other, sorted.
    pub objects: Vec<ObjectKey>,
    /// The Usages and rules of the relations between them, sorted.
    pub sources: Vec<Source>,
}

impl BrokenCycle {
    /// The Event's note: what was stuck, through what, and what Lien did.
    pub fn note(&self) -> String {
        let objects: Vec<String> = self.objects.iter().map(ToString::to_string).collect();
        let sources: Vec<String> = self.sources.iter().map(ToString::to_string).collect();
        format!(
            "namespace {ns} is being deleted and these objects in it use each other, so none could go first: {objects} (through {sources}); Lien no longer enforces the relations between them so that the namespace can finish",
            ns = self.namespace,
            objects = objects.join(", "),
            sources = sources.join(", "),
        )
    }
}

/// The namespaces being deleted, with their UIDs, from the Namespace cache (always watched).
fn terminating_namespaces(st: &State) -> BTreeMap<String, String> {
    st.caches
        .kind(&GroupKind::new("", "Namespace"))
        .map(|kind| {
            kind.objects
                .iter()
                .filter(|(_, o)| o.deleting)
                .map(|((_, name), o)| (name.clone(), o.uid.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// Brings the index's broken cycles up to date with the namespaces being deleted, if the index
/// or a Namespace changed since the last time; returns the cycles broken now that were not
/// before (for the leader to announce).
pub(super) fn break_terminating_cycles(
    st: &mut State,
    index: &RwLock<RelationIndex>,
) -> Vec<BrokenCycle> {
    if !st.broken_stale {
        return Vec::new();
    }
    st.broken_stale = false;
    let terminating = terminating_namespaces(st);
    if terminating.is_empty() && st.broken.is_empty() {
        return Vec::new();
    }
    let found: BTreeMap<String, Vec<Vec<ObjectKey>>> = {
        let index = index.read();
        terminating
            .keys()
            .map(|ns| (ns.clone(), cycles_in_namespace(&index, ns)))
            .filter(|(_, cycles)| !cycles.is_empty())
            .collect()
    };
    if found == st.broken {
        return Vec::new();
    }
    let mut index = index.write();
    for ns in st.broken.keys() {
        if !found.contains_key(ns) {
            index.set_broken_cycles(ns, &[]);
        }
    }
    let mut announce = Vec::new();
    for (ns, cycles) in &found {
        let before = st.broken.get(ns);
        if before == Some(cycles) {
            continue;
        }
        index.set_broken_cycles(ns, cycles);
        for cycle in cycles {
            if before.is_some_and(|b| b.contains(cycle)) {
                continue;
            }
            announce.push(BrokenCycle {
                namespace: ns.clone(),
                namespace_uid: terminating.get(ns).cloned().unwrap_or_default(),
                objects: cycle.clone(),
                sources: sources_within(&index, cycle),
            });
        }
    }
    st.broken = found;
    announce
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use lien_core::{Decision, Relation, decide_delete};

    use super::*;

    fn cm(ns: &str, name: &str) -> ObjectKey {
        ObjectKey::new("", "ConfigMap", Some(ns), name)
    }

    /// `by` uses `of` in namespace `ns`, through the Usage `by-uses-of`.
    fn uses(index: &RwLock<RelationIndex>, ns: &str, by: &str, of: &str) {
        let s = Source::usage(ns, format!("{by}-uses-{of}"));
        index
            .write()
            .apply(&s, [Relation::uses(s.clone(), cm(ns, of), cm(ns, by))])
            .expect("valid");
    }

    fn namespace(st: &mut State, name: &str, deleting: bool) {
        let gk = GroupKind::new("", "Namespace");
        st.caches.add_kind(gk.clone(), false, "v1", "namespaces");
        st.caches.apply(
            &gk,
            &ObjectMeta {
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                deletion_timestamp: deleting.then(|| Time(jiff::Timestamp::now())),
                ..Default::default()
            },
        );
        st.broken_stale = true;
    }

    fn allowed(index: &RwLock<RelationIndex>, key: &ObjectKey) -> bool {
        matches!(decide_delete(&index.read(), key, None), Decision::Allowed)
    }

    #[test]
    fn a_cycle_inside_a_namespace_being_deleted_is_broken_once_and_restored_if_it_stays() {
        let index = RwLock::new(RelationIndex::new());
        uses(&index, "shop", "a", "b");
        uses(&index, "shop", "b", "a");
        uses(&index, "other", "x", "y");
        uses(&index, "other", "y", "x");
        let mut st = State::default();
        namespace(&mut st, "shop", false);
        namespace(&mut st, "other", false);
        assert!(break_terminating_cycles(&mut st, &index).is_empty());
        assert!(!allowed(&index, &cm("shop", "a")));

        namespace(&mut st, "shop", true);
        let broken = break_terminating_cycles(&mut st, &index);
        assert_eq!(
            broken,
            [BrokenCycle {
                namespace: "shop".into(),
                namespace_uid: "uid-shop".into(),
                objects: vec![cm("shop", "a"), cm("shop", "b")],
                sources: vec![
                    Source::usage("shop", "a-uses-b"),
                    Source::usage("shop", "b-uses-a")
                ],
            }]
        );
        assert_eq!(
            broken[0].note(),
            "namespace shop is being deleted and these objects in it use each other, so none could go first: ConfigMap shop/a, ConfigMap shop/b (through Usage shop/a-uses-b, Usage shop/b-uses-a); Lien no longer enforces the relations between them so that the namespace can finish"
        );
        assert!(allowed(&index, &cm("shop", "a")) && allowed(&index, &cm("shop", "b")));
        // The same cycle in a namespace that is not being deleted still holds.
        assert!(!allowed(&index, &cm("other", "x")));

        // Nothing changed: nothing is computed or announced again.
        assert!(break_terminating_cycles(&mut st, &index).is_empty());
        st.broken_stale = true;
        assert!(break_terminating_cycles(&mut st, &index).is_empty());

        // The deletion was cancelled (a sandbox or a test can; kube-apiserver cannot): the
        // relations hold again.
        namespace(&mut st, "shop", false);
        assert!(break_terminating_cycles(&mut st, &index).is_empty());
        assert!(!allowed(&index, &cm("shop", "a")));
    }
}
