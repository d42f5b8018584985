//! The mutating endpoint (`/mutate`, hook `seal.lien.dev`): deletion requests made through the
//! API server, sealed into replay records.
//!
//! # Why a mutating webhook
//!
//! Without a client certificate from the API server (most managed clusters) the webhook cannot
//! tell kube-apiserver from anyone else who reaches its port, so a refused DELETE it answers is
//! never recorded (`crate::server`, "Who is heard"). A user who wants an object deleted once it
//! is free asks through the API server instead (`kubectl lien delete --when-free`): an UPDATE
//! setting [`DELETE_WHEN_FREE_ANNOTATION`] on the object. The API server authenticates and
//! authorizes that UPDATE, sends it here, and applies the JSON Patch this endpoint answers —
//! the annotation replaced by a record sealed with Lien's key (`DeletionRequest`,
//! [`RecordSealer`]). A forged review POSTed to `/mutate` gets a patch that nobody applies: it
//! persists nothing. With a client CA configured it gets 401 and nothing at all (`crate::server`);
//! without one, the sealed record in its answer says `source: request`, and no write may carry
//! such a record (below), so it is useless by hand.
//!
//! # Decisions (pure: [`decide_mutation`], then [`Seal::resolve`] with the access check)
//!
//! - [`DELETE_WHEN_FREE_ANNOTATION`] set: its value must be a propagation policy or empty (else
//!   422). The requester must be allowed to `delete` the object themselves — a
//!   SubjectAccessReview with their whole `userInfo`, through the same
//!   [`AccessCheck`](crate::AccessCheck) seam as Usages — because Lien replays with its own rights: allowed → the patch; denied → 403 naming
//!   the user, verb and object; no answer → 500 (fail closed).
//! - [`DELETION_ATTEMPT_ANNOTATION`] added or changed by anyone but Lien's own identity → 403.
//!   Otherwise a record obtained from a forged review here could be written by hand. Lien's
//!   identity may write only a refusal's record (`RecordSource::Refusal`, what its controller
//!   writes): a deletion request's record never arrives in a write's object (the API server
//!   stores it by applying this endpoint's patch), so one that does is refused whoever sends it.
//!   Removing the record from the object itself is allowed (and never sent here: the
//!   configuration's match conditions): it cancels a pending replay, as deleting the Usage
//!   would.
//! - Through any subresource (`status`, `finalize`, `binding`…, which kube-apiserver lets
//!   carry metadata for many kinds): adding, changing or removing the record → 403, setting
//!   [`DELETE_WHEN_FREE_ANNOTATION`] → 400, whoever asks.
//! - Dry runs are sealed like real requests: sealing has no side effect (the answer is only a
//!   patch, and the access check only reads), so a dry run shows exactly what would be stored.

use std::time::SystemTime;

use lien_core::ObjectKey;
use lien_core::seams::{
    AccessDecision, AccessRequest, DELETE_WHEN_FREE_ANNOTATION, DELETION_ATTEMPT_ANNOTATION,
    DeletionRequest, RecordSealer, Requester,
};
use lien_decide::replay::{RecordSource, source_of};
use serde::Deserialize;

use crate::review::{Operation, Request, Status};
use crate::validate::object_key;

/// Lien's own identity in the default install (`lien manifests`): the service account whose
/// writes of [`DELETION_ATTEMPT_ANNOTATION`] are Lien's.
pub const LIEN_SERVICE_ACCOUNT: &str = "system:serviceaccount:lien-system:lien";

/// The propagation policies a deletion request may name (an empty value: the API server's
/// default).
pub const PROPAGATION_POLICIES: [&str; 3] = ["Background", "Foreground", "Orphan"];

/// What the mutating endpoint answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mutation {
    /// Let the write through, with a JSON Patch to apply (if any) and warnings for kubectl.
    Allow {
        /// RFC 6902 operations, serialised.
        patch: Option<Vec<u8>>,
        /// Shown by kubectl.
        warnings: Vec<String>,
    },
    /// Let a Usage's CREATE through with Lien's finalizer added (this JSON Patch,
    /// [`crate::guard`]).
    Guarded(Vec<u8>),
    /// Refuse it.
    Deny(Status),
    /// Ask whether the requester may delete the object, then [`Seal::resolve`].
    Seal(Box<Seal>),
}

impl Mutation {
    pub(crate) fn allow() -> Self {
        Self::Allow {
            patch: None,
            warnings: Vec::new(),
        }
    }

    fn deny(code: u16, reason: &'static str, message: String) -> Self {
        Self::Deny(Status {
            code,
            reason,
            message,
        })
    }

    /// A short label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Allow { patch: Some(_), .. } => "sealed",
            Self::Guarded(_) => "guarded",
            Self::Allow { patch: None, .. } => "allowed",
            Self::Deny(s) if s.code == 403 => "forbidden",
            Self::Deny(s) if s.code == 429 => "throttled",
            Self::Deny(s) if s.code >= 500 => "error",
            Self::Deny(_) => "invalid",
            Self::Seal(_) => "pending",
        }
    }
}

/// A valid deletion request whose requester must still be shown to be allowed to delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seal {
    /// "May the requester delete this object?"
    pub access: AccessRequest,
    /// What the sealed record will say.
    pub request: DeletionRequest,
    /// Whether the object already carries a record (the new one replaces it).
    pub replaces: bool,
}

impl Seal {
    /// Finishes with the access check's answer: the patch (annotation removed, sealed record
    /// added) when allowed; 403 when not; 500 when the check could not answer or no sealer is
    /// configured (fail closed: a request refused can be made again, a record wrongly sealed
    /// deletes what its requester could not).
    pub fn resolve<E: std::fmt::Display>(
        self,
        checked: Result<AccessDecision, E>,
        sealer: Option<&dyn RecordSealer>,
    ) -> Mutation {
        let object = &self.request.object;
        let user = &self.request.user;
        match checked {
            Ok(AccessDecision::Allowed) => {}
            Ok(AccessDecision::Denied { reason }) => {
                let mut message = format!(
                    "cannot have {object} deleted when free: user {user:?} may not delete it ({}); you must be allowed to delete it yourself, since Lien deletes only what its requester could",
                    describe(&self.access)
                );
                if !reason.trim().is_empty() {
                    message.push_str(&format!(" (authorizer: {})", reason.trim()));
                }
                return Mutation::deny(403, "Forbidden", message);
            }
            Err(e) => {
                return Mutation::deny(
                    500,
                    "InternalError",
                    format!(
                        "cannot have {object} deleted when free: cannot check whether user {user:?} may delete it ({e}); refusing until Lien can check, retry shortly"
                    ),
                );
            }
        }
        let Some(sealer) = sealer else {
            return Mutation::deny(
                500,
                "InternalError",
                format!(
                    "cannot have {object} deleted when free: this Lien webhook has no replay key to seal the request with"
                ),
            );
        };
        let sealed = sealer.seal(&self.request);
        let patch = serde_json::json!([
            {"op": "remove", "path": pointer(DELETE_WHEN_FREE_ANNOTATION)},
            // `add` replaces a member that exists (RFC 6902 §4.1): an older record goes.
            {"op": "add", "path": pointer(DELETION_ATTEMPT_ANNOTATION), "value": sealed},
        ]);
        let policy = self
            .request
            .propagation_policy
            .as_deref()
            .unwrap_or("the API server's default");
        let mut warnings = vec![format!(
            "lien: {object} will be deleted when free (requested by {user}, propagationPolicy {policy}); remove annotation {DELETION_ATTEMPT_ANNOTATION} to cancel"
        )];
        if self.replaces {
            warnings.push(format!(
                "lien: this request replaces the deletion already recorded on {object}"
            ));
        }
        Mutation::Allow {
            // Serialising strings cannot fail.
            patch: Some(serde_json::to_vec(&patch).unwrap_or_default()),
            warnings,
        }
    }
}

/// `delete configmaps "settings" in namespace "team-a"`.
fn describe(r: &AccessRequest) -> String {
    let resource = if r.group.is_empty() {
        r.resource.clone()
    } else {
        format!("{}.{}", r.resource, r.group)
    };
    let name = r.name.as_deref().unwrap_or_default();
    match &r.namespace {
        Some(ns) => format!("{} {resource} {name:?} in namespace {ns:?}", r.verb),
        None => format!("{} {resource} {name:?}", r.verb),
    }
}

/// The JSON Pointer (RFC 6901) of an annotation: `~` and `/` escaped as `~0` and `~1`.
pub fn pointer(annotation: &str) -> String {
    format!(
        "/metadata/annotations/{}",
        annotation.replace('~', "~0").replace('/', "~1")
    )
}

#[derive(Deserialize)]
struct UserInfoBody {
    request: UserInfoRequest,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UserInfoRequest {
    #[serde(default)]
    user_info: Option<crate::validate::UsageUserInfo>,
}

/// The requester's whole `userInfo` (with `uid` and `extra`, which the borrowed [`Request`]
/// does not keep): an authorizer may decide on any of it. Only deletion requests pay for this
/// second read of the body, and they are rare.
fn requester(body: &[u8]) -> Result<Requester, String> {
    let b: UserInfoBody =
        serde_json::from_slice(body).map_err(|e| format!("request.userInfo: {e}"))?;
    Ok(b.request.user_info.unwrap_or_default().into())
}

/// Decides a write sent to `/mutate` (see the module docs). `own_user` is Lien's own identity,
/// the only one that may write [`DELETION_ATTEMPT_ANNOTATION`] (and only a refusal's record);
/// `body` is the whole review (for the requester's full `userInfo`).
pub fn decide_mutation(
    req: &Request<'_>,
    body: &[u8],
    own_user: &str,
    now: SystemTime,
) -> Mutation {
    let new = req.new_metadata();
    let old = req.old_metadata();
    let annotation = |m: Option<&crate::review::Metadata<'_>>, key: &str| {
        m.and_then(|m| m.annotations.get(key)).map(str::to_owned)
    };
    let record = annotation(new, DELETION_ATTEMPT_ANNOTATION);
    let record_changed = record != annotation(old, DELETION_ATTEMPT_ANNOTATION);
    if req.subresource().is_some() {
        // kube-apiserver keeps metadata written through most status subresources (their
        // strategies reset only spec), through `namespaces/finalize`, and copies a Binding's
        // annotations onto its Pod (`pods/binding`): whoever may write those but not the object
        // would otherwise write or strip Lien's annotations. Lien itself never writes them
        // there, so nobody may.
        if record_changed {
            return Mutation::deny(
                403,
                "Forbidden",
                format!(
                    "cannot {} annotation {DELETION_ATTEMPT_ANNOTATION} through {}: Lien writes it on the object itself only (user {:?}); to have the object deleted when it is free, run `kubectl lien delete --when-free`, and to cancel, remove the annotation from the object itself",
                    if record.is_some() { "set" } else { "remove" },
                    req.addressed(),
                    req.user_info.username
                ),
            );
        }
        let asked = annotation(new, DELETE_WHEN_FREE_ANNOTATION);
        if asked.is_some() && asked != annotation(old, DELETE_WHEN_FREE_ANNOTATION) {
            return Mutation::deny(
                400,
                "BadRequest",
                format!(
                    "metadata.annotations[{DELETE_WHEN_FREE_ANNOTATION}]: cannot be set through {}; set it on the object itself (`kubectl lien delete --when-free` does)",
                    req.addressed()
                ),
            );
        }
        return Mutation::allow();
    }
    if crate::guard::guards(req) {
        return crate::guard::guard_usage(req, body);
    }
    if req.operation != Operation::Update {
        return Mutation::allow();
    }
    let key = || object_key(req);
    if let Some(value) = annotation(new, DELETE_WHEN_FREE_ANNOTATION) {
        let key = match key() {
            Ok(key) => key,
            Err(e) => return Mutation::deny(400, "BadRequest", e),
        };
        let policy = value.trim();
        if !policy.is_empty() && !PROPAGATION_POLICIES.contains(&policy) {
            return Mutation::deny(
                422,
                "Invalid",
                format!(
                    "metadata.annotations[{DELETE_WHEN_FREE_ANNOTATION}]: {value:?} is not a propagation policy; set it to one of {} or leave it empty for the API server's default (kubectl lien delete --when-free --cascade=background|foreground|orphan does)",
                    PROPAGATION_POLICIES.join(", ")
                ),
            );
        }
        let Some(uid) = annotation_uid(req) else {
            return Mutation::deny(
                400,
                "BadRequest",
                format!("cannot have {key} deleted when free: oldObject.metadata.uid is missing"),
            );
        };
        let user = match requester(body) {
            Ok(user) => user,
            Err(e) => return Mutation::deny(400, "BadRequest", e),
        };
        return Mutation::Seal(Box::new(seal(req, key, uid, policy, user, now)));
    }
    let Some(record) = record.filter(|_| record_changed) else {
        return Mutation::allow();
    };
    let object = || key().map_or_else(|_| req.name.to_string(), |k| k.to_string());
    if req.user_info.username != own_user {
        return Mutation::deny(
            403,
            "Forbidden",
            format!(
                "cannot set annotation {DELETION_ATTEMPT_ANNOTATION} on {}: it is written by Lien only (user {:?} is not {own_user:?}); to have the object deleted when it is free, run `kubectl lien delete --when-free` (or set annotation {DELETE_WHEN_FREE_ANNOTATION}); removing the annotation cancels a pending deletion",
                object(),
                req.user_info.username
            ),
        );
    }
    // Lien's controller writes the records of refusals. A deletion request's record is stored
    // only by the API server applying this endpoint's patch to the requester's own write, so
    // it never arrives in a write's object: one that does was had from a forged review (where
    // the API server cannot authenticate itself, `/mutate` answers anyone) and is being written
    // by whoever can act as Lien. Refused, it is useless.
    if source_of(&record) != Some(RecordSource::Refusal) {
        return Mutation::deny(
            403,
            "Forbidden",
            format!(
                "cannot set annotation {DELETION_ATTEMPT_ANNOTATION} on {}: Lien's own identity ({own_user:?}) writes only the records of refused DELETEs; a deletion request's record is stored only by the API server's write of that request (`kubectl lien delete --when-free`), never written by hand",
                object()
            ),
        );
    }
    Mutation::allow()
}

fn annotation_uid(req: &Request<'_>) -> Option<String> {
    req.old_metadata()
        .and_then(|m| m.uid.as_deref())
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
}

fn seal(
    req: &Request<'_>,
    key: ObjectKey,
    uid: String,
    policy: &str,
    user: Requester,
    now: SystemTime,
) -> Seal {
    let replaces = req
        .old_metadata()
        .and_then(|m| m.annotations.get(DELETION_ATTEMPT_ANNOTATION))
        .is_some();
    let access = AccessRequest {
        verb: "delete".to_owned(),
        group: req.resource.group.to_string(),
        resource: req.resource.resource.to_string(),
        namespace: key.namespace.clone(),
        name: Some(key.name.clone()),
        user: user.clone(),
    };
    Seal {
        access,
        request: DeletionRequest {
            object: key,
            uid,
            propagation_policy: (!policy.is_empty()).then(|| policy.to_owned()),
            user: user.username,
            user_uid: user.uid,
            groups: user.groups,
            extra: user.extra,
            time: now,
        },
        replaces,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::Review;

    #[test]
    fn annotation_keys_are_escaped_as_json_pointers() {
        assert_eq!(
            pointer("lien.dev/deletion-attempt"),
            "/metadata/annotations/lien.dev~1deletion-attempt"
        );
        assert_eq!(pointer("a~b/c"), "/metadata/annotations/a~0b~1c");
    }

    fn update(new: serde_json::Value, old: serde_json::Value, user: &str) -> Vec<u8> {
        serde_json::to_vec(
            &serde_json::json!({"request": {"uid": "u", "operation": "UPDATE",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "x", "namespace": "ns",
            "userInfo": {"username": user, "uid": "42", "groups": ["g"], "extra": {"k": ["v"]}},
            "object": {"metadata": {"uid": "U", "annotations": new}},
            "oldObject": {"metadata": {"uid": "U", "annotations": old}}}}),
        )
        .expect("json")
    }

    #[test]
    fn a_deletion_request_asks_with_the_whole_user_info() {
        let body = update(
            serde_json::json!({DELETE_WHEN_FREE_ANNOTATION: "Foreground"}),
            serde_json::json!({}),
            "alice",
        );
        let req = Review::parse(&body).expect("parses");
        let Mutation::Seal(seal) = decide_mutation(&req, &body, "lien", SystemTime::UNIX_EPOCH)
        else {
            panic!("a seal");
        };
        assert_eq!(seal.access.verb, "delete");
        assert_eq!(seal.access.resource, "configmaps");
        assert_eq!(seal.access.namespace.as_deref(), Some("ns"));
        assert_eq!(seal.access.name.as_deref(), Some("x"));
        assert_eq!(seal.access.user.uid, "42");
        assert_eq!(seal.access.user.extra["k"], ["v"]);
        assert_eq!(seal.request.uid, "U");
        assert_eq!(
            seal.request.propagation_policy.as_deref(),
            Some("Foreground")
        );
    }
}
