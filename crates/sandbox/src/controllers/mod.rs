//! The controllers kube-controller-manager and kube-apiserver run that deletion depends on: the
//! garbage collector, the namespace controller, the CRD controllers (establish, clean up), and
//! the serviceaccounts and root-ca-cert-publisher controllers (`bootstrap`), and the
//! clusterrole-aggregation controller (`aggregation`) the default roles depend on, and the
//! PVC and PV protection controllers (`protection`).
//!
//! Each is fed every change from the store (never dropped), keeps a work queue with per-item
//! exponential backoff (client-go's `ItemExponentialFailureRateLimiter`), and acts through the
//! API server's own verbs as its real service account, so admission sees what it would see in a
//! cluster.

pub mod aggregation;
pub mod bootstrap;
pub mod crds;
pub mod gc;
pub mod namespaces;
pub mod protection;
mod queue;

use std::sync::Arc;

use crate::apiserver::{ApiServer, Target};
use crate::registry::ResourceKey;

/// Starts the controllers; they stop when the returned handles are aborted.
pub fn spawn_all(server: &Arc<ApiServer>) -> Vec<tokio::task::JoinHandle<()>> {
    vec![
        tokio::spawn(gc::run(server.clone(), server.controller_feed())),
        tokio::spawn(namespaces::run(server.clone(), server.controller_feed())),
        tokio::spawn(crds::run(server.clone(), server.controller_feed())),
        tokio::spawn(aggregation::run(server.clone(), server.controller_feed())),
        tokio::spawn(protection::run(server.clone(), server.controller_feed())),
    ]
}

/// Starts the namespace bootstrap controller, which publishes `ca_pem` (the cluster's CA) in
/// every namespace.
pub fn spawn_bootstrap(server: &Arc<ApiServer>, ca_pem: &str) -> tokio::task::JoinHandle<()> {
    tokio::spawn(bootstrap::run(
        server.clone(),
        ca_pem.to_string(),
        server.controller_feed(),
    ))
}

/// The object with one finalizer taken off, for a controller's update.
pub(crate) fn without_finalizer(object: &serde_json::Value, finalizer: &str) -> serde_json::Value {
    let mut updated = object.clone();
    let kept: Vec<String> = crate::object::finalizers(object)
        .into_iter()
        .filter(|f| f != finalizer)
        .collect();
    updated["metadata"]["finalizers"] = serde_json::json!(kept);
    updated
}

/// The API address of a stored object, at its resource's storage version.
pub(crate) fn target_of(
    server: &ApiServer,
    resource: &ResourceKey,
    object: &serde_json::Value,
) -> Option<Target> {
    let rt = server.registry().get(&resource.0, &resource.1)?.clone();
    let version = rt.storage_version().to_string();
    let meta = &object["metadata"];
    Some(Target::new(
        rt,
        &version,
        meta["namespace"].as_str().unwrap_or_default(),
        meta["name"].as_str().unwrap_or_default(),
    ))
}
