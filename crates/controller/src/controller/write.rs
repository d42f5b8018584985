//! The write pass (leader only): the event loop computes a [`Plan`] from its state with the
//! pure functions of `desired` and `replay`; the write loop applies it, remembers what it sent
//! (by target and resourceVersion) and retries failed passes with a backoff.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use jiff::Timestamp;
use lien_core::{RelationIndex, Source};
use parking_lot::RwLock;
use tokio::sync::{mpsc, oneshot, watch};

use super::state::State;
use super::{ControllerConfig, Msg, Shared};
use crate::desired;
use crate::replay::{self, ReplayAction};
use crate::resolve::cycle_problems;
use crate::writer::{WriteError, Writer};

/// Everything one write pass will do, computed by the event loop and executed by the write loop.
#[derive(Debug, Default)]
pub(super) struct Plan {
    labels: Vec<desired::LabelWrite>,
    metas: Vec<desired::UsageMetaWrite>,
    statuses: Vec<(Source, lien_api::UsageStatus, Option<String>)>,
    replays: Vec<ReplayAction>,
    /// Usages to delete (with their UIDs) because their users are gone and nobody owns them.
    orphans: Vec<(Source, String)>,
}

pub(super) fn plan(
    st: &mut State,
    index: &RwLock<RelationIndex>,
    config: &ControllerConfig,
) -> Plan {
    // The read lock: the event loop, which calls this, is the index's only writer, so the
    // webhook's reads go on meanwhile.
    let index = index.read();
    if st.cycles_stale {
        // The whole-graph search, once per write pass at most and only after a change.
        st.cycles = cycle_problems(&index);
        st.cycles_stale = false;
    }
    let settled = st.settled();
    let now = Timestamp::now();
    let unenforced = config.webhook.problem();
    let mut plan = Plan {
        labels: desired::label_writes(&index, &st.caches, settled),
        replays: match &config.replay_key {
            Some(key) => {
                replay::replay_actions(&index, &st.caches, settled, now, config.replay_ttl, key)
            }
            None => Vec::new(),
        },
        ..Default::default()
    };
    for (source, view) in &st.usages {
        let Some(res) = st.resolutions.get(source) else {
            continue;
        };
        if desired::users_gone(view, res, &st.caches) {
            // Its status still lists the users it saw; writing it now would forget them.
            plan.orphans.push((source.clone(), view.uid.clone()));
            continue;
        }
        if let Some(w) = desired::usage_meta(view, res, &st.caches) {
            plan.metas.push(w);
        }
        if let Some(status) =
            desired::status(view, res, st.cycles.get(source), unenforced.as_deref(), now)
        {
            plan.statuses
                .push((source.clone(), status, view.resource_version.clone()));
        }
    }
    plan
}

pub(super) async fn write_loop(
    writer: Writer,
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
    loop {
        let retry = async {
            match retry_at {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            () = shared.wake.notified() => {}
            _ = leader.changed() => {}
            // Statuses say whether the webhook configuration is in place.
            Ok(()) = enforcement.changed() => {}
            () = retry => {}
        }
        retry_at = None;
        if !*leader.borrow_and_update() {
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
        let timer = shared.metrics.pass_timer();
        let mut failed = false;
        let mut keep: HashSet<String> = HashSet::new();
        let mut outcome = |id: String,
                           rv: Option<String>,
                           r: Result<(), WriteError>,
                           sent: &mut HashMap<String, Option<String>>| {
            match r {
                Ok(()) => {
                    sent.insert(id, rv);
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
        };
        for w in &plan.labels {
            let id = format!("label/{}", w.target.uid);
            keep.insert(id.clone());
            if sent.get(&id) == Some(&w.target.resource_version) {
                continue;
            }
            let r = writer.label(w).await;
            shared.metrics.write("label", r.is_ok());
            outcome(id, w.target.resource_version.clone(), r, &mut sent);
        }
        for w in &plan.metas {
            let id = format!("meta/{}", w.uid);
            keep.insert(id.clone());
            if sent.get(&id) == Some(&w.resource_version) {
                continue;
            }
            let r = writer.usage_meta(w).await;
            shared.metrics.write("usage_meta", r.is_ok());
            outcome(id, w.resource_version.clone(), r, &mut sent);
        }
        for (source, uid) in &plan.orphans {
            let id = format!("orphan/{uid}");
            keep.insert(id.clone());
            if sent.contains_key(&id) {
                continue;
            }
            let r = writer.delete_usage(source, uid).await;
            shared.metrics.write("usage_delete", r.is_ok());
            if r.is_ok() {
                tracing::info!(usage = %source, "every user of the usage is gone and none owned it: deleted");
            }
            outcome(id, None, r, &mut sent);
        }
        for (source, status, rv) in &plan.statuses {
            let id = format!("status/{source}");
            keep.insert(id.clone());
            if sent.get(&id) == Some(rv) {
                continue;
            }
            let r = writer.status(source, status).await;
            shared.metrics.write("status", r.is_ok());
            outcome(id, rv.clone(), r, &mut sent);
        }
        for action in &plan.replays {
            match action {
                ReplayAction::Delete { target, attempt } => {
                    let id = format!("replay/{}", target.uid);
                    keep.insert(id.clone());
                    if sent.get(&id) == Some(&target.resource_version) {
                        continue;
                    }
                    let r = writer.replay(target, attempt).await;
                    shared.metrics.write("replay", r.is_ok());
                    if r.is_ok() {
                        tracing::info!(object = %target.gk.key(target.namespace.as_deref(), &target.name), user = %attempt.user, "replayed a refused deletion");
                        shared.metrics.replayed();
                    }
                    outcome(id, target.resource_version.clone(), r, &mut sent);
                }
                ReplayAction::Forget { target, why } => {
                    let id = format!("forget/{}", target.uid);
                    keep.insert(id.clone());
                    if sent.get(&id) == Some(&target.resource_version) {
                        continue;
                    }
                    tracing::info!(object = %target.gk.key(target.namespace.as_deref(), &target.name), why, "forgetting a recorded deletion");
                    let r = writer.record(target, None).await;
                    outcome(id, target.resource_version.clone(), r, &mut sent);
                }
                ReplayAction::Forged { target, why } => {
                    let id = format!("forget/{}", target.uid);
                    keep.insert(id.clone());
                    if sent.get(&id) == Some(&target.resource_version) {
                        continue;
                    }
                    // Who wrote it is unknown (the record's `user` is whatever the writer
                    // chose): the API server's audit log knows.
                    tracing::warn!(object = %target.gk.key(target.namespace.as_deref(), &target.name), %why, "ignoring and removing a deletion record Lien did not write");
                    shared.metrics.forged_record();
                    let r = writer.record(target, None).await;
                    outcome(id, target.resource_version.clone(), r, &mut sent);
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
    }
}
