//! Runs N webhook decisions on the 20 KB DELETE review (default 0), for instruction counts:
//!
//! ```text
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/decision_count 0
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/decision_count 1000
//! ```
//!
//! (Ir at 1000 − Ir at 0) / 1000 is the cost of one decision, setup excluded.

use std::hint::black_box;

mod support;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(0);
    let file = std::env::args()
        .nth(2)
        .unwrap_or_else(|| "delete-deployment-20k.json".to_owned());
    let webhook = support::webhook(100_000);
    let body = support::fixture(&file);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let mut denied = 0usize;
    for _ in 0..n {
        let answer = rt.block_on(webhook.answer(black_box(&body)));
        denied += usize::from(!answer.allowed);
    }
    println!("{denied} of {n} denied");
}
