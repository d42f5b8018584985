//! The CascadeRule reconciler: foreground cascading deletion across scopes (issue 9, seed 001).
//!
//! # Layout
//!
//! - `decide`: the decision for one parent, pure (no I/O, no clock).
//! - `state`: `CascadeState`, everything below and its event handling — synchronous,
//!   no I/O, unit-tested event by event without a runtime. Its output is data: the watches to
//!   start or stop and the writes to send (`Effect`, `CascadeWrite`, each
//!   write with the resourceVersion or UID it was computed from).
//! - this module: the runtime (`CascadeRuntime`) — the watch tasks, and the writer
//!   (`CascadeWriter`) that sends the writes and reports their outcome back as events. The
//!   controller's event loop owns the runtime (no locks): it hands it the cascade's events,
//!   asks it for its writes in every write pass (`Controller`'s plan, leader only) and sends
//!   them as `Write::Cascade` through the one write loop.
//!
//! # Data model
//!
//! - rules: every CascadeRule, its compiled CEL, and per parent kind the rule in charge (the
//!   oldest; a second rule for the same kind reports `Ready=False`, reason `Conflict`).
//! - parents: per parent kind a watch of full objects (the CEL reads any field), each reduced
//!   at once to what the decision needs (finalizers, Lien's record, the child references the
//!   CEL yields) and dropped.
//! - children: per child kind a rule lists in `childKinds`, started on demand, a watch of
//!   full objects (the back reference reads any field) reduced at once to UID, deletion state,
//!   finalizers and the parents it names back under each rule listing the kind; a reverse
//!   index (group, kind, name) → parents says which parents a child event concerns. A kind no
//!   rule lists is never watched, whatever a parent names (see `decide`, "What Lien may
//!   delete").
//! - a dirty set of parents: each is decided ([`decide::decide`], pure) and its writes run in a
//!   task (bounded concurrency), one task per parent at a time.
//!
//! Nothing polls: a pass follows a batch of events, or the earliest deadline the state
//! computes (`CascadeState::next_wake`: a retry, a refused DELETE's backoff, a report, a child
//! turning stuck, a throttled status write).
//!
//! Only the leader decides and writes (the controller's Lease: write passes run only while
//! leading); a follower keeps the rules cached and takes over with a full pass.
//!
//! Lien puts its finalizer on every rule too: a rule being deleted first releases every
//! parent of its kind (finalizer and record removed — parents waiting for children are then
//! deleted at once), then lets the rule go. So no parent keeps a finalizer without a rule, even
//! if the rule is deleted while Lien is down.

/// The pure decision for one parent, in `lien-decide`.
pub use lien_decide::cascade as decide;
mod state;

pub(crate) use self::state::CascadeWrite;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, PartialObjectMeta, Patch, PatchParams,
    Preconditions,
};
use kube::core::ApiResource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use lien_api::{CASCADE_FINALIZER, CascadeRule, PropagationPolicy};
use lien_core::GroupKind;
use serde_json::json;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use self::decide::CHILDREN_ANNOTATION;
use self::state::{CascadeState, Effect, Msg, ParentId, ParentMeta, WaitingReport, truncate};
use crate::watch::{Discovered, DiscoveryError};

/// How the reconciler runs.
#[derive(Debug, Clone)]
pub struct CascadeConfig {
    /// A child whose deletion has not progressed (no change of its finalizers, its deletion
    /// state or what holds it) for this long is named as stuck (`--cascade-stuck-after`).
    pub stuck_after: Duration,
    /// The first "still waiting" report on a parent, after its deletion started; then reports
    /// back off, doubling up to `report_max`.
    pub report_after: Duration,
    /// The longest interval between two reports on one parent.
    pub report_max: Duration,
    /// First retry of a refused or failed write (doubles up to `retry_max`).
    pub retry_base: Duration,
    pub retry_max: Duration,
    /// How many parents' writes run at once.
    pub concurrency: usize,
    /// The field manager of Lien's writes.
    pub field_manager: String,
    /// The events' reporter.
    pub reporter: Reporter,
}

impl Default for CascadeConfig {
    fn default() -> Self {
        Self {
            stuck_after: Duration::from_secs(300),
            report_after: Duration::from_secs(10),
            report_max: Duration::from_secs(300),
            retry_base: Duration::from_millis(500),
            retry_max: Duration::from_secs(60),
            concurrency: 32,
            field_manager: "lien".into(),
            reporter: Reporter {
                controller: "lien-controller".into(),
                instance: None,
            },
        }
    }
}

/// The API requests the reconciler made (not counting its watches: one list and one watch per
/// kind), logged every few seconds at `info` while they change (`cascade: API requests`).
#[derive(Debug, Default)]
pub struct Calls {
    /// Finalizer and record writes on parents.
    pub parent_writes: AtomicU64,
    /// DELETEs of children.
    pub child_deletes: AtomicU64,
    /// Events published.
    pub events: AtomicU64,
    /// Finalizer and status writes on rules.
    pub rule_writes: AtomicU64,
    /// Lists (and discovery) to find the dependents that hold a foreground deletion.
    pub dependents_lists: AtomicU64,
}

impl Calls {
    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// `(parent_writes, child_deletes, events, rule_writes, dependents_lists)`.
    pub fn snapshot(&self) -> [u64; 5] {
        [
            self.parent_writes.load(Ordering::Relaxed),
            self.child_deletes.load(Ordering::Relaxed),
            self.events.load(Ordering::Relaxed),
            self.rule_writes.load(Ordering::Relaxed),
            self.dependents_lists.load(Ordering::Relaxed),
        ]
    }
}

/// Discovers a kind (retried under the watch service's backoff while it is not served: a CRD
/// installed later), says so to the event loop, then forwards its objects' events until the
/// channel closes — or the kind stops being served, when it is discovered again.
fn spawn_kind_watch(
    client: Client,
    gk: GroupKind,
    api_version: String,
    tx: mpsc::UnboundedSender<Msg>,
    found: fn(GroupKind, Result<Discovered, DiscoveryError>) -> Msg,
    wrap: fn(GroupKind, watcher::Event<DynamicObject>) -> Msg,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        // Whether the last list was refused (403): then the kind is said found again only
        // once a list goes through, so that its rules' status does not flap every retry.
        let mut refused = false;
        loop {
            let discovered = crate::watch::discover_until_served(&client, &gk, &api_version, |e| {
                tx.send(found(gk.clone(), Err(e))).is_ok()
            })
            .await;
            let Some(discovered) = discovered else {
                return;
            };
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &discovered.ar);
            let resource = crate::watch::grantable_resource(&discovered.ar);
            // After a refusal the kind is announced at the end of the first list that goes
            // through; otherwise now.
            let mut announce = None;
            if refused {
                announce = Some(discovered);
            } else if tx.send(found(gk.clone(), Ok(discovered))).is_err() {
                return;
            }
            let ended = crate::watch::forward_while_served(
                api,
                &tx,
                |ev| {
                    if matches!(ev, watcher::Event::InitDone)
                        && let Some(d) = announce.take()
                    {
                        let _ = tx.send(found(gk.clone(), Ok(d)));
                    }
                    Some(wrap(gk.clone(), ev))
                },
                |e| tracing::warn!(error = %e, kind = %gk, "cascade watch failed; retrying"),
            )
            .await;
            match ended {
                crate::watch::Ended::Closed => return,
                // Its CRD was deleted: discovered again, from a fresh list once it is back.
                crate::watch::Ended::NotServed => refused = false,
                // RBAC does not grant the resource: the rule's status says which, and the
                // list is tried again (Lien cannot watch its own ClusterRole change).
                crate::watch::Ended::Forbidden => {
                    refused = true;
                    let e = DiscoveryError::Forbidden { resource };
                    if tx.send(found(gk.clone(), Err(e))).is_err() {
                        return;
                    }
                    tokio::time::sleep(crate::controller::FORBIDDEN_RETRY).await;
                }
            }
        }
    })
}

/// The CascadeRule reconciler's runtime, driven by the controller's event loop (one loop, one
/// leader): it owns the [`CascadeState`] and its watch tasks; its writes go out as
/// `Write::Cascade` through the controller's write loop, which hands them to the
/// [`CascadeWriter`].
pub(crate) struct CascadeRuntime {
    client: Client,
    st: CascadeState,
    tx: mpsc::UnboundedSender<Msg>,
    watches: HashMap<(bool, GroupKind), JoinHandle<()>>,
    rules_task: JoinHandle<()>,
    /// Writes asked for while handling events (a refusal said at once), sent with the next
    /// plan.
    pending: Vec<CascadeWrite>,
    calls: Arc<Calls>,
    logged: ([u64; 5], Instant),
}

impl std::fmt::Debug for CascadeRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CascadeRuntime").finish_non_exhaustive()
    }
}

/// One event for the cascade's state (from its watches or its writer), carried on its own
/// channel into the controller's event loop.
pub(crate) use self::state::Msg as CascadeEvent;

impl CascadeRuntime {
    /// Starts the rule watch. Returns the runtime, the writer the write loop sends its writes
    /// with, and the channel of its events.
    pub(crate) fn start(
        client: Client,
        config: CascadeConfig,
        recorder: Recorder,
    ) -> (Self, CascadeWriter, mpsc::UnboundedReceiver<CascadeEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let calls = Arc::new(Calls::default());
        let rules_task = crate::watch::spawn_forward(
            Api::<CascadeRule>::all(client.clone()),
            tx.clone(),
            |ev| Some(Msg::Rule(ev)),
            |e| tracing::warn!(error = %e, "CascadeRule watch failed; retrying"),
        );
        let writer = CascadeWriter {
            client: client.clone(),
            recorder,
            semaphore: Arc::new(Semaphore::new(config.concurrency.max(1))),
            tx: tx.clone(),
            field_manager: config.field_manager.clone(),
            retry: config.retry_base,
            calls: calls.clone(),
        };
        let runtime = Self {
            client,
            st: CascadeState::new(config),
            tx,
            watches: HashMap::new(),
            rules_task,
            pending: Vec::new(),
            calls,
            logged: ([0; 5], Instant::now()),
        };
        (runtime, writer, rx)
    }

    /// Applies an event to the state (every replica).
    pub(crate) fn handle(&mut self, ev: CascadeEvent) {
        self.st.handle(ev);
        let effects = self.st.take_effects();
        self.carry_out(effects);
    }

    /// This replica became the leader: everything is decided once.
    pub(crate) fn lead(&mut self) {
        self.st.lead();
    }

    /// The leader's pass: the writes to send now, and when to plan again without an event.
    pub(crate) fn plan(&mut self) -> (Vec<CascadeWrite>, Option<Duration>) {
        let effects = self.st.decide();
        self.carry_out(effects);
        self.log_calls();
        let wake = self
            .st
            .next_wake()
            .map(|at| at.saturating_duration_since(Instant::now()));
        (std::mem::take(&mut self.pending), wake)
    }

    /// Starts and stops watches; keeps writes for the plan.
    fn carry_out(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            match effect {
                Effect::WatchParents { gk, api_version } => self.watch(true, gk, api_version),
                Effect::StopParents(gk) => {
                    if let Some(old) = self.watches.remove(&(true, gk)) {
                        old.abort();
                    }
                }
                Effect::WatchChildren { gk, api_version } => self.watch(false, gk, api_version),
                Effect::Write(w) => self.pending.push(*w),
            }
        }
    }

    /// Starts the watch of a parent kind (`parents`) or a child kind, stopping the one it
    /// replaces.
    fn watch(&mut self, parents: bool, gk: GroupKind, api_version: String) {
        let (client, tx) = (self.client.clone(), self.tx.clone());
        let task = if parents {
            spawn_kind_watch(
                client,
                gk.clone(),
                api_version,
                tx,
                Msg::ParentKind,
                Msg::Parent,
            )
        } else {
            spawn_kind_watch(
                client,
                gk.clone(),
                api_version,
                tx,
                Msg::ChildKind,
                Msg::Child,
            )
        };
        if let Some(old) = self.watches.insert((parents, gk), task) {
            old.abort();
        }
    }

    /// Logs the API requests made, every few seconds while they change.
    fn log_calls(&mut self) {
        if self.logged.1.elapsed() < Duration::from_secs(5) {
            return;
        }
        let now = self.calls.snapshot();
        if now != self.logged.0 {
            let [
                parent_writes,
                child_deletes,
                events,
                rule_writes,
                dependents_lists,
            ] = now;
            tracing::info!(
                parent_writes,
                child_deletes,
                events,
                rule_writes,
                dependents_lists,
                "cascade: API requests"
            );
        }
        self.logged = (now, Instant::now());
    }

    /// Stops every task it started.
    pub(crate) fn stop(self) {
        self.rules_task.abort();
        for task in self.watches.into_values() {
            task.abort();
        }
    }
}

/// Sends the reconciler's writes, each in a task of its own (a parent's writes in order, at
/// most `concurrency` parents at once), and reports their outcome back to the event loop.
pub(crate) struct CascadeWriter {
    client: Client,
    recorder: Recorder,
    semaphore: Arc<Semaphore>,
    tx: mpsc::UnboundedSender<Msg>,
    field_manager: String,
    retry: Duration,
    calls: Arc<Calls>,
}

impl CascadeWriter {
    fn params(&self) -> PatchParams {
        PatchParams {
            field_manager: Some(self.field_manager.clone()),
            ..PatchParams::default()
        }
    }

    pub(crate) fn send(&self, w: CascadeWrite) {
        let calls = self.calls.clone();
        match w {
            CascadeWrite::Parent {
                id,
                ar,
                meta,
                deletes,
                releasing,
            } => {
                let (client, tx, semaphore) =
                    (self.client.clone(), self.tx.clone(), self.semaphore.clone());
                let (params, retry) = (self.params(), self.retry);
                tokio::spawn(async move {
                    let _permit = semaphore.acquire_owned().await;
                    write_parent(
                        &client, &tx, &calls, &params, retry, id, &ar, meta, deletes, releasing,
                    )
                    .await;
                });
            }
            CascadeWrite::RuleFinalizers {
                name,
                resource_version,
                finalizers,
            } => {
                let api: Api<CascadeRule> = Api::all(self.client.clone());
                let patch = json!({"metadata": {"resourceVersion": resource_version, "finalizers": finalizers}});
                let params = self.params();
                let tx = self.tx.clone();
                tokio::spawn(async move {
                    Calls::bump(&calls.rule_writes);
                    if let Err(e) = api.patch(&name, &params, &Patch::Merge(&patch)).await {
                        tracing::debug!(error = %e, rule = %name, "cascade: rule finalizer write failed");
                    }
                    let _ = tx.send(Msg::RuleWritten);
                });
            }
            CascadeWrite::RuleStatus { name, status, .. } => {
                let api: Api<CascadeRule> = Api::all(self.client.clone());
                let params = self.params();
                tokio::spawn(async move {
                    Calls::bump(&calls.rule_writes);
                    let patch = json!({ "status": status });
                    if let Err(e) = api
                        .patch_status(&name, &params, &Patch::Merge(&patch))
                        .await
                    {
                        tracing::debug!(error = %e, rule = %name, "cascade: status write failed");
                    }
                });
            }
            CascadeWrite::Event {
                reference,
                reason,
                note,
            } => {
                let recorder = self.recorder.clone();
                let event = Event {
                    type_: EventType::Warning,
                    reason,
                    note: Some(note),
                    action: "Cascade".into(),
                    secondary: None,
                };
                tokio::spawn(async move {
                    Calls::bump(&calls.events);
                    if let Err(e) = recorder.publish(&event, &reference).await {
                        tracing::warn!(error = %e, "publishing a cascade event");
                    }
                });
            }
            CascadeWrite::Report {
                jobs,
                foreground_uids,
            } => {
                let (recorder, client, tx) =
                    (self.recorder.clone(), self.client.clone(), self.tx.clone());
                tokio::spawn(async move {
                    report(&recorder, &client, &tx, &calls, jobs, foreground_uids).await;
                });
            }
        }
    }
}

/// A parent's finalizer and record, then its children's DELETEs.
#[allow(clippy::too_many_arguments)]
async fn write_parent(
    client: &Client,
    tx: &mpsc::UnboundedSender<Msg>,
    calls: &Calls,
    params: &PatchParams,
    retry: Duration,
    id: ParentId,
    ar: &ApiResource,
    meta: Option<ParentMeta>,
    deletes: Vec<(decide::Delete, ApiResource)>,
    releasing: bool,
) {
    let (gk, ns, name) = &id;
    if let Some(meta) = meta {
        let api: Api<DynamicObject> = if ns.is_empty() {
            Api::all_with(client.clone(), ar)
        } else {
            Api::namespaced_with(client.clone(), ns, ar)
        };
        let mut m = json!({
            "resourceVersion": meta.resource_version,
            "finalizers": meta.finalizers,
        });
        if let Some(record) = meta.record {
            m["annotations"] = json!({ CHILDREN_ANNOTATION: record });
        }
        let patch = json!({ "metadata": m });
        Calls::bump(&calls.parent_writes);
        match api.patch(name, params, &Patch::Merge(&patch)).await {
            // The cache learns the write at once (the watch repeats it later), so the
            // next decision does not re-send it with a stale resourceVersion.
            Ok(obj) => {
                let ours = obj.finalizers().iter().any(|f| f == CASCADE_FINALIZER);
                let _ = if releasing && ours {
                    tx.send(Msg::Gone(id.clone()))
                } else {
                    tx.send(Msg::Written(gk.clone(), obj))
                };
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {
                let _ = tx.send(Msg::Done(id.clone(), None));
                return;
            }
            Err(e) => {
                tracing::debug!(error = %e, parent = %name, kind = %gk, "cascade: parent write failed; retrying");
                let _ = tx.send(Msg::Done(id.clone(), Some(retry)));
                return;
            }
        }
    }
    let mut failed = false;
    for (d, ar) in deletes {
        let api: Api<DynamicObject> = if d.child.namespace.is_empty() {
            Api::all_with(client.clone(), &ar)
        } else {
            Api::namespaced_with(client.clone(), &d.child.namespace, &ar)
        };
        let params = DeleteParams {
            propagation_policy: Some(match d.policy {
                PropagationPolicy::Foreground => kube::api::PropagationPolicy::Foreground,
                PropagationPolicy::Background => kube::api::PropagationPolicy::Background,
            }),
            preconditions: Some(Preconditions {
                uid: Some(d.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        Calls::bump(&calls.child_deletes);
        match api.delete(&d.child.name, &params).await {
            Ok(_) => {}
            // Gone already.
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            // Another object holds the name: the original is gone; never delete this one.
            Err(kube::Error::Api(s)) if s.code == 409 && s.message.contains("UID in") => {}
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 403 => {
                // Refused, e.g. by Lien's own webhook: the child is in use. Its
                // refusal spans lines (written for a terminal); status and Event notes
                // take it on one.
                let _ = tx.send(Msg::Refused(
                    d.uid.clone(),
                    s.message
                        .lines()
                        .map(str::trim)
                        .collect::<Vec<_>>()
                        .join(" "),
                    Some((id.clone(), d.child.to_string())),
                ));
                failed = true;
            }
            Err(e) => {
                tracing::debug!(error = %e, child = %d.child, "cascade: delete failed; retrying");
                let _ = tx.send(Msg::Refused(d.uid.clone(), e.to_string(), None));
                failed = true;
            }
        }
    }
    let _ = tx.send(Msg::Done(id.clone(), failed.then_some(retry)));
}

/// Publishes the waiting reports due, after finding what holds foreground-deleting children.
async fn report(
    recorder: &Recorder,
    client: &Client,
    tx: &mpsc::UnboundedSender<Msg>,
    calls: &Calls,
    jobs: Vec<(ObjectReference, WaitingReport)>,
    foreground_uids: Vec<String>,
) {
    let holders = if foreground_uids.is_empty() {
        HashMap::new()
    } else {
        let h = dependents(client, &foreground_uids, calls).await;
        let _ = tx.send(Msg::Holders(h.clone()));
        h
    };
    for (reference, waiting) in jobs {
        let lines: Vec<String> = waiting
            .children_uids
            .iter()
            .map(|(c, uid)| {
                let mut held = c.held_by.clone();
                if let Some(h) = holders.get(uid).filter(|h| !h.is_empty()) {
                    held = held.replace(
                        "foregroundDeletion (its dependents)",
                        &format!("foregroundDeletion: its dependents {}", h.join("; ")),
                    );
                }
                let ns = if c.namespace.is_empty() {
                    String::new()
                } else {
                    format!("{}/", c.namespace)
                };
                format!(
                    "{} {ns}{}{} ({held})",
                    c.kind,
                    c.name,
                    if c.stuck { " is stuck" } else { "" }
                )
            })
            .collect();
        let note = format!(
            "deletion waits for {} child(ren) since {}: {}",
            lines.len(),
            waiting.for_how_long,
            lines.join("; ")
        );
        let reason = if waiting.children_uids.iter().any(|(c, _)| c.stuck) {
            "CascadeStuck"
        } else {
            "CascadeWaiting"
        };
        let event = Event {
            type_: EventType::Warning,
            reason: reason.into(),
            note: Some(truncate(note, 1000)),
            action: "Cascade".into(),
            secondary: None,
        };
        Calls::bump(&calls.events);
        if let Err(e) = recorder.publish(&event, &reference).await {
            tracing::warn!(error = %e, "publishing a cascade event");
        }
    }
}

/// The objects that hold foreground-deleting children: found the way the garbage collector
/// finds dependents — by their owner references — over every listable kind (metadata only, one
/// list per kind per report round, shared by every waiting parent). For each child, the
/// dependents with `blockOwnerDeletion` are followed down to those that hold the tree: ones
/// with finalizers of their own, or not yet being deleted.
async fn dependents(
    client: &Client,
    roots: &[String],
    calls: &Calls,
) -> HashMap<String, Vec<String>> {
    let mut by_owner: HashMap<String, Vec<(String, PartialObjectMeta<DynamicObject>)>> =
        HashMap::new();
    Calls::bump(&calls.dependents_lists);
    let resources =
        match crate::watch::served_resources(client, crate::watch::Versions::Preferred).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "cascade: discovery for dependents failed");
                return HashMap::new();
            }
        };
    for r in resources {
        if !r.supports(kube::discovery::verbs::LIST)
            || r.ar.plural == "events"
            || r.ar.group == "coordination.k8s.io"
        {
            continue;
        }
        let ar = r.ar;
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        Calls::bump(&calls.dependents_lists);
        let Ok(list) = api.list_metadata(&ListParams::default()).await else {
            continue;
        };
        for item in list.items {
            for o in item.metadata.owner_references.clone().unwrap_or_default() {
                if o.block_owner_deletion == Some(true) {
                    by_owner
                        .entry(o.uid.clone())
                        .or_default()
                        .push((ar.kind.clone(), item.clone()));
                }
            }
        }
    }
    let mut out = HashMap::new();
    for root in roots {
        let mut found = Vec::new();
        let mut stack = vec![(root.clone(), 0usize)];
        let mut seen = HashSet::new();
        while let Some((uid, depth)) = stack.pop() {
            if depth > 8 || !seen.insert(uid.clone()) || found.len() >= 10 {
                continue;
            }
            for (kind, m) in by_owner.get(&uid).into_iter().flatten() {
                let own: Vec<String> = m
                    .metadata
                    .finalizers
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|f| f != decide::FOREGROUND_FINALIZER)
                    .collect();
                let name = match &m.metadata.namespace {
                    Some(ns) => format!(
                        "{kind} {ns}/{}",
                        m.metadata.name.clone().unwrap_or_default()
                    ),
                    None => format!("{kind} {}", m.metadata.name.clone().unwrap_or_default()),
                };
                if !own.is_empty() {
                    found.push(format!("{name} (finalizers {})", own.join(", ")));
                } else if m.metadata.deletion_timestamp.is_none() {
                    found.push(format!("{name} (not being deleted yet)"));
                }
                if let Some(u) = &m.metadata.uid {
                    stack.push((u.clone(), depth + 1));
                }
            }
        }
        found.sort();
        found.dedup();
        out.insert(root.clone(), found);
    }
    out
}
