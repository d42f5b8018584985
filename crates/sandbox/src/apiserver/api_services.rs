//! The APIService objects kube-apiserver's aggregator registers for the API groups it serves
//! itself: one per built-in group version, labelled `onstart` (the `autoregister` controller,
//! with the priorities of `pkg/controlplane/apiserver/aggregator.go`), and one per version a
//! CRD serves, labelled `true` (the `crdregistration` controller), removed when no CRD serves
//! it any more. All are "Local" and always available; `kubectl get apiservices` lists them.

use serde_json::{Value, json};

use super::server::ApiServer;
use crate::object::now;
use crate::registry::ResourceType;

const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

/// Group, version, `groupPriorityMinimum`, `versionPriority`: the built-in group versions
/// kube-apiserver v1.32.13 registers (read from its `kubectl get apiservices`). A group version
/// the sandbox serves that is not listed gets none, as the aggregator skips those without a
/// priority.
const BUILT_IN: [(&str, &str, i64, i64); 20] = [
    ("", "v1", 18000, 1),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("apps", "v1", 17800, 15),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("autoscaling", "v1", 17500, 15),
    ("autoscaling", "v2", 17500, 30),
    ("batch", "v1", 17400, 15),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("events.k8s.io", "v1", 17750, 15),
    ("flowcontrol.apiserver.k8s.io", "v1", 16100, 21),
    ("networking.k8s.io", "v1", 17200, 15),
    ("node.k8s.io", "v1", 16300, 15),
    ("policy", "v1", 17100, 15),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("storage.k8s.io", "v1", 16800, 15),
];

/// `crdregistration`: every version of every CRD ranks below the built-in groups.
const CRD_GROUP_PRIORITY: i64 = 1000;
const CRD_VERSION_PRIORITY: i64 = 100;

/// The object name kube gives a group version's APIService: `v1.apps`, `v1.` for the core group.
fn name(group: &str, version: &str) -> String {
    format!("{version}.{group}")
}

fn api_service(group: &str, version: &str, priorities: (i64, i64), managed: &str) -> Value {
    let mut spec = json!({
        "group": group,
        "version": version,
        "groupPriorityMinimum": priorities.0,
        "versionPriority": priorities.1,
    });
    if group.is_empty() {
        // Go's `omitempty` on the core group's empty name.
        spec.as_object_mut().map(|s| s.remove("group"));
    }
    // Written by the server itself, as kube's controllers write them: no managedFields, and
    // a name (`v1.` for the core group) that a client's create would not pass.
    json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {
            "name": name(group, version),
            "uid": uuid::Uuid::new_v4().to_string(),
            "creationTimestamp": now(),
            "labels": {AUTOMANAGED: managed},
        },
        "spec": spec,
        "status": {"conditions": [{
            "type": "Available",
            "status": "True",
            "reason": "Local",
            "message": "Local APIServices are always available",
            "lastTransitionTime": now(),
        }]},
    })
}

impl ApiServer {
    fn api_service_type(&self) -> Option<std::sync::Arc<ResourceType>> {
        self.registry()
            .get("apiregistration.k8s.io", "apiservices")
            .cloned()
    }

    /// The built-in group versions' APIServices, as the server starts.
    pub(super) fn bootstrap_api_services(&self) {
        let Some(rt) = self.api_service_type() else {
            return;
        };
        let served: Vec<(String, String)> = self
            .registry()
            .all()
            .filter(|r| !r.is_custom())
            .flat_map(|r| {
                r.versions
                    .iter()
                    .map(|v| (r.group.clone(), v.name.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
        let mut store = self.store();
        for (group, version, group_priority, version_priority) in BUILT_IN {
            if !served.iter().any(|(g, v)| g == group && v == version) {
                continue;
            }
            let object = api_service(
                group,
                version,
                (group_priority, version_priority),
                "onstart",
            );
            store.insert(&rt.key(), Self::to_storage(&rt, object));
        }
    }

    /// After a CRD is written or gone: an APIService for every group version a CRD serves and
    /// no built-in one does, and none left for a group version no CRD serves any more.
    pub(crate) fn sync_crd_api_services(&self) {
        let Some(rt) = self.api_service_type() else {
            return;
        };
        let mut wanted: Vec<String> = self
            .registry()
            .all()
            .filter(|r| r.is_custom())
            .flat_map(|r| {
                r.versions
                    .iter()
                    .map(|v| name(&r.group, &v.name))
                    .collect::<Vec<_>>()
            })
            .collect();
        wanted.sort();
        wanted.dedup();
        let key = rt.key();
        let mut store = self.store();
        let existing: Vec<String> = store
            .list(&key, None)
            .iter()
            .filter(|o| o["metadata"]["labels"][AUTOMANAGED] == "true")
            .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        for gone in existing.iter().filter(|n| !wanted.contains(n)) {
            store.remove(&key, &(String::new(), gone.clone()));
        }
        for missing in wanted.iter().filter(|n| !existing.contains(n)) {
            if store.get(&key, &(String::new(), missing.clone())).is_some() {
                continue; // a built-in or hand-made APIService of that name stays
            }
            let Some((version, group)) = missing.split_once('.') else {
                continue;
            };
            let object = api_service(
                group,
                version,
                (CRD_GROUP_PRIORITY, CRD_VERSION_PRIORITY),
                "true",
            );
            store.insert(&key, Self::to_storage(&rt, object));
        }
    }
}
