//! Does a webhook apply to a write? kube-apiserver's `ShouldCallHook`, its rule matcher
//! (`predicates/rules`) and its namespace and object selector matchers.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Attributes, Operation, cel_conditions};
use crate::error::ApiError;
use crate::labels::{Selector, labels_of};

/// Does this webhook (one element of a configuration's `webhooks`) apply to these attributes?
///
/// The order is kube-apiserver's: a namespace or object selector that cleanly does not match
/// skips the webhook; otherwise the rules decide; only when a rule matches do selector errors
/// (for instance a namespace that cannot be found) surface; finally `matchConditions` run,
/// and a condition that fails to evaluate is an error under `failurePolicy: Fail` and a
/// non-match under `Ignore`.
///
/// `matchPolicy`: `Exact` matches the request's own group/version/resource only. `Equivalent`
/// (the default) also tries the same resource as served by other group/versions (say
/// `extensions/v1beta1` deployments for `apps/v1` ones) and then sends the request converted
/// to the matched version. The sandbox serves every resource at exactly one group/version, so
/// no other equivalent exists and `Equivalent` matches exactly what `Exact` does.
pub fn matches(webhook: &Value, attrs: &Attributes) -> Result<bool, ApiError> {
    let namespace_match = match_namespace_selector(webhook, attrs);
    if let Ok(false) = namespace_match {
        return Ok(false);
    }
    let object_match = match_object_selector(webhook, attrs);
    if let Ok(false) = object_match {
        return Ok(false);
    }
    let rules = webhook["rules"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if !rules.iter().any(|rule| rule_matches(rule, attrs)) {
        return Ok(false);
    }
    namespace_match?;
    object_match?;
    cel_conditions::evaluate(webhook, attrs)
}

/// `failurePolicy` defaults to `Fail`; only an explicit `Ignore` fails open.
pub(super) fn fails_closed(webhook: &Value) -> bool {
    webhook["failurePolicy"].as_str() != Some("Ignore")
}

fn strings(value: &Value) -> impl Iterator<Item = &str> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

fn exact_or_wildcard(items: &Value, requested: &str) -> bool {
    strings(items).any(|item| item == "*" || item == requested)
}

/// The core `v1` `namespaces` resource: cluster-scoped, yet its requests carry the
/// namespace's own name as their namespace.
fn is_namespace_resource(attrs: &Attributes) -> bool {
    attrs.resource.group.is_empty()
        && attrs.resource.version == "v1"
        && attrs.resource.resource == "namespaces"
}

fn rule_matches(rule: &Value, attrs: &Attributes) -> bool {
    scope_matches(rule, attrs)
        && strings(&rule["operations"]).any(|op| op == "*" || op == attrs.operation.as_str())
        && exact_or_wildcard(&rule["apiGroups"], &attrs.resource.group)
        && exact_or_wildcard(&rule["apiVersions"], &attrs.resource.version)
        && resource_matches(rule, attrs)
}

fn scope_matches(rule: &Value, attrs: &Attributes) -> bool {
    match rule["scope"].as_str() {
        None | Some("*") => true,
        Some("Namespaced") => !is_namespace_resource(attrs) && !attrs.namespace.is_empty(),
        Some("Cluster") => is_namespace_resource(attrs) || attrs.namespace.is_empty(),
        Some(_) => false,
    }
}

/// `pods` matches the main resource only, `pods/status` one subresource, `pods/*` every
/// subresource, `*` every main resource and `*/*` everything.
fn resource_matches(rule: &Value, attrs: &Attributes) -> bool {
    strings(&rule["resources"]).any(|entry| {
        let (resource, sub) = entry.split_once('/').unwrap_or((entry, ""));
        (resource == "*" || resource == attrs.resource.resource)
            && (sub == "*" || sub == attrs.sub_resource)
    })
}

fn selector(webhook: &Value, field: &str) -> Result<Selector, ApiError> {
    // An absent selector is what v1 defaulting turns into `{}`: match everything.
    Selector::from_label_selector(&webhook[field]).map_err(ApiError::internal)
}

fn match_namespace_selector(webhook: &Value, attrs: &Attributes) -> Result<bool, ApiError> {
    // kube-apiserver never exempts cluster-scoped objects other than namespaces by namespace
    // labels (it checks the resource name only, whatever the group).
    if attrs.namespace.is_empty() && attrs.resource.resource != "namespaces" {
        return Ok(true);
    }
    let selector = selector(webhook, "namespaceSelector")?;
    if selector.is_everything() {
        return Ok(true);
    }
    Ok(selector.matches(&namespace_labels(attrs)?))
}

fn namespace_labels(attrs: &Attributes) -> Result<BTreeMap<String, String>, ApiError> {
    // A namespace being created or updated is judged by its new labels: the stored namespace
    // is not there yet (create) or about to change (update).
    if attrs.resource.resource == "namespaces"
        && attrs.sub_resource.is_empty()
        && matches!(attrs.operation, Operation::Create | Operation::Update)
    {
        return Ok(attrs.object.as_ref().map(labels_of).unwrap_or_default());
    }
    // kube-apiserver answers a missing namespace with the namespace's NotFound.
    attrs
        .namespace_labels
        .clone()
        .ok_or_else(|| ApiError::not_found("", "namespaces", &attrs.namespace))
}

fn match_object_selector(webhook: &Value, attrs: &Attributes) -> Result<bool, ApiError> {
    let selector = selector(webhook, "objectSelector")?;
    if selector.is_everything() {
        return Ok(true);
    }
    // Either side counts: on CREATE only the new object exists, on DELETE only the old one, and
    // on UPDATE relabelling an object into or out of the selector is still seen.
    Ok(object_matches(attrs.object.as_ref(), &selector)
        || object_matches(attrs.old_object.as_ref(), &selector))
}

/// An object without metadata (such as the `PodExecOptions` of a CONNECT) never matches a
/// non-empty object selector: kube-apiserver cannot read labels from it.
fn object_matches(object: Option<&Value>, selector: &Selector) -> bool {
    object.is_some_and(|o| o["metadata"].is_object() && selector.matches_object(o))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::admission::{GroupVersionKind, GroupVersionResource};
    use crate::auth::UserInfo;
    use serde_json::json;

    pub(crate) fn pod_attrs(operation: Operation) -> Attributes {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "team-a", "labels": {"app": "web"}},
        });
        Attributes {
            operation,
            kind: GroupVersionKind::new("", "v1", "Pod"),
            resource: GroupVersionResource::new("", "v1", "pods"),
            sub_resource: String::new(),
            name: "p".into(),
            namespace: "team-a".into(),
            object: (operation != Operation::Delete).then(|| pod.clone()),
            old_object: matches!(operation, Operation::Update | Operation::Delete).then_some(pod),
            dry_run: false,
            options: json!({"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}),
            user: UserInfo::new("alice", "", &["system:authenticated"]),
            namespace_labels: Some(BTreeMap::from([("env".to_string(), "prod".to_string())])),
        }
    }

    fn node_attrs() -> Attributes {
        let mut a = pod_attrs(Operation::Create);
        a.kind = GroupVersionKind::new("", "v1", "Node");
        a.resource = GroupVersionResource::new("", "v1", "nodes");
        a.namespace = String::new();
        a.name = "n1".into();
        a.object = Some(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}));
        a.namespace_labels = None;
        a
    }

    fn namespace_attrs(operation: Operation, labels: Value) -> Attributes {
        let mut a = pod_attrs(operation);
        let ns = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "team-b", "labels": labels}});
        a.kind = GroupVersionKind::new("", "v1", "Namespace");
        a.resource = GroupVersionResource::new("", "v1", "namespaces");
        a.name = "team-b".into();
        a.namespace = if operation == Operation::Create {
            String::new()
        } else {
            "team-b".into()
        };
        a.object = (operation != Operation::Delete).then(|| ns.clone());
        a.old_object = (operation != Operation::Create).then_some(ns);
        a.namespace_labels = Some(BTreeMap::from([("stored".to_string(), "yes".to_string())]));
        a
    }

    fn hook(rules: Value) -> Value {
        json!({"name": "h.example.org", "rules": rules, "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "clientConfig": {"url": "https://127.0.0.1/"}})
    }

    fn rule(ops: &[&str], groups: &[&str], versions: &[&str], resources: &[&str]) -> Value {
        json!({"operations": ops, "apiGroups": groups, "apiVersions": versions, "resources": resources})
    }

    fn with(mut v: Value, key: &str, value: Value) -> Value {
        v[key] = value;
        v
    }

    #[test]
    fn rules_table() {
        let create = pod_attrs(Operation::Create);
        let mut status = pod_attrs(Operation::Update);
        status.sub_resource = "status".into();
        let mut apps = pod_attrs(Operation::Create);
        apps.resource = GroupVersionResource::new("apps", "v1", "deployments");
        let cases: Vec<(&str, Value, &Attributes, bool)> = vec![
            (
                "exact",
                rule(&["CREATE"], &[""], &["v1"], &["pods"]),
                &create,
                true,
            ),
            (
                "other op",
                rule(&["UPDATE"], &[""], &["v1"], &["pods"]),
                &create,
                false,
            ),
            (
                "op wildcard",
                rule(&["*"], &[""], &["v1"], &["pods"]),
                &create,
                true,
            ),
            (
                "several ops",
                rule(&["DELETE", "CREATE"], &[""], &["v1"], &["pods"]),
                &create,
                true,
            ),
            (
                "no ops",
                rule(&[], &[""], &["v1"], &["pods"]),
                &create,
                false,
            ),
            (
                "other group",
                rule(&["*"], &["apps"], &["v1"], &["pods"]),
                &create,
                false,
            ),
            (
                "group wildcard",
                rule(&["*"], &["*"], &["v1"], &["pods"]),
                &create,
                true,
            ),
            (
                "other version",
                rule(&["*"], &[""], &["v2"], &["pods"]),
                &create,
                false,
            ),
            (
                "version wildcard",
                rule(&["*"], &[""], &["*"], &["pods"]),
                &create,
                true,
            ),
            (
                "other resource",
                rule(&["*"], &[""], &["v1"], &["configmaps"]),
                &create,
                false,
            ),
            (
                "resource wildcard",
                rule(&["*"], &["*"], &["*"], &["*"]),
                &create,
                true,
            ),
            (
                "*/* main",
                rule(&["*"], &["*"], &["*"], &["*/*"]),
                &create,
                true,
            ),
            (
                "pods misses status",
                rule(&["*"], &[""], &["v1"], &["pods"]),
                &status,
                false,
            ),
            (
                "* misses status",
                rule(&["*"], &["*"], &["*"], &["*"]),
                &status,
                false,
            ),
            (
                "pods/status",
                rule(&["*"], &[""], &["v1"], &["pods/status"]),
                &status,
                true,
            ),
            (
                "pods/status misses main",
                rule(&["*"], &[""], &["v1"], &["pods/status"]),
                &create,
                false,
            ),
            (
                "pods/*",
                rule(&["*"], &[""], &["v1"], &["pods/*"]),
                &status,
                true,
            ),
            (
                "*/status",
                rule(&["*"], &["*"], &["*"], &["*/status"]),
                &status,
                true,
            ),
            (
                "*/scale",
                rule(&["*"], &["*"], &["*"], &["*/scale"]),
                &status,
                false,
            ),
            ("*/*", rule(&["*"], &["*"], &["*"], &["*/*"]), &status, true),
            (
                "apps group",
                rule(&["CREATE"], &["apps"], &["v1"], &["deployments"]),
                &apps,
                true,
            ),
            (
                "core group misses apps",
                rule(&["CREATE"], &[""], &["v1"], &["deployments"]),
                &apps,
                false,
            ),
        ];
        for (name, r, attrs, want) in cases {
            assert_eq!(matches(&hook(json!([r])), attrs), Ok(want), "{name}");
        }
        // Any one rule matching is enough; none at all matches nothing.
        let two = json!([
            rule(&["DELETE"], &[""], &["v1"], &["pods"]),
            rule(&["CREATE"], &[""], &["v1"], &["pods"])
        ]);
        assert_eq!(matches(&hook(two), &create), Ok(true));
        assert_eq!(matches(&hook(json!([])), &create), Ok(false));
        assert_eq!(matches(&json!({"name": "no-rules"}), &create), Ok(false));
    }

    #[test]
    fn scope_table() {
        let all = |scope: &str| {
            let mut r = rule(&["*"], &["*"], &["*"], &["*"]);
            r["scope"] = json!(scope);
            hook(json!([r]))
        };
        let pod = pod_attrs(Operation::Create);
        let node = node_attrs();
        let ns_create = namespace_attrs(Operation::Create, json!({}));
        let ns_update = namespace_attrs(Operation::Update, json!({}));
        let cases: Vec<(&str, &Attributes, bool)> = vec![
            ("*", &pod, true),
            ("*", &node, true),
            ("Namespaced", &pod, true),
            ("Namespaced", &node, false),
            ("Namespaced", &ns_create, false),
            ("Namespaced", &ns_update, false),
            ("Cluster", &pod, false),
            ("Cluster", &node, true),
            ("Cluster", &ns_create, true),
            ("Cluster", &ns_update, true),
            ("Bogus", &pod, false),
        ];
        for (scope, attrs, want) in cases {
            assert_eq!(
                matches(&all(scope), attrs),
                Ok(want),
                "{scope} {}",
                attrs.resource.resource
            );
        }
        // Absent scope is "*".
        assert_eq!(
            matches(&hook(json!([rule(&["*"], &["*"], &["*"], &["*"])])), &node),
            Ok(true)
        );
    }

    fn any_hook() -> Value {
        hook(json!([rule(&["*"], &["*"], &["*"], &["*", "*/*"])]))
    }

    #[test]
    fn namespace_selector_table() {
        let sel = |s: Value| with(any_hook(), "namespaceSelector", s);
        let pod = pod_attrs(Operation::Create);
        let prod = json!({"matchLabels": {"env": "prod"}});
        let dev = json!({"matchLabels": {"env": "dev"}});
        assert_eq!(matches(&sel(prod.clone()), &pod), Ok(true));
        assert_eq!(matches(&sel(dev.clone()), &pod), Ok(false));
        assert_eq!(matches(&sel(json!({})), &pod), Ok(true));
        let not_in =
            json!({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]});
        assert_eq!(matches(&sel(not_in), &pod), Ok(false));
        let exists = json!({"matchExpressions": [{"key": "env", "operator": "Exists"}]});
        assert_eq!(matches(&sel(exists), &pod), Ok(true));

        // Cluster-scoped objects other than namespaces are never exempted by it.
        assert_eq!(matches(&sel(dev.clone()), &node_attrs()), Ok(true));

        // A namespace being created or updated is judged by its own new labels ...
        let ns_create = namespace_attrs(Operation::Create, json!({"env": "dev"}));
        assert_eq!(matches(&sel(dev.clone()), &ns_create), Ok(true));
        assert_eq!(matches(&sel(prod.clone()), &ns_create), Ok(false));
        let ns_update = namespace_attrs(Operation::Update, json!({"env": "dev"}));
        assert_eq!(matches(&sel(dev.clone()), &ns_update), Ok(true));
        // ... a namespace being deleted by its stored labels.
        let ns_delete = namespace_attrs(Operation::Delete, json!({"env": "dev"}));
        assert_eq!(matches(&sel(dev.clone()), &ns_delete), Ok(false));
        let stored = json!({"matchLabels": {"stored": "yes"}});
        assert_eq!(matches(&sel(stored), &ns_delete), Ok(true));

        // Unknown namespace: the selector cannot be evaluated, kube-apiserver answers 404 -
        // but only for webhooks whose rules match.
        let mut orphan = pod_attrs(Operation::Create);
        orphan.namespace_labels = None;
        let err = matches(&sel(prod.clone()), &orphan).err();
        assert_eq!(err.as_ref().map(|e| e.code), Some(404));
        assert_eq!(
            err.map(|e| e.message),
            Some("namespaces \"team-a\" not found".to_string())
        );
        let configmaps_only = with(
            hook(json!([rule(&["*"], &[""], &["v1"], &["configmaps"])])),
            "namespaceSelector",
            prod,
        );
        assert_eq!(matches(&configmaps_only, &orphan), Ok(false));
    }

    #[test]
    fn object_selector_table() {
        let sel = |s: Value| with(any_hook(), "objectSelector", s);
        let web = json!({"matchLabels": {"app": "web"}});
        let db = json!({"matchLabels": {"app": "db"}});
        let create = pod_attrs(Operation::Create);
        assert_eq!(matches(&sel(web.clone()), &create), Ok(true));
        assert_eq!(matches(&sel(db.clone()), &create), Ok(false));
        assert_eq!(matches(&sel(json!({})), &create), Ok(true));

        // DELETE: only the old object exists.
        let delete = pod_attrs(Operation::Delete);
        assert!(delete.object.is_none());
        assert_eq!(matches(&sel(web.clone()), &delete), Ok(true));
        assert_eq!(matches(&sel(db.clone()), &delete), Ok(false));

        // UPDATE: a match on either side counts.
        let mut relabel = pod_attrs(Operation::Update);
        if let Some(o) = relabel.object.as_mut() {
            o["metadata"]["labels"] = json!({"app": "db"});
        }
        assert_eq!(matches(&sel(web.clone()), &relabel), Ok(true));
        assert_eq!(matches(&sel(db.clone()), &relabel), Ok(true));
        let cache = json!({"matchLabels": {"app": "cache"}});
        assert_eq!(matches(&sel(cache), &relabel), Ok(false));

        // An object without labels matches DoesNotExist; one without metadata matches nothing.
        let absent = json!({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]});
        assert_eq!(matches(&sel(absent.clone()), &node_attrs()), Ok(true));
        let mut connect = pod_attrs(Operation::Connect);
        connect.sub_resource = "exec".into();
        connect.object =
            Some(json!({"apiVersion": "v1", "kind": "PodExecOptions", "command": ["sh"]}));
        connect.old_object = None;
        assert_eq!(matches(&sel(absent), &connect), Ok(false));
    }

    #[test]
    fn selector_errors_are_internal_errors_when_rules_match() {
        let bad = json!({"matchExpressions": [{"key": "app", "operator": "Near"}]});
        let h = with(any_hook(), "objectSelector", bad);
        let err = matches(&h, &pod_attrs(Operation::Create)).err();
        assert_eq!(err.map(|e| e.code), Some(500));
    }

    #[test]
    fn failure_policy_defaults_to_fail() {
        assert!(fails_closed(&json!({})));
        assert!(fails_closed(&json!({"failurePolicy": "Fail"})));
        assert!(!fails_closed(&json!({"failurePolicy": "Ignore"})));
    }

    #[test]
    fn match_policy_exact_and_equivalent_agree() {
        let r = json!([rule(&["CREATE"], &[""], &["v1"], &["pods"])]);
        let pod = pod_attrs(Operation::Create);
        for policy in ["Exact", "Equivalent"] {
            let h = with(hook(r.clone()), "matchPolicy", json!(policy));
            assert_eq!(matches(&h, &pod), Ok(true), "{policy}");
            let other = with(
                hook(json!([rule(&["CREATE"], &[""], &["v2"], &["pods"])])),
                "matchPolicy",
                json!(policy),
            );
            assert_eq!(matches(&other, &pod), Ok(false), "{policy}");
        }
    }
}
