//! How long the index's write lock is held while a `DependencyRule`'s join is attached, at
//! 100,000 relations (1,000 CephBlockPools × 100 PersistentVolume-like objects, the scale of
//! `benches/rule_join.rs`), for each step the controller takes under the lock
//! (`crates/controller/src/controller/state.rs`):
//!
//! - the first generation: `add_join` (`apply_rule`), then the join fed object by object (one
//!   short hold per object, `rules_upsert`), then `attach` once both sides are listed
//!   (`rules_complete`);
//! - a new generation of the same rule: `remove_join` of the previous one and `add_join`
//!   (`apply_rule`), the new join fed, then `attach`, which replaces the previous generation's
//!   100,000 relations;
//! - a third generation attached in steps (`JoinMut::attach_step`, the lock released between
//!   steps), `--step` relations per step;
//! - the rule deleted: `remove_join` and `delete` of its source (`delete_rule`).
//!
//! ```text
//! cargo run --release -p lien-core --example attach_hold -- [runs] [step]
//! ```
//!
//! Each hold is timed with `Instant` around the work done under the lock's write guard, as the
//! controller holds it (a `std` lock here; the controller's is `parking_lot`'s: the work under
//! it is the same).

use std::sync::RwLock;
use std::time::{Duration, Instant};

use lien_core::{
    AttachStep, GroupKind, JoinId, ObjectKey, RelationIndex, RuleConfig, RuleScope, Source,
};

const POOLS: usize = 1_000;
const PVS: usize = 100_000;
const NAMESPACES: usize = 10;

fn config(reason: &str) -> RuleConfig {
    RuleConfig {
        source: Source::rule("rbd-pv-uses-pool"),
        of: GroupKind::new("ceph.rook.io", "CephBlockPool"),
        by: GroupKind::new("", "PersistentVolume"),
        scope: RuleScope::Cluster,
        keyed: true,
        reason: reason.to_owned(),
        replay: true,
    }
}

fn uid(kind: u32, i: usize) -> String {
    format!("{kind:08x}-0000-4000-8000-{i:012x}")
}

type Input = (ObjectKey, String, Vec<String>);

fn pool(i: usize) -> Input {
    let ns = format!("rook-ceph-{}", i % NAMESPACES);
    let name = format!("replicapool-{i}");
    let key = format!("{ns}/{name}");
    (
        ObjectKey::new("ceph.rook.io", "CephBlockPool", Some(&ns), &name),
        uid(1, i),
        vec![key],
    )
}

fn pv(i: usize) -> Input {
    let name = format!("pvc-{}", uid(3, i));
    let p = i % POOLS;
    let key = format!("rook-ceph-{}/replicapool-{p}", p % NAMESPACES);
    (
        ObjectKey::new("", "PersistentVolume", None, name),
        uid(2, i),
        vec![key],
    )
}

/// The longest and the total of a series of holds.
#[derive(Default)]
struct Holds {
    n: usize,
    max: Duration,
    total: Duration,
    all: Vec<Duration>,
}

impl Holds {
    fn time<T>(
        &mut self,
        lock: &RwLock<RelationIndex>,
        f: impl FnOnce(&mut RelationIndex) -> T,
    ) -> T {
        let mut guard = lock.write().expect("not poisoned");
        let started = Instant::now();
        let out = f(&mut guard);
        let took = started.elapsed();
        drop(guard);
        self.n += 1;
        self.max = self.max.max(took);
        self.total += took;
        self.all.push(took);
        out
    }

    fn line(&self, what: &str) {
        let mut all = self.all.clone();
        all.sort_unstable();
        let p99 = all[(all.len() * 99 / 100).min(all.len() - 1)];
        println!(
            "{what:<58} holds {:>7}  p99 {:>7.3} ms  longest {:>7.3} ms  total {:>6.1} ms",
            self.n,
            p99.as_secs_f64() * 1e3,
            self.max.as_secs_f64() * 1e3,
            self.total.as_secs_f64() * 1e3
        );
    }
}

/// Feeds every pool then every PV, one hold per object, as `rules_upsert` does.
fn feed(lock: &RwLock<RelationIndex>, id: JoinId, pools: &[Input], pvs: &[Input]) -> Holds {
    let mut holds = Holds::default();
    for (key, uid, keys) in pools {
        holds.time(lock, |ix| {
            ix.join_mut(id)
                .expect("join")
                .upsert_of(key, Some(uid), Some(keys.clone()))
                .expect("kind")
        });
    }
    for (key, uid, keys) in pvs {
        holds.time(lock, |ix| {
            ix.join_mut(id)
                .expect("join")
                .upsert_by(key, Some(uid), Some(keys.clone()), true)
                .expect("kind")
        });
    }
    holds
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .map_or(3, |a| a.parse().expect("runs: a number"));
    let step: usize = std::env::args()
        .nth(2)
        .map_or(2048, |a| a.parse().expect("step: a number"));
    let pools: Vec<Input> = (0..POOLS).map(pool).collect();
    let pvs: Vec<Input> = (0..PVS).map(pv).collect();
    for run in 1..=runs {
        println!("run {run}");
        let lock = RwLock::new(RelationIndex::new());
        let mut add = Holds::default();
        let id = add.time(&lock, |ix| {
            ix.add_join(config("generation 1")).expect("room")
        });
        add.line("generation 1: add_join (apply_rule)");
        feed(&lock, id, &pools, &pvs)
            .line("generation 1: feed, one hold per object (rules_upsert)");
        let mut attach = Holds::default();
        let n = attach.time(&lock, |ix| {
            ix.join_mut(id).expect("join").attach().expect("room")
        });
        assert_eq!(n, PVS);
        attach.line("generation 1: attach, 100,000 relations (rules_complete)");

        let mut swap = Holds::default();
        let id2 = swap.time(&lock, |ix| {
            ix.remove_join(id);
            ix.add_join(config("generation 2")).expect("room")
        });
        swap.line("generation 2: remove_join + add_join (apply_rule)");
        feed(&lock, id2, &pools, &pvs).line("generation 2: feed, one hold per object");
        let mut attach = Holds::default();
        let n = attach.time(&lock, |ix| {
            ix.join_mut(id2).expect("join").attach().expect("room")
        });
        assert_eq!(n, PVS);
        attach.line("generation 2: attach, replacing 100,000 (rules_complete)");

        let mut swap = Holds::default();
        let id3 = swap.time(&lock, |ix| {
            ix.remove_join(id2);
            ix.add_join(config("generation 3")).expect("room")
        });
        swap.line("generation 3: remove_join + add_join (apply_rule)");
        feed(&lock, id3, &pools, &pvs).line("generation 3: feed, one hold per object");
        let mut steps = Holds::default();
        loop {
            let done = steps.time(&lock, |ix| {
                ix.join_mut(id3)
                    .expect("join")
                    .attach_step(step)
                    .expect("room")
            });
            if let AttachStep::Done(n) = done {
                assert_eq!(n, PVS);
                break;
            }
        }
        steps.line(&format!(
            "generation 3: attach in steps of {step}, replacing 100,000"
        ));
        assert_eq!(lock.read().expect("not poisoned").len(), PVS);

        let mut delete = Holds::default();
        let gone = delete.time(&lock, |ix| {
            ix.remove_join(id3);
            ix.delete(&Source::rule("rbd-pv-uses-pool"))
        });
        assert_eq!(gone, PVS);
        delete.line("rule deleted: remove_join + delete (delete_rule)");
        assert!(lock.read().expect("not poisoned").is_empty());
    }
}
