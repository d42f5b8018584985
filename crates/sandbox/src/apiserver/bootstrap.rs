//! What kube-apiserver creates as it starts (its post-start hooks) and keeps while it serves:
//! the namespaces every cluster has, the bootstrap RBAC policy, the system PriorityClasses, the
//! `kubernetes` Service and its endpoints, the APIServices of the groups it serves
//! (`api_services`).

use super::server::ApiServer;
use super::{meta, services};

/// `scheduling.SystemCriticalPriority`: the value of `system-cluster-critical`.
const SYSTEM_CRITICAL_PRIORITY: i64 = 2_000_000_000;

impl ApiServer {
    /// What kube-apiserver's post-start hooks create whatever the authorization mode: the
    /// namespaces every cluster starts with, the bootstrap roles (`rbac/bootstrap-roles`: the
    /// RBAC API is served, and its default roles exist, under any authorizer) and the system
    /// PriorityClasses (`scheduling/bootstrap-system-priority-classes`).
    pub(super) fn bootstrap(&self) {
        self.bootstrap_rbac();
        self.bootstrap_priority_classes();
        self.bootstrap_namespaces();
        self.bootstrap_api_services();
    }

    /// `pkg/registry/scheduling/rest/storage_scheduling.go` `AddSystemPriorityClasses`, with
    /// `SetDefaults_PriorityClass`'s `preemptionPolicy`; `globalDefault` is false, so absent
    /// (`omitempty`).
    fn bootstrap_priority_classes(&self) {
        let Some(rt) = self
            .registry()
            .get("scheduling.k8s.io", "priorityclasses")
            .cloned()
        else {
            return;
        };
        let mut store = self.store();
        for (name, value, description) in [
            (
                "system-node-critical",
                SYSTEM_CRITICAL_PRIORITY + 1000,
                "Used for system critical pods that must not be moved from their current node.",
            ),
            (
                "system-cluster-critical",
                SYSTEM_CRITICAL_PRIORITY,
                "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
            ),
        ] {
            let mut pc = serde_json::json!({
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
                "description": description,
                "preemptionPolicy": "PreemptLowerPriority",
            });
            if meta::prepare_create(&rt, "", &mut pc).is_ok() {
                store.insert(&rt.key(), Self::to_storage(&rt, pc));
            }
        }
    }

    /// What kube-apiserver's endpoint reconciler (`pkg/controlplane/reconcilers`, through
    /// `EndpointsAdapter`) keeps for the `kubernetes` Service once it serves: the Endpoints
    /// `kubernetes` in `default` (with `endpointslice.kubernetes.io/skip-mirror`, as the
    /// adapter writes its EndpointSlice itself) and that EndpointSlice, both at the address and
    /// port it serves on; the Service's `targetPort` is that port too.
    pub fn publish_endpoints(&self, addr: std::net::SocketAddr) {
        let _ = self.serving.set(addr);
        let (ip, port) = (addr.ip().to_string(), addr.port());
        let registry = self.registry();
        let (Some(svc_rt), Some(ep_rt), Some(slice_rt)) = (
            registry.get("", "services").cloned(),
            registry.get("", "endpoints").cloned(),
            registry.get("discovery.k8s.io", "endpointslices").cloned(),
        ) else {
            return;
        };
        drop(registry);
        let mut store = self.store();
        let key = ("default".to_string(), "kubernetes".to_string());
        if let Some(svc) = store.get(&svc_rt.key(), &key) {
            let mut svc = (*svc).clone();
            svc["spec"]["ports"][0]["targetPort"] = serde_json::json!(port);
            store.replace(&svc_rt.key(), svc);
        }
        let mut endpoints = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": "kubernetes",
                "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": [{"addresses": [{"ip": ip}],
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}],
        });
        if meta::prepare_create(&ep_rt, "default", &mut endpoints).is_ok() {
            store.insert(&ep_rt.key(), Self::to_storage(&ep_rt, endpoints));
        }
        let mut slice = serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": "kubernetes",
                "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": true}}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        });
        if meta::prepare_create(&slice_rt, "default", &mut slice).is_ok() {
            store.insert(&slice_rt.key(), Self::to_storage(&slice_rt, slice));
        }
    }

    fn bootstrap_rbac(&self) {
        let objects: Vec<_> = crate::authz::bootstrap_policy()
            .into_iter()
            .filter_map(|(plural, object)| {
                let rt = self
                    .registry()
                    .get(crate::authz::RBAC_GROUP, plural)
                    .cloned()?;
                Some((rt, object))
            })
            .collect();
        let mut store = self.store();
        for (rt, mut object) in objects {
            if meta::prepare_create(&rt, "", &mut object).is_ok() {
                store.insert(&rt.key(), Self::to_storage(&rt, object));
            }
        }
    }

    fn bootstrap_namespaces(&self) {
        let Some(rt) = self.registry().get("", "namespaces").cloned() else {
            return;
        };
        let key = rt.key();
        let mut store = self.store();
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let mut ns = serde_json::json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name},
            });
            if meta::prepare_create(&rt, "", &mut ns).is_ok() {
                crate::strategy::default_on_create(&rt, &mut ns);
                store.insert(&key, Self::to_storage(&rt, ns));
            }
        }
        drop(store);
        self.bootstrap_kubernetes_service();
    }

    /// The `kubernetes` Service kube-apiserver keeps in `default`, at the service range's first
    /// address (its endpoints controller is not run: the Service is what clients look up).
    fn bootstrap_kubernetes_service(&self) {
        let Some(rt) = self.registry().get("", "services").cloned() else {
            return;
        };
        let mut svc = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {
                "clusterIP": services::first_ip().to_string(),
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
                "sessionAffinity": "None",
                "type": "ClusterIP",
            },
        });
        if meta::prepare_create(&rt, "default", &mut svc).is_err() {
            return;
        }
        crate::strategy::default_on_create(&rt, &mut svc);
        let Ok(_reserved) = self
            .service_allocator
            .allocate(&mut svc, services::InUse::default())
        else {
            return;
        };
        self.store().insert(&rt.key(), Self::to_storage(&rt, svc));
    }
}
