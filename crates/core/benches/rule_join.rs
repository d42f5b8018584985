//! One `DependencyRule` over 1,000 CephBlockPools and 100,000 PersistentVolume-like `by`
//! objects keyed by pool (issue 8's scale), without CEL (`RuleJoin` receives evaluated keys):
//!
//! ```text
//! cargo bench -p lien-core --bench rule_join
//! ```
//!
//! Measures the initial build (every pool, then every PV, each delta applied to a
//! `RelationIndex` with `apply_delta`, as the controller would on its first sync), the same
//! build applying `relations()` once at the end, one PV moving to another pool (the steady
//! state), and prints the heap of the join and of the index per relation (`heap_bytes`,
//! capacities × record sizes).

use std::alloc::System;
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use lien_core::{GroupKind, ObjectKey, RelationIndex, RuleConfig, RuleJoin, RuleScope, Source};
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

const POOLS: usize = 1_000;
const PVS: usize = 100_000;
const NAMESPACES: usize = 10;

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
    }
}

fn uid(kind: u32, i: usize) -> String {
    format!("{kind:08x}-0000-4000-8000-{i:012x}")
}

fn pool(i: usize) -> (ObjectKey, String, Vec<String>) {
    let ns = format!("rook-ceph-{}", i % NAMESPACES);
    let name = format!("replicapool-{i}");
    let key = format!("{ns}/{name}");
    (
        ObjectKey::new("ceph.rook.io", "CephBlockPool", Some(&ns), &name),
        uid(1, i),
        vec![key],
    )
}

fn pv(i: usize) -> (ObjectKey, String, Vec<String>) {
    // `pvc-<uuid>`, as the CSI provisioner names them; 100 per pool.
    let name = format!("pvc-{}", uid(3, i));
    let p = i % POOLS;
    let key = format!("rook-ceph-{}/replicapool-{p}", p % NAMESPACES);
    (
        ObjectKey::new("", "PersistentVolume", None, name),
        uid(2, i),
        vec![key],
    )
}

struct Inputs {
    pools: Vec<(ObjectKey, String, Vec<String>)>,
    pvs: Vec<(ObjectKey, String, Vec<String>)>,
}

fn inputs() -> Inputs {
    Inputs {
        pools: (0..POOLS).map(pool).collect(),
        pvs: (0..PVS).map(pv).collect(),
    }
}

/// The first sync, object by object, each delta applied to the index.
fn build_incremental(inputs: &Inputs) -> (RuleJoin, RelationIndex) {
    let source = config().source;
    let mut join = RuleJoin::new(config());
    let mut index = RelationIndex::new();
    for (key, uid, keys) in &inputs.pools {
        let d = join
            .upsert_of(key, Some(uid), Some(keys.clone()))
            .expect("kind");
        index
            .apply_delta(&source, d.added, d.removed)
            .expect("valid");
    }
    for (key, uid, keys) in &inputs.pvs {
        let d = join
            .upsert_by(key, Some(uid), Some(keys.clone()), true)
            .expect("kind");
        index
            .apply_delta(&source, d.added, d.removed)
            .expect("valid");
    }
    (join, index)
}

/// The join alone, deltas dropped (nothing else is live when it returns).
fn build_then_apply_join_only(inputs: &Inputs) -> (RuleJoin, ()) {
    let mut join = RuleJoin::new(config());
    for (key, uid, keys) in &inputs.pools {
        drop(join.upsert_of(key, Some(uid), Some(keys.clone())));
    }
    for (key, uid, keys) in &inputs.pvs {
        drop(join.upsert_by(key, Some(uid), Some(keys.clone()), true));
    }
    (join, ())
}

/// The first sync with the deltas ignored and `relations()` applied once at the end.
fn build_then_apply(inputs: &Inputs) -> (RuleJoin, RelationIndex) {
    let source = config().source;
    let mut join = RuleJoin::new(config());
    for (key, uid, keys) in &inputs.pools {
        join.upsert_of(key, Some(uid), Some(keys.clone()))
            .expect("kind");
    }
    for (key, uid, keys) in &inputs.pvs {
        join.upsert_by(key, Some(uid), Some(keys.clone()), true)
            .expect("kind");
    }
    let mut index = RelationIndex::new();
    index.apply(&source, join.relations()).expect("valid");
    (join, index)
}

fn rule_join(c: &mut Criterion) {
    let inputs = inputs();
    // Counted: the index alone (built from `relations()` of a join dropped before counting
    // stops), then the join alone, then both built together as the controller does.
    let before = live();
    let index = {
        let (join, _) = build_then_apply_join_only(&inputs);
        let mut index = RelationIndex::new();
        index
            .apply_stream(&config().source, join.relations_iter())
            .expect("valid");
        index
    };
    let index_counted = live() - before;
    drop(index);
    let before = live();
    let (join, _) = build_then_apply_join_only(&inputs);
    let join_counted = live() - before;
    drop(join);
    let before = live();
    let (join, index) = build_incremental(&inputs);
    let both_counted = live() - before;
    assert_eq!((join.len(), index.len()), (PVS, PVS));
    let per = |b: usize| b as f64 / PVS as f64;
    let mib = |b: usize| b as f64 / 1048576.0;
    eprintln!(
        "rule_join: {} relations; heap_bytes: RuleJoin {:.2} MiB ({:.1} B/relation), RelationIndex {:.2} MiB ({:.1} B/relation), together {:.1} B/relation",
        join.len(),
        mib(join.heap_bytes()),
        per(join.heap_bytes()),
        mib(index.heap_bytes()),
        per(index.heap_bytes()),
        per(join.heap_bytes() + index.heap_bytes()),
    );
    eprintln!(
        "rule_join: counting allocator: RuleJoin alone {:.2} MiB ({:.1} B/relation), RelationIndex alone {:.2} MiB ({:.1} B/relation), both built incrementally {:.2} MiB ({:.1} B/relation)",
        mib(join_counted as usize),
        per(join_counted as usize),
        mib(index_counted as usize),
        per(index_counted as usize),
        mib(both_counted as usize),
        per(both_counted as usize),
    );

    let mut group = c.benchmark_group("rule_join 1k pools x 100k PVs");
    group.sample_size(10);
    group.bench_function("initial build, apply_delta per object", |b| {
        b.iter(|| black_box(build_incremental(&inputs)))
    });
    group.bench_function("initial build, apply relations() once", |b| {
        b.iter(|| black_box(build_then_apply(&inputs)))
    });
    group.finish();

    // Steady state: one PV's pool changes (a moved hold), then changes back.
    let (mut join, mut index) = (join, index);
    let source = config().source;
    let (key, uid, home) = pv(42);
    let away = pool(7).2;
    let mut flip = false;
    c.bench_function(
        "rule_join: move one PV to another pool (delta + apply_delta)",
        |b| {
            b.iter(|| {
                flip = !flip;
                let keys = if flip { away.clone() } else { home.clone() };
                let d = join
                    .upsert_by(&key, Some(&uid), Some(keys), true)
                    .expect("kind");
                black_box(
                    index
                        .apply_delta(&source, d.added, d.removed)
                        .expect("valid"),
                )
            })
        },
    );
}

criterion_group!(benches, rule_join);
criterion_main!(benches);
