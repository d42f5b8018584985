//! The relation index: every relation Lien knows, by the object in use, by the user, and by source.
//!
//! # Data model
//!
//! The index is a plain synchronous struct, updated with [`RelationIndex::apply`] (replace what a
//! source contributes), [`RelationIndex::apply_delta`] (add and remove single relations of a
//! source), [`RelationIndex::delete`] (a source is gone) and [`RelationIndex::reset`] (a fresh
//! list after a watch restart) — and by the `DependencyRule` joins it hosts (`crate::rule`),
//! which change their rule's relations per object. The controller owns the writes; the webhook
//! reads under a shared lock.
//!
//! It is built to hold hundreds of thousands of relations in little memory, so nothing is stored
//! twice:
//!
//! - every repeated string (group, kind, namespace, reason, source name, a join's key,
//!   non-UUID UID) is interned once in a reference-counted [`StrInterner`];
//! - every object key is a 32-byte record (symbol ids, its name's place in a chunked text
//!   arena — names are unique per key, so interning them would only add a slot and a table
//!   entry — list heads and counts) in an arena, found through a hash table that stores only
//!   the record's `u32` id;
//! - every source is a similar record;
//! - every relation is a 48-byte record of ids; UIDs that are canonical UUIDs (all Kubernetes
//!   UIDs are) are kept as their 16 bytes in counted slots (`crate::uid`) that the relations of
//!   one object, and a join and its relations, share.
//!
//! Keys, relations and names live in chunked arenas (`arena.rs`) so that growth never doubles
//! them; freed records are reused through free lists.
//!
//! Relations hang off their `of` key, their `by` key and their source through **intrusive
//! doubly linked lists**. The source list is doubly linked so that one relation of a
//! `DependencyRule` deriving 100,000 of them is removed in O(1) after finding it (4 bytes per
//! relation buy that). So a lookup is one hash probe plus a walk over exactly the relations
//! asked for — O(1) in the size of the index — and removing a relation is O(1), even from an
//! object used by a hundred thousand others. Keys, sources and strings are freed as soon as the
//! last relation (or join) that mentions them goes, so the index does not grow with churn.
//!
//! Lookups hand out [`RelationRef`] views that borrow from the index; call
//! [`RelationRef::to_relation`] for an owned [`Relation`].
//!
//! # Released objects
//!
//! When the last relation protecting an object goes, the object still carries Lien's in-use
//! label until the leader's next write pass removes it, and a DELETE in that window reaches the
//! webhook with a label the index cannot explain. Without more, the webhook must confirm with
//! a live read — for a `DependencyRule` over 100,000 objects, a read of all of them. But this
//! index *saw* the relation go: [`RelationIndex::was_released`] remembers the keys whose last
//! relation it removed (the most recent [`RELEASED_CAPACITY`]; a key is forgotten when it is
//! protected again), so the webhook can tell "stale because I saw it released" from "labelled
//! by someone whose view I lack".

use std::borrow::Cow;
use std::collections::VecDeque;
use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashSet, HashTable};

use crate::arena::{Arena, TextArena};
use crate::intern::{Full, NIL, StrInterner, Sym, table_bytes};
use crate::key::{KeyRef, ObjectKey};
use crate::relation::{Relation, Source, SourceRef};
use crate::rule::RuleJoin;
use crate::uid::{UidId, UidProbe, UidStore};

/// Why an update was refused. The index is unchanged when `apply` or `reset` fails validation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    /// A relation passed to `apply` names a different source than the one being applied.
    #[error("relation of {of} belongs to {found}, not to {expected}")]
    SourceMismatch {
        /// The source being applied.
        expected: Box<Source>,
        /// The source the relation names.
        found: Box<Source>,
        /// The relation's `of`, to find it.
        of: Box<ObjectKey>,
    },
    /// A relation without `by` must give a reason: a protection must say why.
    #[error("protection of {of} by {origin} has no reason")]
    MissingReason {
        /// The protected object.
        of: Box<ObjectKey>,
        /// Its source (not named `source`: thiserror reserves that for the error's cause).
        origin: Box<Source>,
    },
    /// The index ran out of 32-bit ids or string space. The source being applied was removed,
    /// so the index stays consistent (it under-protects that source until a `reset`).
    #[error("relation index is full")]
    Full(#[source] FullError),
}

/// The index addresses relations, keys and strings with 32-bit ids; this is what running out
/// of them looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("more than 2^32 - 1 relations, keys or sources, or 4 GiB of interned text")]
pub struct FullError;

/// Memory the index no longer uses, to be freed where no lock is held: dropping it frees it
/// (see [`RelationIndex::take_garbage`]).
#[must_use = "drop it after releasing the index's write lock, or it is freed under the lock"]
#[derive(Debug, Default)]
pub struct Garbage(Vec<crate::rule::DroppingJoin>);

impl Garbage {
    /// Whether there is nothing to free.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many removed joins it holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

impl From<Full> for FullError {
    fn from(_: Full) -> Self {
        FullError
    }
}

/// One relation, packed. Free records have `source == NIL` and chain through `src_next`.
#[derive(Debug, Clone, Copy)]
struct Rel {
    of: u32,
    /// `NIL` for a protection.
    by: u32,
    source: u32,
    /// The reason (a `Sym`, or [`NO_REASON`]) in the low 30 bits, `replay` in the top bit and
    /// `warn` in the next: packing the flags keeps the record at 48 bytes instead of 52.
    reason_replay: u32,
    of_prev: u32,
    of_next: u32,
    by_prev: u32,
    by_next: u32,
    src_prev: u32,
    src_next: u32,
    of_uid: UidId,
    by_uid: UidId,
}

/// `replay` in [`Rel::reason_replay`].
const REPLAY: u32 = 1 << 31;
/// `warn` in [`Rel::reason_replay`].
const WARN: u32 = 1 << 30;
/// No reason, in [`Rel::reason_replay`]; reasons are symbols below it.
const NO_REASON: u32 = WARN - 1;

impl Rel {
    /// The reason's symbol, or `NIL`.
    fn reason(&self) -> u32 {
        match self.reason_replay & !(REPLAY | WARN) {
            NO_REASON => NIL,
            sym => sym,
        }
    }

    fn replay(&self) -> bool {
        self.reason_replay & REPLAY != 0
    }

    fn warn(&self) -> bool {
        self.reason_replay & WARN != 0
    }

    /// The previous and next relation on list `link`.
    fn neighbours(&self, link: Link) -> (u32, u32) {
        match link {
            Link::Of => (self.of_prev, self.of_next),
            Link::By => (self.by_prev, self.by_next),
            Link::Source => (self.src_prev, self.src_next),
        }
    }

    /// The links to the previous and next relation on list `link`, to rewrite.
    fn link_mut(&mut self, link: Link) -> (&mut u32, &mut u32) {
        match link {
            Link::Of => (&mut self.of_prev, &mut self.of_next),
            Link::By => (&mut self.by_prev, &mut self.by_next),
            Link::Source => (&mut self.src_prev, &mut self.src_next),
        }
    }
}

/// One object key, as symbols and its name's place in [`RelationIndex::names`], with the heads
/// of its relation lists. A key lives exactly as long as some relation mentions it or a join
/// pins it. Free records have `group == NIL` and chain through `of_head`.
#[derive(Debug, Clone, Copy)]
struct Key {
    group: u32,
    kind: u32,
    /// `NIL` for cluster-scoped objects.
    namespace: u32,
    /// The name's offset in `names`: names are unique per key, so interning them would only
    /// add a slot and a table entry (~18 bytes) per key.
    name: u32,
    name_len: u16,
    /// How many rule joins hold this key as one of their objects (`crate::rule`): such a key
    /// lives on without relations, and a join refers to it instead of its own copy.
    pins: u16,
    of_head: u32,
    by_head: u32,
    /// How many relations have this key as `of`, so the count is O(1).
    of_len: u32,
}

impl Key {
    const FREE: Key = Key {
        group: NIL,
        kind: NIL,
        namespace: NIL,
        name: 0,
        name_len: 0,
        pins: 0,
        of_head: NIL,
        by_head: NIL,
        of_len: 0,
    };
}

/// The name of key `k`, from the names buffer.
fn key_name<'a>(names: &'a TextArena, k: &Key) -> &'a str {
    names.get(k.name, usize::from(k.name_len))
}

/// A key's 32-bit hash (see [`KeySlot`]).
fn key_hash(hasher: &DefaultHashBuilder, names: &TextArena, k: &Key) -> u32 {
    name_hash(hasher, (k.group, k.kind, k.namespace), key_name(names, k))
}

/// The 32-bit hash of a key given by its interned group, kind and namespace and its name.
fn name_hash(hasher: &DefaultHashBuilder, syms: (u32, u32, u32), name: &str) -> u32 {
    // The low half of a 64-bit hash: as good as the whole for a table of under 2^32 keys.
    hasher.hash_one((syms.0, syms.1, syms.2, name)) as u32
}

/// A key's entry in the key table: its id and its hash, kept so that growing the table
/// rehashes from the entries alone. Recomputing a key's hash reads its record and its name, out
/// of cache: ~100 ns a key, 6 ms under the write lock for the doubling at 57,000 keys; from the
/// entry, a few ns.
#[derive(Debug, Clone, Copy)]
struct KeySlot {
    id: u32,
    hash: u32,
}

impl KeySlot {
    /// The table's 64-bit hash for a 32-bit one: hashbrown places an entry by the low bits and
    /// tells entries in a group apart by the top 7, so both halves carry the hash.
    fn table_hash(hash: u32) -> u64 {
        (u64::from(hash) << 32) | u64::from(hash)
    }
}

const SRC_USAGE: u8 = 0;
const SRC_CLUSTER_USAGE: u8 = 1;
const SRC_RULE: u8 = 2;

/// One source. Free records have `name == NIL` and chain through `head`.
#[derive(Debug, Clone, Copy)]
struct Src {
    tag: u8,
    /// `NIL` unless `tag == SRC_USAGE`.
    namespace: u32,
    name: u32,
    head: u32,
    len: u32,
    /// Not findable by name: the next generation of a rule's relations while its join is
    /// attached in steps, or the previous one being removed in steps (`crate::rule`,
    /// `JoinMut::attach_step`). Its relations count as its rule's for decisions.
    hidden: bool,
    /// Deleted, its relations being freed a step at a time
    /// ([`RelationIndex::delete_in_steps`]): hidden, and its relations no longer count for
    /// anything (every lookup skips them) though they are still on their keys' lists.
    dead: bool,
    /// [`NOT_KEPT`], or the source is a Usage being deleted that Lien's finalizer keeps, at
    /// this position of its finalizers ([`RelationIndex::set_kept`]). A byte in what was
    /// padding: the record stays 20 bytes.
    kept: u8,
}

/// [`Src::kept`] of a source that is not being kept.
const NOT_KEPT: u8 = u8::MAX;

/// The symbol ids of a source, used as its hash input.
type SrcSyms = (u32, u32, u32, u32);

/// Every relation Lien knows; see the module documentation.
#[derive(Debug, Clone)]
pub struct RelationIndex {
    pub(crate) strs: StrInterner,
    pub(crate) uids: UidStore,
    keys: Arena<Key>,
    /// The keys' names, back to back; compacted once dead bytes outweigh live ones.
    names: TextArena,
    names_live: usize,
    key_table: HashTable<KeySlot>,
    key_free: u32,
    key_live: usize,
    srcs: Vec<Src>,
    src_table: HashTable<u32>,
    src_free: u32,
    src_live: usize,
    rels: Arena<Rel>,
    rel_free: u32,
    rel_live: usize,
    /// Per namespace (by symbol), the relations that hold its deletion; see [`Holding`].
    holding: hashbrown::HashMap<u32, Holding>,
    hasher: DefaultHashBuilder,
    /// Keys whose last relation this index removed and that have none since (see the module
    /// documentation), with their order of release for the bound.
    released: HashSet<ObjectKey>,
    released_order: VecDeque<ObjectKey>,
    /// The rules' joins (`crate::rule`), by [`crate::JoinId`]; `None` for a free slot. They
    /// live here because their objects are this index's keys, UIDs and strings.
    pub(crate) joins: Vec<Option<Box<RuleJoin>>>,
    /// Hidden sources whose relations are being removed a step at a time
    /// ([`RelationIndex::retire_step`]): a rule's previous generation, replaced, or a deleted
    /// source ([`Src::dead`]).
    retiring: Vec<u32>,
    /// How many relations belong to dead sources ([`Src::dead`]) and are still linked: while
    /// it is 0 (all but the few milliseconds after a rule's deletion) no lookup pays for
    /// skipping them.
    dead_rels: usize,
    /// Joins removed by [`RelationIndex::remove_join_in_steps`] whose objects are being
    /// released a step at a time ([`RelationIndex::retire_step`]).
    dropping: Vec<crate::rule::DroppingJoin>,
    /// Removed joins whose objects are all released but whose memory is not freed yet: see
    /// [`RelationIndex::take_garbage`].
    garbage: Vec<crate::rule::DroppingJoin>,
    /// Cycles inside namespaces being deleted, whose relations no longer block (see
    /// [`RelationIndex::set_broken_cycles`]): each member's cycle number, and the namespace each
    /// number belongs to. Empty but for a namespace stuck on a cycle.
    broken: hashbrown::HashMap<ObjectKey, u32>,
    broken_namespaces: hashbrown::HashMap<u32, String>,
    broken_next: u32,
}

/// How many released keys [`RelationIndex::was_released`] remembers: enough for every object
/// released within a write pass of a busy cluster, small enough (a few hundred KiB) to ignore.
pub const RELEASED_CAPACITY: usize = 4096;

/// The relations that hold a namespace's deletion: those that would keep a deleted namespace
/// `Terminating`, or that its deletion would silently end. A relation whose `of` is in the
/// namespace (and not one of Lien's own kinds, which are never protected) and whose `by` is not
/// — in another namespace or cluster-scoped —; and every protection (no `by`) of an object in
/// the namespace, whatever its source, plus a protection of a cluster-scoped object by a Usage
/// of the namespace: a protection has no user to go first, so the namespace's deletion would
/// delete what it protects, or take its Usage and lift it (issue 27). Relations whose user is
/// inside go with the namespace and only order its deletion. Kept as a set of relation ids per
/// namespace, maintained where relations are inserted and freed, so "what holds namespace X"
/// costs its answer, never a scan of the index.
#[derive(Debug, Clone, Default)]
struct Holding {
    rels: hashbrown::HashSet<u32>,
    /// How many of `rels` ask for a blocked DELETE to be replayed.
    replay: u32,
}

/// Lien's own API group: its objects are never protected, so relations of them never hold a
/// namespace (`lien_api::GROUP`; core does not depend on the API crate).
pub const LIEN_GROUP: &str = "lien.dev";

fn to_u32(n: usize) -> Result<u32, FullError> {
    u32::try_from(n).ok().filter(|&n| n != NIL).ok_or(FullError)
}

impl RelationIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self {
            strs: StrInterner::default(),
            uids: UidStore::default(),
            keys: Arena::default(),
            names: TextArena::default(),
            names_live: 0,
            key_table: HashTable::new(),
            key_free: NIL,
            key_live: 0,
            srcs: Vec::new(),
            src_table: HashTable::new(),
            src_free: NIL,
            src_live: 0,
            rels: Arena::default(),
            rel_free: NIL,
            rel_live: 0,
            holding: hashbrown::HashMap::new(),
            hasher: DefaultHashBuilder::default(),
            released: HashSet::new(),
            released_order: VecDeque::new(),
            joins: Vec::new(),
            retiring: Vec::new(),
            dead_rels: 0,
            dropping: Vec::new(),
            garbage: Vec::new(),
            broken: hashbrown::HashMap::new(),
            broken_namespaces: hashbrown::HashMap::new(),
            broken_next: 0,
        }
    }

    // ----- cycles broken inside a namespace being deleted -------------------------------------

    /// Replaces the cycles broken in `namespace` with `cycles` (each a group of objects of that
    /// namespace that use each other, as [`crate::cycles_in_namespace`] finds them; empty when
    /// the namespace is gone or no longer stuck).
    ///
    /// A namespace being deleted takes everything in it, so relations whose both ends are
    /// inside it protect nothing that will stay: they only order the deletions. A cycle of them
    /// cannot be ordered, and would keep the namespace `Terminating` forever. A relation between
    /// two members of one broken cycle made by a Usage of that namespace no longer blocks a
    /// DELETE ([`crate::decide_delete`]); every other relation — a DependencyRule's or a
    /// ClusterUsage's (an administrator's order, which the namespace's deletion must not drop),
    /// from outside the namespace, a protection, between members of different cycles — still
    /// does: a cycle of those keeps the namespace waiting, named
    /// ([`crate::unbreakable_cycles_in_namespace`]). The relations themselves stay in the index:
    /// they go when their sources do.
    pub fn set_broken_cycles(&mut self, namespace: &str, cycles: &[Vec<ObjectKey>]) {
        let old: Vec<u32> = self
            .broken_namespaces
            .iter()
            .filter(|(_, ns)| ns.as_str() == namespace)
            .map(|(&id, _)| id)
            .collect();
        if !old.is_empty() {
            self.broken.retain(|_, id| !old.contains(id));
            for id in old {
                self.broken_namespaces.remove(&id);
            }
        }
        for cycle in cycles {
            let id = self.broken_next;
            self.broken_next = self.broken_next.wrapping_add(1);
            self.broken_namespaces.insert(id, namespace.to_owned());
            for key in cycle {
                self.broken.insert(key.clone(), id);
            }
        }
    }

    /// Whether `r`, a relation holding `of`, is between two members of one broken cycle
    /// ([`RelationIndex::set_broken_cycles`]). O(1) when no cycle is broken.
    pub fn is_broken(&self, of: &ObjectKey, r: &RelationRef<'_>) -> bool {
        if self.broken.is_empty() {
            return false;
        }
        let (Some(cycle), Some(by)) = (self.broken.get(of), r.by()) else {
            return false;
        };
        // Only the namespace's own Usages give way: a DependencyRule or a ClusterUsage is an
        // administrator's order, which a namespace's deletion must not drop (issue 28).
        let own = matches!(r.source(), SourceRef::Usage { namespace, .. }
            if self.broken_namespaces.get(cycle).map(String::as_str) == Some(namespace));
        own && self.broken.get(&by.to_key()) == Some(cycle)
    }

    /// Whether this index itself can tell why `key` is free though it may still carry Lien's
    /// in-use label, so the webhook needs no live read to confirm it: the index removed the
    /// key's last relation ([`RelationIndex::was_released`]), or the key is a member of a cycle
    /// broken because its namespace is being deleted ([`RelationIndex::set_broken_cycles`]).
    pub fn knows_why_free(&self, key: &ObjectKey) -> bool {
        self.was_released(key) || self.broken.contains_key(key)
    }

    /// The cycles broken in `namespace`, each sorted, sorted.
    pub fn broken_cycles(&self, namespace: &str) -> Vec<Vec<ObjectKey>> {
        let mut groups: std::collections::BTreeMap<u32, Vec<ObjectKey>> = Default::default();
        for (key, id) in &self.broken {
            if self
                .broken_namespaces
                .get(id)
                .is_some_and(|ns| ns == namespace)
            {
                groups.entry(*id).or_default().push(key.clone());
            }
        }
        let mut out: Vec<Vec<ObjectKey>> = groups
            .into_values()
            .map(|mut g| {
                g.sort_unstable();
                g
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// Whether this index removed the last relation of `key` and has had none for it since
    /// (among the most recent [`RELEASED_CAPACITY`] such keys).
    pub fn was_released(&self, key: &ObjectKey) -> bool {
        self.released.contains(key)
            // Its last relations are a deleted source's, not freed yet: released as far as
            // anyone can tell, and noted so when they are freed.
            || (self.dead_rels > 0
                && self.find_key(key.as_key_ref()).is_some_and(|id| {
                    let k = &self.keys[id as usize];
                    k.of_len > 0 && self.first_live(k.of_head, Link::Of).is_none()
                }))
    }

    fn note_released(&mut self, key: u32) {
        let k = self.keys[key as usize];
        let key = self.key_ref(&k).to_key();
        if self.released.contains(&key) {
            return;
        }
        if self.released_order.len() >= RELEASED_CAPACITY {
            // Entries protected again since were taken out of the set only: skip them.
            while let Some(old) = self.released_order.pop_front() {
                if self.released.remove(&old) {
                    break;
                }
            }
        }
        self.released.insert(key.clone());
        self.released_order.push_back(key);
    }

    // ----- updates ---------------------------------------------------------------------------

    /// Replaces everything `source` contributes with `relations` (an empty set removes the
    /// source). Returns how many relations the source now has.
    ///
    /// Every relation must name `source` and every protection must have a reason; otherwise
    /// nothing changes. Applying the same set twice leaves the index as after the first time.
    pub fn apply(
        &mut self,
        source: &Source,
        relations: impl IntoIterator<Item = Relation>,
    ) -> Result<usize, IndexError> {
        let relations: Vec<Relation> = relations.into_iter().collect();
        validate(source, &relations)?;
        self.apply_stream(source, relations)
    }

    /// As [`RelationIndex::apply`], but reading `relations` one at a time instead of collecting
    /// them first, so that a large set never exists as a `Vec<Relation>` (100,000 relations
    /// with their strings are about 55 MiB). So validation happens as they arrive, and an
    /// invalid relation — like a full index — leaves the source removed (it holds nothing)
    /// rather than unchanged.
    pub fn apply_stream(
        &mut self,
        source: &Source,
        relations: impl IntoIterator<Item = Relation>,
    ) -> Result<usize, IndexError> {
        self.detach_joins_of(source);
        let mut relations = relations.into_iter().peekable();
        let src = match self.find_source(source.as_source_ref()) {
            Some(src) => src,
            None if relations.peek().is_none() => return Ok(0),
            None => self.insert_source(source).map_err(IndexError::Full)?,
        };
        self.replace_source(src, |index, src| {
            for relation in relations {
                validate(source, std::slice::from_ref(&relation))?;
                index
                    .insert_relation(src, &relation)
                    .map_err(IndexError::Full)?;
            }
            Ok(())
        })
    }

    /// Replaces the relations of source `src` with those `fill` adds. The new ones go in before
    /// the old ones are dropped, so that keys and strings they share stay interned instead of
    /// being freed and re-created. If `fill` fails the source is left empty (it holds nothing)
    /// and the error returned. Returns how many relations the source now has.
    pub(crate) fn replace_source(
        &mut self,
        src: u32,
        fill: impl FnOnce(&mut Self, u32) -> Result<(), IndexError>,
    ) -> Result<usize, IndexError> {
        let old = std::mem::replace(&mut self.srcs[src as usize].head, NIL);
        self.srcs[src as usize].len = 0;
        let filled = fill(self, src);
        self.unlink_chain(old);
        if let Err(e) = filled {
            self.clear_source(src);
            return Err(e);
        }
        let len = self.srcs[src as usize].len as usize;
        self.free_source_if_empty(src);
        Ok(len)
    }

    /// Removes everything `source` contributes. Returns how many relations went.
    pub fn delete(&mut self, source: &Source) -> usize {
        self.detach_joins_of(source);
        // A previous generation still being removed step by step goes at once.
        let retiring: Vec<u32> = self
            .retiring
            .iter()
            .copied()
            .filter(|&r| self.source_ref(&self.srcs[r as usize]) == source.as_source_ref())
            .collect();
        for r in retiring {
            self.drop_hidden_source(r);
        }
        let Some(src) = self.find_source(source.as_source_ref()) else {
            return 0;
        };
        self.clear_source(src)
    }

    /// [`RelationIndex::delete`] in O(1) (plus the source's other generations being replaced,
    /// a handful): the source is hidden and its relations stop counting at once — no lookup,
    /// decision, count or cycle sees them — and they are freed later, `budget` at a time, by
    /// [`RelationIndex::release_step`], so that the caller can release the write lock between
    /// steps (one `delete` of a rule's 100,000 relations holds it 11-22 ms, docs/benchmarks.md).
    ///
    /// The relations stop blocking at once rather than as they are freed because that is what
    /// the deletion means: the rule is gone, and a DELETE of an object only it held must be
    /// allowed now, exactly as after `delete` — not a few milliseconds later, in an order
    /// that depends on the step size. Returns how many relations went, as `delete`.
    pub fn delete_in_steps(&mut self, source: &Source) -> usize {
        let mut doomed = Vec::new();
        for join in self.joins.iter_mut().flatten() {
            if join.config().source == *source {
                join.attached = false;
                // A generation half attached dies with the source rather than being unlinked
                // here at once (it can be as large as the source).
                if join.staging != NIL {
                    doomed.push(std::mem::replace(&mut join.staging, NIL));
                }
            }
        }
        // A previous generation still being removed step by step stops counting too.
        doomed.extend(
            self.retiring
                .iter()
                .copied()
                .filter(|&r| self.source_ref(&self.srcs[r as usize]) == source.as_source_ref()),
        );
        let found = self.find_source(source.as_source_ref());
        let removed = found.map_or(0, |src| self.srcs[src as usize].len as usize);
        if let Some(src) = found {
            self.unlist_source(src);
            doomed.push(src);
        }
        for src in doomed {
            self.kill_source(src);
        }
        removed
    }

    /// Frees up to `budget` of what [`RelationIndex::delete_in_steps`],
    /// [`RelationIndex::remove_join_in_steps`] and an attach in steps (the replaced generation,
    /// `crate::JoinMut::attach_step`) left to free: relations, or a removed join's objects.
    /// Returns whether nothing is left. Between steps the index answers as if it were all
    /// freed already (see `delete_in_steps`).
    pub fn release_step(&mut self, budget: usize) -> bool {
        self.retire_step(budget)
    }

    /// Whether [`RelationIndex::release_step`] has anything left to free.
    pub fn has_pending_release(&self) -> bool {
        !self.retiring.is_empty() || !self.dropping.is_empty()
    }

    /// Takes source `src` out of the table (no longer findable by name), hidden; the record
    /// and its relations stay.
    fn unlist_source(&mut self, src: u32) {
        let hash = self.hasher.hash_one(src_syms(&self.srcs[src as usize]));
        if let Ok(entry) = self.src_table.find_entry(hash, |&id| id == src) {
            entry.remove();
        }
        self.srcs[src as usize].hidden = true;
        self.src_live -= 1;
    }

    /// Marks hidden source `src` dead (see [`Src::dead`]) and queues it to be freed.
    pub(crate) fn kill_source(&mut self, src: u32) {
        let rec = &mut self.srcs[src as usize];
        debug_assert!(rec.hidden && rec.name != NIL);
        if rec.dead {
            return;
        }
        rec.dead = true;
        self.dead_rels += rec.len as usize;
        if !self.retiring.contains(&src) {
            self.retiring.push(src);
        }
    }

    /// Adds `added` to and removes `removed` from what `source` contributes, leaving its other
    /// relations alone. Returns how many relations the source now has. (A `DependencyRule`'s
    /// join changes its relations this way itself, by ids: see `crate::rule`.)
    ///
    /// Each removed relation is found by its `by` object's uses (or, for a protection, its `of`
    /// object's blockers) and unlinked in O(1), so a delta costs O(its size × uses per object),
    /// never O(relations of the source). A removed relation that is not there is ignored;
    /// matching is exact (reason, replay and UIDs included). Additions go in first, so keys and strings
    /// shared with removals stay interned. Validation is as for [`RelationIndex::apply`]; if the
    /// index runs full the source is removed, as `apply` does.
    pub fn apply_delta(
        &mut self,
        source: &Source,
        added: impl IntoIterator<Item = Relation>,
        removed: impl IntoIterator<Item = Relation>,
    ) -> Result<usize, IndexError> {
        let added: Vec<Relation> = added.into_iter().collect();
        let removed: Vec<Relation> = removed.into_iter().collect();
        validate(source, &added)?;
        validate(source, &removed)?;
        self.detach_joins_of(source);
        let src = match self.find_source(source.as_source_ref()) {
            Some(src) => src,
            None if added.is_empty() => return Ok(0),
            None => self.insert_source(source).map_err(IndexError::Full)?,
        };
        for relation in &added {
            if let Err(full) = self.insert_relation(src, relation) {
                self.clear_source(src);
                return Err(IndexError::Full(full));
            }
        }
        for relation in &removed {
            if let Some(id) = self.find_relation(src, relation) {
                self.remove_relation(id);
            }
        }
        let len = self.srcs[src as usize].len as usize;
        self.free_source_if_empty(src);
        Ok(len)
    }

    /// Replaces every relation with `all` (e.g. after a watch restarted with a fresh list).
    /// Rule joins stay, detached (see [`crate::JoinMut::attach`]).
    pub fn reset(
        &mut self,
        all: impl IntoIterator<Item = (Source, Vec<Relation>)>,
    ) -> Result<(), IndexError> {
        let all: Vec<(Source, Vec<Relation>)> = all.into_iter().collect();
        for (source, relations) in &all {
            validate(source, relations)?;
        }
        self.clear_relations();
        self.srcs.reserve(all.len());
        for (source, relations) in all {
            if let Err(e) = self.apply(&source, relations) {
                self.clear_relations();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Removes every relation and detaches every join; forgets released keys.
    fn clear_relations(&mut self) {
        for join in self.joins.iter_mut().flatten() {
            join.attached = false;
            join.staging = NIL;
        }
        self.retiring.clear();
        for src in 0..self.srcs.len() {
            if self.srcs[src].name != NIL && self.srcs[src].hidden {
                self.drop_hidden_source(src as u32);
            } else if self.srcs[src].name != NIL {
                self.clear_source(src as u32);
            }
        }
        self.released.clear();
        self.released_order.clear();
    }

    /// The source's id, adding it (with no relations) if it is new.
    pub(crate) fn source_id(&mut self, source: &Source) -> Result<u32, FullError> {
        match self.find_source(source.as_source_ref()) {
            Some(src) => Ok(src),
            None => self.insert_source(source),
        }
    }

    /// The source's id if it holds relations.
    pub(crate) fn source_id_if_any(&self, source: &Source) -> Option<u32> {
        self.find_source(source.as_source_ref())
    }

    /// Detaches the joins deriving `source`: their relations are being replaced or removed
    /// by other means, so they must not send deltas on top.
    pub(crate) fn detach_joins_of(&mut self, source: &Source) {
        let mut staged = Vec::new();
        for join in self.joins.iter_mut().flatten() {
            if join.config().source == *source {
                join.attached = false;
                // A generation half attached goes: what replaces it starts over.
                if join.staging != NIL {
                    staged.push(std::mem::replace(&mut join.staging, NIL));
                }
            }
        }
        for src in staged {
            self.drop_hidden_source(src);
        }
    }

    /// A hidden source for `source`'s next generation (see [`Src::hidden`]).
    pub(crate) fn hidden_source(&mut self, source: &Source) -> Result<u32, FullError> {
        self.new_source(source, true)
    }

    /// `staging`, a hidden source, becomes `source` in O(1): what `source` held is hidden and
    /// queued for [`RelationIndex::retire_step`]. From then on decisions name the new
    /// generation's relations by `source`, and the old ones (still in the index until retired)
    /// by the same name.
    pub(crate) fn promote_source(&mut self, staging: u32, source: &Source) {
        if let Some(old) = self.find_source(source.as_source_ref()) {
            self.unlist_source(old);
            self.retiring.push(old);
        }
        self.srcs[staging as usize].hidden = false;
        let hash = self.hasher.hash_one(src_syms(&self.srcs[staging as usize]));
        let (srcs, hasher) = (&self.srcs, &self.hasher);
        self.src_table.insert_unique(hash, staging, |&id| {
            hasher.hash_one(src_syms(&srcs[id as usize]))
        });
        self.src_live += 1;
        self.free_source_if_empty(staging);
    }

    /// Removes up to `budget` relations of the retiring sources, then releases up to what is
    /// left of `budget` objects of the joins being dropped (at least one of either, if any is
    /// left); returns whether none is left.
    pub(crate) fn retire_step(&mut self, budget: usize) -> bool {
        let mut left = budget.max(1);
        while let Some(&src) = self.retiring.last() {
            while left > 0 && self.srcs[src as usize].head != NIL {
                let id = self.srcs[src as usize].head;
                self.srcs[src as usize].head = self.rels[id as usize].src_next;
                self.srcs[src as usize].len -= 1;
                self.free_relation(id);
                left -= 1;
            }
            if self.srcs[src as usize].head != NIL {
                return false;
            }
            self.retiring.pop();
            self.drop_hidden_source(src);
        }
        while let Some(mut dropping) = self.dropping.pop() {
            if !dropping.release_step(self, &mut left) {
                self.dropping.push(dropping);
                return false;
            }
            // Not dropped here, under the caller's write lock: see `take_garbage`.
            self.garbage.push(dropping);
        }
        true
    }

    /// Hands over the removed joins [`RelationIndex::release_step`] has finished releasing,
    /// for the caller to drop once it has released the write lock. Freeing a rule's join of
    /// 100,000 objects returns several large blocks to the allocator, which unmaps their pages:
    /// 0.4-0.7 ms that every webhook decision would wait for if it happened under the lock.
    /// Taking them is O(1); what is not taken is freed with the index, or by the next take.
    pub fn take_garbage(&mut self) -> Garbage {
        Garbage(std::mem::take(&mut self.garbage))
    }

    /// Queues a removed join's objects to be released by [`RelationIndex::retire_step`].
    pub(crate) fn queue_dropping(&mut self, join: crate::rule::DroppingJoin) {
        self.dropping.push(join);
    }

    /// Removes a hidden source and its relations.
    pub(crate) fn drop_hidden_source(&mut self, src: u32) {
        let rec = self.srcs[src as usize];
        debug_assert!(rec.hidden && rec.name != NIL);
        self.unlink_chain(rec.head);
        self.free_source_record(src);
        self.retiring.retain(|&r| r != src);
    }

    fn insert_source(&mut self, source: &Source) -> Result<u32, FullError> {
        self.new_source(source, false)
    }

    fn new_source(&mut self, source: &Source, hidden: bool) -> Result<u32, FullError> {
        let (tag, namespace, name) = match source {
            Source::Usage { namespace, name } => (SRC_USAGE, self.strs.intern(namespace)?.0, name),
            Source::ClusterUsage { name } => (SRC_CLUSTER_USAGE, NIL, name),
            Source::Rule { name } => (SRC_RULE, NIL, name),
        };
        let name = self.strs.intern(name)?.0;
        let rec = Src {
            tag,
            namespace,
            name,
            head: NIL,
            len: 0,
            hidden,
            dead: false,
            kept: NOT_KEPT,
        };
        let id = if self.src_free != NIL {
            let id = self.src_free;
            self.src_free = self.srcs[id as usize].head;
            self.srcs[id as usize] = rec;
            id
        } else {
            let id = to_u32(self.srcs.len())?;
            self.srcs.push(rec);
            id
        };
        if hidden {
            return Ok(id);
        }
        let hash = self.hasher.hash_one(src_syms(&rec));
        let (srcs, hasher) = (&self.srcs, &self.hasher);
        self.src_table.insert_unique(hash, id, |&id| {
            hasher.hash_one(src_syms(&srcs[id as usize]))
        });
        self.src_live += 1;
        Ok(id)
    }

    /// Releases a source record's names and puts it on the free list (its relations, table
    /// entry and count are the caller's business).
    fn free_source_record(&mut self, src: u32) {
        let rec = self.srcs[src as usize];
        if rec.namespace != NIL {
            self.strs.release(Sym(rec.namespace));
        }
        self.strs.release(Sym(rec.name));
        self.srcs[src as usize] = Src {
            tag: 0,
            namespace: NIL,
            name: NIL,
            head: self.src_free,
            len: 0,
            hidden: false,
            dead: false,
            kept: NOT_KEPT,
        };
        self.src_free = src;
    }

    pub(crate) fn free_source_if_empty(&mut self, src: u32) {
        let rec = self.srcs[src as usize];
        // A hidden source goes with its join or its retirement, not when it empties.
        if rec.head != NIL || rec.hidden {
            return;
        }
        let hash = self.hasher.hash_one(src_syms(&rec));
        if let Ok(entry) = self.src_table.find_entry(hash, |&id| id == src) {
            entry.remove();
        }
        self.free_source_record(src);
        self.src_live -= 1;
    }

    /// The key's id, interning it (and adding one string reference per symbol) if it is new.
    /// A new key is freed again by [`RelationIndex::free_key_if_unused`] unless a relation or a
    /// pin takes it.
    pub(crate) fn intern_key(&mut self, key: &ObjectKey) -> Result<u32, FullError> {
        if let Some(id) = self.find_key(key.as_key_ref()) {
            return Ok(id);
        }
        let name_len = u16::try_from(key.name.len()).map_err(|_| FullError)?;
        let mut taken = Vec::with_capacity(3);
        let syms = (|| {
            for part in [Some(&key.group), Some(&key.kind), key.namespace.as_ref()] {
                taken.push(match part {
                    Some(s) => self.strs.intern(s)?.0,
                    None => NIL,
                });
            }
            Ok::<_, Full>(())
        })();
        let slot = match self.key_free {
            NIL => to_u32(self.keys.len()),
            free => Ok(free),
        };
        let name = match (syms, slot) {
            (Ok(()), Ok(_)) => self.names.push(&key.name),
            _ => None,
        };
        let (Some(name), Ok(id)) = (name, slot) else {
            for sym in taken {
                self.release_sym(sym);
            }
            return Err(FullError);
        };
        let rec = Key {
            group: taken[0],
            kind: taken[1],
            namespace: taken[2],
            name,
            name_len,
            pins: 0,
            of_head: NIL,
            by_head: NIL,
            of_len: 0,
        };
        self.names_live += key.name.len();
        if id == self.keys.len() as u32 {
            self.keys.push(rec);
        } else {
            self.key_free = self.keys[id as usize].of_head;
            self.keys[id as usize] = rec;
        }
        let hash = key_hash(&self.hasher, &self.names, &rec);
        self.key_table
            .insert_unique(KeySlot::table_hash(hash), KeySlot { id, hash }, |slot| {
                KeySlot::table_hash(slot.hash)
            });
        self.key_live += 1;
        Ok(id)
    }

    pub(crate) fn free_key_if_unused(&mut self, id: u32) {
        let rec = self.keys[id as usize];
        // `group == NIL`: already freed, e.g. as the `of` of a relation where `by == of`.
        if rec.group == NIL || rec.of_head != NIL || rec.by_head != NIL || rec.pins > 0 {
            return;
        }
        let hash = KeySlot::table_hash(key_hash(&self.hasher, &self.names, &rec));
        if let Ok(entry) = self.key_table.find_entry(hash, |slot| slot.id == id) {
            entry.remove();
        }
        for sym in [rec.group, rec.kind, rec.namespace] {
            self.release_sym(sym);
        }
        self.keys[id as usize] = Key {
            of_head: self.key_free,
            ..Key::FREE
        };
        self.key_free = id;
        self.key_live -= 1;
        self.names_live -= usize::from(rec.name_len);
        // Compact when at least half the buffer is dead (and it is worth the copy): amortised
        // O(1) per freed key.
        if self.names.len() > 4096 && self.names_live * 2 < self.names.len() {
            self.compact_names();
        }
    }

    fn compact_names(&mut self) {
        let mut names = TextArena::default();
        for k in self.keys.iter_mut().filter(|k| k.group != NIL) {
            // Fits: the live names fitted in the old buffer, which held more.
            k.name = names.push(key_name(&self.names, k)).unwrap_or_default();
        }
        self.names = names;
    }

    /// Holds key `id` for a rule join: it stays until unpinned, with or without relations.
    pub(crate) fn pin_key(&mut self, id: u32) -> Result<(), FullError> {
        let pins = &mut self.keys[id as usize].pins;
        *pins = pins.checked_add(1).ok_or(FullError)?;
        Ok(())
    }

    /// Releases a join's hold on key `id`; the key goes if nothing else needs it.
    pub(crate) fn unpin_key(&mut self, id: u32) {
        self.keys[id as usize].pins -= 1;
        self.free_key_if_unused(id);
    }

    /// The namespace symbol of key `id` (`NIL`: cluster-scoped).
    pub(crate) fn key_namespace(&self, id: u32) -> u32 {
        self.keys[id as usize].namespace
    }

    fn insert_relation(&mut self, src: u32, r: &Relation) -> Result<(), FullError> {
        // Intern everything first; on failure release what was taken so nothing leaks.
        let of = self.intern_key(&r.of)?;
        // A fresh key has no relations yet; make sure a failure below does not strand it.
        let by = match &r.by {
            Some(by) => match self.intern_key(by) {
                Ok(id) => id,
                Err(e) => {
                    self.free_key_if_unused(of);
                    return Err(e);
                }
            },
            None => NIL,
        };
        let interned = (|| {
            let reason = match &r.reason {
                Some(reason) => self.strs.intern(reason)?.0,
                None => NIL,
            };
            let of_uid = match self.store_uid_of(of, r.of_uid.as_deref()) {
                Ok(uid) => uid,
                Err(full) => {
                    self.release_sym(reason);
                    return Err(full);
                }
            };
            let by_uid = match self.store_uid_of(by, r.by_uid.as_deref()) {
                Ok(uid) => uid,
                Err(full) => {
                    self.release_sym(reason);
                    self.uids.release(&mut self.strs, of_uid);
                    return Err(full);
                }
            };
            Ok::<_, Full>(RelIds {
                of,
                by,
                reason,
                of_uid,
                by_uid,
                replay: r.replay,
                warn: r.warn,
            })
        })();
        let linked = match interned {
            Ok(ids) => self.link(src, ids),
            Err(full) => Err(full.into()),
        };
        if linked.is_err() {
            self.free_key_if_unused(of);
            if by != NIL {
                self.free_key_if_unused(by);
            }
        }
        linked
    }

    /// Stores the UID of key `key` (`NIL`: none) for a new relation, sharing the slot of a
    /// relation that already records the same UID for that object (the first on its `of` or
    /// `by` list: O(1)), so that an object's UID is mostly stored once, not once per relation.
    fn store_uid_of(&mut self, key: u32, uid: Option<&str>) -> Result<UidId, Full> {
        let Some(text) = uid else { return Ok(NIL) };
        if key != NIL {
            let k = self.keys[key as usize];
            let probe = UidStore::probe(&self.strs, text);
            let seen = [
                (k.of_head != NIL).then(|| self.rels[k.of_head as usize].of_uid),
                (k.by_head != NIL).then(|| self.rels[k.by_head as usize].by_uid),
            ];
            if let Some(id) = seen
                .into_iter()
                .flatten()
                .find(|&id| self.uids.is(id, probe))
            {
                self.uids.retain(&mut self.strs, id);
                return Ok(id);
            }
        }
        self.uids.store(&mut self.strs, uid)
    }

    fn release_sym(&mut self, sym: u32) {
        if sym != NIL {
            self.strs.release(Sym(sym));
        }
    }

    /// Puts a relation on its three lists. The relation takes over the caller's references to
    /// its reason and UIDs; if the relation arena is full they are released here (the keys are
    /// the caller's to free).
    pub(crate) fn link(&mut self, src: u32, ids: RelIds) -> Result<(), FullError> {
        let RelIds {
            of,
            by,
            reason,
            of_uid,
            by_uid,
            replay,
            warn,
        } = ids;
        let slot = match self.rel_free {
            NIL => to_u32(self.rels.len()),
            free => Ok(free),
        };
        // A reason symbol must leave the top bits for `replay` and `warn` (2^30 distinct
        // strings first).
        let slot = slot.and_then(|id| {
            if reason == NIL || reason < NO_REASON {
                Ok(id)
            } else {
                Err(FullError)
            }
        });
        let Ok(id) = slot else {
            self.release_sym(reason);
            self.uids.release(&mut self.strs, of_uid);
            self.uids.release(&mut self.strs, by_uid);
            return Err(FullError);
        };
        let key_of = self.keys[of as usize];
        let (by_next, src_next) = (
            if by == NIL {
                NIL
            } else {
                self.keys[by as usize].by_head
            },
            self.srcs[src as usize].head,
        );
        let rec = Rel {
            of,
            by,
            source: src,
            reason_replay: if reason == NIL { NO_REASON } else { reason }
                | if replay { REPLAY } else { 0 }
                | if warn { WARN } else { 0 },
            of_prev: NIL,
            of_next: key_of.of_head,
            by_prev: NIL,
            by_next,
            src_prev: NIL,
            src_next,
            of_uid,
            by_uid,
        };
        if id == self.rels.len() as u32 {
            self.rels.push(rec);
        } else {
            self.rel_free = self.rels[id as usize].src_next;
            self.rels[id as usize] = rec;
        }
        if key_of.of_head != NIL {
            self.rels[key_of.of_head as usize].of_prev = id;
        }
        let key = &mut self.keys[of as usize];
        key.of_head = id;
        key.of_len += 1;
        if key.of_len == 1 && !self.released.is_empty() {
            // Protected again: no longer "released" (its place in the order is skipped later).
            let k = self.key_by_id(of).to_key();
            self.released.remove(&k);
        }
        if by != NIL {
            if by_next != NIL {
                self.rels[by_next as usize].by_prev = id;
            }
            self.keys[by as usize].by_head = id;
        }
        if src_next != NIL {
            self.rels[src_next as usize].src_prev = id;
        }
        let s = &mut self.srcs[src as usize];
        s.head = id;
        s.len += 1;
        self.rel_live += 1;
        if let Some(ns) = self.holds_namespace(&rec) {
            let entry = self.holding.entry(ns).or_default();
            entry.rels.insert(id);
            entry.replay += u32::from(rec.replay());
        }
        Ok(())
    }

    /// Removes the relation of source `src` from `of` to `by` (a join's relations are unique
    /// per pair), walking the shorter-looking of the two lists it is on. Returns whether it
    /// was there.
    pub(crate) fn unlink_pair(&mut self, src: u32, of: u32, by: u32) -> bool {
        let chain = if self.keys[of as usize].of_len <= 8 {
            Chain {
                index: self,
                next: self.keys[of as usize].of_head,
                link: Link::Of,
            }
        } else {
            Chain {
                index: self,
                next: self.keys[by as usize].by_head,
                link: Link::By,
            }
        };
        let found = chain
            .filter(|c| {
                let rel = c.rel();
                rel.source == src && rel.of == of && rel.by == by
            })
            .map(|c| c.id)
            .next();
        if let Some(id) = found {
            self.remove_relation(id);
        }
        found.is_some()
    }

    /// The namespace (symbol) whose deletion relation `rel` holds, if any; see [`Holding`].
    fn holds_namespace(&self, rel: &Rel) -> Option<u32> {
        if rel.warn() {
            // Warn only: it holds nothing, a namespace's deletion included.
            return None;
        }
        let of = &self.keys[rel.of as usize];
        if self.strs.get(Sym(of.group)) == LIEN_GROUP {
            return None;
        }
        if rel.by != NIL {
            // A user inside the namespace goes with it; the relation only orders the two.
            let by = self.keys[rel.by as usize].namespace;
            return (of.namespace != NIL && by != of.namespace).then_some(of.namespace);
        }
        // A protection has no user to go first: whatever its source, deleting the namespace
        // would delete (or, for its own Usage's, lift) it. A Usage's protection of a
        // cluster-scoped object holds the Usage's namespace: the namespace's deletion would
        // take the Usage, and the protection with it.
        if of.namespace != NIL {
            return Some(of.namespace);
        }
        let src = &self.srcs[rel.source as usize];
        (src.tag == SRC_USAGE).then_some(src.namespace)
    }

    /// Removes every relation of source `src`, and the source. Returns how many relations went.
    pub(crate) fn clear_source(&mut self, src: u32) -> usize {
        let removed = self.srcs[src as usize].len as usize;
        let chain = std::mem::replace(&mut self.srcs[src as usize].head, NIL);
        self.unlink_chain(chain);
        self.srcs[src as usize].len = 0;
        self.free_source_if_empty(src);
        removed
    }

    /// Removes every relation on a source chain (already detached from its source).
    fn unlink_chain(&mut self, mut id: u32) {
        while id != NIL {
            let next = self.rels[id as usize].src_next;
            self.free_relation(id);
            id = next;
        }
    }

    /// Removes one relation from its source's list, then frees it.
    fn remove_relation(&mut self, id: u32) {
        self.unlink(id, Link::Source);
        let src = self.rels[id as usize].source;
        self.srcs[src as usize].len -= 1;
        self.free_relation(id);
    }

    /// Unlinks relation `id` from one of its lists (its `of` key's, its `by` key's or its
    /// source's) in O(1); the relation's own links are left as they were.
    fn unlink(&mut self, id: u32, link: Link) {
        let rel = self.rels[id as usize];
        let (prev, next) = rel.neighbours(link);
        if prev != NIL {
            *self.rels[prev as usize].link_mut(link).1 = next;
        } else {
            let head = match link {
                Link::Of => &mut self.keys[rel.of as usize].of_head,
                Link::By => &mut self.keys[rel.by as usize].by_head,
                Link::Source => &mut self.srcs[rel.source as usize].head,
            };
            *head = next;
        }
        if next != NIL {
            *self.rels[next as usize].link_mut(link).0 = prev;
        }
    }

    /// Unlinks a relation from its `of` and `by` lists, releases what it holds and puts the
    /// record on the free list. Its source list is the caller's business.
    fn free_relation(&mut self, id: u32) {
        let rel = self.rels[id as usize];
        if self.srcs[rel.source as usize].dead {
            self.dead_rels -= 1;
        }
        // Before the keys can be freed: `holds_namespace` reads them.
        if let Some(ns) = self.holds_namespace(&rel) {
            if let hashbrown::hash_map::Entry::Occupied(mut entry) = self.holding.entry(ns) {
                let holding = entry.get_mut();
                holding.rels.remove(&id);
                holding.replay -= u32::from(rel.replay());
                if holding.rels.is_empty() {
                    entry.remove();
                }
            }
        }
        self.unlink(id, Link::Of);
        self.keys[rel.of as usize].of_len -= 1;
        if self.keys[rel.of as usize].of_len == 0 {
            self.note_released(rel.of);
        }
        if rel.by != NIL {
            self.unlink(id, Link::By);
        }
        self.release_sym(rel.reason());
        self.uids.release(&mut self.strs, rel.of_uid);
        self.uids.release(&mut self.strs, rel.by_uid);
        self.free_key_if_unused(rel.of);
        if rel.by != NIL {
            self.free_key_if_unused(rel.by);
        }
        let rec = &mut self.rels[id as usize];
        rec.source = NIL;
        rec.src_next = self.rel_free;
        self.rel_free = id;
        self.rel_live -= 1;
    }

    /// The relation of source `src` equal to `r` (same `of`, `by`, reason, replay and UIDs),
    /// found by walking the shorter list it must be on: the uses of `by` (a `PersistentVolume`
    /// uses one pool), or the blockers of `of` for a protection. Never walks the source.
    /// The relation of source `src` equal to `r`, if any.
    ///
    /// A use is on two lists, its `of` object's blockers and its `by` object's uses; they are
    /// walked in turn, one relation each, so the search costs twice the shorter of the two
    /// (up to the relation): removing one of a usage's 100,000 relations that all share one
    /// user walks the used object's few blockers, not the user's 100,000 uses — and the other
    /// way round when they all share the used object.
    fn find_relation(&self, src: u32, r: &Relation) -> Option<u32> {
        let of = self.find_key(r.of.as_key_ref())?;
        let chain = |head: u32, link: Link| Chain {
            index: self,
            next: head,
            link,
        };
        let is = |c: &RelationRef<'_>, by: u32| {
            let rel = c.rel();
            rel.source == src
                && rel.of == of
                && rel.by == by
                && rel.replay() == r.replay
                && rel.warn() == r.warn
                && c.reason() == r.reason.as_deref()
                && self.uid_is(rel.of_uid, r.of_uid.as_deref())
                && self.uid_is(rel.by_uid, r.by_uid.as_deref())
        };
        let blockers = chain(self.keys[of as usize].of_head, Link::Of);
        let Some(by) = &r.by else {
            return blockers.filter(|c| is(c, NIL)).map(|c| c.id).next();
        };
        let by = self.find_key(by.as_key_ref())?;
        let (mut blockers, mut uses) = (
            blockers.fuse(),
            chain(self.keys[by as usize].by_head, Link::By).fuse(),
        );
        loop {
            let (a, b) = (blockers.next(), uses.next());
            if a.is_none() && b.is_none() {
                return None;
            }
            if let Some(c) = a.into_iter().chain(b).find(|c| is(c, by)) {
                return Some(c.id);
            }
        }
    }

    fn uid_is(&self, stored: UidId, uid: Option<&str>) -> bool {
        match uid {
            None => stored == NIL,
            Some(u) => self.uids.is(stored, UidStore::probe(&self.strs, u)),
        }
    }

    // ----- lookups ---------------------------------------------------------------------------

    pub(crate) fn find_key(&self, key: KeyRef<'_>) -> Option<u32> {
        let (group, kind, namespace) = (
            self.strs.find(key.group)?.0,
            self.strs.find(key.kind)?.0,
            match key.namespace {
                Some(ns) => self.strs.find(ns)?.0,
                None => NIL,
            },
        );
        let hash = name_hash(&self.hasher, (group, kind, namespace), key.name);
        let (keys, names) = (&self.keys, &self.names);
        self.key_table
            .find(KeySlot::table_hash(hash), |slot| {
                let k = &keys[slot.id as usize];
                slot.hash == hash
                    && (k.group, k.kind, k.namespace) == (group, kind, namespace)
                    && key_name(names, k) == key.name
            })
            .map(|slot| slot.id)
    }

    fn find_source(&self, source: SourceRef<'_>) -> Option<u32> {
        let (tag, namespace, name) = match source {
            SourceRef::Usage { namespace, name } => (SRC_USAGE, self.strs.find(namespace)?.0, name),
            SourceRef::ClusterUsage { name } => (SRC_CLUSTER_USAGE, NIL, name),
            SourceRef::Rule { name } => (SRC_RULE, NIL, name),
        };
        let syms = (u32::from(tag), namespace, self.strs.find(name)?.0, 0);
        let hash = self.hasher.hash_one(syms);
        let srcs = &self.srcs;
        self.src_table
            .find(hash, |&id| src_syms(&srcs[id as usize]) == syms)
            .copied()
    }

    /// [`Self::blockers`] for a borrowed key: no allocation, for scans over many objects.
    pub fn blockers_ref(&self, of: KeyRef<'_>) -> Chain<'_> {
        let head = self
            .find_key(of)
            .map_or(NIL, |id| self.keys[id as usize].of_head);
        Chain {
            index: self,
            next: head,
            link: Link::Of,
        }
    }

    /// The relations that have `of` as the object in use: what blocks deleting it (before UIDs
    /// are compared; see `crate::decision::decide_delete`).
    pub fn blockers(&self, of: &ObjectKey) -> Chain<'_> {
        let head = self
            .find_key(of.as_key_ref())
            .map_or(NIL, |id| self.keys[id as usize].of_head);
        Chain {
            index: self,
            next: head,
            link: Link::Of,
        }
    }

    /// `uid` as the index would store it, to compare with many relations' UIDs without parsing
    /// it each time. A non-UUID UID the index never interned matches no stored UID.
    pub(crate) fn uid_probe(&self, uid: &str) -> UidProbe {
        UidStore::probe(&self.strs, uid)
    }

    /// Orders two relations by their users as [`ObjectKey`]'s `Ord` would order the owned keys
    /// (`None`, a protection, first), comparing the text of a part only when the parts'
    /// symbols differ: the users of one object mostly share group, kind and namespace, and
    /// sorting a hundred of them then costs one string comparison each, not four.
    pub(crate) fn cmp_users(&self, a: &RelationRef<'_>, b: &RelationRef<'_>) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        let (x, y) = (a.rel().by, b.rel().by);
        if x == y {
            return Ordering::Equal;
        }
        if x == NIL || y == NIL {
            return if x == NIL {
                Ordering::Less
            } else {
                Ordering::Greater
            };
        }
        let (kx, ky) = (&self.keys[x as usize], &self.keys[y as usize]);
        let text = |sx: u32, sy: u32| self.strs.get(Sym(sx)).cmp(self.strs.get(Sym(sy)));
        if kx.group != ky.group {
            return text(kx.group, ky.group);
        }
        if kx.kind != ky.kind {
            return text(kx.kind, ky.kind);
        }
        if kx.namespace != ky.namespace {
            return match (kx.namespace, ky.namespace) {
                (NIL, _) => Ordering::Less,
                (_, NIL) => Ordering::Greater,
                (nx, ny) => text(nx, ny),
            };
        }
        key_name(&self.names, kx).cmp(key_name(&self.names, ky))
    }

    /// How many relations have `of` as the object in use, in O(1).
    pub fn blocker_count(&self, of: &ObjectKey) -> usize {
        if self.dead_rels > 0 {
            // Dead relations are on the list but not in the count's meaning: O(blockers) for
            // the few milliseconds a deleted source is being freed.
            return self.blockers(of).count();
        }
        self.find_key(of.as_key_ref())
            .map_or(0, |id| self.keys[id as usize].of_len as usize)
    }

    /// [`Self::is_in_use`] for a borrowed key: no allocation, for scans over many objects.
    pub fn is_in_use_ref(&self, of: KeyRef<'_>) -> bool {
        self.find_key(of).is_some_and(|id| {
            let k = &self.keys[id as usize];
            k.of_len > 0 && (self.dead_rels == 0 || self.first_live(k.of_head, Link::Of).is_some())
        })
    }

    /// The first relation from `head` on list `link` that is not a dead source's.
    fn first_live(&self, head: u32, link: Link) -> Option<u32> {
        Chain {
            index: self,
            next: head,
            link,
        }
        .next()
        .map(|r| r.id)
    }

    /// Whether key `k` is on some relation that counts (not a dead source's).
    fn has_live_relation(&self, k: &Key) -> bool {
        if self.dead_rels == 0 {
            return k.of_head != NIL || k.by_head != NIL;
        }
        self.first_live(k.of_head, Link::Of).is_some()
            || self.first_live(k.by_head, Link::By).is_some()
    }

    /// Whether relation `id` is a dead source's (see [`Src::dead`]).
    fn is_dead(&self, id: u32) -> bool {
        self.dead_rels > 0 && self.srcs[self.rels[id as usize].source as usize].dead
    }

    /// Whether any relation has `of` as the object in use (UIDs not considered).
    pub fn is_in_use(&self, of: &ObjectKey) -> bool {
        self.blocker_count(of) > 0
    }

    /// The relations in which `by` is the user: what `by` uses.
    pub fn uses_of(&self, by: &ObjectKey) -> Chain<'_> {
        let head = self
            .find_key(by.as_key_ref())
            .map_or(NIL, |id| self.keys[id as usize].by_head);
        Chain {
            index: self,
            next: head,
            link: Link::By,
        }
    }

    /// The relations `source` contributes.
    pub fn relations_of_source(&self, source: &Source) -> Chain<'_> {
        let head = self
            .find_source(source.as_source_ref())
            .map_or(NIL, |id| self.srcs[id as usize].head);
        Chain {
            index: self,
            next: head,
            link: Link::Source,
        }
    }

    /// How many relations `source` contributes.
    pub fn source_len(&self, source: &Source) -> usize {
        self.find_source(source.as_source_ref())
            .map_or(0, |id| self.srcs[id as usize].len as usize)
    }

    /// Marks `source` (a Usage) as being deleted while Lien's finalizer keeps it, at position
    /// `finalizer_at` of its finalizers — or not (`None`). Deleting such a Usage again lifts
    /// nothing; removing that finalizer does, so a refusal names that command instead
    /// ([`crate::Blocker::kept`]). The mark lives on the source's record: a source with no
    /// relations has none to mark, and one created afresh starts unmarked, so the controller
    /// sets it again after applying the source's relations. Returns whether it changed. A
    /// position past 254 is not recorded (the refusal then names `kubectl lien why`).
    pub fn set_kept(&mut self, source: &Source, finalizer_at: Option<usize>) -> bool {
        let Some(id) = self.find_source(source.as_source_ref()) else {
            return false;
        };
        let kept = finalizer_at
            .and_then(|i| u8::try_from(i).ok())
            .filter(|&i| i != NOT_KEPT)
            .unwrap_or(NOT_KEPT);
        let rec = &mut self.srcs[id as usize];
        let changed = rec.kept != kept;
        rec.kept = kept;
        changed
    }

    /// What [`RelationIndex::set_kept`] recorded for `source`.
    pub fn kept(&self, source: &Source) -> Option<u8> {
        let id = self.find_source(source.as_source_ref())?;
        Some(self.srcs[id as usize].kept).filter(|&k| k != NOT_KEPT)
    }

    /// How many relations hold `namespace`'s deletion, in O(1): a relation of an object in it
    /// (not a `lien.dev` kind) with a user elsewhere (another namespace, or cluster-scoped), any
    /// protection of an object in it, and a protection of a cluster-scoped object by a Usage of
    /// the namespace (see [`Holding`]). Relations with both ends inside do not count.
    pub fn holding_count(&self, namespace: &str) -> usize {
        if self.dead_rels > 0 {
            return self.holding(namespace).count();
        }
        self.holding_of(namespace).map_or(0, |l| l.rels.len())
    }

    /// How many of [`RelationIndex::holding_count`]'s relations ask for replay, in O(1).
    pub fn holding_replay_count(&self, namespace: &str) -> usize {
        if self.dead_rels > 0 {
            return self.holding(namespace).filter(|r| r.replay()).count();
        }
        self.holding_of(namespace).map_or(0, |l| l.replay as usize)
    }

    /// The relations counted by [`RelationIndex::holding_count`], in no particular order. Each
    /// step is O(1): take as many as you need.
    pub fn holding(&self, namespace: &str) -> impl Iterator<Item = RelationRef<'_>> {
        self.holding_of(namespace)
            .into_iter()
            .flat_map(|l| l.rels.iter())
            .filter(move |&&id| !self.is_dead(id))
            .map(move |&id| RelationRef { index: self, id })
    }

    fn holding_of(&self, namespace: &str) -> Option<&Holding> {
        let ns = self.strs.find(namespace)?;
        self.holding.get(&ns.0)
    }

    /// Every relation, in no particular order.
    pub fn relations(&self) -> impl Iterator<Item = RelationRef<'_>> {
        self.rels
            .iter()
            .enumerate()
            .filter(|(id, r)| r.source != NIL && !self.is_dead(*id as u32))
            .map(move |(id, _)| RelationRef {
                index: self,
                id: id as u32,
            })
    }

    /// Every source that contributes at least one relation, in no particular order.
    pub fn sources(&self) -> impl Iterator<Item = SourceRef<'_>> {
        self.srcs
            .iter()
            .filter(|s| s.name != NIL && !s.hidden)
            .map(move |s| self.source_ref(s))
    }

    /// How many relations each kind of source contributes: `(Usage, ClusterUsage,
    /// DependencyRule)`. O(sources), not O(relations): each source knows its length.
    pub fn len_by_source_kind(&self) -> (usize, usize, usize) {
        let mut out = (0, 0, 0);
        for s in self.srcs.iter().filter(|s| s.name != NIL && !s.hidden) {
            let n = s.len as usize;
            match self.source_ref(s) {
                SourceRef::Usage { .. } => out.0 += n,
                SourceRef::ClusterUsage { .. } => out.1 += n,
                SourceRef::Rule { .. } => out.2 += n,
            }
        }
        out
    }

    /// Every object mentioned by some relation (as `of` or `by`), in no particular order.
    pub fn keys(&self) -> impl Iterator<Item = KeyRef<'_>> {
        self.keys
            .iter()
            .filter(|k| k.group != NIL && self.has_live_relation(k))
            .map(move |k| self.key_ref(k))
    }

    /// Number of relations.
    pub fn len(&self) -> usize {
        self.rel_live - self.dead_rels
    }

    /// Whether the index holds no relation.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of sources with at least one relation.
    pub fn source_count(&self) -> usize {
        self.src_live
    }

    /// Number of distinct objects the index holds: mentioned by relations, or held by a rule's
    /// join (which keeps its objects here whether they have relations or not).
    pub fn key_count(&self) -> usize {
        self.key_live
    }

    /// Number of distinct interned strings.
    pub fn string_count(&self) -> usize {
        self.strs.len()
    }

    /// Heap bytes held, computed from capacities (arenas, hash tables, string buffer). This is
    /// what the index costs, including growth slack, excluding allocator overhead (a handful of
    /// large allocations, so that is negligible).
    pub fn heap_bytes(&self) -> usize {
        self.heap_parts().iter().map(|(_, bytes)| bytes).sum()
    }

    /// [`RelationIndex::heap_bytes`] by part, largest first, to say what dominates.
    pub fn heap_parts(&self) -> Vec<(&'static str, usize)> {
        let mut parts = vec![
            ("relation records", self.rels.heap_bytes()),
            ("key records", self.keys.heap_bytes()),
            ("key table", table_bytes(&self.key_table)),
            ("names", self.names.heap_bytes()),
            ("UIDs", self.uids.heap_bytes()),
            ("other strings", self.strs.heap_bytes()),
            (
                "namespaces' holding sets",
                self.holding.capacity() * (size_of::<(u32, Holding)>() + 1)
                    + self
                        .holding
                        .values()
                        .map(|l| l.rels.capacity() * (size_of::<u32>() + 1))
                        .sum::<usize>(),
            ),
            (
                "sources",
                self.srcs.capacity() * size_of::<Src>() + table_bytes(&self.src_table),
            ),
            (
                "joins' own records",
                self.joins.capacity() * size_of::<Option<Box<RuleJoin>>>()
                    + self
                        .joins
                        .iter()
                        .flatten()
                        .map(|j| size_of::<RuleJoin>() + j.heap_bytes())
                        .sum::<usize>(),
            ),
        ];
        parts.sort_by_key(|&(_, bytes)| std::cmp::Reverse(bytes));
        parts
    }

    /// The interned symbol of `namespace`, as [`RelationIndex::key_namespace`] returns it, if
    /// any key or string uses it.
    pub(crate) fn namespace_symbol(&self, namespace: &str) -> Option<u32> {
        self.strs.find(namespace).map(|s| s.0)
    }

    /// Internal ids for the graph algorithms: the key id of `key`, if the index knows it.
    pub(crate) fn key_id(&self, key: &ObjectKey) -> Option<u32> {
        self.find_key(key.as_key_ref())
    }

    /// The key with internal id `id`.
    pub(crate) fn key_by_id(&self, id: u32) -> KeyRef<'_> {
        self.key_ref(&self.keys[id as usize])
    }

    /// The number of key slots (live or free), the bound for key ids.
    pub(crate) fn key_slots(&self) -> usize {
        self.keys.len()
    }

    /// Whether key slot `id` is an object of the graph: live, with some relation (a key only a
    /// join holds is no node).
    pub(crate) fn key_is_live(&self, id: u32) -> bool {
        let k = &self.keys[id as usize];
        k.group != NIL && self.has_live_relation(k)
    }

    /// `(by, of)` key ids of the relations with `by` as the user — the graph's out-edges.
    /// The relations whose user is key `by`.
    pub(crate) fn uses_by_id(&self, by: u32) -> Chain<'_> {
        Chain {
            index: self,
            next: self.keys[by as usize].by_head,
            link: Link::By,
        }
    }

    pub(crate) fn used_ids(&self, by: u32) -> impl Iterator<Item = u32> + '_ {
        let head = self.keys[by as usize].by_head;
        Chain {
            index: self,
            next: head,
            link: Link::By,
        }
        .map(|r| r.rel().of)
    }

    /// Key ids of the users of `of` (protections, which have no user, are skipped).
    pub(crate) fn user_ids(&self, of: u32) -> impl Iterator<Item = u32> + '_ {
        let head = self.keys[of as usize].of_head;
        Chain {
            index: self,
            next: head,
            link: Link::Of,
        }
        .map(|r| r.rel().by)
        .filter(|&by| by != NIL)
    }

    fn key_ref(&self, k: &Key) -> KeyRef<'_> {
        KeyRef {
            group: self.strs.get(Sym(k.group)),
            kind: self.strs.get(Sym(k.kind)),
            namespace: (k.namespace != NIL).then(|| self.strs.get(Sym(k.namespace))),
            name: key_name(&self.names, k),
        }
    }

    fn source_ref(&self, s: &Src) -> SourceRef<'_> {
        let name = self.strs.get(Sym(s.name));
        match s.tag {
            SRC_USAGE => SourceRef::Usage {
                namespace: self.strs.get(Sym(s.namespace)),
                name,
            },
            SRC_CLUSTER_USAGE => SourceRef::ClusterUsage { name },
            _ => SourceRef::Rule { name },
        }
    }
}

impl Default for RelationIndex {
    fn default() -> Self {
        Self::new()
    }
}

fn src_syms(s: &Src) -> SrcSyms {
    (u32::from(s.tag), s.namespace, s.name, 0)
}

fn validate(source: &Source, relations: &[Relation]) -> Result<(), IndexError> {
    for r in relations {
        if r.source != *source {
            return Err(IndexError::SourceMismatch {
                expected: Box::new(source.clone()),
                found: Box::new(r.source.clone()),
                of: Box::new(r.of.clone()),
            });
        }
        if r.by.is_none() && r.reason.is_none() {
            return Err(IndexError::MissingReason {
                of: Box::new(r.of.clone()),
                origin: Box::new(source.clone()),
            });
        }
    }
    Ok(())
}

/// A relation as ids, its references to reason and UIDs taken (see [`RelationIndex::link`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RelIds {
    pub(crate) of: u32,
    /// `NIL` for a protection.
    pub(crate) by: u32,
    /// A symbol, or `NIL`.
    pub(crate) reason: u32,
    pub(crate) of_uid: UidId,
    pub(crate) by_uid: UidId,
    pub(crate) replay: bool,
    pub(crate) warn: bool,
}

#[derive(Debug, Clone, Copy)]
enum Link {
    Of,
    By,
    Source,
}

/// An iterator over one of the index's relation lists (by `of`, by `by`, or by source).
#[derive(Debug, Clone)]
pub struct Chain<'a> {
    index: &'a RelationIndex,
    next: u32,
    link: Link,
}

impl<'a> Iterator for Chain<'a> {
    type Item = RelationRef<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.next == NIL {
                return None;
            }
            let id = self.next;
            self.next = self.index.rels[id as usize].neighbours(self.link).1;
            // A deleted source's relations, not freed yet, count for nothing (see
            // `RelationIndex::delete_in_steps`).
            if self.index.is_dead(id) {
                continue;
            }
            return Some(RelationRef {
                index: self.index,
                id,
            });
        }
    }
}

/// A relation in the index, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct RelationRef<'a> {
    index: &'a RelationIndex,
    id: u32,
}

impl<'a> RelationRef<'a> {
    /// The key id of its `of` object.
    pub(crate) fn of_id(&self) -> u32 {
        self.rel().of
    }

    fn rel(&self) -> &'a Rel {
        &self.index.rels[self.id as usize]
    }

    /// The object in use.
    pub fn of(&self) -> KeyRef<'a> {
        self.index.key_by_id(self.rel().of)
    }

    /// The user, `None` for a protection.
    pub fn by(&self) -> Option<KeyRef<'a>> {
        let by = self.rel().by;
        (by != NIL).then(|| self.index.key_by_id(by))
    }

    /// Where the relation comes from.
    pub fn source(&self) -> SourceRef<'a> {
        self.index
            .source_ref(&self.index.srcs[self.rel().source as usize])
    }

    /// Why.
    pub fn reason(&self) -> Option<&'a str> {
        let reason = self.rel().reason();
        (reason != NIL).then(|| self.index.strs.get(Sym(reason)))
    }

    /// Where its source's finalizer `lien.dev/usage` stands while Lien keeps the source
    /// being deleted ([`RelationIndex::set_kept`]); `None` otherwise.
    pub fn source_kept(&self) -> Option<u8> {
        Some(self.index.srcs[self.rel().source as usize].kept).filter(|&k| k != NOT_KEPT)
    }

    /// Whether a blocked DELETE of `of` is replayed when the last blocker goes.
    pub fn replay(&self) -> bool {
        self.rel().replay()
    }

    /// Whether the relation only warns (its source's `spec.enforcement: Warn`): it refuses
    /// nothing.
    pub fn warn(&self) -> bool {
        self.rel().warn()
    }

    fn uid(&self, uid: UidId) -> Option<Cow<'a, str>> {
        self.index.uids.get(&self.index.strs, uid)
    }

    /// The UID of `of` the relation observed.
    pub fn of_uid(&self) -> Option<Cow<'a, str>> {
        self.uid(self.rel().of_uid)
    }

    /// The UID of `by` the relation observed.
    pub fn by_uid(&self) -> Option<Cow<'a, str>> {
        self.uid(self.rel().by_uid)
    }

    /// Whether the relation observed an `of` UID and it is not `uid` — i.e. it was recorded
    /// against an earlier incarnation of the object. Compares without allocating.
    pub fn of_uid_differs(&self, uid: &str) -> bool {
        let of_uid = self.rel().of_uid;
        of_uid != NIL
            && !self
                .index
                .uids
                .is(of_uid, UidStore::probe(&self.index.strs, uid))
    }

    /// As [`RelationRef::of_uid_differs`], against a UID prepared once by
    /// [`RelationIndex::uid_probe`] for many relations.
    pub(crate) fn of_uid_differs_probe(&self, probe: UidProbe) -> bool {
        let of_uid = self.rel().of_uid;
        of_uid != NIL && !self.index.uids.is(of_uid, probe)
    }

    /// The ids of the relation's source and reason, to share one owned copy of them among
    /// the relations that have the same (`crate::decision`).
    pub(crate) fn source_and_reason_ids(&self) -> (u32, u32) {
        (self.rel().source, self.rel().reason())
    }

    /// An owned copy.
    pub fn to_relation(&self) -> Relation {
        Relation {
            of: self.of().to_key(),
            by: self.by().map(|k| k.to_key()),
            source: self.source().to_source(),
            reason: self.reason().map(str::to_owned),
            replay: self.replay(),
            warn: self.warn(),
            of_uid: self.of_uid().map(Cow::into_owned),
            by_uid: self.by_uid().map(Cow::into_owned),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kind: &str, ns: Option<&str>, name: &str) -> ObjectKey {
        ObjectKey::new("example.io", kind, ns, name)
    }

    fn sorted(it: impl Iterator<Item = Relation>) -> Vec<Relation> {
        let mut v: Vec<Relation> = it.collect();
        v.sort();
        v
    }

    #[test]
    fn records_stay_small() {
        // The memory budget (16 MiB per 100k relations) rests on these.
        assert_eq!(size_of::<Rel>(), 48);
        assert_eq!(size_of::<Key>(), 32);
        assert_eq!(size_of::<Src>(), 20);
    }

    #[test]
    fn names_are_compacted_and_keys_still_found() {
        let mut idx = RelationIndex::new();
        let s = Source::rule("r");
        let long = |i: usize| key("PV", None, &format!("pvc-{i:0>60}"));
        let all: Vec<Relation> = (0..500)
            .map(|i| Relation::uses(s.clone(), key("Pool", Some("p"), "pool"), long(i)))
            .collect();
        idx.apply(&s, all.clone()).expect("valid");
        // Keep every tenth: most names die, and the buffer is rebuilt from the live ones.
        let kept: Vec<Relation> = all.iter().step_by(10).cloned().collect();
        idx.apply(&s, kept.clone()).expect("valid");
        // 50 names of 64 bytes and "pool" live; at most as many dead bytes (it was 32,004).
        assert_eq!(idx.names_live, 50 * 64 + 4);
        assert!(
            idx.names.len() <= 2 * idx.names_live,
            "{} bytes",
            idx.names.len()
        );
        for (i, r) in all.iter().enumerate() {
            assert_eq!(
                idx.uses_of(r.by.as_ref().expect("by")).count(),
                usize::from(i % 10 == 0)
            );
        }
        assert_eq!(
            sorted(idx.relations().map(|r| r.to_relation())),
            sorted(kept.into_iter())
        );
    }

    #[test]
    fn apply_lookup_delete() {
        let mut idx = RelationIndex::new();
        let s = Source::usage("team-a", "release-uses-cluster");
        let cluster = key("Cluster", None, "my-cluster");
        let release = key("Release", Some("team-a"), "prometheus");
        let r = Relation::uses(s.clone(), cluster.clone(), release.clone())
            .with_reason("Release runs on this cluster")
            .with_uids(Some("0f8fad5b-d9cb-469f-a165-70867728950e"), Some("by-uid"));
        assert_eq!(idx.apply(&s, [r.clone()]), Ok(1));
        assert!(idx.is_in_use(&cluster));
        assert!(!idx.is_in_use(&release));
        assert_eq!(idx.blocker_count(&cluster), 1);
        assert_eq!(
            sorted(idx.blockers(&cluster).map(|r| r.to_relation())),
            vec![r.clone()]
        );
        assert_eq!(
            sorted(idx.uses_of(&release).map(|r| r.to_relation())),
            vec![r.clone()]
        );
        assert_eq!(
            sorted(idx.relations_of_source(&s).map(|r| r.to_relation())),
            vec![r]
        );
        assert_eq!((idx.len(), idx.source_count(), idx.key_count()), (1, 1, 2));
        assert_eq!(
            idx.sources().map(|s| s.to_source()).collect::<Vec<_>>(),
            vec![s.clone()]
        );

        assert_eq!(idx.delete(&s), 1);
        assert!(idx.is_empty());
        assert!(!idx.is_in_use(&cluster));
        assert_eq!(
            (idx.source_count(), idx.key_count(), idx.string_count()),
            (0, 0, 0)
        );
        assert_eq!(idx.delete(&s), 0);
    }

    #[test]
    fn apply_stream_replaces_as_apply_does_and_drops_the_source_on_a_bad_relation() {
        let s = Source::rule("pv-uses-pool");
        let pool = key("CephBlockPool", Some("rook"), "pool");
        let uses = |n: usize| {
            (0..n)
                .map(|i| {
                    Relation::uses(s.clone(), pool.clone(), key("PV", None, &format!("pv-{i}")))
                })
                .collect::<Vec<_>>()
        };
        let (mut streamed, mut applied) = (RelationIndex::new(), RelationIndex::new());
        for n in [3, 5, 2] {
            assert_eq!(streamed.apply_stream(&s, uses(n)), Ok(n));
            assert_eq!(applied.apply(&s, uses(n)), Ok(n));
            assert_eq!(
                sorted(streamed.relations_of_source(&s).map(|r| r.to_relation())),
                sorted(applied.relations_of_source(&s).map(|r| r.to_relation())),
            );
            assert_eq!(streamed.key_count(), applied.key_count());
            assert_eq!(streamed.string_count(), applied.string_count());
        }
        // A relation of another source, after good ones: the source ends up holding nothing
        // (never half of the stream), and the error names the mismatch.
        let other = Relation::uses(Source::rule("other"), pool.clone(), key("PV", None, "x"));
        let bad = uses(2).into_iter().chain([other]);
        assert!(matches!(
            streamed.apply_stream(&s, bad),
            Err(IndexError::SourceMismatch { .. })
        ));
        assert!(streamed.is_empty());
        assert!(!streamed.is_in_use(&pool));
        assert_eq!((streamed.key_count(), streamed.string_count()), (0, 0));
        // Nothing streamed into an unknown source creates nothing.
        assert_eq!(streamed.apply_stream(&s, []), Ok(0));
        assert_eq!(streamed.source_count(), 0);
    }

    #[test]
    fn apply_replaces_a_sources_relations() {
        let mut idx = RelationIndex::new();
        let s = Source::rule("nfs-uses-pool");
        let pool = key("CephBlockPool", Some("rook"), "pool");
        let nfs: Vec<ObjectKey> = (0..3)
            .map(|i| key("CephNFS", Some("rook"), &format!("nfs-{i}")))
            .collect();
        let rels = |n: usize| -> Vec<Relation> {
            nfs[..n]
                .iter()
                .map(|b| Relation::uses(s.clone(), pool.clone(), b.clone()))
                .collect()
        };
        assert_eq!(idx.apply(&s, rels(3)), Ok(3));
        assert_eq!(idx.apply(&s, rels(1)), Ok(1));
        assert_eq!(idx.blocker_count(&pool), 1);
        assert_eq!(
            idx.key_count(),
            2,
            "the NFS objects no longer mentioned are freed"
        );
        assert_eq!(idx.uses_of(&nfs[2]).count(), 0);
        assert_eq!(idx.apply(&s, []), Ok(0));
        assert!(idx.is_empty());
        assert_eq!(idx.source_count(), 0);
    }

    #[test]
    fn sources_overlap_without_interfering() {
        let mut idx = RelationIndex::new();
        let (a, b) = (Source::usage("ns", "a"), Source::cluster_usage("b"));
        let db = key("Database", Some("ns"), "db");
        let app = key("Deployment", Some("ns"), "app");
        idx.apply(&a, [Relation::uses(a.clone(), db.clone(), app.clone())])
            .expect("valid");
        idx.apply(
            &b,
            [Relation::protects(b.clone(), db.clone(), "production")],
        )
        .expect("valid");
        assert_eq!(idx.blocker_count(&db), 2);
        idx.delete(&a);
        assert_eq!(idx.blocker_count(&db), 1);
        let only = idx.blockers(&db).next().expect("one left");
        assert_eq!(only.by(), None);
        assert_eq!(only.reason(), Some("production"));
        assert_eq!(only.source(), SourceRef::ClusterUsage { name: "b" });
        assert_eq!(idx.key_count(), 1);
    }

    #[test]
    fn invalid_updates_change_nothing() {
        let mut idx = RelationIndex::new();
        let s = Source::usage("ns", "u");
        let other = Source::usage("ns", "other");
        let of = key("K", None, "x");
        idx.apply(&s, [Relation::protects(s.clone(), of.clone(), "keep")])
            .expect("valid");
        let err = idx.apply(&s, [Relation::protects(other.clone(), of.clone(), "r")]);
        assert!(
            matches!(err, Err(IndexError::SourceMismatch { .. })),
            "{err:?}"
        );
        let mut no_reason = Relation::protects(s.clone(), of.clone(), "r");
        no_reason.reason = None;
        let err = idx.apply(&s, [no_reason.clone()]);
        assert_eq!(
            err.map_err(|e| e.to_string()),
            Err("protection of example.io/K x by Usage ns/u has no reason".to_owned())
        );
        assert!(idx.reset([(s.clone(), vec![no_reason])]).is_err());
        assert_eq!(
            idx.blockers(&of)
                .map(|r| r.reason().map(str::to_owned))
                .collect::<Vec<_>>(),
            vec![Some("keep".to_owned())]
        );
    }

    #[test]
    fn reset_replaces_everything() {
        let mut idx = RelationIndex::new();
        let s1 = Source::rule("one");
        let s2 = Source::rule("two");
        let x = key("K", None, "x");
        let y = key("K", None, "y");
        idx.apply(&s1, [Relation::uses(s1.clone(), x.clone(), y.clone())])
            .expect("valid");
        idx.reset([(
            s2.clone(),
            vec![Relation::uses(s2.clone(), y.clone(), x.clone())],
        )])
        .expect("valid");
        assert_eq!(idx.len(), 1);
        assert!(idx.is_in_use(&y));
        assert!(!idx.is_in_use(&x));
        assert_eq!(idx.source_len(&s1), 0);
        assert_eq!(idx.source_len(&s2), 1);
    }

    #[test]
    fn default_index_works_like_new() {
        let mut idx = RelationIndex::default();
        let s = Source::rule("r");
        let (x, y) = (key("K", None, "x"), key("K", None, "y"));
        idx.apply(&s, [Relation::uses(s.clone(), x.clone(), y.clone())])
            .expect("valid");
        idx.delete(&s);
        idx.apply(&s, [Relation::uses(s.clone(), y.clone(), x.clone())])
            .expect("valid");
        assert!(idx.is_in_use(&y));
        assert_eq!(idx.keys().count(), 2);
    }

    #[test]
    fn an_object_using_itself_is_freed_once() {
        // Found by the property tests: the key is both `of` and `by` of the same relation.
        let mut idx = RelationIndex::new();
        let s = Source::rule("r");
        let (x, y) = (key("K", None, "x"), key("K", None, "y"));
        idx.apply(&s, [Relation::uses(s.clone(), x.clone(), x.clone())])
            .expect("valid");
        idx.apply(&s, [Relation::uses(s.clone(), y.clone(), x.clone())])
            .expect("valid");
        idx.delete(&s);
        assert_eq!((idx.len(), idx.key_count(), idx.string_count()), (0, 0, 0));
        idx.apply(&s, [Relation::uses(s.clone(), x.clone(), y.clone())])
            .expect("valid");
        assert_eq!(idx.key_count(), 2);
        assert!(idx.is_in_use(&x));
    }

    #[test]
    fn uids_are_kept_exactly() {
        let mut idx = RelationIndex::new();
        let s = Source::rule("r");
        let uuid = "0f8fad5b-d9cb-469f-a165-70867728950e";
        let r = Relation::uses(s.clone(), key("K", None, "x"), key("K", None, "y"))
            .with_uids(Some(uuid), Some("not-a-uuid"));
        idx.apply(&s, [r.clone()]).expect("valid");
        let got = idx.relations().next().expect("one");
        assert_eq!(got.to_relation(), r);
        assert!(!got.of_uid_differs(uuid));
        assert!(got.of_uid_differs("0f8fad5b-d9cb-469f-a165-70867728950f"));
    }
}
