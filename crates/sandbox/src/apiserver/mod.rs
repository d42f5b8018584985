//! The API server's semantics, independent of HTTP: every verb of every resource, and the
//! write pipeline kube-apiserver runs for each request:
//!
//! decode → system metadata (`meta`) → the resource's strategy: defaults and validation
//! ([`crate::strategy`]) → mutating and validating admission → optimistic-concurrency commit to
//! the [`Store`](crate::store::Store).
//!
//! In-process controllers (garbage collector, namespace and CRD controllers) call the same
//! methods with their own service-account users, so they go through admission exactly as the
//! real controllers do.
//!
//! Layers, each using only those above it: `server` (state, [`Target`], authorization) and
//! `options` (what a write is asked and answers); `read` and `write` (the verbs); `scale`,
//! `eviction` and `bootstrap` (built on the verbs). This file only names them.

mod api_services;
mod binding;
mod bootstrap;
pub mod component_statuses;
pub mod events;
mod eviction;
pub mod fields;
pub mod meta;
pub mod options;
mod read;
pub mod scale;
pub mod server;
pub mod services;
pub mod tokens;
mod write;

pub use crate::authz::Authorization;
pub use options::{
    DeleteOptions, DeleteOutcome, FieldValidation, Propagation, SentDeleteOptions, SentListOptions,
    SentWriteOptions, WriteOptions, Written, invalid_options, validate_list_options,
    validate_write_options,
};
pub(crate) use read::{LazyItems, LazyList};
pub use read::{ListOptions, WatchEvent, WatchOptions, WatchStream};
pub use server::{ApiServer, Config, Target, system_admin};
