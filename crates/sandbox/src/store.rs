//! In-memory storage with etcd's revision semantics.
//!
//! One global revision counter numbers every write, as etcd's does; an object's
//! `metadata.resourceVersion` is the revision that last wrote it, and a list's is the revision it
//! was read at. Each resource's objects live in a persistent ordered map (`imbl::OrdMap`), so a
//! list can keep an O(1) snapshot for `limit`/`continue` paging and stay consistent across pages
//! as an etcd read at a fixed revision does.
//!
//! Every write is recorded as a [`Change`] in a bounded history (the watch window: a watch that
//! resumes from a revision older than the window gets `410 Gone`, like a compacted etcd) and sent
//! to the live watchers and the in-process controllers.
//!
//! Objects are kept as their compact serialized JSON ([`Encoded`]) and decoded on read: a
//! `serde_json::Value` costs several times its JSON (an `IndexMap` per object, an allocation per
//! key and string), and memory per stored object is what bounds how many objects a sandbox holds
//! (`docs/benchmarks.md`, "Memory per stored object"). The watch window keeps the encoded form
//! too; only the changes sent to live watchers and controllers carry decoded values.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use imbl::OrdMap;
use serde_json::Value;
use tokio::sync::{broadcast, mpsc};

use crate::registry::ResourceKey;

/// `(namespace, name)`; the namespace is empty for cluster-scoped objects.
pub type ObjectKey = (String, String);

/// An object as stored: its compact JSON, or, for an object nested deeper than serde_json
/// parses (its limit is 128 levels, and a stored object's managedFields mirror its nesting a few
/// levels deeper than its request had), the `Value` itself. Serializing a `Value` and parsing it
/// back gives the same `Value` (members in order, numbers as they were), so decoding on read
/// changes nothing a reader sees.
#[derive(Debug, Clone)]
pub enum Encoded {
    Json(Arc<str>),
    Deep(Arc<Value>),
}

pub type Table = OrdMap<ObjectKey, Encoded>;

/// Nesting that serde_json parses back with room to spare (its limit is 128).
const MAX_JSON_DEPTH: usize = 100;

fn encode(object: &Arc<Value>) -> Encoded {
    if depth(object) > MAX_JSON_DEPTH {
        return Encoded::Deep(object.clone());
    }
    // Serializing a `Value` cannot fail: its keys are strings and its numbers finite.
    Encoded::Json(Arc::from(
        serde_json::to_string(&**object).expect("a Value serializes"),
    ))
}

/// Decodes a stored object.
pub fn decode(encoded: &Encoded) -> Arc<Value> {
    match encoded {
        // Serialized from a `Value` no deeper than `MAX_JSON_DEPTH`: it parses.
        Encoded::Json(json) => Arc::new(serde_json::from_str(json).expect("stored JSON parses")),
        Encoded::Deep(value) => value.clone(),
    }
}

fn depth(value: &Value) -> usize {
    match value {
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// A change as the watch window keeps it: encoded, decoded again for a watch that resumes.
#[derive(Debug)]
struct Recorded {
    revision: u64,
    resource: ResourceKey,
    event: EventType,
    object: Encoded,
    old: Option<Encoded>,
}

impl Recorded {
    fn decode(&self) -> Arc<Change> {
        Arc::new(Change {
            revision: self.revision,
            resource: self.resource.clone(),
            event: self.event,
            object: decode(&self.object),
            old: self.old.as_ref().map(decode),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One write, as watchers see it.
#[derive(Debug, Clone)]
pub struct Change {
    pub revision: u64,
    pub resource: ResourceKey,
    pub event: EventType,
    /// The object after the write (for a deletion, the last state, stamped with the deletion's
    /// revision as kube-apiserver does).
    pub object: Arc<Value>,
    /// The object before the write (for label-selector watches: a change that makes an object
    /// stop matching is sent as DELETED).
    pub old: Option<Arc<Value>>,
}

/// A watch started from a revision: the changes after it still in the window, then the live feed.
pub struct Subscription {
    pub backlog: Vec<Arc<Change>>,
    pub live: broadcast::Receiver<Arc<Change>>,
    /// Resources no longer served (see [`Store::drop_resource`]): a watch of one ends.
    pub retired: broadcast::Receiver<ResourceKey>,
}

pub struct Store {
    revision: u64,
    tables: HashMap<ResourceKey, Table>,
    uids: HashMap<String, (ResourceKey, ObjectKey)>,
    /// owner UID → dependents (objects whose ownerReferences name that UID).
    dependents: HashMap<String, BTreeSet<(ResourceKey, ObjectKey)>>,
    history: VecDeque<Recorded>,
    history_limit: usize,
    /// Snapshots kept for `continue` tokens: (revision, resource) → table as it was.
    snapshots: VecDeque<((u64, ResourceKey), Table)>,
    snapshot_limit: usize,
    live: broadcast::Sender<Arc<Change>>,
    /// Resources whose serving ended ([`Store::drop_resource`]).
    retired: broadcast::Sender<ResourceKey>,
    controllers: Vec<mpsc::UnboundedSender<Arc<Change>>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("revision", &self.revision)
            .field("resources", &self.tables.len())
            .finish()
    }
}

/// Why a read at a revision cannot be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expired {
    pub requested: u64,
    pub oldest: u64,
}

impl Store {
    /// `history_limit` is the watch window in changes; `watch_buffer` how many changes a live
    /// watcher may fall behind before it is closed (the client then re-lists).
    pub fn new(history_limit: usize, watch_buffer: usize) -> Self {
        let (live, _) = broadcast::channel(watch_buffer.max(16));
        let (retired, _) = broadcast::channel(16);
        Store {
            // etcd starts counting at 1; starting higher makes stale-version bugs visible.
            revision: 100,
            tables: HashMap::new(),
            uids: HashMap::new(),
            dependents: HashMap::new(),
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            snapshots: VecDeque::new(),
            snapshot_limit: 64,
            live,
            retired,
            controllers: Vec::new(),
        }
    }

    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// In-process controllers get every change, never dropped (an unbounded channel: they must
    /// not miss one, and they are as fast as the store).
    pub fn register_controller(&mut self) -> mpsc::UnboundedReceiver<Arc<Change>> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.controllers.push(tx);
        rx
    }

    pub fn get(&self, resource: &ResourceKey, key: &ObjectKey) -> Option<Arc<Value>> {
        self.tables.get(resource)?.get(key).map(decode)
    }

    pub fn by_uid(&self, uid: &str) -> Option<(ResourceKey, Arc<Value>)> {
        let (resource, key) = self.uids.get(uid)?;
        Some((resource.clone(), self.get(resource, key)?))
    }

    /// Objects whose ownerReferences name `uid`.
    pub fn dependents_of(&self, uid: &str) -> Vec<(ResourceKey, Arc<Value>)> {
        self.dependents
            .get(uid)
            .map(|set| {
                set.iter()
                    .filter_map(|(r, k)| Some((r.clone(), self.get(r, k)?)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The whole table of a resource (an O(1) persistent snapshot).
    pub fn table(&self, resource: &ResourceKey) -> Table {
        self.tables.get(resource).cloned().unwrap_or_default()
    }

    /// Objects of a resource, in one namespace or all, in key order.
    pub fn list(&self, resource: &ResourceKey, namespace: Option<&str>) -> Vec<Arc<Value>> {
        let Some(table) = self.tables.get(resource) else {
            return vec![];
        };
        list_table(table, namespace, None, usize::MAX).0
    }

    pub fn count(&self, resource: &ResourceKey) -> usize {
        self.tables.get(resource).map_or(0, OrdMap::len)
    }

    /// Keeps a snapshot of a resource at the current revision for `continue` tokens.
    pub fn keep_snapshot(&mut self, resource: &ResourceKey) {
        let id = (self.revision, resource.clone());
        if self.snapshots.iter().any(|(k, _)| *k == id) {
            return;
        }
        let table = self.table(resource);
        self.snapshots.push_back((id, table));
        while self.snapshots.len() > self.snapshot_limit {
            self.snapshots.pop_front();
        }
    }

    pub fn snapshot(&self, revision: u64, resource: &ResourceKey) -> Option<Table> {
        self.snapshots
            .iter()
            .find(|((r, res), _)| *r == revision && res == resource)
            .map(|(_, t)| t.clone())
    }

    pub fn insert(&mut self, resource: &ResourceKey, object: Value) -> Arc<Value> {
        self.write(resource, object, EventType::Added)
    }

    pub fn replace(&mut self, resource: &ResourceKey, object: Value) -> Arc<Value> {
        self.write(resource, object, EventType::Modified)
    }

    fn write(&mut self, resource: &ResourceKey, mut object: Value, event: EventType) -> Arc<Value> {
        self.revision += 1;
        object["metadata"]["resourceVersion"] = Value::String(self.revision.to_string());
        let key = object_key(&object);
        let object = Arc::new(object);
        let encoded = encode(&object);
        let old = self
            .tables
            .entry(resource.clone())
            .or_default()
            .insert(key.clone(), encoded.clone());
        let old = old.map(|old| {
            let value = decode(&old);
            self.unindex(resource, &key, &value);
            (old, value)
        });
        self.index(resource, &key, &object);
        let (old_encoded, old) = old.unzip();
        self.record(
            Change {
                revision: self.revision,
                resource: resource.clone(),
                event,
                object: object.clone(),
                old,
            },
            encoded,
            old_encoded,
        );
        object
    }

    pub fn remove(&mut self, resource: &ResourceKey, key: &ObjectKey) -> Option<Arc<Value>> {
        let old_encoded = self.tables.get_mut(resource)?.remove(key)?;
        let old = decode(&old_encoded);
        self.unindex(resource, key, &old);
        self.revision += 1;
        let mut last = (*old).clone();
        last["metadata"]["resourceVersion"] = Value::String(self.revision.to_string());
        let last = Arc::new(last);
        let encoded = encode(&last);
        self.record(
            Change {
                revision: self.revision,
                resource: resource.clone(),
                event: EventType::Deleted,
                object: last.clone(),
                old: Some(old),
            },
            encoded,
            Some(old_encoded),
        );
        Some(last)
    }

    /// Forgets a resource whose objects are all gone (a deleted CRD), and ends every watch of
    /// it: kube-apiserver's CRD handler destroys a deleted CRD's storage, which closes its
    /// watches, and a client's list again is answered 404 (the registry no longer serves it:
    /// the caller removed it first, so a watcher cannot list it again before it is gone).
    pub fn drop_resource(&mut self, resource: &ResourceKey) {
        if self.tables.get(resource).is_some_and(OrdMap::is_empty) {
            self.tables.remove(resource);
        }
        // No receivers is fine: nobody is watching.
        let _ = self.retired.send(resource.clone());
    }

    fn index(&mut self, resource: &ResourceKey, key: &ObjectKey, object: &Value) {
        if let Some(uid) = object["metadata"]["uid"].as_str() {
            self.uids
                .insert(uid.to_string(), (resource.clone(), key.clone()));
        }
        for owner in owner_uids(object) {
            self.dependents
                .entry(owner)
                .or_default()
                .insert((resource.clone(), key.clone()));
        }
    }

    fn unindex(&mut self, resource: &ResourceKey, key: &ObjectKey, object: &Value) {
        if let Some(uid) = object["metadata"]["uid"].as_str() {
            self.uids.remove(uid);
        }
        for owner in owner_uids(object) {
            if let Some(set) = self.dependents.get_mut(&owner) {
                set.remove(&(resource.clone(), key.clone()));
                if set.is_empty() {
                    self.dependents.remove(&owner);
                }
            }
        }
    }

    /// Keeps `change` in the window as `object`/`old` (its objects encoded) and sends it.
    fn record(&mut self, change: Change, object: Encoded, old: Option<Encoded>) {
        self.history.push_back(Recorded {
            revision: change.revision,
            resource: change.resource.clone(),
            event: change.event,
            object,
            old,
        });
        let change = Arc::new(change);
        while self.history.len() > self.history_limit {
            self.history.pop_front();
        }
        // No receivers is fine: nobody is watching.
        let _ = self.live.send(change.clone());
        self.controllers
            .retain(|tx| tx.send(change.clone()).is_ok());
    }

    /// The oldest revision a watch can resume from.
    pub fn oldest_resumable(&self) -> u64 {
        self.history
            .front()
            .map_or(self.revision, |c| c.revision.saturating_sub(1))
    }

    /// Subscribes to changes after `revision`. Errors with [`Expired`] when changes after it
    /// have left the window, as a compacted etcd does.
    pub fn subscribe(&self, revision: u64) -> Result<Subscription, Expired> {
        let oldest = self.oldest_resumable();
        if revision < oldest {
            return Err(Expired {
                requested: revision,
                oldest,
            });
        }
        let backlog = self
            .history
            .iter()
            .filter(|c| c.revision > revision)
            .map(Recorded::decode)
            .collect();
        Ok(Subscription {
            backlog,
            live: self.live.subscribe(),
            retired: self.retired.subscribe(),
        })
    }

    /// Drops the watch window (for tests of `410 Gone`: a forced compaction).
    pub fn compact(&mut self) {
        self.history.clear();
        self.snapshots.clear();
    }
}

/// Lists a table in key order from after `start` (exclusive), at most `limit` items. Returns the
/// items and whether more remain.
pub fn list_table(
    table: &Table,
    namespace: Option<&str>,
    start: Option<&ObjectKey>,
    limit: usize,
) -> (Vec<Arc<Value>>, bool) {
    let mut out = Vec::new();
    let lower = range_start(namespace, start);
    let mut more = false;
    for (k, v) in table.range((lower, std::ops::Bound::Unbounded)) {
        if let Some(ns) = namespace {
            if k.0 != ns {
                break;
            }
        }
        if out.len() == limit {
            more = true;
            break;
        }
        out.push(decode(v));
    }
    (out, more)
}

/// How many objects [`list_table`] would give after `start` with no limit, without decoding
/// them.
pub fn count_table(table: &Table, namespace: Option<&str>, start: Option<&ObjectKey>) -> usize {
    table
        .range((range_start(namespace, start), std::ops::Bound::Unbounded))
        .take_while(|(k, _)| namespace.is_none_or(|ns| k.0 == ns))
        .count()
}

fn range_start(namespace: Option<&str>, start: Option<&ObjectKey>) -> std::ops::Bound<ObjectKey> {
    match (start, namespace) {
        (Some(k), _) => std::ops::Bound::Excluded(k.clone()),
        (None, Some(ns)) => std::ops::Bound::Included((ns.to_string(), String::new())),
        (None, None) => std::ops::Bound::Unbounded,
    }
}

pub fn object_key(object: &Value) -> ObjectKey {
    let meta = &object["metadata"];
    (
        meta["namespace"].as_str().unwrap_or_default().to_string(),
        meta["name"].as_str().unwrap_or_default().to_string(),
    )
}

fn owner_uids(object: &Value) -> Vec<String> {
    object["metadata"]["ownerReferences"]
        .as_array()
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r["uid"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Counts objects per resource in a namespace (for the namespace controller's conditions).
pub fn count_by_resource(
    store: &Store,
    namespace: &str,
    resources: &[ResourceKey],
) -> BTreeMap<ResourceKey, usize> {
    resources
        .iter()
        .map(|r| {
            let n = store
                .tables
                .get(r)
                .map_or(0, |t| count_table(t, Some(namespace), None));
            (r.clone(), n)
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cm_key() -> ResourceKey {
        (String::new(), "configmaps".to_string())
    }

    fn cm(ns: &str, name: &str, uid: &str) -> Value {
        json!({"metadata": {"namespace": ns, "name": name, "uid": uid}})
    }

    #[test]
    fn every_write_gets_a_new_revision_and_resumes_from_history() {
        let mut s = Store::new(3, 16);
        let r0 = s.revision();
        let a = s.insert(&cm_key(), cm("a", "x", "u1"));
        assert_eq!(a["metadata"]["resourceVersion"], (r0 + 1).to_string());
        s.replace(&cm_key(), cm("a", "x", "u1"));
        s.remove(&cm_key(), &("a".into(), "x".into()));
        let sub = s.subscribe(r0 + 1).expect("in window");
        let kinds: Vec<_> = sub.backlog.iter().map(|c| c.event).collect();
        assert_eq!(kinds, [EventType::Modified, EventType::Deleted]);
        s.insert(&cm_key(), cm("a", "y", "u2"));
        s.insert(&cm_key(), cm("a", "z", "u3"));
        assert!(s.subscribe(r0).is_err(), "older than the window is expired");
    }

    #[test]
    fn a_stored_object_reads_back_with_every_member_in_order() {
        let mut s = Store::new(3, 16);
        // Built by inserts and a clone, as the write path does: maps carry spare capacity.
        let mut data = serde_json::Map::with_capacity(64);
        for k in ["z", "a", "m"] {
            data.insert(k.to_string(), json!(k.repeat(3)));
        }
        let mut object = cm("a", "x", "u1");
        object["data"] = Value::Object(data);
        object["list"] = json!([{"b": 1, "a": [true, null, 1.5]}, "s", {}]);
        let stored = s.insert(&cm_key(), object.clone());
        object["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"].clone();
        assert_eq!(
            serde_json::to_string(&*stored).expect("json"),
            serde_json::to_string(&object).expect("json"),
            "same members, same order"
        );
        let read = s.get(&cm_key(), &("a".into(), "x".into())).expect("stored");
        assert_eq!(*read, object, "decoded as written");
        let data = read["data"].as_object().expect("data");
        assert_eq!(data.keys().collect::<Vec<_>>(), ["z", "a", "m"]);
    }

    /// Deeper than serde_json parses back (128 levels): kept as a `Value`, read back whole.
    #[test]
    fn an_object_nested_deeper_than_json_parses_is_stored_and_read() {
        let mut s = Store::new(3, 16);
        let mut deep = json!("leaf");
        for _ in 0..200 {
            deep = json!({ "a": deep });
        }
        let mut object = cm("a", "deep", "u1");
        object["spec"] = deep;
        let stored = s.insert(&cm_key(), object);
        let read = s
            .get(&cm_key(), &("a".into(), "deep".into()))
            .expect("stored");
        assert_eq!(read, stored);
        let sub = s.subscribe(s.revision() - 1).expect("in window");
        assert_eq!(sub.backlog[0].object, stored);
    }

    #[test]
    fn namespace_listing_and_paging() {
        let mut s = Store::new(100, 16);
        for (ns, n) in [("a", "1"), ("a", "2"), ("b", "1"), ("c", "1")] {
            s.insert(&cm_key(), cm(ns, n, &format!("{ns}{n}")));
        }
        assert_eq!(s.list(&cm_key(), Some("a")).len(), 2);
        assert_eq!(s.list(&cm_key(), None).len(), 4);
        let t = s.table(&cm_key());
        let (page, more) = list_table(&t, None, None, 3);
        assert!(more);
        let last = object_key(&page[2]);
        let (rest, more) = list_table(&t, None, Some(&last), 3);
        assert!(!more);
        assert_eq!(rest.len(), 1);
    }

    #[test]
    fn owner_index_follows_writes() {
        let mut s = Store::new(100, 16);
        let mut dep = cm("a", "d", "dep");
        dep["metadata"]["ownerReferences"] = json!([{"uid": "owner"}]);
        s.insert(&cm_key(), dep);
        assert_eq!(s.dependents_of("owner").len(), 1);
        s.replace(&cm_key(), cm("a", "d", "dep"));
        assert!(s.dependents_of("owner").is_empty());
        assert!(s.by_uid("dep").is_some());
    }
}
