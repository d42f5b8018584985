//! The admissionregistration group's strategy (k/k `pkg/registry/admissionregistration/
//! <resource>/strategy.go` and `pkg/apis/admissionregistration/v1/defaults.go`): webhook
//! defaults matter because the dispatcher and `kubectl get -o yaml` both see them.

use serde_json::{Value, json};

use super::types::{StatusMetadata, Strategy};
use crate::error::Cause;
use crate::registry::ResourceType;

/// Validating and mutating webhook configurations, and the group's admission policies.
pub(super) struct Configurations;

impl Strategy for Configurations {
    /// `SetDefaults_ValidatingWebhook`/`_MutatingWebhook` are decode defaults: applied to every
    /// write, and owned by the writer's managedFields.
    fn defaults(&self, object: &mut Value) {
        default_webhooks(object);
    }
    fn validate(&self, _rt: &ResourceType, _version: &str, object: &Value) -> Vec<Cause> {
        validate_webhooks(object)
    }
    fn tracks_generation(&self) -> bool {
        true
    }
    /// `validatingAdmissionPolicyStatusStrategy` (the group's one status):
    /// `ResetObjectMetaForStatus`.
    fn status_metadata(&self) -> StatusMetadata {
        StatusMetadata::RESET_FOR_STATUS
    }
}

/// Webhook defaults (`admissionregistration/v1` defaulting).
fn default_webhooks(object: &mut Value) {
    // `get_mut`, not `object["webhooks"]`: indexing would insert `webhooks: null` into the
    // group's other kinds (ValidatingAdmissionPolicies), which strict decoding then refuses.
    let mutating = object["kind"] == "MutatingWebhookConfiguration";
    let Some(hooks) = object.get_mut("webhooks").and_then(Value::as_array_mut) else {
        return;
    };
    for hook in hooks {
        // `SetDefaults_MutatingWebhook`.
        if mutating && hook["reinvocationPolicy"].is_null() {
            hook["reinvocationPolicy"] = json!("Never");
        }
        for (field, value) in [
            ("failurePolicy", json!("Fail")),
            ("matchPolicy", json!("Equivalent")),
            ("namespaceSelector", json!({})),
            ("objectSelector", json!({})),
            ("timeoutSeconds", json!(10)),
        ] {
            if hook[field].is_null() {
                hook[field] = value;
            }
        }
        if let Some(rules) = hook["rules"].as_array_mut() {
            for rule in rules {
                if rule["scope"].is_null() {
                    rule["scope"] = json!("*");
                }
            }
        }
        if let Some(svc) = hook["clientConfig"].get_mut("service")
            && svc["port"].is_null()
        {
            svc["port"] = json!(443);
        }
    }
}

fn validate_webhooks(object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(hooks) = object["webhooks"].as_array() else {
        return causes;
    };
    let mut names = std::collections::HashSet::new();
    for (i, hook) in hooks.iter().enumerate() {
        let name = hook["name"].as_str().unwrap_or_default();
        if named_once(
            name,
            &format!("webhooks[{i}].name"),
            &mut names,
            &mut causes,
        ) && name.split('.').count() < 3
        {
            causes.push(Cause::new(
                "FieldValueInvalid",
                format!("webhooks[{i}].name"),
                format!("Invalid value: \"{name}\": should be a domain with at least three segments separated by dots"),
            ));
        }
        if !matches!(hook["sideEffects"].as_str(), Some("None" | "NoneOnDryRun")) {
            causes.push(Cause::new(
                "FieldValueNotSupported",
                format!("webhooks[{i}].sideEffects"),
                match hook["sideEffects"].as_str() {
                    Some(v) => format!(
                        "Unsupported value: \"{v}\": supported values: \"None\", \"NoneOnDryRun\""
                    ),
                    None => "Unsupported value: \"\": supported values: \"None\", \"NoneOnDryRun\""
                        .to_string(),
                },
            ));
        }
        let versions = hook["admissionReviewVersions"].as_array();
        if !versions.is_some_and(|v| v.iter().any(|v| v == "v1" || v == "v1beta1")) {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("webhooks[{i}].admissionReviewVersions"),
                "Required value: must specify one of v1, v1beta1",
            ));
        }
        let cc = &hook["clientConfig"];
        let has_url = cc["url"].is_string();
        let has_svc = cc["service"].is_object();
        if has_url == has_svc {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("webhooks[{i}].clientConfig"),
                "Required value: exactly one of url or service is required",
            ));
        }
        if let Some(url) = cc["url"].as_str()
            && !url.starts_with("https://")
        {
            {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    format!("webhooks[{i}].clientConfig.url"),
                    format!("Invalid value: \"{url}\": 'https' is the only allowed URL scheme"),
                ));
            }
        }
        if let Some(t) = hook["timeoutSeconds"].as_i64()
            && !(1..=30).contains(&t)
        {
            {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    format!("webhooks[{i}].timeoutSeconds"),
                    format!(
                        "Invalid value: {t}: the timeout value must be between 1 and 30 seconds"
                    ),
                ));
            }
        }
        match_conditions(hook, i, &mut causes);
    }
    causes
}

/// A name that must be given and given once in its list (a webhook's, a match condition's):
/// `Required value` or `Duplicate value` at `at`; whether it was both.
fn named_once<'a>(
    name: &'a str,
    at: &str,
    seen: &mut std::collections::HashSet<&'a str>,
    causes: &mut Vec<Cause>,
) -> bool {
    if name.is_empty() {
        causes.push(Cause::new("FieldValueRequired", at, "Required value"));
        false
    } else if !seen.insert(name) {
        causes.push(Cause::new(
            "FieldValueDuplicate",
            at,
            format!("Duplicate value: {}", Value::from(name)),
        ));
        false
    } else {
        true
    }
}

/// `ValidateMatchConditions` as kube-apiserver runs it on a write: each condition named once
/// and its expression compiled, so that a configuration whose condition can never evaluate is
/// refused (422) rather than failing every request it matches.
fn match_conditions(hook: &Value, i: usize, causes: &mut Vec<Cause>) {
    let Some(conditions) = hook["matchConditions"].as_array() else {
        return;
    };
    let mut names = std::collections::HashSet::new();
    for (j, condition) in conditions.iter().enumerate() {
        let at = format!("webhooks[{i}].matchConditions[{j}]");
        let name = condition["name"].as_str().unwrap_or_default();
        named_once(name, &format!("{at}.name"), &mut names, causes);
        let expression = condition["expression"].as_str().unwrap_or_default();
        if expression.is_empty() {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("{at}.expression"),
                "Required value",
            ));
        } else if let Err(e) = crate::schema::cel::compile(expression) {
            causes.push(crate::schema::field::invalid(
                &format!("{at}.expression"),
                &json!(expression),
                &format!("compilation failed: {e}"),
            ));
        }
    }
}
