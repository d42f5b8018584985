//! Warn-only rollout (issue 31): a Usage or DependencyRule with `spec.enforcement: Warn` refuses
//! nothing; a DELETE it would refuse goes through with an admission warning that kubectl prints,
//! the source's `Ready` reason says `WarnOnly`, `kubectl lien why` says nothing is refused, and
//! switching to `Deny` enforces it.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::harness::{DEADLINE, Env, Kubectl, condition, wait_for, wait_gone, wait_label};

/// Waits until the Usage `name` says `Ready` with `reason`.
async fn wait_ready_reason(usages: &Api<lien_api::Usage>, name: &str, reason: &str) {
    wait_for(&format!("{name}: Ready {reason}"), DEADLINE, || async {
        usages
            .get(name)
            .await
            .ok()
            .and_then(|u| condition(&u, "Ready"))
            .filter(|(status, r, _)| status == "True" && r == reason)
            .map(drop)
    })
    .await;
}

#[tokio::test]
async fn a_usage_in_warn_mode_lets_the_delete_through_with_a_warning_and_deny_enforces_it() {
    let mut env = Env::start("warn-mode").await;
    let ns = env.ns.clone();
    for name in ["first", "second"] {
        env.configmap(name, json!({"app": "orders-db"})).await;
    }
    env.usage(
        "keep-orders-db",
        json!({"of": {"apiVersion": "v1", "kind": "ConfigMap",
                      "resourceSelector": {"matchLabels": {"app": "orders-db"}}},
               "reason": "orders are stored there",
               "enforcement": "Warn"}),
    )
    .await;
    let cms = env.configmaps();
    let usages = env.usages();
    wait_label(&cms, "first", true).await;
    wait_label(&cms, "second", true).await;
    wait_ready_reason(&usages, "keep-orders-db", "WarnOnly").await;

    // `why` claims no protection: nothing is refused.
    let k = Kubectl::new(&env);
    let (ok, why, err) = k.run(&["lien", "why", "configmap/first", "-n", &ns]).await;
    assert!(ok, "{why}{err}");
    assert!(why.contains("a DELETE is NOT refused"), "{why}");
    assert!(why.contains("enforcement: Warn"), "{why}");

    // The DELETE goes through; kubectl prints the warning naming the Usage and its reason.
    let (ok, out, err) = k.run(&["delete", "configmap", "first", "-n", &ns]).await;
    assert!(ok, "the DELETE went through: {out}{err}");
    assert!(
        err.contains(&format!(
            "Warning: Lien would refuse this DELETE, but only warns (spec.enforcement: Warn): ConfigMap {ns}/first: it is protected (Usage {ns}/keep-orders-db: orders are stored there); set enforcement: Deny to enforce"
        )),
        "{err}"
    );
    wait_gone(&cms, "first", DEADLINE).await;

    // Deny: the same Usage now refuses, as any other.
    usages
        .patch(
            "keep-orders-db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"enforcement": "Deny"}})),
        )
        .await
        .expect("switched to Deny");
    wait_ready_reason(&usages, "keep-orders-db", "Resolved").await;
    let refused = super::harness::wait_refused(&cms, "second").await;
    assert!(refused.contains("keep-orders-db"), "{refused}");
    let (ok, out, err) = k.run(&["delete", "configmap", "second", "-n", &ns]).await;
    assert!(!ok, "{out}");
    assert!(err.contains("(Conflict)"), "{err}");
    assert!(cms.get("second").await.is_ok());
    env.finish().await;
}

/// A DependencyRule in warn mode: a pool with a dependent is deleted with a warning naming the
/// dependent; the rule says `WarnOnly`.
#[tokio::test]
async fn a_dependency_rule_in_warn_mode_warns_naming_the_dependents() {
    let mut env = Env::start("warn-rule").await;
    let ns = env.ns.clone();
    let rule = env.cluster_name("pools-in-warn");
    env.create(json!({"apiVersion": "lien.dev/v1alpha1", "kind": "DependencyRule",
        "metadata": {"name": rule},
        "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap"},
                 "by": {"apiVersion": "v1", "kind": "Secret"},
                 "keys": {"of": "[self.metadata.name]",
                          "by": "has(self.metadata.annotations) && 'pool' in self.metadata.annotations ? [self.metadata.annotations['pool']] : []"},
                 "reason": "a secret names this pool",
                 "enforcement": "Warn"}}))
    .await;
    env.configmap("pool", json!({})).await;
    env.create(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "share", "namespace": ns, "annotations": {"pool": "pool"}}}))
        .await;
    let cms: Api<ConfigMap> = env.configmaps();
    wait_label(&cms, "pool", true).await;
    let rules: Api<lien_api::DependencyRule> = Api::all(env.client.clone());
    wait_for("the rule: Ready WarnOnly", DEADLINE, || async {
        rules
            .get(&rule)
            .await
            .ok()
            .and_then(|r| r.status)
            .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "Ready"))
            .filter(|c| c.status == "True" && c.reason == "WarnOnly")
            .map(drop)
    })
    .await;
    let k = Kubectl::new(&env);
    let (ok, out, err) = k.run(&["delete", "configmap", "pool", "-n", &ns]).await;
    assert!(ok, "the DELETE went through: {out}{err}");
    assert!(
        err.contains(&format!(
            "it is in use by Secret {ns}/share (DependencyRule {rule}: a secret names this pool)"
        )),
        "{err}"
    );
    wait_gone(&cms, "pool", DEADLINE).await;
    env.finish().await;
}
