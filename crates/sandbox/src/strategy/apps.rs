//! The apps group's strategies (k/k `pkg/registry/apps/<resource>/strategy.go`): each keeps
//! its selector immutable and tracks `metadata.generation`.

use serde_json::{Value, json};

use super::defaults;
use super::types::{BuiltinScale, FieldLabels, Refusal, Strategy};
use crate::error::Cause;
use crate::registry::ResourceType;
use crate::validation::rules;

pub(super) struct Deployments;

impl Strategy for Deployments {
    fn defaults(&self, object: &mut Value) {
        defaults::deployment(object);
    }
    fn prepare_for_create(&self, _rt: &ResourceType, object: &mut Value) {
        object["status"] = json!({});
    }
    fn validate(&self, _rt: &ResourceType, _version: &str, object: &Value) -> Vec<Cause> {
        rules::replicated(object)
    }
    fn validate_update(
        &self,
        rt: &ResourceType,
        v: &str,
        object: &Value,
        old: &Value,
    ) -> Vec<Cause> {
        let mut causes = self.validate(rt, v, object);
        causes.extend(rules::selector_unchanged(object, old));
        causes
    }
    fn tracks_generation(&self) -> bool {
        true
    }
    fn scale(&self) -> Option<BuiltinScale> {
        Some(BuiltinScale::LabelSelector)
    }
}

pub(super) struct ReplicaSets;

impl Strategy for ReplicaSets {
    fn defaults(&self, object: &mut Value) {
        defaults::replica_set(object);
    }
    fn prepare_for_create(&self, _rt: &ResourceType, object: &mut Value) {
        object["status"] = json!({"replicas": 0});
    }
    fn validate(&self, _rt: &ResourceType, _version: &str, object: &Value) -> Vec<Cause> {
        rules::replicated(object)
    }
    fn validate_update(
        &self,
        rt: &ResourceType,
        v: &str,
        object: &Value,
        old: &Value,
    ) -> Vec<Cause> {
        let mut causes = self.validate(rt, v, object);
        causes.extend(rules::selector_unchanged(object, old));
        causes
    }
    fn tracks_generation(&self) -> bool {
        true
    }
    fn field_labels(&self) -> FieldLabels {
        FieldLabels {
            extra: &["status.replicas"],
            refusal: Refusal::ReplicaSet,
        }
    }
    fn scale(&self) -> Option<BuiltinScale> {
        Some(BuiltinScale::LabelSelector)
    }
}

pub(super) struct StatefulSets;

impl Strategy for StatefulSets {
    fn defaults(&self, object: &mut Value) {
        defaults::stateful_set(object);
    }
    fn prepare_for_create(&self, _rt: &ResourceType, object: &mut Value) {
        object["status"] = json!({"replicas": 0, "availableReplicas": 0});
    }
    fn validate(&self, _rt: &ResourceType, _version: &str, object: &Value) -> Vec<Cause> {
        rules::replicated(object)
    }
    fn validate_update(
        &self,
        rt: &ResourceType,
        v: &str,
        object: &Value,
        old: &Value,
    ) -> Vec<Cause> {
        let mut causes = self.validate(rt, v, object);
        causes.extend(rules::stateful_set_update(object, old));
        causes
    }
    fn tracks_generation(&self) -> bool {
        true
    }
    fn scale(&self) -> Option<BuiltinScale> {
        Some(BuiltinScale::LabelSelector)
    }
}

pub(super) struct DaemonSets;

impl Strategy for DaemonSets {
    fn defaults(&self, object: &mut Value) {
        defaults::daemon_set(object);
    }
    fn prepare_for_create(&self, _rt: &ResourceType, object: &mut Value) {
        object["status"] = json!({
            "currentNumberScheduled": 0,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": 0,
            "numberReady": 0,
        });
    }
    fn validate(&self, _rt: &ResourceType, _version: &str, object: &Value) -> Vec<Cause> {
        rules::daemon_set(object)
    }
    fn validate_update(
        &self,
        rt: &ResourceType,
        v: &str,
        object: &Value,
        old: &Value,
    ) -> Vec<Cause> {
        let mut causes = self.validate(rt, v, object);
        causes.extend(rules::selector_unchanged(object, old));
        causes
    }
    fn tracks_generation(&self) -> bool {
        true
    }
}
