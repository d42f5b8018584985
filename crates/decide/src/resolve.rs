//! Resolution: a Usage or ClusterUsage, read against the caches, becomes relations.
//!
//! # Data model
//!
//! A [`UsageView`] is what the controller keeps of either kind of usage (they differ only in
//! scope). [`resolve`] matches each side against the [`Caches`] — by name, or **every** object a
//! selector matches (labels and/or the Usage's own controller) — and returns a [`Resolution`]:
//! the relations (every matched `of` used by every matched `by`), the matched objects for status,
//! and the [`Problem`]s that become `Ready=False`. Selectors are never "resolved once": the
//! controller keeps each usage's [`Selection`] (`crate::selection`) current per object event —
//! an object entering or leaving a selector changes that object's relations only — and resolves
//! a usage as a whole only when the usage itself, or the listing of one of its kinds, changes.
//! [`resolve`] is that whole resolution as a list, for one-off readers.
//!
//! Scope (DESIGN.md §2): a Usage refers to its own namespace or to cluster-scoped objects; `of`
//! may name another namespace only together with `by`; `by` is always in the Usage's namespace.
//! A ClusterUsage names namespaces explicitly on both sides (a selector without one selects in
//! every namespace).
//!
//! A `by` object is a user until it is **gone**: one being deleted (`deletionTimestamp` set,
//! held by its finalizers) still matches, still counts in status and still blocks, because its
//! own teardown may still need what it uses. Nothing here looks at `deleting`.
//!
//! A side whose kind has not been listed yet is *pending*: the resolution is then incomplete and
//! the controller keeps the source's previous relations rather than dropping protection while a
//! watch starts.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use lien_api::{ClusterUsage, ResourceSpec, USAGE_OWNERS_ANNOTATION, Usage, UsageStatus};
use lien_core::{ObjectKey, Relation, RelationIndex, Source, find_cycles, sources_within};

use crate::cache::{Caches, GroupKind};
use crate::selection::{Selection, Shape};

/// What the controller keeps of a Usage or ClusterUsage.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageView {
    /// The relations' source (and the usage's identity).
    pub source: Option<Source>,
    /// The Usage's namespace; `None` for a ClusterUsage.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `metadata.resourceVersion`.
    pub resource_version: Option<String>,
    /// UID of the usage's own controller, from its ownerReferences now.
    pub controller_uid: Option<String>,
    /// The controller UID recorded in status (or seen by this process before the reference
    /// went): what `matchControllerRef` selects by once the reference is gone. See
    /// [`UsageView::selecting_controller_uid`].
    pub recorded_controller_uid: Option<String>,
    /// UIDs of the owner references Lien added (the `lien.dev/owners` annotation).
    pub lien_owners: BTreeSet<String>,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `metadata.finalizers`.
    pub finalizers: Vec<String>,
    /// `metadata.ownerReferences`.
    pub owner_references: Vec<OwnerReference>,
    /// `spec.of`.
    pub of: ResourceSpec,
    /// `spec.by`.
    pub by: Option<ResourceSpec>,
    /// `spec.reason`.
    pub reason: Option<String>,
    /// `spec.replayDeletion`.
    pub replay: bool,
    /// `spec.enforcement: Warn`: its relations refuse nothing, they warn.
    pub warn: bool,
    /// The current status.
    pub status: Option<UsageStatus>,
}

impl UsageView {
    fn from_parts(
        source: Source,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) -> Self {
        let owners = meta.owner_references.clone().unwrap_or_default();
        Self {
            source: Some(source),
            namespace: meta.namespace.clone(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            generation: meta.generation,
            resource_version: meta.resource_version.clone(),
            controller_uid: owners
                .iter()
                .find(|o| o.controller == Some(true))
                .map(|o| o.uid.clone()),
            deleting: meta.deletion_timestamp.is_some(),
            finalizers: meta.finalizers.clone().unwrap_or_default(),
            owner_references: owners,
            lien_owners: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(USAGE_OWNERS_ANNOTATION))
                .map(|v| parse_owner_record(v))
                .unwrap_or_default(),
            ..Default::default()
        }
    }

    /// The view of a Usage; `None` without name or namespace (a malformed watch event).
    pub fn from_usage(u: &Usage) -> Option<Self> {
        let source = Source::usage(u.metadata.namespace.clone()?, u.metadata.name.clone()?);
        Some(Self {
            of: u.spec.of.clone(),
            by: u.spec.by.clone(),
            reason: u.spec.reason.clone(),
            replay: u.spec.replay_deletion,
            warn: u.spec.enforcement.warns(),
            recorded_controller_uid: u.status.as_ref().and_then(|s| s.controller_uid.clone()),
            status: u.status.clone(),
            ..Self::from_parts(source, &u.metadata)
        })
    }

    /// The view of a ClusterUsage; `None` without a name.
    pub fn from_cluster_usage(u: &ClusterUsage) -> Option<Self> {
        let source = Source::cluster_usage(u.metadata.name.clone()?);
        Some(Self {
            namespace: None,
            of: u.spec.of.clone(),
            by: u.spec.by.clone(),
            reason: u.spec.reason.clone(),
            replay: u.spec.replay_deletion,
            warn: u.spec.enforcement.warns(),
            recorded_controller_uid: u.status.as_ref().and_then(|s| s.controller_uid.clone()),
            status: u.status.clone(),
            ..Self::from_parts(source, &u.metadata)
        })
    }

    /// The controller `matchControllerRef` selects by: the Usage's controller reference while
    /// it has one, else the controller recorded earlier. The garbage collector removes the
    /// reference to a deleted parent from a Usage that has another owner (Lien makes every
    /// user an owner), so during a composition's teardown the reference is gone while the
    /// parent's children — the objects in use and their users — still exist; the record keeps
    /// the relation between them until they are gone. Nothing the garbage collector may edit
    /// is trusted alone.
    pub fn selecting_controller_uid(&self) -> Option<&str> {
        self.controller_uid
            .as_deref()
            .or(self.recorded_controller_uid.as_deref())
    }

    /// This view, remembering the controller `previous` (an earlier version of the same Usage)
    /// selected by when this version has neither a reference nor a record: the reference went
    /// before Lien's status write recorded it.
    pub fn remembering(mut self, previous: Option<&UsageView>) -> Self {
        if self.selecting_controller_uid().is_none() {
            if let Some(p) = previous.filter(|p| p.uid == self.uid) {
                self.recorded_controller_uid = p.selecting_controller_uid().map(str::to_owned);
            }
        }
        self
    }

    /// Whether `other` resolves exactly as this view does: same scope, sides, reason, replay
    /// and selecting controller. What else a Usage event changes — its status, finalizers,
    /// owner references, resourceVersion: Lien's own writes among them — changes no relation,
    /// so the controller does not resolve the usage again for it.
    pub fn resolves_as(&self, other: &UsageView) -> bool {
        self.source() == other.source()
            && self.namespace == other.namespace
            && self.of == other.of
            && self.by == other.by
            && self.reason == other.reason
            && self.replay == other.replay
            && self.warn == other.warn
            && self.selecting_controller_uid() == other.selecting_controller_uid()
    }

    /// The source, for views built with `from_usage` / `from_cluster_usage`.
    pub fn source(&self) -> Source {
        self.source
            .clone()
            .unwrap_or_else(|| match &self.namespace {
                Some(ns) => Source::usage(ns, &self.name),
                None => Source::cluster_usage(&self.name),
            })
    }

    /// The kinds this usage refers to.
    pub fn kinds(&self) -> impl Iterator<Item = (GroupKind, &str)> {
        std::iter::once(&self.of).chain(self.by.as_ref()).map(|s| {
            (
                GroupKind::from_api_version(&s.api_version, &s.kind),
                s.api_version.as_str(),
            )
        })
    }
}

/// The UIDs of a `lien.dev/owners` annotation (comma-separated; blanks ignored).
pub fn parse_owner_record(value: &str) -> BTreeSet<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
        .collect()
}

/// One matched object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Matched {
    /// Its key.
    pub key: ObjectKey,
    /// Its UID.
    pub uid: String,
}

/// Why a usage cannot be enforced as written: the `Ready=False` reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ProblemReason {
    /// A named object does not exist, or a selector matches nothing.
    NotFound,
    /// Discovery does not know a kind.
    UnknownKind,
    /// The objects use each other, so none can be deleted first.
    Cycle,
    /// A side names a namespace it may not (DESIGN.md §2 scope rules).
    InvalidScope,
    /// A kind's first list has not completed yet.
    Pending,
    /// The API server refuses Lien's ServiceAccount a list or watch of a kind: its RBAC does
    /// not grant the resource ([`not_permitted_message`]).
    NotPermitted,
}

impl ProblemReason {
    /// The condition reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotFound => "NotFound",
            Self::UnknownKind => "UnknownKind",
            Self::Cycle => "Cycle",
            Self::InvalidScope => "InvalidScope",
            Self::Pending => "Pending",
            Self::NotPermitted => "NotPermitted",
        }
    }
}

/// What a Usage or rule naming a kind Lien may not watch says (`field`: `spec.of`, `spec.by`):
/// which resource to grant, and the two ways to grant it. Lien's RBAC lists the resources it
/// may watch (docs/operations.md, "Least privilege"); until this one is granted nothing of the
/// kind is protected by this source — relations it held before stay.
pub fn not_permitted_message(field: &str, kind: &str, api_version: &str, resource: &str) -> String {
    format!(
        "{field}: Lien's ServiceAccount may not list and watch {resource} (kind {kind} in \
         {api_version}), so nothing of this kind is protected yet; grant it: `lien manifests \
         --resource {resource}` (or the Helm value rbac.protectedResources), applied, and Lien \
         retries within 10 s"
    )
}

/// The resource a [`not_permitted_message`] names (for `kubectl lien status`, which reads the
/// condition).
pub fn not_permitted_resource(message: &str) -> Option<&str> {
    let (_, rest) = message.split_once("may not list and watch ")?;
    rest.split_once(" (kind ").map(|(resource, _)| resource)
}

/// A problem with a message a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Problem {
    /// The condition reason.
    pub reason: ProblemReason,
    /// The condition message.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason.as_str(), self.message)
    }
}

/// What a usage resolves to now.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resolution {
    /// Every matched `of` used by every matched `by` (or protected, without `by`).
    pub relations: Vec<Relation>,
    /// The matched `of` objects, sorted.
    pub of: Vec<Matched>,
    /// The matched `by` objects, sorted.
    pub by: Vec<Matched>,
    /// Whether every side's kind is settled, so that the matches are the truth and not "not
    /// listed yet". Only a complete resolution replaces the source's relations, lifts a
    /// finalizer or removes a label.
    pub complete: bool,
    /// Why the usage is not `Ready`.
    pub problems: Vec<Problem>,
}

/// Resolves a usage against the caches. Pure. (The controller keeps a
/// [`Selection`](crate::selection::Selection) per usage instead, and updates it per object; this
/// is the same resolution made into a list of relations, for one-off readers: the live check and
/// `kubectl lien`.)
pub fn resolve(view: &UsageView, caches: &Caches) -> Resolution {
    let sel = Selection::resolve(view, caches);
    let shape = Shape::of(view);
    Resolution {
        relations: shape.relations(&sel).collect(),
        of: sel.of.matched_list().collect(),
        by: sel
            .by
            .as_ref()
            .map(|b| b.matched_list().collect())
            .unwrap_or_default(),
        complete: sel.complete(),
        problems: sel.problems(),
    }
}

/// For every source whose relations take part in a cycle, the `Cycle` problem naming the
/// objects. A relation is part of a cycle when both its ends are in the same strongly connected
/// component of the `by → of` graph.
pub fn cycle_problems(index: &RelationIndex) -> BTreeMap<Source, Problem> {
    let mut out = BTreeMap::new();
    for group in find_cycles(index) {
        let names = group
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        for source in sources_within(index, &group) {
            out.entry(source).or_insert_with(|| Problem {
                reason: ProblemReason::Cycle,
                message: format!(
                    "these objects use each other, so none can be deleted first: {names}"
                ),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
    use lien_api::{ResourceRef, ResourceSelector};

    use super::*;

    /// (namespace, name, labels, controller UID).
    type Fixture<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], Option<&'a str>);

    /// A ConfigMap's metadata: `uid-<name>`, its labels and maybe a controller.
    fn meta(ns: &str, name: &str, labels: &[(&str, &str)], controller: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
            ),
            owner_references: controller.map(|uid| {
                vec![OwnerReference {
                    uid: uid.into(),
                    controller: Some(true),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }
    }

    /// Builder fixtures: ConfigMaps, listed.
    fn caches(objects: &[Fixture<'_>]) -> Caches {
        let gk = GroupKind::new("", "ConfigMap");
        let mut c = Caches::new();
        c.add_kind(gk.clone(), true, "v1", "configmaps");
        let metas: Vec<ObjectMeta> = objects
            .iter()
            .map(|(ns, name, labels, controller)| meta(ns, name, labels, *controller))
            .collect();
        c.reset(&gk, &metas);
        c
    }

    fn by_ref(name: &str) -> ResourceSpec {
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

    fn by_labels(labels: &[(&str, &str)], controller: bool) -> ResourceSpec {
        ResourceSpec {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            resource_ref: None,
            resource_selector: Some(ResourceSelector {
                match_labels: labels
                    .iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
                match_controller_ref: controller,
                namespace: None,
            }),
        }
    }

    fn usage(of: ResourceSpec, by: Option<ResourceSpec>) -> UsageView {
        UsageView {
            namespace: Some("ns".into()),
            name: "u".into(),
            of,
            by,
            reason: Some("why".into()),
            ..Default::default()
        }
    }

    #[test]
    fn every_of_is_used_by_every_by() {
        let c = caches(&[
            ("ns", "a", &[("t", "db")], None),
            ("ns", "b", &[("t", "db")], None),
            ("ns", "x", &[("t", "app")], None),
            ("ns", "y", &[("t", "app")], None),
            ("other", "c", &[("t", "db")], None),
        ]);
        let res = resolve(
            &usage(
                by_labels(&[("t", "db")], false),
                Some(by_labels(&[("t", "app")], false)),
            ),
            &c,
        );
        assert!(res.complete);
        assert!(res.problems.is_empty(), "{:?}", res.problems);
        assert_eq!(res.of.len(), 2, "another namespace is not selected");
        assert_eq!(res.relations.len(), 4);
        assert!(
            res.relations
                .iter()
                .all(|r| r.source == Source::usage("ns", "u"))
        );
        assert!(
            res.relations
                .iter()
                .all(|r| r.of_uid.is_some() && r.by_uid.is_some())
        );
    }

    #[test]
    fn match_controller_ref_needs_the_usages_controller() {
        let c = caches(&[
            ("ns", "a", &[], Some("parent")),
            ("ns", "b", &[], Some("stranger")),
        ]);
        let mut u = usage(by_labels(&[], true), None);
        let res = resolve(&u, &c);
        assert_eq!(res.problems[0].reason, ProblemReason::NotFound);
        u.controller_uid = Some("parent".into());
        let res = resolve(&u, &c);
        assert_eq!(
            res.of
                .iter()
                .map(|m| m.key.name.as_str())
                .collect::<Vec<_>>(),
            ["a"]
        );
        assert_eq!(res.relations.len(), 1);
        assert_eq!(res.relations[0].reason.as_deref(), Some("why"));
    }

    /// The garbage collector strips the reference to a deleted parent from a Usage that has
    /// another owner; the relation between the parent's children must outlive it.
    #[test]
    fn match_controller_ref_keeps_the_recorded_controller_after_the_reference_goes() {
        let c = caches(&[
            ("ns", "a", &[], Some("parent")),
            ("ns", "b", &[], Some("stranger")),
        ]);
        let names = |u: &UsageView| {
            resolve(u, &c)
                .of
                .iter()
                .map(|m| m.key.name.clone())
                .collect::<Vec<_>>()
        };
        // As read back after a restart: no reference any more, the UID recorded in status.
        let mut u = usage(by_labels(&[], true), None);
        u.recorded_controller_uid = Some("parent".into());
        assert_eq!(names(&u), ["a"]);
        // A reference on the Usage wins over the record (the Usage was adopted).
        u.controller_uid = Some("stranger".into());
        assert_eq!(names(&u), ["b"]);
        // A process that saw the reference remembers it when the next version lacks both.
        let mut seen = usage(by_labels(&[], true), None);
        seen.controller_uid = Some("parent".into());
        let stripped = usage(by_labels(&[], true), None).remembering(Some(&seen));
        assert_eq!(stripped.selecting_controller_uid(), Some("parent"));
        assert_eq!(names(&stripped), ["a"]);
        // … but never from another incarnation of the Usage.
        let mut other = usage(by_labels(&[], true), None);
        other.uid = "another".into();
        assert_eq!(
            other.remembering(Some(&seen)).selecting_controller_uid(),
            None
        );
    }

    #[test]
    fn the_recorded_controller_is_read_from_status() {
        let mut u = lien_api::Usage::new(
            "u",
            lien_api::UsageSpec {
                of: by_labels(&[], true),
                ..Default::default()
            },
        );
        u.metadata.namespace = Some("ns".into());
        u.status = Some(UsageStatus {
            controller_uid: Some("parent".into()),
            ..Default::default()
        });
        let view = UsageView::from_usage(&u).expect("a view");
        assert_eq!(view.controller_uid, None);
        assert_eq!(view.selecting_controller_uid(), Some("parent"));
    }

    /// A user being deleted (Terminating, held by a finalizer) is a user until it is gone, by
    /// name and by selector.
    #[test]
    fn a_terminating_user_still_matches() {
        let mut c = caches(&[]);
        let gk = GroupKind::new("", "ConfigMap");
        let terminating = |name: &str, labels: &[(&str, &str)]| ObjectMeta {
            deletion_timestamp: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                jiff::Timestamp::UNIX_EPOCH,
            )),
            finalizers: Some(vec!["example.org/slow-teardown".into()]),
            ..meta("ns", name, labels, None)
        };
        c.reset(
            &gk,
            &[
                terminating("used", &[("role", "used")]),
                terminating("using", &[("role", "using")]),
            ],
        );
        for by in [by_ref("using"), by_labels(&[("role", "using")], false)] {
            let res = resolve(&usage(by_ref("used"), Some(by)), &c);
            assert!(res.problems.is_empty(), "{:?}", res.problems);
            assert_eq!(res.by.len(), 1);
            assert_eq!(res.relations.len(), 1);
        }
    }

    #[test]
    fn scope_rules() {
        let c = caches(&[("other", "a", &[], None), ("ns", "b", &[], None)]);
        let mut of = by_ref("a");
        if let Some(r) = of.resource_ref.as_mut() {
            r.namespace = Some("other".into());
        }
        // Another namespace in `of` only together with `by`.
        let res = resolve(&usage(of.clone(), None), &c);
        assert_eq!(res.problems[0].reason, ProblemReason::InvalidScope);
        let res = resolve(&usage(of, Some(by_ref("b"))), &c);
        assert!(res.problems.is_empty(), "{:?}", res.problems);
        assert_eq!(res.relations.len(), 1);
        // A ClusterUsage must name the namespace of a namespaced object.
        let mut cu = usage(by_ref("b"), None);
        cu.namespace = None;
        assert_eq!(
            resolve(&cu, &c).problems[0].reason,
            ProblemReason::InvalidScope
        );
    }

    #[test]
    fn pending_and_unknown_kinds() {
        let mut c = Caches::new();
        let res = resolve(&usage(by_ref("a"), None), &c);
        assert!(!res.complete);
        assert_eq!(res.problems[0].reason, ProblemReason::Pending);
        c.mark_unknown(GroupKind::new("", "ConfigMap"));
        let res = resolve(&usage(by_ref("a"), None), &c);
        assert!(res.complete);
        assert_eq!(res.problems[0].reason, ProblemReason::UnknownKind);
    }

    #[test]
    fn cycles_name_their_sources() {
        let c = caches(&[("ns", "a", &[], None), ("ns", "b", &[], None)]);
        let mut index = RelationIndex::new();
        for (name, of, by) in [("ab", "b", "a"), ("ba", "a", "b")] {
            let mut u = usage(by_ref(of), Some(by_ref(by)));
            u.name = name.into();
            let res = resolve(&u, &c);
            index.apply(&u.source(), res.relations).expect("applies");
        }
        let cycles = cycle_problems(&index);
        assert_eq!(cycles.len(), 2);
        assert!(cycles.values().all(|p| p.reason == ProblemReason::Cycle));
    }
}
