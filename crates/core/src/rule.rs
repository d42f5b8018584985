//! Incremental relation derivation for one `DependencyRule`: the equi-join of its `of` and `by`
//! objects, updated per object, hosted by the [`RelationIndex`] it feeds.
//!
//! # Data model
//!
//! A [`RuleJoin`] knows, for each side of one rule, only what the join needs — never whole
//! objects:
//!
//! - per object: its key, its UID, its join keys (already evaluated by the CEL layer, which is
//!   not part of this crate), and for a `by` object whether `when` held;
//! - per side, **buckets** from (scope, key) to the objects carrying that key. The scope is the
//!   object's namespace under [`RuleScope::SameNamespace`] and one shared value under
//!   [`RuleScope::Cluster`]; a rule without keys uses one bucket per scope.
//!
//! A join lives *inside* the index ([`RelationIndex::add_join`]) because the index already
//! stores what a join would otherwise copy: an object is the index's key record (pinned while
//! the join holds it, relations or not), its UID the index's counted UID, its join keys the
//! index's interned strings. So an object costs the join a 20-byte record in a chunked arena
//! (its only key inline; two keys or more in a side list), an 8-byte entry (key id and slot) in
//! a table that finds it by key id, and its place in a bucket (a `Vec<u32>` of slots; a set past 512 members) — and a
//! `PersistentVolume` used by one pool is stored once for the join and its relation together.
//!
//! The join's relations are **not stored by the join**: the relations of an object are a pure
//! function of the current state (look its keys up in the other side's buckets). So an update
//! computes the object's relations before and after and changes only the difference, in
//! O(relations of that object), never O(objects). A join is *detached* until
//! [`JoinMut::attach`] puts its whole state into the index as the rule's relations (replacing
//! whatever the source held, e.g. a previous generation's); from then on every update changes
//! the index's relations of the rule directly. Replacing or deleting the rule's source by
//! other means (`apply`, `delete`, `reset`) detaches it again.
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
//! ([`JoinMut::error_of`] / [`JoinMut::error_by`]) keeps the keys and `when` it last had, so a
//! transient CEL error never releases a hold (fail closed); a new object with an error joins
//! nothing until it evaluates. Errors are counted for the rule's status.

use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashMap, HashSet, HashTable};

use crate::arena::Arena;
use crate::index::{FullError, IndexError, RelIds, RelationIndex};
use crate::intern::{Full, NIL, Sym, table_bytes};
use crate::key::{GroupKind, ObjectKey};
use crate::relation::{Relation, Source};
use crate::uid::UidId;

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
    /// `spec.enforcement: Warn`, carried by every relation.
    pub warn: bool,
}

/// What one update changed among the relations the rule derives (in the index too when the
/// join is attached).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JoinChange {
    /// Relations that now exist.
    pub added: usize,
    /// Relations that no longer exist.
    pub removed: usize,
}

impl JoinChange {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added == 0 && self.removed == 0
    }
}

/// Why an update was refused, or only half done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinError {
    /// The object is not of the kind this side of the rule expects: a routing bug upstream.
    /// Nothing changed.
    #[error("{key} is not a {expected}, the rule's `{side}` kind")]
    WrongKind {
        /// The object.
        key: Box<ObjectKey>,
        /// The kind the side expects.
        expected: Box<GroupKind>,
        /// `of` or `by`.
        side: &'static str,
    },
    /// The index has no room for the object's strings, key or UID. Nothing changed.
    #[error("rule join is full")]
    Full(#[source] FullError),
    /// The join took the update, but the index had no room for a relation it derives: the
    /// rule's relations were removed from the index and the join detached. Attach it again
    /// once there is room.
    #[error("relation index is full; the rule's relations were removed and its join detached")]
    Detached(#[source] FullError),
}

/// A join in a [`RelationIndex`] ([`RelationIndex::add_join`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JoinId(u32);

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

    fn other(self) -> Side {
        match self {
            Side::Of => Side::By,
            Side::By => Side::Of,
        }
    }
}

/// An object of one side: its slot in that side's arena.
type Id = u32;
/// A bucket: (namespace under `SameNamespace`, else `NIL`; key, or `NIL` without keys).
type Bucket = (u32, u32);

/// One object, packed (16 bytes). Free records have `key == NIL` and chain through `jkey`.
#[derive(Debug, Clone, Copy)]
struct Obj {
    /// The index's key id (pinned while the object is here).
    key: u32,
    /// The only join key (a symbol), or `NIL`; most objects have one (a pool name), so it is
    /// stored inline.
    jkey: u32,
    /// Low 30 bits: with two keys or more (then `jkey` is `NIL`), a slot of
    /// [`Objects::multi`], else [`NO_MORE`]. Bit 31: `when` held (always true for `of` objects
    /// that evaluated; false for an object whose first evaluation failed, so that it joins
    /// nothing even in a rule without keys). Bit 30: the last evaluation failed.
    flags: u32,
    uid: UidId,
}

const WHEN: u32 = 1 << 31;
const ERROR: u32 = 1 << 30;
const NO_MORE: u32 = ERROR - 1;

impl Obj {
    fn new(key: u32, (jkey, more): (u32, u32), uid: UidId, when: bool, error: bool) -> Self {
        let flags = more | if when { WHEN } else { 0 } | if error { ERROR } else { 0 };
        Self {
            key,
            jkey,
            flags,
            uid,
        }
    }

    /// The slot of the key list, or `NIL`.
    fn more(&self) -> u32 {
        match self.flags & NO_MORE {
            NO_MORE => NIL,
            slot => slot,
        }
    }

    fn when(&self) -> bool {
        self.flags & WHEN != 0
    }

    fn error(&self) -> bool {
        self.flags & ERROR != 0
    }
}

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
/// key id through a table of their `u32` slots, and the key buckets.
#[derive(Debug, Clone, Default)]
struct Objects {
    recs: Arena<Obj>,
    free: u32,
    live: usize,
    /// Each object's slot, found by its key id. The key is kept beside the slot, so that a
    /// lookup and a growing table's rehash read the table alone: through the record, one
    /// cache miss per object, 1.3 ms under the write lock for the doubling at 57,000 objects.
    table: HashTable<(u32, Id)>,
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
        if obj.more() != NIL {
            &self.multi[obj.more() as usize]
        } else if obj.jkey == NIL {
            &[]
        } else {
            std::slice::from_ref(&obj.jkey)
        }
    }

    fn find(&self, hasher: &DefaultHashBuilder, key: u32) -> Option<Id> {
        self.table
            .find(hasher.hash_one(key), |&(k, _)| k == key)
            .map(|&(_, id)| id)
    }

    /// Stores a new object; `Err` when the arena cannot address another slot.
    fn insert(&mut self, hasher: &DefaultHashBuilder, obj: Obj) -> Result<Id, FullError> {
        let id = if self.free != NIL {
            let id = self.free;
            self.free = self.recs[id as usize].jkey;
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
        self.table
            .insert_unique(hasher.hash_one(obj.key), (obj.key, id), |&(key, _)| {
                hasher.hash_one(key)
            });
        self.live += 1;
        Ok(id)
    }

    fn remove(&mut self, hasher: &DefaultHashBuilder, id: Id) -> Obj {
        let obj = self.recs[id as usize];
        if let Ok(entry) = self
            .table
            .find_entry(hasher.hash_one(obj.key), |&(_, m)| m == id)
        {
            entry.remove();
        }
        self.free_multi(obj.more());
        self.recs[id as usize] = Obj::new(NIL, (self.free, NO_MORE), NIL, false, false);
        self.free = id;
        self.live -= 1;
        obj
    }

    /// Whether another key list fits (its slot must stay below [`NO_MORE`]).
    fn has_room_for_keys(&self) -> bool {
        !self.multi_free.is_empty() || self.multi.len() < NO_MORE as usize
    }

    /// Stores a key list for an object: `(jkey, more)` for [`Obj::new`]. A list of two keys or
    /// more needs [`Objects::has_room_for_keys`].
    fn store_keys(&mut self, mut keys: Vec<u32>) -> (u32, u32) {
        match keys.len() {
            0 => (NIL, NO_MORE),
            1 => (keys.pop().unwrap_or(NIL), NO_MORE),
            _ => {
                let keys = keys.into_boxed_slice();
                match self.multi_free.pop() {
                    Some(slot) => {
                        self.multi[slot as usize] = keys;
                        (NIL, slot)
                    }
                    None => {
                        self.multi.push(keys);
                        // Below NO_MORE: see `has_room_for_keys`.
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
            .filter(|(_, o)| o.key != NIL)
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

/// The incremental join of one `DependencyRule` (see the module docs). It lives in a
/// [`RelationIndex`]: see [`RelationIndex::add_join`], [`JoinRef`] and [`JoinMut`].
#[derive(Debug, Clone)]
pub struct RuleJoin {
    config: RuleConfig,
    /// Same group and kind on both sides: an object must not be paired with itself.
    same_kind: bool,
    /// `config.reason`, interned in the index (one reference held by the join).
    reason: u32,
    hasher: DefaultHashBuilder,
    of: Objects,
    by: Objects,
    len: usize,
    errors: usize,
    /// The index holds the join's relations as its source's, and updates change them there.
    pub(crate) attached: bool,
    /// While attached in steps ([`JoinMut::attach_step`]): the hidden source (see
    /// `RelationIndex::hidden_source`) taking the join's relations, `NIL` otherwise.
    pub(crate) staging: u32,
    /// While attached in steps: the `by` objects in slots below this one have their relations
    /// in `staging`, and updates change them there; the others are linked when reached.
    cursor: Id,
}

/// A join removed by [`RelationIndex::remove_join_in_steps`] whose objects are still being
/// released.
#[derive(Debug, Clone)]
pub(crate) struct DroppingJoin {
    join: Box<RuleJoin>,
    /// Releasing the `by` side (the `of` side is done).
    by: bool,
    /// The next object slot of that side to release.
    cursor: usize,
}

impl DroppingJoin {
    /// Releases objects until `left` (decremented per object) runs out; returns whether the
    /// join is all released (its reason too).
    pub(crate) fn release_step(&mut self, ix: &mut RelationIndex, left: &mut usize) -> bool {
        loop {
            let objects = if self.by {
                &self.join.by
            } else {
                &self.join.of
            };
            while self.cursor < objects.recs.len() {
                if *left == 0 {
                    return false;
                }
                let o = objects.recs[self.cursor];
                self.cursor += 1;
                if o.key == NIL {
                    continue;
                }
                RuleJoin::release(ix, o.uid, objects.keys(&o));
                ix.unpin_key(o.key);
                *left -= 1;
            }
            if self.by {
                break;
            }
            (self.by, self.cursor) = (true, 0);
        }
        ix.strs.release(Sym(self.join.reason));
        true
    }
}

/// What one [`JoinMut::attach_step`] left to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachStep {
    /// More steps are needed (the write lock may be released between them).
    More,
    /// The join is attached and the previous generation's relations are gone; the source now
    /// holds this many relations.
    Done(usize),
}

/// What the CEL layer made of one object: its keys and `when`, or a failure.
enum Eval {
    Ok {
        keys: Option<Vec<String>>,
        when: bool,
    },
    Failed,
}

impl RelationIndex {
    /// Adds an empty, detached join for `config` (see the [`crate::rule`] module docs).
    pub fn add_join(&mut self, config: RuleConfig) -> Result<JoinId, JoinError> {
        let reason = self
            .strs
            .intern(&config.reason)
            .map_err(|full| JoinError::Full(full.into()))?;
        let join = Box::new(RuleJoin {
            same_kind: config.of == config.by,
            config,
            reason: reason.0,
            hasher: DefaultHashBuilder::default(),
            of: Objects::new(),
            by: Objects::new(),
            len: 0,
            errors: 0,
            attached: false,
            staging: NIL,
            cursor: 0,
        });
        let slot = match self.joins.iter().position(Option::is_none) {
            Some(slot) => {
                self.joins[slot] = Some(join);
                slot
            }
            None => {
                self.joins.push(Some(join));
                self.joins.len() - 1
            }
        };
        match u32::try_from(slot) {
            Ok(id) => Ok(JoinId(id)),
            Err(_) => {
                self.remove_join(JoinId(u32::MAX));
                Err(JoinError::Full(FullError))
            }
        }
    }

    /// Drops a join and everything it holds of the index (its objects' keys, UIDs and
    /// strings). The relations it put in the index stay, as its source's: delete the source
    /// too when the rule is gone. Returns whether the join existed.
    pub fn remove_join(&mut self, id: JoinId) -> bool {
        let Some(join) = self.joins.get_mut(id.0 as usize).and_then(Option::take) else {
            return false;
        };
        if join.staging != NIL {
            // Half a generation: the previous one is still whole under the source.
            self.drop_hidden_source(join.staging);
        }
        for objects in [&join.of, &join.by] {
            for (_, o) in objects.live() {
                RuleJoin::release(self, o.uid, objects.keys(o));
                self.unpin_key(o.key);
            }
        }
        self.strs.release(Sym(join.reason));
        while self.joins.last().is_some_and(Option::is_none) {
            self.joins.pop();
        }
        true
    }

    /// [`RelationIndex::remove_join`] in O(1): the join leaves its slot at once (its id may be
    /// reused, it is fed nothing more, a half-attached generation of it stops counting as
    /// `remove_join` drops it), and what it holds of the index — its objects' keys, UIDs and
    /// strings, 100,000 objects for a rule over as many (0.7 ms) — is released later, `budget`
    /// objects at a time, by [`RelationIndex::release_step`], so that the caller can release
    /// the write lock between steps. Nothing a decision reads depends on those: keys only a
    /// join holds are in no relation. Returns whether the join existed.
    pub fn remove_join_in_steps(&mut self, id: JoinId) -> bool {
        let Some(join) = self.joins.get_mut(id.0 as usize).and_then(Option::take) else {
            return false;
        };
        if join.staging != NIL {
            self.kill_source(join.staging);
        }
        while self.joins.last().is_some_and(Option::is_none) {
            self.joins.pop();
        }
        self.queue_dropping(DroppingJoin {
            join,
            by: false,
            cursor: 0,
        });
        true
    }

    /// A join, to read.
    pub fn join(&self, id: JoinId) -> Option<JoinRef<'_>> {
        let join = self.joins.get(id.0 as usize)?.as_deref()?;
        Some(JoinRef { index: self, join })
    }

    /// A join, to update.
    pub fn join_mut(&mut self, id: JoinId) -> Option<JoinMut<'_>> {
        self.joins.get(id.0 as usize)?.as_ref()?;
        Some(JoinMut {
            index: self,
            slot: id.0 as usize,
        })
    }
}

/// A join, borrowed from its index to read.
#[derive(Debug, Clone, Copy)]
pub struct JoinRef<'a> {
    index: &'a RelationIndex,
    join: &'a RuleJoin,
}

impl<'a> JoinRef<'a> {
    /// The rule this join derives.
    pub fn config(&self) -> &'a RuleConfig {
        &self.join.config
    }

    /// How many relations the rule derives now (for its status).
    pub fn len(&self) -> usize {
        self.join.len
    }

    /// Whether the rule derives no relation.
    pub fn is_empty(&self) -> bool {
        self.join.len == 0
    }

    /// How many objects' last evaluation failed (for the rule's status).
    pub fn error_count(&self) -> usize {
        self.join.errors
    }

    /// How many `of` and `by` objects the join tracks.
    pub fn object_counts(&self) -> (usize, usize) {
        (self.join.of.live, self.join.by.live)
    }

    /// Whether the index holds the join's relations (see [`JoinMut::attach`]).
    pub fn is_attached(&self) -> bool {
        self.join.attached
    }

    /// The (namespace, name) of every `of` object the join tracks (for a relist: the ones a
    /// fresh list no longer holds are removed), borrowed: O(objects), no allocation.
    pub fn of_names(&self) -> impl Iterator<Item = (Option<&'a str>, &'a str)> + 'a {
        self.names(&self.join.of)
    }

    /// The (namespace, name) of every `by` object the join tracks.
    pub fn by_names(&self) -> impl Iterator<Item = (Option<&'a str>, &'a str)> + 'a {
        self.names(&self.join.by)
    }

    fn names(&self, objects: &'a Objects) -> impl Iterator<Item = (Option<&'a str>, &'a str)> + 'a {
        let index = self.index;
        objects.live().map(move |(_, o)| {
            let k = index.key_by_id(o.key);
            (k.namespace, k.name)
        })
    }

    /// Every relation the rule derives now, owned, one at a time (for a check, a picture or a
    /// test: an attached join's relations are in the index already).
    pub fn relations(&self) -> impl Iterator<Item = Relation> + 'a {
        let (index, join) = (self.index, self.join);
        join.by.live().flat_map(move |(_, by)| {
            join.matches(index, Side::By, by)
                .into_iter()
                .map(move |m| join.relation(index, &join.of.recs[m as usize], by))
        })
    }

    /// The heap bytes of the join's own structures (object records, tables, buckets); the
    /// keys, UIDs and strings it shares with the index are counted by the index.
    pub fn heap_bytes(&self) -> usize {
        self.join.heap_bytes()
    }
}

/// A join, borrowed from its index to update. Every update is O(relations of the object
/// before and after), never O(objects).
#[derive(Debug)]
pub struct JoinMut<'a> {
    index: &'a mut RelationIndex,
    slot: usize,
}

impl JoinMut<'_> {
    /// Runs `f` on the join taken out of its slot, so that it can change the index too.
    fn with<R>(&mut self, f: impl FnOnce(&mut RuleJoin, &mut RelationIndex) -> R) -> Option<R> {
        let mut join = self.index.joins.get_mut(self.slot)?.take()?;
        let out = f(&mut join, self.index);
        self.index.joins[self.slot] = Some(join);
        Some(out)
    }

    /// An `of` object was added or changed; `keys` are its evaluated `keys.of`. Fails,
    /// changing nothing, when `key` is not of the rule's `of` kind or the index is full.
    pub fn upsert_of(
        &mut self,
        key: &ObjectKey,
        uid: Option<&str>,
        keys: Option<Vec<String>>,
    ) -> Result<JoinChange, JoinError> {
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
    ) -> Result<JoinChange, JoinError> {
        self.upsert(Side::By, key, uid, Eval::Ok { keys, when })
    }

    /// An `of` object was added or changed but its CEL failed: it keeps its last keys.
    pub fn error_of(
        &mut self,
        key: &ObjectKey,
        uid: Option<&str>,
    ) -> Result<JoinChange, JoinError> {
        self.upsert(Side::Of, key, uid, Eval::Failed)
    }

    /// A `by` object was added or changed but its CEL failed: it keeps its last keys and `when`.
    pub fn error_by(
        &mut self,
        key: &ObjectKey,
        uid: Option<&str>,
    ) -> Result<JoinChange, JoinError> {
        self.upsert(Side::By, key, uid, Eval::Failed)
    }

    /// An `of` object is gone. Unknown objects (and objects of another kind) change nothing.
    pub fn remove_of(&mut self, key: &ObjectKey) -> JoinChange {
        self.with(|j, ix| j.remove(ix, Side::Of, key))
            .unwrap_or_default()
    }

    /// A `by` object is gone (not merely deleting).
    pub fn remove_by(&mut self, key: &ObjectKey) -> JoinChange {
        self.with(|j, ix| j.remove(ix, Side::By, key))
            .unwrap_or_default()
    }

    /// Puts the join's relations in the index as its source's, replacing what the source held
    /// (a previous generation's, say), and attaches the join: from now on its updates change
    /// the index. Other joins of the same source are detached. Returns how many relations the
    /// source now has. When the index is full the source is left empty and the join detached.
    pub fn attach(&mut self) -> Result<usize, IndexError> {
        loop {
            match self.attach_step(usize::MAX)? {
                AttachStep::More => {}
                AttachStep::Done(n) => return Ok(n),
            }
        }
    }

    /// Makes room for `of` and `by` objects (a previous generation's
    /// [`JoinRef::object_counts`], say) so that feeding them grows no table: a table of
    /// 100,000 objects doubling rehashes them all in one update, 2-8 ms under the write lock
    /// (docs/benchmarks.md, "Issue 20, continued"). A hint too small or too large only costs
    /// that growth, or the unused room.
    pub fn reserve(&mut self, of: usize, by: usize) {
        self.with(|j, _| {
            let hasher = j.hasher.clone();
            for (objects, n) in [(&mut j.of, of), (&mut j.by, by)] {
                objects
                    .table
                    .reserve(n.saturating_sub(objects.live), |&(key, _)| {
                        hasher.hash_one(key)
                    });
            }
        });
    }

    /// [`JoinMut::attach`] in steps of about `budget` relations each (linked, or removed of the
    /// previous generation), so that the caller can release the index's write lock between
    /// them: at 100,000 relations one `attach` holds it for 10–25 ms (docs/benchmarks.md).
    ///
    /// Until the last step, the new generation's relations go into a hidden source and the
    /// previous generation's stay under the rule's: a DELETE is refused if either holds the
    /// object (never less protection than before or after). The step that links the last
    /// relation makes the new ones the rule's, in O(1); the old ones are then removed over the
    /// next steps. Updates fed in between change the relations of the objects already linked,
    /// as they do once attached. Call until [`AttachStep::Done`]; an error is as `attach`'s.
    pub fn attach_step(&mut self, budget: usize) -> Result<AttachStep, IndexError> {
        self.with(|j, ix| j.attach_step(ix, budget))
            .unwrap_or(Ok(AttachStep::Done(0)))
    }

    fn upsert(
        &mut self,
        side: Side,
        key: &ObjectKey,
        uid: Option<&str>,
        eval: Eval,
    ) -> Result<JoinChange, JoinError> {
        self.with(|j, ix| j.upsert(ix, side, key, uid, eval))
            .unwrap_or(Ok(JoinChange::default()))
    }
}

impl RuleJoin {
    /// The rule this join derives.
    pub fn config(&self) -> &RuleConfig {
        &self.config
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.of.heap_bytes() + self.by.heap_bytes()
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
    fn buckets(&self, ix: &RelationIndex, side: Side, obj: &Obj) -> Vec<Bucket> {
        let ns = ix.key_namespace(obj.key);
        let scope = match self.config.scope {
            RuleScope::SameNamespace if ns == NIL => return Vec::new(),
            RuleScope::SameNamespace => ns,
            RuleScope::Cluster => NIL,
        };
        if !obj.when() {
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
    fn matches(&self, ix: &RelationIndex, side: Side, obj: &Obj) -> Vec<Id> {
        let other = self.side(side.other());
        let buckets = self.buckets(ix, side, obj);
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for b in &buckets {
            let Some(posting) = other.buckets.get(b) else {
                continue;
            };
            for m in posting.iter() {
                // Both sides hold the index's key ids: same id, same object.
                if self.same_kind && other.recs[m as usize].key == obj.key {
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

    /// `(of, by)` objects of the pair of `obj` on `side` with partner `m`.
    fn pair<'s>(&'s self, side: Side, obj: &'s Obj, m: Id) -> (&'s Obj, &'s Obj) {
        match side {
            Side::Of => (obj, &self.by.recs[m as usize]),
            Side::By => (&self.of.recs[m as usize], obj),
        }
    }

    fn relation(&self, ix: &RelationIndex, of: &Obj, by: &Obj) -> Relation {
        let mut r = Relation::uses(
            self.config.source.clone(),
            ix.key_by_id(of.key).to_key(),
            ix.key_by_id(by.key).to_key(),
        )
        .with_reason(self.config.reason.clone())
        .with_replay(self.config.replay)
        .with_warn(self.config.warn);
        r.of_uid = ix.uids.get(&ix.strs, of.uid).map(|u| u.into_owned());
        r.by_uid = ix.uids.get(&ix.strs, by.uid).map(|u| u.into_owned());
        r
    }

    /// Puts the relation of `of` and `by` in the index under source `src`.
    fn link(&self, ix: &mut RelationIndex, src: u32, of: &Obj, by: &Obj) -> Result<(), FullError> {
        ix.strs.retain(Sym(self.reason));
        ix.uids.retain(&mut ix.strs, of.uid);
        ix.uids.retain(&mut ix.strs, by.uid);
        ix.link(
            src,
            RelIds {
                of: of.key,
                by: by.key,
                reason: self.reason,
                of_uid: of.uid,
                by_uid: by.uid,
                replay: self.config.replay,
                warn: self.config.warn,
            },
        )
    }

    fn unbucket(&mut self, ix: &RelationIndex, side: Side, id: Id, obj: &Obj) {
        for b in self.buckets(ix, side, obj) {
            let objects = self.side_mut(side);
            if let Some(posting) = objects.buckets.get_mut(&b) {
                posting.remove(id);
                if posting.is_empty() {
                    objects.buckets.remove(&b);
                }
            }
        }
    }

    fn bucket(&mut self, ix: &RelationIndex, side: Side, id: Id, obj: &Obj) {
        for b in self.buckets(ix, side, obj) {
            self.side_mut(side)
                .buckets
                .entry(b)
                .or_insert_with(|| Posting::Small(Vec::new()))
                .insert(id);
        }
    }

    /// Releases what an object state holds of the index: its UID and its join keys (the key
    /// record's pin is the caller's business).
    fn release(ix: &mut RelationIndex, uid: UidId, keys: &[u32]) {
        ix.uids.release(&mut ix.strs, uid);
        for &k in keys {
            ix.strs.release(Sym(k));
        }
    }

    /// Interns a new state's UID and keys; on failure gives back what it took.
    fn intern_state(
        ix: &mut RelationIndex,
        uid: Option<&str>,
        keys: &[String],
    ) -> Result<(UidId, Vec<u32>), FullError> {
        let uid = ix.uids.store(&mut ix.strs, uid)?;
        let mut syms = Vec::with_capacity(keys.len());
        for k in keys {
            match ix.strs.intern(k) {
                Ok(s) => syms.push(s.0),
                Err(full) => {
                    Self::release(ix, uid, &syms);
                    return Err(full.into());
                }
            }
        }
        Ok((uid, syms))
    }

    fn upsert(
        &mut self,
        ix: &mut RelationIndex,
        side: Side,
        key: &ObjectKey,
        uid: Option<&str>,
        eval: Eval,
    ) -> Result<JoinChange, JoinError> {
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
        let kid = ix.intern_key(key).map_err(JoinError::Full)?;
        let slot = self.side(side).find(&self.hasher, kid);
        let (uid_id, mut key_syms) =
            match Self::intern_state(ix, uid, keys.as_deref().unwrap_or_default()) {
                Ok(v) => v,
                Err(full) => {
                    ix.free_key_if_unused(kid);
                    return Err(JoinError::Full(full));
                }
            };
        if key_syms.len() > 1 && !self.side(side).has_room_for_keys() {
            Self::release(ix, uid_id, &key_syms);
            ix.free_key_if_unused(kid);
            return Err(JoinError::Full(FullError));
        }
        // The old state leaves the buckets first; its key list is taken out of the side so that
        // the record can be reused in place.
        let old = match slot {
            Some(id) => {
                let o = self.side(side).recs[id as usize];
                let ms = self.matches(ix, side, &o);
                self.unbucket(ix, side, id, &o);
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
                (o.when(), true)
            }
            (None, true) => (false, false),
            (_, false) => (when, false),
        };
        // Interning sorted strings does not sort their symbols.
        key_syms.sort_unstable();
        let hasher = self.hasher.clone();
        let objects = self.side_mut(side);
        if let Some((_, o, _, _)) = &old {
            objects.free_multi(o.more());
        }
        let stored = objects.store_keys(key_syms);
        let new = Obj::new(kid, stored, uid_id, when, error);
        let id = match &old {
            Some((id, ..)) => {
                objects.recs[*id as usize] = new;
                *id
            }
            None => {
                let pinned = ix.pin_key(kid);
                match pinned.and_then(|()| objects.insert(&hasher, new)) {
                    Ok(id) => id,
                    Err(full) => {
                        let keys = objects.keys(&new).to_vec();
                        objects.free_multi(new.more());
                        Self::release(ix, new.uid, &keys);
                        if pinned.is_ok() {
                            ix.unpin_key(kid);
                        } else {
                            ix.free_key_if_unused(kid);
                        }
                        return Err(JoinError::Full(full));
                    }
                }
            }
        };
        self.bucket(ix, side, id, &new);
        let new_matches = self.matches(ix, side, &new);

        // What left and what came, as partners on the other side; a new incarnation (another
        // UID) changes every relation, which carries the UID.
        let (gone, came) = match &old {
            Some((_, o, _, old_matches)) if ix.uids.same(o.uid, new.uid) => {
                let before: HashSet<Id> = old_matches.iter().copied().collect();
                let after: HashSet<Id> = new_matches.iter().copied().collect();
                (
                    old_matches
                        .iter()
                        .copied()
                        .filter(|m| !after.contains(m))
                        .collect(),
                    new_matches
                        .iter()
                        .copied()
                        .filter(|m| !before.contains(m))
                        .collect(),
                )
            }
            Some((_, _, _, old_matches)) => (old_matches.clone(), new_matches),
            None => (Vec::new(), new_matches),
        };
        let applied = if self.attached {
            self.apply_change(ix, side, &new, &gone, &came)
        } else if self.staging != NIL {
            let (gone, came) = self.linked_only(side, id, gone.clone(), came.clone());
            self.apply_change(ix, side, &new, &gone, &came)
        } else {
            Ok(())
        };
        if let Some((_, o, old_keys, _)) = &old {
            // Kept keys moved to the new state with their references.
            let released: &[u32] = if keep_old_keys { &[] } else { old_keys };
            Self::release(ix, o.uid, released);
            self.errors -= usize::from(o.error());
        }
        self.errors += usize::from(new.error());
        self.len = self.len + came.len() - gone.len();
        applied.map_err(JoinError::Detached)?;
        Ok(JoinChange {
            added: came.len(),
            removed: gone.len(),
        })
    }

    /// Changes the index's relations of an attached join for one object: removes those with
    /// the partners `gone`, then adds those with `came` (in that order: a new incarnation has
    /// the same pairs on both lists). If the index is full, the source is cleared and the join
    /// detached.
    fn apply_change(
        &mut self,
        ix: &mut RelationIndex,
        side: Side,
        obj: &Obj,
        gone: &[Id],
        came: &[Id],
    ) -> Result<(), FullError> {
        if gone.is_empty() && came.is_empty() {
            return Ok(());
        }
        let src = if self.staging != NIL {
            self.staging
        } else {
            match ix.source_id(&self.config.source) {
                Ok(src) => src,
                Err(full) => {
                    self.detach(ix);
                    return Err(full);
                }
            }
        };
        for &m in gone {
            let (of, by) = self.pair(side, obj, m);
            ix.unlink_pair(src, of.key, by.key);
        }
        for &m in came {
            let (of, by) = self.pair(side, obj, m);
            if let Err(full) = self.link(ix, src, of, by) {
                self.detach(ix);
                return Err(full);
            }
        }
        ix.free_source_if_empty(src);
        Ok(())
    }

    fn detach(&mut self, ix: &mut RelationIndex) {
        if let Some(src) = ix.source_id_if_any(&self.config.source) {
            ix.clear_source(src);
        }
        if self.staging != NIL {
            ix.drop_hidden_source(std::mem::replace(&mut self.staging, NIL));
        }
        self.attached = false;
    }

    /// Whether the pair with the `by` object in slot `by` has its relation in the index.
    fn linked(&self, by: Id) -> bool {
        self.attached || (self.staging != NIL && by < self.cursor)
    }

    /// Of an object's partners that left and came, those whose relation is (to be) in the
    /// index: all once attached; while attaching, those with a `by` object already reached.
    fn linked_only(&self, side: Side, id: Id, gone: Vec<Id>, came: Vec<Id>) -> (Vec<Id>, Vec<Id>) {
        if self.attached {
            return (gone, came);
        }
        let keep = |m: &Id| self.linked(if side == Side::By { id } else { *m });
        (
            gone.into_iter().filter(keep).collect(),
            came.into_iter().filter(keep).collect(),
        )
    }

    fn remove(&mut self, ix: &mut RelationIndex, side: Side, key: &ObjectKey) -> JoinChange {
        if !self.kind(side).matches(key) {
            return JoinChange::default();
        }
        let Some(kid) = ix.find_key(key.as_key_ref()) else {
            return JoinChange::default();
        };
        let Some(id) = self.side(side).find(&self.hasher, kid) else {
            return JoinChange::default();
        };
        let old = self.side(side).recs[id as usize];
        let ms = self.matches(ix, side, &old);
        self.unbucket(ix, side, id, &old);
        let src = if self.staging != NIL {
            Some(self.staging)
        } else {
            ix.source_id_if_any(&self.config.source)
        };
        if (self.attached || self.staging != NIL)
            && !ms.is_empty()
            && let Some(src) = src
        {
            let (linked, _) = self.linked_only(side, id, ms.clone(), Vec::new());
            for &m in &linked {
                let (of, by) = self.pair(side, &old, m);
                ix.unlink_pair(src, of.key, by.key);
            }
            ix.free_source_if_empty(src);
        }
        let keys = self.side(side).keys(&old).to_vec();
        let hasher = self.hasher.clone();
        self.side_mut(side).remove(&hasher, id);
        Self::release(ix, old.uid, &keys);
        ix.unpin_key(kid);
        self.errors -= usize::from(old.error());
        self.len -= ms.len();
        JoinChange {
            added: 0,
            removed: ms.len(),
        }
    }

    fn attach_step(
        &mut self,
        ix: &mut RelationIndex,
        budget: usize,
    ) -> Result<AttachStep, IndexError> {
        let mut left = budget.max(1);
        if !self.attached {
            if self.staging == NIL {
                let source = self.config.source.clone();
                ix.detach_joins_of(&source);
                self.staging = ix.hidden_source(&source).map_err(IndexError::Full)?;
                self.cursor = 0;
            }
            let slots = self.by.recs.len();
            while (self.cursor as usize) < slots && left > 0 {
                let by = self.by.recs[self.cursor as usize];
                self.cursor += 1;
                if by.key == NIL {
                    continue;
                }
                for m in self.matches(ix, Side::By, &by) {
                    if let Err(full) = self.link(ix, self.staging, &self.of.recs[m as usize], &by) {
                        self.detach(ix);
                        return Err(IndexError::Full(full));
                    }
                    left = left.saturating_sub(1);
                }
            }
            if (self.cursor as usize) < slots {
                return Ok(AttachStep::More);
            }
            ix.promote_source(
                std::mem::replace(&mut self.staging, NIL),
                &self.config.source,
            );
            self.attached = true;
            if left == 0 {
                return Ok(AttachStep::More);
            }
        }
        if ix.retire_step(left) {
            Ok(AttachStep::Done(ix.source_len(&self.config.source)))
        } else {
            Ok(AttachStep::More)
        }
    }
}

impl From<Full> for JoinError {
    fn from(full: Full) -> Self {
        JoinError::Full(full.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_stay_small_and_flags_round_trip() {
        assert_eq!(size_of::<Obj>(), 16);
        for (more, when, error) in [(NO_MORE, true, false), (7, false, true), (0, true, true)] {
            let o = Obj::new(1, (2, more), 3, when, error);
            let slot = if more == NO_MORE { NIL } else { more };
            assert_eq!((o.more(), o.when(), o.error()), (slot, when, error));
        }
    }
}
