//! `RelationIndex::was_released`: the index remembers which objects it saw lose their last
//! relation, so the webhook can tell a label it saw go stale from one it cannot explain.

use lien_core::{ObjectKey, RELEASED_CAPACITY, Relation, RelationIndex, Source};
use proptest::prelude::*;

fn pool(i: usize) -> ObjectKey {
    ObjectKey::new(
        "ceph.rook.io",
        "CephBlockPool",
        Some("rook"),
        format!("pool-{i}"),
    )
}

fn pv(i: usize) -> ObjectKey {
    ObjectKey::new("", "PersistentVolume", None, format!("pv-{i}"))
}

fn uses(pool_i: usize, pv_i: usize) -> Relation {
    Relation::uses(Source::rule("pvs"), pool(pool_i), pv(pv_i))
}

#[test]
fn an_object_is_released_when_its_last_relation_goes_and_not_once_protected_again() {
    let mut index = RelationIndex::new();
    let rule = Source::rule("pvs");
    index
        .apply_delta(&rule, [uses(0, 0), uses(0, 1)], [])
        .expect("applies");
    assert!(!index.was_released(&pool(0)), "never released");
    index.apply_delta(&rule, [], [uses(0, 0)]).expect("applies");
    assert!(!index.was_released(&pool(0)), "still used by pv-1");
    index.apply_delta(&rule, [], [uses(0, 1)]).expect("applies");
    assert!(index.was_released(&pool(0)), "its last relation went");
    assert!(
        !index.was_released(&pv(1)),
        "users are not released objects"
    );
    index.apply_delta(&rule, [uses(0, 2)], []).expect("applies");
    assert!(!index.was_released(&pool(0)), "protected again");
    index.delete(&rule);
    assert!(index.was_released(&pool(0)), "the source went");
}

#[test]
fn only_the_most_recent_releases_are_remembered() {
    let mut index = RelationIndex::new();
    let rule = Source::rule("pvs");
    let n = RELEASED_CAPACITY + 10;
    let all: Vec<Relation> = (0..n).map(|i| uses(i, i)).collect();
    index.apply_delta(&rule, all.clone(), []).expect("applies");
    for r in &all {
        index.apply_delta(&rule, [], [r.clone()]).expect("applies");
    }
    assert!(!index.was_released(&pool(0)), "the oldest are forgotten");
    assert!(index.was_released(&pool(n - 1)));
    let remembered = (0..n).filter(|&i| index.was_released(&pool(i))).count();
    assert_eq!(remembered, RELEASED_CAPACITY);
}

proptest! {
    /// Against a model: released ⇔ had a relation at some point, has none now, and its last
    /// loss is among the most recent releases (the capacity is not reached here).
    #[test]
    fn released_follows_a_model(ops in prop::collection::vec((0..4usize, 0..4usize, any::<bool>()), 1..60)) {
        let mut index = RelationIndex::new();
        let rule = Source::rule("pvs");
        let mut present = std::collections::BTreeSet::new();
        let mut ever = std::collections::BTreeSet::new();
        for (p, v, add) in ops {
            let r = uses(p, v);
            if add && present.insert((p, v)) {
                index.apply_delta(&rule, [r], []).expect("applies");
                ever.insert(p);
            } else if !add && present.remove(&(p, v)) {
                index.apply_delta(&rule, [], [r]).expect("applies");
            }
            for q in 0..4 {
                let used = present.iter().any(|&(pp, _)| pp == q);
                prop_assert_eq!(index.was_released(&pool(q)), ever.contains(&q) && !used);
            }
        }
    }
}
