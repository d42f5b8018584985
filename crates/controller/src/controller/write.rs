//! The write pass (leader only): the event loop computes a [`Plan`] from its state with the
//! pure functions of `desired` and `replay`; the write loop applies it, remembers what it sent
//! (by target and resourceVersion) and retries failed passes with a backoff.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use jiff::Timestamp;
use kube::runtime::events::Recorder;
use lien_core::seams::AccessDecision;
use lien_core::{RelationIndex, Source};
use parking_lot::RwLock;
use tokio::sync::{mpsc, oneshot, watch};

use super::state::State;
use super::{ControllerConfig, Msg, Shared};
use crate::cascade::{CascadeWrite, CascadeWriter};
use crate::desired;
use crate::metrics::Metrics;
use crate::replay::{self, ReplayAction};
use crate::resolve::cycle_problems;
use crate::rules;
use crate::writer::{WriteError, Writer};

/// One write Lien decided on. Each carries its target and the resourceVersion the decision was
/// computed from: the write loop sends a write at most once per (target, resourceVersion).
#[derive(Debug)]
pub(super) enum Write {
    /// Set or remove the in-use label of an object.
    Label(desired::LabelWrite),
    /// Set a usage's finalizer and owner references.
    UsageMeta(desired::UsageMetaWrite),
    /// Delete a usage whose users are gone and that nobody owns.
    OrphanDelete {
        /// The usage.
        source: Source,
        /// Its UID.
        uid: String,
    },
    /// Write a usage's status.
    Status {
        /// The usage.
        source: Source,
        /// The status.
        status: lien_api::UsageStatus,
        /// The usage's resourceVersion the status was computed from.
        resource_version: Option<String>,
    },
    /// Write a dependency rule's status.
    RuleStatus {
        /// The rule.
        source: Source,
        /// The status.
        status: lien_api::DependencyRuleStatus,
        /// The rule's resourceVersion the status was computed from.
        resource_version: Option<String>,
    },
    /// Re-issue a refused DELETE, or remove its record (`replay`'s actions).
    Replay(ReplayAction),
    /// Delete a free user of something held in its namespace, which is being deleted: what
    /// the namespace controller is stuck behind (`lien_decide::namespace_content`).
    NamespaceContent(desired::ObjectTarget),
    /// A CascadeRule's write (`cascade::state`): a parent's finalizer and record with the
    /// resourceVersion they were computed from, then its children's DELETEs each with the UID
    /// it was decided on; a rule's finalizers (resourceVersion) or status; an Event. Decided
    /// once each (the cascade's state guards its own repeats: writes in flight, DELETEs sent,
    /// responses ahead of their watch events), so the write loop does not remember them.
    Cascade(Box<CascadeWrite>),
}

impl Write {
    /// The target, as the key of what was sent. Removing a record Lien wrote and one it did
    /// not (forged) are the same write on the same target.
    fn id(&self) -> String {
        match self {
            Self::Label(w) => format!("label/{}", w.target.uid),
            Self::UsageMeta(w) => format!("meta/{}", w.uid),
            Self::OrphanDelete { uid, .. } => format!("orphan/{uid}"),
            Self::Status { source, .. } | Self::RuleStatus { source, .. } => {
                format!("status/{source}")
            }
            Self::Replay(ReplayAction::Delete { target, .. }) => format!("replay/{}", target.uid),
            Self::Replay(
                ReplayAction::Forget { target, .. } | ReplayAction::Forged { target, .. },
            ) => format!("forget/{}", target.uid),
            Self::Cascade(_) => "cascade".to_owned(),
            Self::NamespaceContent(t) => format!(
                "namespace-content/{}/{}/{}/{}",
                t.gk.group,
                t.gk.kind,
                t.namespace.as_deref().unwrap_or_default(),
                t.name
            ),
        }
    }

    /// Whether the write loop sends it at most once per (target, resourceVersion); a cascade
    /// write is sent as decided.
    fn remembered(&self) -> bool {
        !matches!(self, Self::Cascade(_))
    }

    /// The resourceVersion the write was computed from. An orphan's deletion has none: it is
    /// sent once for as long as it stays wanted.
    fn resource_version(&self) -> Option<&String> {
        match self {
            Self::Label(w) => w.target.resource_version.as_ref(),
            Self::UsageMeta(w) => w.resource_version.as_ref(),
            Self::OrphanDelete { .. } | Self::NamespaceContent(_) => None,
            Self::Status {
                resource_version, ..
            }
            | Self::RuleStatus {
                resource_version, ..
            } => resource_version.as_ref(),
            Self::Replay(
                ReplayAction::Delete { target, .. }
                | ReplayAction::Forget { target, .. }
                | ReplayAction::Forged { target, .. },
            ) => target.resource_version.as_ref(),
            Self::Cascade(_) => None,
        }
    }

    /// A bounded label for metrics; a new one goes into `metrics::WRITE_KINDS` too (exported
    /// at 0 from start).
    fn category(&self) -> &'static str {
        match self {
            Self::Label(_) => "label",
            Self::UsageMeta(_) => "usage_meta",
            Self::OrphanDelete { .. } => "usage_delete",
            Self::Status { .. } => "status",
            Self::RuleStatus { .. } => "rule_status",
            Self::Replay(ReplayAction::Delete { .. }) => "replay",
            Self::Replay(ReplayAction::Forget { .. }) => "record_forget",
            Self::Replay(ReplayAction::Forged { .. }) => "record_forged",
            Self::NamespaceContent(_) => "namespace_content",
            Self::Cascade(w) => match **w {
                CascadeWrite::Parent { .. } => "cascade_parent",
                CascadeWrite::RuleFinalizers { .. } => "cascade_rule",
                CascadeWrite::RuleStatus { .. } => "cascade_status",
                CascadeWrite::Event { .. } => "cascade_event",
                CascadeWrite::Report { .. } => "cascade_report",
            },
        }
    }

    /// Sends the write, with the logs, metrics and Events particular to it.
    async fn apply(
        &self,
        writer: &Writer,
        recorder: &Recorder,
        metrics: &Metrics,
        cascade: Option<&CascadeWriter>,
    ) -> Result<(), WriteError> {
        match self {
            Self::Cascade(w) => {
                // Sent in tasks of their own (bounded concurrency), which report the outcome
                // to the cascade's state as events: a slow parent does not hold up the pass.
                if let Some(cascade) = cascade {
                    cascade.send((**w).clone());
                }
                Ok(())
            }
            Self::Label(w) => writer.label(w).await,
            Self::UsageMeta(w) => writer.usage_meta(w).await,
            Self::OrphanDelete { source, uid } => {
                let r = writer.delete_usage(source, uid).await;
                if r.is_ok() {
                    tracing::info!(usage = %source, "every user of the usage is gone and none owned it: deleted");
                }
                r
            }
            Self::NamespaceContent(target) => {
                let r = writer.delete_namespace_content(target).await;
                if let Ok(true) = r {
                    tracing::info!(object = %target.gk.key(target.namespace.as_deref(), &target.name), "deleted a user of what its namespace, being deleted, is stuck behind");
                }
                r.map(drop)
            }
            Self::Status { source, status, .. } => writer.status(source, status).await,
            Self::RuleStatus { source, status, .. } => writer.status(source, status).await,
            Self::Replay(ReplayAction::Delete { target, attempt }) => {
                // Lien deletes with its own rights on the requester's behalf, possibly hours
                // after the request: only while the requester may still delete the object.
                if let AccessDecision::Denied { reason } =
                    writer.may_delete(target, &attempt.requester()).await?
                {
                    tracing::warn!(object = %target.gk.key(target.namespace.as_deref(), &target.name), user = %attempt.user, %reason, "dropping a replay: its requester may no longer delete the object");
                    let r = writer.record(target, None).await;
                    if r.is_ok() {
                        let (recorder, metrics) = (recorder.clone(), metrics.clone());
                        let (target, attempt) = (target.clone(), attempt.clone());
                        tokio::spawn(async move {
                            super::events::replay_not_authorized(
                                &recorder, &metrics, &target, &attempt, &reason,
                            )
                            .await;
                        });
                    }
                    return r;
                }
                let r = writer.replay(target, attempt).await;
                if let Ok(true) = r {
                    tracing::info!(object = %target.gk.key(target.namespace.as_deref(), &target.name), user = %attempt.user, "replayed a refused deletion");
                    metrics.replayed();
                    // Once per accepted DELETE, like the counter: a replay retried after a lost
                    // answer finds the object gone (404) and says nothing more. Published in a
                    // task of its own, as refusal events are: the writes after this one (a
                    // Usage's finalizer, the next replay) never wait for an Event.
                    let (recorder, metrics) = (recorder.clone(), metrics.clone());
                    let (target, attempt) = (target.clone(), attempt.clone());
                    tokio::spawn(async move {
                        super::events::replayed(&recorder, &metrics, &target, &attempt).await;
                    });
                }
                r.map(drop)
            }
            Self::Replay(ReplayAction::Forget { target, why }) => {
                if *why == replay::RECORD_EXPIRED {
                    metrics.replay_expired();
                }
                tracing::info!(object = %target.gk.key(target.namespace.as_deref(), &target.name), why, "forgetting a recorded deletion");
                writer.record(target, None).await
            }
            Self::Replay(ReplayAction::Forged { target, why }) => {
                // Who wrote it is unknown (the record's `user` is whatever the writer chose):
                // the API server's audit log knows.
                tracing::warn!(object = %target.gk.key(target.namespace.as_deref(), &target.name), %why, "ignoring and removing a deletion record Lien cannot trust");
                metrics.forged_record();
                writer.record(target, None).await
            }
        }
    }
}

/// Everything one write pass will do, in order, computed by the event loop and executed by
/// the write loop.
#[derive(Debug, Default)]
pub(super) struct Plan {
    writes: Vec<Write>,
    /// Labels needed beyond those planned (`desired::LABELS_PER_PLAN`): the write loop plans
    /// again as soon as the pass is done.
    labels_left: usize,
    /// Plan again after this long even without an event: a count-only status write was put
    /// off.
    revisit: Option<std::time::Duration>,
    /// Gauges read under the same read lock, set by the write loop (which holds the metrics).
    replays_pending: usize,
    relations_by_source: (usize, usize, usize),
}

/// The namespaces being deleted, from the Namespace cache (always watched).
fn terminating_namespaces(st: &State) -> std::collections::BTreeSet<String> {
    st.caches
        .kind(&crate::cache::GroupKind::new("", "Namespace"))
        .map(|kind| {
            kind.objects
                .iter()
                .filter(|(_, o)| o.deleting)
                .map(|((_, name), _)| name.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// How long one write pass sends labels before it plans again. A pass is one plan's writes in
/// order, and a plan is made from the state when the pass starts: when one Usage selecting
/// 10,000 objects made a pass of 10,000 label writes, a Usage created meanwhile waited for all
/// of them (minutes, issue 28). Past this budget the pass skips its remaining labels, sends its
/// other writes (a new Usage's status, replays) and the write loop plans again at once; with
/// the labels in turns (`desired::label_plan`), a new Usage's label is among the first of the
/// next pass. Each plan scans the caches (an index lookup per object of a protected kind), so a
/// much shorter budget would spend the pass on planning.
pub(super) const LABEL_PASS_BUDGET: std::time::Duration = std::time::Duration::from_millis(250);

/// The least time between two whole-graph cycle searches.
pub(super) const CYCLE_SEARCH_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

pub(super) fn plan(
    st: &mut State,
    index: &RwLock<RelationIndex>,
    config: &ControllerConfig,
) -> Plan {
    // The read lock: the event loop, which calls this, is the index's only writer, so the
    // webhook's reads go on meanwhile.
    let index = index.read();
    let mut revisit: Option<std::time::Duration> = None;
    if st.cycles_stale {
        // The whole-graph search, once per write pass at most, only after a change, and at
        // most once per interval: a cycle is a status to report, not a protection to enforce
        // (each relation of a cycle is enforced as it is), so reporting it up to an interval
        // late costs nothing, while searching 100,000 relations on every PersistentVolume
        // event would slow every write pass, labels included.
        let since = st.cycles_searched.map(|at| at.elapsed());
        match since.filter(|s| *s < CYCLE_SEARCH_INTERVAL) {
            Some(since) => revisit = Some(CYCLE_SEARCH_INTERVAL - since),
            None => {
                st.cycles = cycle_problems(&index);
                st.cycles_stale = false;
                st.cycles_searched = Some(std::time::Instant::now());
            }
        }
    }
    let settled = st.settled();
    let now = Timestamp::now();
    let unenforced = config.webhook.problem();
    // In turns by the source that holds each object, and bounded: a pass sends a part of them
    // (`LABEL_PASS_BUDGET`) and plans again, so this order says which protection waits.
    let labels = desired::label_plan(
        &index,
        &st.caches,
        settled,
        &st.of_kinds(),
        desired::LABELS_PER_PLAN,
    );
    let content = crate::namespace_content::namespace_content_deletes(
        &index,
        &st.caches,
        &terminating_namespaces(st),
    );
    let replays = match &config.replay_key {
        Some(key) => {
            replay::replay_actions(&index, &st.caches, settled, now, config.replay_ttl, key)
        }
        None => Vec::new(),
    };
    let mut metas = Vec::new();
    let mut orphans = Vec::new();
    let mut statuses = Vec::new();
    for (source, view) in &st.usages {
        let Some(sel) = st.selections.get(source) else {
            continue;
        };
        if desired::users_gone(view, sel, &st.caches) {
            // Its status still lists the users it saw; writing it now would forget them.
            orphans.push(Write::OrphanDelete {
                source: source.clone(),
                uid: view.uid.clone(),
            });
            continue;
        }
        if let Some(w) = desired::usage_meta(view, sel, &st.caches) {
            metas.push(Write::UsageMeta(w));
        }
        let kept = desired::kept_for_namespace(view, sel, &st.caches);
        if let Some(status) = desired::status(
            view,
            sel,
            kept,
            st.cycles.get(source),
            unenforced.as_deref(),
            now,
        ) {
            statuses.push(Write::Status {
                source: source.clone(),
                status,
                resource_version: view.resource_version.clone(),
            });
        }
    }
    st.rule_status_planned
        .retain(|name, _| st.rules.contains_key(name));
    for rule in st.rules.values() {
        let cycle = st.cycles.get(&rule.view.source());
        if let Some(status) =
            rules::rule_status(rule, &index, &st.caches, cycle, unenforced.as_deref(), now)
        {
            let name = &rule.view.name;
            let minor = rule
                .view
                .status
                .as_ref()
                .is_some_and(|previous| rules::only_counts_differ(previous, &status));
            let since = st.rule_status_planned.get(name).map(|at| at.elapsed());
            if minor && let Some(since) = since.filter(|s| *s < rules::STATUS_COUNTS_INTERVAL) {
                let wait = rules::STATUS_COUNTS_INTERVAL - since;
                revisit = Some(revisit.map_or(wait, |r| r.min(wait)));
                continue;
            }
            st.rule_status_planned
                .insert(name.clone(), std::time::Instant::now());
            statuses.push(Write::RuleStatus {
                source: rule.view.source(),
                status,
                resource_version: rule.view.resource_version.clone(),
            });
        }
    }
    // Labels first (protection), then the sources' own writes, then replays.
    let mut writes = labels
        .writes
        .into_iter()
        .map(Write::Label)
        .collect::<Vec<_>>();
    writes.extend(metas);
    writes.extend(orphans);
    writes.extend(statuses);
    writes.extend(replays.into_iter().map(Write::Replay));
    writes.extend(content.into_iter().map(Write::NamespaceContent));
    Plan {
        writes,
        labels_left: labels.left,
        revisit,
        replays_pending: replay::pending_records(&index, &st.caches, now, config.replay_ttl),
        relations_by_source: index.len_by_source_kind(),
    }
}

/// The least time between the starts of two passes woken by watch events. A pass plans over
/// every cached object of a protected kind (`desired::label_plan`: an index lookup each, about
/// 1 ms for 12,500 ConfigMaps), so at 200 DELETEs a second of objects nothing uses, a pass per
/// event cost `lien run` 1.3 ms of CPU per DELETE, on the API server's machine in the
/// benchmark (docs/benchmarks.md, "DELETE through kube-apiserver"). Events within the interval
/// are planned together in the next pass; a pass that left labels for later (or a retry) does
/// not wait.
pub(super) const EVENT_PASS_INTERVAL: std::time::Duration = std::time::Duration::from_millis(20);

#[allow(clippy::too_many_arguments)]
pub(super) async fn write_loop(
    writer: Writer,
    cascade: Option<CascadeWriter>,
    recorder: Recorder,
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<Msg>,
    config: ControllerConfig,
    mut stop: watch::Receiver<bool>,
) {
    let mut leader = shared.leader_tx.subscribe();
    let mut enforcement = config.webhook.subscribe();
    let mut delay = config.retry_base;
    // What was sent, keyed by target, with the resourceVersion it was decided on.
    let mut sent: HashMap<String, Option<String>> = HashMap::new();
    let mut retry_at: Option<tokio::time::Instant> = None;
    let mut last_pass: Option<tokio::time::Instant> = None;
    loop {
        let retry = async {
            match retry_at {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        let by_event = tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            () = shared.wake.notified() => true,
            _ = leader.changed() => false,
            // Statuses say whether the webhook configuration is in place.
            Ok(()) = enforcement.changed() => false,
            () = retry => false,
        };
        if by_event
            && let Some(next) = last_pass.map(|at| at + EVENT_PASS_INTERVAL)
            && next > tokio::time::Instant::now()
        {
            tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                () = tokio::time::sleep_until(next) => {}
            }
        }
        last_pass = Some(tokio::time::Instant::now());
        retry_at = None;
        let leading = *leader.borrow_and_update();
        shared.metrics.set_leader(leading);
        if !leading {
            continue;
        }
        // The plan comes from the event loop, after the events queued before this request.
        let (reply, planned) = oneshot::channel();
        if events.send(Msg::Plan(reply)).is_err() {
            return;
        }
        let plan = tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            plan = planned => match plan {
                Ok(plan) => plan,
                // The event loop ended.
                Err(_) => return,
            },
        };
        shared.metrics.set_replays_pending(plan.replays_pending);
        shared
            .metrics
            .set_relations_by_source(plan.relations_by_source);
        let timer = shared.metrics.pass_timer();
        let started = tokio::time::Instant::now();
        let mut failed = false;
        // Labels left for the next pass (`LABEL_PASS_BUDGET`, or beyond the plan's).
        let mut deferred = plan.labels_left > 0;
        let mut keep: HashSet<String> = HashSet::new();
        for w in &plan.writes {
            if !w.remembered() {
                let r = w
                    .apply(&writer, &recorder, &shared.metrics, cascade.as_ref())
                    .await;
                shared.metrics.write(w.category(), r.is_ok());
                // Not remembered, so not retried on its own: still counted and said.
                if let Err(e) = r {
                    shared.metrics.write_error(e.category());
                    tracing::warn!(error = %e, "write failed");
                }
                continue;
            }
            let id = w.id();
            keep.insert(id.clone());
            let rv = w.resource_version();
            if sent.get(&id).is_some_and(|sent_rv| sent_rv.as_ref() == rv) {
                continue;
            }
            if matches!(w, Write::Label(_)) && started.elapsed() >= LABEL_PASS_BUDGET {
                deferred = true;
                continue;
            }
            let r = w
                .apply(&writer, &recorder, &shared.metrics, cascade.as_ref())
                .await;
            shared.metrics.write(w.category(), r.is_ok());
            match r {
                Ok(()) => {
                    sent.insert(id, rv.cloned());
                }
                Err(e) => {
                    failed = true;
                    shared.metrics.write_error(e.category());
                    if e.is_stale() {
                        tracing::debug!(error = %e, "write raced a change; deciding again");
                    } else {
                        tracing::warn!(error = %e, "write failed; will retry");
                    }
                }
            }
        }
        // Forget what is no longer wanted, so the memory follows the desired state.
        sent.retain(|id, _| keep.contains(id));
        drop(timer);
        if failed {
            retry_at = Some(tokio::time::Instant::now() + delay);
            delay = (delay * 2).min(config.retry_max);
        } else {
            delay = config.retry_base;
        }
        if let Some(revisit) = plan.revisit {
            let at = tokio::time::Instant::now() + revisit;
            retry_at = Some(retry_at.map_or(at, |r| r.min(at)));
        }
        if deferred && !failed {
            // The rest of the labels, from a fresh plan, now.
            retry_at = Some(tokio::time::Instant::now());
        }
    }
}

impl Plan {
    /// Adds the cascade's pass: its writes first (they only start tasks), and its next wake.
    pub(super) fn add_cascade(
        &mut self,
        writes: Vec<CascadeWrite>,
        wake: Option<std::time::Duration>,
    ) {
        let rest = std::mem::take(&mut self.writes);
        self.writes = writes
            .into_iter()
            .map(|w| Write::Cascade(Box::new(w)))
            .chain(rest)
            .collect();
        if let Some(wake) = wake {
            self.revisit = Some(self.revisit.map_or(wake, |r| r.min(wake)));
        }
    }
}

#[cfg(test)]
impl Plan {
    /// The rule statuses the plan writes.
    pub(super) fn rule_statuses(&self) -> Vec<&lien_api::DependencyRuleStatus> {
        self.writes
            .iter()
            .filter_map(|w| match w {
                Write::RuleStatus { status, .. } => Some(status),
                _ => None,
            })
            .collect()
    }

    pub(super) fn revisit(&self) -> Option<std::time::Duration> {
        self.revisit
    }

    /// The label writes the plan sends, in order.
    pub(super) fn labels(&self) -> Vec<&desired::LabelWrite> {
        self.writes
            .iter()
            .filter_map(|w| match w {
                Write::Label(l) => Some(l),
                _ => None,
            })
            .collect()
    }
}
