//! Strict decoding of a request body as kube-apiserver does it for built-in kinds: one pass over
//! the JSON in document order, reporting `unknown field "p"` for a field the type does not
//! declare and `duplicate field "p"` for a declared field given twice, interleaved as they are
//! met (sigs.k8s.io/json's strict mode behind apimachinery's `runtime.NewStrictDecodingError`;
//! the order is k/k test/integration/apiserver/field_validation_test.go's).

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::node::Node;

/// The strict decoding errors of `raw` against `schema` (a structural schema whose root's
/// `metadata` is a property, as built-in kinds have it), or `None` if `raw` is not JSON.
pub fn strict_decoding_errors(schema: &Value, raw: &[u8]) -> Option<Vec<String>> {
    let out = RefCell::new(Vec::new());
    let mut de = serde_json::Deserializer::from_slice(raw);
    Walk {
        node: Node(schema),
        path: String::new(),
        root: true,
        out: &out,
    }
    .deserialize(&mut de)
    .ok()?;
    de.end().ok()?;
    Some(out.into_inner())
}

struct Walk<'a, 's> {
    node: Node<'s>,
    path: String,
    root: bool,
    out: &'a RefCell<Vec<String>>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_, '_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen: HashSet<String> = HashSet::new();
        let mut unknown: HashSet<String> = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            let child = self
                .node
                .property(&key)
                .or_else(|| self.node.additional_properties_schema());
            let kept = child.is_some()
                || self.node.preserve_unknown()
                || self.node.additional_properties_allowed()
                || (self.root && matches!(key.as_str(), "apiVersion" | "kind"));
            if !kept {
                if unknown.insert(key) {
                    self.out
                        .borrow_mut()
                        .push(format!("unknown field \"{path}\""));
                }
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            if !seen.insert(key) {
                self.out
                    .borrow_mut()
                    .push(format!("duplicate field \"{path}\""));
            }
            match child {
                Some(node) => {
                    map.next_value_seed(Walk {
                        node,
                        path,
                        root: false,
                        out: self.out,
                    })?;
                }
                // Preserved: nothing below is described, so nothing below is checked.
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while let Some(()) = seq.next_element_seed(Walk {
            node: self.node.items().unwrap_or(Node(&PRESERVE)),
            path: format!("{}[{i}]", self.path),
            root: false,
            out: self.out,
        })? {
            i += 1;
        }
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// Items of an array without an items schema are not checked.
static PRESERVE: std::sync::LazyLock<Value> =
    std::sync::LazyLock::new(|| serde_json::json!({"x-kubernetes-preserve-unknown-fields": true}));

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_and_duplicate_fields_in_document_order() {
        let schema = json!({"type": "object", "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
            "spec": {"type": "object", "properties": {
                "paused": {"type": "boolean"},
                "list": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "raw": {"x-kubernetes-preserve-unknown-fields": true}
            }}
        }});
        let raw = br#"{"apiVersion":"v1","kind":"K","metadata":{"name":"a","name":"b","x":1},
            "spec":{"u1":1,"dupe":1,"dupe":2,"paused":true,"paused":false,
            "list":[{"a":"1","b":2}],"labels":{"k":"v"},"raw":{"anything":{"at":"all"}}}}"#;
        assert_eq!(
            strict_decoding_errors(&schema, raw).expect("json"),
            [
                r#"duplicate field "metadata.name""#,
                r#"unknown field "metadata.x""#,
                r#"unknown field "spec.u1""#,
                r#"unknown field "spec.dupe""#,
                r#"duplicate field "spec.paused""#,
                r#"unknown field "spec.list[0].b""#,
            ]
        );
        assert_eq!(strict_decoding_errors(&schema, b"a: yaml"), None);
    }
}
