//! Conversion between core `v1` `Event` (the stored form) and `events.k8s.io/v1` `Event`.
//!
//! kube-apiserver stores both APIs' events in one place, as core events, and converts on the way
//! in and out (k/k `pkg/apis/events/v1/conversion.go`): the fields below are renamed, the
//! others (`metadata`, `eventTime`, `series`, `action`, `reason`, `related`, `type`,
//! `reportingInstance`) carry over as they are.

use serde_json::{Map, Value};

/// `(core v1 field, events.k8s.io/v1 field)`.
const RENAMED: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("reportingComponent", "reportingController"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

/// Field selector labels of `events.k8s.io/v1` and the core labels they select on
/// (k/k `pkg/apis/events/v1/conversion.go` `AddFieldLabelConversionsForEvent`).
pub const FIELD_LABELS: &[(&str, &str)] = &[
    ("regarding.kind", "involvedObject.kind"),
    ("regarding.namespace", "involvedObject.namespace"),
    ("regarding.name", "involvedObject.name"),
    ("regarding.uid", "involvedObject.uid"),
    ("regarding.apiVersion", "involvedObject.apiVersion"),
    (
        "regarding.resourceVersion",
        "involvedObject.resourceVersion",
    ),
    ("regarding.fieldPath", "involvedObject.fieldPath"),
    ("reportingController", "reportingComponent"),
    ("reason", "reason"),
    ("source", "source"),
    ("type", "type"),
    ("metadata.namespace", "metadata.namespace"),
    ("metadata.name", "metadata.name"),
];

fn rename(object: &Map<String, Value>, core_to_events: bool) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, value) in object {
        let renamed = RENAMED.iter().find_map(|(core, events)| {
            if core_to_events {
                (key == core).then_some(*events)
            } else {
                (key == events).then_some(*core)
            }
        });
        out.insert(renamed.unwrap_or(key).to_string(), value.clone());
    }
    out
}

/// Fields kube-apiserver's JSON encoder writes even when they are zero, per API: Go's
/// `omitempty` never omits a struct, a `metav1.Time`/`MicroTime` zero value is written `null`,
/// and a field without `omitempty` is written as `""` (k8s.io/api `core/v1/types.go` `Event`:
/// `firstTimestamp`, `lastTimestamp`, `eventTime` are non-pointer times, `involvedObject` and
/// `source` structs, `reportingComponent`/`reportingInstance` have no `omitempty`;
/// `events/v1/types.go`: `eventTime` (no `omitempty`), `deprecatedFirstTimestamp`/
/// `deprecatedLastTimestamp`, `regarding` and `deprecatedSource` structs). An event written
/// through `events.k8s.io/v1` with only `eventTime` (kube-rs' `Recorder`, so every Lien event)
/// reads through core v1 with `lastTimestamp: null`: kubectl's `--sort-by=.lastTimestamp` finds
/// the field (null sorts first) and prints the events, where a missing field is its error
/// `couldn't find any field with path "{.lastTimestamp}"`.
/// A field and its zero value as Go writes it.
type Zero = (&'static str, fn() -> Value);

const CORE_ZERO: &[Zero] = &[
    ("involvedObject", || Value::Object(Map::new())),
    ("source", || Value::Object(Map::new())),
    ("firstTimestamp", || Value::Null),
    ("lastTimestamp", || Value::Null),
    ("eventTime", || Value::Null),
    ("reportingComponent", || Value::String(String::new())),
    ("reportingInstance", || Value::String(String::new())),
];
const EVENTS_ZERO: &[Zero] = &[
    ("eventTime", || Value::Null),
    ("regarding", || Value::Object(Map::new())),
    ("deprecatedSource", || Value::Object(Map::new())),
    ("deprecatedFirstTimestamp", || Value::Null),
    ("deprecatedLastTimestamp", || Value::Null),
];

fn with_zero_values(mut map: Map<String, Value>, zero: &[Zero]) -> Value {
    for (field, value) in zero {
        map.entry(*field).or_insert_with(value);
    }
    Value::Object(map)
}

/// A stored core event as core `v1` shows it: with the zero-valued fields Go writes.
pub fn as_core_v1(object: &Value) -> Value {
    match object.as_object() {
        Some(map) => with_zero_values(map.clone(), CORE_ZERO),
        None => object.clone(),
    }
}

/// A stored core event as `events.k8s.io/v1` shows it. Leaves anything that is not a core event
/// (already converted) as it is.
pub fn to_events_v1(object: &Value) -> Value {
    match object.as_object() {
        Some(map) if object["apiVersion"] == "v1" => {
            let mut out = rename(map, true);
            out.insert("apiVersion".into(), "events.k8s.io/v1".into());
            // A zero value the core view wrote (`reportingComponent: ""`, nulls) is the same
            // zero in events.k8s.io/v1, where some are omitted instead.
            for field in ["reportingController", "reportingInstance"] {
                if out.get(field) == Some(&Value::String(String::new())) {
                    out.remove(field);
                }
            }
            if out.get("deprecatedCount") == Some(&Value::from(0)) {
                out.remove("deprecatedCount");
            }
            with_zero_values(out, EVENTS_ZERO)
        }
        _ => object.clone(),
    }
}

/// An `events.k8s.io/v1` event as stored (core `v1`). Core `involvedObject` and `source` are
/// structs, present (`{}`) even when empty, as Go's encoder writes them.
pub fn to_core(object: Value) -> Value {
    let Some(map) = object.as_object() else {
        return object;
    };
    if object["apiVersion"] == "v1" {
        return object;
    }
    let mut out = rename(map, false);
    out.insert("apiVersion".into(), "v1".into());
    for key in ["involvedObject", "source"] {
        out.entry(key).or_insert_with(|| Value::Object(Map::new()));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_are_renamed_both_ways() {
        let events = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "d"},
            "eventTime": "2024-01-01T00:00:00.000000Z",
            "series": {"count": 2, "lastObservedTime": "2024-01-01T00:00:01.000000Z"},
            "reportingController": "lien.dev/webhook", "reportingInstance": "lien-0",
            "action": "Delete", "reason": "DeletionRefused", "type": "Warning",
            "regarding": {"kind": "ConfigMap", "name": "x", "namespace": "d"},
            "related": {"kind": "Usage", "name": "u"},
            "note": "in use",
            "deprecatedSource": {"component": "c"},
            "deprecatedFirstTimestamp": "2024-01-01T00:00:00Z",
            "deprecatedLastTimestamp": "2024-01-01T00:00:01Z",
            "deprecatedCount": 3,
        });
        let core = to_core(events.clone());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "x");
        assert_eq!(core["message"], "in use");
        assert_eq!(core["reportingComponent"], "lien.dev/webhook");
        assert_eq!(core["reportingInstance"], "lien-0");
        assert_eq!(core["source"]["component"], "c");
        assert_eq!(core["firstTimestamp"], "2024-01-01T00:00:00Z");
        assert_eq!(core["lastTimestamp"], "2024-01-01T00:00:01Z");
        assert_eq!(core["count"], 3);
        assert_eq!(core["series"]["count"], 2);
        assert_eq!(core["related"]["name"], "u");
        assert!(core.get("regarding").is_none() && core.get("note").is_none());
        assert_eq!(to_events_v1(&core), events);
        // Converting twice is harmless: each direction recognises its own output.
        assert_eq!(to_events_v1(&to_events_v1(&core)), events);
        assert_eq!(to_core(core.clone()), core);
    }

    #[test]
    fn each_api_shows_the_zero_values_go_writes() {
        let stored = to_core(json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "eventTime": "2024-01-01T00:00:00.000000Z", "reportingController": "lien"}));
        let core = as_core_v1(&stored);
        assert_eq!(core["lastTimestamp"], Value::Null);
        assert!(
            core.as_object()
                .is_some_and(|m| m.contains_key("lastTimestamp"))
        );
        assert_eq!(core["firstTimestamp"], Value::Null);
        assert_eq!(core["reportingComponent"], "lien");
        assert_eq!(core["reportingInstance"], "");
        let events = to_events_v1(&core);
        assert_eq!(events["eventTime"], "2024-01-01T00:00:00.000000Z");
        assert_eq!(events["deprecatedLastTimestamp"], Value::Null);
        assert_eq!(events["deprecatedSource"], json!({}));
        assert!(events.get("reportingInstance").is_none());
    }

    #[test]
    fn core_structs_are_present_when_empty() {
        let core = to_core(json!({"apiVersion": "events.k8s.io/v1", "kind": "Event"}));
        assert_eq!(core["involvedObject"], json!({}));
        assert_eq!(core["source"], json!({}));
    }
}
