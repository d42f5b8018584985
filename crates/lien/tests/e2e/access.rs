//! Who may protect what: a Usage's creator must be allowed to update the object in its
//! `spec.of` (Lien asks the API server with a SubjectAccessReview).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams};
use lien_sandbox::apiserver::Authorization;
use serde_json::json;

use crate::harness::*;

/// A user who may create Usages in team-a but may not update ConfigMaps in team-b cannot make
/// a Usage protect a team-b ConfigMap: 403, naming the user, the object and `spec.of`. Once
/// granted `update` on that ConfigMap, the same Usage is admitted and takes effect.
#[tokio::test]
async fn a_usage_needs_update_permission_on_what_it_protects() {
    let mut env = Env::start_with(
        "access",
        Options {
            authorization: Authorization::Rbac,
            ..Options::default()
        },
    )
    .await;
    let team_a = env.ns.clone();
    let team_b = env.another_namespace_name("b");
    env.namespace(&team_b).await;
    env.configmap("app", json!({})).await;
    env.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": team_b}}))
        .await;
    // A user name of this scenario only: on a shared cluster nobody else is bound to it.
    let user = format!("alice-{team_a}");
    grant(
        &mut env,
        &team_a,
        "usage-author",
        &user,
        json!([{"apiGroups": ["lien.dev"], "resources": ["usages"],
                "verbs": ["create", "get", "list", "watch"]}]),
    )
    .await;
    let alice = env.client_as(&user, &["system:authenticated"]).await;
    let usage = json!({"apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
        "metadata": {"name": "app-uses-settings", "namespace": team_a},
        "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap",
                        "resourceRef": {"name": "settings", "namespace": team_b}},
                 "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "app"}}}});
    let usages: Api<kube::api::DynamicObject> =
        Api::namespaced_with(alice.clone(), &team_a, &api_resource(&usage));
    let create = || async {
        usages
            .create(
                &Default::default(),
                &serde_json::from_value(usage.clone()).expect("usage"),
            )
            .await
    };

    let (code, message) = api_error(create().await.expect_err("refused"));
    println!("{code} {message}");
    assert_eq!(code, 403, "{message}");
    for part in [
        "spec.of",
        &format!("user {user:?}"),
        &format!("update configmaps \"settings\" in namespace \"{team_b}\""),
        "ask someone who has it to create this Usage",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
    }
    // Refused by Lien, not by RBAC: alice may create Usages in team-a.
    assert!(message.contains("admission webhook"), "{message}");

    grant(
        &mut env,
        &team_b,
        "settings-editor",
        &user,
        json!([{"apiGroups": [""], "resources": ["configmaps"],
                "resourceNames": ["settings"], "verbs": ["update"]}]),
    )
    .await;
    // RBAC on a real cluster applies a new binding within moments, not at once.
    wait_for(
        "the Usage to be admitted once alice may update settings",
        DEADLINE,
        || async { create().await.ok() },
    )
    .await;
    let team_b_cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &team_b);
    wait_label(&team_b_cms, "settings", true).await;

    // Tidy up in order: the user goes, and with it (as its owner) the Usage and the relation,
    // so that team-b's deletion is not refused (its ConfigMap is in use from outside it). Lien
    // makes the user an owner in a write of its own; waiting for it keeps this scenario on the
    // garbage collector's path (the other path, a user gone before it owned the Usage, is
    // `a_cluster_usage_protects_across_namespaces`).
    wait_for("the user to own the Usage", DEADLINE, || async {
        let usage = env.usages().get("app-uses-settings").await.ok()?;
        usage
            .metadata
            .owner_references
            .unwrap_or_default()
            .iter()
            .any(|o| o.kind == "ConfigMap" && o.name == "app")
            .then_some(())
    })
    .await;
    env.configmaps()
        .delete("app", &DeleteParams::default())
        .await
        .expect("app deleted");
    wait_gone(&env.usages(), "app-uses-settings", DEADLINE).await;
    wait_label(&team_b_cms, "settings", false).await;
    env.finish().await;
}
