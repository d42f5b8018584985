//! `pods/eviction` (`pkg/registry/core/pod/storage/eviction.go`): POSTing a `policy/v1`
//! Eviction deletes the pod unless a PodDisruptionBudget forbids it, as kube-apiserver decides:
//!
//! - a pod that is `Pending`, `Succeeded`, `Failed` or already being deleted is deleted without
//!   looking at budgets (`canIgnorePDB`);
//! - otherwise the PodDisruptionBudgets of its namespace whose selector matches its labels are
//!   found (an empty selector matches every pod, a missing one none); more than one is a 500;
//! - with one: a budget its controller has not yet observed (`status.observedGeneration` below
//!   `metadata.generation`) or with `status.disruptionsAllowed` 0 refuses with 429
//!   TooManyRequests; a pod that is not Ready is deleted without spending the budget when the
//!   `unhealthyPodEvictionPolicy` allows it; otherwise `disruptionsAllowed` is decremented and
//!   the pod recorded in `disruptedPods` (through the PDB's status, as the registry's loopback
//!   client writes it), then the pod is deleted.
//!
//! The pod's DELETE is made straight at storage (the registry calls `store.Delete` with
//! `ValidateAllObjectFunc`): only the eviction's CREATE goes through admission, as
//! `policy/v1 Eviction` with subresource `eviction`. The answer is `Status{Success}`, 201.

use serde_json::{Value, json};

use super::options::{DeleteOptions, WriteOptions};
use super::server::{ApiServer, Target};
use crate::admission::Operation;
use crate::auth::UserInfo;
use crate::error::ApiError;
use crate::labels::Selector;

/// `MaxDisruptedPodSize`: a budget recording more disrupted pods than this refuses.
const MAX_DISRUPTED_PODS: usize = 2000;

fn too_many_requests(cause: String) -> ApiError {
    ApiError::new(
        429,
        "TooManyRequests",
        "Cannot evict pod as it would violate the pod's disruption budget.",
    )
    .with_details(json!({"causes": [{"reason": "DisruptionBudget", "message": cause}]}))
}

fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

impl ApiServer {
    /// `POST pods/NAME/eviction`.
    pub async fn evict(
        &self,
        t: &Target,
        eviction: Value,
        write: &WriteOptions,
    ) -> Result<Value, ApiError> {
        // The body is decoded as the subresource's type: a missing `apiVersion`/`kind` is
        // policy/v1 Eviction (kube-rs sends none), another kind is refused.
        let api_version = eviction["apiVersion"]
            .as_str()
            .unwrap_or("policy/v1")
            .to_string();
        let kind = eviction["kind"].as_str().unwrap_or("Eviction").to_string();
        if kind != "Eviction" || !matches!(api_version.as_str(), "policy/v1" | "policy/v1beta1") {
            return Err(ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type Eviction): {api_version}, Kind={kind}"
            )));
        }
        let mut eviction = eviction;
        eviction["apiVersion"] = json!(api_version);
        eviction["kind"] = json!("Eviction");
        if eviction["metadata"]["name"].as_str() != Some(t.name.as_str()) {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Eviction object",
            ));
        }
        let mut delete = DeleteOptions::new(write.user.clone());
        delete.write = write.clone();
        if eviction["deleteOptions"].is_object() {
            delete.merge_body(&eviction["deleteOptions"])?;
        }
        let pod = self.get(&t.clone().with_subresource(""))?;
        let options = write.options_object("CreateOptions");
        let mutated = self
            .mutate(
                Operation::Create,
                t,
                Some(&eviction),
                None,
                options.clone(),
                write,
            )
            .await?;
        let eviction = if mutated.changed {
            mutated.object.unwrap_or(eviction)
        } else {
            eviction
        };
        self.admit(Operation::Create, t, Some(&eviction), None, options, write)
            .await?;

        let phase = pod["status"]["phase"].as_str().unwrap_or_default();
        let ignore_budgets =
            matches!(phase, "Pending" | "Succeeded" | "Failed") || crate::object::is_deleting(&pod);
        if !ignore_budgets {
            self.spend_budget(t, &pod, write).await?;
        }
        let pod_target = t.clone().with_subresource("");
        self.delete_unadmitted(&pod_target, &delete).await?;
        Ok(
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "code": 201}),
        )
    }

    /// `checkAndDecrement`: refuses, or lets the eviction through (spending the budget when the
    /// pod counts towards it).
    async fn spend_budget(
        &self,
        t: &Target,
        pod: &Value,
        write: &WriteOptions,
    ) -> Result<(), ApiError> {
        let Some(rt) = self.resolve("policy", "v1", "poddisruptionbudgets") else {
            return Ok(());
        };
        for _ in 0..super::options::MAX_RETRIES {
            let budgets: Vec<Value> = self
                .store()
                .list(&rt.key(), Some(&t.namespace))
                .iter()
                .filter(|pdb| {
                    let selector = &pdb["spec"]["selector"];
                    !selector.is_null()
                        && Selector::from_label_selector(selector)
                            .is_ok_and(|s| s.matches_object(pod))
                })
                .map(|pdb| (**pdb).clone())
                .collect();
            let mut pdb = match budgets.as_slice() {
                [] => return Ok(()),
                [one] => one.clone(),
                _ => {
                    return Err(ApiError::internal(
                        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                    ));
                }
            };
            let name = pdb["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let status = &pdb["status"];
            let (desired, current) = (
                status["desiredHealthy"].as_i64().unwrap_or(0),
                status["currentHealthy"].as_i64().unwrap_or(0),
            );
            if !is_ready(pod) {
                // An unready pod does not count towards the budget: evicting it spends
                // nothing when the policy says so.
                let always = pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow";
                if always || (current >= desired && desired > 0) {
                    return Ok(());
                }
            }
            if status["observedGeneration"].as_i64().unwrap_or(0)
                < pdb["metadata"]["generation"].as_i64().unwrap_or(0)
            {
                return Err(too_many_requests(format!(
                    "The disruption budget {name} is still being processed by the server."
                )));
            }
            let allowed = status["disruptionsAllowed"].as_i64().unwrap_or(0);
            if allowed < 0 {
                return Err(ApiError::new(
                    403,
                    "Forbidden",
                    "pdb disruptions allowed is negative",
                ));
            }
            if status["disruptedPods"]
                .as_object()
                .is_some_and(|d| d.len() > MAX_DISRUPTED_PODS)
            {
                return Err(ApiError::new(
                    403,
                    "Forbidden",
                    "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
                ));
            }
            if allowed == 0 {
                return Err(too_many_requests(format!(
                    "The disruption budget {name} needs {desired} healthy pods and has {current} currently"
                )));
            }
            if write.dry_run {
                return Ok(());
            }
            pdb["status"]["disruptionsAllowed"] = json!(allowed - 1);
            if !pdb["status"]["disruptedPods"].is_object() {
                pdb["status"]["disruptedPods"] = json!({});
            }
            pdb["status"]["disruptedPods"][t.name.as_str()] = json!(crate::object::now());
            let status_target =
                Target::new(rt.clone(), "v1", &t.namespace, &name).with_subresource("status");
            // The registry writes it through its loopback client, as the API server itself.
            let loopback = WriteOptions::as_user(UserInfo::new(
                "system:apiserver",
                "",
                &["system:masters", "system:authenticated"],
            ));
            match self.update(&status_target, pdb, &loopback).await {
                Ok(_) => return Ok(()),
                // The budget changed meanwhile: decide again on what it is now.
                Err(e) if e.code == 409 => continue,
                Err(e) => return Err(e),
            }
        }
        Err(too_many_requests(
            "The disruption budget changed too often to be checked.".to_string(),
        ))
    }
}
