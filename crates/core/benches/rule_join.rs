//! One `DependencyRule` over 1,000 CephBlockPools and 100,000 PersistentVolume-like `by`
//! objects keyed by pool (issue 8's scale), without CEL (`RuleJoin` receives evaluated keys):
//!
//! ```text
//! cargo bench -p lien-core --bench rule_join
//! ```
//!
//! Measures the initial build as the controller does it (every pool, then every PV, fed to a
//! detached join in the index, then attached: the relations put in the index at once), the
//! same objects fed to a join attached from the start (each object's relations go in as it
//! arrives), one PV moving to another pool (the steady state), and prints the memory per
//! relation of the index with its join: `heap_bytes` (capacities × record sizes) by part, and
//! what a counting allocator saw.

use std::alloc::System;
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use lien_core::{GroupKind, JoinId, RelationIndex, RuleConfig, RuleScope, Source};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

/// Counts the bytes live on the heap, so the bench reports what the join and the index really
/// allocate (requested sizes; the allocator's own per-chunk overhead is not included), next to
/// their own `heap_bytes` estimates.
#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn live() -> isize {
    // A realloc is already counted in `bytes_allocated`/`bytes_deallocated` by its difference.
    let s = GLOBAL.stats();
    s.bytes_allocated as isize - s.bytes_deallocated as isize
}

mod fixture;

use fixture::rook_join::{Input, POOLS, PVS, pool, pv};

fn config() -> RuleConfig {
    RuleConfig {
        source: Source::rule("rbd-pv-uses-pool"),
        of: GroupKind::new("ceph.rook.io", "CephBlockPool"),
        by: GroupKind::new("", "PersistentVolume"),
        // PVs are cluster-scoped: the key carries the pool's namespace (the CSI clusterID).
        scope: RuleScope::Cluster,
        keyed: true,
        reason: "the volume's data lives in this pool".to_owned(),
        replay: true,
        warn: false,
    }
}

struct Inputs {
    pools: Vec<Input>,
    pvs: Vec<Input>,
}

fn inputs() -> Inputs {
    Inputs {
        pools: (0..POOLS).map(pool).collect(),
        pvs: (0..PVS).map(pv).collect(),
    }
}

/// The first sync as the controller does it: the join fed object by object while detached
/// (its kinds are being listed), then attached (its relations put in the index at once).
fn build_then_attach(inputs: &Inputs) -> (RelationIndex, JoinId) {
    let mut index = RelationIndex::new();
    let id = index.add_join(config()).expect("room");
    feed(&mut index, id, inputs);
    index.join_mut(id).expect("join").attach().expect("room");
    (index, id)
}

/// The same objects fed to a join attached from the start: each object's relations go into the
/// index as it arrives (the steady state's path, taken for every object).
fn build_attached(inputs: &Inputs) -> (RelationIndex, JoinId) {
    let mut index = RelationIndex::new();
    let id = index.add_join(config()).expect("room");
    index.join_mut(id).expect("join").attach().expect("room");
    feed(&mut index, id, inputs);
    (index, id)
}

fn feed(index: &mut RelationIndex, id: JoinId, inputs: &Inputs) {
    let pools = inputs.pools.iter().map(|i| (true, i));
    fixture::rook_join::feed(
        index,
        id,
        pools.chain(inputs.pvs.iter().map(|i| (false, i))),
    );
}

fn rule_join(c: &mut Criterion) {
    let inputs = inputs();
    // Counted: everything the index holds (relations, keys, UIDs, strings and the join's own
    // records), built as the controller builds it.
    let before = live();
    let (index, id) = build_then_attach(&inputs);
    let counted = live() - before;
    let join = index.join(id).expect("join");
    assert_eq!((join.len(), index.len()), (PVS, PVS));
    let per = |b: usize| b as f64 / PVS as f64;
    let mib = |b: usize| b as f64 / 1048576.0;
    eprintln!(
        "rule_join: {} relations; heap_bytes: index with its join {:.2} MiB ({:.1} B/relation), of which the join's own records {:.2} MiB ({:.1} B/relation)",
        index.len(),
        mib(index.heap_bytes()),
        per(index.heap_bytes()),
        mib(join.heap_bytes()),
        per(join.heap_bytes()),
    );
    let parts: Vec<String> = index
        .heap_parts()
        .into_iter()
        .map(|(part, bytes)| format!("{part} {:.1} B", per(bytes)))
        .collect();
    eprintln!("rule_join: per relation: {}", parts.join(", "));
    eprintln!(
        "rule_join: counting allocator: index with its join {:.2} MiB ({:.1} B/relation)",
        mib(counted as usize),
        per(counted as usize),
    );

    let mut group = c.benchmark_group("rule_join 1k pools x 100k PVs");
    group.sample_size(10);
    group.bench_function("initial build, detached then attached", |b| {
        b.iter(|| black_box(build_then_attach(&inputs)))
    });
    group.bench_function("initial build, attached from the start", |b| {
        b.iter(|| black_box(build_attached(&inputs)))
    });
    group.finish();

    // Steady state: one PV's pool changes (a moved hold), then changes back.
    let mut index = index;
    let (key, uid, home) = pv(42);
    let away = pool(7).2;
    let mut flip = false;
    c.bench_function(
        "rule_join: move one PV to another pool (attached join)",
        |b| {
            b.iter(|| {
                flip = !flip;
                let keys = if flip { away.clone() } else { home.clone() };
                let mut join = index.join_mut(id).expect("join");
                black_box(
                    join.upsert_by(&key, Some(&uid), Some(keys), true)
                        .expect("kind"),
                )
            })
        },
    );
}

criterion_group!(benches, rule_join);
criterion_main!(benches);
