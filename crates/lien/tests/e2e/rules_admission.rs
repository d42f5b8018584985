//! The webhook's side of DependencyRules against the sandbox: a rule whose CEL does not
//! compile is refused at `kubectl apply` time naming the field; a namespace whose contents are
//! used from outside it is refused up front and, with replay on, deleted once they are not.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams};
use serde_json::json;

use crate::harness::*;

/// A DependencyRule with a syntax error in `spec.keys.by` is refused (422) by Lien's webhook,
/// naming the field; the same rule with the expression fixed is admitted.
#[tokio::test]
async fn a_rule_whose_cel_does_not_compile_is_refused_naming_the_field() {
    let mut env = Env::start("rule-bad-cel").await;
    let name = env.cluster_name("pv-uses-cm");
    let rule = |by: &str| {
        json!({"apiVersion": "lien.dev/v1alpha1", "kind": "DependencyRule",
            "metadata": {"name": name},
            "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap"},
                     "by": {"apiVersion": "v1", "kind": "Secret"},
                     "keys": {"of": "[self.metadata.name]", "by": by},
                     "reason": "the secret names its settings"}})
    };
    let (code, message) = api_error(
        env.try_create(rule("[self.metadata.annotations['settings']"))
            .await
            .expect_err("refused"),
    );
    assert_eq!(code, 422, "{message}");
    assert!(
        message.contains("admission webhook \"rules.lien.dev\""),
        "{message}"
    );
    assert!(message.contains("spec.keys.by: "), "{message}");
    assert!(message.contains("correct the CEL expression"), "{message}");
    env.try_create(rule("[self.metadata.annotations['settings']]"))
        .await
        .expect("the fixed rule is admitted");
    env.finish().await;
}

/// A ClusterUsage makes a ConfigMap in namespace A used by a ConfigMap in namespace B, with
/// replay. Deleting A is refused (409) naming the relation; once B's ConfigMap is gone, Lien
/// replays the refused deletion and A goes. A relation inside A never blocked it.
#[tokio::test]
async fn a_namespace_used_from_outside_is_refused_then_replayed() {
    let mut env = Env::start("ns-outside").await;
    let ns_a = env.another_namespace_name("a");
    let ns_b = env.ns.clone();
    env.namespace(&ns_a).await;
    let cm = |ns: &str, name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}});
    env.create(cm(&ns_a, "shared")).await;
    env.create(cm(&ns_a, "inner")).await;
    env.create(cm(&ns_b, "consumer")).await;
    let usage = |name: &str, of_ns: &str, of: &str, by_ns: &str, by: &str| {
        json!({"apiVersion": "lien.dev/v1alpha1", "kind": "ClusterUsage",
            "metadata": {"name": name},
            "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap",
                            "resourceRef": {"name": of, "namespace": of_ns}},
                     "by": {"apiVersion": "v1", "kind": "ConfigMap",
                            "resourceRef": {"name": by, "namespace": by_ns}},
                     "replayDeletion": true}})
    };
    let inside = env.cluster_name("inside");
    let outside = env.cluster_name("outside");
    env.create(usage(&inside, &ns_a, "shared", &ns_a, "inner"))
        .await;
    env.create(usage(&outside, &ns_a, "shared", &ns_b, "consumer"))
        .await;
    let in_a: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns_a);
    wait_label(&in_a, "shared", true).await;

    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    let message = wait_for("the namespace deletion to be refused", DEADLINE, || async {
        match namespaces.delete(&ns_a, &DeleteParams::default()).await {
            Err(e) => {
                let (code, message) = api_error(e);
                (code == 409 && message.contains("what is in it")).then_some(message)
            }
            Ok(_) => panic!("namespace {ns_a} deleted while its ConfigMap is used from {ns_b}"),
        }
    })
    .await;
    assert!(
        message.contains(&format!(
            "cannot delete Namespace {ns_a}: a lien holds what is in it: ConfigMap {ns_a}/shared \
             is in use by ConfigMap {ns_b}/consumer (ClusterUsage {outside}).\n"
        )) && message.contains(&format!(
            "To free it now, lift it: `kubectl delete configmap/consumer -n {ns_b}`;"
        )),
        "{message}"
    );
    assert!(
        !message.contains(&inside),
        "an inside relation is not named: {message}"
    );
    // Not deleting: refused up front, nothing Terminating.
    let a = namespaces
        .get(&ns_a)
        .await
        .expect("namespace A is still there");
    assert!(a.metadata.deletion_timestamp.is_none());

    // The outside user goes: the relation ends and the recorded deletion is replayed.
    Api::<ConfigMap>::namespaced(env.client.clone(), &ns_b)
        .delete("consumer", &DeleteParams::default())
        .await
        .expect("the consumer deletes");
    wait_for(
        "the refused deletion of namespace A to be replayed",
        DEADLINE,
        || async {
            match namespaces.get_opt(&ns_a).await {
                Ok(None) => Some(()),
                Ok(Some(ns)) => ns.metadata.deletion_timestamp.map(|_| ()),
                Err(_) => None,
            }
        },
    )
    .await;
    env.finish().await;
}

/// A ClusterRole with `rules`, bound cluster-wide to `user`; both removed at the end.
async fn grant_cluster(env: &mut Env, name: &str, user: &str, rules: serde_json::Value) {
    env.create(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name}, "rules": rules}),
    )
    .await;
    env.create(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}),
    )
    .await;
}

/// A user who may create DependencyRules but not update every ConfigMap cannot make a rule
/// whose `of` is ConfigMap: 403 from Lien naming the user, the verb, the resource and the fix.
/// Granted `update` on configmaps cluster-wide, the same rule is admitted.
#[tokio::test]
async fn a_rule_needs_update_on_every_object_of_its_of_kind() {
    let mut env = Env::start_with(
        "rule-consent",
        Options {
            authorization: lien_sandbox::apiserver::Authorization::Rbac,
            ..Options::default()
        },
    )
    .await;
    let user = format!("carol-{}", env.ns);
    let author = env.cluster_name("rule-author");
    grant_cluster(
        &mut env,
        &author,
        &user,
        json!([{"apiGroups": ["lien.dev"], "resources": ["dependencyrules"],
                "verbs": ["create", "get", "list", "watch"]}]),
    )
    .await;
    let carol = env.client_as(&user, &["system:authenticated"]).await;
    let name = env.cluster_name("app-uses-settings");
    let rule = json!({"apiVersion": "lien.dev/v1alpha1", "kind": "DependencyRule",
        "metadata": {"name": name},
        "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap"},
                 "by": {"apiVersion": "v1", "kind": "Secret"},
                 "reason": "every secret needs its namespace's settings"}});
    let rules: kube::Api<kube::api::DynamicObject> =
        kube::Api::all_with(carol, &api_resource(&rule));
    let create = || async {
        rules
            .create(
                &Default::default(),
                &serde_json::from_value(rule.clone()).expect("rule"),
            )
            .await
    };
    let (code, message) = api_error(create().await.expect_err("refused"));
    assert_eq!(code, 403, "{message}");
    for part in [
        "admission webhook \"rules.lien.dev\"",
        &format!(
            "spec.of: user {user:?} may not update every object of configmaps in every namespace"
        ),
        "Grant \"update\" on configmaps cluster-wide",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
    }
    let editor = env.cluster_name("cm-editor");
    grant_cluster(
        &mut env,
        &editor,
        &user,
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["update"]}]),
    )
    .await;
    wait_for(
        "the rule to be admitted once carol may update every ConfigMap",
        DEADLINE,
        || async { create().await.ok() },
    )
    .await;
    // Removed at the end with the scenario's other cluster-scoped objects.
    let _ = Api::<kube::api::DynamicObject>::all_with(env.client.clone(), &api_resource(&rule))
        .delete(&name, &DeleteParams::default())
        .await;
    env.finish().await;
}
