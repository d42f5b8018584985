//! The batch group's strategies (k/k `pkg/registry/batch/{job,cronjob}/strategy.go`).

use serde_json::{Value, json};

use super::defaults;
use super::types::{FieldLabels, Refusal, Strategy};
use crate::error::Cause;
use crate::registry::ResourceType;
use crate::validation::rules;

pub(super) struct Jobs;

impl Strategy for Jobs {
    fn defaults(&self, object: &mut Value) {
        defaults::job(object);
    }
    fn prepare_for_create(&self, _rt: &ResourceType, object: &mut Value) {
        defaults::job_selector(object);
        object["status"] = json!({});
    }
    fn validate(&self, _rt: &ResourceType, _version: &str, object: &Value) -> Vec<Cause> {
        rules::job(object)
    }
    fn tracks_generation(&self) -> bool {
        true
    }
    fn field_labels(&self) -> FieldLabels {
        FieldLabels {
            extra: &["status.successful"],
            refusal: Refusal::ForKind,
        }
    }
}

pub(super) struct CronJobs;

impl Strategy for CronJobs {
    fn defaults(&self, object: &mut Value) {
        defaults::cron_job(object);
    }
    fn prepare_for_create(&self, _rt: &ResourceType, object: &mut Value) {
        object["status"] = json!({});
    }
    fn validate(&self, _rt: &ResourceType, _version: &str, object: &Value) -> Vec<Cause> {
        rules::cron_job(object)
    }
    fn tracks_generation(&self) -> bool {
        true
    }
}
