//! apimachinery's `field.Error` constructors, printed the way `(*field.Error).ErrorBody` prints
//! them, since clients show these words verbatim.
//!
//! Go prints the offending value with `%v` for numbers and booleans, `%q` for strings and `%#v`
//! for everything else (JSON objects and arrays decode to `map[string]interface {}` and
//! `[]interface {}`); [`go_value`] reproduces that.

use serde_json::Value;

use crate::error::Cause;

pub const REQUIRED: &str = "FieldValueRequired";
pub const INVALID: &str = "FieldValueInvalid";
pub const NOT_SUPPORTED: &str = "FieldValueNotSupported";
pub const TYPE_INVALID: &str = "FieldValueTypeInvalid";
pub const TOO_LONG: &str = "FieldValueTooLong";
pub const TOO_MANY: &str = "FieldValueTooMany";
pub const DUPLICATE: &str = "FieldValueDuplicate";
pub const FORBIDDEN: &str = "FieldValueForbidden";

/// The path kube-apiserver prints for a nil `*field.Path`, as it does for errors of a rule on the
/// root of a custom resource.
pub const NIL_PATH: &str = "<nil>";

fn with_detail(head: String, detail: &str) -> String {
    if detail.is_empty() {
        head
    } else {
        format!("{head}: {detail}")
    }
}

/// `field.Required`: `Required value` plus an optional detail.
pub fn required(path: &str, detail: &str) -> Cause {
    Cause::new(REQUIRED, path, with_detail("Required value".into(), detail))
}

/// `field.Invalid`: `Invalid value: <value>: <detail>`.
pub fn invalid(path: &str, value: &Value, detail: &str) -> Cause {
    Cause::new(
        INVALID,
        path,
        with_detail(format!("Invalid value: {}", go_value(value)), detail),
    )
}

/// `field.TypeInvalid`: printed like `Invalid`, with its own reason.
pub fn type_invalid(path: &str, value: &Value, detail: &str) -> Cause {
    Cause::new(
        TYPE_INVALID,
        path,
        with_detail(format!("Invalid value: {}", go_value(value)), detail),
    )
}

/// `field.NotSupported`: `Unsupported value: <value>: supported values: "a", "b"`.
pub fn not_supported(path: &str, value: &Value, supported: &[String]) -> Cause {
    let detail = if supported.is_empty() {
        String::new()
    } else {
        let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        format!("supported values: {}", quoted.join(", "))
    };
    Cause::new(
        NOT_SUPPORTED,
        path,
        with_detail(format!("Unsupported value: {}", go_value(value)), &detail),
    )
}

/// `field.TooLong` (apimachinery ≥ 1.32): the value itself is not printed.
pub fn too_long(path: &str, max: i64) -> Cause {
    let unit = if max == 1 { "byte" } else { "bytes" };
    Cause::new(
        TOO_LONG,
        path,
        format!("Too long: may not be more than {max} {unit}"),
    )
}

/// `field.TooMany`: `Too many: <actual>: must have at most <max> items`.
pub fn too_many(path: &str, actual: i64, max: i64) -> Cause {
    let unit = if max == 1 { "item" } else { "items" };
    Cause::new(
        TOO_MANY,
        path,
        format!("Too many: {actual}: must have at most {max} {unit}"),
    )
}

/// `field.Duplicate`: `Duplicate value: <value>`.
pub fn duplicate(path: &str, value: &Value) -> Cause {
    Cause::new(
        DUPLICATE,
        path,
        format!("Duplicate value: {}", go_value(value)),
    )
}

/// `field.Forbidden`: `Forbidden` plus the detail; the value is never printed.
pub fn forbidden(path: &str, detail: &str) -> Cause {
    Cause::new(FORBIDDEN, path, with_detail("Forbidden".into(), detail))
}

/// A decoded JSON value as Go's `%+v` prints a `map[string]interface{}` and what it holds:
/// `map[data:map[x:1]]`, keys sorted, strings bare, lists `[a b]`, null `<nil>`.
pub fn go_plus_v(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(go_plus_v).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            format!(
                "map[{}]",
                entries
                    .iter()
                    .map(|(k, v)| format!("{k}:{}", go_plus_v(v)))
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        }
    }
}

/// A JSON value as `ErrorBody` prints it: numbers and booleans bare, strings (and `null`, which
/// Go replaces by the string "null") quoted, objects and arrays in Go syntax.
pub fn go_value(value: &Value) -> String {
    match value {
        Value::Null => go_quote("null"),
        Value::String(s) => go_quote(s),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::Array(_) | Value::Object(_) => go_sharp(value),
    }
}

/// `%#v` of a decoded JSON value inside an `interface{}`.
fn go_sharp(value: &Value) -> String {
    match value {
        Value::Null => "interface {}(nil)".into(),
        Value::String(s) => go_quote(s),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(go_sharp).collect();
            format!("[]interface {{}}{{{}}}", inner.join(", "))
        }
        Value::Object(map) => {
            // fmt sorts map keys.
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", go_quote(k), go_sharp(&map[k.as_str()])))
                .collect();
            format!("map[string]interface {{}}{{{}}}", inner.join(", "))
        }
    }
}

/// A JSON number as Go prints the `int64` or `float64` it decodes to.
pub fn go_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else if let Some(u) = n.as_u64() {
        u.to_string()
    } else {
        go_float(n.as_f64().unwrap_or(0.0))
    }
}

/// `%v` of a `float64`: `strconv.FormatFloat(f, 'g', -1, 64)`, the shortest representation, in
/// exponent form when the decimal exponent is below -4 or at least 6 (so `1e+06`).
pub fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    // Rust's `{:e}` gives the shortest round-tripping digits, e.g. `1.5e3`.
    let sci = format!("{f:e}");
    let (mantissa, exp) = match sci.split_once('e') {
        Some((m, e)) => (m.to_string(), e.parse::<i32>().unwrap_or(0)),
        None => (sci.clone(), 0),
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        // Plain notation with the same shortest digits.
        let s = format!("{f}");
        s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
    }
}

/// `strconv.Quote`: a double-quoted Go string literal.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_print_as_go_prints_them() {
        let cases = [
            (json!("x"), "\"x\""),
            (json!(null), "\"null\""),
            (json!(5), "5"),
            (json!(-5), "-5"),
            (json!(1.5), "1.5"),
            (json!(3.0), "3"),
            (json!(1e21), "1e+21"),
            (json!(1000000.0), "1e+06"),
            (json!(123456.0), "123456"),
            (json!(0.00001), "1e-05"),
            (json!(true), "true"),
            (json!("a\"b\n"), "\"a\\\"b\\n\""),
            (
                json!({"b": [1, "x"], "a": null}),
                "map[string]interface {}{\"a\":interface {}(nil), \"b\":[]interface {}{1, \"x\"}}",
            ),
        ];
        for (value, want) in cases {
            assert_eq!(go_value(&value), want, "{value}");
        }
    }

    #[test]
    fn constructors_match_apimachinery_wording() {
        assert_eq!(required("spec.a", "").message, "Required value");
        assert_eq!(
            not_supported("spec.a", &json!("x"), &["a".into(), "b".into()]).message,
            "Unsupported value: \"x\": supported values: \"a\", \"b\""
        );
        assert_eq!(
            too_many("spec.l", 4, 3).message,
            "Too many: 4: must have at most 3 items"
        );
        assert_eq!(
            too_long("spec.s", 1).message,
            "Too long: may not be more than 1 byte"
        );
        assert_eq!(forbidden("spec", "no").message, "Forbidden: no");
        assert_eq!(
            duplicate("spec.l[1]", &json!("a")).message,
            "Duplicate value: \"a\""
        );
    }
}
