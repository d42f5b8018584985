//! The cost of the built-in API: parsing the definitions (once per process), a sandbox's
//! registry (once per sandbox), a kind's pruning schema (once per kind and process), and the
//! strict decoding of a ConfigMap body (every write), and the zero fields Go writes added to a
//! built-in object (every write).

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
    // kube-apiserver's own answers (`src/protobuf/kube/`): a Deployment, whose template nests
    // a pod spec, and a ConfigMap.
    for (name, json) in [
        (
            "Deployment",
            &include_bytes!("../src/protobuf/kube/deployments-web.json")[..],
        ),
        (
            "ConfigMap",
            include_bytes!("../src/protobuf/kube/configmaps-app.json"),
        ),
    ] {
        let object: serde_json::Value = serde_json::from_slice(json).expect("JSON");
        c.bench_function(&format!("go_json_zeros of a {name}"), |b| {
            b.iter_batched(
                || object.clone(),
                |mut o| lien_sandbox::protobuf::go_json_zeros(&mut o),
                criterion::BatchSize::SmallInput,
            )
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
