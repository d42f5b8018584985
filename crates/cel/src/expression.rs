//! [`Expression`]: one CEL expression of a rule, compiled once and evaluated over objects.

use std::fmt;
use std::sync::Arc;

use cel::common::ast::IdedExpr;
use cel::objects::Key;
use cel::{Context, ExecutionError, Value as CelValue};
use serde_json::Value;

use crate::access::Access;
use crate::cost;
use crate::env::{compile_program, env};

/// The longest expression compiled, in characters. Lien's CRDs bound their expression fields
/// by the same number (`lien_api::MAX_EXPRESSION_CHARS`, held equal by a test in lien-decide):
/// this crate keeps its own copy so that it needs none of Lien's types.
pub const MAX_EXPRESSION_CHARS: usize = 4096;

/// A CEL expression that does not compile: the field it was written in and what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct CompileError {
    /// The field of the rule, e.g. `spec.keys.by`.
    pub field: String,
    /// What is wrong, and what to do about it.
    pub message: String,
}

/// Why an expression failed on one object. Display is a one-line reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// A field the expression reads is absent, as in Kubernetes: reading a missing field is an
    /// error, and `has(self.spec.x)` is the way to test for it.
    #[error("no such key: {key} (a field that may be absent must be tested with has() first)")]
    NoSuchKey {
        /// The missing key.
        key: String,
    },
    /// The expression yielded a value of the wrong type.
    #[error("type mismatch: expected {expected}, got {got}")]
    TypeMismatch {
        /// What the field needs, e.g. `list(string)`.
        expected: String,
        /// What the expression yielded, e.g. `int` or `list with element 1 of type int`.
        got: String,
    },
    /// The evaluation spent more than [`crate::COST_LIMIT`] units (see [`crate::cost`]).
    #[error(
        "cost limit exceeded: the evaluation needed more than {limit} units (nested comprehensions or values that grow with the object); simplify the expression"
    )]
    CostLimitExceeded {
        /// The limit.
        limit: u64,
    },
    /// The expression yielded a value of the right type that the field does not accept.
    #[error("invalid value: {0}")]
    InvalidValue(String),
    /// Any other evaluation error (no matching overload, division by zero, ...), as CEL words it.
    #[error("{0}")]
    Failed(String),
}

/// A compiled CEL expression over one object, bound to `self`. Compiled once (parse, check,
/// cost bound); evaluating it never panics and costs at most [`crate::COST_LIMIT`] units.
#[derive(Clone)]
pub struct Expression {
    field: Arc<str>,
    source: Arc<str>,
    metered: Arc<IdedExpr>,
    /// What the expression reads of `self`: only that is converted to CEL.
    access: Arc<Access>,
}

impl fmt::Debug for Expression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Expression")
            .field("field", &self.field)
            .field("source", &self.source)
            .finish()
    }
}

impl Expression {
    /// Compiles `source`, written in `field` (e.g. `spec.keys.of`): parses it, refuses what
    /// would fail for every object (unknown functions, unbound identifiers: only `self` is
    /// bound), refuses what is too large or nests comprehensions too deep, and meters it (see
    /// [`crate::cost`]).
    pub fn compile(field: &str, source: &str) -> Result<Expression, CompileError> {
        let error = |message: String| CompileError {
            field: field.to_string(),
            message,
        };
        if source.trim().is_empty() {
            return Err(error(
                "must not be empty: write a CEL expression over `self`".into(),
            ));
        }
        let chars = source.chars().count();
        if chars > MAX_EXPRESSION_CHARS {
            return Err(error(format!(
                "the expression is {chars} characters long, at most {}: simplify it",
                MAX_EXPRESSION_CHARS
            )));
        }
        let program =
            compile_program(source).map_err(|e| error(format!("syntax error: {}", e.trim())))?;
        let parsed = program.expression().clone();
        cost::check(&parsed).map_err(error)?;
        Ok(Expression {
            field: field.into(),
            source: source.into(),
            access: Arc::new(Access::of(&parsed)),
            metered: Arc::new(cost::meter(parsed)),
        })
    }

    /// The field the expression was written in.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// The expression as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    fn eval(&self, object: &Value) -> Result<CelValue, EvalError> {
        let mut ctx = Context::with_env(env());
        ctx.add_variable_from_value("self", self.access.to_cel(object));
        let metered = &self.metered;
        match cost::metered(|| CelValue::resolve(metered, &ctx)) {
            Err(_) => Err(EvalError::CostLimitExceeded {
                limit: cost::COST_LIMIT,
            }),
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(eval_error(e)),
        }
    }

    /// Evaluates to a `list(string)`; anything else (another type, a non-string element) is an
    /// [`EvalError::TypeMismatch`] naming what it got.
    pub fn eval_strings(&self, object: &Value) -> Result<Vec<String>, EvalError> {
        match self.eval(object)? {
            CelValue::List(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| match item {
                    CelValue::String(s) => Ok(s.to_string()),
                    other => Err(EvalError::TypeMismatch {
                        expected: "list(string)".into(),
                        got: format!("a list whose element {i} is {}", describe(other)),
                    }),
                })
                .collect(),
            other => Err(EvalError::TypeMismatch {
                expected: "list(string)".into(),
                got: describe(&other),
            }),
        }
    }

    /// Evaluates to a `bool`.
    pub fn eval_bool(&self, object: &Value) -> Result<bool, EvalError> {
        match self.eval(object)? {
            CelValue::Bool(b) => Ok(b),
            other => Err(EvalError::TypeMismatch {
                expected: "bool".into(),
                got: describe(&other),
            }),
        }
    }

    /// Evaluates to any value, as JSON (maps with string keys; an int stays an integer).
    pub fn eval_json(&self, object: &Value) -> Result<Value, EvalError> {
        let value = self.eval(object)?;
        cel_to_json(&value)
    }
}

fn eval_error(err: ExecutionError) -> EvalError {
    match err {
        ExecutionError::NoSuchKey(k) => EvalError::NoSuchKey { key: k.to_string() },
        // `metered` reports an exceeded budget before this is reached; kept so that the
        // wording stays right whatever happens.
        ExecutionError::FunctionError { function, .. } if function == "cost" => {
            EvalError::CostLimitExceeded {
                limit: cost::COST_LIMIT,
            }
        }
        ExecutionError::FunctionError { function, message } => {
            EvalError::Failed(format!("{function}: {message}"))
        }
        ExecutionError::UndeclaredReference(name) => {
            EvalError::Failed(format!("undeclared reference to '{name}'"))
        }
        other => EvalError::Failed(other.to_string()),
    }
}

/// A value's CEL type, for error messages: `int (3)`, `string`, `map`, `null`.
pub(crate) fn describe(value: &CelValue) -> String {
    match value {
        CelValue::List(_) => "list".into(),
        CelValue::Map(_) => "map".into(),
        CelValue::Function(..) => "function".into(),
        CelValue::Int(i) => format!("int ({i})"),
        CelValue::UInt(u) => format!("uint ({u})"),
        CelValue::Float(f) => format!("double ({f})"),
        CelValue::String(_) => "string".into(),
        CelValue::Bytes(_) => "bytes".into(),
        CelValue::Bool(b) => format!("bool ({b})"),
        CelValue::Duration(_) => "duration".into(),
        CelValue::Timestamp(_) => "timestamp".into(),
        CelValue::Opaque(o) => o.runtime_type_name().to_string(),
        CelValue::Struct(_) => "struct".into(),
        CelValue::Null => "null".into(),
    }
}

pub(crate) fn cel_to_json(value: &CelValue) -> Result<Value, EvalError> {
    Ok(match value {
        CelValue::Null => Value::Null,
        CelValue::Bool(b) => Value::Bool(*b),
        CelValue::Int(i) => Value::from(*i),
        CelValue::UInt(u) => Value::from(*u),
        CelValue::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .ok_or_else(|| EvalError::InvalidValue(format!("{f} has no JSON form")))?,
        CelValue::String(s) => Value::String(s.to_string()),
        CelValue::List(items) => {
            Value::Array(items.iter().map(cel_to_json).collect::<Result<_, _>>()?)
        }
        CelValue::Map(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map.map.iter() {
                let key = match k {
                    Key::String(s) => s.to_string(),
                    Key::Int(i) => i.to_string(),
                    Key::Uint(u) => u.to_string(),
                    Key::Bool(b) => b.to_string(),
                };
                out.insert(key, cel_to_json(v)?);
            }
            Value::Object(out)
        }
        CelValue::Duration(d) => {
            Value::String(format!("{}s", d.num_milliseconds() as f64 / 1000.0))
        }
        CelValue::Timestamp(t) => Value::String(t.to_rfc3339()),
        other => {
            return Err(EvalError::TypeMismatch {
                expected: "a value with a JSON form".into(),
                got: describe(other),
            });
        }
    })
}
