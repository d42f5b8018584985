//! `matchConditions`: CEL expressions that must all be true for a webhook to be called.
//!
//! Follows kube-apiserver's `matchconditions` matcher: every condition is evaluated; any
//! `false` skips the webhook (even when others failed to evaluate); otherwise evaluation errors
//! fail the request with `Forbidden` under `failurePolicy: Fail` and skip the webhook under
//! `Ignore`.
//!
//! Variables: `object`, `oldObject` (`null` where absent), `request` (the admission request
//! without `uid`/`object`/`oldObject`) and `namespaceObject` (`null`, as for webhooks). The
//! `authorizer` variable is not provided (the sandbox has no RBAC): an expression using it
//! fails to evaluate, and then `failurePolicy` applies. The function library is Lien's one CEL
//! engine's (`lien-cel`: the standard library, the strings and lists extensions and Kubernetes'
//! list and regex functions, without quantity, url, ip, …). An expression that does not parse
//! is refused when the configuration is written (`strategy::admissionregistration`); one that
//! parses but names what the sandbox lacks fails when evaluated.

use lien_cel::cel::{self, Context};
use serde_json::Value;

use super::Attributes;
use super::matching::fails_closed;
use super::review::cel_request;
use crate::error::ApiError;

pub(super) fn evaluate(webhook: &Value, attrs: &Attributes) -> Result<bool, ApiError> {
    let conditions = webhook["matchConditions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if conditions.is_empty() {
        return Ok(true);
    }
    let mut context = Context::with_env(lien_cel::env());
    context.add_variable_from_value("object", to_cel(attrs.object.as_ref()));
    context.add_variable_from_value("oldObject", to_cel(attrs.old_object.as_ref()));
    context.add_variable_from_value("request", to_cel(Some(&cel_request(attrs))));
    context.add_variable_from_value("namespaceObject", cel::Value::Null);

    let mut errors: Vec<String> = Vec::new();
    for condition in conditions {
        let expression = condition["expression"].as_str().unwrap_or_default();
        match evaluate_one(expression, &context) {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(true)
    } else if fails_closed(webhook) {
        Err(ApiError::forbidden(
            &attrs.resource.group,
            &attrs.resource.resource,
            &attrs.name,
            &aggregate(errors),
        ))
    } else {
        Ok(false)
    }
}

/// One condition, with kube-apiserver's error wording (`compilation error: …`,
/// `expression '…' resulted in error: …`).
fn evaluate_one(expression: &str, context: &Context) -> Result<bool, String> {
    // `compile_program` turns a panic of the parser into an error: a webhook configuration
    // must never take the server down.
    let program = match lien_cel::compile_program(expression) {
        Ok(p) => p,
        Err(e) => return Err(format!("compilation error: {e}")),
    };
    match program.execute(context) {
        Ok(cel::Value::Bool(b)) => Ok(b),
        Ok(other) => Err(format!(
            "expression '{expression}' resulted in error: expected a bool, got {:?}",
            other.type_of()
        )),
        // In cel-go's words, as kube-apiserver embeds them (`no such key: …`).
        Err(e) => Err(format!(
            "expression '{expression}' resulted in error: {}",
            crate::schema::cel::eval_error_text(&e)
        )),
    }
}

/// `utilerrors.NewAggregate(errs).Error()`: one message alone, several de-duplicated in
/// brackets.
fn aggregate(errors: Vec<String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in errors {
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    if seen.len() == 1 {
        seen.remove(0)
    } else {
        format!("[{}]", seen.join(", "))
    }
}

/// JSON to CEL, as Lien's CEL engine converts schema-less JSON (absent is `null`).
fn to_cel(value: Option<&Value>) -> cel::Value {
    value.map_or(cel::Value::Null, lien_cel::json_to_cel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Operation;
    use crate::admission::matching::matches;
    use crate::admission::matching::tests::pod_attrs;
    use serde_json::json;

    fn hook(conditions: Value, failure_policy: &str) -> Value {
        json!({
            "name": "cel.example.org",
            "failurePolicy": failure_policy,
            "rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}],
            "matchConditions": conditions,
        })
    }

    fn cond(name: &str, expression: &str) -> Value {
        json!({"name": name, "expression": expression})
    }

    #[test]
    fn conditions_table() {
        let create = pod_attrs(Operation::Create);
        let cases: Vec<(&str, bool)> = vec![
            ("true", true),
            ("false", false),
            ("object.metadata.labels.app == 'web'", true),
            ("object.metadata.labels.app == 'db'", false),
            (
                "has(object.metadata.labels) && 'app' in object.metadata.labels",
                true,
            ),
            ("oldObject == null", true),
            ("request.operation == 'CREATE'", true),
            ("request.namespace == 'team-a' && request.name == 'p'", true),
            (
                "request.resource.resource == 'pods' && request.kind.kind == 'Pod'",
                true,
            ),
            ("request.userInfo.username == 'alice'", true),
            ("'system:authenticated' in request.userInfo.groups", true),
            ("!request.userInfo.username.startsWith('system:')", true),
            ("request.dryRun", false),
            // Absent, not empty, on a main resource's write (omitempty, as kube-apiserver's
            // unstructured `request` has it): test with has().
            ("has(request.subResource)", false),
            (
                "!has(request.userInfo.uid) && !has(request.userInfo.extra)",
                true,
            ),
        ];
        for (expression, want) in cases {
            let h = hook(json!([cond("c", expression)]), "Fail");
            assert_eq!(matches(&h, &create), Ok(want), "{expression}");
        }
    }

    #[test]
    fn all_conditions_must_hold() {
        let create = pod_attrs(Operation::Create);
        let h = hook(json!([cond("a", "true"), cond("b", "false")]), "Fail");
        assert_eq!(matches(&h, &create), Ok(false));
        let h = hook(json!([cond("a", "true"), cond("b", "true")]), "Fail");
        assert_eq!(matches(&h, &create), Ok(true));
    }

    #[test]
    fn errors_follow_failure_policy_but_false_wins() {
        let create = pod_attrs(Operation::Create);
        let missing = "object.spec.nothing == 1";
        let err = matches(&hook(json!([cond("a", missing)]), "Fail"), &create).err();
        let err = err.map(|e| (e.code, e.reason, e.message));
        assert_eq!(
            err,
            Some((
                403,
                "Forbidden".to_string(),
                "pods \"p\" is forbidden: expression 'object.spec.nothing == 1' resulted in error: no such key: spec"
                    .to_string()
            ))
        );
        assert_eq!(
            matches(&hook(json!([cond("a", missing)]), "Ignore"), &create),
            Ok(false)
        );
        // kube-apiserver v1.32: "expression 'request.subResource == ...' resulted in error: no
        // such key: subResource" on every write of a main resource.
        let absent = matches(
            &hook(json!([cond("a", "request.subResource == ''")]), "Fail"),
            &create,
        )
        .err()
        .map(|e| e.message);
        assert!(
            absent
                .as_deref()
                .is_some_and(|m| m.ends_with("resulted in error: no such key: subResource")),
            "{absent:?}"
        );
        // A false condition skips the webhook even when another one errs.
        assert_eq!(
            matches(
                &hook(json!([cond("a", missing), cond("b", "false")]), "Fail"),
                &create
            ),
            Ok(false)
        );
        // Several errors are aggregated in brackets.
        let two = json!([
            cond("a", missing),
            cond("b", "authorizer.group('').check()")
        ]);
        let message = matches(&hook(two, "Fail"), &create)
            .err()
            .map(|e| e.message);
        assert!(
            message.as_deref().is_some_and(|m| m
                .starts_with("pods \"p\" is forbidden: [expression 'object.spec.nothing == 1'")),
            "{message:?}"
        );
        let bad = matches(&hook(json!([cond("a", "1 +")]), "Fail"), &create).err();
        assert!(
            bad.as_ref()
                .is_some_and(|e| e.message.contains("compilation error")),
            "{bad:?}"
        );
    }

    #[test]
    fn conditions_run_only_after_rules_match() {
        let mut h = hook(json!([cond("a", "object.spec.nothing")]), "Fail");
        h["rules"][0]["resources"] = json!(["configmaps"]);
        assert_eq!(matches(&h, &pod_attrs(Operation::Create)), Ok(false));
    }

    #[test]
    fn aggregate_dedupes() {
        assert_eq!(aggregate(vec!["a".into()]), "a");
        assert_eq!(aggregate(vec!["a".into(), "a".into()]), "a");
        assert_eq!(aggregate(vec!["a".into(), "b".into()]), "[a, b]");
    }
}
