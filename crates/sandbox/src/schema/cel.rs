//! `x-kubernetes-validations`: CEL rules evaluated the way apiextensions-apiserver's
//! `cel.Validator` evaluates them.
//!
//! Data model: a JSON value becomes a CEL value guided by its schema node, as Kubernetes does:
//! `integer` → int, `number` → double (even when the JSON has no fraction), strings of format
//! `byte` / `date-time` / `duration` → bytes / timestamp / duration, objects with `properties` →
//! maps of their *declared* fields only, with names that are not CEL identifiers escaped
//! (`__dash__`, `__dot__`, ...), objects with `additionalProperties` → maps keyed by the raw keys.
//!
//! The environment, the Kubernetes library functions and the compile cache are Lien's one CEL
//! engine, `lien-cel` (the `cel` crate's standard library with its strings and lists extensions,
//! plus `isSorted`, `sum`, `min`, `max`, list `indexOf` / `lastIndexOf`, regex `find` /
//! `findAll`); this module keeps what only CRD validation does: the schema-guided conversion and
//! the evaluation of `x-kubernetes-validations`.

use std::collections::HashMap;
use std::sync::Arc;

use lien_cel::cel::common::types::CelOptional;
use lien_cel::cel::common::value::Val;
use lien_cel::cel::objects::{Key, Map as CelMap};
use lien_cel::cel::{Context, ExecutionError, Program, Value as CelValue};
use lien_cel::env;
use serde_json::{Value, json};

use super::field;
use super::node::Node;
use crate::error::Cause;

/// Identifiers CEL reserves: a property so named is reached as `__name__`.
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The name a property has inside CEL, or `None` when Kubernetes makes it inaccessible.
pub fn escape_property(name: &str) -> Option<String> {
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut chars = name.chars();
    let first = chars.next()?;
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/');
    if first.is_ascii_digit() || !allowed(first) || !name.chars().all(allowed) {
        return None;
    }
    Some(
        name.replace("__", "__underscores__")
            .replace('.', "__dot__")
            .replace('-', "__dash__")
            .replace('/', "__slash__"),
    )
}

/// A compiled rule, or the compiler's complaint (`ERROR: <input>:1:5: ...`). Compiled by Lien's
/// one CEL engine (`lien-cel`: its environment and process-wide cache), after cel-go's check of
/// reserved identifiers, which only CRD validation rules apply.
pub fn compile(source: &str) -> Result<Arc<Program>, String> {
    reject_reserved_identifiers(source)?;
    lien_cel::compile_program(source)
}

/// cel-go refuses CEL's reserved words as identifiers (a field named `namespace` is reached as
/// `__namespace__`), while the `cel` crate's parser accepts some of them. `true`, `false`,
/// `null` and `in` are literals and an operator, not identifiers.
fn reject_reserved_identifiers(source: &str) -> Result<(), String> {
    let bytes = source.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'"' || c == b'\'' {
            // Skip a string literal (escapes included).
            i += 1;
            while i < bytes.len() && bytes[i] != c {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let word = &source[start..i];
            if RESERVED.contains(&word) && !matches!(word, "true" | "false" | "null" | "in") {
                let line = source[..start].matches('\n').count() + 1;
                let col = start - source[..start].rfind('\n').map_or(0, |n| n + 1) + 1;
                return Err(format!(
                    "ERROR: <input>:{line}:{col}: reserved identifier: {word}"
                ));
            }
        } else {
            i += 1;
        }
    }
    Ok(())
}

/// Converts a JSON value to CEL, guided by its schema node (see the module doc).
pub fn to_cel(node: Node<'_>, value: &Value, root: bool) -> CelValue {
    match value {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => {
            if node.type_name() == "number" {
                CelValue::Float(n.as_f64().unwrap_or(0.0))
            } else if let Some(i) = n.as_i64() {
                CelValue::Int(i)
            } else if let Some(u) = n.as_u64() {
                CelValue::UInt(u)
            } else {
                CelValue::Float(n.as_f64().unwrap_or(0.0))
            }
        }
        Value::String(s) => string_to_cel(node, s),
        Value::Array(items) => {
            let item = node.items().unwrap_or(Node::EMPTY);
            CelValue::List(Arc::new(
                items.iter().map(|v| to_cel(item, v, false)).collect(),
            ))
        }
        Value::Object(map) => {
            let mut out: HashMap<Key, CelValue> = HashMap::new();
            if let Some(additional) = node.additional_properties_schema() {
                for (k, v) in map {
                    out.insert(
                        Key::String(Arc::new(k.clone())),
                        to_cel(additional, v, false),
                    );
                }
            } else if node.properties_map().is_some() || root || node.embedded_resource() {
                for (k, v) in map {
                    let schema = if let Some(p) = node.property(k) {
                        p
                    } else if (root || node.embedded_resource())
                        && matches!(k.as_str(), "apiVersion" | "kind" | "metadata")
                    {
                        Node::EMPTY
                    } else {
                        continue;
                    };
                    let Some(name) = escape_property(k) else {
                        continue;
                    };
                    let converted = if k == "metadata" && (root || node.embedded_resource()) {
                        metadata_to_cel(v)
                    } else {
                        to_cel(schema, v, false)
                    };
                    out.insert(Key::String(Arc::new(name)), converted);
                }
            } else {
                // Schemaless (preserve-unknown-fields) objects are dynamic maps, converted as
                // Lien's CEL engine converts any schema-less JSON.
                return lien_cel::json_to_cel(value);
            }
            CelValue::Map(CelMap { map: Arc::new(out) })
        }
    }
}

/// Rules see only `metadata.name` and `metadata.generateName` of a resource.
fn metadata_to_cel(meta: &Value) -> CelValue {
    let mut out: HashMap<Key, CelValue> = HashMap::new();
    for k in ["name", "generateName"] {
        if let Some(Value::String(s)) = meta.get(k) {
            out.insert(
                Key::String(Arc::new(k.to_string())),
                CelValue::String(Arc::new(s.clone())),
            );
        }
    }
    CelValue::Map(CelMap { map: Arc::new(out) })
}

fn string_to_cel(node: Node<'_>, s: &str) -> CelValue {
    let plain = || CelValue::String(Arc::new(s.to_string()));
    match node.str_of("format").unwrap_or("") {
        "byte" => {
            use base64::Engine;
            match base64::engine::general_purpose::STANDARD.decode(s) {
                Ok(b) => CelValue::Bytes(Arc::new(b)),
                Err(_) => plain(),
            }
        }
        "date-time" => match chrono::DateTime::parse_from_rfc3339(s) {
            Ok(t) => CelValue::Timestamp(t),
            Err(_) => plain(),
        },
        "duration" => match parse_go_duration(s) {
            Some(d) => CelValue::Duration(d),
            None => plain(),
        },
        _ => plain(),
    }
}

/// Go's `time.ParseDuration`: `1h30m`, `1.5s`, `-300ms`, `0`.
pub fn parse_go_duration(s: &str) -> Option<chrono::Duration> {
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(chrono::Duration::zero());
    }
    if rest.is_empty() {
        return None;
    }
    let mut total_ns: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let number: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total_ns += number * scale;
    }
    let ns = if neg { -total_ns } else { total_ns };
    Some(chrono::Duration::nanoseconds(ns as i64))
}

/// The error text cel-go would print for an evaluation error, which kube-apiserver embeds.
pub(crate) fn eval_error_text(err: &ExecutionError) -> String {
    match err {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::DivisionByZero(_) => "division by zero".into(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".into(),
        ExecutionError::IndexOutOfBounds(v) => match v {
            CelValue::Int(i) => format!("index out of bounds: {i}"),
            other => format!("index out of bounds: {other:?}"),
        },
        ExecutionError::Overflow(..) => "integer overflow".into(),
        ExecutionError::FunctionError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

fn is_no_such_overload(err: &ExecutionError) -> bool {
    matches!(
        err,
        ExecutionError::NoSuchOverload(_)
            | ExecutionError::ValuesNotComparable(..)
            | ExecutionError::UnsupportedBinaryOperator(..)
            | ExecutionError::UnexpectedType { .. }
    )
}

/// What a rule node carries to evaluation.
pub struct RuleTarget<'a> {
    pub node: Node<'a>,
    pub value: &'a Value,
    pub old: Option<&'a Value>,
    /// The field path kube-apiserver reports (`<nil>` at the root).
    pub path: &'a str,
    pub root: bool,
}

/// Evaluates every rule of `target.node` and appends the failures to `errs`.
///
/// `skip_plain` leaves out rules that do not use `oldSelf`: on update, an unchanged value is not
/// re-validated (CRD validation ratcheting), but transition rules still run.
pub fn evaluate_rules(target: &RuleTarget<'_>, skip_plain: bool, errs: &mut Vec<Cause>) {
    let type_value = json!(target.node.type_name());
    let mut self_val: Option<CelValue> = None;
    let mut old_val: Option<CelValue> = None;
    for rule in target.node.validations() {
        let source = rule.get("rule").and_then(Value::as_str).unwrap_or("");
        let Ok(program) = compile(source) else {
            // validate_crd_schema rejects such a CRD; nothing sensible to evaluate here.
            continue;
        };
        let uses_old = program.references().has_variable("oldSelf");
        let optional_old = rule
            .get("optionalOldSelf")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if uses_old && target.old.is_none() && !optional_old {
            continue;
        }
        if !uses_old && skip_plain {
            continue;
        }
        let self_cel = self_val
            .get_or_insert_with(|| to_cel(target.node, target.value, target.root))
            .clone();
        let mut ctx = Context::with_env(env());
        bind(&mut ctx, "self", self_cel.clone());
        if uses_old {
            let old_cel = target.old.map(|o| {
                old_val
                    .get_or_insert_with(|| to_cel(target.node, o, target.root))
                    .clone()
            });
            if optional_old {
                let opt = match old_cel.and_then(|v| Box::<dyn Val>::try_from(v).ok()) {
                    Some(b) => CelOptional::of(b),
                    None => CelOptional::none(),
                };
                ctx.add_variable_as_val("oldSelf", Box::new(opt));
            } else if let Some(old_cel) = old_cel {
                bind(&mut ctx, "oldSelf", old_cel);
            }
        }
        let rule_text = rule_error_string(rule, source);
        let path = rule_path(target.path, rule);
        match program.execute(&ctx) {
            Ok(CelValue::Bool(true)) => {}
            Ok(CelValue::Bool(false)) => {
                let detail = message_expression(rule, &ctx)
                    .unwrap_or_else(|| rule_message_or_default(rule, source));
                errs.push(error_for_reason(rule, &path, &type_value, &detail));
            }
            Ok(_) => {
                errs.push(field::invalid(
                    target.path,
                    &type_value,
                    &format!("rule did not evaluate to a bool: {rule_text}"),
                ));
            }
            Err(e) if is_no_such_overload(&e) => errs.push(error_for_reason(
                rule,
                target.path,
                &type_value,
                &format!(
                    "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {rule_text}"
                ),
            )),
            Err(e) => errs.push(error_for_reason(
                rule,
                target.path,
                &type_value,
                &format!("{} evaluating rule: {rule_text}", eval_error_text(&e)),
            )),
        }
    }
}

fn bind(ctx: &mut Context<'_, '_>, name: &str, value: CelValue) {
    if let Ok(b) = Box::<dyn Val>::try_from(value) {
        ctx.add_variable_as_val(name, b);
    }
}

/// The field a failure is reported on: the rule's node, plus its `fieldPath` if any.
fn rule_path(base: &str, rule: &Value) -> String {
    let Some(fp) = rule.get("fieldPath").and_then(Value::as_str) else {
        return base.to_string();
    };
    let fp = fp.strip_prefix('.').unwrap_or(fp);
    if fp.is_empty() {
        base.to_string()
    } else if base == field::NIL_PATH {
        fp.to_string()
    } else {
        format!("{base}.{fp}")
    }
}

/// `messageExpression`'s result, unless it fails, is not a string, is blank or spans lines, in
/// which case kube-apiserver falls back to `message` (or the default).
fn message_expression(rule: &Value, ctx: &Context<'_, '_>) -> Option<String> {
    let source = rule.get("messageExpression").and_then(Value::as_str)?;
    let program = compile(source).ok()?;
    match program.execute(ctx) {
        Ok(CelValue::String(s)) if !s.trim().is_empty() && !s.contains('\n') => Some(s.to_string()),
        _ => None,
    }
}

fn rule_error_string(rule: &Value, source: &str) -> String {
    match rule.get("message").and_then(Value::as_str) {
        Some(m) if !m.is_empty() => m.trim().to_string(),
        _ => source.trim().to_string(),
    }
}

fn rule_message_or_default(rule: &Value, source: &str) -> String {
    match rule.get("message").and_then(Value::as_str) {
        Some(m) if !m.is_empty() => m.trim().to_string(),
        _ => format!("failed rule: {}", source.trim()),
    }
}

/// `fieldErrorForReason`: the rule's `reason` picks the field error type.
fn error_for_reason(rule: &Value, path: &str, type_value: &Value, detail: &str) -> Cause {
    match rule.get("reason").and_then(Value::as_str) {
        Some(field::FORBIDDEN) => field::forbidden(path, detail),
        Some(field::REQUIRED) => field::required(path, detail),
        Some(field::DUPLICATE) => field::duplicate(path, type_value),
        _ => field::invalid(path, type_value, detail),
    }
}
