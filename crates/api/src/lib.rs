//! Lien's API, group `lien.dev`, version `v1alpha1`.
//!
//! A [`Usage`] (namespaced) or [`ClusterUsage`] (cluster-scoped) says that the objects matched by
//! `spec.of` are in use by the objects matched by `spec.by` — or, without `by`, protected for
//! `spec.reason`. While the relation holds, Lien refuses the DELETE of every `of` object.
//!
//! The CRDs are generated from these types (`lien crds`); every field's doc comment becomes its
//! schema description, and single-object rules are CEL validations in the schema, so
//! kube-apiserver refuses a malformed Usage before Lien sees it.

// kube-derive's repeated `printcolumn(type_ = "string", …)` arguments look like duplicated
// attributes to clippy; they are one column each.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, CustomResourceExt, KubeSchema};
use serde::{Deserialize, Serialize};

mod rules;

pub use rules::{
    CASCADE_FINALIZER, CascadeChildKind, CascadeRule, CascadeRuleSpec, CascadeRuleStatus,
    DependencyKeys, DependencyRule, DependencyRuleSpec, DependencyRuleStatus, DependencyScope,
    EvaluationError, KindRef, MAX_EXPRESSION_CHARS, PropagationPolicy, RefusedChild, WaitingChild,
    WaitingParent,
};

pub const GROUP: &str = "lien.dev";
pub const VERSION: &str = "v1alpha1";

/// The label Lien puts on every object in use. The webhook only sees DELETEs of labelled
/// objects (its objectSelector), so the label is what makes protection cheap for the cluster.
pub const IN_USE_LABEL: &str = "lien.dev/in-use";
/// The finalizer that keeps a Usage with `by` until every user is gone.
pub const USAGE_FINALIZER: &str = "lien.dev/usage";
/// The annotation on a Usage listing (comma-separated, sorted) the UIDs of the owner references
/// Lien added to it. Lien adds and removes only these: every other owner reference (the
/// Usage's controller above all) is someone else's. It is written in the same request as the
/// references, so the two never disagree.
pub const USAGE_OWNERS_ANNOTATION: &str = "lien.dev/owners";

/// The longest `spec.reason`, in characters: a reason is a sentence or two a person reads in the
/// refusal of a DELETE, and every refusal carries it.
pub const MAX_REASON_CHARS: usize = 1024;
/// The longest `status.of.summary` / `status.by.summary`, in characters: one column of
/// `kubectl get usages`, so a selector with 32 long labels does not make a line of kilobytes.
pub const MAX_SUMMARY_CHARS: usize = 128;
/// The most `matchLabels` one selector may have: far more than any real selector needs, small
/// enough that every object the selector is matched against stays cheap to test.
pub const MAX_MATCH_LABELS: usize = 32;

/// An `apiVersion`: an optional DNS-subdomain group and `/`, then a version (the schema's
/// pattern for every `apiVersion` field: Usages' sides and rules' kinds).
const API_VERSION_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[a-z]([-a-z0-9]*[a-z0-9])?$";
/// A kind name (the schema's pattern for every `kind` field).
const KIND_PATTERN: &str = r"^[A-Za-z]([-A-Za-z0-9]*[A-Za-z0-9])?$";

/// A namespace (a DNS-1123 label), or empty for the Usage's own: the schema's pattern for every
/// `namespace` field.
const NAMESPACE_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$";

/// A reference to one object by name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRef {
    /// Name of the object (at most 253 characters; a DNS subdomain for every kind but RBAC's,
    /// whose names may be any path segment, e.g. `system:aggregate-to-edit`).
    #[x_kube(validation = Rule::new("self != ''").message("must not be empty"))]
    #[schemars(length(max = 253))]
    pub name: String,
    /// Namespace of the object. Empty means the Usage's own namespace for namespaced kinds (a
    /// ClusterUsage must name it), and nothing for cluster-scoped kinds. A namespaced Usage may
    /// name another namespace here only in `of`, and only together with `by`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 63),
        regex(pattern = NAMESPACE_PATTERN)
    )]
    pub namespace: Option<String>,
}

/// Selects objects by labels and/or by sharing the Usage's controller. An empty selector
/// (neither) would select every object of the kind, and is refused.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchControllerRef) && self.matchControllerRef)").message("an empty selector selects every object of the kind: set matchLabels or matchControllerRef: true, or use resourceRef for one object"))]
pub struct ResourceSelector {
    /// Labels an object must carry to be selected (at most 32; keys and values follow
    /// Kubernetes' label syntax). Every matching object is selected, and the selection is kept
    /// up to date as objects come, go and change labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "match_labels_schema")]
    pub match_labels: BTreeMap<String, String>,
    /// Select only objects whose controller (the ownerReference with `controller: true`) is the
    /// Usage's own controller — the objects composed by the same parent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub match_controller_ref: bool,
    /// Namespace to select in. Empty means the Usage's own namespace for namespaced kinds; for a
    /// ClusterUsage, empty selects in every namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 63),
        regex(pattern = NAMESPACE_PATTERN)
    )]
    pub namespace: Option<String>,
}

/// One side of a usage relation: a kind, and either one object by name or every object a
/// selector matches.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.resourceRef) != has(self.resourceSelector)").message("exactly one of resourceRef or resourceSelector must be set"))]
pub struct ResourceSpec {
    /// API version of the kind, e.g. `eks.example.io/v1` (the version does not matter for
    /// matching: an object is the same object at every served version).
    #[x_kube(validation = Rule::new("self != ''").message("must not be empty"))]
    #[schemars(
        length(max = 317),
        regex(
            pattern = API_VERSION_PATTERN
        )
    )]
    pub api_version: String,
    /// Kind, e.g. `Cluster`.
    #[x_kube(validation = Rule::new("self != ''").message("must not be empty"))]
    #[schemars(
        length(max = 63),
        regex(pattern = KIND_PATTERN)
    )]
    pub kind: String,
    /// The object, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_ref: Option<ResourceRef>,
    /// The objects, by selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_selector: Option<ResourceSelector>,
}

impl ResourceSpec {
    /// The namespace this side names explicitly, if any.
    pub fn explicit_namespace(&self) -> Option<&str> {
        self.resource_ref
            .as_ref()
            .and_then(|r| r.namespace.as_deref())
            .or_else(|| {
                self.resource_selector
                    .as_ref()
                    .and_then(|s| s.namespace.as_deref())
            })
            .filter(|ns| !ns.is_empty())
    }
}

/// An object a selector matched, as reported in status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct MatchedObject {
    /// Namespace, empty for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID observed when the relation was made.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

/// What one side of a Usage currently matches: a count, and the first objects (bounded, so
/// a selector matching thousands of objects does not make the Usage huge).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct MatchedObjects {
    /// How many objects match.
    pub count: u32,
    /// What this side names, in one line for `kubectl get`: `Kind/name` for one object
    /// (`Kind/namespace/name` when it names a namespace), or the kind, the selector and how
    /// many objects it matches, e.g. `Deployment app=web (3)`. At most 128 characters (a longer
    /// one ends with `…`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = MAX_SUMMARY_CHARS))]
    pub summary: String,
    /// The first matched objects, sorted by namespace and name.
    // Always serialized, empty too: Lien writes status as a merge patch, where an omitted list
    // keeps the last one; the status then never equals what Lien wants, is rewritten on every
    // pass, and each rewrite makes the same Usage's finalizer write stale (it stayed
    // Terminating).
    #[serde(default)]
    pub objects: Vec<MatchedObject>,
}

/// Observed state of a Usage or ClusterUsage.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageStatus {
    /// `Ready` (False with a reason such as NotFound, UnknownKind or Cycle when the relation
    /// cannot be enforced as written), `InUse` (True while at least one `of` object is
    /// protected) and, while a Usage with `by` is being deleted and users remain,
    /// `WaitingForUsers` (True, reason UsersRemain, naming the first users): it goes once they
    /// are gone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The objects `spec.of` matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub of: Option<MatchedObjects>,
    /// The objects `spec.by` matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<MatchedObjects>,
    /// The generation this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// UID of the Usage's controller (its ownerReference with `controller: true`), recorded
    /// when Lien first sees it. `matchControllerRef` keeps selecting the objects this controller
    /// controls after the reference is gone from the Usage: the garbage collector removes it
    /// when the parent is deleted while another owner remains, which is exactly when a
    /// composition is torn down and the relation matters most. A new controller reference on
    /// the Usage replaces it.
    #[serde(
        default,
        rename = "controllerUID",
        skip_serializing_if = "Option::is_none"
    )]
    pub controller_uid: Option<String>,
}

/// A namespaced usage relation: the objects `of` are in use by the objects `by` (or protected
/// for `reason`), and cannot be deleted while the relation holds.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[kube(
    group = "lien.dev",
    version = "v1alpha1",
    kind = "Usage",
    namespaced,
    status = "UsageStatus",
    category = "lien",
    shortname = "lu",
    printcolumn(name = "Of", type_ = "string", json_path = ".status.of.summary"),
    printcolumn(name = "By", type_ = "string", json_path = ".status.by.summary"),
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
    printcolumn(
        name = "In-Use",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"InUse\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Why",
        type_ = "string",
        json_path = ".spec.reason",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.by) || (has(self.reason) && self.reason != '')").message("spec.reason is required when spec.by is not set"))]
#[x_kube(validation = Rule::new("has(self.by) || !((has(self.of.resourceRef) && has(self.of.resourceRef.__namespace__)) || (has(self.of.resourceSelector) && has(self.of.resourceSelector.__namespace__)))").message("spec.of may name another namespace only together with spec.by"))]
#[x_kube(validation = Rule::new("!has(self.by) || !((has(self.by.resourceRef) && has(self.by.resourceRef.__namespace__)) || (has(self.by.resourceSelector) && has(self.by.resourceSelector.__namespace__)))").message("spec.by always refers to the Usage's own namespace: remove its namespace"))]
pub struct UsageSpec {
    /// What is used or protected.
    pub of: ResourceSpec,
    /// Who uses it. Without `by`, the Usage protects `of` for `reason` until it is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<ResourceSpec>,
    /// Why, in words a person reads in the refusal of a DELETE (at most 1024 characters, not
    /// blank). Required without `by`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_REASON_CHARS))]
    #[x_kube(validation = Rule::new("self.trim() != ''").message("must not be blank: say why the object must stay, or remove spec.reason"))]
    pub reason: Option<String>,
    /// Re-issue a refused DELETE of an `of` object as soon as its last user is gone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replay_deletion: bool,
    /// `Deny` (default): a DELETE of an `of` object is refused while the relation holds.
    /// `Warn`: it goes through, answered with a warning naming this Usage — to roll a new
    /// protection out and see what it would refuse before it does.
    #[serde(default)]
    pub enforcement: Enforcement,
}

/// A cluster-scoped usage relation: like a Usage, but either side may name any namespace, so it
/// can relate namespaced and cluster-scoped objects across namespaces.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[kube(
    group = "lien.dev",
    version = "v1alpha1",
    kind = "ClusterUsage",
    status = "UsageStatus",
    category = "lien",
    shortname = "lcu",
    printcolumn(name = "Of", type_ = "string", json_path = ".status.of.summary"),
    printcolumn(name = "By", type_ = "string", json_path = ".status.by.summary"),
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
    printcolumn(
        name = "In-Use",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"InUse\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Why",
        type_ = "string",
        json_path = ".spec.reason",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.by) || (has(self.reason) && self.reason != '')").message("spec.reason is required when spec.by is not set"))]
pub struct ClusterUsageSpec {
    /// What is used or protected.
    pub of: ResourceSpec,
    /// Who uses it. Without `by`, the ClusterUsage protects `of` for `reason` until it is
    /// deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<ResourceSpec>,
    /// Why, in words a person reads in the refusal of a DELETE (at most 1024 characters, not
    /// blank). Required without `by`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_REASON_CHARS))]
    #[x_kube(validation = Rule::new("self.trim() != ''").message("must not be blank: say why the object must stay, or remove spec.reason"))]
    pub reason: Option<String>,
    /// Re-issue a refused DELETE of an `of` object as soon as its last user is gone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replay_deletion: bool,
    /// `Deny` (default): a DELETE of an `of` object is refused while the relation holds.
    /// `Warn`: it goes through, answered with a warning naming this Usage — to roll a new
    /// protection out and see what it would refuse before it does.
    #[serde(default)]
    pub enforcement: Enforcement,
}

/// What a relation does to a DELETE of the object it holds.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, schemars::JsonSchema,
)]
pub enum Enforcement {
    /// Refused (409) while the relation holds.
    #[default]
    Deny,
    /// Allowed, with an admission warning saying it would have been refused (kubectl prints
    /// it), counted in `lien_webhook_delete_decisions_total{result="warned"}`.
    Warn,
}

impl Enforcement {
    /// Whether relations from this source only warn.
    pub fn warns(self) -> bool {
        self == Self::Warn
    }
}

/// `matchLabels`: a map of label values, bounded. Label keys cannot be constrained in a
/// structural schema (no `propertyNames`) and a CEL rule over every key costs more than
/// kube-apiserver's budget allows for a map of unbounded keys, so the webhook checks keys.
fn match_labels_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "maxProperties": MAX_MATCH_LABELS,
        "additionalProperties": {
            "type": "string",
            "maxLength": 63,
            "pattern": "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$",
        },
    })
}

/// Every CRD Lien installs, in a stable order.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        CascadeRule::crd(),
        ClusterUsage::crd(),
        DependencyRule::crd(),
        Usage::crd(),
    ]
}

/// `<plural>.<group>.yaml` → YAML, for `lien crds --out-dir` and `deploy/crds/`.
pub fn crd_files() -> Result<Vec<(String, String)>, serde_yaml_ng::Error> {
    crds()
        .into_iter()
        .map(|crd| {
            let name = crd.metadata.name.clone().unwrap_or_default();
            serde_yaml_ng::to_string(&crd).map(|yaml| (format!("{name}.yaml"), yaml))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn crds_carry_the_cel_rules_and_columns() {
        let usage = serde_json::to_value(Usage::crd()).expect("serialises");
        let schema = &usage["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        let spec_rules = schema["properties"]["spec"]["x-kubernetes-validations"].to_string();
        assert!(
            spec_rules.contains("spec.reason is required when spec.by is not set"),
            "{spec_rules}"
        );
        assert!(
            spec_rules.contains("only together with spec.by"),
            "{spec_rules}"
        );
        let of_rules = schema["properties"]["spec"]["properties"]["of"]["x-kubernetes-validations"]
            .to_string();
        assert!(
            of_rules.contains("exactly one of resourceRef or resourceSelector"),
            "{of_rules}"
        );
        assert_eq!(usage["spec"]["scope"], "Namespaced");
        let columns = usage["spec"]["versions"][0]["additionalPrinterColumns"]
            .as_array()
            .expect("columns");
        assert!(columns.iter().any(|c| c["name"] == "Ready"));
        let cluster = serde_json::to_value(ClusterUsage::crd()).expect("serialises");
        assert_eq!(cluster["spec"]["scope"], "Cluster");
    }

    /// Issue 19 §5: `kubectl get usages` shows what is protected and READY with its reason
    /// (the wide-only columns last); every kind has a short name of its own and is in the
    /// `lien` category (`kubectl get lien`).
    #[test]
    fn kubectl_get_columns_short_names_and_category() {
        let columns = |crd: CustomResourceDefinition| -> Vec<(String, String, i64)> {
            let v = serde_json::to_value(crd).expect("serialises");
            v["spec"]["versions"][0]["additionalPrinterColumns"]
                .as_array()
                .expect("columns")
                .iter()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap_or_default().to_owned(),
                        c["jsonPath"].as_str().unwrap_or_default().to_owned(),
                        c["priority"].as_i64().unwrap_or(0),
                    )
                })
                .collect()
        };
        for crd in [Usage::crd(), ClusterUsage::crd()] {
            let cols = columns(crd);
            let names: Vec<&str> = cols.iter().map(|c| c.0.as_str()).collect();
            assert_eq!(
                names,
                ["Of", "By", "Ready", "Reason", "In-Use", "Age", "Why"]
            );
            assert_eq!(cols[0].1, ".status.of.summary");
            assert_eq!(cols[1].1, ".status.by.summary");
            assert_eq!(cols[3].1, ".status.conditions[?(@.type==\"Ready\")].reason");
            assert_eq!(cols[6].2, 1, "the Usage's reason is wide-only");
        }
        let rule = columns(DependencyRule::crd());
        let ready = rule.iter().position(|c| c.0 == "Ready").expect("Ready");
        assert_eq!(rule[ready + 1].0, "Reason");
        assert!(rule.iter().any(|c| c.0 == "Errors" && c.2 == 1));
        let mut short = Vec::new();
        for crd in crds() {
            assert_eq!(crd.spec.names.categories, Some(vec!["lien".to_owned()]));
            short.extend(crd.spec.names.short_names.unwrap_or_default());
        }
        short.sort();
        assert_eq!(short, ["lcr", "lcu", "ldr", "lu"]);
    }

    #[test]
    fn every_schema_field_is_documented() {
        fn walk(path: &str, node: &serde_json::Value, missing: &mut Vec<String>) {
            if let Some(props) = node["properties"].as_object() {
                for (k, v) in props {
                    let p = format!("{path}.{k}");
                    let standard = matches!(k.as_str(), "apiVersion" | "kind" | "metadata");
                    let in_condition = p.contains(".conditions");
                    if v.get("description").is_none() && !standard && !in_condition {
                        missing.push(p.clone());
                    }
                    walk(&p, v, missing);
                }
            }
            if let Some(items) = node.get("items") {
                walk(&format!("{path}[]"), items, missing);
            }
        }
        for crd in crds() {
            let v = serde_json::to_value(&crd).expect("serialises");
            let mut missing = vec![];
            walk(
                "",
                &v["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
                &mut missing,
            );
            assert!(missing.is_empty(), "undocumented fields: {missing:?}");
        }
    }

    #[test]
    fn specs_round_trip_in_the_documented_shape() {
        let spec: UsageSpec = serde_json::from_value(json!({
            "of": {"apiVersion": "eks.example.io/v1", "kind": "Cluster", "resourceRef": {"name": "my-cluster"}},
            "by": {"apiVersion": "helm.example.io/v1", "kind": "Release", "resourceSelector": {"matchLabels": {"app": "prometheus"}}},
            "reason": "Release runs on this cluster",
            "replayDeletion": true
        }))
        .expect("parses");
        assert!(spec.replay_deletion);
        assert_eq!(
            spec.of.resource_ref.as_ref().map(|r| r.name.as_str()),
            Some("my-cluster")
        );
        let back = serde_json::to_value(&spec).expect("serialises");
        assert_eq!(
            back["by"]["resourceSelector"]["matchLabels"]["app"],
            "prometheus"
        );
        assert!(back["of"].get("resourceSelector").is_none());
    }
}
