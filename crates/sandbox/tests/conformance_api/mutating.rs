//! Mutating admission webhooks, as "Dynamic Admission Control" documents them and
//! kube-apiserver's `MutatingAdmissionWebhook` plugin behaves: real HTTPS webhooks on
//! 127.0.0.1, configurations registered as ordinary objects.

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use lien_sandbox::testing::{TestWebhook, Verdict};
use serde_json::{Value, json};

use crate::common;
use crate::support::{
    assert_unreachable, configmap, configmap_rules, denying_webhook, refused_create, register,
    register_as, request, start_webhook, status, unregister_as,
};

/// Registers a mutating webhook configuration (`TestWebhook::mutating_configuration`'s JSON).
async fn register_mutating(client: &kube::Client, configuration: Value) {
    register_as::<MutatingWebhookConfiguration>(client, configuration, "mutating webhook").await;
}

/// Registers `hook` as the mutating configuration `name` for ConfigMaps under
/// `failure_policy`.
async fn register_hook(
    client: &kube::Client,
    hook: &TestWebhook,
    name: &str,
    failure_policy: &str,
) {
    register_mutating(
        client,
        hook.mutating_configuration(name, configmap_rules(), failure_policy, None),
    )
    .await;
}

/// `hook`'s mutating configuration `name` for ConfigMaps under `failure_policy`, with its
/// webhook's `field` set to `value`.
fn configuration_with(
    hook: &TestWebhook,
    name: &str,
    failure_policy: &str,
    field: &str,
    value: Value,
) -> Value {
    let mut config = hook.mutating_configuration(name, configmap_rules(), failure_policy, None);
    config["webhooks"][0][field] = value;
    config
}

/// Creates the unlabelled ConfigMap `name`; what the API server returned.
async fn create(cms: &Api<ConfigMap>, name: &str) -> ConfigMap {
    cms.create(&PostParams::default(), &configmap(name, &[]))
        .await
        .expect("create")
}

async fn unregister_mutating(client: &kube::Client, name: &str) {
    unregister_as::<MutatingWebhookConfiguration>(client, name, "mutating webhook").await;
}

/// The annotations of an object kube-rs returned.
fn annotations(cm: &ConfigMap) -> Vec<(String, String)> {
    cm.metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect()
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A webhook answering every object with a patch that annotates it `key: value`.
fn annotating(key: &'static str, value: &'static str) -> impl Fn(&Value) -> Verdict {
    move |request: &Value| {
        if request["object"].is_null() {
            return Verdict::Allow;
        }
        Verdict::annotate(&request["object"], key, value)
    }
}

/// "Dynamic Admission Control" (response: patch): the JSON patch of an allowed answer is
/// applied before the object is stored, the created object is returned patched, and the
/// webhook's warnings reach the client. The webhook sees the object before kube-apiserver's
/// `BeforeCreate`: no uid or creationTimestamp, and no name for a generateName create.
#[tokio::test]
async fn mutating_patch_is_stored() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let hook = start_webhook(|request| {
        let Verdict::Patch(patch) = Verdict::annotate(&request["object"], "stamped", "yes") else {
            return Verdict::Allow;
        };
        Verdict::Response(json!({
            "allowed": true,
            "patchType": "JSONPatch",
            "patch": encoded(&patch),
            "warnings": ["stamped by the test"],
        }))
    })
    .await;
    register_hook(&client, &hook, "stamp", "Fail").await;

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let created = create(&cms, "plain").await;
    assert_eq!(annotations(&created), pairs(&[("stamped", "yes")]));
    let stored = cms.get("plain").await.expect("get");
    assert_eq!(annotations(&stored), pairs(&[("stamped", "yes")]));
    assert!(stored.metadata.uid.is_some_and(|u| !u.is_empty()));

    let seen = hook.requests();
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert_eq!(seen[0]["operation"], "CREATE");
    assert_eq!(seen[0]["object"]["metadata"]["name"], "plain");
    assert_eq!(seen[0]["object"]["metadata"]["uid"], Value::Null);
    assert_eq!(
        seen[0]["object"]["metadata"]["creationTimestamp"],
        Value::Null
    );

    // The webhook's warnings come back as `Warning` headers.
    let body =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}});
    let reply = request(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[("content-type", "application/json")],
        serde_json::to_vec(&body).expect("body"),
    )
    .await;
    assert_eq!(
        reply.status,
        201,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(reply.warnings, ["299 - \"stamped by the test\""]);
    let generated = reply.json();
    assert_eq!(
        generated["metadata"]["annotations"],
        json!({"stamped": "yes"})
    );
    assert!(
        generated["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("gen-") && n.len() > 4)
    );
    let create = hook.requests().pop().unwrap_or_default();
    assert_eq!(
        create["object"]["metadata"].get("name"),
        None,
        "a generateName create has no name yet: {create:#}"
    );
    sandbox.shutdown().await;
    hook.stop().await;
}

/// A webhook annotating every object `record` with what it saw of its annotation `watched`
/// (`nothing` when it had none).
fn recording(watched: &'static str, record: &'static str) -> impl Fn(&Value) -> Verdict {
    move |request: &Value| {
        let saw = request["object"]["metadata"]["annotations"][watched]
            .as_str()
            .unwrap_or("nothing")
            .to_string();
        Verdict::annotate(&request["object"], record, &saw)
    }
}

/// A webhook allowing every request with this `patchType` and `patch` field, as sent.
fn answering(patch_type: &'static str, patch: Value) -> impl Fn(&Value) -> Verdict {
    move |_: &Value| {
        Verdict::Response(json!({"allowed": true, "patchType": patch_type, "patch": patch.clone()}))
    }
}

/// The Status refusing a merge patch of `data` into the ConfigMap `name`.
async fn refused_data_patch(cms: &Api<ConfigMap>, name: &str) -> Box<kube::core::Status> {
    status(
        cms.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "v"}})),
        )
        .await,
    )
}

/// A patch as a `patch` field carries it: base64 of its JSON.
fn encoded(patch: &Value) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(patch).expect("patch"))
}

/// "Dynamic Admission Control" (reinvocation policy / ordering): mutating webhooks are called
/// serially, configurations in name order, and each sees the object as the previous one left
/// it.
#[tokio::test]
async fn configurations_apply_in_name_order() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let first = start_webhook(annotating("first", "1")).await;
    // The second copies what it saw of the first's annotation.
    let second = start_webhook(recording("first", "second-saw")).await;
    // Registered in the opposite order: the names decide.
    register_hook(&client, &second, "b-second", "Fail").await;
    register_hook(&client, &first, "a-first", "Fail").await;

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create(&cms, "ordered").await;
    let stored = cms.get("ordered").await.expect("get");
    assert_eq!(
        annotations(&stored),
        pairs(&[("first", "1"), ("second-saw", "1")])
    );
    assert_eq!(
        second.requests()[0]["object"]["metadata"]["annotations"],
        json!({"first": "1"})
    );
    sandbox.shutdown().await;
    first.stop().await;
    second.stop().await;
}

/// "Dynamic Admission Control" (response): a mutating webhook's denial reaches the client as a
/// validating webhook's does, with its status code, and nothing is stored.
#[tokio::test]
async fn mutating_denial_is_refused() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let hook = denying_webhook(403, "not on my watch").await;
    register_hook(&client, &hook, "gate", "Ignore").await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let s = refused_create(&cms, "x").await;
    assert_eq!(
        (s.code, s.message.as_str()),
        (
            403,
            "admission webhook \"gate.test.lien.dev\" denied the request: not on my watch"
        ),
        "a denial is a denial whatever the failure policy"
    );
    assert!(cms.get_opt("x").await.expect("get").is_none());
    sandbox.shutdown().await;
    hook.stop().await;
}

/// "Dynamic Admission Control" (failure policy): an unreachable mutating webhook refuses the
/// request under `Fail` with an internal error naming it, and is skipped under `Ignore`.
#[tokio::test]
async fn failure_policy_of_an_unreachable_mutating_webhook() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let hook = start_webhook(annotating("never", "applied")).await;
    let fail = hook.mutating_configuration("down", configmap_rules(), "Fail", None);
    let ignore = hook.mutating_configuration("tolerant", configmap_rules(), "Ignore", None);
    let url = fail["webhooks"][0]["clientConfig"]["url"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    hook.stop().await;

    register_mutating(&client, fail).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let s = refused_create(&cms, "x").await;
    assert_unreachable(&s, "down", &url);
    unregister_mutating(&client, "down").await;

    register_mutating(&client, ignore).await;
    let created = cms
        .create(&PostParams::default(), &configmap("x", &[]))
        .await
        .expect("Ignore lets the write through");
    assert!(annotations(&created).is_empty());
    sandbox.shutdown().await;
}

/// kube-apiserver's mutating dispatcher: an answer whose patch is not a JSON patch document, or
/// a JSON patch that does not apply, refuses the request whatever the failure policy (measured:
/// kube-apiserver 1.32 answered 500 under `Ignore` in the differential's
/// `webhooks/mutating-bad-patch-fails`); a patch type other than `JSONPatch` is a failed call.
#[tokio::test]
async fn malformed_patches() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let hook = start_webhook(answering(
        "JSONPatch",
        json!(encoded(&json!({"op": "add", "path": "/data"}))),
    ))
    .await;
    register_hook(&client, &hook, "odd", "Fail").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let s = refused_create(&cms, "x").await;
    assert_eq!(s.code, 500, "{s:?}");
    assert_eq!(
        s.message,
        "Internal error occurred: json: cannot unmarshal object into Go value of type jsonpatch.Patch"
    );

    hook.set_decide(answering(
        "MergePatch",
        json!(encoded(
            &json!([{"op": "add", "path": "/data", "value": {"k": "v"}}])
        )),
    ));
    let s = refused_create(&cms, "x").await;
    assert_eq!(
        (s.code, s.message.as_str()),
        (
            500,
            "Internal error occurred: failed calling webhook \"odd.test.lien.dev\": unsupported patch type \"MergePatch\""
        )
    );

    hook.set_decide(answering("JSONPatch", json!("%%%")));
    let s = refused_create(&cms, "x").await;
    assert_eq!(s.code, 500, "{s:?}");
    assert!(
        s.message
            .contains("received invalid webhook response: illegal base64 data at input byte 0"),
        "{}",
        s.message
    );

    // Under Ignore a failed call is skipped (a patch type other than JSONPatch) ...
    unregister_mutating(&client, "odd").await;
    register_hook(&client, &hook, "odd-tolerant", "Ignore").await;
    hook.set_decide(answering(
        "MergePatch",
        json!(encoded(&json!({"data": {"k": "v"}}))),
    ));
    cms.create(&PostParams::default(), &configmap("skipped", &[]))
        .await
        .expect("a failed call is ignored under Ignore");

    // ... but a patch that is no JSON patch document fails the request under Ignore too ...
    hook.set_decide(answering(
        "JSONPatch",
        json!(encoded(&json!("not a patch"))),
    ));
    let s = refused_create(&cms, "x").await;
    assert_eq!(
        (s.code, s.message.as_str()),
        (
            500,
            "Internal error occurred: json: cannot unmarshal string into Go value of type jsonpatch.Patch"
        )
    );

    // ... and so does a patch that does not apply.
    hook.set_decide(|_| {
        Verdict::Patch(json!([{"op": "replace", "path": "/data/missing", "value": "v"}]))
    });
    let s = refused_create(&cms, "x").await;
    assert_eq!((s.code, s.reason.as_str()), (500, "InternalError"), "{s:?}");
    assert!(cms.get_opt("x").await.expect("get").is_none());
    sandbox.shutdown().await;
    hook.stop().await;
}

/// kube-apiserver's `BeforeUpdate` after mutating admission: a webhook cannot rename the object
/// it updates (`metadata.name: field is immutable`, 422) nor move it to another namespace
/// (400), nor change its kind. On CREATE the name is not fixed yet: kube-apiserver stores the
/// object under the name the webhook gave it.
#[tokio::test]
async fn identity_changes_by_a_patch() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let hook = start_webhook(|request| {
        if request["operation"] == "CREATE" {
            return Verdict::Patch(json!([
                {"op": "replace", "path": "/metadata/name", "value": "renamed"}
            ]));
        }
        Verdict::Patch(json!([{"op": "replace", "path": "/metadata/name", "value": "other"}]))
    })
    .await;
    register_hook(&client, &hook, "rename", "Ignore").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let created = create(&cms, "asked").await;
    assert_eq!(created.metadata.name.as_deref(), Some("renamed"));
    assert!(cms.get_opt("asked").await.expect("get").is_none());

    let s = refused_data_patch(&cms, "renamed").await;
    assert_eq!(
        (s.code, s.message.as_str()),
        (
            422,
            "ConfigMap \"other\" is invalid: metadata.name: Invalid value: \"other\": field is immutable"
        )
    );
    hook.set_decide(|_| {
        Verdict::Patch(
            json!([{"op": "replace", "path": "/metadata/namespace", "value": "kube-system"}]),
        )
    });
    let s = refused_data_patch(&cms, "renamed").await;
    assert_eq!(
        (s.code, s.message.as_str()),
        (
            400,
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    );
    hook.set_decide(|_| {
        Verdict::Patch(json!([{"op": "replace", "path": "/kind", "value": "Secret"}]))
    });
    let s = refused_data_patch(&cms, "renamed").await;
    assert_eq!(s.code, 500, "{s:?}");
    let stored = cms.get("renamed").await.expect("get");
    assert!(stored.data.is_none(), "no refused update was stored");
    sandbox.shutdown().await;
    hook.stop().await;
}

/// "Dynamic Admission Control" (matching requests: matchConditions): a mutating webhook is
/// called only for requests its CEL conditions accept, evaluated against the object.
#[tokio::test]
async fn match_conditions_gate_the_call() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let hook = start_webhook(annotating("gated", "yes")).await;
    let config = configuration_with(
        &hook,
        "gated",
        "Fail",
        "matchConditions",
        json!([{
            "name": "opted-in",
            "expression": "has(object.metadata.labels) && 'mutate' in object.metadata.labels",
        }]),
    );
    register_mutating(&client, config).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let opted = cms
        .create(
            &PostParams::default(),
            &configmap("opted", &[("mutate", "yes")]),
        )
        .await
        .expect("create");
    let plain = create(&cms, "plain").await;
    assert_eq!(annotations(&opted), pairs(&[("gated", "yes")]));
    assert!(annotations(&plain).is_empty());
    let seen = hook.requests();
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert_eq!(seen[0]["object"]["metadata"]["name"], "opted");
    sandbox.shutdown().await;
    hook.stop().await;
}

/// "Dynamic Admission Control" (matchConditions): a condition whose expression does not compile
/// is refused when the configuration is written — 422 naming the expression — and two
/// conditions may not share a name; checked against kube-apiserver v1.32.13 (differential case
/// `invalid/mutatingwebhook-bad-cel`).
#[tokio::test]
async fn a_match_condition_that_does_not_compile_is_refused_when_written() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let hook = start_webhook(annotating("gated", "yes")).await;
    let configs: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let write = |conditions: Value| {
        let config = configuration_with(&hook, "gated", "Fail", "matchConditions", conditions);
        let configs = configs.clone();
        async move {
            configs
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(config).expect("a configuration"),
                )
                .await
        }
    };
    let s = crate::support::status(
        write(json!([{"name": "c", "expression": "object.metadata.name =="}])).await,
    );
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{s:?}");
    let causes = s.details.expect("details").causes;
    assert_eq!(causes.len(), 1, "{causes:?}");
    assert_eq!(causes[0].field, "webhooks[0].matchConditions[0].expression");
    assert!(
        causes[0]
            .message
            .starts_with("Invalid value: \"object.metadata.name ==\": compilation failed: "),
        "{causes:?}"
    );
    let s = crate::support::status(
        write(json!([{"name": "c", "expression": "true"}, {"name": "c", "expression": "true"}]))
            .await,
    );
    assert_eq!(
        s.details.expect("details").causes[0].field,
        "webhooks[0].matchConditions[1].name"
    );
    write(json!([{"name": "c", "expression": "object.metadata.name == 'x'"}]))
        .await
        .expect("a condition that compiles is stored");
    sandbox.shutdown().await;
    hook.stop().await;
}

/// "Dynamic Admission Control" (side effects): a dry-run request is sent to a mutating webhook
/// with `sideEffects: None`, whose patch shows in the answer while nothing is stored.
#[tokio::test]
async fn dry_run_shows_the_patch_and_stores_nothing() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let hook = start_webhook(annotating("dry", "run")).await;
    register_hook(&client, &hook, "dry", "Fail").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let answered = cms
        .create(&dry, &configmap("ghost", &[]))
        .await
        .expect("dry-run create");
    assert_eq!(annotations(&answered), pairs(&[("dry", "run")]));
    assert!(cms.get_opt("ghost").await.expect("get").is_none());
    assert_eq!(hook.requests()[0]["dryRun"], true);

    // `sideEffects: Some` or `Unknown`, which would refuse a dry run, are not valid in
    // admissionregistration.k8s.io/v1 (the only version served), so no stored configuration
    // can have them.
    let config = configuration_with(&hook, "effects", "Ignore", "sideEffects", json!("Some"));
    let config: MutatingWebhookConfiguration =
        serde_json::from_value(config).expect("configuration parses");
    let s = status(
        Api::<MutatingWebhookConfiguration>::all(client.clone())
            .create(&PostParams::default(), &config)
            .await,
    );
    assert_eq!(s.code, 422, "{s:?}");
    sandbox.shutdown().await;
    hook.stop().await;
}

/// "Dynamic Admission Control" (reinvocation policy): a webhook with `reinvocationPolicy:
/// IfNeeded` is called once more when a later webhook changed the object after it ran, and
/// sees that change; with `Never` it is called once.
#[tokio::test]
async fn if_needed_webhooks_are_reinvoked() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    // The early webhook records what it saw of the late webhook's annotation.
    let early = start_webhook(recording("late", "early-saw")).await;
    let late = start_webhook(annotating("late", "here")).await;
    let config = configuration_with(
        &early,
        "a-early",
        "Fail",
        "reinvocationPolicy",
        json!("IfNeeded"),
    );
    register_mutating(&client, config).await;
    register_hook(&client, &late, "b-late", "Fail").await;

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let created = create(&cms, "again").await;
    assert_eq!(
        annotations(&created),
        pairs(&[("early-saw", "here"), ("late", "here")])
    );
    assert_eq!(early.requests().len(), 2, "called once more");
    assert_eq!(late.requests().len(), 1, "Never: called once");

    // With Never, the early webhook does not see the late one's change.
    let never = configuration_with(
        &early,
        "a-early",
        "Fail",
        "reinvocationPolicy",
        json!("Never"),
    );
    unregister_mutating(&client, "a-early").await;
    register_mutating(&client, never).await;
    let created = create(&cms, "once").await;
    assert_eq!(
        annotations(&created),
        pairs(&[("early-saw", "nothing"), ("late", "here")])
    );
    assert_eq!(early.requests().len(), 3);
    sandbox.shutdown().await;
    early.stop().await;
    late.stop().await;
}

/// "Dynamic Admission Control": mutating admission runs before validating admission, so a
/// validating webhook judges the object as the mutating webhooks left it.
#[tokio::test]
async fn validating_webhooks_see_the_mutated_object() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let mutator = start_webhook(annotating("mutated", "first")).await;
    let validator = start_webhook(|request| {
        if request["object"]["metadata"]["annotations"]["mutated"] == "first" {
            Verdict::Allow
        } else {
            Verdict::Deny {
                code: 403,
                message: "not mutated first".into(),
            }
        }
    })
    .await;
    register_hook(&client, &mutator, "mutator", "Fail").await;
    register(
        &client,
        validator.configuration("validator", configmap_rules(), "Fail", None),
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &configmap("checked", &[]))
        .await
        .expect("the validating webhook saw the mutated object");
    let seen = validator.requests();
    assert_eq!(
        seen[0]["object"]["metadata"]["annotations"],
        json!({"mutated": "first"})
    );
    // The validating webhook also sees what BeforeCreate set.
    assert!(seen[0]["object"]["metadata"]["uid"].is_string());

    // Updates too.
    cms.patch(
        "checked",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"mutated": null}}})),
    )
    .await
    .expect("update");
    let stored = cms.get("checked").await.expect("get");
    assert_eq!(annotations(&stored), pairs(&[("mutated", "first")]));
    sandbox.shutdown().await;
    mutator.stop().await;
    validator.stop().await;
}

/// kube-apiserver calls mutating webhooks on DELETE with the old object only; a patch in the
/// answer cannot apply to anything and fails the request.
#[tokio::test]
async fn delete_is_reviewed_without_an_object() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for name in ["kept", "gone"] {
        cms.create(&PostParams::default(), &configmap(name, &[]))
            .await
            .expect("create");
    }
    let hook = start_webhook(|_| {
        Verdict::Patch(json!([{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]))
    })
    .await;
    register_hook(&client, &hook, "deleting", "Ignore").await;
    let s = status(cms.delete("kept", &DeleteParams::default()).await);
    assert_eq!(
        (s.code, s.message.as_str()),
        (
            500,
            "Internal error occurred: admission webhook \"deleting.test.lien.dev\" attempted to modify the object, which is not supported for this operation"
        )
    );
    assert!(cms.get_opt("kept").await.expect("get").is_some());

    hook.set_decide(|_| Verdict::Allow);
    cms.delete("gone", &DeleteParams::default())
        .await
        .expect("an answer without a patch lets the delete through");
    let delete = hook.requests().pop().unwrap_or_default();
    assert_eq!(delete["operation"], "DELETE");
    assert_eq!(delete["object"], Value::Null);
    assert_eq!(delete["oldObject"]["metadata"]["name"], "gone");
    sandbox.shutdown().await;
    hook.stop().await;
}

/// A write through `scale` is reviewed as an autoscaling/v1 Scale: a mutating webhook patches
/// the Scale, and its replicas become the object's.
#[tokio::test]
async fn scale_writes_are_mutated_as_scales() {
    use k8s_openapi::api::apps::v1::Deployment;
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
        },
    }))
    .expect("deployment parses");
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create");
    // At most 3 replicas, whatever was asked.
    let hook = start_webhook(|request| {
        if request["object"]["spec"]["replicas"].as_i64() > Some(3) {
            Verdict::Patch(json!([{"op": "replace", "path": "/spec/replicas", "value": 3}]))
        } else {
            Verdict::Allow
        }
    })
    .await;
    let rules = json!([{"operations": ["UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"],
        "resources": ["deployments/scale"]}]);
    register_mutating(
        &client,
        hook.mutating_configuration("cap", rules, "Fail", None),
    )
    .await;
    let scale = deployments
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 10}})),
        )
        .await
        .expect("scale");
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(3));
    let stored = deployments.get("web").await.expect("get");
    assert_eq!(stored.spec.replicas, Some(3));
    let seen = hook.requests();
    assert_eq!(seen[0]["kind"]["kind"], "Scale");
    assert_eq!(seen[0]["object"]["spec"]["replicas"], 10);
    sandbox.shutdown().await;
    hook.stop().await;
}
