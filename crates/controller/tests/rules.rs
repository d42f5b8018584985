//! DependencyRules against the sandbox: the live check (the webhook's fallback when an object
//! carries the label but the index knows no relation) consults rules, not only usages.

mod common;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use lien_api::DependencyRule;
use lien_controller::live::ApiLiveCheck;
use lien_core::seams::LiveCheck;
use lien_core::{Decision, ObjectKey};
use serde_json::json;

#[tokio::test]
async fn the_live_check_finds_relations_only_a_rule_derives() {
    let (sandbox, client) = sandbox().await;
    // No controller runs: only the live read can know. Every ConfigMap is a `by` object of
    // the rule too, and those without `data.uses` fail to evaluate: they join nothing, as in
    // the controller, and stop nothing else.
    let db = create_cm(&client, "default", "db", json!({})).await;
    let other = create_cm(&client, "default", "other", json!({})).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "app"}, "data": {"uses": "db"}}))
            .expect("configmap"),
    )
    .await
    .expect("app creates");
    let rule: DependencyRule = serde_json::from_value(json!({
        "apiVersion": "lien.dev/v1alpha1", "kind": "DependencyRule",
        "metadata": {"name": "configmap-uses-configmap"},
        "spec": {
            "of": {"apiVersion": "v1", "kind": "ConfigMap"},
            "by": {"apiVersion": "v1", "kind": "ConfigMap"},
            "keys": {"of": "[self.metadata.name]", "by": "[self.data.uses]"},
            "reason": "app reads it"
        }
    }))
    .expect("rule");
    Api::<DependencyRule>::all(client.clone())
        .create(&PostParams::default(), &rule)
        .await
        .expect("the rule creates");

    let check = ApiLiveCheck::new(client.clone());
    let key = |name: &str| ObjectKey::new("", "ConfigMap", Some("default"), name);
    let decision = check
        .check(&key("db"), db.metadata.uid.as_deref())
        .await
        .expect("the live check answers");
    let Decision::Denied { blockers, .. } = decision else {
        panic!("db is in use by app through the rule: {decision:?}");
    };
    assert_eq!(blockers.len(), 1);
    assert_eq!(
        blockers[0].by.as_ref().map(|b| b.name.as_str()),
        Some("app")
    );
    assert_eq!(
        blockers[0].source.to_string(),
        "DependencyRule configmap-uses-configmap"
    );
    assert_eq!(blockers[0].reason.as_deref(), Some("app reads it"));
    let decision = check
        .check(&key("other"), other.metadata.uid.as_deref())
        .await
        .expect("the live check answers");
    assert_eq!(decision, Decision::Allowed);
    sandbox.shutdown().await;
}
