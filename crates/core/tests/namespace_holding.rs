//! `RelationIndex::holding*` ("which relations hold namespace X's deletion": a user outside, or
//! a protection)
//! against a brute-force scan of every relation, after any sequence of `apply`, `apply_delta`,
//! `delete` and `reset` over several sources of every kind.

use std::collections::BTreeSet;

use lien_core::{LIEN_GROUP, ObjectKey, Relation, RelationIndex, Source};
use proptest::prelude::*;

const NAMESPACES: [Option<&str>; 3] = [Some("a"), Some("b"), None];

/// A small universe of objects in namespaces `a`, `b` and at the cluster scope, one of them of
/// Lien's own group, so that relations cross, stay inside and leave namespaces often.
fn key(i: usize) -> ObjectKey {
    let ns = NAMESPACES[i % 3];
    let group = if i % 7 == 6 { LIEN_GROUP } else { "example.io" };
    ObjectKey::new(group, "Thing", ns, format!("o{}", i / 3 % 3))
}

fn sources() -> [Source; 5] {
    [
        Source::usage("a", "u"),
        Source::usage("b", "u"),
        Source::cluster_usage("c"),
        Source::rule("r"),
        Source::rule("s"),
    ]
}

fn relation(source: Source) -> impl Strategy<Value = Relation> + Clone {
    (0..14usize, prop::option::of(0..14usize), any::<bool>()).prop_map(move |(of, by, replay)| {
        let r = match by {
            Some(by) => Relation::uses(source.clone(), key(of), key(by)),
            None => Relation::protects(source.clone(), key(of), "kept"),
        };
        r.with_replay(replay)
    })
}

#[derive(Debug, Clone)]
enum Op {
    Apply(usize, Vec<Relation>),
    Delta(usize, Vec<Relation>, Vec<Relation>),
    Delete(usize),
    Reset,
}

fn op() -> impl Strategy<Value = Op> {
    (0..5usize).prop_flat_map(|s| {
        let rels = prop::collection::vec(relation(sources()[s].clone()), 0..6);
        prop_oneof![
            4 => rels.clone().prop_map(move |r| Op::Apply(s, r)),
            4 => (rels.clone(), rels).prop_map(move |(a, r)| Op::Delta(s, a, r)),
            1 => Just(Op::Delete(s)),
            1 => Just(Op::Reset),
        ]
    })
}

/// The definition, by brute force over every relation.
fn brute_force(idx: &RelationIndex, ns: &str) -> Vec<Relation> {
    let mut out: Vec<Relation> = idx
        .relations()
        .map(|r| r.to_relation())
        .filter(|r| {
            if r.of.group == LIEN_GROUP {
                return false;
            }
            match (&r.by, r.of.namespace.as_deref()) {
                // A user outside keeps the namespace Terminating.
                (Some(by), Some(of_ns)) => of_ns == ns && by.namespace.as_deref() != Some(ns),
                (Some(_), None) => false,
                // A protection has no user to go first.
                (None, Some(of_ns)) => of_ns == ns,
                // Nor has a protection of a cluster-scoped object by a Usage of the namespace,
                // which the namespace's deletion would take.
                (None, None) => {
                    matches!(&r.source, Source::Usage { namespace, .. } if namespace == ns)
                }
            }
        })
        .collect();
    out.sort();
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn holding_relations_equal_a_brute_force_scan(ops in prop::collection::vec(op(), 1..24)) {
        let mut idx = RelationIndex::new();
        for op in ops {
            match op {
                Op::Apply(s, rels) => {
                    idx.apply(&sources()[s], rels).expect("valid");
                }
                Op::Delta(s, added, removed) => {
                    idx.apply_delta(&sources()[s], added, removed).expect("valid");
                }
                Op::Delete(s) => {
                    idx.delete(&sources()[s]);
                }
                Op::Reset => {
                    let all: Vec<(Source, Vec<Relation>)> = sources()
                        .iter()
                        .map(|s| (s.clone(), idx.relations_of_source(s).map(|r| r.to_relation()).collect()))
                        .collect();
                    idx.reset(all).expect("valid");
                }
            }
            for ns in ["a", "b", "nowhere"] {
                let expected = brute_force(&idx, ns);
                let mut got: Vec<Relation> = idx.holding(ns).map(|r| r.to_relation()).collect();
                got.sort();
                // A relation is a multiset member: `apply` may add the same relation twice.
                prop_assert_eq!(&got, &expected, "namespace {}", ns);
                prop_assert_eq!(idx.holding_count(ns), expected.len());
                prop_assert_eq!(
                    idx.holding_replay_count(ns),
                    expected.iter().filter(|r| r.replay).count()
                );
                let distinct: BTreeSet<&Relation> = got.iter().collect();
                prop_assert!(distinct.len() <= got.len());
            }
        }
    }
}

#[test]
fn a_user_inside_the_namespace_does_not_hold_it_and_a_protection_does() {
    let mut idx = RelationIndex::new();
    let cm = |ns: &str, name: &str| ObjectKey::new("", "ConfigMap", Some(ns), name);
    let pv = ObjectKey::new("", "PersistentVolume", None, "pv-1");
    let rule = Source::rule("r");
    idx.apply(
        &rule,
        [
            Relation::uses(rule.clone(), cm("a", "inside"), cm("a", "user")),
            Relation::uses(rule.clone(), cm("a", "pool"), pv.clone()).with_replay(true),
            Relation::uses(rule.clone(), cm("a", "pool"), cm("b", "user")),
        ],
    )
    .expect("valid");
    assert_eq!(idx.holding_count("a"), 2);
    assert_eq!(idx.holding_replay_count("a"), 1);
    assert_eq!(idx.holding_count("b"), 0);
    let byes: BTreeSet<String> = idx
        .holding("a")
        .filter_map(|r| r.by().map(|b| b.to_key().to_string()))
        .collect();
    assert_eq!(
        byes.into_iter().collect::<Vec<_>>(),
        ["ConfigMap b/user", "PersistentVolume pv-1"]
    );
    // A protection holds the namespace whatever its source: a Usage of the namespace itself
    // would go with it and lift the protection (issue 27), a ClusterUsage would not go.
    let own = Source::usage("a", "keep");
    idx.apply(&own, [Relation::protects(own.clone(), cm("a", "x"), "why")])
        .expect("valid");
    assert_eq!(idx.holding_count("a"), 3);
    let cluster = Source::cluster_usage("keep");
    idx.apply(
        &cluster,
        [Relation::protects(cluster.clone(), cm("a", "x"), "why")],
    )
    .expect("valid");
    assert_eq!(idx.holding_count("a"), 4);
    // A Usage of namespace b protecting a cluster-scoped object holds b (its deletion would
    // take the Usage), and no other namespace.
    let keep_pv = Source::usage("b", "keep-pv");
    idx.apply(
        &keep_pv,
        [Relation::protects(keep_pv.clone(), pv.clone(), "data")],
    )
    .expect("valid");
    assert_eq!(idx.holding_count("b"), 1);
    assert_eq!(idx.holding_count("a"), 4);
    idx.delete(&rule);
    idx.delete(&cluster);
    idx.delete(&own);
    idx.delete(&keep_pv);
    assert_eq!(idx.holding_count("a"), 0);
    assert_eq!(idx.holding_count("b"), 0);
    assert_eq!(idx.holding("a").count(), 0);
}
