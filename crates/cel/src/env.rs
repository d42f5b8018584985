//! The environment every CEL expression of the project is compiled and evaluated in, the
//! process-wide compile cache, and the schema-less JSON → CEL conversion.
//!
//! The environment is the `cel` crate's standard library with its strings and lists extensions,
//! plus small Kubernetes library functions (`isSorted`, `sum`, `min`, `max`, list `indexOf` /
//! `lastIndexOf`, regex `find` / `findAll`) and the private cost-accounting functions of
//! [`crate::cost`] (named `@lien…`, which CEL source cannot spell). Programs are compiled once
//! per source text and cached for the life of the process: the text is immutable and compiling
//! does not depend on data.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cel::common::types::{DYN_TYPE, INT_TYPE, LIST_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::objects::{Key, Map as CelMap};
use cel::{Env, ExecutionError, Program, Value as CelValue};
use serde_json::Value;

/// Distinct sources the compile cache keeps before it starts over: rules and CRD validation
/// rules are few, but the cache must not grow without bound when someone submits endless
/// distinct expressions (each refused or not).
const CACHE_CAPACITY: usize = 10_000;

/// The shared environment.
pub fn env() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        // Extensions and our overloads only fail on duplicate declarations, which a fresh
        // stdlib cannot have; a failure would only lose the functions, never evaluation.
        let _ = env.add_extension(cel::extensions::strings);
        let _ = env.add_extension(cel::extensions::lists);
        let _ = add_kubernetes_library(&mut env);
        let _ = crate::cost::add_cost_functions(&mut env);
        Arc::new(env)
    })
    .clone()
}

/// A compiled program (macros expanded), or the compiler's complaint
/// (`ERROR: <input>:1:5: ...`). Cached per source text for the life of the process.
pub fn compile_program(source: &str) -> Result<Arc<Program>, String> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<Program>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Ok(guard) = cache.lock()
        && let Some(p) = guard.get(source)
    {
        return Ok(p.clone());
    }
    let env = env();
    // The `cel` crate's parser can panic on some malformed input; an expression submitted by a
    // user must never take a webhook or an API server down, so a panic is a compile error.
    let compiled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| env.compile(source)));
    let program = match compiled {
        Ok(Ok(p)) => Arc::new(p),
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err(format!("cannot parse {source:?}")),
    };
    if let Ok(mut guard) = cache.lock() {
        if guard.len() >= CACHE_CAPACITY {
            guard.clear();
        }
        guard.insert(source.to_string(), program.clone());
    }
    Ok(program)
}

/// Converts a JSON value to CEL without a schema, as Kubernetes does for schema-less
/// (`x-kubernetes-preserve-unknown-fields`) data: integers become `int` (`uint` beyond
/// `i64::MAX`), other numbers `double`, objects maps keyed by their raw keys.
pub fn json_to_cel(value: &Value) -> CelValue {
    match value {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => CelValue::Int(i),
            (None, Some(u)) => CelValue::UInt(u),
            _ => CelValue::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => CelValue::String(Arc::new(s.clone())),
        Value::Array(items) => CelValue::List(Arc::new(items.iter().map(json_to_cel).collect())),
        Value::Object(map) => {
            let out: HashMap<Key, CelValue> = map
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), json_to_cel(v)))
                .collect();
            CelValue::Map(CelMap { map: Arc::new(out) })
        }
    }
}

// ---- Kubernetes library functions -------------------------------------------------------------

type CelResult<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

fn values(args: &[CowVal<'_, '_>]) -> Result<Vec<CelValue>, ExecutionError> {
    args.iter()
        .map(|a| CelValue::try_from(a.as_ref()))
        .collect()
}

fn owned<'b, 'v>(value: CelValue) -> CelResult<'b, 'v> {
    let boxed: Box<dyn Val> = value.try_into()?;
    Ok(CowVal::Owned(boxed))
}

fn list_arg(values: &[CelValue], function: &str) -> Result<Arc<Vec<CelValue>>, ExecutionError> {
    match values.first() {
        Some(CelValue::List(l)) => Ok(l.clone()),
        _ => Err(ExecutionError::no_such_member_overload(function, vec![])),
    }
}

fn compare(
    a: &CelValue,
    b: &CelValue,
    function: &str,
) -> Result<std::cmp::Ordering, ExecutionError> {
    a.partial_cmp(b)
        .ok_or_else(|| ExecutionError::no_such_member_overload(function, vec![]))
}

fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let vals = values(&args)?;
    let list = list_arg(&vals, "isSorted")?;
    for pair in list.windows(2) {
        if compare(&pair[0], &pair[1], "isSorted")? == std::cmp::Ordering::Greater {
            return owned(CelValue::Bool(false));
        }
    }
    owned(CelValue::Bool(true))
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let vals = values(&args)?;
    let list = list_arg(&vals, "sum")?;
    let mut acc = match list.first() {
        Some(CelValue::Float(_)) => CelValue::Float(0.0),
        Some(CelValue::UInt(_)) => CelValue::UInt(0),
        Some(CelValue::Duration(_)) => CelValue::Duration(chrono::Duration::zero()),
        _ => CelValue::Int(0),
    };
    for item in list.iter() {
        acc = match (&acc, item) {
            (CelValue::Int(a), CelValue::Int(b)) => CelValue::Int(
                a.checked_add(*b)
                    .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
            ),
            (CelValue::UInt(a), CelValue::UInt(b)) => CelValue::UInt(
                a.checked_add(*b)
                    .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
            ),
            (CelValue::Float(a), CelValue::Float(b)) => CelValue::Float(a + b),
            (CelValue::Duration(a), CelValue::Duration(b)) => CelValue::Duration(*a + *b),
            _ => return Err(ExecutionError::no_such_member_overload("sum", vec![])),
        };
    }
    owned(acc)
}

fn extreme<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    want: std::cmp::Ordering,
) -> CelResult<'b, 'v> {
    let vals = values(&args)?;
    let list = list_arg(&vals, function)?;
    let mut best = list.first().cloned().ok_or_else(|| {
        ExecutionError::function_error(function, format!("{function} called on empty list"))
    })?;
    for item in list.iter().skip(1) {
        if compare(item, &best, function)? == want {
            best = item.clone();
        }
    }
    owned(best)
}

fn list_min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    extreme(args, "min", std::cmp::Ordering::Less)
}

fn list_max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    extreme(args, "max", std::cmp::Ordering::Greater)
}

fn list_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let vals = values(&args)?;
    let list = list_arg(&vals, "indexOf")?;
    let needle = vals.get(1).cloned().unwrap_or(CelValue::Null);
    let idx = list
        .iter()
        .position(|v| *v == needle)
        .map_or(-1, |i| i as i64);
    owned(CelValue::Int(idx))
}

fn list_last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let vals = values(&args)?;
    let list = list_arg(&vals, "lastIndexOf")?;
    let needle = vals.get(1).cloned().unwrap_or(CelValue::Null);
    let idx = list
        .iter()
        .rposition(|v| *v == needle)
        .map_or(-1, |i| i as i64);
    owned(CelValue::Int(idx))
}

fn regex_args(vals: &[CelValue], function: &str) -> Result<(String, regex::Regex), ExecutionError> {
    match (vals.first(), vals.get(1)) {
        (Some(CelValue::String(s)), Some(CelValue::String(re))) => {
            let re = regex::Regex::new(re)
                .map_err(|e| ExecutionError::function_error(function, e.to_string()))?;
            Ok((s.to_string(), re))
        }
        _ => Err(ExecutionError::no_such_member_overload(function, vec![])),
    }
}

fn find<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let vals = values(&args)?;
    let (s, re) = regex_args(&vals, "find")?;
    let found = re
        .find(&s)
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    owned(CelValue::String(Arc::new(found)))
}

fn find_all_impl<'b, 'v>(args: Vec<CowVal<'b, 'v>>, limited: bool) -> CelResult<'b, 'v> {
    let vals = values(&args)?;
    let (s, re) = regex_args(&vals, "findAll")?;
    let limit = match (limited, vals.get(2)) {
        (true, Some(CelValue::Int(n))) if *n >= 0 => Some(*n as usize),
        _ => None,
    };
    let found: Vec<CelValue> = re
        .find_iter(&s)
        .take(limit.unwrap_or(usize::MAX))
        .map(|m| CelValue::String(Arc::new(m.as_str().to_string())))
        .collect();
    owned(CelValue::List(Arc::new(found)))
}

fn find_all<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    find_all_impl(args, false)
}

fn find_all_n<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    find_all_impl(args, true)
}

pub(crate) fn add_kubernetes_library(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_member_overload("isSorted", "list.isSorted()", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("sum", "list.sum()", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list.min()", LIST_TYPE, vec![], list_min)?;
    env.add_member_overload("max", "list.max()", LIST_TYPE, vec![], list_max)?;
    env.add_member_overload(
        "indexOf",
        "list.indexOf(dyn)",
        LIST_TYPE,
        vec![DYN_TYPE],
        list_index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list.lastIndexOf(dyn)",
        LIST_TYPE,
        vec![DYN_TYPE],
        list_last_index_of,
    )?;
    env.add_member_overload(
        "find",
        "string.find(string)",
        STRING_TYPE,
        vec![STRING_TYPE],
        find,
    )?;
    env.add_member_overload(
        "findAll",
        "string.findAll(string)",
        STRING_TYPE,
        vec![STRING_TYPE],
        find_all,
    )?;
    env.add_member_overload(
        "findAll",
        "string.findAll(string,int)",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        find_all_n,
    )?;
    Ok(())
}
