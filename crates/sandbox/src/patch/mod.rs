//! PLACEHOLDER until the patch branch is merged.
use serde_json::Value;
use crate::error::ApiError;
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind { Json, Merge, StrategicMerge, Apply }
impl PatchKind {
    pub fn from_content_type(ct: &str) -> Option<PatchKind> {
        match ct.split(';').next().unwrap_or_default().trim() {
            "application/json-patch+json" => Some(PatchKind::Json),
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/strategic-merge-patch+json" => Some(PatchKind::StrategicMerge),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Some(PatchKind::Apply),
            _ => None,
        }
    }
}
fn parse(body: &[u8]) -> Result<Value, ApiError> { serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string())) }
pub fn json_patch(target: &Value, body: &[u8]) -> Result<Value, ApiError> {
    let p: json_patch::Patch = serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let mut t = target.clone(); json_patch::patch(&mut t, &p).map_err(|e| ApiError::new(422, "Invalid", e.to_string()))?; Ok(t)
}
pub fn merge_patch(target: &Value, body: &[u8]) -> Result<Value, ApiError> { let mut t = target.clone(); json_patch::merge(&mut t, &parse(body)?); Ok(t) }
pub fn strategic_merge_patch(target: &Value, body: &[u8], _g: &str, _k: &str) -> Result<Value, ApiError> { merge_patch(target, body) }
pub fn server_side_apply(live: Option<&Value>, applied: &Value, _m: &str, _f: bool, _g: &str, _k: &str, _now: &str) -> Result<Value, ApiError> {
    let mut t = live.cloned().unwrap_or(serde_json::json!({})); json_patch::merge(&mut t, applied); Ok(t)
}
pub fn parse_apply_body(body: &[u8]) -> Result<Value, ApiError> { serde_yaml_ng::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string())) }
pub fn record_update(_old: Option<&Value>, _new: &mut Value, _m: &str, _v: &str, _s: &str, _now: &str) {}
