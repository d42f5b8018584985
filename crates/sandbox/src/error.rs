//! API errors, shaped exactly as kube-apiserver shapes them.
//!
//! Every failure a client sees is a `meta.k8s.io/v1` `Status` with `code`, `reason`, `message` and
//! (where the real server fills them) `details`. Clients print these words, so the constructors
//! below reproduce kube-apiserver's `apimachinery/pkg/api/errors` messages to the letter.

use serde_json::{Value, json};

/// One failure of an API request: becomes a `Status` body with `code` as the HTTP status.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: String,
    pub message: String,
    pub details: Option<Value>,
    /// `metadata.continue` of the Status: the fresh token of a 410 for an expired `continue`.
    pub continue_token: Option<String>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.reason, self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

/// `group` and `resource` as kube-apiserver writes a qualified resource: `configmaps` or
/// `widgets.example.org`.
pub fn qualified_resource(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

fn details(group: &str, kind_or_resource: &str, name: &str) -> Value {
    let mut d = serde_json::Map::new();
    if !name.is_empty() {
        d.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        d.insert("group".into(), json!(group));
    }
    // `kind,omitempty` in Go's StatusDetails.
    if !kind_or_resource.is_empty() {
        d.insert("kind".into(), json!(kind_or_resource));
    }
    Value::Object(d)
}

impl ApiError {
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
            continue_token: None,
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// `configmaps "x" not found`
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        let qr = qualified_resource(group, resource);
        let message = if name.is_empty() {
            format!("{qr} not found")
        } else {
            format!("{qr} \"{name}\" not found")
        };
        Self::new(404, "NotFound", message).with_details(details(group, resource, name))
    }

    /// A path or verb the server does not serve: the real server's bare 404.
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// `configmaps "x" already exists`
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!(
                "{} \"{name}\" already exists",
                qualified_resource(group, resource)
            ),
        )
        .with_details(details(group, resource, name))
    }

    /// Optimistic-concurrency failure on update.
    pub fn conflict_modified(group: &str, resource: &str, name: &str) -> Self {
        Self::conflict(
            group,
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// `Operation cannot be fulfilled on configmaps "x": <why>`
    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified_resource(group, resource)
            ),
        )
        .with_details(details(group, resource, name))
    }

    /// `Kind.group "name" is invalid: [field: Detail, ...]` with one cause per field error.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let qualified_kind = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let joined = match causes.len() {
            0 => String::new(),
            1 => format!(": {}", causes[0].message_with_field()),
            _ => format!(
                ": [{}]",
                causes
                    .iter()
                    .map(Cause::message_with_field)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let mut d = details(group, kind, name);
        d["causes"] = Value::Array(causes.iter().map(Cause::to_json).collect());
        Self::new(
            422,
            "Invalid",
            format!("{qualified_kind} \"{name}\" is invalid{joined}"),
        )
        .with_details(d)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// `configmaps "x" is forbidden: <why>`
    pub fn forbidden(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let qr = qualified_resource(group, resource);
        let message = if name.is_empty() {
            format!("{qr} is forbidden: {why}")
        } else {
            format!("{qr} \"{name}\" is forbidden: {why}")
        };
        Self::new(403, "Forbidden", message).with_details(details(group, resource, name))
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message).with_details(json!({}))
    }

    pub fn unsupported_media_type(content_type: &str, accepted: &[&str]) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
        .with_details(json!({"causes": [{"reason": "UnexpectedServerResponse", "message": content_type}]}))
    }

    /// `too old resource version: 5 (100)`
    pub fn gone(requested: u64, oldest: u64) -> Self {
        Self::new(
            410,
            "Expired",
            format!("too old resource version: {requested} ({oldest})"),
        )
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn internal(message: impl Into<String>) -> Self {
        let message = message.into();
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {message}"),
        )
        .with_details(json!({"causes": [{"message": message}]}))
    }

    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, "Timeout", message)
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(413, "RequestEntityTooLarge", message)
    }

    /// The `Status` object a client receives.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let (true, Some(map)) = (self.reason.is_empty(), status.as_object_mut()) {
            map.remove("reason");
        }
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        if let Some(token) = &self.continue_token {
            status["metadata"]["continue"] = json!(token);
        }
        status
    }

    /// Rebuilds an error from a `Status` another component (a webhook) returned.
    pub fn from_status(status: &Value) -> Self {
        ApiError {
            code: status["code"].as_u64().unwrap_or(500) as u16,
            reason: status["reason"].as_str().unwrap_or_default().to_string(),
            message: status["message"].as_str().unwrap_or_default().to_string(),
            details: status.get("details").cloned(),
            continue_token: None,
        }
    }
}

/// One field-level cause of an `Invalid` error (`metav1.StatusCause`).
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    /// `FieldValueRequired`, `FieldValueInvalid`, `FieldValueNotSupported`, `FieldValueForbidden`, …
    pub reason: String,
    /// The human text after the field path, e.g. `Required value`.
    pub message: String,
    /// The field path, e.g. `spec.replicas`; empty for object-level causes.
    pub field: String,
}

impl Cause {
    pub fn new(reason: &str, field: impl Into<String>, message: impl Into<String>) -> Self {
        Cause {
            reason: reason.to_string(),
            message: message.into(),
            field: field.into(),
        }
    }

    pub(crate) fn message_with_field(&self) -> String {
        if self.field.is_empty() {
            self.message.clone()
        } else {
            format!("{}: {}", self.field, self.message)
        }
    }

    fn to_json(&self) -> Value {
        // kube-apiserver's StatusCause carries the error body without the field path, which
        // is in `field`; clients join the two.
        json!({"reason": self.reason, "message": self.message, "field": self.field})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `StatusDetails.kind` is `omitempty`: a patch refused before its object's kind is known
    /// (`kubectl patch configmap cm -p '{"data":{"x":1}}'`) has no `kind` in its details.
    #[test]
    fn an_empty_kind_is_left_out_of_the_details() {
        let e = ApiError::invalid("", "", "", vec![]);
        let details = &e.to_status()["details"];
        assert!(details.get("kind").is_none(), "{details}");
        let e = ApiError::invalid("", "ConfigMap", "cm", vec![]);
        assert_eq!(e.to_status()["details"]["kind"], "ConfigMap");
    }

    #[test]
    fn not_found_reads_like_kube_apiserver() {
        let e = ApiError::not_found("", "configmaps", "x");
        assert_eq!(e.message, "configmaps \"x\" not found");
        let e = ApiError::not_found("example.org", "widgets", "w");
        assert_eq!(e.message, "widgets.example.org \"w\" not found");
        assert_eq!(e.to_status()["details"]["group"], "example.org");
    }

    #[test]
    fn invalid_joins_several_causes_in_brackets() {
        let e = ApiError::invalid(
            "example.org",
            "Widget",
            "w",
            vec![
                Cause::new("FieldValueRequired", "spec.a", "Required value"),
                Cause::new("FieldValueInvalid", "spec.b", "Invalid value: 1: bad"),
            ],
        );
        assert_eq!(
            e.message,
            "Widget.example.org \"w\" is invalid: [spec.a: Required value, spec.b: Invalid value: 1: bad]"
        );
        assert_eq!(e.code, 422);
        let single = ApiError::invalid(
            "",
            "ConfigMap",
            "c",
            vec![Cause::new("FieldValueRequired", "data", "Required value")],
        );
        assert_eq!(
            single.message,
            "ConfigMap \"c\" is invalid: data: Required value"
        );
    }
}
