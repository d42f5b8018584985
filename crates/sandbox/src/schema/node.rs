//! Read-only accessors over one node of an `openAPIV3Schema`, kept as the JSON the CRD carries.

use serde_json::{Map, Value};

/// One schema node. `Node::EMPTY` stands for "no schema": nothing declared, nothing preserved.
#[derive(Clone, Copy, Debug)]
pub struct Node<'a>(pub &'a Value);

static NULL: Value = Value::Null;

impl<'a> Node<'a> {
    pub const EMPTY: Node<'static> = Node(&NULL);

    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.0.get(key)
    }

    fn flag(&self, key: &str) -> bool {
        self.get(key).and_then(Value::as_bool).unwrap_or(false)
    }

    /// `type`, empty when unset.
    pub fn type_name(&self) -> &'a str {
        self.get("type").and_then(Value::as_str).unwrap_or("")
    }

    pub fn nullable(&self) -> bool {
        self.flag("nullable")
    }

    pub fn preserve_unknown(&self) -> bool {
        self.flag("x-kubernetes-preserve-unknown-fields")
    }

    pub fn int_or_string(&self) -> bool {
        self.flag("x-kubernetes-int-or-string")
    }

    pub fn embedded_resource(&self) -> bool {
        self.flag("x-kubernetes-embedded-resource")
    }

    pub fn default(&self) -> Option<&'a Value> {
        self.get("default")
    }

    pub fn properties_map(&self) -> Option<&'a Map<String, Value>> {
        self.get("properties").and_then(Value::as_object)
    }

    pub fn properties(&self) -> impl Iterator<Item = (&'a String, Node<'a>)> {
        self.properties_map()
            .into_iter()
            .flat_map(|m| m.iter().map(|(k, v)| (k, Node(v))))
    }

    pub fn property(&self, name: &str) -> Option<Node<'a>> {
        self.properties_map().and_then(|m| m.get(name)).map(Node)
    }

    /// `additionalProperties` when it is a schema.
    pub fn additional_properties_schema(&self) -> Option<Node<'a>> {
        self.get("additionalProperties")
            .filter(|v| v.is_object())
            .map(Node)
    }

    /// `additionalProperties: true`: any field is kept, undescribed.
    pub fn additional_properties_allowed(&self) -> bool {
        self.flag("additionalProperties")
    }

    pub fn items(&self) -> Option<Node<'a>> {
        self.get("items").filter(|v| v.is_object()).map(Node)
    }

    pub fn list_type(&self) -> &'a str {
        self.get("x-kubernetes-list-type")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    pub fn list_map_keys(&self) -> Vec<&'a str> {
        self.get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .map(|keys| keys.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    pub fn validations(&self) -> &'a [Value] {
        self.get("x-kubernetes-validations")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    pub fn i64_of(&self, key: &str) -> Option<i64> {
        self.get(key).and_then(Value::as_i64)
    }

    pub fn f64_of(&self, key: &str) -> Option<f64> {
        self.get(key).and_then(Value::as_f64)
    }

    pub fn str_of(&self, key: &str) -> Option<&'a str> {
        self.get(key).and_then(Value::as_str)
    }
}
