//! The core group's strategies (k/k `pkg/registry/core/<resource>/strategy.go`).

use serde_json::{Value, json};

use super::defaults;
use super::types::{
    BuiltinScale, FieldLabels, NameRule, Refusal, StatusMetadata, Storage, Strategy,
};
use super::workload::{Workload, no_update_rules};
use crate::error::Cause;
use crate::registry::ResourceType;
use crate::validation::rules;

/// Kinds whose conversion function takes no field label of their own and names the kind when
/// refusing one.
pub(super) const NO_EXTRA_LABELS: FieldLabels = FieldLabels {
    extra: &[],
    refusal: Refusal::ForKind,
};

pub(super) struct Pods;

impl Strategy for Pods {
    fn validate_update(
        &self,
        _rt: &ResourceType,
        _version: &str,
        object: &Value,
        old: &Value,
    ) -> Vec<Cause> {
        rules::pod_update(object, old)
    }
    fn defaults(&self, object: &mut Value) {
        defaults::pod(object);
    }
    fn prepare_for_create(&self, _rt: &ResourceType, object: &mut Value) {
        defaults::pod_admitted(object, &crate::object::name_suffix());
    }
    /// `podStatusStrategy`: spec, `deletionTimestamp` and owner references ("old kubelets
    /// corrupt them"); labels and annotations written through `pods/status` are stored.
    fn status_metadata(&self) -> StatusMetadata {
        StatusMetadata::KeptExcept(&["deletionTimestamp", "ownerReferences"])
    }
    fn returns_deleted_object(&self) -> bool {
        true
    }
    fn field_labels(&self) -> FieldLabels {
        FieldLabels {
            extra: &[
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
            ],
            refusal: Refusal::Plain,
        }
    }
}

pub(super) struct PodTemplates;

impl Strategy for PodTemplates {
    fn defaults(&self, object: &mut Value) {
        defaults::pod_template(&mut object["template"]);
    }
    fn returns_deleted_object(&self) -> bool {
        true
    }
}

pub(super) struct Services;

impl Strategy for Services {
    fn defaults(&self, object: &mut Value) {
        defaults::service(object);
    }
    fn prepare_for_create(&self, _rt: &ResourceType, object: &mut Value) {
        object["status"] = json!({"loadBalancer": {}});
    }
    fn validate(&self, _rt: &ResourceType, _version: &str, object: &Value) -> Vec<Cause> {
        rules::service(object)
    }
    fn name_rule(&self) -> NameRule {
        NameRule::Dns1035Label
    }
    fn returns_deleted_object(&self) -> bool {
        true
    }
    fn storage(&self) -> Storage {
        Storage::ClusterIps
    }
    fn field_labels(&self) -> FieldLabels {
        NO_EXTRA_LABELS
    }
}

/// `data`, `binaryData` and `stringData` of a ConfigMap or Secret are maps of strings.
fn string_maps(object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    for field in ["data", "binaryData", "stringData"] {
        if let Some(map) = object.get(field).filter(|v| !v.is_null()) {
            let ok = map
                .as_object()
                .is_some_and(|m| m.values().all(Value::is_string));
            if !ok {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    field,
                    "Invalid value: must be a map of strings",
                ));
            }
        }
    }
    causes
}

pub(super) struct Secrets;

impl Strategy for Secrets {
    fn defaults(&self, object: &mut Value) {
        defaults::secret_string_data(object);
        if object["type"].is_null() {
            object["type"] = json!("Opaque");
        }
    }
    fn validate(&self, _rt: &ResourceType, _version: &str, object: &Value) -> Vec<Cause> {
        let mut causes = rules::secret(object);
        causes.extend(string_maps(object));
        causes
    }
    /// `ValidateSecretUpdate`: the type never changes; an immutable secret keeps its data and
    /// stays immutable (`stringData` is already in `data`).
    fn validate_update(
        &self,
        rt: &ResourceType,
        version: &str,
        object: &Value,
        old: &Value,
    ) -> Vec<Cause> {
        let mut causes = Vec::new();
        if object["type"] != old["type"] {
            causes.push(crate::schema::field::invalid(
                "type",
                &object["type"],
                "field is immutable",
            ));
        }
        causes.extend(rules::immutable_when_set(object, old, &["data"]));
        causes.extend(self.validate(rt, version, object));
        causes
    }
    fn field_labels(&self) -> FieldLabels {
        FieldLabels {
            extra: &["type"],
            refusal: Refusal::Plain,
        }
    }
}

pub(super) struct ConfigMaps;

impl Strategy for ConfigMaps {
    fn validate(&self, _rt: &ResourceType, _version: &str, object: &Value) -> Vec<Cause> {
        let mut causes = rules::config_map(object);
        causes.extend(string_maps(object));
        causes
    }
    /// `ValidateConfigMapUpdate`: an immutable ConfigMap keeps its data and stays immutable.
    fn validate_update(
        &self,
        rt: &ResourceType,
        version: &str,
        object: &Value,
        old: &Value,
    ) -> Vec<Cause> {
        let mut causes = rules::immutable_when_set(object, old, &["data", "binaryData"]);
        causes.extend(self.validate(rt, version, object));
        causes
    }
    fn field_labels(&self) -> FieldLabels {
        NO_EXTRA_LABELS
    }
}

pub(super) struct Namespaces;

impl Strategy for Namespaces {
    /// `SetDefaults_Namespace`: every Namespace decoded — created, updated or finalized —
    /// carries its name as the `kubernetes.io/metadata.name` label, which no write can remove.
    fn defaults(&self, object: &mut Value) {
        let name = object["metadata"]["name"].clone();
        if name.as_str().is_some_and(|n| !n.is_empty()) {
            object["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
        }
    }
    fn prepare_for_create(&self, _rt: &ResourceType, object: &mut Value) {
        let name = object["metadata"]["name"].clone();
        object["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
        object["spec"]["finalizers"] = json!(["kubernetes"]);
        object["status"] = json!({"phase": "Active"});
    }
    fn name_rule(&self) -> NameRule {
        NameRule::Dns1123Label
    }
    fn storage(&self) -> Storage {
        Storage::Namespace
    }
    fn field_labels(&self) -> FieldLabels {
        FieldLabels {
            extra: &["status.phase"],
            refusal: Refusal::Plain,
        }
    }
}

pub(super) struct PersistentVolumeClaims;

/// The `StorageObjectInUseProtection` admission plugin: a new claim or volume carries the
/// finalizer its protection controller removes once nothing uses it
/// (`crate::controllers::protection`).
fn protect(object: &mut Value, finalizer: &str) {
    if crate::object::has_finalizer(object, finalizer) {
        return;
    }
    if !object["metadata"]["finalizers"].is_array() {
        object["metadata"]["finalizers"] = json!([]);
    }
    if let Some(list) = object["metadata"]["finalizers"].as_array_mut() {
        list.push(json!(finalizer));
    }
}

impl Strategy for PersistentVolumeClaims {
    fn defaults(&self, object: &mut Value) {
        defaults::persistent_volume_claim(object);
    }
    fn prepare_for_create(&self, _rt: &ResourceType, object: &mut Value) {
        object["status"] = json!({"phase": "Pending"});
        protect(object, crate::controllers::protection::PVC_FINALIZER);
    }
    fn validate(&self, _rt: &ResourceType, _version: &str, object: &Value) -> Vec<Cause> {
        rules::persistent_volume_claim(object)
    }
    fn validate_update(
        &self,
        rt: &ResourceType,
        version: &str,
        object: &Value,
        old: &Value,
    ) -> Vec<Cause> {
        let mut causes = rules::persistent_volume_claim_update(object, old);
        causes.extend(self.validate(rt, version, object));
        causes
    }
    fn field_labels(&self) -> FieldLabels {
        NO_EXTRA_LABELS
    }
}

pub(super) struct PersistentVolumes;

impl Strategy for PersistentVolumes {
    fn defaults(&self, object: &mut Value) {
        defaults::persistent_volume(object);
    }
    fn prepare_for_create(&self, _rt: &ResourceType, object: &mut Value) {
        object["status"] = json!({"phase": "Pending"});
        protect(object, crate::controllers::protection::PV_FINALIZER);
    }
    fn validate(&self, _rt: &ResourceType, _version: &str, object: &Value) -> Vec<Cause> {
        crate::validation::kinds::persistent_volume(object)
    }
}

pub(super) const REPLICATION_CONTROLLERS: Workload = Workload {
    status_metadata: StatusMetadata::KEPT,
    defaults: defaults::replication_controller,
    prepare_for_create: |object| object["status"] = json!({"replicas": 0}),
    validate: rules::replication_controller,
    validate_update: no_update_rules,
    field_labels: FieldLabels {
        extra: &["status.replicas"],
        refusal: Refusal::Plain,
    },
    scale: Some(BuiltinScale::Map),
};

pub(super) struct Events;

impl Strategy for Events {
    fn validate(&self, _rt: &ResourceType, _version: &str, object: &Value) -> Vec<Cause> {
        crate::validation::kinds::event(object)
    }
    fn field_labels(&self) -> FieldLabels {
        FieldLabels {
            extra: &[
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
            ],
            refusal: Refusal::Plain,
        }
    }
}

pub(super) struct Nodes;

impl Strategy for Nodes {
    fn field_labels(&self) -> FieldLabels {
        FieldLabels {
            extra: &["spec.unschedulable"],
            refusal: Refusal::Plain,
        }
    }
}
