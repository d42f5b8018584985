//! A CascadeRule's compiled CEL, with exactly the API of `lien_cel::CascadeProgram`
//! (`../../shared/DESIGN.md`, "The shared CEL API"). A local stand-in until the `cel` branch
//! lands; it is deleted then and the reconciler uses `lien_cel` unchanged.

use std::sync::Arc;

use cel::{Context, Program};
use lien_api::{CascadeRuleSpec, PropagationPolicy};
use serde_json::Value;

/// A child reference the `children` expression yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
}

/// An expression that does not compile.
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

/// An expression that failed on an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalError(String);

impl std::fmt::Display for EvalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A CascadeRule's `children` and `propagationPolicyExpression`, compiled once.
#[derive(Clone)]
pub struct CascadeProgram {
    children: Arc<Program>,
    policy: Option<Arc<Program>>,
    default_policy: PropagationPolicy,
}

impl std::fmt::Debug for CascadeProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CascadeProgram").finish_non_exhaustive()
    }
}

fn compile_one(field: &str, source: &str) -> Result<Arc<Program>, CompileError> {
    // The `cel` parser can panic on some malformed input; a rule must never take Lien down.
    match std::panic::catch_unwind(|| Program::compile(source)) {
        Ok(Ok(p)) => Ok(Arc::new(p)),
        Ok(Err(e)) => Err(CompileError {
            field: field.into(),
            message: e.to_string(),
        }),
        Err(_) => Err(CompileError {
            field: field.into(),
            message: "cannot parse the expression".into(),
        }),
    }
}

fn eval(program: &Program, object: &Value) -> Result<Value, EvalError> {
    let mut context = Context::default();
    let this = cel::to_value(object).map_err(|e| EvalError(e.to_string()))?;
    context.add_variable_from_value("self", this);
    let value = program
        .execute(&context)
        .map_err(|e| EvalError(e.to_string()))?;
    value.json().map_err(|e| EvalError(e.to_string()))
}

fn field<'a>(item: &'a Value, name: &str, index: usize) -> Result<Option<&'a str>, EvalError> {
    match item.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(EvalError(format!(
            "children[{index}].{name}: expected a string, got {other}"
        ))),
    }
}

impl CascadeProgram {
    /// Compiles both expressions; every error names its field.
    pub fn compile(spec: &CascadeRuleSpec) -> Result<Self, Vec<CompileError>> {
        let children = compile_one("spec.children", &spec.children);
        let policy = spec
            .propagation_policy_expression
            .as_deref()
            .map(|s| compile_one("spec.propagationPolicyExpression", s))
            .transpose();
        match (children, policy) {
            (Ok(children), Ok(policy)) => Ok(Self {
                children,
                policy,
                default_policy: spec.propagation_policy,
            }),
            (children, policy) => Err(children.err().into_iter().chain(policy.err()).collect()),
        }
    }

    /// The children `parent` references.
    pub fn children(&self, parent: &Value) -> Result<Vec<ChildRef>, EvalError> {
        let Value::Array(items) = eval(&self.children, parent)? else {
            return Err(EvalError("spec.children: expected a list".into()));
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let need = |name: &str| {
                    field(item, name, i)?
                        .map(str::to_owned)
                        .ok_or_else(|| EvalError(format!("children[{i}]: no `{name}` in {item}")))
                };
                Ok(ChildRef {
                    api_version: need("apiVersion")?,
                    kind: need("kind")?,
                    name: need("name")?,
                    namespace: field(item, "namespace", i)?
                        .filter(|n| !n.is_empty())
                        .map(str::to_owned),
                })
            })
            .collect()
    }

    /// The policy: the expression's value when it yields one, else the spec's.
    pub fn policy(&self, parent: &Value) -> Result<PropagationPolicy, EvalError> {
        let Some(program) = &self.policy else {
            return Ok(self.default_policy);
        };
        match eval(program, parent)? {
            Value::Null => Ok(self.default_policy),
            Value::String(s) if s == "Foreground" => Ok(PropagationPolicy::Foreground),
            Value::String(s) if s == "Background" => Ok(PropagationPolicy::Background),
            other => Err(EvalError(format!(
                "spec.propagationPolicyExpression: expected 'Foreground' or 'Background', got {other}"
            ))),
        }
    }
}
