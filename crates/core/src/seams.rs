//! The questions the admission webhook asks the controller, as traits both implement against:
//! which kinds exist and under which resource name ([`KindResolver`]); when an object carries the
//! in-use label but the index knows no relation, what a live read says ([`LiveCheck`]); and
//! whether the creator of a Usage may update the object it protects ([`AccessCheck`]). They live
//! here, in the crate both depend on, so neither depends on the other.
//!
//! What the webhook tells the controller travels the other way as plain records: a refused
//! DELETE ([`Denial`]: an event and a durable replay record) and a break-glass override
//! ([`BreakGlassUse`]: an audit event).
//!
//! A request to delete an object once it is free (`kubectl lien delete --when-free`) is sealed
//! by the webhook's mutating endpoint into the same record the controller replays; the key is
//! the controller's, so the webhook is handed a [`RecordSealer`].
//!
//! `LiveCheck` and `AccessCheck` return boxed futures (std only: no async runtime is named here).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use crate::decision::Decision;
use crate::key::ObjectKey;
use crate::relation::Source;

/// A DELETE Lien refused (not a dry run). The controller records it on the object for replay
/// and emits an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The object whose deletion was refused.
    pub object: ObjectKey,
    /// Its UID (`oldObject.metadata.uid`), for the replay's precondition.
    pub uid: Option<String>,
    /// `DeleteOptions.propagationPolicy` as the client sent it, to replay the same DELETE.
    pub propagation_policy: Option<String>,
    /// Who asked (`userInfo.username`).
    pub user: String,
    /// Their `userInfo.uid`, `groups` and `extra`: a replay is authorized again, for them, when
    /// it is about to run.
    pub user_uid: String,
    /// `userInfo.groups`.
    pub groups: Vec<String>,
    /// `userInfo.extra`.
    pub extra: BTreeMap<String, Vec<String>>,
    /// When.
    pub time: SystemTime,
    /// Whether a blocking relation asks for replay.
    pub replay: bool,
    /// The refusal on one line, for the Event: who holds the object and what happens next
    /// (the 409 says the same over a few lines, with what to do).
    pub message: String,
}

/// What a break-glass record is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakGlassAction {
    /// The annotation was set (by a member of a break-glass group) on the object.
    Armed,
    /// An object in use was deleted under the annotation.
    Used,
}

/// A break-glass override the webhook let through (never a dry run), to be audited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreakGlassUse {
    /// Armed or used.
    pub action: BreakGlassAction,
    /// The object.
    pub object: ObjectKey,
    /// Its UID, as the admission request carried it.
    pub uid: Option<String>,
    /// Who set the annotation (armed) or deleted the object (used).
    pub user: String,
    /// The annotation's value: why glass was broken.
    pub reason: String,
    /// What was overridden: the denial the object would otherwise have got (empty if nothing).
    pub overridden: String,
    /// The sources (Usages, ClusterUsages, rules) of the overridden relations, so that the audit
    /// reaches each of them even after the object and its relations are gone.
    pub sources: Vec<Source>,
    /// When.
    pub time: SystemTime,
}

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Whether a kind's objects live in a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Namespaced.
    Namespaced,
    /// Cluster-scoped.
    Cluster,
}

/// Which kinds the API server serves. It must answer without I/O (from a discovery snapshot):
/// the webhook's validators are pure.
pub trait KindResolver: Send + Sync {
    /// The scope of `kind` in `apiVersion` (`v1`, `group/version`), or `None` if not served.
    fn scope(&self, api_version: &str, kind: &str) -> Option<Scope>;

    /// The resource (plural) name `kind` is served under in `apiVersion`, e.g. `configmaps` for
    /// `v1`/`ConfigMap`, or `None` if not served. Authorization speaks resources, not kinds.
    fn resource(&self, api_version: &str, kind: &str) -> Option<String>;
}

/// Why a live check could not answer.
#[derive(Debug, thiserror::Error)]
pub enum LiveCheckError {
    /// The read failed (API server unreachable, forbidden…).
    #[error("live read failed: {0}")]
    Read(String),
    /// No answer in time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// No live check is configured.
    #[error("no live check is configured")]
    Unavailable,
}

/// Decides a DELETE of `object` (with `uid`) from live data, as
/// [`decide_delete`](crate::decide_delete) would from an up-to-date index.
pub trait LiveCheck: Send + Sync {
    /// The decision, or why there is none.
    fn check<'a>(
        &'a self,
        object: &'a ObjectKey,
        uid: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Decision, LiveCheckError>>;
}

/// Who made a request: the API server's `userInfo`, as an authorizer reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requester {
    /// `userInfo.username`.
    pub username: String,
    /// `userInfo.uid` (empty when the authenticator gives none).
    pub uid: String,
    /// `userInfo.groups`.
    pub groups: Vec<String>,
    /// `userInfo.extra`: service account tokens carry e.g. the pod and node they were bound to,
    /// which some authorizers (the Node authorizer, webhooks) decide on.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// "May `user` `verb` these objects?": the resource attributes of a `SubjectAccessReview`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessRequest {
    /// Who.
    pub user: Requester,
    /// The verb, e.g. `update`.
    pub verb: String,
    /// API group (`""` for the core group).
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// The namespace; `None` for cluster-scoped resources, and for namespaced ones it means
    /// every namespace.
    pub namespace: Option<String>,
    /// The object's name; `None` means every object of the resource (in the namespace).
    pub name: Option<String>,
}

/// An authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessDecision {
    /// Allowed.
    Allowed,
    /// Not allowed (no authorizer allowed it, or one denied it outright).
    Denied {
        /// The authorizer's reason; often empty (RBAC says nothing when no rule matches).
        reason: String,
    },
}

/// Why an access check could not answer.
#[derive(Debug, thiserror::Error)]
pub enum AccessCheckError {
    /// The review failed (API server unreachable, Lien not allowed to create reviews…).
    #[error("SubjectAccessReview failed: {0}")]
    Review(String),
    /// No answer in time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// Answers [`AccessRequest`]s, e.g. with a `SubjectAccessReview` to the API server.
pub trait AccessCheck: Send + Sync {
    /// The decision, or why there is none.
    fn check<'a>(
        &'a self,
        request: &'a AccessRequest,
    ) -> BoxFuture<'a, Result<AccessDecision, AccessCheckError>>;
}

/// The annotation holding a refused DELETE's sealed replay record, on the object itself. Only
/// Lien writes it: its mutating webhook refuses anyone else's write that adds or changes it.
pub const DELETION_ATTEMPT_ANNOTATION: &str = "lien.dev/deletion-attempt";

/// The annotation a user sets (`kubectl lien delete --when-free`) to have an object deleted
/// once it is free; its value is the propagation policy (`Background`, `Foreground`, `Orphan`,
/// or empty for the API server's default). Lien's mutating webhook never lets it be stored: it
/// replaces it with a sealed [`DELETION_ATTEMPT_ANNOTATION`] record, after checking that the
/// requester may delete the object.
pub const DELETE_WHEN_FREE_ANNOTATION: &str = "lien.dev/delete-when-free";

/// A request, made through the API server, to delete `object` once nothing holds it: what the
/// record sealed for it says. It is always to be replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletionRequest {
    /// The object.
    pub object: ObjectKey,
    /// Its UID (`oldObject.metadata.uid`): the replay's precondition, so a later object of the
    /// same name is never deleted by it.
    pub uid: String,
    /// The propagation policy to delete with (`None`: the API server's default).
    pub propagation_policy: Option<String>,
    /// Who asked, as the API server authenticated them (`userInfo.username`).
    pub user: String,
    /// Their `userInfo.uid`, `groups` and `extra`, sealed with the request so that the replay
    /// is authorized again for the same identity.
    pub user_uid: String,
    /// `userInfo.groups`.
    pub groups: Vec<String>,
    /// `userInfo.extra`.
    pub extra: BTreeMap<String, Vec<String>>,
    /// When.
    pub time: SystemTime,
}

/// Seals a [`DeletionRequest`] into the value of [`DELETION_ATTEMPT_ANNOTATION`], with the key
/// the controller verifies records with (the controller's `ReplayKey`).
pub trait RecordSealer: Send + Sync {
    /// The annotation's value.
    fn seal(&self, request: &DeletionRequest) -> String;
}
