//! The PATCH verbs and field ownership (`metadata.managedFields`), as kube-apiserver does them.
//!
//! Data model: objects are `serde_json::Value`s with no Go types behind them, so the per-field
//! knowledge kube-apiserver reads from struct tags (which lists merge by which key, which structs
//! are atomic) lives in a small table, [`schema`], keyed by API group, kind and the field-name
//! path from the root. Everything else is generic:
//!
//! * [`json_patch`] (RFC 6902) and [`merge_patch`] (RFC 7386) need no schema.
//! * [`strategic_merge_patch`] walks the patch against the live object, merging lists whose
//!   field has a merge key and obeying the `$patch`, `$retainKeys`, `$setElementOrder/…` and
//!   `$deleteFromPrimitiveList/…` directives ([`strategic`]).
//! * Ownership is a set of field paths per manager ([`fieldset`]): `f:` field names, `k:` keys
//!   of associative-list items, `v:` set members. [`managed_fields`] reads and writes the
//!   `FieldsV1` entries and records non-apply writes (operation `Update`); [`apply`] implements
//!   server-side apply: merge, prune what the applier stopped applying, detect conflicts.
//!
//! Errors are [`ApiError`]s worded as kube-apiserver words them, down to the Go decoder messages
//! that reach the client for malformed bodies.

// `ApiError` carries a `Status` body and is what the rest of the crate returns; boxing it here
// alone would only make the callers unwrap a different shape.
#![allow(clippy::result_large_err)]

mod apply;
mod builtin_fields;
mod fieldset;
mod managed_fields;
mod schema;
mod strategic;

use serde_json::Value;

use crate::error::{ApiError, Cause};

pub use apply::{server_side_apply, server_side_apply_status};
pub use managed_fields::{Typed, record_update};
pub use strategic::strategic_merge_patch;

/// The four PATCH content types kube-apiserver accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Json,
    Merge,
    StrategicMerge,
    Apply,
}

impl PatchKind {
    /// The kind for a `Content-Type` header. Like kube-apiserver, only what precedes a `;` is
    /// looked at, and it must match exactly (no case folding, no trimming).
    pub fn from_content_type(content_type: &str) -> Option<PatchKind> {
        let base = match content_type.find(';') {
            Some(i) if i > 0 => &content_type[..i],
            _ => content_type,
        };
        match base {
            "application/json-patch+json" => Some(PatchKind::Json),
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/strategic-merge-patch+json" => Some(PatchKind::StrategicMerge),
            "application/apply-patch+yaml" => Some(PatchKind::Apply),
            _ => None,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            PatchKind::Json => "application/json-patch+json",
            PatchKind::Merge => "application/merge-patch+json",
            PatchKind::StrategicMerge => "application/strategic-merge-patch+json",
            PatchKind::Apply => "application/apply-patch+yaml",
        }
    }
}

/// kube-apiserver refuses JSON patches longer than this (`maxJSONPatchOperations`).
const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// What kube-apiserver answers when a JSON patch or strategic merge patch cannot be applied to
/// the object: `NewGenericServerResponse(422, …)`, whose message hides the reason.
pub(crate) fn rejected_patch() -> ApiError {
    ApiError::new(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
    )
    .with_details(serde_json::json!({}))
}

/// A plain Go error that reached the handler: a 500 `Status` with an empty (Unknown) reason.
pub(crate) fn unknown_error(message: impl Into<String>) -> ApiError {
    ApiError::new(500, "", message)
}

/// The name Go's `encoding/json` gives a JSON value's type in "cannot unmarshal" errors.
pub(crate) fn go_json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Parses a JSON body, wording failures as Go's `encoding/json` does (the client sees them).
pub(crate) fn parse_json(body: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(body).map_err(|e| {
        if e.is_eof() {
            return "unexpected end of JSON input".to_string();
        }
        // serde reports 1-based line/column; find the offending byte to quote it as Go does.
        let mut line = 1;
        let mut offset = 0;
        for (i, b) in body.iter().enumerate() {
            if line == e.line() {
                offset = i + e.column().saturating_sub(1);
                break;
            }
            if *b == b'\n' {
                line += 1;
            }
        }
        match body.get(offset) {
            Some(c) if c.is_ascii_graphic() => {
                format!(
                    "invalid character '{}' looking for beginning of value",
                    *c as char
                )
            }
            _ => format!("invalid character looking for beginning of value: {e}"),
        }
    })
}

/// RFC 6902 JSON patch. Malformed bodies are 400s with the decoder's words; a patch that does
/// not apply (missing path, failed `test`, unknown op) is kube-apiserver's opaque 422.
pub fn json_patch(target: &Value, body: &[u8]) -> Result<Value, ApiError> {
    let parsed = parse_json(body).map_err(ApiError::bad_request)?;
    let ops = match parsed {
        Value::Null => Vec::new(),
        Value::Array(ops) => ops,
        other => {
            return Err(ApiError::bad_request(format!(
                "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
                go_json_type(&other)
            )));
        }
    };
    if let Some(bad) = ops.iter().find(|op| !op.is_object() && !op.is_null()) {
        return Err(ApiError::bad_request(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
            go_json_type(bad)
        )));
    }
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(ApiError::too_large(format!(
            "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
            ops.len()
        )));
    }
    // The Go library only discovers unknown ops and missing members while applying, so those
    // are the 422, not a 400.
    let patch: json_patch::Patch =
        serde_json::from_value(Value::Array(ops)).map_err(|_| rejected_patch())?;
    let mut doc = target.clone();
    json_patch::patch(&mut doc, &patch).map_err(|_| rejected_patch())?;
    Ok(doc)
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &Value, body: &[u8]) -> Result<Value, ApiError> {
    let bad = || ApiError::bad_request("Invalid JSON Patch");
    let patch = parse_json(body).map_err(|_| bad())?;
    match &patch {
        Value::Object(_) => {
            let mut doc = target.clone();
            json_patch::merge(&mut doc, &patch);
            Ok(doc)
        }
        Value::Array(items) => {
            // The Go library returns the array itself, which then fails to decode as an object.
            let result = Value::Array(items.clone());
            Err(ApiError::invalid(
                "",
                "",
                "",
                vec![Cause::new(
                    "FieldValueInvalid",
                    "patch",
                    format!(
                        "Invalid value: {}: json: cannot unmarshal array into Go value of type map[string]interface {{}}",
                        serde_json::to_string(&result.to_string()).unwrap_or_default()
                    ),
                )],
            ))
        }
        _ => Err(bad()),
    }
}

/// Parses an `application/apply-patch+yaml` body (YAML, of which JSON is a subset) to an object.
pub fn parse_apply_body(body: &[u8]) -> Result<Value, ApiError> {
    // Refused before the YAML parser spends O(depth²) on it (`crate::nesting`).
    if crate::nesting::too_deep(body) {
        return Err(ApiError::bad_request(format!(
            "error decoding YAML: recursion limit exceeded: the body is nested deeper than {} levels",
            crate::nesting::MAX_DEPTH
        )));
    }
    let value: Value = serde_yaml_ng::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    match value {
        Value::Object(_) => Ok(value),
        // An empty document decodes to nothing, which leaves Go's target map empty.
        Value::Null => Ok(Value::Object(serde_json::Map::new())),
        other => Err(ApiError::bad_request(format!(
            "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            go_json_type(&other)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm() -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "c", "labels": {"a": "1"}}, "data": {"k": "v"}})
    }

    #[test]
    fn content_types() {
        let cases = [
            ("application/json-patch+json", Some(PatchKind::Json)),
            ("application/merge-patch+json", Some(PatchKind::Merge)),
            (
                "application/strategic-merge-patch+json; charset=utf-8",
                Some(PatchKind::StrategicMerge),
            ),
            ("application/apply-patch+yaml", Some(PatchKind::Apply)),
            ("application/json", None),
            ("Application/Merge-Patch+json", None),
            ("application/merge-patch+json ; charset=utf-8", None),
            ("", None),
        ];
        for (ct, want) in cases {
            assert_eq!(PatchKind::from_content_type(ct), want, "{ct}");
            if let Some(k) = want {
                assert_eq!(PatchKind::from_content_type(k.content_type()), want);
            }
        }
    }

    #[test]
    fn json_patch_table() {
        struct Case {
            name: &'static str,
            body: &'static str,
            want: Result<Value, (u16, &'static str)>,
        }
        let rejected = "the server rejected our request due to an error in our request";
        let cases = [
            Case {
                name: "add and replace",
                body: r#"[{"op":"add","path":"/data/x","value":"y"},{"op":"replace","path":"/metadata/labels/a","value":"2"}]"#,
                want: Ok(json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "c", "labels": {"a": "2"}}, "data": {"k": "v", "x": "y"}})),
            },
            Case {
                name: "remove and passing test",
                body: r#"[{"op":"test","path":"/data/k","value":"v"},{"op":"remove","path":"/data/k"}]"#,
                want: Ok(json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "c", "labels": {"a": "1"}}, "data": {}})),
            },
            Case {
                name: "null is an empty patch",
                body: "null",
                want: Ok(cm()),
            },
            Case {
                name: "failed test",
                body: r#"[{"op":"test","path":"/data/k","value":"other"}]"#,
                want: Err((422, rejected)),
            },
            Case {
                name: "missing parent",
                body: r#"[{"op":"add","path":"/spec/x","value":1}]"#,
                want: Err((422, rejected)),
            },
            Case {
                name: "unknown op",
                body: r#"[{"op":"frob","path":"/data"}]"#,
                want: Err((422, rejected)),
            },
            Case {
                name: "object body",
                body: r#"{"op":"add"}"#,
                want: Err((
                    400,
                    "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
                )),
            },
            Case {
                name: "array of numbers",
                body: "[1]",
                want: Err((
                    400,
                    "json: cannot unmarshal number into Go value of type jsonpatch.Operation",
                )),
            },
            Case {
                name: "not json",
                body: "[x",
                want: Err((400, "invalid character 'x' looking for beginning of value")),
            },
            Case {
                name: "truncated",
                body: "[",
                want: Err((400, "unexpected end of JSON input")),
            },
        ];
        for c in cases {
            let got = json_patch(&cm(), c.body.as_bytes());
            match (got, c.want) {
                (Ok(v), Ok(w)) => assert_eq!(v, w, "{}", c.name),
                (Err(e), Err((code, msg))) => {
                    assert_eq!((e.code, e.message.as_str()), (code, msg), "{}", c.name);
                    if code == 422 {
                        assert_eq!(e.reason, "Invalid");
                        assert_eq!(e.to_status()["details"], json!({}));
                    } else {
                        assert_eq!(e.reason, "BadRequest");
                    }
                }
                (got, want) => panic!("{}: got {got:?}, want {want:?}", c.name),
            }
        }
    }

    #[test]
    fn json_patch_too_many_operations() {
        let ops: Vec<Value> = (0..10_001)
            .map(|_| json!({"op": "test", "path": "/kind", "value": "ConfigMap"}))
            .collect();
        let body = serde_json::to_vec(&ops).expect("encodes");
        let e = json_patch(&cm(), &body).expect_err("too many");
        assert_eq!(e.code, 413);
        assert_eq!(
            e.message,
            "The allowed maximum operations in a JSON patch is 10000, got 10001"
        );
    }

    #[test]
    fn merge_patch_table() {
        let cases: [(&str, &str, Result<Value, u16>); 6] = [
            (
                "set and delete",
                r#"{"data":{"k":null,"n":"1"},"metadata":{"labels":{"b":"2"}}}"#,
                Ok(json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "c", "labels": {"a": "1", "b": "2"}}, "data": {"n": "1"}})),
            ),
            (
                "lists are replaced",
                r#"{"metadata":{"finalizers":["x"]}}"#,
                Ok(json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "c", "labels": {"a": "1"}, "finalizers": ["x"]}, "data": {"k": "v"}})),
            ),
            ("null body", "null", Err(400)),
            ("not json", "{", Err(400)),
            ("string", r#""x""#, Err(400)),
            ("array", "[1]", Err(422)),
        ];
        for (name, body, want) in cases {
            match (merge_patch(&cm(), body.as_bytes()), want) {
                (Ok(v), Ok(w)) => assert_eq!(v, w, "{name}"),
                (Err(e), Err(code)) => {
                    assert_eq!(e.code, code, "{name}");
                    if code == 400 {
                        assert_eq!(e.message, "Invalid JSON Patch");
                    }
                }
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn apply_bodies() {
        let yaml = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: v\n";
        assert_eq!(
            parse_apply_body(yaml).expect("yaml"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}})
        );
        let js = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}"#;
        assert_eq!(parse_apply_body(js).expect("json")["metadata"]["name"], "c");
        assert_eq!(parse_apply_body(b"").expect("empty"), json!({}));
        let e = parse_apply_body(b"- a\n- b\n").expect_err("list");
        assert_eq!(e.code, 400);
        assert!(
            e.message
                .ends_with("cannot unmarshal array into Go value of type map[string]interface {}")
        );
        let e = parse_apply_body(b"a: [").expect_err("broken");
        assert!(
            e.message.starts_with("error decoding YAML: "),
            "{}",
            e.message
        );
    }
}
