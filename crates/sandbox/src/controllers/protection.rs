//! Storage object in-use protection, as a cluster has it: the `StorageObjectInUseProtection`
//! admission plugin puts `kubernetes.io/pvc-protection` on every new PersistentVolumeClaim and
//! `kubernetes.io/pv-protection` on every new PersistentVolume (done at create, in their
//! strategies), and kube-controller-manager's two protection controllers take the finalizer off
//! a deleted one once nothing uses it (`pkg/controller/volume/pvcprotection`,
//! `pkg/controller/volume/pvprotection`):
//!
//! - a claim is in use while a *scheduled* pod of its namespace (`spec.nodeName` set: kubelet
//!   only starts scheduled pods, and refuses a claim being deleted) names it in a
//!   `persistentVolumeClaim` volume, or a running pod's generic ephemeral volume made it;
//! - a volume is in use while it is `Bound`.
//!
//! So a deleted PVC a pod mounts waits, Terminating, until the pod goes — the wait Lien's users
//! see on a cluster, now seen by Lien's tests on the sandbox too.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;

use super::queue::{self, Reconciler, Synced, WorkQueue};
use super::target_of;
use crate::apiserver::{ApiServer, WriteOptions};
use crate::auth::UserInfo;
use crate::error::ApiError;
use crate::object::{has_finalizer, is_deleting};
use crate::store::Change;

pub const PVC_FINALIZER: &str = "kubernetes.io/pvc-protection";
pub const PV_FINALIZER: &str = "kubernetes.io/pv-protection";

fn claims() -> crate::registry::ResourceKey {
    (String::new(), "persistentvolumeclaims".to_string())
}

fn volumes() -> crate::registry::ResourceKey {
    (String::new(), "persistentvolumes".to_string())
}

fn pods() -> crate::registry::ResourceKey {
    (String::new(), "pods".to_string())
}

pub async fn run(server: Arc<ApiServer>, feed: UnboundedReceiver<Arc<Change>>) {
    let mut queue = WorkQueue::new(
        std::time::Duration::from_millis(5),
        std::time::Duration::from_secs(60),
    );
    // What was deleting before this controller subscribed.
    let items: Vec<String> = {
        let store = server.store();
        let claims = store.list(&claims(), None);
        let volumes = store.list(&volumes(), None);
        claims
            .iter()
            .map(|c| claim_item(c))
            .chain(volumes.iter().map(|v| volume_item(v)))
            .collect()
    };
    for item in items {
        queue.add(&item);
    }
    queue::run(Protection { server }, queue, feed).await
}

fn claim_item(pvc: &Value) -> String {
    format!(
        "pvc/{}/{}",
        pvc["metadata"]["namespace"].as_str().unwrap_or_default(),
        pvc["metadata"]["name"].as_str().unwrap_or_default()
    )
}

fn volume_item(pv: &Value) -> String {
    format!("pv/{}", pv["metadata"]["name"].as_str().unwrap_or_default())
}

/// `podIsShutDown`: a pod that finished or is going (and has no containers left) uses nothing.
fn shut_down(pod: &Value) -> bool {
    matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    )
}

/// `podUsesPVC`: a scheduled pod naming the claim, directly or as its generic ephemeral volume.
fn uses(pod: &Value, claim: &str) -> bool {
    if pod["spec"]["nodeName"].as_str().is_none_or(str::is_empty) {
        return false;
    }
    let pod_name = pod["metadata"]["name"].as_str().unwrap_or_default();
    pod["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|v| {
            v["persistentVolumeClaim"]["claimName"].as_str() == Some(claim)
                || (!v["ephemeral"].is_null()
                    && !shut_down(pod)
                    && format!("{pod_name}-{}", v["name"].as_str().unwrap_or_default()) == claim)
        })
}

struct Protection {
    server: Arc<ApiServer>,
}

impl Protection {
    /// The claim's finalizer off, as the controller's service account writes it.
    async fn release(
        &self,
        resource: &crate::registry::ResourceKey,
        object: &Value,
        finalizer: &str,
        controller: &str,
    ) -> Result<Synced, ApiError> {
        let Some(target) = target_of(&self.server, resource, object) else {
            return Ok(Synced::Done);
        };
        let updated = super::without_finalizer(object, finalizer);
        let mut w = WriteOptions::as_user(UserInfo::service_account("kube-system", controller));
        w.field_manager = "kube-controller-manager".to_string();
        match self.server.update(&target, updated, &w).await {
            Ok(_) => Ok(Synced::Done),
            // Gone or changed meanwhile: that change enqueued it again.
            Err(e) if matches!(e.code, 404 | 409) => Ok(Synced::Done),
            Err(e) => Err(e),
        }
    }
}

impl Reconciler for Protection {
    const NAME: &'static str = "storage-object-in-use-protection";

    fn observe(&self, change: &Change, queue: &mut WorkQueue) {
        if change.resource == claims() {
            queue.add(&claim_item(&change.object));
        } else if change.resource == volumes() {
            queue.add(&volume_item(&change.object));
        } else if change.resource == pods() {
            // A pod that changed or went may have been what held a claim.
            let ns = change.object["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default();
            for pod in std::iter::once(&change.object).chain(change.old.as_ref()) {
                for v in pod["spec"]["volumes"].as_array().into_iter().flatten() {
                    if let Some(claim) = v["persistentVolumeClaim"]["claimName"].as_str() {
                        queue.add(&format!("pvc/{ns}/{claim}"));
                    } else if !v["ephemeral"].is_null() {
                        let pod_name = pod["metadata"]["name"].as_str().unwrap_or_default();
                        let volume = v["name"].as_str().unwrap_or_default();
                        queue.add(&format!("pvc/{ns}/{pod_name}-{volume}"));
                    }
                }
            }
        }
    }

    async fn sync(&self, item: &str, _: &mut WorkQueue) -> Result<Synced, ApiError> {
        let store_key = |ns: &str, name: &str| (ns.to_string(), name.to_string());
        if let Some(rest) = item.strip_prefix("pvc/") {
            let Some((ns, name)) = rest.split_once('/') else {
                return Ok(Synced::Done);
            };
            let (pvc, in_use) = {
                let store = self.server.store();
                let Some(pvc) = store.get(&claims(), &store_key(ns, name)) else {
                    return Ok(Synced::Done);
                };
                let in_use = store.list(&pods(), Some(ns)).iter().any(|p| uses(p, name));
                (pvc, in_use)
            };
            if !is_deleting(&pvc) || !has_finalizer(&pvc, PVC_FINALIZER) || in_use {
                return Ok(Synced::Done);
            }
            return self
                .release(&claims(), &pvc, PVC_FINALIZER, "pvc-protection-controller")
                .await;
        }
        if let Some(name) = item.strip_prefix("pv/") {
            let Some(pv) = self.server.store().get(&volumes(), &store_key("", name)) else {
                return Ok(Synced::Done);
            };
            let bound = pv["status"]["phase"].as_str() == Some("Bound");
            if !is_deleting(&pv) || !has_finalizer(&pv, PV_FINALIZER) || bound {
                return Ok(Synced::Done);
            }
            return self
                .release(&volumes(), &pv, PV_FINALIZER, "pv-protection-controller")
                .await;
        }
        Ok(Synced::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_scheduled_pod_naming_the_claim_uses_it() {
        let pod = |node: Option<&str>| {
            json!({"metadata": {"name": "p", "namespace": "ns"},
                   "spec": {"nodeName": node, "volumes": [
                       {"name": "data", "persistentVolumeClaim": {"claimName": "db"}},
                       {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}]}})
        };
        assert!(uses(&pod(Some("node-1")), "db"));
        assert!(uses(&pod(Some("node-1")), "p-scratch"));
        assert!(!uses(&pod(Some("node-1")), "other"));
        assert!(
            !uses(&pod(None), "db"),
            "kubelet starts only scheduled pods"
        );
    }
}
