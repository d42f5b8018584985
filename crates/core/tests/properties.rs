//! Property tests: the interned, linked-list index against a plain `Vec<Relation>` model.

use std::collections::{BTreeMap, BTreeSet};

use lien_core::{
    Decision, ObjectKey, Relation, RelationIndex, Source, decide_delete, deletion_order,
    find_cycles,
};
use proptest::prelude::*;

const UUIDS: [&str; 2] = [
    "0f8fad5b-d9cb-469f-a165-70867728950e",
    "7c9e6679-7425-40de-944b-e07fc1f90ae7",
];

/// A small universe so that operations collide often: 2 kinds × 2 scopes × 3 names.
fn key() -> impl Strategy<Value = ObjectKey> {
    (0..2usize, prop::option::of(Just("team-a")), 0..3usize).prop_map(|(kind, ns, name)| {
        let (group, kind) = [("eks.example.io", "Cluster"), ("", "Pod")][kind];
        ObjectKey::new(group, kind, ns, format!("obj-{name}"))
    })
}

fn source() -> impl Strategy<Value = Source> {
    prop_oneof![
        (0..2usize).prop_map(|i| Source::usage("team-a", format!("u{i}"))),
        Just(Source::cluster_usage("protect")),
        Just(Source::rule("rule")),
    ]
}

fn uid() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        (0..2usize).prop_map(|i| Some(UUIDS[i].to_owned())),
        Just(Some("custom-uid".to_owned())),
    ]
}

/// A relation without its source, which the operation fills in.
fn relation_for(source: Source) -> impl Strategy<Value = Relation> {
    (
        key(),
        prop::option::of(key()),
        prop::option::of(prop_oneof![Just("shared reason"), Just("other reason")]),
        any::<bool>(),
        uid(),
        uid(),
        any::<bool>(),
    )
        .prop_map(move |(of, by, reason, replay, of_uid, by_uid, warn)| {
            let reason = match (&by, reason) {
                // A protection must have a reason.
                (None, None) => Some("protected".to_owned()),
                (_, r) => r.map(str::to_owned),
            };
            Relation {
                of,
                by,
                source: source.clone(),
                reason,
                replay,
                warn,
                of_uid,
                by_uid,
            }
        })
}

fn relations() -> impl Strategy<Value = (Source, Vec<Relation>)> {
    source().prop_flat_map(|s| {
        (
            Just(s.clone()),
            prop::collection::vec(relation_for(s), 0..6),
        )
    })
}

#[derive(Debug, Clone)]
enum Op {
    Apply(Source, Vec<Relation>),
    Delete(Source),
    Reset(Vec<(Source, Vec<Relation>)>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => relations().prop_map(|(s, r)| Op::Apply(s, r)),
        2 => source().prop_map(Op::Delete),
        1 => prop::collection::vec(relations(), 0..3).prop_map(|all| {
            // One entry per source, as a fresh list would give.
            let map: BTreeMap<Source, Vec<Relation>> = all.into_iter().collect();
            Op::Reset(map.into_iter().collect())
        }),
    ]
}

/// The obvious implementation.
#[derive(Debug, Default, Clone)]
struct Model(Vec<Relation>);

impl Model {
    fn run(&mut self, op: &Op) {
        match op {
            Op::Apply(s, rels) => {
                self.0.retain(|r| r.source != *s);
                self.0.extend(rels.iter().cloned());
            }
            Op::Delete(s) => self.0.retain(|r| r.source != *s),
            Op::Reset(all) => self.0 = all.iter().flat_map(|(_, r)| r.iter().cloned()).collect(),
        }
    }
}

fn run(index: &mut RelationIndex, op: &Op) {
    match op {
        Op::Apply(s, rels) => {
            index
                .apply(s, rels.clone())
                .expect("generated relations are valid");
        }
        Op::Delete(s) => {
            index.delete(s);
        }
        Op::Reset(all) => index
            .reset(all.clone())
            .expect("generated relations are valid"),
    }
}

fn sorted(v: impl IntoIterator<Item = Relation>) -> Vec<Relation> {
    let mut v: Vec<Relation> = v.into_iter().collect();
    v.sort();
    v
}

/// Everything observable about an index, canonically ordered.
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    relations: Vec<Relation>,
    sources: BTreeSet<Source>,
    keys: BTreeSet<ObjectKey>,
    counts: (usize, usize, usize, usize),
}

fn snapshot(index: &RelationIndex) -> Snapshot {
    Snapshot {
        relations: sorted(index.relations().map(|r| r.to_relation())),
        sources: index.sources().map(|s| s.to_source()).collect(),
        keys: index.keys().map(|k| k.to_key()).collect(),
        counts: (
            index.len(),
            index.source_count(),
            index.key_count(),
            index.string_count(),
        ),
    }
}

fn universe() -> Vec<ObjectKey> {
    let mut keys = Vec::new();
    for (group, kind) in [("eks.example.io", "Cluster"), ("", "Pod")] {
        for ns in [None, Some("team-a")] {
            for name in 0..3 {
                keys.push(ObjectKey::new(group, kind, ns, format!("obj-{name}")));
            }
        }
    }
    keys
}

fn check_against_model(index: &RelationIndex, model: &Model) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        sorted(index.relations().map(|r| r.to_relation())),
        sorted(model.0.clone())
    );
    prop_assert_eq!(index.len(), model.0.len());
    let sources: BTreeSet<Source> = model.0.iter().map(|r| r.source.clone()).collect();
    prop_assert_eq!(index.source_count(), sources.len());
    let keys: BTreeSet<&ObjectKey> = model
        .0
        .iter()
        .flat_map(|r| std::iter::once(&r.of).chain(r.by.as_ref()))
        .collect();
    prop_assert_eq!(index.key_count(), keys.len());
    for s in &sources {
        prop_assert_eq!(
            sorted(index.relations_of_source(s).map(|r| r.to_relation())),
            sorted(model.0.iter().filter(|r| r.source == *s).cloned())
        );
    }
    for k in universe() {
        let of: Vec<Relation> = model.0.iter().filter(|r| r.of == k).cloned().collect();
        prop_assert_eq!(index.blocker_count(&k), of.len());
        prop_assert_eq!(index.is_in_use(&k), !of.is_empty());
        prop_assert_eq!(
            sorted(index.blockers(&k).map(|r| r.to_relation())),
            sorted(of.clone())
        );
        prop_assert_eq!(
            sorted(index.uses_of(&k).map(|r| r.to_relation())),
            sorted(
                model
                    .0
                    .iter()
                    .filter(|r| r.by.as_ref() == Some(&k))
                    .cloned()
            )
        );
        for uid in [None, Some(UUIDS[0]), Some("custom-uid")] {
            // Model decision: a relation blocks unless both UIDs are known and differ; those
            // in warn mode only when nothing else does, and then only warn.
            type Seen = (Option<ObjectKey>, Source, Option<String>, bool);
            let applicable: Vec<&Relation> = of
                .iter()
                .filter(|r| !matches!((uid, &r.of_uid), (Some(u), Some(o)) if u != o))
                .collect();
            let enforced: Vec<&Relation> = applicable.iter().copied().filter(|r| !r.warn).collect();
            let (warned, listed) = if enforced.is_empty() {
                (!applicable.is_empty(), applicable)
            } else {
                (false, enforced)
            };
            let mut expected: Vec<Seen> = listed
                .iter()
                .map(|r| (r.by.clone(), r.source.clone(), r.reason.clone(), r.replay))
                .collect();
            expected.sort();
            let expected = (warned, expected);
            let seen = |blockers: Vec<lien_core::Blocker>| -> Vec<Seen> {
                blockers
                    .into_iter()
                    .map(|b| {
                        (
                            b.by,
                            Source::clone(&b.source),
                            b.reason.as_deref().map(str::to_owned),
                            b.replay,
                        )
                    })
                    .collect()
            };
            let got: (bool, Vec<Seen>) = match decide_delete(index, &k, uid) {
                Decision::Allowed => (false, vec![]),
                Decision::Warned { object, blockers } => {
                    prop_assert_eq!(&object, &k);
                    prop_assert!(!blockers.is_empty());
                    (true, seen(blockers))
                }
                Decision::Denied { object, blockers } => {
                    prop_assert_eq!(&object, &k);
                    prop_assert!(!blockers.is_empty());
                    (false, seen(blockers))
                }
            };
            prop_assert_eq!(got, expected, "decision for {} uid {:?}", k, uid);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn index_agrees_with_model(ops in prop::collection::vec(op(), 0..40)) {
        let mut index = RelationIndex::new();
        let mut model = Model::default();
        for op in &ops {
            run(&mut index, op);
            model.run(op);
            check_against_model(&index, &model)?;
        }
    }

    #[test]
    fn apply_then_delete_of_a_new_source_restores_the_index(
        ops in prop::collection::vec(op(), 0..20),
        rels in prop::collection::vec(relation_for(Source::usage("fresh", "new")), 0..8),
    ) {
        let mut index = RelationIndex::new();
        for op in &ops {
            run(&mut index, op);
        }
        let before = snapshot(&index);
        let fresh = Source::usage("fresh", "new");
        index.apply(&fresh, rels).expect("valid");
        index.delete(&fresh);
        // Includes the string count: nothing interned for the source is leaked.
        prop_assert_eq!(snapshot(&index), before);
    }

    #[test]
    fn apply_is_idempotent(
        ops in prop::collection::vec(op(), 0..20),
        (s, rels) in relations(),
    ) {
        let mut index = RelationIndex::new();
        for op in &ops {
            run(&mut index, op);
        }
        index.apply(&s, rels.clone()).expect("valid");
        let once = snapshot(&index);
        index.apply(&s, rels).expect("valid");
        prop_assert_eq!(snapshot(&index), once);
    }

    #[test]
    fn every_blocker_is_a_real_relation(
        ops in prop::collection::vec(op(), 0..30),
        uid in uid(),
    ) {
        let mut index = RelationIndex::new();
        for op in &ops {
            run(&mut index, op);
        }
        let all: Vec<Relation> = index.relations().map(|r| r.to_relation()).collect();
        for k in universe() {
            for b in decide_delete(&index, &k, uid.as_deref()).blockers() {
                prop_assert!(all.iter().any(|r| r.of == k
                    && r.by == b.by
                    && r.source == *b.source
                    && r.reason.as_deref() == b.reason.as_deref()
                    && r.replay == b.replay));
            }
        }
    }

    #[test]
    fn deletion_order_never_deletes_before_users(
        edges in prop::collection::vec((0..12usize, 0..12usize), 0..30),
        targets in prop::collection::vec(0..14usize, 0..4),
    ) {
        let node = |i: usize| ObjectKey::new("example.io", "Thing", None, format!("n{i}"));
        let mut index = RelationIndex::new();
        for (i, (by, of)) in edges.iter().enumerate() {
            let s = Source::rule(format!("r{i}"));
            index.apply(&s, [Relation::uses(s.clone(), node(*of), node(*by))]).expect("valid");
        }
        let targets: Vec<ObjectKey> = targets.into_iter().map(node).collect();
        match deletion_order(&index, &targets) {
            Ok(waves) => {
                let wave_of: BTreeMap<&ObjectKey, usize> = waves
                    .iter()
                    .enumerate()
                    .flat_map(|(w, keys)| keys.iter().map(move |k| (k, w)))
                    .collect();
                prop_assert_eq!(wave_of.len(), waves.iter().map(Vec::len).sum::<usize>(), "no duplicates");
                for t in &targets {
                    prop_assert!(wave_of.contains_key(t), "target {} planned", t);
                }
                for w in &waves {
                    prop_assert!(!w.is_empty());
                    prop_assert!(w.windows(2).all(|p| p[0] < p[1]), "wave sorted");
                }
                for (k, &w) in &wave_of {
                    // Every user of a planned object is planned, in an earlier wave.
                    for r in index.blockers(k) {
                        let by = r.by().map(|b| b.to_key());
                        let by = by.as_ref().expect("only uses in this test");
                        let bw = wave_of.get(by).copied();
                        prop_assert!(bw.is_some_and(|bw| bw < w), "{} (wave {:?}) uses {} (wave {})", by, bw, k, w);
                    }
                }
            }
            Err(cycle) => {
                prop_assert!(!cycle.cycles.is_empty());
                let all = find_cycles(&index);
                for c in &cycle.cycles {
                    prop_assert!(all.contains(c), "reported cycle {:?} is a real one", c);
                }
            }
        }
        // find_cycles is empty exactly when the whole graph can be ordered.
        let everything: Vec<ObjectKey> = (0..12).map(node).collect();
        prop_assert_eq!(find_cycles(&index).is_empty(), deletion_order(&index, &everything).is_ok());
    }
}
