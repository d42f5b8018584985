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
    match rt.version(version).and_then(|v| v.schema.as_ref()) {
        Some(schema) => crate::schema::validate(schema, object, old),
        None => Vec::new(),
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
