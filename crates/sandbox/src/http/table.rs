//! `kubectl get` tables (`meta.k8s.io/v1` `Table`): a CRD's `additionalPrinterColumns`, or a
//! built-in kind's columns as kube-apiserver's table convertors print them (`printers.rs`), with
//! ages rendered as kube-apiserver renders them.

use serde_json::{Value, json};

use crate::registry::{PrinterColumn, ResourceType};

mod descriptions;
mod printers;

fn column(name: &str, type_: &str, format: &str, description: &str) -> PrinterColumn {
    PrinterColumn {
        name: name.into(),
        type_: type_.into(),
        format: format.into(),
        description: description.into(),
        priority: 0,
        json_path: String::new(),
    }
}

const AGE_DESCRIPTION: &str = descriptions::CREATION_TIMESTAMP;

/// A Table's columns, each described as kube-apiserver describes it: a built-in resource's
/// from the generated `descriptions` (kube's documentation of each column), a custom
/// resource's from its CRD (its own `description`, else kube's sentence naming the JSONPath).
fn columns(rt: &ResourceType, version: &str) -> Vec<PrinterColumn> {
    let mut cols = undescribed_columns(rt, version);
    for c in &mut cols {
        if rt.is_custom() {
            c.description = custom_description(&c.description, &c.json_path);
        } else if let Some(d) = descriptions::of(&rt.group, &rt.plural, &c.name) {
            c.description = d.into();
        }
    }
    cols
}

/// A CRD's printer column's description: its own, else kube's sentence naming its JSONPath.
fn custom_description(own: &str, json_path: &str) -> String {
    if own.is_empty() && !json_path.is_empty() {
        format!("Custom resource definition column (in JSONPath format): {json_path}")
    } else {
        own.to_string()
    }
}

/// Columns between Name and Age (or all columns for CRDs, which list their own).
fn undescribed_columns(rt: &ResourceType, version: &str) -> Vec<PrinterColumn> {
    let mut cols = vec![column("Name", "string", "name", descriptions::NAME)];
    if rt.is_custom() {
        let declared = rt
            .version(version)
            .map(|v| v.printer_columns.clone())
            .unwrap_or_default();
        if declared.is_empty() {
            let mut age = column("Age", "date", "", AGE_DESCRIPTION);
            age.json_path = ".metadata.creationTimestamp".into();
            cols.push(age);
        } else {
            cols.extend(declared);
        }
        return cols;
    }
    if rt.plural == "events" && (rt.group.is_empty() || rt.group == "events.k8s.io") {
        return event_columns();
    }
    if let Some(printer) = printers::printer(&rt.group, &rt.plural) {
        return printer
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| PrinterColumn {
                name: c.name.into(),
                type_: c.type_.into(),
                format: if c.name == "Name" { "name" } else { "" }.into(),
                description: printers::description(c).into(),
                priority: c.priority,
                json_path: format!("#printer:{}/{}/{i}", rt.group, rt.plural),
            })
            .collect();
    }
    // rest.DefaultTableConvertor (k8s.io/apiserver/pkg/registry/rest/table.go), for the kinds
    // without a printer: Roles, ClusterRoles, LimitRanges, CRDs, …
    cols.push(column("Created At", "date", "", AGE_DESCRIPTION));
    cols.last_mut().expect("just pushed").json_path = "#created".into();
    cols
}

/// kube-apiserver's event table (k/k `pkg/printers/internalversion/printers.go`,
/// `eventColumnDefinitions` and `printEvent`; the server fills every cell, kubectl shows the
/// priority-1 ones with `-o wide`). Both event APIs print alike: they share one printer there.
fn event_columns() -> Vec<PrinterColumn> {
    [
        ("Last Seen", 0, "#event-last-seen"),
        ("Type", 0, ".type"),
        ("Reason", 0, ".reason"),
        ("Object", 0, "#event-object"),
        ("Subobject", 1, "#event-subobject"),
        ("Source", 1, "#event-source"),
        ("Message", 0, "#event-message"),
        ("First Seen", 1, "#event-first-seen"),
        ("Count", 1, "#event-count"),
        ("Name", 1, ".metadata.name"),
    ]
    .into_iter()
    .map(|(name, priority, path)| {
        let mut c = column(name, "string", "", "");
        c.priority = priority;
        c.json_path = path.into();
        c
    })
    .collect()
}

/// One of an event's computed cells, reading either API's field names (core v1
/// `involvedObject`/`message`/`firstTimestamp`…, events.k8s.io/v1 `regarding`/`note`/
/// `deprecatedFirstTimestamp`…).
fn event_cell(event: &Value, column: &str) -> Option<String> {
    let field = |core: &str, events: &str| {
        let v = &event[core];
        if v.is_null() { &event[events] } else { v }
    };
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let since = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(age_of);
    let first_seen = || {
        since(field("firstTimestamp", "deprecatedFirstTimestamp"))
            .or_else(|| since(&event["eventTime"]))
            .unwrap_or_else(|| "<unknown>".to_string())
    };
    let series = &event["series"];
    let target = field("involvedObject", "regarding");
    Some(match column {
        "#event-first-seen" => first_seen(),
        "#event-last-seen" => {
            if series.is_object() {
                since(&series["lastObservedTime"]).unwrap_or_else(|| "<unknown>".to_string())
            } else {
                since(field("lastTimestamp", "deprecatedLastTimestamp")).unwrap_or_else(first_seen)
            }
        }
        "#event-count" => {
            let count = if series.is_object() {
                series["count"].as_i64().unwrap_or(0)
            } else {
                field("count", "deprecatedCount")
                    .as_i64()
                    .unwrap_or(0)
                    .max(1)
            };
            count.to_string()
        }
        "#event-object" => {
            let kind = text(&target["kind"]).to_lowercase();
            match target["name"].as_str().filter(|n| !n.is_empty()) {
                Some(name) => format!("{kind}/{name}"),
                None => kind,
            }
        }
        "#event-subobject" => text(&target["fieldPath"]),
        "#event-message" => text(field("message", "note")).trim().to_string(),
        "#event-source" => {
            // formatEventSource: the component (else the reporting controller), then the host
            // (else the reporting instance) after a comma.
            let source = field("source", "deprecatedSource");
            let first = |a: &Value, b: &str| {
                let a = text(a);
                if a.is_empty() { text(&event[b]) } else { a }
            };
            let component = first(&source["component"], "reportingController");
            let component = if component.is_empty() {
                text(&event["reportingComponent"])
            } else {
                component
            };
            let instance = first(&source["host"], "reportingInstance");
            if instance.is_empty() {
                component
            } else {
                format!("{component}, {instance}")
            }
        }
        _ => return None,
    })
}

/// Evaluates the simple JSONPath subset printer columns use: `.a.b`, `.a[0]`, `.a[*].b`,
/// `.conditions[?(@.type=="Ready")].status`.
pub fn json_path(object: &Value, path: &str) -> Vec<Value> {
    let mut current = vec![object.clone()];
    let path = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let key = &r[..end];
            current = current.iter().filter_map(|v| v.get(key).cloned()).collect();
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = r.find(']') else { break };
            let inner = &r[..end];
            rest = &r[end + 1..];
            current = if inner == "*" {
                current
                    .iter()
                    .flat_map(|v| v.as_array().cloned().unwrap_or_default())
                    .collect()
            } else if let Ok(i) = inner.parse::<usize>() {
                current.iter().filter_map(|v| v.get(i).cloned()).collect()
            } else if let Some(filter) =
                inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')'))
            {
                let Some((field, want)) = filter.split_once("==") else {
                    break;
                };
                let want = want.trim().trim_matches(|c| c == '"' || c == '\'');
                current
                    .iter()
                    .flat_map(|v| v.as_array().cloned().unwrap_or_default())
                    .filter(|item| {
                        json_path(item, &format!(".{}", field.trim()))
                            .first()
                            .is_some_and(|v| v.as_str() == Some(want) || *v == want)
                    })
                    .collect()
            } else {
                vec![]
            };
        } else {
            break;
        }
    }
    current
}

/// kube-apiserver's `duration.HumanDuration`.
pub fn human_duration(secs: i64) -> String {
    if secs < 0 {
        return "<invalid>".into();
    }
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86400);
    if secs < 120 {
        format!("{secs}s")
    } else if m < 10 {
        if secs % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", secs % 60)
        }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        if h % 24 == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        }
    } else if h < 24 * 365 * 2 {
        format!("{d}d")
    } else if h < 24 * 365 * 8 {
        let y = d / 365;
        if d % 365 == 0 {
            format!("{y}y")
        } else {
            format!("{y}y{}d", d % 365)
        }
    } else {
        format!("{}y", d / 365)
    }
}

fn age_of(ts: &str) -> String {
    match ts.parse::<jiff::Timestamp>() {
        Ok(t) => human_duration(jiff::Timestamp::now().as_second() - t.as_second()),
        Err(_) => "<unknown>".into(),
    }
}

fn cell(object: &Value, col: &PrinterColumn) -> Value {
    let p = col.json_path.as_str();
    if let Some(at) = p.strip_prefix("#printer:") {
        return printed(object, at).unwrap_or(Value::Null);
    }
    if col.format == "name" {
        return object["metadata"]["name"].clone();
    }
    if p == "#created" {
        // DefaultTableConvertor: `CreationTimestamp.UTC().Format(time.RFC3339)`.
        return object["metadata"]["creationTimestamp"].clone();
    }
    if let Some(text) = p
        .starts_with("#event-")
        .then(|| event_cell(object, p))
        .flatten()
    {
        return json!(text);
    }
    let values = json_path(object, p);
    let Some(first) = values.first() else {
        return Value::Null;
    };
    match col.type_.as_str() {
        "date" => first.as_str().map_or(Value::Null, |s| json!(age_of(s))),
        "integer" => first.as_i64().map_or(first.clone(), |i| json!(i)),
        "number" => first.as_f64().map_or(first.clone(), |f| json!(f)),
        "boolean" => first.as_bool().map_or(first.clone(), |b| json!(b)),
        _ => match first {
            Value::String(s) => json!(s),
            _ if values.len() > 1 => json!(
                values
                    .iter()
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            other => json!(other.to_string()),
        },
    }
}

pub fn objects_to_table(
    rt: &ResourceType,
    version: &str,
    objects: &[Value],
    resource_version: &str,
    include: Option<&str>,
) -> Value {
    let (cols, defs) = column_definitions(rt, version);
    let rows: Vec<Value> = objects.iter().map(|o| row(&cols, o, include)).collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": defs,
        "rows": rows,
    })
}

/// A resource's printer columns and their `columnDefinitions` in a Table.
pub(crate) fn column_definitions(
    rt: &ResourceType,
    version: &str,
) -> (Vec<PrinterColumn>, Vec<Value>) {
    let cols = columns(rt, version);
    let defs = cols
        .iter()
        .map(|c| json!({"name": c.name, "type": c.type_, "format": c.format, "description": c.description, "priority": c.priority}))
        .collect();
    (cols, defs)
}

/// One object's Table row; `include` is `?includeObject=` (`Metadata` unless said).
pub(crate) fn row(cols: &[PrinterColumn], o: &Value, include: Option<&str>) -> Value {
    let cells: Vec<Value> = cols.iter().map(|c| cell(o, c)).collect();
    let object = match include.unwrap_or("Metadata") {
        "None" => Value::Null,
        "Object" => o.clone(),
        _ => {
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]})
        }
    };
    json!({"cells": cells, "object": object})
}

pub fn list_to_table(
    rt: &ResourceType,
    version: &str,
    list: &Value,
    include: Option<&str>,
) -> Value {
    let items = list["items"].as_array().cloned().unwrap_or_default();
    let mut table = objects_to_table(
        rt,
        version,
        &items,
        list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default(),
        include,
    );
    if let Some(c) = list["metadata"].get("continue") {
        table["metadata"]["continue"] = c.clone();
    }
    if list["metadata"].get("resourceVersion").is_none()
        && let Some(m) = table["metadata"].as_object_mut()
    {
        // A list of what is not stored (ComponentStatus) names no revision; nor does its Table.
        m.shift_remove("resourceVersion");
    }
    table
}

/// A built-in printer's cell: `at` is `group/resource/column`.
fn printed(object: &Value, at: &str) -> Option<Value> {
    let (rest, index) = at.rsplit_once('/')?;
    let (group, resource) = rest.split_once('/')?;
    let column = printers::printer(group, resource)?
        .columns
        .get(index.parse::<usize>().ok()?)?;
    Some((column.cell)(object))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_paths_of_printer_columns() {
        let o = json!({"spec": {"size": 3, "items": [{"n": "a"}, {"n": "b"}]}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(json_path(&o, ".spec.size"), [json!(3)]);
        assert_eq!(json_path(&o, ".spec.items[1].n"), [json!("b")]);
        assert_eq!(json_path(&o, ".spec.items[*].n"), [json!("a"), json!("b")]);
        assert_eq!(
            json_path(&o, ".status.conditions[?(@.type==\"Ready\")].status"),
            [json!("True")]
        );
        assert!(json_path(&o, ".spec.missing").is_empty());
    }

    /// Every column of a built-in Table is described as kube-apiserver v1.32.13 describes it
    /// (the generated `descriptions`), whatever printer makes it; a custom resource's column
    /// without a description of its own gets kube's sentence naming its JSONPath.
    #[test]
    fn columns_are_described_as_kube_describes_them() {
        let registry = crate::registry::Registry::with_builtins();
        for (group, plural) in [
            ("", "pods"),
            ("apps", "deployments"),
            ("", "events"),
            ("rbac.authorization.k8s.io", "roles"),
        ] {
            let rt = registry.get(group, plural).expect("built in");
            let cols = columns(rt, rt.storage_version());
            assert!(!cols.is_empty());
            for c in &cols {
                assert_eq!(
                    Some(c.description.as_str()),
                    descriptions::of(group, plural, &c.name),
                    "{group}/{plural} {}",
                    c.name
                );
            }
        }
        assert!(
            descriptions::NAME.starts_with("Name must be unique within a namespace. Is required")
        );
        assert_eq!(
            custom_description("", ".spec.size"),
            "Custom resource definition column (in JSONPath format): .spec.size"
        );
        assert_eq!(
            custom_description("its colour", ".spec.color"),
            "its colour"
        );
    }

    /// Every built-in Table has kube-apiserver v1.32.13's columns in kube's order (the
    /// generated `descriptions` list them as kube answered).
    #[test]
    fn built_in_tables_have_kubes_columns_in_kubes_order() {
        let registry = crate::registry::Registry::with_builtins();
        let mut wrong = Vec::new();
        for rt in registry.all().filter(|r| !r.is_custom()) {
            let kube: Vec<&str> = descriptions::DESCRIPTIONS
                .iter()
                .filter(|(g, r, _, _)| *g == rt.group && *r == rt.plural)
                .map(|(_, _, c, _)| *c)
                .collect();
            if kube.is_empty() {
                continue; // not listed by kube (a review, a subresource-only kind)
            }
            let ours: Vec<String> = columns(rt, rt.storage_version())
                .into_iter()
                .map(|c| c.name)
                .collect();
            if ours != kube {
                wrong.push(format!(
                    "{}/{}: {ours:?} where kube has {kube:?}",
                    rt.group, rt.plural
                ));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(150), "2m30s");
        assert_eq!(human_duration(3600), "60m");
        assert_eq!(human_duration(4 * 3600 + 60), "4h1m");
        assert_eq!(human_duration(3 * 86400 + 3600), "3d1h");
    }
}
