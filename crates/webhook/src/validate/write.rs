//! CREATE or UPDATE of any object other than a Usage: the tamper guard on the in-use label and
//! on the last finalizer of an object in use being deleted, and the break-glass guard.

use std::time::SystemTime;

use lien_api::IN_USE_LABEL;
use lien_core::{RelationIndex, render_denial};

use super::{
    BREAK_GLASS_ANNOTATION, BreakGlassAction, BreakGlassUse, Outcome, Policy, Record,
    blocking_sources, break_glass, decide, has_in_use_label, in_groups, object_key,
};
use crate::review::Request;

/// A write through a subresource that changes the in-use label or arms break-glass: refused
/// (`Some`), whoever asks and whatever the index says; anything else goes on as on the object. kube-apiserver keeps metadata written through most
/// status subresources (their strategies reset only spec) and `namespaces/finalize`, and
/// copies a Binding's annotations onto its Pod: whoever may write those but not the object
/// could otherwise unprotect it (and have it deleted) or arm an override nobody vetted. Lien
/// writes its label on the object itself, and break-glass belongs there too.
fn through_subresource(
    req: &Request<'_>,
    sub: &str,
    label_changed: bool,
    armed: bool,
) -> Option<Outcome> {
    let target = req.addressed();
    let user = req.user_info.username.as_ref();
    if label_changed {
        return Some(Outcome::deny(
            403,
            "Forbidden",
            format!(
                "cannot change label {IN_USE_LABEL} through {target} (user {user:?}): Lien manages it on the object itself, never through its {sub} subresource; leave the label as it is in the object you write"
            ),
        ));
    }
    if armed {
        return Some(Outcome::deny(
            403,
            "Forbidden",
            format!(
                "cannot set annotation {BREAK_GLASS_ANNOTATION} through {target} (user {user:?}): break-glass is set on the object itself (e.g. kubectl annotate), where it is vetted and audited"
            ),
        ));
    }
    None
}

/// CREATE or UPDATE of any object other than a Usage: the tamper guard (the in-use label may
/// not be removed while the object is in use) and the break-glass guard (only authorised
/// groups may set the annotation). Through a subresource the label and break-glass may not
/// change at all ([`through_subresource`]); the last finalizer is guarded by state alike.
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
    // The last finalizer of an object being deleted goes: the API server then removes it. On
    // an object in use that completes a deletion Lien refuses — possible only for an object
    // whose deletion began before it was protected (a PVC held by `kubernetes.io/pvc-protection`
    // while a pod mounts it, then protected by a Usage): issue 27's "finalizer removed by hand".
    // Status strategies keep finalizers too, so this holds through a subresource as well.
    let completes = old.is_some_and(|m| m.finalizers > 0)
        && new.is_some_and(|m| m.deleting && m.finalizers == 0);
    if let Some(sub) = req.subresource() {
        if let Some(refused) = through_subresource(
            req,
            sub,
            has_in_use_label(old) != has_in_use_label(new),
            armed,
        ) {
            return refused;
        }
    }
    if !stripped && !armed && !completes {
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
    if completes && !decision.is_allowed() {
        let rendered = render_denial(&decision, policy.max_listed);
        let prefix = format!("cannot delete {key}: ");
        let why = rendered.strip_prefix(&prefix).unwrap_or(&rendered);
        return Outcome::deny(
            409,
            "Conflict",
            format!(
                "cannot remove the last finalizer of {key}: it is being deleted and {why}; without a finalizer the deletion Lien refuses would complete — lift the lien first (`kubectl lien why {}`), then remove it",
                key.kubectl_arg()
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
