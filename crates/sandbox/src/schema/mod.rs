//! Custom-resource schemas: structural pruning, defaulting, OpenAPI validation and CEL rules
//! (`x-kubernetes-validations`), worded as kube-apiserver words them.
//!
//! Data model: a CRD version's `openAPIV3Schema` is used as the JSON the CRD carries
//! (`serde_json::Value`), never converted to a typed schema, so every keyword the CRD wrote is
//! seen as written. Objects are `serde_json::Value`s too. Field errors are [`Cause`]s whose
//! `reason` is apimachinery's `FieldValue*` and whose `message` is `field.Error`'s body
//! (`Required value`, `Invalid value: "x": ...`), ready for `ApiError::invalid`.
//!
//! - [`prune_and_default`]: what the decoder does to a custom resource before validation.
//! - [`validate`]: kube-openapi's schema validation, list-type uniqueness, then CEL rules.
//! - [`validate_crd_schema`]: what the CRD must satisfy for its schema to be accepted.

pub(crate) mod cel;
pub mod field;
mod node;
mod prune;
mod strict;
mod structural;
mod validate;

/// Go's `time.ParseDuration`, shared with the protobuf codec (`metav1.Duration`).
pub(crate) use cel::parse_go_duration;

#[cfg(test)]
mod tests;

use serde_json::Value;

use crate::error::Cause;

pub use strict::strict_decoding_errors;

/// Prunes fields the schema does not declare (unless `x-kubernetes-preserve-unknown-fields`,
/// `x-kubernetes-embedded-resource` rules or `additionalProperties` keep them), then applies
/// `default`s, as kube-apiserver does for custom resources. Returns the JSON paths of pruned
/// fields (`.spec.foo`) so the caller can implement `fieldValidation=Strict|Warn`. The root's
/// `apiVersion`, `kind` and `metadata` are never pruned; unknown fields inside `metadata` are left
/// to the caller.
pub fn prune_and_default(schema: &Value, object: &mut Value) -> Vec<String> {
    let pruned = prune::prune(schema, object);
    prune::default(schema, object);
    pruned
}

/// Validates a whole custom object against its version's `openAPIV3Schema`; `old` is the stored
/// object on update (transition rules and ratcheting use it).
pub fn validate(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<Cause> {
    validate::validate(schema, object, old)
}

/// Checks a CRD version's schema when the CRD is created or updated: structural, and every CEL
/// rule compiles. Causes are under `spec.validation.openAPIV3Schema`.
pub fn validate_crd_schema(schema: &Value) -> Vec<Cause> {
    validate_crd_schema_at(schema, "spec.validation.openAPIV3Schema")
}

/// [`validate_crd_schema`] with the schema's own path, e.g.
/// `spec.versions[0].schema.openAPIV3Schema` for an `apiextensions.k8s.io/v1` CRD.
pub fn validate_crd_schema_at(schema: &Value, path: &str) -> Vec<Cause> {
    structural::check(schema, path)
}
