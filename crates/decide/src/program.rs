//! The compiled CEL of a rule: [`DependencyProgram`] (a DependencyRule's `keys` and `when`) and
//! [`CascadeProgram`] (a CascadeRule's `children` and policy).

use lien_api::{CascadeRuleSpec, DependencyRuleSpec, PropagationPolicy};
use serde_json::Value;

use lien_cel::{CompileError, EvalError, Expression};

use crate::cascade::CascadeError;

/// The most distinct keys one object may yield for one side of a DependencyRule. Keys are what
/// Lien keeps of an object in a rule's join, so they are bounded per object: a tenant's object
/// must not make Lien keep more than any real workload needs. The core pack's workloads yield
/// one key per ConfigMap, Secret, PVC or ServiceAccount they reference; a few dozen is a large
/// pod, 256 a generous ceiling. More is an evaluation error of that object (its last keys
/// stay, the rule's status names the object, the field and this bound).
pub const MAX_KEYS_PER_OBJECT: usize = 256;

/// The longest key, in bytes. Keys name objects (a name is at most 253 bytes, a namespace 63):
/// 512 leaves room for composed keys (`namespace/name`, a prefix) and nothing for data.
pub const MAX_KEY_BYTES: usize = 512;

/// The most children one parent may name (`spec.children`), of any kind. Lien records a
/// parent's children in one annotation, and kube-apiserver allows 256 KiB for all of an
/// object's annotations together: 256 entries of the longest names (≈ 800 bytes each) still
/// fit, typical ones (≈ 150 bytes) take ≈ 38 KB. Seed 001's claim has one child; a parent
/// with hundreds is not what a CascadeRule is for (an owner reference or a namespace is).
pub const MAX_CHILDREN_PER_PARENT: usize = 256;

/// The most parents one child may name back (`childKinds[].backReference`). A child belongs
/// to one parent (Crossplane's `claimRef` is one reference); a few is generous.
pub const MAX_BACK_REFERENCES_PER_CHILD: usize = 16;

/// The longest value Lien accepts in a child or back reference, per field: Kubernetes' own
/// bounds (a name is a DNS subdomain, ≤ 253 bytes; a namespace and a kind ≤ 63; an apiVersion
/// is a group, ≤ 253, and a version, ≤ 63; a UID is 36, 128 leaves room for other forms). A
/// longer value names no object, and Lien does not keep it.
pub fn reference_field_bound(field: &str) -> usize {
    match field {
        "apiVersion" => 253 + 1 + 63,
        "kind" | "namespace" => 63,
        "uid" => 128,
        _ => 253,
    }
}

/// A field of a reference within its bound, or the error naming it.
fn bounded_field(what: &str, i: usize, field: &str, value: String) -> Result<String, EvalError> {
    let bound = reference_field_bound(field);
    if value.len() > bound {
        return Err(EvalError::InvalidValue(format!(
            "{what} {i}: `{field}` is {} bytes long; Kubernetes allows at most {bound}, so it names no object",
            value.len()
        )));
    }
    Ok(value)
}

/// Keys within [`MAX_KEYS_PER_OBJECT`] and [`MAX_KEY_BYTES`], or the error saying which bound
/// and how to fix the expression. Duplicates do not count against the bound.
fn bounded_keys(mut keys: Vec<String>) -> Result<Vec<String>, EvalError> {
    if let Some(long) = keys.iter().find(|k| k.len() > MAX_KEY_BYTES) {
        return Err(EvalError::InvalidValue(format!(
            "a key of {} bytes (`{}…`); a key may have at most {MAX_KEY_BYTES} bytes (MAX_KEY_BYTES): keys name objects, make the expression yield names",
            long.len(),
            long.chars().take(40).collect::<String>()
        )));
    }
    if keys.len() > MAX_KEYS_PER_OBJECT {
        let mut distinct = keys.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() > MAX_KEYS_PER_OBJECT {
            return Err(EvalError::InvalidValue(format!(
                "{} distinct keys; one object may yield at most {MAX_KEYS_PER_OBJECT} (MAX_KEYS_PER_OBJECT), and Lien keeps none of them: narrow the expression to what the object references",
                distinct.len()
            )));
        }
        keys = distinct;
    }
    Ok(keys)
}

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

    /// The keys of an `of` object (`[]` when the rule has no keys), within
    /// [`MAX_KEYS_PER_OBJECT`] and [`MAX_KEY_BYTES`].
    pub fn keys_of(&self, object: &Value) -> Result<Vec<String>, EvalError> {
        match &self.keys {
            Some((of, _)) => bounded_keys(of.eval_strings(object)?),
            None => Ok(Vec::new()),
        }
    }

    /// The keys of a `by` object (`[]` when the rule has no keys), bounded as
    /// [`Self::keys_of`].
    pub fn keys_by(&self, object: &Value) -> Result<Vec<String>, EvalError> {
        match &self.keys {
            Some((_, by)) => bounded_keys(by.eval_strings(object)?),
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
    /// with non-empty strings (`namespace` may be absent, null or empty) within Kubernetes'
    /// bounds ([`reference_field_bound`]).
    pub fn children(&self, parent: &Value) -> Result<Vec<ChildRef>, EvalError> {
        child_refs(self.children.eval_json(parent)?)
    }

    /// [`Self::children`], refused whole beyond [`MAX_CHILDREN_PER_PARENT`] (counted before
    /// anything is built of them): what the controller keeps of a parent.
    pub fn bounded_children(&self, parent: &Value) -> Result<Vec<ChildRef>, CascadeError> {
        let value = self
            .children
            .eval_json(parent)
            .map_err(|e| CascadeError::Evaluation(e.to_string()))?;
        if let Value::Array(items) = &value
            && items.len() > MAX_CHILDREN_PER_PARENT
        {
            return Err(CascadeError::TooManyChildren { count: items.len() });
        }
        child_refs(value).map_err(|e| CascadeError::Evaluation(e.to_string()))
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

/// Reads a `children` value (see [`CascadeProgram::children`]).
fn child_refs(value: Value) -> Result<Vec<ChildRef>, EvalError> {
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
                Some(Value::String(s)) if !s.is_empty() => {
                    bounded_field("child", i, name, s.clone())
                }
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
                Some(Value::String(s)) => Some(bounded_field("child", i, "namespace", s.clone())?),
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
            Some(Value::String(s)) if !s.is_empty() => {
                bounded_field("back reference", i, name, s.clone())
            }
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
            Some(Value::String(s)) => bounded_field("back reference", i, name, s.clone()).map(Some),
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
        Value::Array(items) if items.len() > MAX_BACK_REFERENCES_PER_CHILD => {
            Err(EvalError::InvalidValue(format!(
                "{} back references; a child may name at most {MAX_BACK_REFERENCES_PER_CHILD} parents (MAX_BACK_REFERENCES_PER_CHILD), and Lien keeps none of them: make the expression yield the child's own parent",
                items.len()
            )))
        }
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
