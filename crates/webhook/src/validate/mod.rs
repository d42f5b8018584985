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
//! One file per validator: [`delete`](validate_delete) (any object but a Namespace),
//! [`namespace`](validate_namespace_delete), [`evict`](finish_eviction) (the Eviction API), [`write`](validate_write) (the tamper and
//! break-glass guards), [`usage`](validate_usage) (Usages and ClusterUsages); what they share
//! (the verdict, the policy, reading the review's key and labels) is here.
//!
//! Status codes: 409 `Conflict` when an object is in use (the state conflicts with the request
//! and may change), 403 `Forbidden` when the user may not do it at all, 422 `Invalid` for a
//! Usage that cannot be enforced as written, 500 `InternalError` when a live check or an access
//! check could not answer (retrying may help).

use lien_api::IN_USE_LABEL;
use lien_core::{Decision, ObjectKey, Source};

use crate::review::{Metadata, Request, Status};

mod delete;
mod evict;
mod namespace;
mod usage;
mod write;

pub use delete::{Confirm, decide, finish_delete, validate_delete};
pub use evict::{decide_eviction, finish_eviction, is_eviction};
pub use namespace::{
    NAMESPACE_BLOCKERS_COPIED, NamespaceDecision, decide_namespace, finish_namespace_delete,
    validate_namespace_delete,
};
pub use usage::{Authorize, Consent, validate_usage};
pub(crate) use usage::{UsageUserInfo, check_kind, qualified_resource};
pub use write::validate_write;

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

    /// A DELETE (or eviction) that only relations in warn mode would refuse: allowed, with the
    /// warning kubectl prints ([`lien_core::render_warning`]).
    pub(crate) fn warned(decision: &lien_core::Decision, policy: &Policy) -> Self {
        Self::Allow {
            warnings: vec![lien_core::render_warning(decision, policy.max_listed)],
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
