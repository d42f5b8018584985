//! May this object be deleted, and if not, what do we tell the person who tried?
//!
//! # The UID rule
//!
//! A relation names its `of` object by key and records the UID it observed. When a DELETE comes
//! in for an object with UID `u`, a relation blocks it unless it observed a *different* UID: then
//! it was derived for an earlier incarnation of the name (the object was deleted and recreated),
//! and the controller has not re-derived it yet. Blocking the new object on its predecessor's
//! behalf would be wrong — its users, if any, will get relations of their own.
//!
//! When either side does not know the UID (the relation was derived before the object existed, or
//! the caller has no UID) the relation **blocks**: when unsure, protect. A wrongly refused DELETE
//! can be retried; a wrongly allowed one cannot be undone.
//!
//! # The message
//!
//! [`render_refusal`] is what the person who typed `kubectl delete` reads: three short lines —
//! who holds it, whether Lien will replay the DELETE ([`render_when_free`]), what to do now —
//! then the blockers, one line per source and reason. [`render_denial`] is the same list on one
//! line, for Events and audit notes. Both name every blocker — the user (or "protected" for a
//! protection), the source as a person would `kubectl get` it, and the reason (user text: one
//! line, cut at 200 characters) — sorted deterministically, bounded by `max_listed` with "and N
//! more" after; the users of one source and reason are listed together and the source named once
//! (a rule holding a pool for 100 volumes). See the tests for the exact wording.

use std::fmt::{self, Write};
use std::sync::Arc;

use crate::index::RelationIndex;
use crate::key::ObjectKey;
use crate::relation::Source;

/// One relation that blocks a DELETE, owned so it outlives the index lock.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Blocker {
    /// The user; `None` for a protection by reason only. Sorted first, as a protection is the
    /// one blocker that deleting users will not lift.
    pub by: Option<ObjectKey>,
    /// The relation's source (shared by the blockers of one source: a rule may hold an object
    /// for hundreds of dependents, and one copy of its name and reason is enough).
    pub source: Arc<Source>,
    /// The relation's reason.
    pub reason: Option<Arc<str>>,
    /// Whether a blocked DELETE is to be replayed when this relation goes.
    pub replay: bool,
    /// The source is a Usage being deleted that Lien's finalizer keeps (its namespace is being
    /// deleted and it protects an object there, or its users remain), with the finalizer's
    /// position in its list ([`RelationIndex::set_kept`]): deleting the Usage again lifts
    /// nothing, removing that finalizer does ([`finalizer_removal_command`]).
    pub kept: Option<u8>,
}

/// Lien's finalizer on Usages (`lien_api::USAGE_FINALIZER`; core does not depend on the API
/// crate, and a test in lien-decide holds the two equal).
pub const USAGE_FINALIZER: &str = "lien.dev/usage";

/// The command that removes Lien's finalizer from `source` (a Usage being deleted) where it
/// stands at position `at`: a JSON patch whose `test` op makes it fail, rather than remove
/// another controller's finalizer, if the list changed since. One line, as typed in a shell.
pub fn finalizer_removal_command(source: &Source, at: usize) -> String {
    format!(
        "kubectl patch {} --type=json -p '[{{\"op\":\"test\",\"path\":\"/metadata/finalizers/{at}\",\"value\":\"{USAGE_FINALIZER}\"}},{{\"op\":\"remove\",\"path\":\"/metadata/finalizers/{at}\"}}]'",
        source.kubectl_arg()
    )
}

/// The answer to one DELETE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing blocks the deletion.
    Allowed,
    /// Nothing refuses the deletion, but relations whose source only warns
    /// (`spec.enforcement: Warn`) would: it goes ahead, answered with a warning naming them.
    Warned {
        /// The object whose deletion was asked for.
        object: ObjectKey,
        /// Every relation that would have refused it, sorted as [`Decision::Denied`]'s.
        blockers: Vec<Blocker>,
    },
    /// At least one relation blocks it.
    Denied {
        /// The object whose deletion was asked for.
        object: ObjectKey,
        /// Every blocking relation, sorted (users by key, then source and reason).
        blockers: Vec<Blocker>,
    },
}

impl Decision {
    /// Whether the DELETE may go ahead (allowed, or only warned about).
    pub fn is_allowed(&self) -> bool {
        !matches!(self, Self::Denied { .. })
    }

    /// The blockers (empty when allowed or only warned about).
    pub fn blockers(&self) -> &[Blocker] {
        match self {
            Self::Allowed | Self::Warned { .. } => &[],
            Self::Denied { blockers, .. } => blockers,
        }
    }

    /// The relations in warn mode that would have refused the DELETE (empty unless
    /// [`Decision::Warned`]).
    pub fn warnings(&self) -> &[Blocker] {
        match self {
            Self::Warned { blockers, .. } => blockers,
            _ => &[],
        }
    }

    /// Whether any blocking relation asks for the DELETE to be replayed, i.e. whether the
    /// webhook should record this attempt.
    pub fn wants_replay(&self) -> bool {
        self.blockers().iter().any(|b| b.replay)
    }
}

/// The owned source and reason of relations with these (source, reason) ids.
type Shared = ((u32, u32), Arc<Source>, Option<Arc<str>>);

/// Decides a DELETE of `object`, whose UID is `uid` when the caller knows it (the admission
/// request's `oldObject.metadata.uid`). See the module docs for how UIDs are compared.
pub fn decide_delete(index: &RelationIndex, object: &ObjectKey, uid: Option<&str>) -> Decision {
    // Parsed once, not once per relation (a pool may have hundreds of dependents).
    let probe = uid.map(|uid| index.uid_probe(uid));
    let mut refs: Vec<_> = index
        .blockers(object)
        .filter(|r| !probe.is_some_and(|probe| r.of_uid_differs_probe(probe)))
        // A cycle inside a namespace being deleted does not hold (`set_broken_cycles`).
        .filter(|r| !index.is_broken(object, r))
        .collect();
    if refs.is_empty() {
        return Decision::Allowed;
    }
    // Relations in warn mode refuse nothing; they only say so when nothing else refuses. In
    // place: the common case (none in warn mode) pays one pass, no allocation.
    let denied = refs.iter().any(|r| !r.warn());
    if denied && refs.iter().any(|r| r.warn()) {
        refs.retain(|r| !r.warn());
    }
    // The index's list order depends on update history; a person (and a test) wants the same
    // message for the same state. Sorted as borrowed views, in `Blocker`'s order (user, then
    // source, reason, replay), comparing interned symbols before text.
    refs.sort_unstable_by(|a, b| {
        index
            .cmp_users(a, b)
            .then_with(|| a.source().cmp(&b.source()))
            .then_with(|| a.reason().cmp(&b.reason()))
            .then_with(|| a.replay().cmp(&b.replay()))
    });
    let mut blockers: Vec<Blocker> = Vec::with_capacity(refs.len());
    // The owned source and reason of the last relation, shared with the next while they are
    // the same (a rule's relations of one object all have the same).
    let mut last: Option<Shared> = None;
    for r in refs {
        let ids = r.source_and_reason_ids();
        let (source, reason) = match &last {
            Some((last_ids, source, reason)) if *last_ids == ids => {
                (Arc::clone(source), reason.clone())
            }
            _ => {
                let source = Arc::new(r.source().to_source());
                let reason: Option<Arc<str>> = r.reason().map(Arc::from);
                last = Some((ids, Arc::clone(&source), reason.clone()));
                (source, reason)
            }
        };
        blockers.push(Blocker {
            by: r.by().map(|k| k.to_key()),
            source,
            reason,
            replay: r.replay(),
            kept: r.source_kept(),
        });
    }
    if denied {
        Decision::Denied {
            object: object.clone(),
            blockers,
        }
    } else {
        Decision::Warned {
            object: object.clone(),
            blockers,
        }
    }
}

/// The admission warning for a [`Decision::Warned`] DELETE (kubectl prints it as `Warning:
/// …`); empty for any other decision. One line: the denial it would have been, and that the
/// sources only warn.
pub fn render_warning(decision: &Decision, max_listed: usize) -> String {
    let Decision::Warned { object, blockers } = decision else {
        return String::new();
    };
    let line = denial(
        object,
        blockers,
        max_listed,
        &group_lines(blockers, max_listed),
    );
    let line = line.strip_prefix("cannot delete ").unwrap_or(&line);
    format!(
        "Lien would refuse this DELETE, but only warns (spec.enforcement: Warn): {line}; set enforcement: Deny to enforce"
    )
}

/// Reasons are written by users; keep one from swamping the message.
const MAX_REASON_CHARS: usize = 200;

/// One group of listed blockers: the same source and reason, all users or one protection.
struct Group<'a> {
    first: &'a Blocker,
    users: Vec<&'a ObjectKey>,
}

impl fmt::Display for Group<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.first;
        if self.users.is_empty() {
            write!(f, "protected ({}", b.source)?;
        } else {
            f.write_str("in use by ")?;
            for (i, by) in self.users.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{by}")?;
            }
            write!(f, " ({}", b.source)?;
        }
        if let Some(reason) = &b.reason {
            f.write_str(": ")?;
            // One line, bounded: control characters (newlines from YAML block scalars) become
            // spaces, and a long reason is cut at a character boundary.
            for (i, c) in reason.chars().enumerate() {
                if i == MAX_REASON_CHARS {
                    f.write_char('…')?;
                    break;
                }
                f.write_char(if c.is_control() { ' ' } else { c })?;
            }
        }
        f.write_char(')')
    }
}

/// The listed blockers grouped by source and reason, in the order each group first appears:
/// a DependencyRule holding a pool for 100 PersistentVolumes says its name and reason once,
/// after the users it lists, instead of once per user.
fn groups(listed: &[Blocker]) -> Vec<Group<'_>> {
    let mut out: Vec<Group<'_>> = Vec::new();
    for b in listed {
        let Some(by) = &b.by else {
            out.push(Group {
                first: b,
                users: Vec::new(),
            });
            continue;
        };
        // Few groups (a handful of sources), so a linear search beats a map.
        match out.iter_mut().find(|g| {
            !g.users.is_empty() && g.first.source == b.source && g.first.reason == b.reason
        }) {
            Some(g) => g.users.push(by),
            None => out.push(Group {
                first: b,
                users: vec![by],
            }),
        }
    }
    out
}

/// The message for a denied DELETE; empty for [`Decision::Allowed`].
///
/// - one blocker: `cannot delete K: it is in use by U (Usage ns/name: reason)`, or
///   `cannot delete K: it is protected (ClusterUsage name: reason)`;
/// - several: `cannot delete K: it has 3 blockers: in use by U1 (…); in use by U2, U3
///   (DependencyRule r: reason); and 1 more`, listing at most `max_listed` of them (in
///   [`Blocker`] order), those of one source and reason together with the source named once.
pub fn render_denial(decision: &Decision, max_listed: usize) -> String {
    let Decision::Denied { object, blockers } = decision else {
        return String::new();
    };
    denial(
        object,
        blockers,
        max_listed,
        &group_lines(blockers, max_listed),
    )
}

/// [`render_refusal`] and [`render_denial`] of one decision (what the webhook answers, and the
/// one line its Event records), the blockers' groups formatted once for both; two empty strings
/// for [`Decision::Allowed`].
pub fn render_refusal_and_denial(
    decision: &Decision,
    max_listed: usize,
    recorded_replay: bool,
) -> (String, String) {
    let Decision::Denied { object, blockers } = decision else {
        return (String::new(), String::new());
    };
    let lines = group_lines(blockers, max_listed);
    (
        refusal(object, blockers, max_listed, recorded_replay, &lines),
        denial(object, blockers, max_listed, &lines),
    )
}

/// The text of each group of the listed blockers — at most `max_listed`, and the only one if
/// there is one, which the messages' first line shows whatever `max_listed` is.
fn group_lines(blockers: &[Blocker], max_listed: usize) -> Vec<String> {
    let shown = if blockers.len() == 1 {
        1
    } else {
        blockers.len().min(max_listed)
    };
    groups(&blockers[..shown])
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// [`render_denial`]'s text, with [`group_lines`].
fn denial(object: &ObjectKey, blockers: &[Blocker], max_listed: usize, lines: &[String]) -> String {
    let mut out = String::with_capacity(96 + lines.iter().map(String::len).sum::<usize>());
    // Writing to a String cannot fail.
    let _ = write!(out, "cannot delete {object}: ");
    let listed = blockers.len().min(max_listed);
    match lines {
        [only] if blockers.len() == 1 && listed == 1 => {
            let _ = write!(out, "it is {only}");
        }
        _ => {
            let n = blockers.len();
            let _ = write!(out, "it has {n} blocker{}", if n == 1 { "" } else { "s" });
            // Of a lone blocker the line is there for the refusal, but not listed here.
            let shown = if listed == 0 { &[][..] } else { lines };
            for (i, g) in shown.iter().enumerate() {
                let _ = write!(out, "{}{}", if i == 0 { ": " } else { "; " }, g);
            }
            if listed > 0 && n > listed {
                let _ = write!(out, "; and {} more", n - listed);
            }
        }
    }
    out
}

/// What happens next to an object whose DELETE was refused (the refusal's second line, and the
/// end of the refused DELETE's Event):
///
/// - `recorded_replay` (the refusal was recorded and a blocking relation asks for replay):
///   `Lien will delete it when its last user is gone` — or, when a protection holds it too
///   (`users_only` false), `Lien will delete it once nothing holds it`;
/// - otherwise how to ask for that: ``not replayed: to have Lien delete it once free, run
///   `kubectl lien delete --when-free configmap/settings -n team-a` `` (the object's type as
///   kubectl takes it: `kind` for the core group, `kind.group` otherwise, lower-cased).
pub fn render_when_free(object: &ObjectKey, recorded_replay: bool, users_only: bool) -> String {
    if recorded_replay {
        return if users_only {
            "Lien will delete it when its last user is gone".to_owned()
        } else {
            "Lien will delete it once nothing holds it".to_owned()
        };
    }
    let mut out = String::with_capacity(96 + object.name.len());
    out.push_str(
        "not replayed: to have Lien delete it once free, run `kubectl lien delete --when-free ",
    );
    let _ = write!(out, "{}", object.kubectl_arg());
    out.push('`');
    out
}

/// How many users "delete the users first" names in one `kubectl delete` command; more are
/// listed in the detail instead.
const MAX_USERS_IN_COMMAND: usize = 5;

/// The refusal of a DELETE as a person reads it in a terminal (`kubectl delete` prints it after
/// `admission webhook "delete.lien.dev" denied the request: `), at most three short lines and
/// then the detail; empty for [`Decision::Allowed`]:
///
/// 1. who holds it: `cannot delete K: it is in use by U (Usage ns/name: reason).` for one
///    blocker, `it is in use by 3 objects and protected by ClusterUsage keep.` for several;
/// 2. whether Lien will replay it ([`render_when_free`], with `recorded_replay`);
/// 3. what to do now: the `kubectl delete` of the user(s) (when there are few, in one
///    namespace), or of the protecting Usage — a Usage without `by` goes at once —, and
///    `kubectl lien why` for every other way (a Usage *with* `by` keeps its finalizer while
///    its users exist, so deleting it is not the one-line fix);
///
/// then, for more than one blocker, `held by:` and one line per group of [`render_denial`]'s
/// list, at most `max_listed` blockers, and `and N more`. Reasons are one bounded line each.
pub fn render_refusal(decision: &Decision, max_listed: usize, recorded_replay: bool) -> String {
    let Decision::Denied { object, blockers } = decision else {
        return String::new();
    };
    let lines = group_lines(blockers, max_listed);
    refusal(object, blockers, max_listed, recorded_replay, &lines)
}

/// [`render_refusal`]'s text, with [`group_lines`].
fn refusal(
    object: &ObjectKey,
    blockers: &[Blocker],
    max_listed: usize,
    recorded_replay: bool,
    lines: &[String],
) -> String {
    let mut out = String::with_capacity(256 + 96 * blockers.len().min(max_listed));
    // Who: the distinct users (blockers are sorted by user, so equal ones are adjacent) and the
    // protecting sources (sorted first, protections have no user).
    let mut users: Vec<&ObjectKey> = Vec::new();
    let mut protections: Vec<&Blocker> = Vec::new();
    for b in blockers {
        match &b.by {
            // `ObjectKey`'s `==` skips `memcmp` for the empty group of a core kind: 100 users of a
            // pool were half of a rule decision with it (`crate::key`'s `text`).
            Some(by) if users.last() != Some(&by) => users.push(by),
            Some(_) => {}
            None if protections.iter().any(|p| p.source == b.source) => {}
            None => protections.push(b),
        }
    }
    let _ = write!(out, "cannot delete {object}: ");
    if let ([_], [only]) = (blockers, lines) {
        let _ = write!(out, "it is {only}");
    } else {
        out.push_str("it is ");
        match users.as_slice() {
            [] => {}
            [one] => {
                let _ = write!(out, "in use by {one}");
            }
            many => {
                let _ = write!(out, "in use by {} objects", many.len());
            }
        }
        if !users.is_empty() && !protections.is_empty() {
            out.push_str(" and ");
        }
        match protections.as_slice() {
            [] => {}
            [one] => {
                let _ = write!(out, "protected by {}", one.source);
            }
            many => {
                let _ = write!(out, "protected by {} sources", many.len());
            }
        }
    }
    out.push_str(".\n");
    out.push_str(&render_when_free(
        object,
        recorded_replay,
        protections.is_empty(),
    ));
    out.push_str(".\nTo free it now, ");
    let same_scope = users.windows(2).all(|w| w[0].namespace == w[1].namespace);
    match (users.as_slice(), protections.as_slice()) {
        (users, []) if users.len() <= MAX_USERS_IN_COMMAND && same_scope => {
            let _ = write!(
                out,
                "delete {} first: `kubectl delete",
                if users.len() == 1 {
                    "the user".to_owned()
                } else {
                    format!("its {} users", users.len())
                }
            );
            for u in users {
                out.push(' ');
                let _ = write!(out, "{}", u.kubectl_type_name());
            }
            if let Some(ns) = users.first().and_then(|u| u.namespace.as_ref()) {
                let _ = write!(out, " -n {ns}");
            }
            out.push('`');
        }
        (users, []) => {
            let _ = write!(out, "delete its {} users first (listed below)", users.len());
        }
        ([], [one]) => match one.kept {
            // Deleting a Usage that is being deleted already does nothing: its finalizer is
            // what keeps the protection (its namespace is being deleted, issue 27).
            Some(at) => {
                let _ = write!(
                    out,
                    "lift the protection: {} is being deleted and Lien keeps it while this object exists, so remove its finalizer: `{}`",
                    one.source,
                    finalizer_removal_command(&one.source, usize::from(at))
                );
            }
            None => {
                out.push_str("remove the protection: `kubectl delete ");
                let _ = write!(out, "{}", one.source.kubectl_arg());
                out.push('`');
            }
        },
        ([], _) => out.push_str("remove its protections (listed below)"),
        (_, _) => out.push_str("delete its users and remove its protections (listed below)"),
    }
    out.push_str("; for the other ways: `kubectl lien why ");
    let _ = write!(out, "{}", object.kubectl_arg());
    out.push_str("`.");
    if blockers.len() > 1 {
        let listed = blockers.len().min(max_listed);
        if listed > 0 {
            out.push_str("\nheld by:");
            for g in lines {
                let _ = write!(out, "\n  {g}");
            }
        }
        if blockers.len() > listed {
            let _ = write!(out, "\n  and {} more", blockers.len() - listed);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relation::Relation;

    const UID: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";
    const OTHER_UID: &str = "1f8fad5b-d9cb-469f-a165-70867728950e";

    fn cluster() -> ObjectKey {
        ObjectKey::new("eks.example.io", "Cluster", None, "my-cluster")
    }

    fn release(name: &str) -> ObjectKey {
        ObjectKey::new("helm.example.io", "Release", Some("team-a"), name)
    }

    fn usage(name: &str) -> Source {
        Source::usage("team-a", name)
    }

    fn index_with(relations: Vec<Relation>) -> RelationIndex {
        let mut idx = RelationIndex::new();
        let mut by_source: std::collections::BTreeMap<Source, Vec<Relation>> = Default::default();
        for r in relations {
            by_source.entry(r.source.clone()).or_default().push(r);
        }
        idx.reset(by_source).expect("valid relations");
        idx
    }

    #[test]
    fn what_happens_next_names_the_when_free_command_as_kubectl_takes_types() {
        assert_eq!(
            render_when_free(&cluster(), true, true),
            "Lien will delete it when its last user is gone"
        );
        assert_eq!(
            render_when_free(&cluster(), true, false),
            "Lien will delete it once nothing holds it"
        );
        assert_eq!(
            render_when_free(&cluster(), false, true),
            "not replayed: to have Lien delete it once free, run \
             `kubectl lien delete --when-free cluster.eks.example.io/my-cluster`"
        );
        let cm = ObjectKey::new("", "ConfigMap", Some("team-a"), "settings");
        assert_eq!(
            render_when_free(&cm, false, false),
            "not replayed: to have Lien delete it once free, run \
             `kubectl lien delete --when-free configmap/settings -n team-a`"
        );
    }

    #[test]
    fn a_refusal_of_one_user_says_who_what_next_and_the_command_that_frees_it() {
        let db = ObjectKey::new("", "ConfigMap", Some("team-a"), "db");
        let app = ObjectKey::new("apps", "Deployment", Some("team-a"), "app");
        let idx = index_with(vec![
            Relation::uses(usage("app-uses-db"), db.clone(), app).with_reason("orders"),
        ]);
        let d = decide_delete(&idx, &db, None);
        assert_eq!(
            render_refusal(&d, 10, true),
            "cannot delete ConfigMap team-a/db: it is in use by apps/Deployment team-a/app \
             (Usage team-a/app-uses-db: orders).\n\
             Lien will delete it when its last user is gone.\n\
             To free it now, delete the user first: `kubectl delete deployment.apps/app -n team-a`; \
             for the other ways: `kubectl lien why configmap/db -n team-a`."
        );
        assert_eq!(
            render_refusal(&d, 10, false).lines().nth(1),
            Some(
                "not replayed: to have Lien delete it once free, run \
                 `kubectl lien delete --when-free configmap/db -n team-a`."
            )
        );
        assert_eq!(render_refusal(&Decision::Allowed, 10, true), "");
    }

    #[test]
    fn a_relation_in_warn_mode_refuses_nothing_and_says_what_it_would_refuse() {
        let db = ObjectKey::new("", "ConfigMap", Some("team-a"), "db");
        let app = ObjectKey::new("apps", "Deployment", Some("team-a"), "app");
        let warned = Relation::uses(usage("app-uses-db"), db.clone(), app.clone())
            .with_reason("orders")
            .with_replay(true)
            .with_warn(true);
        let d = decide_delete(&index_with(vec![warned.clone()]), &db, None);
        assert!(d.is_allowed(), "{d:?}");
        assert!(!d.wants_replay(), "nothing refused, nothing to replay");
        assert!(d.blockers().is_empty());
        assert_eq!(d.warnings().len(), 1);
        assert_eq!(
            render_warning(&d, 10),
            "Lien would refuse this DELETE, but only warns (spec.enforcement: Warn): ConfigMap \
             team-a/db: it is in use by apps/Deployment team-a/app (Usage team-a/app-uses-db: \
             orders); set enforcement: Deny to enforce"
        );
        assert_eq!(render_refusal(&d, 10, false), "");
        // With an enforced relation too, the DELETE is refused, naming only what enforces.
        let enforced = Relation::protects(usage("keep-db"), db.clone(), "backups");
        let d = decide_delete(&index_with(vec![warned, enforced]), &db, None);
        assert!(!d.is_allowed());
        assert_eq!(d.blockers().len(), 1);
        assert_eq!(d.blockers()[0].source.as_ref(), &usage("keep-db"));
        assert_eq!(render_warning(&d, 10), "");
    }

    #[test]
    fn a_refusal_of_one_protection_names_the_usage_to_delete() {
        let idx = index_with(vec![Relation::protects(
            Source::cluster_usage("protect-production"),
            cluster(),
            "Production cluster - never delete",
        )]);
        let d = decide_delete(&idx, &cluster(), Some(UID));
        assert_eq!(
            render_refusal(&d, 10, false),
            "cannot delete eks.example.io/Cluster my-cluster: it is protected \
             (ClusterUsage protect-production: Production cluster - never delete).\n\
             not replayed: to have Lien delete it once free, run \
             `kubectl lien delete --when-free cluster.eks.example.io/my-cluster`.\n\
             To free it now, remove the protection: \
             `kubectl delete clusterusage.lien.dev/protect-production`; \
             for the other ways: `kubectl lien why cluster.eks.example.io/my-cluster`."
        );
        let settings = ObjectKey::new("", "ConfigMap", Some("team-a"), "settings");
        let idx = index_with(vec![Relation::protects(
            usage("keep"),
            settings.clone(),
            "audit",
        )]);
        let refusal = render_refusal(&decide_delete(&idx, &settings, None), 10, true);
        assert_eq!(
            refusal.lines().nth(2),
            Some(
                "To free it now, remove the protection: \
                 `kubectl delete usage.lien.dev/keep -n team-a`; \
                 for the other ways: `kubectl lien why configmap/settings -n team-a`."
            )
        );
        assert_eq!(
            refusal.lines().nth(1),
            Some("Lien will delete it once nothing holds it.")
        );
    }

    #[test]
    fn a_refusal_of_several_says_it_in_three_lines_then_lists_them_bounded() {
        let idx = four_blockers();
        let d = decide_delete(&idx, &cluster(), Some(UID));
        let head = "cannot delete eks.example.io/Cluster my-cluster: it is in use by 3 objects \
                    and protected by ClusterUsage keep.\n\
                    Lien will delete it once nothing holds it.\n\
                    To free it now, delete its users and remove its protections (listed below); \
                    for the other ways: `kubectl lien why cluster.eks.example.io/my-cluster`.";
        assert_eq!(
            render_refusal(&d, 10, true),
            format!(
                "{head}\nheld by:\n  \
                 protected (ClusterUsage keep: line one line two)\n  \
                 in use by helm.example.io/Release team-a/a (Usage team-a/u1: runs here)\n  \
                 in use by helm.example.io/Release team-a/b (Usage team-a/u2)\n  \
                 in use by helm.example.io/Release team-a/c (DependencyRule releases-use-clusters)"
            )
        );
        assert_eq!(
            render_refusal(&d, 1, true),
            format!(
                "{head}\nheld by:\n  \
                 protected (ClusterUsage keep: line one line two)\n  and 3 more"
            )
        );
        assert_eq!(render_refusal(&d, 0, true), format!("{head}\n  and 4 more"));
        // Users only, few and in one namespace: one command deletes them all.
        let idx = index_with(vec![
            Relation::uses(usage("u1"), cluster(), release("a")),
            Relation::uses(usage("u2"), cluster(), release("b")),
            Relation::uses(Source::rule("r"), cluster(), release("b")),
        ]);
        let refusal = render_refusal(&decide_delete(&idx, &cluster(), None), 10, true);
        assert_eq!(
            refusal.lines().take(3).collect::<Vec<_>>(),
            [
                "cannot delete eks.example.io/Cluster my-cluster: it is in use by 2 objects.",
                "Lien will delete it when its last user is gone.",
                "To free it now, delete its 2 users first: \
                 `kubectl delete release.helm.example.io/a release.helm.example.io/b -n team-a`; \
                 for the other ways: `kubectl lien why cluster.eks.example.io/my-cluster`."
            ]
        );
    }

    #[test]
    fn the_refusal_and_its_one_line_denial_rendered_together_are_those_rendered_apart() {
        let rule = Source::rule("rook-ceph-pv-uses-pool");
        let pv = |i: usize| ObjectKey::new("", "PersistentVolume", None, format!("pvc-{i:03}"));
        let one_user = index_with(vec![
            Relation::uses(usage("app"), cluster(), release("a")).with_reason("runs on it"),
        ]);
        let protected = index_with(vec![Relation::protects(usage("keep"), cluster(), "kept")]);
        let mixed = index_with(
            (0..12)
                .map(|i| Relation::uses(rule.clone(), cluster(), pv(i)).with_reason("data"))
                .chain([Relation::protects(usage("keep"), cluster(), "kept")])
                .chain([Relation::uses(usage("app"), cluster(), release("a"))])
                .collect(),
        );
        for idx in [&one_user, &protected, &mixed] {
            let d = decide_delete(idx, &cluster(), Some(UID));
            assert!(matches!(d, Decision::Denied { .. }));
            for max_listed in [0, 1, 2, 10, 100] {
                for recorded in [false, true] {
                    assert_eq!(
                        render_refusal_and_denial(&d, max_listed, recorded),
                        (
                            render_refusal(&d, max_listed, recorded),
                            render_denial(&d, max_listed)
                        ),
                        "{max_listed} listed, recorded {recorded}"
                    );
                }
            }
        }
        assert_eq!(
            render_refusal_and_denial(&Decision::Allowed, 10, true),
            (String::new(), String::new())
        );
    }

    #[test]
    fn a_refusal_of_many_users_lists_them_instead_of_one_long_command() {
        let rule = Source::rule("rook-ceph-pv-uses-pool");
        let pv = |i: usize| ObjectKey::new("", "PersistentVolume", None, format!("pvc-{i:03}"));
        let idx = index_with(
            (0..150)
                .map(|i| {
                    Relation::uses(rule.clone(), cluster(), pv(i))
                        .with_reason("x".repeat(500))
                        .with_replay(true)
                })
                .collect(),
        );
        let refusal = render_refusal(&decide_delete(&idx, &cluster(), Some(UID)), 10, true);
        let lines: Vec<&str> = refusal.lines().collect();
        assert_eq!(
            lines[..4],
            [
                "cannot delete eks.example.io/Cluster my-cluster: it is in use by 150 objects.",
                "Lien will delete it when its last user is gone.",
                "To free it now, delete its 150 users first (listed below); \
                 for the other ways: `kubectl lien why cluster.eks.example.io/my-cluster`.",
                "held by:",
            ]
        );
        // One group line for the ten listed users of the rule, its reason cut; then the rest.
        assert_eq!(lines.len(), 6, "{refusal}");
        assert!(
            lines[4].ends_with(&format!("{}…)", "x".repeat(200))),
            "{}",
            lines[4]
        );
        assert_eq!(lines[5], "  and 140 more");
    }

    /// The cluster used by three releases (two Usages, one with a reason, and a rule) and
    /// protected by a ClusterUsage whose reason spans two lines.
    fn four_blockers() -> RelationIndex {
        let rule = Source::rule("releases-use-clusters");
        index_with(vec![
            Relation::uses(usage("u2"), cluster(), release("b")),
            Relation::uses(usage("u1"), cluster(), release("a")).with_reason("runs here"),
            Relation::uses(rule, cluster(), release("c")),
            Relation::protects(
                Source::cluster_usage("keep"),
                cluster(),
                "line one\nline two",
            ),
        ])
    }

    #[test]
    fn unused_object_is_allowed_with_empty_message() {
        let idx = RelationIndex::new();
        let d = decide_delete(&idx, &cluster(), Some(UID));
        assert_eq!(d, Decision::Allowed);
        assert!(d.is_allowed());
        assert_eq!(render_denial(&d, 10), "");
    }

    #[test]
    fn one_user() {
        let idx = index_with(vec![
            Relation::uses(
                usage("release-uses-cluster"),
                cluster(),
                release("prometheus"),
            )
            .with_reason("Release runs on this cluster"),
        ]);
        let d = decide_delete(&idx, &cluster(), None);
        assert_eq!(
            render_denial(&d, 10),
            "cannot delete eks.example.io/Cluster my-cluster: it is in use by \
             helm.example.io/Release team-a/prometheus \
             (Usage team-a/release-uses-cluster: Release runs on this cluster)"
        );
        assert!(!d.wants_replay());
        // The user itself is not in use.
        assert!(decide_delete(&idx, &release("prometheus"), None).is_allowed());
    }

    #[test]
    fn one_protection_without_and_with_reason_shape() {
        let s = Source::cluster_usage("protect-production");
        let idx = index_with(vec![
            Relation::protects(s, cluster(), "Production cluster - never delete").with_replay(true),
        ]);
        let d = decide_delete(&idx, &cluster(), Some(UID));
        assert_eq!(
            render_denial(&d, 10),
            "cannot delete eks.example.io/Cluster my-cluster: it is protected \
             (ClusterUsage protect-production: Production cluster - never delete)"
        );
        assert!(d.wants_replay());
    }

    #[test]
    fn several_blockers_sorted_and_bounded() {
        let idx = four_blockers();
        let d = decide_delete(&idx, &cluster(), Some(UID));
        let prefix = "cannot delete eks.example.io/Cluster my-cluster: it has 4 blockers";
        assert_eq!(
            render_denial(&d, 10),
            format!(
                "{prefix}: protected (ClusterUsage keep: line one line two); \
                 in use by helm.example.io/Release team-a/a (Usage team-a/u1: runs here); \
                 in use by helm.example.io/Release team-a/b (Usage team-a/u2); \
                 in use by helm.example.io/Release team-a/c (DependencyRule releases-use-clusters)"
            )
        );
        assert_eq!(
            render_denial(&d, 2),
            format!(
                "{prefix}: protected (ClusterUsage keep: line one line two); \
                 in use by helm.example.io/Release team-a/a (Usage team-a/u1: runs here); \
                 and 2 more"
            )
        );
        assert_eq!(render_denial(&d, 0), prefix);
    }

    #[test]
    fn users_of_one_rule_are_grouped_and_bounded() {
        let rule = Source::rule("rook-ceph-pv-uses-pool");
        let pv = |i: usize| ObjectKey::new("", "PersistentVolume", None, format!("pvc-{i:03}"));
        let mut relations: Vec<Relation> = (0..150)
            .map(|i| {
                Relation::uses(rule.clone(), cluster(), pv(i))
                    .with_reason("its volumes live in the pool")
                    .with_replay(true)
            })
            .collect();
        let settings = ObjectKey::new("", "ConfigMap", Some("team-a"), "a");
        relations.push(Relation::uses(usage("u1"), cluster(), settings));
        let idx = index_with(relations);
        let d = decide_delete(&idx, &cluster(), Some(UID));
        assert!(d.wants_replay());
        let listed: Vec<String> = (0..9)
            .map(|i| format!("PersistentVolume pvc-{i:03}"))
            .collect();
        assert_eq!(
            render_denial(&d, 10),
            format!(
                "cannot delete eks.example.io/Cluster my-cluster: it has 151 blockers: \
                 in use by ConfigMap team-a/a (Usage team-a/u1); \
                 in use by {} (DependencyRule rook-ceph-pv-uses-pool: its volumes live in the pool); \
                 and 141 more",
                listed.join(", ")
            )
        );
    }

    #[test]
    fn one_blocker_with_nothing_listed() {
        let idx = index_with(vec![Relation::uses(usage("u"), cluster(), release("a"))]);
        let d = decide_delete(&idx, &cluster(), None);
        assert_eq!(
            render_denial(&d, 0),
            "cannot delete eks.example.io/Cluster my-cluster: it has 1 blocker"
        );
    }

    #[test]
    fn long_reasons_are_cut() {
        let long = "x".repeat(500);
        let idx = index_with(vec![Relation::protects(
            Source::cluster_usage("p"),
            cluster(),
            long,
        )]);
        let msg = render_denial(&decide_delete(&idx, &cluster(), None), 5);
        assert!(msg.ends_with(&format!("{}…)", "x".repeat(200))), "{msg}");
    }

    #[test]
    fn stale_uid_does_not_block_but_unknown_uids_do() {
        let idx = index_with(vec![
            Relation::uses(usage("old"), cluster(), release("a")).with_uids(Some(OTHER_UID), None),
            Relation::uses(usage("current"), cluster(), release("b")).with_uids(Some(UID), None),
            Relation::uses(usage("unknown"), cluster(), release("c")),
        ]);
        // The recreated object (UID) is blocked by the current and the unknown relation only.
        let d = decide_delete(&idx, &cluster(), Some(UID));
        let sources: Vec<String> = d.blockers().iter().map(|b| b.source.to_string()).collect();
        assert_eq!(sources, ["Usage team-a/current", "Usage team-a/unknown"]);
        // Without a UID from the caller every relation blocks.
        assert_eq!(decide_delete(&idx, &cluster(), None).blockers().len(), 3);
        // An object whose relations all name an older incarnation may go.
        let idx = index_with(vec![
            Relation::uses(usage("old"), cluster(), release("a")).with_uids(Some(OTHER_UID), None),
        ]);
        assert!(decide_delete(&idx, &cluster(), Some(UID)).is_allowed());
        // Non-UUID UIDs compare exactly too.
        let idx = index_with(vec![
            Relation::uses(usage("old"), cluster(), release("a")).with_uids(Some("uid-1"), None),
        ]);
        assert!(decide_delete(&idx, &cluster(), Some("uid-2")).is_allowed());
        assert!(!decide_delete(&idx, &cluster(), Some("uid-1")).is_allowed());
    }
}
