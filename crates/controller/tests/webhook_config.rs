//! Issue 7 §4: Lien's ValidatingWebhookConfiguration, edited or deleted, is restored within
//! seconds with a Warning Event naming who changed it; until then every Usage says its
//! protection is not enforced instead of `InUse=True`.

mod common;

use common::*;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::events::Reporter;
use lien_controller::webhook_config::{CHANGED_REASON, Enforcement, Reconciler};
use serde_json::{Value, json};
use tokio::sync::watch;

const NAME: &str = "lien";

/// A configuration shaped like Lien's, whose one hook matches nothing the test does (its URL
/// leads nowhere; a hook that matched would fail every request closed).
fn desired() -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": NAME, "labels": {"app.kubernetes.io/managed-by": "lien"}},
        "webhooks": [{
            "name": "delete.lien.dev",
            "clientConfig": {"url": "https://127.0.0.1:9/validate"},
            "rules": [{"operations": ["DELETE"], "apiGroups": ["example.org"],
                       "apiVersions": ["*"], "resources": ["widgets"], "scope": "*"}],
            "failurePolicy": "Fail",
            "matchPolicy": "Equivalent",
            "sideEffects": "NoneOnDryRun",
            "timeoutSeconds": 5,
            "admissionReviewVersions": ["v1"],
            "objectSelector": {"matchLabels": {"lien.dev/in-use": "true"}},
        }],
    })
}

fn vwcs(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
        )),
    )
}

async fn failure_policy(api: &Api<DynamicObject>) -> Option<String> {
    let o = api.get_opt(NAME).await.ok()??;
    o.data["webhooks"][0]["failurePolicy"]
        .as_str()
        .map(str::to_owned)
}

async fn changed_events(client: &kube::Client) -> Vec<String> {
    Api::<Event>::namespaced(client.clone(), "default")
        .list(&Default::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(CHANGED_REASON))
        .filter_map(|e| e.note)
        .collect()
}

async fn usage_condition(client: &kube::Client, type_: &str) -> Option<(String, String)> {
    let u = Api::<lien_api::Usage>::namespaced(client.clone(), "default")
        .get("protect-db")
        .await
        .ok()?;
    condition(&u, type_)
}

#[tokio::test]
async fn an_edited_or_deleted_configuration_is_reported_and_restored() {
    let (sandbox, client) = sandbox().await;
    let api = vwcs(&client);
    let pp = |manager: &str| PostParams {
        field_manager: Some(manager.into()),
        ..PostParams::default()
    };
    api.create(
        &pp("lien"),
        &serde_json::from_value(desired()).expect("vwc"),
    )
    .await
    .expect("configuration");

    // Not the leader yet: it reports, but does not restore, so the state can be observed.
    let (leader_tx, leader_rx) = watch::channel(false);
    let (_desired_tx, desired_rx) = watch::channel(desired());
    let (enforcement_tx, enforcement) = Enforcement::channel();
    let reconciler = Reconciler::new(
        client.clone(),
        desired_rx,
        enforcement_tx,
        leader_rx,
        "lien",
        Reporter {
            controller: "lien-controller".into(),
            instance: None,
        },
    );
    let (stop_tx, stop_rx) = watch::channel(false);
    let task = tokio::spawn(reconciler.run(stop_rx));
    let ctl = start(
        &client,
        lien_controller::ControllerConfig {
            webhook: enforcement.clone(),
            ..test_config()
        },
    );
    create_cm(&client, "default", "db", json!({})).await;
    protect_cm(&client, "default", "protect-db", "db", "production data").await;
    wait_for("InUse=True", DEADLINE, || async {
        (usage_condition(&client, "InUse").await == Some(("True".into(), "InUse".into())))
            .then_some(())
    })
    .await;

    // Someone turns the hook into a no-op.
    let mut edited = api.get(NAME).await.expect("configuration");
    edited.data["webhooks"][0]["failurePolicy"] = json!("Ignore");
    edited.data["webhooks"][0]["objectSelector"] = json!({"matchLabels": {"nothing": "x"}});
    api.replace(NAME, &pp("mallory"), &edited)
        .await
        .expect("edited");
    let why = wait_for("the drift to be seen", DEADLINE, || async {
        enforcement.problem()
    })
    .await;
    assert!(
        why.contains("webhooks[delete.lien.dev].failurePolicy differs"),
        "{why}"
    );
    assert!(
        why.contains("webhooks[delete.lien.dev].objectSelector differs"),
        "{why}"
    );
    let not_configured = Some(("False".to_owned(), "WebhookNotConfigured".to_owned()));
    wait_for("InUse=False WebhookNotConfigured", DEADLINE, || async {
        (usage_condition(&client, "InUse").await == not_configured).then_some(())
    })
    .await;
    assert_eq!(usage_condition(&client, "Ready").await, not_configured);

    // The leader restores it, and says who changed it.
    leader_tx.send_replace(true);
    wait_for("the configuration restored", DEADLINE, || async {
        (failure_policy(&api).await.as_deref() == Some("Fail")).then_some(())
    })
    .await;
    let restored = api.get(NAME).await.expect("configuration");
    assert_eq!(
        restored.data["webhooks"][0]["objectSelector"],
        json!({"matchLabels": {"lien.dev/in-use": "true"}})
    );
    let notes = wait_for("a Warning event", DEADLINE, || async {
        Some(changed_events(&client).await).filter(|n| !n.is_empty())
    })
    .await;
    assert!(
        notes
            .iter()
            .any(|n| n.contains("failurePolicy differs") && n.contains("\"mallory\"")),
        "{notes:?}"
    );
    wait_for("InUse=True again", DEADLINE, || async {
        (usage_condition(&client, "InUse").await == Some(("True".into(), "InUse".into())))
            .then_some(())
    })
    .await;
    assert_eq!(enforcement.problem(), None);

    // Deleted: recreated.
    api.delete(NAME, &DeleteParams::default())
        .await
        .expect("deleted");
    wait_for("the configuration recreated", DEADLINE, || async {
        (failure_policy(&api).await.as_deref() == Some("Fail")).then_some(())
    })
    .await;
    wait_for("a Warning event for the deletion", DEADLINE, || async {
        changed_events(&client)
            .await
            .into_iter()
            .find(|n| n.contains("ValidatingWebhookConfiguration lien is missing"))
    })
    .await;

    stop_tx.send_replace(true);
    task.await.expect("reconciler stops");
    ctl.stop().await;
    drop(sandbox);
}
