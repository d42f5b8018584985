//! The compiled CEL of a rule: [`DependencyProgram`] (a DependencyRule's `keys` and `when`) and
//! [`CascadeProgram`] (a CascadeRule's `children` and policy).

use lien_api::{CascadeRuleSpec, DependencyRuleSpec, PropagationPolicy};
use serde_json::Value;

use lien_cel::{CompileError, EvalError, Expression};

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

/// A parent a child names back (a CascadeRule's `childKinds[].backReference`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ParentRef {
    /// The parent's API group, when the reference has an `apiVersion`.
    pub group: Option<String>,
    /// The parent's kind.
    pub kind: String,
    /// The parent's name.
    pub name: String,
    /// The parent's namespace; `None`: the child's own namespace.
    pub namespace: Option<String>,
    /// The parent's UID, when the reference has one.
    pub uid: Option<String>,
}

/// A child kind a CascadeRule may delete: its group and kind, and the compiled
/// `backReference`.
#[derive(Debug, Clone)]
struct ChildKindProgram {
    group: String,
    kind: String,
    back_reference: Expression,
}

/// A CascadeRule's compiled `spec.children`, `spec.propagationPolicyExpression` and
/// `spec.childKinds[].backReference`.
#[derive(Debug, Clone)]
pub struct CascadeProgram {
    children: Expression,
    policy: Option<Expression>,
    default_policy: PropagationPolicy,
    child_kinds: Vec<ChildKindProgram>,
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
        let mut errors = Vec::new();
        let mut child_kinds = Vec::new();
        for (i, k) in spec.child_kinds.iter().enumerate() {
            match Expression::compile(
                &format!("spec.childKinds[{i}].backReference"),
                &k.back_reference,
            ) {
                Ok(back_reference) => child_kinds.push(ChildKindProgram {
                    group: k.of.group().to_owned(),
                    kind: k.of.kind.clone(),
                    back_reference,
                }),
                Err(e) => errors.push(e),
            }
        }
        match (children, policy) {
            (Ok(children), Ok(policy)) if errors.is_empty() => Ok(CascadeProgram {
                children,
                policy,
                default_policy: spec.propagation_policy,
                child_kinds,
            }),
            (children, policy) => Err(children
                .err()
                .into_iter()
                .chain(policy.err())
                .chain(errors)
                .collect()),
        }
    }

    /// Whether the rule lists the child kind (`group`, `kind`) in `childKinds`: the only kinds
    /// Lien deletes for it.
    pub fn allows(&self, group: &str, kind: &str) -> bool {
        self.child_kinds
            .iter()
            .any(|k| k.group == group && k.kind == kind)
    }

    /// The parents a child of kind (`group`, `kind`) names back: `None` when the kind is not
    /// in `childKinds`. The expression yields a map `{apiVersion?, kind, name, namespace?,
    /// uid?}`, a list of them, or `null` (no parent).
    pub fn back_references(
        &self,
        group: &str,
        kind: &str,
        child: &Value,
    ) -> Option<Result<Vec<ParentRef>, EvalError>> {
        let program = self
            .child_kinds
            .iter()
            .find(|k| k.group == group && k.kind == kind)?;
        Some(
            program
                .back_reference
                .eval_json(child)
                .and_then(|v| parent_refs(&v)),
        )
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

/// Reads a `backReference` value: `null`, one reference, or a list of them.
fn parent_refs(value: &Value) -> Result<Vec<ParentRef>, EvalError> {
    let expected = || "{apiVersion?, kind, name, namespace?, uid?}, a list of them, or null";
    let one = |i: usize, item: &Value| -> Result<ParentRef, EvalError> {
        let Value::Object(map) = item else {
            return Err(EvalError::TypeMismatch {
                expected: expected().into(),
                got: format!("element {i}: {}", json_type(item)),
            });
        };
        let required = |name: &str| match map.get(name) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(other) => Err(EvalError::InvalidValue(format!(
                "back reference {i}: `{name}` must be a non-empty string, got {}",
                json_type(other)
            ))),
            None => Err(EvalError::InvalidValue(format!(
                "back reference {i}: `{name}` is missing (a back reference needs kind and name)"
            ))),
        };
        let optional = |name: &str| match map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(EvalError::InvalidValue(format!(
                "back reference {i}: `{name}` must be a string, got {}",
                json_type(other)
            ))),
        };
        Ok(ParentRef {
            group: optional("apiVersion")?
                .map(|v| v.rsplit_once('/').map_or("", |(g, _)| g).to_owned()),
            kind: required("kind")?,
            name: required("name")?,
            namespace: optional("namespace")?,
            uid: optional("uid")?,
        })
    };
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items.iter().enumerate().map(|(i, v)| one(i, v)).collect(),
        Value::Object(_) => Ok(vec![one(0, value)?]),
        other => Err(EvalError::TypeMismatch {
            expected: expected().into(),
            got: json_type(other).into(),
        }),
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

#[cfg(test)]
#[path = "program_tests.rs"]
mod tests;
