//! Custom resources' strategy (`apiextensions-apiserver/pkg/registry/customresource/
//! strategy.go`): the CRD's structural schema validates them; the status stanza is the status
//! subresource's.

use serde_json::Value;

use super::types::{FieldLabels, Refusal, StatusMetadata, Strategy};
use crate::error::Cause;
use crate::registry::ResourceType;

pub(super) struct CustomResources;

fn schema_rules(
    rt: &ResourceType,
    version: &str,
    object: &Value,
    old: Option<&Value>,
) -> Vec<Cause> {
    let mut causes = type_meta(rt, object);
    if let Some(schema) = rt.version(version).and_then(|v| v.schema.as_ref()) {
        causes.extend(crate::schema::validate(schema, object, old));
    }
    causes
}

/// `customResourceValidator.ValidateTypeMeta`: a custom resource's body is decoded whatever
/// kind it names (the API version was checked at decoding); another kind than the CRD's is
/// invalid, reported with the object's other errors.
fn type_meta(rt: &ResourceType, object: &Value) -> Vec<Cause> {
    match object["kind"].as_str() {
        Some(kind) if kind != rt.kind => vec![Cause::new(
            "FieldValueInvalid",
            "kind",
            format!("Invalid value: {}: must be {}", Value::from(kind), rt.kind),
        )],
        _ => Vec::new(),
    }
}

impl Strategy for CustomResources {
    fn prepare_for_create(&self, rt: &ResourceType, object: &mut Value) {
        // The status stanza is ignored on create when the status subresource is enabled.
        if rt.has_status()
            && let Some(m) = object.as_object_mut()
        {
            m.remove("status");
        }
    }
    fn validate(&self, rt: &ResourceType, version: &str, object: &Value) -> Vec<Cause> {
        schema_rules(rt, version, object, None)
    }
    fn validate_update(
        &self,
        rt: &ResourceType,
        version: &str,
        object: &Value,
        old: &Value,
    ) -> Vec<Cause> {
        schema_rules(rt, version, object, Some(old))
    }
    fn tracks_generation(&self) -> bool {
        true
    }
    fn field_labels(&self) -> FieldLabels {
        FieldLabels {
            extra: &[],
            refusal: Refusal::Plain,
        }
    }
    /// `customresource.statusStrategy.PrepareForUpdate`: the stored object with the written
    /// status (and managedFields).
    fn status_metadata(&self) -> StatusMetadata {
        StatusMetadata::Reset
    }
}
