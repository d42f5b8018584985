//! `RuleJoin`: the incremental join of one `DependencyRule` against a brute-force join, and each
//! semantic rule on its own. The join lives in a `RelationIndex`; what an update changed is
//! observed as the index sees it (the rule's relations before and after), and checked against
//! the counts the update reports.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use lien_core::{
    AttachStep, GroupKind, JoinChange, JoinError, JoinId, JoinMut, ObjectKey, Relation,
    RelationIndex, RuleConfig, RuleScope, Source,
};
use proptest::prelude::*;

/// What one update changed in the index, as relations.
#[derive(Debug, Default)]
struct Delta {
    added: Vec<Relation>,
    removed: Vec<Relation>,
}

impl Delta {
    fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

/// One rule's join in an index of its own.
struct J {
    index: RelationIndex,
    id: JoinId,
    source: Source,
}

impl J {
    /// An attached join: every update changes the index.
    fn new(c: RuleConfig) -> Self {
        let mut j = Self::detached(c);
        j.attach();
        j
    }

    fn detached(c: RuleConfig) -> Self {
        let mut index = RelationIndex::new();
        let source = c.source.clone();
        let id = index.add_join(c).expect("room");
        Self { index, id, source }
    }

    fn attach(&mut self) -> usize {
        self.index
            .join_mut(self.id)
            .expect("join")
            .attach()
            .expect("room")
    }

    fn in_index(&self) -> HashSet<Relation> {
        self.index
            .relations_of_source(&self.source)
            .map(|r| r.to_relation())
            .collect()
    }

    fn observe(
        &mut self,
        f: impl FnOnce(&mut JoinMut<'_>) -> Result<JoinChange, JoinError>,
    ) -> Result<Delta, JoinError> {
        let before = self.in_index();
        let change = f(&mut self.index.join_mut(self.id).expect("join"))?;
        let after = self.in_index();
        let d = Delta {
            added: sorted(after.difference(&before).cloned().collect()),
            removed: sorted(before.difference(&after).cloned().collect()),
        };
        if self.index.join(self.id).expect("join").is_attached() {
            assert_eq!(
                (change.added, change.removed),
                (d.added.len(), d.removed.len()),
                "reported change"
            );
        } else {
            assert!(d.is_empty(), "a detached join changed the index: {d:?}");
        }
        Ok(d)
    }

    fn upsert_of(
        &mut self,
        k: &ObjectKey,
        uid: Option<&str>,
        keys: Option<Vec<String>>,
    ) -> Result<Delta, JoinError> {
        self.observe(|j| j.upsert_of(k, uid, keys))
    }

    fn upsert_by(
        &mut self,
        k: &ObjectKey,
        uid: Option<&str>,
        keys: Option<Vec<String>>,
        when: bool,
    ) -> Result<Delta, JoinError> {
        self.observe(|j| j.upsert_by(k, uid, keys, when))
    }

    fn error_of(&mut self, k: &ObjectKey, uid: Option<&str>) -> Result<Delta, JoinError> {
        self.observe(|j| j.error_of(k, uid))
    }

    fn error_by(&mut self, k: &ObjectKey, uid: Option<&str>) -> Result<Delta, JoinError> {
        self.observe(|j| j.error_by(k, uid))
    }

    fn remove_of(&mut self, k: &ObjectKey) -> Delta {
        self.observe(|j| Ok(j.remove_of(k))).expect("infallible")
    }

    fn remove_by(&mut self, k: &ObjectKey) -> Delta {
        self.observe(|j| Ok(j.remove_by(k))).expect("infallible")
    }

    /// The join's own view of its relations.
    fn relations(&self) -> Vec<Relation> {
        self.index
            .join(self.id)
            .expect("join")
            .relations()
            .collect()
    }

    fn len(&self) -> usize {
        self.index.join(self.id).expect("join").len()
    }

    fn is_empty(&self) -> bool {
        self.index.join(self.id).expect("join").is_empty()
    }

    fn error_count(&self) -> usize {
        self.index.join(self.id).expect("join").error_count()
    }

    fn object_counts(&self) -> (usize, usize) {
        self.index.join(self.id).expect("join").object_counts()
    }
}

const REASON: &str = "the NFS export stores its data in this pool";

fn config(scope: RuleScope, keyed: bool, same_kind: bool) -> RuleConfig {
    RuleConfig {
        source: Source::rule("nfs-uses-pool"),
        of: GroupKind::new("ceph.rook.io", "CephBlockPool"),
        by: if same_kind {
            GroupKind::new("ceph.rook.io", "CephBlockPool")
        } else {
            GroupKind::new("ceph.rook.io", "CephNFS")
        },
        scope,
        keyed,
        reason: REASON.to_owned(),
        replay: true,
        warn: false,
    }
}

fn obj(gk: &GroupKind, ns: Option<&str>, name: &str) -> ObjectKey {
    ObjectKey::new(&gk.group, &gk.kind, ns, name)
}

fn keys(ks: &[&str]) -> Option<Vec<String>> {
    Some(ks.iter().map(|k| (*k).to_owned()).collect())
}

fn rel(c: &RuleConfig, of: &ObjectKey, by: &ObjectKey, uids: (&str, &str)) -> Relation {
    Relation::uses(c.source.clone(), of.clone(), by.clone())
        .with_reason(REASON)
        .with_replay(true)
        .with_uids(Some(uids.0), Some(uids.1))
}

fn sorted(mut v: Vec<Relation>) -> Vec<Relation> {
    v.sort();
    v
}

// ----- the model -----------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    UpsertOf(usize, usize, usize, Vec<usize>),
    UpsertBy(usize, usize, usize, Vec<usize>, bool),
    ErrorOf(usize, usize, usize),
    ErrorBy(usize, usize, usize),
    RemoveOf(usize, usize),
    RemoveBy(usize, usize),
}

const NAMESPACES: [Option<&str>; 3] = [Some("a"), Some("b"), None];
const NAMES: [&str; 3] = ["x", "y", "z"];
const KEYS: [&str; 3] = ["p1", "p2", "p3"];
const UIDS: [&str; 2] = ["0f8fad5b-d9cb-469f-a165-70867728950e", "uid-2"];

fn op() -> impl Strategy<Value = Op> {
    let ks = proptest::collection::vec(0..KEYS.len(), 0..3);
    prop_oneof![
        4 => (0..3usize, 0..3usize, 0..2usize, ks.clone()).prop_map(|(n, m, u, k)| Op::UpsertOf(n, m, u, k)),
        4 => (0..3usize, 0..3usize, 0..2usize, ks, any::<bool>()).prop_map(|(n, m, u, k, w)| Op::UpsertBy(n, m, u, k, w)),
        1 => (0..3usize, 0..3usize, 0..2usize).prop_map(|(n, m, u)| Op::ErrorOf(n, m, u)),
        1 => (0..3usize, 0..3usize, 0..2usize).prop_map(|(n, m, u)| Op::ErrorBy(n, m, u)),
        2 => (0..3usize, 0..3usize).prop_map(|(n, m)| Op::RemoveOf(n, m)),
        2 => (0..3usize, 0..3usize).prop_map(|(n, m)| Op::RemoveBy(n, m)),
    ]
}

/// What the model remembers of an object: UID, keys, `when` (as the join should see them).
type State = BTreeMap<ObjectKey, (String, BTreeSet<String>, bool)>;

/// The join computed from scratch, straight from the semantics.
fn brute_force(c: &RuleConfig, ofs: &State, bys: &State) -> HashSet<Relation> {
    let mut out = HashSet::new();
    for (of, (of_uid, of_keys, of_ok)) in ofs {
        for (by, (by_uid, by_keys, when)) in bys {
            let in_scope = match c.scope {
                RuleScope::Cluster => true,
                RuleScope::SameNamespace => of.namespace.is_some() && of.namespace == by.namespace,
            };
            let keys_meet = !c.keyed || of_keys.intersection(by_keys).next().is_some();
            if *of_ok && *when && in_scope && keys_meet && of != by {
                out.insert(rel(c, of, by, (of_uid, by_uid)));
            }
        }
    }
    out
}

fn apply(set: &mut HashSet<Relation>, d: Delta) -> Result<(), TestCaseError> {
    for r in d.removed {
        prop_assert!(
            set.remove(&r),
            "removed a relation that was not there: {r:?}"
        );
    }
    for r in d.added {
        prop_assert!(set.insert(r.clone()), "added a relation twice: {r:?}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn deltas_track_a_brute_force_join(
        cluster in any::<bool>(),
        keyed in any::<bool>(),
        same_kind in any::<bool>(),
        ops in proptest::collection::vec(op(), 1..40),
        attach_at in 0..40usize,
    ) {
        let scope = if cluster { RuleScope::Cluster } else { RuleScope::SameNamespace };
        let c = config(scope, keyed, same_kind);
        // Detached for the first `attach_at` updates (the index holds nothing of the rule),
        // then attached (the index holds its whole join, and follows every update).
        let mut join = J::detached(c.clone());
        let (mut ofs, mut bys) = (State::new(), State::new());
        let mut derived = HashSet::new();
        let key_set = |ks: &[usize]| -> BTreeSet<String> {
            if keyed { ks.iter().map(|&k| KEYS[k].to_owned()).collect() } else { BTreeSet::new() }
        };
        let key_vec = |ks: &[usize]| Some(ks.iter().map(|&k| KEYS[k].to_owned()).collect());
        for (i, op) in ops.into_iter().enumerate() {
            if i == attach_at {
                join.attach();
                derived = join.in_index();
            }
            let delta = match op {
                Op::UpsertOf(n, m, u, ks) => {
                    let k = obj(&c.of, NAMESPACES[n], NAMES[m]);
                    ofs.insert(k.clone(), (UIDS[u].to_owned(), key_set(&ks), true));
                    join.upsert_of(&k, Some(UIDS[u]), key_vec(&ks)).expect("of kind")
                }
                Op::UpsertBy(n, m, u, ks, when) => {
                    let k = obj(&c.by, NAMESPACES[n], NAMES[m]);
                    bys.insert(k.clone(), (UIDS[u].to_owned(), key_set(&ks), when));
                    join.upsert_by(&k, Some(UIDS[u]), key_vec(&ks), when).expect("by kind")
                }
                Op::ErrorOf(n, m, u) => {
                    let k = obj(&c.of, NAMESPACES[n], NAMES[m]);
                    let (keys, ok) = ofs.get(&k).map_or((BTreeSet::new(), false), |o| (o.1.clone(), o.2));
                    ofs.insert(k.clone(), (UIDS[u].to_owned(), keys, ok));
                    join.error_of(&k, Some(UIDS[u])).expect("of kind")
                }
                Op::ErrorBy(n, m, u) => {
                    let k = obj(&c.by, NAMESPACES[n], NAMES[m]);
                    let (keys, when) = bys.get(&k).map_or((BTreeSet::new(), false), |o| (o.1.clone(), o.2));
                    bys.insert(k.clone(), (UIDS[u].to_owned(), keys, when));
                    join.error_by(&k, Some(UIDS[u])).expect("by kind")
                }
                Op::RemoveOf(n, m) => {
                    let k = obj(&c.of, NAMESPACES[n], NAMES[m]);
                    ofs.remove(&k);
                    join.remove_of(&k)
                }
                Op::RemoveBy(n, m) => {
                    let k = obj(&c.by, NAMESPACES[n], NAMES[m]);
                    bys.remove(&k);
                    join.remove_by(&k)
                }
            };
            apply(&mut derived, delta)?;
            let expected = brute_force(&c, &ofs, &bys);
            if i >= attach_at {
                prop_assert_eq!(&derived, &expected);
                prop_assert_eq!(join.index.len(), expected.len());
            } else {
                prop_assert_eq!(join.index.len(), 0);
            }
            prop_assert_eq!(join.relations().into_iter().collect::<HashSet<_>>(), expected.clone());
            prop_assert_eq!(join.len(), expected.len());
            prop_assert_eq!(join.object_counts(), (ofs.len(), bys.len()));
        }
        // Removing everything leaves nothing behind, strings included.
        for k in ofs.keys() {
            apply(&mut derived, join.remove_of(k))?;
        }
        for k in bys.keys() {
            apply(&mut derived, join.remove_by(k))?;
        }
        prop_assert!(derived.is_empty());
        prop_assert_eq!((join.len(), join.error_count()), (0, 0));
        // Nothing is left in the index but the join's reason.
        prop_assert_eq!((join.index.len(), join.index.key_count(), join.index.string_count()), (0, 0, 1));
        prop_assert!(join.index.remove_join(join.id));
        prop_assert_eq!(join.index.string_count(), 0);
    }
}

/// Applies `op` to a join and to the model.
fn apply_op(
    index: &mut RelationIndex,
    id: JoinId,
    c: &RuleConfig,
    op: &Op,
    ofs: &mut State,
    bys: &mut State,
) {
    let keyed = c.keyed;
    let key_set = |ks: &[usize]| -> BTreeSet<String> {
        if keyed {
            ks.iter().map(|&k| KEYS[k].to_owned()).collect()
        } else {
            BTreeSet::new()
        }
    };
    let key_vec = |ks: &[usize]| Some(ks.iter().map(|&k| KEYS[k].to_owned()).collect());
    let mut join = index.join_mut(id).expect("join");
    match op {
        Op::UpsertOf(n, m, u, ks) => {
            let k = obj(&c.of, NAMESPACES[*n], NAMES[*m]);
            ofs.insert(k.clone(), (UIDS[*u].to_owned(), key_set(ks), true));
            join.upsert_of(&k, Some(UIDS[*u]), key_vec(ks))
                .expect("of kind");
        }
        Op::UpsertBy(n, m, u, ks, when) => {
            let k = obj(&c.by, NAMESPACES[*n], NAMES[*m]);
            bys.insert(k.clone(), (UIDS[*u].to_owned(), key_set(ks), *when));
            join.upsert_by(&k, Some(UIDS[*u]), key_vec(ks), *when)
                .expect("by kind");
        }
        Op::ErrorOf(n, m, u) => {
            let k = obj(&c.of, NAMESPACES[*n], NAMES[*m]);
            let (keys, ok) = ofs
                .get(&k)
                .map_or((BTreeSet::new(), false), |o| (o.1.clone(), o.2));
            ofs.insert(k.clone(), (UIDS[*u].to_owned(), keys, ok));
            join.error_of(&k, Some(UIDS[*u])).expect("of kind");
        }
        Op::ErrorBy(n, m, u) => {
            let k = obj(&c.by, NAMESPACES[*n], NAMES[*m]);
            let (keys, when) = bys
                .get(&k)
                .map_or((BTreeSet::new(), false), |o| (o.1.clone(), o.2));
            bys.insert(k.clone(), (UIDS[*u].to_owned(), keys, when));
            join.error_by(&k, Some(UIDS[*u])).expect("by kind");
        }
        Op::RemoveOf(n, m) => {
            let k = obj(&c.of, NAMESPACES[*n], NAMES[*m]);
            ofs.remove(&k);
            join.remove_of(&k);
        }
        Op::RemoveBy(n, m) => {
            let k = obj(&c.by, NAMESPACES[*n], NAMES[*m]);
            bys.remove(&k);
            join.remove_by(&k);
        }
    }
}

/// The relations of `source` the index holds.
fn of_source(index: &RelationIndex, source: &Source) -> HashSet<Relation> {
    index
        .relations_of_source(source)
        .map(|r| r.to_relation())
        .collect()
}

const NEXT_REASON: &str = "the next generation's reason";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A rule's next generation attached in steps of `budget` relations (`attach_step`, the
    /// write lock released between steps), with updates fed between the steps: the rule's
    /// relations are the previous generation's until they are all the new one's (never a mix),
    /// and at the end the index holds exactly the new generation's relations, follows updates
    /// as an attached join does, and keeps nothing of the old one or of the steps.
    #[test]
    fn a_generation_attached_in_steps_ends_as_one_attached_at_once(
        cluster in any::<bool>(),
        keyed in any::<bool>(),
        same_kind in any::<bool>(),
        first in proptest::collection::vec(op(), 0..30),
        between in proptest::collection::vec(op(), 0..30),
        budget in 1..5usize,
    ) {
        let scope = if cluster { RuleScope::Cluster } else { RuleScope::SameNamespace };
        let c1 = config(scope, keyed, same_kind);
        let c2 = RuleConfig { reason: NEXT_REASON.to_owned(), ..c1.clone() };
        let source = c1.source.clone();
        let next = |ofs: &State, bys: &State| -> HashSet<Relation> {
            brute_force(&c2, ofs, bys).into_iter().map(|r| r.with_reason(NEXT_REASON)).collect()
        };
        let mut index = RelationIndex::new();
        let (mut ofs, mut bys) = (State::new(), State::new());
        let one = index.add_join(c1.clone()).expect("room");
        for op in &first {
            apply_op(&mut index, one, &c1, op, &mut ofs, &mut bys);
        }
        index.join_mut(one).expect("join").attach().expect("room");
        let old = of_source(&index, &source);
        prop_assert_eq!(&old, &brute_force(&c1, &ofs, &bys));

        // The next generation, as the controller makes it: the old join goes (its relations
        // stay the rule's), the new one is fed every object, then attached in steps.
        prop_assert!(index.remove_join(one));
        let two = index.add_join(c2.clone()).expect("room");
        for (k, (uid, ks, ok)) in ofs.clone() {
            let mut join = index.join_mut(two).expect("join");
            // An `of` object whose evaluation failed before it had keys holds nothing.
            if ok {
                join.upsert_of(&k, Some(&uid), Some(ks.into_iter().collect())).expect("kind");
            } else {
                join.error_of(&k, Some(&uid)).expect("kind");
            }
        }
        for (k, (uid, ks, when)) in bys.clone() {
            let ks = Some(ks.into_iter().collect());
            index.join_mut(two).expect("join").upsert_by(&k, Some(&uid), ks, when).expect("kind");
        }
        let mut between = between.into_iter();
        let mut switched = false;
        loop {
            let step = index.join_mut(two).expect("join").attach_step(budget).expect("room");
            let visible = of_source(&index, &source);
            if !switched && visible != old {
                switched = true;
            }
            if switched {
                // From the switch on, the rule's relations are the new generation's.
                prop_assert_eq!(&visible, &next(&ofs, &bys));
            }
            if step != AttachStep::More {
                prop_assert_eq!(step, AttachStep::Done(visible.len()));
                break;
            }
            if let Some(op) = between.next() {
                apply_op(&mut index, two, &c2, &op, &mut ofs, &mut bys);
            }
        }
        let expected = next(&ofs, &bys);
        prop_assert_eq!(&of_source(&index, &source), &expected);
        prop_assert_eq!(index.len(), expected.len(), "nothing of the old generation is left");
        for op in between {
            apply_op(&mut index, two, &c2, &op, &mut ofs, &mut bys);
            prop_assert_eq!(&of_source(&index, &source), &next(&ofs, &bys));
            prop_assert_eq!(index.len(), next(&ofs, &bys).len());
        }
        // Removing everything leaves nothing behind but the join's reason.
        for k in ofs.keys() {
            index.join_mut(two).expect("join").remove_of(k);
        }
        for k in bys.keys() {
            index.join_mut(two).expect("join").remove_by(k);
        }
        prop_assert_eq!((index.len(), index.key_count(), index.string_count(), index.source_count()), (0, 0, 1, 0));
        prop_assert!(index.remove_join(two));
        prop_assert_eq!(index.string_count(), 0);
    }
}

/// Of one object: its blockers, their count, whether it is in use, whether it was released,
/// and what it uses.
type PerObject = (BTreeSet<Relation>, usize, bool, bool, BTreeSet<Relation>);

/// Everything a reader of the index can see about `objects`: what the webhook decides on
/// (blockers, counts, "was released"), what the controller and the cycle search read (uses,
/// keys, sources, what leaves a namespace), and the totals.
#[derive(Debug, PartialEq)]
struct Seen {
    relations: BTreeSet<Relation>,
    len: usize,
    per_object: Vec<PerObject>,
    keys: BTreeSet<ObjectKey>,
    sources: BTreeSet<Source>,
    source_count: usize,
    holding: Vec<(usize, usize, BTreeSet<Relation>)>,
}

fn seen(index: &RelationIndex, objects: &[ObjectKey]) -> Seen {
    let set = |it: lien_core::Chain<'_>| it.map(|r| r.to_relation()).collect::<BTreeSet<_>>();
    Seen {
        relations: index.relations().map(|r| r.to_relation()).collect(),
        len: index.len(),
        per_object: objects
            .iter()
            .map(|k| {
                (
                    set(index.blockers(k)),
                    index.blocker_count(k),
                    index.is_in_use(k),
                    index.was_released(k),
                    set(index.uses_of(k)),
                )
            })
            .collect(),
        keys: index.keys().map(|k| k.to_key()).collect(),
        sources: index.sources().map(|s| s.to_source()).collect(),
        source_count: index.source_count(),
        holding: ["a", "b"]
            .iter()
            .map(|ns| {
                (
                    index.holding_count(ns),
                    index.holding_replay_count(ns),
                    index.holding(ns).map(|r| r.to_relation()).collect(),
                )
            })
            .collect(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A rule deleted in steps (`remove_join_in_steps` + `delete_in_steps`, then
    /// `release_step(budget)` with the write lock released between steps), caught with its
    /// next generation anywhere in its attach (not started, half linked, switched with the old
    /// one being removed), beside a Usage holding some of the same objects: from the first step
    /// on, every reader sees exactly what it sees after a deletion at once (the rule's
    /// relations block nothing, a Usage's still do), and at the end the index is the same —
    /// nothing of the rule, its joins or the steps left. The previous generation's join,
    /// removed in steps too, ends as one removed at once.
    #[test]
    fn a_rule_deleted_in_steps_ends_as_one_deleted_at_once(
        cluster in any::<bool>(),
        keyed in any::<bool>(),
        same_kind in any::<bool>(),
        first in proptest::collection::vec(op(), 0..30),
        used in proptest::collection::vec((0..3usize, 0..3usize, any::<bool>()), 0..4),
        attach_steps in 0..8usize,
        budget in 1..5usize,
    ) {
        let scope = if cluster { RuleScope::Cluster } else { RuleScope::SameNamespace };
        let c1 = config(scope, keyed, same_kind);
        let c2 = RuleConfig { reason: NEXT_REASON.to_owned(), ..c1.clone() };
        let mut objects: Vec<ObjectKey> = Vec::new();
        for gk in [&c1.of, &c1.by] {
            for ns in NAMESPACES {
                for name in NAMES {
                    objects.push(obj(gk, ns, name));
                }
            }
        }
        let app = ObjectKey::new("apps", "Deployment", Some("b"), "app");
        objects.push(app.clone());

        // A Usage holding some of the rule's objects, which must keep holding them.
        let usage = Source::usage("b", "keeps");
        let usage_relations: Vec<Relation> = used
            .iter()
            .map(|&(n, m, by_side)| {
                let gk = if by_side { &c1.by } else { &c1.of };
                Relation::uses(usage.clone(), obj(gk, NAMESPACES[n], NAMES[m]), app.clone())
                    .with_replay(by_side)
            })
            .collect();
        let mut at_once = RelationIndex::new();
        at_once.apply(&usage, usage_relations).expect("valid");
        let (mut ofs, mut bys) = (State::new(), State::new());
        let one = at_once.add_join(c1.clone()).expect("room");
        for op in &first {
            apply_op(&mut at_once, one, &c1, op, &mut ofs, &mut bys);
        }
        at_once.join_mut(one).expect("join").attach().expect("room");
        let mut stepped = at_once.clone();

        // The next generation: the previous join goes, at once or in steps.
        prop_assert!(at_once.remove_join(one));
        prop_assert!(stepped.remove_join_in_steps(one));
        prop_assert_eq!(seen(&stepped, &objects), seen(&at_once, &objects));
        while !stepped.release_step(budget) {
            prop_assert_eq!(seen(&stepped, &objects), seen(&at_once, &objects));
        }
        prop_assert_eq!(
            (stepped.key_count(), stepped.string_count()),
            (at_once.key_count(), at_once.string_count()),
            "the previous join is all released"
        );
        // Its memory is handed over to be freed outside the lock, once.
        prop_assert_eq!(stepped.take_garbage().len(), 1);
        prop_assert!(stepped.take_garbage().is_empty());
        prop_assert!(at_once.take_garbage().is_empty());
        let mut ids = Vec::new();
        for index in [&mut at_once, &mut stepped] {
            let two = index.add_join(c2.clone()).expect("room");
            // Room for the objects (a capacity hint: it changes nothing else).
            index.join_mut(two).expect("join").reserve(ofs.len(), bys.len());
            for (k, (uid, ks, ok)) in &ofs {
                let mut join = index.join_mut(two).expect("join");
                if *ok {
                    join.upsert_of(k, Some(uid), Some(ks.iter().cloned().collect())).expect("kind");
                } else {
                    join.error_of(k, Some(uid)).expect("kind");
                }
            }
            for (k, (uid, ks, when)) in &bys {
                let ks = Some(ks.iter().cloned().collect());
                index.join_mut(two).expect("join").upsert_by(k, Some(uid), ks, *when).expect("kind");
            }
            for _ in 0..attach_steps {
                let step = index.join_mut(two).expect("join").attach_step(budget).expect("room");
                if step != AttachStep::More {
                    break;
                }
            }
            ids.push(two);
        }
        prop_assert_eq!(seen(&stepped, &objects), seen(&at_once, &objects));

        // The rule is deleted.
        prop_assert!(at_once.remove_join(ids[0]));
        at_once.delete(&c1.source);
        prop_assert!(stepped.remove_join_in_steps(ids[1]));
        stepped.delete_in_steps(&c1.source);
        let after = seen(&at_once, &objects);
        prop_assert!(after.relations.iter().all(|r| r.source == usage));
        prop_assert_eq!(&seen(&stepped, &objects), &after);
        while !stepped.release_step(budget) {
            prop_assert_eq!(&seen(&stepped, &objects), &after);
        }
        prop_assert_eq!(&seen(&stepped, &objects), &after);
        prop_assert!(!stepped.has_pending_release());
        prop_assert_eq!(stepped.take_garbage().len(), 1);
        for index in [&mut at_once, &mut stepped] {
            index.delete(&usage);
        }
        prop_assert_eq!(
            (stepped.len(), stepped.key_count(), stepped.string_count(), stepped.source_count()),
            (0, 0, 0, 0)
        );
        prop_assert_eq!(
            (at_once.len(), at_once.key_count(), at_once.string_count(), at_once.source_count()),
            (0, 0, 0, 0)
        );
    }
}

#[test]
fn a_join_removed_or_detached_mid_attach_leaves_the_previous_generation_whole() {
    let c = config(RuleScope::Cluster, false, false);
    let mut index = RelationIndex::new();
    let one = index.add_join(c.clone()).expect("room");
    for i in 0..4 {
        let of = obj(&c.of, Some("a"), &format!("pool-{i}"));
        let by = obj(&c.by, Some("a"), &format!("nfs-{i}"));
        let mut j = index.join_mut(one).expect("join");
        j.upsert_of(&of, Some(U1), None).expect("kind");
        j.upsert_by(&by, Some(U2), None, true).expect("kind");
    }
    index.join_mut(one).expect("join").attach().expect("room");
    let old = of_source(&index, &c.source);
    assert_eq!(old.len(), 16);
    for cut in ["remove_join", "delete the source"] {
        let next = RuleConfig {
            reason: NEXT_REASON.to_owned(),
            ..c.clone()
        };
        let two = index.add_join(next).expect("room");
        for i in 0..4 {
            let of = obj(&c.of, Some("a"), &format!("pool-{i}"));
            let by = obj(&c.by, Some("b"), &format!("nfs-{i}"));
            let mut j = index.join_mut(two).expect("join");
            j.upsert_of(&of, Some(U1), None).expect("kind");
            j.upsert_by(&by, Some(U2), None, true).expect("kind");
        }
        let step = index
            .join_mut(two)
            .expect("join")
            .attach_step(5)
            .expect("room");
        assert_eq!(step, AttachStep::More);
        assert!(
            index.len() > old.len(),
            "the step's relations are in the index"
        );
        match cut {
            "remove_join" => {
                assert!(index.remove_join(two));
                assert_eq!(of_source(&index, &c.source), old, "{cut}");
                assert_eq!(index.len(), old.len(), "{cut}: the step's relations went");
            }
            _ => {
                assert_eq!(index.delete(&c.source), 16);
                assert_eq!(index.len(), 0, "{cut}: the step's relations went too");
                assert!(!index.join(two).expect("join").is_attached());
                assert!(index.remove_join(two));
            }
        }
    }
    assert!(index.remove_join(one));
    assert_eq!((index.len(), index.source_count()), (0, 0));
}

// ----- each rule on its own ------------------------------------------------------------------

const U1: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";
const U2: &str = "1f8fad5b-d9cb-469f-a165-70867728950e";

#[test]
fn a_relation_needs_both_objects_present() {
    let c = config(RuleScope::SameNamespace, true, false);
    let mut j = J::new(c.clone());
    let pool = obj(&c.of, Some("rook"), "replicapool");
    let nfs = obj(&c.by, Some("rook"), "nfs");
    assert!(
        j.upsert_by(&nfs, Some(U2), keys(&["replicapool"]), true)
            .expect("right kind")
            .is_empty()
    );
    let d = j
        .upsert_of(&pool, Some(U1), keys(&["replicapool"]))
        .expect("right kind");
    assert_eq!(d.added, vec![rel(&c, &pool, &nfs, (U1, U2))]);
    assert_eq!(j.len(), 1);
    let d = j.remove_of(&pool);
    assert_eq!(d.removed, vec![rel(&c, &pool, &nfs, (U1, U2))]);
    assert!(j.is_empty());
}

#[test]
fn a_by_object_counts_until_removed() {
    // There is no "deleting" state here: the caller removes the object once it is gone.
    let c = config(RuleScope::SameNamespace, true, false);
    let mut j = J::new(c.clone());
    let pool = obj(&c.of, Some("rook"), "p");
    let nfs = obj(&c.by, Some("rook"), "nfs");
    j.upsert_of(&pool, Some(U1), keys(&["p"]))
        .expect("right kind");
    j.upsert_by(&nfs, Some(U2), keys(&["p"]), true)
        .expect("right kind");
    assert!(
        j.upsert_by(&nfs, Some(U2), keys(&["p"]), true)
            .expect("right kind")
            .is_empty(),
        "an unchanged update changes nothing"
    );
    assert_eq!(j.len(), 1);
    assert_eq!(j.remove_by(&nfs).removed.len(), 1);
    assert!(j.remove_by(&nfs).is_empty(), "removing twice is harmless");
}

#[test]
fn same_namespace_scope_needs_the_same_namespace() {
    let c = config(RuleScope::SameNamespace, true, false);
    let mut j = J::new(c.clone());
    j.upsert_of(&obj(&c.of, Some("a"), "p"), Some(U1), keys(&["p"]))
        .expect("right kind");
    let d = j
        .upsert_by(&obj(&c.by, Some("b"), "nfs"), Some(U2), keys(&["p"]), true)
        .expect("right kind");
    assert!(d.is_empty());
}

#[test]
fn same_namespace_scope_ignores_cluster_scoped_objects() {
    // A cluster-scoped object has no namespace to share: it takes part in no relation.
    let c = config(RuleScope::SameNamespace, false, false);
    let mut j = J::new(c.clone());
    j.upsert_of(&obj(&c.of, None, "p"), Some(U1), None)
        .expect("right kind");
    assert!(
        j.upsert_by(&obj(&c.by, None, "nfs"), Some(U2), None, true)
            .expect("right kind")
            .is_empty()
    );
    assert!(
        j.upsert_by(&obj(&c.by, Some("a"), "nfs"), Some(U2), None, true)
            .expect("right kind")
            .is_empty()
    );
}

#[test]
fn cluster_scope_relates_across_namespaces_and_cluster_scoped_objects() {
    let c = config(RuleScope::Cluster, true, false);
    let mut j = J::new(c.clone());
    let store = obj(&c.of, Some("rook"), "store");
    let bucket = obj(&c.by, None, "bucket");
    let other = obj(&c.by, Some("apps"), "user");
    j.upsert_of(&store, Some(U1), keys(&["rgw-store"]))
        .expect("right kind");
    assert_eq!(
        j.upsert_by(&bucket, Some(U2), keys(&["rgw-store"]), true)
            .expect("right kind")
            .added
            .len(),
        1
    );
    assert_eq!(
        j.upsert_by(&other, Some(U2), keys(&["rgw-store"]), true)
            .expect("right kind")
            .added
            .len(),
        1
    );
    assert_eq!(j.len(), 2);
}

#[test]
fn when_gates_the_by_object_and_follows_updates() {
    let c = config(RuleScope::SameNamespace, false, false);
    let mut j = J::new(c.clone());
    let pool = obj(&c.of, Some("rook"), "p");
    let mirror = obj(&c.by, Some("rook"), "m");
    j.upsert_of(&pool, Some(U1), None).expect("right kind");
    assert!(
        j.upsert_by(&mirror, Some(U2), None, false)
            .expect("right kind")
            .is_empty()
    );
    let on = j
        .upsert_by(&mirror, Some(U2), None, true)
        .expect("right kind");
    assert_eq!(on.added, vec![rel(&c, &pool, &mirror, (U1, U2))]);
    let off = j
        .upsert_by(&mirror, Some(U2), None, false)
        .expect("right kind");
    assert_eq!(
        (off.added, off.removed),
        (vec![], vec![rel(&c, &pool, &mirror, (U1, U2))])
    );
}

#[test]
fn keys_must_intersect_and_a_changed_key_moves_the_hold() {
    let c = config(RuleScope::SameNamespace, true, false);
    let mut j = J::new(c.clone());
    let p1 = obj(&c.of, Some("rook"), "p1");
    let p2 = obj(&c.of, Some("rook"), "p2");
    let nfs = obj(&c.by, Some("rook"), "nfs");
    j.upsert_of(&p1, Some(U1), keys(&["pool-1"]))
        .expect("right kind");
    j.upsert_of(&p2, Some(U1), keys(&["pool-2", "pool-2b"]))
        .expect("right kind");
    let d = j
        .upsert_by(&nfs, Some(U2), keys(&["pool-1"]), true)
        .expect("right kind");
    assert_eq!(d.added, vec![rel(&c, &p1, &nfs, (U1, U2))]);
    let moved = j
        .upsert_by(&nfs, Some(U2), keys(&["pool-2b"]), true)
        .expect("right kind");
    assert_eq!(moved.removed, vec![rel(&c, &p1, &nfs, (U1, U2))]);
    assert_eq!(moved.added, vec![rel(&c, &p2, &nfs, (U1, U2))]);
    let none = j
        .upsert_by(&nfs, Some(U2), keys(&["elsewhere"]), true)
        .expect("right kind");
    assert_eq!(none.removed.len(), 1);
    assert!(j.is_empty());
}

#[test]
fn several_shared_keys_make_one_relation() {
    let c = config(RuleScope::SameNamespace, true, false);
    let mut j = J::new(c.clone());
    j.upsert_of(
        &obj(&c.of, Some("r"), "fs"),
        Some(U1),
        keys(&["data", "meta"]),
    )
    .expect("right kind");
    let d = j
        .upsert_by(
            &obj(&c.by, Some("r"), "pv"),
            Some(U2),
            keys(&["meta", "data", "data"]),
            true,
        )
        .expect("right kind");
    assert_eq!(d.added.len(), 1);
    assert_eq!(j.len(), 1);
}

#[test]
fn without_keys_every_by_in_scope_uses_every_of_in_scope() {
    let c = config(RuleScope::SameNamespace, false, false);
    let mut j = J::new(c.clone());
    for name in ["c1", "c2"] {
        j.upsert_of(&obj(&c.of, Some("rook"), name), Some(U1), None)
            .expect("right kind");
    }
    j.upsert_of(&obj(&c.of, Some("other"), "c3"), Some(U1), None)
        .expect("right kind");
    // Keys handed to a rule without keys are ignored.
    let d = j
        .upsert_by(
            &obj(&c.by, Some("rook"), "nfs"),
            Some(U2),
            keys(&["zzz"]),
            true,
        )
        .expect("right kind");
    assert_eq!(d.added.len(), 2);
}

#[test]
fn a_keyed_rule_treats_no_keys_as_none() {
    let c = config(RuleScope::SameNamespace, true, false);
    let mut j = J::new(c.clone());
    j.upsert_of(&obj(&c.of, Some("r"), "p"), Some(U1), None)
        .expect("right kind");
    assert!(
        j.upsert_by(&obj(&c.by, Some("r"), "n"), Some(U2), None, true)
            .expect("right kind")
            .is_empty()
    );
}

#[test]
fn an_object_never_uses_itself() {
    let c = config(RuleScope::SameNamespace, false, true);
    let mut j = J::new(c.clone());
    let x = obj(&c.of, Some("rook"), "x");
    let y = obj(&c.of, Some("rook"), "y");
    j.upsert_of(&x, Some(U1), None).expect("right kind");
    assert!(
        j.upsert_by(&x, Some(U1), None, true)
            .expect("right kind")
            .is_empty()
    );
    j.upsert_of(&y, Some(U2), None).expect("right kind");
    let d = j.upsert_by(&y, Some(U2), None, true).expect("right kind");
    assert_eq!(d.added, vec![rel(&c, &x, &y, (U1, U2))]);
    assert_eq!(
        sorted(j.relations()),
        sorted(vec![rel(&c, &x, &y, (U1, U2)), rel(&c, &y, &x, (U2, U1))])
    );
}

#[test]
fn a_recreated_object_moves_its_relations_to_the_new_uid() {
    let c = config(RuleScope::SameNamespace, false, false);
    let mut j = J::new(c.clone());
    let pool = obj(&c.of, Some("r"), "p");
    let nfs = obj(&c.by, Some("r"), "n");
    j.upsert_of(&pool, Some(U1), None).expect("right kind");
    j.upsert_by(&nfs, Some(U1), None, true).expect("right kind");
    let d = j.upsert_of(&pool, Some(U2), None).expect("right kind");
    assert_eq!(d.removed, vec![rel(&c, &pool, &nfs, (U1, U1))]);
    assert_eq!(d.added, vec![rel(&c, &pool, &nfs, (U2, U1))]);
}

#[test]
fn an_evaluation_error_keeps_the_last_keys_and_is_counted() {
    let c = config(RuleScope::SameNamespace, true, false);
    let mut j = J::new(c.clone());
    let pool = obj(&c.of, Some("r"), "p");
    let nfs = obj(&c.by, Some("r"), "n");
    let fresh = obj(&c.by, Some("r"), "fresh");
    j.upsert_of(&pool, Some(U1), keys(&["p"]))
        .expect("right kind");
    j.upsert_by(&nfs, Some(U2), keys(&["p"]), true)
        .expect("right kind");
    assert!(
        j.error_by(&nfs, Some(U2)).expect("right kind").is_empty(),
        "a failed evaluation releases nothing"
    );
    assert!(
        j.error_by(&fresh, Some(U2)).expect("right kind").is_empty(),
        "a new object that fails joins nothing"
    );
    assert_eq!((j.len(), j.error_count()), (1, 2));
    j.upsert_by(&nfs, Some(U2), keys(&["p"]), true)
        .expect("right kind");
    j.remove_by(&fresh);
    assert_eq!((j.len(), j.error_count()), (1, 0));
}

#[test]
fn objects_of_the_wrong_kind_are_refused() {
    let c = config(RuleScope::SameNamespace, true, false);
    let mut j = J::new(c.clone());
    let err = j
        .upsert_of(&obj(&c.by, Some("r"), "n"), None, None)
        .expect_err("wrong kind");
    assert!(
        matches!(err, JoinError::WrongKind { side: "of", .. }),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "ceph.rook.io/CephNFS r/n is not a CephBlockPool.ceph.rook.io, the rule's `of` kind"
    );
    assert!(j.remove_by(&obj(&c.of, Some("r"), "p")).is_empty());
}

#[test]
fn memory_is_released_with_the_objects() {
    let c = config(RuleScope::SameNamespace, true, false);
    let mut j = J::new(c.clone());
    let empty = j.index.heap_bytes();
    let mut relations = 0;
    // Straight through the join (the harness diffs the index on every update: quadratic here).
    let mut join = j.index.join_mut(j.id).expect("join");
    for i in 0..100 {
        let pool = obj(&c.of, Some("r"), &format!("p{i}"));
        relations += join
            .upsert_of(&pool, Some(U1), keys(&[&format!("p{i}")]))
            .expect("right kind")
            .added;
        for n in 0..10 {
            let pv = obj(&c.by, Some("r"), &format!("pv-{i}-{n}"));
            relations += join
                .upsert_by(&pv, Some(U2), keys(&[&format!("p{i}")]), true)
                .expect("right kind")
                .added;
        }
    }
    assert_eq!(
        (relations, j.len(), j.relations().len(), j.index.len()),
        (1000, 1000, 1000, 1000)
    );
    assert!(j.index.heap_bytes() > empty);
    let mut join = j.index.join_mut(j.id).expect("join");
    for i in 0..100 {
        join.remove_of(&obj(&c.of, Some("r"), &format!("p{i}")));
        for n in 0..10 {
            join.remove_by(&obj(&c.by, Some("r"), &format!("pv-{i}-{n}")));
        }
    }
    assert_eq!(j.index.len(), 0);
    assert_eq!(
        (j.len(), j.object_counts(), j.index.key_count()),
        (0, (0, 0), 0)
    );
    // The reason is all that is left, until the join goes.
    assert_eq!(j.index.string_count(), 1);
    assert!(j.index.remove_join(j.id));
    assert_eq!(j.index.string_count(), 0);
}

#[test]
fn a_rule_deleted_while_its_previous_generation_is_being_removed_leaves_nothing() {
    let c = config(RuleScope::Cluster, false, false);
    let feed = |index: &mut RelationIndex, id: JoinId, by_ns: &str| {
        for i in 0..4 {
            let of = obj(&c.of, Some("a"), &format!("pool-{i}"));
            let by = obj(&c.by, Some(by_ns), &format!("nfs-{i}"));
            let mut j = index.join_mut(id).expect("join");
            j.upsert_of(&of, Some(U1), None).expect("kind");
            j.upsert_by(&by, Some(U2), None, true).expect("kind");
        }
    };
    let mut index = RelationIndex::new();
    let one = index.add_join(c.clone()).expect("room");
    feed(&mut index, one, "a");
    index.join_mut(one).expect("join").attach().expect("room");
    let old = of_source(&index, &c.source);
    assert!(index.remove_join(one));
    let next = RuleConfig {
        reason: NEXT_REASON.to_owned(),
        ..c.clone()
    };
    let two = index.add_join(next).expect("room");
    feed(&mut index, two, "b");
    // Each `by` object has 4 partners: steps of 5 link 8, 8, and switch; the old 16 remain.
    while of_source(&index, &c.source) == old {
        let step = index.join_mut(two).expect("join").attach_step(5);
        assert_eq!(step, Ok(AttachStep::More));
    }
    let now = of_source(&index, &c.source);
    assert_eq!(now.len(), 16);
    assert!(now.is_disjoint(&old), "switched to the new generation");
    let step = index.join_mut(two).expect("join").attach_step(5);
    assert_eq!(step, Ok(AttachStep::More));
    assert_eq!(
        index.len(),
        16 + 11,
        "11 of the old generation still to remove"
    );
    assert_eq!(index.delete(&c.source), 16);
    assert_eq!(
        index.len(),
        0,
        "the old generation's rest went with the rule"
    );
    assert!(index.remove_join(two));
    assert_eq!((index.key_count(), index.string_count()), (0, 0));
}
