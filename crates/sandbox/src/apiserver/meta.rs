//! Object metadata rules every write obeys: names, generated names, system fields, labels,
//! finalizers while deleting — the generic part of kube-apiserver's `rest.BeforeCreate` and
//! `rest.BeforeUpdate`.

use serde_json::{Map, Value, json};

use crate::error::{ApiError, Cause};
use crate::object::{finalizers, is_deleting, name_suffix, now};
use crate::registry::ResourceType;
use crate::strategy::{NameRule, StatusMetadata};

/// `metadata.name` as the kind's strategy checks it ([`NameRule`]): names of namespaces are DNS
/// labels, of services DNS-1035 labels; RBAC objects' names path segments (`system:discovery`);
/// everything else a DNS subdomain. One cause per message, as `ValidateObjectMeta` reports them.
pub fn validate_name(rt: &ResourceType, name: &str) -> Vec<Cause> {
    use crate::validation::names;
    let problems = match crate::strategy::of(rt).name_rule() {
        // `path.IsValidPathSegmentName`, which `ValidateRBACName` applies.
        NameRule::PathSegment => {
            if name == "." || name == ".." {
                vec![format!("may not be '{name}'")]
            } else if name.contains('/') {
                vec!["may not contain '/'".to_string()]
            } else if name.contains('%') {
                vec!["may not contain '%'".to_string()]
            } else {
                Vec::new()
            }
        }
        NameRule::Dns1123Label => names::dns1123_label(name),
        NameRule::Dns1035Label => names::dns1035_label(name),
        NameRule::Dns1123Subdomain => names::dns1123_subdomain(name),
    };
    problems
        .into_iter()
        .map(|problem| {
            Cause::new(
                "FieldValueInvalid",
                "metadata.name",
                format!("Invalid value: \"{name}\": {problem}"),
            )
        })
        .collect()
}

/// Label keys and values, as `metav1validation.ValidateLabels` checks them (worded in
/// `crate::validation::names`).
pub fn validate_labels(object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if !object["metadata"]["labels"].is_object() {
        if !object["metadata"]["labels"].is_null() {
            causes.push(Cause::new(
                "FieldValueInvalid",
                "metadata.labels",
                "Invalid value: must be a map of strings",
            ));
        }
        return causes;
    }
    causes.extend(crate::validation::names::labels(
        &object["metadata"]["labels"],
        &crate::validation::Path::root("metadata").child("labels"),
    ));
    causes
}

/// Fills system metadata on create (`rest.BeforeCreate`): uid, creationTimestamp, generation,
/// the namespace from the URL, a generated name; clears fields a client may not set.
pub fn prepare_create(
    rt: &ResourceType,
    namespace: &str,
    object: &mut Value,
) -> Result<(), ApiError> {
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    let meta = &mut object["metadata"];
    if rt.namespaced {
        match meta["namespace"].as_str() {
            Some(ns) if !ns.is_empty() && ns != namespace => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => meta["namespace"] = json!(namespace),
        }
    } else if let Some(m) = meta.as_object_mut() {
        m.remove("namespace");
    }
    let name = meta["name"].as_str().unwrap_or_default().to_string();
    if name.is_empty() {
        match meta["generateName"].as_str() {
            Some(prefix) if !prefix.is_empty() => {
                // kube-apiserver truncates the prefix so the whole name stays valid.
                let prefix: String = prefix.chars().take(58).collect();
                meta["name"] = json!(format!("{prefix}{}", name_suffix()));
            }
            _ => {
                return Err(ApiError::invalid(
                    &rt.group,
                    &rt.kind,
                    "",
                    vec![Cause::new(
                        "FieldValueRequired",
                        "metadata.name",
                        "Required value: name or generateName is required",
                    )],
                ));
            }
        }
    }
    if meta["resourceVersion"]
        .as_str()
        .is_some_and(|rv| !rv.is_empty())
    {
        return Err(ApiError::internal(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let m = meta
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
    m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    m.insert("creationTimestamp".into(), json!(now()));
    for field in [
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        m.remove(field);
    }
    if crate::strategy::of(rt).tracks_generation() {
        m.insert("generation".into(), json!(1));
    } else {
        m.remove("generation");
    }
    let name = m["name"].as_str().unwrap_or_default().to_string();
    let mut causes: Vec<Cause> = validate_name(rt, &name);
    causes.extend(validate_labels(object));
    if !causes.is_empty() {
        return Err(ApiError::invalid(&rt.group, &rt.kind, &name, causes));
    }
    drop_empty_metadata(object);
    Ok(())
}

/// The parts of an object that are not metadata or status: what `generation` tracks.
fn spec_of(object: &Value) -> Map<String, Value> {
    object
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| {
                    !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind")
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// Carries system fields over from the stored object on update (`rest.BeforeUpdate`) and
/// enforces what an update may not do. `subresource` is `""`, `"status"` (what it keeps is the
/// kind's status strategy's: [`crate::strategy::Strategy::status_metadata`]) or
/// `"ephemeralcontainers"`.
pub fn prepare_update(
    rt: &ResourceType,
    old: &Value,
    new: &mut Value,
    subresource: &str,
) -> Result<(), ApiError> {
    let name = old["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if !new["metadata"].is_object() {
        new["metadata"] = json!({});
    }
    match new["metadata"]["name"].as_str() {
        Some(n) if n == name => {}
        Some(n) if !n.is_empty() => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        _ => new["metadata"]["name"] = json!(name),
    }
    if rt.namespaced {
        let ns = old["metadata"]["namespace"].clone();
        match new["metadata"]["namespace"].as_str() {
            Some(n) if Some(n) != ns.as_str() && !n.is_empty() => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => new["metadata"]["namespace"] = ns,
        }
    }
    if subresource == "ephemeralcontainers" {
        // `EphemeralContainersStrategy`: spec.ephemeralContainers changes and nothing else.
        let ephemeral = new["spec"]["ephemeralContainers"].clone();
        let rv = new["metadata"]["resourceVersion"].clone();
        *new = old.clone();
        if ephemeral.is_null() {
            if let Some(spec) = new["spec"].as_object_mut() {
                spec.remove("ephemeralContainers");
            }
        } else {
            new["spec"]["ephemeralContainers"] = ephemeral;
        }
        new["metadata"]["resourceVersion"] = rv;
        return Ok(());
    }
    if subresource == "status" {
        // The status strategy's `PrepareForUpdate`: the written status on the stored spec, and
        // the written metadata less what the kind's strategy resets — most reset only spec, so
        // labels and annotations written through `pods/status` are stored, as kube-apiserver
        // stores them. Then the system fields below, as `BeforeUpdate` does on any update.
        let written = std::mem::take(new);
        *new = old.clone();
        match written.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(m) = new.as_object_mut() {
                    m.remove("status");
                }
            }
        }
        match crate::strategy::of(rt).status_metadata() {
            StatusMetadata::Reset => {
                new["metadata"]["resourceVersion"] = written["metadata"]["resourceVersion"].clone();
            }
            StatusMetadata::KeptExcept(reset) => {
                let mut metadata = match &written["metadata"] {
                    Value::Object(m) => m.clone(),
                    _ => Map::new(),
                };
                for field in reset {
                    match old["metadata"].get(*field) {
                        Some(v) => {
                            metadata.insert((*field).to_string(), v.clone());
                        }
                        None => {
                            metadata.remove(*field);
                        }
                    }
                }
                // Name and namespace were checked (or filled in) above.
                metadata.insert("name".into(), new["metadata"]["name"].clone());
                if rt.namespaced {
                    metadata.insert("namespace".into(), new["metadata"]["namespace"].clone());
                }
                new["metadata"] = Value::Object(metadata);
            }
        }
    } else if rt.has_status() {
        // Through the main resource, status is read-only when a status subresource exists.
        match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(m) = new.as_object_mut() {
                    m.remove("status");
                }
            }
        }
    }
    for field in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match old["metadata"].get(field) {
            Some(v) => new["metadata"][field] = v.clone(),
            None => {
                if let Some(m) = new["metadata"].as_object_mut() {
                    m.remove(field);
                }
            }
        }
    }
    if crate::strategy::of(rt).tracks_generation() && spec_of(old) != spec_of(new) {
        let g = old["metadata"]["generation"].as_i64().unwrap_or(0);
        new["metadata"]["generation"] = json!(g + 1);
    }
    if is_deleting(old) {
        let old_f = finalizers(old);
        // A set difference, listed sorted (`sets.String.List()`).
        let added: Vec<String> = finalizers(new)
            .into_iter()
            .filter(|f| !old_f.contains(f))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if !added.is_empty() {
            let list = added
                .iter()
                .map(|f| format!("{f:?}"))
                .collect::<Vec<_>>()
                .join(", ");
            return Err(ApiError::invalid(
                &rt.group,
                &rt.kind,
                &name,
                vec![Cause::new(
                    "FieldValueForbidden",
                    "metadata.finalizers",
                    format!(
                        "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{list}}}"
                    ),
                )],
            ));
        }
    }
    let causes = validate_labels(new);
    if !causes.is_empty() {
        return Err(ApiError::invalid(&rt.group, &rt.kind, &name, causes));
    }
    drop_empty_metadata(new);
    Ok(())
}

/// `ObjectMeta`'s maps and lists are `omitempty`: kube-apiserver stores and returns no
/// `labels: {}` after the last label is removed, for built-in kinds (Go types) and custom
/// resources (whose metadata it coerces through `ObjectMeta`) alike.
fn drop_empty_metadata(object: &mut Value) {
    if let Some(meta) = object["metadata"].as_object_mut() {
        for field in ["labels", "annotations", "finalizers", "ownerReferences"] {
            let empty = meta.get(field).is_some_and(|v| {
                v.is_null()
                    || v.as_object().is_some_and(Map::is_empty)
                    || v.as_array().is_some_and(Vec::is_empty)
            });
            if empty {
                meta.remove(field);
            }
        }
    }
}

/// `ValidatePodEphemeralContainersUpdate` (k/k `pkg/apis/core/validation/validation.go`): an
/// ephemeral container needs a name (unique among the pod's containers) and an image, and once
/// added is never removed or changed.
pub fn validate_ephemeral_containers(old: &Value, new: &Value) -> Result<(), ApiError> {
    let path = "spec.ephemeralContainers";
    let mut causes = Vec::new();
    let new_list: Vec<Value> = new["spec"]["ephemeralContainers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut names: std::collections::HashSet<String> = ["containers", "initContainers"]
        .iter()
        .flat_map(|f| new["spec"][*f].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect();
    for (i, c) in new_list.iter().enumerate() {
        match c["name"].as_str().filter(|n| !n.is_empty()) {
            None => causes.push(Cause::new(
                "FieldValueRequired",
                format!("{path}[{i}].name"),
                "Required value",
            )),
            Some(n) if !names.insert(n.to_string()) => causes.push(Cause::new(
                "FieldValueDuplicate",
                format!("{path}[{i}].name"),
                format!("Duplicate value: \"{n}\""),
            )),
            Some(_) => {}
        }
        if c["image"].as_str().is_none_or(str::is_empty) {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("{path}[{i}].image"),
                "Required value",
            ));
        }
    }
    for o in old["spec"]["ephemeralContainers"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = o["name"].as_str().unwrap_or_default();
        match new_list.iter().find(|c| c["name"] == o["name"]) {
            None => causes.push(Cause::new(
                "FieldValueForbidden",
                path,
                format!("Forbidden: existing ephemeral containers \"{name}\" may not be removed\n"),
            )),
            // kube-apiserver appends a Go `cmp.Diff` of the two, which is not reproduced.
            Some(c) if c != o => causes.push(Cause::new(
                "FieldValueForbidden",
                path,
                format!("Forbidden: existing ephemeral containers \"{name}\" may not be changed\n"),
            )),
            Some(_) => {}
        }
    }
    if causes.is_empty() {
        return Ok(());
    }
    let name = old["metadata"]["name"].as_str().unwrap_or_default();
    Err(ApiError::invalid("", "Pod", name, causes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    #[test]
    fn generated_names_and_system_fields() {
        let reg = Registry::with_builtins();
        let rt = reg.get("", "configmaps").expect("cm");
        let mut obj = json!({"metadata": {"generateName": "cfg-", "uid": "forged"}});
        prepare_create(rt, "ns", &mut obj).expect("valid");
        let name = obj["metadata"]["name"].as_str().expect("name");
        assert!(name.starts_with("cfg-") && name.len() == 9, "{name}");
        assert_ne!(obj["metadata"]["uid"], "forged");
        assert_eq!(obj["metadata"]["namespace"], "ns");
        assert!(obj["metadata"].get("generation").is_none());
    }

    #[test]
    fn names_are_validated_per_kind() {
        let reg = Registry::with_builtins();
        let ns = reg.get("", "namespaces").expect("ns");
        assert!(
            validate_name(ns, "a.b").len() == 1,
            "namespace names are labels"
        );
        let cm = reg.get("", "configmaps").expect("cm");
        assert!(validate_name(cm, "a.b").is_empty());
        assert!(validate_name(cm, "A").len() == 1);
        // A subdomain's labels may be longer than 63 characters; only the whole is bounded
        // (kube-apiserver 1.32 took a 238-character ConfigMap name: the differential's
        // `invalid/configmap-long-name`).
        assert!(validate_name(cm, &"a".repeat(238)).is_empty());
        assert_eq!(validate_name(cm, &"a".repeat(254)).len(), 1);
        let svc = reg.get("", "services").expect("svc");
        assert_eq!(validate_name(svc, "1svc").len(), 1, "a DNS-1035 label");
        assert!(validate_name(svc, "svc-1").is_empty());
        let role = reg
            .get("rbac.authorization.k8s.io", "clusterroles")
            .expect("rbac");
        assert!(
            validate_name(role, "system:discovery").is_empty(),
            "path segments"
        );
        assert!(validate_name(role, "a/b").len() == 1);
        assert!(validate_name(role, "..").len() == 1);
        let mut obj = json!({"metadata": {}});
        let err = prepare_create(cm, "ns", &mut obj).expect_err("no name");
        assert_eq!(
            err.message,
            "ConfigMap \"\" is invalid: metadata.name: Required value: name or generateName is required"
        );
    }

    #[test]
    fn no_new_finalizers_while_deleting() {
        let reg = Registry::with_builtins();
        let cm = reg.get("", "configmaps").expect("cm");
        let old = json!({"metadata": {"name": "c", "namespace": "n", "deletionTimestamp": "t", "finalizers": ["a"]}});
        let mut new = json!({"metadata": {"name": "c", "finalizers": ["a", "b"]}});
        let err = prepare_update(cm, &old, &mut new, "").expect_err("forbidden");
        assert!(
            err.message.contains("no new finalizers can be added"),
            "{}",
            err.message
        );
        let mut fewer = json!({"metadata": {"name": "c", "finalizers": []}});
        prepare_update(cm, &old, &mut fewer, "").expect("removing is fine");
        assert_eq!(fewer["metadata"]["deletionTimestamp"], "t");
    }

    #[test]
    fn empty_metadata_maps_and_lists_are_omitted() {
        let reg = Registry::with_builtins();
        let cm = reg.get("", "configmaps").expect("cm");
        let old = json!({"metadata": {"name": "c", "namespace": "n", "labels": {"a": "b"}}});
        let mut new = json!({"metadata": {"name": "c", "labels": {}, "annotations": null,
            "finalizers": [], "ownerReferences": []}});
        prepare_update(cm, &old, &mut new, "").expect("ok");
        assert_eq!(new["metadata"], json!({"name": "c", "namespace": "n"}));
        let mut created =
            json!({"metadata": {"name": "c", "labels": {}, "annotations": {"x": ""}}});
        prepare_create(cm, "n", &mut created).expect("ok");
        assert!(created["metadata"].get("labels").is_none());
        assert_eq!(created["metadata"]["annotations"], json!({"x": ""}));
    }

    #[test]
    fn generation_follows_spec_only() {
        let reg = Registry::with_builtins();
        let d = reg.get("apps", "deployments").expect("deploy");
        let old = json!({"metadata": {"name": "d", "namespace": "n", "generation": 1}, "spec": {"replicas": 1}});
        let mut labels_only =
            json!({"metadata": {"name": "d", "labels": {"a": "b"}}, "spec": {"replicas": 1}});
        prepare_update(d, &old, &mut labels_only, "").expect("ok");
        assert_eq!(labels_only["metadata"]["generation"], 1);
        let mut spec = json!({"metadata": {"name": "d"}, "spec": {"replicas": 2}});
        prepare_update(d, &old, &mut spec, "").expect("ok");
        assert_eq!(spec["metadata"]["generation"], 2);
    }
}
