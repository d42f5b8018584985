//! The CascadeRule reconciler's state and its event handling: synchronous, no I/O, unit-tested
//! without a runtime (as `controller::state` is for Usages and DependencyRules).
//!
//! [`CascadeState::handle`] applies one event (a watch event, a kind found, a write's outcome)
//! to the caches and marks what it concerns dirty; [`CascadeState::decide`] (leader only) runs
//! the pure decision (`decide`) over the dirty parents and the rules, and returns the
//! [`Effect`]s — watches to start or stop, [`CascadeWrite`]s to send — which the runtime in
//! `cascade/mod.rs` carries out (the writes through the controller's write loop, as
//! `Write::Cascade`). [`CascadeState::next_wake`] is the earliest deadline the state waits for
//! (a retry, a report, a child turning stuck, a throttled status): the write loop plans again
//! then (the plan's `revisit`) or at the next event, never on a fixed tick. The time is an
//! argument (`handle_at`, `decide_at`), so tests set it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::core::ApiResource;
use kube::runtime::watcher;
use lien_api::{
    CASCADE_FINALIZER, CascadeRule, CascadeRuleStatus, PropagationPolicy, WaitingChild,
    WaitingParent,
};
use lien_core::GroupKind;
use serde_json::Value;
use tokio::time::Instant;

use super::CascadeConfig;
use super::decide::{
    self, CHILDREN_ANNOTATION, CascadeError, ChildKey, ChildMeta, Decision, Observed, Parent,
    Record,
};
use crate::watch::{Discovered, DiscoveryError};
use lien_decide::program::{CascadeProgram, ChildRef};

/// The most waiting parents (and children per parent) a rule's status lists.
const STATUS_BOUND: usize = 20;

/// How many distinct warnings per parent are remembered as said. A decision says at most one
/// warning of each kind (refused, dangling, re-created children, the policy), however many
/// children it concerns, but a parent's writer can make each one new by changing what the
/// parent names; beyond this many, the oldest may be said again.
const WARNINGS_REMEMBERED: usize = 64;

/// The most finalizers Lien keeps of a child (it names them in reports, and checks for
/// `foregroundDeletion`, which is always kept): a child's writer may add any number.
const CHILD_FINALIZERS_KEPT: usize = 16;

/// What changed last about a child, for "stuck": hashes, not the text (which its writer sizes).
#[derive(Debug, Clone, Copy)]
struct Progress {
    meta: u64,
    holders: u64,
    since: Instant,
}

fn hash_of(text: &str) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // A fixed hasher: the hashes are compared within one process only.
    let mut h =
        std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
            .build_hasher();
    h.write(text.as_bytes());
    h.finish()
}

/// The least time between two passes writing the rules' statuses.
const STATUS_INTERVAL: Duration = Duration::from_millis(500);

pub(super) type ParentId = (GroupKind, String, String);
type NameKey = (GroupKind, String);

/// One event the state handles: from a watch, a kind's discovery, or a write's outcome.
#[derive(Debug)]
pub(crate) enum Msg {
    Rule(watcher::Event<CascadeRule>),
    ParentKind(GroupKind, Result<Discovered, DiscoveryError>),
    Parent(GroupKind, watcher::Event<DynamicObject>),
    ChildKind(GroupKind, Result<Discovered, DiscoveryError>),
    Child(GroupKind, watcher::Event<DynamicObject>),
    /// A parent Lien's write released and thereby deleted (its last finalizer went): until the
    /// watch says so, it is not decided again. (kube-apiserver answers such an update with the
    /// object as last stored, Lien's finalizer still in it.)
    Gone(ParentId),
    /// A parent as Lien's write left it (the response), ahead of its watch event.
    Written(GroupKind, DynamicObject),
    /// A parent's writes finished; `retry`: when to decide it again (a write failed).
    Done(ParentId, Option<Duration>),
    /// A child's DELETE failed: its UID and why; with the parent and the child's name when an
    /// admission webhook refused it (a Usage, a rule), which is said on the parent at once.
    Refused(String, String, Option<(ParentId, String)>),
    /// The dependents holding foreground-deleting children, by child UID.
    Holders(HashMap<String, Vec<String>>),
    /// A rule's finalizer or status write finished.
    RuleWritten,
}

/// What Lien keeps of a parent.
#[derive(Debug, Clone)]
struct ParentObj {
    uid: String,
    api_version: String,
    resource_version: Option<String>,
    /// `creationTimestamp`: a child by name only must not be older (`decide`, "Names are
    /// reused").
    created: Option<jiff::Timestamp>,
    deleting_since: Option<Time>,
    finalizers: Vec<String>,
    record: Record,
    has_annotation: bool,
    /// The references of kinds the rule lists.
    refs: Result<Vec<ChildRef>, CascadeError>,
    /// The references of kinds it does not list: never watched, never deleted, reported.
    outside: Vec<ChildRef>,
    policy: PropagationPolicy,
    policy_error: Option<String>,
    /// What its references (`refs`, `outside`, the record's children) count against the
    /// rule's [`decide::MAX_REFERENCE_BYTES_PER_RULE`].
    cost: usize,
}

impl ParentObj {
    /// Keeps none of its references: they would take the rule past its bound.
    fn over_budget(&mut self) {
        let count = self.refs.as_ref().map_or(0, Vec::len)
            + self.outside.len()
            + self.record.children.len();
        self.refs = Err(CascadeError::OverBudget { count });
        self.outside = Vec::new();
        self.record = Record::default();
        self.cost = 0;
    }
}

/// What a parent's references cost (see [`ParentObj::cost`]).
fn parent_cost(
    refs: &Result<Vec<ChildRef>, CascadeError>,
    outside: &[ChildRef],
    record: &Record,
) -> usize {
    let of = |r: &ChildRef| {
        decide::reference_cost([
            r.api_version.as_str(),
            &r.kind,
            &r.name,
            r.namespace.as_deref().unwrap_or_default(),
        ])
    };
    refs.as_ref().map_or(0, |r| r.iter().map(of).sum::<usize>())
        + outside.iter().map(of).sum::<usize>()
        + record.cost()
}

struct RuleState {
    rule: CascadeRule,
    program: Result<CascadeProgram, CascadeError>,
    last_status: Option<Value>,
}

#[derive(Default)]
struct KindState {
    ar: Option<ApiResource>,
    namespaced: bool,
    error: Option<String>,
    synced: bool,
    /// Whether its watch runs (the runtime holds the task).
    watching: bool,
}

#[derive(Default)]
struct ParentKind {
    kind: KindState,
    /// The rule in charge, and the (uid, generation) the watch evaluates with.
    rule: Option<String>,
    evaluated_with: Option<(String, i64)>,
    objects: HashMap<(String, String), ParentObj>,
    /// Parents listed by a re-list in progress.
    relist: Option<HashMap<(String, String), ParentObj>>,
    /// The cost of `objects`' references, and of `relist`'s: each within the rule's bound.
    bytes: usize,
    relist_bytes: usize,
}

impl ParentKind {
    /// Admits `p` (replacing a parent that cost `old`) within the rule's bound on references,
    /// counted on the re-list in progress when `relist`; beyond it, `p` keeps none.
    fn admit(&mut self, p: &mut ParentObj, old: usize, relist: bool) {
        let total = if relist {
            &mut self.relist_bytes
        } else {
            &mut self.bytes
        };
        let rest = total.saturating_sub(old);
        if rest + p.cost > decide::MAX_REFERENCE_BYTES_PER_RULE {
            p.over_budget();
        }
        *total = rest + p.cost;
    }
}

#[derive(Default)]
struct ChildKind {
    kind: KindState,
    objects: HashMap<(String, String), StoredChild>,
    relist: Option<HashMap<(String, String), StoredChild>>,
    /// The apiVersion its watch was started with (a restart uses it again).
    api_version: String,
}

/// What Lien keeps of a child: its metadata, and per parent kind whose rule lists the child's
/// kind, the parents its back reference names (or why it failed).
#[derive(Debug, Clone, Default)]
struct StoredChild {
    meta: ChildMeta,
    back_refs: Vec<(
        GroupKind,
        Result<Vec<lien_decide::program::ParentRef>, CascadeError>,
    )>,
}

impl StoredChild {
    /// The parent kinds under whose rule this child names a parent by name only (no uid).
    fn by_name_only(&self) -> impl Iterator<Item = &GroupKind> {
        self.back_refs
            .iter()
            .filter(|(_, r)| {
                r.as_ref()
                    .is_ok_and(|refs| refs.iter().any(|r| r.uid.is_none()))
            })
            .map(|(g, _)| g)
    }
}

struct Refusal {
    message: String,
    next: Instant,
    delay: Duration,
}

struct Report {
    next: Instant,
    interval: Duration,
}

/// What the runtime is to do for the state: watches to start or stop, writes to send.
#[derive(Debug)]
pub(super) enum Effect {
    /// Discover a parent kind and watch its objects (a running watch of it is stopped first:
    /// a new rule or spec evaluates every parent again from a fresh list).
    WatchParents { gk: GroupKind, api_version: String },
    /// Stop watching a parent kind no rule names any more.
    StopParents(GroupKind),
    /// Discover a child kind and watch its objects (a running watch is stopped first).
    WatchChildren { gk: GroupKind, api_version: String },
    /// A write, sent by the runtime's writer (boxed: it is far larger than the other
    /// variants).
    Write(Box<CascadeWrite>),
}

/// One write the reconciler decided on, with the precondition it was computed from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CascadeWrite {
    /// A parent's finalizer and record, then the DELETEs of its children (in that order: a
    /// failed parent write sends no DELETE).
    Parent {
        /// The parent.
        id: ParentId,
        /// Its resource.
        ar: ApiResource,
        /// The finalizers and record to write, with the resourceVersion they were computed
        /// from (a concurrent change fails the write with 409; it is decided again).
        meta: Option<ParentMeta>,
        /// The children to delete, each with the UID it was decided on (precondition).
        deletes: Vec<(decide::Delete, ApiResource)>,
        /// Whether the write removes Lien's finalizer (the parent may go at once).
        releasing: bool,
    },
    /// A rule's finalizers, with the resourceVersion they were computed from.
    RuleFinalizers {
        name: String,
        resource_version: Option<String>,
        finalizers: Vec<String>,
    },
    /// A rule's status, with the rule's resourceVersion it was computed from. Sent without it
    /// as a precondition (as the controller's statuses are): the status is recomputed whole
    /// from the state, so the last one written wins, and a rule's own changes must not make
    /// Lien's report of it fail.
    RuleStatus {
        name: String,
        resource_version: Option<String>,
        status: Value,
    },
    /// A Warning event on a parent.
    Event {
        reference: ObjectReference,
        reason: String,
        note: String,
    },
    /// The waiting reports due, after a scan for the dependents holding `foreground_uids`.
    Report {
        jobs: Vec<(ObjectReference, WaitingReport)>,
        foreground_uids: Vec<String>,
    },
}

/// The metadata of a parent write.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ParentMeta {
    pub resource_version: Option<String>,
    pub finalizers: Vec<String>,
    /// `Some(Some(r))`: write the record; `Some(None)`: remove it; `None`: leave it.
    pub record: Option<Option<String>>,
}

/// The CascadeRule reconciler's state (see the module documentation).
pub(super) struct CascadeState {
    /// The time of the event or pass being handled: the state reads no clock of its own, so
    /// its tests set the time.
    now: Instant,
    config: CascadeConfig,
    /// What `handle` and `decide` asked of the runtime, in order.
    effects: Vec<Effect>,
    /// A status may differ from the last written: write it at the next chance.
    statuses_pending: bool,
    rules: BTreeMap<String, RuleState>,
    parents: HashMap<GroupKind, ParentKind>,
    children: HashMap<GroupKind, ChildKind>,
    /// (child group-kind, name) → parents referencing it.
    /// Kept per child kind, then name (the kind's strings once, not per reference), with a
    /// list of parents (a name is almost always one parent's): the largest part of what a
    /// reference costs (`decide::REFERENCE_OVERHEAD_BYTES`).
    by_child: HashMap<GroupKind, HashMap<String, Vec<ParentId>>>,
    dirty: BTreeSet<ParentId>,
    in_flight: HashSet<ParentId>,
    retries: BTreeMap<Instant, Vec<ParentId>>,
    refusals: HashMap<String, Refusal>,
    reports: HashMap<ParentId, Report>,
    holders: HashMap<String, Vec<String>>,
    /// Per child UID: a fingerprint of its state and when it last changed.
    /// Per child UID: hashes of its state (metadata, holders) and when they last changed.
    progress: HashMap<String, Progress>,
    /// Per parent UID, the hashes of the last [`WARNINGS_REMEMBERED`] warnings said on it:
    /// each is said once (a restart may repeat one), and what is remembered stays bounded
    /// however many distinct warnings a parent's writer provokes.
    warned: HashMap<String, std::collections::VecDeque<u64>>,
    /// Per parent, the children it names that Lien will not delete (the rule's status).
    refused: HashMap<ParentId, Vec<decide::Refused>>,
    rules_dirty: bool,
    last_status: Instant,
    /// Children whose DELETE was sent, by UID: not sent again until their watch shows the
    /// deletion (or the DELETE failed), so a decision on a cache that has not caught up yet does
    /// not repeat it.
    requested: HashMap<String, Instant>,
    /// Per parent, the resourceVersion of Lien's last write whose watch event has not arrived.
    written: HashMap<ParentId, String>,
    /// Parents deleted by Lien's release write, until their Delete event.
    gone: HashSet<ParentId>,
    /// No dependents scan before this (one scan serves every report due until then).
    next_scan: Instant,
    /// Per (parent kind, child kind): how many children name a parent of that kind by name
    /// only (their back reference yields no uid), for the rule's status.
    by_name_only: HashMap<(GroupKind, GroupKind), usize>,
}

fn reference(gk: &GroupKind, p: &ParentObj, ns: &str, name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some(p.api_version.clone()),
        kind: Some(gk.kind.clone()),
        name: Some(name.to_owned()),
        namespace: (!ns.is_empty()).then(|| ns.to_owned()),
        uid: Some(p.uid.clone()),
        ..Default::default()
    }
}

fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s < 120 {
        format!("{s}s")
    } else if s < 7200 {
        format!("{}m{}s", s / 60, s % 60)
    } else {
        format!("{}h{}m", s / 3600, (s % 3600) / 60)
    }
}

fn since(t: &Option<Time>) -> Duration {
    t.as_ref()
        .map(|t| {
            let d = jiff::Timestamp::now().duration_since(t.0);
            Duration::from_secs(u64::try_from(d.as_secs()).unwrap_or(0))
        })
        .unwrap_or_default()
}

impl CascadeState {
    pub(super) fn new(config: CascadeConfig) -> Self {
        let now = Instant::now();
        Self {
            now,
            config,
            effects: Vec::new(),
            statuses_pending: false,
            rules: BTreeMap::new(),
            parents: HashMap::new(),
            children: HashMap::new(),
            by_child: HashMap::new(),
            dirty: BTreeSet::new(),
            in_flight: HashSet::new(),
            retries: BTreeMap::new(),
            refusals: HashMap::new(),
            reports: HashMap::new(),
            holders: HashMap::new(),
            progress: HashMap::new(),
            warned: HashMap::new(),
            refused: HashMap::new(),
            rules_dirty: true,
            last_status: now,
            requested: HashMap::new(),
            written: HashMap::new(),
            gone: HashSet::new(),
            next_scan: now,
            by_name_only: HashMap::new(),
        }
    }

    fn write(&mut self, w: CascadeWrite) {
        self.effects.push(Effect::Write(Box::new(w)));
    }

    /// The effects asked for since the last call, in order.
    pub(super) fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    /// Applies one event to the caches (every replica: a follower keeps them warm). Decides
    /// nothing: see [`Self::decide`].
    pub(super) fn handle(&mut self, msg: Msg) {
        self.handle_at(msg, Instant::now());
    }

    /// [`Self::handle`] at time `now`.
    pub(super) fn handle_at(&mut self, msg: Msg, now: Instant) {
        self.now = now;
        self.on_msg(msg);
        // Without a rule there is no status to write (and no pass to wake for).
        self.statuses_pending = !self.rules.is_empty();
    }

    /// The leader's pass after events or at a wake: due retries, the rules' finalizers, the
    /// dirty parents' decisions, the reports due, the statuses. Returns every effect pending
    /// (those of `handle` included).
    pub(super) fn decide(&mut self) -> Vec<Effect> {
        self.decide_at(Instant::now())
    }

    /// [`Self::decide`] at time `now`.
    pub(super) fn decide_at(&mut self, now: Instant) -> Vec<Effect> {
        let before = self.now;
        self.now = now;
        // A child that turned stuck since the last pass changes its rule's status with no
        // event.
        let stuck_after = self.config.stuck_after;
        if self.progress.values().any(|Progress { since, .. }| {
            let stuck = *since + stuck_after;
            stuck > before.min(self.last_status) && stuck <= now
        }) {
            self.statuses_pending = true;
        }
        self.due_retries();
        self.reconcile_rules();
        self.process();
        self.report();
        self.write_statuses();
        self.take_effects()
    }

    /// A new leader decides everything once.
    pub(super) fn lead(&mut self) {
        self.mark_all();
    }

    /// When the state next needs a pass without an event: the earliest retry, refused DELETE
    /// whose backoff ends, report due, child turning stuck, or throttled status write.
    /// `None`: only an event can change a decision.
    pub(super) fn next_wake(&self) -> Option<Instant> {
        let mut wake: Option<Instant> = None;
        let mut at = |t: Instant| wake = Some(wake.map_or(t, |w| w.min(t)));
        if let Some(t) = self.retries.keys().next() {
            at(*t);
        }
        let now = self.now;
        // A refusal past its backoff has been acted on (its parent decided again) already.
        for r in self.refusals.values().filter(|r| r.next > now) {
            at(r.next);
        }
        for r in self.reports.values() {
            at(r.next);
        }
        // A child turns stuck with no event: the rule's status says so then.
        for Progress { since, .. } in self.progress.values() {
            let stuck = *since + self.config.stuck_after;
            if stuck > now {
                at(stuck);
            }
        }
        if self.statuses_pending {
            at(self.last_status + STATUS_INTERVAL);
        }
        wake
    }

    fn mark_all(&mut self) {
        for (gk, pk) in &self.parents {
            for (ns, name) in pk.objects.keys() {
                self.dirty.insert((gk.clone(), ns.clone(), name.clone()));
            }
        }
        self.rules_dirty = true;
    }

    fn on_msg(&mut self, msg: Msg) {
        match msg {
            Msg::Rule(ev) => self.on_rule(ev),
            Msg::ParentKind(gk, found) => {
                if let Some(pk) = self.parents.get_mut(&gk) {
                    apply_kind(&mut pk.kind, found);
                }
                self.rules_dirty = true;
            }
            Msg::ChildKind(gk, found) => {
                if let Some(ck) = self.children.get_mut(&gk) {
                    apply_kind(&mut ck.kind, found);
                }
                self.mark_kind_referrers(&gk);
            }
            Msg::Parent(gk, ev) => self.on_parent(gk, ev),
            Msg::Gone(id) => {
                self.gone.insert(id);
            }
            Msg::Written(gk, obj) => {
                // Watch events older than this write may still be queued: they are skipped
                // until the write's own event arrives, so the cache never goes back in time
                // (a decision on it would repeat a write with a stale resourceVersion).
                if let Some(rv) = obj.resource_version() {
                    let id = (
                        gk.clone(),
                        obj.namespace().unwrap_or_default(),
                        obj.name_any(),
                    );
                    self.written.insert(id, rv);
                }
                self.on_parent(gk, watcher::Event::Apply(obj));
            }
            Msg::Child(gk, ev) => self.on_child(gk, ev),
            Msg::Done(id, retry) => {
                self.in_flight.remove(&id);
                if let Some(delay) = retry {
                    self.retries.entry(self.now + delay).or_default().push(id);
                }
            }
            Msg::Refused(uid, message, refused) => {
                self.requested.remove(&uid);
                if let Some((parent, child)) = refused {
                    // Said at once (not only in the next waiting report): the seed's complaint
                    // is a teardown that stops without telling anyone why. `warn` says each
                    // distinct refusal once.
                    self.warn(
                        &parent,
                        "CascadeChildRefused",
                        format!(
                            "deleting {child} was refused, retried with backoff: {}",
                            truncate(message.clone(), 800)
                        ),
                    );
                }
                let delay = self.refusals.get(&uid).map_or(self.config.retry_base, |r| {
                    (r.delay * 2).min(self.config.retry_max)
                });
                self.refusals.insert(
                    uid,
                    Refusal {
                        message,
                        next: self.now + delay,
                        delay,
                    },
                );
            }
            Msg::Holders(h) => {
                for (uid, list) in &h {
                    self.note_progress(uid, &format!("holders:{}", list.join("|")), false);
                }
                self.holders.extend(h);
                self.rules_dirty = true;
            }
            Msg::RuleWritten => {}
        }
    }

    /// A child UID's state (`child_meta`: its metadata, else what holds it), hashed; a change
    /// is progress.
    fn note_progress(&mut self, uid: &str, part: &str, child_meta: bool) {
        let now = self.now;
        let hash = hash_of(part);
        let entry = self.progress.entry(uid.to_owned()).or_insert(Progress {
            meta: 0,
            holders: 0,
            since: now,
        });
        let slot = if child_meta {
            &mut entry.meta
        } else {
            &mut entry.holders
        };
        if *slot != hash {
            *slot = hash;
            entry.since = now;
        }
    }

    fn mark_kind_referrers(&mut self, gk: &GroupKind) {
        if let Some(names) = self.by_child.get(gk) {
            for parents in names.values() {
                self.dirty.extend(parents.iter().cloned());
            }
        }
    }

    fn on_rule(&mut self, ev: watcher::Event<CascadeRule>) {
        match ev {
            watcher::Event::Apply(rule) | watcher::Event::InitApply(rule) => {
                let name = rule.name_any();
                // Its deletion (or any change) concerns every parent of its kind.
                let p = &rule.spec.parent;
                let gk = GroupKind::from_api_version(&p.api_version, &p.kind);
                if let Some(pk) = self.parents.get(&gk) {
                    for (ns, n) in pk.objects.keys() {
                        self.dirty.insert((gk.clone(), ns.clone(), n.clone()));
                    }
                }
                let program = CascadeProgram::compile(&rule.spec).map_err(|errs| {
                    CascadeError::InvalidExpression(
                        errs.iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join("; "),
                    )
                });
                let last_status = self.rules.get(&name).and_then(|r| r.last_status.clone());
                self.rules.insert(
                    name,
                    RuleState {
                        rule,
                        program,
                        last_status,
                    },
                );
            }
            watcher::Event::Delete(rule) => {
                // Gone without Lien's finalizer (Lien never saw it, or released it already).
                self.rules.remove(&rule.name_any());
            }
            watcher::Event::Init => {}
            watcher::Event::InitDone => {}
        }
        self.rules_dirty = true;
    }

    /// Which rule is in charge of each parent kind; starts and stops parent watches.
    fn assign_rules(&mut self) {
        let mut by_kind: BTreeMap<GroupKind, Vec<&RuleState>> = BTreeMap::new();
        for r in self.rules.values() {
            let p = &r.rule.spec.parent;
            by_kind
                .entry(GroupKind::from_api_version(&p.api_version, &p.kind))
                .or_default()
                .push(r);
        }
        let mut restart = Vec::new();
        for (gk, mut rules) in by_kind.clone() {
            // The oldest rule that is not being deleted; else the oldest (it releases).
            rules.sort_by_key(|r| {
                (
                    r.rule.metadata.deletion_timestamp.is_some(),
                    r.rule.metadata.creation_timestamp.clone().map(|t| t.0),
                    r.rule.name_any(),
                )
            });
            let chosen = rules[0];
            let name = chosen.rule.name_any();
            let evaluated = (
                chosen.rule.uid().unwrap_or_default(),
                chosen.rule.metadata.generation.unwrap_or(0),
            );
            let api_version = chosen.rule.spec.parent.api_version.clone();
            let pk = self.parents.entry(gk.clone()).or_default();
            pk.rule = Some(name);
            if pk.evaluated_with.as_ref() != Some(&evaluated) {
                // A new rule or spec: evaluate every parent again from a fresh list, and every
                // child of the kinds it lists (their back references may have changed).
                for k in &chosen.rule.spec.child_kinds {
                    restart.push(GroupKind::from_api_version(&k.of.api_version, &k.of.kind));
                }
                pk.kind.synced = false;
                pk.kind.watching = true;
                pk.evaluated_with = Some(evaluated);
                self.effects.push(Effect::WatchParents {
                    gk: gk.clone(),
                    api_version,
                });
            }
        }
        // Kinds no rule names any more: a rule deleted without Lien (never seen by it).
        let gone: Vec<GroupKind> = self
            .parents
            .keys()
            .filter(|gk| !by_kind.contains_key(*gk))
            .cloned()
            .collect();
        for gk in gone {
            if self.parents.remove(&gk).is_some() {
                self.effects.push(Effect::StopParents(gk));
            }
        }
        for gk in restart {
            self.restart_child_watch(&gk);
        }
    }

    fn program_for(&self, gk: &GroupKind) -> Option<(&RuleState, bool)> {
        let pk = self.parents.get(gk)?;
        let r = self.rules.get(pk.rule.as_ref()?)?;
        Some((r, r.rule.metadata.deletion_timestamp.is_some()))
    }

    /// The child kinds the rule in charge of parent kind `gk` lists (`spec.childKinds`).
    fn allowed_kinds(&self, gk: &GroupKind) -> HashSet<GroupKind> {
        self.program_for(gk)
            .map(|(r, _)| {
                r.rule
                    .spec
                    .child_kinds
                    .iter()
                    .map(|k| GroupKind::from_api_version(&k.of.api_version, &k.of.kind))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn reduce_parent(&self, gk: &GroupKind, obj: &DynamicObject) -> ParentObj {
        let annotation = obj.annotations().get(CHILDREN_ANNOTATION);
        let (refs, policy, policy_error) = match self.program_for(gk) {
            Some((r, _)) => match &r.program {
                Ok(p) => {
                    let value = serde_json::to_value(obj).unwrap_or(Value::Null);
                    let refs = p.bounded_children(&value);
                    match p.policy(&value) {
                        Ok(policy) => (refs, policy, None),
                        Err(e) => (refs, r.rule.spec.propagation_policy, Some(e.to_string())),
                    }
                }
                Err(e) => (Err(e.clone()), r.rule.spec.propagation_policy, None),
            },
            None => (
                Err(CascadeError::NoRule),
                PropagationPolicy::Background,
                None,
            ),
        };
        // Only the kinds the rule lists are candidates; the rest is reported, never watched.
        let (refs, outside) = match refs {
            Ok(refs) => {
                let allowed = self.allowed_kinds(gk);
                let (inside, outside): (Vec<ChildRef>, Vec<ChildRef>) =
                    refs.into_iter().partition(|r| {
                        allowed.contains(&GroupKind::from_api_version(&r.api_version, &r.kind))
                    });
                (Ok(inside), outside)
            }
            Err(e) => (Err(e), Vec::new()),
        };
        let record = Record::parse(annotation.map(String::as_str));
        let cost = parent_cost(&refs, &outside, &record);
        ParentObj {
            uid: obj.uid().unwrap_or_default(),
            created: obj.metadata.creation_timestamp.as_ref().map(|t| t.0),
            api_version: obj
                .types
                .as_ref()
                .map(|t| t.api_version.clone())
                .unwrap_or_default(),
            resource_version: obj.resource_version(),
            deleting_since: obj.metadata.deletion_timestamp.clone(),
            finalizers: obj.finalizers().to_vec(),
            record,
            has_annotation: annotation.is_some(),
            refs,
            outside,
            policy,
            policy_error,
            cost,
        }
    }

    fn index_parent(&mut self, id: &ParentId, old: Option<&ParentObj>, new: Option<&ParentObj>) {
        // The record is an annotation anyone who writes the parent can write: only the kinds
        // the rule lists are ever watched for it.
        let allowed = self.allowed_kinds(&id.0);
        let keys = |p: Option<&ParentObj>| -> Vec<NameKey> {
            let mut out: Vec<NameKey> = Vec::new();
            if let Some(p) = p {
                if let Ok(refs) = &p.refs {
                    out.extend(refs.iter().map(|r| {
                        (
                            GroupKind::from_api_version(&r.api_version, &r.kind),
                            r.name.clone(),
                        )
                    }));
                }
                out.extend(p.record.children.iter().map(|c| {
                    (
                        GroupKind::from_api_version(&c.key.api_version, &c.key.kind),
                        c.key.name.clone(),
                    )
                }));
            }
            out
        };
        for (gk, name) in keys(old) {
            if let Some(names) = self.by_child.get_mut(&gk) {
                if let Some(parents) = names.get_mut(&name) {
                    parents.retain(|p| p != id);
                    if parents.is_empty() {
                        names.remove(&name);
                    }
                }
                if names.is_empty() {
                    self.by_child.remove(&gk);
                }
            }
        }
        let wanted: Vec<(GroupKind, String)> = new
            .and_then(|p| p.refs.as_ref().ok())
            .map(|refs| {
                refs.iter()
                    .map(|r| {
                        (
                            GroupKind::from_api_version(&r.api_version, &r.kind),
                            r.api_version.clone(),
                        )
                    })
                    .chain(new.into_iter().flat_map(|p| {
                        p.record.children.iter().map(|c| {
                            (
                                GroupKind::from_api_version(&c.key.api_version, &c.key.kind),
                                c.key.api_version.clone(),
                            )
                        })
                    }))
                    .filter(|(gk, _)| allowed.contains(gk))
                    .collect()
            })
            .unwrap_or_default();
        for (gk, name) in keys(new) {
            let parents = self
                .by_child
                .entry(gk)
                .or_default()
                .entry(name)
                .or_default();
            if !parents.contains(id) {
                parents.push(id.clone());
            }
        }
        for (gk, api_version) in wanted {
            self.want_child_kind(gk, api_version);
        }
    }

    fn want_child_kind(&mut self, gk: GroupKind, api_version: String) {
        let ck = self.children.entry(gk.clone()).or_default();
        if !ck.kind.watching {
            ck.api_version = api_version.clone();
            ck.kind.watching = true;
            self.effects.push(Effect::WatchChildren { gk, api_version });
        }
    }

    /// Lists a child kind again (a rule's back reference changed: every child of the kind is
    /// evaluated anew); its parents are decided once the list is in.
    fn restart_child_watch(&mut self, gk: &GroupKind) {
        let Some(ck) = self.children.get_mut(gk) else {
            return;
        };
        ck.kind.watching = false;
        ck.kind.synced = false;
        let api_version = ck.api_version.clone();
        self.want_child_kind(gk.clone(), api_version);
    }

    /// What a child names back under every rule that lists its kind.
    fn reduce_child(&self, gk: &GroupKind, obj: &DynamicObject) -> StoredChild {
        let meta = ChildMeta {
            uid: obj.metadata.uid.clone().unwrap_or_default(),
            created: obj.metadata.creation_timestamp.as_ref().map(|t| t.0),
            deleting: obj.metadata.deletion_timestamp.is_some(),
            finalizers: kept_finalizers(obj.metadata.finalizers.as_deref().unwrap_or_default()),
            back_refs: Vec::new(),
            back_ref_error: None,
        };
        let mut back_refs = Vec::new();
        let mut value = None;
        for (parent_gk, pk) in &self.parents {
            let Some(rule) = pk.rule.as_ref().and_then(|r| self.rules.get(r)) else {
                continue;
            };
            let Ok(program) = &rule.program else { continue };
            let value =
                value.get_or_insert_with(|| serde_json::to_value(obj).unwrap_or(Value::Null));
            if let Some(refs) = program.back_references(&gk.group, &gk.kind, value) {
                back_refs.push((
                    parent_gk.clone(),
                    refs.map_err(|e| CascadeError::Evaluation(e.to_string())),
                ));
            }
        }
        StoredChild { meta, back_refs }
    }

    fn on_parent(&mut self, gk: GroupKind, ev: watcher::Event<DynamicObject>) {
        match ev {
            watcher::Event::Init => {
                if let Some(pk) = self.parents.get_mut(&gk) {
                    pk.relist = Some(HashMap::new());
                    pk.relist_bytes = 0;
                }
                // A fresh list is the truth.
                self.written.retain(|id, _| id.0 != gk);
                self.gone.retain(|id| id.0 != gk);
            }
            watcher::Event::InitApply(obj) => {
                let mut reduced = self.reduce_parent(&gk, &obj);
                if let Some(pk) = self.parents.get_mut(&gk) {
                    let key = (obj.namespace().unwrap_or_default(), obj.name_any());
                    let old = pk
                        .relist
                        .as_ref()
                        .and_then(|r| r.get(&key))
                        .map_or(0, |p| p.cost);
                    pk.admit(&mut reduced, old, true);
                    pk.relist
                        .get_or_insert_with(HashMap::new)
                        .insert(key, reduced);
                }
            }
            watcher::Event::InitDone => {
                let Some(pk) = self.parents.get_mut(&gk) else {
                    return;
                };
                let fresh = pk.relist.take().unwrap_or_default();
                pk.bytes = std::mem::take(&mut pk.relist_bytes);
                pk.kind.synced = true;
                let old = std::mem::replace(&mut pk.objects, fresh.clone());
                for ((ns, name), p) in old {
                    let id = (gk.clone(), ns, name);
                    self.index_parent(&id, Some(&p), None);
                }
                for ((ns, name), p) in fresh {
                    let id = (gk.clone(), ns, name);
                    self.index_parent(&id, None, Some(&p));
                    self.dirty.insert(id);
                }
                self.rules_dirty = true;
            }
            watcher::Event::Apply(obj) => {
                let key = (obj.namespace().unwrap_or_default(), obj.name_any());
                let id = (gk.clone(), key.0.clone(), key.1.clone());
                if let Some(rv) = self.written.get(&id) {
                    if obj.resource_version().as_ref() == Some(rv) {
                        self.written.remove(&id);
                    } else {
                        return;
                    }
                }
                let mut reduced = self.reduce_parent(&gk, &obj);
                let Some(pk) = self.parents.get_mut(&gk) else {
                    return;
                };
                let old_cost = pk.objects.get(&key).map_or(0, |p| p.cost);
                pk.admit(&mut reduced, old_cost, false);
                let old = pk.objects.insert(key, reduced.clone());
                self.index_parent(&id, old.as_ref(), Some(&reduced));
                self.dirty.insert(id);
                self.rules_dirty = true;
            }
            watcher::Event::Delete(obj) => {
                let key = (obj.namespace().unwrap_or_default(), obj.name_any());
                let id = (gk.clone(), key.0.clone(), key.1.clone());
                self.written.remove(&id);
                self.gone.remove(&id);
                let Some(pk) = self.parents.get_mut(&gk) else {
                    return;
                };
                let old = pk.objects.remove(&key);
                pk.bytes = pk.bytes.saturating_sub(old.as_ref().map_or(0, |p| p.cost));
                if let Some(uid) = obj.uid() {
                    self.warned.remove(&uid);
                }
                self.index_parent(&id, old.as_ref(), None);
                self.reports.remove(&id);
                self.refused.remove(&id);
                self.rules_dirty = true;
            }
        }
    }

    fn on_child(&mut self, gk: GroupKind, ev: watcher::Event<DynamicObject>) {
        let key_of = |m: &DynamicObject| {
            (
                m.metadata.namespace.clone().unwrap_or_default(),
                m.metadata.name.clone().unwrap_or_default(),
            )
        };
        let reduced = match &ev {
            watcher::Event::InitApply(o) | watcher::Event::Apply(o) => {
                Some(self.reduce_child(&gk, o))
            }
            _ => None,
        };
        let mut touched: Vec<String> = Vec::new();
        let mut relisted = false;
        // Children naming parents by name only: counted out (old) and in (new).
        let mut counted: Vec<(GroupKind, bool)> = Vec::new();
        {
            let Some(ck) = self.children.get_mut(&gk) else {
                return;
            };
            match ev {
                watcher::Event::Init => ck.relist = Some(HashMap::new()),
                watcher::Event::InitApply(m) => {
                    ck.relist
                        .get_or_insert_with(HashMap::new)
                        .insert(key_of(&m), reduced.unwrap_or_default());
                }
                watcher::Event::InitDone => {
                    ck.objects = ck.relist.take().unwrap_or_default();
                    ck.kind.synced = true;
                    relisted = true;
                    self.by_name_only.retain(|(_, child), _| *child != gk);
                    for stored in ck.objects.values() {
                        counted.extend(stored.by_name_only().map(|p| (p.clone(), true)));
                    }
                }
                watcher::Event::Apply(m) => {
                    touched.push(key_of(&m).1);
                    let stored = reduced.unwrap_or_default();
                    let meta = &stored.meta;
                    // A changed back reference is progress too: it decides whether the child
                    // is deleted at all.
                    let fp = format!(
                        "{}:{:?}:{:?}",
                        meta.deleting, meta.finalizers, stored.back_refs
                    );
                    let uid = meta.uid.clone();
                    if meta.deleting {
                        self.requested.remove(&uid);
                    }
                    counted.extend(stored.by_name_only().map(|p| (p.clone(), true)));
                    if let Some(old) = ck.objects.insert(key_of(&m), stored) {
                        counted.extend(old.by_name_only().map(|p| (p.clone(), false)));
                    }
                    self.note_progress(&uid, &fp, true);
                }
                watcher::Event::Delete(m) => {
                    touched.push(key_of(&m).1);
                    if let Some(old) = ck.objects.remove(&key_of(&m)) {
                        counted.extend(old.by_name_only().map(|p| (p.clone(), false)));
                    }
                    let uid = m.metadata.uid.clone().unwrap_or_default();
                    self.progress.remove(&uid);
                    self.requested.remove(&uid);
                    self.refusals.remove(&uid);
                    self.holders.remove(&uid);
                }
            }
        }
        for (parent, added) in counted {
            let n = self.by_name_only.entry((parent, gk.clone())).or_default();
            *n = if added { *n + 1 } else { n.saturating_sub(1) };
        }
        self.by_name_only.retain(|_, n| *n > 0);
        if relisted {
            self.mark_kind_referrers(&gk);
            return;
        }
        for name in touched {
            if let Some(parents) = self.by_child.get(&gk).and_then(|n| n.get(&name)) {
                self.dirty.extend(parents.iter().cloned());
            }
        }
    }

    /// A child reference resolved: the parent's namespace for a namespaced kind without one,
    /// no namespace for a cluster-scoped kind. `Err`: the kind is not served; `Ok(None)`: not
    /// known yet.
    fn resolve(&self, r: &ChildRef, parent_ns: &str) -> Result<Option<ChildKey>, CascadeError> {
        let gk = GroupKind::from_api_version(&r.api_version, &r.kind);
        let Some(ck) = self.children.get(&gk) else {
            return Ok(None);
        };
        if ck.kind.ar.is_none() {
            return match &ck.kind.error {
                Some(e) => Err(CascadeError::KindNotServed(e.clone())),
                None => Ok(None),
            };
        }
        let namespace = if ck.kind.namespaced {
            r.namespace.clone().unwrap_or_else(|| parent_ns.to_owned())
        } else {
            String::new()
        };
        Ok(Some(ChildKey {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            namespace,
            name: r.name.clone(),
        }))
    }

    /// A child as the decision for a parent of kind `parent` sees it: with what it names back
    /// under that parent kind's rule.
    fn observe(&self, parent: &GroupKind, key: &ChildKey) -> Observed {
        let gk = GroupKind::from_api_version(&key.api_version, &key.kind);
        match self.children.get(&gk) {
            Some(ck) if ck.kind.synced => {
                match ck.objects.get(&(key.namespace.clone(), key.name.clone())) {
                    Some(stored) => {
                        let mut meta = stored.meta.clone();
                        if let Some((_, refs)) = stored.back_refs.iter().find(|(g, _)| g == parent)
                        {
                            match refs {
                                Ok(refs) => meta.back_refs = refs.clone(),
                                Err(e) => meta.back_ref_error = Some(e.to_string()),
                            }
                        }
                        Observed::Present(meta)
                    }
                    None => Observed::Absent,
                }
            }
            Some(ck) if ck.kind.error.is_some() && ck.kind.ar.is_none() => Observed::Absent,
            _ => Observed::Unknown,
        }
    }

    /// The decision's input for a parent; `None` while something it needs is not known yet.
    fn parent_input(&self, id: &ParentId) -> Option<(Parent, bool)> {
        let (gk, ns, name) = id;
        let pk = self.parents.get(gk)?;
        if !pk.kind.synced {
            return None;
        }
        let (_, rule_deleting) = self.program_for(gk)?;
        let p = pk.objects.get(&(ns.clone(), name.clone()))?;
        let children = match &p.refs {
            Ok(refs) => {
                let mut keys = Vec::new();
                let mut failed = None;
                for r in refs {
                    match self.resolve(r, ns) {
                        Ok(Some(k)) => keys.push(k),
                        Ok(None) => return None,
                        Err(e) => failed = Some(e),
                    }
                }
                match failed {
                    Some(e) => Err(e),
                    None => Ok(keys),
                }
            }
            Err(e) => Err(e.clone()),
        };
        let rule = self.program_for(gk).map(|(r, _)| &r.rule)?;
        let allowed = rule
            .spec
            .child_kinds
            .iter()
            .map(|k| (k.of.group().to_owned(), k.of.kind.clone()))
            .collect();
        // Kinds the rule does not list are never discovered, so their scope is unknown: a
        // reference without a namespace is shown in the parent's.
        let outside = p
            .outside
            .iter()
            .map(|r| ChildKey {
                api_version: r.api_version.clone(),
                kind: r.kind.clone(),
                namespace: r.namespace.clone().unwrap_or_else(|| ns.clone()),
                name: r.name.clone(),
            })
            .collect();
        Some((
            Parent {
                identity: decide::ParentIdentity {
                    group: gk.group.clone(),
                    kind: gk.kind.clone(),
                    namespace: ns.clone(),
                    name: name.clone(),
                    uid: p.uid.clone(),
                    created: p.created,
                },
                outside,
                allowed,
                deleting: p.deleting_since.is_some(),
                finalizers: p.finalizers.clone(),
                record: p.record.clone(),
                children,
                policy: p.policy,
                policy_error: p.policy_error.clone(),
            },
            rule_deleting,
        ))
    }

    fn due_retries(&mut self) {
        let now = self.now;
        let keep = self.config.retry_max * 2;
        self.requested
            .retain(|_, at| now.duration_since(*at) <= keep);
        let later = self.retries.split_off(&(now + Duration::from_nanos(1)));
        let due = std::mem::replace(&mut self.retries, later);
        for ids in due.into_values() {
            self.dirty.extend(ids);
        }
        // Refused DELETEs whose backoff ended: decide their parents again.
        let due: Vec<String> = self
            .refusals
            .iter()
            .filter(|(_, r)| r.next <= now)
            .map(|(uid, _)| uid.clone())
            .collect();
        if !due.is_empty() {
            for (gk, pk) in &self.parents {
                for ((ns, name), p) in &pk.objects {
                    if p.record.children.iter().any(|c| due.contains(&c.uid)) {
                        self.dirty.insert((gk.clone(), ns.clone(), name.clone()));
                    }
                }
            }
        }
    }

    /// Decides every dirty parent and starts its writes.
    fn process(&mut self) {
        let dirty = std::mem::take(&mut self.dirty);
        for id in dirty {
            if self.gone.contains(&id) {
                continue;
            }
            if self.in_flight.contains(&id) {
                // Decided again once its writes finished and their events arrived.
                self.dirty.insert(id);
                continue;
            }
            let Some((input, rule_deleting)) = self.parent_input(&id) else {
                continue;
            };
            let decision = if rule_deleting {
                decide::orphaned(&input)
            } else {
                decide::decide(&input, |k| self.observe(&id.0, k))
            };
            self.execute(id, decision);
        }
    }

    fn warn(&mut self, id: &ParentId, reason: &str, message: String) {
        let Some(p) = self.parent(id) else { return };
        let reference = reference(&id.0, p, &id.1, &id.2);
        // An Event's note is at most 1 KB.
        let message = truncate(message, 1000);
        let said = self.warned.entry(p.uid.clone()).or_default();
        let hash = hash_of(&message);
        if said.contains(&hash) {
            return;
        }
        if said.len() == WARNINGS_REMEMBERED {
            said.pop_front();
        }
        said.push_back(hash);
        self.write(CascadeWrite::Event {
            reference,
            reason: reason.into(),
            note: message,
        });
    }

    fn parent(&self, id: &ParentId) -> Option<&ParentObj> {
        self.parents
            .get(&id.0)?
            .objects
            .get(&(id.1.clone(), id.2.clone()))
    }

    fn execute(&mut self, id: ParentId, decision: Decision) {
        // One Warning however many children are refused (a parent names up to 256): the
        // first says why, the rule's status lists them.
        match &decision.refused[..] {
            [] => {}
            [one] => self.warn(&id, "CascadeChildNotAllowed", one.to_string()),
            [first, rest @ ..] => self.warn(
                &id,
                "CascadeChildNotAllowed",
                format!(
                    "{} children are not deleted (the CascadeRule's status.refused lists the first {STATUS_BOUND}); the first: {first}",
                    rest.len() + 1
                ),
            ),
        }
        if decision.refused.is_empty() {
            if self.refused.remove(&id).is_some() {
                self.rules_dirty = true;
            }
        } else if self.refused.get(&id) != Some(&decision.refused) {
            self.refused.insert(id.clone(), decision.refused.clone());
            self.rules_dirty = true;
        }
        for w in &decision.warnings {
            let reason = if w.contains("does not exist") || w.contains("do not exist") {
                "CascadeDanglingReference"
            } else if w.contains("re-created") {
                "CascadeChildRecreated"
            } else if w.contains("propagationPolicyExpression") {
                "CascadeInvalidPolicy"
            } else {
                "CascadeInvalidChildren"
            };
            self.warn(&id, reason, w.clone());
        }
        let now = self.now;
        let deletes: Vec<decide::Delete> = decision
            .deletes
            .iter()
            .filter(|d| self.refusals.get(&d.uid).is_none_or(|r| r.next <= now))
            .filter(|d| {
                self.requested
                    .get(&d.uid)
                    .is_none_or(|at| now.duration_since(*at) > self.config.retry_max)
            })
            .cloned()
            .collect();
        for d in &deletes {
            self.requested.insert(d.uid.clone(), now);
        }
        let waiting = !decision.waiting.is_empty();
        if waiting && !self.reports.contains_key(&id) {
            let first = self.config.report_after;
            self.reports.insert(
                id.clone(),
                Report {
                    next: now + first,
                    interval: first,
                },
            );
        }
        let write = decision.finalizer.is_some() || decision.record.is_some();
        if !write && deletes.is_empty() {
            return;
        }
        let Some(p) = self.parent(&id).cloned() else {
            return;
        };
        let Some(ar) = self.parents.get(&id.0).and_then(|pk| pk.kind.ar.clone()) else {
            return;
        };
        let mut meta = None;
        if write {
            let mut finalizers = p.finalizers.clone();
            match decision.finalizer {
                Some(true) if !finalizers.iter().any(|f| f == CASCADE_FINALIZER) => {
                    finalizers.push(CASCADE_FINALIZER.to_owned());
                }
                Some(false) => finalizers.retain(|f| f != CASCADE_FINALIZER),
                _ => {}
            }
            let record = match &decision.record {
                Some(Some(r)) => Some(Some(r.to_annotation())),
                Some(None) if p.has_annotation => Some(None),
                _ => None,
            };
            tracing::debug!(
                kind = %id.0, namespace = %id.1, name = %id.2,
                finalizer = ?decision.finalizer,
                record = ?decision.record.as_ref().map(|r| r.as_ref().map(|r| (r.deleting, r.children.len()))),
                rv = ?p.resource_version,
                "cascade: parent write"
            );
            meta = Some(ParentMeta {
                // Optimistic concurrency: a concurrent change of the finalizers fails this
                // write with 409 and it is decided again, never undone.
                resource_version: p.resource_version.clone(),
                finalizers,
                record,
            });
        }
        let deletes = deletes
            .into_iter()
            .filter_map(|d| {
                let gk = GroupKind::from_api_version(&d.child.api_version, &d.child.kind);
                let ar = self.children.get(&gk)?.kind.ar.clone()?;
                Some((d, ar))
            })
            .collect();
        if decision.releases() {
            self.reports.remove(&id);
        }
        self.in_flight.insert(id.clone());
        self.write(CascadeWrite::Parent {
            id,
            ar,
            meta,
            deletes,
            releasing: decision.releases(),
        });
    }

    /// Reports, with backoff, on parents still waiting: one Warning event each, naming the
    /// children still present, for how long, and what holds them.
    fn report(&mut self) {
        let now = self.now;
        let due: Vec<ParentId> = self
            .reports
            .iter()
            .filter(|(_, r)| r.next <= now)
            .map(|(id, _)| id.clone())
            .collect();
        if due.is_empty() {
            return;
        }
        let mut jobs = Vec::new();
        let mut foreground_uids = Vec::new();
        for id in due {
            let Some(waiting) = self.waiting_of(&id) else {
                self.reports.remove(&id);
                continue;
            };
            if waiting.children_uids.is_empty() {
                self.reports.remove(&id);
                continue;
            }
            if let Some(r) = self.reports.get_mut(&id) {
                r.interval = (r.interval * 2).min(self.config.report_max);
                r.next = now + r.interval;
            }
            for (c, uid) in &waiting.children_uids {
                if c.held_by.contains(decide::FOREGROUND_FINALIZER) {
                    foreground_uids.push(uid.clone());
                }
            }
            let Some(p) = self.parent(&id) else { continue };
            jobs.push((reference(&id.0, p, &id.1, &id.2), waiting));
        }
        if now < self.next_scan {
            // The last scan's findings (in `held_by` already) serve this round.
            foreground_uids.clear();
        } else if !foreground_uids.is_empty() {
            self.next_scan = now + self.config.report_after.max(Duration::from_secs(1));
        }
        self.write(CascadeWrite::Report {
            jobs,
            foreground_uids,
        });
    }

    /// What a deleting parent waits for, as reported.
    fn waiting_of(&self, id: &ParentId) -> Option<WaitingReport> {
        let p = self.parent(id)?;
        p.deleting_since.as_ref()?;
        if !p.finalizers.iter().any(|f| f == CASCADE_FINALIZER) {
            return None;
        }
        let now = self.now;
        let mut children_uids = Vec::new();
        for c in &p.record.children {
            let meta = match self.observe(&id.0, &c.key) {
                Observed::Present(m) if m.uid == c.uid => Some(m),
                Observed::Unknown => None,
                _ => continue,
            };
            let holders = self.holders.get(&c.uid).cloned().unwrap_or_default();
            let refused = self.refusals.get(&c.uid).map(|r| r.message.as_str());
            let stuck = self
                .progress
                .get(&c.uid)
                .is_some_and(|p| now.duration_since(p.since) >= self.config.stuck_after);
            children_uids.push((
                WaitingChild {
                    api_version: c.key.api_version.clone(),
                    kind: c.key.kind.clone(),
                    namespace: c.key.namespace.clone(),
                    name: c.key.name.clone(),
                    held_by: decide::held_by(meta.as_ref(), refused, &holders),
                    stuck,
                },
                c.uid.clone(),
            ));
        }
        Some(WaitingReport {
            for_how_long: human(since(&p.deleting_since)),
            since: p.deleting_since.clone(),
            children_uids,
        })
    }

    /// Adds Lien's finalizer to rules, releases parents of rules being deleted, then lets those
    /// rules go.
    fn reconcile_rules(&mut self) {
        if !self.rules_dirty {
            return;
        }
        self.assign_rules();
        let names: Vec<String> = self.rules.keys().cloned().collect();
        for name in names {
            let Some(r) = self.rules.get(&name) else {
                continue;
            };
            let has = r.rule.finalizers().iter().any(|f| f == CASCADE_FINALIZER);
            let deleting = r.rule.metadata.deletion_timestamp.is_some();
            let gk = GroupKind::from_api_version(
                &r.rule.spec.parent.api_version,
                &r.rule.spec.parent.kind,
            );
            let finalizers = r.rule.finalizers().to_vec();
            let rv = r.rule.resource_version();
            let want = if !deleting {
                (!has).then(|| {
                    let mut f = finalizers.clone();
                    f.push(CASCADE_FINALIZER.to_owned());
                    f
                })
            } else if has && self.released_all(&gk, &name) {
                Some(
                    finalizers
                        .into_iter()
                        .filter(|f| f != CASCADE_FINALIZER)
                        .collect(),
                )
            } else {
                None
            };
            if let Some(finalizers) = want {
                self.write(CascadeWrite::RuleFinalizers {
                    name,
                    resource_version: rv,
                    finalizers,
                });
            }
        }
        self.rules_dirty = false;
    }

    /// Whether no parent of `gk` still carries Lien's finalizer or record on behalf of the
    /// deleting rule `name` (another rule for the kind keeps them).
    fn released_all(&self, gk: &GroupKind, name: &str) -> bool {
        let Some(pk) = self.parents.get(gk) else {
            return true;
        };
        if pk.rule.as_deref() != Some(name) {
            return true;
        }
        if pk.kind.ar.is_none() && pk.kind.error.is_some() {
            return true;
        }
        pk.kind.synced
            && pk
                .objects
                .values()
                .all(|p| !p.finalizers.iter().any(|f| f == CASCADE_FINALIZER) && !p.has_annotation)
    }

    /// Writes each rule's status when it changed, at most once per `STATUS_INTERVAL`.
    fn write_statuses(&mut self) {
        if !self.statuses_pending || self.now < self.last_status + STATUS_INTERVAL {
            return;
        }
        self.last_status = self.now;
        self.statuses_pending = false;
        let names: Vec<String> = self.rules.keys().cloned().collect();
        for name in names {
            let Some(status) = self.status_of(&name) else {
                continue;
            };
            let value = serde_json::to_value(&status).unwrap_or(Value::Null);
            let Some(r) = self.rules.get_mut(&name) else {
                continue;
            };
            if r.last_status.as_ref() == Some(&value) {
                continue;
            }
            r.last_status = Some(value.clone());
            let resource_version = r.rule.resource_version();
            self.write(CascadeWrite::RuleStatus {
                name,
                resource_version,
                status: value,
            });
        }
    }

    fn status_of(&self, name: &str) -> Option<CascadeRuleStatus> {
        let r = self.rules.get(name)?;
        let gk =
            GroupKind::from_api_version(&r.rule.spec.parent.api_version, &r.rule.spec.parent.kind);
        let pk = self.parents.get(&gk);
        let (ready, reason, message) = match (&r.program, pk) {
            (Err(e), _) => (false, "InvalidExpression", e.to_string()),
            (_, Some(pk)) if pk.rule.as_deref() != Some(name) => (
                false,
                "Conflict",
                format!(
                    "CascadeRule {} already handles {}; this rule is not applied",
                    pk.rule.clone().unwrap_or_default(),
                    gk
                ),
            ),
            (_, Some(pk)) if pk.kind.ar.is_none() && pk.kind.error.is_some() => (
                false,
                "UnknownKind",
                pk.kind.error.clone().unwrap_or_default(),
            ),
            _ if r.rule.spec.child_kinds.is_empty() => (
                false,
                "NoChildKinds",
                "spec.childKinds is empty: Lien deletes no child for this rule (parents are still held until released); list the kinds it may delete, each with the backReference by which a child names its parent".to_owned(),
            ),
            (_, Some(pk)) if pk.kind.synced => match bounds_problem(pk) {
                // Not ready: some parents' children are not kept, and are not deleted with them.
                Some(message) => (false, "BoundExceeded", message),
                None => (
                    true,
                    "Active",
                    format!("every {gk} carries {CASCADE_FINALIZER}"),
                ),
            },
            _ => (false, "Pending", "listing the parents".to_owned()),
        };
        let mut status = CascadeRuleStatus {
            observed_generation: r.rule.metadata.generation,
            ..CascadeRuleStatus::default()
        };
        let previous: Option<CascadeRuleStatus> = r
            .last_status
            .clone()
            .and_then(|v| serde_json::from_value(v).ok());
        let transition = previous
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
            .filter(|c| c.status == if ready { "True" } else { "False" } && c.reason == reason)
            .map(|c| c.last_transition_time.clone());
        status.conditions.push(Condition {
            type_: "Ready".into(),
            status: if ready { "True" } else { "False" }.into(),
            reason: reason.into(),
            message,
            observed_generation: r.rule.metadata.generation,
            last_transition_time: transition.unwrap_or_else(|| Time(jiff::Timestamp::now())),
        });
        if let Some(warning) = self.by_name_only_warning(&gk, &r.rule) {
            let transition = previous
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == BY_NAME_ONLY))
                .map(|c| c.last_transition_time.clone());
            status.conditions.push(Condition {
                type_: BY_NAME_ONLY.into(),
                status: "False".into(),
                reason: "NoUID".into(),
                message: warning,
                observed_generation: r.rule.metadata.generation,
                last_transition_time: transition.unwrap_or_else(|| Time(jiff::Timestamp::now())),
            });
        }
        if let Some(pk) = pk.filter(|pk| pk.rule.as_deref() == Some(name)) {
            let mut refused: Vec<lien_api::RefusedChild> = self
                .refused
                .iter()
                .filter(|(id, _)| id.0 == gk)
                .flat_map(|((_, ns, n), children)| {
                    children.iter().map(|r| lien_api::RefusedChild {
                        parent_namespace: ns.clone(),
                        parent_name: n.clone(),
                        child: r.child.to_string(),
                        reason: r.why.reason().to_owned(),
                    })
                })
                .collect();
            status.refused_children = refused.len() as u64;
            refused.sort_by(|a, b| {
                (&a.parent_namespace, &a.parent_name, &a.child).cmp(&(
                    &b.parent_namespace,
                    &b.parent_name,
                    &b.child,
                ))
            });
            refused.truncate(STATUS_BOUND);
            status.refused = refused;
            let mut waiting: Vec<(String, String)> = Vec::new();
            for ((ns, n), p) in &pk.objects {
                if p.finalizers.iter().any(|f| f == CASCADE_FINALIZER) {
                    status.parents += 1;
                    if p.deleting_since.is_some() {
                        status.waiting += 1;
                        waiting.push((ns.clone(), n.clone()));
                    }
                }
            }
            waiting.sort();
            for (ns, n) in waiting.into_iter().take(STATUS_BOUND) {
                let id = (gk.clone(), ns.clone(), n.clone());
                let Some(w) = self.waiting_of(&id) else {
                    continue;
                };
                status.waiting_parents.push(WaitingParent {
                    namespace: ns,
                    name: n,
                    since: w.since,
                    children: w
                        .children_uids
                        .into_iter()
                        .take(STATUS_BOUND)
                        .map(|(c, _)| c)
                        .collect(),
                });
            }
        }
        Some(status)
    }
}

/// A child's finalizers as Lien keeps them: the first [`CHILD_FINALIZERS_KEPT`], and
/// `foregroundDeletion` wherever it is.
fn kept_finalizers(all: &[String]) -> Vec<String> {
    let mut kept: Vec<String> = all.iter().take(CHILD_FINALIZERS_KEPT).cloned().collect();
    if all.len() > CHILD_FINALIZERS_KEPT
        && all[CHILD_FINALIZERS_KEPT..]
            .iter()
            .any(|f| f == decide::FOREGROUND_FINALIZER)
    {
        kept.push(decide::FOREGROUND_FINALIZER.to_owned());
    }
    kept
}

/// The condition a rule's status carries while children name its parents without a uid.
const BY_NAME_ONLY: &str = "BackReferenceUID";

impl CascadeState {
    /// The warning for a rule whose back references name parents by name only, naming each
    /// `childKinds[]` entry, how many children do, and what the rule's author can do.
    fn by_name_only_warning(&self, parent: &GroupKind, rule: &CascadeRule) -> Option<String> {
        let fields: Vec<String> = rule
            .spec
            .child_kinds
            .iter()
            .enumerate()
            .filter_map(|(i, k)| {
                let child = GroupKind::from_api_version(&k.of.api_version, &k.of.kind);
                let n = *self.by_name_only.get(&(parent.clone(), child))?;
                Some(format!(
                    "spec.childKinds[{i}].backReference ({}) yields no uid on {n} children",
                    k.of.kind
                ))
            })
            .collect();
        (!fields.is_empty()).then(|| {
            format!(
                "{}: a name outlives its object, so Lien deletes such a child only if it was created after its parent and seen bound to that parent's UID; a child older than its parent (left over from an earlier parent of the same name) is never deleted. Where the child's manager records the parent's uid, make the back reference yield it (uid) to bind by UID",
                fields.join("; ")
            )
        })
    }
}

/// Why some of a rule's parents keep no children (a bound of [`decide`]), naming how many, one
/// of them, the field, the bound and the fix; `None` when none.
fn bounds_problem(pk: &ParentKind) -> Option<String> {
    let mut first: Option<(&(String, String), &CascadeError)> = None;
    let mut n = 0usize;
    for (key, p) in &pk.objects {
        if let Err(e) = &p.refs
            && e.is_bound()
        {
            n += 1;
            if first.is_none_or(|(k, _)| key < k) {
                first = Some((key, e));
            }
        }
    }
    let ((ns, name), e) = first?;
    let parent = if ns.is_empty() {
        name.clone()
    } else {
        format!("{ns}/{name}")
    };
    Some(format!(
        "{n} parents keep no children, so none is deleted with them; the first, {parent}: {e}"
    ))
}

fn apply_kind(kind: &mut KindState, found: Result<Discovered, DiscoveryError>) {
    match found {
        Ok(Discovered { ar, namespaced }) => {
            kind.ar = Some(ar);
            kind.namespaced = namespaced;
            kind.error = None;
        }
        // Kept as the text the rule's status and the parents' warnings show.
        Err(e) => kind.error = Some(e.to_string()),
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WaitingReport {
    pub(super) for_how_long: String,
    pub(super) since: Option<Time>,
    pub(super) children_uids: Vec<(WaitingChild, String)>,
}

pub(super) fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
