//! Rules: relations and cascades declared once per pair of kinds, derived for every object.
//!
//! A [`DependencyRule`] says "every `by` object whose keys meet an `of` object's keys uses it";
//! Lien derives the relations in memory (never as API objects) and enforces them as it enforces
//! Usages. A [`CascadeRule`] says "deleting a `parent` deletes the children it references, and
//! the parent stays until they are gone" — foreground cascading deletion across scopes.
//!
//! The CEL expressions are compiled by Lien's webhook when a rule is created or updated; a rule
//! whose CEL does not compile is refused, naming the field and the error.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::MAX_REASON_CHARS;

/// The longest CEL expression accepted in a rule, in characters.
pub const MAX_EXPRESSION_CHARS: usize = 4096;

/// The finalizer Lien holds on every parent of a `CascadeRule`.
pub const CASCADE_FINALIZER: &str = "lien.dev/cascade";

/// A kind, by API version and kind name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct KindRef {
    /// API version of the kind, e.g. `ceph.rook.io/v1` or `v1` (the version does not matter for
    /// matching: an object is the same object at every served version).
    #[x_kube(validation = Rule::new("self != ''").message("must not be empty"))]
    #[schemars(
        length(max = 317),
        regex(
            pattern = crate::API_VERSION_PATTERN
        )
    )]
    pub api_version: String,
    /// Kind, e.g. `CephBlockPool`.
    #[x_kube(validation = Rule::new("self != ''").message("must not be empty"))]
    #[schemars(
        length(max = 63),
        regex(pattern = crate::KIND_PATTERN)
    )]
    pub kind: String,
}

impl KindRef {
    /// The API group: the part of `apiVersion` before the `/`, empty for the core group.
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map(|(group, _)| group)
            .unwrap_or("")
    }
}

/// Where a rule looks for dependents.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, schemars::JsonSchema,
)]
pub enum DependencyScope {
    /// `of` and `by` in the same namespace (both kinds namespaced).
    #[default]
    SameNamespace,
    /// No namespace condition; either kind may be cluster-scoped.
    Cluster,
}

/// The equi-join of a rule: an `of` and a `by` object are related when the lists their
/// expressions yield share a string.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct DependencyKeys {
    /// CEL over the `of` object (`self`), yielding `list(string)`, e.g. `[self.metadata.name]`.
    #[schemars(length(min = 1, max = MAX_EXPRESSION_CHARS))]
    pub of: String,
    /// CEL over the `by` object (`self`), yielding `list(string)`, e.g.
    /// `has(self.spec.rados.pool) ? [self.spec.rados.pool] : []`.
    #[schemars(length(min = 1, max = MAX_EXPRESSION_CHARS))]
    pub by: String,
}

/// A dependency declared once for a pair of kinds: every `by` object in scope whose keys meet
/// an `of` object's keys (and for which `when` holds) uses that `of` object, which then cannot
/// be deleted while the `by` object exists.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[kube(
    group = "lien.dev",
    version = "v1alpha1",
    kind = "DependencyRule",
    status = "DependencyRuleStatus",
    category = "lien",
    shortname = "ldr",
    printcolumn(name = "Of", type_ = "string", json_path = ".spec.of.kind"),
    printcolumn(name = "By", type_ = "string", json_path = ".spec.by.kind"),
    printcolumn(name = "Scope", type_ = "string", json_path = ".spec.scope"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(name = "Relations", type_ = "integer", json_path = ".status.relations"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Errors",
        type_ = "integer",
        json_path = ".status.evaluationErrors",
        priority = 1
    ),
    printcolumn(
        name = "Why",
        type_ = "string",
        json_path = ".spec.reason",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DependencyRuleSpec {
    /// The provider kind: its objects are the ones protected.
    pub of: KindRef,
    /// The dependent kind: its objects are the users.
    pub by: KindRef,
    /// `SameNamespace` (default): an `of` and a `by` object are related only within one
    /// namespace. `Cluster`: no namespace condition.
    #[serde(default)]
    pub scope: DependencyScope,
    /// An optional equi-join. Without it, every `by` object in scope uses every `of` object in
    /// scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<DependencyKeys>,
    /// Optional CEL over the `by` object (`self`), yielding a bool: the object is a user only
    /// while it is true (e.g. `'my.crd.group/super-important' in self.metadata.finalizers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_EXPRESSION_CHARS))]
    pub when: Option<String>,
    /// Why, in words a person reads in the refusal of a DELETE (at most 1024 characters).
    #[schemars(length(max = MAX_REASON_CHARS))]
    #[x_kube(validation = Rule::new("self.trim() != ''").message("must not be blank: say why the provider must stay"))]
    pub reason: String,
    /// Re-issue a refused DELETE of an `of` object as soon as its last dependent is gone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replay_deletion: bool,
    /// `Deny` (default): a DELETE of an `of` object is refused while it has dependents.
    /// `Warn`: it goes through, answered with a warning naming the dependents — to roll a new
    /// rule out and see what it would refuse before it does.
    #[serde(default)]
    pub enforcement: crate::Enforcement,
}

/// An object a rule's CEL failed on, as reported in status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvaluationError {
    /// The field whose expression failed: `spec.keys.of`, `spec.keys.by` or `spec.when`.
    pub field: String,
    /// The object, as `Kind namespace/name`.
    pub object: String,
    /// The error.
    pub message: String,
}

/// Observed state of a DependencyRule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct DependencyRuleStatus {
    /// `Ready` (False with a reason such as UnknownKind or InvalidExpression, naming the field
    /// and the error; or EvaluationErrors while its CEL fails on some objects, naming how many
    /// and the first) and `InUse` (True while the rule holds at least one relation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// How many relations the rule currently derives.
    #[serde(default)]
    pub relations: u64,
    /// How many `of` objects exist.
    #[serde(default)]
    pub of_objects: u64,
    /// How many `by` objects exist.
    #[serde(default)]
    pub by_objects: u64,
    /// How many objects the rule's CEL currently fails on (they keep the relations they last
    /// had: an error never lifts protection).
    #[serde(default)]
    pub evaluation_errors: u64,
    /// The first evaluation errors, bounded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<EvaluationError>,
    /// The generation this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// How a CascadeRule deletes children.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, schemars::JsonSchema,
)]
pub enum PropagationPolicy {
    /// The child is deleted at once; its own dependents go afterwards (the garbage collector).
    #[default]
    Background,
    /// The child stays until its dependents with `blockOwnerDeletion` are gone: leaf first.
    Foreground,
}

/// Foreground cascading deletion across scopes: a deleted `parent` deletes the children its
/// `children` expression names, and stays until they are gone.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[kube(
    group = "lien.dev",
    version = "v1alpha1",
    kind = "CascadeRule",
    status = "CascadeRuleStatus",
    category = "lien",
    shortname = "lcr",
    printcolumn(name = "Parent", type_ = "string", json_path = ".spec.parent.kind"),
    printcolumn(
        name = "Policy",
        type_ = "string",
        json_path = ".spec.propagationPolicy"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(name = "Parents", type_ = "integer", json_path = ".status.parents"),
    printcolumn(name = "Waiting", type_ = "integer", json_path = ".status.waiting"),
    printcolumn(
        name = "Refused",
        type_ = "integer",
        json_path = ".status.refusedChildren"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct CascadeRuleSpec {
    /// The parent kind.
    pub parent: KindRef,
    /// CEL over the parent (`self`), yielding a list of `{apiVersion, kind, name, namespace?}`:
    /// the children deleted with it. A child without a namespace is in the parent's namespace
    /// when its kind is namespaced. What it yields is only a candidate: a child is deleted only
    /// when its kind is listed in `childKinds` and it names this parent back.
    #[schemars(length(min = 1, max = MAX_EXPRESSION_CHARS))]
    pub children: String,
    /// The kinds Lien may delete for this rule, each with how a child names its parent back.
    /// A child of any other kind is never deleted (a Warning on the parent says so), and the
    /// rule's author must be allowed to `delete` every object of each kind listed here.
    #[serde(default)]
    #[schemars(length(max = 16))]
    pub child_kinds: Vec<CascadeChildKind>,
    /// How children are deleted: `Background` (default) or `Foreground`.
    #[serde(default)]
    pub propagation_policy: PropagationPolicy,
    /// Optional CEL over the parent yielding `'Foreground'` or `'Background'`; when it yields a
    /// value it wins over `propagationPolicy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_EXPRESSION_CHARS))]
    pub propagation_policy_expression: Option<String>,
}

/// A kind a CascadeRule may delete, and how one of its objects names its parent: the binding
/// that the parent's writer cannot forge alone, because it is written on the child.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct CascadeChildKind {
    /// The child kind (`apiVersion`, `kind`; the version does not matter for matching).
    #[serde(flatten)]
    pub of: KindRef,
    /// CEL over the child (`self`) yielding the parent it belongs to: a map
    /// `{apiVersion?, kind, name, namespace?, uid?}` (or a list of them, or `null` for none),
    /// e.g. Crossplane's `self.spec.claimRef`. A child is deleted only when this names the
    /// deleted parent: its kind (and group, when `apiVersion` is given), name, namespace (a
    /// reference without one means the child's own namespace) and, when given, UID.
    #[schemars(length(min = 1, max = MAX_EXPRESSION_CHARS))]
    pub back_reference: String,
}

/// A child Lien refused to delete for a parent, and why.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct RefusedChild {
    /// Namespace of the parent, empty for cluster-scoped kinds.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub parent_namespace: String,
    /// Name of the parent.
    pub parent_name: String,
    /// The child, as `Kind namespace/name`.
    pub child: String,
    /// Why it is not deleted: `KindNotAllowed` or `NotBound`.
    pub reason: String,
}

/// A child a deleted parent still waits for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitingChild {
    /// API version of the child.
    pub api_version: String,
    /// Kind of the child.
    pub kind: String,
    /// Namespace of the child, empty for cluster-scoped kinds.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name of the child.
    pub name: String,
    /// What holds it: remaining finalizers, a refused DELETE (naming who refused), or the
    /// dependents that hold it under Foreground.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub held_by: String,
    /// Whether its deletion has not progressed for longer than the stuck threshold.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stuck: bool,
}

/// A deleted parent that waits for its children.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitingParent {
    /// Namespace of the parent, empty for cluster-scoped kinds.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name of the parent.
    pub name: String,
    /// When the parent's deletion started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
    /// The children still present (bounded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<WaitingChild>,
}

/// Observed state of a CascadeRule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct CascadeRuleStatus {
    /// `Ready` (False with a reason such as UnknownKind or InvalidExpression).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// How many parents carry the rule's finalizer.
    #[serde(default)]
    pub parents: u64,
    /// How many deleted parents wait for children.
    #[serde(default)]
    pub waiting: u64,
    /// The first waiting parents and what they wait for, bounded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_parents: Vec<WaitingParent>,
    /// How many children the parents name that Lien will not delete (a kind outside
    /// `childKinds`, or a child that does not name its parent back).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refused_children: u64,
    /// The first of them, bounded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<RefusedChild>,
    /// The generation this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_dependency_rule_round_trips_in_the_documented_shape() {
        let spec: DependencyRuleSpec = serde_json::from_value(json!({
            "of": {"apiVersion": "ceph.rook.io/v1", "kind": "CephBlockPool"},
            "by": {"apiVersion": "ceph.rook.io/v1", "kind": "CephNFS"},
            "keys": {"of": "[self.metadata.name]", "by": "[self.spec.rados.pool]"},
            "reason": "the NFS export stores its data in this pool",
        }))
        .expect("parses");
        assert_eq!(spec.scope, DependencyScope::SameNamespace);
        assert!(!spec.replay_deletion);
        assert_eq!(spec.of.group(), "ceph.rook.io");
        let core = KindRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        assert_eq!(core.group(), "");
        let back = serde_json::to_value(&spec).expect("serialises");
        assert_eq!(back["scope"], "SameNamespace");
        assert_eq!(back["keys"]["by"], "[self.spec.rados.pool]");
        assert!(back.get("when").is_none());
    }

    #[test]
    fn a_cascade_rule_defaults_to_background() {
        let spec: CascadeRuleSpec = serde_json::from_value(json!({
            "parent": {"apiVersion": "example.org/v1", "kind": "DatabaseClaim"},
            "children": "[self.spec.resourceRef]",
        }))
        .expect("parses");
        assert_eq!(spec.propagation_policy, PropagationPolicy::Background);
        assert!(spec.propagation_policy_expression.is_none());
    }
}
