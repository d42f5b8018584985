//! The batch group's strategies (k/k `pkg/registry/batch/{job,cronjob}/strategy.go`).

use serde_json::json;

use super::defaults;
use super::types::{FieldLabels, Refusal, StatusMetadata};
use super::workload::{Workload, no_update_rules};
use crate::validation::rules;

pub(super) const JOBS: Workload = Workload {
    defaults: defaults::job,
    prepare_for_create: |object| {
        defaults::job_selector(object);
        object["status"] = json!({});
    },
    validate: rules::job,
    validate_update: rules::job_update,
    field_labels: FieldLabels {
        extra: &["status.successful"],
        refusal: Refusal::ForKind,
    },
    scale: None,
    status_metadata: StatusMetadata::KEPT,
};

pub(super) const CRON_JOBS: Workload = Workload {
    defaults: defaults::cron_job,
    prepare_for_create: |object| object["status"] = json!({}),
    validate: rules::cron_job,
    validate_update: no_update_rules,
    field_labels: FieldLabels::DEFAULT,
    scale: None,
    status_metadata: StatusMetadata::KEPT,
};
