//! Decision latency on the committed fixture (100,000 relations, `fixture/mod.rs`):
//!
//! ```text
//! cargo bench -p lien-core --bench decision
//! ```
//!
//! Each iteration is what the webhook does per DELETE: `decide_delete` then `render_denial`
//! (listing at most 10), for an object in use by 1, 20 or 40 others, a protected one, and one
//! not in use; probes rotate over namespaces so the caches see different keys. Also: the cost
//! of re-applying one Usage (a watch event), and the whole-graph algorithms (with the search for
//! cycles inside one namespace, which the controller runs while a namespace is being deleted).

mod fixture;

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use lien_core::{
    RelationIndex, cycles_in_namespace, decide_delete, deletion_order, find_cycles, render_denial,
    render_refusal,
};

fn build() -> RelationIndex {
    let mut index = RelationIndex::new();
    index.reset(fixture::all()).expect("the fixture is valid");
    assert_eq!(index.len(), 100_000);
    index
}

fn decision(c: &mut Criterion) {
    let index = build();
    let probes: Vec<_> = (0..fixture::NAMESPACES)
        .step_by(7)
        .map(fixture::probes)
        .collect();
    let names = [
        "in use by 1",
        "in use by 20",
        "in use by 40",
        "protected",
        "not in use",
    ];
    let mut group = c.benchmark_group("decide_delete+render_denial");
    for (i, name) in names.iter().enumerate() {
        let mut n = 0usize;
        group.bench_function(*name, |b| {
            b.iter(|| {
                n = (n + 1) % probes.len();
                let (key, uid) = &probes[n][i];
                let decision = decide_delete(&index, key, Some(uid));
                black_box(render_denial(&decision, 10))
            })
        });
    }
    group.finish();

    // What the webhook sends back since issue 19: the three-line refusal and its detail.
    let mut group = c.benchmark_group("decide_delete+render_refusal");
    for (i, name) in names.iter().enumerate() {
        let mut n = 0usize;
        group.bench_function(*name, |b| {
            b.iter(|| {
                n = (n + 1) % probes.len();
                let (key, uid) = &probes[n][i];
                let decision = decide_delete(&index, key, Some(uid));
                black_box(render_refusal(&decision, 10, false))
            })
        });
    }
    group.finish();

    let mut n = 0usize;
    c.bench_function("is_in_use", |b| {
        b.iter(|| {
            n = (n + 1) % probes.len();
            black_box(index.is_in_use(&probes[n][1].0))
        })
    });
}

fn updates(c: &mut Criterion) {
    let mut index = build();
    let usages = fixture::namespace_usages(42);
    let (source, relations) = usages
        .iter()
        .find(|(_, r)| r.len() == 20)
        .expect("apps Usage");
    c.bench_function("apply (replace a 20-relation Usage)", |b| {
        b.iter(|| black_box(index.apply(source, relations.clone())))
    });
}

fn graph(c: &mut Criterion) {
    let index = build();
    let mut group = c.benchmark_group("graph");
    group.sample_size(10);
    group.bench_function("find_cycles (100k relations)", |b| {
        b.iter(|| black_box(find_cycles(&index)))
    });
    // What the controller runs per change while a namespace is being deleted.
    let namespace = fixture::probes(0)[1]
        .0
        .namespace
        .clone()
        .expect("a namespaced probe");
    group.bench_function("cycles_in_namespace (100k relations, one namespace)", |b| {
        b.iter(|| black_box(cycles_in_namespace(&index, &namespace)))
    });
    let cephs: Vec<_> = (0..fixture::NAMESPACES)
        .map(|ns| fixture::probes(ns)[2].0.clone())
        .collect();
    group.bench_function("deletion_order (every CephCluster)", |b| {
        b.iter(|| black_box(deletion_order(&index, &cephs)))
    });
    group.finish();
}

/// Issue 8's case: one DependencyRule relating 1,000 CephBlockPools (namespace `rook-ceph`) to
/// 100,000 cluster-scoped PersistentVolumes, 100 per pool; a DELETE of one pool is decided and
/// rendered (10 listed, grouped under the rule's name and reason). Criterion's estimate is the
/// mean; `rule dependents p99` times 20,000 single decisions and prints p50/p99/max.
fn rule_dependents(c: &mut Criterion) {
    use fixture::rook_pools::{POOLS, PVS_PER_POOL, RULE, pool, relations, uuid};
    use lien_core::{ObjectKey, Source};
    let mut index = RelationIndex::new();
    index
        .apply(&Source::rule(RULE), relations())
        .expect("valid");
    assert_eq!(index.len(), POOLS * PVS_PER_POOL);
    let probes: Vec<(ObjectKey, String)> =
        (0..POOLS).step_by(7).map(|p| (pool(p), uuid(p))).collect();
    let mut n = 0usize;
    c.bench_function("decide_delete+render_denial/rule, 100 dependents", |b| {
        b.iter(|| {
            n = (n + 1) % probes.len();
            let (key, uid) = &probes[n];
            let decision = decide_delete(&index, key, Some(uid));
            black_box(render_denial(&decision, 10))
        })
    });
    let mut samples: Vec<u128> = (0..20_000)
        .map(|i| {
            let (key, uid) = &probes[i % probes.len()];
            let start = std::time::Instant::now();
            let decision = decide_delete(&index, key, Some(uid));
            black_box(render_denial(&decision, 10));
            start.elapsed().as_nanos()
        })
        .collect();
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    println!(
        "rule dependents p99: 100 dependents, 20000 decisions: p50 {:.2} µs, p99 {:.2} µs, max {:.2} µs",
        at(0.50) as f64 / 1e3,
        at(0.99) as f64 / 1e3,
        *samples.last().unwrap_or(&0) as f64 / 1e3
    );
}

criterion_group!(benches, decision, updates, graph, rule_dependents);
criterion_main!(benches);
