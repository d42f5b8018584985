//! Issue 7 §4, tampering: neither impersonating Lien nor editing or deleting its webhook
//! configuration unprotects an object in use.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

use crate::harness::*;

/// The tamper guard decides by state: while a relation holds, nobody — Lien's own service
/// account included, or whoever impersonates it — may remove the in-use label.
#[tokio::test]
async fn impersonating_lien_does_not_strip_the_label() {
    let mut env = Env::start("impersonate").await;
    env.protected_configmap("db", "protect-db", "production data")
        .await;
    let cms = env.configmaps();
    wait_label(&cms, "db", true).await;
    let as_lien = env
        .client_as(
            "system:serviceaccount:lien-system:lien",
            &[
                "system:serviceaccounts",
                "system:serviceaccounts:lien-system",
            ],
        )
        .await;
    let err = Api::<ConfigMap>::namespaced(as_lien, &env.ns)
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {LABEL: null}}})),
        )
        .await
        .expect_err("the label stays");
    let (code, msg) = api_error(err);
    assert_eq!(code, 409, "{msg}");
    assert!(msg.contains("cannot remove label lien.dev/in-use"), "{msg}");
    wait_refused(&cms, "db").await;
    env.finish().await;
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

/// Edited to let everything through, or deleted, Lien's configuration comes back within
/// seconds, and DELETEs of objects in use are refused again.
#[tokio::test]
async fn an_edited_or_deleted_webhook_configuration_is_restored() {
    let mut env = Env::start("vwc-restore").await;
    if !env.is_local() {
        // Editing a real cluster's webhook configuration is not a test to run on it.
        env.finish().await;
        return;
    }
    env.protected_configmap("db", "protect-db", "production data")
        .await;
    let cms = env.configmaps();
    wait_label(&cms, "db", true).await;
    wait_refused(&cms, "db").await;

    let api = vwcs(&env.client);
    let mut edited = api.get("lien").await.expect("Lien's configuration");
    for hook in edited.data["webhooks"]
        .as_array_mut()
        .expect("webhooks")
        .iter_mut()
    {
        hook["failurePolicy"] = json!("Ignore");
        hook["objectSelector"] = json!({"matchLabels": {"nothing": "matches"}});
    }
    api.replace(
        "lien",
        &PostParams {
            field_manager: Some("mallory".into()),
            ..PostParams::default()
        },
        &edited,
    )
    .await
    .expect("edited");
    wait_refused(&cms, "db").await;
    let restored = api.get("lien").await.expect("configuration");
    assert_eq!(restored.data["webhooks"][0]["failurePolicy"], "Fail");

    api.delete("lien", &DeleteParams::default())
        .await
        .expect("deleted");
    wait_refused(&cms, "db").await;
    assert!(api.get_opt("lien").await.expect("read").is_some());
    env.finish().await;
}

/// "When the webhook is down" (docs/ARCHITECTURE.md): with Lien stopped and its configuration
/// in place, what protection needs still fails closed — deleting an object in use, removing its
/// label — and nothing else does: other updates of an object in use, and deleting a namespace
/// that is not itself in use, go ahead.
#[tokio::test]
async fn only_what_protection_needs_fails_closed_while_lien_is_down() {
    let mut env = Env::start("lien-down").await;
    let spare = env.another_namespace_name("spare");
    env.namespace(&spare).await;
    env.protected_configmap("db", "protect-db", "production data")
        .await;
    let cms = env.configmaps();
    wait_label(&cms, "db", true).await;
    if !env.stop_lien().await {
        env.finish().await;
        return;
    }
    let err = cms
        .delete("db", &DeleteParams::default())
        .await
        .expect_err("fails closed");
    assert_eq!(api_error(err).0, 500);
    let err = cms
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {LABEL: null}}})),
        )
        .await
        .expect_err("fails closed");
    assert_eq!(api_error(err).0, 500);
    // An update that leaves the label alone is none of Lien's business.
    cms.patch(
        "db",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v"}, "metadata": {"labels": {"team": "a"}}})),
    )
    .await
    .expect("an ordinary update of an object in use");
    // A namespace not itself in use may go.
    Api::<k8s_openapi::api::core::v1::Namespace>::all(env.client.clone())
        .delete(&spare, &DeleteParams::default())
        .await
        .expect("deleting a namespace that is not in use");
    env.start_lien().await;
    wait_refused(&cms, "db").await;
    env.finish().await;
}
