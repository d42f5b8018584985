//! Custom resource validation, as "Extend the Kubernetes API with CustomResourceDefinitions"
//! documents it: OpenAPI v3 schema checks, CEL rules, pruning and strict field validation.

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common;
use crate::support::{status, widget, widget_crd};

/// Creates a widget expecting a 422 Invalid, returns its message.
async fn invalid(widgets: &Api<DynamicObject>, object: &DynamicObject) -> String {
    let s = status(widgets.create(&PostParams::default(), object).await);
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{s:?}");
    s.message
}

/// "Extend the Kubernetes API with CustomResourceDefinitions" (validation): the OpenAPI v3
/// schema is enforced on create with kube-apiserver's field errors: wrong type, missing
/// required field, value outside an enum, value above maximum.
#[tokio::test]
async fn schema_validation_errors() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let ar = widget_crd(&client).await;
    let widgets: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
    // The widget schema has CEL rules: kube-apiserver skips them after a "blocking" schema
    // error (wrong type, required, enum) and says so in a last error.
    let skipped = "<nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";
    let cases = [
        (
            json!({"size": "big"}),
            format!("Widget.example.com \"w\" is invalid: [spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\", {skipped}]"),
        ),
        (json!({"color": "red"}), format!("Widget.example.com \"w\" is invalid: [spec.size: Required value, {skipped}]")),
        (
            json!({"size": 1, "color": "pink"}),
            format!("Widget.example.com \"w\" is invalid: [spec.color: Unsupported value: \"pink\": supported values: \"red\", \"green\", {skipped}]"),
        ),
        (
            json!({"size": 11}),
            "Widget.example.com \"w\" is invalid: spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10".to_string(),
        ),
        (
            // A maximum violation does not block the CEL rules, which run and report too.
            json!({"size": 11, "min": 3, "max": 1}),
            "Widget.example.com \"w\" is invalid: [spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10, spec: Invalid value: \"object\": min must not exceed max]".to_string(),
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(
            invalid(&widgets, &widget(&ar, "w", spec.clone())).await,
            want,
            "spec {spec}"
        );
    }
    widgets
        .create(
            &PostParams::default(),
            &widget(&ar, "w", json!({"size": 10, "color": "green"})),
        )
        .await
        .expect("a valid widget");
    sandbox.shutdown().await;
}

/// A custom resource's body that names another kind than its CRD's is decoded (custom resources
/// are decoded as unstructured objects) and refused by validation, kube-apiserver's
/// `ValidateTypeMeta`: 422 with the kind's error beside the object's other errors, under the
/// kind the object names — not the 400 a built-in kind's decoding answers. Checked against
/// kube-apiserver v1.32.13 (differential case `crd/wrong-kind-for-resource`).
#[tokio::test]
async fn a_custom_resource_naming_another_kind_is_invalid_with_its_other_errors() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let ar = widget_crd(&client).await;
    let widgets: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
    let mut gadget = widget(&ar, "g", json!({"size": 1, "min": 5, "max": 2}));
    gadget.types.as_mut().expect("typed").kind = "Gadget".into();
    let s = status(widgets.create(&PostParams::default(), &gadget).await);
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{s:?}");
    assert_eq!(
        s.message,
        "Gadget.example.com \"g\" is invalid: [kind: Invalid value: \"Gadget\": must be Widget, spec: Invalid value: \"object\": min must not exceed max]"
    );
    let details = s.details.expect("details");
    assert_eq!(details.kind, "Gadget");
    assert_eq!(details.causes[0].field, "kind");
    assert_eq!(details.causes[0].reason, "FieldValueInvalid");
    // Nothing was stored; the same object under its own kind is.
    assert!(widgets.get_opt("g").await.expect("get").is_none());
    let mut fixed = widget(&ar, "g", json!({"size": 1}));
    fixed.types.as_mut().expect("typed").kind = "Widget".into();
    widgets
        .create(&PostParams::default(), &fixed)
        .await
        .expect("a widget");
    sandbox.shutdown().await;
}

/// "Extend the Kubernetes API with CustomResourceDefinitions" (validation rules): an
/// `x-kubernetes-validations` rule on `self` is checked on every write, reported at the rule's
/// field with its message; a transition rule using `oldSelf` is checked on updates only.
#[tokio::test]
async fn cel_validation_rules() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let ar = widget_crd(&client).await;
    let widgets: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
    assert_eq!(
        invalid(
            &widgets,
            &widget(&ar, "w", json!({"size": 1, "min": 5, "max": 2}))
        )
        .await,
        "Widget.example.com \"w\" is invalid: spec: Invalid value: \"object\": min must not exceed max"
    );
    widgets
        .create(
            &PostParams::default(),
            &widget(
                &ar,
                "w",
                json!({"size": 1, "min": 1, "max": 2, "owner": "ann"}),
            ),
        )
        .await
        .expect("valid: transition rules do not apply on create");
    let pp = PatchParams::default();
    let s = status(
        widgets
            .patch("w", &pp, &Patch::Merge(json!({"spec": {"owner": "bob"}})))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{s:?}");
    assert_eq!(
        s.message,
        "Widget.example.com \"w\" is invalid: spec.owner: Invalid value: \"string\": owner is immutable"
    );
    let s = status(
        widgets
            .patch("w", &pp, &Patch::Merge(json!({"spec": {"max": 0}})))
            .await,
    );
    assert_eq!(
        s.message,
        "Widget.example.com \"w\" is invalid: spec: Invalid value: \"object\": min must not exceed max"
    );
    widgets
        .patch(
            "w",
            &pp,
            &Patch::Merge(json!({"spec": {"owner": "ann", "max": 3}})),
        )
        .await
        .expect("an update keeping the owner passes");
    sandbox.shutdown().await;
}

/// "Extend the Kubernetes API with CustomResourceDefinitions" (field pruning) and "API
/// Concepts" (field validation): unknown fields are dropped and reported as warnings by
/// default, and refused with 400 under `fieldValidation=Strict`.
#[tokio::test]
async fn unknown_fields_are_pruned_or_refused_when_strict() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let ar = widget_crd(&client).await;
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let mut w = widget(&ar, "p", json!({"size": 1, "extra": "x"}));
    w.data["other"] = json!({"a": 1});
    let created = widgets
        .create(&PostParams::default(), &w)
        .await
        .expect("create prunes");
    assert_eq!(created.data["spec"], json!({"size": 1}));
    assert!(created.data.get("other").is_none(), "{:?}", created.data);
    let stored = widgets.get("p").await.expect("get");
    assert_eq!(stored.data["spec"], json!({"size": 1}));

    // POST with fieldValidation=Strict: the decoder's error, wrapped as kube-apiserver wraps
    // a body it cannot decode.
    let body = serde_json::to_vec(&json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "q"}, "spec": {"size": 1, "extra": "x"}
    }))
    .expect("body");
    let request = http::Request::post(
        "/apis/example.com/v1/namespaces/default/widgets?fieldValidation=Strict",
    )
    .header("content-type", "application/json")
    .body(body)
    .expect("request");
    let s = status(client.request::<DynamicObject>(request).await);
    assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"), "{s:?}");
    assert_eq!(
        s.message,
        "Widget in version \"v1\" cannot be handled as a Widget: strict decoding error: unknown field \"spec.extra\""
    );

    let strict = PatchParams::default().validation_strict();
    let s = status(
        widgets
            .patch(
                "p",
                &strict,
                &Patch::Merge(json!({"spec": {"extra": "x", "more": 1}})),
            )
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"), "{s:?}");
    assert_eq!(
        s.message,
        "strict decoding error: unknown field \"spec.extra\", unknown field \"spec.more\""
    );
    assert_eq!(
        widgets.get("p").await.expect("get").data["spec"],
        json!({"size": 1})
    );

    let apply = PatchParams::apply("mgr").validation_strict();
    let result = widgets
        .patch(
            "q",
            &apply,
            &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "q"}, "spec": {"size": 1, "extra": "x"}})),
        )
        .await;
    // Apply refuses the unknown field too, before any strict decoding: structured-merge-diff
    // cannot make the body into the kind's type, a plain error kube-apiserver answers 500
    // without a reason (checked against kube-apiserver v1.32.13 with a ConfigMap: differential
    // case `kubectl-apply/server-side-unknown-field`).
    let s = status(result);
    assert_eq!((s.code, s.reason.as_str()), (500, ""), "{s:?}");
    assert_eq!(
        s.message,
        "failed to create typed patch object (/q; example.com/v1, Kind=Widget): .spec.extra: field not declared in schema"
    );
    assert!(widgets.get_opt("q").await.expect("get").is_none());
    sandbox.shutdown().await;
}

/// "Server-Side Apply" (merge strategy): a custom resource's lists merge as its CRD's schema
/// says — `x-kubernetes-list-type: map` items are owned one by one by their keys, so a second
/// manager applying another item adds it beside the first manager's, without a conflict, and
/// `set` items are owned by value; a list without a type stays atomic (a conflict). Checked
/// against kube-apiserver v1.32.13 (differential case `crd/server-side-apply`).
#[tokio::test]
async fn server_side_apply_merges_a_custom_resources_lists_by_its_schema() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "ports.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "ports", "singular": "port", "kind": "Port", "listKind": "PortList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                        "type": "object",
                        "properties": {
                            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                                      "x-kubernetes-list-map-keys": ["port"],
                                      "items": {"type": "object", "required": ["port"],
                                                "properties": {"port": {"type": "integer"},
                                                               "name": {"type": "string"}}}},
                            "tags": {"type": "array", "x-kubernetes-list-type": "set",
                                     "items": {"type": "string"}},
                            "hosts": {"type": "array", "items": {"type": "string"}}
                        }}}}}}]
            }
        }))
        .expect("crd parses");
    let ar = crate::support::serve_crd(&client, &crd).await;
    let ports: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
    let apply = |spec: serde_json::Value| {
        Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Port",
                            "metadata": {"name": "p"}, "spec": spec}))
    };
    let first = ports
        .patch(
            "p",
            &PatchParams::apply("kubectl"),
            &apply(
                json!({"ports": [{"port": 8080, "name": "web"}], "tags": ["a"], "hosts": ["x"]}),
            ),
        )
        .await
        .expect("the first apply creates");
    let owned = &first.metadata.managed_fields.expect("managedFields")[0];
    let fields = serde_json::to_value(owned.fields_v1.as_ref().expect("fieldsV1")).expect("json");
    assert_eq!(
        fields["f:spec"],
        json!({"f:ports": {"k:{\"port\":8080}": {".": {}, "f:name": {}, "f:port": {}}},
               "f:tags": {"v:\"a\"": {}}, "f:hosts": {}})
    );
    let second = ports
        .patch(
            "p",
            &PatchParams::apply("other"),
            &apply(json!({"ports": [{"port": 9090}], "tags": ["b"]})),
        )
        .await
        .expect("another item of a map list and another value of a set conflict with nothing");
    assert_eq!(
        second.data["spec"],
        json!({"ports": [{"port": 8080, "name": "web"}, {"port": 9090}], "tags": ["a", "b"], "hosts": ["x"]})
    );
    let s = status(
        ports
            .patch(
                "p",
                &PatchParams::apply("other"),
                &apply(json!({"hosts": ["y"]})),
            )
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"), "{s:?}");
    assert!(s.message.contains(".spec.hosts"), "{s:?}");
    sandbox.shutdown().await;
}
