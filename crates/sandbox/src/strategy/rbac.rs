//! The RBAC group's strategy (k/k `pkg/registry/rbac/<resource>/strategy.go`): the rules
//! `crate::authz` evaluates are validated there too.

use serde_json::Value;

use super::types::{NameRule, Strategy};
use crate::error::Cause;
use crate::registry::ResourceType;

pub(super) struct Rbac;

impl Strategy for Rbac {
    fn validate(&self, rt: &ResourceType, _version: &str, object: &Value) -> Vec<Cause> {
        crate::authz::validate_rbac(&rt.kind, object, None)
    }
    fn validate_update(
        &self,
        rt: &ResourceType,
        _v: &str,
        object: &Value,
        old: &Value,
    ) -> Vec<Cause> {
        crate::authz::validate_rbac(&rt.kind, object, Some(old))
    }
    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }
}
