//! The validators: pure functions from a parsed review and the relation index to an
//! [`Outcome`]. No I/O, no clock (the caller passes `now`), no locks (the caller passes the index
//! it holds).
//!
//! # Data model
//!
//! - [`Outcome::Allow`] and [`Outcome::Deny`] are final; either may carry a [`Record`] — a
//!   non-dry-run denial ([`Denial`], which the controller turns into an event and the replay
//!   annotation) or a break-glass use ([`BreakGlassUse`], an audit event). Records are returned,
//!   never sent from here: the HTTP layer forwards them.
//! - [`Outcome::Confirm`] means "the object says it is in use but the index knows nothing":
//!   the index may be behind (a restart, a watch gap), so the HTTP layer asks the injected
//!   [`LiveCheck`](crate::LiveCheck) and finishes with [`Confirm::resolve`]. Fail closed.
//! - [`Policy`] is the static configuration: how many blockers a message lists and which
//!   groups may break glass. Nobody is exempt from the tamper guard by name: it decides by
//!   state (see [`validate_write`]).
//! - [`KindResolver`] answers "is this kind served, at which scope, under which resource" from
//!   the caller's discovery cache, so Usage validation stays pure.
//! - [`Outcome::Authorize`] means "the Usage is valid; may its creator protect `spec.of`?": the
//!   HTTP layer asks the injected [`AccessCheck`](crate::AccessCheck) (a `SubjectAccessReview`)
//!   and finishes with [`Authorize::resolve`]. Fail closed.
//!
//! Status codes: 409 `Conflict` when an object is in use (the state conflicts with the request
//! and may change), 403 `Forbidden` when the user may not do it at all, 422 `Invalid` for a
//! Usage that cannot be enforced as written, 500 `InternalError` when a live check or an access
//! check could not answer (retrying may help).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::SystemTime;

use lien_api::{IN_USE_LABEL, ResourceSpec};
use lien_core::seams::{AccessDecision, AccessRequest, Requester};
use lien_core::{
    Decision, ObjectKey, RelationIndex, Source, decide_delete, render_denial, render_refusal,
    render_when_free,
};
use serde::Deserialize;

use crate::review::{Metadata, Operation, Request, Status};

/// The annotation that, set by a member of a break-glass group, lets an object in use be
/// deleted. Its value is the reason, recorded in the audit event.
pub const BREAK_GLASS_ANNOTATION: &str = "lien.dev/break-glass";

/// Static webhook policy.
#[derive(Debug, Clone)]
pub struct Policy {
    /// How many blockers a denial lists before "and N more".
    pub max_listed: usize,
    /// Groups whose members may set [`BREAK_GLASS_ANNOTATION`]. Empty: break-glass is off and
    /// the annotation is ignored.
    pub break_glass_groups: Vec<String>,
    /// Whether refused DELETEs are recorded for replay (the API server is authenticated, or
    /// every caller is trusted). It only changes what a refusal says will happen: "Lien will
    /// delete it when its last user is gone" or "… run `kubectl lien delete --when-free …`". The
    /// [`WebhookBuilder`](crate::WebhookBuilder) sets it from its [`ReviewAuth`](crate::ReviewAuth).
    pub refusals_recorded: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            max_listed: 10,
            break_glass_groups: Vec::new(),
            refusals_recorded: true,
        }
    }
}

pub use lien_core::seams::{KindResolver, Scope};

pub use lien_core::seams::{BreakGlassAction, BreakGlassUse, Denial};

/// Something the controller must act on: an event, a replay record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A refused DELETE.
    Denied(Denial),
    /// A break-glass event.
    BreakGlass(BreakGlassUse),
}

/// A validator's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Let it through.
    Allow {
        /// Shown by `kubectl`.
        warnings: Vec<String>,
        /// For the controller.
        record: Option<Record>,
    },
    /// Refuse.
    Deny {
        /// `code`, `reason`, `message`.
        status: Status,
        /// For the controller (`None` for dry runs).
        record: Option<Record>,
    },
    /// Ask a live read, then [`Confirm::resolve`].
    Confirm(Confirm),
    /// Ask an access check, then [`Authorize::resolve`].
    Authorize(Authorize),
}

impl Outcome {
    pub(crate) fn allow() -> Self {
        Self::Allow {
            warnings: Vec::new(),
            record: None,
        }
    }

    pub(crate) fn deny(code: u16, reason: &'static str, message: String) -> Self {
        Self::Deny {
            status: Status {
                code,
                reason,
                message,
            },
            record: None,
        }
    }

    /// A malformed request Lien cannot decide on.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::deny(400, "BadRequest", message.into())
    }

    /// Whether the request is allowed (`None` while a confirmation is pending).
    pub fn allowed(&self) -> Option<bool> {
        match self {
            Self::Allow { .. } => Some(true),
            Self::Deny { .. } => Some(false),
            Self::Confirm(_) | Self::Authorize(_) => None,
        }
    }
}

/// A DELETE the index would allow although the object carries `lien.dev/in-use: "true"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirm {
    /// The object.
    pub object: ObjectKey,
    /// Its UID.
    pub uid: Option<String>,
    /// Whether the DELETE is a dry run.
    pub dry_run: bool,
    /// Who asked.
    pub user: String,
    /// `propagationPolicy`.
    pub propagation_policy: Option<String>,
}

impl Confirm {
    /// Finishes the decision with the live check's answer: its own [`Decision`] from a fresh
    /// read, or why it could not make one. An error denies (fail closed): a refused DELETE can
    /// be retried, a wrongly allowed one cannot be undone.
    pub fn resolve<E: std::fmt::Display>(
        self,
        checked: Result<Decision, E>,
        policy: &Policy,
        now: SystemTime,
    ) -> Outcome {
        match checked {
            Ok(Decision::Allowed) => Outcome::Allow {
                warnings: vec![format!(
                    "{} carries {IN_USE_LABEL}=true but is no longer in use (confirmed by a live read); the label is stale",
                    self.object
                )],
                record: None,
            },
            Ok(decision) => {
                let refusal = Refusal::of(&decision, policy);
                denied(
                    refusal,
                    self.object,
                    self.uid,
                    self.propagation_policy,
                    self.user,
                    self.dry_run,
                    now,
                )
            }
            // 500, not 503: clients (kube-rs, client-go) retry 503s by themselves for minutes,
            // which would hide the refusal from the person who asked.
            Err(e) => Outcome::deny(
                500,
                "InternalError",
                format!(
                    "cannot delete {}: it carries {IN_USE_LABEL}=true, Lien's index has no relation for it and the live check failed ({e}); refusing until Lien can confirm, retry shortly",
                    self.object
                ),
            ),
        }
    }
}

/// What a refused DELETE says: to the person (the 409, several lines: see
/// [`lien_core::render_refusal`]) and in its Event (one line: who holds it and what happens
/// next), and whether it is to be replayed.
struct Refusal {
    /// The 409's message.
    message: String,
    /// The Event's one line.
    summary: String,
    /// Whether a blocking relation asks for replay.
    replay: bool,
}

impl Refusal {
    /// The refusal of a DELETE the index denied.
    fn of(decision: &Decision, policy: &Policy) -> Self {
        let replay = decision.wants_replay();
        // Said for a dry run too: it is decided like the real thing, but leaves no trace (no
        // replay, no event).
        let recorded = replay && policy.refusals_recorded;
        let Decision::Denied { object, blockers } = decision else {
            return Self {
                message: String::new(),
                summary: String::new(),
                replay,
            };
        };
        let users_only = blockers.iter().all(|b| b.by.is_some());
        Self {
            message: render_refusal(decision, policy.max_listed, recorded),
            summary: format!(
                "{}; {}",
                render_denial(decision, policy.max_listed),
                render_when_free(object, recorded, users_only)
            ),
            replay,
        }
    }
}

/// A refused DELETE: 409 with the refusal's message, and the record for the controller (not for
/// a dry run) with its one-line summary.
fn denied(
    refusal: Refusal,
    object: ObjectKey,
    uid: Option<String>,
    propagation_policy: Option<String>,
    user: String,
    dry_run: bool,
    now: SystemTime,
) -> Outcome {
    let Refusal {
        message,
        summary,
        replay,
    } = refusal;
    let record = (!dry_run).then_some(Record::Denied(Denial {
        object,
        uid,
        propagation_policy,
        user,
        time: now,
        replay,
        message: summary,
    }));
    Outcome::Deny {
        status: Status {
            code: 409,
            reason: "Conflict",
            message,
        },
        record,
    }
}

/// Whether the object under review is one of Lien's own (group `lien.dev`). A Usage is never
/// itself protected: Usages of Usages are refused at CREATE ([`validate_usage`]), and one that
/// got into the index anyway (created before that check, or with the webhook down) must not
/// block the deletion of a Usage — two of them would hold their namespace in `Terminating`.
pub fn is_lien_kind(req: &Request<'_>) -> bool {
    req.kind.group == lien_api::GROUP
}

fn is_core_namespace(req: &Request<'_>) -> bool {
    req.kind.group.is_empty() && req.kind.kind == "Namespace"
}

/// The key of the object under review. For a `Namespace`, kube-apiserver puts its name in
/// `request.namespace` too; the object itself is cluster-scoped.
pub fn object_key(req: &Request<'_>) -> Result<ObjectKey, String> {
    if req.name.is_empty() {
        return Err("request.name is empty".to_owned());
    }
    if req.kind.kind.is_empty() {
        return Err("request.kind.kind is empty".to_owned());
    }
    let namespace = if is_core_namespace(req) {
        None
    } else {
        req.namespace.as_deref().filter(|ns| !ns.is_empty())
    };
    Ok(ObjectKey::new(
        req.kind.group.as_ref(),
        req.kind.kind.as_ref(),
        namespace,
        req.name.as_ref(),
    ))
}

fn has_in_use_label(meta: Option<&Metadata<'_>>) -> bool {
    meta.and_then(|m| m.labels.get(IN_USE_LABEL)) == Some("true")
}

fn break_glass<'m>(meta: Option<&'m Metadata<'_>>) -> Option<&'m str> {
    meta.and_then(|m| m.annotations.get(BREAK_GLASS_ANNOTATION))
        .filter(|v| !v.trim().is_empty())
}

/// The distinct sources of a decision's blockers, sorted.
fn blocking_sources(decision: &Decision) -> Vec<Source> {
    let mut sources: Vec<Source> = decision
        .blockers()
        .iter()
        .map(|b| Source::clone(&b.source))
        .collect();
    sources.sort_unstable();
    sources.dedup();
    sources
}

fn in_groups(req: &Request<'_>, groups: &[String]) -> bool {
    req.user_info
        .groups
        .iter()
        .any(|g| groups.iter().any(|allowed| allowed == g))
}

/// DELETE of any object (routes a `Namespace` to [`validate_namespace_delete`]).
///
/// Convenient for tests and benches. The server instead calls [`decide`] under the index lock and
/// [`finish_delete`] after releasing it, so message rendering never holds the lock.
pub fn validate_delete(
    index: &RelationIndex,
    policy: &Policy,
    req: &Request<'_>,
    now: SystemTime,
) -> Outcome {
    if is_core_namespace(req) {
        return validate_namespace_delete(index, policy, req, now);
    }
    if is_lien_kind(req) {
        return Outcome::allow();
    }
    match object_key(req) {
        Ok(key) => {
            let decision = decide(index, &key, req);
            let released = index.knows_why_free(&key);
            finish_delete(decision, released, key, policy, req, now)
        }
        Err(e) => Outcome::invalid(e),
    }
}

/// The index lookup of a DELETE: the only part that needs the lock.
pub fn decide(index: &RelationIndex, key: &ObjectKey, req: &Request<'_>) -> Decision {
    let uid = req.old_metadata().and_then(|m| m.uid.as_deref());
    decide_delete(index, key, uid)
}

/// The rest of a DELETE, from the index's [`Decision`]: break-glass, stale labels, records.
///
/// `released`: the index saw the object's last relation go, or broke the cycle it is part of
/// because its namespace is being deleted ([`RelationIndex::knows_why_free`]), so an in-use
/// label on an allowed object is stale for a reason this replica observed, and needs no live
/// read (a live read would find the cycle's relations and refuse). (An object this index never saw
/// protected, yet labelled, is confirmed live: the label may come from a replica whose view
/// this one lacks.)
pub fn finish_delete(
    decision: Decision,
    released: bool,
    key: ObjectKey,
    policy: &Policy,
    req: &Request<'_>,
    now: SystemTime,
) -> Outcome {
    let old = req.old_metadata();
    let uid = old.and_then(|m| m.uid.as_deref()).map(str::to_owned);
    match decision {
        Decision::Allowed if has_in_use_label(old) && released => Outcome::Allow {
            warnings: vec![format!(
                "{key} carries {IN_USE_LABEL}=true but is no longer in use (Lien saw its last relation go, or broke the cycle it is part of because its namespace is being deleted); the label is stale"
            )],
            record: None,
        },
        Decision::Allowed if has_in_use_label(old) => Outcome::Confirm(Confirm {
            object: key,
            uid,
            dry_run: req.is_dry_run(),
            user: req.user_info.username.clone().into_owned(),
            propagation_policy: req.propagation_policy().map(str::to_owned),
        }),
        Decision::Allowed => Outcome::allow(),
        denied_decision => {
            if !policy.break_glass_groups.is_empty() {
                if let Some(reason) = break_glass(old) {
                    let message = render_denial(&denied_decision, policy.max_listed);
                    // The annotation can only have been set by a break-glass group member: the
                    // break-glass webhook vets every write that sets or changes it.
                    let record = (!req.is_dry_run()).then(|| {
                        Record::BreakGlass(BreakGlassUse {
                            action: BreakGlassAction::Used,
                            object: key.clone(),
                            uid: uid.clone(),
                            user: req.user_info.username.clone().into_owned(),
                            reason: reason.to_owned(),
                            overridden: message.clone(),
                            sources: blocking_sources(&denied_decision),
                            time: now,
                        })
                    });
                    return Outcome::Allow {
                        warnings: vec![format!(
                            "{key} is in use but deleted under {BREAK_GLASS_ANNOTATION} ({reason}); this is audited. Overridden: {message}"
                        )],
                        record,
                    };
                }
            }
            denied(
                Refusal::of(&denied_decision, policy),
                key,
                uid,
                req.propagation_policy().map(str::to_owned),
                req.user_info.username.clone().into_owned(),
                req.is_dry_run(),
                now,
            )
        }
    }
}

/// How many relations leaving a namespace are copied out of the index for one refused
/// Namespace DELETE. The count is exact whatever this is; the copy bounds the work done under
/// the read lock (a namespace whose pool is used by 100,000 PersistentVolumes must not make the
/// webhook copy 100,000 relations). Up to this many, the listed ones are the first in sorted
/// order; beyond it, the first of an arbitrary subset.
pub const NAMESPACE_BLOCKERS_COPIED: usize = 1024;

/// What the index says about a Namespace DELETE: taken under the read lock by
/// [`decide_namespace`], turned into an [`Outcome`] after it by [`finish_namespace_delete`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceDecision {
    /// The namespace object itself is in use.
    Own(Decision),
    /// Objects in it are used from outside it (or nothing is: `count == 0`).
    Contents {
        /// How many relations leave the namespace.
        count: usize,
        /// Whether any of them asks for replay.
        replay: bool,
        /// Up to [`NAMESPACE_BLOCKERS_COPIED`] of them, one line each, unsorted.
        lines: Vec<String>,
    },
}

/// The index lookup of a Namespace DELETE (the only part that needs the lock): the namespace's
/// own relations, then the relations that hold its contents from outside it — counted in O(1)
/// and copied up to a bound, from the index's per-namespace set (`RelationIndex::leaving`),
/// never by scanning the index. Relations whose both ends are inside go with the namespace and
/// do not count; nor do relations of Lien's own kinds (see [`is_lien_kind`]).
pub fn decide_namespace(
    index: &RelationIndex,
    key: &ObjectKey,
    req: &Request<'_>,
) -> NamespaceDecision {
    let own = decide(index, key, req);
    if !own.is_allowed() {
        return NamespaceDecision::Own(own);
    }
    let ns = key.name.as_str();
    let count = index.leaving_count(ns);
    if count == 0 {
        return NamespaceDecision::Contents {
            count,
            replay: false,
            lines: Vec::new(),
        };
    }
    let lines = index
        .leaving(ns)
        .take(NAMESPACE_BLOCKERS_COPIED)
        .map(|r| {
            let of = r.of();
            let mut line = String::new();
            match r.by() {
                Some(by) => {
                    let _ = write!(line, "{of} is in use by {by} ({}", r.source());
                }
                None => {
                    let _ = write!(line, "{of} is protected ({}", r.source());
                }
            }
            if let Some(reason) = r.reason() {
                let _ = write!(line, ": {}", one_line(reason));
            }
            line.push(')');
            line
        })
        .collect();
    NamespaceDecision::Contents {
        count,
        replay: index.leaving_replay_count(ns) > 0,
        lines,
    }
}

/// A user's reason on one bounded line, as in the DELETE message (`lien_core::render_denial`).
fn one_line(reason: &str) -> String {
    const MAX: usize = 200;
    let mut out: String = reason
        .chars()
        .take(MAX)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if reason.chars().nth(MAX).is_some() {
        out.push('…');
    }
    out
}

/// The rest of a Namespace DELETE, from [`decide_namespace`]: the message (sorted, bounded by
/// `max_listed`, "and N more") and the denial record (replayed when a blocking relation asks).
pub fn finish_namespace_delete(
    decision: NamespaceDecision,
    key: ObjectKey,
    policy: &Policy,
    req: &Request<'_>,
    now: SystemTime,
) -> Outcome {
    let (n, replay, mut outside) = match decision {
        // A labelled Namespace (itself the `of` of a Usage) is confirmed live when its label
        // looks stale: namespaces are few, and their release is not tracked separately.
        NamespaceDecision::Own(own) => return finish_delete(own, false, key, policy, req, now),
        NamespaceDecision::Contents { count: 0, .. } => {
            return finish_delete(Decision::Allowed, false, key, policy, req, now);
        }
        NamespaceDecision::Contents {
            count,
            replay,
            lines,
        } => (count, replay, lines),
    };
    outside.sort_unstable();
    let ns = key.name.as_str();
    let listed = n.min(policy.max_listed).min(outside.len());
    let who = format!(
        "cannot delete Namespace {ns}: {n} relation{} objects in it from outside the namespace, so it would hang in Terminating",
        if n == 1 { " holds" } else { "s hold" }
    );
    // A protection may be among them (the copy is bounded, so it cannot be ruled out).
    let recorded = replay && policy.refusals_recorded;
    let next = render_when_free(&key, recorded, false);
    let mut summary = who.clone();
    let mut message = format!(
        "{who}.\n{next}.\nTo free it now, delete those users (or remove those protections) first, \
         listed below — relations with both ends inside the namespace do not count; \
         `kubectl lien why TYPE/NAME -n {ns}` says how for each object."
    );
    if listed > 0 {
        message.push_str("\nheld by:");
    }
    for (i, line) in outside[..listed].iter().enumerate() {
        summary.push_str(if i == 0 { ": " } else { "; " });
        summary.push_str(line);
        let _ = write!(message, "\n  {line}");
    }
    if n > listed {
        if listed > 0 {
            let _ = write!(summary, "; and {} more", n - listed);
        }
        let _ = write!(message, "\n  and {} more", n - listed);
    }
    let _ = write!(summary, "; {next}");
    let uid = req
        .old_metadata()
        .and_then(|m| m.uid.as_deref())
        .map(str::to_owned);
    denied(
        Refusal {
            message,
            summary,
            replay,
        },
        key,
        uid,
        req.propagation_policy().map(str::to_owned),
        req.user_info.username.clone().into_owned(),
        req.is_dry_run(),
        now,
    )
}

/// DELETE of a Namespace: refused if the namespace itself is in use, or if objects in it are
/// used from outside it — otherwise it would hang in `Terminating` until those users go.
/// [`decide_namespace`] then [`finish_namespace_delete`]; the server calls them apart so that
/// the message is rendered after the lock is released.
pub fn validate_namespace_delete(
    index: &RelationIndex,
    policy: &Policy,
    req: &Request<'_>,
    now: SystemTime,
) -> Outcome {
    match object_key(req) {
        Ok(key) => {
            let decision = decide_namespace(index, &key, req);
            finish_namespace_delete(decision, key, policy, req, now)
        }
        Err(e) => Outcome::invalid(e),
    }
}

/// CREATE or UPDATE of any object other than a Usage: the tamper guard (the in-use label may
/// not be removed while the object is in use) and the break-glass guard (only authorised
/// groups may set the annotation).
pub fn validate_write(
    index: &RelationIndex,
    policy: &Policy,
    req: &Request<'_>,
    now: SystemTime,
) -> Outcome {
    let old = req.old_metadata();
    let new = req.new_metadata();
    let stripped = has_in_use_label(old) && !has_in_use_label(new);
    let new_glass = break_glass(new);
    let armed = new_glass.is_some() && new_glass != break_glass(old);
    if !stripped && !armed {
        return Outcome::allow();
    }
    let key = match object_key(req) {
        Ok(key) => key,
        Err(e) => return Outcome::invalid(e),
    };
    let decision = decide(index, &key, req);
    let user = req.user_info.username.as_ref();
    // By state, whoever asks: Lien's controller itself only removes the label once no relation
    // holds (`lien_controller::desired::label_writes`), so a removal while one holds is never
    // Lien's own — an exemption by user name would let anyone who may impersonate Lien's
    // service account unprotect (and then delete) the object. On a second replica whose index
    // lags the leader's, the leader's removal is refused until this index catches up; the
    // writer retries it.
    if stripped && !decision.is_allowed() {
        let rendered = render_denial(&decision, policy.max_listed);
        let prefix = format!("cannot delete {key}: ");
        let why = rendered.strip_prefix(&prefix).unwrap_or(&rendered);
        return Outcome::deny(
            409,
            "Conflict",
            format!(
                "cannot remove label {IN_USE_LABEL} from {key}: Lien manages it and {why}; the label goes when the last relation does"
            ),
        );
    }
    if let Some(reason) = new_glass.filter(|_| armed) {
        if policy.break_glass_groups.is_empty() {
            return Outcome::deny(
                403,
                "Forbidden",
                format!(
                    "cannot set annotation {BREAK_GLASS_ANNOTATION} on {key}: break-glass is disabled (no break-glass groups are configured)"
                ),
            );
        }
        if !in_groups(req, &policy.break_glass_groups) {
            return Outcome::deny(
                403,
                "Forbidden",
                format!(
                    "cannot set annotation {BREAK_GLASS_ANNOTATION} on {key}: user {user:?} is not in a break-glass group ({}); ask a member to set it",
                    policy.break_glass_groups.join(", ")
                ),
            );
        }
        let overridden = render_denial(&decision, policy.max_listed);
        let record = (!req.is_dry_run()).then(|| {
            Record::BreakGlass(BreakGlassUse {
                action: BreakGlassAction::Armed,
                object: key.clone(),
                uid: old.and_then(|m| m.uid.as_deref()).map(str::to_owned),
                user: user.to_owned(),
                reason: reason.to_owned(),
                overridden,
                sources: blocking_sources(&decision),
                time: now,
            })
        });
        return Outcome::Allow {
            warnings: vec![format!(
                "{BREAK_GLASS_ANNOTATION} set on {key}: it can now be deleted even while in use; this is audited"
            )],
            record,
        };
    }
    Outcome::allow()
}

#[derive(Deserialize)]
struct UsageBody {
    request: UsageRequest,
}

/// The Usage path's own view of the request: unlike [`Request`] it decodes the spec and the
/// whole `userInfo` (with `uid` and `extra`, which the access check passes on). Usages are
/// small, so decoding them costs nothing that matters.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageRequest {
    object: Option<UsageObject>,
    #[serde(default)]
    old_object: Option<OldUsageObject>,
    #[serde(default)]
    user_info: Option<UsageUserInfo>,
}

#[derive(Deserialize)]
struct UsageObject {
    #[serde(default)]
    spec: Option<UsageSpecSides>,
}

#[derive(Deserialize)]
struct UsageSpecSides {
    of: ResourceSpec,
    #[serde(default)]
    by: Option<ResourceSpec>,
    #[serde(default)]
    reason: Option<String>,
}

/// The stored Usage of an UPDATE: only `spec.of`, leniently (a Usage stored before a schema
/// change must not make every update of it unreadable).
#[derive(Deserialize)]
struct OldUsageObject {
    #[serde(default)]
    spec: Option<OldUsageSpec>,
}

#[derive(Deserialize)]
struct OldUsageSpec {
    #[serde(default)]
    of: Option<serde_json::Value>,
}

#[derive(Deserialize, Default)]
pub(crate) struct UsageUserInfo {
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    groups: Option<Vec<String>>,
    #[serde(default)]
    extra: Option<BTreeMap<String, Vec<String>>>,
}

impl From<UsageUserInfo> for Requester {
    fn from(u: UsageUserInfo) -> Self {
        Requester {
            username: u.username.unwrap_or_default(),
            uid: u.uid.unwrap_or_default(),
            groups: u.groups.unwrap_or_default(),
            extra: u.extra.unwrap_or_default(),
        }
    }
}

/// A valid Usage whose creator must still be shown to be allowed to update `spec.of`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorize {
    /// The question for the access check.
    pub request: AccessRequest,
    /// The Usage's kind (`Usage`, `ClusterUsage`), for the message.
    pub usage_kind: String,
    /// The scope of `spec.of`'s kind: `request.namespace: None` means "cluster-scoped" for one
    /// and "every namespace" for the other.
    pub scope: Scope,
    /// Why the right is needed, for the message: a Usage (the default) or a rule.
    pub consent: Consent,
    /// The next question, asked only if this one is allowed (a CascadeRule needs `delete` on
    /// its parent kind and on each of its child kinds).
    pub next: Option<Box<Authorize>>,
}

/// What an access check gives consent to; only the wording of a refusal depends on it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Consent {
    /// A Usage or ClusterUsage protecting `spec.of`.
    #[default]
    Usage,
    /// A DependencyRule, which can make any object of its `spec.of` kind undeletable.
    DependencyRule {
        /// `spec.of.kind`.
        kind: String,
        /// Whether the kind is served: if not, the check is over every resource of its group.
        served: bool,
    },
    /// A CascadeRule, whose parents' deletion deletes what they name.
    CascadeRule {
        /// `spec.parent.kind`.
        kind: String,
        /// As for [`Consent::DependencyRule`].
        served: bool,
    },
    /// A CascadeRule's child kind (`spec.childKinds[index]`), which Lien then deletes with its
    /// own rights.
    CascadeChild {
        /// `spec.childKinds[index].kind`.
        kind: String,
        /// The position in `spec.childKinds`.
        index: usize,
        /// As for [`Consent::DependencyRule`].
        served: bool,
    },
}

impl Authorize {
    /// Finishes the decision with the access check's answer. An error denies (fail closed): a
    /// refused Usage can be created again, a Usage wrongly admitted protects something its
    /// creator had no say over.
    pub fn resolve<E: std::fmt::Display>(self, checked: Result<AccessDecision, E>) -> Outcome {
        let r = &self.request;
        let what = describe_access(r, self.scope);
        match checked {
            Ok(AccessDecision::Allowed) => match self.next {
                Some(next) => Outcome::Authorize(*next),
                None => Outcome::allow(),
            },
            Ok(AccessDecision::Denied { reason }) if self.consent != Consent::Usage => {
                let mut message = crate::rules::consent_refusal(r, self.scope, &self.consent);
                if !reason.trim().is_empty() {
                    let _ = write!(message, " (authorizer: {})", reason.trim());
                }
                Outcome::deny(403, "Forbidden", message)
            }
            Ok(AccessDecision::Denied { reason }) => {
                let mut message = format!(
                    "spec.of: user {:?} may not {what}; a {kind} blocks deletion of its spec.of object and has Lien label it, so whoever creates the {kind} must be allowed to update that object (as Kubernetes requires permission on an owner before a dependent may set blockOwnerDeletion on it). Grant {:?} on {} {}, or ask someone who has it to create this {kind}",
                    r.user.username,
                    r.verb,
                    qualified_resource(r),
                    scope_phrase(r, self.scope),
                    kind = self.usage_kind,
                );
                if !reason.trim().is_empty() {
                    let _ = write!(message, " (authorizer: {})", reason.trim());
                }
                Outcome::deny(403, "Forbidden", message)
            }
            Err(e) => Outcome::deny(
                500,
                "InternalError",
                format!(
                    "{}: cannot check whether user {:?} may {} ({e}); refusing the {} until Lien can check, retry shortly",
                    crate::rules::consent_field(&self.consent),
                    r.user.username,
                    match self.consent {
                        Consent::Usage => what,
                        _ => crate::rules::describe_rule_access(r, self.scope, &self.consent),
                    },
                    self.usage_kind
                ),
            ),
        }
    }
}

/// `configmaps`, `widgets.example.org`: how kubectl and kube-apiserver name a resource.
pub(crate) fn qualified_resource(r: &AccessRequest) -> String {
    if r.group.is_empty() {
        r.resource.clone()
    } else {
        format!("{}.{}", r.resource, r.group)
    }
}

/// `in namespace "team-b"`, `in every namespace`, `at the cluster scope`.
fn scope_phrase(r: &AccessRequest, scope: Scope) -> String {
    match (scope, &r.namespace) {
        (Scope::Cluster, _) => "at the cluster scope".to_owned(),
        (Scope::Namespaced, Some(ns)) => format!("in namespace {ns:?}"),
        (Scope::Namespaced, None) => "in every namespace".to_owned(),
    }
}

/// `update configmaps "settings" in namespace "team-b"`, or for a selector `update every
/// object of configmaps in namespace "team-b" (spec.of uses a resourceSelector, which may match
/// any of them)`.
fn describe_access(r: &AccessRequest, scope: Scope) -> String {
    let resource = qualified_resource(r);
    let scope = scope_phrase(r, scope);
    match &r.name {
        Some(name) => format!("{} {resource} {name:?} {scope}", r.verb),
        None => format!(
            "{} every object of {resource} {scope} (spec.of uses a resourceSelector, which may match any of them)",
            r.verb
        ),
    }
}

/// CREATE or UPDATE of a `Usage` or `ClusterUsage`: the checks CEL cannot make — the kinds
/// exist, and each side's namespace fits its kind's scope — and then, when `check_access` is
/// set, whether the user may protect `spec.of` ([`Outcome::Authorize`]). `body` is the whole
/// review (the Usage's spec is the one object Lien does decode; Usages are small).
///
/// Why that permission: a Usage blocks the deletion of its `spec.of` object and makes Lien write
/// a label onto it. Kubernetes itself requires permission on an owner (its `finalizers`
/// subresource, or delete) before a dependent may set `blockOwnerDeletion` on it; for the same
/// reason, a Usage may only be created by someone allowed to `update` the object it protects —
/// otherwise anyone who may create Usages in some namespace could pin anyone else's objects.
/// An UPDATE is checked only when `spec.of` changed (who may edit a Usage's `reason` is RBAC's
/// business, not Lien's).
pub fn validate_usage(
    kinds: &dyn KindResolver,
    req: &Request<'_>,
    body: &[u8],
    check_access: bool,
) -> Outcome {
    let cluster_usage = req.kind.kind == "ClusterUsage";
    let (spec, old_of, user) = match serde_json::from_slice::<UsageBody>(body) {
        Ok(UsageBody {
            request:
                UsageRequest {
                    object: Some(UsageObject { spec: Some(spec) }),
                    old_object,
                    user_info,
                },
        }) => (
            spec,
            old_object.and_then(|o| o.spec).and_then(|s| s.of),
            user_info,
        ),
        Ok(_) => return Outcome::invalid(format!("{} has no spec", req.kind.kind)),
        Err(e) => return Outcome::invalid(format!("cannot read {}: {e}", req.kind.kind)),
    };
    let mut problems = Vec::new();
    check_spec(&spec, req, &mut problems);
    if problems.is_empty() {
        check_side(kinds, "spec.of", &spec.of, cluster_usage, &mut problems);
        if let Some(by) = &spec.by {
            check_side(kinds, "spec.by", by, cluster_usage, &mut problems);
        }
    }
    if !problems.is_empty() {
        return Outcome::deny(422, "Invalid", problems.join("; "));
    }
    if !check_access {
        return Outcome::allow();
    }
    let of_changed = match req.operation {
        Operation::Update => {
            old_of.and_then(|v| serde_json::from_value::<ResourceSpec>(v).ok())
                != Some(spec.of.clone())
        }
        _ => true,
    };
    if !of_changed {
        return Outcome::allow();
    }
    match access_request(kinds, req, &spec.of, user.unwrap_or_default().into()) {
        Some((request, scope)) => Outcome::Authorize(Authorize {
            request,
            usage_kind: req.kind.kind.clone().into_owned(),
            scope,
            consent: Consent::Usage,
            next: None,
        }),
        // check_side vetted the kind a moment ago; a resolver that forgets it in between is
        // refreshing, and the safe answer is to refuse for now.
        None => Outcome::deny(
            500,
            "InternalError",
            format!(
                "spec.of: kind {} ({}) vanished from discovery while checking; retry shortly",
                spec.of.kind, spec.of.api_version
            ),
        ),
    }
}

/// The `SubjectAccessReview` question for `of`: may `user` update it — by name for a
/// `resourceRef`, every object of the kind in the namespace for a `resourceSelector`.
fn access_request(
    kinds: &dyn KindResolver,
    req: &Request<'_>,
    of: &ResourceSpec,
    user: Requester,
) -> Option<(AccessRequest, Scope)> {
    let scope = kinds.scope(&of.api_version, &of.kind)?;
    let resource = kinds.resource(&of.api_version, &of.kind)?;
    let group = of
        .api_version
        .rsplit_once('/')
        .map_or("", |(group, _)| group)
        .to_owned();
    let namespace = match scope {
        Scope::Cluster => None,
        // An explicit namespace, else the Usage's own (a ClusterUsage has none: its selector
        // without a namespace selects in every namespace, and `None` asks exactly that).
        Scope::Namespaced => of
            .explicit_namespace()
            .filter(|ns| !ns.is_empty())
            .map(str::to_owned)
            .or_else(|| {
                req.namespace
                    .as_deref()
                    .filter(|ns| !ns.is_empty())
                    .map(str::to_owned)
            }),
    };
    let request = AccessRequest {
        user,
        verb: "update".to_owned(),
        group,
        resource,
        namespace,
        name: of.resource_ref.as_ref().map(|r| r.name.clone()),
    };
    Some((request, scope))
}

/// The API group of an `apiVersion` (`""` for the core group's `v1`).
fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// The rules that need no discovery: well-formed names, label keys and values, bounded sizes, a
/// non-blank reason, no Usage of a Lien object, no Usage of itself. The CRD's schema refuses
/// most of them before Lien sees the Usage (maxLength, maxProperties, patterns, CEL); this
/// checks them all again, because a Usage stored under an older CRD, or a cluster whose CRD
/// is not Lien's current one, must not be enforced unchecked, and because what CEL cannot
/// express within kube-apiserver's cost budget (label keys, `of` equal to `by`) is only here.
fn check_spec(spec: &UsageSpecSides, req: &Request<'_>, problems: &mut Vec<String>) {
    if let Some(reason) = &spec.reason {
        if reason.trim().is_empty() {
            problems.push(
                "spec.reason: must not be blank; say in words why the object must stay (it is shown in every refused DELETE), or remove spec.reason when spec.by is set".to_owned(),
            );
        }
        let chars = reason.chars().count();
        if chars > lien_api::MAX_REASON_CHARS {
            problems.push(format!(
                "spec.reason: {chars} characters is too long: at most {} (it is shown in every refused DELETE); shorten it",
                lien_api::MAX_REASON_CHARS
            ));
        }
    }
    check_wellformed("spec.of", &spec.of, problems);
    if let Some(by) = &spec.by {
        check_wellformed("spec.by", by, problems);
    }
    if group_of(&spec.of.api_version) == lien_api::GROUP {
        problems.push(format!(
            "spec.of: {} ({}) is one of Lien's own kinds, and a Usage is never itself protected (Usages of Usages would block each other's deletion and hold their namespace in Terminating); point spec.of at the object the other Usage protects instead",
            spec.of.kind, spec.of.api_version
        ));
    }
    if let Some(by) = &spec.by {
        if same_objects(&spec.of, by, req) {
            problems.push(
                "spec.by: is identical to spec.of, and an object cannot be in use by itself; name the object that uses spec.of in spec.by, or remove spec.by and give a spec.reason to protect spec.of on its own".to_owned(),
            );
        }
    }
}

/// Whether two sides name the same objects: the same kind (an object is the same object at
/// every served version) and the same reference or selector, a missing namespace being the
/// Usage's own.
fn same_objects(of: &ResourceSpec, by: &ResourceSpec, req: &Request<'_>) -> bool {
    let own = req.namespace.as_deref().filter(|ns| !ns.is_empty());
    fn ns<'a>(n: Option<&'a String>, own: Option<&'a str>) -> Option<&'a str> {
        n.map(String::as_str).filter(|n| !n.is_empty()).or(own)
    }
    if group_of(&of.api_version) != group_of(&by.api_version) || of.kind != by.kind {
        return false;
    }
    match (
        (&of.resource_ref, &of.resource_selector),
        (&by.resource_ref, &by.resource_selector),
    ) {
        ((Some(a), _), (Some(b), _)) => {
            a.name == b.name && ns(a.namespace.as_ref(), own) == ns(b.namespace.as_ref(), own)
        }
        ((None, Some(a)), (None, Some(b))) => {
            a.match_labels == b.match_labels
                && a.match_controller_ref == b.match_controller_ref
                && ns(a.namespace.as_ref(), own) == ns(b.namespace.as_ref(), own)
        }
        _ => false,
    }
}

/// Syntax of a kind reference: `<field>.apiVersion` and `<field>.kind` (Usages and rules alike).
pub(crate) fn check_kind(field: &str, api_version: &str, kind: &str, problems: &mut Vec<String>) {
    use crate::wellformed;
    if let Some(why) = wellformed::api_version(api_version) {
        problems.push(format!(
            "{field}.apiVersion: invalid value {api_version:?}: {why}"
        ));
    }
    if let Some(why) = wellformed::kind(kind) {
        problems.push(format!("{field}.kind: invalid value {kind:?}: {why}"));
    }
}

/// Syntax and size: `apiVersion`, `kind`, names, namespaces, label keys and values, and a
/// selector that selects something less than every object of the kind.
fn check_wellformed(field: &str, side: &ResourceSpec, problems: &mut Vec<String>) {
    use crate::wellformed;
    check_kind(field, &side.api_version, &side.kind, problems);
    let namespace = |path: &str, ns: Option<&String>, problems: &mut Vec<String>| {
        if let Some(ns) = ns.filter(|ns| !ns.is_empty()) {
            if let Some(why) = wellformed::dns1123_label(ns) {
                problems.push(format!("{path}: invalid namespace {ns:?}: {why}"));
            }
        }
    };
    if let Some(r) = &side.resource_ref {
        // RBAC's kinds take any path segment (`system:controller:…`), as kube-apiserver's RBAC
        // validation does; every other kind's names are DNS subdomains.
        let why = if group_of(&side.api_version) == "rbac.authorization.k8s.io" {
            wellformed::path_segment_name(&r.name)
        } else {
            wellformed::dns1123_subdomain(&r.name)
        };
        if let Some(why) = why {
            problems.push(format!(
                "{field}.resourceRef.name: invalid name {:?}: {why}",
                r.name
            ));
        }
        namespace(
            &format!("{field}.resourceRef.namespace"),
            r.namespace.as_ref(),
            problems,
        );
    }
    if let Some(s) = &side.resource_selector {
        let path = format!("{field}.resourceSelector");
        namespace(&format!("{path}.namespace"), s.namespace.as_ref(), problems);
        if s.match_labels.is_empty() && !s.match_controller_ref {
            problems.push(format!(
                "{path}: an empty selector selects every {} in its namespace (or the cluster); set matchLabels or matchControllerRef: true, or use resourceRef for one object",
                side.kind
            ));
        }
        if s.match_labels.len() > lien_api::MAX_MATCH_LABELS {
            problems.push(format!(
                "{path}.matchLabels: {} labels is too many: at most {}; select by fewer labels",
                s.match_labels.len(),
                lien_api::MAX_MATCH_LABELS
            ));
        }
        for (key, value) in &s.match_labels {
            if let Some(why) = wellformed::qualified_name(key) {
                problems.push(format!(
                    "{path}.matchLabels: invalid label key {key:?}: {why}"
                ));
            }
            if let Some(why) = wellformed::label_value(value) {
                problems.push(format!(
                    "{path}.matchLabels[{key}]: invalid label value {value:?}: {why}"
                ));
            }
        }
    }
}

fn check_side(
    kinds: &dyn KindResolver,
    field: &str,
    side: &ResourceSpec,
    cluster_usage: bool,
    problems: &mut Vec<String>,
) {
    let (api_version, kind) = (side.api_version.as_str(), side.kind.as_str());
    let Some(scope) = kinds.scope(api_version, kind) else {
        problems.push(format!(
            "{field}: kind {kind} is not served in {api_version}; install its CRD first, or correct {field}.apiVersion and {field}.kind"
        ));
        return;
    };
    let ref_ns = side
        .resource_ref
        .as_ref()
        .and_then(|r| r.namespace.as_deref())
        .filter(|ns| !ns.is_empty());
    let sel_ns = side
        .resource_selector
        .as_ref()
        .and_then(|s| s.namespace.as_deref())
        .filter(|ns| !ns.is_empty());
    match scope {
        Scope::Cluster => {
            if ref_ns.is_some() {
                problems.push(format!(
                    "{field}.resourceRef.namespace: {kind} ({api_version}) is cluster-scoped; remove the namespace"
                ));
            }
            if sel_ns.is_some() {
                problems.push(format!(
                    "{field}.resourceSelector.namespace: {kind} ({api_version}) is cluster-scoped; remove the namespace"
                ));
            }
        }
        Scope::Namespaced => {
            if cluster_usage && side.resource_ref.is_some() && ref_ns.is_none() {
                problems.push(format!(
                    "{field}.resourceRef.namespace: {kind} ({api_version}) is namespaced, and a ClusterUsage has no namespace of its own; set the object's namespace"
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::Review;

    #[test]
    fn object_key_of_a_namespace_is_cluster_scoped() {
        let body = br#"{"request":{"uid":"u","operation":"DELETE","kind":{"group":"","version":"v1","kind":"Namespace"},"name":"team-a","namespace":"team-a"}}"#;
        let req = Review::parse(body).expect("parses");
        assert_eq!(
            object_key(&req),
            Ok(ObjectKey::new("", "Namespace", None, "team-a"))
        );
    }
}
