//! PLACEHOLDER until the schema branch is merged.
use serde_json::Value;
use crate::error::Cause;
pub fn prune_and_default(_schema: &Value, _object: &mut Value) -> Vec<String> { vec![] }
pub fn validate(_schema: &Value, _object: &Value, _old: Option<&Value>) -> Vec<Cause> { vec![] }
pub fn validate_crd_schema(_schema: &Value) -> Vec<Cause> { vec![] }
