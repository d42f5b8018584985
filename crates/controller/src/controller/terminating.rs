//! A namespace being deleted: cycles of its own Usages are broken, and what Lien holds in it is
//! said on the Namespace.
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
//! (`RelationIndex::set_broken_cycles`): a relation between two members of one such cycle made
//! by a **Usage of that namespace** no longer blocks a DELETE. A DependencyRule's or a
//! ClusterUsage's relation is an administrator's order (seed 002: a finalizer's Deployment
//! outlives every object carrying the finalizer) and holds: a tenant's Usage that closes a
//! cycle with it gives way, never the rule (issue 28). A cycle that still holds without the
//! namespace's own Usages (`lien_core::unbreakable_cycles_in_namespace`) keeps the namespace
//! waiting, and is named. Nothing else changes — a relation from outside the namespace, a
//! protection by reason, a cycle through an object elsewhere all hold as before (they keep the
//! namespace `Terminating` on purpose, and the Namespace DELETE's refusal said so up front).
//!
//! What holds a namespace being deleted — a protection, a user outside, a cycle Lien does not
//! break — is said on the Namespace (issue 27): a Warning Event `NamespaceHeld` and the
//! condition `LienContentHeld` in its status, which `kubectl describe namespace` shows beside
//! the namespace controller's own conditions (kube-controller-manager updates only its own
//! condition types and keeps others'), each naming the objects, their Usages or rules and
//! reasons, and the command that lifts each.
//!
//! Every replica breaks the cycles in its own index, because each replica's webhook answers
//! DELETEs; the leader announces each change once, as Warning Events on the Namespace (and the
//! condition), naming the objects and the Usages and rules involved.
//!
//! Cost: one scan of the index's keys (an interned-namespace comparison each) plus Tarjan over
//! the namespace's keys, twice, under the read lock — only while some namespace is being
//! deleted, and only after the index or a Namespace changed. The write lock is taken only when
//! the broken set changes, for the members of the cycles.

use std::collections::BTreeMap;

use lien_core::{
    HoldLine, ObjectKey, RelationIndex, Source, cycles_in_namespace, namespace_holds,
    sources_within, unbreakable_cycles_in_namespace,
};
use parking_lot::RwLock;

use super::state::State;
use crate::cache::GroupKind;

/// Why an Event announces a broken cycle.
pub const CYCLE_BROKEN_REASON: &str = "CycleBroken";
/// Why an Event says what holds a namespace being deleted.
pub const NAMESPACE_HELD_REASON: &str = "NamespaceHeld";
/// The condition Lien sets in a Namespace's status while it holds what is in it.
pub const NAMESPACE_HELD_CONDITION: &str = "LienContentHeld";
/// How many holds a Namespace's Event and condition name; the rest are counted.
pub const HELD_LISTED: usize = 5;

/// A cycle inside a namespace being deleted: broken (its own Usages give way), or not (it holds
/// through rules or ClusterUsages, and the namespace waits).
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
            "namespace {ns} is being deleted and these objects in it use each other, so none could go first: {objects} (through {sources}); Lien no longer enforces the namespace's own Usages between them (DependencyRules and ClusterUsages still hold) so that the namespace can finish",
            ns = self.namespace,
            objects = objects.join(", "),
            sources = sources.join(", "),
        )
    }

    /// What holds a namespace: this cycle, which its own Usages do not make alone.
    fn hold_line(&self) -> HoldLine {
        let objects: Vec<String> = self.objects.iter().map(ToString::to_string).collect();
        let sources: Vec<String> = self.sources.iter().map(ToString::to_string).collect();
        let first = self
            .sources
            .iter()
            .find(|s| !matches!(s, Source::Usage { namespace, .. } if *namespace == self.namespace))
            .unwrap_or(&self.sources[0]);
        HoldLine {
            text: format!(
                "{} use each other through {}, which Lien does not break",
                objects.join(", "),
                sources.join(", ")
            ),
            command: format!("kubectl delete {}", first.kubectl_arg()),
        }
    }
}

/// What holds a namespace being deleted, as the leader says it on the Namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldNamespace {
    /// The namespace.
    pub namespace: String,
    /// Its UID, for the Event's reference.
    pub namespace_uid: String,
    /// How many holds there are (protections, users outside, cycles Lien does not break); 0
    /// once nothing Lien enforces holds it any more (the condition is then cleared).
    pub count: usize,
    /// The first [`HELD_LISTED`] of them, sorted.
    pub lines: Vec<HoldLine>,
}

impl HeldNamespace {
    /// The Event's note and the condition's message.
    pub fn note(&self) -> String {
        let ns = &self.namespace;
        if self.count == 0 {
            return format!("namespace {ns} is being deleted; Lien holds nothing in it any more");
        }
        let mut out = format!(
            "namespace {ns} is being deleted but stays Terminating: Lien holds what is in it, which deleting the namespace must not delete: "
        );
        for (i, l) in self.lines.iter().enumerate() {
            if i > 0 {
                out.push_str("; ");
            }
            out.push_str(&l.to_string());
        }
        if self.count > self.lines.len() {
            out.push_str(&format!("; and {} more", self.count - self.lines.len()));
        }
        out.push_str(&format!(
            "; `kubectl lien why namespace/{ns}` lists them all"
        ));
        out
    }
}

/// What changed about the namespaces being deleted, for the leader to announce.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Announcements {
    /// Cycles broken now that were not before.
    pub broken: Vec<BrokenCycle>,
    /// Namespaces whose holds changed (with `count == 0` once none is left).
    pub held: Vec<HeldNamespace>,
}

impl Announcements {
    /// Whether there is nothing to announce.
    pub fn is_empty(&self) -> bool {
        self.broken.is_empty() && self.held.is_empty()
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

/// What holds `ns` (being deleted): the relations of `RelationIndex::holding` — a protection,
/// a user outside — each with the command that lifts it, then the cycles Lien does not break.
/// Sorted; the count is exact, the lines bounded by [`HELD_LISTED`].
fn holds(index: &RelationIndex, ns: &str, stuck: &[BrokenCycle]) -> (usize, Vec<HoldLine>) {
    // Every holding relation is read, to sort them: only while a namespace is being deleted,
    // after a change, and a namespace held by thousands of relations was refused up front.
    let (count, mut lines) = namespace_holds(index, ns, usize::MAX);
    lines.extend(stuck.iter().map(BrokenCycle::hold_line));
    lines.sort();
    lines.truncate(HELD_LISTED);
    (count + stuck.len(), lines)
}

/// Brings the index's broken cycles up to date with the namespaces being deleted, if the index
/// or a Namespace changed since the last time; returns what changed, for the leader to
/// announce: cycles broken now that were not before, and namespaces whose holds changed.
pub(super) fn break_terminating_cycles(
    st: &mut State,
    index: &RwLock<RelationIndex>,
) -> Announcements {
    if !st.broken_stale {
        return Announcements::default();
    }
    st.broken_stale = false;
    let terminating = terminating_namespaces(st);
    if terminating.is_empty() && st.broken.is_empty() && st.held.is_empty() {
        return Announcements::default();
    }
    let (found, held) = {
        let index = index.read();
        let found: BTreeMap<String, Vec<Vec<ObjectKey>>> = terminating
            .keys()
            .map(|ns| (ns.clone(), cycles_in_namespace(&index, ns)))
            .filter(|(_, cycles)| !cycles.is_empty())
            .collect();
        let held: BTreeMap<String, HeldNamespace> = terminating
            .iter()
            .map(|(ns, uid)| {
                let stuck: Vec<BrokenCycle> = unbreakable_cycles_in_namespace(&index, ns)
                    .into_iter()
                    .map(|objects| BrokenCycle {
                        namespace: ns.clone(),
                        namespace_uid: uid.clone(),
                        sources: sources_within(&index, &objects),
                        objects,
                    })
                    .collect();
                let (count, lines) = holds(&index, ns, &stuck);
                let held = HeldNamespace {
                    namespace: ns.clone(),
                    namespace_uid: uid.clone(),
                    count,
                    lines,
                };
                (ns.clone(), held)
            })
            .filter(|(ns, h)| h.count > 0 || st.held.contains_key(ns))
            .collect();
        (found, held)
    };
    let mut out = Announcements::default();
    // A namespace whose holds changed: said again; one no longer held (or gone), once more
    // with nothing, so that the condition is cleared.
    for (ns, h) in &held {
        if st.held.get(ns) != Some(h) {
            out.held.push(h.clone());
        }
    }
    st.held = held.into_iter().filter(|(_, h)| h.count > 0).collect();
    if found != st.broken {
        let mut index = index.write();
        for ns in st.broken.keys() {
            if !found.contains_key(ns) {
                index.set_broken_cycles(ns, &[]);
            }
        }
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
                let sources = sources_within(&index, cycle);
                // Only a cycle its own Usages are part of gives way; one of rules alone is named
                // among the namespace's holds instead.
                if !sources
                    .iter()
                    .any(|s| matches!(s, Source::Usage { namespace, .. } if namespace == ns))
                {
                    continue;
                }
                out.broken.push(BrokenCycle {
                    namespace: ns.clone(),
                    namespace_uid: terminating.get(ns).cloned().unwrap_or_default(),
                    objects: cycle.clone(),
                    sources,
                });
            }
        }
        st.broken = found;
    }
    out
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
        let news = break_terminating_cycles(&mut st, &index);
        assert!(news.held.is_empty(), "nothing holds shop: {news:?}");
        let broken = news.broken;
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
            "namespace shop is being deleted and these objects in it use each other, so none could go first: ConfigMap shop/a, ConfigMap shop/b (through Usage shop/a-uses-b, Usage shop/b-uses-a); Lien no longer enforces the namespace's own Usages between them (DependencyRules and ClusterUsages still hold) so that the namespace can finish"
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

    /// `by` uses `of` in namespace `ns`, through the DependencyRule `rule`.
    fn rule_uses(index: &RwLock<RelationIndex>, rule: &str, ns: &str, by: &str, of: &str) {
        let s = Source::rule(rule);
        index
            .write()
            .apply(&s, [Relation::uses(s.clone(), cm(ns, of), cm(ns, by))])
            .expect("valid");
    }

    /// Issue 28, finding 3 (seed 002): a rule says the Deployment outlives every object that
    /// carries its finalizer; a tenant's Usage says the opposite, closing a cycle. Deleting the
    /// namespace breaks the cycle by dropping the tenant's Usage only: the rule still holds the
    /// Deployment until the object is gone, so they go in the rule's order.
    #[test]
    fn only_the_namespaces_own_usages_give_way_in_a_cycle() {
        let index = RwLock::new(RelationIndex::new());
        // The rule: `cool` (carrying the finalizer) uses `served-by` (the Deployment).
        rule_uses(&index, "finalizer-served", "shop", "cool", "served-by");
        // The tenant's Usage: `served-by` uses `cool`.
        uses(&index, "shop", "served-by", "cool");
        let mut st = State::default();
        namespace(&mut st, "shop", true);
        let news = break_terminating_cycles(&mut st, &index);
        assert_eq!(news.broken.len(), 1, "{news:?}");
        // The Usage's relation gives way: the object carrying the finalizer may go first.
        assert!(allowed(&index, &cm("shop", "cool")));
        // The rule's holds: the Deployment waits for it.
        assert!(!allowed(&index, &cm("shop", "served-by")));
        assert!(news.held.is_empty(), "the rule alone is no cycle: {news:?}");
    }

    /// A cycle of rules alone is an administrator's order Lien does not break: the namespace
    /// waits, and says why (issue 28: "named, as before").
    #[test]
    fn a_cycle_of_rules_holds_the_namespace_and_is_named() {
        let index = RwLock::new(RelationIndex::new());
        rule_uses(&index, "r1", "shop", "a", "b");
        rule_uses(&index, "r2", "shop", "b", "a");
        let mut st = State::default();
        namespace(&mut st, "shop", true);
        let news = break_terminating_cycles(&mut st, &index);
        assert!(news.broken.is_empty(), "{news:?}");
        assert!(!allowed(&index, &cm("shop", "a")) && !allowed(&index, &cm("shop", "b")));
        assert_eq!(news.held.len(), 1, "{news:?}");
        assert_eq!(
            news.held[0].note(),
            "namespace shop is being deleted but stays Terminating: Lien holds what is in it, which deleting the namespace must not delete: ConfigMap shop/a, ConfigMap shop/b use each other through DependencyRule r1, DependencyRule r2, which Lien does not break — lift it: `kubectl delete dependencyrule.lien.dev/r1`; `kubectl lien why namespace/shop` lists them all"
        );
    }

    /// Issue 27: a protection in a namespace being deleted holds it; the leader says what and
    /// how to lift it, once per change, and once more when nothing holds it any more.
    #[test]
    fn a_protection_holds_a_namespace_being_deleted_and_is_named_until_lifted() {
        let index = RwLock::new(RelationIndex::new());
        let keep = Source::usage("vault", "keep-data");
        index
            .write()
            .apply(
                &keep,
                [Relation::protects(
                    keep.clone(),
                    cm("vault", "data"),
                    "never delete: customer data",
                )],
            )
            .expect("valid");
        let mut st = State::default();
        namespace(&mut st, "vault", false);
        assert!(break_terminating_cycles(&mut st, &index).is_empty());
        namespace(&mut st, "vault", true);
        // The namespace controller deleted the Usage; Lien keeps it (its finalizer at 0).
        index.write().set_kept(&keep, Some(0));
        let news = break_terminating_cycles(&mut st, &index);
        assert_eq!(
            news.held,
            [HeldNamespace {
                namespace: "vault".into(),
                namespace_uid: "uid-vault".into(),
                count: 1,
                lines: vec![HoldLine {
                    text: "ConfigMap vault/data is protected (Usage vault/keep-data: never delete: customer data)".into(),
                    command: "kubectl patch usage.lien.dev/keep-data -n vault --type=json -p '[{\"op\":\"test\",\"path\":\"/metadata/finalizers/0\",\"value\":\"lien.dev/usage\"},{\"op\":\"remove\",\"path\":\"/metadata/finalizers/0\"}]'".into(),
                }],
            }]
        );
        assert!(
            news.held[0].note().starts_with(
                "namespace vault is being deleted but stays Terminating: Lien holds what is in it"
            ),
            "{}",
            news.held[0].note()
        );
        // Unchanged: nothing to say again.
        st.broken_stale = true;
        assert!(break_terminating_cycles(&mut st, &index).is_empty());
        // Lifted: said once more with nothing (the condition is cleared), then nothing.
        index.write().delete(&keep);
        st.broken_stale = true;
        let news = break_terminating_cycles(&mut st, &index);
        assert_eq!(news.held.len(), 1);
        assert_eq!(news.held[0].count, 0);
        st.broken_stale = true;
        assert!(break_terminating_cycles(&mut st, &index).is_empty());
    }
}
