//! DELETE of an object other than a Namespace: the index lookup under the lock, then the
//! refusal, break-glass, or a live confirmation of a stale-looking label.

use std::time::SystemTime;

use lien_api::IN_USE_LABEL;
use lien_core::seams::Requester;
use lien_core::{
    Decision, ObjectKey, RelationIndex, decide_delete, render_denial, render_refusal_and_denial,
    render_when_free,
};

use super::{
    BREAK_GLASS_ANNOTATION, BreakGlassAction, BreakGlassUse, Denial, Outcome, Policy, Record,
    blocking_sources, break_glass, has_in_use_label, is_core_namespace, is_lien_kind, object_key,
    validate_namespace_delete,
};
use crate::review::{Request, Status};

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
    pub user: Requester,
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
            Ok(decision @ Decision::Warned { .. }) => Outcome::warned(&decision, policy),
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
pub(super) struct Refusal {
    /// The 409's message.
    pub(super) message: String,
    /// The Event's one line.
    pub(super) summary: String,
    /// Whether a blocking relation asks for replay.
    pub(super) replay: bool,
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
        let (message, denial) = render_refusal_and_denial(decision, policy.max_listed, recorded);
        Self {
            message,
            summary: format!(
                "{denial}; {}",
                render_when_free(object, recorded, users_only)
            ),
            replay,
        }
    }
}

/// A refused DELETE: 409 with the refusal's message, and the record for the controller (not for
/// a dry run) with its one-line summary.
pub(super) fn denied(
    refusal: Refusal,
    object: ObjectKey,
    uid: Option<String>,
    propagation_policy: Option<String>,
    user: Requester,
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
        user: user.username,
        user_uid: user.uid,
        groups: user.groups,
        extra: user.extra,
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
            user: req.user_info.requester(),
            propagation_policy: req.propagation_policy().map(str::to_owned),
        }),
        Decision::Allowed => Outcome::allow(),
        // Every relation that would refuse it only warns: it goes through, and says so.
        warned @ Decision::Warned { .. } => Outcome::warned(&warned, policy),
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
                req.user_info.requester(),
                req.is_dry_run(),
                now,
            )
        }
    }
}
