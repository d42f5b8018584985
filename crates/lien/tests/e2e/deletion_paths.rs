//! Issue 27's table of deletion paths (docs/ARCHITECTURE.md, "Every way an object is deleted"):
//! one test per way Kubernetes deletes an object, each showing that an object under a lien
//! survives it. The namespace controller's rows are in `namespace_deletion.rs`; Helm, Argo CD and
//! Flux send the same DELETEs as `kubectl delete` (their rows name the test here that sends them).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PropagationPolicy};
use serde_json::json;

use super::harness::{DEADLINE, Env, Kubectl, wait_for, wait_gone, wait_label};

/// ConfigMap `name` protected by the reason-only Usage `keep-NAME`; waits for its label.
async fn protected(env: &mut Env, name: &str, labels: serde_json::Value) -> String {
    let cm = env.configmap(name, labels).await;
    env.usage(
        &format!("keep-{name}"),
        json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": name}},
               "reason": "kept for the deletion-path table"}),
    )
    .await;
    wait_label(&env.configmaps(), name, true).await;
    cm.metadata.uid.expect("a uid")
}

/// The ConfigMap is still there, the same object (`uid`).
async fn still_there(env: &Env, name: &str, uid: &str) {
    same_object(&env.configmaps(), name, &Some(uid.to_owned())).await;
}

/// `kubectl delete` with each propagation policy, and a forced one (grace period 0): the same
/// DELETE Helm's uninstall (background), Argo CD's prune (foreground) and Flux's prune
/// (background) send.
#[tokio::test]
async fn kubectl_delete_with_every_propagation_policy_is_refused() {
    let mut env = Env::start("paths-kubectl").await;
    let uid = protected(&mut env, "data", json!({})).await;
    let k = Kubectl::new(&env);
    let ns = env.ns.clone();
    for extra in [
        &["--cascade=background"][..],
        &["--cascade=foreground"],
        &["--cascade=orphan"],
        &["--grace-period=0", "--force"],
    ] {
        let mut args = vec!["delete", "configmap", "data", "-n", &ns];
        args.extend_from_slice(extra);
        let (ok, out, err) = k.run(&args).await;
        assert!(!ok, "{extra:?}: {out}");
        assert!(
            err.contains("admission webhook \"delete.lien.dev\" denied the request"),
            "{extra:?}: {err}"
        );
        still_there(&env, "data", &uid).await;
    }
    drop(k);
    env.finish().await;
}

/// DELETE of a collection: kube-apiserver admits each item as a DELETE of its own; the
/// protected one stays, the rest go, and the answer is the refusal.
#[tokio::test]
async fn a_delete_of_the_collection_keeps_what_is_protected() {
    let mut env = Env::start("paths-collection").await;
    let uid = protected(&mut env, "kept", json!({"app": "batch"})).await;
    for name in ["free-1", "free-2"] {
        env.configmap(name, json!({"app": "batch"})).await;
    }
    let cms = env.configmaps();
    let err = cms
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("app=batch"),
        )
        .await
        .expect_err("the collection's DELETE reports the refusal");
    assert!(
        err.to_string().contains("delete.lien.dev"),
        "the refusal is Lien's: {err}"
    );
    for name in ["free-1", "free-2"] {
        wait_gone(&cms, name, DEADLINE).await;
    }
    still_there(&env, "kept", &uid).await;
    env.finish().await;
}

/// An owner reference: the garbage collector deletes a dependent whose owner went (background),
/// or holds the owner until its blocking dependents went (foreground); orphan leaves the
/// dependent. None of them deletes a dependent under a lien.
#[tokio::test]
async fn the_garbage_collector_does_not_delete_a_protected_dependent() {
    let mut env = Env::start("paths-gc").await;
    let ns = env.ns.clone();
    let cms = env.configmaps();
    let owned = |owner: &ConfigMap, block: bool| {
        json!([{"apiVersion": "v1", "kind": "ConfigMap",
                "name": owner.metadata.name, "uid": owner.metadata.uid,
                "blockOwnerDeletion": block}])
    };
    for (policy, block) in [
        (PropagationPolicy::Background, false),
        (PropagationPolicy::Foreground, true),
        (PropagationPolicy::Orphan, false),
    ] {
        let tag = format!("{policy:?}").to_lowercase();
        let owner_name = format!("release-{tag}");
        let owner: ConfigMap = serde_json::from_value(
            serde_json::to_value(env.configmap(&owner_name, json!({})).await).expect("json"),
        )
        .expect("a ConfigMap");
        let dependent = format!("data-{tag}");
        env.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": dependent, "namespace": ns,
                         "ownerReferences": owned(&owner, block)}}))
            .await;
        env.usage(
            &format!("keep-{dependent}"),
            json!({"of": {"apiVersion": "v1", "kind": "ConfigMap",
                          "resourceRef": {"name": dependent}},
                   "reason": "the release's data outlives it"}),
        )
        .await;
        wait_label(&cms, &dependent, true).await;
        let uid = cms
            .get(&dependent)
            .await
            .expect("get")
            .metadata
            .uid
            .expect("uid");
        let params = DeleteParams {
            propagation_policy: Some(policy.clone()),
            ..DeleteParams::default()
        };
        cms.delete(&owner_name, &params)
            .await
            .expect("the owner's DELETE is accepted");
        match policy {
            // The garbage collector tries the dependent and is refused; its retries are too.
            PropagationPolicy::Background => {
                wait_gone(&cms, &owner_name, DEADLINE).await;
                env.wait_events("ConfigMap", &dependent, "DeletionRefused")
                    .await;
            }
            // The owner waits for its blocking dependent, which the collector cannot delete.
            PropagationPolicy::Foreground => {
                let owner = wait_for("the owner waiting in foreground", DEADLINE, || async {
                    cms.get_opt(&owner_name).await.ok().flatten()
                })
                .await;
                assert!(owner.metadata.deletion_timestamp.is_some());
                env.wait_events("ConfigMap", &dependent, "DeletionRefused")
                    .await;
            }
            _ => wait_gone(&cms, &owner_name, DEADLINE).await,
        }
        // The collector's DELETE was refused (the Event says so): the dependent is the same.
        still_there(&env, &dependent, &uid).await;
    }
    env.finish().await;
}

/// `kubectl apply --prune` deletes what the applied set no longer has; `kubectl replace
/// --force` deletes and re-creates. Both are refused on an object under a lien, which stays
/// the same object.
#[tokio::test]
async fn kubectl_apply_prune_and_replace_force_are_refused() {
    let mut env = Env::start("paths-prune").await;
    let ns = env.ns.clone();
    let k = Kubectl::new(&env);
    let cm = |name: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {ns}, labels: {{set: pruned}}}}\ndata: {{k: v}}\n"
        )
    };
    let both = format!("{}---\n{}", cm("kept"), cm("other"));
    let (ok, out, err) = k.run_with_stdin(&["apply", "-f", "-"], Some(&both)).await;
    assert!(ok, "{out}{err}");
    env.usage(
        "keep-kept",
        json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "kept"}},
               "reason": "kept for the deletion-path table"}),
    )
    .await;
    wait_label(&env.configmaps(), "kept", true).await;
    let uid = env
        .configmaps()
        .get("kept")
        .await
        .expect("get")
        .metadata
        .uid
        .expect("uid");

    // The applied set without `kept`: prune deletes it — refused.
    let (ok, out, err) = k
        .run_with_stdin(
            &["apply", "--prune", "-l", "set=pruned", "-f", "-"],
            Some(&cm("other")),
        )
        .await;
    assert!(!ok, "{out}");
    assert!(err.contains("delete.lien.dev"), "{err}");
    still_there(&env, "kept", &uid).await;

    // Replace by delete-and-create: the DELETE is refused, nothing is re-created.
    let (ok, out, err) = k
        .run_with_stdin(&["replace", "--force", "-f", "-"], Some(&cm("kept")))
        .await;
    assert!(!ok, "{out}");
    assert!(err.contains("delete.lien.dev"), "{err}");
    still_there(&env, "kept", &uid).await;
    drop(k);
    env.finish().await;
}

/// The Eviction API (`kubectl drain`, the cluster autoscaler) deletes a pod without admitting a
/// DELETE: Lien refuses the eviction itself, with 429 as a PodDisruptionBudget does, so a drain
/// waits. Lifted, the eviction goes through.
#[tokio::test]
async fn an_eviction_of_a_pod_in_use_is_refused_until_the_lien_is_lifted() {
    let mut env = Env::start("paths-evict").await;
    let ns = env.ns.clone();
    env.create(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "db-0", "namespace": ns},
        "spec": {"containers": [{"name": "db", "image": "registry.example/db:1"}]}}))
        .await;
    env.usage(
        "keep-db-0",
        json!({"of": {"apiVersion": "v1", "kind": "Pod", "resourceRef": {"name": "db-0"}},
               "reason": "the primary: fail over first"}),
    )
    .await;
    // A 429 is what a drain retries on; this client shows it at once instead of retrying.
    let pods: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(env.client_without_retry().await, &ns);
    wait_for("the pod's in-use label", DEADLINE, || async {
        let pod = pods.get("db-0").await.ok()?;
        (pod.metadata.labels?.get(lien_api::IN_USE_LABEL)? == "true").then_some(())
    })
    .await;
    let uid = pods.get("db-0").await.expect("get").metadata.uid;
    let err = pods
        .evict("db-0", &kube::api::EvictParams::default())
        .await
        .expect_err("the eviction is refused");
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 429, "{s:?}");
            assert!(
                s.message.contains("evictions.lien.dev")
                    && s.message.contains(&format!(
                        "cannot evict: cannot delete Pod {ns}/db-0: it is protected (Usage {ns}/keep-db-0: the primary: fail over first)"
                    )),
                "{}",
                s.message
            );
        }
        other => panic!("expected the API's refusal, got {other:?}"),
    }
    let pod = pods.get("db-0").await.expect("the pod is still there");
    assert_eq!(pod.metadata.uid, uid);
    assert!(pod.metadata.deletion_timestamp.is_none());

    // Lifted: the eviction goes through.
    env.usages()
        .delete("keep-db-0", &DeleteParams::default())
        .await
        .expect("the Usage deletes");
    wait_for("the eviction to go through", DEADLINE, || async {
        pods.evict("db-0", &kube::api::EvictParams::default())
            .await
            .ok()
            .map(drop)
    })
    .await;
    wait_gone(&pods, "db-0", DEADLINE).await;
    env.finish().await;
}

/// A finalizer removed by hand: an object whose deletion began before it was protected (a PVC
/// held by `kubernetes.io/pvc-protection` while a pod mounts it, then a Usage written to save
/// it) would go the moment its last finalizer goes. Lien labels it all the same, and the tamper
/// guard refuses removing that finalizer while the lien holds; `kubectl lien why` says how to
/// lift it, after which the finalizer's removal completes the deletion.
#[tokio::test]
async fn removing_the_last_finalizer_of_an_object_in_use_is_refused() {
    let mut env = Env::start("paths-finalizer").await;
    let ns = env.ns.clone();
    env.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "data", "namespace": ns, "finalizers": ["example.org/hold"]}}))
        .await;
    let cms = env.configmaps();
    cms.delete("data", &DeleteParams::default())
        .await
        .expect("the DELETE is accepted: the deletion waits for the finalizer");
    env.usage(
        "keep-data",
        json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "data"}},
               "reason": "restore it before it goes"}),
    )
    .await;
    wait_label(&cms, "data", true).await;
    let k = Kubectl::new(&env);
    let remove = r#"[{"op":"remove","path":"/metadata/finalizers/0"}]"#;
    let (ok, out, err) = k
        .run(&[
            "patch",
            "configmap",
            "data",
            "-n",
            &ns,
            "--type=json",
            "-p",
            remove,
        ])
        .await;
    assert!(!ok, "{out}");
    assert!(
        err.contains(&format!(
            "cannot remove the last finalizer of ConfigMap {ns}/data: it is being deleted and it is protected (Usage {ns}/keep-data: restore it before it goes)"
        )),
        "{err}"
    );
    let cm = cms.get("data").await.expect("still there");
    assert_eq!(
        cm.metadata.finalizers.as_deref(),
        Some(&["example.org/hold".to_owned()][..])
    );

    // The refusal points at `why`; its advice lifts the lien, and the finalizer may go.
    let (ok, why, err) = k.run(&["lien", "why", "configmap/data", "-n", &ns]).await;
    assert!(ok, "{why}{err}");
    let lift = why
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("kubectl delete usage.lien.dev/keep-data"))
        .unwrap_or_else(|| panic!("no lifting command in:\n{why}"))
        .to_owned();
    super::harness::run_hint(&k, &lift).await;
    wait_for(
        "the finalizer's removal to go through",
        DEADLINE,
        || async {
            let (ok, _, _) = k
                .run(&[
                    "patch",
                    "configmap",
                    "data",
                    "-n",
                    &ns,
                    "--type=json",
                    "-p",
                    remove,
                ])
                .await;
            ok.then_some(())
        },
    )
    .await;
    wait_gone(&cms, "data", DEADLINE).await;
    drop(k);
    env.finish().await;
}

/// Skips a scenario that needs a controller only kube-controller-manager runs (the sandbox has
/// no Job, CronJob, StatefulSet or ReplicaSet controller); these run in the real tier
/// (`LIEN_E2E_TARGET=real`, docs/testing.md), which CI runs on every change.
fn real_tier_only(test: &str) -> bool {
    if crate::real::target() == crate::real::Target::Real {
        return true;
    }
    println!("skipped on the sandbox: {test} needs kube-controller-manager (LIEN_E2E_TARGET=real)");
    false
}

/// The kind's objects of the scenario's namespace.
fn api<K>(env: &Env) -> Api<K>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>,
    <K as kube::Resource>::DynamicType: Default,
{
    Api::namespaced(env.client.clone(), &env.ns)
}

/// Protects `kind`/`name` (of `api_version`) with the reason-only Usage `keep-NAME`, waits
/// for its in-use label, and returns its UID.
async fn protect<K>(
    env: &mut Env,
    objects: &Api<K>,
    api_version: &str,
    kind: &str,
    name: &str,
) -> Option<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    env.usage(
        &format!("keep-{name}"),
        json!({"of": {"apiVersion": api_version, "kind": kind, "resourceRef": {"name": name}},
               "reason": "kept for the deletion-path table"}),
    )
    .await;
    wait_for(
        &format!("{kind} {name}'s in-use label"),
        DEADLINE,
        || async {
            let o = objects.get(name).await.ok()?;
            (o.meta().labels.as_ref()?.get(lien_api::IN_USE_LABEL)? == "true")
                .then(|| o.meta().uid.clone())
        },
    )
    .await
}

/// A JSON merge patch of `name`, expected to be accepted (`what` it does, for the panic).
async fn merge_patch<K>(objects: &Api<K>, name: &str, patch: serde_json::Value, what: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    objects
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(patch),
        )
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// Lifts the lien `protect` made (deletes the Usage `keep-NAME`) and waits until the
/// controller's next try has deleted `name`.
async fn lifted_then_deleted<K>(env: &Env, objects: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    env.usages()
        .delete(&format!("keep-{name}"), &DeleteParams::default())
        .await
        .expect("the Usage deletes");
    wait_gone(objects, name, DEADLINE).await;
}

/// Waits for Lien's `DeletionRefused` Event on `kind`/`name` naming `controller` (the
/// kube-controller-manager controller's ServiceAccount, as it runs with
/// `--use-service-account-credentials`): that controller sent the DELETE and was refused.
async fn refused_for(env: &Env, kind: &str, name: &str, controller: &str) {
    let who = format!("DELETE by system:serviceaccount:kube-system:{controller} refused");
    wait_for(
        &format!("{controller}'s DELETE of {kind} {name} refused"),
        DEADLINE,
        || async {
            env.events(kind, name, "DeletionRefused")
                .await
                .into_iter()
                .find(|e| e.note.as_deref().is_some_and(|n| n.contains(&who)))
        },
    )
    .await;
}

/// The object is still there, the same one (`uid`), and not being deleted.
async fn same_object<K>(objects: &Api<K>, name: &str, uid: &Option<String>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let o = objects
        .get_opt(name)
        .await
        .expect("get")
        .unwrap_or_else(|| panic!("{name} was deleted under a lien"));
    assert_eq!(&o.meta().uid, uid, "{name} was replaced");
    assert!(
        o.meta().deletion_timestamp.is_none(),
        "{name} is being deleted under a lien"
    );
}

/// A Job that completes at once without a pod (`completions: 0`: nothing here runs pods).
fn finished_job(ns: &str, name: &str) -> serde_json::Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"completions": 0, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "run", "image": "registry.example/report:1"}]}}}})
}

/// Waits for the Job's `Complete` condition.
async fn completed(jobs: &Api<k8s_openapi::api::batch::v1::Job>, name: &str) {
    wait_for(&format!("Job {name} to complete"), DEADLINE, || async {
        let job = jobs.get(name).await.ok()?;
        job.status?
            .conditions?
            .iter()
            .any(|c| c.type_ == "Complete" && c.status == "True")
            .then_some(())
    })
    .await;
}

/// The TTL-after-finished controller deletes a finished Job `ttlSecondsAfterFinished` after it
/// finished (Foreground). A Job under a lien stays; the controller's DELETE is refused, it
/// retries, and once the lien is lifted the Job goes.
#[tokio::test]
async fn the_ttl_after_finished_controller_does_not_delete_a_job_in_use() {
    if !real_tier_only("the_ttl_after_finished_controller_does_not_delete_a_job_in_use") {
        return;
    }
    let mut env = Env::start("paths-ttl").await;
    let ns = env.ns.clone();
    let jobs = api::<k8s_openapi::api::batch::v1::Job>(&env);
    env.create(finished_job(&ns, "report")).await;
    completed(&jobs, "report").await;
    let uid = protect(&mut env, &jobs, "batch/v1", "Job", "report").await;
    // Its time is up as soon as it has one (the field may be set on a finished Job).
    let ttl = json!({"spec": {"ttlSecondsAfterFinished": 0}});
    merge_patch(&jobs, "report", ttl, "the TTL is set").await;
    refused_for(&env, "Job", "report", "ttl-after-finished-controller").await;
    same_object(&jobs, "report", &uid).await;

    // Lifted: the controller's next try deletes it.
    lifted_then_deleted(&env, &jobs, "report").await;
    env.finish().await;
}

/// A CronJob's history limits: the CronJob controller deletes its oldest finished Jobs beyond
/// `successfulJobsHistoryLimit` (Background). A Job under a lien stays; once the lien is
/// lifted the controller's next pass deletes it.
#[tokio::test]
async fn cronjob_history_limits_do_not_delete_a_job_in_use() {
    if !real_tier_only("cronjob_history_limits_do_not_delete_a_job_in_use") {
        return;
    }
    let mut env = Env::start("paths-cronjob").await;
    let ns = env.ns.clone();
    let cron = env
        .create(json!({"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "nightly", "namespace": ns},
            "spec": {"schedule": "0 0 1 1 *", "suspend": true,
                "successfulJobsHistoryLimit": 0, "failedJobsHistoryLimit": 0,
                "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "run", "image": "registry.example/report:1"}]}}}}}}))
        .await;
    let jobs = api::<k8s_openapi::api::batch::v1::Job>(&env);
    // A finished run of the CronJob (made here: a suspended CronJob starts none, and none
    // would run without a kubelet), protected before the CronJob owns it.
    env.create(finished_job(&ns, "nightly-1")).await;
    completed(&jobs, "nightly-1").await;
    let uid = protect(&mut env, &jobs, "batch/v1", "Job", "nightly-1").await;
    let owned = json!({"metadata": {"ownerReferences": [{
        "apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly",
        "uid": cron.metadata.uid, "controller": true, "blockOwnerDeletion": true}]}});
    merge_patch(&jobs, "nightly-1", owned, "the CronJob owns its run").await;
    refused_for(&env, "Job", "nightly-1", "cronjob-controller").await;
    same_object(&jobs, "nightly-1", &uid).await;

    // Lifted: Lien removes its label, the CronJob controller sees the Job change and prunes it.
    lifted_then_deleted(&env, &jobs, "nightly-1").await;
    env.finish().await;
}

/// StatefulSet PVC retention (`whenDeleted: Delete`): the StatefulSet controller makes the
/// StatefulSet own its PVCs, and the garbage collector deletes them with it. A PVC under a lien
/// stays (the collector's DELETE is refused), while the StatefulSet and its pod go.
#[tokio::test]
async fn statefulset_pvc_retention_does_not_delete_a_pvc_in_use() {
    if !real_tier_only("statefulset_pvc_retention_does_not_delete_a_pvc_in_use") {
        return;
    }
    let mut env = Env::start("paths-sts-pvc").await;
    let ns = env.ns.clone();
    env.create(json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": ns},
        "spec": {"replicas": 1, "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
            "template": {"metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "db", "image": "registry.example/db:1",
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}}}}]}}))
        .await;
    let pvcs = api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>(&env);
    let sets = api::<k8s_openapi::api::apps::v1::StatefulSet>(&env);
    let pods = api::<k8s_openapi::api::core::v1::Pod>(&env);
    // The controller makes the claim, then (retention policy) the StatefulSet its owner.
    wait_for("the StatefulSet to own its PVC", DEADLINE, || async {
        let pvc = pvcs.get("data-db-0").await.ok()?;
        pvc.metadata
            .owner_references?
            .iter()
            .any(|o| o.kind == "StatefulSet" && o.name == "db")
            .then_some(())
    })
    .await;
    let uid = protect(&mut env, &pvcs, "v1", "PersistentVolumeClaim", "data-db-0").await;
    sets.delete("db", &DeleteParams::default())
        .await
        .expect("the StatefulSet's DELETE is accepted");
    wait_gone(&sets, "db", DEADLINE).await;
    refused_for(
        &env,
        "PersistentVolumeClaim",
        "data-db-0",
        "generic-garbage-collector",
    )
    .await;
    wait_gone(&pods, "db-0", DEADLINE).await;
    same_object(&pvcs, "data-db-0", &uid).await;
    env.finish().await;
}

/// ReplicaSet scale-down: the ReplicaSet controller deletes surplus pods. A pod under a lien
/// stays while the others go; once the lien is lifted, the controller's next pass deletes it.
#[tokio::test]
async fn replicaset_scale_down_does_not_delete_a_pod_in_use() {
    if !real_tier_only("replicaset_scale_down_does_not_delete_a_pod_in_use") {
        return;
    }
    let mut env = Env::start("paths-rs").await;
    let ns = env.ns.clone();
    env.create(json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.example/web:1"}]}}}}))
        .await;
    let pods = api::<k8s_openapi::api::core::v1::Pod>(&env);
    let sets = api::<k8s_openapi::api::apps::v1::ReplicaSet>(&env);
    let mut names = wait_for("the ReplicaSet's two pods", DEADLINE, || async {
        let list = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .ok()?;
        let names: Vec<String> = list
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        (names.len() == 2).then_some(names)
    })
    .await;
    names.sort();
    let (kept, other) = (names[0].clone(), names[1].clone());
    let uid = protect(&mut env, &pods, "v1", "Pod", &kept).await;
    merge_patch(
        &sets,
        "web",
        json!({"spec": {"replicas": 0}}),
        "scaled to 0",
    )
    .await;
    wait_gone(&pods, &other, DEADLINE).await;
    refused_for(&env, "Pod", &kept, "replicaset-controller").await;
    same_object(&pods, &kept, &uid).await;

    // Lifted: Lien removes its label, the controller sees the pod change and deletes it.
    lifted_then_deleted(&env, &pods, &kept).await;
    env.finish().await;
}

/// A Usage deleted in its first moments — by the garbage collector, its owner deleted together
/// with what it protects, or by a script — still holds while its user exists: the API server's
/// CREATE stores it with Lien's finalizer (`guard.lien.dev`), before Lien's controller has seen
/// it. Without that, the Usage went at once and the object it named was never protected.
#[tokio::test]
async fn a_usage_deleted_at_once_still_holds_while_its_user_exists() {
    let mut env = Env::start("paths-first-moments").await;
    env.configmap("data", json!({})).await;
    env.configmap("app", json!({})).await;
    let usage = env
        .usage(
            "app-uses-data",
            json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "data"}},
                   "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "app"}},
                   "reason": "the app reads it"}),
        )
        .await;
    // In the CREATE's own answer: stored with the finalizer.
    assert_eq!(
        usage.metadata.finalizers.as_deref(),
        Some(&[lien_api::USAGE_FINALIZER.to_owned()][..]),
        "the Usage as the API server stored it"
    );
    let usages = env.usages();
    usages
        .delete("app-uses-data", &DeleteParams::default())
        .await
        .expect("the Usage's DELETE is accepted (it is held, not refused)");
    // Held while `app` exists, and what it names is protected.
    wait_label(&env.configmaps(), "data", true).await;
    let refused = super::harness::wait_refused(&env.configmaps(), "data").await;
    assert!(refused.contains("app-uses-data"), "{refused}");
    let held = usages.get("app-uses-data").await.expect("still there");
    assert!(held.metadata.deletion_timestamp.is_some());

    // The user goes: the Usage follows and `data` is free.
    env.configmaps()
        .delete("app", &DeleteParams::default())
        .await
        .expect("the user is free to go");
    wait_gone(&usages, "app-uses-data", DEADLINE).await;
    wait_label(&env.configmaps(), "data", false).await;
    env.configmaps()
        .delete("data", &DeleteParams::default())
        .await
        .expect("free once its user is gone");
    env.finish().await;
}

/// A ClusterUsage is stored with Lien's finalizer only when it has a user (without one nothing
/// would keep it), and a Usage that already lists the finalizer keeps one copy.
#[tokio::test]
async fn the_finalizer_at_creation_follows_the_controllers_rule() {
    let mut env = Env::start("paths-create-finalizer").await;
    env.configmap("data", json!({})).await;
    let name = env.cluster_name("no-user");
    let ns = env.ns.clone();
    let without_user = env
        .create(
            json!({"apiVersion": "lien.dev/v1alpha1", "kind": "ClusterUsage",
            "metadata": {"name": name},
            "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap",
                            "resourceRef": {"name": "data", "namespace": ns}},
                     "reason": "kept"}}),
        )
        .await;
    assert_eq!(without_user.metadata.finalizers, None);
    let listed = env
        .create(json!({"apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
            "metadata": {"name": "listed", "namespace": ns,
                         "finalizers": ["example.org/keep", lien_api::USAGE_FINALIZER]},
            "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "data"}},
                     "reason": "kept"}}))
        .await;
    assert_eq!(
        listed.metadata.finalizers.as_deref(),
        Some(
            &[
                "example.org/keep".to_owned(),
                lien_api::USAGE_FINALIZER.to_owned()
            ][..]
        )
    );
    // Lifted by hand again (the test's own finalizer), so the namespace can go.
    env.usages()
        .patch(
            "listed",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Json::<()>(
                serde_json::from_value(json!([
                    {"op": "test", "path": "/metadata/finalizers/0", "value": "example.org/keep"},
                    {"op": "remove", "path": "/metadata/finalizers/0"}
                ]))
                .expect("patch"),
            ),
        )
        .await
        .expect("the test's own finalizer removed");
    env.finish().await;
}
