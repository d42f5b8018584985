//! The garbage collector, as kube-controller-manager's: it deletes dependents whose owners are
//! gone, finishes foreground deletion (an owner with the `foregroundDeletion` finalizer waits for
//! its `blockOwnerDeletion` dependents) and orphan deletion (the `orphan` finalizer: owner
//! references are stripped from dependents first).
//!
//! Its decisions, per object (`attemptToDeleteItem` in the real one):
//! - no owner left (every referenced UID is absent) → delete it, background, with a UID
//!   precondition;
//! - some owners solid → remove only the references to absent or foreground-deleting owners;
//! - only foreground-deleting owners left → delete it with foreground propagation if it has
//!   dependents of its own, else as with no owner left (its own finalizers decide).
//!
//! A refused or failed action is retried with per-item exponential backoff (5 ms doubling to
//! 1000 s by default): this is the wait an admission webhook's refusal imposes in a real cluster.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

use super::queue::{self, Reconciler, Synced, WorkQueue};
use super::target_of;
use crate::apiserver::{ApiServer, DeleteOptions, Propagation, WriteOptions};
use crate::auth::UserInfo;
use crate::error::ApiError;
use crate::object::{has_finalizer, is_deleting};
use crate::store::{Change, EventType};

const FOREGROUND: &str = "foregroundDeletion";
const ORPHAN: &str = "orphan";

fn uid_of(object: &Value) -> Option<&str> {
    object["metadata"]["uid"].as_str()
}

fn owner_refs(object: &Value) -> Vec<Value> {
    object["metadata"]["ownerReferences"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

pub async fn run(server: Arc<ApiServer>, feed: UnboundedReceiver<Arc<Change>>) {
    let queue = WorkQueue::new(server.config.gc_backoff_base, server.config.gc_backoff_max);
    queue::run(GarbageCollector(server), queue, feed).await
}

struct GarbageCollector(Arc<ApiServer>);

impl Reconciler for GarbageCollector {
    const NAME: &'static str = "garbage-collector";

    fn observe(&self, change: &Change, queue: &mut WorkQueue) {
        observe(&self.0, change, queue)
    }

    async fn sync(&self, uid: &str, queue: &mut WorkQueue) -> Result<Synced, ApiError> {
        attempt(&self.0, uid, queue).await.map(|()| Synced::Done)
    }
}

/// Enqueues what a change may have made actionable.
fn observe(server: &ApiServer, change: &Change, queue: &mut WorkQueue) {
    let obj = &change.object;
    let Some(uid) = uid_of(obj) else { return };
    let mut owners: Vec<String> = owner_refs(obj)
        .iter()
        .filter_map(|r| r["uid"].as_str().map(str::to_string))
        .collect();
    if let Some(old) = &change.old {
        owners.extend(
            owner_refs(old)
                .iter()
                .filter_map(|r| r["uid"].as_str().map(str::to_string)),
        );
    }
    match change.event {
        EventType::Added | EventType::Modified => {
            // kube-controller-manager's graph builder looks at a dependent again only when it
            // appears, its ownerReferences change or its deletion starts — not on every update
            // (a label change must not cut a backoff short).
            let relevant = match &change.old {
                None => true,
                Some(old) => {
                    owner_refs(old) != owner_refs(obj) || is_deleting(old) != is_deleting(obj)
                }
            };
            if relevant && !owner_refs(obj).is_empty() {
                queue.add(uid);
            }
            if is_deleting(obj) && (has_finalizer(obj, FOREGROUND) || has_finalizer(obj, ORPHAN)) {
                queue.add(uid);
            }
        }
        EventType::Deleted => {
            let dependents = server.store().dependents_of(uid);
            for (_, dep) in dependents {
                if let Some(d) = uid_of(&dep) {
                    queue.add(d);
                }
            }
        }
    }
    // An owner waiting in foreground deletion re-checks when a dependent may have stopped
    // blocking it, as kube-controller-manager's graph builder decides: the dependent is gone, or
    // an owner reference was removed or stopped blocking (`addUnblockedOwnersToDeleteQueue`).
    // Not on any other update: re-checking the owner retries its dependents at once, which would
    // cut their backoff short.
    let owners: Vec<String> = match (&change.event, &change.old) {
        (EventType::Deleted, _) => owners,
        (_, Some(old)) => {
            let now = owner_refs(obj);
            owner_refs(old)
                .into_iter()
                .filter(|r| r["blockOwnerDeletion"] == true)
                .filter(|r| {
                    !now.iter()
                        .any(|n| n["uid"] == r["uid"] && n["blockOwnerDeletion"] == true)
                })
                .filter_map(|r| r["uid"].as_str().map(str::to_string))
                .collect()
        }
        (_, None) => Vec::new(),
    };
    let store = server.store();
    for owner in owners {
        if let Some((_, o)) = store.by_uid(&owner) {
            if is_deleting(&o) && has_finalizer(&o, FOREGROUND) {
                queue.add(&owner);
            }
        }
    }
}

fn gc_write() -> WriteOptions {
    let mut w = WriteOptions::as_user(UserInfo::garbage_collector());
    w.field_manager = "generic-garbage-collector".to_string();
    w
}

/// One pass over one object.
async fn attempt(server: &ApiServer, uid: &str, queue: &mut WorkQueue) -> Result<(), ApiError> {
    let Some((resource, obj)) = server.store().by_uid(uid) else {
        return Ok(());
    };
    let Some(target) = target_of(server, &resource, &obj) else {
        return Ok(());
    };
    if is_deleting(&obj) && has_finalizer(&obj, ORPHAN) {
        let dependents = server.store().dependents_of(uid);
        for (dep_resource, dep) in dependents {
            remove_owner_refs(server, &dep_resource, &dep, &[uid.to_string()]).await?;
        }
        return remove_finalizer(server, &target, &obj, ORPHAN).await;
    }
    if is_deleting(&obj) && has_finalizer(&obj, FOREGROUND) {
        let dependents = server.store().dependents_of(uid);
        let mut blocking = 0;
        for (_, dep) in &dependents {
            let blocks = owner_refs(dep)
                .iter()
                .any(|r| r["uid"] == uid && r["blockOwnerDeletion"] == true);
            if blocks {
                blocking += 1;
            }
            if !is_deleting(dep) {
                if let Some(d) = uid_of(dep) {
                    queue.add(d);
                }
            }
        }
        if blocking == 0 {
            return remove_finalizer(server, &target, &obj, FOREGROUND).await;
        }
        return Ok(());
    }
    let refs = owner_refs(&obj);
    if refs.is_empty() {
        return Ok(());
    }
    let dep_ns = obj["metadata"]["namespace"].as_str().unwrap_or_default();
    let mut solid = Vec::new();
    let mut dangling = Vec::new();
    let mut waiting = Vec::new();
    {
        let store = server.store();
        for r in &refs {
            let owner_uid = r["uid"].as_str().unwrap_or_default().to_string();
            match store.by_uid(&owner_uid) {
                Some((_, owner)) => {
                    let owner_ns = owner["metadata"]["namespace"].as_str().unwrap_or_default();
                    let same_name = owner["metadata"]["name"] == r["name"];
                    // A namespaced owner is looked up in the dependent's namespace, so an owner
                    // in another namespace is as good as absent.
                    if !same_name || (!owner_ns.is_empty() && owner_ns != dep_ns) {
                        dangling.push(owner_uid);
                    } else if is_deleting(&owner) && has_finalizer(&owner, FOREGROUND) {
                        waiting.push(owner_uid);
                    } else {
                        solid.push(owner_uid);
                    }
                }
                None => dangling.push(owner_uid),
            }
        }
    }
    if !solid.is_empty() {
        if dangling.is_empty() && waiting.is_empty() {
            return Ok(());
        }
        let mut gone = dangling;
        gone.extend(waiting);
        return remove_owner_refs(server, &resource, &obj, &gone).await;
    }
    if is_deleting(&obj) {
        // Already on its way out; finalizers will finish it.
        return Ok(());
    }
    // Foreground only for an item that has dependents of its own; otherwise, as when no owner
    // waits, the item's own finalizers decide.
    let has_dependents = !server.store().dependents_of(uid).is_empty();
    let propagation = if !waiting.is_empty() && has_dependents {
        Propagation::Foreground
    } else if has_finalizer(&obj, ORPHAN) {
        Propagation::Orphan
    } else if has_finalizer(&obj, FOREGROUND) {
        Propagation::Foreground
    } else {
        Propagation::Background
    };
    let mut opts = DeleteOptions::new(UserInfo::garbage_collector());
    opts.propagation = Some(propagation);
    opts.precondition_uid = Some(uid.to_string());
    match server.delete(&target, &opts).await {
        Ok(_) => Ok(()),
        Err(e) if e.code == 404 => Ok(()),
        // A changed UID means a new object took the name: not ours to delete.
        Err(e) if e.code == 409 && e.message.contains("the UID in the precondition") => Ok(()),
        Err(e) => Err(e),
    }
}

async fn remove_finalizer(
    server: &ApiServer,
    target: &crate::apiserver::Target,
    obj: &Value,
    finalizer: &str,
) -> Result<(), ApiError> {
    let updated = super::without_finalizer(obj, finalizer);
    match server.update(target, updated, &gc_write()).await {
        Ok(_) => Ok(()),
        Err(e) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

async fn remove_owner_refs(
    server: &ApiServer,
    resource: &crate::registry::ResourceKey,
    obj: &Value,
    owners: &[String],
) -> Result<(), ApiError> {
    let Some(target) = target_of(server, resource, obj) else {
        return Ok(());
    };
    let mut updated = obj.clone();
    let kept: Vec<Value> = owner_refs(obj)
        .into_iter()
        .filter(|r| !owners.iter().any(|o| r["uid"] == o.as_str()))
        .collect();
    if kept.is_empty() {
        if let Some(m) = updated["metadata"].as_object_mut() {
            m.remove("ownerReferences");
        }
    } else {
        updated["metadata"]["ownerReferences"] = json!(kept);
    }
    match server.update(&target, updated, &gc_write()).await {
        Ok(_) => Ok(()),
        Err(e) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
