//! Desired writes, computed as data.
//!
//! # Data model
//!
//! Nothing here talks to the API server: given the caches, the usages, their [`Selection`]s and
//! the relation index, these functions say what the cluster should look like and return the
//! differences as plain values ([`LabelWrite`], [`UsageMetaWrite`], a new [`UsageStatus`]). The
//! leader's writer applies them (`lien_controller::writer`); tests assert on them directly.
//!
//! - **Label**: an object carries `lien.dev/in-use: "true"` iff the index says it is in use. The
//!   label is derived from the index, not counted per Usage, so it is reference-counted across
//!   every relation by construction, and a label removed by hand comes back at once. Removal
//!   waits until everything is *settled* (every usage list and every referenced kind listed),
//!   so that a restarting controller never unprotects an object it has not yet re-derived.
//! - **Finalizer**: a Usage with `by` keeps `lien.dev/usage` until every `by` object is gone; a
//!   reason-only Usage carries it too and loses it at once when deleted — which lifts the
//!   protection — unless its namespace is being deleted as well ([`kept_for_namespace`]): then
//!   it keeps protecting, so that deleting a namespace never deletes an object under a lien.
//! - **Owner references**: every matched `by` object becomes an owner (never the controller, and
//!   without `blockOwnerDeletion`, which would deadlock a foreground delete of the user against
//!   the Usage's finalizer) where scope allows, so the garbage collector removes the Usage when
//!   its users are gone. Lien records the UIDs of the references it added (`lien.dev/owners`)
//!   and adds or removes only those ([`owner_references`]); every other reference stays as it
//!   is. Where no user became an owner — scope forbids it (a ClusterUsage of a
//!   namespaced user), or the users were deleted before the owner-reference write landed — and
//!   every user seen is gone, Lien deletes the Usage itself ([`users_gone`]), as the garbage
//!   collector would have.
//! - **Status**: `Ready` and `InUse` conditions (and `WaitingForUsers` while a Usage with `by`
//!   is being deleted and users remain), observedGeneration, per side a one-line summary for
//!   `kubectl get` ([`side_summary`]), the matched count and a bounded list of matched objects
//!   with UIDs.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};
use lien_api::{
    IN_USE_LABEL, MatchedObject, MatchedObjects, ResourceSpec, USAGE_FINALIZER, UsageStatus,
};
use lien_core::{RelationIndex, Source, SourceRef};

use crate::cache::{CachedObject, Caches, GroupKind, KindCache, NsName};
use crate::resolve::{Matched, Problem, UsageView};
use crate::selection::{Selection, SideSelection};

/// The condition reason of every Usage while Lien's webhook configuration is missing or differs
/// (watched by `lien_controller::webhook_config`, which re-exports it).
pub const NOT_CONFIGURED_REASON: &str = "WebhookNotConfigured";
/// The `Ready` reason of a Usage or rule whose relations only warn (`spec.enforcement: Warn`):
/// `kubectl get` shows it in the REASON column, so nobody takes it for a protection.
pub const WARN_ONLY_REASON: &str = "WarnOnly";
/// What a Usage or rule in warn mode says in `Ready`.
pub const WARN_ONLY_MESSAGE: &str = "spec.enforcement: Warn: a DELETE it holds is not refused, it goes through with a warning naming it (set Deny to enforce)";

/// How many matched objects status lists per side (the count is always exact).
pub const STATUS_LIST_LIMIT: usize = 20;
/// How many `by` objects become owners of one Usage. More would bloat the Usage; the finalizer
/// still holds it until every `by` object is gone.
pub const OWNER_LIMIT: usize = 50;

/// An object to write to, with what a write needs to address it and guard it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectTarget {
    /// Its kind.
    pub gk: GroupKind,
    /// The served `apiVersion` to write at.
    pub api_version: String,
    /// The resource's plural.
    pub plural: String,
    /// Namespace, `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// UID: a write never reaches another incarnation of the object.
    pub uid: String,
    /// The resourceVersion the decision was made on (optimistic concurrency).
    pub resource_version: Option<String>,
}

impl ObjectTarget {
    /// The target for a cached object.
    pub fn new(
        gk: &GroupKind,
        kind: &KindCache,
        namespace: Option<&str>,
        name: &str,
        o: &CachedObject,
    ) -> Self {
        Self {
            gk: gk.clone(),
            api_version: kind.api_version.clone(),
            plural: kind.plural.clone(),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
            uid: o.uid.clone(),
            resource_version: o.resource_version.clone(),
        }
    }
}

/// Add or remove the in-use label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelWrite {
    /// The object.
    pub target: ObjectTarget,
    /// `true`: set `lien.dev/in-use: "true"`; `false`: remove it.
    pub in_use: bool,
}

/// Whether an object carries the in-use label.
pub fn is_labelled(o: &CachedObject) -> bool {
    o.labels.get(IN_USE_LABEL).is_some_and(|v| v == "true")
}

/// Every label write that makes "labelled" equal "in use" for the cached objects, in turns
/// (see [`label_plan`]). Removals only when `settled` (see the module docs).
pub fn label_writes(
    index: &RelationIndex,
    caches: &Caches,
    settled: bool,
    of_kinds: &HashSet<GroupKind>,
) -> Vec<LabelWrite> {
    label_plan(index, caches, settled, of_kinds, usize::MAX).writes
}

/// How many label writes one plan holds at most: a write pass sends labels for a bounded time
/// and plans again (`lien_controller`'s `LABEL_PASS_BUDGET`, 250 ms: a few hundred PATCHes), so
/// building a write for each of 100,000 objects waiting for its label would be spent on writes
/// the pass never reaches.
pub const LABELS_PER_PLAN: usize = 4096;

/// The label writes of one plan, and how many more are needed than it holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelPlan {
    /// At most the limit asked for, in turns.
    pub writes: Vec<LabelWrite>,
    /// How many more objects need a label write (planned again next time).
    pub left: usize,
}

/// One object whose label must change, as [`label_plan`] finds it.
type Needed<'a> = (
    &'a GroupKind,
    &'a KindCache,
    &'a NsName,
    &'a CachedObject,
    bool,
);

/// The label writes that make "labelled" equal "in use" for the cached objects: at most
/// `limit`, in turns by the source holding each object — the first label of every source, then
/// the second of every source, and so on, the removals (objects nothing holds) taking their turn
/// as one more source; a source is an object's first blocker. Removals only when `settled`.
///
/// The write pass sends a bounded part of them at a time and plans again, so the order says
/// who waits: in the order of the caches, the 100,000 objects of one tenant's selector went
/// before the one object of a Usage made a second later, for as long as writing them took; in
/// turns, each source's next label waits for one label of each other source, and a new Usage's
/// label is among the first of the next pass.
///
/// `of_kinds`: the kinds some source protects (a Usage's `spec.of`, a rule's `of`). An object
/// of another kind cannot be in use, so only its label is looked at (a stale one is removed):
/// a pass over 100,000 PersistentVolumes a rule reads as users then costs a label lookup each,
/// not an index lookup. Otherwise one index lookup per object (which also names its holder),
/// and a write built only for the `limit` planned.
pub fn label_plan(
    index: &RelationIndex,
    caches: &Caches,
    settled: bool,
    of_kinds: &HashSet<GroupKind>,
    limit: usize,
) -> LabelPlan {
    let mut turns: Vec<VecDeque<Needed<'_>>> = Vec::new();
    let mut group_of: HashMap<Option<SourceRef<'_>>, usize> = HashMap::new();
    let mut needed = 0;
    for (gk, kind) in caches.kinds() {
        if !kind.synced {
            continue;
        }
        let may_be_used = of_kinds.contains(gk);
        for (key, o) in &kind.objects {
            let labelled = is_labelled(o);
            if !may_be_used && !labelled {
                continue;
            }
            // Borrowed: a pass looks at every cached object (100,000 PersistentVolumes a rule
            // reads), so no key is built per object.
            let holder = index
                .blockers_ref(lien_core::KeyRef {
                    group: &gk.group,
                    kind: &gk.kind,
                    namespace: key.0.as_deref(),
                    name: &key.1,
                })
                .next()
                .map(|r| r.source());
            let in_use = holder.is_some();
            // An object being deleted keeps whatever label it has; one in use gets it all the
            // same: removing its last finalizer would complete a deletion Lien refuses, and the
            // label is what routes that update to the tamper guard (issue 27).
            if in_use == labelled || (!in_use && !settled) || (!in_use && o.deleting) {
                continue;
            }
            needed += 1;
            let group = *group_of.entry(holder).or_insert_with(|| {
                turns.push(VecDeque::new());
                turns.len() - 1
            });
            turns[group].push_back((gk, kind, key, o, in_use));
        }
    }
    let mut writes = Vec::with_capacity(needed.min(limit));
    while !turns.is_empty() && writes.len() < limit {
        turns.retain_mut(|group| {
            if writes.len() < limit
                && let Some((gk, kind, (ns, name), o, in_use)) = group.pop_front()
            {
                writes.push(LabelWrite {
                    target: ObjectTarget::new(gk, kind, ns.as_deref(), name, o),
                    in_use,
                });
            }
            !group.is_empty()
        });
    }
    LabelPlan {
        left: needed - writes.len(),
        writes,
    }
}

/// The metadata a Usage should carry: its whole finalizer list and owner references (a JSON
/// merge patch replaces lists whole, guarded by `resource_version`, so a concurrent change —
/// the garbage collector stripping a dangling reference — makes it fail with 409 rather than
/// be undone), and the record of which owner references are Lien's.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageMetaWrite {
    /// The usage.
    pub source: Source,
    /// Its UID.
    pub uid: String,
    /// The resourceVersion the decision was made on.
    pub resource_version: Option<String>,
    /// The finalizers to set.
    pub finalizers: Vec<String>,
    /// The owner references to set.
    pub owner_references: Vec<OwnerReference>,
    /// The UIDs of the owner references Lien added (the `lien.dev/owners` annotation; empty:
    /// remove it). Written in the same request as the references.
    pub lien_owners: BTreeSet<String>,
}

/// The owner references a Usage should have, and which of them are Lien's. Pure.
///
/// Lien touches only the references it added — those whose UID is in `lien_owned` (its own
/// record) and that are not `controller: true` (someone made it theirs). Every other reference
/// is kept byte for byte and in place, whatever its kind: the Usage's controller above all,
/// which may be of the same kind as `by`. Of its own, Lien removes the ones to objects that
/// still exist (`live`) but are no longer `wanted`; one whose object is gone stays, because the
/// garbage collector deletes the Usage when all its owners are gone, and removing the
/// reference first would orphan the Usage instead. With `may_add`, each wanted reference whose
/// UID is not an owner yet is appended, while the list has fewer than [`OWNER_LIMIT`] entries.
pub fn owner_references(
    existing: &[OwnerReference],
    lien_owned: &BTreeSet<String>,
    live: &BTreeSet<&str>,
    wanted: &[OwnerReference],
    may_add: bool,
) -> (Vec<OwnerReference>, BTreeSet<String>) {
    let is_liens = |o: &OwnerReference| lien_owned.contains(&o.uid) && o.controller != Some(true);
    let wanted_uids: BTreeSet<&str> = wanted.iter().map(|o| o.uid.as_str()).collect();
    let mut owners: Vec<OwnerReference> = existing
        .iter()
        .filter(|o| {
            !(is_liens(o) && live.contains(o.uid.as_str()) && !wanted_uids.contains(o.uid.as_str()))
        })
        .cloned()
        .collect();
    let mut record: BTreeSet<String> = owners
        .iter()
        .filter(|o| is_liens(o))
        .map(|o| o.uid.clone())
        .collect();
    if may_add {
        let present: BTreeSet<String> = owners.iter().map(|o| o.uid.clone()).collect();
        let room = OWNER_LIMIT.saturating_sub(owners.len());
        for o in wanted
            .iter()
            .filter(|o| !present.contains(&o.uid))
            .take(room)
        {
            record.insert(o.uid.clone());
            owners.push(o.clone());
        }
    }
    (owners, record)
}

/// Whether Lien keeps this reason-only Usage, which is being deleted, because its namespace is
/// being deleted too and what it protects still exists (issue 27): the namespace controller
/// deletes everything in a deleted namespace, the Usage first among them, and a protection that
/// went with its namespace would let the namespace controller delete the very object it
/// protects. So the Usage stays `Terminating` (Lien's finalizer), keeps protecting, and holds
/// the namespace `Terminating`, until what it protects is gone or a person removes that
/// finalizer. Unknown (the Namespace list not complete, or the `of` side still being listed)
/// keeps it too: absence proves nothing.
pub fn kept_for_namespace(view: &UsageView, sel: &Selection, caches: &Caches) -> bool {
    let Some(ns) = view.namespace.as_deref() else {
        return false;
    };
    if view.by.is_some() || !view.deleting {
        return false;
    }
    let protects_something = !(sel.of.complete && sel.of.matched.is_empty());
    protects_something && caches.namespace_deleting(ns) != Some(false)
}

/// The finalizer and owner-reference write a usage needs, if any.
///
/// Every Usage (namespaced) carries Lien's finalizer `lien.dev/usage`; a ClusterUsage only
/// with `by`. It goes when the Usage is deleted and:
/// - with `by`: the `by` side is known to match nothing any more — a user is a user until it
///   is gone;
/// - without: at once, unless its namespace is being deleted too and what it protects still
///   exists ([`kept_for_namespace`]) — so that deleting a namespace never deletes (nor
///   unprotects) an object under a lien.
///
/// In the size of the Usage's owner references, whatever the number of users or objects.
pub fn usage_meta(view: &UsageView, sel: &Selection, caches: &Caches) -> Option<UsageMetaWrite> {
    let has = view.finalizers.iter().any(|f| f == USAGE_FINALIZER);
    let by_side = sel.by.as_ref();
    // The finalizer goes only when the `by` side is known to match nothing any more; while a
    // kind is still being listed, absence proves nothing.
    let all_users_gone = sel.complete() && by_side.is_none_or(|b| b.matched.is_empty());
    let want = match &view.by {
        Some(_) => !(view.deleting && all_users_gone),
        None => {
            view.namespace.is_some() && (!view.deleting || kept_for_namespace(view, sel, caches))
        }
    };
    let mut finalizers = view.finalizers.clone();
    if want && !has && !view.deleting {
        // kube-apiserver refuses new finalizers on an object being deleted.
        finalizers.push(USAGE_FINALIZER.to_owned());
    } else if !want && has {
        finalizers.retain(|f| f != USAGE_FINALIZER);
    }

    let mut owners = view.owner_references.clone();
    let mut lien_owners = view.lien_owners.clone();
    if let Some(by) = &view.by {
        let gk = GroupKind::from_api_version(&by.api_version, &by.kind);
        if let Some(kind) = caches.kind(&gk).filter(|k| k.synced) {
            // A cluster-scoped Usage may only have cluster-scoped owners; a namespaced Usage's
            // `by` is in its own namespace or cluster-scoped, so it may own it.
            let allowed = !kind.namespaced || view.namespace.is_some();
            // An owner is in the Usage's namespace, or cluster-scoped: an existing reference
            // to a `by` object is live when the object of its name has its UID — what the
            // garbage collector checks too — looked up by name, not by a scan of every UID.
            let owner_key = |o: &OwnerReference| {
                let ns = if kind.namespaced {
                    view.namespace.clone()
                } else {
                    None
                };
                (ns, o.name.clone())
            };
            let of_by_kind = |o: &OwnerReference| {
                o.kind == gk.kind && GroupKind::from_api_version(&o.api_version, &o.kind) == gk
            };
            let existing_by: Vec<&OwnerReference> = view
                .owner_references
                .iter()
                .filter(|o| of_by_kind(o))
                .collect();
            let live: BTreeSet<&str> = existing_by
                .iter()
                .filter(|o| {
                    kind.objects
                        .get(&owner_key(o))
                        .is_some_and(|c| c.uid == o.uid)
                })
                .map(|o| o.uid.as_str())
                .collect();
            // What `owner_references` reads of the users: whether each existing reference is
            // still one (a lookup), and the first users in order, enough to fill the room left
            // (at most OWNER_LIMIT new ones, past every present one).
            let mut wanted: Vec<OwnerReference> = Vec::new();
            if let Some(side) = by_side {
                let prefix = OWNER_LIMIT + view.owner_references.len();
                wanted.extend(
                    side.matched_list()
                        .take(prefix)
                        .map(|m| owner_ref(kind, &m)),
                );
                let listed: BTreeSet<String> = wanted.iter().map(|o| o.uid.clone()).collect();
                wanted.extend(
                    existing_by
                        .iter()
                        .filter(|o| !listed.contains(&o.uid) && side.has(&owner_key(o), &o.uid))
                        .map(|o| (*o).clone()),
                );
            }
            (owners, lien_owners) = owner_references(
                &view.owner_references,
                &view.lien_owners,
                &live,
                &wanted,
                allowed && !view.deleting,
            );
        }
    }
    let changed = finalizers != view.finalizers
        || owners != view.owner_references
        || lien_owners != view.lien_owners;
    changed.then(|| UsageMetaWrite {
        source: view.source(),
        uid: view.uid.clone(),
        resource_version: view.resource_version.clone(),
        finalizers,
        owner_references: owners,
        lien_owners,
    })
}

/// Whether Lien must delete this Usage itself because its users are gone and no garbage
/// collector will: it has `by`, is not being deleted, no user it saw is its owner, its status
/// lists every user it matched (the count is not larger than the list), and none of those UIDs
/// exists any more while nothing else matches. A Usage whose users were never seen (applied
/// before them, as GitOps tools do) is left alone. In the size of the status's list.
pub fn users_gone(view: &UsageView, sel: &Selection, caches: &Caches) -> bool {
    let Some(by) = &view.by else {
        return false;
    };
    if view.deleting || !sel.complete() || sel.by.as_ref().is_some_and(|b| !b.matched.is_empty()) {
        return false;
    }
    let Some(seen) = view.status.as_ref().and_then(|s| s.by.as_ref()) else {
        return false;
    };
    if seen.objects.is_empty()
        || seen.count as usize != seen.objects.len()
        || seen.objects.iter().any(|o| o.uid.is_empty())
    {
        return false;
    }
    let gk = GroupKind::from_api_version(&by.api_version, &by.kind);
    let Some(kind) = caches.kind(&gk).filter(|k| k.synced) else {
        return false;
    };
    // A reference to a user it saw makes the garbage collector act on the Usage (delete it, or
    // strip the dangling reference, after which this decides again). Only those count: the
    // Usage's controller may be of the `by` kind too, and it is not a user.
    let seen_uids: BTreeSet<&str> = seen.objects.iter().map(|o| o.uid.as_str()).collect();
    let owned = view
        .owner_references
        .iter()
        .any(|o| o.controller != Some(true) && seen_uids.contains(o.uid.as_str()));
    // A user being deleted (Terminating) still exists: it is a user until it is gone. Each
    // user it saw is looked up where status listed it.
    let live = |o: &lien_api::MatchedObject| {
        let ns = Some(o.namespace.clone()).filter(|ns| !ns.is_empty());
        kind.objects
            .get(&(ns, o.name.clone()))
            .is_some_and(|c| c.uid == o.uid)
    };
    !owned && !seen.objects.iter().any(live)
}

fn owner_ref(kind: &KindCache, m: &Matched) -> OwnerReference {
    OwnerReference {
        api_version: kind.api_version.clone(),
        kind: m.key.kind.clone(),
        name: m.key.name.clone(),
        uid: m.uid.clone(),
        controller: None,
        block_owner_deletion: None,
    }
}

fn matched_objects(side: &ResourceSpec, matched: &SideSelection) -> MatchedObjects {
    let count = matched.matched.len();
    MatchedObjects {
        count: u32::try_from(count).unwrap_or(u32::MAX),
        summary: side_summary(side, count),
        objects: matched
            .matched
            .iter()
            .take(STATUS_LIST_LIMIT)
            .map(|((ns, name), uid)| MatchedObject {
                namespace: ns.clone().unwrap_or_default(),
                name: name.clone(),
                uid: uid.clone(),
            })
            .collect(),
    }
}

/// What one side of a Usage names, in one line for `kubectl get usages` (its `OF` and `BY`
/// columns read `status.of.summary` and `status.by.summary`, since a printer column is a
/// JSONPath and cannot compose one): `Kind/name` or `Kind/namespace/name` for one object; for a
/// selector the kind, the labels (`a=b,c=d`, plus `matchControllerRef`), ` in NAMESPACE` when
/// it names one, and `(count)` of the objects it matches. At most
/// [`MAX_SUMMARY_CHARS`](lien_api::MAX_SUMMARY_CHARS): a longer name or selector is cut and
/// ends with `…`, the namespace and count always shown. Pure.
pub fn side_summary(side: &ResourceSpec, count: usize) -> String {
    let nonempty = |ns: &Option<String>| ns.clone().filter(|n| !n.is_empty());
    let (head, tail) = match (&side.resource_ref, &side.resource_selector) {
        (Some(r), _) => match nonempty(&r.namespace) {
            Some(ns) => (format!("{}/{ns}/{}", side.kind, r.name), String::new()),
            None => (format!("{}/{}", side.kind, r.name), String::new()),
        },
        (None, selector) => {
            let mut parts: Vec<String> = Vec::new();
            let mut namespace = None;
            if let Some(s) = selector {
                parts.extend(s.match_labels.iter().map(|(k, v)| format!("{k}={v}")));
                if s.match_controller_ref {
                    parts.push("matchControllerRef".to_owned());
                }
                namespace = nonempty(&s.namespace);
            }
            let head = format!("{} {}", side.kind, parts.join(","));
            let tail = match namespace {
                Some(ns) => format!(" in {ns} ({count})"),
                None => format!(" ({count})"),
            };
            (head, tail)
        }
    };
    let room = lien_api::MAX_SUMMARY_CHARS.saturating_sub(tail.chars().count());
    if head.chars().count() <= room {
        return head + &tail;
    }
    let mut cut: String = head.chars().take(room.saturating_sub(1)).collect();
    cut.push('…');
    cut + &tail
}

/// The `Kept` condition's message of a Usage [`kept_for_namespace`]: what it still protects, why
/// it stays, and the command that lifts it (the finalizer's removal, as `kubectl lien why` and the
/// refusals print it).
pub fn kept_for_namespace_message(view: &UsageView, sel: &Selection) -> String {
    let own = view.namespace.as_deref();
    let objects: Vec<String> = sel
        .of
        .matched_list()
        .take(WAITING_USERS_NAMED)
        .map(|m| kubectl_name(&m.key, own))
        .collect();
    let more = sel.of.matched.len().saturating_sub(WAITING_USERS_NAMED);
    let mut list = objects.join(", ");
    if more > 0 {
        list = format!("{list} and {more} more");
    }
    let at = view
        .finalizers
        .iter()
        .position(|f| f == USAGE_FINALIZER)
        .unwrap_or_default();
    format!(
        "being deleted with its namespace; Lien keeps it, and its protection of {list}, so that \
         deleting the namespace does not delete what it protects: the namespace stays \
         Terminating until that is gone or the protection is lifted with `{}`",
        lien_core::finalizer_removal_command(&view.source(), at)
    )
}

/// How many users the `WaitingForUsers` condition names; the rest are counted.
pub const WAITING_USERS_NAMED: usize = 3;

/// An object as `kubectl` takes it: `deployment.apps/web`, with ` -n NAMESPACE` unless it is in
/// `own_namespace` (the Usage's) or cluster-scoped.
fn kubectl_name(key: &lien_core::ObjectKey, own_namespace: Option<&str>) -> String {
    let mut out = key.kubectl_type_name().to_string();
    if let Some(ns) = key
        .namespace
        .as_deref()
        .filter(|ns| Some(*ns) != own_namespace)
    {
        out.push_str(" -n ");
        out.push_str(ns);
    }
    out
}

/// The message of a Usage with `by` that is being deleted while `total` users remain, `first`
/// the first of them: who they are (the first [`WAITING_USERS_NAMED`], then how many more) and
/// what frees it. Its finalizer `lien.dev/usage` keeps it, and the protection with it, until
/// they are gone. Pure.
pub fn waiting_for_users_message(
    first: &[Matched],
    total: usize,
    own_namespace: Option<&str>,
) -> String {
    let names: Vec<String> = first
        .iter()
        .take(WAITING_USERS_NAMED)
        .map(|m| kubectl_name(&m.key, own_namespace))
        .collect();
    let more = total.saturating_sub(names.len());
    let mut list = names.join(", ");
    if more > 0 {
        list = format!("{list} and {more} more");
    }
    format!(
        "being deleted; it goes when its users are gone: {list} (delete them, or remove its \
         finalizer {USAGE_FINALIZER} to lift the protection now)"
    )
}

/// A `metav1.Condition` whose transition time moves only when its status does: `previous` are
/// the conditions currently written (a Usage's or a rule's status).
pub(crate) fn condition(
    previous: &[Condition],
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: Timestamp,
) -> Condition {
    let status = if status { "True" } else { "False" };
    // The transition time moves only when the status does (metav1.Condition semantics).
    let since = previous
        .iter()
        .find(|c| c.type_ == type_)
        .filter(|c| c.status == status)
        .map_or(Time(now), |c| c.last_transition_time.clone());
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        last_transition_time: since,
        observed_generation: generation,
    }
}

/// The status a usage should have; `None` when it already has it. `kept`: Lien keeps this Usage,
/// which is being deleted, for its namespace ([`kept_for_namespace`]). `unenforced`: why Lien's
/// webhook configuration is missing or differs (`lien_controller::webhook_config`), in which case
/// kube-apiserver is not asking Lien and nothing is protected, whatever the relations say.
pub fn status(
    view: &UsageView,
    sel: &Selection,
    kept: bool,
    cycle: Option<&Problem>,
    unenforced: Option<&str>,
    now: Timestamp,
) -> Option<UsageStatus> {
    let previous = view.status.as_ref();
    let written = previous.map_or(&[][..], |s| s.conditions.as_slice());
    let cond = |type_: &str, status: bool, reason: &str, message: String| {
        condition(
            written,
            type_,
            status,
            reason,
            message,
            view.generation,
            now,
        )
    };
    let conditions = if let Some(why) = unenforced {
        let message = format!("{why}: DELETEs are not checked by Lien until it is restored");
        let reason = NOT_CONFIGURED_REASON;
        vec![
            cond("Ready", false, reason, message.clone()),
            cond("InUse", false, reason, message),
        ]
    } else {
        // A cycle is the most useful thing to report: it means the objects can never be deleted.
        let problem = sel.sides().find_map(SideSelection::problem_now);
        let ready = match cycle.or(problem.as_ref()) {
            Some(p) => cond("Ready", false, p.reason.as_str(), p.message.clone()),
            None if view.warn => cond(
                "Ready",
                true,
                WARN_ONLY_REASON,
                format!("every reference resolves; {WARN_ONLY_MESSAGE}"),
            ),
            None => cond(
                "Ready",
                true,
                "Resolved",
                "every reference resolves".to_owned(),
            ),
        };
        let protected = sel.protected_count();
        let in_use = if protected == 0 {
            let message = "no object is protected by this usage".to_owned();
            cond("InUse", false, "NotInUse", message)
        } else {
            let message = format!("{protected} object(s) protected");
            cond("InUse", true, "InUse", message)
        };
        vec![ready, in_use]
    };
    let mut conditions = conditions;
    // A Usage with `by` being deleted stays (its finalizer) while its users remain, and keeps
    // protecting meanwhile: say so, naming them, or `kubectl delete usage` looks hung.
    // kube-apiserver takes status writes to an object being deleted.
    if let Some(users) = sel
        .by
        .as_ref()
        .filter(|b| view.deleting && !b.matched.is_empty())
    {
        let message = waiting_for_users_message(
            &users
                .matched_list()
                .take(WAITING_USERS_NAMED)
                .collect::<Vec<_>>(),
            users.matched.len(),
            view.namespace.as_deref(),
        );
        conditions.push(cond("WaitingForUsers", true, "UsersRemain", message));
    }
    // A reason-only Usage deleted with its namespace stays and keeps protecting (issue 27):
    // say so, with the one command that lifts it.
    if kept {
        let message = kept_for_namespace_message(view, sel);
        conditions.push(cond("Kept", true, "NamespaceDeleting", message));
    }
    let desired = UsageStatus {
        conditions,
        of: Some(matched_objects(&view.of, &sel.of)),
        by: view
            .by
            .as_ref()
            .zip(sel.by.as_ref())
            .map(|(by, side)| matched_objects(by, side)),
        observed_generation: view.generation,
        // Recorded while the reference exists, kept after the garbage collector removed it
        // (see `UsageView::selecting_controller_uid`); kept while unenforced too.
        controller_uid: view.selecting_controller_uid().map(str::to_owned),
    };
    (previous != Some(&desired)).then_some(desired)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use lien_api::{ResourceRef, ResourceSpec};
    use lien_core::{ObjectKey, Relation};

    use super::*;
    use crate::selection::Shape;

    fn spec(name: &str) -> ResourceSpec {
        ResourceSpec {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            resource_ref: Some(ResourceRef {
                name: name.into(),
                namespace: None,
            }),
            resource_selector: None,
        }
    }

    /// Usage `ns/u`: `of` used by `by`.
    fn usage_of_by() -> UsageView {
        UsageView {
            namespace: Some("ns".into()),
            name: "u".into(),
            uid: "uid-u".into(),
            of: spec("of"),
            by: Some(spec("by")),
            ..Default::default()
        }
    }

    /// The status Lien wants for `view` with `caches`: no cycle, enforced, at the epoch.
    fn plain_status(view: &UsageView, caches: &Caches) -> Option<UsageStatus> {
        status(
            view,
            &Selection::resolve(view, caches),
            false,
            None,
            None,
            Timestamp::UNIX_EPOCH,
        )
    }

    #[test]
    fn a_status_written_as_a_merge_patch_becomes_the_status_lien_wants() {
        // The users were seen, then went: the written status must end up with empty lists,
        // or it never equals what Lien wants and is rewritten on every pass (each rewrite
        // making the same Usage's finalizer write stale: the Usage stayed Terminating).
        let mut view = usage_of_by();
        view.status = plain_status(&view, &caches(&[("of", true), ("by", false)]));
        let after = caches(&[]);
        let desired = plain_status(&view, &after).expect("the status changes");
        let mut stored =
            serde_json::to_value(view.status.as_ref().expect("a status")).expect("serializes");
        // As the API server applies Lien's status write (`Patch::Merge`, RFC 7386).
        json_patch::merge(
            &mut stored,
            &serde_json::to_value(&desired).expect("serializes"),
        );
        let stored: UsageStatus = serde_json::from_value(stored).expect("deserializes");
        assert_eq!(stored, desired);
        view.status = Some(stored);
        assert_eq!(plain_status(&view, &after), None, "nothing left to write");
    }

    fn caches(names: &[(&str, bool)]) -> Caches {
        let gk = GroupKind::new("", "ConfigMap");
        let mut c = Caches::new();
        c.add_kind(gk.clone(), true, "v1", "configmaps");
        let metas: Vec<ObjectMeta> = names
            .iter()
            .map(|(n, labelled)| ObjectMeta {
                namespace: Some("ns".into()),
                name: Some((*n).into()),
                uid: Some(format!("uid-{n}")),
                labels: labelled.then(|| [(IN_USE_LABEL.to_string(), "true".to_string())].into()),
                ..Default::default()
            })
            .collect();
        c.reset(&gk, &metas);
        c
    }

    #[test]
    fn label_iff_in_use_and_removal_waits_until_settled() {
        let c = caches(&[("used", false), ("stale", true), ("plain", false)]);
        let mut index = RelationIndex::new();
        let key = ObjectKey::new("", "ConfigMap", Some("ns"), "used");
        index
            .apply(
                &Source::usage("ns", "u"),
                [Relation::protects(Source::usage("ns", "u"), key, "r")],
            )
            .expect("applies");
        let of_kinds = HashSet::from([GroupKind::new("", "ConfigMap")]);
        let w = label_writes(&index, &c, false, &of_kinds);
        assert_eq!(w.len(), 1);
        assert!(w[0].in_use && w[0].target.name == "used");
        // A kind no source protects: only a stale label is looked at (and removed).
        let w = label_writes(&index, &c, true, &HashSet::new());
        assert_eq!(w.len(), 1);
        assert!(!w[0].in_use && w[0].target.name == "stale");
        let mut w = label_writes(&index, &c, true, &of_kinds);
        w.sort_by(|a, b| a.target.name.cmp(&b.target.name));
        assert_eq!(w.len(), 2);
        assert!(!w[0].in_use && w[0].target.name == "stale");
    }

    /// Labels go in turns by the source holding each object, removals as one more source, and
    /// a plan holds at most its limit.
    #[test]
    fn labels_go_in_turns_by_the_source_that_holds_each_object() {
        let gk = GroupKind::new("", "ConfigMap");
        let c = caches(&[
            ("a", false),
            ("b", false),
            ("c", false),
            ("d", false),
            ("stale-1", true),
            ("stale-2", true),
            ("z", false),
        ]);
        let mut index = RelationIndex::new();
        for (source, objects) in [("big", &["a", "b", "c", "d"][..]), ("small", &["z"][..])] {
            let source = Source::usage("ns", source);
            let relations = objects
                .iter()
                .map(|o| Relation::protects(source.clone(), gk.key(Some("ns"), o), "why"));
            index.apply(&source, relations).expect("applies");
        }
        let of_kinds = HashSet::from([gk.clone()]);
        let plan = |limit| {
            let p = label_plan(&index, &c, true, &of_kinds, limit);
            let names: Vec<String> = p.writes.into_iter().map(|w| w.target.name).collect();
            (names, p.left)
        };
        let all = ["a", "stale-1", "z", "b", "stale-2", "c", "d"];
        assert_eq!(plan(usize::MAX), (all.map(String::from).to_vec(), 0));
        assert_eq!(
            plan(4),
            (all[..4].iter().map(|n| n.to_string()).collect(), 3)
        );
    }

    #[test]
    fn finalizer_and_owner_for_a_usage_with_by_until_the_users_are_gone() {
        let c = caches(&[("of", false), ("by", false)]);
        let mut view = usage_of_by();
        let res = Selection::resolve(&view, &c);
        let w = usage_meta(&view, &res, &c).expect("a write");
        assert_eq!(w.finalizers, [USAGE_FINALIZER]);
        assert_eq!(w.owner_references.len(), 1);
        assert_eq!(w.owner_references[0].uid, "uid-by");
        assert_eq!(w.owner_references[0].controller, None);
        assert_eq!(w.owner_references[0].block_owner_deletion, None);
        view.finalizers = w.finalizers;
        view.owner_references = w.owner_references;
        assert_eq!(usage_meta(&view, &res, &c), None, "converged");
        // Deleting while the user exists keeps the finalizer.
        view.deleting = true;
        assert_eq!(usage_meta(&view, &res, &c), None);
        // The user is gone: the finalizer goes, the dangling owner stays for the GC.
        let c = caches(&[("of", false)]);
        let res = Selection::resolve(&view, &c);
        let w = usage_meta(&view, &res, &c).expect("a write");
        assert!(w.finalizers.is_empty());
        assert_eq!(w.owner_references.len(), 1);
    }

    #[test]
    fn a_usage_nobody_owns_is_deleted_once_every_user_it_saw_is_gone() {
        let c = caches(&[("of", false), ("by", false)]);
        let mut view = usage_of_by();
        // Applied before its user exists: never deleted for that.
        let gone = caches(&[("of", false)]);
        assert!(!users_gone(&view, &Selection::resolve(&view, &gone), &gone));
        // The user is seen (status lists it), then deleted before it became an owner.
        let res = Selection::resolve(&view, &c);
        view.status = status(&view, &res, false, None, None, Timestamp::now());
        assert!(!users_gone(&view, &res, &c), "the user is still there");
        let res = Selection::resolve(&view, &gone);
        assert!(users_gone(&view, &res, &gone));
        // An owner of the `by` kind is the garbage collector's business.
        let mut owned = view.clone();
        owned.owner_references = usage_meta(&view, &Selection::resolve(&view, &c), &c)
            .expect("a write")
            .owner_references;
        assert!(!users_gone(&owned, &res, &gone));
        // Being deleted already, or a status that lists only some of the users: left alone.
        let mut deleting = view.clone();
        deleting.deleting = true;
        assert!(!users_gone(&deleting, &res, &gone));
        let mut partial = view.clone();
        if let Some(by) = partial.status.as_mut().and_then(|s| s.by.as_mut()) {
            by.count += 1;
        }
        assert!(!users_gone(&partial, &res, &gone));
    }

    /// A reason-only Usage `ns/u` of the ConfigMap `of`.
    fn reason_only() -> UsageView {
        UsageView {
            namespace: Some("ns".into()),
            name: "u".into(),
            of: spec("of"),
            reason: Some("prod".into()),
            ..Default::default()
        }
    }

    #[test]
    fn core_and_the_api_name_the_same_usage_finalizer() {
        // lien-core renders the finalizer's removal and cannot depend on lien-api.
        assert_eq!(lien_core::USAGE_FINALIZER, USAGE_FINALIZER);
    }

    /// `c` with the Namespace `ns` listed, being deleted or not.
    fn with_namespace(mut c: Caches, deleting: bool) -> Caches {
        let gk = GroupKind::new("", "Namespace");
        c.add_kind(gk.clone(), false, "v1", "namespaces");
        c.reset(
            &gk,
            &[ObjectMeta {
                name: Some("ns".into()),
                uid: Some("uid-ns".into()),
                deletion_timestamp: deleting.then_some(Time(Timestamp::UNIX_EPOCH)),
                ..Default::default()
            }],
        );
        c
    }

    #[test]
    fn reason_only_usage_has_the_finalizer_and_status_reports_matches() {
        let c = caches(&[("of", false)]);
        let view = UsageView {
            generation: Some(3),
            ..reason_only()
        };
        let res = Selection::resolve(&view, &c);
        let w = usage_meta(&view, &res, &c).expect("the finalizer");
        assert_eq!(w.finalizers, [USAGE_FINALIZER]);
        assert!(w.owner_references.is_empty());
        let view = UsageView {
            finalizers: w.finalizers,
            ..view
        };
        assert_eq!(usage_meta(&view, &res, &c), None, "stable");
        let now = Timestamp::UNIX_EPOCH;
        let s = status(&view, &res, false, None, None, now).expect("a status");
        assert_eq!(s.observed_generation, Some(3));
        assert_eq!(s.conditions[0].type_, "Ready");
        assert_eq!(s.conditions[0].status, "True");
        assert_eq!(s.conditions[1].reason, "InUse");
        assert_eq!(
            s.of.as_ref().map(|o| o.objects[0].uid.as_str()),
            Some("uid-of")
        );
        assert!(s.by.is_none());
        let view = UsageView {
            status: Some(s),
            ..view
        };
        assert_eq!(
            status(&view, &res, false, None, None, Timestamp::now()),
            None,
            "stable: no rewrite"
        );
        // A ClusterUsage without `by` has nothing to wait for and no namespace to go with.
        let cluster = UsageView {
            namespace: None,
            ..reason_only()
        };
        assert_eq!(
            usage_meta(&cluster, &Selection::resolve(&cluster, &c), &c),
            None
        );
    }

    /// Issue 27: deleting a reason-only Usage lifts the protection at once — unless its
    /// namespace is being deleted too (the namespace controller deletes the Usage along with
    /// everything else), and then only once what it protects is gone.
    #[test]
    fn a_reason_only_usage_is_kept_while_its_namespace_is_deleted_and_its_object_exists() {
        let deleting = UsageView {
            deleting: true,
            finalizers: vec!["example.org/gitops".into(), USAGE_FINALIZER.into()],
            ..reason_only()
        };
        let lifted = |c: &Caches| {
            let res = Selection::resolve(&deleting, c);
            let w = usage_meta(&deleting, &res, c);
            w.map(|w| w.finalizers)
        };
        // Deleted by a person, its namespace alive: the finalizer goes (only Lien's).
        let alive = with_namespace(caches(&[("of", false)]), false);
        assert_eq!(lifted(&alive), Some(vec!["example.org/gitops".to_owned()]));
        assert!(!kept_for_namespace(
            &deleting,
            &Selection::resolve(&deleting, &alive),
            &alive
        ));
        // Its namespace is being deleted and the object exists: kept, still protecting.
        let terminating = with_namespace(caches(&[("of", false)]), true);
        assert_eq!(lifted(&terminating), None);
        assert!(kept_for_namespace(
            &deleting,
            &Selection::resolve(&deleting, &terminating),
            &terminating
        ));
        // The Namespace list has not completed (a restarted Lien): kept, absence proves nothing.
        let unknown = caches(&[("of", false)]);
        assert_eq!(lifted(&unknown), None);
        // What it protects is gone: nothing to keep.
        let gone = with_namespace(caches(&[]), true);
        assert_eq!(lifted(&gone), Some(vec!["example.org/gitops".to_owned()]));
        // A Usage with `by` is not kept for its namespace: its users decide (they go with it).
        let with_by = UsageView {
            by: Some(spec("by")),
            ..deleting.clone()
        };
        assert!(!kept_for_namespace(
            &with_by,
            &Selection::resolve(&with_by, &terminating),
            &terminating
        ));
    }

    fn owner(kind: &str, uid: &str, controller: Option<bool>) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: kind.into(),
            // The fixture's objects are named after their UIDs (`uid-NAME`).
            name: uid.trim_start_matches("uid-").to_owned(),
            uid: uid.into(),
            controller,
            block_owner_deletion: controller,
        }
    }

    /// The Usage's controller may be of the `by` kind (a ConfigMap parent of ConfigMap users):
    /// it is not Lien's to remove, though it exists and is not a user.
    #[test]
    fn the_usages_controller_of_the_by_kind_keeps_its_reference() {
        let c = caches(&[("of", false), ("by", false), ("parent", false)]);
        let mut view = usage_of_by();
        let parent = owner("ConfigMap", "uid-parent", Some(true));
        view.owner_references = vec![parent.clone()];
        view.controller_uid = Some("uid-parent".into());
        let res = Selection::resolve(&view, &c);
        let w = usage_meta(&view, &res, &c).expect("a write");
        assert_eq!(w.owner_references[0], parent, "kept first, byte for byte");
        assert_eq!(w.owner_references.len(), 2);
        assert_eq!(w.owner_references[1].uid, "uid-by");
        // Converged: nothing more to write, the controller still there.
        view.finalizers = w.finalizers;
        view.owner_references = w.owner_references;
        view.lien_owners = w.lien_owners;
        assert_eq!(usage_meta(&view, &res, &c), None);
    }

    /// An owner reference someone else added to an object of the `by` kind that Lien does not
    /// match stays; Lien's own reference to a user that stopped matching goes.
    #[test]
    fn lien_removes_only_the_references_it_recorded() {
        let c = caches(&[
            ("of", false),
            ("by", false),
            ("theirs", false),
            ("old", false),
        ]);
        let mut view = usage_of_by();
        let theirs = owner("ConfigMap", "uid-theirs", None);
        let old = OwnerReference {
            controller: None,
            block_owner_deletion: None,
            ..owner("ConfigMap", "uid-old", None)
        };
        view.owner_references = vec![theirs.clone(), old];
        view.lien_owners = ["uid-old".to_owned()].into();
        let res = Selection::resolve(&view, &c);
        let w = usage_meta(&view, &res, &c).expect("a write");
        let uids: Vec<&str> = w.owner_references.iter().map(|o| o.uid.as_str()).collect();
        assert_eq!(uids, ["uid-theirs", "uid-by"]);
        assert_eq!(w.owner_references[0], theirs);
        assert_eq!(w.lien_owners, ["uid-by".to_owned()].into());
    }

    #[test]
    fn status_records_the_controller_and_keeps_it_after_the_reference_goes() {
        let c = caches(&[("of", false), ("by", false)]);
        let mut view = usage_of_by();
        view.controller_uid = Some("uid-parent".into());
        let res = Selection::resolve(&view, &c);
        let s = status(&view, &res, false, None, None, Timestamp::UNIX_EPOCH).expect("a status");
        assert_eq!(s.controller_uid.as_deref(), Some("uid-parent"));
        // The garbage collector strips the reference: the status read back still has it, and
        // the next status keeps it.
        view.controller_uid = None;
        view.recorded_controller_uid = s.controller_uid.clone();
        view.status = Some(s);
        assert_eq!(
            status(&view, &res, false, None, None, Timestamp::now()),
            None
        );
    }

    /// A user being deleted (Terminating, held by its own finalizer) counts until it is gone:
    /// in status, for the Usage's finalizer, for deleting an unowned Usage, and in the index
    /// (which is what holds back the replay of a refused DELETE of the used object).
    #[test]
    fn a_terminating_user_counts_until_it_is_gone() {
        let gk = GroupKind::new("", "ConfigMap");
        let mut c = Caches::new();
        c.add_kind(gk.clone(), true, "v1", "configmaps");
        let of = ObjectMeta {
            namespace: Some("ns".into()),
            name: Some("of".into()),
            uid: Some("uid-of".into()),
            ..Default::default()
        };
        let by = ObjectMeta {
            namespace: Some("ns".into()),
            name: Some("by".into()),
            uid: Some("uid-by".into()),
            deletion_timestamp: Some(Time(Timestamp::UNIX_EPOCH)),
            finalizers: Some(vec!["example.org/slow-teardown".into()]),
            ..Default::default()
        };
        c.reset(&gk, &[of.clone(), by]);
        let mut view = usage_of_by();
        let res = Selection::resolve(&view, &c);
        view.status = status(&view, &res, false, None, None, Timestamp::now());
        let count = |v: &UsageView| {
            v.status
                .as_ref()
                .and_then(|s| s.by.as_ref())
                .map(|b| b.count)
        };
        assert_eq!(count(&view), Some(1));
        assert!(!users_gone(&view, &res, &c));
        let mut deleting = view.clone();
        deleting.deleting = true;
        deleting.finalizers = vec![USAGE_FINALIZER.into()];
        assert_eq!(usage_meta(&deleting, &res, &c), None, "the finalizer stays");
        let used = gk.key(Some("ns"), "of");
        let mut index = RelationIndex::new();
        index
            .apply(&view.source(), Shape::of(&view).relations(&res))
            .expect("applies");
        assert!(index.is_in_use(&used));
        // Gone: no user, no relation, the finalizer goes.
        c.reset(&gk, &[of]);
        let res = Selection::resolve(&view, &c);
        index
            .apply(&view.source(), Shape::of(&view).relations(&res))
            .expect("applies");
        assert!(!index.is_in_use(&used));
        let w = usage_meta(&deleting, &res, &c).expect("a write");
        assert!(w.finalizers.is_empty());
    }

    mod owner_refs {
        use proptest::prelude::*;

        use super::super::*;

        /// An existing owner reference: kind (0: the `by` kind), controller, blockOwnerDeletion,
        /// whether Lien's record lists it, whether its object exists.
        type Entry = (u8, Option<bool>, Option<bool>, bool, bool);

        fn reference(i: usize, (kind, controller, bod, _, _): Entry) -> OwnerReference {
            let (api_version, kind) = match kind {
                0 => ("v1", "ConfigMap"),
                1 => ("v1", "Secret"),
                _ => ("example.org/v1", "ConfigMap"),
            };
            OwnerReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: format!("owner-{i}"),
                uid: format!("e{i}"),
                controller,
                block_owner_deletion: bod,
            }
        }

        fn lien_ref(uid: &str) -> OwnerReference {
            OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: format!("user-{uid}"),
                uid: uid.into(),
                controller: None,
                block_owner_deletion: None,
            }
        }

        fn not_liens(refs: &[OwnerReference], record: &BTreeSet<String>) -> Vec<String> {
            refs.iter()
                .filter(|o| !record.contains(&o.uid) || o.controller == Some(true))
                .map(|o| serde_json::to_string(o).expect("json"))
                .collect()
        }

        proptest! {
            /// Every reference Lien did not add survives byte for byte and in order; the
            /// result holds exactly Lien's wanted references (room allowing) plus its own
            /// dangling ones, and deciding again changes nothing.
            #[test]
            fn lien_touches_only_its_own_owner_references(
                entries in prop::collection::vec(
                    (0u8..3, any::<Option<bool>>(), any::<Option<bool>>(), any::<bool>(), any::<bool>()),
                    0..56,
                ),
                // Users wanted: an existing entry's UID (index) or a new one.
                wanted in prop::collection::btree_set(0usize..70, 0..10),
                gone_in_record in prop::collection::btree_set(0usize..5, 0..3),
                may_add in any::<bool>(),
            ) {
                let existing: Vec<OwnerReference> =
                    entries.iter().enumerate().map(|(i, e)| reference(i, *e)).collect();
                let mut record: BTreeSet<String> = entries
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| e.3)
                    .map(|(i, _)| format!("e{i}"))
                    .collect();
                record.extend(gone_in_record.iter().map(|j| format!("gone{j}")));
                let wanted: Vec<OwnerReference> = wanted
                    .iter()
                    .map(|&w| if w < entries.len() { format!("e{w}") } else { format!("w{w}") })
                    .map(|uid| lien_ref(&uid))
                    .collect();
                let mut live: BTreeSet<&str> = entries
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| e.4)
                    .map(|(i, _)| existing[i].uid.as_str())
                    .collect();
                live.extend(wanted.iter().map(|o| o.uid.as_str()));

                let (out, new_record) =
                    owner_references(&existing, &record, &live, &wanted, may_add);

                // Others' references: byte for byte, in order.
                prop_assert_eq!(not_liens(&out, &new_record), not_liens(&existing, &record));
                // The record names exactly Lien's references in the result.
                let liens: Vec<&OwnerReference> = out
                    .iter()
                    .filter(|o| new_record.contains(&o.uid) && o.controller != Some(true))
                    .collect();
                let lien_uids: BTreeSet<String> = liens.iter().map(|o| o.uid.clone()).collect();
                prop_assert_eq!(&lien_uids, &new_record);
                // No UID twice.
                let uids: BTreeSet<&str> = out.iter().map(|o| o.uid.as_str()).collect();
                prop_assert_eq!(uids.len(), out.len());
                // Lien's references: wanted ones, or its own to objects that are gone.
                let wanted_uids: BTreeSet<&str> = wanted.iter().map(|o| o.uid.as_str()).collect();
                for o in &liens {
                    prop_assert!(
                        wanted_uids.contains(o.uid.as_str())
                            || (record.contains(&o.uid) && !live.contains(o.uid.as_str())),
                        "{:?}", o
                    );
                }
                // Every wanted user is an owner, when adding is allowed and room remains.
                if may_add && out.len() < OWNER_LIMIT {
                    for w in &wanted {
                        prop_assert!(uids.contains(w.uid.as_str()), "{} missing", w.uid);
                    }
                }
                // A reference Lien adds is exactly its own form.
                for o in &out {
                    if !existing.iter().any(|e| e.uid == o.uid) {
                        prop_assert!(wanted.contains(o));
                    }
                }
                // Deciding again on the result changes nothing (no write loop).
                let (again, again_record) =
                    owner_references(&out, &new_record, &live, &wanted, may_add);
                prop_assert_eq!(again, out);
                prop_assert_eq!(again_record, new_record);
            }
        }
    }

    fn selector(labels: &[(&str, &str)], controller: bool, ns: Option<&str>) -> ResourceSpec {
        ResourceSpec {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            resource_ref: None,
            resource_selector: Some(lien_api::ResourceSelector {
                match_labels: labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
                match_controller_ref: controller,
                namespace: ns.map(str::to_owned),
            }),
        }
    }

    /// Issue 19 §5: `kubectl get usages` shows what each side names: the object, or the
    /// selector with how many objects it matches; bounded, the count always shown.
    #[test]
    fn a_sides_summary_names_the_object_or_the_selector_with_its_count() {
        assert_eq!(side_summary(&spec("settings"), 1), "ConfigMap/settings");
        let mut other = spec("settings");
        other.resource_ref.as_mut().expect("ref").namespace = Some("shop".into());
        assert_eq!(side_summary(&other, 0), "ConfigMap/shop/settings");
        let web = selector(&[("tier", "front"), ("app", "web")], false, None);
        assert_eq!(side_summary(&web, 3), "Deployment app=web,tier=front (3)");
        let composed = selector(&[], true, Some("team-a"));
        assert_eq!(
            side_summary(&composed, 0),
            "Deployment matchControllerRef in team-a (0)"
        );
        let long: Vec<(String, String)> = (0..32)
            .map(|i| (format!("key-{i:02}"), "v".repeat(63)))
            .collect();
        let long: Vec<(&str, &str)> = long.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let s = side_summary(&selector(&long, false, Some("ns")), 12);
        assert_eq!(s.chars().count(), lien_api::MAX_SUMMARY_CHARS);
        assert!(s.starts_with("Deployment key-00="), "{s}");
        assert!(s.ends_with("… in ns (12)"), "{s}");
    }

    /// The status carries the summaries; a reason-only Usage has no `by` side.
    #[test]
    fn status_carries_a_summary_per_side() {
        let c = caches(&[("of", false), ("by", false)]);
        let view = usage_of_by();
        let s = plain_status(&view, &c).expect("a status");
        let summary = |m: &Option<MatchedObjects>| m.as_ref().map(|m| m.summary.clone());
        assert_eq!(summary(&s.of).as_deref(), Some("ConfigMap/of"));
        assert_eq!(summary(&s.by).as_deref(), Some("ConfigMap/by"));
        let view = reason_only();
        let s = plain_status(&view, &c).expect("a status");
        assert!(s.by.is_none());
    }

    fn users(n: usize) -> Vec<Matched> {
        (0..n)
            .map(|i| Matched {
                key: lien_core::ObjectKey::new(
                    "apps",
                    "Deployment",
                    Some("ns"),
                    format!("web-{i}"),
                ),
                uid: format!("uid-{i}"),
            })
            .collect()
    }

    /// Issue 19 §2: a Usage with `by` being deleted says it waits for its users, naming them
    /// (bounded) as kubectl takes them, and what frees it.
    #[test]
    fn a_deleting_usage_names_the_users_it_waits_for() {
        let one = waiting_for_users_message(&users(1), 1, Some("ns"));
        assert_eq!(
            one,
            "being deleted; it goes when its users are gone: deployment.apps/web-0 (delete them, \
             or remove its finalizer lien.dev/usage to lift the protection now)"
        );
        let many = waiting_for_users_message(&users(5), 5, Some("ns"));
        assert!(
            many.contains(
                "deployment.apps/web-0, deployment.apps/web-1, deployment.apps/web-2 and 2 more"
            ),
            "{many}"
        );
        // A ClusterUsage's users are named with their namespace.
        let cluster = waiting_for_users_message(&users(1), 1, None);
        assert!(
            cluster.contains("deployment.apps/web-0 -n ns ("),
            "{cluster}"
        );

        let c = caches(&[("of", false), ("by", false)]);
        let mut view = usage_of_by();
        let waiting = |v: &UsageView, c: &Caches| {
            plain_status(v, c)
                .expect("a status")
                .conditions
                .into_iter()
                .find(|c| c.type_ == "WaitingForUsers")
        };
        assert_eq!(waiting(&view, &c), None, "not being deleted");
        view.deleting = true;
        let w = waiting(&view, &c).expect("the condition");
        assert_eq!(
            (w.status.as_str(), w.reason.as_str()),
            ("True", "UsersRemain")
        );
        assert!(w.message.contains("configmap/by "), "{}", w.message);
        // The user is gone: nothing to wait for (the finalizer goes in the same pass).
        let gone = caches(&[("of", false)]);
        assert_eq!(waiting(&view, &gone), None);
        // A reason-only Usage being deleted has no finalizer and waits for nobody.
        let mut reason = reason_only();
        reason.deleting = true;
        assert_eq!(waiting(&reason, &c), None);
    }

    /// Issue 7 §4: while Lien's webhook configuration is missing or differs, a Usage does not
    /// claim `InUse=True`.
    #[test]
    fn a_usage_is_not_in_use_while_the_webhook_is_not_configured() {
        let c = caches(&[("of", false)]);
        let view = reason_only();
        let res = Selection::resolve(&view, &c);
        let why = "ValidatingWebhookConfiguration lien is missing";
        let s =
            status(&view, &res, false, None, Some(why), Timestamp::UNIX_EPOCH).expect("a status");
        for (c, type_) in s.conditions.iter().zip(["Ready", "InUse"]) {
            assert_eq!(
                (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
                (type_, "False", "WebhookNotConfigured")
            );
            assert!(c.message.starts_with(why), "{}", c.message);
        }
    }
}
