//! Reports what the relation index costs in memory on the committed fixture (100,000 relations,
//! see `benches/fixture/mod.rs`):
//!
//! ```text
//! cargo run --release -p lien-core --example memory
//! ```
//!
//! The number is the heap the index holds, computed from its capacities (`heap_bytes`): a
//! counting global allocator would need `unsafe`, which the workspace forbids. As a cross-check,
//! `memory inputs` and `memory index` report the peak resident set (Linux `VmHWM`) of building
//! only the inputs and of building the index from them; the difference approximates the index.

#[path = "../benches/fixture/mod.rs"]
mod fixture;

use lien_core::RelationIndex;

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn report(label: &str, index: &RelationIndex) {
    let bytes = index.heap_bytes();
    println!(
        "{label}: {} relations, {} objects, {} sources, {} strings; heap {:.2} MiB = {:.1} bytes/relation = {:.2} MiB per 100k relations",
        index.len(),
        index.key_count(),
        index.source_count(),
        index.string_count(),
        bytes as f64 / 1048576.0,
        bytes as f64 / index.len() as f64,
        bytes as f64 / index.len() as f64 * 100_000.0 / 1048576.0,
    );
}

/// Every object name made unique (suffixed with its namespace), the unfavourable case for
/// string interning: in the fixture, names such as `pool-3` repeat across namespaces.
fn unique_names(
    mut all: Vec<(lien_core::Source, Vec<lien_core::Relation>)>,
) -> Vec<(lien_core::Source, Vec<lien_core::Relation>)> {
    for (_, relations) in &mut all {
        for r in relations {
            for key in std::iter::once(&mut r.of).chain(r.by.as_mut()) {
                if let Some(ns) = &key.namespace {
                    key.name = format!("{}.{ns}", key.name);
                }
            }
        }
    }
    all
}

fn main() {
    // `memory inputs` builds and drops the inputs only, `memory index` also builds the index the
    // same way: the difference of their peak RSS (`/usr/bin/time -v`) cross-checks `heap_bytes`.
    match std::env::args().nth(1).as_deref() {
        Some("inputs") => {
            for ns in 0..fixture::NAMESPACES {
                drop(fixture::namespace_usages(ns));
            }
            drop(fixture::rules());
            println!("inputs only; peak RSS {:?} KiB", peak_rss_kib());
            return;
        }
        Some("index") => {
            let mut index = RelationIndex::new();
            for ns in 0..fixture::NAMESPACES {
                for (source, relations) in fixture::namespace_usages(ns) {
                    let _ = index.apply(&source, relations);
                }
            }
            for (source, relations) in fixture::rules() {
                let _ = index.apply(&source, relations);
            }
            report("apply, source by source", &index);
            println!("peak RSS {:?} KiB", peak_rss_kib());
            return;
        }
        _ => {}
    }
    // Incrementally, as the controller does from watch events: arenas grow by doubling.
    let mut index = RelationIndex::new();
    for ns in 0..fixture::NAMESPACES {
        for (source, relations) in fixture::namespace_usages(ns) {
            let _ = index.apply(&source, relations);
        }
    }
    for (source, relations) in fixture::rules() {
        let _ = index.apply(&source, relations);
    }
    report("apply, source by source", &index);
    drop(index);
    // In one go, as after a watch restart: arenas sized exactly.
    let mut index = RelationIndex::new();
    let _ = index.reset(fixture::all());
    report("reset, all at once     ", &index);
    let mut index = RelationIndex::new();
    let _ = index.reset(unique_names(fixture::all()));
    report("reset, unique names    ", &index);
}
