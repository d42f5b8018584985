//! The controller: watches in, index updates and desired writes out.
//!
//! # Data model
//!
//! One task per watch (Usages, ClusterUsages, DependencyRules, CustomResourceDefinitions, and
//! one watch per kind a source refers to: metadata-only, or full objects reduced to the rules'
//! keys in the watch task — see `crate::rules`) forwards events into a single channel. The
//! event loop owns the order of changes: it updates the [`State`] (caches, usage views,
//! selections, rule joins) and the shared [`RelationIndex`] synchronously — every replica
//! keeps its index current, because its webhook answers from it — and then wakes the write
//! pass. Per-kind watches start when a source first refers to a kind, restart when the rule
//! programs reading it change, and stop when none does (and no object of it still carries
//! Lien's label).
//! Nothing polls: every decision follows a watch event (or a deadline the state computed).
//!
//! CascadeRules ([`Controller::with_cascade`], `crate::cascade`) run in the same loop: their
//! watch events reach it on a channel of their own and update the cascade's state
//! (`CascadeState`, synchronous like [`State`]); each write pass asks it for its decisions,
//! which join the plan as `Write::Cascade` and are sent by the same write loop; its next
//! deadline (a retry, a report) is the plan's `revisit`.
//!
//! The write pass (leader only) asks the event loop for a plan — the desired writes, computed
//! with the pure functions of `desired` and `replay` — applies it, and if any write failed, runs
//! again after a backoff. A write already sent for the resourceVersion the cache still shows is
//! not sent again, so a burst of events does not repeat writes the watch has not echoed yet.
//!
//! # Layout
//!
//! - this module: the configuration, [`Controller`] and its event loop (which owns the state,
//!   dispatches each message and starts/stops kind watches);
//! - `state`: the [`State`] and its event handling (`handle`): caches, usage views,
//!   selections and the index updates — synchronous, no I/O, unit-tested without a runtime;
//! - `watches`: the watch tasks and kind discovery;
//! - `events`: records of refused DELETEs, break-glass audits, publishing Events;
//! - `write`: the plan of a write pass and the write loop that applies it.
//!
//! # Locks and ownership
//!
//! The event loop is the only owner of the [`State`]: nothing else reads or writes it, so it
//! has no lock. Whatever another task needs from it is computed by the loop and handed over as
//! data — the plan of a write pass (asked for over the event channel), the target of a refused
//! DELETE and the usages that blocked it, the references of a break-glass audit — before that
//! task runs.
//!
//! The only lock is the index's `RwLock`, shared with the webhook, and no other lock is ever
//! taken while holding it. The webhook holds the read lock for one decision (microseconds).
//! The event loop resolves usages from its own state with no lock held, then takes the write
//! lock only to apply what changed, a bounded step of relations per hold (work in the size of
//! the change, not of the index). The whole-graph work — the cycle search and a
//! plan's scan of the caches — runs under the read lock, which never stalls the webhook's
//! reads: the event loop is the index's only writer, so no writer waits meanwhile. Cycles are
//! searched only when a write pass needs them and the index changed since the last search.

mod events;
mod state;
mod terminating;
mod watches;
mod write;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PartialObjectMeta};
use kube::core::ApiResource;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher;
use lien_api::{ClusterUsage, DependencyRule, Usage};
use lien_core::RelationIndex;
use parking_lot::RwLock;
use tokio::sync::{Notify, mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use self::state::Observed;
pub use self::state::State;
pub use self::terminating::{CYCLE_BROKEN_REASON, NAMESPACE_HELD_CONDITION, NAMESPACE_HELD_REASON};
pub(crate) use self::watches::FORBIDDEN_RETRY;
use self::watches::{KindTask, spawn_watch, sync_kind_watches};
use self::write::{Plan, plan, write_loop};
use crate::audit::BreakGlass;
use crate::cache::GroupKind;
use crate::cascade::{CascadeConfig, CascadeRuntime};
use crate::leader::{LeaderConfig, LeaderElector};
use crate::metrics::Metrics;
use crate::replay::{DEFAULT_REPLAY_TTL, Denial, ReplayKey};
use crate::rules::KindReader;
use crate::writer::Writer;

/// Controller settings.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Leader election; `None` makes this replica the only writer (one replica, tests).
    pub leader: Option<LeaderConfig>,
    /// How long a recorded DELETE stays replayable.
    pub replay_ttl: Duration,
    /// Timeout of each write.
    pub write_timeout: Duration,
    /// First retry delay of a failed write pass (doubles up to `retry_max`).
    pub retry_base: Duration,
    /// Longest retry delay.
    pub retry_max: Duration,
    /// Events' reporting controller.
    pub reporter: String,
    /// Whether Lien's webhook configuration is in place (`crate::webhook_config`); statuses
    /// read it. Default: always.
    pub webhook: crate::webhook_config::Enforcement,
    /// The key replay records are sealed with (`replay`'s module docs); every replica must
    /// have the same. `None`: refused DELETEs are not recorded and no record is replayed.
    pub replay_key: Option<ReplayKey>,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            leader: Some(LeaderConfig::default()),
            replay_ttl: DEFAULT_REPLAY_TTL,
            write_timeout: Duration::from_secs(10),
            retry_base: Duration::from_millis(50),
            retry_max: Duration::from_secs(10),
            reporter: "lien-controller".into(),
            webhook: crate::webhook_config::Enforcement::default(),
            replay_key: None,
        }
    }
}

/// Why the controller stopped.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The event channel closed while running (every watch task ended).
    #[error("the controller's event channel closed")]
    ChannelClosed,
}

impl ControllerError {
    /// A bounded label for metrics.
    pub fn category(&self) -> &'static str {
        match self {
            Self::ChannelClosed => "channel_closed",
        }
    }
}

/// Hands denials to the controller (cheap to clone; give one to the webhook).
#[derive(Debug, Clone)]
pub struct DenialSink(mpsc::UnboundedSender<Msg>);

impl DenialSink {
    /// Records a refused DELETE: the controller writes the record on the object and emits
    /// Warning events on it and on the usages that blocked it. Never blocks.
    pub fn record(&self, denial: Denial) {
        // A closed channel means the controller stopped; the denial then has no one to act on it.
        let _ = self.0.send(Msg::Denial(denial));
    }

    /// Audits a break-glass override: the controller emits Warning events on the object and on
    /// the usages whose relations it overrode. Never blocks.
    pub fn break_glass(&self, record: BreakGlass) {
        // As for denials: a closed channel means the controller stopped.
        let _ = self.0.send(Msg::BreakGlass(record));
    }
}

#[derive(Debug)]
enum Msg {
    Usage(watcher::Event<Usage>),
    ClusterUsage(watcher::Event<ClusterUsage>),
    Rule(watcher::Event<DependencyRule>),
    /// An event of a metadata-only kind watch.
    Object(GroupKind, watcher::Event<ObjectMeta>),
    /// An event of a kind watch that rules read, reduced by `reader` (`crate::rules`).
    Read(GroupKind, Arc<KindReader>, watcher::Event<Observed>),
    /// A CustomResourceDefinition changed: kinds not served may be now.
    KindFound(GroupKind, ApiResource, bool),
    KindUnknown(GroupKind),
    /// The API server refuses Lien a list or watch of the kind (403), and the resource to
    /// grant (`plural` or `plural.group`).
    KindForbidden(GroupKind, String),
    CrdChanged,
    Denial(Denial),
    BreakGlass(BreakGlass),
    /// The write loop asks for a plan; the event loop answers from its state.
    Plan(oneshot::Sender<Plan>),
}

/// The controller. Build with [`Controller::new`], take its handles, then [`Controller::run`].
pub struct Controller {
    client: Client,
    config: ControllerConfig,
    /// The CascadeRule reconciler, when enabled ([`Controller::with_cascade`]).
    cascade: Option<CascadeConfig>,
    shared: Arc<Shared>,
    tx: mpsc::UnboundedSender<Msg>,
    rx: mpsc::UnboundedReceiver<Msg>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("config", &self.config)
            .finish()
    }
}

/// What the event loop shares with the tasks it starts. Deliberately not the [`State`]: see the
/// module documentation.
struct Shared {
    index: Arc<RwLock<RelationIndex>>,
    wake: Notify,
    metrics: Metrics,
    leader_tx: watch::Sender<bool>,
    /// Turns true once the caches first settle (every Usage list and every referenced kind
    /// listed): the index is complete, the webhook may report ready.
    settled_tx: watch::Sender<bool>,
    /// Counts the CRD changes (and relists) the controller's CRD watch saw: the process's one
    /// CRD watch, which the webhook's kind snapshot follows too ([`Controller::crd_changes`]).
    crds_tx: watch::Sender<u64>,
}

impl Controller {
    /// A controller that keeps `index` up to date (share the same `Arc` with the webhook).
    pub fn new(
        client: Client,
        index: Arc<RwLock<RelationIndex>>,
        config: ControllerConfig,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let (leader_tx, _) = watch::channel(false);
        let (settled_tx, _) = watch::channel(false);
        let (crds_tx, _) = watch::channel(0);
        Self {
            client,
            config,
            cascade: None,
            shared: Arc::new(Shared {
                index,
                wake: Notify::new(),
                metrics: Metrics::default(),
                leader_tx,
                settled_tx,
                crds_tx,
            }),
            tx,
            rx,
        }
    }

    /// Reconciles CascadeRules too, in the same event loop: their watches feed it, their
    /// decisions are part of every write pass (leader only), their writes go through the one
    /// write loop.
    pub fn with_cascade(mut self, config: CascadeConfig) -> Self {
        self.cascade = Some(config);
        self
    }

    /// Where the webhook sends its denials.
    pub fn denial_sink(&self) -> DenialSink {
        DenialSink(self.tx.clone())
    }

    /// Whether this replica is the leader, as it changes.
    pub fn leader(&self) -> watch::Receiver<bool> {
        self.shared.leader_tx.subscribe()
    }

    /// Changes each time the cluster's CRDs may have changed which kinds are served: a CRD
    /// created, changed or deleted, or its watch relisted (after a failed watch, what changed
    /// meanwhile shows only so). Changed as the watch sees it, not when the event loop gets to
    /// it. One CRD watch per process: what else must follow the served kinds (the webhook's
    /// snapshot) subscribes here instead of watching CRDs itself.
    pub fn crd_changes(&self) -> watch::Receiver<u64> {
        self.shared.crds_tx.subscribe()
    }

    /// Turns true once the index is complete for the first time (what `/readyz` waits for).
    pub fn settled(&self) -> watch::Receiver<bool> {
        self.shared.settled_tx.subscribe()
    }

    /// Registers the `lien_controller_*` metrics later, e.g. on the webhook's `/metrics`
    /// (`lien_webhook::WebhookBuilder::register_metrics`).
    pub fn metrics_registrar(
        &self,
    ) -> impl FnOnce(&mut prometheus_client::registry::Registry) + Send + 'static {
        let metrics = self.shared.metrics.clone();
        move |registry| metrics.register(registry)
    }

    /// Registers the `lien_controller_*` metrics.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.shared.metrics.register(registry);
    }

    /// Runs until `shutdown` resolves: watches, index updates, and (as leader) writes. Stops
    /// every task it started and releases the lease before returning.
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<(), ControllerError> {
        let Controller {
            client,
            config,
            cascade,
            shared,
            tx,
            mut rx,
        } = self;
        let (stop_tx, stop_rx) = watch::channel(false);
        let tasks: Vec<JoinHandle<()>> = vec![
            spawn_watch(
                Api::<Usage>::all(client.clone()),
                tx.clone(),
                |ev| Some(Msg::Usage(ev)),
                shared.metrics.clone(),
            ),
            spawn_watch(
                Api::<ClusterUsage>::all(client.clone()),
                tx.clone(),
                |ev| Some(Msg::ClusterUsage(ev)),
                shared.metrics.clone(),
            ),
            spawn_watch(
                Api::<DependencyRule>::all(client.clone()),
                tx.clone(),
                |ev| Some(Msg::Rule(ev)),
                shared.metrics.clone(),
            ),
            // Metadata only: any change of a CRD (created, established, deleted) is a hint
            // that a kind a source names may have started or stopped being served.
            {
                let (crds_tx, metrics) = (shared.crds_tx.clone(), shared.metrics.clone());
                crate::watch::spawn_forward(
                    Api::<PartialObjectMeta<CustomResourceDefinition>>::all(client.clone()),
                    tx.clone(),
                    // A change, or a (re)list done: after a failed watch the relist is how a
                    // change made meanwhile shows. The rest of a relist replays what exists.
                    move |ev| match ev {
                        watcher::Event::Apply(_)
                        | watcher::Event::Delete(_)
                        | watcher::Event::InitDone => {
                            crds_tx.send_modify(|n| *n += 1);
                            Some(Msg::CrdChanged)
                        }
                        watcher::Event::Init | watcher::Event::InitApply(_) => None,
                    },
                    move |e| {
                        // Counted with Lien's own kinds' watches, as `spawn_watch` counts them.
                        metrics.watch_restarted("usage");
                        tracing::warn!(error = %e, "CRD watch failed; retrying");
                    },
                )
            },
        ];
        let elector = match config.leader.clone() {
            Some(lc) => {
                let elector = LeaderElector::new(client.clone(), lc);
                let leader_tx = shared.leader_tx.clone();
                let stop = stop_rx.clone();
                Some(tokio::spawn(elector.run(leader_tx, stop)))
            }
            None => {
                shared.leader_tx.send_replace(true);
                None
            }
        };
        let reporter = Reporter {
            controller: config.reporter.clone(),
            instance: config.leader.as_ref().map(|l| l.identity.clone()),
        };
        let recorder = Recorder::new(client.clone(), reporter.clone());
        // Refusals and break-glass overrides are audits: each says who did what, so each is an
        // Event of its own. kube-rs's `Recorder` makes any two Events of one reason on one object
        // within six minutes a series that keeps the first one's note (its key has no note):
        // Bob's refusal would be reported as Alice's. A recorder without a cache publishes
        // each as new; repeats of one refusal are coalesced before (`crate::refusals`).
        let audit_recorder = || Recorder::new(client.clone(), reporter.clone());
        let (mut cascade, cascade_writer, mut cascade_rx) = match cascade {
            Some(c) => {
                let recorder = Recorder::new(client.clone(), c.reporter.clone());
                let (runtime, writer, rx) = CascadeRuntime::start(client.clone(), c, recorder);
                (Some(runtime), Some(writer), Some(rx))
            }
            None => (None, None, None),
        };
        // A new leader decides every CascadeRule parent once.
        let mut leading = shared.leader_tx.subscribe();
        let writer = tokio::spawn(write_loop(
            Writer::new(client.clone(), config.write_timeout),
            cascade_writer,
            recorder.clone(),
            shared.clone(),
            tx.clone(),
            config.clone(),
            stop_rx.clone(),
        ));
        let mut kind_tasks: HashMap<GroupKind, KindTask> = HashMap::new();
        // Owned by this loop alone (see the module documentation).
        let mut st = State::default();
        // Refusals whose Events were published lately, so a client retrying a refused DELETE
        // in a loop costs the API server no write per retry (`crate::refusals`).
        let mut refusals = crate::refusals::Coalescer::default();
        tokio::pin!(shutdown);
        let result = loop {
            let cascade_event = async {
                match cascade_rx.as_mut() {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            };
            let msg = tokio::select! {
                () = &mut shutdown => break Ok(()),
                msg = rx.recv() => msg,
                Some(ev) = cascade_event => {
                    if let (Some(c), Some(crx)) = (cascade.as_mut(), cascade_rx.as_mut()) {
                        c.handle(ev);
                        // Drain what is queued, so a burst is decided once.
                        while let Ok(ev) = crx.try_recv() {
                            c.handle(ev);
                        }
                    }
                    shared.wake.notify_one();
                    continue;
                }
                Ok(()) = leading.changed() => {
                    if *leading.borrow_and_update()
                        && let Some(c) = cascade.as_mut()
                    {
                        c.lead();
                        // The write loop may have planned before this: plan again.
                        shared.wake.notify_one();
                    }
                    continue;
                }
            };
            let Some(msg) = msg else {
                break Err(ControllerError::ChannelClosed);
            };
            if let Msg::Plan(reply) = msg {
                let span = tracing::debug_span!("plan");
                let mut plan = span.in_scope(|| plan(&mut st, &shared.index, &config));
                if let Some(c) = cascade.as_mut() {
                    let (writes, wake) = span.in_scope(|| c.plan());
                    plan.add_cascade(writes, wake);
                }
                // The write loop stopped waiting only when it stops.
                let _ = reply.send(plan);
                continue;
            }
            if let Msg::Denial(denial) = msg {
                // What the record needs from the state is taken now, in the order of events.
                let target = events::denial_target(&st, &denial);
                let usages = events::blocking_sources(&st, &shared.index, &denial);
                // The record on the object, opened once for both questions.
                let recorded = events::cached_record(&st, &denial, config.replay_key.as_ref());
                let coalesced = events::Coalesced {
                    keep_pending: recorded
                        .as_ref()
                        .is_some_and(|(uid, r)| events::replay_pending(uid, r, config.replay_ttl)),
                    repeats: target
                        .as_ref()
                        .zip(recorded.as_ref())
                        .is_some_and(|(t, (_, r))| {
                            events::record_repeats(&events::attempt_of(&denial, t), r)
                        }),
                    // Only a refusal that will be published counts as published.
                    hold_events: target.is_some()
                        && refusals.admit(
                            crate::refusals::RefusalKey {
                                object: denial.object.clone(),
                                uid: denial.uid.clone(),
                                user: denial.user.clone(),
                                message: denial.message.clone(),
                            },
                            std::time::Instant::now(),
                        ) == crate::refusals::Verdict::HoldBack,
                };
                let writer = Writer::new(client.clone(), config.write_timeout);
                let recorder = audit_recorder();
                let shared2 = shared.clone();
                let key = config.replay_key.clone();
                // Denials are written by whichever replica's webhook refused the DELETE, leader
                // or not: only that replica knows of it, and the record is what makes the replay
                // survive anything.
                tokio::spawn(async move {
                    events::record_denial(
                        &writer,
                        &recorder,
                        &shared2,
                        key.as_ref(),
                        target,
                        usages,
                        denial,
                        coalesced,
                    )
                    .await;
                });
                continue;
            }
            if let Msg::BreakGlass(record) = msg {
                // Audited by whichever replica's webhook let the override through, leader or
                // not, as denials are: only that replica knows of it, and an audit that waited
                // for the leader would be lost. Each record reaches exactly one replica, so
                // nothing is published twice. The references are taken now, in the order of
                // events, while the caches still hold what the record is about.
                let references = events::break_glass_references(&st, &record);
                let recorder = audit_recorder();
                let shared2 = shared.clone();
                tokio::spawn(async move {
                    events::audit_break_glass(&recorder, &shared2, references, &record).await;
                });
                continue;
            }
            if let Msg::CrdChanged = msg {
                // Kinds not served are retried by their watches with a backoff; a CRD change
                // retries them now.
                watches::retry_unknown_kinds(&mut kind_tasks, &st, &client, &tx, &shared.metrics);
                continue;
            }
            let span = tracing::debug_span!("reconcile");
            let wanted =
                span.in_scope(|| state::handle(&mut st, &shared.index, &shared.metrics, msg));
            if !*shared.settled_tx.borrow() && st.settled() {
                shared.settled_tx.send_replace(true);
            }
            // Start watches for new kinds, stop those no usage refers to.
            sync_kind_watches(
                &mut kind_tasks,
                &wanted,
                &mut st,
                &client,
                &tx,
                &shared.metrics,
            );
            // Cycles inside a namespace being deleted no longer hold (every replica: each
            // webhook answers from its own index); the leader says so on the Namespace.
            // What holds a namespace being deleted: the leader says it on the Namespace.
            let news = terminating::break_terminating_cycles(&mut st, &shared.index);
            if !news.is_empty() && *shared.leader_tx.borrow() {
                let recorder = recorder.clone();
                let shared2 = shared.clone();
                let client = client.clone();
                tokio::spawn(async move {
                    events::cycles_broken(&recorder, &shared2, &news.broken).await;
                    events::namespaces_held(&client, &recorder, &shared2, &news.held).await;
                });
            }
            shared.wake.notify_one();
        };
        for task in tasks.iter().chain(kind_tasks.values().map(|k| &k.task)) {
            task.abort();
        }
        if let Some(c) = cascade {
            c.stop();
        }
        let _ = stop_tx.send(true);
        shared.wake.notify_one();
        let _ = writer.await;
        if let Some(elector) = elector {
            let _ = elector.await;
        }
        result
    }
}
