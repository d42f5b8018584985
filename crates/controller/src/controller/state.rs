//! The [`State`] the event loop owns, and how each watch event changes it.
//!
//! Everything here is synchronous and free of I/O: [`handle`] applies one event to the state
//! and to the shared [`RelationIndex`] and returns the kinds to watch, so it can be driven
//! without a runtime (see the tests below).
//!
//! Relations come from *sources* of two shapes, handled side by side:
//! - usages (`Usage`, `ClusterUsage`): each keeps a [`Selection`] (`crate::selection`), resolved
//!   as a whole only when the usage changes what it selects (not its status, finalizers or
//!   owner references: Lien's own writes) or one of its kinds is first listed or stops being
//!   served. After that an object event changes only that object's relations, for each side it
//!   entered or left — the [`SideIndex`] finds those sides, and an event that changes nothing a
//!   selector reads (Lien's own label among others) finds none — so the work of an event is in
//!   the size of what it changed, never of the objects or of the other usages. A relist is
//!   compared with the cache it replaces, object by object. The index is brought from what it
//!   held to the selection's relations by their difference (`RelationIndex::apply_delta`);
//! - dependency rules: one join each, held by the index itself (`RelationIndex::add_join`) and
//!   fed per object with the keys its watch evaluated (`crate::rules`); once attached, a join
//!   changes the rule's relations in the index as it is fed, in the size of the object's
//!   relations.
//!
//! A relist of one kind of source replaces only that kind of source.
//!
//! # Locking
//!
//! The index is shared with the webhook behind one `RwLock`. Usages are resolved with no lock
//! held and the difference applied [`ATTACH_STEP`] relations per write-lock hold, additions
//! before removals (an object held before and after is never free in between): a new usage
//! selecting 100,000 objects holds the lock as often, and as briefly, as a rule's attach. A join
//! lives in the index, so each join operation takes the write lock for itself alone (one object
//! event: one lock for every rule the object feeds; a relist's end: one per object gone) —
//! never across work in the size of the caches, and never while taking another lock.
//! Work in the size of a rule (a generation attached, a rule deleted, a replaced join freed)
//! is done in steps of ~0.1-0.5 ms, the lock released between them.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher;
use lien_api::{ClusterUsage, DependencyRule, USAGE_FINALIZER, Usage};
use lien_core::{AttachStep, JoinChange, JoinError, ObjectKey, Relation, RelationIndex, Source};

use parking_lot::RwLock;

/// Relations linked (or, of the previous generation, removed) per write-lock hold while a
/// rule's join is attached or released: at 100,000 relations 64 hold the lock ~18 µs at p99
/// and 0.06 ms at most, where 1,024 held it 0.3-0.4 ms and a webhook decision arriving during
/// a step waited for it; smaller steps cost more in all (16: 2.3× the attach's total time)
/// (docs/benchmarks.md, "Issue 20, third pass").
const ATTACH_STEP: usize = 64;

use super::Msg;
use crate::cache::{CachedObject, Caches, GroupKind, NsName};
use crate::desired::is_labelled;
use crate::metrics::Metrics;
use crate::replay;
use crate::resolve::{Problem, UsageView};
use crate::rules::{Eval, KindReader, Read, RuleState, RuleView, SideEval};
use crate::selection::{Selection, Shape, SideIndex, diff};

/// An object as a kind watch delivers it: its metadata and, for a kind rules read, what each
/// rule's program made of it (the object itself was dropped by the watch).
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// The metadata.
    pub meta: ObjectMeta,
    /// Per program, the evaluated keys and `when`.
    pub evals: Vec<Eval>,
}

/// How a kind is to be watched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WantedKind {
    /// The `apiVersion` to discover it at.
    pub api_version: String,
    /// The ids of the rule programs reading it, sorted; empty: metadata only.
    pub programs: Vec<u64>,
    /// Whether the cache needs every label (a usage's selector may read them); otherwise only
    /// Lien's own labels are kept — 100,000 objects' labels are the largest part of a cache.
    pub labels: bool,
    /// Whether only objects carrying Lien's labels or annotations are cached: the kind is read
    /// only as a rule's `by` side (see `crate::cache::KindCache::marked_only`).
    pub marked_only: bool,
}

/// What the state keeps of one usage: what it selects, and what the index holds for it.
#[derive(Debug)]
struct Tracked {
    /// What it selects now.
    selection: Selection,
    /// The shape of its relations, from the view it was resolved from.
    shape: Shape,
    held: Held,
}

/// What the index holds for a usage.
#[derive(Debug)]
enum Held {
    /// The relations of its selection (complete); its sides are in the [`SideIndex`], so each
    /// object event keeps both current.
    Current,
    /// The relations of an earlier complete selection: the current one is not complete (a kind
    /// is being listed), and a watch still listing must not lift protection.
    Earlier(Box<(Shape, Selection)>),
    /// Nothing.
    Nothing,
}

/// The usages' selections and what the index holds for each (see the module documentation).
#[derive(Debug, Default)]
pub struct Selections {
    tracked: BTreeMap<Source, Tracked>,
    /// The sides of every tracked usage that can match (their kind is listed and their scope
    /// valid), so that each object event keeps its selection current.
    sides: SideIndex,
    /// Usages whose relations the index dropped (it was full): resolved again at the end of
    /// every event until they are in.
    unapplied: BTreeSet<Source>,
    /// Objects and sides looked at to keep the selections current, since start: a whole
    /// resolution counts each object of the scope it scans, an object event each side it
    /// checks. Per object event it stays in the size of what the event changed (the tests hold
    /// it to that).
    pub(super) work: u64,
}

impl Selections {
    /// What `source` selects now.
    pub fn get(&self, source: &Source) -> Option<&Selection> {
        self.tracked.get(source).map(|t| &t.selection)
    }

    fn register(&mut self, source: &Source, sel: &Selection) {
        for side in sel.sides() {
            if let Some(m) = &side.matcher {
                self.sides.insert((source.clone(), side.is_by), m);
            }
        }
    }

    fn unregister(&mut self, source: &Source, sel: &Selection) {
        for side in sel.sides() {
            if let Some(m) = &side.matcher {
                self.sides.remove(&(source.clone(), side.is_by), m);
            }
        }
    }

    /// One object of `gk` went from `old` to `new` (`None`: absent): each side it entered or
    /// left gains or loses that object's relations, and nothing else is looked at.
    fn observe(
        &mut self,
        gk: &GroupKind,
        key: &NsName,
        old: Option<&CachedObject>,
        new: Option<&CachedObject>,
        shared: &mut Shared<'_>,
    ) {
        let affected = self.sides.affected(gk, key, old, new);
        self.work += affected.len() as u64;
        let mut failed = Vec::new();
        for (source, is_by) in affected {
            let Some(t) = self.tracked.get_mut(&source) else {
                continue;
            };
            let Some(change) = t
                .selection
                .side_mut(is_by)
                .and_then(|side| side.observe(key, new))
            else {
                continue;
            };
            if !matches!(t.held, Held::Current) {
                // The index keeps an earlier selection's relations until this one is complete
                // (and resolved as a whole then); status reads the selection meanwhile.
                continue;
            }
            let t = &*t;
            let relations = |uid: &Option<String>| match uid {
                Some(uid) => t.shape.with_object(&t.selection, is_by, key, uid),
                None => Box::new(std::iter::empty()),
            };
            if apply_stepped(
                shared,
                &source,
                relations(&change.now),
                relations(&change.was),
            )
            .is_err()
            {
                failed.push(source);
            }
        }
        for source in failed {
            // The index dropped the source: nothing of it is held; resolved again later.
            if let Some(t) = self.tracked.get_mut(&source) {
                t.held = Held::Nothing;
            }
            self.unapplied.insert(source);
        }
    }
}

/// The shared index as one event changes it (see the module docs on locking).
struct Shared<'a> {
    index: &'a RwLock<RelationIndex>,
    metrics: &'a Metrics,
    /// The index changed: the cycles are stale, and the relations gauge is set once at the end.
    changed: bool,
}

/// Everything the event loop maintains.
#[derive(Debug, Default)]
pub struct State {
    /// Object metadata per referenced kind.
    pub caches: Caches,
    /// Every usage, by source.
    pub usages: BTreeMap<Source, UsageView>,
    /// What each usage selects, kept current per object event, and what the index holds.
    pub selections: Selections,
    /// Every dependency rule, by name.
    pub rules: BTreeMap<String, RuleState>,
    /// The sources that take part in a cycle, as of the last search.
    pub cycles: BTreeMap<Source, Problem>,
    /// Whether the index changed since `cycles` was computed.
    pub(super) cycles_stale: bool,
    /// When `cycles` was last computed: the search walks the whole graph (100,000 relations of
    /// one rule), so it runs at most once per `write::CYCLE_SEARCH_INTERVAL`.
    pub(super) cycles_searched: Option<std::time::Instant>,
    /// When each rule's status was last planned, to space out count-only rewrites
    /// (`rules::STATUS_COUNTS_INTERVAL`).
    pub(super) rule_status_planned: HashMap<String, std::time::Instant>,
    /// The kinds to watch as last computed, and those of them kept only for the objects still
    /// carrying Lien's marks: only a source's or a kind's change, or an object event of such a
    /// kind, can change the answer, so an object event of a kind a source reads reuses it.
    wanted: Option<(BTreeMap<GroupKind, WantedKind>, HashSet<GroupKind>)>,
    usages_listed: bool,
    cluster_usages_listed: bool,
    rules_listed: bool,
    usage_buffer: Vec<Usage>,
    cluster_usage_buffer: Vec<ClusterUsage>,
    rule_buffer: Vec<DependencyRule>,
    /// A kind's list in progress.
    object_buffers: HashMap<GroupKind, ListBuffer>,
    /// The cycles broken inside namespaces being deleted, as last set in the index
    /// (`super::terminating`).
    pub(super) broken: BTreeMap<String, Vec<Vec<ObjectKey>>>,
    /// Whether the index or a Namespace changed since `broken` was computed.
    pub(super) broken_stale: bool,
    /// What holds each namespace being deleted, as last announced (`super::terminating`).
    pub(super) held: BTreeMap<String, super::terminating::HeldNamespace>,
}

/// A kind's list in progress.
#[derive(Debug, Default)]
struct ListBuffer {
    /// The objects the cache will keep, already reduced (100,000 buffered `ObjectMeta`s would
    /// cost several times more).
    objects: BTreeMap<NsName, CachedObject>,
    /// The objects the rules' joins held when the list began that it has not listed yet: those
    /// left at its end are gone. Empty on a first list; a relist copies the names once, where
    /// a set of every listed name would be built on every list.
    unlisted: HashSet<NsName>,
}

impl State {
    /// Whether every source list completed and every kind a source reads is listed or known
    /// not to exist: only then does the absence of a relation mean "not in use".
    pub fn settled(&self) -> bool {
        self.usages_listed
            && self.cluster_usages_listed
            && self.rules_listed
            && self
                .usages
                .values()
                .flat_map(|u| u.kinds())
                .all(|(gk, _)| self.caches.is_settled(&gk))
            && self
                .rules
                .values()
                .all(|r| r.program.is_err() || r.in_index)
    }

    /// The kinds some source protects: every Usage's `spec.of` kind and every rule's `of` kind
    /// (only objects of these can be in use).
    pub fn of_kinds(&self) -> std::collections::HashSet<GroupKind> {
        let usages = self
            .usages
            .values()
            .filter_map(|u| u.kinds().next().map(|(gk, _)| gk));
        let rules = self.rules.values().map(|r| r.view.of());
        usages.chain(rules).collect()
    }

    /// The UID of a source, for the Events that name it.
    pub fn source_uid(&self, source: &Source) -> Option<&str> {
        match source {
            Source::Rule { name } => self.rules.get(name).map(|r| r.view.uid.as_str()),
            _ => self.usages.get(source).map(|u| u.uid.as_str()),
        }
    }

    /// Kinds to watch: every kind a source refers to (with full objects where rules read it),
    /// plus kinds whose objects still carry the label (so that it can be removed before the
    /// watch stops).
    pub(super) fn wanted_kinds(&self) -> BTreeMap<GroupKind, WantedKind> {
        let mut out: BTreeMap<GroupKind, WantedKind> = BTreeMap::new();
        for u in self.usages.values() {
            for (gk, api_version) in u.kinds() {
                let w = out.entry(gk).or_insert_with(|| WantedKind {
                    api_version: api_version.to_owned(),
                    programs: Vec::new(),
                    labels: true,
                    marked_only: false,
                });
                // A rule's `by` side came first: a usage reads every object of the kind.
                w.labels = true;
                w.marked_only = false;
            }
        }
        for r in self.rules.values() {
            let Some(id) = r.program_id() else { continue };
            let spec = &r.view.spec;
            for (of, gk, api_version) in [
                (true, r.view.of(), &spec.of.api_version),
                (false, r.view.by(), &spec.by.api_version),
            ] {
                let w = out.entry(gk).or_insert_with(|| WantedKind {
                    api_version: api_version.clone(),
                    programs: Vec::new(),
                    labels: false,
                    marked_only: true,
                });
                // Objects of a kind some source protects are all needed (labels, replay).
                w.marked_only &= !of;
                if !w.programs.contains(&id) {
                    w.programs.push(id);
                }
            }
        }
        // Namespaces, always (metadata-only, and there are few): a refused Namespace DELETE
        // (its contents used from outside) is recorded on the Namespace and replayed like any
        // other, which needs the Namespace in the caches when the denial arrives.
        out.entry(GroupKind::new("", "Namespace"))
            .or_insert_with(|| WantedKind {
                api_version: "v1".to_owned(),
                programs: Vec::new(),
                labels: false,
                marked_only: false,
            });
        for w in out.values_mut() {
            w.programs.sort_unstable();
        }
        // A kind stays watched while an object of it carries the label or a recorded DELETE:
        // both must be cleared (the label removed, the record replayed or forgotten) after the
        // last source referring to the kind is gone.
        for (gk, kind) in self.caches.kinds() {
            let pending = |o: &crate::cache::CachedObject| {
                is_labelled(o)
                    || o.annotations
                        .contains_key(replay::DELETION_ATTEMPT_ANNOTATION)
            };
            if !out.contains_key(gk) && kind.objects.values().any(pending) {
                out.insert(
                    gk.clone(),
                    WantedKind {
                        api_version: kind.api_version.clone(),
                        programs: Vec::new(),
                        labels: true,
                        marked_only: false,
                    },
                );
            }
        }
        out
    }

    /// What a watch of `gk` evaluates: the programs of every rule reading it.
    pub(super) fn reader(&self, gk: &GroupKind) -> KindReader {
        let reads = self
            .rules
            .values()
            .filter_map(|r| {
                let program = r.program.as_ref().ok()?;
                let (of, by) = (&r.view.of() == gk, &r.view.by() == gk);
                (of || by).then(|| Read {
                    program: program.clone(),
                    of,
                    by,
                })
            })
            .collect();
        KindReader { reads }
    }

    /// The kinds to watch ([`State::wanted_kinds`]), computed again only when what it reads
    /// may have changed (see `State::wanted`).
    fn wanted(&mut self) -> BTreeMap<GroupKind, WantedKind> {
        if let Some((wanted, _)) = &self.wanted {
            return wanted.clone();
        }
        let wanted = self.wanted_kinds();
        let marks: HashSet<GroupKind> = wanted
            .keys()
            .filter(|gk| !self.referred(gk))
            .cloned()
            .collect();
        self.wanted = Some((wanted.clone(), marks));
        wanted
    }

    /// Whether some source reads `gk` (or it is the always watched Namespace kind).
    fn referred(&self, gk: &GroupKind) -> bool {
        (gk.group.is_empty() && gk.kind == "Namespace")
            || self
                .usages
                .values()
                .any(|u| u.kinds().any(|(k, _)| &k == gk))
            || self
                .rules
                .values()
                .any(|r| r.program_id().is_some() && (&r.view.of() == gk || &r.view.by() == gk))
    }

    /// Resolves `source` as a whole — it changed what it selects, or one of its kinds was first
    /// listed or stopped being served — and brings the index from what it held for the source
    /// to the new selection's relations, in the size of their difference. An incomplete
    /// selection leaves the index as it was.
    fn resolve_usage(&mut self, source: &Source, shared: &mut Shared<'_>) {
        let old = self.selections.tracked.remove(source);
        if let Some(t) = &old {
            self.selections.unregister(source, &t.selection);
        }
        self.selections.unapplied.remove(source);
        let Some(view) = self.usages.get(source) else {
            if old.is_some_and(|t| !matches!(t.held, Held::Nothing)) {
                // O(1) under the lock (its relations stop counting at once), then freed in
                // steps: one `delete` of 100,000 relations held the lock 11-22 ms.
                shared.index.write().delete_in_steps(source);
                release_in_steps(shared.index);
                shared.changed = true;
            }
            return;
        };
        let selection = Selection::resolve(view, &self.caches);
        self.selections.work += selection.scanned as u64;
        let shape = Shape::of(view);
        let before = old.and_then(|t| match t.held {
            Held::Current => Some((t.shape, t.selection)),
            Held::Earlier(earlier) => Some(*earlier),
            Held::Nothing => None,
        });
        let held = if selection.complete() {
            let (added, removed) = diff(
                before.as_ref().map(|(s, sel)| (s, sel)),
                (&shape, &selection),
            );
            if apply_stepped(shared, source, added, removed).is_ok() {
                Held::Current
            } else {
                self.selections.unapplied.insert(source.clone());
                Held::Nothing
            }
        } else {
            match before {
                Some(earlier) => Held::Earlier(Box::new(earlier)),
                None => Held::Nothing,
            }
        };
        self.selections.register(source, &selection);
        self.selections.tracked.insert(
            source.clone(),
            Tracked {
                selection,
                shape,
                held,
            },
        );
    }

    /// One object of `gk` changed: `old` is what the cache held before; the cache holds what
    /// it is now.
    fn observe_object(
        &mut self,
        gk: &GroupKind,
        key: &NsName,
        old: Option<CachedObject>,
        shared: &mut Shared<'_>,
    ) {
        let new = self.caches.object(gk, key);
        self.selections.observe(gk, key, old.as_ref(), new, shared);
    }

    /// A relist of `gk` replaced `old`: each object it added, removed or changed is observed
    /// as its own event would be. O(objects) to compare, and then in the size of what changed.
    fn observe_relist(
        &mut self,
        gk: &GroupKind,
        old: &BTreeMap<NsName, CachedObject>,
        shared: &mut Shared<'_>,
    ) {
        if !self.selections.sides.reads(gk) {
            return;
        }
        let Some(kind) = self.caches.kind(gk) else {
            return;
        };
        // Both maps are ordered: one merge walk.
        let mut before = old.iter().peekable();
        for (key, is) in &kind.objects {
            // What the relist no longer has, ordered before this one: gone.
            while let Some((gone, was)) = before.next_if(|(k, _)| *k < key) {
                self.selections.observe(gk, gone, Some(was), None, shared);
            }
            match before.next_if(|(k, _)| *k == key) {
                Some((_, was)) if was == is => {}
                was => self
                    .selections
                    .observe(gk, key, was.map(|(_, w)| w), Some(is), shared),
            }
        }
        for (gone, was) in before {
            self.selections.observe(gk, gone, Some(was), None, shared);
        }
    }

    /// Usages whose relations the index dropped (full) are resolved and applied again.
    fn retry_unapplied(&mut self, shared: &mut Shared<'_>) {
        let unapplied: Vec<Source> = self.selections.unapplied.iter().cloned().collect();
        for source in unapplied {
            self.resolve_usage(&source, shared);
        }
    }

    /// Marks in the index which of `sources` are Usages being deleted that Lien's finalizer
    /// keeps, with the finalizer's position (`RelationIndex::set_kept`): a refusal then names
    /// that finalizer's removal instead of deleting the Usage again, which would lift nothing
    /// (issue 27). After the sources' relations were applied, since a source record created
    /// afresh starts unmarked. The write lock only when a mark changes.
    fn mark_kept(&self, sources: &[Source], index: &RwLock<RelationIndex>) {
        let wanted = |source: &Source| {
            let view = self.usages.get(source).filter(|v| v.deleting)?;
            view.finalizers.iter().position(|f| f == USAGE_FINALIZER)
        };
        let stale: Vec<(&Source, Option<usize>)> = {
            let index = index.read();
            sources
                .iter()
                .map(|s| (s, wanted(s)))
                .filter(|(s, at)| index.kept(s).map(usize::from) != *at)
                .collect()
        };
        if stale.is_empty() {
            return;
        }
        let mut index = index.write();
        for (source, at) in stale {
            index.set_kept(source, at);
        }
    }

    fn sources_referring_to(&self, gk: &GroupKind) -> Vec<Source> {
        self.usages
            .iter()
            .filter(|(_, u)| u.kinds().any(|(k, _)| &k == gk))
            .map(|(s, _)| s.clone())
            .collect()
    }

    /// A relist of one kind of usage: the views replace those of that kind. Returns the usages
    /// to resolve: those gone, new, or changed in what they select.
    fn replace_usages(&mut self, cluster: bool, views: Vec<UsageView>) -> Vec<Source> {
        let of_kind: Vec<Source> = self
            .usages
            .keys()
            .filter(|s| matches!(s, Source::ClusterUsage { .. }) == cluster)
            .cloned()
            .collect();
        let mut old: BTreeMap<Source, UsageView> = BTreeMap::new();
        for s in of_kind {
            if let Some(v) = self.usages.remove(&s) {
                old.insert(s, v);
            }
        }
        let mut touched = Vec::new();
        for v in views {
            let s = v.source();
            let previous = old.remove(&s);
            let v = v.remembering(previous.as_ref());
            if previous.is_none_or(|p| !p.resolves_as(&v)) || self.selections.get(&s).is_none() {
                touched.push(s.clone());
            }
            self.usages.insert(s, v);
        }
        touched.extend(old.into_keys());
        touched
    }

    /// A rule was created or changed. A new generation (or incarnation) starts a new, detached
    /// join; the previous relations stay in the index, as the rule's, until it is attached
    /// ([`RuleState::in_index`]).
    fn apply_rule(&mut self, view: RuleView, shared: &mut Shared<'_>) {
        if let Some(r) = self.rules.get_mut(&view.name)
            && r.view.uid == view.uid
            && r.view.spec == view.spec
        {
            r.view = view;
            return;
        }
        let mut r = RuleState::new(view);
        let previous = self.rules.get(&r.view.name).and_then(|p| p.join);
        let config = r.join_config();
        let added = {
            let mut index = shared.index.write();
            // The next generation is fed about the objects the previous one holds: room for
            // them up front, so that no table doubles (rehashing them all) under one hold.
            let counts = previous.and_then(|p| index.join(p).map(|j| j.object_counts()));
            if let Some(previous) = previous {
                // What it pins goes, in steps (below); the relations it put in the index
                // stay the rule's.
                index.remove_join_in_steps(previous);
            }
            match config {
                Some(config) => {
                    let added = index.add_join(config);
                    if let (Ok(id), Some((of, by))) = (&added, counts)
                        && let Some(mut join) = index.join_mut(*id)
                    {
                        join.reserve(of, by);
                    }
                    Some(added)
                }
                None => {
                    // A rule that does not compile holds nothing (the webhook refuses it
                    // normally; one stored before that check, or under an older Lien, is
                    // reported Ready=False).
                    index.delete_in_steps(&r.view.source());
                    None
                }
            }
        };
        release_in_steps(shared.index);
        match added {
            Some(Ok(id)) => r.join = Some(id),
            Some(Err(e)) => {
                // Without a join the rule stays Pending, and the controller unsettled.
                shared.metrics.index_error();
                tracing::error!(rule = %r.view.name, error = %e, "adding a rule's join");
            }
            None => shared.changed = true,
        }
        self.rules.insert(r.view.name.clone(), r);
    }

    fn delete_rule(&mut self, name: &str, shared: &mut Shared<'_>) {
        if let Some(r) = self.rules.remove(name) {
            {
                // O(1) under the lock: the rule's relations stop counting at once; they and
                // its join's objects are freed in steps (one `delete` of 100,000 relations
                // held the lock 11-22 ms).
                let mut index = shared.index.write();
                if let Some(id) = r.join {
                    index.remove_join_in_steps(id);
                }
                index.delete_in_steps(&Source::rule(name));
            }
            release_in_steps(shared.index);
            shared.changed = true;
        }
    }

    /// An object of `gk` was added or changed: feed each rule reading the kind with what its
    /// current program made of it. The write lock is taken once, for every rule it feeds.
    ///
    /// One hold per object, not a batch of objects per hold: a webhook decision arriving
    /// during a hold waits for the rest of it, and with generations fed back to back batches
    /// of 512 objects (~0.4 ms) put the decisions' p99 at 58-82× idle, where one object per
    /// hold gave 1.0-1.6× in half the runs (docs/benchmarks.md, "Issue 20, continued").
    fn rules_upsert(&mut self, gk: &GroupKind, o: &Observed, shared: &mut Shared<'_>) {
        let Some(name) = o.meta.name.as_deref() else {
            return;
        };
        let key = gk.key(o.meta.namespace.as_deref(), name);
        let uid = o.meta.uid.as_deref();
        let lock = shared.index;
        let mut index = None;
        let mut failures: Vec<(String, JoinError)> = Vec::new();
        for r in self.rules.values_mut() {
            let Some(id) = r.program_id() else { continue };
            // Made by another (older) program: this rule waits for its relist.
            let Some(eval) = o.evals.iter().find(|e| e.program == id) else {
                continue;
            };
            for (side, e) in [(true, &eval.of), (false, &eval.by)] {
                let Some(e) = e else { continue };
                r.note_evaluation(side, e, &key.to_string());
                let Some(join) = r.join else { continue };
                let index = index.get_or_insert_with(|| lock.write());
                let Some(mut join) = index.join_mut(join) else {
                    continue;
                };
                let result = match (e, side) {
                    (SideEval::Ok { keys, .. }, true) => {
                        join.upsert_of(&key, uid, Some(keys.clone()))
                    }
                    (SideEval::Ok { keys, when }, false) => {
                        join.upsert_by(&key, uid, Some(keys.clone()), *when)
                    }
                    (SideEval::Failed { .. }, true) => join.error_of(&key, uid),
                    (SideEval::Failed { .. }, false) => join.error_by(&key, uid),
                };
                match result {
                    Ok(change) => shared.changed |= r.in_index && !change.is_empty(),
                    Err(e) => {
                        if let JoinError::Detached(_) = e {
                            // The index dropped the rule's relations (it is full): the whole
                            // join is attached again once there is room.
                            r.in_index = false;
                            shared.changed = true;
                        }
                        failures.push((r.view.name.clone(), e));
                    }
                }
            }
        }
        drop(index);
        for (rule, e) in failures {
            report_join_failure(&rule, &key, &e, shared.metrics);
        }
    }

    /// An object of `gk` is gone. The write lock is taken once, if a rule reads the kind.
    fn rules_remove(&mut self, key: &ObjectKey, shared: &mut Shared<'_>) {
        let gk = GroupKind::new(&key.group, &key.kind);
        let object = key.to_string();
        let lock = shared.index;
        let mut index = None;
        for r in self.rules.values_mut() {
            let (of, by) = (r.view.of() == gk, r.view.by() == gk);
            if let Some(id) = r.join
                && (of || by)
            {
                let index = index.get_or_insert_with(|| lock.write());
                if let Some(mut join) = index.join_mut(id) {
                    let mut change = JoinChange::default();
                    if of {
                        change.removed += join.remove_of(key).removed;
                    }
                    if by {
                        change.removed += join.remove_by(key).removed;
                    }
                    shared.changed |= r.in_index && !change.is_empty();
                }
            }
            r.clear_errors(&object);
        }
    }

    /// A list of `gk` completed: objects the joins hold that it no longer has are gone, and
    /// the rules whose current program made the list have that side listed.
    fn rules_listed_kind(
        &mut self,
        gk: &GroupKind,
        reader: Option<&KindReader>,
        unlisted: HashSet<NsName>,
        shared: &mut Shared<'_>,
    ) {
        let mut gone: Vec<ObjectKey> = unlisted
            .into_iter()
            .map(|(ns, name)| gk.key(ns.as_deref(), &name))
            .collect();
        for r in self.rules.values_mut() {
            let (of, by) = (&r.view.of() == gk, &r.view.by() == gk);
            if let (Some(id), Some(reader)) = (r.program_id(), reader)
                && reader.reads(id)
            {
                r.of_listed |= of;
                r.by_listed |= by;
            }
        }
        gone.sort();
        gone.dedup();
        // One object at a time: the lock is never held across the whole relist.
        for key in gone {
            self.rules_remove(&key, shared);
        }
    }

    /// The objects of `gk` some rule's join holds, on either side (a list starting: those it
    /// does not list are gone at its end). Read under the read lock.
    fn joined_names(&self, gk: &GroupKind, index: &RwLock<RelationIndex>) -> HashSet<NsName> {
        let mut names = HashSet::new();
        let owned = |(ns, n): (Option<&str>, &str)| (ns.map(str::to_owned), n.to_owned());
        let index = index.read();
        for r in self.rules.values() {
            let Some(join) = r.join.and_then(|id| index.join(id)) else {
                continue;
            };
            if &r.view.of() == gk {
                names.extend(join.of_names().map(owned));
            }
            if &r.view.by() == gk {
                names.extend(join.by_names().map(owned));
            }
        }
        names
    }

    /// Discovery does not serve `gk` (any more): its objects are gone from every join.
    fn rules_kind_unknown(&mut self, gk: &GroupKind, shared: &mut Shared<'_>) {
        let mut gone: Vec<ObjectKey> = Vec::new();
        {
            let index = shared.index.read();
            for r in self.rules.values() {
                let Some(join) = r.join.and_then(|id| index.join(id)) else {
                    continue;
                };
                if &r.view.of() == gk {
                    gone.extend(join.of_names().map(|(ns, n)| gk.key(ns, n)));
                }
                if &r.view.by() == gk {
                    gone.extend(join.by_names().map(|(ns, n)| gk.key(ns, n)));
                }
            }
        }
        gone.sort();
        gone.dedup();
        for key in gone {
            self.rules_remove(&key, shared);
        }
    }

    /// Rules whose sides are now both listed (or their kinds unknown) attach their join: its
    /// relations replace what their previous generation held, and from then on it changes
    /// the index itself.
    fn rules_complete(&mut self, shared: &mut Shared<'_>) {
        for r in self.rules.values_mut() {
            // No join: the program does not compile, or the index had no room for one.
            let Some(id) = r.join else { continue };
            if r.in_index {
                continue;
            }
            let of_ready = r.of_listed || self.caches.is_unknown(&r.view.of());
            let by_ready = r.by_listed || self.caches.is_unknown(&r.view.by());
            if !(of_ready && by_ready) {
                continue;
            }
            // O(the rule's relations) in all, once per generation, but in steps of
            // ATTACH_STEP with the lock released between them: one `attach` of 100,000
            // relations held it 10-25 ms, stalling every webhook decision meanwhile.
            let attached = loop {
                let step = write_step(shared.index, |index| {
                    index.join_mut(id).map(|mut j| j.attach_step(ATTACH_STEP))
                });
                match step {
                    Some(Ok(AttachStep::More)) => {}
                    Some(Ok(AttachStep::Done(n))) => break Some(Ok(n)),
                    Some(Err(e)) => break Some(Err(e)),
                    None => break None,
                }
            };
            shared.changed = true;
            match attached {
                Some(Ok(_)) => r.in_index = true,
                Some(Err(e)) => {
                    // The index dropped the source (it is full): attached again once there
                    // is room, as a usage is re-applied.
                    shared.metrics.index_error();
                    let source = r.view.source();
                    tracing::error!(%source, error = %e, "applying a rule's relations");
                }
                None => {}
            }
        }
    }
}

/// Logs a join's refusal of an object (and counts it, unless the object was of the wrong kind).
fn report_join_failure(rule: &str, key: &ObjectKey, e: &JoinError, metrics: &Metrics) {
    if matches!(e, JoinError::WrongKind { .. }) {
        tracing::error!(%rule, object = %key, error = %e, "deriving relations");
    } else {
        metrics.index_error();
        tracing::error!(%rule, object = %key, error = %e, "applying a rule's relations");
    }
}

/// Adds `added` to `source`'s relations in the index, then removes `removed`, [`ATTACH_STEP`]
/// relations per write-lock hold: a usage's 100,000 relations never keep the webhook's reads
/// waiting for more than one step. Additions go first, so that an object held before and after
/// is never free in between. `Err` when the index is full: it then dropped the source, which
/// holds nothing.
fn apply_stepped<'a>(
    shared: &mut Shared<'_>,
    source: &Source,
    added: Box<dyn Iterator<Item = Relation> + 'a>,
    removed: Box<dyn Iterator<Item = Relation> + 'a>,
) -> Result<(), ()> {
    for (adding, mut relations) in [(true, added), (false, removed)] {
        loop {
            let step: Vec<Relation> = relations.by_ref().take(ATTACH_STEP).collect();
            if step.is_empty() {
                break;
            }
            shared.changed = true;
            let applied = write_step(shared.index, |index| {
                if adding {
                    index.apply_delta(source, step, std::iter::empty())
                } else {
                    index.apply_delta(source, std::iter::empty(), step)
                }
            });
            if let Err(e) = applied {
                shared.metrics.index_error();
                tracing::error!(%source, error = %e, "applying relations");
                return Err(());
            }
        }
    }
    Ok(())
}

/// Frees what a rule's deletion or a replaced join left (`RelationIndex::release_step`),
/// ATTACH_STEP at a time with the write lock released between steps.
fn release_in_steps(index: &RwLock<RelationIndex>) {
    while !write_step(index, |index| index.release_step(ATTACH_STEP)) {}
}

/// One step of work done in steps (an attach, a release) under the write lock. A removed join
/// the step finished releasing is freed after the lock is released
/// (`RelationIndex::take_garbage`): its large blocks go back to the allocator, which unmaps
/// their pages, while webhook decisions read the index. The lock ends with a plain unlock: a
/// fair hand-over to a parked decision (`unlock_fair`) made steps and decisions take turns
/// through the scheduler: under back-to-back steps the decisions' median went from ~6 to ~60 µs
/// (docs/benchmarks.md, "Issue 20, third pass").
fn write_step<T>(index: &RwLock<RelationIndex>, step: impl FnOnce(&mut RelationIndex) -> T) -> T {
    let mut guard = index.write();
    let out = step(&mut guard);
    let garbage = guard.take_garbage();
    drop(guard);
    drop(garbage);
    out
}

/// Applies one event to the state and the index; returns the kinds to watch.
pub(super) fn handle(
    st: &mut State,
    index: &RwLock<RelationIndex>,
    metrics: &Metrics,
    msg: Msg,
) -> BTreeMap<GroupKind, WantedKind> {
    metrics.event();
    // A Namespace being deleted (or gone) changes which cycles hold (`super::terminating`).
    let namespace_event =
        matches!(&msg, Msg::Object(gk, _) if gk.group.is_empty() && gk.kind == "Namespace");
    // The kinds to watch change with the sources and kinds, and with the objects of a kind
    // kept only for Lien's marks on them; nothing else changes them (see `State::wanted`).
    let keeps_wanted = match &msg {
        Msg::Object(gk, _) | Msg::Read(gk, _, _) => st
            .wanted
            .as_ref()
            .is_some_and(|(wanted, marks)| wanted.contains_key(gk) && !marks.contains(gk)),
        Msg::CrdChanged | Msg::Denial(_) | Msg::BreakGlass(_) | Msg::Plan(_) => true,
        _ => false,
    };
    if !keeps_wanted {
        st.wanted = None;
    }
    let mut shared = Shared {
        index,
        metrics,
        changed: false,
    };
    let usage_msg = matches!(msg, Msg::Usage(_) | Msg::ClusterUsage(_));
    let touched: Vec<Source> = match msg {
        Msg::Usage(ev) => usage_event(st, ev, false, UsageView::from_usage, |st| {
            &mut st.usage_buffer
        }),
        Msg::ClusterUsage(ev) => usage_event(st, ev, true, UsageView::from_cluster_usage, |st| {
            &mut st.cluster_usage_buffer
        }),
        Msg::Rule(ev) => {
            rule_event(st, ev, &mut shared);
            vec![]
        }
        Msg::Object(gk, ev) => {
            let ev = match ev {
                watcher::Event::Apply(meta) => watcher::Event::Apply(Observed::from(meta)),
                watcher::Event::Delete(meta) => watcher::Event::Delete(Observed::from(meta)),
                watcher::Event::InitApply(meta) => watcher::Event::InitApply(Observed::from(meta)),
                watcher::Event::Init => watcher::Event::Init,
                watcher::Event::InitDone => watcher::Event::InitDone,
            };
            object_event(st, &gk, None, ev, &mut shared)
        }
        Msg::Read(gk, reader, ev) => object_event(st, &gk, Some(&reader), ev, &mut shared),
        Msg::KindFound(gk, ar, namespaced) => {
            let marked_only = st.wanted().get(&gk).is_some_and(|w| w.marked_only);
            // A kind whose scope changed (a CRD made again) reads its objects differently.
            let rescoped = st
                .caches
                .kind(&gk)
                .is_some_and(|k| k.synced && k.namespaced != namespaced);
            st.caches
                .add_kind(gk.clone(), namespaced, &ar.api_version, &ar.plural);
            st.caches.set_marked_only(&gk, marked_only);
            if rescoped {
                st.sources_referring_to(&gk)
            } else {
                vec![]
            }
        }
        Msg::KindUnknown(gk) => {
            if st.caches.is_unknown(&gk) {
                vec![]
            } else {
                st.caches.mark_unknown(gk.clone());
                st.rules_kind_unknown(&gk, &mut shared);
                st.sources_referring_to(&gk)
            }
        }
        Msg::KindForbidden(gk, resource) => {
            if st.caches.mark_forbidden(gk.clone(), &resource) {
                tracing::warn!(kind = %gk, %resource, "the API server refuses Lien's ServiceAccount a list or watch of the kind: Usages and rules naming it say NotPermitted until it is granted");
                st.sources_referring_to(&gk)
            } else {
                vec![]
            }
        }
        Msg::CrdChanged | Msg::Denial(_) | Msg::BreakGlass(_) | Msg::Plan(_) => vec![],
    };
    for source in touched {
        st.resolve_usage(&source, &mut shared);
    }
    st.retry_unapplied(&mut shared);
    st.rules_complete(&mut shared);
    if usage_msg || shared.changed {
        // A Usage's deletion (an event that resolves nothing) and a source's relations made
        // afresh (which start unmarked) both change what a refusal names: every Usage being
        // deleted is marked again (`mark_kept` writes only what differs).
        let deleting: Vec<Source> = st
            .usages
            .iter()
            .filter(|(_, v)| v.deleting)
            .map(|(s, _)| s.clone())
            .collect();
        st.mark_kept(&deleting, shared.index);
    }
    if shared.changed || namespace_event {
        st.broken_stale = true;
    }
    if shared.changed {
        st.cycles_stale = true;
        metrics.set_relations(index.read().len());
    }
    st.wanted()
}

impl From<ObjectMeta> for Observed {
    fn from(meta: ObjectMeta) -> Self {
        Self {
            meta,
            evals: Vec::new(),
        }
    }
}

/// An event of a kind watch (metadata-only without `reader`). Returns the usages to resolve as
/// a whole: those reading a kind listed for the first time.
fn object_event(
    st: &mut State,
    gk: &GroupKind,
    reader: Option<&KindReader>,
    ev: watcher::Event<Observed>,
    shared: &mut Shared<'_>,
) -> Vec<Source> {
    match ev {
        watcher::Event::Apply(o) => {
            st.rules_upsert(gk, &o, shared);
            let old = if st.caches.keeps(gk, &o.meta) {
                st.caches.insert(gk, &o.meta)
            } else {
                // Its last mark of Lien's is gone (or it never had one).
                let name = o.meta.name.clone().unwrap_or_default();
                let old = st.caches.remove(gk, o.meta.namespace.as_deref(), &name);
                Some(((o.meta.namespace.clone(), name), old))
            };
            if let Some((key, old)) = old {
                st.observe_object(gk, &key, old, shared);
            }
            vec![]
        }
        watcher::Event::Delete(o) => {
            let name = o.meta.name.clone().unwrap_or_default();
            let key = gk.key(o.meta.namespace.as_deref(), &name);
            // A `by` object counts until it is gone: only this event removes it.
            st.rules_remove(&key, shared);
            let old = st.caches.remove(gk, o.meta.namespace.as_deref(), &name);
            st.observe_object(gk, &(o.meta.namespace.clone(), name), old, shared);
            vec![]
        }
        watcher::Event::Init => {
            let unlisted = st.joined_names(gk, shared.index);
            st.object_buffers.insert(
                gk.clone(),
                ListBuffer {
                    objects: BTreeMap::new(),
                    unlisted,
                },
            );
            vec![]
        }
        watcher::Event::InitApply(o) => {
            // Relations appear as the list goes (protection early is safe); what the list
            // no longer has goes at its end.
            st.rules_upsert(gk, &o, shared);
            if let Some(name) = o.meta.name.clone() {
                let keep = st.caches.keeps(gk, &o.meta);
                let buffer = st.object_buffers.entry(gk.clone()).or_default();
                let key = (o.meta.namespace.clone(), name);
                if !buffer.unlisted.is_empty() {
                    buffer.unlisted.remove(&key);
                }
                if keep {
                    buffer.objects.insert(key, CachedObject::from_meta(&o.meta));
                }
            }
            vec![]
        }
        watcher::Event::InitDone => {
            let buffered = st.object_buffers.remove(gk).unwrap_or_default();
            // A list went through: whatever refused it before (403) grants it now.
            let was_forbidden = st.caches.clear_forbidden(gk);
            if was_forbidden {
                tracing::info!(kind = %gk, "the API server lists the kind for Lien now");
            }
            st.rules_listed_kind(gk, reader, buffered.unlisted, shared);
            match st.caches.replace_objects(gk, buffered.objects) {
                // A relist: what it changed, object by object.
                Some(old) => {
                    st.observe_relist(gk, &old, shared);
                    if was_forbidden {
                        st.sources_referring_to(gk)
                    } else {
                        vec![]
                    }
                }
                // A first list: the usages reading the kind are resolved now.
                None => st.sources_referring_to(gk),
            }
        }
    }
}

fn rule_event(st: &mut State, ev: watcher::Event<DependencyRule>, shared: &mut Shared<'_>) {
    match ev {
        watcher::Event::Apply(r) => {
            if let Some(v) = RuleView::from_rule(&r) {
                st.apply_rule(v, shared);
            }
        }
        watcher::Event::Delete(r) => {
            if let Some(name) = r.metadata.name.as_deref() {
                st.delete_rule(name, shared);
            }
        }
        watcher::Event::Init => st.rule_buffer.clear(),
        watcher::Event::InitApply(r) => st.rule_buffer.push(r),
        watcher::Event::InitDone => {
            // A restarted list replaces the rules (and only the rules) wholesale.
            let items = std::mem::take(&mut st.rule_buffer);
            let views: Vec<RuleView> = items.iter().filter_map(RuleView::from_rule).collect();
            let names: BTreeSet<&str> = views.iter().map(|v| v.name.as_str()).collect();
            let gone: Vec<String> = st
                .rules
                .keys()
                .filter(|n| !names.contains(n.as_str()))
                .cloned()
                .collect();
            for name in gone {
                st.delete_rule(&name, shared);
            }
            for v in views {
                st.apply_rule(v, shared);
            }
            st.rules_listed = true;
        }
    }
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
                let previous = st.usages.get(&s);
                let v = v.remembering(previous);
                // Its status, finalizers or owner references (Lien's own writes) change no
                // relation: resolved again only when what it selects changed.
                let changed =
                    previous.is_none_or(|p| !p.resolves_as(&v)) || st.selections.get(&s).is_none();
                st.usages.insert(s.clone(), v);
                if changed { vec![s] } else { vec![] }
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

#[cfg(test)]
mod rule_tests;

#[cfg(test)]
mod selection_tests;

#[cfg(test)]
mod tests {
    //! The event loop's handling driven by hand, without a runtime or an API server: watch
    //! events in, the shared index and the resolutions out.

    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use kube::core::ApiResource;
    use lien_api::{ResourceRef, ResourceSpec, UsageSpec};
    use lien_core::ObjectKey;

    use super::*;

    fn spec(kind: &str, name: &str) -> ResourceSpec {
        ResourceSpec {
            api_version: "v1".into(),
            kind: kind.into(),
            resource_ref: Some(ResourceRef {
                name: name.into(),
                namespace: None,
            }),
            resource_selector: None,
        }
    }

    /// Usage `ns/name`: ConfigMap `of` is used by `by_kind` `by`.
    fn usage(name: &str, of: &str, by_kind: &str, by: &str) -> Usage {
        let mut u = Usage::new(
            name,
            UsageSpec {
                of: spec("ConfigMap", of),
                by: Some(spec(by_kind, by)),
                ..Default::default()
            },
        );
        u.metadata.namespace = Some("ns".into());
        u.metadata.uid = Some(format!("uid-usage-{name}"));
        u
    }

    fn object(name: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: Some("ns".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some("1".into()),
            ..Default::default()
        }
    }

    fn configmaps() -> GroupKind {
        GroupKind::new("", "ConfigMap")
    }

    fn key(kind: &str, name: &str) -> ObjectKey {
        ObjectKey {
            group: String::new(),
            kind: kind.into(),
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    /// The event loop's state, its index and metrics, driven one message at a time.
    struct Harness {
        st: State,
        index: RwLock<RelationIndex>,
        metrics: Metrics,
    }

    impl Harness {
        fn new() -> Self {
            Self {
                st: State::default(),
                index: RwLock::new(RelationIndex::new()),
                metrics: Metrics::default(),
            }
        }

        fn send(&mut self, msg: Msg) -> BTreeMap<GroupKind, WantedKind> {
            handle(&mut self.st, &self.index, &self.metrics, msg)
        }

        /// The usage watch's first list, with `usages`.
        fn list_usages(&mut self, usages: Vec<Usage>) {
            self.send(Msg::Usage(watcher::Event::Init));
            for u in usages {
                self.send(Msg::Usage(watcher::Event::InitApply(u)));
            }
            self.send(Msg::Usage(watcher::Event::InitDone));
        }

        /// Discovery found `gk` and its watch listed `objects`.
        fn list_kind(&mut self, gk: &GroupKind, ar: ApiResource, objects: &[&str]) {
            self.send(Msg::KindFound(gk.clone(), ar, true));
            self.send(Msg::Object(gk.clone(), watcher::Event::Init));
            for o in objects {
                self.send(Msg::Object(
                    gk.clone(),
                    watcher::Event::InitApply(object(o)),
                ));
            }
            self.send(Msg::Object(gk.clone(), watcher::Event::InitDone));
        }

        fn in_use(&self, kind: &str, name: &str) -> bool {
            self.index.read().is_in_use(&key(kind, name))
        }

        fn source_len(&self, source: &Source) -> usize {
            self.index.read().source_len(source)
        }
    }

    /// `u` (db used by app) applied and both ConfigMaps listed: the relation is in the index.
    fn held() -> Harness {
        let mut h = Harness::new();
        h.list_usages(vec![usage("u", "db", "ConfigMap", "app")]);
        assert!(!h.st.settled(), "ConfigMaps are not listed yet");
        h.list_kind(
            &configmaps(),
            ApiResource::erase::<ConfigMap>(&()),
            &["db", "app"],
        );
        assert!(!h.st.settled(), "ClusterUsages are not listed yet");
        h.send(Msg::ClusterUsage(watcher::Event::Init));
        h.send(Msg::ClusterUsage(watcher::Event::InitDone));
        assert!(!h.st.settled(), "DependencyRules are not listed yet");
        h.send(Msg::Rule(watcher::Event::Init));
        h.send(Msg::Rule(watcher::Event::InitDone));
        assert!(h.st.settled());
        assert!(h.in_use("ConfigMap", "db"));
        h
    }

    #[test]
    fn a_usage_over_a_listed_kind_puts_its_relation_in_the_index_and_wants_the_kind() {
        let mut h = Harness::new();
        let wanted = h.send(Msg::Usage(watcher::Event::Apply(usage(
            "u",
            "db",
            "ConfigMap",
            "app",
        ))));
        // Namespaces are always watched (refused namespace DELETEs are recorded on them).
        assert_eq!(
            wanted.into_iter().collect::<Vec<_>>(),
            vec![
                (
                    configmaps(),
                    WantedKind {
                        api_version: "v1".to_owned(),
                        programs: vec![],
                        labels: true,
                        marked_only: false,
                    }
                ),
                (
                    GroupKind::new("", "Namespace"),
                    WantedKind {
                        api_version: "v1".to_owned(),
                        programs: vec![],
                        labels: false,
                        marked_only: false,
                    }
                )
            ]
        );
        let source = Source::usage("ns", "u");
        assert!(
            !h.st
                .selections
                .get(&source)
                .is_some_and(Selection::complete),
            "the kind is not listed yet"
        );
        assert_eq!(h.source_len(&source), 0);
        h.list_kind(
            &configmaps(),
            ApiResource::erase::<ConfigMap>(&()),
            &["db", "app"],
        );
        assert!(
            h.st.selections
                .get(&source)
                .is_some_and(Selection::complete)
        );
        assert_eq!(h.source_len(&source), 1);
        let index = h.index.read();
        let r = index
            .blockers(&key("ConfigMap", "db"))
            .next()
            .expect("db is in use");
        assert_eq!(r.by().map(|b| b.name.to_owned()), Some("app".into()));
    }

    #[test]
    fn a_relist_does_not_delete_other_sources_relations() {
        let mut h = held();
        // A relation of another kind of source (a dependency rule), which the usage watch
        // knows nothing of.
        let rule = Source::rule("r");
        h.index
            .write()
            .apply(
                &rule,
                [Relation::uses(
                    rule.clone(),
                    key("ConfigMap", "other"),
                    key("ConfigMap", "app"),
                )],
            )
            .expect("the rule's relation is valid");
        // The usage watch restarts with a fresh list that no longer holds `u`, and the
        // ConfigMap watch relists.
        h.list_usages(vec![]);
        h.list_kind(
            &configmaps(),
            ApiResource::erase::<ConfigMap>(&()),
            &["db", "app", "other"],
        );
        assert_eq!(h.source_len(&Source::usage("ns", "u")), 0, "u is gone");
        assert!(!h.in_use("ConfigMap", "db"));
        assert_eq!(h.source_len(&rule), 1, "the rule's relation stays");
        assert!(h.in_use("ConfigMap", "other"));
    }

    #[test]
    fn an_incomplete_resolution_keeps_the_previous_relations() {
        let mut h = held();
        let source = Source::usage("ns", "u");
        // `u` now names a Secret as its user; Secrets are not listed yet.
        let wanted = h.send(Msg::Usage(watcher::Event::Apply(usage(
            "u", "db", "Secret", "app",
        ))));
        assert!(wanted.contains_key(&GroupKind::new("", "Secret")));
        assert!(
            !h.st
                .selections
                .get(&source)
                .is_some_and(Selection::complete)
        );
        assert!(h.in_use("ConfigMap", "db"), "protection is not lifted");
        let index = h.index.read();
        let r = index
            .blockers(&key("ConfigMap", "db"))
            .next()
            .expect("db is in use");
        assert_eq!(r.by().map(|b| b.kind.to_owned()), Some("ConfigMap".into()));
        drop(index);
        // Once Secrets are listed (without `app`), the new resolution replaces the old one.
        h.list_kind(
            &GroupKind::new("", "Secret"),
            ApiResource::erase::<Secret>(&()),
            &[],
        );
        assert!(
            h.st.selections
                .get(&source)
                .is_some_and(Selection::complete)
        );
        assert!(!h.in_use("ConfigMap", "db"));
    }

    /// e2e `composition.rs`: a parent's teardown deletes the user, whose own finalizer holds
    /// it Terminating: while it exists it is still a user — the used object stays protected —
    /// and once it is gone the relation is released.
    #[test]
    fn a_terminating_user_holds_the_relation_until_it_is_gone() {
        let mut h = held();
        let mut terminating = object("app");
        terminating.resource_version = Some("2".into());
        terminating.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
        );
        terminating.finalizers = Some(vec!["example.org/slow-teardown".into()]);
        h.send(Msg::Object(
            configmaps(),
            watcher::Event::Apply(terminating.clone()),
        ));
        assert!(h.in_use("ConfigMap", "db"), "the user still exists");
        assert_eq!(h.source_len(&Source::usage("ns", "u")), 1);
        h.send(Msg::Object(
            configmaps(),
            watcher::Event::Delete(terminating),
        ));
        assert!(!h.in_use("ConfigMap", "db"));
    }

    #[test]
    fn deleting_the_user_releases_the_relation() {
        let mut h = held();
        h.send(Msg::Object(
            configmaps(),
            watcher::Event::Delete(object("app")),
        ));
        assert!(!h.in_use("ConfigMap", "db"));
        assert_eq!(h.source_len(&Source::usage("ns", "u")), 0);
        assert!(
            h.st.selections
                .get(&Source::usage("ns", "u"))
                .is_some_and(Selection::complete)
        );
    }

    #[test]
    fn an_unchanged_resolution_does_not_rewrite_the_index() {
        let mut h = held();
        let source = Source::usage("ns", "u");
        h.st.cycles_stale = false;
        // Take the relation out behind the state's back: a rewrite would put it back.
        h.index.write().delete(&source);
        // An unrelated ConfigMap and an echo of `db` with a new resourceVersion: `u` is
        // re-resolved to the same relations.
        h.send(Msg::Object(
            configmaps(),
            watcher::Event::Apply(object("unrelated")),
        ));
        let mut db = object("db");
        db.resource_version = Some("2".into());
        h.send(Msg::Object(configmaps(), watcher::Event::Apply(db)));
        assert_eq!(h.source_len(&source), 0, "the index was not written");
        assert!(!h.st.cycles_stale, "nothing marked the cycles stale");
        // A change of the resolution is written.
        h.send(Msg::Usage(watcher::Event::Apply(usage(
            "u",
            "unrelated",
            "ConfigMap",
            "app",
        ))));
        assert!(h.in_use("ConfigMap", "unrelated"));
        assert!(h.st.cycles_stale);
    }
}
