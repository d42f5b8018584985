//! Checks on a CRD version's schema when the CRD itself is written: the schema must be
//! structural (every node typed, no unsupported keywords) and every CEL rule must compile.
//! Causes name the CRD's own fields, e.g.
//! `spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule`.

use serde_json::{Value, json};

use super::cel::compile;
use super::field;
use super::node::Node;
use crate::error::Cause;

/// Where a node sits relative to its parent: the wording of the missing-type error differs.
#[derive(Clone, Copy, PartialEq)]
enum Level {
    Root,
    Field,
    Item,
}

pub fn check(schema: &Value, prefix: &str) -> Vec<Cause> {
    let mut errs = Vec::new();
    node(Node(schema), prefix, Level::Root, &mut errs);
    if errs.is_empty() {
        // Defaults are validated once the schema is structural (`ValidateDefaults`).
        defaults(Node(schema), prefix, &mut errs);
    }
    errs
}

/// Every `default` must be valid against its own node, as an object's value there would be
/// (`structuraldefaulting.ValidateDefaults`): the errors under the node's `default`, so that a
/// CRD whose default could never pass validation is refused when it is written, not when the
/// first object takes the default.
fn defaults(n: Node<'_>, path: &str, errs: &mut Vec<Cause>) {
    if let Some(default) = n.get("default") {
        let at = format!("{path}.default");
        for mut cause in super::validate::validate(n.0, default, None) {
            cause.field = if cause.field == field::NIL_PATH || cause.field.is_empty() {
                at.clone()
            } else {
                format!("{at}.{}", cause.field)
            };
            // kube-openapi's validator of a default names its root by an empty path that it
            // prints as a space: `Invalid value: "string":   in body must be of type integer`
            // (as kube-apiserver v1.32.13 words it).
            cause.message = cause.message.replacen(":  in body ", ":   in body ", 1);
            errs.push(cause);
        }
    }
    for (name, prop) in n.properties() {
        defaults(prop, &format!("{path}.properties[{name}]"), errs);
    }
    if let Some(additional) = n.additional_properties_schema() {
        defaults(additional, &format!("{path}.additionalProperties"), errs);
    }
    if let Some(items) = n.items() {
        defaults(items, &format!("{path}.items"), errs);
    }
}

fn node(n: Node<'_>, path: &str, level: Level, errs: &mut Vec<Cause>) {
    let at = |k: &str| format!("{path}.{k}");
    for (key, what) in [
        ("$ref", "$ref is not supported"),
        ("definitions", "definitions are not supported"),
        ("dependencies", "dependencies are not supported"),
        ("patternProperties", "patternProperties is not supported"),
        ("id", "id is not supported"),
        ("additionalItems", "additionalItems is not supported"),
    ] {
        if n.get(key).is_some() {
            errs.push(field::forbidden(&at(key), what));
        }
    }
    if n.get("uniqueItems").and_then(Value::as_bool) == Some(true) {
        errs.push(field::forbidden(
            &at("uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if n.get("properties").is_some() && n.get("additionalProperties").is_some() {
        errs.push(field::forbidden(
            &at("additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        ));
    }
    if n.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(false)) {
        errs.push(field::invalid(
            &at("x-kubernetes-preserve-unknown-fields"),
            &json!(false),
            "must be true or undefined",
        ));
    }
    let t = n.type_name();
    if t.is_empty() && !n.int_or_string() && !n.preserve_unknown() {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Field => "must not be empty for specified object fields",
            Level::Item => "must not be empty for specified array items",
        };
        errs.push(field::required(&at("type"), detail));
    } else if level == Level::Root && !t.is_empty() && t != "object" {
        errs.push(field::invalid(
            &at("type"),
            &json!(t),
            "must be object at the root",
        ));
    }
    if !t.is_empty()
        && !matches!(
            t,
            "string" | "number" | "integer" | "boolean" | "array" | "object"
        )
    {
        let supported: Vec<String> = ["array", "boolean", "integer", "number", "object", "string"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        errs.push(field::not_supported(&at("type"), &json!(t), &supported));
    }
    if t == "array" && n.items().is_none() {
        errs.push(field::required(&at("items"), "must be specified"));
    }
    if let Some(list_type) = n.get("x-kubernetes-list-type").and_then(Value::as_str) {
        if !matches!(list_type, "atomic" | "set" | "map") {
            let supported: Vec<String> = ["atomic", "set", "map"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            errs.push(field::not_supported(
                &at("x-kubernetes-list-type"),
                &json!(list_type),
                &supported,
            ));
        } else if list_type == "map" && n.list_map_keys().is_empty() {
            errs.push(field::required(
                &at("x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
    }
    rules(n, path, errs);
    for (name, prop) in n.properties() {
        node(
            prop,
            &format!("{path}.properties[{name}]"),
            Level::Field,
            errs,
        );
    }
    if let Some(additional) = n.additional_properties_schema() {
        node(additional, &at("additionalProperties"), Level::Field, errs);
    }
    if let Some(items) = n.items() {
        node(items, &at("items"), Level::Item, errs);
    }
}

fn rules(n: Node<'_>, path: &str, errs: &mut Vec<Cause>) {
    const REASONS: [&str; 4] = [
        field::INVALID,
        field::FORBIDDEN,
        field::REQUIRED,
        field::DUPLICATE,
    ];
    for (i, rule) in n.validations().iter().enumerate() {
        let at = |k: &str| format!("{path}.x-kubernetes-validations[{i}].{k}");
        let source = rule.get("rule").and_then(Value::as_str).unwrap_or("");
        if source.trim().is_empty() {
            errs.push(field::required(&at("rule"), ""));
        } else if let Err(e) = compile(source) {
            errs.push(field::invalid(
                &at("rule"),
                &json!(source),
                &format!("compilation failed: {e}"),
            ));
        }
        if let Some(message) = rule.get("message").and_then(Value::as_str)
            && message.contains('\n')
        {
            errs.push(field::invalid(
                &at("message"),
                &json!(message),
                "message must not contain line breaks",
            ));
        }
        if let Some(expr) = rule.get("messageExpression").and_then(Value::as_str)
            && let Err(e) = compile(expr)
        {
            errs.push(field::invalid(
                &at("messageExpression"),
                &json!(expr),
                &format!("messageExpression compilation failed: {e}"),
            ));
        }
        if let Some(reason) = rule.get("reason").and_then(Value::as_str)
            && !REASONS.contains(&reason)
        {
            let supported: Vec<String> = REASONS.iter().map(|s| s.to_string()).collect();
            errs.push(field::not_supported(
                &at("reason"),
                &json!(reason),
                &supported,
            ));
        }
    }
}
