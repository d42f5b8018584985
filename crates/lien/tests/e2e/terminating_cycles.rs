//! Issue 19, item 3: a cycle never deadlocks a namespace. Outside a namespace being deleted, a
//! Usage cycle is reported and every DELETE in it refused, as before; once the namespace is
//! deleted, the cycle is broken (a Warning `CycleBroken` Event on the Namespace names it) and
//! the namespace goes. A relation from outside the cycle still orders the deletion. Typed as a
//! user would, with kubectl.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use lien_controller::CYCLE_BROKEN_REASON;
use serde_json::json;

use super::harness::{DEADLINE, Env, Kubectl, wait_for, wait_label};

/// Two ConfigMaps that use each other, and a third that uses one of them (not in the cycle).
fn manifest(ns: &str) -> String {
    let mut out = String::new();
    for name in ["a", "b", "c"] {
        out.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {ns}}}\n"
        ));
    }
    for (by, of) in [("a", "b"), ("b", "a"), ("c", "a")] {
        out.push_str(&format!(
            "---\napiVersion: lien.dev/v1alpha1\nkind: Usage\nmetadata: {{name: {by}-uses-{of}, namespace: {ns}}}\nspec:\n  of: {{apiVersion: v1, kind: ConfigMap, resourceRef: {{name: {of}}}}}\n  by: {{apiVersion: v1, kind: ConfigMap, resourceRef: {{name: {by}}}}}\n  reason: {by} reads {of}\n"
        ));
    }
    out
}

#[tokio::test]
async fn a_usage_cycle_inside_a_deleted_namespace_is_broken_and_the_namespace_goes() {
    let mut env = Env::start("ns-cycle").await;
    let ns = env.another_namespace_name("shop");
    env.namespace(&ns).await;
    let k = Kubectl::new(&env);
    let (ok, out, err) = k
        .run_with_stdin(&["apply", "-f", "-"], Some(&manifest(&ns)))
        .await;
    assert!(ok, "{out}{err}");

    // Outside a namespace being deleted: reported, and held.
    for usage in ["a-uses-b", "b-uses-a"] {
        wait_for(&format!("{usage}: Ready=False Cycle"), DEADLINE, || async {
            let (_, out, _) = k
                .run(&[
                    "get",
                    "usage",
                    usage,
                    "-n",
                    &ns,
                    "-o",
                    "jsonpath={.status.conditions[?(@.type==\"Ready\")].reason}",
                ])
                .await;
            (out == "Cycle").then_some(())
        })
        .await;
    }
    let (ok, _, err) = k.run(&["delete", "configmap", "a", "-n", &ns]).await;
    assert!(
        !ok,
        "a DELETE inside a cycle is refused outside a terminating namespace"
    );
    assert!(err.contains("delete.lien.dev"), "{err}");

    // The namespace is deleted: the cycle is broken and everything goes.
    let (ok, out, err) = k.run(&["delete", "namespace", &ns, "--wait=false"]).await;
    assert!(ok, "{out}{err}");
    let namespaces = Api::<Namespace>::all(env.client.clone());
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    while namespaces
        .get_opt(&ns)
        .await
        .expect("get namespace")
        .is_some()
    {
        if tokio::time::Instant::now() > end {
            // What kept it, for the failure's message.
            let (_, status, _) = k.run(&["get", "namespace", &ns, "-o", "yaml"]).await;
            let (_, left, _) = k
                .run(&["get", "configmaps,usages", "-n", &ns, "-o", "yaml"])
                .await;
            panic!("namespace {ns} still there after 60 s:\n{status}\n{left}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The Warning names the cycle (a, b) and the Usages that made it, not c.
    let events = Api::<Event>::all(env.client.clone());
    let note = wait_for("a CycleBroken event on the Namespace", DEADLINE, || async {
        events
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some(CYCLE_BROKEN_REASON)
                    && e.regarding.as_ref().is_some_and(|r| {
                        r.kind.as_deref() == Some("Namespace") && r.name.as_deref() == Some(&ns)
                    })
            })
            .map(|e| (e.type_, e.note.unwrap_or_default()))
    })
    .await;
    assert_eq!(note.0.as_deref(), Some("Warning"));
    assert_eq!(
        note.1,
        format!(
            "namespace {ns} is being deleted and these objects in it use each other, so none could go first: ConfigMap {ns}/a, ConfigMap {ns}/b (through Usage {ns}/a-uses-b, Usage {ns}/b-uses-a); Lien no longer enforces the namespace's own Usages between them (DependencyRules and ClusterUsages still hold) so that the namespace can finish"
        )
    );
    drop(k);
    env.finish().await;
}

/// Issue 28, finding 3 (seed 002's rule): a DependencyRule says a ConfigMap (the finalizer's
/// Deployment, in the seed) outlives every WebApp naming it (the objects carrying the
/// finalizer); a tenant's Usage says the opposite, closing a cycle. Deleting the namespace breaks
/// the cycle by dropping the tenant's Usage only: the ConfigMap is not deleted while the WebApp
/// (held by its own finalizer) exists, and goes after it. Before, the whole cycle was broken:
/// the ConfigMap went first, and with it whatever would have removed the WebApp's finalizer.
#[tokio::test]
async fn a_rule_in_a_cycle_with_a_tenants_usage_keeps_its_order_in_a_deleted_namespace() {
    let mut env = Env::start("ns-rule-cycle").await;
    let group = format!("{}.example.org", env.ns);
    env.create(super::harness::namespaced_crd(&group, "WebApp"))
        .await;
    let ns = env.another_namespace_name("shop");
    env.namespace(&ns).await;
    let rule = env.cluster_name("served-by");
    env.create(
        json!({"apiVersion": "lien.dev/v1alpha1", "kind": "DependencyRule",
        "metadata": {"name": rule},
        "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap"},
                 "by": {"apiVersion": format!("{group}/v1"), "kind": "WebApp"},
                 "keys": {"of": "[self.metadata.name]", "by": "[self.spec.servedBy]"},
                 "reason": "the webapp's finalizer is served from it"}}),
    )
    .await;
    let webapps = Api::<DynamicObject>::namespaced_with(
        env.client.clone(),
        &ns,
        &super::harness::api_resource(
            &json!({"apiVersion": format!("{group}/v1"), "kind": "WebApp"}),
        ),
    );
    wait_for("WebApps to be served", DEADLINE, || async {
        webapps.list(&Default::default()).await.ok().map(drop)
    })
    .await;
    env.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "served-by", "namespace": ns}}))
        .await;
    env.create(
        json!({"apiVersion": format!("{group}/v1"), "kind": "WebApp",
        "metadata": {"name": "cool", "namespace": ns, "finalizers": ["example.org/served"]},
        "spec": {"servedBy": "served-by"}}),
    )
    .await;
    // The tenant's Usage: the ConfigMap uses the WebApp — the cycle.
    env.create(json!({"apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
        "metadata": {"name": "cm-uses-webapp", "namespace": ns},
        "spec": {"of": {"apiVersion": format!("{group}/v1"), "kind": "WebApp",
                        "resourceRef": {"name": "cool"}},
                 "by": {"apiVersion": "v1", "kind": "ConfigMap",
                        "resourceRef": {"name": "served-by"}}}}))
        .await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    wait_label(&cms, "served-by", true).await;
    let usages: Api<lien_api::Usage> = Api::namespaced(env.client.clone(), &ns);
    wait_for("the Usage to report the cycle", DEADLINE, || async {
        let u = usages.get("cm-uses-webapp").await.ok()?;
        u.status?
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.reason == "Cycle")
            .then_some(())
    })
    .await;

    let k = Kubectl::new(&env);
    let (ok, out, err) = k.run(&["delete", "namespace", &ns, "--wait=false"]).await;
    assert!(ok, "nothing holds the namespace from outside: {out}{err}");
    // The WebApp goes first (Terminating under its own finalizer): the Usage gave way.
    wait_for("the WebApp being deleted", DEADLINE, || async {
        let w = webapps.get("cool").await.ok()?;
        w.metadata.deletion_timestamp.map(drop)
    })
    .await;
    // The namespace controller tries the ConfigMap and is refused: the rule holds.
    wait_for(
        "the ConfigMap's DELETE refused by the rule",
        DEADLINE,
        || async {
            let (_, out, _) = k.run(&["describe", "namespace", &ns]).await;
            (out.contains(&format!("cannot delete ConfigMap {ns}/served-by"))
                && out.contains(&format!("DependencyRule {rule}")))
            .then_some(())
        },
    )
    .await;
    let cm = cms.get_opt("served-by").await.expect("get");
    assert!(
        cm.is_some_and(|c| c.metadata.deletion_timestamp.is_none()),
        "the rule's ConfigMap was deleted before the WebApp that needs it"
    );

    // The WebApp's finalizer goes (its controller, served from the ConfigMap, finishes): then
    // the ConfigMap, then the namespace.
    webapps
        .patch(
            "cool",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("the finalizer goes");
    let namespaces = Api::<Namespace>::all(env.client.clone());
    wait_for("the namespace to go", Duration::from_secs(60), || async {
        namespaces.get_opt(&ns).await.ok()?.is_none().then_some(())
    })
    .await;
    drop(k);
    env.finish().await;
}
