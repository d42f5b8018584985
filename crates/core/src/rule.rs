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
//! by a pool name share the pool-name strings. An object is a packed 36-byte record in a chunked
//! arena (its only key inline; two keys or more in a side list), found by (namespace, name)
//! through a hash table of `u32` slots; a bucket lists its objects' slots in a `Vec<u32>`. UIDs are kept as their 16 bytes, as the index
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

use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashMap, HashSet, HashTable};

use crate::arena::Arena;
use crate::index::{FullError, StoredUid, sym_of};
use crate::intern::{Full, NIL, StrInterner, Sym, table_bytes};
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

/// An object of one side: its slot in that side's arena.
type Id = u32;
/// A bucket: (namespace under `SameNamespace`, else `NIL`; key, or `NIL` without keys).
type Bucket = (u32, u32);

/// One object, packed (36 bytes). Free records have `name == NIL` and chain through `key`.
#[derive(Debug, Clone, Copy)]
struct Obj {
    /// Namespace symbol, or `NIL` for a cluster-scoped object.
    ns: u32,
    name: u32,
    /// The only key, or `NIL`; most objects have one key (a pool name), so it is stored inline.
    key: u32,
    /// Two keys or more (then `key` is `NIL`): a slot of [`Objects::multi`], else `NIL`.
    more: u32,
    uid: StoredUid,
    /// `when` held (always true for `of` objects that evaluated); false for an object whose
    /// first evaluation failed, so that it joins nothing even in a rule without keys.
    when: bool,
    /// The last evaluation failed.
    error: bool,
}

/// An object state's interned strings: ((namespace, name), UID, key symbols).
type Interned = ((u32, u32), StoredUid, Vec<u32>);

/// The objects of a bucket. Buckets are small (objects sharing one key: ~100 PVs per pool) and
/// a `Vec<u32>` costs 4 bytes per member where a hash set costs ~10; a bucket that grows past
/// [`BIG`] (a rule without keys puts a whole namespace in one) becomes a set so that removing
/// a member stays O(1).
#[derive(Debug, Clone)]
enum Posting {
    Small(Vec<Id>),
    Big(HashSet<Id>),
}

const BIG: usize = 512;

impl Posting {
    fn insert(&mut self, id: Id) {
        match self {
            Posting::Small(v) if v.len() < BIG => v.push(id),
            Posting::Small(v) => {
                let mut set: HashSet<Id> = v.drain(..).collect();
                set.insert(id);
                *self = Posting::Big(set);
            }
            Posting::Big(set) => {
                set.insert(id);
            }
        }
    }

    fn remove(&mut self, id: Id) {
        match self {
            Posting::Small(v) => {
                if let Some(i) = v.iter().position(|&m| m == id) {
                    v.swap_remove(i);
                }
            }
            Posting::Big(set) => {
                set.remove(&id);
            }
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Posting::Small(v) => v.is_empty(),
            Posting::Big(set) => set.is_empty(),
        }
    }

    fn iter(&self) -> impl Iterator<Item = Id> + '_ {
        let (small, big) = match self {
            Posting::Small(v) => (Some(v.iter().copied()), None),
            Posting::Big(set) => (None, Some(set.iter().copied())),
        };
        small.into_iter().flatten().chain(big.into_iter().flatten())
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Posting::Small(v) => v.capacity() * size_of::<Id>(),
            Posting::Big(set) => set.capacity() * (size_of::<Id>() + 1),
        }
    }
}

/// One side's objects: packed records in a chunked arena (no per-object allocation), found by
/// (namespace, name) through a table of their `u32` slots, and the key buckets.
#[derive(Debug, Clone, Default)]
struct Objects {
    recs: Arena<Obj>,
    free: u32,
    live: usize,
    table: HashTable<Id>,
    /// Key lists of objects with two keys or more; free slots are empty and listed in
    /// `multi_free`.
    multi: Vec<Box<[u32]>>,
    multi_free: Vec<u32>,
    buckets: HashMap<Bucket, Posting>,
}

impl Objects {
    fn new() -> Self {
        Self {
            free: NIL,
            ..Self::default()
        }
    }

    fn keys<'a>(&'a self, obj: &'a Obj) -> &'a [u32] {
        if obj.more != NIL {
            &self.multi[obj.more as usize]
        } else if obj.key == NIL {
            &[]
        } else {
            std::slice::from_ref(&obj.key)
        }
    }

    fn find(&self, hasher: &DefaultHashBuilder, ns: u32, name: u32) -> Option<Id> {
        let recs = &self.recs;
        self.table
            .find(hasher.hash_one((ns, name)), |&id| {
                let o = &recs[id as usize];
                (o.ns, o.name) == (ns, name)
            })
            .copied()
    }

    /// Stores a new object; `Err` when the arena cannot address another slot.
    fn insert(&mut self, hasher: &DefaultHashBuilder, obj: Obj) -> Result<Id, FullError> {
        let id = if self.free != NIL {
            let id = self.free;
            self.free = self.recs[id as usize].key;
            self.recs[id as usize] = obj;
            id
        } else {
            let id = u32::try_from(self.recs.len())
                .ok()
                .filter(|&id| id != NIL)
                .ok_or(FullError)?;
            self.recs.push(obj);
            id
        };
        let recs = &self.recs;
        self.table
            .insert_unique(hasher.hash_one((obj.ns, obj.name)), id, |&id| {
                let o = &recs[id as usize];
                hasher.hash_one((o.ns, o.name))
            });
        self.live += 1;
        Ok(id)
    }

    fn remove(&mut self, hasher: &DefaultHashBuilder, id: Id) -> Obj {
        let obj = self.recs[id as usize];
        if let Ok(entry) = self
            .table
            .find_entry(hasher.hash_one((obj.ns, obj.name)), |&m| m == id)
        {
            entry.remove();
        }
        self.free_multi(obj.more);
        self.recs[id as usize] = Obj {
            ns: NIL,
            name: NIL,
            key: self.free,
            more: NIL,
            uid: StoredUid::None,
            when: false,
            error: false,
        };
        self.free = id;
        self.live -= 1;
        obj
    }

    /// Stores a key list for an object: `(key, more)`.
    fn store_keys(&mut self, mut keys: Vec<u32>) -> (u32, u32) {
        match keys.len() {
            0 => (NIL, NIL),
            1 => (keys.pop().unwrap_or(NIL), NIL),
            _ => {
                let keys = keys.into_boxed_slice();
                match self.multi_free.pop() {
                    Some(slot) => {
                        self.multi[slot as usize] = keys;
                        (NIL, slot)
                    }
                    None => {
                        self.multi.push(keys);
                        // Fewer multi-key objects than objects, whose slots are u32.
                        (NIL, (self.multi.len() - 1) as u32)
                    }
                }
            }
        }
    }

    fn free_multi(&mut self, more: u32) {
        if more != NIL {
            self.multi[more as usize] = Box::default();
            self.multi_free.push(more);
        }
    }

    fn live(&self) -> impl Iterator<Item = (Id, &Obj)> + '_ {
        self.recs
            .iter()
            .enumerate()
            .filter(|(_, o)| o.name != NIL)
            .map(|(id, o)| (id as Id, o))
    }

    fn heap_bytes(&self) -> usize {
        self.recs.heap_bytes()
            + table_bytes(&self.table)
            + self.multi.capacity() * size_of::<Box<[u32]>>()
            + self.multi.iter().map(|m| m.len() * 4).sum::<usize>()
            + self.multi_free.capacity() * 4
            + self.buckets.capacity() * (size_of::<(Bucket, Posting)>() + 1)
            + self
                .buckets
                .values()
                .map(Posting::heap_bytes)
                .sum::<usize>()
    }
}

/// The incremental join of one `DependencyRule` (see the module docs).
#[derive(Debug, Clone)]
pub struct RuleJoin {
    config: RuleConfig,
    /// Same group and kind on both sides: an object must not be paired with itself.
    same_kind: bool,
    strs: StrInterner,
    hasher: DefaultHashBuilder,
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
            hasher: DefaultHashBuilder::default(),
            of: Objects::new(),
            by: Objects::new(),
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
        self.by.live().flat_map(move |(_, obj)| {
            self.matches(Side::By, obj)
                .into_iter()
                .map(move |m| self.relation(&self.of.recs[m as usize], obj))
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
        (self.of.live, self.by.live)
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
        self.side(side).live().map(|(_, o)| {
            let ns = (o.ns != NIL).then(|| self.strs.get(Sym(o.ns)));
            (ns, self.strs.get(Sym(o.name)))
        })
    }

    /// How many distinct strings (namespaces, names, keys, non-UUID UIDs) the join holds; zero
    /// once every object is removed.
    pub fn string_count(&self) -> usize {
        self.strs.len()
    }

    /// An estimate of the heap bytes held (interned strings, object records and tables,
    /// buckets), from capacities × record sizes.
    pub fn heap_bytes(&self) -> usize {
        self.strs.heap_bytes() + self.of.heap_bytes() + self.by.heap_bytes()
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

    /// The buckets `obj` on `side` sits in. Empty when out of every scope or when `when` does
    /// not hold: such an object is remembered but joins nothing.
    fn buckets(&self, side: Side, obj: &Obj) -> Vec<Bucket> {
        let scope = match self.config.scope {
            RuleScope::SameNamespace if obj.ns == NIL => return Vec::new(),
            RuleScope::SameNamespace => obj.ns,
            RuleScope::Cluster => NIL,
        };
        if !obj.when {
            return Vec::new();
        }
        if self.config.keyed {
            self.side(side)
                .keys(obj)
                .iter()
                .map(|&k| (scope, k))
                .collect()
        } else {
            vec![(scope, NIL)]
        }
    }

    /// The other side's objects related to `obj` on `side`. O(matches): one probe per key.
    fn matches(&self, side: Side, obj: &Obj) -> Vec<Id> {
        let other = self.side(match side {
            Side::Of => Side::By,
            Side::By => Side::Of,
        });
        let buckets = self.buckets(side, obj);
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for b in &buckets {
            let Some(posting) = other.buckets.get(b) else {
                continue;
            };
            for m in posting.iter() {
                // Both sides intern into one table: same symbols, same object.
                if self.same_kind && {
                    let o = &other.recs[m as usize];
                    (o.ns, o.name) == (obj.ns, obj.name)
                } {
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

    fn object_key(&self, side: Side, obj: &Obj) -> ObjectKey {
        let gk = self.kind(side);
        let ns = (obj.ns != NIL).then(|| self.strs.get(Sym(obj.ns)));
        ObjectKey::new(&gk.group, &gk.kind, ns, self.strs.get(Sym(obj.name)))
    }

    fn uid_string(&self, uid: StoredUid) -> Option<String> {
        uid.get(&self.strs).map(Cow::into_owned)
    }

    fn relation(&self, of: &Obj, by: &Obj) -> Relation {
        let mut r = Relation::uses(
            self.config.source.clone(),
            self.object_key(Side::Of, of),
            self.object_key(Side::By, by),
        )
        .with_reason(self.config.reason.clone())
        .with_replay(self.config.replay);
        r.of_uid = self.uid_string(of.uid);
        r.by_uid = self.uid_string(by.uid);
        r
    }

    /// The relations of `obj` on `side` with partners `ms` (slots of the other side).
    fn relations_with(&self, side: Side, obj: &Obj, ms: &[Id]) -> Vec<Relation> {
        ms.iter()
            .map(|&m| match side {
                Side::Of => self.relation(obj, &self.by.recs[m as usize]),
                Side::By => self.relation(&self.of.recs[m as usize], obj),
            })
            .collect()
    }

    /// The slot of `key` on `side`, if the join tracks it.
    fn find_id(&self, side: Side, key: &ObjectKey) -> Option<Id> {
        let ns = match &key.namespace {
            Some(ns) => self.strs.find(ns)?.0,
            None => NIL,
        };
        let name = self.strs.find(&key.name)?.0;
        self.side(side).find(&self.hasher, ns, name)
    }

    fn unbucket(&mut self, side: Side, id: Id, obj: &Obj) {
        for b in self.buckets(side, obj) {
            let objects = self.side_mut(side);
            if let Some(posting) = objects.buckets.get_mut(&b) {
                posting.remove(id);
                if posting.is_empty() {
                    objects.buckets.remove(&b);
                }
            }
        }
    }

    fn bucket(&mut self, side: Side, id: Id, obj: &Obj) {
        for b in self.buckets(side, obj) {
            self.side_mut(side)
                .buckets
                .entry(b)
                .or_insert_with(|| Posting::Small(Vec::new()))
                .insert(id);
        }
    }

    /// Releases the strings an object holds (its namespace's, name's and UID's; its keys too
    /// unless `keys` is `None`).
    fn release(&mut self, obj: &Obj, keys: Option<&[u32]>) {
        if obj.ns != NIL {
            self.strs.release(Sym(obj.ns));
        }
        self.strs.release(Sym(obj.name));
        if let StoredUid::Other(sym) = obj.uid {
            self.strs.release(sym_of(sym));
        }
        for &k in keys.unwrap_or_default() {
            self.strs.release(Sym(k));
        }
    }

    /// Interns the strings of a new object state; on failure gives back what it took.
    fn intern_all(
        &mut self,
        key: &ObjectKey,
        uid: Option<&str>,
        keys: &[String],
    ) -> Result<Interned, FullError> {
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
        let ((ns, name), uid_sym, mut key_syms) = self
            .intern_all(key, uid, keys.as_deref().unwrap_or_default())
            .map_err(JoinError::Full)?;
        let slot = self.side(side).find(&self.hasher, ns, name);
        // The old state leaves the buckets first; its key list is taken out of the side so that
        // the record can be reused in place.
        let old = match slot {
            Some(id) => {
                let o = self.side(side).recs[id as usize];
                let ms = self.matches(side, &o);
                self.unbucket(side, id, &o);
                let old_keys = self.side(side).keys(&o).to_vec();
                Some((id, o, old_keys, ms))
            }
            None => None,
        };
        // A failed evaluation keeps the last known keys and `when` (see module docs); the new
        // state then takes over the old state's key references instead of interning them again.
        let (when, keep_old_keys) = match (&old, error) {
            (Some((_, o, old_keys, _)), true) => {
                key_syms = old_keys.clone();
                (o.when, true)
            }
            (None, true) => (false, false),
            (_, false) => (when, false),
        };
        // Interning sorted strings does not sort their symbols.
        key_syms.sort_unstable();
        let (objects, hasher) = match side {
            Side::Of => (&mut self.of, &self.hasher),
            Side::By => (&mut self.by, &self.hasher),
        };
        if let Some((_, o, _, _)) = &old {
            objects.free_multi(o.more);
        }
        let (key_sym, more) = objects.store_keys(key_syms);
        let new = Obj {
            ns,
            name,
            key: key_sym,
            more,
            uid: uid_sym,
            when,
            error,
        };
        let id = match &old {
            Some((id, ..)) => {
                objects.recs[*id as usize] = new;
                *id
            }
            None => match objects.insert(hasher, new) {
                Ok(id) => id,
                Err(full) => {
                    let keys = objects.keys(&new).to_vec();
                    objects.free_multi(more);
                    self.release(&new, Some(&keys));
                    return Err(JoinError::Full(full));
                }
            },
        };
        self.bucket(side, id, &new);
        let new_matches = self.matches(side, &new);

        let delta = match &old {
            Some((_, o, _, old_matches)) if o.uid == new.uid => {
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
                    removed: self.relations_with(side, o, &gone),
                    added: self.relations_with(side, &new, &came),
                }
            }
            // A new incarnation (or a new object): every relation carries the new UID.
            Some((_, o, _, old_matches)) => Delta {
                removed: self.relations_with(side, o, old_matches),
                added: self.relations_with(side, &new, &new_matches),
            },
            None => Delta {
                removed: Vec::new(),
                added: self.relations_with(side, &new, &new_matches),
            },
        };
        if let Some((_, o, old_keys, _)) = &old {
            self.release(o, (!keep_old_keys).then_some(old_keys.as_slice()));
            self.errors -= usize::from(o.error);
        }
        self.errors += usize::from(new.error);
        self.len = self.len + delta.added.len() - delta.removed.len();
        Ok(delta)
    }

    fn remove(&mut self, side: Side, key: &ObjectKey) -> Delta {
        if !self.kind(side).matches(key) {
            return Delta::default();
        }
        let Some(id) = self.find_id(side, key) else {
            return Delta::default();
        };
        let old = self.side(side).recs[id as usize];
        let ms = self.matches(side, &old);
        self.unbucket(side, id, &old);
        let removed = self.relations_with(side, &old, &ms);
        let keys = self.side(side).keys(&old).to_vec();
        let hasher = self.hasher.clone();
        self.side_mut(side).remove(&hasher, id);
        self.release(&old, Some(&keys));
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
