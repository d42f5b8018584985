//! parse → index lookup → response, on the committed 5 KB and 20 KB DELETE reviews, with 100k
//! relations in the index; and issue 8's case, the DELETE of a CephBlockPool that one
//! DependencyRule makes in use by 100 PersistentVolumes (100k rule relations). Criterion gives
//! the mean/median; a second pass times each decision on its own to report p50 and p99
//! (targets: 10 µs and 25 µs; issue 8: p99 ≤ 25 µs).

use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lien_webhook::Webhook;

#[path = "../examples/support/mod.rs"]
mod support;

#[path = "../examples/support/rule.rs"]
mod rule;

/// p50 and p99 of 100,000 decisions timed one by one, rotating over `bodies`.
fn percentiles(webhook: &Webhook, rt: &tokio::runtime::Runtime, bodies: &[Vec<u8>]) -> (f64, f64) {
    let mut samples: Vec<u128> = (0..100_000)
        .map(|i| {
            let body = &bodies[i % bodies.len()];
            let t = Instant::now();
            black_box(rt.block_on(webhook.answer(black_box(body))));
            t.elapsed().as_nanos()
        })
        .collect();
    samples.sort_unstable();
    let at = |q: f64| {
        samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)] as f64 / 1000.0
    };
    (at(0.50), at(0.99))
}

fn bench(c: &mut Criterion) {
    let webhook = support::webhook(100_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("webhook_decision");
    for (name, file) in support::FIXTURES {
        let body = support::fixture(file);
        // Sanity: the review is refused, as in production.
        let answer = rt.block_on(webhook.answer(&body));
        assert!(!answer.allowed, "{answer:?}");
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_function(format!("delete_denied_{name}"), |b| {
            b.iter(|| rt.block_on(webhook.answer(black_box(&body))))
        });
        let (p50, p99) = percentiles(&webhook, &rt, std::slice::from_ref(&body));
        println!(
            "webhook_decision/{name}: {} bytes, p50 {p50:.2} µs, p99 {p99:.2} µs (100k samples)",
            body.len()
        );
    }
    group.finish();
}

/// A pool's DELETE refused because of a DependencyRule: 100 dependents looked up, 10 listed in
/// the message under the rule's name and reason. Probes rotate over 143 of the 1,000 pools.
fn rule_dependents(c: &mut Criterion) {
    let webhook = rule::webhook();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let bodies = rule::bodies();
    // Sanity: each pool is refused with 409, naming the rule, its dependents bounded.
    for body in &bodies {
        let answer = rt.block_on(webhook.answer(body));
        let status = answer.status.as_ref().expect("refused");
        assert_eq!(status.code, 409, "{answer:?}");
        assert!(
            status
                .message
                .contains("DependencyRule rook-blockpool-used-by-pv")
                && status.message.contains("and 90 more"),
            "{}",
            status.message
        );
    }
    let mut n = 0usize;
    c.bench_function("webhook_decision/rule_pool_100_dependents", |b| {
        b.iter(|| {
            n = (n + 1) % bodies.len();
            rt.block_on(webhook.answer(black_box(&bodies[n])))
        })
    });
    let (p50, p99) = percentiles(&webhook, &rt, &bodies);
    println!(
        "webhook_decision/rule_pool_100_dependents: {} bytes, p50 {p50:.2} µs, p99 {p99:.2} µs (100k samples)",
        bodies[0].len()
    );
}

criterion_group!(benches, bench, rule_dependents);
criterion_main!(benches);
