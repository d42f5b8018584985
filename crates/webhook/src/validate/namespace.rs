//! DELETE of a Namespace: its own relations, and the relations that hold its contents from
//! outside it.

use std::fmt::Write as _;
use std::time::SystemTime;

use lien_core::{Decision, ObjectKey, RelationIndex, render_when_free};

use super::delete::{Refusal, denied};
use super::{Outcome, Policy, decide, finish_delete, object_key};
use crate::review::Request;

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
/// do not count; nor do relations of Lien's own kinds (see [`is_lien_kind`](super::is_lien_kind)).
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
        req.user_info.requester(),
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
