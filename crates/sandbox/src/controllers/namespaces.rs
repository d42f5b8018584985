//! The namespace controller: a namespace being deleted has its content deleted (through
//! admission, as `system:serviceaccount:kube-system:namespace-controller`), reports progress in
//! the status conditions kube-controller-manager sets, and loses its `kubernetes` finalizer once
//! nothing is left, which removes it.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

use super::queue::{self, Reconciler, Synced, WorkQueue};
use crate::apiserver::{ApiServer, DeleteOptions, Propagation, Target, WriteOptions};
use crate::auth::UserInfo;
use crate::error::ApiError;
use crate::object::{finalizers, is_deleting, now};
use crate::store::{Change, EventType};

pub async fn run(server: Arc<ApiServer>, feed: UnboundedReceiver<Arc<Change>>) {
    let queue = WorkQueue::new(
        std::time::Duration::from_millis(5),
        std::time::Duration::from_secs(60),
    );
    queue::run(NamespaceController(server), queue, feed).await
}

struct NamespaceController(Arc<ApiServer>);

impl Reconciler for NamespaceController {
    const NAME: &'static str = "namespace";

    fn observe(&self, change: &Change, queue: &mut WorkQueue) {
        let is_ns = change.resource.0.is_empty() && change.resource.1 == "namespaces";
        if is_ns && change.event != EventType::Deleted && is_deleting(&change.object) {
            if let Some(name) = change.object["metadata"]["name"].as_str() {
                queue.add(name);
            }
        }
    }

    async fn sync(&self, name: &str, _: &mut WorkQueue) -> Result<Synced, ApiError> {
        Ok(match sync(&self.0, name).await? {
            true => Synced::Done,
            false => Synced::RequeueAfter(self.0.config.namespace_requeue),
        })
    }
}

fn writer() -> WriteOptions {
    let mut w = WriteOptions::as_user(UserInfo::namespace_controller());
    w.field_manager = "namespace-controller".to_string();
    w
}

/// One pass. `Ok(true)` when the namespace is finished (or gone), `Ok(false)` when content
/// remains.
async fn sync(server: &ApiServer, name: &str) -> Result<bool, ApiError> {
    let Some(ns_rt) = server.resolve("", "v1", "namespaces") else {
        return Ok(true);
    };
    let ns_target = Target::new(ns_rt, "v1", "", name);
    let ns = match server.get(&ns_target) {
        Ok(ns) => ns,
        Err(e) if e.code == 404 => return Ok(true),
        Err(e) => return Err(e),
    };
    if !is_deleting(&ns) {
        return Ok(true);
    }
    // kube-controller-manager's `finalized`: a namespace whose spec lists no finalizer at all.
    // One that lists only others' (the `kubernetes` token removed through `finalize`) still
    // has its content deleted; it then waits for those finalizers' owners.
    let finalized = ns["spec"]["finalizers"]
        .as_array()
        .is_none_or(|f| f.is_empty());
    if finalized {
        return Ok(true);
    }
    let resources: Vec<_> = server
        .registry()
        .all()
        .filter(|rt| rt.namespaced && rt.verbs.contains(&"delete"))
        .cloned()
        .collect();
    let mut failures = Vec::new();
    let mut remaining: BTreeMap<String, usize> = BTreeMap::new();
    let mut finalizers_left: BTreeMap<String, usize> = BTreeMap::new();
    for rt in resources {
        let version = rt.storage_version().to_string();
        // One DELETE of the collection per resource, as kube-controller-manager sends it
        // (`deleteAllContentForGroupVersionResource`): kube-apiserver stops at the first object
        // refused, and the controller tries the whole collection again on its next pass — it
        // never deletes the objects after a refused one on its own.
        if !server.store().list(&rt.key(), Some(name)).is_empty() {
            let t = Target::new(rt.clone(), &version, name, "");
            let mut opts = DeleteOptions::new(UserInfo::namespace_controller());
            opts.propagation = Some(Propagation::Background);
            match server
                .delete_collection(&t, &crate::apiserver::ListOptions::default(), &opts)
                .await
            {
                Ok(_) => {}
                Err(e) if e.code == 404 || e.code == 405 => {}
                Err(e) => failures.push(e.message),
            }
        }
        let left = server.store().list(&rt.key(), Some(name));
        if !left.is_empty() {
            // kube-controller-manager writes "<resource>.<group>", so a core resource keeps
            // its trailing dot: "configmaps. has 1 resource instances".
            *remaining
                .entry(format!("{}.{}", rt.plural, rt.group))
                .or_default() += left.len();
            for o in &left {
                for f in finalizers(o) {
                    *finalizers_left.entry(f).or_default() += 1;
                }
            }
        }
    }
    update_conditions(
        server,
        &ns_target,
        &ns,
        &failures,
        &remaining,
        &finalizers_left,
    )
    .await?;
    if !remaining.is_empty() {
        return Ok(false);
    }
    // Empty: remove our finalizer through the finalize subresource.
    let current = server.get(&ns_target)?;
    let mut finalized = current.clone();
    let rest: Vec<Value> = current["spec"]["finalizers"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f != "kubernetes")
        .collect();
    finalized["spec"]["finalizers"] = json!(rest);
    let finalize = ns_target.clone().with_subresource("finalize");
    server.update(&finalize, finalized, &writer()).await?;
    Ok(true)
}

fn condition(type_: &str, status: bool, reason: &str, message: String) -> Value {
    json!({
        "type": type_,
        "status": if status { "True" } else { "False" },
        "reason": reason,
        "message": message,
        "lastTransitionTime": now(),
    })
}

async fn update_conditions(
    server: &ApiServer,
    target: &Target,
    ns: &Value,
    failures: &[String],
    remaining: &BTreeMap<String, usize>,
    finalizers_left: &BTreeMap<String, usize>,
) -> Result<(), ApiError> {
    let content_failure = if failures.is_empty() {
        condition(
            "NamespaceDeletionContentFailure",
            false,
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization".into(),
        )
    } else {
        // Sorted, as kube-controller-manager's makeDeleteContentCondition does.
        let mut failures = failures.to_vec();
        failures.sort();
        condition(
            "NamespaceDeletionContentFailure",
            true,
            "ContentDeletionFailed",
            format!(
                "Failed to delete all resource types, {} remaining: {}",
                failures.len(),
                failures.join(", ")
            ),
        )
    };
    let content_remaining = if remaining.is_empty() {
        condition(
            "NamespaceContentRemaining",
            false,
            "ContentRemoved",
            "All content successfully removed".into(),
        )
    } else {
        condition(
            "NamespaceContentRemaining",
            true,
            "SomeResourcesRemain",
            format!(
                "Some resources are remaining: {}",
                remaining
                    .iter()
                    .map(|(r, n)| format!("{r} has {n} resource instances"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    };
    let finalizers_remaining = if finalizers_left.is_empty() {
        condition(
            "NamespaceFinalizersRemaining",
            false,
            "ContentHasNoFinalizers",
            "All content-preserving finalizers finished".into(),
        )
    } else {
        condition(
            "NamespaceFinalizersRemaining",
            true,
            "SomeFinalizersRemain",
            format!(
                "Some content in the namespace has finalizers remaining: {}",
                finalizers_left
                    .iter()
                    .map(|(f, n)| format!("{f} in {n} resource instances"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    };
    let conditions = vec![
        condition(
            "NamespaceDeletionDiscoveryFailure",
            false,
            "ResourcesDiscovered",
            "All resources successfully discovered".into(),
        ),
        condition(
            "NamespaceDeletionGroupVersionParsingFailure",
            false,
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed".into(),
        ),
        content_failure,
        content_remaining,
        finalizers_remaining,
    ];
    // As kube-controller-manager's `updateConditions`
    // (pkg/controller/namespace/deletion/status_condition_utils.go): each of its own types is
    // updated in place — lastTransitionTime only when the status changes — or appended; every
    // other condition (another controller's, e.g. Lien's) is kept as it is.
    let old = ns["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut merged = old.clone();
    for c in conditions {
        match merged.iter_mut().find(|o| o["type"] == c["type"]) {
            Some(prev) => {
                let same = ["status", "reason", "message"]
                    .iter()
                    .all(|f| prev[*f] == c[*f]);
                if same {
                    continue;
                }
                if prev["status"] != c["status"] {
                    prev["lastTransitionTime"] = c["lastTransitionTime"].clone();
                }
                for f in ["status", "reason", "message"] {
                    prev[f] = c[f].clone();
                }
            }
            None => merged.push(c),
        }
    }
    if merged == old {
        return Ok(());
    }
    let mut updated = ns.clone();
    updated["status"]["conditions"] = json!(merged);
    let status = target.clone().with_subresource("status");
    server.update(&status, updated, &writer()).await.map(|_| ())
}
