//! An embedded Kubernetes API server, held to kube-apiserver's documented behaviour.
//!
//! `apiserver` holds the semantics (verbs, write pipeline, watch), `store` the revisioned data,
//! `auth`/`authz` authentication and authorization (AlwaysAllow or RBAC),
//! `controllers` the garbage collector, the namespace, namespace-bootstrap and CRD controllers,
//! `kubelet` the one Node's registration, `admission` the
//! validating webhook dispatcher, `http` the wire protocol kubectl and kube-rs speak, and
//! `sandbox` puts them together behind TLS with a kubeconfig.

// `ApiError` is a whole `Status` (message, reason, details); it is returned on the cold path
// only, so its size is not worth boxing every error for.
#![allow(clippy::result_large_err)]

pub mod admission;
pub mod apiserver;
pub mod auth;
pub mod authz;
pub mod builtins;
pub mod controllers;
pub mod error;
pub mod http;
pub mod kubelet;
pub mod labels;
mod nesting;
pub mod object;
pub mod patch;
pub mod protobuf;
pub mod registry;
pub mod sandbox;
pub mod schema;
pub mod store;
pub mod strategy;
pub mod testing;
pub mod tls;
pub mod validation;

pub use sandbox::{Sandbox, SandboxConfig, SandboxError};
