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
//! - a third generation as the controller makes it now: the previous join removed in O(1)
//!   and its objects released in steps (`remove_join_in_steps`, `release_step`), the new join
//!   fed `feed` objects per hold (default 1, as the controller's `rules_upsert` does; more
//!   measures batches, which were not kept), attached in steps
//!   (`JoinMut::attach_step`, the lock released between steps), `step` relations per step;
//! - the rule deleted as the controller does now: `remove_join_in_steps` and
//!   `delete_in_steps` (O(1): the relations stop counting at once), then `release_step`
//!   (`delete_rule`);
//! - for comparison, a fourth generation attached and the rule deleted at once: `remove_join`
//!   and `delete` of its source in one hold (`delete_rule` before).
//!
//! ```text
//! cargo run --release -p lien-core --example attach_hold -- [runs] [step] [feed]
//! ```
//!
//! Each hold is timed with `Instant` around the work done under the lock's write guard, as the
//! controller holds it (a `std` lock here; the controller's is `parking_lot`'s: the work under
//! it is the same), and with the thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`) too: on a loaded
//! machine the wall time includes the thread being preempted while it holds the lock, which
//! no step size removes; the CPU time is what the step itself costs.

use std::sync::RwLock;
use std::time::{Duration, Instant};

use lien_core::{AttachStep, GroupKind, JoinId, RelationIndex, RuleConfig, RuleScope, Source};

#[path = "../benches/fixture/mod.rs"]
mod fixture;

use fixture::rook_join::{Input, PVS, inputs};

fn config(reason: &str) -> RuleConfig {
    RuleConfig {
        source: Source::rule("rbd-pv-uses-pool"),
        of: GroupKind::new("ceph.rook.io", "CephBlockPool"),
        by: GroupKind::new("", "PersistentVolume"),
        scope: RuleScope::Cluster,
        keyed: true,
        reason: reason.to_owned(),
        replay: true,
        warn: false,
    }
}

/// The longest and the total of a series of holds.
#[derive(Default)]
struct Holds {
    n: usize,
    max: Duration,
    total: Duration,
    all: Vec<Duration>,
    /// The thread's CPU time of each hold.
    cpu: Vec<Duration>,
}

fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

impl Holds {
    fn time<T>(
        &mut self,
        lock: &RwLock<RelationIndex>,
        f: impl FnOnce(&mut RelationIndex) -> T,
    ) -> T {
        let mut guard = lock.write().expect("not poisoned");
        let (started, cpu) = (Instant::now(), thread_cpu());
        let out = f(&mut guard);
        // As the controller does: a removed join finished with is freed after the lock.
        let garbage = guard.take_garbage();
        let (took, cpu) = (started.elapsed(), thread_cpu().saturating_sub(cpu));
        drop(guard);
        drop(garbage);
        self.cpu.push(cpu);
        self.n += 1;
        self.max = self.max.max(took);
        self.total += took;
        self.all.push(took);
        out
    }

    fn line(&self, what: &str) {
        let p99 = |v: &[Duration]| {
            let mut v = v.to_vec();
            v.sort_unstable();
            v[(v.len() * 99 / 100).min(v.len() - 1)]
        };
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let cpu_max = self.cpu.iter().max().copied().unwrap_or_default();
        println!(
            "{what:<60} holds {:>6}  wall p99 {:>7.3} longest {:>7.3} total {:>6.1} ms  \
             cpu p99 {:>7.3} longest {:>7.3} ms",
            self.n,
            ms(p99(&self.all)),
            ms(self.max),
            ms(self.total),
            ms(p99(&self.cpu)),
            ms(cpu_max),
        );
    }
}

/// Feeds every pool then every PV, one hold per object, as `rules_upsert` does.
fn feed(lock: &RwLock<RelationIndex>, id: JoinId, pools: &[Input], pvs: &[Input]) -> Holds {
    feed_batched(lock, id, pools, pvs, 1)
}

/// Feeds every pool then every PV, `batch` objects per hold.
fn feed_batched(
    lock: &RwLock<RelationIndex>,
    id: JoinId,
    pools: &[Input],
    pvs: &[Input],
    batch: usize,
) -> Holds {
    let mut holds = Holds::default();
    let inputs: Vec<(bool, &Input)> = pools
        .iter()
        .map(|i| (true, i))
        .chain(pvs.iter().map(|i| (false, i)))
        .collect();
    for chunk in inputs.chunks(batch.max(1)) {
        holds.time(lock, |ix| {
            fixture::rook_join::feed(ix, id, chunk.iter().copied());
        });
    }
    holds
}

/// `release_step(step)` until nothing is left, one hold each.
fn release(lock: &RwLock<RelationIndex>, step: usize) -> Holds {
    let mut holds = Holds::default();
    while !holds.time(lock, |ix| ix.release_step(step)) {}
    holds
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .map_or(3, |a| a.parse().expect("runs: a number"));
    let step: usize = std::env::args()
        .nth(2)
        .map_or(2048, |a| a.parse().expect("step: a number"));
    let batch: usize = std::env::args()
        .nth(3)
        .map_or(1, |a| a.parse().expect("feed: a number"));
    let (pools, pvs) = inputs();
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
            // The next generation makes room for as many objects as the previous one had.
            let (of, by) = ix.join(id2).expect("join").object_counts();
            ix.remove_join_in_steps(id2);
            let id = ix.add_join(config("generation 3")).expect("room");
            ix.join_mut(id).expect("join").reserve(of, by);
            id
        });
        swap.line("generation 3: remove_join_in_steps + add_join (apply_rule)");
        release(&lock, step).line(&format!(
            "generation 3: previous join released in steps of {step}"
        ));
        feed_batched(&lock, id3, &pools, &pvs, batch).line(&format!(
            "generation 3: feed, {batch} object(s) per hold, room reserved"
        ));
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
            ix.remove_join_in_steps(id3);
            ix.delete_in_steps(&Source::rule("rbd-pv-uses-pool"))
        });
        assert_eq!(gone, PVS);
        assert!(lock.read().expect("not poisoned").is_empty());
        delete.line("rule deleted: remove_join_in_steps + delete_in_steps");
        release(&lock, step).line(&format!(
            "rule deleted: relations and join released in steps of {step}"
        ));
        assert_eq!(lock.read().expect("not poisoned").key_count(), 0);

        // Before: the same rule attached again, then deleted in one hold.
        let id4 = lock
            .write()
            .expect("not poisoned")
            .add_join(config("generation 4"))
            .expect("room");
        feed_batched(&lock, id4, &pools, &pvs, batch);
        let n = lock
            .write()
            .expect("not poisoned")
            .join_mut(id4)
            .expect("join")
            .attach()
            .expect("room");
        assert_eq!(n, PVS);
        let mut delete = Holds::default();
        let gone = delete.time(&lock, |ix| {
            ix.remove_join(id4);
            ix.delete(&Source::rule("rbd-pv-uses-pool"))
        });
        assert_eq!(gone, PVS);
        delete.line("before: rule deleted in one hold, remove_join + delete");
        assert!(lock.read().expect("not poisoned").is_empty());
    }
}
