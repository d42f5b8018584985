//! Per-kind strategy: defaults on create and validation on every write, for the built-in kinds
//! this server serves, and schema validation for custom resources.

use serde_json::{Value, json};

use super::defaults;
use crate::error::{ApiError, Cause};
use crate::registry::ResourceType;

/// The finalizer kube-apiserver puts on every CRD: its objects are deleted before it goes.
pub const CRD_CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

fn is(rt: &ResourceType, group: &str, plural: &str) -> bool {
    rt.group == group && rt.plural == plural
}

/// Whether a DELETE that removed the object answers with the object itself rather than a
/// `Status`: the registries that set `ReturnDeletedObject: true` in their
/// `genericregistry.Store` (k/k `pkg/registry/core/{pod,podtemplate,service,serviceaccount}/storage`,
/// `pkg/registry/storage/{storageclass,csidriver,csinode,volumeattachment,csistoragecapacity,
/// volumeattributesclass}/storage`, `pkg/registry/resource/resourceclaim/storage`). Custom
/// resources' store (`apiextensions-apiserver/pkg/registry/customresource/etcd.go`) does not.
pub fn returns_deleted_object(rt: &ResourceType) -> bool {
    matches!(
        (rt.group.as_str(), rt.plural.as_str()),
        ("", "pods" | "podtemplates" | "services" | "serviceaccounts")
            | (
                "storage.k8s.io",
                "storageclasses"
                    | "csidrivers"
                    | "csinodes"
                    | "volumeattachments"
                    | "csistoragecapacities"
                    | "volumeattributesclasses"
            )
            | ("resource.k8s.io", "resourceclaims")
    )
}

/// The defaulting functions kube-apiserver runs whenever it decodes an object (create and
/// update alike): `pkg/apis/{core,apps,batch}/v1/defaults.go`.
pub fn apply_defaults(rt: &ResourceType, object: &mut Value) {
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "services") => defaults::service(object),
        ("", "podtemplates") => defaults::pod_template(&mut object["template"]),
        ("", "replicationcontrollers") => defaults::replication_controller(object),
        ("apps", "deployments") => defaults::deployment(object),
        ("apps", "replicasets") => defaults::replica_set(object),
        ("apps", "statefulsets") => defaults::stateful_set(object),
        ("apps", "daemonsets") => defaults::daemon_set(object),
        ("batch", "jobs") => defaults::job(object),
        ("batch", "cronjobs") => defaults::cron_job(object),
        ("", "secrets") => {
            defaults::secret_string_data(object);
            if object["type"].is_null() {
                object["type"] = json!("Opaque");
            }
        }
        _ => {}
    }
}

/// Defaults the real strategies' `PrepareForCreate` and the defaulting functions apply.
pub fn default_on_create(rt: &ResourceType, object: &mut Value) {
    apply_defaults(rt, object);
    if is(rt, "", "namespaces") {
        let name = object["metadata"]["name"].clone();
        object["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
        object["spec"]["finalizers"] = json!(["kubernetes"]);
        object["status"] = json!({"phase": "Active"});
    } else if is(rt, "", "services") {
        object["status"] = json!({"loadBalancer": {}});
    } else if is(rt, "", "persistentvolumeclaims") || is(rt, "", "persistentvolumes") {
        object["status"] = json!({"phase": "Pending"});
    } else if is(rt, "", "pods") {
        defaults::pod(object, &crate::object::name_suffix());
    } else if is(rt, "", "replicationcontrollers") || is(rt, "apps", "replicasets") {
        object["status"] = json!({"replicas": 0});
    } else if is(rt, "apps", "statefulsets") {
        object["status"] = json!({"replicas": 0, "availableReplicas": 0});
    } else if is(rt, "apps", "daemonsets") {
        object["status"] = json!({"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0});
    } else if is(rt, "apps", "deployments") || is(rt, "batch", "cronjobs") {
        object["status"] = json!({});
    } else if is(rt, "batch", "jobs") {
        defaults::job_selector(object);
        object["status"] = json!({});
    } else if is(rt, "apiextensions.k8s.io", "customresourcedefinitions") {
        let mut finalizers = crate::object::finalizers(object);
        if !finalizers.iter().any(|f| f == CRD_CLEANUP_FINALIZER) {
            finalizers.push(CRD_CLEANUP_FINALIZER.to_string());
        }
        object["metadata"]["finalizers"] = json!(finalizers);
        object["status"] = json!({"conditions": [], "acceptedNames": {"plural": "", "kind": ""}, "storedVersions": []});
    } else if rt.group == "admissionregistration.k8s.io" {
        default_webhooks(object);
    } else if rt.is_custom() && rt.has_status() {
        // The status stanza is ignored on create when the status subresource is enabled.
        if let Some(m) = object.as_object_mut() {
            m.remove("status");
        }
    }
}

/// Webhook defaults (`admissionregistration/v1` defaulting): they matter because the dispatcher
/// and `kubectl get -o yaml` both see them.
fn default_webhooks(object: &mut Value) {
    // `get_mut`, not `object["webhooks"]`: indexing would insert `webhooks: null` into the
    // group's other kinds (ValidatingAdmissionPolicies), which strict decoding then refuses.
    let Some(hooks) = object.get_mut("webhooks").and_then(Value::as_array_mut) else {
        return;
    };
    for hook in hooks {
        for (field, value) in [
            ("failurePolicy", json!("Fail")),
            ("matchPolicy", json!("Equivalent")),
            ("namespaceSelector", json!({})),
            ("objectSelector", json!({})),
            ("timeoutSeconds", json!(10)),
        ] {
            if hook[field].is_null() {
                hook[field] = value;
            }
        }
        if let Some(rules) = hook["rules"].as_array_mut() {
            for rule in rules {
                if rule["scope"].is_null() {
                    rule["scope"] = json!("*");
                }
            }
        }
        if let Some(svc) = hook["clientConfig"].get_mut("service")
            && svc["port"].is_null()
        {
            svc["port"] = json!(443);
        }
    }
}

/// Kind-specific validation on create and update (`old` set on update).
pub fn validate(
    rt: &ResourceType,
    version: &str,
    object: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    // kube-apiserver's own rules for built-in kinds (and metadata's for every kind); a body
    // that would not decode is refused here with 400.
    let mut causes = crate::validation::validate(rt, version, object, old)?;
    if is(rt, "", "configmaps") || is(rt, "", "secrets") {
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
    } else if rt.group == "admissionregistration.k8s.io" {
        causes.extend(validate_webhooks(object));
    } else if is(rt, "apiextensions.k8s.io", "customresourcedefinitions") {
        causes.extend(crate::apiserver::kinds::validate_crd(object, old));
    } else if rt.group == crate::authz::RBAC_GROUP {
        causes.extend(crate::authz::validate_rbac(&rt.kind, object, old));
    } else if let Some(schema) = rt.version(version).and_then(|v| v.schema.as_ref()) {
        causes.extend(crate::schema::validate(schema, object, old));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&rt.group, &rt.kind, name, causes))
    }
}

fn validate_webhooks(object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(hooks) = object["webhooks"].as_array() else {
        return causes;
    };
    let mut names = std::collections::HashSet::new();
    for (i, hook) in hooks.iter().enumerate() {
        let name = hook["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("webhooks[{i}].name"),
                "Required value",
            ));
        } else if !names.insert(name) {
            causes.push(Cause::new(
                "FieldValueDuplicate",
                format!("webhooks[{i}].name"),
                format!("Duplicate value: \"{name}\""),
            ));
        } else if name.split('.').count() < 3 {
            causes.push(Cause::new(
                "FieldValueInvalid",
                format!("webhooks[{i}].name"),
                format!("Invalid value: \"{name}\": should be a domain with at least three segments separated by dots"),
            ));
        }
        if !matches!(hook["sideEffects"].as_str(), Some("None" | "NoneOnDryRun")) {
            causes.push(Cause::new(
                "FieldValueNotSupported",
                format!("webhooks[{i}].sideEffects"),
                match hook["sideEffects"].as_str() {
                    Some(v) => format!(
                        "Unsupported value: \"{v}\": supported values: \"None\", \"NoneOnDryRun\""
                    ),
                    None => "Unsupported value: \"\": supported values: \"None\", \"NoneOnDryRun\""
                        .to_string(),
                },
            ));
        }
        let versions = hook["admissionReviewVersions"].as_array();
        if !versions.is_some_and(|v| v.iter().any(|v| v == "v1" || v == "v1beta1")) {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("webhooks[{i}].admissionReviewVersions"),
                "Required value: must specify one of v1, v1beta1",
            ));
        }
        let cc = &hook["clientConfig"];
        let has_url = cc["url"].is_string();
        let has_svc = cc["service"].is_object();
        if has_url == has_svc {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("webhooks[{i}].clientConfig"),
                "Required value: exactly one of url or service is required",
            ));
        }
        if let Some(url) = cc["url"].as_str()
            && !url.starts_with("https://")
        {
            {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    format!("webhooks[{i}].clientConfig.url"),
                    format!("Invalid value: \"{url}\": 'https' is the only allowed URL scheme"),
                ));
            }
        }
        if let Some(t) = hook["timeoutSeconds"].as_i64()
            && !(1..=30).contains(&t)
        {
            {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    format!("webhooks[{i}].timeoutSeconds"),
                    format!(
                        "Invalid value: {t}: the timeout value must be between 1 and 30 seconds"
                    ),
                ));
            }
        }
    }
    causes
}

/// The CRD checks that decide whether it can be served: names, scope, versions, schemas.
pub fn validate_crd(object: &Value, old: Option<&Value>) -> Vec<Cause> {
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
                        c.field = format!(
                            "spec.versions[{i}].schema.openAPIV3Schema{}{}",
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
