//! `POST pods/NAME/binding`: what a scheduler writes to put a pod on a node (k/k
//! `pkg/registry/core/pod/storage/storage.go` `BindingREST`). Nothing schedules in the sandbox,
//! but a client that binds a pod itself gets kube-apiserver's answers: the node set once, the
//! `PodScheduled` condition, `201 Success`, and a conflict for a pod already bound or going.
//!
//! Like kube's `assignPod`, the write goes to storage directly: the pod's update validation and
//! admission are not run (the pod's spec may change only here), and no field manager records it.
//! Not done: admission webhooks registered for `pods/binding` are not called for the Binding.

use serde_json::{Value, json};

use super::options::WriteOptions;
use super::server::{ApiServer, Target};
use crate::error::ApiError;
use crate::schema::field;

impl ApiServer {
    /// Binds the pod `t` names (`t` addresses `pods/NAME/binding`) to the binding's target node.
    pub fn bind(
        &self,
        t: &Target,
        binding: &Value,
        write: &WriteOptions,
    ) -> Result<Value, ApiError> {
        if binding["metadata"]["name"].as_str() != Some(t.name.as_str()) {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Binding object",
            ));
        }
        // `ValidatePodBinding`.
        let mut causes = Vec::new();
        let kind = binding["target"]["kind"].as_str().unwrap_or_default();
        if !kind.is_empty() && kind != "Node" {
            causes.push(field::not_supported(
                "target.kind",
                &json!(kind),
                &["Node".to_string(), "<empty>".to_string()],
            ));
        }
        let node = binding["target"]["name"].as_str().unwrap_or_default();
        if node.is_empty() {
            causes.push(field::required("target.name", ""));
        }
        if !causes.is_empty() {
            return Err(ApiError::invalid("", "Binding", &t.name, causes));
        }
        let pod_target = Target::new(t.resource.clone(), &t.version, &t.namespace, &t.name);
        let conflict = |why: String| ApiError::conflict("", "pods/binding", &t.name, &why);
        let mut store = self.store();
        let key = t.resource.key();
        let current = store
            .get(&key, &pod_target.object_key())
            .ok_or_else(|| pod_target.not_found())?;
        // `setPodHostAndAnnotations`.
        if !current["metadata"]["deletionTimestamp"].is_null() {
            return Err(conflict(format!(
                "pod {} is being deleted, cannot be assigned to a host",
                t.name
            )));
        }
        if let Some(bound) = current["spec"]["nodeName"]
            .as_str()
            .filter(|n| !n.is_empty())
        {
            return Err(conflict(format!(
                "pod {} is already assigned to node \"{bound}\"",
                t.name
            )));
        }
        if current["spec"]["schedulingGates"]
            .as_array()
            .is_some_and(|g| !g.is_empty())
        {
            return Err(conflict(format!(
                "pod {} has non-empty .spec.schedulingGates",
                t.name
            )));
        }
        if !write.dry_run {
            let mut pod = (*current).clone();
            pod["spec"]["nodeName"] = json!(node);
            if let Some(annotations) = binding["metadata"]["annotations"].as_object() {
                for (k, v) in annotations {
                    pod["metadata"]["annotations"][k] = v.clone();
                }
            }
            scheduled(&mut pod["status"]);
            store.replace(&key, pod);
        }
        Ok(
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        )
    }
}

/// `podutil.UpdatePodCondition` with `PodScheduled: True`: the transition time moves only when
/// the status does.
fn scheduled(status: &mut Value) {
    let now = crate::object::now();
    if !status["conditions"].is_array() {
        status["conditions"] = json!([]);
    }
    let Some(conditions) = status["conditions"].as_array_mut() else {
        return;
    };
    match conditions.iter_mut().find(|c| c["type"] == "PodScheduled") {
        Some(c) if c["status"] == "True" => {}
        Some(c) => {
            c["status"] = json!("True");
            c["lastTransitionTime"] = json!(now);
        }
        None => conditions.push(json!({
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": null,
            "lastTransitionTime": now,
        })),
    }
}
