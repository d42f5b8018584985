//! DELETE of a Namespace: its own relations, and the relations that hold what is in it — a
//! user outside the namespace (the namespace would hang `Terminating`), or a protection (its
//! deletion would delete the protected object, or take the Usage and lift it: issue 27).

use std::fmt::Write as _;
use std::time::SystemTime;

use lien_core::{Decision, HoldLine, ObjectKey, RelationIndex, namespace_holds, render_when_free};

use super::delete::{Refusal, denied};
use super::{Outcome, Policy, decide, finish_delete, object_key};
use crate::review::Request;

/// How many relations holding a namespace are copied out of the index for one refused
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
    /// What is in it is held (or nothing is: `count == 0`).
    Contents {
        /// How many relations hold the namespace.
        count: usize,
        /// Whether any of them asks for replay.
        replay: bool,
        /// Up to [`NAMESPACE_BLOCKERS_COPIED`] of them, unsorted.
        lines: Vec<HoldLine>,
    },
}

/// The index lookup of a Namespace DELETE (the only part that needs the lock): the namespace's
/// own relations, then the relations that hold what is in it — counted in O(1) and copied up
/// to a bound, from the index's per-namespace set (`RelationIndex::holding`), never by
/// scanning the index. Relations whose user is inside go with the namespace and do not count;
/// nor do relations of Lien's own kinds (see [`is_lien_kind`](super::is_lien_kind)).
pub fn decide_namespace(
    index: &RelationIndex,
    key: &ObjectKey,
    req: &Request<'_>,
) -> NamespaceDecision {
    let own = decide(index, key, req);
    if !own.is_allowed() {
        return NamespaceDecision::Own(own);
    }
    let (count, lines) = namespace_holds(index, &key.name, NAMESPACE_BLOCKERS_COPIED);
    NamespaceDecision::Contents {
        count,
        replay: count > 0 && index.holding_replay_count(&key.name) > 0,
        lines,
    }
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
    let (n, replay, mut held) = match decision {
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
    held.sort_unstable();
    let ns = key.name.as_str();
    let listed = n.min(policy.max_listed).min(held.len());
    // Who: three short lines (as a DELETE's refusal), then the list, each with what lifts it.
    let who = match (n, held.first()) {
        (1, Some(only)) => format!(
            "cannot delete Namespace {ns}: a lien holds what is in it: {}",
            only.text
        ),
        _ => format!(
            "cannot delete Namespace {ns}: {n} liens hold what is in it (protections, or users outside the namespace)"
        ),
    };
    // A protection may be among them (the copy is bounded, so it cannot be ruled out).
    let recorded = replay && policy.refusals_recorded;
    let next = render_when_free(&key, recorded, false);
    let why = format!("`kubectl lien why namespace/{ns}`");
    let todo = match (n, held.first()) {
        (1, Some(only)) => format!(
            "To free it now, lift it: `{}`; users inside the namespace go with it and do not count; for the other ways: {why}.",
            only.command
        ),
        _ => format!(
            "To free it now, lift each one listed below (its command follows it); users inside the namespace go with it and do not count; {why} lists them all."
        ),
    };
    let mut summary = who.clone();
    let mut message = format!("{who}.\n{next}.\n{todo}");
    if n > 1 && listed > 0 {
        message.push_str("\nheld by:");
        for (i, line) in held[..listed].iter().enumerate() {
            summary.push_str(if i == 0 { ": " } else { "; " });
            summary.push_str(&line.text);
            let _ = write!(message, "\n  {line}");
        }
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
        req.user_info.requester(),
        req.is_dry_run(),
        now,
    )
}

/// DELETE of a Namespace: refused if the namespace itself is in use, or if what is in it is
/// held — used from outside it (it would hang in `Terminating` until those users go) or
/// protected (its deletion would delete the protected object, or lift its Usage).
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
