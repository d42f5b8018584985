//! Kubernetes' protobuf encoding of built-in kinds, converted to and from the JSON the sandbox
//! stores, so that everything after the edge (admission, validation, storage) sees JSON.
//!
//! A protobuf object is the 4-byte magic `k8s\0` followed by a `runtime.Unknown` message whose
//! `typeMeta` names the apiVersion and kind and whose `raw` holds the kind's own message (k/k
//! `staging/src/k8s.io/apimachinery/pkg/runtime/serializer/protobuf/protobuf.go`). The kinds'
//! messages are read from one generated table (`schema.rs`, from k8s-pb and k8s-openapi), so
//! every built-in kind is covered by the same code; the well-known types whose JSON form is not
//! their message's (times, quantities, int-or-string, raw JSON) are converted here.

#[cfg(test)]
mod oracle_tests;
#[rustfmt::skip]
mod schema;
mod table;
pub(crate) mod wire;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Number, Value};

use table::{Held, Label, Ty, message, message_for, named};
use wire::{FIXED64, LEN, Reader, VARINT, put_bytes, put_key, put_varint};

/// Kubernetes' protobuf media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The media type of a protobuf watch stream.
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";
/// The prefix of every protobuf-encoded object.
const MAGIC: &[u8; 4] = b"k8s\0";
/// Deeper nesting than any Kubernetes object has; a body nested deeper is refused, not a stack
/// overflow.
const MAX_DEPTH: usize = 100;

/// A body that is not a protobuf object of a known kind, or an object that cannot be written as
/// one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodecError(String);

impl CodecError {
    fn new(message: impl Into<String>) -> Self {
        CodecError(message.into())
    }
}

impl std::fmt::Display for CodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CodecError {}

/// Whether `kind` of `api_version` has a protobuf message (built-in kinds do; custom resources
/// do not).
pub fn has_message(api_version: &str, kind: &str) -> bool {
    message_for(api_version, kind).is_some()
}

/// The JSON object of a protobuf body (`k8s\0` + `runtime.Unknown`), with `apiVersion` and
/// `kind` from the envelope.
pub fn decode(body: &[u8]) -> Result<Value, CodecError> {
    let rest = body.strip_prefix(MAGIC).ok_or_else(|| {
        CodecError::new("the body does not start with the protobuf magic number \"k8s\\x00\"")
    })?;
    let (api_version, kind, raw) = decode_unknown(rest)?;
    let index = message_for(&api_version, &kind).ok_or_else(|| {
        CodecError::new(format!(
            "no kind \"{kind}\" is registered for version \"{api_version}\" in protobuf"
        ))
    })?;
    let fields = match decode_message(index, &raw, 0)? {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let mut object = Map::new();
    object.insert("apiVersion".into(), Value::String(api_version));
    object.insert("kind".into(), Value::String(kind));
    object.extend(
        fields
            .into_iter()
            .filter(|(k, _)| k != "apiVersion" && k != "kind"),
    );
    Ok(Value::Object(object))
}

/// The protobuf form of a JSON object (its own `apiVersion` and `kind` choose the message).
pub fn encode(object: &Value) -> Result<Vec<u8>, CodecError> {
    let text = |k: &str| object.get(k).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    let index = message_for(api_version, kind).ok_or_else(|| {
        CodecError::new(format!(
            "{kind} of {api_version} has no protobuf message; ask for application/json"
        ))
    })?;
    let mut raw = Vec::new();
    encode_message(index, object, &mut raw, 0)?;
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&encode_unknown(api_version, kind, &raw));
    Ok(out)
}

/// A list written in parts (`crate::http::stream`): the `runtime.Unknown` envelope's head up to
/// its `raw` field, whose length (`raw_len`) must be known first, as protobuf prefixes it.
/// `raw` follows: [`list_metadata`], then each chunk of [`list_items`]; then
/// [`ENVELOPE_TAIL`]. The parts concatenate to [`encode`] of the whole list.
pub(crate) fn envelope_head(api_version: &str, kind: &str, raw_len: usize) -> Vec<u8> {
    let mut type_meta = Vec::new();
    put_bytes(&mut type_meta, 1, api_version.as_bytes());
    put_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut out = MAGIC.to_vec();
    put_bytes(&mut out, 1, &type_meta);
    put_key(&mut out, 2, LEN);
    put_varint(&mut out, raw_len as u64);
    out
}

/// The empty `contentEncoding` and `contentType` after `raw` (as [`encode_unknown`]).
pub(crate) const ENVELOPE_TAIL: [u8; 4] = [0x1a, 0x00, 0x22, 0x00];

/// Whether `group` is one of Kubernetes' own API groups (`""` is the core group): one whose
/// kinds have protobuf messages. A custom resource's group never is.
pub(crate) fn is_builtin_group(group: &str) -> bool {
    table::group_prefix(group).is_some()
}

/// Whether a typed empty object of built-in `kind` (of API `group`) already has the field at
/// `path` (JSON names, list items elided): Go holds it as a struct value, or its JSON tag has
/// no `omitempty`, so encoding/json writes it (`{}`, `null`, `""`). `None` when no message of
/// the kind has that path. structured-merge-diff compares a create with that typed empty
/// object, so such a field is never "added" as a whole (no `.` entry in managedFields).
pub(crate) fn go_always_present(group: &str, kind: &str, path: &[String]) -> Option<bool> {
    let index = table::resource_of(group, kind)?;
    let (last, parents) = path.split_last()?;
    let mut msg = message(index);
    for name in parents {
        match go_field(msg, name)?.ty {
            Ty::Message(i) => msg = message(i),
            _ => return None,
        }
    }
    let field = go_field(msg, last)?;
    Some(match field.held {
        Held::Unknown => return None,
        Held::Value if !field.omitempty => true,
        Held::Value => matches!(field.ty, Ty::Message(i) if special(i) == Special::None),
        Held::Pointer => !field.omitempty,
    })
}

/// Adds to a built-in object (its own `apiVersion` and `kind`) the fields Go's `encoding/json`
/// writes for the typed struct although the JSON lacks them: a struct held by value (`status:
/// {}`, a template's `metadata: {}`), a zero `metav1.Time` as `null` (`creationTimestamp: null`),
/// a scalar without `omitempty` as its zero, and a pointer, slice or map without `omitempty` as
/// `null` — recursively, into what is there. kube-apiserver encodes every built-in object it
/// sends from its Go struct, so these appear in what it writes (an AdmissionReview's `object`,
/// for one); a custom resource is unstructured there and left alone. Struct-valued special
/// types other than times (a `Quantity`, an `IntOrString`, a `Duration`, raw JSON) are left out
/// rather than guessed.
pub fn go_json_zeros(object: &mut Value) {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    if !is_builtin_group(group) {
        return;
    }
    let kind = object["kind"].as_str().unwrap_or_default();
    if let Some(index) = message_for(api_version, kind) {
        fill_go_zeros(index, object, 0);
    }
}

fn fill_go_zeros(index: usize, value: &mut Value, depth: usize) {
    // Kubernetes' types nest a few levels (a CRD's schema is raw JSON here); the bound only
    // keeps a malformed table from recursing without end.
    if depth > 32 {
        return;
    }
    if let Some(map) = value.as_object_mut() {
        fill_fields(message(index), map, depth);
    }
}

fn fill_fields(msg: &'static table::Message, map: &mut Map<String, Value>, depth: usize) {
    for f in msg.fields {
        let nested = match f.ty {
            Ty::Message(i) if f.inline => {
                fill_fields(message(i), map, depth);
                continue;
            }
            Ty::Message(i) if special(i) == Special::None => Some(i),
            _ => None,
        };
        if !map.contains_key(f.json) {
            let Some(zero) = go_json_zero(f) else {
                continue;
            };
            map.insert(f.json.to_owned(), zero);
        }
        let (Some(i), Some(v)) = (nested, map.get_mut(f.json)) else {
            continue;
        };
        match (f.label, v) {
            (Label::Optional, v) => fill_go_zeros(i, v, depth + 1),
            (Label::Repeated, Value::Array(items)) => {
                for item in items {
                    fill_go_zeros(i, item, depth + 1);
                }
            }
            (Label::Map, Value::Object(values)) => {
                for item in values.values_mut() {
                    fill_go_zeros(i, item, depth + 1);
                }
            }
            _ => {}
        }
    }
}

/// What Go's `encoding/json` writes for field `f` of a zero struct, if anything.
fn go_json_zero(f: &table::Field) -> Option<Value> {
    match f.held {
        Held::Unknown => None,
        Held::Pointer => (!f.omitempty).then_some(Value::Null),
        Held::Value => match f.ty {
            // `omitempty` never leaves a struct out.
            Ty::Message(i) => match special(i) {
                Special::None => Some(Value::Object(Map::new())),
                Special::Time | Special::MicroTime => Some(Value::Null),
                _ => None,
            },
            _ if f.omitempty => None,
            Ty::String => Some(Value::String(String::new())),
            Ty::Bool => Some(Value::Bool(false)),
            Ty::Int32 | Ty::Int64 => Some(Value::from(0)),
            Ty::Double => Some(Value::from(0.0)),
            Ty::Bytes => Some(Value::Null),
        },
    }
}

/// The field of `msg` named `json` in JSON, looked for in its inline structs too.
fn go_field(msg: &'static table::Message, json: &str) -> Option<&'static table::Field> {
    msg.fields.iter().find_map(|f| match f.ty {
        Ty::Message(i) if f.inline => go_field(message(i), json),
        _ => (f.json == json).then_some(f),
    })
}

/// A list kind's message, or the error [`encode`] gives for a kind without one.
pub(crate) fn list_message(api_version: &str, kind: &str) -> Result<usize, CodecError> {
    message_for(api_version, kind).ok_or_else(|| {
        CodecError::new(format!(
            "{kind} of {api_version} has no protobuf message; ask for application/json"
        ))
    })
}

/// A list's `metadata` field (tag 1, first in tag order).
pub(crate) fn list_metadata(index: usize, metadata: &Value) -> Result<Vec<u8>, CodecError> {
    let mut map = Map::new();
    map.insert("metadata".into(), metadata.clone());
    let mut out = Vec::new();
    encode_fields(index, &map, &mut out, 0)?;
    Ok(out)
}

/// Some of a list's `items` (tag 2, repeated): each chunk's bytes follow the previous ones'.
pub(crate) fn list_items(index: usize, items: Vec<Value>) -> Result<Vec<u8>, CodecError> {
    let msg = message(index);
    let field = msg
        .fields
        .iter()
        .find(|f| f.json == "items")
        .ok_or_else(|| CodecError::new(format!("{} has no items", msg.name)))?;
    let mut out = Vec::new();
    for item in &items {
        encode_value(field.ty, field.tag, item, &mut out, 0)
            .map_err(|e| CodecError::new(format!("{}.items: {e}", msg.name)))?;
    }
    Ok(out)
}

/// One frame of a protobuf watch stream: a 4-byte big-endian length, then a `WatchEvent` message
/// without envelope whose `object.raw` is the object's own envelope (protobuf.go's
/// `RawSerializer` inside `streaming.NewEncoder`, k/k `staging/src/k8s.io/apimachinery/pkg/
/// runtime/serializer/streaming/streaming.go` with the length-delimited framer).
pub fn encode_watch_frame(event_type: &str, object: &Value) -> Result<Vec<u8>, CodecError> {
    let object = encode(object)?;
    let mut raw_extension = Vec::new();
    put_bytes(&mut raw_extension, 1, &object);
    let mut event = Vec::new();
    put_bytes(&mut event, 1, event_type.as_bytes());
    put_bytes(&mut event, 2, &raw_extension);
    let len = u32::try_from(event.len()).map_err(|_| CodecError::new("event too large"))?;
    let mut frame = len.to_be_bytes().to_vec();
    frame.extend_from_slice(&event);
    Ok(frame)
}

/// `runtime.Unknown`: typeMeta{apiVersion=1, kind=2}=1, raw=2, contentEncoding=3,
/// contentType=4.
fn decode_unknown(data: &[u8]) -> Result<(String, String, Vec<u8>), CodecError> {
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), Vec::new());
    let mut r = Reader::new(data);
    while !r.done() {
        match r.key()? {
            (1, LEN) => {
                let mut t = Reader::new(r.len_delimited()?);
                while !t.done() {
                    match t.key()? {
                        (1, LEN) => api_version = utf8(t.len_delimited()?, "apiVersion")?,
                        (2, LEN) => kind = utf8(t.len_delimited()?, "kind")?,
                        (_, w) => t.skip(w)?,
                    }
                }
            }
            (2, LEN) => raw = r.len_delimited()?.to_vec(),
            (3, LEN) => {
                let encoding = utf8(r.len_delimited()?, "contentEncoding")?;
                if !encoding.is_empty() {
                    return Err(CodecError::new(format!(
                        "contentEncoding \"{encoding}\" is not supported"
                    )));
                }
            }
            (_, w) => r.skip(w)?,
        }
    }
    if kind.is_empty() {
        return Err(CodecError::new(
            "the protobuf envelope names no kind (runtime.Unknown typeMeta.kind)",
        ));
    }
    Ok((api_version, kind, raw))
}

fn encode_unknown(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::new();
    put_bytes(&mut type_meta, 1, api_version.as_bytes());
    put_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut out = Vec::new();
    put_bytes(&mut out, 1, &type_meta);
    put_bytes(&mut out, 2, raw);
    // Go writes the empty contentEncoding and contentType too.
    put_bytes(&mut out, 3, b"");
    put_bytes(&mut out, 4, b"");
    out
}

fn utf8(bytes: &[u8], what: &str) -> Result<String, CodecError> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| CodecError::new(format!("{what} is not valid UTF-8")))
}

/// The well-known messages whose JSON form differs from their fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Special {
    None,
    /// `metav1.Time`: RFC 3339 with seconds (time_proto.go drops nanoseconds).
    Time,
    /// `metav1.MicroTime`: RFC 3339 with microseconds.
    MicroTime,
    /// `metav1.Duration`: Go's duration string (`1h0m0s`).
    Duration,
    /// `resource.Quantity`: its string.
    Quantity,
    /// `intstr.IntOrString`: a number or a string.
    IntOrString,
    /// `runtime.RawExtension`, `metav1.FieldsV1`, apiextensions `JSON`: raw JSON bytes.
    RawJson,
    /// apiextensions `JSONSchemaPropsOrArray`: a schema or an array of schemas.
    SchemaOrArray,
    /// apiextensions `JSONSchemaPropsOrBool`: a bool or a schema.
    SchemaOrBool,
    /// apiextensions `JSONSchemaPropsOrStringArray`: a schema or an array of strings.
    SchemaOrStringArray,
    /// `ExtraValue` (authentication, authorization, certificates): Go's `[]string`, a message
    /// with one repeated `items` field in protobuf and a plain array in JSON.
    StringList,
}

/// The well-known form of message `index`, from a table built once with an entry per message.
fn special(index: usize) -> Special {
    static SPECIALS: std::sync::OnceLock<Vec<Special>> = std::sync::OnceLock::new();
    let table = SPECIALS.get_or_init(|| {
        let meta = "apimachinery/pkg/apis/meta/v1";
        let mut list = vec![
            (named(meta, "Time"), Special::Time),
            (named(meta, "MicroTime"), Special::MicroTime),
            (named(meta, "Duration"), Special::Duration),
            (named(meta, "FieldsV1"), Special::RawJson),
            (
                named("apimachinery/pkg/api/resource", "Quantity"),
                Special::Quantity,
            ),
            (
                named("apimachinery/pkg/util/intstr", "IntOrString"),
                Special::IntOrString,
            ),
            (
                named("apimachinery/pkg/runtime", "RawExtension"),
                Special::RawJson,
            ),
        ];
        for version in ["v1", "v1beta1"] {
            let pkg = format!("apiextensions_apiserver/pkg/apis/apiextensions/{version}");
            list.push((named(&pkg, "Json"), Special::RawJson));
            list.push((
                named(&pkg, "JsonSchemaPropsOrArray"),
                Special::SchemaOrArray,
            ));
            list.push((named(&pkg, "JsonSchemaPropsOrBool"), Special::SchemaOrBool));
            list.push((
                named(&pkg, "JsonSchemaPropsOrStringArray"),
                Special::SchemaOrStringArray,
            ));
        }
        list.extend(
            schema::MESSAGES
                .iter()
                .enumerate()
                .filter(|(_, m)| m.name == "ExtraValue")
                .map(|(i, _)| (Some(i), Special::StringList)),
        );
        let mut table = vec![Special::None; schema::MESSAGES.len()];
        for (i, s) in list {
            if let Some(i) = i {
                table[i] = s;
            }
        }
        table
    });
    table.get(index).copied().unwrap_or(Special::None)
}

// ---- decoding ----

/// The JSON of one message, or `None` for a value Go writes as absent (a zero `Time`).
fn decode_message(index: usize, data: &[u8], depth: usize) -> Result<Option<Value>, CodecError> {
    if depth > MAX_DEPTH {
        return Err(CodecError::new("the object is nested too deeply"));
    }
    let msg = message(index);
    let kind = special(index);
    if kind == Special::RawJson {
        return decode_raw_json(data).map(Some);
    }
    let mut out = Map::new();
    let mut r = Reader::new(data);
    while !r.done() {
        let (tag, wire) = r.key()?;
        let Some(field) = msg.field(tag) else {
            r.skip(wire)?;
            continue;
        };
        let at = |e: CodecError| CodecError::new(format!("{}.{}: {e}", msg.name, field.json));
        match field.label {
            Label::Map => {
                let (key, value) = decode_entry(field.ty, r.len_delimited()?, depth).map_err(at)?;
                let entry = out
                    .entry(field.json)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let (Value::Object(map), Some(value)) = (entry, value) {
                    map.insert(key, value);
                }
            }
            Label::Repeated => {
                let entry = out
                    .entry(field.json)
                    .or_insert_with(|| Value::Array(Vec::new()));
                let Value::Array(items) = entry else {
                    continue;
                };
                if wire == LEN && matches!(field.ty, Ty::Bool | Ty::Int32 | Ty::Int64) {
                    // A packed repeated scalar.
                    let mut packed = Reader::new(r.len_delimited()?);
                    while !packed.done() {
                        items.push(scalar_varint(field.ty, packed.varint()?));
                    }
                } else if let Some(v) = decode_value(field.ty, wire, &mut r, depth).map_err(at)? {
                    items.push(v);
                }
            }
            Label::Optional => match decode_value(field.ty, wire, &mut r, depth).map_err(at)? {
                Some(Value::Object(inner)) if field.inline => out.extend(inner),
                Some(v) => {
                    out.insert(field.json.to_string(), v);
                }
                None => {
                    out.remove(field.json);
                }
            },
        }
    }
    // The object as Go holds it, then as Go writes it to JSON. A field Go holds as a value
    // (`go_fields.txt`) is written to protobuf zero or not, and one the body leaves out is its
    // zero all the same; JSON leaves a zero scalar out under `omitempty` and writes it
    // otherwise. A pointer set to zero (`replicas: 0`, a PVC's `storageClassName: ""`) stays.
    // A field the Go table does not know keeps the older rule: an optional empty string is
    // left out.
    for field in msg
        .fields
        .iter()
        .filter(|f| f.label == Label::Optional && !f.inline)
    {
        let zero = match (field.ty, out.get(field.json)) {
            (Ty::String, Some(Value::String(s))) => s.is_empty(),
            (Ty::Bool, Some(Value::Bool(b))) => !b,
            (Ty::Int32 | Ty::Int64 | Ty::Double, Some(Value::Number(n))) => n.as_f64() == Some(0.0),
            _ => false,
        };
        if field.held == Held::Value {
            if zero && field.omitempty {
                out.remove(field.json);
            } else if !out.contains_key(field.json) {
                let zero = match field.ty {
                    Ty::String if !field.omitempty => Value::String(String::new()),
                    Ty::Bool if !field.omitempty => Value::Bool(false),
                    Ty::Int32 | Ty::Int64 | Ty::Double if !field.omitempty => Value::from(0),
                    // A zero `metav1.Time` held as a value: `omitempty` does not apply to a
                    // struct, and its MarshalJSON writes null (`creationTimestamp: null`).
                    Ty::Message(i) if matches!(special(i), Special::Time | Special::MicroTime) => {
                        Value::Null
                    }
                    _ => continue,
                };
                out.insert(field.json.to_string(), zero);
            }
        } else if field.held == Held::Unknown
            && zero
            && !field.required
            && matches!(field.ty, Ty::String)
        {
            out.remove(field.json);
        }
    }
    to_special(kind, msg, out)
}

fn decode_value(
    ty: Ty,
    wire: u8,
    r: &mut Reader<'_>,
    depth: usize,
) -> Result<Option<Value>, CodecError> {
    let want = |expected: u8| {
        if wire == expected {
            Ok(())
        } else {
            Err(CodecError::new(format!(
                "wire type {wire} where {expected} was expected"
            )))
        }
    };
    Ok(Some(match ty {
        Ty::String => {
            want(LEN)?;
            Value::String(utf8(r.len_delimited()?, "a string")?)
        }
        Ty::Bytes => {
            want(LEN)?;
            Value::String(BASE64.encode(r.len_delimited()?))
        }
        Ty::Bool | Ty::Int32 | Ty::Int64 => {
            want(VARINT)?;
            scalar_varint(ty, r.varint()?)
        }
        Ty::Double => {
            want(FIXED64)?;
            let v = f64::from_bits(r.fixed64()?);
            Number::from_f64(v).map_or(Value::Null, Value::Number)
        }
        Ty::Message(index) => {
            want(LEN)?;
            return decode_message(index, r.len_delimited()?, depth + 1);
        }
    }))
}

fn scalar_varint(ty: Ty, v: u64) -> Value {
    match ty {
        Ty::Bool => Value::Bool(v != 0),
        // A negative int32 is sign-extended to 64 bits on the wire.
        Ty::Int32 => Value::from(v as i64 as i32),
        _ => Value::from(v as i64),
    }
}

/// A map entry message: key=1, value=2.
fn decode_entry(ty: Ty, data: &[u8], depth: usize) -> Result<(String, Option<Value>), CodecError> {
    let mut key = String::new();
    let mut value = None;
    let mut r = Reader::new(data);
    while !r.done() {
        match r.key()? {
            (1, LEN) => key = utf8(r.len_delimited()?, "a map key")?,
            (2, wire) => value = decode_value(ty, wire, &mut r, depth)?,
            (_, wire) => r.skip(wire)?,
        }
    }
    // An absent value is the value type's zero.
    let value = value.or_else(|| match ty {
        Ty::String | Ty::Bytes => Some(Value::String(String::new())),
        Ty::Message(i) => decode_message(i, &[], depth + 1).ok().flatten(),
        _ => Some(Value::from(0)),
    });
    Ok((key, value))
}

fn decode_raw_json(data: &[u8]) -> Result<Value, CodecError> {
    let mut r = Reader::new(data);
    let mut raw: &[u8] = &[];
    while !r.done() {
        match r.key()? {
            (1, LEN) => raw = r.len_delimited()?,
            (_, w) => r.skip(w)?,
        }
    }
    if raw.is_empty() {
        return Ok(Value::Null);
    }
    if raw.starts_with(MAGIC) {
        // An embedded object in protobuf (a watch event's object).
        return decode(raw);
    }
    serde_json::from_slice(raw)
        .map_err(|e| CodecError::new(format!("an embedded raw object is not JSON: {e}")))
}

fn field_by_tag(msg: &table::Message, tag: u32) -> &'static str {
    msg.field(tag).map_or("", |f| f.json)
}

fn to_special(
    kind: Special,
    msg: &table::Message,
    mut out: Map<String, Value>,
) -> Result<Option<Value>, CodecError> {
    let mut take = |tag: u32| out.remove(field_by_tag(msg, tag));
    let int = |v: Option<Value>| v.and_then(|v| v.as_i64()).unwrap_or(0);
    Ok(match kind {
        Special::None | Special::RawJson => Some(Value::Object(out)),
        Special::Time | Special::MicroTime => {
            let (seconds, nanos) = (take(1), take(2));
            if seconds.is_none() && nanos.is_none() {
                // time_proto.go: an empty message is the zero time, which JSON writes as null.
                None
            } else {
                Some(Value::String(format_time(
                    int(seconds),
                    int(nanos),
                    kind == Special::MicroTime,
                )?))
            }
        }
        Special::Duration => Some(Value::String(format_duration(int(take(1))))),
        Special::Quantity => Some(take(1).unwrap_or_else(|| Value::String("0".into()))),
        Special::IntOrString => {
            let (ty, int_val, str_val) = (take(1), take(2), take(3));
            Some(if int(ty) == 1 {
                str_val.unwrap_or_else(|| Value::String(String::new()))
            } else {
                int_val.unwrap_or_else(|| Value::from(0))
            })
        }
        Special::SchemaOrArray => {
            let (schema, schemas) = (take(1), take(2));
            schema.or(schemas)
        }
        Special::SchemaOrBool => {
            let (allows, schema) = (take(1), take(2));
            schema.or(allows)
        }
        Special::SchemaOrStringArray => {
            let (schema, strings) = (take(1), take(2));
            schema.or(strings)
        }
        Special::StringList => Some(take(1).unwrap_or_else(|| Value::Array(Vec::new()))),
    })
}

fn format_time(seconds: i64, nanos: i64, micro: bool) -> Result<String, CodecError> {
    let ts = jiff::Timestamp::from_second(seconds)
        .map_err(|e| CodecError::new(format!("a time is out of range: {e}")))?;
    let base = ts.strftime("%Y-%m-%dT%H:%M:%S").to_string();
    Ok(if micro {
        format!("{base}.{:06}Z", nanos / 1000)
    } else {
        format!("{base}Z")
    })
}

/// Go's `time.Duration.String()`: `1h2m3.5s`, `1.5ms`, `0s`.
fn format_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    let frac = |value: u64, unit: u64, suffix: &str| {
        let whole = value / unit;
        let rest = value % unit;
        if rest == 0 {
            format!("{whole}{suffix}")
        } else {
            let digits = unit.to_string().len() - 1;
            let s = format!("{rest:0digits$}");
            format!("{whole}.{}{suffix}", s.trim_end_matches('0'))
        }
    };
    if n < 1_000 {
        return format!("{sign}{n}ns");
    }
    if n < 1_000_000 {
        return format!("{sign}{}", frac(n, 1_000, "µs"));
    }
    if n < 1_000_000_000 {
        return format!("{sign}{}", frac(n, 1_000_000, "ms"));
    }
    let hours = n / 3_600_000_000_000;
    let minutes = (n / 60_000_000_000) % 60;
    let seconds = frac(n % 60_000_000_000, 1_000_000_000, "s");
    if hours > 0 {
        format!("{sign}{hours}h{minutes}m{seconds}")
    } else if minutes > 0 {
        format!("{sign}{minutes}m{seconds}")
    } else {
        format!("{sign}{seconds}")
    }
}

/// Go's `time.ParseDuration`, for the units Kubernetes writes.
fn parse_duration(text: &str) -> Result<i64, CodecError> {
    // One Go `time.ParseDuration` for the sandbox: the CEL library's.
    crate::schema::parse_go_duration(text)
        .and_then(|d| d.num_nanoseconds())
        .ok_or_else(|| CodecError::new(format!("invalid duration {text:?}")))
}

// ---- encoding ----

fn encode_message(
    index: usize,
    value: &Value,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<(), CodecError> {
    if depth > MAX_DEPTH {
        return Err(CodecError::new("the object is nested too deeply"));
    }
    let msg = message(index);
    let kind = special(index);
    if let Some(fields) = from_special(kind, value)? {
        return encode_fields(index, &fields, out, depth);
    }
    match value {
        Value::Object(map) => encode_fields(index, map, out, depth),
        Value::Null => Ok(()),
        other => Err(CodecError::new(format!(
            "{}: expected an object, found {other}",
            msg.name
        ))),
    }
}

/// The message fields of a well-known type's JSON form, by their JSON names.
fn from_special(kind: Special, value: &Value) -> Result<Option<Map<String, Value>>, CodecError> {
    let fields = |pairs: Vec<(u32, Value)>| pairs;
    let pairs = match (kind, value) {
        (Special::None, _) => return Ok(None),
        (_, Value::Null) => return Ok(Some(Map::new())),
        (Special::Time | Special::MicroTime, Value::String(s)) => {
            let ts: jiff::Timestamp = s
                .parse()
                .map_err(|e| CodecError::new(format!("invalid time {s:?}: {e}")))?;
            let nanos = if kind == Special::MicroTime {
                i64::from(ts.subsec_nanosecond())
            } else {
                0
            };
            fields(vec![
                (1, Value::from(ts.as_second())),
                (2, Value::from(nanos)),
            ])
        }
        (Special::Duration, Value::String(s)) => fields(vec![(1, Value::from(parse_duration(s)?))]),
        (Special::Quantity, Value::String(_)) => fields(vec![(1, value.clone())]),
        (Special::Quantity, Value::Number(n)) => fields(vec![(1, Value::String(n.to_string()))]),
        (Special::IntOrString, Value::Number(_)) => {
            fields(vec![(1, Value::from(0)), (2, value.clone())])
        }
        (Special::IntOrString, Value::String(_)) => {
            fields(vec![(1, Value::from(1)), (3, value.clone())])
        }
        (Special::RawJson, _) => {
            let raw = serde_json::to_vec(value).unwrap_or_default();
            fields(vec![(1, Value::String(BASE64.encode(raw)))])
        }
        (
            Special::SchemaOrArray | Special::SchemaOrBool | Special::SchemaOrStringArray,
            Value::Object(_),
        ) => {
            let tag = if kind == Special::SchemaOrBool { 2 } else { 1 };
            let mut pairs = vec![(tag, value.clone())];
            if kind == Special::SchemaOrBool {
                pairs.push((1, Value::Bool(true)));
            }
            fields(pairs)
        }
        (Special::SchemaOrArray | Special::SchemaOrStringArray, Value::Array(_)) => {
            fields(vec![(2, value.clone())])
        }
        (Special::SchemaOrBool, Value::Bool(_)) => fields(vec![(1, value.clone())]),
        (Special::StringList, Value::Array(_)) => fields(vec![(1, value.clone())]),
        (_, other) => {
            return Err(CodecError::new(format!(
                "{other} is not a valid {kind:?} value"
            )));
        }
    };
    Ok(Some(
        pairs
            .into_iter()
            .map(|(tag, v)| (tag.to_string(), v))
            .collect(),
    ))
}

/// Encodes an object's fields in tag order, as Go does. Special forms arrive keyed by tag
/// number (`"1"`), ordinary objects by JSON name; JSON fields without a message field (unknown
/// to protobuf) are left out.
fn encode_fields(
    index: usize,
    map: &Map<String, Value>,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<(), CodecError> {
    let msg = message(index);
    let by_tag = special(index) != Special::None;
    // The table lists each message's fields in tag order (`.ci/gen-protobuf-schema`).
    for field in msg.fields {
        let key = if by_tag {
            field.tag.to_string()
        } else {
            field.json.to_string()
        };
        if field.inline {
            if let Ty::Message(inner) = field.ty {
                let mut bytes = Vec::new();
                encode_fields(inner, map, &mut bytes, depth + 1)?;
                put_bytes(out, field.tag, &bytes);
            }
            continue;
        }
        let Some(value) = map.get(&key).filter(|v| !v.is_null()) else {
            if field.held == Held::Value && field.label == Label::Optional {
                put_zero(out, field, depth)?;
            }
            continue;
        };
        let at = |e: CodecError| CodecError::new(format!("{}.{}: {e}", msg.name, field.json));
        match (field.label, value) {
            (Label::Map, Value::Object(entries)) => {
                let mut keys: Vec<_> = entries.keys().collect();
                keys.sort();
                for k in keys {
                    let mut entry = Vec::new();
                    put_bytes(&mut entry, 1, k.as_bytes());
                    encode_value(field.ty, 2, &entries[k], &mut entry, depth).map_err(at)?;
                    put_bytes(out, field.tag, &entry);
                }
            }
            (Label::Repeated, Value::Array(items)) => {
                for item in items {
                    encode_value(field.ty, field.tag, item, out, depth).map_err(at)?;
                }
            }
            (Label::Optional, v) => encode_value(field.ty, field.tag, v, out, depth).map_err(at)?,
            (_, other) => {
                return Err(at(CodecError::new(format!(
                    "expected {}, found {other}",
                    if field.label == Label::Map {
                        "an object"
                    } else {
                        "an array"
                    }
                ))));
            }
        }
    }
    Ok(())
}

/// The zero of a field Go holds as a value, which Go writes whether set or not: an empty
/// string, 0, false, or the message with its own value fields zero (a zero `Time` is an
/// empty message, as `time_proto.go` writes it).
fn put_zero(out: &mut Vec<u8>, field: &table::Field, depth: usize) -> Result<(), CodecError> {
    match field.ty {
        Ty::String => put_bytes(out, field.tag, b""),
        Ty::Bytes => {}
        Ty::Bool | Ty::Int32 | Ty::Int64 => {
            put_key(out, field.tag, VARINT);
            put_varint(out, 0);
        }
        Ty::Double => {
            put_key(out, field.tag, FIXED64);
            out.extend_from_slice(&0f64.to_bits().to_le_bytes());
        }
        Ty::Message(index) => {
            let mut inner = Vec::new();
            if special(index) == Special::None {
                encode_fields(index, &Map::new(), &mut inner, depth + 1)?;
            } else {
                encode_message(index, &Value::Null, &mut inner, depth + 1)?;
            }
            put_bytes(out, field.tag, &inner);
        }
    }
    Ok(())
}

fn encode_value(
    ty: Ty,
    tag: u32,
    value: &Value,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<(), CodecError> {
    let mismatch = |what: &str| CodecError::new(format!("expected {what}, found {value}"));
    match ty {
        Ty::String => put_bytes(
            out,
            tag,
            value
                .as_str()
                .ok_or_else(|| mismatch("a string"))?
                .as_bytes(),
        ),
        Ty::Bytes => {
            let text = value.as_str().ok_or_else(|| mismatch("base64 data"))?;
            let bytes = BASE64
                .decode(text)
                .map_err(|e| CodecError::new(format!("invalid base64: {e}")))?;
            put_bytes(out, tag, &bytes);
        }
        Ty::Bool => {
            put_key(out, tag, VARINT);
            put_varint(
                out,
                u64::from(value.as_bool().ok_or_else(|| mismatch("a boolean"))?),
            );
        }
        Ty::Int32 | Ty::Int64 => {
            let n = value
                .as_i64()
                .or_else(|| {
                    value
                        .as_f64()
                        .filter(|f| f.fract() == 0.0)
                        .map(|f| f as i64)
                })
                .ok_or_else(|| mismatch("an integer"))?;
            let n = if ty == Ty::Int32 {
                i64::from(i32::try_from(n).map_err(|_| mismatch("a 32-bit integer"))?)
            } else {
                n
            };
            put_key(out, tag, VARINT);
            put_varint(out, n as u64);
        }
        Ty::Double => {
            let f = value.as_f64().ok_or_else(|| mismatch("a number"))?;
            put_key(out, tag, FIXED64);
            out.extend_from_slice(&f.to_bits().to_le_bytes());
        }
        Ty::Message(index) => {
            let mut inner = Vec::new();
            encode_message(index, value, &mut inner, depth + 1)?;
            put_bytes(out, tag, &inner);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_written_and_read_as_go_does() {
        for (nanos, text) in [
            (0, "0s"),
            (1, "1ns"),
            (1_500, "1.5µs"),
            (100_000_000, "100ms"),
            (1_500_000_000, "1.5s"),
            (90_000_000_000, "1m30s"),
            (3_600_000_000_000, "1h0m0s"),
            (-2_000_000_000, "-2s"),
        ] {
            assert_eq!(format_duration(nanos), text);
            assert_eq!(parse_duration(text), Ok(nanos), "{text}");
        }
        assert!(parse_duration("5 parsecs").is_err());
    }

    #[test]
    fn a_body_without_the_magic_number_is_refused_by_name() {
        let err = decode(b"{\"kind\":\"ConfigMap\"}").expect_err("an error");
        assert!(err.to_string().contains("magic number"), "{err}");
    }

    #[test]
    fn a_truncated_body_is_an_error_not_a_panic() {
        let full = encode(&serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x"}, "data": {"a": "b"}
        }))
        .expect("encode");
        for cut in 5..full.len() {
            let _ = decode(&full[..cut]);
        }
        assert!(decode(&full[..full.len() - 1]).is_err());
    }
}
