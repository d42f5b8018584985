//! Incremental resolution: what a usage selects, kept current one watch event at a time.
//!
//! # Data model
//!
//! A [`Selection`] is what one usage (`Usage` or `ClusterUsage`) selects now: per side, a
//! [`Matcher`] — what an object must be to match, once the side's kind and scope are checked —
//! and the objects it matches ([`SideSelection::matched`]). [`Selection::resolve`] builds it
//! from the caches with one pass over the side's scope (one namespace's range, or one lookup for
//! a name); that is done when the usage itself changes or when one of its kinds is first
//! listed or stops being served, never per object. After that, [`SideSelection::observe`] takes
//! one object as a watch event left it and says whether the side gained or lost it: O(1) in the
//! number of objects.
//!
//! A usage's relations are every matched `of` used by every matched `by` (a protection of each
//! matched `of` without `by`), with the attributes of its [`Shape`] (source, reason, replay).
//! They are never kept as a list: the relation index holds them, and what a change adds and
//! removes is derived from the two selections ([`diff`]) or from the one object that changed
//! ([`Shape::with_object`]), in the size of the change.
//!
//! A [`SideIndex`] finds the sides one object event can have changed: a side by name under the
//! name, a selector under one of its labels (every object it matches carries that label) or,
//! with `matchControllerRef` and no label, under the controller's UID. An event that changes
//! neither the object's existence nor its UID, nor a label some selector of its kind reads, nor
//! its controller where some selector reads it, finds no side at all — Lien's own label writes
//! among them: they cost a comparison of the object's labels, whatever the number of objects.
//!
//! Pure: no I/O, no clock.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use lien_api::ResourceSpec;
use lien_core::{Relation, Source};

use crate::cache::{CachedObject, Caches, GroupKind, NsName};
use crate::resolve::{Matched, Problem, ProblemReason, UsageView};

/// What an object must be to match one side of a usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matcher {
    /// The side's kind.
    pub gk: GroupKind,
    /// Where the side looks: one namespace, or `None` for every namespace (a ClusterUsage
    /// selector without one) and for cluster-scoped kinds.
    pub namespace: Option<String>,
    /// By name or by selector.
    pub select: Select,
}

/// How a side selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Select {
    /// The one object of this name (`resourceRef`).
    Name(String),
    /// Every object carrying these labels (`resourceSelector`) and, with `matchControllerRef`,
    /// controlled by this UID (the usage's controller, or the one it recorded).
    Labels {
        /// `matchLabels`.
        labels: BTreeMap<String, String>,
        /// The controller UID `matchControllerRef` selects by.
        controller: Option<String>,
    },
}

impl Matcher {
    /// Whether the object `(ns, name)` matches.
    pub fn matches(&self, key: &NsName, o: &CachedObject) -> bool {
        if self.namespace.is_some() && key.0 != self.namespace {
            return false;
        }
        match &self.select {
            Select::Name(name) => &key.1 == name,
            Select::Labels { labels, controller } => {
                o.matches_labels(labels)
                    && controller
                        .as_deref()
                        .is_none_or(|c| o.controller_uid.as_deref() == Some(c))
            }
        }
    }

    /// Why it matches nothing, as the side's `NotFound` problem.
    fn not_found(&self, side: &str) -> Problem {
        let message = match &self.select {
            Select::Name(name) => {
                format!(
                    "{side}: {} not found",
                    self.gk.key(self.namespace.as_deref(), name)
                )
            }
            Select::Labels { .. } => format!("{side}: no {} matches the selector", self.gk),
        };
        Problem {
            reason: ProblemReason::NotFound,
            message,
        }
    }
}

/// One side of a usage, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct SideSelection {
    /// The side's kind.
    pub gk: GroupKind,
    /// Whether this is `spec.by`.
    pub is_by: bool,
    /// What an object must be to match; `None` when the side can match nothing as written
    /// (its problem says why) or its kind is not listed yet.
    pub matcher: Option<Matcher>,
    /// The matched objects and their UIDs, ordered as status lists them.
    pub matched: BTreeMap<NsName, String>,
    /// Whether the side's kind is settled (listed, or known not to be served).
    pub complete: bool,
    /// A problem that does not depend on which objects exist (scope, kind, a missing
    /// controller); "nothing matches" is derived from `matched`.
    problem: Option<Problem>,
}

/// One object entering or leaving a side (or changing its UID: both).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The UID the side held for it, if it matched.
    pub was: Option<String>,
    /// Its UID now, if it matches.
    pub now: Option<String>,
}

impl SideSelection {
    fn problem(
        gk: GroupKind,
        is_by: bool,
        complete: bool,
        reason: ProblemReason,
        m: String,
    ) -> Self {
        Self {
            gk,
            is_by,
            matcher: None,
            matched: BTreeMap::new(),
            complete,
            problem: Some(Problem { reason, message: m }),
        }
    }

    fn name(&self) -> &'static str {
        if self.is_by { "spec.by" } else { "spec.of" }
    }

    /// Resolves one side against the caches; `scanned` counts the objects looked at.
    fn resolve(
        view: &UsageView,
        spec: &ResourceSpec,
        is_by: bool,
        caches: &Caches,
        scanned: &mut usize,
    ) -> Self {
        let gk = GroupKind::from_api_version(&spec.api_version, &spec.kind);
        let side = if is_by { "spec.by" } else { "spec.of" };
        if caches.is_unknown(&gk) {
            let m = format!(
                "{side}: the API server does not serve kind {} in {}",
                spec.kind, spec.api_version
            );
            return Self::problem(gk, is_by, true, ProblemReason::UnknownKind, m);
        }
        if let Some(resource) = caches.forbidden(&gk) {
            // Not complete: the objects exist and cannot be seen, so relations this usage
            // held before stay (`Held::Earlier`), and no `by` object is taken for gone.
            let m = crate::resolve::not_permitted_message(
                side,
                &spec.kind,
                &spec.api_version,
                resource,
            );
            return Self::problem(gk, is_by, false, ProblemReason::NotPermitted, m);
        }
        let Some(kind) = caches.kind(&gk).filter(|k| k.synced) else {
            let m = format!("{side}: waiting for the first list of {gk}");
            return Self::problem(gk, is_by, false, ProblemReason::Pending, m);
        };
        let explicit = spec.explicit_namespace();
        // The namespace to look in: `None` means every namespace (ClusterUsage selectors) or
        // the cluster-scoped objects.
        let namespace: Option<String> = if !kind.namespaced {
            if let Some(ns) = explicit {
                let m = format!("{side}: {gk} is cluster-scoped, but namespace {ns:?} was given");
                return Self::problem(gk, is_by, true, ProblemReason::InvalidScope, m);
            }
            None
        } else {
            match (&view.namespace, explicit) {
                (Some(own), Some(ns)) if ns != own && (is_by || view.by.is_none()) => {
                    let why = if is_by {
                        "spec.by always refers to the Usage's own namespace"
                    } else {
                        "spec.of may name another namespace only together with spec.by"
                    };
                    let m = format!("{side}: {why}");
                    return Self::problem(gk, is_by, true, ProblemReason::InvalidScope, m);
                }
                (Some(own), None) => Some(own.clone()),
                (_, Some(ns)) => Some(ns.to_owned()),
                (None, None) if spec.resource_ref.is_some() => {
                    let m = format!(
                        "{side}: {gk} is namespaced: a ClusterUsage must name the namespace"
                    );
                    return Self::problem(gk, is_by, true, ProblemReason::InvalidScope, m);
                }
                (None, None) => None,
            }
        };
        let select = match &spec.resource_ref {
            Some(r) => Select::Name(r.name.clone()),
            None => {
                let selector = spec.resource_selector.clone().unwrap_or_default();
                let controller = view.selecting_controller_uid();
                if selector.match_controller_ref && controller.is_none() {
                    let m = format!(
                        "{side}: matchControllerRef is set but the usage has no controller"
                    );
                    return Self::problem(gk, is_by, true, ProblemReason::NotFound, m);
                }
                Select::Labels {
                    labels: selector.match_labels,
                    controller: controller
                        .filter(|_| selector.match_controller_ref)
                        .map(str::to_owned),
                }
            }
        };
        let matcher = Matcher {
            gk: gk.clone(),
            namespace,
            select,
        };
        let matched: BTreeMap<NsName, String> = match &matcher.select {
            Select::Name(name) => {
                *scanned += 1;
                let key = (matcher.namespace.clone(), name.clone());
                kind.objects
                    .get(&key)
                    .map(|o| (key, o.uid.clone()))
                    .into_iter()
                    .collect()
            }
            Select::Labels { .. } => kind
                .in_namespace(matcher.namespace.as_deref())
                .inspect(|_| *scanned += 1)
                .filter(|(key, o)| matcher.matches(key, o))
                .map(|(key, o)| (key.clone(), o.uid.clone()))
                .collect(),
        };
        Self {
            gk,
            is_by,
            matcher: Some(matcher),
            matched,
            complete: true,
            problem: None,
        }
    }

    /// Why the side is not as written: a problem of its own, or nothing matching.
    pub fn problem_now(&self) -> Option<Problem> {
        if let Some(p) = &self.problem {
            return Some(p.clone());
        }
        let m = self.matcher.as_ref()?;
        self.matched.is_empty().then(|| m.not_found(self.name()))
    }

    /// Takes one object as a watch event left it (`None`: gone) and updates the matches;
    /// returns what changed for this side, if anything. O(log matched).
    pub fn observe(&mut self, key: &NsName, o: Option<&CachedObject>) -> Option<Change> {
        let matcher = self.matcher.as_ref()?;
        let now = o.filter(|o| matcher.matches(key, o)).map(|o| &o.uid);
        let was = self.matched.get(key);
        if was == now {
            return None;
        }
        let change = Change {
            was: was.cloned(),
            now: now.cloned(),
        };
        match &change.now {
            Some(uid) => self.matched.insert(key.clone(), uid.clone()),
            None => self.matched.remove(key),
        };
        Some(change)
    }

    /// The matched objects, in order.
    pub fn matched_list(&self) -> impl Iterator<Item = Matched> + '_ {
        self.matched
            .iter()
            .map(|(key, uid)| self.matched_one(key, uid))
    }

    /// One matched object as [`Matched`].
    pub fn matched_one(&self, (ns, name): &NsName, uid: &str) -> Matched {
        Matched {
            key: self.gk.key(ns.as_deref(), name),
            uid: uid.to_owned(),
        }
    }

    /// Whether it matches the object `key` with this UID.
    pub fn has(&self, key: &NsName, uid: &str) -> bool {
        self.matched.get(key).is_some_and(|u| u == uid)
    }
}

/// What a usage selects now, per side.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// `spec.of`.
    pub of: SideSelection,
    /// `spec.by`, if the usage has one.
    pub by: Option<SideSelection>,
    /// How many objects [`Selection::resolve`] looked at (the cost of a full resolution, for
    /// the controller's work count).
    pub scanned: usize,
}

impl Selection {
    /// Resolves a usage against the caches: every object of each side's scope is looked at
    /// once. Pure.
    pub fn resolve(view: &UsageView, caches: &Caches) -> Self {
        let mut scanned = 0;
        let of = SideSelection::resolve(view, &view.of, false, caches, &mut scanned);
        let by = view
            .by
            .as_ref()
            .map(|spec| SideSelection::resolve(view, spec, true, caches, &mut scanned));
        Self { of, by, scanned }
    }

    /// Whether every side's kind is settled, so that the matches are the truth and not "not
    /// listed yet". Only a complete selection replaces what the index holds for the usage,
    /// lifts a finalizer or removes a label.
    pub fn complete(&self) -> bool {
        self.of.complete && self.by.as_ref().is_none_or(|b| b.complete)
    }

    /// Why the usage is not `Ready`: `of`'s problem first.
    pub fn problems(&self) -> Vec<Problem> {
        self.sides()
            .filter_map(SideSelection::problem_now)
            .collect()
    }

    /// The sides, `of` first.
    pub fn sides(&self) -> impl Iterator<Item = &SideSelection> {
        std::iter::once(&self.of).chain(self.by.as_ref())
    }

    /// A side by whether it is `by`.
    pub fn side_mut(&mut self, is_by: bool) -> Option<&mut SideSelection> {
        if is_by {
            self.by.as_mut()
        } else {
            Some(&mut self.of)
        }
    }

    /// How many objects its relations protect: every matched `of`, unless it has `by` and
    /// no user matches.
    pub fn protected_count(&self) -> usize {
        match &self.by {
            Some(by) if by.matched.is_empty() => 0,
            _ => self.of.matched.len(),
        }
    }
}

/// What every relation of one usage shares, from its spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// The usage.
    pub source: Source,
    /// The reason every relation carries: for a protection (no `by`) always one, `spec.reason`
    /// or a fallback; with `by`, `spec.reason` when set.
    pub reason: Option<String>,
    /// `spec.replayDeletion`.
    pub replay: bool,
    /// `spec.enforcement: Warn`.
    pub warn: bool,
    /// Whether the usage has `by`: its relations are uses, else protections.
    pub uses: bool,
}

impl Shape {
    /// The shape of a usage's relations.
    pub fn of(view: &UsageView) -> Self {
        let source = view.source();
        let reason = view.reason.clone().filter(|r| !r.is_empty());
        let uses = view.by.is_some();
        // CEL requires a reason without `by`; the fallback keeps the index's invariant (a
        // protection says why) even for an object that slipped past validation.
        let reason = match (uses, reason) {
            (false, None) => Some(format!("protected by {source}")),
            (_, reason) => reason,
        };
        Self {
            source,
            reason,
            replay: view.replay,
            warn: view.warn,
            uses,
        }
    }

    /// One relation: `of` used by `by`, or protected without one.
    pub fn relation(&self, of: &Matched, by: Option<&Matched>) -> Relation {
        match by {
            None => Relation::protects(
                self.source.clone(),
                of.key.clone(),
                self.reason.clone().unwrap_or_default(),
            )
            .with_replay(self.replay)
            .with_warn(self.warn)
            .with_uids(Some(&of.uid), None),
            Some(by) => {
                let mut r = Relation::uses(self.source.clone(), of.key.clone(), by.key.clone())
                    .with_replay(self.replay)
                    .with_warn(self.warn)
                    .with_uids(Some(&of.uid), Some(&by.uid));
                if let Some(reason) = &self.reason {
                    r = r.with_reason(reason.clone());
                }
                r
            }
        }
    }

    /// Every relation of `sel`: each matched `of` used by each matched `by`, in order (or
    /// each matched `of` protected, without `by`).
    pub fn relations<'a>(&'a self, sel: &'a Selection) -> Box<dyn Iterator<Item = Relation> + 'a> {
        self.of_objects(sel.of.matched_list(), sel.by.as_ref())
    }

    /// The relations `sel` has with one object of one side — the `of` object with every
    /// matched user, or the `by` object with every matched `of` — for that object's UID `uid`:
    /// what its entering adds, or its leaving removes. In the size of the other side.
    pub fn with_object<'a>(
        &'a self,
        sel: &'a Selection,
        is_by: bool,
        key: &NsName,
        uid: &str,
    ) -> Box<dyn Iterator<Item = Relation> + 'a> {
        if is_by {
            let Some(by) = sel.by.as_ref().filter(|_| self.uses) else {
                return Box::new(std::iter::empty());
            };
            self.users(sel.of.matched_list(), vec![by.matched_one(key, uid)])
        } else {
            let of = sel.of.matched_one(key, uid);
            self.of_objects(std::iter::once(of), sel.by.as_ref())
        }
    }

    /// `of_objects` with every matched user of `by` (their protections without `by`).
    fn of_objects<'a>(
        &'a self,
        of_objects: impl Iterator<Item = Matched> + 'a,
        by: Option<&'a SideSelection>,
    ) -> Box<dyn Iterator<Item = Relation> + 'a> {
        if !self.uses {
            return Box::new(of_objects.map(move |o| self.relation(&o, None)));
        }
        let Some(by) = by else {
            return Box::new(std::iter::empty());
        };
        Box::new(
            of_objects
                .flat_map(move |o| by.matched_list().map(move |b| self.relation(&o, Some(&b)))),
        )
    }

    /// `of_objects`, each used by every one of `users` (nothing without `by`).
    fn users<'a>(
        &'a self,
        of_objects: impl Iterator<Item = Matched> + 'a,
        users: Vec<Matched>,
    ) -> Box<dyn Iterator<Item = Relation> + 'a> {
        if !self.uses || users.is_empty() {
            return Box::new(std::iter::empty());
        }
        let users = std::rc::Rc::new(users);
        Box::new(of_objects.flat_map(move |o| {
            let users = users.clone();
            (0..users.len()).map(move |i| self.relation(&o, Some(&users[i])))
        }))
    }
}

/// The objects one side lost and gained from `old` to `new` (an object whose UID changed is
/// in both); every object, if the side's kind changed. O(both sides).
fn side_diff(old: &SideSelection, new: &SideSelection) -> (Vec<Matched>, Vec<Matched>) {
    if old.gk != new.gk {
        return (old.matched_list().collect(), new.matched_list().collect());
    }
    let gone = old
        .matched
        .iter()
        .filter(|(k, u)| !new.has(k, u))
        .map(|(k, u)| old.matched_one(k, u))
        .collect();
    let came = new
        .matched
        .iter()
        .filter(|(k, u)| !old.has(k, u))
        .map(|(k, u)| new.matched_one(k, u))
        .collect();
    (gone, came)
}

/// What the index must gain and lose to go from `old`'s relations (none: `None`) to `new`'s:
/// `(added, removed)`, in the size of the change — an unchanged relation is in neither. A
/// change of the shape (reason, replay, `by` added or dropped) changes every relation.
pub fn diff<'a>(
    old: Option<(&'a Shape, &'a Selection)>,
    new: (&'a Shape, &'a Selection),
) -> (
    Box<dyn Iterator<Item = Relation> + 'a>,
    Box<dyn Iterator<Item = Relation> + 'a>,
) {
    let (shape, sel) = new;
    let Some((old_shape, old_sel)) = old else {
        return (shape.relations(sel), Box::new(std::iter::empty()));
    };
    if old_shape != shape {
        return (shape.relations(sel), old_shape.relations(old_sel));
    }
    let (gone_of, came_of) = side_diff(&old_sel.of, &sel.of);
    if !shape.uses {
        return (
            shape.of_objects(came_of.into_iter(), None),
            shape.of_objects(gone_of.into_iter(), None),
        );
    }
    let (gone_by, came_by) = match (&old_sel.by, &sel.by) {
        (Some(old), Some(new)) => side_diff(old, new),
        (old, new) => (
            old.iter().flat_map(|s| s.matched_list()).collect(),
            new.iter().flat_map(|s| s.matched_list()).collect(),
        ),
    };
    // Removed: a lost `of` with every old user, and a kept `of` with every lost user. Added:
    // a gained `of` with every new user, and a kept `of` with every gained user.
    let kept = |from: &'a Selection, other: &'a Selection| {
        from.of
            .matched
            .iter()
            .filter(move |(k, u)| from.of.gk == other.of.gk && other.of.has(k, u))
            .map(move |(k, u)| from.of.matched_one(k, u))
    };
    let removed = shape.of_objects(gone_of.into_iter(), old_sel.by.as_ref());
    let removed: Box<dyn Iterator<Item = Relation> + 'a> = if gone_by.is_empty() {
        removed
    } else {
        Box::new(removed.chain(shape.users(kept(old_sel, sel), gone_by)))
    };
    let added = shape.of_objects(came_of.into_iter(), sel.by.as_ref());
    let added: Box<dyn Iterator<Item = Relation> + 'a> = if came_by.is_empty() {
        added
    } else {
        Box::new(added.chain(shape.users(kept(sel, old_sel), came_by)))
    };
    (added, removed)
}

/// A usage's side: the usage, and whether it is `by`.
pub type SideId = (Source, bool);

/// The sides of every complete usage, by what one object event can change for them (see the
/// module documentation).
#[derive(Debug, Default, Clone)]
pub struct SideIndex {
    kinds: HashMap<GroupKind, KindSides>,
}

#[derive(Debug, Default, Clone)]
struct KindSides {
    /// Sides by name, under the object's namespace and name.
    by_name: HashMap<NsName, BTreeSet<SideId>>,
    /// Selectors with labels, under one of them: label key → value → sides.
    by_label: HashMap<String, HashMap<String, BTreeSet<SideId>>>,
    /// Selectors with `matchControllerRef` and no label, under the controller's UID.
    by_controller: HashMap<String, BTreeSet<SideId>>,
    /// Selectors with neither (an empty selector, stored before validation refused it): every
    /// object of their scope matches.
    every: BTreeSet<SideId>,
    /// The label keys some selector reads, with how many selectors read each.
    keys: HashMap<String, usize>,
    /// How many selectors read the controller.
    controllers: usize,
}

impl KindSides {
    fn is_empty(&self) -> bool {
        self.by_name.is_empty()
            && self.by_label.is_empty()
            && self.by_controller.is_empty()
            && self.every.is_empty()
    }
}

impl SideIndex {
    /// Adds a side with its matcher.
    pub fn insert(&mut self, id: SideId, m: &Matcher) {
        let k = self.kinds.entry(m.gk.clone()).or_default();
        match &m.select {
            Select::Name(name) => {
                let key = (m.namespace.clone(), name.clone());
                k.by_name.entry(key).or_default().insert(id);
            }
            Select::Labels { labels, controller } => {
                for key in labels.keys() {
                    *k.keys.entry(key.clone()).or_default() += 1;
                }
                k.controllers += usize::from(controller.is_some());
                match (labels.iter().next(), controller) {
                    (Some((key, value)), _) => {
                        k.by_label
                            .entry(key.clone())
                            .or_default()
                            .entry(value.clone())
                            .or_default()
                            .insert(id);
                    }
                    (None, Some(uid)) => {
                        k.by_controller.entry(uid.clone()).or_default().insert(id);
                    }
                    (None, None) => {
                        k.every.insert(id);
                    }
                }
            }
        }
    }

    /// Removes a side added with this matcher.
    pub fn remove(&mut self, id: &SideId, m: &Matcher) {
        let Some(k) = self.kinds.get_mut(&m.gk) else {
            return;
        };
        fn take<K: std::hash::Hash + Eq>(
            map: &mut HashMap<K, BTreeSet<SideId>>,
            key: &K,
            id: &SideId,
        ) {
            if let Some(set) = map.get_mut(key) {
                set.remove(id);
                if set.is_empty() {
                    map.remove(key);
                }
            }
        }
        match &m.select {
            Select::Name(name) => take(&mut k.by_name, &(m.namespace.clone(), name.clone()), id),
            Select::Labels { labels, controller } => {
                for key in labels.keys() {
                    if let Some(n) = k.keys.get_mut(key) {
                        *n -= 1;
                        if *n == 0 {
                            k.keys.remove(key);
                        }
                    }
                }
                k.controllers -= usize::from(controller.is_some());
                match (labels.iter().next(), controller) {
                    (Some((key, value)), _) => {
                        if let Some(values) = k.by_label.get_mut(key) {
                            take(values, value, id);
                            if values.is_empty() {
                                k.by_label.remove(key);
                            }
                        }
                    }
                    (None, Some(uid)) => take(&mut k.by_controller, uid, id),
                    (None, None) => {
                        k.every.remove(id);
                    }
                }
            }
        }
        if k.is_empty() {
            self.kinds.remove(&m.gk);
        }
    }

    /// The sides whose matches the object `key` of `gk` may have changed for, going from `old`
    /// to `new` (`None`: absent). Empty — without looking at any side — when the object neither
    /// came, went nor changed its UID, and changed no label a selector of the kind reads and
    /// not its controller where one reads it.
    pub fn affected(
        &self,
        gk: &GroupKind,
        key: &NsName,
        old: Option<&CachedObject>,
        new: Option<&CachedObject>,
    ) -> BTreeSet<SideId> {
        let mut out = BTreeSet::new();
        let Some(k) = self.kinds.get(gk) else {
            return out;
        };
        let identity = match (old, new) {
            (Some(a), Some(b)) => a.uid != b.uid,
            (None, None) => false,
            _ => true,
        };
        fn read(o: Option<&CachedObject>) -> (Option<&BTreeMap<String, String>>, Option<&str>) {
            (
                o.map(|o| &o.labels),
                o.and_then(|o| o.controller_uid.as_deref()),
            )
        }
        let ((old_labels, old_controller), (new_labels, new_controller)) = (read(old), read(new));
        let labels_changed = || {
            let empty = BTreeMap::new();
            let (a, b) = (old_labels.unwrap_or(&empty), new_labels.unwrap_or(&empty));
            a.iter()
                .filter(|(key, v)| b.get(*key) != Some(v))
                .chain(b.iter().filter(|(key, v)| a.get(*key) != Some(v)))
                .any(|(key, _)| k.keys.contains_key(key))
        };
        let controller_changed = k.controllers > 0 && old_controller != new_controller;
        if !(identity || controller_changed || labels_changed()) {
            return out;
        }
        if identity {
            if let Some(sides) = k.by_name.get(key) {
                out.extend(sides.iter().cloned());
            }
            out.extend(k.every.iter().cloned());
        }
        for (labels, controller) in [(old_labels, old_controller), (new_labels, new_controller)] {
            for (key, value) in labels.into_iter().flatten() {
                if let Some(sides) = k.by_label.get(key).and_then(|v| v.get(value)) {
                    out.extend(sides.iter().cloned());
                }
            }
            if let Some(sides) = controller.and_then(|c| k.by_controller.get(c)) {
                out.extend(sides.iter().cloned());
            }
        }
        out
    }

    /// Whether some side reads objects of `gk`.
    pub fn reads(&self, gk: &GroupKind) -> bool {
        self.kinds.contains_key(gk)
    }

    /// How many sides are indexed (for tests and gauges).
    pub fn len(&self) -> usize {
        self.kinds
            .values()
            .map(|k| {
                k.by_name.values().map(BTreeSet::len).sum::<usize>()
                    + k.by_label
                        .values()
                        .flat_map(HashMap::values)
                        .map(BTreeSet::len)
                        .sum::<usize>()
                    + k.by_controller.values().map(BTreeSet::len).sum::<usize>()
                    + k.every.len()
            })
            .sum()
    }

    /// Whether no side is indexed.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(uid: &str, labels: &[(&str, &str)], controller: Option<&str>) -> CachedObject {
        CachedObject {
            uid: uid.into(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            controller_uid: controller.map(str::to_owned),
            ..Default::default()
        }
    }

    fn labels(pairs: &[(&str, &str)], controller: Option<&str>) -> Matcher {
        Matcher {
            gk: GroupKind::new("", "ConfigMap"),
            namespace: Some("ns".into()),
            select: Select::Labels {
                labels: pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
                controller: controller.map(str::to_owned),
            },
        }
    }

    fn side(name: &str, by: bool) -> SideId {
        (Source::usage("ns", name), by)
    }

    /// The index finds the sides an event can change, and none for what no selector reads.
    #[test]
    fn an_event_finds_only_the_sides_it_can_change() {
        let gk = GroupKind::new("", "ConfigMap");
        let mut index = SideIndex::default();
        let web = labels(&[("app", "web"), ("tier", "front")], None);
        let owned = labels(&[], Some("parent"));
        let named = Matcher {
            gk: gk.clone(),
            namespace: Some("ns".into()),
            select: Select::Name("settings".into()),
        };
        index.insert(side("web", false), &web);
        index.insert(side("owned", true), &owned);
        index.insert(side("named", false), &named);
        let key = (Some("ns".to_owned()), "settings".to_owned());
        let find = |old: &CachedObject, new: &CachedObject| {
            index
                .affected(&gk, &key, Some(old), Some(new))
                .into_iter()
                .collect::<Vec<_>>()
        };
        let before = object("u1", &[("app", "web"), ("tier", "front")], None);
        // Lien's own label, a label no selector reads, a new resourceVersion: nothing.
        let labelled = object(
            "u1",
            &[
                ("app", "web"),
                ("tier", "front"),
                ("lien.dev/in-use", "true"),
            ],
            None,
        );
        assert!(find(&before, &labelled).is_empty());
        let other = object("u1", &[("app", "web"), ("tier", "front"), ("x", "y")], None);
        assert!(find(&before, &other).is_empty());
        // A label the selector reads: the selector, whether it leaves (found by the old labels)
        // or joins (the new).
        let back = object("u1", &[("app", "web"), ("tier", "back")], None);
        assert_eq!(find(&before, &back), [side("web", false)]);
        assert_eq!(find(&back, &before), [side("web", false)]);
        // A controller: the controller's selector.
        let adopted = object("u1", &[("app", "web"), ("tier", "front")], Some("parent"));
        assert_eq!(
            find(&before, &adopted),
            [side("owned", true), side("web", false)]
        );
        // A new incarnation: every side that could hold it, the name's too.
        let again = object("u2", &[("app", "web"), ("tier", "front")], None);
        assert_eq!(
            find(&before, &again),
            [side("named", false), side("web", false)]
        );
        assert_eq!(
            index.affected(&gk, &key, None, Some(&before)).len(),
            2,
            "created: the name's side and the selector's"
        );
        // Removed sides are found no more, and an empty kind is forgotten.
        index.remove(&side("web", false), &web);
        index.remove(&side("owned", true), &owned);
        index.remove(&side("named", false), &named);
        assert!(index.is_empty());
        assert!(!index.reads(&gk));
    }

    /// A side takes one object in or out; nothing for an object that stays as it was.
    #[test]
    fn a_side_observes_one_object() {
        let mut side = SideSelection {
            gk: GroupKind::new("", "ConfigMap"),
            is_by: false,
            matcher: Some(labels(&[("app", "web")], None)),
            matched: BTreeMap::new(),
            complete: true,
            problem: None,
        };
        let key = (Some("ns".to_owned()), "a".to_owned());
        let elsewhere = (Some("other".to_owned()), "a".to_owned());
        let web = object("u1", &[("app", "web")], None);
        assert_eq!(
            side.observe(&elsewhere, Some(&web)),
            None,
            "another namespace"
        );
        assert_eq!(
            side.problem_now().map(|p| p.reason),
            Some(ProblemReason::NotFound)
        );
        let came = side.observe(&key, Some(&web));
        assert_eq!(
            came.map(|c| (c.was, c.now)),
            Some((None, Some("u1".into())))
        );
        assert_eq!(side.observe(&key, Some(&web)), None);
        assert_eq!(side.problem_now(), None);
        let again = object("u2", &[("app", "web")], None);
        let replaced = side.observe(&key, Some(&again));
        assert_eq!(
            replaced.map(|c| (c.was, c.now)),
            Some((Some("u1".into()), Some("u2".into())))
        );
        let gone = side.observe(&key, None);
        assert_eq!(
            gone.map(|c| (c.was, c.now)),
            Some((Some("u2".into()), None))
        );
        assert!(side.matched.is_empty());
    }
}
