//! Runs N rule decisions (default 0) — the DELETE of a CephBlockPool held by 100 rule-derived
//! PersistentVolumes, the index holding 100,000 rule relations, probes rotating over 143 pools
//! as in `cargo bench -p lien-webhook --bench decision -- rule` — for instruction counts:
//!
//! ```text
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/rule_decision_count 0
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/rule_decision_count 1000
//! ```
//!
//! (Ir at 1000 − Ir at 0) / 1000 is the cost of one decision, setup excluded. Without valgrind it
//! prints the mean wall time per decision too.

use std::hint::black_box;
use std::time::Instant;

#[path = "support/rule.rs"]
mod rule;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(0);
    let webhook = rule::webhook();
    let bodies = rule::bodies();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let mut denied = 0usize;
    let t = Instant::now();
    for i in 0..n {
        let answer = rt.block_on(webhook.answer(black_box(&bodies[i % bodies.len()])));
        denied += usize::from(!answer.allowed);
    }
    let per = t.elapsed().as_secs_f64() * 1e6 / n.max(1) as f64;
    println!("{denied} of {n} denied, {per:.2} µs per decision");
}
