//! `RelationIndex::apply_delta` against `apply` of the whole set: after any sequence of deltas
//! the index answers every question as if the source's current set had been applied at once.

use std::collections::BTreeSet;

use lien_core::{
    GroupKind, IndexError, ObjectKey, Relation, RelationIndex, RuleConfig, RuleScope, Source,
};
use proptest::prelude::*;

const UUID: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

fn key(i: usize) -> ObjectKey {
    let (kind, ns) = [
        ("Pool", Some("r")),
        ("Pool", None),
        ("PV", None),
        ("PV", Some("r")),
    ][i % 4];
    ObjectKey::new("example.io", kind, ns, format!("o{}", i / 4))
}

fn rule() -> Source {
    Source::rule("rule")
}

/// A small universe of relations of one source, so that sets overlap often.
fn relation() -> impl Strategy<Value = Relation> {
    (
        0..6usize,
        prop::option::of(0..6usize),
        prop::option::of(prop_oneof![Just("why"), Just("because")]),
        any::<bool>(),
        prop_oneof![Just(None), Just(Some(UUID)), Just(Some("uid-x"))],
        prop_oneof![Just(None), Just(Some(UUID)), Just(Some("uid-y"))],
    )
        .prop_map(|(of, by, reason, replay, of_uid, by_uid)| {
            let mut r = match by {
                Some(by) => Relation::uses(rule(), key(of), key(by)),
                None => Relation::protects(rule(), key(of), "protected"),
            };
            if let Some(reason) = reason {
                r = r.with_reason(reason);
            }
            r.with_replay(replay).with_uids(of_uid, by_uid)
        })
}

/// Everything the index answers about the universe, as owned values.
fn answers(idx: &RelationIndex) -> Vec<Vec<Relation>> {
    let mut out = Vec::new();
    for i in 0..24 {
        let k = key(i);
        let mut b: Vec<Relation> = idx.blockers(&k).map(|r| r.to_relation()).collect();
        let mut u: Vec<Relation> = idx.uses_of(&k).map(|r| r.to_relation()).collect();
        b.sort();
        u.sort();
        assert_eq!(idx.blocker_count(&k), b.len());
        out.push(b);
        out.push(u);
    }
    let mut all: Vec<Relation> = idx
        .relations_of_source(&rule())
        .map(|r| r.to_relation())
        .collect();
    all.sort();
    out.push(all);
    out
}

fn counts(idx: &RelationIndex) -> (usize, usize, usize, usize, usize) {
    (
        idx.len(),
        idx.source_len(&rule()),
        idx.source_count(),
        idx.key_count(),
        idx.string_count(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn deltas_answer_like_a_full_apply(
        sets in proptest::collection::vec(proptest::collection::btree_set(relation(), 0..10), 1..12),
    ) {
        // Another source shares keys and strings, and must be left alone.
        let other = Source::cluster_usage("other");
        let keep = Relation::uses(other.clone(), key(0), key(2)).with_reason("why");
        let mut incremental = RelationIndex::new();
        incremental.apply(&other, [keep.clone()]).expect("valid");
        let mut current: BTreeSet<Relation> = BTreeSet::new();
        for next in sets {
            let added: Vec<Relation> = next.difference(&current).cloned().collect();
            let removed: Vec<Relation> = current.difference(&next).cloned().collect();
            let len = incremental.apply_delta(&rule(), added, removed).expect("valid");
            prop_assert_eq!(len, next.len());
            let mut full = RelationIndex::new();
            full.apply(&other, [keep.clone()]).expect("valid");
            full.apply(&rule(), next.iter().cloned()).expect("valid");
            prop_assert_eq!(answers(&incremental), answers(&full));
            prop_assert_eq!(counts(&incremental), counts(&full));
            current = next;
        }
        // Removing everything frees every key and string the source alone held.
        incremental.apply_delta(&rule(), [], current).expect("valid");
        let mut only_other = RelationIndex::new();
        only_other.apply(&other, [keep]).expect("valid");
        prop_assert_eq!(counts(&incremental), counts(&only_other));
    }

    /// The controller's path: an attached join, updated per object, keeps the index equal to
    /// `apply` of its `relations()`; once the join and its source go, nothing is left.
    #[test]
    fn an_attached_join_keeps_the_index_in_step(
        ops in proptest::collection::vec((0..4usize, 0..2usize, 0..3usize, 0..3usize, any::<bool>()), 1..40),
    ) {
        let config = RuleConfig {
            source: rule(),
            of: GroupKind::new("example.io", "Pool"),
            by: GroupKind::new("example.io", "PV"),
            scope: RuleScope::SameNamespace,
            keyed: true,
            reason: "stores data in it".to_owned(),
            replay: true,
            warn: false,
        };
        let mut idx = RelationIndex::new();
        let id = idx.add_join(config).expect("room");
        idx.join_mut(id).expect("join").attach().expect("room");
        for (op, name, k, uid, when) in ops {
            let uid = Some(["u1", "u2", UUID][uid]);
            let keys = Some(vec![format!("k{k}")]);
            let of = ObjectKey::new("example.io", "Pool", Some("r"), format!("p{name}"));
            let by = ObjectKey::new("example.io", "PV", Some("r"), format!("v{name}"));
            let mut join = idx.join_mut(id).expect("join");
            match op {
                0 => drop(join.upsert_of(&of, uid, keys).expect("kind")),
                1 => drop(join.upsert_by(&by, uid, keys, when).expect("kind")),
                2 => drop(join.remove_of(&of)),
                _ => drop(join.remove_by(&by)),
            }
            let mut full = RelationIndex::new();
            let relations: Vec<Relation> = idx.join(id).expect("join").relations().collect();
            full.apply(&rule(), relations).expect("valid");
            prop_assert_eq!(answers(&idx), answers(&full));
            // Keys and strings differ: the join also holds objects that have no relation.
            let (a, b) = (counts(&idx), counts(&full));
            prop_assert_eq!((a.0, a.1, a.2), (b.0, b.1, b.2));
        }
        prop_assert!(idx.remove_join(id));
        idx.delete(&rule());
        prop_assert_eq!(counts(&idx), (0, 0, 0, 0, 0));
    }
}

#[test]
fn apply_delta_validates_like_apply() {
    let mut idx = RelationIndex::new();
    let wrong = Relation::uses(Source::rule("other"), key(0), key(2));
    let err = idx.apply_delta(&rule(), [], [wrong]);
    assert!(
        matches!(err, Err(IndexError::SourceMismatch { .. })),
        "{err:?}"
    );
    let mut bare = Relation::protects(rule(), key(0), "x");
    bare.reason = None;
    assert!(matches!(
        idx.apply_delta(&rule(), [bare], []),
        Err(IndexError::MissingReason { .. })
    ));
    assert!(idx.is_empty());
}

#[test]
fn apply_delta_removes_exactly_the_relation_named() {
    let mut idx = RelationIndex::new();
    let a = Relation::uses(rule(), key(0), key(2)).with_uids(Some(UUID), Some("u"));
    let b = Relation::uses(rule(), key(4), key(2)).with_uids(Some(UUID), Some("u"));
    assert_eq!(idx.apply_delta(&rule(), [a.clone(), b.clone()], []), Ok(2));
    // Another incarnation of `a` (different UID) is not `a`.
    let stale = a.clone().with_uids(Some(UUID), Some("older"));
    assert_eq!(idx.apply_delta(&rule(), [], [stale]), Ok(2));
    assert_eq!(idx.apply_delta(&rule(), [], [a]), Ok(1));
    assert_eq!(
        idx.uses_of(&key(2))
            .map(|r| r.to_relation())
            .collect::<Vec<_>>(),
        vec![b.clone()]
    );
    assert_eq!(idx.apply_delta(&rule(), [], [b]), Ok(0));
    assert_eq!(
        (idx.source_count(), idx.key_count(), idx.string_count()),
        (0, 0, 0)
    );
}
