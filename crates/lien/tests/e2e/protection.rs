//! Protection: by reason, by selector (continuously), by controller, across namespaces.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, PersistentVolume};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::harness::*;

const ATTEMPT: &str = "lien.dev/deletion-attempt";

fn annotated(cm: &ConfigMap) -> bool {
    cm.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ATTEMPT))
}

/// A reason-only Usage refuses the DELETE with its reason; deleting the Usage lifts the
/// protection, the refused DELETE is not replayed, and a new DELETE succeeds.
#[tokio::test]
async fn protection_by_reason_refuses_with_the_reason_until_the_usage_is_deleted() {
    let mut env = Env::start("by-reason").await;
    let ns = env.ns.clone();
    let cm = env
        .protected_configmap(
            "production-settings",
            "protect-production-settings",
            "production settings: remove this Usage first",
        )
        .await;
    let cms = env.configmaps();
    wait_label(&cms, "production-settings", true).await;

    let err = cms
        .delete("production-settings", &DeleteParams::default())
        .await
        .expect_err("the DELETE is refused");
    assert_eq!(
        api_error(err),
        (
            409,
            format!(
                "admission webhook \"delete.lien.dev\" denied the request: cannot delete \
                 ConfigMap {ns}/production-settings: it is protected (Usage \
                 {ns}/protect-production-settings: production settings: remove this Usage first).\n\
                 not replayed: to have Lien delete it once free, run \
                 `kubectl lien delete --when-free configmap/production-settings -n {ns}`.\n\
                 To free it now, remove the protection: \
                 `kubectl delete usage.lien.dev/protect-production-settings -n {ns}`; \
                 for the other ways: `kubectl lien why configmap/production-settings -n {ns}`."
            )
        )
    );

    env.usages()
        .delete("protect-production-settings", &DeleteParams::default())
        .await
        .expect("the Usage deletes");
    wait_gone(&env.usages(), "protect-production-settings", DEADLINE).await;
    // Protection lifted: label and the refusal's record go; the object stays (no replay).
    let after = wait_for("label and record to go", DEADLINE, || async {
        cms.get("production-settings")
            .await
            .ok()
            .filter(|c| !labelled(c.metadata.labels.as_ref()) && !annotated(c))
    })
    .await;
    assert_eq!(after.metadata.uid, cm.metadata.uid, "not replayed");

    cms.delete("production-settings", &DeleteParams::default())
        .await
        .expect("the DELETE succeeds once the protection is lifted");
    env.finish().await;
}

/// A selector protects every matching object, picks up new matches, and releases an object
/// relabelled out of the selection.
#[tokio::test]
async fn a_selector_protects_every_match_continuously_and_releases_a_relabelled_object() {
    let mut env = Env::start("selector").await;
    for name in ["db-1", "db-2", "db-3"] {
        env.configmap(name, json!({"tier": "db"})).await;
    }
    env.configmap("web", json!({"tier": "web"})).await;
    env.usage(
        "keep-db",
        json!({"of": {"apiVersion": "v1", "kind": "ConfigMap",
                      "resourceSelector": {"matchLabels": {"tier": "db"}}},
               "reason": "database settings"}),
    )
    .await;
    let cms = env.configmaps();
    for name in ["db-1", "db-2", "db-3"] {
        wait_label(&cms, name, true).await;
        let msg = wait_refused(&cms, name).await;
        assert!(msg.contains("database settings"), "{msg}");
    }
    let u = wait_for("status to count 3", DEADLINE, || async {
        env.usages().get("keep-db").await.ok().filter(|u| {
            u.status
                .as_ref()
                .and_then(|s| s.of.as_ref())
                .map(|o| o.count)
                == Some(3)
        })
    })
    .await;
    assert_eq!(condition(&u, "InUse").map(|c| c.0).as_deref(), Some("True"));
    // Not matched: not protected.
    assert!(!labelled(
        cms.get("web").await.expect("web").metadata.labels.as_ref()
    ));

    // A new match is protected.
    env.configmap("db-4", json!({"tier": "db"})).await;
    wait_label(&cms, "db-4", true).await;
    wait_refused(&cms, "db-4").await;

    // Relabelled out of the selection: released, and deletable.
    cms.patch(
        "db-2",
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"labels": {"tier": "archive"}}})),
    )
    .await
    .expect("relabel");
    wait_label(&cms, "db-2", false).await;
    cms.delete("db-2", &DeleteParams::default())
        .await
        .expect("a released object deletes");
    wait_refused(&cms, "db-1").await;
    env.finish().await;
}

/// `matchControllerRef` selects only the objects whose controller is the Usage's controller.
#[tokio::test]
async fn match_controller_ref_protects_only_objects_of_the_usages_controller() {
    let mut env = Env::start("ctrl-ref").await;
    let ns = env.ns.clone();
    let mine = env.configmap("parent-a", json!({})).await;
    let theirs = env.configmap("parent-b", json!({})).await;
    let owner = |o: &kube::api::DynamicObject| {
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "controller": true,
                "name": o.metadata.name, "uid": o.metadata.uid}])
    };
    for (name, parent) in [("a-1", &mine), ("a-2", &mine), ("b-1", &theirs)] {
        env.create(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": name, "namespace": ns, "labels": {"app": "x"},
            "ownerReferences": owner(parent)}}),
        )
        .await;
    }
    env.create(json!({"apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
        "metadata": {"name": "same-controller", "namespace": ns, "ownerReferences": owner(&mine)},
        "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap",
                        "resourceSelector": {"matchLabels": {"app": "x"},
                                             "matchControllerRef": true}},
                 "reason": "composed together"}}))
        .await;
    let cms = env.configmaps();
    wait_label(&cms, "a-1", true).await;
    wait_label(&cms, "a-2", true).await;
    wait_refused(&cms, "a-1").await;
    wait_refused(&cms, "a-2").await;
    let u = wait_for("status to count 2", DEADLINE, || async {
        env.usages().get("same-controller").await.ok().filter(|u| {
            u.status
                .as_ref()
                .and_then(|s| s.of.as_ref())
                .map(|o| o.count)
                == Some(2)
        })
    })
    .await;
    let names: Vec<_> = u
        .status
        .and_then(|s| s.of)
        .map(|o| o.objects.into_iter().map(|m| m.name).collect())
        .unwrap_or_default();
    assert_eq!(names, ["a-1", "a-2"]);
    assert!(!labelled(
        cms.get("b-1").await.expect("b-1").metadata.labels.as_ref()
    ));
    cms.delete("b-1", &DeleteParams::default())
        .await
        .expect("another controller's object deletes");
    env.finish().await;
}

/// A ClusterUsage relates objects in two namespaces; the user's deletion releases the used one.
#[tokio::test]
async fn a_cluster_usage_protects_across_namespaces() {
    let mut env = Env::start("cluster-usage").await;
    let ns_a = env.ns.clone();
    let (ns_b, name) = cluster_usage_across_namespaces(&mut env).await;
    let cms = env.configmaps();
    let msg = wait_refused(&cms, "shared").await;
    assert!(
        msg.contains(&format!(
            "cannot delete ConfigMap {ns_a}/shared: it is in use by ConfigMap {ns_b}/consumer \
             (ClusterUsage {name}"
        )),
        "{msg}"
    );
    let consumers: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns_b);
    consumers
        .delete("consumer", &DeleteParams::default())
        .await
        .expect("the user deletes");
    wait_label(&cms, "shared", false).await;
    cms.delete("shared", &DeleteParams::default())
        .await
        .expect("released");
    // A ClusterUsage cannot be owned by a namespaced user, so no garbage collector removes it:
    // Lien does, once every user it saw is gone.
    let cluster_usages: Api<lien_api::ClusterUsage> = Api::all(env.client.clone());
    wait_gone(&cluster_usages, &name, DEADLINE).await;
    env.finish().await;
}

/// A namespaced Usage may protect a cluster-scoped object, and the protection really blocks.
#[tokio::test]
async fn a_namespaced_usage_of_a_cluster_scoped_object_blocks_its_deletion() {
    let mut env = Env::start("cluster-scoped").await;
    let pv = env.cluster_name("pv");
    env.create(json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": pv},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "hostPath": {"path": "/tmp/lien-e2e"}}}))
        .await;
    env.configmap("app", json!({})).await;
    env.usage(
        "app-uses-pv",
        json!({"of": {"apiVersion": "v1", "kind": "PersistentVolume", "resourceRef": {"name": pv}},
               "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "app"}}}),
    )
    .await;
    let pvs: Api<PersistentVolume> = Api::all(env.client.clone());
    wait_for("the PV to be labelled", DEADLINE, || async {
        pvs.get(&pv)
            .await
            .ok()
            .filter(|p| labelled(p.metadata.labels.as_ref()))
    })
    .await;
    let err = pvs
        .delete(&pv, &DeleteParams::default())
        .await
        .expect_err("refused");
    let (code, msg) = api_error(err);
    assert_eq!(code, 409);
    assert!(
        msg.contains(&format!(
            "cannot delete PersistentVolume {pv}: it is in use by ConfigMap {}/app (Usage {}/app-uses-pv)",
            env.ns, env.ns
        )),
        "{msg}"
    );
    assert!(pvs.get_opt(&pv).await.expect("get").is_some());
    env.finish().await;
}

/// A Namespace in use is refused once, by the namespaces hook alone (the DELETE hook leaves
/// Namespaces to it), with the message that names the relation; the refusal is recorded once.
#[tokio::test]
async fn a_namespace_in_use_is_refused_by_one_hook() {
    let mut env = Env::start("ns-in-use").await;
    let target = env.another_namespace_name("used");
    env.namespace(&target).await;
    let name = env.cluster_name("keep-ns");
    env.create(
        json!({"apiVersion": "lien.dev/v1alpha1", "kind": "ClusterUsage",
        "metadata": {"name": name},
        "spec": {"of": {"apiVersion": "v1", "kind": "Namespace", "resourceRef": {"name": target}},
                 "reason": "holds the team's databases"}}),
    )
    .await;
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    wait_for("the namespace to be labelled", DEADLINE, || async {
        namespaces
            .get(&target)
            .await
            .ok()
            .filter(|n| labelled(n.metadata.labels.as_ref()))
    })
    .await;
    let err = namespaces
        .delete(&target, &DeleteParams::default())
        .await
        .expect_err("refused");
    let (code, msg) = api_error(err);
    assert_eq!(code, 409, "{msg}");
    // Exactly one webhook refused it: kube-apiserver reports the first refusal, so a second
    // hook would not show here; the single record below is what proves it.
    assert!(
        msg.starts_with("admission webhook \"namespaces.lien.dev\" denied the request"),
        "{msg}"
    );
    assert!(msg.contains("holds the team's databases"), "{msg}");
    let live = namespaces.get(&target).await.expect("still there");
    assert!(live.metadata.deletion_timestamp.is_none());
    // The refusal was recorded once: one deletion-attempt annotation, written by one record.
    let recorded = wait_for("the refusal to be recorded", DEADLINE, || async {
        namespaces.get(&target).await.ok().and_then(|n| {
            n.metadata
                .annotations
                .and_then(|a| a.get("lien.dev/deletion-attempt").cloned())
        })
    })
    .await;
    assert!(recorded.contains("\"replay\""), "{recorded}");
    let cluster_usages: Api<lien_api::ClusterUsage> = Api::all(env.client.clone());
    cluster_usages
        .delete(&name, &DeleteParams::default())
        .await
        .expect("protection lifted");
    wait_for("the namespace to be unlabelled", DEADLINE, || async {
        namespaces
            .get(&target)
            .await
            .ok()
            .filter(|n| !labelled(n.metadata.labels.as_ref()))
    })
    .await;
    env.finish().await;
}
