//! What kube-controller-manager puts in every namespace: the `default` ServiceAccount (the
//! serviceaccounts-controller, `pkg/controller/serviceaccount/serviceaccounts_controller.go`)
//! and the `kube-root-ca.crt` ConfigMap with the cluster's CA (the root-ca-cert-publisher,
//! `pkg/controller/certificates/rootcacertpublisher/publisher.go`). Each is created when a
//! namespace appears, recreated when deleted (the ConfigMap also restored when changed), and
//! never in a terminating namespace. Both act through the API server as their service accounts.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

use super::queue::{self, Reconciler, Synced, WorkQueue};
use crate::apiserver::{ApiServer, Target, WriteOptions};
use crate::auth::UserInfo;
use crate::error::ApiError;
use crate::object::is_deleting;
use crate::store::{Change, EventType};

pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";
/// The description the publisher writes on the ConfigMap.
pub const ROOT_CA_DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

pub async fn run(server: Arc<ApiServer>, ca_pem: String, feed: UnboundedReceiver<Arc<Change>>) {
    let mut queue = WorkQueue::new(
        std::time::Duration::from_millis(5),
        std::time::Duration::from_secs(60),
    );
    // The namespaces that existed before this controller subscribed (kube-apiserver's own).
    let namespaces = server
        .store()
        .list(&(String::new(), "namespaces".to_string()), None);
    for ns in namespaces {
        if let Some(name) = ns["metadata"]["name"].as_str() {
            queue.add(name);
        }
    }
    queue::run(Bootstrap { server, ca_pem }, queue, feed).await
}

struct Bootstrap {
    server: Arc<ApiServer>,
    ca_pem: String,
}

fn is(change: &Change, plural: &str) -> bool {
    change.resource.0.is_empty() && change.resource.1 == plural
}

impl Reconciler for Bootstrap {
    const NAME: &'static str = "namespace-bootstrap";

    fn observe(&self, change: &Change, queue: &mut WorkQueue) {
        let meta = &change.object["metadata"];
        if is(change, "namespaces") {
            if change.event == EventType::Added
                && let Some(name) = meta["name"].as_str()
            {
                queue.add(name);
            }
            return;
        }
        let ours = (is(change, "serviceaccounts") && meta["name"] == "default")
            || (is(change, "configmaps") && meta["name"] == ROOT_CA_CONFIGMAP);
        if ours
            && change.event != EventType::Added
            && let Some(ns) = meta["namespace"].as_str()
        {
            queue.add(ns);
        }
    }

    async fn sync(&self, namespace: &str, _: &mut WorkQueue) -> Result<Synced, ApiError> {
        let Some(ns_rt) = self.server.resolve("", "v1", "namespaces") else {
            return Ok(Synced::Done);
        };
        match self.server.get(&Target::new(ns_rt, "v1", "", namespace)) {
            Ok(ns) if !is_deleting(&ns) => {}
            Ok(_) => return Ok(Synced::Done),
            Err(e) if e.code == 404 => return Ok(Synced::Done),
            Err(e) => return Err(e),
        }
        self.ensure_service_account(namespace).await?;
        self.ensure_root_ca(namespace).await?;
        Ok(Synced::Done)
    }
}

fn writer(controller: &str) -> WriteOptions {
    let mut w = WriteOptions::as_user(UserInfo::service_account("kube-system", controller));
    w.field_manager = "kube-controller-manager".to_string();
    w
}

/// A create or update that lost to the namespace's deletion or to a concurrent write is not an
/// error: the next change decides again.
fn settled(result: Result<crate::apiserver::Written, ApiError>) -> Result<(), ApiError> {
    match result {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.code, 403 | 404 | 409) => Ok(()),
        Err(e) => Err(e),
    }
}

impl Bootstrap {
    async fn ensure_service_account(&self, namespace: &str) -> Result<(), ApiError> {
        let Some(rt) = self.server.resolve("", "v1", "serviceaccounts") else {
            return Ok(());
        };
        let t = Target::new(rt, "v1", namespace, "default");
        match self.server.get(&t) {
            Ok(_) => return Ok(()),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
        let sa = json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": namespace},
        });
        settled(
            self.server
                .create(&t, sa, &writer("service-account-controller"))
                .await,
        )
    }

    async fn ensure_root_ca(&self, namespace: &str) -> Result<(), ApiError> {
        let Some(rt) = self.server.resolve("", "v1", "configmaps") else {
            return Ok(());
        };
        let t = Target::new(rt, "v1", namespace, ROOT_CA_CONFIGMAP);
        let data = json!({"ca.crt": self.ca_pem});
        let w = writer("root-ca-cert-publisher");
        match self.server.get(&t) {
            Ok(cm) => {
                let annotated = cm["metadata"]["annotations"]["kubernetes.io/description"]
                    == ROOT_CA_DESCRIPTION;
                if cm["data"] == data && annotated {
                    return Ok(());
                }
                // The publisher restores the data and its annotation, keeping the rest.
                let mut fixed: Value = cm.clone();
                fixed["data"] = data;
                if !fixed["metadata"]["annotations"].is_object() {
                    fixed["metadata"]["annotations"] = json!({});
                }
                fixed["metadata"]["annotations"]["kubernetes.io/description"] =
                    json!(ROOT_CA_DESCRIPTION);
                settled(self.server.update(&t, fixed, &w).await)
            }
            Err(e) if e.code == 404 => {
                let cm = json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": ROOT_CA_CONFIGMAP,
                        "namespace": namespace,
                        "annotations": {"kubernetes.io/description": ROOT_CA_DESCRIPTION},
                    },
                    "data": data,
                });
                settled(self.server.create(&t, cm, &w).await)
            }
            Err(e) => Err(e),
        }
    }
}
