//! kube-controller-manager's clusterrole-aggregation controller
//! (`pkg/controller/clusterroleaggregation/clusterroleaggregation_controller.go`): a ClusterRole
//! with an `aggregationRule` gets as its `rules` the union of the rules of every other ClusterRole
//! its `clusterRoleSelectors` match, in name order, each rule once. This is how the bootstrap
//! roles `admin`, `edit` and `view` get their rules (from `system:aggregate-to-*`, and `edit`
//! from `view`, `admin` from `edit`), and how a ClusterRole labelled
//! `rbac.authorization.k8s.io/aggregate-to-view: "true"` extends them.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

use super::queue::{self, Reconciler, Synced, WorkQueue};
use crate::apiserver::{ApiServer, Target, WriteOptions};
use crate::auth::UserInfo;
use crate::authz::RBAC_GROUP;
use crate::error::ApiError;
use crate::labels::Selector;
use crate::store::Change;

pub async fn run(server: Arc<ApiServer>, feed: UnboundedReceiver<Arc<Change>>) {
    let mut queue = WorkQueue::new(
        std::time::Duration::from_millis(5),
        std::time::Duration::from_secs(60),
    );
    // The roles stored before this controller subscribed (the bootstrap policy's).
    let roles = server
        .store()
        .list(&(RBAC_GROUP.to_string(), "clusterroles".to_string()), None);
    for role in roles.iter().filter(|r| is_aggregated(r)) {
        if let Some(name) = role["metadata"]["name"].as_str() {
            queue.add(name);
        }
    }
    queue::run(Aggregation { server }, queue, feed).await
}

struct Aggregation {
    server: Arc<ApiServer>,
}

fn is_aggregated(role: &Value) -> bool {
    role["aggregationRule"]["clusterRoleSelectors"].is_array()
}

impl Aggregation {
    fn target(&self, name: &str) -> Option<Target> {
        let rt = self.server.resolve(RBAC_GROUP, "v1", "clusterroles")?;
        Some(Target::new(rt, "v1", "", name))
    }

    fn cluster_roles(&self) -> Vec<Arc<Value>> {
        self.server
            .store()
            .list(&(RBAC_GROUP.to_string(), "clusterroles".to_string()), None)
    }
}

impl Reconciler for Aggregation {
    const NAME: &'static str = "clusterrole-aggregation";

    fn observe(&self, change: &Change, queue: &mut WorkQueue) {
        if change.resource.0 != RBAC_GROUP || change.resource.1 != "clusterroles" {
            return;
        }
        // As the real controller's `enqueue`: any ClusterRole change may change what every
        // aggregated role selects.
        for role in self.cluster_roles().iter().filter(|r| is_aggregated(r)) {
            if let Some(name) = role["metadata"]["name"].as_str() {
                queue.add(name);
            }
        }
    }

    async fn sync(&self, name: &str, _: &mut WorkQueue) -> Result<Synced, ApiError> {
        let Some(t) = self.target(name) else {
            return Ok(Synced::Done);
        };
        let role = match self.server.get(&t) {
            Ok(role) if is_aggregated(&role) => role,
            Ok(_) => return Ok(Synced::Done),
            Err(e) if e.code == 404 => return Ok(Synced::Done),
            Err(e) => return Err(e),
        };
        let mut roles = self.cluster_roles();
        roles.sort_by(|a, b| {
            a["metadata"]["name"]
                .as_str()
                .cmp(&b["metadata"]["name"].as_str())
        });
        let mut rules: Vec<Value> = Vec::new();
        for selector in role["aggregationRule"]["clusterRoleSelectors"]
            .as_array()
            .into_iter()
            .flatten()
        {
            // A selector that does not compile selects nothing (`LabelSelectorAsSelector`
            // fails and the controller returns the error).
            let Ok(selector) = Selector::from_label_selector(selector) else {
                continue;
            };
            for other in roles.iter().filter(|r| {
                r["metadata"]["name"].as_str() != Some(name) && selector.matches_object(r)
            }) {
                for rule in other["rules"].as_array().into_iter().flatten() {
                    if !rules.contains(rule) {
                        rules.push(rule.clone());
                    }
                }
            }
        }
        let current: Vec<Value> = role["rules"].as_array().cloned().unwrap_or_default();
        if current == rules {
            return Ok(Synced::Done);
        }
        let mut updated = role;
        updated["rules"] = json!(rules);
        let mut w = WriteOptions::as_user(UserInfo::service_account(
            "kube-system",
            "clusterrole-aggregation-controller",
        ));
        w.field_manager = "clusterrole-aggregation-controller".to_string();
        match self.server.update(&t, updated, &w).await {
            Ok(_) => Ok(Synced::Done),
            // Changed meanwhile: that change enqueued it again.
            Err(e) if matches!(e.code, 404 | 409) => Ok(Synced::Done),
            Err(e) => Err(e),
        }
    }
}
