//! The apiextensions group's strategy: CustomResourceDefinitions (k/k `apiextensions-apiserver/
//! pkg/registry/customresourcedefinition/strategy.go`). A written CRD changes what is served.

use serde_json::{Value, json};

use super::types::{AfterWrite, StatusMetadata, Strategy};
use crate::error::Cause;
use crate::registry::ResourceType;

/// The finalizer kube-apiserver puts on every CRD: its objects are deleted before it goes.
pub const CRD_CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

pub(super) struct CustomResourceDefinitions;

impl Strategy for CustomResourceDefinitions {
    fn prepare_for_create(&self, _rt: &ResourceType, object: &mut Value) {
        let mut finalizers = crate::object::finalizers(object);
        if !finalizers.iter().any(|f| f == CRD_CLEANUP_FINALIZER) {
            finalizers.push(CRD_CLEANUP_FINALIZER.to_string());
        }
        object["metadata"]["finalizers"] = json!(finalizers);
        object["status"] = json!({"conditions": [], "acceptedNames": {"plural": "", "kind": ""}, "storedVersions": []});
    }
    fn validate(&self, _rt: &ResourceType, _version: &str, object: &Value) -> Vec<Cause> {
        validate_crd(object, None)
    }
    fn validate_update(
        &self,
        _rt: &ResourceType,
        _v: &str,
        object: &Value,
        old: &Value,
    ) -> Vec<Cause> {
        validate_crd(object, Some(old))
    }
    fn tracks_generation(&self) -> bool {
        true
    }
    fn after_write(&self) -> Option<AfterWrite> {
        Some(AfterWrite::ServeDefinition)
    }
    /// The CRD's `statusStrategy.PrepareForUpdate` resets spec and calls
    /// `ResetObjectMetaForStatus(&newObj.ObjectMeta, &newObj.ObjectMeta)` — the new metadata
    /// reset to itself — so metadata written through `customresourcedefinitions/status` is
    /// stored (v1.32 as written, not as its comment means).
    fn status_metadata(&self) -> StatusMetadata {
        StatusMetadata::KEPT
    }
}

/// The CRD checks that decide whether it can be served: names, scope, versions, schemas.
fn validate_crd(object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &object["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let plural = spec["names"]["plural"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    if group.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "spec.group",
            "Required value",
        ));
    } else if !group.contains('.') {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "spec.group",
            format!("Invalid value: \"{group}\": should be a domain with at least one dot"),
        ));
    }
    if plural.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "spec.names.plural",
            "Required value",
        ));
    }
    if spec["names"]["kind"]
        .as_str()
        .unwrap_or_default()
        .is_empty()
    {
        causes.push(Cause::new(
            "FieldValueRequired",
            "spec.names.kind",
            "Required value",
        ));
    }
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "metadata.name",
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    match spec["scope"].as_str() {
        Some("Namespaced" | "Cluster") => {}
        other => causes.push(Cause::new(
            "FieldValueNotSupported",
            "spec.scope",
            format!(
                "Unsupported value: \"{}\": supported values: \"Cluster\", \"Namespaced\"",
                other.unwrap_or_default()
            ),
        )),
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    if versions.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "spec.versions",
            "Required value: must have exactly one version marked as storage version",
        ));
    }
    let storage = versions.iter().filter(|v| v["storage"] == true).count();
    if !versions.is_empty() && storage != 1 {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "spec.versions",
            "Invalid value: []apiextensions.CustomResourceDefinitionVersion{...}: must have exactly one version marked as storage version",
        ));
    }
    // Where kube reports a per-version field: the v1 → internal conversion hoists a field that
    // every version has alike (always, with one version) to the top of the spec, and validation
    // runs on the internal object (`spec.validation`, `spec.subresources`,
    // `spec.additionalPrinterColumns`).
    let path_of = |i: usize, field: &str, hoisted: &str| {
        let alike = versions.iter().all(|v| v[field] == versions[0][field]);
        if alike {
            hoisted.to_string()
        } else {
            format!("spec.versions[{i}].{field}")
        }
    };
    for (i, v) in versions.iter().enumerate() {
        let columns = path_of(
            i,
            "additionalPrinterColumns",
            "spec.additionalPrinterColumns",
        );
        for (j, column) in v["additionalPrinterColumns"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            // `ValidateCustomResourceColumnDefinition`: a type the printers know.
            let ty = column["type"].as_str().unwrap_or_default();
            if !matches!(ty, "boolean" | "date" | "integer" | "number" | "string") {
                causes.push(crate::schema::field::invalid(
                    &format!("{columns}[{j}].type"),
                    &serde_json::json!(ty),
                    "must be one of boolean,date,integer,number,string",
                ));
            }
        }
        let scale = &v["subresources"]["scale"];
        if scale.is_object() {
            // `ValidateCustomResourceDefinitionSubresources`: both replica paths required.
            let at = path_of(i, "subresources", "spec.subresources");
            for field in ["specReplicasPath", "statusReplicasPath"] {
                if scale[field].as_str().is_none_or(str::is_empty) {
                    causes.push(Cause::new(
                        "FieldValueRequired",
                        format!("{at}.scale.{field}"),
                        "Required value",
                    ));
                }
            }
        }
    }
    for (i, v) in versions.iter().enumerate() {
        match v["schema"]["openAPIV3Schema"].as_object() {
            None => causes.push(Cause::new(
                "FieldValueRequired",
                format!("spec.versions[{i}].schema.openAPIV3Schema"),
                "Required value: schemas are required",
            )),
            Some(_) => {
                for mut c in crate::schema::validate_crd_schema(&v["schema"]["openAPIV3Schema"]) {
                    if !c.field.starts_with("spec.") {
                        let at = path_of(i, "schema", "spec.validation");
                        c.field = format!(
                            "{at}.openAPIV3Schema{}{}",
                            if c.field.is_empty() { "" } else { "." },
                            c.field
                        );
                    }
                    causes.push(c);
                }
            }
        }
    }
    if let Some(old) = old {
        for field in ["group", "scope"] {
            if old["spec"][field] != spec[field] && !old["spec"][field].is_null() {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    format!("spec.{field}"),
                    format!("Invalid value: {}: field is immutable", spec[field]),
                ));
            }
        }
    }
    causes
}
