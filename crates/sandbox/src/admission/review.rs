//! The `AdmissionReview` request body, field for field as kube-apiserver's
//! `CreateV1AdmissionReview` serialises it.

use serde_json::{Map, Value, json};

use super::Attributes;
use crate::auth::UserInfo;

/// `authentication.k8s.io/v1` `UserInfo` as Go marshals it: every field is `omitempty`
/// (`extra` is set only by impersonation).
pub(super) fn user_info(user: &UserInfo) -> Value {
    let mut m = Map::new();
    if !user.username.is_empty() {
        m.insert("username".into(), json!(user.username));
    }
    if !user.uid.is_empty() {
        m.insert("uid".into(), json!(user.uid));
    }
    if !user.groups.is_empty() {
        m.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        m.insert("extra".into(), json!(user.extra));
    }
    Value::Object(m)
}

/// What a review and a CEL `request` both say of the request, in Go's field order, from
/// `kind` to `userInfo`, `omitempty` fields left out when empty.
fn described(attrs: &Attributes) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("kind".into(), json!(attrs.kind));
    m.insert("resource".into(), json!(attrs.resource));
    if !attrs.sub_resource.is_empty() {
        m.insert("subResource".into(), json!(attrs.sub_resource));
    }
    m.insert("requestKind".into(), json!(attrs.kind));
    m.insert("requestResource".into(), json!(attrs.resource));
    if !attrs.sub_resource.is_empty() {
        m.insert("requestSubResource".into(), json!(attrs.sub_resource));
    }
    if !attrs.name.is_empty() {
        m.insert("name".into(), json!(attrs.name));
    }
    if !attrs.namespace.is_empty() {
        m.insert("namespace".into(), json!(attrs.namespace));
    }
    m.insert("operation".into(), json!(attrs.operation));
    m.insert("userInfo".into(), user_info(&attrs.user));
    m
}

/// The `request` of an `AdmissionReview`. Go's field order is kept; `subResource`,
/// `requestSubResource`, `name` and `namespace` are `omitempty`, while `object`, `oldObject`
/// and `options` are raw extensions that marshal as `null` when absent.
///
/// kube-apiserver sends the resource and kind the webhook matched (`resource`, `kind`) next to
/// the ones of the actual request (`requestResource`, `requestKind`); with each resource served
/// at a single version they are always equal here.
pub(super) fn admission_request(uid: &str, attrs: &Attributes) -> Value {
    let mut m = Map::new();
    m.insert("uid".into(), json!(uid));
    m.extend(described(attrs));
    // kube-apiserver encodes a built-in object from its Go struct: `creationTimestamp: null`
    // in a CREATE's object, a Pod's `status: {}` (`protobuf::go_json_zeros`).
    let typed = |o: &Option<Value>| {
        let mut o = o.clone().unwrap_or(Value::Null);
        if o.is_object() {
            crate::protobuf::go_json_zeros(&mut o);
        }
        o
    };
    m.insert("object".into(), typed(&attrs.object));
    m.insert("oldObject".into(), typed(&attrs.old_object));
    m.insert("dryRun".into(), json!(attrs.dry_run));
    m.insert("options".into(), attrs.options.clone());
    Value::Object(m)
}

/// A whole `AdmissionReview` of the given `apiVersion` (`admission.k8s.io/v1` or `/v1beta1`;
/// the request shape is the same in both).
pub(super) fn admission_review(api_version: &str, uid: &str, attrs: &Attributes) -> Value {
    json!({
        "kind": "AdmissionReview",
        "apiVersion": api_version,
        "request": admission_request(uid, attrs),
    })
}

/// The `request` variable of CEL match conditions: kube-apiserver's `CreateAdmissionRequest`,
/// which leaves out `uid`, `object` and `oldObject` (those are separate variables), converted
/// to a map by `runtime.DefaultUnstructuredConverter` (`cel/activation.go`), which honours
/// `omitempty`: an empty `subResource`, `requestSubResource`, `name` or `namespace`, and the
/// user's empty fields, are absent (`request.subResource` on a main resource's write is "no
/// such key", `has(request.subResource)` false), not empty strings.
pub(super) fn cel_request(attrs: &Attributes) -> Value {
    let mut m = described(attrs);
    m.insert("dryRun".into(), json!(attrs.dry_run));
    if !attrs.options.is_null() {
        m.insert("options".into(), attrs.options.clone());
    }
    Value::Object(m)
}
