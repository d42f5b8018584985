//! Lifecycle conformance: garbage collection, finalizers, namespace deletion and CRD deletion,
//! each test written from the Kubernetes documentation of one behaviour (named in its doc
//! comment) and run through kube-rs against a sandbox of its own.

mod common;

#[path = "conformance_lifecycle/crds.rs"]
mod crds;
#[path = "conformance_lifecycle/finalizers.rs"]
mod finalizers;
#[path = "conformance_lifecycle/gc.rs"]
mod gc;
#[path = "conformance_lifecycle/namespaces.rs"]
mod namespaces;
#[path = "conformance_lifecycle/support.rs"]
mod support;
