//! The garbage collector: background, foreground and orphan cascading deletion, several owners,
//! absent owners, and retrying a delete that admission refused.
//!
//! Pages: "Garbage Collection" (concepts/architecture/garbage-collection), "Owners and
//! Dependents" (concepts/overview/working-with-objects/owners-dependents), "Use Cascading
//! Deletion in a Cluster" (tasks/administer-cluster/use-cascading-deletion), and
//! kube-controller-manager's garbage collector (`attemptToDeleteItem`, `deleteObject`).

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use lien_sandbox::testing::{TestWebhook, Verdict};
use serde_json::json;

use crate::common;
use crate::support::{
    DEADLINE, HOLD, configmap, is_deleting, namespace, owner_ref, present, remove_finalizer,
    wait_gone, wait_until, watch_configmap_deletes,
};

/// "Garbage Collection" › Cascading deletion › Background cascading deletion: "the Kubernetes
/// API server deletes the owner object immediately and the garbage collector controller cleans
/// up the dependent objects in the background" — dependents of every resource type, with or
/// without `blockOwnerDeletion`, and nothing that is not a dependent.
#[tokio::test]
async fn background_deletion_removes_the_owner_at_once_and_its_dependents_after() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    namespace(&client, "gc-bg").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "gc-bg");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "gc-bg");

    let owner = configmap(&cms, "owner", vec![], &[], &[]).await;
    configmap(
        &cms,
        "blocking",
        vec![owner_ref(&owner, Some(true))],
        &[],
        &[],
    )
    .await;
    configmap(&cms, "plain", vec![owner_ref(&owner, None)], &[], &[]).await;
    configmap(&cms, "bystander", vec![], &[], &[]).await;
    let mut secret = Secret::default();
    secret.metadata.name = Some("secret-dep".into());
    secret.metadata.owner_references = Some(vec![owner_ref(&owner, Some(false))]);
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("create secret");

    cms.delete("owner", &DeleteParams::background())
        .await
        .expect("delete owner");
    assert!(
        cms.get_opt("owner").await.expect("get").is_none(),
        "a background delete removes the owner at once"
    );
    wait_gone(&cms, "blocking").await;
    wait_gone(&cms, "plain").await;
    wait_gone(&secrets, "secret-dep").await;
    present(&cms, "bystander").await;
    sandbox.shutdown().await;
}

/// "Owners and Dependents": "Namespaced dependents can specify cluster-scoped or namespaced
/// owners"; and "Use Cascading Deletion in a Cluster": "By default, Kubernetes uses background
/// cascading deletion" — a DELETE without a propagation policy.
#[tokio::test]
async fn cluster_scoped_owner_of_namespaced_dependents() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    namespace(&client, "gc-cluster-owner").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "gc-cluster-owner");
    let classes: Api<StorageClass> = Api::all(client.clone());
    let mut class = StorageClass::default();
    class.metadata.name = Some("owner-class".into());
    class.provisioner = "lifecycle.test/none".into();
    let owner = classes
        .create(&PostParams::default(), &class)
        .await
        .expect("create storage class");
    configmap(&cms, "dep", vec![owner_ref(&owner, Some(true))], &[], &[]).await;

    classes
        .delete("owner-class", &DeleteParams::default())
        .await
        .expect("delete owner");
    assert!(classes.get_opt("owner-class").await.expect("get").is_none());
    wait_gone(&cms, "dep").await;
    sandbox.shutdown().await;
}

/// "Garbage Collection" › Foreground cascading deletion: the owner "first enters a deletion in
/// progress state": `metadata.deletionTimestamp` set and the `foregroundDeletion` finalizer
/// added, still visible through the API; the controller deletes the dependents, and deletes the
/// owner once "all dependent objects with `ownerReference.blockOwnerDeletion=true`" are gone.
/// Dependents without it are deleted too but do not hold the owner. (kube-controller-manager
/// deletes a dependent that has no dependents of its own with background propagation, so it
/// does not get `foregroundDeletion` itself.)
#[tokio::test]
async fn foreground_deletion_waits_for_blocking_dependents_only() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    namespace(&client, "gc-fg").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "gc-fg");
    // Records the GC's deletes (and allows them).
    let webhook = TestWebhook::start(|_| Verdict::Allow)
        .await
        .expect("webhook starts");
    watch_configmap_deletes(&client, &webhook, "configmap-deletes", None).await;
    let owner = configmap(&cms, "owner", vec![], &[], &[]).await;
    configmap(
        &cms,
        "blocking",
        vec![owner_ref(&owner, Some(true))],
        &[HOLD],
        &[],
    )
    .await;
    configmap(
        &cms,
        "free",
        vec![owner_ref(&owner, Some(false))],
        &[HOLD],
        &[],
    )
    .await;

    let answer = cms
        .delete("owner", &DeleteParams::foreground())
        .await
        .expect("delete owner");
    let pending = answer.left().expect("the owner is kept while it waits");
    assert!(is_deleting(&pending));
    assert_eq!(pending.finalizers(), ["foregroundDeletion"]);

    for dep in ["blocking", "free"] {
        let d = wait_until(&cms, dep, "being deleted by the GC", is_deleting).await;
        assert_eq!(d.finalizers(), [HOLD], "{dep}");
        let deletes: Vec<_> = webhook
            .requests()
            .into_iter()
            .filter(|r| r["operation"] == "DELETE" && r["name"] == dep)
            .collect();
        assert!(!deletes.is_empty(), "{dep} was deleted through the API");
        for r in deletes {
            assert_eq!(
                r["userInfo"]["username"],
                "system:serviceaccount:kube-system:generic-garbage-collector"
            );
            assert_eq!(
                r["options"]["propagationPolicy"], "Background",
                "{dep}: a dependent without dependents of its own is deleted in the background"
            );
        }
    }
    let waiting = present(&cms, "owner").await;
    assert!(is_deleting(&waiting));
    assert_eq!(waiting.finalizers(), ["foregroundDeletion"]);

    // Only the blocking dependent holds the owner: once it goes, the owner goes although "free"
    // is still there.
    remove_finalizer(&cms, "blocking", HOLD).await;
    wait_gone(&cms, "blocking").await;
    wait_gone(&cms, "owner").await;
    let free = present(&cms, "free").await;
    assert!(is_deleting(&free));
    remove_finalizer(&cms, "free", HOLD).await;
    wait_gone(&cms, "free").await;
    webhook.stop().await;
    sandbox.shutdown().await;
}

/// "Garbage Collection" › Foreground cascading deletion, several levels deep (seed 001's
/// composite → composite → managed resource): kube-controller-manager deletes a dependent that
/// has dependents of its own with Foreground too (`attemptToDeleteItem`: "at least one owner of
/// object has FinalizerDeletingDependents, and the object itself has dependents, so it is going
/// to be deleted in Foreground"), so the tree goes leaf first: the leaf, then the middle, then
/// the root.
#[tokio::test]
async fn foreground_deletion_goes_leaf_first_through_several_levels() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    namespace(&client, "gc-fg-deep").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "gc-fg-deep");
    let root = configmap(&cms, "root", vec![], &[], &[]).await;
    let mid = configmap(&cms, "mid", vec![owner_ref(&root, Some(true))], &[], &[]).await;
    configmap(
        &cms,
        "leaf",
        vec![owner_ref(&mid, Some(true))],
        &[HOLD],
        &[],
    )
    .await;

    cms.delete("root", &DeleteParams::foreground())
        .await
        .expect("delete root");
    let mid = wait_until(&cms, "mid", "in foreground deletion", |m| {
        is_deleting(m) && m.finalizers().iter().any(|f| f == "foregroundDeletion")
    })
    .await;
    assert_eq!(mid.finalizers(), ["foregroundDeletion"]);
    let leaf = wait_until(&cms, "leaf", "being deleted", is_deleting).await;
    assert_eq!(
        leaf.finalizers(),
        [HOLD],
        "a leaf is deleted in the background"
    );
    assert!(is_deleting(&present(&cms, "root").await));

    remove_finalizer(&cms, "leaf", HOLD).await;
    wait_gone(&cms, "leaf").await;
    wait_gone(&cms, "mid").await;
    wait_gone(&cms, "root").await;
    sandbox.shutdown().await;
}

/// "Garbage Collection" › Orphaned dependents and "Use Cascading Deletion in a Cluster" › Set
/// the orphan policy: the owner gets the `orphan` finalizer, the garbage collector removes the
/// owner's references from the dependents (and only those), then the owner is deleted; the
/// dependents keep living.
#[tokio::test]
async fn orphan_deletion_keeps_dependents_without_the_reference() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    namespace(&client, "gc-orphan").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "gc-orphan");
    let owner = configmap(&cms, "owner", vec![], &[], &[]).await;
    let other = configmap(&cms, "other-owner", vec![], &[], &[]).await;
    configmap(
        &cms,
        "blocking",
        vec![owner_ref(&owner, Some(true))],
        &[],
        &[],
    )
    .await;
    configmap(&cms, "plain", vec![owner_ref(&owner, None)], &[], &[]).await;
    let other_ref = owner_ref(&other, None);
    configmap(
        &cms,
        "shared",
        vec![owner_ref(&owner, Some(true)), other_ref.clone()],
        &[],
        &[],
    )
    .await;

    let answer = cms
        .delete("owner", &DeleteParams::orphan())
        .await
        .expect("delete owner");
    let pending = answer
        .left()
        .expect("the owner waits for the orphan finalizer");
    assert!(is_deleting(&pending));
    assert_eq!(pending.finalizers(), ["orphan"]);

    wait_gone(&cms, "owner").await;
    for dep in ["blocking", "plain"] {
        let d = present(&cms, dep).await;
        assert!(!is_deleting(&d), "{dep} is orphaned, not deleted");
        assert_eq!(d.owner_references(), &[] as &[OwnerReference], "{dep}");
    }
    let shared = present(&cms, "shared").await;
    assert!(!is_deleting(&shared));
    assert_eq!(shared.owner_references(), [other_ref]);
    sandbox.shutdown().await;
}

/// "Owners and Dependents" / "Garbage Collection": a dependent is deleted once all its owners
/// are gone; while one owner remains, the garbage collector only removes the references to the
/// absent ones (`attemptToDeleteItem`: "has at least one existing owner, will not garbage
/// collect").
#[tokio::test]
async fn dependent_lives_until_its_last_owner_is_gone() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    namespace(&client, "gc-owners").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "gc-owners");
    let first = configmap(&cms, "first", vec![], &[], &[]).await;
    let second = configmap(&cms, "second", vec![], &[], &[]).await;
    let second_ref = owner_ref(&second, Some(true));
    configmap(
        &cms,
        "dep",
        vec![owner_ref(&first, Some(true)), second_ref.clone()],
        &[],
        &[],
    )
    .await;

    cms.delete("first", &DeleteParams::background())
        .await
        .expect("delete first owner");
    let dep = wait_until(&cms, "dep", "only the remaining owner referenced", |d| {
        d.owner_references().len() == 1
    })
    .await;
    assert_eq!(dep.owner_references(), [second_ref]);
    assert!(!is_deleting(&dep));

    cms.delete("second", &DeleteParams::background())
        .await
        .expect("delete second owner");
    wait_gone(&cms, "dep").await;
    sandbox.shutdown().await;
}

/// "Garbage Collection" › Owners and dependents: an owner reference whose owner is absent (a
/// UID that never existed, or a name now held by an object with another UID) is dangling, and
/// "the dependent is subject to deletion once all owners are verified absent".
#[tokio::test]
async fn dependent_of_an_absent_owner_is_deleted() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    namespace(&client, "gc-dangling").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "gc-dangling");
    let alive = configmap(&cms, "alive", vec![], &[], &[]).await;
    let ghost = OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "ghost".into(),
        uid: "6c1f0a52-0000-4000-8000-000000000001".into(),
        block_owner_deletion: None,
        controller: None,
    };
    let mut impostor = owner_ref(&alive, None);
    impostor.uid = "6c1f0a52-0000-4000-8000-000000000002".into();
    configmap(&cms, "orphan-of-ghost", vec![ghost], &[], &[]).await;
    configmap(&cms, "wrong-uid", vec![impostor], &[], &[]).await;
    configmap(&cms, "real-child", vec![owner_ref(&alive, None)], &[], &[]).await;

    wait_gone(&cms, "orphan-of-ghost").await;
    wait_gone(&cms, "wrong-uid").await;
    let child = present(&cms, "real-child").await;
    assert!(!is_deleting(&child));
    sandbox.shutdown().await;
}

/// "Garbage Collection" (note on cross-namespace references): "A namespaced owner must exist
/// in the same namespace as the dependent. If it does not, the owner reference is treated as
/// absent, and the dependent is subject to deletion once all owners are verified absent."
#[tokio::test]
async fn namespaced_owner_in_another_namespace_counts_as_absent() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    namespace(&client, "gc-here").await;
    namespace(&client, "gc-there").await;
    let here: Api<ConfigMap> = Api::namespaced(client.clone(), "gc-here");
    let there: Api<ConfigMap> = Api::namespaced(client.clone(), "gc-there");
    let owner = configmap(&there, "owner", vec![], &[], &[]).await;
    configmap(&here, "dep", vec![owner_ref(&owner, None)], &[], &[]).await;

    wait_gone(&here, "dep").await;
    present(&there, "owner").await;
    sandbox.shutdown().await;
}

/// "Garbage Collection" and kube-controller-manager's garbage collector: it deletes dependents
/// through the API, as `system:serviceaccount:kube-system:generic-garbage-collector`, so
/// admission applies to it; a refused delete is retried with exponential backoff until it is
/// allowed.
#[tokio::test]
async fn refused_delete_is_retried_until_admission_allows_it() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    namespace(&client, "gc-retry").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "gc-retry");
    let webhook = TestWebhook::start(|_| Verdict::Deny {
        code: 403,
        message: "guarded by the test".into(),
    })
    .await
    .expect("webhook starts");
    watch_configmap_deletes(
        &client,
        &webhook,
        "configmap-deletes",
        Some(json!({"matchLabels": {"lifecycle.test/guarded": "true"}})),
    )
    .await;

    let owner = configmap(&cms, "owner", vec![], &[], &[]).await;
    let dep = configmap(
        &cms,
        "guarded",
        vec![owner_ref(&owner, Some(true))],
        &[],
        &[("lifecycle.test/guarded", "true")],
    )
    .await;
    cms.delete("owner", &DeleteParams::background())
        .await
        .expect("delete owner");

    // Refused at least twice: the GC tried, was refused, and retried.
    let gc_deletes = || {
        webhook
            .requests()
            .into_iter()
            .filter(|r| r["operation"] == "DELETE" && r["name"] == "guarded")
            .collect::<Vec<_>>()
    };
    let seen = common::wait_for("the GC's delete to be refused twice", DEADLINE, || async {
        let seen = gc_deletes();
        (seen.len() >= 2).then_some(seen)
    })
    .await;
    for r in &seen {
        assert_eq!(
            r["userInfo"]["username"],
            "system:serviceaccount:kube-system:generic-garbage-collector"
        );
        assert_eq!(r["namespace"], "gc-retry");
        assert_eq!(r["options"]["propagationPolicy"], "Background");
        assert_eq!(
            r["options"]["preconditions"]["uid"],
            dep.uid().expect("uid").as_str()
        );
    }
    let survivor = present(&cms, "guarded").await;
    assert!(!is_deleting(&survivor), "a refused delete changes nothing");

    webhook.set_decide(|_| Verdict::Allow);
    common::wait_for(
        "the dependent to go once allowed",
        std::time::Duration::from_secs(3),
        || async {
            cms.get_opt("guarded")
                .await
                .expect("get")
                .is_none()
                .then_some(())
        },
    )
    .await;
    webhook.stop().await;
    sandbox.shutdown().await;
}
