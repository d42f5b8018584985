//! The compiled CEL of a rule: [`DependencyProgram`] (a DependencyRule's `keys` and `when`) and
//! [`CascadeProgram`] (a CascadeRule's `children` and policy).

use lien_api::{CascadeRuleSpec, DependencyRuleSpec, PropagationPolicy};
use serde_json::Value;

use crate::expression::{CompileError, EvalError, Expression};

/// A DependencyRule's compiled `spec.keys.of`, `spec.keys.by` and `spec.when`.
#[derive(Debug, Clone)]
pub struct DependencyProgram {
    keys: Option<(Expression, Expression)>,
    when: Option<Expression>,
}

impl DependencyProgram {
    /// Compiles every expression of the rule; the errors name their fields
    /// (`spec.keys.of`, `spec.keys.by`, `spec.when`), all of them at once.
    pub fn compile(spec: &DependencyRuleSpec) -> Result<Self, Vec<CompileError>> {
        let mut errors = Vec::new();
        let mut compile = |field: &str, source: &str| {
            Expression::compile(field, source)
                .map_err(|e| errors.push(e))
                .ok()
        };
        let keys = spec.keys.as_ref().map(|k| {
            (
                compile("spec.keys.of", &k.of),
                compile("spec.keys.by", &k.by),
            )
        });
        let when = spec.when.as_ref().map(|w| compile("spec.when", w));
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(DependencyProgram {
            keys: keys.and_then(|(of, by)| Some((of?, by?))),
            when: when.flatten(),
        })
    }

    /// Whether the rule joins on keys (`spec.keys` is set).
    pub fn keyed(&self) -> bool {
        self.keys.is_some()
    }

    /// The keys of an `of` object (`[]` when the rule has no keys).
    pub fn keys_of(&self, object: &Value) -> Result<Vec<String>, EvalError> {
        match &self.keys {
            Some((of, _)) => of.eval_strings(object),
            None => Ok(Vec::new()),
        }
    }

    /// The keys of a `by` object (`[]` when the rule has no keys).
    pub fn keys_by(&self, object: &Value) -> Result<Vec<String>, EvalError> {
        match &self.keys {
            Some((_, by)) => by.eval_strings(object),
            None => Ok(Vec::new()),
        }
    }

    /// Whether a `by` object is a user (`true` when the rule has no `when`).
    pub fn when(&self, object: &Value) -> Result<bool, EvalError> {
        match &self.when {
            Some(w) => w.eval_bool(object),
            None => Ok(true),
        }
    }
}

/// A child a CascadeRule's `children` expression names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChildRef {
    /// The child's API version, e.g. `v1`.
    pub api_version: String,
    /// The child's kind.
    pub kind: String,
    /// The child's name.
    pub name: String,
    /// The child's namespace; `None` when the expression gave none (or an empty one): the
    /// parent's namespace for a namespaced kind.
    pub namespace: Option<String>,
}

/// A CascadeRule's compiled `spec.children` and `spec.propagationPolicyExpression`.
#[derive(Debug, Clone)]
pub struct CascadeProgram {
    children: Expression,
    policy: Option<Expression>,
    default_policy: PropagationPolicy,
}

impl CascadeProgram {
    /// Compiles the rule's expressions; errors name `spec.children` and
    /// `spec.propagationPolicyExpression`.
    pub fn compile(spec: &CascadeRuleSpec) -> Result<Self, Vec<CompileError>> {
        let children = Expression::compile("spec.children", &spec.children);
        let policy = spec
            .propagation_policy_expression
            .as_ref()
            .map(|p| Expression::compile("spec.propagationPolicyExpression", p))
            .transpose();
        match (children, policy) {
            (Ok(children), Ok(policy)) => Ok(CascadeProgram {
                children,
                policy,
                default_policy: spec.propagation_policy,
            }),
            (children, policy) => Err(children.err().into_iter().chain(policy.err()).collect()),
        }
    }

    /// The children of `parent`: a list of `{apiVersion, kind, name, namespace?}` maps, each
    /// with non-empty strings (`namespace` may be absent, null or empty).
    pub fn children(&self, parent: &Value) -> Result<Vec<ChildRef>, EvalError> {
        let value = self.children.eval_json(parent)?;
        let expected = || "list of {apiVersion, kind, name, namespace?}".to_string();
        let Value::Array(items) = value else {
            return Err(EvalError::TypeMismatch {
                expected: expected(),
                got: json_type(&value).into(),
            });
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let Value::Object(map) = item else {
                    return Err(EvalError::TypeMismatch {
                        expected: expected(),
                        got: format!("a list whose element {i} is {}", json_type(item)),
                    });
                };
                let field = |name: &str| match map.get(name) {
                    Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
                    Some(other) => Err(EvalError::InvalidValue(format!(
                        "child {i}: `{name}` must be a non-empty string, got {}",
                        json_type(other)
                    ))),
                    None => Err(EvalError::InvalidValue(format!(
                        "child {i}: `{name}` is missing (each child needs apiVersion, kind and name)"
                    ))),
                };
                let namespace = match map.get("namespace") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(s)) if s.is_empty() => None,
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(other) => {
                        return Err(EvalError::InvalidValue(format!(
                            "child {i}: `namespace` must be a string, got {}",
                            json_type(other)
                        )));
                    }
                };
                Ok(ChildRef {
                    api_version: field("apiVersion")?,
                    kind: field("kind")?,
                    name: field("name")?,
                    namespace,
                })
            })
            .collect()
    }

    /// The policy for `parent`: the expression's `'Foreground'` or `'Background'` when it
    /// yields one, `spec.propagationPolicy` when there is no expression or it yields `null`;
    /// any other value is an [`EvalError::InvalidValue`].
    pub fn policy(&self, parent: &Value) -> Result<PropagationPolicy, EvalError> {
        let Some(expr) = &self.policy else {
            return Ok(self.default_policy);
        };
        match expr.eval_json(parent)? {
            Value::Null => Ok(self.default_policy),
            Value::String(s) if s == "Foreground" => Ok(PropagationPolicy::Foreground),
            Value::String(s) if s == "Background" => Ok(PropagationPolicy::Background),
            Value::String(s) => Err(EvalError::InvalidValue(format!(
                "propagation policy {s:?}: expected 'Foreground' or 'Background'"
            ))),
            other => Err(EvalError::TypeMismatch {
                expected: "string ('Foreground' or 'Background')".into(),
                got: json_type(&other).into(),
            }),
        }
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "double",
        Value::Number(_) => "int",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}
