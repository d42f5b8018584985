//! Pruning and defaulting, as apiextensions-apiserver's `structuralpruning.Prune` and
//! `structuraldefaulting.Default` do for custom resources.
//!
//! Order, as in kube-apiserver: unknown fields are pruned first (their paths are reported so the
//! caller can implement `fieldValidation=Strict|Warn`), then `null`s of non-nullable fields without
//! a default are dropped, then defaults are applied top-down, so a defaulted object gets its own
//! nested defaults too.

use serde_json::{Map, Value};

use super::node::Node;

/// Prunes `object` in place and returns the pruned fields' paths (`.spec.foo`).
pub fn prune(schema: &Value, object: &mut Value) -> Vec<String> {
    let mut pruned = Vec::new();
    let root = Node(schema);
    if let Value::Object(map) = object {
        // The root keeps apiVersion, kind and metadata whatever the schema says; unknown fields
        // inside metadata are the caller's business (ObjectMeta decoding).
        prune_object(root, map, "", &mut pruned, true);
    }
    pruned
}

fn prune_value(node: Node<'_>, value: &mut Value, path: &str, pruned: &mut Vec<String>) {
    match value {
        Value::Object(map) => prune_object(node, map, path, pruned, false),
        Value::Array(items) => {
            // An array without an items schema keeps its items only under preserve-unknown-fields.
            if let Some(item) = node.items() {
                for (i, v) in items.iter_mut().enumerate() {
                    prune_value(item, v, &format!("{path}[{i}]"), pruned);
                }
            } else if !node.preserve_unknown() {
                // Nothing to describe the items: nested objects lose all their fields.
                for (i, v) in items.iter_mut().enumerate() {
                    prune_value(Node::EMPTY, v, &format!("{path}[{i}]"), pruned);
                }
            }
        }
        _ => {}
    }
}

fn prune_object(
    node: Node<'_>,
    map: &mut Map<String, Value>,
    path: &str,
    pruned: &mut Vec<String>,
    root: bool,
) {
    let embedded = node.embedded_resource();
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        let child_path = format!("{path}.{key}");
        let keep_meta = (root || embedded) && matches!(key.as_str(), "apiVersion" | "kind");
        if (root || embedded) && key == "metadata" {
            // ObjectMeta is pruned by the ObjectMeta codec, not by the schema.
            continue;
        }
        if let Some(prop) = node.property(&key) {
            if let Some(v) = map.get_mut(&key) {
                prune_value(prop, v, &child_path, pruned);
            }
        } else if let Some(additional) = node.additional_properties_schema() {
            if let Some(v) = map.get_mut(&key) {
                prune_value(additional, v, &child_path, pruned);
            }
        } else if keep_meta || node.preserve_unknown() || node.additional_properties_allowed() {
            // Kept as is: nothing below it is described, so nothing below is pruned.
        } else {
            map.remove(&key);
            pruned.push(child_path);
        }
    }
}

/// Drops `null`s the schema neither allows (`nullable`) nor defaults, then applies defaults.
pub fn default(schema: &Value, object: &mut Value) {
    let node = Node(schema);
    prune_nulls(node, object);
    apply_defaults(node, object);
}

fn prune_nulls(node: Node<'_>, value: &mut Value) {
    match value {
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let child = node
                    .property(&key)
                    .or_else(|| node.additional_properties_schema());
                let Some(child) = child else { continue };
                let drop = map
                    .get(&key)
                    .is_some_and(|v| v.is_null() && !child.nullable() && child.default().is_none());
                if drop {
                    map.remove(&key);
                } else if let Some(v) = map.get_mut(&key) {
                    prune_nulls(child, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = node.items() {
                for v in items.iter_mut() {
                    prune_nulls(item, v);
                }
            }
        }
        _ => {}
    }
}

fn apply_defaults(node: Node<'_>, value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, prop) in node.properties() {
                let Some(default) = prop.default() else {
                    continue;
                };
                let missing = match map.get(key) {
                    None => true,
                    Some(v) => v.is_null() && !prop.nullable(),
                };
                if missing {
                    map.insert(key.clone(), default.clone());
                }
            }
            let additional = node.additional_properties_schema();
            for (key, v) in map.iter_mut() {
                if let Some(prop) = node.property(key) {
                    apply_defaults(prop, v);
                } else if let Some(additional) = additional {
                    if v.is_null()
                        && !additional.nullable()
                        && let Some(default) = additional.default()
                    {
                        *v = default.clone();
                    }
                    apply_defaults(additional, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = node.items() {
                for v in items.iter_mut() {
                    if v.is_null()
                        && !item.nullable()
                        && let Some(default) = item.default()
                    {
                        *v = default.clone();
                    }
                    apply_defaults(item, v);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::super::prune_and_default;
    use serde_json::{Value, json};

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "replicas": {"type": "integer", "default": 1},
                        "mode": {"type": "string", "default": "auto"},
                        "note": {"type": "string", "nullable": true, "default": "n"},
                        "plain": {"type": "string"},
                        "nested": {
                            "type": "object",
                            "default": {},
                            "properties": {"level": {"type": "integer", "default": 3}}
                        },
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                                 "properties": {"known": {"type": "object", "properties": {}}}},
                        "items": {"type": "array", "items": {
                            "type": "object",
                            "properties": {"name": {"type": "string"}, "port": {"type": "integer", "default": 80}}
                        }},
                        "embedded": {"type": "object", "x-kubernetes-embedded-resource": true,
                                     "properties": {"spec": {"type": "object"}}},
                        "any": {"type": "object", "additionalProperties": true}
                    }
                }
            }
        })
    }

    #[test]
    fn prunes_unknown_fields_and_reports_their_paths() {
        let cases: Vec<(Value, Value, Vec<&str>)> = vec![
            (
                json!({"apiVersion": "v", "kind": "K", "metadata": {"name": "x", "junk": 1},
                       "spec": {"plain": "p", "foo": 1}, "status": {"a": 1}}),
                json!({"apiVersion": "v", "kind": "K", "metadata": {"name": "x", "junk": 1},
                       "spec": {"plain": "p", "replicas": 1, "mode": "auto", "note": "n",
                                "nested": {"level": 3}}}),
                vec![".spec.foo", ".status"],
            ),
            (
                json!({"spec": {"labels": {"a": "b"}, "free": {"x": {"y": 1}, "known": {"z": 1}},
                                "items": [{"name": "a", "bogus": true}, {"port": 1}],
                                "any": {"q": {"r": 1}},
                                "embedded": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                             "spec": {"s": 1}, "other": 2}}}),
                json!({"spec": {"labels": {"a": "b"}, "free": {"x": {"y": 1}, "known": {}},
                                "items": [{"name": "a", "port": 80}, {"port": 1}],
                                "any": {"q": {"r": 1}},
                                "embedded": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                             "spec": {}},
                                "replicas": 1, "mode": "auto", "note": "n", "nested": {"level": 3}}}),
                vec![
                    ".spec.free.known.z",
                    ".spec.items[0].bogus",
                    ".spec.embedded.spec.s",
                    ".spec.embedded.other",
                ],
            ),
        ];
        for (mut object, want, want_pruned) in cases {
            let pruned = prune_and_default(&schema(), &mut object);
            assert_eq!(object, want);
            assert_eq!(pruned, want_pruned);
        }
    }

    #[test]
    fn nulls_are_defaulted_or_dropped_unless_nullable() {
        let cases = vec![
            // non-nullable with default: defaulted; without default: dropped; nullable: kept.
            (
                json!({"spec": {"replicas": null, "plain": null, "note": null}}),
                json!({"spec": {"replicas": 1, "note": null, "mode": "auto", "nested": {"level": 3}}}),
            ),
            (
                json!({"spec": {"nested": {"level": null}, "replicas": 5}}),
                json!({"spec": {"nested": {"level": 3}, "replicas": 5, "mode": "auto", "note": "n"}}),
            ),
        ];
        for (mut object, want) in cases {
            assert!(prune_and_default(&schema(), &mut object).is_empty());
            assert_eq!(object, want);
        }
    }

    #[test]
    fn object_without_properties_loses_everything() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object"}}});
        let mut object = json!({"spec": {"a": 1, "b": {"c": 2}}});
        let pruned = prune_and_default(&schema, &mut object);
        assert_eq!(object, json!({"spec": {}}));
        assert_eq!(pruned, vec![".spec.a", ".spec.b"]);
    }
}
