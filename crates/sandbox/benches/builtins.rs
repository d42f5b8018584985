//! The cost of the built-in API: parsing the definitions (once per process), a sandbox's
//! registry (once per sandbox), a kind's pruning schema (once per kind and process), and the
//! strict decoding of a ConfigMap body (every write).

use criterion::{Criterion, criterion_group, criterion_main};
use lien_sandbox::builtins;
use lien_sandbox::registry::Registry;

fn bench(c: &mut Criterion) {
    c.bench_function("definitions: gunzip + parse (once per process)", |b| {
        b.iter(builtins::parse_definitions)
    });
    let _ = Registry::with_builtins();
    c.bench_function("Registry::with_builtins (per sandbox)", |b| {
        b.iter(Registry::with_builtins)
    });
    let schema = builtins::pruning_schema("io.k8s.api.core.v1.ConfigMap").expect("schema");
    let body = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","labels":{"a":"b"}},"data":{"k":"v"},"bogus":1}"#;
    c.bench_function("strict decoding of a ConfigMap body", |b| {
        b.iter(|| lien_sandbox::schema::strict_decoding_errors(&schema, body))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
