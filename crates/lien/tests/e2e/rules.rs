//! DependencyRules: a rule over a custom kind protects what its objects reference, follows
//! their updates, replays refused deletions, releases on deletion of the dependent or the
//! rule, waits for a kind installed later, and counts evaluation errors.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use lien_api::DependencyRule;
use serde_json::{Value, json};

use crate::harness::*;

/// A namespaced `WebApp` kind in `group`, whose `spec` is free-form.
fn webapp_crd(group: &str) -> Value {
    namespaced_crd(group, "WebApp")
}

/// Installs the WebApp kind and waits until it is served.
async fn install_webapps(env: &mut Env, group: &str) {
    env.create(webapp_crd(group)).await;
    let api = webapps_api(env, group);
    wait_for("WebApps to be served", DEADLINE, || async {
        api.list(&Default::default()).await.ok().map(drop)
    })
    .await;
}

fn webapps_api(env: &Env, group: &str) -> Api<DynamicObject> {
    let ar = api_resource(&json!({"apiVersion": format!("{group}/v1"), "kind": "WebApp"}));
    Api::namespaced_with(env.client.clone(), &env.ns, &ar)
}

/// A WebApp reading ConfigMap `settings` (none: no `spec.settings`).
fn webapp(env: &Env, group: &str, name: &str, settings: Option<&str>) -> Value {
    let spec = settings.map_or(json!({}), |s| json!({"settings": s}));
    json!({"apiVersion": format!("{group}/v1"), "kind": "WebApp",
        "metadata": {"name": name, "namespace": env.ns}, "spec": spec})
}

const REASON: &str = "the web app reads its settings from it";

/// Rule `name`: a WebApp of `group` uses the ConfigMap its `spec.settings` names.
fn rule(name: &str, group: &str) -> Value {
    json!({"apiVersion": "lien.dev/v1alpha1", "kind": "DependencyRule",
    "metadata": {"name": name},
    "spec": {
        "of": {"apiVersion": "v1", "kind": "ConfigMap"},
        "by": {"apiVersion": format!("{group}/v1"), "kind": "WebApp"},
        "keys": {"of": "[self.metadata.name]", "by": "[self.spec.settings]"},
        "reason": REASON,
        "replayDeletion": true
    }})
}

fn rules(env: &Env) -> Api<DependencyRule> {
    Api::all(env.client.clone())
}

/// Waits until the rule's status satisfies `check`.
async fn wait_status(
    env: &Env,
    name: &str,
    what: &str,
    check: impl Fn(&lien_api::DependencyRuleStatus) -> bool,
) -> lien_api::DependencyRuleStatus {
    let api = rules(env);
    wait_for(what, DEADLINE, || async {
        api.get(name)
            .await
            .ok()
            .and_then(|r| r.status)
            .filter(|s| check(s))
    })
    .await
}

/// Waits for an Event regarding the (cluster-scoped) rule: such Events go to `default`.
async fn rule_event(env: &Env, name: &str, reason: &str) {
    let api: Api<Event> = Api::namespaced(env.client.clone(), "default");
    wait_for(
        &format!("a {reason} event regarding {name}"),
        DEADLINE,
        || async {
            let events = api.list(&Default::default()).await.ok()?;
            events
                .items
                .into_iter()
                .find(|e| {
                    e.reason.as_deref() == Some(reason)
                        && e.regarding.as_ref().is_some_and(|r| {
                            r.kind.as_deref() == Some("DependencyRule")
                                && r.name.as_deref() == Some(name)
                        })
                })
                .map(drop)
        },
    )
    .await;
}

fn ready(s: &lien_api::DependencyRuleStatus) -> Option<(&str, &str, &str)> {
    s.conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str()))
}

#[tokio::test]
async fn a_rule_protects_what_a_custom_kind_references_follows_it_and_replays() {
    let mut env = Env::start("rule-webapp").await;
    let group = "rule-webapp.example.org";
    let ns = env.ns.clone();
    install_webapps(&mut env, group).await;
    for name in ["site-a", "site-b"] {
        env.configmap(name, json!({})).await;
    }
    let name = env.cluster_name("webapp-uses-configmap");
    env.create(rule(&name, group)).await;
    env.create(webapp(&env, group, "shop", Some("site-a")))
        .await;
    let cms = env.configmaps();
    wait_label(&cms, "site-a", true).await;

    // Refused, naming the dependent, the rule and its reason.
    let message = wait_refused(&cms, "site-a").await;
    assert!(
        message.contains(&format!(
            "cannot delete ConfigMap {ns}/site-a: it is in use by {group}/WebApp {ns}/shop \
             (DependencyRule {name}: {REASON}).\n\
             Lien will delete it when its last user is gone.\n"
        )),
        "{message}"
    );
    // Every namespace also holds kube-controller-manager's kube-root-ca.crt, and a real
    // control plane keeps more ConfigMaps of its own in kube-system: a rule over ConfigMaps
    // sees every one of them, as on a cluster.
    wait_for("the namespace's kube-root-ca.crt", DEADLINE, || async {
        cms.get_opt("kube-root-ca.crt").await.ok().flatten()
    })
    .await;
    let all_configmaps = Api::<ConfigMap>::all(env.client.clone());
    let root_cas = all_configmaps
        .list(&kube::api::ListParams::default().fields("metadata.name=kube-root-ca.crt"))
        .await
        .expect("list the root CA ConfigMaps")
        .items
        .len() as u64;
    assert!(root_cas >= 5, "the four initial namespaces and the test's");
    let api = rules(&env);
    let (status, total) = wait_for("the rule's status", DEADLINE, || async {
        let total = all_configmaps
            .list(&Default::default())
            .await
            .ok()?
            .items
            .len() as u64;
        let s = api.get(&name).await.ok()?.status?;
        (s.relations == 1 && ready(&s).is_some_and(|r| r.0 == "True") && s.of_objects == total)
            .then_some((s, total))
    })
    .await;
    assert!(total >= 2 + root_cas, "{total} ConfigMaps");
    assert_eq!((status.of_objects, status.by_objects), (total, 1));
    assert_eq!(status.evaluation_errors, 0);

    // The hold moves with the WebApp's settings.
    webapps_api(&env, group)
        .patch(
            "shop",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"settings": "site-b"}})),
        )
        .await
        .expect("the WebApp updates");
    wait_label(&cms, "site-b", true).await;
    wait_label(&cms, "site-a", false).await;
    cms.delete("site-a", &DeleteParams::default())
        .await
        .expect("site-a is no longer in use");

    // A refused DELETE of site-b is replayed once the WebApp is gone.
    let err = cms
        .delete("site-b", &DeleteParams::default())
        .await
        .expect_err("site-b is in use");
    assert_eq!(api_error(err).0, 409);
    // The refusal is an Event on the object and on the rule that blocked it.
    rule_event(&env, &name, "DeletionRefused").await;
    env.wait_events("ConfigMap", "site-b", "DeletionRefused")
        .await;
    webapps_api(&env, group)
        .delete("shop", &DeleteParams::default())
        .await
        .expect("the WebApp deletes");
    wait_gone(&cms, "site-b", DEADLINE).await;
    wait_status(&env, &name, "the rule to hold nothing", |s| {
        s.relations == 0 && s.by_objects == 0
    })
    .await;
    env.finish().await;
}

#[tokio::test]
async fn deleting_a_rule_releases_its_objects_and_removes_the_label() {
    let mut env = Env::start("rule-delete").await;
    let group = "rule-delete.example.org";
    install_webapps(&mut env, group).await;
    env.configmap("settings", json!({})).await;
    env.create(webapp(&env, group, "shop", Some("settings")))
        .await;
    // `shared` is held by the rule and by a Usage: the rule's deletion leaves it held.
    env.protected_configmap("shared", "keep-shared", "kept by hand")
        .await;
    env.create(webapp(&env, group, "cart", Some("shared")))
        .await;
    let name = env.cluster_name("rule");
    env.create(rule(&name, group)).await;
    let cms = env.configmaps();
    wait_label(&cms, "settings", true).await;
    wait_refused(&cms, "settings").await;
    let by_rule = format!("DependencyRule {name}");
    // The Usage and the rule are read from two watches: either may be indexed first, so wait
    // until the refusal names both (the real control plane showed the rule's relation first).
    wait_refused_where(&cms, "shared", "held by the rule and the Usage", |m| {
        m.contains(&by_rule) && m.contains("keep-shared")
    })
    .await;

    rules(&env)
        .delete(&name, &DeleteParams::default())
        .await
        .expect("the rule deletes");
    wait_label(&cms, "settings", false).await;
    cms.delete("settings", &DeleteParams::default())
        .await
        .expect("nothing holds it any more");
    // Only the rule's relation went: the Usage still holds `shared`, label and all.
    let message = wait_refused_where(&cms, "shared", "held by the Usage alone", |m| {
        !m.contains("DependencyRule")
    })
    .await;
    assert!(message.contains("keep-shared"), "{message}");
    assert!(labelled(
        cms.get("shared")
            .await
            .expect("shared")
            .metadata
            .labels
            .as_ref()
    ));
    env.finish().await;
}

#[tokio::test]
async fn a_rule_over_a_kind_installed_later_becomes_ready_and_protects() {
    let mut env = Env::start("rule-later").await;
    let group = "rule-later.example.org";
    env.configmap("settings", json!({})).await;
    let name = env.cluster_name("rule");
    env.create(rule(&name, group)).await;
    let status = wait_status(&env, &name, "Ready=False, UnknownKind", |s| {
        ready(s).is_some_and(|r| r.1 == "UnknownKind")
    })
    .await;
    let (_, _, message) = ready(&status).expect("Ready");
    assert!(
        message.starts_with(&format!(
            "spec.by: the API server does not serve kind WebApp in {group}/v1"
        )),
        "{message}"
    );

    install_webapps(&mut env, group).await;
    env.create(webapp(&env, group, "shop", Some("settings")))
        .await;
    wait_status(&env, &name, "Ready=True", |s| {
        ready(s).is_some_and(|r| r.0 == "True") && s.relations == 1
    })
    .await;
    let cms: Api<ConfigMap> = env.configmaps();
    wait_label(&cms, "settings", true).await;
    wait_refused(&cms, "settings").await;
    env.finish().await;
}

#[tokio::test]
async fn an_evaluation_error_is_counted_in_status_and_stops_nothing_else() {
    let mut env = Env::start("rule-error").await;
    let group = "rule-error.example.org";
    install_webapps(&mut env, group).await;
    env.configmap("settings", json!({})).await;
    let name = env.cluster_name("rule");
    env.create(rule(&name, group)).await;
    // `spec.settings` is missing: the keys cannot be evaluated for this one.
    env.create(webapp(&env, group, "broken", None)).await;
    env.create(webapp(&env, group, "shop", Some("settings")))
        .await;
    let status = wait_status(&env, &name, "one evaluation error", |s| {
        s.evaluation_errors == 1 && s.relations == 1
    })
    .await;
    let error = &status.errors[0];
    assert_eq!(error.field, "spec.keys.by");
    assert!(error.object.contains("broken"), "{error:?}");
    assert!(!error.message.is_empty());
    let cms = env.configmaps();
    wait_label(&cms, "settings", true).await;
    env.finish().await;
}
