//! Validation of a custom object against its `openAPIV3Schema`, in the order kube-apiserver runs
//! it: the kube-openapi schema validator (type, string, format, number, array, enum, object
//! keywords per node), then `x-kubernetes-list-type` uniqueness, then CEL rules.
//!
//! Paths: kube-openapi names a property `spec.foo`, an item `spec.list[0]` and an
//! `additionalProperties` entry `spec.map.key`; the list-type and CEL validators use
//! `field.Path`, which writes the latter `spec.map[key]`. An empty path is the root, which
//! kube-apiserver prints as `<nil>`.
//!
//! Ratcheting (on by default since Kubernetes 1.30): on update, a value deep-equal to its
//! correlated old value is not re-validated, except by transition rules (`oldSelf`). Values
//! correlate through properties, `additionalProperties` keys and `listType: map` keys.

use serde_json::{Map, Value, json};

use super::cel::{RuleTarget, evaluate_rules};
use super::field;
use super::node::Node;
use crate::error::Cause;

/// Validates `object` (and, on update, against `old`) and returns every failure.
pub fn validate(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let root = Node(schema);
    let mut errs = Vec::new();
    openapi(root, object, old, "", &mut errs);
    embedded_resources(root, object, "", false, &mut errs);
    list_types(root, object, "", &mut errs);
    if has_rules(root) {
        // Type, required, enum and size failures mean the object is not what the rules were
        // written against (apiextensions-apiserver's `hasBlockingErr`).
        let blocking = errs.iter().any(|c| {
            [
                field::TYPE_INVALID,
                field::NOT_SUPPORTED,
                field::REQUIRED,
                field::TOO_LONG,
                field::TOO_MANY,
            ]
            .contains(&c.reason.as_str())
        });
        if blocking {
            errs.push(field::invalid(
                field::NIL_PATH,
                &Value::Null,
                "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            ));
        } else {
            rules(root, object, old, "", true, &mut errs);
        }
    }
    errs
}

fn shown(path: &str) -> &str {
    if path.is_empty() {
        field::NIL_PATH
    } else {
        path
    }
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::String(_) => "string",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The old value correlated with `map[key]`.
fn old_child<'a>(old: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    old.and_then(|o| o.as_object()).and_then(|m| m.get(key))
}

/// For `listType: map`, the old item with the same key values as `item`.
fn old_item<'a>(node: Node<'_>, old: Option<&'a Value>, item: &Value) -> Option<&'a Value> {
    if node.list_type() != "map" {
        return None;
    }
    let keys = node.list_map_keys();
    let olds = old?.as_array()?;
    olds.iter()
        .find(|o| keys.iter().all(|k| o.get(*k) == item.get(*k)))
}

fn openapi(node: Node<'_>, value: &Value, old: Option<&Value>, path: &str, errs: &mut Vec<Cause>) {
    if old == Some(value) {
        return; // ratcheting: unchanged values keep whatever they had
    }
    let name = path;
    let at = shown(path);
    if value.is_null() {
        let t = node.type_name();
        if !t.is_empty() && !node.nullable() {
            errs.push(field::type_invalid(
                at,
                &json!("null"),
                &format!("{name} in body must be of type {t}: \"null\""),
            ));
        }
        if let Some(Value::Array(allowed)) = node.get("enum") {
            errs.push(field::not_supported(at, value, &enum_strings(allowed)));
        }
        return;
    }
    check_type(node, value, name, at, errs);
    match value {
        Value::String(s) => check_string(node, s, value, name, at, errs),
        Value::Number(n) => check_number(node, n, value, name, at, errs),
        _ => {}
    }
    if let Value::Array(items) = value {
        if let Some(item) = node.items() {
            for (i, v) in items.iter().enumerate() {
                let prev = old_item(node, old, v);
                openapi(item, v, prev, &format!("{path}[{i}]"), errs);
            }
        }
        let size = items.len() as i64;
        if let Some(min) = node.i64_of("minItems")
            && size < min
        {
            errs.push(field::invalid(
                at,
                &json!(size),
                &format!("{name} in body should have at least {min} items"),
            ));
        }
        if let Some(max) = node.i64_of("maxItems")
            && size > max
        {
            errs.push(field::too_many(at, size, max));
        }
        if node.get("uniqueItems").and_then(Value::as_bool) == Some(true) {
            let dup = items
                .iter()
                .enumerate()
                .any(|(i, v)| items[..i].iter().any(|u| json_eq(u, v)));
            if dup {
                errs.push(field::invalid(
                    at,
                    &json!(""),
                    &format!("{name} in body shouldn't contain duplicates"),
                ));
            }
        }
    }
    if let Some(Value::Array(allowed)) = node.get("enum")
        && !allowed.iter().any(|a| json_eq(a, value))
    {
        errs.push(field::not_supported(at, value, &enum_strings(allowed)));
    }
    if let Value::Object(map) = value {
        check_object(node, map, old, path, errs);
    }
}

/// JSON equality where `1` and `1.0` are the same number, as Go's converted comparison is.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Enum values as `NotSupported` lists them: strings raw, anything else as JSON.
fn enum_strings(allowed: &[Value]) -> Vec<String> {
    allowed
        .iter()
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

fn check_type(node: Node<'_>, value: &Value, name: &str, at: &str, errs: &mut Vec<Cause>) {
    let t = node.type_name();
    let format = node.str_of("format").unwrap_or("");
    if node.int_or_string() && t.is_empty() {
        // Validated as anyOf [integer, string]: the anyOf failure on the root, then the first
        // branch's failure.
        if !matches!(value, Value::String(_)) && json_type(value) != "integer" {
            errs.push(field::invalid(
                field::NIL_PATH,
                &json!(""),
                &format!("{name} must validate at least one schema (anyOf)"),
            ));
            errs.push(field::type_invalid(
                at,
                &json!(json_type(value)),
                &format!(
                    "{name} in body must be of type integer: \"{}\"",
                    json_type(value)
                ),
            ));
        }
        return;
    }
    if t.is_empty() && format.is_empty() {
        return;
    }
    let actual = json_type(value);
    let integral_float = matches!(value, Value::Number(n) if n.is_f64() && n.as_f64().is_some_and(|f| f.fract() == 0.0 && f.is_finite()));
    let fits = t == actual
        || (t == "integer" && actual == "number" && integral_float)
        || (t == "number" && actual == "integer");
    let is_string_or_array = matches!(value, Value::String(_) | Value::Array(_));
    if !is_string_or_array && !format.is_empty() && !fits {
        let data_format = match actual {
            "integer" => "int64",
            "number" => "float64",
            _ => "",
        };
        if format != data_format {
            errs.push(field::type_invalid(
                at,
                &json!(data_format),
                &format!("{name} in body must be of type {format}: \"{data_format}\""),
            ));
            return;
        }
    }
    if !t.is_empty() && !fits {
        errs.push(field::type_invalid(
            at,
            &json!(actual),
            &format!("{name} in body must be of type {t}: \"{actual}\""),
        ));
    }
}

fn check_string(
    node: Node<'_>,
    s: &str,
    value: &Value,
    name: &str,
    at: &str,
    errs: &mut Vec<Cause>,
) {
    let len = s.chars().count() as i64;
    if let Some(max) = node.i64_of("maxLength")
        && len > max
    {
        errs.push(field::too_long(at, max));
    }
    if let Some(min) = node.i64_of("minLength")
        && len < min
    {
        errs.push(field::invalid(
            at,
            value,
            &format!("{name} in body should be at least {min} chars long"),
        ));
    }
    if let Some(pattern) = node.str_of("pattern") {
        match regex::Regex::new(pattern) {
            Ok(re) if re.is_match(s) => {}
            Ok(_) => errs.push(field::invalid(
                at,
                value,
                &format!("{name} in body should match '{pattern}'"),
            )),
            Err(e) => errs.push(field::invalid(
                at,
                value,
                &format!("{name} in body should match '{pattern}, but pattern is invalid: {e}'"),
            )),
        }
    }
    if let Some(format) = node.str_of("format")
        && !format_ok(format, s)
    {
        errs.push(field::type_invalid(
            at,
            value,
            &format!(
                "{name} in body must be of type {format}: {}",
                field::go_quote(s)
            ),
        ));
    }
}

/// The string formats kube-apiserver checks that are cheap to check; unknown formats pass, as
/// they do there.
fn format_ok(format: &str, s: &str) -> bool {
    use base64::Engine;
    match format {
        "date-time" | "datetime" => {
            chrono::DateTime::parse_from_rfc3339(s).is_ok()
                || chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f").is_ok()
        }
        "date" => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok(),
        "byte" => base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
        "uuid" => is_uuid(s),
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "duration" => super::cel::parse_go_duration(s).is_some(),
        _ => true,
    }
}

fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
}

fn check_number(
    node: Node<'_>,
    n: &serde_json::Number,
    value: &Value,
    name: &str,
    at: &str,
    errs: &mut Vec<Cause>,
) {
    // Go validates an int64 against int64(limit) and prints the limit as an integer; a float64
    // against the float limit, printed with %v.
    let is_int = !n.is_f64();
    let data = n.as_f64().unwrap_or(0.0);
    let show = |limit: f64| {
        if is_int {
            (limit as i64).to_string()
        } else {
            field::go_float(limit)
        }
    };
    let bound = |limit: f64| if is_int { limit.trunc() } else { limit };
    if let Some(factor) = node.f64_of("multipleOf") {
        let ok = if is_int {
            let f = factor as i64;
            f != 0 && n.as_i64().is_some_and(|d| d % f == 0)
        } else {
            let mult = if factor < 1.0 {
                (1.0 / factor) * data
            } else {
                data / factor
            };
            mult.fract() == 0.0
        };
        if !ok {
            errs.push(field::invalid(
                at,
                value,
                &format!("{name} in body should be a multiple of {}", show(factor)),
            ));
        }
    }
    if let Some(max) = node.f64_of("maximum") {
        let exclusive = node.get("exclusiveMaximum").and_then(Value::as_bool) == Some(true);
        let m = bound(max);
        if (!exclusive && data > m) || (exclusive && data >= m) {
            let op = if exclusive {
                "less than"
            } else {
                "less than or equal to"
            };
            errs.push(field::invalid(
                at,
                value,
                &format!("{name} in body should be {op} {}", show(max)),
            ));
        }
    }
    if let Some(min) = node.f64_of("minimum") {
        let exclusive = node.get("exclusiveMinimum").and_then(Value::as_bool) == Some(true);
        let m = bound(min);
        if (!exclusive && data < m) || (exclusive && data <= m) {
            let op = if exclusive {
                "greater than"
            } else {
                "greater than or equal to"
            };
            errs.push(field::invalid(
                at,
                value,
                &format!("{name} in body should be {op} {}", show(min)),
            ));
        }
    }
}

fn check_object(
    node: Node<'_>,
    map: &Map<String, Value>,
    old: Option<&Value>,
    path: &str,
    errs: &mut Vec<Cause>,
) {
    let at = shown(path);
    let count = map.len() as i64;
    // kube-openapi stops at a property-count failure, skipping the fields.
    if let Some(min) = node.i64_of("minProperties")
        && count < min
    {
        errs.push(field::invalid(
            at,
            &json!(count),
            &format!("{path} in body should have at least {min} properties"),
        ));
        return;
    }
    if let Some(max) = node.i64_of("maxProperties")
        && count > max
    {
        errs.push(field::too_many(at, count, max));
        return;
    }
    if let Some(additional) = node.additional_properties_schema() {
        for (k, v) in map {
            if node.property(k).is_none() {
                openapi(additional, v, old_child(old, k), &child(path, k), errs);
            }
        }
    }
    for (k, prop) in node.properties() {
        if let Some(v) = map.get(k) {
            openapi(prop, v, old_child(old, k), &child(path, k), errs);
        }
    }
    if let Some(Value::Array(required)) = node.get("required") {
        for k in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(k) {
                errs.push(field::required(&child(path, k), ""));
            }
        }
    }
}

/// `x-kubernetes-embedded-resource` objects must name their `apiVersion` and `kind`.
fn embedded_resources(
    node: Node<'_>,
    value: &Value,
    path: &str,
    check_here: bool,
    errs: &mut Vec<Cause>,
) {
    match value {
        Value::Object(map) => {
            if check_here && node.embedded_resource() {
                for k in ["apiVersion", "kind"] {
                    match map.get(k) {
                        None => errs.push(field::required(&child(path, k), "must not be empty")),
                        Some(Value::String(s)) if s.is_empty() => errs.push(field::invalid(
                            &child(path, k),
                            &json!(""),
                            "must not be empty",
                        )),
                        _ => {}
                    }
                }
            }
            for (k, v) in map {
                if let Some(prop) = node.property(k) {
                    embedded_resources(prop, v, &child(path, k), true, errs);
                } else if let Some(additional) = node.additional_properties_schema() {
                    embedded_resources(additional, v, &format!("{path}[{k}]"), true, errs);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = node.items() {
                for (i, v) in items.iter().enumerate() {
                    embedded_resources(item, v, &format!("{path}[{i}]"), true, errs);
                }
            }
        }
        _ => {}
    }
}

/// `x-kubernetes-list-type: set|map` uniqueness (`structurallisttype.ValidateListSetsAndMaps`).
fn list_types(node: Node<'_>, value: &Value, path: &str, errs: &mut Vec<Cause>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if let Some(prop) = node.property(k) {
                    list_types(prop, v, &child(path, k), errs);
                } else if let Some(additional) = node.additional_properties_schema() {
                    list_types(additional, v, &format!("{path}[{k}]"), errs);
                }
            }
        }
        Value::Array(items) => {
            match node.list_type() {
                "set" => {
                    for (i, v) in items.iter().enumerate() {
                        if items[..i].iter().any(|u| json_eq(u, v)) {
                            errs.push(field::duplicate(&format!("{path}[{i}]"), v));
                        }
                    }
                }
                "map" => {
                    let keys = node.list_map_keys();
                    let key_of = |v: &Value| -> Value {
                        let mut m = Map::new();
                        for k in &keys {
                            if let Some(x) = v.get(*k) {
                                m.insert((*k).to_string(), x.clone());
                            }
                        }
                        Value::Object(m)
                    };
                    for (i, v) in items.iter().enumerate() {
                        let key = key_of(v);
                        if items[..i].iter().any(|u| json_eq(&key_of(u), &key)) {
                            errs.push(field::duplicate(&format!("{path}[{i}]"), &key));
                        }
                    }
                }
                _ => {}
            }
            if let Some(item) = node.items() {
                for (i, v) in items.iter().enumerate() {
                    list_types(item, v, &format!("{path}[{i}]"), errs);
                }
            }
        }
        _ => {}
    }
}

fn has_rules(node: Node<'_>) -> bool {
    !node.validations().is_empty()
        || node.properties().any(|(_, p)| has_rules(p))
        || node.additional_properties_schema().is_some_and(has_rules)
        || node.items().is_some_and(has_rules)
}

fn rules(
    node: Node<'_>,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    root: bool,
    errs: &mut Vec<Cause>,
) {
    if value.is_null() {
        return;
    }
    if !node.validations().is_empty() {
        let target = RuleTarget {
            node,
            value,
            old,
            path: shown(path),
            root,
        };
        evaluate_rules(&target, old == Some(value), errs);
    }
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if let Some(prop) = node.property(k) {
                    rules(prop, v, old_child(old, k), &child(path, k), false, errs);
                } else if let Some(additional) = node.additional_properties_schema() {
                    let p = format!("{path}[{k}]");
                    rules(additional, v, old_child(old, k), &p, false, errs);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = node.items() {
                for (i, v) in items.iter().enumerate() {
                    let prev = old_item(node, old, v);
                    rules(item, v, prev, &format!("{path}[{i}]"), false, errs);
                }
            }
        }
        _ => {}
    }
}
