//! What holds a namespace's deletion, one line each with the command that lifts it: the
//! Namespace DELETE's refusal (the webhook), the Namespace's Event and condition while it is
//! being deleted (the controller) and `kubectl lien why namespace/NAME` (the plugin) say it in
//! the same words. Pure.

use std::fmt;

use crate::decision::finalizer_removal_command;
use crate::index::{RelationIndex, RelationRef};

/// Reasons are written by users; one line, bounded, as in a DELETE's refusal.
const MAX_REASON_CHARS: usize = 200;

/// One relation (or cycle) that holds a namespace, as a person reads it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct HoldLine {
    /// What holds: `ConfigMap vault/data is protected (Usage vault/keep-data: reason)`, or
    /// `ConfigMap vault/cfg is in use by apps/Deployment web/api (Usage web/u)`.
    pub text: String,
    /// The command that lifts it, one shell line: the `kubectl delete` of the user outside,
    /// or of the protecting Usage — the removal of its finalizer when Lien keeps it being
    /// deleted (`RelationIndex::set_kept`), since deleting it again lifts nothing.
    pub command: String,
}

impl fmt::Display for HoldLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} — lift it: `{}`", self.text, self.command)
    }
}

impl HoldLine {
    /// The line of one relation of [`RelationIndex::holding`].
    pub fn of_relation(r: &RelationRef<'_>) -> Self {
        let (of, source) = (r.of(), r.source());
        let (mut text, command) = match r.by() {
            Some(by) => (
                format!("{of} is in use by {by} ({source}"),
                format!("kubectl delete {}", by.to_key().kubectl_arg()),
            ),
            None => (
                format!("{of} is protected ({source}"),
                match r.source_kept() {
                    Some(at) => finalizer_removal_command(&source.to_source(), at.into()),
                    None => format!("kubectl delete {}", source.to_source().kubectl_arg()),
                },
            ),
        };
        if let Some(reason) = r.reason() {
            text.push_str(": ");
            for (i, c) in reason.chars().enumerate() {
                if i == MAX_REASON_CHARS {
                    text.push('…');
                    break;
                }
                text.push(if c.is_control() { ' ' } else { c });
            }
        }
        text.push(')');
        Self { text, command }
    }
}

/// The lines of at most `limit` of the relations holding `namespace`
/// ([`RelationIndex::holding`]), unsorted (sort them after the index's lock is released), and
/// how many there are in all.
pub fn namespace_holds(
    index: &RelationIndex,
    namespace: &str,
    limit: usize,
) -> (usize, Vec<HoldLine>) {
    let count = index.holding_count(namespace);
    if count == 0 {
        return (0, Vec::new());
    }
    let lines = index
        .holding(namespace)
        .take(limit)
        .map(|r| HoldLine::of_relation(&r))
        .collect();
    (count, lines)
}
