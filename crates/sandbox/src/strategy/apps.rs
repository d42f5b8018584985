//! The apps group's strategies (k/k `pkg/registry/apps/<resource>/strategy.go`): each keeps
//! its selector immutable (a StatefulSet most of its spec) and tracks `metadata.generation`.

use serde_json::json;

use super::defaults;
use super::types::{BuiltinScale, FieldLabels, Refusal, StatusMetadata};
use super::workload::Workload;
use crate::validation::rules;

pub(super) const DEPLOYMENTS: Workload = Workload {
    defaults: defaults::deployment,
    prepare_for_create: |object| object["status"] = json!({}),
    validate: rules::deployment,
    validate_update: rules::selector_unchanged,
    field_labels: FieldLabels::DEFAULT,
    scale: Some(BuiltinScale::LabelSelector),
    // `deploymentStatusStrategy`: spec and labels; annotations are stored.
    status_metadata: StatusMetadata::KeptExcept(&["labels"]),
};

pub(super) const REPLICA_SETS: Workload = Workload {
    defaults: defaults::replica_set,
    prepare_for_create: |object| object["status"] = json!({"replicas": 0}),
    validate: rules::replicated,
    validate_update: rules::selector_unchanged,
    field_labels: FieldLabels {
        extra: &["status.replicas"],
        refusal: Refusal::ReplicaSet,
    },
    scale: Some(BuiltinScale::LabelSelector),
    status_metadata: StatusMetadata::KEPT,
};

pub(super) const STATEFUL_SETS: Workload = Workload {
    defaults: defaults::stateful_set,
    prepare_for_create: |object| {
        object["status"] = json!({"replicas": 0, "availableReplicas": 0});
    },
    validate: rules::stateful_set,
    validate_update: rules::stateful_set_update,
    field_labels: FieldLabels::DEFAULT,
    scale: Some(BuiltinScale::LabelSelector),
    status_metadata: StatusMetadata::KEPT,
};

pub(super) const DAEMON_SETS: Workload = Workload {
    defaults: defaults::daemon_set,
    prepare_for_create: |object| {
        object["status"] = json!({
            "currentNumberScheduled": 0,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": 0,
            "numberReady": 0,
        });
    },
    validate: rules::daemon_set,
    validate_update: rules::selector_unchanged,
    field_labels: FieldLabels::DEFAULT,
    scale: None,
    status_metadata: StatusMetadata::KEPT,
};
