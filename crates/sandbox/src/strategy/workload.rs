//! The workloads' strategies (apps/v1 Deployments, ReplicaSets, StatefulSets, DaemonSets;
//! batch/v1 Jobs and CronJobs; core ReplicationControllers) have one shape: defaults, a status
//! on create, the kind's rules, its update rules, a tracked generation. Each kind is a
//! [`Workload`] value in its group's file.

use serde_json::Value;

use super::types::{BuiltinScale, FieldLabels, StatusMetadata, Strategy};
use crate::error::Cause;
use crate::registry::ResourceType;

pub(super) struct Workload {
    /// `SetDefaults_<Kind>`.
    pub defaults: fn(&mut Value),
    /// `PrepareForCreate`: the status it starts with (and, for a Job, its generated selector).
    pub prepare_for_create: fn(&mut Value),
    /// `Validate<Kind>`.
    pub validate: fn(&Value) -> Vec<Cause>,
    /// What `ValidateUpdate` checks beyond `validate`, given the stored object.
    pub validate_update: fn(&Value, &Value) -> Vec<Cause>,
    pub field_labels: FieldLabels,
    pub scale: Option<BuiltinScale>,
    /// What its status strategy resets of the metadata written through `status`.
    pub status_metadata: StatusMetadata,
}

/// No update rules beyond the create rules.
pub(super) fn no_update_rules(_object: &Value, _old: &Value) -> Vec<Cause> {
    Vec::new()
}

impl Strategy for Workload {
    fn defaults(&self, object: &mut Value) {
        (self.defaults)(object);
    }
    fn prepare_for_create(&self, _rt: &ResourceType, object: &mut Value) {
        (self.prepare_for_create)(object);
    }
    fn validate(&self, _rt: &ResourceType, _version: &str, object: &Value) -> Vec<Cause> {
        (self.validate)(object)
    }
    fn validate_update(
        &self,
        _rt: &ResourceType,
        _v: &str,
        object: &Value,
        old: &Value,
    ) -> Vec<Cause> {
        let mut causes = (self.validate)(object);
        causes.extend((self.validate_update)(object, old));
        causes
    }
    fn tracks_generation(&self) -> bool {
        true
    }
    fn field_labels(&self) -> FieldLabels {
        self.field_labels
    }
    fn scale(&self) -> Option<BuiltinScale> {
        self.scale
    }
    fn status_metadata(&self) -> StatusMetadata {
        self.status_metadata
    }
}
