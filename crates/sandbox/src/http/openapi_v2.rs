//! `/openapi/v2` in the two forms kube-apiserver serves it (kube-openapi's `handler.OpenAPIService`):
//! JSON, and gnostic's `openapi.v2.Document` protobuf, which is the only form client-go's
//! `DiscoveryClient.OpenAPISchema` asks for (`Accept:
//! application/com.github.proto-openapi.spec.v2.v1.0+protobuf`, no fallback). kubectl reads it
//! to validate on the client side what the server cannot validate itself: a `kind: List` file
//! (`kubectl apply -f` of a `kubectl get -o yaml` dump), whose items it validates one by one.
//!
//! The encoder writes the Swagger 2.0 JSON this module's caller builds field by field with the
//! numbers of gnostic's `openapiv2/OpenAPIv2.proto`; the keys it has no field for (there are
//! none in what the sandbox publishes, see [`crd_schema_v2`]) are left out, as gnostic's own
//! reader would refuse them.

use serde_json::{Map, Value, json};

use crate::protobuf::wire::{put_bytes, put_key, put_varint};

pub const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
/// The older name kube-openapi still answers to (`subTypeProtobufDeprecated`), and the one
/// client-go 1.32 sends; the answer's `Content-Type` is [`PROTOBUF`] either way, as
/// kube-openapi's `ReturnedContentType`: client-go parses it with Go's `mime.ParseMediaType`,
/// which refuses the `@`.
pub const PROTOBUF_DEPRECATED: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

const VARINT: u8 = 0;
const FIXED64: u8 = 1;

/// The Swagger document `doc` (`{"swagger","info","paths","definitions"}`) as an
/// `openapi.v2.Document`.
pub fn encode(doc: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, 1, &doc["swagger"]);
    let mut info = Vec::new();
    string(&mut info, 1, &doc["info"]["title"]);
    string(&mut info, 2, &doc["info"]["version"]);
    put_bytes(&mut out, 2, &info);
    // `Paths` (8): the sandbox publishes no v2 paths (kubectl's verifiers read v3's).
    put_bytes(&mut out, 8, &[]);
    let mut definitions = Vec::new();
    for (name, schema) in doc["definitions"].as_object().into_iter().flatten() {
        put_bytes(&mut definitions, 1, &named_schema(name, schema));
    }
    put_bytes(&mut out, 9, &definitions);
    out
}

fn string(out: &mut Vec<u8>, tag: u32, v: &Value) {
    if let Some(s) = v.as_str().filter(|s| !s.is_empty()) {
        put_bytes(out, tag, s.as_bytes());
    }
}

fn boolean(out: &mut Vec<u8>, tag: u32, v: &Value) {
    if v.as_bool() == Some(true) {
        put_key(out, tag, VARINT);
        put_varint(out, 1);
    }
}

fn int64(out: &mut Vec<u8>, tag: u32, v: &Value) {
    if let Some(n) = v.as_i64() {
        put_key(out, tag, VARINT);
        // proto3 int64: two's complement in a varint.
        put_varint(out, n as u64);
    }
}

fn double(out: &mut Vec<u8>, tag: u32, v: &Value) {
    if let Some(n) = v.as_f64() {
        put_key(out, tag, FIXED64);
        out.extend_from_slice(&n.to_le_bytes());
    }
}

/// gnostic's `Any`: the value as YAML (field 2), as gnostic writes values it has no type for
/// (kube-openapi reads `x-kubernetes-group-version-kind` back from this YAML).
fn any(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let yaml = serde_yaml_ng::to_string(v).unwrap_or_default();
    put_bytes(&mut out, 2, yaml.as_bytes());
    out
}

fn named_schema(name: &str, schema: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    put_bytes(&mut out, 1, name.as_bytes());
    put_bytes(&mut out, 2, &self::schema(schema));
    out
}

/// An `openapi.v2.Schema`.
fn schema(s: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let Some(m) = s.as_object() else {
        return out;
    };
    string(&mut out, 1, &m.get("$ref").cloned().unwrap_or_default());
    for (key, tag) in [("format", 2), ("title", 3), ("description", 4)] {
        if let Some(v) = m.get(key) {
            string(&mut out, tag, v);
        }
    }
    if let Some(v) = m.get("default") {
        put_bytes(&mut out, 5, &any(v));
    }
    for (key, tag) in [("multipleOf", 6), ("maximum", 7), ("minimum", 9)] {
        if let Some(v) = m.get(key) {
            double(&mut out, tag, v);
        }
    }
    for (key, tag) in [("exclusiveMaximum", 8), ("exclusiveMinimum", 10)] {
        if let Some(v) = m.get(key) {
            boolean(&mut out, tag, v);
        }
    }
    for (key, tag) in [
        ("maxLength", 11),
        ("minLength", 12),
        ("maxItems", 14),
        ("minItems", 15),
        ("maxProperties", 17),
        ("minProperties", 18),
    ] {
        if let Some(v) = m.get(key) {
            int64(&mut out, tag, v);
        }
    }
    if let Some(v) = m.get("pattern") {
        string(&mut out, 13, v);
    }
    if let Some(v) = m.get("uniqueItems") {
        boolean(&mut out, 16, v);
    }
    for r in m
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        string(&mut out, 19, r);
    }
    for e in m
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        put_bytes(&mut out, 20, &any(e));
    }
    match m.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            let mut item = Vec::new();
            put_key(&mut item, 2, VARINT);
            put_varint(&mut item, u64::from(*b));
            put_bytes(&mut out, 21, &item);
        }
        Some(v @ Value::Object(_)) => {
            let mut item = Vec::new();
            put_bytes(&mut item, 1, &schema(v));
            put_bytes(&mut out, 21, &item);
        }
        _ => {}
    }
    let types: Vec<&Value> = match m.get("type") {
        Some(Value::Array(a)) => a.iter().collect(),
        Some(t) => vec![t],
        None => vec![],
    };
    if !types.is_empty() {
        let mut item = Vec::new();
        for t in types {
            string(&mut item, 1, t);
        }
        put_bytes(&mut out, 22, &item);
    }
    let items: Vec<&Value> = match m.get("items") {
        Some(Value::Array(a)) => a.iter().collect(),
        Some(v @ Value::Object(_)) => vec![v],
        _ => vec![],
    };
    if !items.is_empty() {
        let mut item = Vec::new();
        for s in items {
            put_bytes(&mut item, 1, &schema(s));
        }
        put_bytes(&mut out, 23, &item);
    }
    for s in m
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        put_bytes(&mut out, 24, &schema(s));
    }
    if let Some(props) = m.get("properties").and_then(Value::as_object) {
        let mut p = Vec::new();
        for (name, s) in props {
            put_bytes(&mut p, 1, &named_schema(name, s));
        }
        put_bytes(&mut out, 25, &p);
    }
    if let Some(v) = m.get("discriminator") {
        string(&mut out, 26, v);
    }
    if let Some(v) = m.get("readOnly") {
        boolean(&mut out, 27, v);
    }
    if let Some(v) = m.get("example") {
        put_bytes(&mut out, 30, &any(v));
    }
    for (name, v) in m.iter().filter(|(k, _)| k.starts_with("x-")) {
        let mut named = Vec::new();
        put_bytes(&mut named, 1, name.as_bytes());
        put_bytes(&mut named, 2, &any(v));
        put_bytes(&mut out, 31, &named);
    }
    out
}

/// A CRD version's structural schema as kube-apiserver publishes it in v2
/// (apiextensions-apiserver `controller/openapi/v2.ToStructuralOpenAPIV2`): v2 has no
/// `nullable`, `anyOf`/`oneOf`/`not` or int-or-string, and kubectl's v2 validation would
/// refuse unknown fields under `x-kubernetes-preserve-unknown-fields`, so those are dropped
/// as kube-apiserver drops them; `metadata` is `ObjectMeta`.
pub fn crd_schema_v2(schema: &Value) -> Value {
    let mut out = strip(schema);
    // apiextensions-apiserver's builder adds the type meta and `metadata` to a kind's schema
    // (`addTypeMetaProperties`); a root keeping unknown fields has no properties to add them to.
    if let Some(props) = out.get_mut("properties").and_then(Value::as_object_mut) {
        props.insert(
            "apiVersion".into(),
            json!({"type": "string", "description": API_VERSION_DESCRIPTION}),
        );
        props.insert(
            "kind".into(),
            json!({"type": "string", "description": KIND_DESCRIPTION}),
        );
        props.insert(
            "metadata".into(),
            json!({"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}),
        );
    }
    out
}

const API_VERSION_DESCRIPTION: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DESCRIPTION: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

fn strip(schema: &Value) -> Value {
    let Some(m) = schema.as_object() else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (k, v) in m {
        match k.as_str() {
            "allOf" | "anyOf" | "oneOf" | "not" | "nullable" => {}
            "properties" => {
                let props = v
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, s)| (name.clone(), strip(s)))
                    .collect();
                out.insert(k.clone(), Value::Object(props));
            }
            "items" | "additionalProperties" if v.is_object() => {
                out.insert(k.clone(), strip(v));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    let flag = |k: &str| m.get(k).and_then(Value::as_bool) == Some(true);
    // Untyped values and values that keep unknown fields break kubectl's v2 validation if they
    // have items or properties (kube-openapi#143).
    if flag("nullable") || flag("x-kubernetes-int-or-string") {
        out.remove("type");
    }
    if flag("nullable") || flag("x-kubernetes-preserve-unknown-fields") {
        out.remove("items");
        out.remove("properties");
    }
    if !out.contains_key("items") && out.get("type") == Some(&json!("array")) {
        out.remove("type");
    }
    // A nullable property is not required in v2 (it may be sent as null).
    if let Some(Value::Object(props)) = m.get("properties")
        && let Some(Value::Array(required)) = out.get_mut("required")
    {
        required.retain(|r| {
            r.as_str()
                .and_then(|r| props.get(r))
                .is_none_or(|p| p.get("nullable").and_then(Value::as_bool) != Some(true))
        });
    }
    Value::Object(out)
}

/// kube-apiserver's v2 definition name of a custom kind: the group reversed
/// (`stable.example.com` → `com.example.stable.v1.CronTab`, kube-openapi `ToRESTFriendlyName`).
pub fn crd_definition_name(group: &str, version: &str, kind: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    format!("{}.{version}.{kind}", parts.join("."))
}
