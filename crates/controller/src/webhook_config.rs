//! Lien's own `ValidatingWebhookConfiguration`, kept as Lien wrote it — and its
//! `MutatingWebhookConfiguration` (`seal.lien.dev`, deletion requests and replay records), by a
//! second [`Reconciler`] over that kind: the desired value's `kind` says which. Drift of the
//! mutating one does not touch [`Enforcement`] (protection does not rest on it); it is
//! restored and reported alike.
//!
//! Protection rests on that configuration: without it (deleted), or with its `objectSelector`,
//! `rules`, `failurePolicy`, `clientConfig` or `matchConditions` changed, kube-apiserver stops
//! asking Lien — and nothing else would say so. So Lien watches it, and whenever it departs from
//! the desired one:
//!
//! - every Usage reports `Ready=False` and `InUse=False` with reason
//!   [`NOT_CONFIGURED_REASON`] (through [`Enforcement`], which the status computation reads)
//!   rather than claiming a protection that kube-apiserver is not enforcing;
//! - the leader emits a Warning Event ([`CHANGED_REASON`], in namespace `default`, regarding the
//!   configuration) naming what changed and who changed it, and
//! - restores the desired configuration (create, or replace guarded by resourceVersion).
//!
//! Who: the configuration is not itself subject to admission webhooks (kube-apiserver never
//! sends `ValidatingWebhookConfiguration` writes to webhooks, so that a broken webhook cannot
//! lock its own fix out), so Lien's webhook cannot see the write. The writer is read from
//! `metadata.managedFields`: the most recent entry by a manager other than Lien's. A deletion
//! leaves no object to read; the Event then names the last writer seen before it and points to
//! the API server's audit log.
//!
//! [`drift`] and [`last_writer`] are pure; [`Reconciler::run`] is the I/O edge.

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use serde_json::Value;
use tokio::sync::{mpsc, watch};

/// The reason of the Warning Event when the configuration was changed or deleted.
pub const CHANGED_REASON: &str = "WebhookConfigurationChanged";
/// The condition reason of every Usage while the configuration is missing or differs (defined
/// beside the status computation that reads it).
pub use lien_decide::desired::NOT_CONFIGURED_REASON;

/// Webhook fields that, absent from the desired configuration, narrow what kube-apiserver sends
/// when someone adds them. kube-apiserver defaults the selectors to `{}`, which selects all.
const NARROWING: &[&str] = &["objectSelector", "namespaceSelector", "matchConditions"];

/// Whether Lien's webhook configuration is as desired, for the status computation. The default
/// is "always configured" (a controller run without the reconciler, as in unit tests).
#[derive(Debug, Clone)]
pub struct Enforcement {
    rx: watch::Receiver<Option<String>>,
}

impl Default for Enforcement {
    fn default() -> Self {
        let (_, rx) = watch::channel(None);
        Self { rx }
    }
}

impl Enforcement {
    /// A flag and its setter (the reconciler keeps the setter).
    pub fn channel() -> (watch::Sender<Option<String>>, Self) {
        let (tx, rx) = watch::channel(None);
        (tx, Self { rx })
    }

    /// Why protection is not enforced right now (`None`: it is).
    pub fn problem(&self) -> Option<String> {
        self.rx.borrow().clone()
    }

    /// A receiver that sees every change (to re-plan statuses when it flips).
    pub fn subscribe(&self) -> watch::Receiver<Option<String>> {
        self.rx.clone()
    }
}

fn hook_name(hook: &Value) -> &str {
    hook["name"].as_str().unwrap_or_default()
}

fn empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// The kind of a desired configuration (validating when it does not say).
fn kind_of(desired: &Value) -> &str {
    desired["kind"]
        .as_str()
        .unwrap_or("ValidatingWebhookConfiguration")
}

/// How `actual` departs from `desired`, in words (`None`: it protects as desired). Fields
/// kube-apiserver adds by default (`matchPolicy`, `timeoutSeconds`, empty selectors) are not
/// departures; every field Lien sets must be as Lien set it, every webhook Lien defines must be
/// there, no other webhook may be, and no selector or match condition may be added.
pub fn drift(desired: &Value, actual: Option<&Value>) -> Option<String> {
    let name = desired["metadata"]["name"].as_str().unwrap_or("lien");
    let kind = kind_of(desired);
    let Some(actual) = actual else {
        return Some(format!("{kind} {name} is missing"));
    };
    let want = desired["webhooks"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let have = actual["webhooks"].as_array().map_or(&[][..], Vec::as_slice);
    let mut changes = Vec::new();
    for w in want {
        let hook = hook_name(w);
        let Some(h) = have.iter().find(|h| hook_name(h) == hook) else {
            changes.push(format!("webhook {hook} is missing"));
            continue;
        };
        if let Some(fields) = w.as_object() {
            for (field, value) in fields {
                if h.get(field) != Some(value) {
                    changes.push(format!("webhooks[{hook}].{field} differs"));
                }
            }
        }
        for field in NARROWING {
            if w.get(*field).is_none() && h.get(*field).is_some_and(|v| !empty(v)) {
                changes.push(format!("webhooks[{hook}].{field} was added"));
            }
        }
    }
    for h in have {
        if !want.iter().any(|w| hook_name(w) == hook_name(h)) {
            changes.push(format!("webhook {} was added", hook_name(h)));
        }
    }
    (!changes.is_empty()).then(|| format!("{kind} {name} was changed: {}", changes.join(", ")))
}

/// The manager of the most recent `managedFields` entry not by `own_manager`: who last wrote
/// the object, other than Lien.
pub fn last_writer(actual: &Value, own_manager: &str) -> Option<String> {
    actual["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .filter(|e| e["manager"].as_str().is_some_and(|m| m != own_manager))
        // RFC 3339 in UTC with the same precision: the text orders as the time does.
        .max_by(|a, b| {
            a["time"]
                .as_str()
                .unwrap_or_default()
                .cmp(b["time"].as_str().unwrap_or_default())
        })
        .and_then(|e| e["manager"].as_str())
        .map(str::to_owned)
}

/// The Event note for a drift: what and who, and that it is being restored.
pub fn changed_note(drift: &str, writer: Option<&str>, deleted: bool) -> String {
    let who = match (writer, deleted) {
        (Some(w), false) => format!("last written by {w:?} (its managedFields manager)"),
        (Some(w), true) => format!(
            "who deleted it is in the API server's audit log; its last writer other than Lien was {w:?}"
        ),
        (None, _) => "by whom is in the API server's audit log".to_owned(),
    };
    // The drift names the configuration's kind first (`drift`).
    let lost = if drift.starts_with("MutatingWebhookConfiguration") {
        "deletion requests (kubectl lien delete --when-free) were not sealed, nor hand-written replay records refused, while it differed"
    } else {
        "DELETEs of objects in use were not checked while it differed"
    };
    let mut note = format!("{drift}; {who}. {lost}; Lien is restoring it");
    // kube-apiserver refuses notes over 1 KiB.
    if note.len() > 1024 {
        let mut end = 1021;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push_str("...");
    }
    note
}

fn api_resource(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "admissionregistration.k8s.io",
        "v1",
        kind,
    ))
}

/// Keeps the configuration named in the desired value as desired; see the module docs.
pub struct Reconciler {
    client: kube::Client,
    desired: watch::Receiver<Value>,
    enforcement: watch::Sender<Option<String>>,
    leader: watch::Receiver<bool>,
    field_manager: String,
    reporter: Reporter,
    resync: Duration,
}

impl std::fmt::Debug for Reconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconciler").finish_non_exhaustive()
    }
}

impl Reconciler {
    /// `desired`: the configuration as Lien would apply it now (it changes with the CA bundle);
    /// `enforcement`: the setter of the flag the controller reads; `leader`: only the leader
    /// writes and reports; `field_manager`: Lien's own manager name (not "the last writer").
    pub fn new(
        client: kube::Client,
        desired: watch::Receiver<Value>,
        enforcement: watch::Sender<Option<String>>,
        leader: watch::Receiver<bool>,
        field_manager: &str,
        reporter: Reporter,
    ) -> Self {
        Self {
            client,
            desired,
            enforcement,
            leader,
            field_manager: field_manager.to_owned(),
            reporter,
            resync: Duration::from_secs(30),
        }
    }

    /// Runs until `stop` turns true. Checks on every change of the configuration (a watch), of
    /// the desired value and of leadership, every 30 s, and 200 ms after a failed restore.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let kind = kind_of(&self.desired.borrow()).to_owned();
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &api_resource(&kind));
        let recorder = Recorder::new(self.client.clone(), self.reporter.clone());
        // The configuration's watch is the watch service's one loop (its backoff, failures
        // retried), in a task of its own that ends with this one; only this configuration's
        // events are news.
        let (changes_tx, mut changes) = mpsc::unbounded_channel();
        let name = self.desired.borrow()["metadata"]["name"]
            .as_str()
            .map(str::to_owned);
        let _watch_task = crate::watch::AbortOnDrop(crate::watch::spawn_forward(
            api.clone(),
            changes_tx,
            move |ev| match ev {
                watcher::Event::Apply(o)
                | watcher::Event::Delete(o)
                | watcher::Event::InitApply(o) => (o.metadata.name == name).then_some(()),
                watcher::Event::Init | watcher::Event::InitDone => None,
            },
            |e| tracing::warn!(error = %e, "webhook configuration watch failed; retrying"),
        ));
        // What was last seen of the configuration (for a deletion's Event) and which drift was
        // last reported (one Event per departure, not one per check).
        let mut last_seen: Option<Value> = None;
        let mut reported: Option<String> = None;
        let mut retry = false;
        let mut first = true;
        // The desired configuration changed (a new CA bundle): the difference is Lien's own
        // update to make, not tampering — no Event, and protection still holds meanwhile (the old
        // bundle stays valid while the new one propagates).
        let mut own_change = false;
        loop {
            let wait = if retry {
                Duration::from_millis(200)
            } else {
                self.resync
            };
            if !std::mem::take(&mut first) {
                tokio::select! {
                    _ = stop.wait_for(|s| *s) => return,
                    _ = tokio::time::sleep(wait) => {}
                    Ok(()) = self.desired.changed() => own_change = true,
                    Ok(()) = self.leader.changed() => {}
                    next = changes.recv() => if next.is_none() { return },
                }
            }
            let desired = self.desired.borrow().clone();
            let name = desired["metadata"]["name"]
                .as_str()
                .unwrap_or("lien")
                .to_owned();
            let actual = match api.get_opt(&name).await {
                Ok(o) => o.and_then(|o| serde_json::to_value(o).ok()),
                Err(e) => {
                    tracing::debug!(error = %e, "reading the webhook configuration");
                    retry = true;
                    continue;
                }
            };
            let found = drift(&desired, actual.as_ref());
            let Some(why) = found else {
                self.enforcement.send_if_modified(|v| v.take().is_some());
                reported = None;
                retry = false;
                own_change = false;
                last_seen = actual;
                continue;
            };
            if !own_change {
                self.enforcement.send_if_modified(|v| {
                    let changed = v.as_ref() != Some(&why);
                    *v = Some(why.clone());
                    changed
                });
            }
            if !*self.leader.borrow() {
                retry = false;
                continue;
            }
            if !own_change && reported.as_ref() != Some(&why) {
                let seen = actual.as_ref().or(last_seen.as_ref());
                let writer = seen.and_then(|a| last_writer(a, &self.field_manager));
                let note = changed_note(&why, writer.as_deref(), actual.is_none());
                tracing::warn!(configuration = name, writer, "{note}");
                let reference = ObjectReference {
                    api_version: Some("admissionregistration.k8s.io/v1".into()),
                    kind: Some(kind.clone()),
                    name: Some(name.clone()),
                    uid: seen.and_then(|a| a["metadata"]["uid"].as_str().map(str::to_owned)),
                    // The recorder folds Events with the same reference, reason and action into
                    // one series keeping the first note: each edited state is its own Event.
                    resource_version: actual
                        .as_ref()
                        .and_then(|a| a["metadata"]["resourceVersion"].as_str())
                        .map(str::to_owned),
                    ..ObjectReference::default()
                };
                let event = Event {
                    type_: EventType::Warning,
                    reason: CHANGED_REASON.into(),
                    note: Some(note),
                    action: if actual.is_some() {
                        "Restore"
                    } else {
                        "Recreate"
                    }
                    .into(),
                    secondary: None,
                };
                if let Err(e) = recorder.publish(&event, &reference).await {
                    tracing::warn!(error = %e, "publishing the webhook configuration's event");
                }
                reported = Some(why);
            }
            retry = self.restore(&api, &desired, actual.as_ref()).await.is_err();
            if actual.is_some() {
                last_seen = actual;
            }
        }
    }

    /// Writes the desired configuration: created if missing, else replaced whole (a replace, not
    /// an apply, so that what others added is removed too), guarded by the resourceVersion read.
    async fn restore(
        &self,
        api: &Api<DynamicObject>,
        desired: &Value,
        actual: Option<&Value>,
    ) -> Result<(), kube::Error> {
        let mut object = desired.clone();
        let pp = PostParams {
            field_manager: Some(self.field_manager.clone()),
            ..PostParams::default()
        };
        let name = desired["metadata"]["name"].as_str().unwrap_or("lien");
        let result = match actual {
            None => {
                let o: DynamicObject =
                    serde_json::from_value(object).map_err(kube::Error::SerdeError)?;
                api.create(&pp, &o).await.map(drop)
            }
            Some(a) => {
                // Its metadata as it is (others' labels and annotations stay), with Lien's labels.
                let mut metadata = a["metadata"].clone();
                if let Some(m) = metadata.as_object_mut() {
                    m.remove("managedFields");
                }
                if let Some(labels) = desired["metadata"]["labels"].as_object() {
                    for (k, v) in labels {
                        metadata["labels"][k] = v.clone();
                    }
                }
                object["metadata"] = metadata;
                let o: DynamicObject =
                    serde_json::from_value(object).map_err(kube::Error::SerdeError)?;
                api.replace(name, &pp, &o).await.map(drop)
            }
        };
        match &result {
            Ok(()) => tracing::info!(configuration = name, "restored the webhook configuration"),
            Err(e) => {
                tracing::warn!(error = %e, configuration = name, "restoring the webhook configuration; will retry")
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn desired() -> Value {
        json!({
            "metadata": {"name": "lien"},
            "webhooks": [
                {"name": "delete.lien.dev", "failurePolicy": "Fail",
                 "objectSelector": {"matchLabels": {"lien.dev/in-use": "true"}},
                 "rules": [{"operations": ["DELETE"]}]},
                {"name": "usages.lien.dev", "failurePolicy": "Fail", "rules": []},
            ],
        })
    }

    #[test]
    fn defaults_are_not_drift_but_every_change_is() {
        let mut actual = desired();
        actual["webhooks"][0]["matchPolicy"] = json!("Equivalent");
        actual["webhooks"][1]["namespaceSelector"] = json!({});
        actual["webhooks"][1]["objectSelector"] = json!({});
        actual["metadata"]["resourceVersion"] = json!("7");
        assert_eq!(drift(&desired(), Some(&actual)), None);

        assert_eq!(
            drift(&desired(), None).as_deref(),
            Some("ValidatingWebhookConfiguration lien is missing")
        );
        let mut ignore = actual.clone();
        ignore["webhooks"][0]["failurePolicy"] = json!("Ignore");
        assert_eq!(
            drift(&desired(), Some(&ignore)).as_deref(),
            Some(
                "ValidatingWebhookConfiguration lien was changed: webhooks[delete.lien.dev].failurePolicy differs"
            )
        );
        let mut narrowed = actual.clone();
        narrowed["webhooks"][1]["objectSelector"] = json!({"matchLabels": {"x": "y"}});
        assert!(
            drift(&desired(), Some(&narrowed))
                .is_some_and(|d| d.contains("webhooks[usages.lien.dev].objectSelector was added"))
        );
        let mut gone = actual.clone();
        gone["webhooks"] = json!([actual["webhooks"][1].clone()]);
        assert!(
            drift(&desired(), Some(&gone))
                .is_some_and(|d| d.contains("webhook delete.lien.dev is missing"))
        );
    }

    #[test]
    fn the_mutating_configuration_is_named_and_its_loss_explained() {
        let mut desired = desired();
        desired["kind"] = json!("MutatingWebhookConfiguration");
        let why = drift(&desired, None).expect("missing");
        assert_eq!(why, "MutatingWebhookConfiguration lien is missing");
        let note = changed_note(&why, Some("mallory"), true);
        assert!(
            note.contains("deletion requests (kubectl lien delete --when-free) were not sealed"),
            "{note}"
        );
        let mut changed = desired.clone();
        changed["webhooks"][0]["failurePolicy"] = json!("Ignore");
        assert!(
            drift(&desired, Some(&changed)).is_some_and(|d| d.starts_with(
                "MutatingWebhookConfiguration lien was changed: webhooks[delete.lien.dev].failurePolicy differs"
            ))
        );
        let validating = changed_note(
            &drift(&super::tests::desired(), None).expect("missing"),
            None,
            true,
        );
        assert!(
            validating.contains("DELETEs of objects in use were not checked"),
            "{validating}"
        );
    }

    #[test]
    fn the_last_writer_is_the_latest_manager_other_than_lien() {
        let actual = json!({"metadata": {"managedFields": [
            {"manager": "kubectl-edit", "time": "2026-11-23T10:00:00Z"},
            {"manager": "lien", "time": "2026-11-23T10:05:00Z"},
            {"manager": "mallory", "time": "2026-11-23T10:03:00Z"},
        ]}});
        assert_eq!(last_writer(&actual, "lien").as_deref(), Some("mallory"));
        assert_eq!(last_writer(&json!({}), "lien"), None);
    }
}
