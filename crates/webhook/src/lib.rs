//! Lien's admission webhook: answers kube-apiserver's `AdmissionReview`s from the in-memory
//! relation index, so that an object in use cannot be deleted.
//!
//! # Data model
//!
//! - [`review`]: the borrowed, metadata-only view of an `AdmissionReview` and the answer.
//! - [`validate`]: pure validators (`review + index → Outcome`), with the records they produce
//!   ([`Denial`], [`BreakGlassUse`]) and the seams the controller fills in ([`KindResolver`],
//!   [`AccessCheck`]).
//! - [`server`]: the axum router and TLS server; the [`LiveCheck`] seam for "no stale allow".
//! - [`tls`]: Lien's own CA and rotating serving certificate.
//! - [`mutate`]: `/mutate`, which seals deletion requests made through the API server
//!   (`kubectl lien delete --when-free`) into replay records.
//! - [`throttle`]: the bound on access checks asked for callers the webhook cannot authenticate.
//! - [`configuration`]: the `ValidatingWebhookConfiguration` and `MutatingWebhookConfiguration`
//!   that send reviews here.
//! - [`wellformed`]: Kubernetes' syntax rules for names, label keys and values, kinds.
//!
//! What the controller provides: the [`SharedIndex`] it keeps up to date, a [`LiveCheck`], a
//! [`KindResolver`], an [`AccessCheck`], and a receiver for [`Record`]s (events, replay). What it gets: a
//! [`Webhook`] to serve, a CA bundle to publish, and the configuration to apply.

pub mod configuration;
pub mod guard;
pub mod mutate;
mod process;
pub mod review;
pub mod rules;
pub mod scan;
pub mod server;
pub mod throttle;
pub mod tls;
pub mod validate;
pub mod wellformed;

pub use configuration::{
    ClientConfig, ConfigurationOptions, mutating_webhook_configuration,
    validating_webhook_configuration,
};
pub use review::{Answer, ReviewError};
pub use rules::{CelCompiler, RuleCompiler, RuleProblem};
pub use server::{
    AccessCheck, AccessCheckError, AccessDecision, AccessRequest, BoxFuture,
    DEFAULT_MAX_CONCURRENCY, DEFAULT_QUEUE_WAIT, LiveCheck, LiveCheckError, MAX_BODY_BYTES,
    NoLiveCheck, RecordSealer, Requester, ReviewAuth, Server, SharedIndex, StaticKinds, Webhook,
    WebhookBuilder,
};
pub use throttle::DEFAULT_UNAUTHENTICATED_CHECKS_PER_SECOND;
pub use tls::{CertManager, ClientCa, IssuedCerts, Rotation, ServingTls, TlsError, TlsSettings};
pub use validate::{
    Authorize, BREAK_GLASS_ANNOTATION, BreakGlassAction, BreakGlassUse, Confirm, Consent, Denial,
    KindResolver, Outcome, Policy, Record, Scope,
};
