//! The slice of the built-in kinds' OpenAPI schema that patching needs.
//!
//! kube-apiserver takes list strategies from Go struct tags: `patchStrategy`/`patchMergeKey` for
//! strategic merge patch and `+listType`/`+listMapKey`/`+structType`/`+mapType` for server-side
//! apply. This server has no Go types, so the handful of fields whose behaviour differs from the
//! default (lists replaced whole, maps merged key by key) are listed here, addressed by the field
//! names from the object root with list items elided (`spec.template.spec.containers.ports`).
//! A custom resource's come from its CRD's structural schema, as kube's field manager takes them.

use serde_json::Value;

/// How a list field merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListKind {
    /// Replaced whole by both strategic merge patch and apply.
    Atomic,
    /// A list of scalars merged as a set (`patchStrategy=merge`, `listType=set`).
    Set,
    /// A list of objects merged by key. Strategic merge patch knows one key (`patchMergeKey`),
    /// apply may know several (`listMapKey`), e.g. ports are `containerPort` for the former and
    /// `containerPort`+`protocol` for the latter.
    Map {
        smp_key: &'static str,
        ssa_keys: &'static [&'static str],
    },
}

const NAME: ListKind = ListKind::Map {
    smp_key: "name",
    ssa_keys: &["name"],
};

const fn by(key: &'static str, keys: &'static [&'static str]) -> ListKind {
    ListKind::Map {
        smp_key: key,
        ssa_keys: keys,
    }
}

/// The kinds (and where their pod spec sits) that embed a pod template.
fn pod_spec_prefix(group: &str, kind: &str) -> Option<&'static str> {
    match (group, kind) {
        ("", "Pod") => Some("spec"),
        ("", "ReplicationController") | ("", "PodTemplate") => Some("template.spec"),
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") | ("batch", "Job") => {
            Some("spec.template.spec")
        }
        ("batch", "CronJob") => Some("spec.jobTemplate.spec.template.spec"),
        _ => None,
    }
}

/// Whether `group` serves only built-in kinds (everything else is a custom resource).
pub(crate) fn is_builtin_group(group: &str) -> bool {
    crate::protobuf::is_builtin_group(group)
}

fn pod_spec_list(rel: &str) -> ListKind {
    let container = |c: &str| matches!(c, "containers" | "initContainers" | "ephemeralContainers");
    match rel.split_once('.') {
        None => match rel {
            "containers" | "initContainers" | "ephemeralContainers" => NAME,
            "volumes" | "imagePullSecrets" | "schedulingGates" | "resourceClaims" => NAME,
            "hostAliases" => by("ip", &["ip"]),
            "topologySpreadConstraints" => by("topologyKey", &["topologyKey", "whenUnsatisfiable"]),
            _ => ListKind::Atomic,
        },
        Some((c, rest)) if container(c) => match rest {
            "ports" => by("containerPort", &["containerPort", "protocol"]),
            "env" => NAME,
            "volumeMounts" => by("mountPath", &["mountPath"]),
            "volumeDevices" => by("devicePath", &["devicePath"]),
            "resources.claims" => NAME,
            _ => ListKind::Atomic,
        },
        _ => ListKind::Atomic,
    }
}

/// The strategy of the list at `path` (field names from the root, list items elided); a custom
/// resource's from its version's structural `schema`, when given.
pub(crate) fn list_kind(
    group: &str,
    kind: &str,
    schema: Option<&Value>,
    path: &[String],
) -> ListKind {
    let joined = path.join(".");
    let joined = joined.as_str();
    // ObjectMeta, at the root and in pod templates.
    let meta_rel = joined
        .strip_suffix("metadata.finalizers")
        .map(|_| ListKind::Set)
        .or_else(|| {
            joined
                .strip_suffix("metadata.ownerReferences")
                .map(|_| by("uid", &["uid"]))
        });
    if let Some(k) = meta_rel {
        return k;
    }
    if !is_builtin_group(group) {
        // Custom resources: `x-kubernetes-list-type` (atomic when unset), as the field manager
        // reads it from the CRD's schema.
        return schema
            .and_then(|s| node_at(s, path))
            .map_or(ListKind::Atomic, custom_list_kind);
    }
    if let Some(prefix) = pod_spec_prefix(group, kind)
        && let Some(rel) = joined
            .strip_prefix(prefix)
            .and_then(|r| r.strip_prefix('.'))
    {
        return pod_spec_list(rel);
    }
    if joined == "status.conditions" {
        return by("type", &["type"]);
    }
    match (group, kind, joined) {
        ("", "Service", "spec.ports") => by("port", &["port", "protocol"]),
        // Not `imagePullSecrets`: a ServiceAccount's has no patch strategy in k8s.io/api (a
        // PodSpec's has), so a patch replaces it (kube-apiserver v1.32: `[p]` patched with
        // `[q]` is `[q]`).
        ("", "ServiceAccount", "secrets") => NAME,
        (
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration",
            "webhooks" | "webhooks.matchConditions",
        ) => NAME,
        _ => ListKind::Atomic,
    }
}

/// Whether the object at `path` is `structType=atomic`/`mapType=atomic`: apply replaces and owns
/// it whole.
pub(crate) fn is_atomic_map(
    group: &str,
    kind: &str,
    schema: Option<&Value>,
    path: &[String],
) -> bool {
    let joined = path.join(".");
    let joined = joined.as_str();
    if joined.ends_with("metadata.ownerReferences") {
        return true;
    }
    if !is_builtin_group(group) {
        // `x-kubernetes-map-type: atomic` in the CRD's schema (granular when unset).
        return schema
            .and_then(|s| node_at(s, path))
            .is_some_and(|node| node["x-kubernetes-map-type"] == "atomic");
    }
    if let Some(prefix) = pod_spec_prefix(group, kind)
        && let Some(rel) = joined
            .strip_prefix(prefix)
            .and_then(|r| r.strip_prefix('.'))
    {
        return rel == "topologySpreadConstraints.labelSelector";
    }
    matches!(
        (group, kind, joined),
        (
            "apps",
            "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet",
            "spec.selector"
        ) | ("batch", "Job", "spec.selector")
            | ("", "Service", "spec.selector")
            | ("", "PersistentVolumeClaim", "spec.selector")
            | ("", "PersistentVolume", "spec.claimRef")
            | ("", "Event", "involvedObject" | "related")
            | ("events.k8s.io", "Event", "regarding" | "related")
            | (
                "admissionregistration.k8s.io",
                "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration",
                "webhooks.namespaceSelector" | "webhooks.objectSelector"
            )
    )
}

/// Go non-pointer structs and fields without `omitempty`: a typed empty object already has them
/// (as `{}` or `null`), so creating an object never "adds" them and an `Update` entry does not
/// own them as a whole (no `.` entry). Read from how Go holds each field
/// (`protobuf::go_always_present`); a custom resource has only its `metadata`.
pub(crate) fn is_always_present(group: &str, kind: &str, path: &[String]) -> bool {
    if !is_builtin_group(group) {
        return matches!(path, [one] if one == "metadata");
    }
    crate::protobuf::go_always_present(group, kind, path).unwrap_or(false)
}

/// The node of a structural schema at `path` (field names, list items elided): a list's items
/// are stepped into before the next name, a map's `additionalProperties` stand for any key.
fn node_at<'s>(schema: &'s Value, path: &[String]) -> Option<&'s Value> {
    let mut node = schema;
    for name in path {
        while node["type"] == "array" {
            node = node.get("items")?;
        }
        node = node["properties"]
            .get(name)
            .or_else(|| node.get("additionalProperties").filter(|a| a.is_object()))?;
    }
    Some(node)
}

/// A custom resource's list by its `x-kubernetes-list-type` and `x-kubernetes-list-map-keys`.
fn custom_list_kind(node: &Value) -> ListKind {
    match node["x-kubernetes-list-type"].as_str() {
        Some("set") => ListKind::Set,
        Some("map") => {
            let keys: Vec<&str> = node["x-kubernetes-list-map-keys"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match interned_keys(&keys) {
                Some(ssa_keys) => ListKind::Map {
                    smp_key: ssa_keys[0],
                    ssa_keys,
                },
                // A CRD's validation requires keys for a map list; without them, atomic.
                None => ListKind::Atomic,
            }
        }
        _ => ListKind::Atomic,
    }
}

/// The keys of a custom resource's map list with the `'static` life of the built-in tables'.
/// Interned, not leaked per request: each distinct key list is kept once, so the memory is
/// bounded by the distinct lists the served CRDs have declared.
fn interned_keys(keys: &[&str]) -> Option<&'static [&'static str]> {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static SEEN: OnceLock<Mutex<HashSet<&'static [&'static str]>>> = OnceLock::new();
    if keys.is_empty() {
        return None;
    }
    let mut seen = SEEN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(found) = seen.iter().find(|k| **k == keys) {
        return Some(found);
    }
    let owned: Vec<&'static str> = keys
        .iter()
        .map(|k| &*Box::leak(k.to_string().into_boxed_str()))
        .collect();
    let interned: &'static [&'static str] = Box::leak(owned.into_boxed_slice());
    seen.insert(interned);
    Some(interned)
}

/// A key field's value when the object omits it (`+default` on a list-map key).
pub(crate) fn key_default(key: &str) -> Option<&'static str> {
    match key {
        "protocol" => Some("TCP"),
        _ => None,
    }
}

/// Kinds whose `status` is a subresource: writes to the main resource reset it, so it is not
/// tracked there (and the status subresource tracks nothing else).
pub(crate) fn has_status_subresource(group: &str, kind: &str) -> bool {
    matches!(
        (group, kind),
        (
            "",
            "Namespace" | "Service" | "PersistentVolume" | "PersistentVolumeClaim" | "Pod"
        ) | ("apps", _)
            | ("batch", _)
            | ("apiextensions.k8s.io", "CustomResourceDefinition")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Vec<String> {
        s.split('.').map(String::from).collect()
    }

    #[test]
    fn table_of_list_kinds() {
        let cases = [
            ("apps", "Deployment", "spec.template.spec.containers", NAME),
            (
                "apps",
                "Deployment",
                "spec.template.spec.containers.ports",
                by("containerPort", &["containerPort", "protocol"]),
            ),
            (
                "apps",
                "Deployment",
                "spec.template.spec.tolerations",
                ListKind::Atomic,
            ),
            (
                "",
                "Service",
                "spec.ports",
                by("port", &["port", "protocol"]),
            ),
            ("", "ConfigMap", "metadata.finalizers", ListKind::Set),
            (
                "example.org",
                "Widget",
                "metadata.finalizers",
                ListKind::Set,
            ),
            ("example.org", "Widget", "spec.items", ListKind::Atomic),
            ("", "Namespace", "spec.finalizers", ListKind::Atomic),
            ("", "Namespace", "status.conditions", by("type", &["type"])),
        ];
        for (g, k, path, want) in cases {
            assert_eq!(list_kind(g, k, None, &p(path)), want, "{g}/{k} {path}");
        }
        assert!(is_atomic_map(
            "apps",
            "Deployment",
            None,
            &p("spec.selector")
        ));
        assert!(!is_atomic_map(
            "apps",
            "Deployment",
            None,
            &p("spec.template")
        ));
        assert!(is_always_present(
            "apps",
            "Deployment",
            &p("spec.template.spec")
        ));
    }

    #[test]
    fn a_custom_resources_lists_and_maps_follow_its_schema() {
        let schema = serde_json::json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "properties": {
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["port", "protocol"],
                      "items": {"type": "object", "properties": {
                          "port": {"type": "integer"},
                          "hosts": {"type": "array", "x-kubernetes-list-type": "set",
                                    "items": {"type": "string"}}}}},
            "tags": {"type": "array", "items": {"type": "string"}},
            "selector": {"type": "object", "x-kubernetes-map-type": "atomic"},
            "limits": {"type": "object", "additionalProperties": {
                "type": "object", "x-kubernetes-map-type": "atomic"}}
        }}}});
        let s = Some(&schema);
        assert_eq!(
            list_kind("example.org", "Widget", s, &p("spec.ports")),
            by("port", &["port", "protocol"])
        );
        assert_eq!(
            list_kind("example.org", "Widget", s, &p("spec.ports.hosts")),
            ListKind::Set
        );
        assert_eq!(
            list_kind("example.org", "Widget", s, &p("spec.tags")),
            ListKind::Atomic
        );
        assert_eq!(
            list_kind("example.org", "Widget", None, &p("spec.ports")),
            ListKind::Atomic
        );
        assert!(is_atomic_map(
            "example.org",
            "Widget",
            s,
            &p("spec.selector")
        ));
        assert!(is_atomic_map(
            "example.org",
            "Widget",
            s,
            &p("spec.limits.cpu")
        ));
        assert!(!is_atomic_map("example.org", "Widget", s, &p("spec")));
        // The same key list is one allocation, however often it is read.
        let again = list_kind("example.org", "Widget", s, &p("spec.ports"));
        match (
            again,
            list_kind("example.org", "Widget", s, &p("spec.ports")),
        ) {
            (ListKind::Map { ssa_keys: a, .. }, ListKind::Map { ssa_keys: b, .. }) => {
                assert!(std::ptr::eq(a, b));
            }
            other => panic!("{other:?}"),
        }
    }
}
