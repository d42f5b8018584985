//! Resolution: a Usage or ClusterUsage, read against the caches, becomes relations.
//!
//! # Data model
//!
//! A [`UsageView`] is what the controller keeps of either kind of usage (they differ only in
//! scope). [`resolve`] matches each side against the [`Caches`] — by name, or **every** object a
//! selector matches (labels and/or the Usage's own controller) — and returns a [`Resolution`]:
//! the relations (every matched `of` used by every matched `by`), the matched objects for status,
//! and the [`Problem`]s that become `Ready=False`. It is pure and cheap, so the controller simply
//! re-resolves every usage that refers to a kind whenever an object of that kind changes:
//! selectors are never "resolved once".
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
        }
    }
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

struct Side {
    matched: Vec<Matched>,
    complete: bool,
    problem: Option<Problem>,
}

impl Side {
    fn problem(complete: bool, reason: ProblemReason, message: String) -> Self {
        Self {
            matched: vec![],
            complete,
            problem: Some(Problem { reason, message }),
        }
    }
}

fn resolve_side(view: &UsageView, spec: &ResourceSpec, is_by: bool, caches: &Caches) -> Side {
    let gk = GroupKind::from_api_version(&spec.api_version, &spec.kind);
    let side = if is_by { "spec.by" } else { "spec.of" };
    if caches.is_unknown(&gk) {
        return Side::problem(
            true,
            ProblemReason::UnknownKind,
            format!(
                "{side}: the API server does not serve kind {} in {}",
                spec.kind, spec.api_version
            ),
        );
    }
    let Some(kind) = caches.kind(&gk).filter(|k| k.synced) else {
        return Side::problem(
            false,
            ProblemReason::Pending,
            format!("{side}: waiting for the first list of {gk}"),
        );
    };
    let explicit = spec.explicit_namespace();
    // The namespace to look in: `None` means every namespace (ClusterUsage selectors) or the
    // cluster-scoped objects.
    let namespace: Option<String> = if !kind.namespaced {
        if let Some(ns) = explicit {
            return Side::problem(
                true,
                ProblemReason::InvalidScope,
                format!("{side}: {gk} is cluster-scoped, but namespace {ns:?} was given"),
            );
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
                return Side::problem(true, ProblemReason::InvalidScope, format!("{side}: {why}"));
            }
            (Some(own), None) => Some(own.clone()),
            (_, Some(ns)) => Some(ns.to_owned()),
            (None, None) if spec.resource_ref.is_some() => {
                return Side::problem(
                    true,
                    ProblemReason::InvalidScope,
                    format!("{side}: {gk} is namespaced: a ClusterUsage must name the namespace"),
                );
            }
            (None, None) => None,
        }
    };
    let cluster_scoped = !kind.namespaced;
    let key_of = |ns: &Option<String>, name: &str| gk.key(ns.as_deref(), name);
    if let Some(r) = &spec.resource_ref {
        let found = kind.objects.get(&(namespace.clone(), r.name.clone()));
        return match found {
            Some(o) => Side {
                matched: vec![Matched {
                    key: key_of(&namespace, &r.name),
                    uid: o.uid.clone(),
                }],
                complete: true,
                problem: None,
            },
            None => Side::problem(
                true,
                ProblemReason::NotFound,
                format!("{side}: {} not found", key_of(&namespace, &r.name)),
            ),
        };
    }
    let selector = spec.resource_selector.clone().unwrap_or_default();
    let controller = view.selecting_controller_uid();
    if selector.match_controller_ref && controller.is_none() {
        return Side::problem(
            true,
            ProblemReason::NotFound,
            format!("{side}: matchControllerRef is set but the usage has no controller"),
        );
    }
    let scope = if cluster_scoped {
        None
    } else {
        namespace.as_deref()
    };
    let matched: Vec<Matched> = kind
        .in_namespace(scope)
        .filter(|(_, o)| o.matches_labels(&selector.match_labels))
        .filter(|(_, o)| {
            !selector.match_controller_ref || o.controller_uid.as_deref() == controller
        })
        .map(|((ns, name), o)| Matched {
            key: key_of(ns, name),
            uid: o.uid.clone(),
        })
        .collect();
    let problem = matched.is_empty().then(|| Problem {
        reason: ProblemReason::NotFound,
        message: format!("{side}: no {gk} matches the selector"),
    });
    Side {
        matched,
        complete: true,
        problem,
    }
}

/// Resolves a usage against the caches. Pure.
pub fn resolve(view: &UsageView, caches: &Caches) -> Resolution {
    let source = view.source();
    let of = resolve_side(view, &view.of, false, caches);
    let by = view
        .by
        .as_ref()
        .map(|spec| resolve_side(view, spec, true, caches));
    let mut relations = Vec::new();
    match &by {
        None => {
            // CEL requires a reason without `by`; the fallback keeps the index's invariant (a
            // protection says why) even for an object that slipped past validation.
            let reason = view
                .reason
                .clone()
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| format!("protected by {source}"));
            for o in &of.matched {
                relations.push(
                    Relation::protects(source.clone(), o.key.clone(), reason.clone())
                        .with_replay(view.replay)
                        .with_uids(Some(&o.uid), None),
                );
            }
        }
        Some(by) => {
            for o in &of.matched {
                for b in &by.matched {
                    let mut r = Relation::uses(source.clone(), o.key.clone(), b.key.clone())
                        .with_replay(view.replay)
                        .with_uids(Some(&o.uid), Some(&b.uid));
                    if let Some(reason) = view.reason.clone().filter(|r| !r.is_empty()) {
                        r = r.with_reason(reason);
                    }
                    relations.push(r);
                }
            }
        }
    }
    let complete = of.complete && by.as_ref().is_none_or(|b| b.complete);
    let mut problems: Vec<Problem> = of.problem.into_iter().collect();
    let (by_matched, by_problem) = by.map_or((vec![], None), |b| (b.matched, b.problem));
    problems.extend(by_problem);
    Resolution {
        relations,
        of: of.matched,
        by: by_matched,
        complete,
        problems,
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
