//! What one evaluation costs: the Rook pack's PersistentVolume keys (`rook-blockpool-used-by-pv`,
//! `spec.keys.by`) over a PersistentVolume of about 1.5 KB as Rook's RBD CSI driver provisions
//! it — the expression the controller evaluates for each of 100,000 PVs.

use criterion::{Criterion, criterion_group, criterion_main};
use lien_api::DependencyRule;
use lien_decide::program::DependencyProgram;
use serde::Deserialize;
use serde_json::{Value, json};

fn pv_rule() -> (DependencyProgram, String) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/rules/rook-ceph.yaml"
    );
    let text = std::fs::read_to_string(path).expect("the Rook pack");
    let rule = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).expect("YAML"))
        .find(|doc| doc["metadata"]["name"] == "rook-blockpool-used-by-pv")
        .expect("the PV rule");
    let rule: DependencyRule = serde_json::from_value(rule).expect("a DependencyRule");
    let source = rule.spec.keys.as_ref().expect("keys").by.clone();
    (
        DependencyProgram::compile(&rule.spec).expect("compiles"),
        source,
    )
}

fn pv() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": "pvc-3c1e9d2a-8f4b-4e6a-9c2d-1b7e5f0a4d93",
            "uid": "0b0e5d1c-6a2f-4c1d-8e3b-9f7a2c4d6e81",
            "resourceVersion": "48213377",
            "creationTimestamp": "2026-11-23T10:12:44Z",
            "annotations": {
                "pv.kubernetes.io/provisioned-by": "rook-ceph.rbd.csi.ceph.com",
                "volume.kubernetes.io/provisioner-deletion-secret-name": "rook-csi-rbd-provisioner"
            },
            "finalizers": ["kubernetes.io/pv-protection"]
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": "20Gi"},
            "claimRef": {
                "apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": "data-postgres-0",
                "namespace": "databases",
                "uid": "3c1e9d2a-8f4b-4e6a-9c2d-1b7e5f0a4d93"
            },
            "csi": {
                "controllerExpandSecretRef": {"name": "rook-csi-rbd-provisioner", "namespace": "rook-ceph"},
                "driver": "rook-ceph.rbd.csi.ceph.com",
                "fsType": "ext4",
                "nodeStageSecretRef": {"name": "rook-csi-rbd-node", "namespace": "rook-ceph"},
                "volumeAttributes": {
                    "clusterID": "rook-ceph",
                    "imageFeatures": "layering,fast-diff,object-map,deep-flatten,exclusive-lock",
                    "imageFormat": "2",
                    "imageName": "csi-vol-9a3f6c2e-4b7a-11ee-9d6f-0242ac110004",
                    "journalPool": "replicapool",
                    "pool": "replicapool",
                    "storage.kubernetes.io/csiProvisionerIdentity": "1693212345678-8081-rook-ceph.rbd.csi.ceph.com"
                },
                "volumeHandle": "0001-0009-rook-ceph-0000000000000002-9a3f6c2e-4b7a-11ee-9d6f-0242ac110004"
            },
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.rbd.csi.ceph.com/zone", "operator": "In", "values": ["zone-a"]}
            ]}]}},
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": "rook-ceph-block",
            "volumeMode": "Filesystem"
        },
        "status": {"phase": "Bound"}
    })
}

fn bench(c: &mut Criterion) {
    let (program, source) = pv_rule();
    let pv = pv();
    let size = serde_json::to_vec(&pv).expect("JSON").len();
    assert!((1450..=1650).contains(&size), "the PV is {size} bytes");
    assert_eq!(
        program.keys_by(&pv).expect("evaluates"),
        ["rook-ceph/replicapool", "rook-ceph/replicapool"]
    );
    c.bench_function("rook_pv_keys_by_1_5kb", |b| {
        b.iter(|| program.keys_by(std::hint::black_box(&pv)))
    });
    // For comparison: the same expression run by the `cel` crate alone (the whole object
    // converted, no metering, no result check), and the smallest key expression through Lien.
    let bare = lien_cel::compile_program(&source).expect("compiles");
    c.bench_function("rook_pv_keys_by_1_5kb_bare_cel", |b| {
        b.iter(|| {
            let mut ctx = lien_cel::cel::Context::with_env(lien_cel::env());
            ctx.add_variable_from_value("self", lien_cel::json_to_cel(std::hint::black_box(&pv)));
            bare.execute(&ctx)
        })
    });
    let name =
        lien_cel::Expression::compile("spec.keys.of", "[self.metadata.name]").expect("compiles");
    c.bench_function("name_only_1_5kb", |b| {
        b.iter(|| name.eval_strings(std::hint::black_box(&pv)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
