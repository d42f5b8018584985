//! Field selectors per kind, as kube-apiserver supports them.
//!
//! Two steps, as in kube-apiserver: the request's field labels are first converted for the API
//! version they were sent to (each group's `AddFieldLabelConversionFunc`, e.g. k/k
//! `pkg/apis/core/v1/conversion.go`), which refuses unknown labels with that function's wording;
//! then objects are matched on the selectable fields of their registry (`GetAttrs` /
//! `ToSelectableFields` in k/k `pkg/registry/**/strategy.go`), read from the stored object.

use serde_json::Value;

use super::events;
use crate::labels::FieldSelector;
use crate::registry::{ResourceKey, ResourceType};
use crate::strategy::{FieldLabels, Refusal};

/// Converts a request's field selector to the labels of the stored object's registry, or the
/// 400 message kube-apiserver gives for an unsupported label.
pub fn convert(rt: &ResourceType, selector: &FieldSelector) -> Result<FieldSelector, String> {
    let mut terms = Vec::with_capacity(selector.terms.len());
    for (label, equal, value) in &selector.terms {
        let converted = if rt.is_events_api() {
            events::FIELD_LABELS
                .iter()
                .find(|(from, _)| from == label)
                .map(|(_, to)| to.to_string())
                .ok_or_else(|| format!("field label not supported: {label}"))?
        } else {
            let FieldLabels { extra, refusal } = crate::strategy::of(rt).field_labels();
            if label == "metadata.name"
                || label == "metadata.namespace"
                || extra.contains(&label.as_str())
            {
                label.clone()
            } else {
                return Err(match refusal {
                    Refusal::Plain => format!("field label not supported: {label}"),
                    Refusal::ForKind => {
                        format!("field label \"{label}\" not supported for \"{}\"", rt.kind)
                    }
                    Refusal::ReplicaSet => {
                        format!("field label not supported for appsv1.ReplicaSet: {label}")
                    }
                    Refusal::Default => format!(
                        "\"{label}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                    ),
                });
            }
        };
        if NOT_SELECTED.contains(&(rt.group.as_str(), rt.plural.as_str(), converted.as_str())) {
            return Err(format!(
                "\"{label}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
            ));
        }
        terms.push((converted, *equal, value.clone()));
    }
    Ok(FieldSelector { terms })
}

/// Labels a version's conversion function accepts that kube-apiserver 1.32 still refuses to
/// select on, with the storage's words: apps/v1's ReplicaSet conversion takes `status.replicas`,
/// but a list with it is a 400 (the differential's
/// `lists/get-apis-apps-v1-namespaces-replicasets-fieldselector-eq-status-replicas-eq-0`).
const NOT_SELECTED: [(&str, &str, &str); 1] = [("apps", "replicasets", "status.replicas")];

/// Whether a stored object of the resource stored at `key` matches a converted selector.
pub fn matches(key: &ResourceKey, selector: &FieldSelector, object: &Value) -> bool {
    selector
        .terms
        .iter()
        .all(|(label, equal, value)| (value_of(key, object, label) == *value) == *equal)
}

/// A dotted field path's value as a selector compares it; empty when absent or null.
fn string_at(object: &Value, path: &str) -> String {
    crate::labels::field_value(object, path).unwrap_or_default()
}

/// Go's `strconv.FormatBool` of a field that defaults to false.
fn bool_at(object: &Value, path: &str) -> String {
    let s = string_at(object, path);
    if s.is_empty() { "false".into() } else { s }
}

/// Go's `strconv.Itoa` of a field that defaults to 0.
fn int_at(object: &Value, path: &str) -> String {
    let s = string_at(object, path);
    if s.is_empty() { "0".into() } else { s }
}

/// The value of a selectable field, as the registry's `GetAttrs` computes it.
fn value_of(key: &ResourceKey, object: &Value, label: &str) -> String {
    match (key.0.as_str(), key.1.as_str(), label) {
        // Events: `source` falls back to the reporting controller (k/k
        // `pkg/registry/core/event/strategy.go`).
        ("", "events", "source") => {
            let source = string_at(object, "source.component");
            if source.is_empty() {
                string_at(object, "reportingComponent")
            } else {
                source
            }
        }
        // Pods: the first of `status.podIPs` (k/k `pkg/registry/core/pod/strategy.go`), which
        // `status.podIP` mirrors in v1.
        ("", "pods", "status.podIP") => {
            let first = string_at(&object["status"]["podIPs"][0], "ip");
            if first.is_empty() {
                string_at(object, "status.podIP")
            } else {
                first
            }
        }
        ("", "pods", "spec.hostNetwork") => bool_at(object, "spec.hostNetwork"),
        ("", "nodes", "spec.unschedulable") => bool_at(object, "spec.unschedulable"),
        ("", "replicationcontrollers", "status.replicas")
        | ("apps", "replicasets", "status.replicas") => int_at(object, "status.replicas"),
        ("batch", "jobs", "status.successful") => int_at(object, "status.successful"),
        _ => string_at(object, label),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use serde_json::json;

    fn sel(s: &str) -> FieldSelector {
        FieldSelector::parse(s).expect("parses")
    }

    #[test]
    fn unsupported_labels_are_refused_in_each_versions_words() {
        let r = Registry::with_builtins();
        let cm = r.get("", "configmaps").expect("cm");
        assert_eq!(
            convert(cm, &sel("foo=1")).err().as_deref(),
            Some("field label \"foo\" not supported for \"ConfigMap\"")
        );
        let ev = r.get("", "events").expect("events");
        assert_eq!(
            convert(ev, &sel("foo=1")).err().as_deref(),
            Some("field label not supported: foo")
        );
        let lease = r.get("coordination.k8s.io", "leases").expect("leases");
        assert_eq!(
            convert(lease, &sel("foo=1")).err().as_deref(),
            Some(
                "\"foo\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
            )
        );
        assert!(convert(lease, &sel("metadata.name=a")).is_ok());
    }

    #[test]
    fn events_api_labels_convert_to_core_ones() {
        let r = Registry::with_builtins();
        let ev = r.get("events.k8s.io", "events").expect("events");
        let c = convert(ev, &sel("regarding.name=x,reportingController!=y")).expect("ok");
        assert_eq!(c.terms[0].0, "involvedObject.name");
        assert_eq!(c.terms[1].0, "reportingComponent");
        // The core spelling is not a label of events.k8s.io/v1.
        assert!(convert(ev, &sel("involvedObject.name=x")).is_err());
    }

    #[test]
    fn values_follow_get_attrs() {
        let ev_key = (String::new(), "events".to_string());
        let ev = json!({"involvedObject": {"kind": "ConfigMap"}, "reportingComponent": "lien"});
        assert!(matches(&ev_key, &sel("source=lien"), &ev));
        assert!(matches(
            &ev_key,
            &sel("involvedObject.kind==ConfigMap,type="),
            &ev
        ));
        let pod_key = (String::new(), "pods".to_string());
        let pod = json!({"spec": {}, "status": {"podIPs": [{"ip": "10.0.0.1"}]}});
        assert!(matches(&pod_key, &sel("spec.hostNetwork=false"), &pod));
        assert!(matches(&pod_key, &sel("status.podIP=10.0.0.1"), &pod));
        let rs_key = ("apps".to_string(), "replicasets".to_string());
        assert!(matches(&rs_key, &sel("status.replicas=0"), &json!({})));
        assert!(!matches(&rs_key, &sel("status.replicas!=0"), &json!({})));
    }
}
