//! Validating admission webhooks, as "Dynamic Admission Control" documents them.

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use lien_sandbox::testing::{TestWebhook, Verdict};
use serde_json::{Value, json};

use crate::common;
use crate::support::{
    DEADLINE, assert_unreachable, configmap, configmap_rules, denying_webhook, refused_create,
    register, start_webhook, status, unregister_as,
};

async fn unregister(client: &kube::Client, name: &str) {
    unregister_as::<ValidatingWebhookConfiguration>(client, name, "webhook").await;
}

/// The one request the webhook received for `operation` on `name` (object or oldObject).
fn request_for(hook: &TestWebhook, operation: &str, name: &str) -> Value {
    let matching: Vec<Value> = hook
        .requests()
        .into_iter()
        .filter(|r| r["operation"] == operation)
        .filter(|r| {
            r["object"]["metadata"]["name"] == name || r["oldObject"]["metadata"]["name"] == name
        })
        .collect();
    assert_eq!(
        matching.len(),
        1,
        "one {operation} request for {name}: {matching:#?}"
    );
    matching.into_iter().next().unwrap_or_default()
}

/// "Dynamic Admission Control" (webhook request): the AdmissionReview request carries uid,
/// kind, resource, name (empty for a generateName create), namespace, operation, the
/// requesting user, object, oldObject, dryRun and the operation's options.
#[tokio::test]
async fn webhook_request_carries_every_field() {
    let sandbox = common::sandbox().await;
    let admin = common::client(&sandbox).await;
    let user = common::client_for(&sandbox, "sandbox-user").await;
    let hook = start_webhook(|_| Verdict::Allow).await;
    register(
        &admin,
        hook.configuration("observe", configmap_rules(), "Fail", None),
    )
    .await;

    let as_admin: Api<ConfigMap> = Api::namespaced(admin.clone(), "default");
    let as_user: Api<ConfigMap> = Api::namespaced(user, "default");
    let mut generated = ConfigMap::default();
    generated.metadata.generate_name = Some("adm-".into());
    let created = as_admin
        .create(&PostParams::default(), &generated)
        .await
        .expect("create");
    let name = created.metadata.name.clone().expect("name");

    let create = request_for(&hook, "CREATE", &name);
    assert!(create["uid"].as_str().is_some_and(|u| !u.is_empty()));
    assert_eq!(
        create["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        create["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(create["requestKind"], create["kind"]);
    assert_eq!(create["requestResource"], create["resource"]);
    assert_eq!(
        create.get("name").and_then(Value::as_str).unwrap_or(""),
        "",
        "a generateName create has no name yet: {create:#}"
    );
    assert_eq!(create["namespace"], "default");
    assert_eq!(create["userInfo"]["username"], "sandbox-admin");
    assert_eq!(
        create["userInfo"]["groups"],
        json!(["system:masters", "system:authenticated"])
    );
    assert_eq!(create["object"]["metadata"]["name"], name.as_str());
    assert_eq!(create["object"]["kind"], "ConfigMap");
    assert_eq!(create["object"]["apiVersion"], "v1");
    assert_eq!(create["oldObject"], Value::Null);
    assert_eq!(create["dryRun"], false);
    assert_eq!(
        create["options"],
        json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"})
    );

    let mut changed = created.clone();
    changed.data = Some([("k".to_string(), "v".to_string())].into());
    let dry = PostParams {
        dry_run: true,
        field_manager: Some("tester".into()),
    };
    as_user
        .replace(&name, &dry, &changed)
        .await
        .expect("dry-run update");
    let update = request_for(&hook, "UPDATE", &name);
    assert_eq!(update["name"], name.as_str());
    assert_eq!(update["userInfo"]["username"], "sandbox-user");
    assert_eq!(
        update["userInfo"]["groups"],
        json!(["developers", "system:authenticated"])
    );
    assert_ne!(
        update["uid"], create["uid"],
        "every request has its own uid"
    );
    assert_eq!(update["object"]["data"], json!({"k": "v"}));
    assert_eq!(
        update["oldObject"]["metadata"]["resourceVersion"],
        json!(created.metadata.resource_version)
    );
    assert_eq!(update["dryRun"], true);
    assert_eq!(
        update["options"],
        json!({"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1", "dryRun": ["All"], "fieldManager": "tester"})
    );

    as_admin
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
    let delete = request_for(&hook, "DELETE", &name);
    assert_eq!(delete["name"], name.as_str());
    assert_eq!(delete["object"], Value::Null);
    assert_eq!(
        delete["oldObject"]["metadata"]["uid"],
        json!(created.metadata.uid)
    );
    assert_eq!(delete["options"]["kind"], "DeleteOptions");
    assert_eq!(delete["dryRun"], false);
    sandbox.shutdown().await;
    hook.stop().await;
}

/// "Dynamic Admission Control" (response): a denial reaches the client as `admission webhook
/// "<name>" denied the request: <message>` with the webhook's status code; a code below 400
/// becomes 400.
#[tokio::test]
async fn webhook_denial_reaches_the_client() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let hook = denying_webhook(422, "no thanks").await;
    register(
        &client,
        hook.configuration("deny", configmap_rules(), "Fail", None),
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let s = refused_create(&cms, "x").await;
    assert_eq!(s.code, 422);
    assert_eq!(
        s.message,
        "admission webhook \"deny.test.lien.dev\" denied the request: no thanks"
    );
    hook.set_decide(|_| Verdict::Deny {
        code: 200,
        message: "odd".into(),
    });
    let s = refused_create(&cms, "x").await;
    assert_eq!(s.code, 400, "a rejection is never below 400: {s:?}");
    assert_eq!(
        s.message,
        "admission webhook \"deny.test.lien.dev\" denied the request: odd"
    );
    assert!(
        cms.get_opt("x").await.expect("get").is_none(),
        "nothing was created"
    );
    sandbox.shutdown().await;
    hook.stop().await;
}

/// "Dynamic Admission Control" (matching requests: objectSelector): the selector is matched
/// against the new and the old object, so a DELETE (which has no new object) is judged by the
/// old one, and an update that removes the label still matches.
#[tokio::test]
async fn object_selector_matches_the_old_object_on_delete() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for (name, labels) in [
        ("guarded", &[("guard", "yes")][..]),
        ("guarded-too", &[("guard", "yes")][..]),
        ("free", &[][..]),
    ] {
        cms.create(&PostParams::default(), &configmap(name, labels))
            .await
            .expect("create");
    }
    let hook = denying_webhook(403, "guarded").await;
    let selector = json!({"matchLabels": {"guard": "yes"}});
    register(
        &client,
        hook.configuration("guard", configmap_rules(), "Fail", Some(selector)),
    )
    .await;

    let s = status(cms.delete("guarded", &DeleteParams::default()).await);
    assert_eq!(
        (s.code, s.message.as_str()),
        (
            403,
            "admission webhook \"guard.test.lien.dev\" denied the request: guarded"
        )
    );
    let s = status(
        cms.patch(
            "guarded-too",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"guard": null}}})),
        )
        .await,
    );
    assert_eq!(s.code, 403, "the old object still matches: {s:?}");
    cms.delete("free", &DeleteParams::default())
        .await
        .expect("unselected delete is not sent");
    assert!(
        hook.requests()
            .iter()
            .all(|r| r["oldObject"]["metadata"]["name"] != "free")
    );
    assert!(cms.get_opt("guarded").await.expect("get").is_some());
    sandbox.shutdown().await;
    hook.stop().await;
}

/// "Dynamic Admission Control" (failure policy): with the webhook unreachable, `Fail` refuses
/// the request with an internal error naming the webhook, `Ignore` lets it through.
#[tokio::test]
async fn failure_policy_when_the_webhook_is_down() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let hook = start_webhook(|_| Verdict::Allow).await;
    let url = hook.url().to_string();
    let fail = hook.configuration("down", configmap_rules(), "Fail", None);
    let ignore = hook.configuration("tolerant", configmap_rules(), "Ignore", None);
    hook.stop().await;

    register(&client, fail).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let s = refused_create(&cms, "x").await;
    assert_unreachable(&s, "down", &url);
    unregister(&client, "down").await;

    register(&client, ignore).await;
    cms.create(&PostParams::default(), &configmap("x", &[]))
        .await
        .expect("Ignore lets the write through");
    sandbox.shutdown().await;
}

/// "Dynamic Admission Control" (timeouts): a webhook that does not answer within
/// `timeoutSeconds` fails the call; under `failurePolicy: Fail` the request is refused.
#[tokio::test]
async fn webhook_timeout_is_enforced() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let hook = start_webhook(|_| Verdict::Hang(Duration::from_secs(60))).await;
    let mut config = hook.configuration("slow", configmap_rules(), "Fail", None);
    config["webhooks"][0]["timeoutSeconds"] = json!(1);
    register(&client, config).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let started = Instant::now();
    let s = refused_create(&cms, "x").await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < DEADLINE,
        "took {took:?}"
    );
    assert_eq!(s.code, 500, "{s:?}");
    let prefix = format!(
        "Internal error occurred: failed calling webhook \"slow.test.lien.dev\": failed to call webhook: Post \"{}?timeout=1s\": ",
        hook.url()
    );
    assert!(s.message.starts_with(&prefix), "{}", s.message);
    assert!(
        s.message.contains("context deadline exceeded"),
        "{}",
        s.message
    );
    sandbox.shutdown().await;
    drop(hook);
}
