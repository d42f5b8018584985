//! Issue 8's rule decision, shared by the benchmark and the instruction-count example: a webhook
//! whose index holds one DependencyRule's 100,000 relations (1,000 CephBlockPools, 100
//! PersistentVolumes each: `rook_pools` in the core bench fixture), and the DELETE reviews of
//! its pools.

#![allow(dead_code)]

use std::sync::Arc;

use lien_webhook::Webhook;
use parking_lot::RwLock;

#[path = "../../../core/benches/fixture/mod.rs"]
mod fixture;

pub use fixture::rook_pools;

/// The webhook over an index holding the rule's 100,000 relations (replay on).
pub fn webhook() -> Webhook {
    let mut index = lien_core::RelationIndex::new();
    index
        .apply(
            &lien_core::Source::rule(rook_pools::RULE),
            rook_pools::relations(),
        )
        .expect("valid");
    Webhook::builder(Arc::new(RwLock::new(index)))
        .ready(true)
        .build()
}

/// The probes: the DELETE reviews of every 7th pool (143 of the 1,000).
pub fn bodies() -> Vec<Vec<u8>> {
    (0..rook_pools::POOLS).step_by(7).map(pool_review).collect()
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
                    "name": name, "namespace": "rook-ceph", "uid": rook_pools::uuid(p),
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
