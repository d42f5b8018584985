//! An embedded Kubernetes API server, held to kube-apiserver's documented behaviour.

pub mod admission;
pub mod auth;
pub mod error;
pub mod labels;
