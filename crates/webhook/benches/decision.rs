//! parse → index lookup → response, on the committed 5 KB and 20 KB DELETE reviews, with 100k
//! relations in the index. Criterion gives the mean/median; a second pass times each decision on
//! its own to report p50 and p99 (targets: 10 µs and 25 µs).

use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lien_webhook::Webhook;

#[path = "../examples/support/mod.rs"]
mod support;

fn percentiles(webhook: &Webhook, rt: &tokio::runtime::Runtime, body: &[u8]) -> (f64, f64) {
    let mut samples: Vec<u128> = (0..100_000)
        .map(|_| {
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
        let (p50, p99) = percentiles(&webhook, &rt, &body);
        println!(
            "webhook_decision/{name}: {} bytes, p50 {p50:.2} µs, p99 {p99:.2} µs (100k samples)",
            body.len()
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
