//! CREATE of `pods/eviction`: the Eviction API deletes a pod without admitting a DELETE —
//! kube-apiserver's eviction REST (`pkg/registry/core/pod/storage/eviction.go`) calls the pod
//! store's `Delete` with `rest.ValidateAllObjectFunc`, so `delete.lien.dev` never sees it. What
//! is admitted is the Eviction's CREATE, with the Eviction (not the pod) as the object: its
//! labels are the Eviction's, so no object selector can pick the pods in use, and the hook
//! (`evictions.lien.dev`) receives every eviction and decides it from the index here.
//!
//! A pod in use is refused with `429 TooManyRequests`, as a PodDisruptionBudget refuses: what
//! `kubectl drain` and the cluster autoscaler read as "not now, retry" — a drain waits for the
//! lien to be lifted instead of failing — with Lien's refusal text after "cannot evict". The pod's
//! UID is not in the review, so every relation of the name blocks (when unsure, protect).
//! Nothing is recorded: an eviction is not a DELETE to replay.

use lien_core::{Decision, ObjectKey, RelationIndex, decide_delete, render_refusal};

use super::{Outcome, Policy};
use crate::review::Request;

/// Whether the review is a CREATE of `pods/eviction`.
pub fn is_eviction(req: &Request<'_>) -> bool {
    req.resource.group.is_empty()
        && req.resource.resource == "pods"
        && req.sub_resource.as_deref() == Some("eviction")
}

/// The index lookup of an eviction (the only part that needs the lock).
pub fn decide_eviction(index: &RelationIndex, req: &Request<'_>) -> Result<Decision, String> {
    let Some(ns) = req.namespace.as_deref().filter(|ns| !ns.is_empty()) else {
        return Err("request.namespace: an eviction names its pod's namespace".to_owned());
    };
    if req.name.is_empty() {
        return Err("request.name: an eviction names its pod".to_owned());
    }
    let pod = ObjectKey::new("", "Pod", Some(ns), req.name.as_ref());
    Ok(decide_delete(index, &pod, None))
}

/// The answer to an eviction, from [`decide_eviction`]: allowed, or 429 with the refusal.
pub fn finish_eviction(decision: Result<Decision, String>, policy: &Policy) -> Outcome {
    match decision {
        Err(e) => Outcome::invalid(e),
        Ok(Decision::Allowed) => Outcome::allow(),
        Ok(warned @ Decision::Warned { .. }) => Outcome::warned(&warned, policy),
        Ok(denied) => {
            // An eviction is never recorded, so nothing is replayed: say how to ask for it.
            let refusal = render_refusal(&denied, policy.max_listed, false);
            Outcome::deny(429, "TooManyRequests", format!("cannot evict: {refusal}"))
        }
    }
}
