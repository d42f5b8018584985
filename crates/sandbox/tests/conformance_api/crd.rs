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
    // Apply refuses the unknown field too. kube-apiserver's wording depends on whether the
    // structured-merge type check or the strict decoder catches it, so only the refusal is
    // checked here.
    let s = status(result);
    assert!(s.code == 400 || s.code == 500, "{s:?}");
    assert!(s.message.contains("spec.extra"), "{s:?}");
    assert!(widgets.get_opt("q").await.expect("get").is_none());
    sandbox.shutdown().await;
}
