//! CustomResourceDefinitions: a written CRD is served at once and reported `NamesAccepted` and
//! `Established`; a deleted one is `Terminating` while its objects are deleted (the
//! `customresourcecleanup.apiextensions.k8s.io` finalizer), and stops being served when it is
//! gone.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

use super::queue::{self, Reconciler, Synced, WorkQueue};
use crate::apiserver::options::{DeleteOptions, WriteOptions};
use crate::apiserver::server::{ApiServer, Target, system_admin};
use crate::error::ApiError;
use crate::object::{finalizers, has_finalizer, is_deleting, now};
use crate::registry::{PrinterColumn, ResourceType, VersionInfo};
use crate::store::{Change, EventType};
use crate::strategy::CRD_CLEANUP_FINALIZER;

const CRD_KEY: (&str, &str) = ("apiextensions.k8s.io", "customresourcedefinitions");

/// The resource a CRD defines.
pub fn resource_type(crd: &Value) -> Option<ResourceType> {
    let spec = &crd["spec"];
    let names = &spec["names"];
    let strs = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut versions: Vec<(bool, VersionInfo)> = spec["versions"]
        .as_array()?
        .iter()
        .filter(|v| v["served"] != false)
        .map(|v| {
            let columns = v["additionalPrinterColumns"]
                .as_array()
                .map(|cols| {
                    cols.iter()
                        .map(|c| PrinterColumn {
                            name: c["name"].as_str().unwrap_or_default().to_string(),
                            type_: c["type"].as_str().unwrap_or("string").to_string(),
                            format: c["format"].as_str().unwrap_or_default().to_string(),
                            description: c["description"].as_str().unwrap_or_default().to_string(),
                            priority: c["priority"].as_i64().unwrap_or(0),
                            json_path: c["jsonPath"].as_str().unwrap_or_default().to_string(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            (
                v["storage"] == true,
                VersionInfo {
                    name: v["name"].as_str().unwrap_or_default().to_string(),
                    schema: v["schema"].get("openAPIV3Schema").cloned(),
                    printer_columns: columns,
                    status_subresource: v["subresources"].get("status").is_some(),
                    scale_subresource: v["subresources"].get("scale").cloned(),
                },
            )
        })
        .collect();
    // Storage version first: it is the preferred one for in-process callers.
    versions.sort_by_key(|(storage, _)| !*storage);
    let kind = names["kind"].as_str()?.to_string();
    Some(ResourceType {
        group: spec["group"].as_str()?.to_string(),
        versions: versions.into_iter().map(|(_, v)| v).collect(),
        list_kind: names["listKind"]
            .as_str()
            .map_or_else(|| format!("{kind}List"), str::to_string),
        singular: names["singular"]
            .as_str()
            .map_or_else(|| kind.to_lowercase(), str::to_string),
        plural: names["plural"].as_str()?.to_string(),
        kind,
        namespaced: spec["scope"] == "Namespaced",
        short_names: strs(&names["shortNames"]),
        categories: strs(&names["categories"]),
        verbs: vec![
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "create",
            "update",
            "watch",
        ],
        crd: crd["metadata"]["name"].as_str().map(str::to_string),
        extra_subresources: vec![],
    })
}

/// Called after every committed CRD write: serve it and report it established.
pub fn on_crd_written(server: &ApiServer, crd: &Value) {
    let Some(rt) = resource_type(crd) else { return };
    if crd["metadata"]["resourceVersion"].is_null() {
        return;
    }
    let gone = server
        .store()
        .get(
            &(CRD_KEY.0.to_string(), CRD_KEY.1.to_string()),
            &(
                String::new(),
                crd["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            ),
        )
        .is_none();
    if gone {
        server.registry_mut().remove(&rt.id());
        server.store().drop_resource(&rt.key());
        server.sync_crd_api_services();
        return;
    }
    let conflict = server
        .registry()
        .get(&rt.group, &rt.plural)
        .is_some_and(|existing| existing.crd != rt.crd);
    if conflict {
        return;
    }
    server.registry_mut().insert(rt.clone());
    server.sync_crd_api_services();
    let mut status = json!({
        "acceptedNames": crd["spec"]["names"],
        "storedVersions": stored_versions(crd, &rt),
        "conditions": [],
    });
    let old_conditions = crd["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut conditions = vec![
        condition(
            &old_conditions,
            "NamesAccepted",
            true,
            "NoConflicts",
            "no conflicts found",
        ),
        condition(
            &old_conditions,
            "Established",
            true,
            "InitialNamesAccepted",
            "the initial names have been accepted",
        ),
    ];
    if is_deleting(crd) {
        conditions.push(condition(
            &old_conditions,
            "Terminating",
            true,
            "InstanceDeletionInProgress",
            "CustomResource deletion is in progress",
        ));
    }
    status["conditions"] = json!(conditions);
    if crd["status"] == status {
        return;
    }
    let mut updated = crd.clone();
    updated["status"] = status;
    let key = (CRD_KEY.0.to_string(), CRD_KEY.1.to_string());
    let mut store = server.store();
    let still_same = store
        .get(
            &key,
            &(
                String::new(),
                crd["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            ),
        )
        .is_some_and(|c| c["metadata"]["resourceVersion"] == crd["metadata"]["resourceVersion"]);
    if still_same {
        store.replace(&key, updated);
    }
}

fn stored_versions(crd: &Value, rt: &ResourceType) -> Value {
    let mut stored: Vec<Value> = crd["status"]["storedVersions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let storage = json!(rt.storage_version());
    if !stored.contains(&storage) {
        stored.push(storage);
    }
    json!(stored)
}

fn condition(old: &[Value], type_: &str, status: bool, reason: &str, message: &str) -> Value {
    let status_str = if status { "True" } else { "False" };
    let time = old
        .iter()
        .find(|c| c["type"] == type_ && c["status"] == status_str)
        .map(|c| c["lastTransitionTime"].clone())
        .unwrap_or_else(|| json!(now()));
    json!({"type": type_, "status": status_str, "reason": reason, "message": message, "lastTransitionTime": time})
}

/// Cleans up deleted CRDs: deletes their objects, then releases the finalizer.
pub async fn run(server: Arc<ApiServer>, feed: UnboundedReceiver<Arc<Change>>) {
    let queue = WorkQueue::new(
        std::time::Duration::from_millis(5),
        std::time::Duration::from_secs(30),
    );
    queue::run(CrdCleanup(server), queue, feed).await
}

struct CrdCleanup(Arc<ApiServer>);

impl Reconciler for CrdCleanup {
    const NAME: &'static str = "crd-cleanup";

    fn observe(&self, change: &Change, queue: &mut WorkQueue) {
        let is_crd = change.resource.0 == CRD_KEY.0 && change.resource.1 == CRD_KEY.1;
        if is_crd && change.event == EventType::Deleted {
            on_crd_written(&self.0, &change.object);
        } else if is_crd && is_deleting(&change.object) {
            if let Some(name) = change.object["metadata"]["name"].as_str() {
                queue.add(name);
            }
        } else if change.event == EventType::Deleted {
            // An object of a terminating CRD went away: look again.
            let crd = self
                .0
                .registry()
                .get(&change.resource.0, &change.resource.1)
                .and_then(|rt| rt.crd.clone());
            if let Some(crd) = crd {
                queue.add(&crd);
            }
        }
    }

    async fn sync(&self, name: &str, _: &mut WorkQueue) -> Result<Synced, ApiError> {
        // Objects remain: each one's deletion enqueues the CRD again.
        Ok(match cleanup(&self.0, name).await? {
            true => Synced::Done,
            false => Synced::Waiting,
        })
    }
}

/// `Ok(true)` when the CRD is gone or released, `Ok(false)` when objects remain.
async fn cleanup(server: &ApiServer, name: &str) -> Result<bool, ApiError> {
    let Some(crd_rt) = server.resolve(CRD_KEY.0, "v1", CRD_KEY.1) else {
        return Ok(true);
    };
    let t = Target::new(crd_rt, "v1", "", name);
    let crd = match server.get(&t) {
        Ok(c) => c,
        Err(e) if e.code == 404 => return Ok(true),
        Err(e) => return Err(e),
    };
    if !is_deleting(&crd) || !has_finalizer(&crd, CRD_CLEANUP_FINALIZER) {
        return Ok(true);
    }
    let Some(rt) = resource_type(&crd) else {
        return Ok(true);
    };
    let Some(rt) = server.registry().get(&rt.group, &rt.plural).cloned() else {
        return Ok(true);
    };
    let version = rt.storage_version().to_string();
    // kube-apiserver deletes the objects through storage, not through admission.
    let items = server.store().list(&rt.key(), None);
    for item in &items {
        if is_deleting(item) {
            continue;
        }
        let meta = &item["metadata"];
        let target = Target::new(
            rt.clone(),
            &version,
            meta["namespace"].as_str().unwrap_or_default(),
            meta["name"].as_str().unwrap_or_default(),
        );
        let opts = DeleteOptions::new(system_admin());
        match server.delete_unadmitted(&target, &opts).await {
            Ok(_) => {}
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    if server.store().count(&rt.key()) > 0 {
        return Ok(false);
    }
    let mut released = server.get(&t)?;
    let rest: Vec<String> = finalizers(&released)
        .into_iter()
        .filter(|f| f != CRD_CLEANUP_FINALIZER)
        .collect();
    released["metadata"]["finalizers"] = json!(rest);
    server
        .update(&t, released, &WriteOptions::as_user(system_admin()))
        .await?;
    Ok(true)
}
