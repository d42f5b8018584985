//! Admission webhooks, dispatched as kube-apiserver's `MutatingAdmissionWebhook` and
//! `ValidatingAdmissionWebhook` plugins dispatch them.
//!
//! The sandbox exists to test real controllers and webhooks, so this module copies the real
//! server's behaviour rather than improving on it:
//!
//! * [`matches`] decides whether one webhook applies to a write: `namespaceSelector`,
//!   `objectSelector`, `rules` (with `matchPolicy`) and `matchConditions` (CEL), in the order
//!   and with the error precedence of kube-apiserver's `ShouldCallHook`.
//! * [`Dispatcher::validate`] calls every matching webhook in parallel with an
//!   `admission.k8s.io/v1` `AdmissionReview`, verifies the answer, and turns denials and call
//!   failures into the `Status` errors clients see from a real cluster (`admission webhook "x"
//!   denied the request: …`, `failed calling webhook "x": failed to call webhook: …`).
//! * [`Dispatcher::mutate`] calls every matching mutating webhook one after the other, applies
//!   their JSON patches and reinvokes `reinvocationPolicy: IfNeeded` webhooks once when a later
//!   webhook changed the object (`mutating.rs`).
//! * [`is_exempt`] names the resources kube-apiserver never sends to webhooks (the admission
//!   configuration objects themselves), so a broken webhook cannot lock itself in.
//!
//! Objects are `serde_json::Value` as stored; webhook configurations are
//! `admissionregistration.k8s.io/v1` objects. Fields the v1 API defaults (`failurePolicy`,
//! `matchPolicy`, `timeoutSeconds`, selectors, rule `scope`) are defaulted here too, so objects
//! that skipped defaulting behave as the defaulted ones would.

// Failures here are the crate's `ApiError` (a whole `Status`), the error every request path
// returns; boxing it in this module alone would only make callers unbox it.
#![allow(clippy::result_large_err)]

mod cel_conditions;
pub mod credentials;
mod dispatch;
mod matching;
mod mutating;
mod review;
mod trust;

#[cfg(test)]
mod server_tests;

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::auth::UserInfo;

pub use credentials::WebhookKubeconfig;
pub use dispatch::{Dispatcher, DispatcherConfig};
pub use matching::matches;
pub use mutating::Mutation;

/// The admission operation of a write (`admissionv1.Operation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    /// The wire form, as in `rules[].operations` and `request.operation`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `metav1.GroupVersionKind` (every field always serialised, as in an `AdmissionRequest`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
pub struct GroupVersionKind {
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl GroupVersionKind {
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        GroupVersionKind {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
        }
    }
}

/// `metav1.GroupVersionResource` (every field always serialised, as in an `AdmissionRequest`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
pub struct GroupVersionResource {
    pub group: String,
    pub version: String,
    pub resource: String,
}

impl GroupVersionResource {
    pub fn new(group: &str, version: &str, resource: &str) -> Self {
        GroupVersionResource {
            group: group.to_string(),
            version: version.to_string(),
            resource: resource.to_string(),
        }
    }
}

/// Everything kube-apiserver knows about one write when it calls admission.
///
/// As in kube-apiserver, `namespace` of a request on a `Namespace` object itself (or its
/// subresources) is the namespace's own name; rule `scope` matching relies on that.
#[derive(Debug, Clone, PartialEq)]
pub struct Attributes {
    pub operation: Operation,
    pub kind: GroupVersionKind,
    pub resource: GroupVersionResource,
    /// `""` for the main resource, e.g. `status` or `scale`.
    pub sub_resource: String,
    pub name: String,
    /// `""` for cluster-scoped objects.
    pub namespace: String,
    /// The new object (`None` on DELETE; the options object such as `PodExecOptions` on CONNECT).
    pub object: Option<Value>,
    /// The stored object on UPDATE and DELETE.
    pub old_object: Option<Value>,
    pub dry_run: bool,
    /// `CreateOptions` / `UpdateOptions` / `DeleteOptions` (`meta.k8s.io/v1`, with `apiVersion`
    /// and `kind`), or `Value::Null` where the request has none.
    pub options: Value,
    pub user: UserInfo,
    /// Labels of the object's namespace (of the `Namespace` itself when `resource` is
    /// `namespaces`); `None` for cluster-scoped objects, or when the namespace does not exist.
    pub namespace_labels: Option<BTreeMap<String, String>>,
}

/// Whether writes to `group`/`resource` bypass admission webhooks altogether.
///
/// kube-apiserver exempts the admission configuration objects themselves (webhook
/// configurations and admission policies with their bindings), so that a failing webhook can
/// always be removed. The caller checks this before calling [`Dispatcher::validate`] (which also
/// checks it, by kind).
pub fn is_exempt(group: &str, resource: &str) -> bool {
    group == ADMISSION_GROUP && EXEMPT_RESOURCES.contains(&resource)
}

const ADMISSION_GROUP: &str = "admissionregistration.k8s.io";

const EXEMPT_RESOURCES: &[&str] = &[
    "validatingwebhookconfigurations",
    "mutatingwebhookconfigurations",
    "validatingadmissionpolicies",
    "validatingadmissionpolicybindings",
    "mutatingadmissionpolicies",
    "mutatingadmissionpolicybindings",
];

/// kube-apiserver decides exemption by the request's kind; kept in step with
/// [`EXEMPT_RESOURCES`].
fn is_exempt_kind(kind: &GroupVersionKind) -> bool {
    kind.group == ADMISSION_GROUP
        && matches!(
            kind.kind.as_str(),
            "ValidatingWebhookConfiguration"
                | "MutatingWebhookConfiguration"
                | "ValidatingAdmissionPolicy"
                | "ValidatingAdmissionPolicyBinding"
                | "MutatingAdmissionPolicy"
                | "MutatingAdmissionPolicyBinding"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_serialise_upper_case() {
        assert_eq!(
            serde_json::to_value(Operation::Connect).ok(),
            Some(Value::from("CONNECT"))
        );
        assert_eq!(Operation::Delete.as_str(), "DELETE");
    }

    #[test]
    fn admission_configuration_is_exempt() {
        assert!(is_exempt(
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations"
        ));
        assert!(is_exempt(
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations"
        ));
        assert!(!is_exempt("", "configmaps"));
        assert!(!is_exempt("example.org", "validatingwebhookconfigurations"));
        assert!(is_exempt_kind(&GroupVersionKind::new(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration"
        )));
        assert!(!is_exempt_kind(&GroupVersionKind::new(
            "",
            "v1",
            "ValidatingWebhookConfiguration"
        )));
    }
}
