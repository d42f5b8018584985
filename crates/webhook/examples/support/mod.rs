//! Shared by the benchmark and the instruction-count example: a webhook over an index of `n`
//! relations in which the fixtures' Deployments are in use.

#![allow(dead_code)]

use std::sync::Arc;

use lien_core::{ObjectKey, Relation, RelationIndex, Source};
use lien_webhook::Webhook;
use parking_lot::RwLock;

/// (name, file) of the DELETE reviews measured.
pub const FIXTURES: [(&str, &str); 2] = [
    ("5k", "delete-deployment-5k.json"),
    ("20k", "delete-deployment-20k.json"),
];

pub fn fixture(file: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `n` relations: sources of 10 relations each, spread over 100 namespaces; plus three users of
/// each fixture's Deployment.
pub fn index(n: usize) -> RelationIndex {
    let mut idx = RelationIndex::new();
    let per_source = 10;
    for s in 0..n / per_source {
        let ns = format!("team-{:03}", s % 100);
        let source = Source::usage(ns.clone(), format!("usage-{s}"));
        let relations = (0..per_source).map(|r| {
            let of = ObjectKey::new("", "ConfigMap", Some(&ns), format!("cm-{s}-{r}"));
            let by = ObjectKey::new("apps", "Deployment", Some(&ns), format!("app-{s}"));
            Relation::uses(source.clone(), of, by).with_reason("reads its configuration")
        });
        idx.apply(&source, relations).expect("apply");
    }
    for target in ["web-5k", "web-20k"] {
        let of = ObjectKey::new("apps", "Deployment", Some("fixtures"), target);
        for u in 0..3 {
            let source = Source::usage("fixtures", format!("{target}-user-{u}"));
            let by = ObjectKey::new(
                "helm.example.io",
                "Release",
                Some("fixtures"),
                format!("r{u}"),
            );
            idx.apply(
                &source,
                [
                    Relation::uses(source.clone(), of.clone(), by)
                        .with_reason("serves the release"),
                ],
            )
            .expect("apply");
        }
    }
    idx
}

pub fn webhook(n: usize) -> Webhook {
    Webhook::builder(Arc::new(RwLock::new(index(n))))
        .ready(true)
        .build()
}

/// Three Helm releases use the 5 KB fixture's Deployment `fixtures/web-5k`, so that its DELETE
/// review is refused.
pub fn use_web_5k(idx: &mut RelationIndex) -> Result<(), lien_core::IndexError> {
    let of = ObjectKey::new("apps", "Deployment", Some("fixtures"), "web-5k");
    for u in 0..3 {
        let source = Source::usage("fixtures", format!("web-5k-user-{u}"));
        let by = ObjectKey::new(
            "helm.example.io",
            "Release",
            Some("fixtures"),
            format!("r{u}"),
        );
        let relation =
            Relation::uses(source.clone(), of.clone(), by).with_reason("serves the release");
        idx.apply(&source, [relation])?;
    }
    Ok(())
}

/// Issue 8's case: the index one DependencyRule derives for 1,000 CephBlockPools (namespace
/// `rook-ceph`) and 100,000 cluster-scoped PersistentVolumes, 100 per pool, replay on.
pub const POOLS: usize = 1_000;
pub const PVS_PER_POOL: usize = 100;

fn pool_uid(p: usize) -> String {
    format!("{p:08x}-0000-4000-8000-000000000000")
}

pub fn rule_webhook() -> Webhook {
    let rule = Source::rule("rook-blockpool-used-by-pv");
    let relations = (0..POOLS * PVS_PER_POOL).map(|i| {
        let p = i / PVS_PER_POOL;
        let pool = ObjectKey::new(
            "ceph.rook.io",
            "CephBlockPool",
            Some("rook-ceph"),
            format!("pool-{p:04}"),
        );
        let pv = ObjectKey::new(
            "",
            "PersistentVolume",
            None,
            format!("pvc-{i:08x}-5c1f-4a9e-b7a0"),
        );
        Relation::uses(rule.clone(), pool, pv)
            .with_reason("the volume's data lives in this pool (spec.csi.volumeAttributes.pool)")
            .with_replay(true)
            .with_uids(Some(&pool_uid(p)), Some(&pool_uid(1_000_000 + i)))
    });
    let mut idx = RelationIndex::new();
    idx.apply(&rule, relations).expect("apply");
    assert_eq!(idx.len(), POOLS * PVS_PER_POOL);
    Webhook::builder(Arc::new(RwLock::new(idx)))
        .ready(true)
        .build()
}

/// The DELETE review of CephBlockPool `rook-ceph/pool-<p>` as kube-apiserver sends it
/// (compact JSON, the pool with Rook's status and one managedFields entry: ~1.5 KB).
pub fn pool_review(p: usize) -> Vec<u8> {
    let name = format!("pool-{p:04}");
    let review = serde_json::json!({
        "kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": format!("{p:08x}-1111-4000-8000-000000000000"),
            "kind": {"group": "ceph.rook.io", "version": "v1", "kind": "CephBlockPool"},
            "resource": {"group": "ceph.rook.io", "version": "v1", "resource": "cephblockpools"},
            "requestKind": {"group": "ceph.rook.io", "version": "v1", "kind": "CephBlockPool"},
            "requestResource": {"group": "ceph.rook.io", "version": "v1", "resource": "cephblockpools"},
            "name": name, "namespace": "rook-ceph", "operation": "DELETE",
            "userInfo": {"username": "alice", "uid": "alice-uid",
                         "groups": ["platform", "system:authenticated"]},
            "object": null,
            "oldObject": {
                "apiVersion": "ceph.rook.io/v1", "kind": "CephBlockPool",
                "metadata": {
                    "name": name, "namespace": "rook-ceph", "uid": pool_uid(p),
                    "labels": {"lien.dev/in-use": "true"},
                    "finalizers": ["cephblockpool.ceph.rook.io"],
                    "creationTimestamp": "2026-11-23T17:03:41Z", "generation": 1,
                    "resourceVersion": "123456",
                    "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update",
                        "apiVersion": "ceph.rook.io/v1", "time": "2026-11-23T17:03:41Z",
                        "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {".": {},
                        "f:failureDomain": {}, "f:replicated": {".": {}, "f:size": {}}}}}]
                },
                "spec": {"failureDomain": "host", "replicated": {"size": 3,
                         "requireSafeReplicaSize": true}, "mirroring": {"enabled": false}},
                "status": {"phase": "Ready", "observedGeneration": 1,
                           "info": {"type": "Replicated", "failureDomain": "host"}}
            },
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions",
                        "propagationPolicy": "Background"}
        }
    });
    serde_json::to_vec(&review).expect("a review")
}
