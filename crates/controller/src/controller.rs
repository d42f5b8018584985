//! The controller: watches in, index updates and desired writes out.
//!
//! # Data model
//!
//! One task per watch (Usages, ClusterUsages, and one metadata-only watch per kind a usage
//! refers to) forwards events into a single channel. The event loop owns the order of changes:
//! it updates the [`State`] (caches, usage views, resolutions) and the shared
//! [`RelationIndex`] synchronously — every replica keeps its index current, because its webhook
//! answers from it — and then wakes the write pass. Per-kind watches start when a usage first
//! refers to a kind and stop when none does (and no object of it still carries Lien's label).
//! Nothing polls: every decision follows a watch event.
//!
//! The write pass (leader only) asks the event loop for a plan — the desired writes, computed
//! with the pure functions of `desired` and `replay` — applies it, and if any write failed, runs
//! again after a backoff. A write already sent for the resourceVersion the cache still shows is
//! not sent again, so a burst of events does not repeat writes the watch has not echoed yet.
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
//! lock only to replace the relations of the sources whose resolution changed (work in the
//! size of those sources, not of the index). The whole-graph work — the cycle search and a
//! plan's scan of the caches — runs under the read lock, which never stalls the webhook's
//! reads: the event loop is the index's only writer, so no writer waits meanwhile. Cycles are
//! searched only when a write pass needs them and the index changed since the last search.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, DynamicObject, PartialObjectMeta};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher::{self, watcher};
use lien_api::{ClusterUsage, GROUP, Usage, VERSION};
use lien_core::{Relation, RelationIndex, Source};
use parking_lot::RwLock;
use tokio::sync::{Notify, mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::audit::{self, BreakGlass};
use crate::cache::{Caches, GroupKind};
use crate::desired::{self, ObjectTarget, is_labelled};
use crate::leader::{LeaderConfig, LeaderElector};
use crate::metrics::Metrics;
use crate::replay::{self, DEFAULT_REPLAY_TTL, DeletionAttempt, Denial, ReplayAction, ReplayKey};
use crate::resolve::{Problem, Resolution, UsageView, cycle_problems, resolve};
use crate::writer::{WriteError, Writer};

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
    Object(GroupKind, watcher::Event<ObjectMeta>),
    KindFound(GroupKind, ApiResource, bool),
    KindUnknown(GroupKind),
    Denial(Denial),
    BreakGlass(BreakGlass),
    /// The write loop asks for a plan; the event loop answers from its state.
    Plan(oneshot::Sender<Plan>),
}

/// Everything the event loop maintains.
#[derive(Debug, Default)]
pub struct State {
    /// Object metadata per referenced kind.
    pub caches: Caches,
    /// Every usage, by source.
    pub usages: BTreeMap<Source, UsageView>,
    /// The latest resolution of each usage.
    pub resolutions: BTreeMap<Source, Resolution>,
    /// The usages that take part in a cycle, as of the last search.
    pub cycles: BTreeMap<Source, Problem>,
    /// Whether the index changed since `cycles` was computed.
    cycles_stale: bool,
    /// Sources whose last complete resolution did not reach the index (it was full), so that
    /// the next one is applied even if it is the same.
    unapplied: BTreeSet<Source>,
    usages_listed: bool,
    cluster_usages_listed: bool,
    usage_buffer: Vec<Usage>,
    cluster_usage_buffer: Vec<ClusterUsage>,
    object_buffers: HashMap<GroupKind, Vec<ObjectMeta>>,
}

impl State {
    /// Whether every usage list completed and every referenced kind is listed or known not to
    /// exist: only then does the absence of a relation mean "not in use".
    pub fn settled(&self) -> bool {
        self.usages_listed
            && self.cluster_usages_listed
            && self
                .usages
                .values()
                .flat_map(|u| u.kinds())
                .all(|(gk, _)| self.caches.is_settled(&gk))
    }

    /// Kinds to watch: every referenced kind, plus kinds whose objects still carry the label
    /// (so that it can be removed before the watch stops).
    fn wanted_kinds(&self) -> BTreeMap<GroupKind, String> {
        let mut out: BTreeMap<GroupKind, String> = BTreeMap::new();
        for u in self.usages.values() {
            for (gk, api_version) in u.kinds() {
                out.entry(gk).or_insert_with(|| api_version.to_owned());
            }
        }
        // A kind stays watched while an object of it carries the label or a recorded DELETE:
        // both must be cleared (the label removed, the record replayed or forgotten) after the
        // last usage referring to the kind is gone.
        for (gk, kind) in self.caches.kinds() {
            let pending = |o: &crate::cache::CachedObject| {
                is_labelled(o)
                    || o.annotations
                        .contains_key(replay::DELETION_ATTEMPT_ANNOTATION)
            };
            if !out.contains_key(gk) && kind.objects.values().any(pending) {
                out.insert(gk.clone(), kind.api_version.clone());
            }
        }
        out
    }

    /// Re-resolves `sources` and applies complete resolutions that changed to the index.
    ///
    /// Resolution reads only the state, so it runs with no lock held; the write lock is taken
    /// once, for the per-source replacements (work in the size of the sources that changed).
    fn re_resolve(&mut self, sources: &[Source], index: &RwLock<RelationIndex>, metrics: &Metrics) {
        // `None`: the source is gone.
        let mut updates: Vec<(&Source, Option<Vec<Relation>>)> = Vec::new();
        for source in sources {
            let Some(view) = self.usages.get(source) else {
                self.resolutions.remove(source);
                updates.push((source, None));
                continue;
            };
            let res = resolve(view, &self.caches);
            // An incomplete resolution keeps the previous relations: a watch that is still
            // listing must not lift protection. A complete one equal to the last applied one
            // (an echo of Lien's own write, an unrelated change of the kind) leaves the index
            // alone.
            if res.complete {
                let applied = self.resolutions.get(source).is_some_and(|old| {
                    old.complete
                        && old.relations == res.relations
                        && !self.unapplied.contains(source)
                });
                if !applied {
                    updates.push((source, Some(res.relations.clone())));
                }
            }
            self.resolutions.insert(source.clone(), res);
        }
        if updates.is_empty() {
            return;
        }
        self.cycles_stale = true;
        let mut index = index.write();
        for (source, relations) in updates {
            match relations {
                None => {
                    index.delete(source);
                    self.unapplied.remove(source);
                }
                Some(relations) => match index.apply(source, relations) {
                    Ok(_) => {
                        self.unapplied.remove(source);
                    }
                    Err(e) => {
                        self.unapplied.insert(source.clone());
                        metrics.index_error();
                        tracing::error!(%source, error = %e, "applying relations");
                    }
                },
            }
        }
        metrics.set_relations(index.len());
    }

    fn sources_referring_to(&self, gk: &GroupKind) -> Vec<Source> {
        self.usages
            .iter()
            .filter(|(_, u)| u.kinds().any(|(k, _)| &k == gk))
            .map(|(s, _)| s.clone())
            .collect()
    }

    fn replace_usages(&mut self, cluster: bool, views: Vec<UsageView>) -> Vec<Source> {
        let mut touched: Vec<Source> = self
            .usages
            .keys()
            .filter(|s| matches!(s, Source::ClusterUsage { .. }) == cluster)
            .cloned()
            .collect();
        let views: Vec<UsageView> = views
            .into_iter()
            .map(|v| {
                let previous = self.usages.get(&v.source());
                v.remembering(previous)
            })
            .collect();
        self.usages
            .retain(|s, _| matches!(s, Source::ClusterUsage { .. }) != cluster);
        for v in views {
            let s = v.source();
            touched.push(s.clone());
            self.usages.insert(s, v);
        }
        touched
    }
}

/// The controller. Build with [`Controller::new`], take its handles, then [`Controller::run`].
pub struct Controller {
    client: Client,
    config: ControllerConfig,
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
        Self {
            client,
            config,
            shared: Arc::new(Shared {
                index,
                wake: Notify::new(),
                metrics: Metrics::default(),
                leader_tx,
            }),
            tx,
            rx,
        }
    }

    /// Where the webhook sends its denials.
    pub fn denial_sink(&self) -> DenialSink {
        DenialSink(self.tx.clone())
    }

    /// Whether this replica is the leader, as it changes.
    pub fn leader(&self) -> watch::Receiver<bool> {
        self.shared.leader_tx.subscribe()
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
            shared,
            tx,
            mut rx,
        } = self;
        let (stop_tx, stop_rx) = watch::channel(false);
        let tasks: Vec<JoinHandle<()>> = vec![
            spawn_watch(
                watcher(
                    Api::<Usage>::all(client.clone()),
                    watcher::Config::default(),
                ),
                tx.clone(),
                Msg::Usage,
            ),
            spawn_watch(
                watcher(
                    Api::<ClusterUsage>::all(client.clone()),
                    watcher::Config::default(),
                ),
                tx.clone(),
                Msg::ClusterUsage,
            ),
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
        let writer = tokio::spawn(write_loop(
            Writer::new(client.clone(), config.write_timeout),
            shared.clone(),
            tx.clone(),
            config.clone(),
            stop_rx.clone(),
        ));
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: config.reporter.clone(),
                instance: config.leader.as_ref().map(|l| l.identity.clone()),
            },
        );
        let mut kind_tasks: HashMap<GroupKind, JoinHandle<()>> = HashMap::new();
        // Owned by this loop alone (see the module documentation).
        let mut st = State::default();
        tokio::pin!(shutdown);
        let result = loop {
            let msg = tokio::select! {
                () = &mut shutdown => break Ok(()),
                msg = rx.recv() => msg,
            };
            let Some(msg) = msg else {
                break Err(ControllerError::ChannelClosed);
            };
            if let Msg::Plan(reply) = msg {
                let span = tracing::debug_span!("plan");
                let plan = span.in_scope(|| plan(&mut st, &shared.index, &config));
                // The write loop stopped waiting only when it stops.
                let _ = reply.send(plan);
                continue;
            }
            if let Msg::Denial(denial) = msg {
                // What the record needs from the state is taken now, in the order of events.
                let target = denial_target(&st, &denial);
                let usages = blocking_usages(&st, &shared.index, &denial);
                let writer = Writer::new(client.clone(), config.write_timeout);
                let recorder = recorder.clone();
                let shared2 = shared.clone();
                let key = config.replay_key.clone();
                // Denials are written by whichever replica's webhook refused the DELETE, leader
                // or not: only that replica knows of it, and the record is what makes the replay
                // survive anything.
                tokio::spawn(async move {
                    record_denial(
                        &writer,
                        &recorder,
                        &shared2,
                        key.as_ref(),
                        target,
                        usages,
                        denial,
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
                let references = break_glass_references(&st, &record);
                let recorder = recorder.clone();
                let shared2 = shared.clone();
                tokio::spawn(async move {
                    audit_break_glass(&recorder, &shared2, references, &record).await;
                });
                continue;
            }
            let span = tracing::debug_span!("reconcile");
            let wanted = span.in_scope(|| handle(&mut st, &shared, msg));
            // Start watches for new kinds, stop those no usage refers to.
            for (gk, api_version) in &wanted {
                if !kind_tasks.contains_key(gk) {
                    shared.metrics.kind_watch_started();
                    kind_tasks.insert(
                        gk.clone(),
                        spawn_kind_watch(
                            client.clone(),
                            gk.clone(),
                            api_version.clone(),
                            tx.clone(),
                        ),
                    );
                }
            }
            kind_tasks.retain(|gk, task| {
                let keep = wanted.contains_key(gk);
                if !keep {
                    task.abort();
                    st.caches.remove_kind(gk);
                    tracing::info!(kind = %gk, "no usage refers to the kind any more: watch stopped");
                }
                keep
            });
            shared.metrics.set_watched_kinds(kind_tasks.len());
            shared.wake.notify_one();
        };
        for task in tasks.iter().chain(kind_tasks.values()) {
            task.abort();
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

fn spawn_watch<K, S>(
    stream: S,
    tx: mpsc::UnboundedSender<Msg>,
    wrap: fn(watcher::Event<K>) -> Msg,
) -> JoinHandle<()>
where
    K: Send + 'static,
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    tokio::spawn(async move {
        // The watcher's own backoff: a failed list or watch is retried, never fatal.
        let stream = kube::runtime::WatchStreamExt::default_backoff(stream);
        futures::pin_mut!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => {
                    if tx.send(wrap(ev)).is_err() {
                        return;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "watch failed; retrying"),
            }
        }
    })
}

fn spawn_kind_watch(
    client: Client,
    gk: GroupKind,
    api_version: String,
    tx: mpsc::UnboundedSender<Msg>,
) -> JoinHandle<()> {
    let span = tracing::info_span!("kind_watch", kind = %gk);
    tokio::spawn(
        async move {
            let version = api_version
                .split_once('/')
                .map_or(api_version.as_str(), |(_, v)| v)
                .to_owned();
            let gvk = GroupVersionKind::gvk(&gk.group, &version, &gk.kind);
            // Discovery; an unknown kind is retried with backoff (a CRD may be installed later).
            let mut delay = Duration::from_millis(500);
            let (ar, caps) = loop {
                match kube::discovery::pinned_kind(&client, &gvk).await {
                    Ok(found) => break found,
                    Err(e) => {
                        tracing::info!(error = %e, "kind not served");
                        if tx.send(Msg::KindUnknown(gk.clone())).is_err() {
                            return;
                        }
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(Duration::from_secs(30));
                    }
                }
            };
            let namespaced = caps.scope == kube::discovery::Scope::Namespaced;
            if tx
                .send(Msg::KindFound(gk.clone(), ar.clone(), namespaced))
                .is_err()
            {
                return;
            }
            // `Api<PartialObjectMeta<_>>` lists and watches metadata only.
            let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client, &ar);
            let stream = kube::runtime::WatchStreamExt::default_backoff(watcher(
                api,
                watcher::Config::default(),
            ));
            futures::pin_mut!(stream);
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(ev) => {
                        let ev = match ev {
                            watcher::Event::Apply(m) => watcher::Event::Apply(m.metadata),
                            watcher::Event::Delete(m) => watcher::Event::Delete(m.metadata),
                            watcher::Event::InitApply(m) => watcher::Event::InitApply(m.metadata),
                            watcher::Event::Init => watcher::Event::Init,
                            watcher::Event::InitDone => watcher::Event::InitDone,
                        };
                        if tx.send(Msg::Object(gk.clone(), ev)).is_err() {
                            return;
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "watch failed; retrying"),
                }
            }
        }
        .instrument(span),
    )
}

/// Applies one event to the state and the index; returns the kinds to watch.
fn handle(st: &mut State, shared: &Shared, msg: Msg) -> BTreeMap<GroupKind, String> {
    let metrics = &shared.metrics;
    metrics.event();
    let touched: Vec<Source> = match msg {
        Msg::Usage(ev) => usage_event(st, ev, false, UsageView::from_usage, |st| {
            &mut st.usage_buffer
        }),
        Msg::ClusterUsage(ev) => usage_event(st, ev, true, UsageView::from_cluster_usage, |st| {
            &mut st.cluster_usage_buffer
        }),
        Msg::Object(gk, ev) => {
            let changed = match ev {
                watcher::Event::Apply(m) => st.caches.apply(&gk, &m),
                watcher::Event::Delete(m) => {
                    st.caches
                        .delete(&gk, m.namespace.as_deref(), m.name.as_deref().unwrap_or(""))
                }
                watcher::Event::Init => {
                    st.object_buffers.insert(gk.clone(), Vec::new());
                    false
                }
                watcher::Event::InitApply(m) => {
                    st.object_buffers.entry(gk.clone()).or_default().push(m);
                    false
                }
                watcher::Event::InitDone => {
                    let buffered = st.object_buffers.remove(&gk).unwrap_or_default();
                    st.caches.reset(&gk, &buffered);
                    true
                }
            };
            if changed {
                st.sources_referring_to(&gk)
            } else {
                vec![]
            }
        }
        Msg::KindFound(gk, ar, namespaced) => {
            st.caches
                .add_kind(gk, namespaced, &ar.api_version, &ar.plural);
            vec![]
        }
        Msg::KindUnknown(gk) => {
            if st.caches.is_unknown(&gk) {
                vec![]
            } else {
                st.caches.mark_unknown(gk.clone());
                st.sources_referring_to(&gk)
            }
        }
        Msg::Denial(_) | Msg::BreakGlass(_) | Msg::Plan(_) => vec![],
    };
    if !touched.is_empty() {
        st.re_resolve(&touched, &shared.index, metrics);
    }
    st.wanted_kinds()
}

fn usage_event<K>(
    st: &mut State,
    ev: watcher::Event<K>,
    cluster: bool,
    view: impl Fn(&K) -> Option<UsageView>,
    buffer: impl Fn(&mut State) -> &mut Vec<K>,
) -> Vec<Source> {
    match ev {
        watcher::Event::Apply(u) => match view(&u) {
            Some(v) => {
                let s = v.source();
                let v = v.remembering(st.usages.get(&s));
                st.usages.insert(s.clone(), v);
                vec![s]
            }
            None => vec![],
        },
        watcher::Event::Delete(u) => match view(&u) {
            Some(v) => {
                let s = v.source();
                st.usages.remove(&s);
                vec![s]
            }
            None => vec![],
        },
        watcher::Event::Init => {
            buffer(st).clear();
            vec![]
        }
        watcher::Event::InitApply(u) => {
            buffer(st).push(u);
            vec![]
        }
        watcher::Event::InitDone => {
            // A restarted list replaces this kind of usage wholesale: sources that vanished
            // meanwhile are deleted from the index, the rest re-applied. (Not `reset`: the index
            // is shared with other sources, e.g. dependency rules.)
            let items = std::mem::take(buffer(st));
            let views = items.iter().filter_map(view).collect();
            if cluster {
                st.cluster_usages_listed = true;
            } else {
                st.usages_listed = true;
            }
            st.replace_usages(cluster, views)
        }
    }
}

fn denial_target(st: &State, denial: &Denial) -> Option<ObjectTarget> {
    let key = &denial.object;
    let gk = GroupKind::new(&key.group, &key.kind);
    let kind = st.caches.kind(&gk)?;
    let o = kind
        .objects
        .get(&(key.namespace.clone(), key.name.clone()))?;
    Some(ObjectTarget::new(
        &gk,
        kind,
        key.namespace.as_deref(),
        &key.name,
        o,
    ))
}

fn object_reference(t: &ObjectTarget) -> ObjectReference {
    ObjectReference {
        api_version: Some(t.api_version.clone()),
        kind: Some(t.gk.kind.clone()),
        namespace: t.namespace.clone(),
        name: Some(t.name.clone()),
        uid: Some(t.uid.clone()),
        ..Default::default()
    }
}

fn usage_reference(source: &Source, uid: &str) -> ObjectReference {
    let (kind, namespace, name) = match source {
        Source::Usage { namespace, name } => ("Usage", Some(namespace.clone()), name.clone()),
        Source::ClusterUsage { name } | Source::Rule { name } => {
            ("ClusterUsage", None, name.clone())
        }
    };
    ObjectReference {
        api_version: Some(format!("{GROUP}/{VERSION}")),
        kind: Some(kind.into()),
        namespace,
        name: Some(name),
        uid: Some(uid.to_owned()),
        ..Default::default()
    }
}

async fn record_denial(
    writer: &Writer,
    recorder: &Recorder,
    shared: &Shared,
    key: Option<&ReplayKey>,
    target: Option<ObjectTarget>,
    usages: Vec<(Source, String)>,
    denial: Denial,
) {
    let Some(target) = target else {
        tracing::warn!(object = %denial.object, "denial for an object not in the caches: not recorded");
        return;
    };
    let uid = denial.uid.clone().unwrap_or_else(|| target.uid.clone());
    let attempt = DeletionAttempt {
        uid,
        propagation_policy: denial.propagation_policy.clone(),
        user: denial.user.clone(),
        time: Timestamp::try_from(denial.time).unwrap_or_else(|_| Timestamp::now()),
        replay: denial.replay,
    };
    match key {
        Some(key) => {
            let sealed = attempt.seal(key, &denial.object);
            if let Err(e) = writer.record(&target, Some(&sealed)).await {
                shared.metrics.write_error(e.category());
                tracing::warn!(error = %e, "recording a denied deletion");
            }
        }
        None => {
            tracing::debug!(object = %denial.object, "no replay key: the refusal is not recorded");
        }
    }
    let event = Event {
        type_: EventType::Warning,
        reason: audit::DELETION_REFUSED_REASON.into(),
        note: Some(audit::denial_note(&denial)),
        action: "Delete".into(),
        secondary: None,
    };
    publish(recorder, shared, &event, &object_reference(&target)).await;
    let event = Event {
        secondary: Some(object_reference(&target)),
        ..event
    };
    for (source, uid) in usages {
        publish(recorder, shared, &event, &usage_reference(&source, &uid)).await;
    }
}

/// The usages (with their UIDs) whose relations blocked a refused DELETE, for its events.
fn blocking_usages(
    st: &State,
    index: &RwLock<RelationIndex>,
    denial: &Denial,
) -> Vec<(Source, String)> {
    let sources: BTreeSet<Source> = index
        .read()
        .blockers(&denial.object)
        .map(|r| r.source().to_source())
        .collect();
    sources
        .into_iter()
        .filter_map(|s| st.usages.get(&s).map(|u| (s, u.uid.clone())))
        .collect()
}

/// The object a break-glass record is about and the usages it overrode, as event references.
fn break_glass_references(
    st: &State,
    record: &BreakGlass,
) -> (ObjectReference, Vec<ObjectReference>) {
    let key = &record.object;
    let gk = GroupKind::new(&key.group, &key.kind);
    // A deleted object may have left the caches already; its kind (and so its apiVersion) is
    // still watched while a usage refers to it. An object not in use may be of a kind Lien does
    // not watch: its Event then names it without an apiVersion, which the API accepts.
    let kind = st.caches.kind(&gk);
    let uid = record.uid.clone().or_else(|| {
        kind.and_then(|k| k.objects.get(&(key.namespace.clone(), key.name.clone())))
            .map(|o| o.uid.clone())
    });
    let object = ObjectReference {
        api_version: kind.map(|k| k.api_version.clone()),
        kind: Some(key.kind.clone()),
        namespace: key.namespace.clone(),
        name: Some(key.name.clone()),
        uid,
        ..Default::default()
    };
    let usages = record
        .sources
        .iter()
        .filter_map(|s| st.usages.get(s).map(|u| usage_reference(s, &u.uid)))
        .collect();
    (object, usages)
}

async fn audit_break_glass(
    recorder: &Recorder,
    shared: &Shared,
    (object, usages): (ObjectReference, Vec<ObjectReference>),
    record: &BreakGlass,
) {
    let event = Event {
        type_: EventType::Warning,
        reason: audit::BREAK_GLASS_REASON.into(),
        note: Some(audit::break_glass_note(record)),
        action: audit::event_action(record.action).into(),
        secondary: None,
    };
    publish(recorder, shared, &event, &object).await;
    let event = Event {
        secondary: Some(object),
        ..event
    };
    for usage in &usages {
        publish(recorder, shared, &event, usage).await;
    }
}

async fn publish(recorder: &Recorder, shared: &Shared, event: &Event, reference: &ObjectReference) {
    if let Err(e) = recorder.publish(event, reference).await {
        shared.metrics.write_error("event");
        tracing::warn!(error = %e, "publishing an event");
    }
}

/// Everything one write pass will do, computed by the event loop and executed by the write loop.
#[derive(Debug, Default)]
struct Plan {
    labels: Vec<desired::LabelWrite>,
    metas: Vec<desired::UsageMetaWrite>,
    statuses: Vec<(Source, lien_api::UsageStatus, Option<String>)>,
    replays: Vec<ReplayAction>,
    /// Usages to delete (with their UIDs) because their users are gone and nobody owns them.
    orphans: Vec<(Source, String)>,
}

fn plan(st: &mut State, index: &RwLock<RelationIndex>, config: &ControllerConfig) -> Plan {
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

async fn write_loop(
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
