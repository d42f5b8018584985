//! TEMPORARY stand-in for the `lien-cel` crate (branch `cel`), with its agreed API, so the
//! controller builds before that crate lands. It understands only `[self.a.b, ...]` (keys),
//! `self.a.b == 'x'` and `true`/`false` (when). Deleted when `cel` is merged.
#![allow(dead_code, missing_docs)]

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    #[error("no such key: {0}")]
    NoSuchKey(String),
    #[error("type mismatch: {0}")]
    Type(String),
}

#[derive(Debug, Clone)]
enum Expr {
    List(Vec<Vec<String>>),
    Eq(Vec<String>, String),
    Bool(bool),
}

#[derive(Debug, Clone)]
pub struct Expression(Expr);

fn path(s: &str) -> Option<Vec<String>> {
    let rest = s.trim().strip_prefix("self.")?;
    Some(rest.split('.').map(str::to_owned).collect())
}

impl Expression {
    pub fn compile(field: &str, source: &str) -> Result<Expression, CompileError> {
        let err = |m: &str| CompileError {
            field: field.to_owned(),
            message: m.to_owned(),
        };
        let s = source.trim();
        if s == "true" || s == "false" {
            return Ok(Self(Expr::Bool(s == "true")));
        }
        if let Some(inner) = s.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            let paths = inner
                .split(',')
                .map(path)
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| err("Syntax error: expected a path"))?;
            return Ok(Self(Expr::List(paths)));
        }
        if let Some((l, r)) = s.split_once("==") {
            let p = path(l).ok_or_else(|| err("Syntax error: expected a path"))?;
            let lit = r.trim().trim_matches('\'').to_owned();
            return Ok(Self(Expr::Eq(p, lit)));
        }
        Err(err("Syntax error: mismatched input"))
    }

    fn get<'a>(object: &'a Value, p: &[String]) -> Result<&'a Value, EvalError> {
        let mut v = object;
        for k in p {
            v = v.get(k).ok_or_else(|| EvalError::NoSuchKey(k.clone()))?;
        }
        Ok(v)
    }

    pub fn eval_strings(&self, object: &Value) -> Result<Vec<String>, EvalError> {
        match &self.0 {
            Expr::List(paths) => paths
                .iter()
                .map(|p| match Self::get(object, p)? {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(EvalError::Type(format!("{other} is not a string"))),
                })
                .collect(),
            _ => Err(EvalError::Type("not a list".into())),
        }
    }

    pub fn eval_bool(&self, object: &Value) -> Result<bool, EvalError> {
        match &self.0 {
            Expr::Bool(b) => Ok(*b),
            Expr::Eq(p, lit) => Ok(Self::get(object, p)?.as_str() == Some(lit.as_str())),
            Expr::List(_) => Err(EvalError::Type("not a bool".into())),
        }
    }
}

#[derive(Debug, Clone)]
pub struct DependencyProgram {
    keys: Option<(Expression, Expression)>,
    when: Option<Expression>,
}

impl DependencyProgram {
    pub fn compile(spec: &lien_api::DependencyRuleSpec) -> Result<Self, Vec<CompileError>> {
        let mut errors = Vec::new();
        let mut keys = None;
        if let Some(k) = &spec.keys {
            match (
                Expression::compile("spec.keys.of", &k.of),
                Expression::compile("spec.keys.by", &k.by),
            ) {
                (Ok(o), Ok(b)) => keys = Some((o, b)),
                (o, b) => {
                    errors.extend(o.err());
                    errors.extend(b.err());
                }
            }
        }
        let when = match spec
            .when
            .as_deref()
            .map(|w| Expression::compile("spec.when", w))
        {
            Some(Ok(w)) => Some(w),
            Some(Err(e)) => {
                errors.push(e);
                None
            }
            None => None,
        };
        if errors.is_empty() {
            Ok(Self { keys, when })
        } else {
            Err(errors)
        }
    }

    pub fn keyed(&self) -> bool {
        self.keys.is_some()
    }

    pub fn keys_of(&self, object: &Value) -> Result<Vec<String>, EvalError> {
        self.keys
            .as_ref()
            .map_or(Ok(Vec::new()), |(o, _)| o.eval_strings(object))
    }

    pub fn keys_by(&self, object: &Value) -> Result<Vec<String>, EvalError> {
        self.keys
            .as_ref()
            .map_or(Ok(Vec::new()), |(_, b)| b.eval_strings(object))
    }

    pub fn when(&self, object: &Value) -> Result<bool, EvalError> {
        self.when.as_ref().map_or(Ok(true), |w| w.eval_bool(object))
    }
}
