//! Lien's controller.
//!
//! # Data model
//!
//! Watches feed synchronous structures; pure functions turn them into decisions; one
//! leader-elected writer applies the decisions.
//!
//! - [`cache`]: per-kind object metadata from the kind watches (`apply`/`delete`/`reset`).
//! - [`resolve`] (pure): a Usage or ClusterUsage + the caches → relations, matched objects and
//!   problems; [`selection`] (pure): the same kept current per object event, in the size of
//!   what the event changed.
//! - the shared [`lien_core::RelationIndex`], updated per source from the selections' changes,
//!   which the webhook reads.
//! - [`rules`] (pure): a DependencyRule compiled, the objects of the kinds it reads reduced to
//!   their keys in the watch task, and its status; its relations come from one join per rule,
//!   held by the index (`RelationIndex::add_join`), which changes them there once attached.
//! - [`desired`] (pure): the in-use label, the Usage finalizer, owner references and status as
//!   data.
//! - [`replay`]: refused DELETEs recorded on the objects and re-issued when the last relation
//!   goes.
//! - [`writer`], [`leader`]: the I/O edges.
//! - [`webhook_config`]: Lien's own ValidatingWebhookConfiguration, watched and restored; while
//!   it is missing or differs, every Usage reports that its protection is not enforced.
//! - [`audit`]: the Events of refused DELETEs and break-glass overrides (their wording).
//! - [`Controller`]: wires it together (the `controller` module: its event loop, the
//!   [`State`] it owns and how events change it, the watch tasks, denial and break-glass
//!   Events, and the write pass, a plan of writes applied by one loop); [`live`]: what the
//!   webhook asks of the controller.
//!
//! What `lien run` does: build a [`Controller`] with the client, the index it shares with the
//! webhook and a [`ControllerConfig`]; give the webhook [`Controller::denial_sink`] (denials and break-glass records),
//! [`live::ApiLiveCheck`] and [`live::DiscoveryKinds`]; then `run(shutdown)`.

pub mod audit;
pub mod cascade;
mod controller;
pub mod leader;
pub mod live;
mod metrics;
/// The one watch-and-discovery service (a crate of its own, so that the plugin asks it for kinds
/// without linking the controller).
pub use lien_watch as watch;
pub mod webhook_config;
pub mod writer;

// The pure modules live in `lien-decide` (no client, no runtime); re-exported under their
// old paths so that `crate::resolve`, `lien_controller::rules` and the like still name them.
pub use lien_decide::{
    cache, desired, namespace_content, refusals, replay, resolve, rules, selection,
};

pub use audit::{BreakGlass, BreakGlassAction};
pub use controller::{
    CYCLE_BROKEN_REASON, Controller, ControllerConfig, ControllerError, DenialSink,
    NAMESPACE_HELD_CONDITION, NAMESPACE_HELD_REASON, State,
};
pub use leader::{LeaderConfig, LeaderElector};
pub use metrics::Metrics;
pub use replay::{
    DEFAULT_REPLAY_TTL, DELETION_ATTEMPT_ANNOTATION, DeletionAttempt, Denial, ReplayKey,
};
