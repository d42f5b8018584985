//! API-semantics conformance: each test checks one behaviour the Kubernetes documentation
//! describes, through kube-rs against a sandbox of its own. The doc comment of every test names
//! the page it checks.

mod common;

#[path = "conformance_api/admission.rs"]
mod admission;
#[path = "conformance_api/bootstrap.rs"]
mod bootstrap;
#[path = "conformance_api/builtins.rs"]
mod builtins;
#[path = "conformance_api/crd.rs"]
mod crd;
#[path = "conformance_api/events.rs"]
mod events;
#[path = "conformance_api/kinds.rs"]
mod kinds;
#[path = "conformance_api/list.rs"]
mod list;
#[path = "conformance_api/mutating.rs"]
mod mutating;
#[path = "conformance_api/openapi_v2.rs"]
mod openapi_v2;
#[path = "conformance_api/pods.rs"]
mod pods;
#[path = "conformance_api/rbac.rs"]
mod rbac;
#[path = "conformance_api/secrets.rs"]
mod secrets;
#[path = "conformance_api/self_reviews.rs"]
mod self_reviews;
#[path = "conformance_api/status.rs"]
mod status_errors;
#[path = "conformance_api/status_metadata.rs"]
mod status_metadata;
#[path = "conformance_api/support.rs"]
mod support;
#[path = "conformance_api/tokens.rs"]
mod tokens;
#[path = "conformance_api/watch.rs"]
mod watch;
#[path = "conformance_api/wire.rs"]
mod wire;
#[path = "conformance_api/write.rs"]
mod write;
