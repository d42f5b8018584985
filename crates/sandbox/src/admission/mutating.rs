//! Mutating admission webhooks: kube-apiserver's mutating dispatcher (`mutating/dispatcher.go`)
//! with the admission chain's single reinvocation round (`admission/reinvocation.go`).
//!
//! Unlike validating webhooks, mutating webhooks are called one after the other — configurations
//! in name order, the webhooks of one configuration in list order — and each one sees the object
//! as the previous ones left it: its selectors and `matchConditions` are evaluated against it,
//! and its `AdmissionReview` carries it. An allowed answer may carry a base64 RFC 6902 JSON patch
//! (`patchType: JSONPatch`), applied at once.
//!
//! How things fail, as kube-apiserver fails them:
//!
//! * a denial: the webhook's `Status` (`admission webhook "x" denied the request: …`), whatever
//!   the failure policy;
//! * a call that could not be made or answered unusably — unreachable, timeout, bad answer, a
//!   `patchType` other than `JSONPatch` — is `failed calling webhook "x": …`: a 500 under
//!   `failurePolicy: Fail`, skipped under `Ignore`;
//! * a patch that is not a JSON patch document, a JSON patch that does not apply, or a patch of
//!   a request with no object (DELETE), is an internal error of the request whatever the
//!   failure policy (kube-apiserver returns those outside its "calling webhook" errors).
//!
//! `reinvocationPolicy: IfNeeded`: when a webhook changes the object, every `IfNeeded` webhook
//! called before it is called once more, after the first round, in the same order (never a
//! webhook that was not called in the first round, and at most once more).

use std::collections::BTreeSet;

use serde_json::Value;

use super::dispatch::{CallError, Kind, VerifiedResponse};
use super::matching::{fails_closed, matches};
use super::{Attributes, Dispatcher, is_exempt_kind};
use crate::error::ApiError;

/// What mutating admission made of a write.
#[derive(Debug, Clone, PartialEq)]
pub struct Mutation {
    /// The object after every patch, as the request addressed it (`None` where the request has
    /// no object, as a DELETE).
    pub object: Option<Value>,
    /// Whether any webhook's patch changed the object.
    pub changed: bool,
    /// The `warnings` of every webhook that answered, de-duplicated, in call order.
    pub warnings: Vec<String>,
}

impl Dispatcher {
    /// Calls every matching webhook of every MutatingWebhookConfiguration (v1 objects as
    /// stored) serially, applying their patches to `attrs.object`; then reinvokes the
    /// `IfNeeded` webhooks a later patch invalidated, once.
    ///
    /// `default` is applied to the object after every patch that changed it: kube-apiserver
    /// decodes a patched object as it decodes a request body, defaults included, so the next
    /// webhook sees it defaulted.
    pub async fn mutate(
        &self,
        configurations: &[Value],
        attrs: &Attributes,
        default: &(dyn Fn(&mut Value) + Send + Sync),
    ) -> Result<Mutation, ApiError> {
        let mut current = attrs.clone();
        let mut mutation = Mutation {
            object: attrs.object.clone(),
            changed: false,
            warnings: Vec::new(),
        };
        if is_exempt_kind(&attrs.kind) {
            return Ok(mutation);
        }
        let mut ordered: Vec<&Value> = configurations.iter().collect();
        ordered.sort_by_key(|c| c["metadata"]["name"].as_str().unwrap_or_default());
        // kube-apiserver tells webhooks apart by `<configuration>/<webhook>/<index>`.
        let mut hooks: Vec<(String, &Value)> = Vec::new();
        for configuration in ordered {
            let configuration_name = configuration["metadata"]["name"]
                .as_str()
                .unwrap_or_default();
            for (index, hook) in configuration["webhooks"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                let name = hook["name"].as_str().unwrap_or_default();
                hooks.push((format!("{configuration_name}/{name}/{index}"), hook));
            }
        }
        if hooks.is_empty() {
            return Ok(mutation);
        }

        let mut reinvocation = Reinvocation::default();
        for round in [Round::First, Round::Reinvocation] {
            if round == Round::Reinvocation && !reinvocation.requested {
                break;
            }
            for (id, hook) in &hooks {
                // Matching first, with the object as mutated so far; its errors fail the
                // request before anything else is decided.
                if !matches(hook, &current)? {
                    continue;
                }
                if round == Round::Reinvocation && !reinvocation.reinvoke.contains(id) {
                    continue;
                }
                let name = hook["name"].as_str().unwrap_or_default();
                let (warnings, result) = self.call_hook(hook, &current, Kind::Mutating).await;
                for w in warnings {
                    if !mutation.warnings.contains(&w) {
                        mutation.warnings.push(w);
                    }
                }
                let outcome = result
                    .and_then(|response| apply_patch(name, current.object.as_ref(), &response));
                let mut error = None;
                match outcome {
                    Ok(Some(mut patched)) => {
                        let changed = current.object.as_ref() != Some(&patched);
                        if changed {
                            default(&mut patched);
                            mutation.changed = true;
                            reinvocation.object_changed();
                        }
                        current.object = Some(patched);
                    }
                    Ok(None) => {}
                    Err(e) => error = Some(e),
                }
                if hook["reinvocationPolicy"].as_str() == Some("IfNeeded") {
                    reinvocation.invoked.insert(id.clone());
                }
                match error {
                    None => {}
                    Some(CallError::Calling(reason)) => {
                        let message = format!("failed calling webhook \"{name}\": {reason}");
                        if !fails_closed(hook) {
                            tracing::warn!(
                                "Failed calling webhook, failing open {name}: {message}"
                            );
                            continue;
                        }
                        tracing::warn!("Failed calling webhook, failing closed {name}: {message}");
                        return Err(ApiError::internal(message));
                    }
                    Some(CallError::Rejected(error)) => {
                        tracing::debug!("rejected by webhook {name:?}: {}", error.message);
                        return Err(error);
                    }
                }
            }
        }
        mutation.object = current.object;
        Ok(mutation)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Round {
    First,
    Reinvocation,
}

/// kube-apiserver's `webhookReinvokeContext` and the chain's `ShouldReinvoke`.
#[derive(Debug, Default)]
struct Reinvocation {
    /// `IfNeeded` webhooks called since the object last changed.
    invoked: BTreeSet<String>,
    /// Webhooks to call again in the reinvocation round.
    reinvoke: BTreeSet<String>,
    /// Some webhook changed the object: the chain runs a second round.
    requested: bool,
}

impl Reinvocation {
    /// A webhook changed the object: every `IfNeeded` webhook called before it must see the
    /// change (the webhook that made it is recorded after this, so it is not among them).
    fn object_changed(&mut self) {
        self.reinvoke.append(&mut self.invoked);
        self.requested = true;
    }
}

/// A webhook's patch applied to the object: `Ok(None)` when it sent none (or an empty one).
fn apply_patch(
    name: &str,
    object: Option<&Value>,
    response: &VerifiedResponse,
) -> Result<Option<Value>, CallError> {
    if response.patch.is_empty() {
        return Ok(None);
    }
    // The patch type is checked with the response (`VerifyAdmissionResponse`: a call error),
    // before the patch is decoded.
    if response.patch_type != "JSONPatch" {
        return Err(CallError::Calling(format!(
            "unsupported patch type \"{}\"",
            response.patch_type
        )));
    }
    // `jsonpatch.DecodePatch` failing is `apierrors.NewInternalError` in kube's
    // `callAttrMutatingHook`: not a call error, so it fails the request whatever the failure
    // policy (the differential's `webhooks/mutating-bad-patch-fails`: 500 under `Ignore`).
    let undecodable = |reason: String| CallError::Rejected(ApiError::internal(reason));
    // `jsonpatch.DecodePatch`: a JSON array of operation objects.
    let operations = match crate::patch::parse_json(&response.patch).map_err(undecodable)? {
        Value::Null => return Ok(None),
        Value::Array(ops) => ops,
        other => {
            return Err(undecodable(format!(
                "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
                crate::patch::go_json_type(&other)
            )));
        }
    };
    if let Some(bad) = operations
        .iter()
        .find(|op| !op.is_object() && !op.is_null())
    {
        return Err(undecodable(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
            crate::patch::go_json_type(bad)
        )));
    }
    if operations.is_empty() {
        return Ok(None);
    }
    let Some(object) = object else {
        return Err(CallError::Rejected(ApiError::internal(format!(
            "admission webhook \"{name}\" attempted to modify the object, which is not supported for this operation"
        ))));
    };
    // The Go library finds unknown operations and missing members only while applying: those
    // are errors of applying, not of decoding.
    let internal = |e: String| CallError::Rejected(ApiError::internal(e));
    let patch: json_patch::Patch = serde_json::from_value(Value::Array(operations))
        .map_err(|e| internal(format!("invalid JSON patch operation: {e}")))?;
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &patch).map_err(|e| internal(e.to_string()))?;
    check_type_kept(name, object, &mut patched)?;
    Ok(Some(patched))
}

/// A patched object is decoded into the request's type: `apiVersion` and `kind` left out are
/// the request's (a typed decoder defaults them); anything else that is not the same type is
/// refused. kube-apiserver fails such an object while converting it back, with a Go conversion
/// error; the sandbox names the webhook and the field instead.
fn check_type_kept(name: &str, original: &Value, patched: &mut Value) -> Result<(), CallError> {
    let Some(fields) = patched.as_object_mut() else {
        return Err(CallError::Rejected(ApiError::internal(format!(
            "admission webhook \"{name}\" patched the object into a JSON {}, not an object",
            crate::patch::go_json_type(patched)
        ))));
    };
    for field in ["apiVersion", "kind"] {
        let before = &original[field];
        match fields.get(field) {
            None | Some(Value::Null) => {
                if !before.is_null() {
                    fields.insert(field.to_string(), before.clone());
                }
            }
            Some(after) if after == before => {}
            Some(after) => {
                return Err(CallError::Rejected(ApiError::internal(format!(
                    "admission webhook \"{name}\" changed the object's {field} from {before} to {after}: a mutating webhook cannot change the type of the object it admits"
                ))));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn response(patch: Value, patch_type: &str) -> VerifiedResponse {
        VerifiedResponse::for_tests(serde_json::to_vec(&patch).unwrap_or_default(), patch_type)
    }

    fn message(e: CallError) -> (bool, String) {
        match e {
            CallError::Calling(m) => (true, m),
            CallError::Rejected(e) => (false, e.message),
        }
    }

    #[test]
    fn patches_apply_or_fail_as_kube_apiserver_fails_them() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        let add = json!([{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}]);
        let patched = apply_patch("m", Some(&cm), &response(add.clone(), "JSONPatch"));
        assert_eq!(
            patched
                .ok()
                .flatten()
                .map(|o| o["metadata"]["annotations"].clone()),
            Some(json!({"a": "b"}))
        );
        // No patch, `null` or `[]`: nothing to apply.
        for empty in [json!(null), json!([])] {
            assert!(matches!(
                apply_patch("m", Some(&cm), &response(empty, "JSONPatch")),
                Ok(None)
            ));
        }
        // Not a JSON patch document: an internal error whatever the failure policy, as
        // kube-apiserver 1.32 answered the differential's `webhooks/mutating-bad-patch-fails`.
        let e = apply_patch("m", Some(&cm), &response(json!({"op": "add"}), "JSONPatch"));
        assert_eq!(
            e.err().map(message),
            Some((
                false,
                "Internal error occurred: json: cannot unmarshal object into Go value of type jsonpatch.Patch".into()
            ))
        );
        // Another patch type: a call failure.
        let e = apply_patch("m", Some(&cm), &response(add.clone(), "MergePatch"));
        assert_eq!(
            e.err().map(message),
            Some((true, "unsupported patch type \"MergePatch\"".into()))
        );
        // A patch that does not apply: an internal error whatever the policy.
        let missing = json!([{"op": "replace", "path": "/data/nope", "value": "x"}]);
        let e = apply_patch("m", Some(&cm), &response(missing, "JSONPatch"));
        assert!(matches!(e.err().map(message), Some((false, _))));
        // No object (DELETE): any patch is an internal error.
        let e = apply_patch("m", None, &response(add, "JSONPatch"));
        assert_eq!(
            e.err().map(message),
            Some((
                false,
                "Internal error occurred: admission webhook \"m\" attempted to modify the object, which is not supported for this operation".into()
            ))
        );
    }

    #[test]
    fn the_type_of_the_object_is_kept() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        let dropped = json!([{"op": "remove", "path": "/kind"}]);
        let kept = apply_patch("m", Some(&cm), &response(dropped, "JSONPatch"));
        assert_eq!(kept.ok().flatten(), Some(cm.clone()));
        let changed = json!([{"op": "replace", "path": "/kind", "value": "Secret"}]);
        let e = apply_patch("m", Some(&cm), &response(changed, "JSONPatch"));
        let (calling, text) = e.err().map(message).unwrap_or_default();
        assert!(!calling);
        assert!(
            text.contains("changed the object's kind from \"ConfigMap\" to \"Secret\""),
            "{text}"
        );
    }

    #[test]
    fn reinvocation_covers_earlier_if_needed_webhooks_only() {
        let mut r = Reinvocation::default();
        r.invoked.insert("a".into());
        r.object_changed();
        r.invoked.insert("b".into());
        assert!(r.requested);
        assert!(r.reinvoke.contains("a") && !r.reinvoke.contains("b"));
    }
}
