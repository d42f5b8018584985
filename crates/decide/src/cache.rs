//! The object-metadata cache: what the controller knows about every object of every kind a
//! Usage refers to.
//!
//! # Data model
//!
//! [`Caches`] maps a [`GroupKind`] (no version: an object is the same object at every served
//! version) to a [`KindCache`], which maps `(namespace, name)` to a [`CachedObject`] — only the
//! metadata the decisions need: UID, labels, the controller owner's UID, every owner's UID,
//! whether the object is being deleted, Lien's own annotations and the resourceVersion (for
//! optimistic concurrency on writes). Full objects are never kept: the caches are fed by
//! metadata-only watches, so a kind with large objects (Secrets, ConfigMaps) costs only its
//! metadata.
//!
//! Like the relation index, the cache is a plain synchronous structure with `apply` / `delete` /
//! `reset` (a restarted watch's fresh list), so every decision that reads it is testable without
//! a runtime. A kind is `synced` once its first list completed: until then, "no such object"
//! means "not known yet", and nothing is decided from its absence.

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use lien_core::ObjectKey;

/// Annotations Lien reads back from the objects it watches start with this prefix; the rest are
/// dropped so the cache stays small.
pub const LIEN_ANNOTATION_PREFIX: &str = "lien.dev/";

/// Whether the cache keeps an annotation: only the replay record, the one Lien reads back
/// (`replay`). Other `lien.dev/` annotations are anyone's to write on their objects, in any
/// number and size, and Lien reads none of them from the cache.
pub fn kept_annotation(key: &str) -> bool {
    key == crate::replay::DELETION_ATTEMPT_ANNOTATION
}

/// A kind without its version (defined in `lien-core`, beside `ObjectKey`).
pub use lien_core::GroupKind;

/// What the controller keeps of one object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CachedObject {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion`, sent back as a precondition on writes.
    pub resource_version: Option<String>,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// UID of the ownerReference with `controller: true`, if any.
    pub controller_uid: Option<String>,
    /// UIDs of every ownerReference.
    pub owner_uids: Vec<String>,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// The `lien.dev/` annotations only.
    pub annotations: BTreeMap<String, String>,
}

impl CachedObject {
    /// Reduces object metadata to what the controller keeps.
    pub fn from_meta(meta: &ObjectMeta) -> Self {
        let owners = meta.owner_references.as_deref().unwrap_or_default();
        Self {
            uid: meta.uid.clone().unwrap_or_default(),
            resource_version: meta.resource_version.clone(),
            labels: meta.labels.clone().unwrap_or_default(),
            controller_uid: owners
                .iter()
                .find(|o| o.controller == Some(true))
                .map(|o| o.uid.clone()),
            owner_uids: owners.iter().map(|o| o.uid.clone()).collect(),
            deleting: meta.deletion_timestamp.is_some(),
            annotations: meta
                .annotations
                .iter()
                .flatten()
                .filter(|(k, _)| kept_annotation(k))
                .map(|(k, v)| {
                    // Lien's own records are far smaller; a longer one is kept as unreadable,
                    // so that it is removed as forged rather than held in memory.
                    let v = if v.len() > crate::replay::MAX_RECORD_BYTES {
                        String::new()
                    } else {
                        v.clone()
                    };
                    (k.clone(), v)
                })
                .collect(),
        }
    }

    /// Whether every `(key, value)` of `selector` is among the labels.
    pub fn matches_labels(&self, selector: &BTreeMap<String, String>) -> bool {
        selector
            .iter()
            .all(|(k, v)| self.labels.get(k).is_some_and(|l| l == v))
    }
}

/// `(namespace, name)`; the namespace is `None` for cluster-scoped objects.
pub type NsName = (Option<String>, String);

/// Every object of one kind.
#[derive(Debug, Clone, Default)]
pub struct KindCache {
    /// Whether the kind is namespaced (from discovery).
    pub namespaced: bool,
    /// The served `apiVersion` the watch uses (for owner references and writes).
    pub api_version: String,
    /// The resource's plural (for writes).
    pub plural: String,
    /// Whether the first list completed.
    pub synced: bool,
    /// Only objects carrying Lien's labels or annotations are kept: the kind is read only as a
    /// rule's `by` side, so nothing decides from its other objects (they are users, never in
    /// use), and 100,000 PersistentVolumes a rule reads would otherwise cost about 400 bytes
    /// each here. A marked object is kept so that its stale label is removed and its DELETE
    /// record forgotten. Set from the kind's `lien_controller` watch, which a change of it
    /// restarts (a relist refills the cache).
    pub marked_only: bool,
    /// The objects, ordered by namespace and name (status lists them in this order).
    pub objects: BTreeMap<NsName, CachedObject>,
}

impl KindCache {
    /// The objects in `namespace` (`None`: every namespace, or the cluster-scoped ones).
    ///
    /// A namespace's objects are one range of the ordered map: a Usage in one namespace never
    /// walks the others'.
    pub fn in_namespace<'a>(
        &'a self,
        namespace: Option<&'a str>,
    ) -> Box<dyn Iterator<Item = (&'a NsName, &'a CachedObject)> + 'a> {
        match namespace {
            None => Box::new(self.objects.iter()),
            Some(ns) => Box::new(
                self.objects
                    .range((Some(ns.to_owned()), String::new())..)
                    .take_while(move |((n, _), _)| n.as_deref() == Some(ns)),
            ),
        }
    }
}

/// Every watched kind.
#[derive(Debug, Clone, Default)]
pub struct Caches {
    kinds: HashMap<GroupKind, KindCache>,
    /// Kinds discovery does not know: a Usage naming one is `Ready=False, UnknownKind`.
    unknown: HashSet<GroupKind>,
    /// Kinds Lien's ServiceAccount may not list and watch (the API server answered 403), with
    /// the resource to grant: a Usage naming one is `Ready=False, NotPermitted`.
    forbidden: HashMap<GroupKind, String>,
}

impl Caches {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts caching `gk` (not yet synced). Keeps the objects if the kind is already cached.
    pub fn add_kind(&mut self, gk: GroupKind, namespaced: bool, api_version: &str, plural: &str) {
        self.unknown.remove(&gk);
        let entry = self.kinds.entry(gk).or_default();
        entry.namespaced = namespaced;
        entry.api_version = api_version.to_owned();
        entry.plural = plural.to_owned();
    }

    /// Stops caching `gk` (and forgets that it was unknown or refused).
    pub fn remove_kind(&mut self, gk: &GroupKind) -> bool {
        self.unknown.remove(gk);
        self.forbidden.remove(gk);
        self.kinds.remove(gk).is_some()
    }

    /// Records that discovery does not know `gk`.
    pub fn mark_unknown(&mut self, gk: GroupKind) {
        self.kinds.remove(&gk);
        self.unknown.insert(gk);
    }

    /// Whether discovery said `gk` does not exist.
    pub fn is_unknown(&self, gk: &GroupKind) -> bool {
        self.unknown.contains(gk)
    }

    /// Records that the API server refuses Lien a list or watch of `gk` (403), naming the
    /// `resource` to grant (`plural` or `plural.group`, as `lien manifests --resource` takes
    /// it). Returns whether that is news. The kind is *not* settled: its objects exist, Lien
    /// cannot see them, and nothing may be concluded from their absence.
    pub fn mark_forbidden(&mut self, gk: GroupKind, resource: &str) -> bool {
        self.forbidden.insert(gk, resource.to_owned()).as_deref() != Some(resource)
    }

    /// Forgets that `gk` was refused (its list started); returns whether it was.
    pub fn clear_forbidden(&mut self, gk: &GroupKind) -> bool {
        self.forbidden.remove(gk).is_some()
    }

    /// The resource to grant, while the API server refuses Lien a list or watch of `gk`.
    pub fn forbidden(&self, gk: &GroupKind) -> Option<&str> {
        self.forbidden.get(gk).map(String::as_str)
    }

    /// Whether `gk` is settled: listed once (and not refused since), or known not to exist. Decisions that act on the
    /// *absence* of an object wait until every kind involved is settled.
    pub fn is_settled(&self, gk: &GroupKind) -> bool {
        // A kind listed once and then refused (RBAC withdrawn) is not: what it held may be
        // gone or not, and Lien cannot tell until a list goes through again.
        !self.forbidden.contains_key(gk)
            && (self.is_unknown(gk) || self.kinds.get(gk).is_some_and(|k| k.synced))
    }

    /// Whether Namespace `name` is being deleted: `Some(true)` while it is `Terminating` (or
    /// already gone), `Some(false)` while it lives, `None` before the Namespace list completed —
    /// a restarted controller must not take "not seen yet" for "not being deleted".
    pub fn namespace_deleting(&self, name: &str) -> Option<bool> {
        let kind = self
            .kinds
            .get(&GroupKind::new("", "Namespace"))
            .filter(|k| k.synced)?;
        Some(
            kind.objects
                .get(&(None, name.to_owned()))
                .is_none_or(|ns| ns.deleting),
        )
    }

    /// The cache of one kind, if it is cached.
    pub fn kind(&self, gk: &GroupKind) -> Option<&KindCache> {
        self.kinds.get(gk)
    }

    /// Every cached kind.
    pub fn kinds(&self) -> impl Iterator<Item = (&GroupKind, &KindCache)> {
        self.kinds.iter()
    }

    /// Keeps only objects carrying Lien's labels or annotations for `gk` (see
    /// [`KindCache::marked_only`]).
    pub fn set_marked_only(&mut self, gk: &GroupKind, marked_only: bool) {
        if let Some(kind) = self.kinds.get_mut(gk) {
            kind.marked_only = marked_only;
        }
    }

    /// Whether an object with this metadata belongs in the cache of `gk`: always, unless the
    /// kind keeps marked objects only and this one carries none of Lien's labels or annotations.
    pub fn keeps(&self, gk: &GroupKind, meta: &ObjectMeta) -> bool {
        let liens = |m: &Option<BTreeMap<String, String>>| {
            m.iter()
                .flatten()
                .any(|(k, _)| k.starts_with(LIEN_ANNOTATION_PREFIX))
        };
        self.kinds.get(gk).is_none_or(|k| !k.marked_only)
            || liens(&meta.labels)
            || meta
                .annotations
                .iter()
                .flatten()
                .any(|(k, _)| kept_annotation(k))
    }

    /// One object.
    pub fn get(&self, key: &ObjectKey) -> Option<&CachedObject> {
        self.kinds
            .get(&GroupKind::new(&key.group, &key.kind))?
            .objects
            .get(&(key.namespace.clone(), key.name.clone()))
    }

    /// An object was added or changed. Ignored for kinds not cached and for objects without a
    /// name (a malformed watch event is skipped, never fatal).
    pub fn apply(&mut self, gk: &GroupKind, meta: &ObjectMeta) -> bool {
        self.insert(gk, meta).is_some()
    }

    /// [`Caches::apply`], returning the object's key and what the cache held for it before
    /// (`None` when the event was ignored): what changed is what a watch event is worth.
    pub fn insert(
        &mut self,
        gk: &GroupKind,
        meta: &ObjectMeta,
    ) -> Option<(NsName, Option<CachedObject>)> {
        let (Some(kind), Some(name)) = (self.kinds.get_mut(gk), meta.name.clone()) else {
            return None;
        };
        let key = (meta.namespace.clone(), name);
        let old = kind
            .objects
            .insert(key.clone(), CachedObject::from_meta(meta));
        Some((key, old))
    }

    /// An object is gone.
    pub fn delete(&mut self, gk: &GroupKind, namespace: Option<&str>, name: &str) -> bool {
        self.remove(gk, namespace, name).is_some()
    }

    /// [`Caches::delete`], returning what the cache held.
    pub fn remove(
        &mut self,
        gk: &GroupKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<CachedObject> {
        self.kinds
            .get_mut(gk)?
            .objects
            .remove(&(namespace.map(str::to_owned), name.to_owned()))
    }

    /// One object of `gk` by namespace and name.
    pub fn object(&self, gk: &GroupKind, key: &NsName) -> Option<&CachedObject> {
        self.kinds.get(gk)?.objects.get(key)
    }

    /// Replaces every object of `gk` with a fresh list already reduced, and marks the kind
    /// synced.
    pub fn reset_objects(&mut self, gk: &GroupKind, objects: BTreeMap<NsName, CachedObject>) {
        self.replace_objects(gk, objects);
    }

    /// [`Caches::reset_objects`], returning the objects it replaced if the kind was synced
    /// before (`None`: a first list, or a kind not cached), so that a relist can be compared
    /// with what it replaces.
    pub fn replace_objects(
        &mut self,
        gk: &GroupKind,
        objects: BTreeMap<NsName, CachedObject>,
    ) -> Option<BTreeMap<NsName, CachedObject>> {
        let kind = self.kinds.get_mut(gk)?;
        let old = std::mem::replace(&mut kind.objects, objects);
        let was_synced = std::mem::replace(&mut kind.synced, true);
        was_synced.then_some(old)
    }

    /// Replaces every object of `gk` with a fresh list, and marks the kind synced.
    pub fn reset<'a>(&mut self, gk: &GroupKind, metas: impl IntoIterator<Item = &'a ObjectMeta>) {
        let Some(kind) = self.kinds.get_mut(gk) else {
            return;
        };
        kind.objects = metas
            .into_iter()
            .filter_map(|m| {
                let name = m.name.clone()?;
                Some(((m.namespace.clone(), name), CachedObject::from_meta(m)))
            })
            .collect();
        kind.synced = true;
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;

    fn meta(ns: Option<&str>, name: &str, uid: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: ns.map(str::to_owned),
            name: Some(name.into()),
            uid: Some(uid.into()),
            ..Default::default()
        }
    }

    #[test]
    fn keeps_only_what_decisions_need() {
        let mut m = meta(Some("a"), "x", "u1");
        m.annotations = Some(
            [
                ("lien.dev/deletion-attempt".to_string(), "{}".to_string()),
                ("big".to_string(), "x".repeat(1000)),
            ]
            .into(),
        );
        m.owner_references = Some(vec![
            OwnerReference {
                uid: "o1".into(),
                ..Default::default()
            },
            OwnerReference {
                uid: "c1".into(),
                controller: Some(true),
                ..Default::default()
            },
        ]);
        let o = CachedObject::from_meta(&m);
        assert_eq!(o.controller_uid.as_deref(), Some("c1"));
        assert_eq!(o.owner_uids, vec!["o1", "c1"]);
        assert_eq!(o.annotations.len(), 1);
    }

    /// Issue 28, finding 6: whoever writes an object Lien watches writes its `lien.dev/`
    /// annotations too; the cache keeps only the replay record, and at most
    /// `MAX_RECORD_BYTES` of it.
    #[test]
    fn keeps_only_the_replay_record_and_a_bounded_one() {
        let mut m = meta(Some("a"), "x", "u1");
        m.annotations = Some(
            [
                ("lien.dev/anything".to_string(), "x".repeat(200_000)),
                ("lien.dev/deletion-attempt".to_string(), "y".repeat(200_000)),
            ]
            .into(),
        );
        let o = CachedObject::from_meta(&m);
        assert_eq!(o.annotations.len(), 1, "{:?}", o.annotations.keys());
        assert_eq!(o.annotations["lien.dev/deletion-attempt"], "");
    }

    #[test]
    fn apply_delete_reset() {
        let gk = GroupKind::new("", "ConfigMap");
        let mut c = Caches::new();
        assert!(
            !c.apply(&gk, &meta(Some("a"), "x", "u1")),
            "kind not cached"
        );
        c.add_kind(gk.clone(), true, "v1", "configmaps");
        assert!(c.apply(&gk, &meta(Some("a"), "x", "u1")));
        assert!(!c.kind(&gk).is_some_and(|k| k.synced));
        let key = gk.key(Some("a"), "x");
        assert_eq!(c.get(&key).map(|o| o.uid.as_str()), Some("u1"));
        assert!(c.delete(&gk, Some("a"), "x"));
        assert!(c.get(&key).is_none());
        c.reset(
            &gk,
            &[meta(Some("a"), "y", "u2"), meta(Some("b"), "y", "u3")],
        );
        let kind = c.kind(&gk).expect("cached");
        assert!(kind.synced);
        assert_eq!(kind.in_namespace(Some("b")).count(), 1);
        assert_eq!(kind.in_namespace(None).count(), 2);
    }

    #[test]
    fn group_kind_from_api_version() {
        assert_eq!(
            GroupKind::from_api_version("v1", "Pod"),
            GroupKind::new("", "Pod")
        );
        assert_eq!(
            GroupKind::from_api_version("apps/v1", "Deployment"),
            GroupKind::new("apps", "Deployment")
        );
    }
}
