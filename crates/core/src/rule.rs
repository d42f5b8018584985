//! Incremental relation derivation for one `DependencyRule`: the equi-join of its `of` and `by`
//! objects, updated per object.
//!
//! # Data model
//!
//! A [`RuleJoin`] knows, for each side of one rule, only what the join needs — never whole
//! objects:
//!
//! - per object: its namespace and name (the group and kind are the side's), its UID, its join
//!   keys (already evaluated by the CEL layer, which is not part of this crate), and for a `by`
//!   object whether `when` held;
//! - per side, **buckets** from (scope, key) to the set of objects carrying that key. The scope
//!   is the object's namespace under [`RuleScope::SameNamespace`] and one shared value under
//!   [`RuleScope::Cluster`]; a rule without keys uses one bucket per scope.
//!
//! Every string (namespace, name, key) is interned once in a reference-counted interner, so an
//! object costs a few `u32`s plus its bucket memberships, and 100,000 `PersistentVolume`s keyed
//! by a pool name share the pool-name strings. UIDs are kept as their 16 bytes, as the index
//! keeps them (Kubernetes UIDs are UUIDs; anything else is interned).
//!
//! The join itself is **not stored**: the relations of an object are a pure function of the
//! current state (look its keys up in the other side's buckets). So an update computes the
//! object's relations before and after and returns the difference ([`Delta`]); this costs
//! O(relations of that object), never O(objects), and the rule keeps no per-relation memory.
//! The controller applies the deltas to the `RelationIndex`, which is where relations live.
//!
//! # Semantics
//!
//! A relation "`of` is used by `by`" exists while
//!
//! - both objects are present (a `by` object counts until it is removed: a deletion timestamp is
//!   irrelevant here, so the caller only calls `remove_by` once the object is gone);
//! - they are in scope: `SameNamespace` needs both namespaced and in the same namespace (a
//!   cluster-scoped object on either side has no namespace to share, so it takes part in no
//!   relation); `Cluster` has no condition, and either side may be cluster-scoped;
//! - for the `by` object, `when` held;
//! - with keys configured, the two key sets intersect; without keys every `by` in scope uses
//!   every `of` in scope;
//! - they are not the same object: with the same kind on both sides (e.g. "every Ceph object uses
//!   every other one of its namespace") an object never uses itself.
//!
//! With keys configured, an object handed `None` keys has none (it joins nothing); without keys
//! configured, keys handed in are ignored. An object whose evaluation failed
//! ([`RuleJoin::error_of`] / [`RuleJoin::error_by`]) keeps the keys and `when` it last had, so a
//! transient CEL error never releases a hold (fail closed); a new object with an error joins
//! nothing until it evaluates. Errors are counted for the rule's status.

use std::borrow::Cow;

use hashbrown::{HashMap, HashSet};

use crate::index::{FullError, StoredUid, sym_of};
use crate::intern::{Full, NIL, StrInterner, Sym};
use crate::key::{GroupKind, ObjectKey};
use crate::relation::{Relation, Source};

/// Where a rule looks for dependents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuleScope {
    /// `of` and `by` in the same namespace (both namespaced).
    SameNamespace,
    /// No namespace condition; either side may be cluster-scoped.
    Cluster,
}

/// What a [`RuleJoin`] needs of a `DependencyRule`, with its CEL already compiled elsewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleConfig {
    /// The rule, as the source of every relation it derives (`Source::rule(name)`).
    pub source: Source,
    /// The provider kind.
    pub of: GroupKind,
    /// The dependent kind.
    pub by: GroupKind,
    /// The namespace condition.
    pub scope: RuleScope,
    /// Whether `spec.keys` is set (an equi-join) or not (everything in scope).
    pub keyed: bool,
    /// `spec.reason`, carried by every relation.
    pub reason: String,
    /// `spec.replayDeletion`, carried by every relation.
    pub replay: bool,
}

/// What one update changed: relations to add to and remove from the index. A relation is never
/// in both lists, `removed` holds only relations previously added, and `added` only relations
/// not currently present.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delta {
    /// Relations that now exist.
    pub added: Vec<Relation>,
    /// Relations that no longer exist (as they were added, UIDs included).
    pub removed: Vec<Relation>,
}

impl Delta {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

/// Why an update was refused. The join is unchanged when it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinError {
    /// The object is not of the kind this side of the rule expects: a routing bug upstream.
    #[error("{key} is not a {expected}, the rule's `{side}` kind")]
    WrongKind {
        /// The object.
        key: Box<ObjectKey>,
        /// The kind the side expects.
        expected: Box<GroupKind>,
        /// `of` or `by`.
        side: &'static str,
    },
    /// The string interner is full.
    #[error("rule join is full")]
    Full(#[source] FullError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Of,
    By,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Of => "of",
            Side::By => "by",
        }
    }
}

/// An object of one side: (namespace or `NIL`, name), as symbols.
type Id = (u32, u32);
/// A bucket: (namespace under `SameNamespace`, else `NIL`; key, or `NIL` without keys).
type Bucket = (u32, u32);

#[derive(Debug, Clone)]
struct Obj {
    uid: StoredUid,
    /// The only key, or `NIL`; most objects have one key (a pool name), and a one-element
    /// `Box<[u32]>` would cost a heap allocation per object.
    key: u32,
    /// Two keys or more (then `key` is `NIL`), sorted and deduplicated.
    more: Option<Box<[u32]>>,
    /// `when` held (always true for `of` objects that evaluated); false for an object whose
    /// first evaluation failed, so that it joins nothing even in a rule without keys.
    when: bool,
    /// The last evaluation failed.
    error: bool,
}

impl Obj {
    /// Sorted, deduplicated key symbols; empty for a rule without keys.
    fn keys(&self) -> &[u32] {
        match &self.more {
            Some(more) => more,
            None if self.key == NIL => &[],
            None => std::slice::from_ref(&self.key),
        }
    }
}

fn split_keys(mut keys: Vec<u32>) -> (u32, Option<Box<[u32]>>) {
    match keys.len() {
        0 => (NIL, None),
        1 => (keys.pop().unwrap_or(NIL), None),
        _ => (NIL, Some(keys.into_boxed_slice())),
    }
}

#[derive(Debug, Clone, Default)]
struct Objects {
    objects: HashMap<Id, Obj>,
    buckets: HashMap<Bucket, HashSet<Id>>,
}

/// The incremental join of one `DependencyRule` (see the module docs).
#[derive(Debug, Clone)]
pub struct RuleJoin {
    config: RuleConfig,
    /// Same group and kind on both sides: an object must not be paired with itself.
    same_kind: bool,
    strs: StrInterner,
    of: Objects,
    by: Objects,
    len: usize,
    errors: usize,
}

impl RuleJoin {
    /// An empty join for `config`.
    pub fn new(config: RuleConfig) -> Self {
        Self {
            same_kind: config.of == config.by,
            config,
            strs: StrInterner::default(),
            of: Objects::default(),
            by: Objects::default(),
            len: 0,
            errors: 0,
        }
    }

    /// The rule this join derives.
    pub fn config(&self) -> &RuleConfig {
        &self.config
    }

    /// An `of` object was added or changed; `keys` are its evaluated `keys.of`.
    ///
    /// Returns what changed, in O(relations of this object before and after). Fails, changing
    /// nothing, when `key` is not of the rule's `of` kind or the interner is full.
    pub fn upsert_of(
        &mut self,
        key: &ObjectKey,
        uid: Option<&str>,
        keys: Option<Vec<String>>,
    ) -> Result<Delta, JoinError> {
        self.upsert(Side::Of, key, uid, Eval::Ok { keys, when: true })
    }

    /// A `by` object was added or changed; `keys` are its evaluated `keys.by`, `when` whether
    /// `spec.when` held (true when the rule has none).
    pub fn upsert_by(
        &mut self,
        key: &ObjectKey,
        uid: Option<&str>,
        keys: Option<Vec<String>>,
        when: bool,
    ) -> Result<Delta, JoinError> {
        self.upsert(Side::By, key, uid, Eval::Ok { keys, when })
    }

    /// An `of` object was added or changed but its CEL failed: it keeps its last keys.
    pub fn error_of(&mut self, key: &ObjectKey, uid: Option<&str>) -> Result<Delta, JoinError> {
        self.upsert(Side::Of, key, uid, Eval::Failed)
    }

    /// A `by` object was added or changed but its CEL failed: it keeps its last keys and `when`.
    pub fn error_by(&mut self, key: &ObjectKey, uid: Option<&str>) -> Result<Delta, JoinError> {
        self.upsert(Side::By, key, uid, Eval::Failed)
    }

    /// An `of` object is gone. Unknown objects (and objects of another kind) change nothing.
    pub fn remove_of(&mut self, key: &ObjectKey) -> Delta {
        self.remove(Side::Of, key)
    }

    /// A `by` object is gone (not merely deleting).
    pub fn remove_by(&mut self, key: &ObjectKey) -> Delta {
        self.remove(Side::By, key)
    }

    /// Every relation the rule derives now (for the initial `apply` or a resync).
    pub fn relations(&self) -> Vec<Relation> {
        let mut out = Vec::with_capacity(self.len);
        out.extend(self.relations_iter());
        out
    }

    /// Every relation the rule derives now, one at a time: for the index's
    /// [`crate::RelationIndex::apply_stream`], so that a join of 100,000 relations never
    /// exists as a `Vec<Relation>` (about 550 bytes each with their strings).
    pub fn relations_iter(&self) -> impl Iterator<Item = Relation> + '_ {
        self.by.objects.iter().flat_map(move |(&id, obj)| {
            self.matches(Side::By, id, obj)
                .into_iter()
                .map(move |m| self.relation(m, id, self.of.objects[&m].uid, obj.uid))
        })
    }

    /// How many relations the rule derives now (for its status).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the rule derives no relation.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many objects' last evaluation failed (for the rule's status).
    pub fn error_count(&self) -> usize {
        self.errors
    }

    /// How many `of` and `by` objects the join tracks.
    pub fn object_counts(&self) -> (usize, usize) {
        (self.of.objects.len(), self.by.objects.len())
    }

    /// The (namespace, name) of every `of` object the join tracks (for a relist: the ones a
    /// fresh list no longer holds are removed), borrowed: O(objects), no allocation.
    pub fn of_names(&self) -> impl Iterator<Item = (Option<&str>, &str)> + '_ {
        self.names(Side::Of)
    }

    /// The (namespace, name) of every `by` object the join tracks.
    pub fn by_names(&self) -> impl Iterator<Item = (Option<&str>, &str)> + '_ {
        self.names(Side::By)
    }

    fn names(&self, side: Side) -> impl Iterator<Item = (Option<&str>, &str)> + '_ {
        self.side(side).objects.keys().map(|&(ns, name)| {
            let ns = (ns != NIL).then(|| self.strs.get(Sym(ns)));
            (ns, self.strs.get(Sym(name)))
        })
    }

    /// How many distinct strings (namespaces, names, keys, non-UUID UIDs) the join holds; zero
    /// once every object is removed.
    pub fn string_count(&self) -> usize {
        self.strs.len()
    }

    /// An estimate of the heap bytes held (interned strings, object maps, buckets).
    pub fn heap_bytes(&self) -> usize {
        fn side(o: &Objects) -> usize {
            let obj = size_of::<(Id, Obj)>() + 1;
            let keys: usize = o
                .objects
                .values()
                .filter_map(|v| v.more.as_ref())
                .map(|m| m.len() * 4)
                .sum();
            let set = size_of::<Id>() + 1;
            let buckets: usize = o.buckets.values().map(|s| s.capacity() * set).sum();
            o.objects.capacity() * obj
                + keys
                + o.buckets.capacity() * (size_of::<(Bucket, HashSet<Id>)>() + 1)
                + buckets
        }
        self.strs.heap_bytes() + side(&self.of) + side(&self.by)
    }

    fn side(&self, side: Side) -> &Objects {
        match side {
            Side::Of => &self.of,
            Side::By => &self.by,
        }
    }

    fn side_mut(&mut self, side: Side) -> &mut Objects {
        match side {
            Side::Of => &mut self.of,
            Side::By => &mut self.by,
        }
    }

    fn kind(&self, side: Side) -> &GroupKind {
        match side {
            Side::Of => &self.config.of,
            Side::By => &self.config.by,
        }
    }

    /// The buckets `obj` (with namespace `ns`) sits in. Empty when out of every scope or when
    /// `when` does not hold: such an object is remembered but joins nothing.
    fn buckets(&self, ns: u32, obj: &Obj) -> Vec<Bucket> {
        let scope = match self.config.scope {
            RuleScope::SameNamespace if ns == NIL => return Vec::new(),
            RuleScope::SameNamespace => ns,
            RuleScope::Cluster => NIL,
        };
        if !obj.when {
            return Vec::new();
        }
        if self.config.keyed {
            obj.keys().iter().map(|&k| (scope, k)).collect()
        } else {
            vec![(scope, NIL)]
        }
    }

    /// The other side's objects related to `id` on `side`. O(matches): one probe per key.
    fn matches(&self, side: Side, id: Id, obj: &Obj) -> Vec<Id> {
        let other = self.side(match side {
            Side::Of => Side::By,
            Side::By => Side::Of,
        });
        let buckets = self.buckets(id.0, obj);
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for b in &buckets {
            let Some(set) = other.buckets.get(b) else {
                continue;
            };
            for &m in set {
                if self.same_kind && m == id {
                    continue;
                }
                // An object sharing several keys is one relation; only dedupe when it can happen.
                if buckets.len() > 1 && !seen.insert(m) {
                    continue;
                }
                out.push(m);
            }
        }
        out
    }

    fn object_key(&self, side: Side, id: Id) -> ObjectKey {
        let gk = self.kind(side);
        let ns = (id.0 != NIL).then(|| self.strs.get(Sym(id.0)));
        ObjectKey::new(&gk.group, &gk.kind, ns, self.strs.get(Sym(id.1)))
    }

    fn uid_string(&self, uid: StoredUid) -> Option<String> {
        uid.get(&self.strs).map(Cow::into_owned)
    }

    fn relation(&self, of: Id, by: Id, of_uid: StoredUid, by_uid: StoredUid) -> Relation {
        let mut r = Relation::uses(
            self.config.source.clone(),
            self.object_key(Side::Of, of),
            self.object_key(Side::By, by),
        )
        .with_reason(self.config.reason.clone())
        .with_replay(self.config.replay);
        r.of_uid = self.uid_string(of_uid);
        r.by_uid = self.uid_string(by_uid);
        r
    }

    /// The relations of `id` on `side` with partners `ms`, `id` having UID `uid`.
    fn relations_with(&self, side: Side, id: Id, uid: StoredUid, ms: &[Id]) -> Vec<Relation> {
        ms.iter()
            .map(|&m| match side {
                Side::Of => self.relation(id, m, uid, self.by.objects[&m].uid),
                Side::By => self.relation(m, id, self.of.objects[&m].uid, uid),
            })
            .collect()
    }

    fn find_id(&self, key: &ObjectKey) -> Option<Id> {
        let ns = match &key.namespace {
            Some(ns) => self.strs.find(ns)?.0,
            None => NIL,
        };
        Some((ns, self.strs.find(&key.name)?.0))
    }

    fn unbucket(&mut self, side: Side, id: Id, obj: &Obj) {
        for b in self.buckets(id.0, obj) {
            let objects = self.side_mut(side);
            if let Some(set) = objects.buckets.get_mut(&b) {
                set.remove(&id);
                if set.is_empty() {
                    objects.buckets.remove(&b);
                }
            }
        }
    }

    fn bucket(&mut self, side: Side, id: Id, obj: &Obj) {
        for b in self.buckets(id.0, obj) {
            self.side_mut(side).buckets.entry(b).or_default().insert(id);
        }
    }

    /// Releases the strings an object holds (its id's and its UID's; its keys unless kept).
    fn release(&mut self, id: Id, obj: &Obj, keys_too: bool) {
        if id.0 != NIL {
            self.strs.release(Sym(id.0));
        }
        self.strs.release(Sym(id.1));
        if let StoredUid::Other(sym) = obj.uid {
            self.strs.release(sym_of(sym));
        }
        if keys_too {
            for &k in obj.keys() {
                self.strs.release(Sym(k));
            }
        }
    }

    /// Interns the strings of a new object state; on failure gives back what it took.
    fn intern_all(
        &mut self,
        key: &ObjectKey,
        uid: Option<&str>,
        keys: &[String],
    ) -> Result<(Id, StoredUid, Vec<u32>), FullError> {
        let mut taken: Vec<Sym> = Vec::with_capacity(3 + keys.len());
        let result = (|| {
            let ns = match &key.namespace {
                Some(ns) => {
                    let s = self.strs.intern(ns)?;
                    taken.push(s);
                    s.0
                }
                None => NIL,
            };
            let name = self.strs.intern(&key.name)?;
            taken.push(name);
            let uid = StoredUid::store(&mut self.strs, uid)?;
            if let StoredUid::Other(s) = uid {
                taken.push(sym_of(s));
            }
            let mut syms = Vec::with_capacity(keys.len());
            for k in keys {
                let s = self.strs.intern(k)?;
                taken.push(s);
                syms.push(s.0);
            }
            Ok::<_, Full>(((ns, name.0), uid, syms))
        })();
        result.map_err(|full| {
            for s in taken {
                self.strs.release(s);
            }
            FullError::from(full)
        })
    }

    fn upsert(
        &mut self,
        side: Side,
        key: &ObjectKey,
        uid: Option<&str>,
        eval: Eval,
    ) -> Result<Delta, JoinError> {
        if !self.kind(side).matches(key) {
            return Err(JoinError::WrongKind {
                key: Box::new(key.clone()),
                expected: Box::new(self.kind(side).clone()),
                side: side.name(),
            });
        }
        let (keys, when, error) = match eval {
            Eval::Ok { keys, when } => {
                let mut keys = if self.config.keyed {
                    keys.unwrap_or_default()
                } else {
                    Vec::new()
                };
                keys.sort_unstable();
                keys.dedup();
                (Some(keys), when, false)
            }
            Eval::Failed => (None, false, true),
        };
        let (id, uid_sym, mut key_syms) = self
            .intern_all(key, uid, keys.as_deref().unwrap_or_default())
            .map_err(JoinError::Full)?;
        let old = self.side_mut(side).objects.remove(&id);
        let old_matches = match &old {
            Some(o) => {
                let ms = self.matches(side, id, o);
                self.unbucket(side, id, o);
                ms
            }
            None => Vec::new(),
        };
        // A failed evaluation keeps the last known keys and `when` (see module docs); the new
        // state then takes over the old state's key references instead of interning them again.
        let (when, keep_old_keys) = match (&old, error) {
            (Some(o), true) => {
                key_syms = o.keys().to_vec();
                (o.when, true)
            }
            (None, true) => (false, false),
            (_, false) => (when, false),
        };
        // Interning sorted strings does not sort their symbols.
        key_syms.sort_unstable();
        let (key_sym, more) = split_keys(key_syms);
        let new = Obj {
            uid: uid_sym,
            key: key_sym,
            more,
            when,
            error,
        };
        self.bucket(side, id, &new);
        let new_matches = self.matches(side, id, &new);

        let delta = match &old {
            Some(o) if o.uid == new.uid => {
                let before: HashSet<Id> = old_matches.iter().copied().collect();
                let after: HashSet<Id> = new_matches.iter().copied().collect();
                let gone: Vec<Id> = old_matches
                    .iter()
                    .copied()
                    .filter(|m| !after.contains(m))
                    .collect();
                let came: Vec<Id> = new_matches
                    .iter()
                    .copied()
                    .filter(|m| !before.contains(m))
                    .collect();
                Delta {
                    removed: self.relations_with(side, id, o.uid, &gone),
                    added: self.relations_with(side, id, new.uid, &came),
                }
            }
            // A new incarnation (or a new object): every relation carries the new UID.
            Some(o) => Delta {
                removed: self.relations_with(side, id, o.uid, &old_matches),
                added: self.relations_with(side, id, new.uid, &new_matches),
            },
            None => Delta {
                removed: Vec::new(),
                added: self.relations_with(side, id, new.uid, &new_matches),
            },
        };
        if let Some(o) = &old {
            self.release(id, o, !keep_old_keys);
            self.errors -= usize::from(o.error);
        }
        self.errors += usize::from(new.error);
        self.len = self.len + delta.added.len() - delta.removed.len();
        self.side_mut(side).objects.insert(id, new);
        Ok(delta)
    }

    fn remove(&mut self, side: Side, key: &ObjectKey) -> Delta {
        if !self.kind(side).matches(key) {
            return Delta::default();
        }
        let Some(id) = self.find_id(key) else {
            return Delta::default();
        };
        let Some(old) = self.side_mut(side).objects.remove(&id) else {
            return Delta::default();
        };
        let ms = self.matches(side, id, &old);
        self.unbucket(side, id, &old);
        let removed = self.relations_with(side, id, old.uid, &ms);
        self.release(id, &old, true);
        self.errors -= usize::from(old.error);
        self.len -= removed.len();
        Delta {
            added: Vec::new(),
            removed,
        }
    }
}

/// What the CEL layer made of one object: its keys and `when`, or a failure.
enum Eval {
    Ok {
        keys: Option<Vec<String>>,
        when: bool,
    },
    Failed,
}
