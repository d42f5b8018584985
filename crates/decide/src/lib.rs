//! Lien's pure decisions: everything the controller (and the kubectl plugin) computes from what
//! it has observed, with no Kubernetes client, no async runtime, no network and no clock read
//! (the caller passes the time). `lien-controller` owns the watches and the one writer and
//! re-exports these modules under its own paths; `kubectl lien` uses them directly, so the
//! plugin links no controller.
//!
//! - [`cache`]: per-kind object metadata (`apply`/`delete`/`reset`), fed by the watches.
//! - [`resolve`]: a Usage or ClusterUsage + the caches → relations, matched objects and problems.
//! - [`selection`]: the same kept current per object event (an object entering or leaving a
//!   selector changes that object's relations only), and the sides an event can change.
//! - [`rules`]: a DependencyRule compiled, objects of the kinds it reads reduced to their keys,
//!   and its status; its relations come from one join per rule, held by the index.
//! - [`desired`]: the in-use label, the Usage finalizer, owner references and status as data.
//! - [`replay`]: refused DELETEs recorded on the objects, sealed, and when to re-issue them.
//! - [`refusals`]: repeated refusals of one DELETE coalesced: when to write again.
//! - [`cascade`]: the decision for one parent of a CascadeRule.
//! - [`program`]: a rule's CEL (DependencyRule keys and `when`, CascadeRule children and
//!   policy), compiled together with `lien_cel`.

pub mod cache;
pub mod cascade;
pub mod desired;
pub mod namespace_content;
pub mod program;
pub mod refusals;
pub mod replay;
pub mod resolve;
pub mod rules;
pub mod selection;
