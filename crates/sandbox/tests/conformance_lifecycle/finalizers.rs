//! Finalizers and deletion preconditions.
//!
//! Pages: "Finalizers" (concepts/overview/working-with-objects/finalizers), and kube-apiserver's
//! deletion (`rest.BeforeDelete`) and object-meta validation (`ValidateNoNewFinalizers`).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::common;
use crate::support::{HOLD, configmap, is_deleting, namespace, present, remove_finalizer, status};

/// "Finalizers" › How finalizers work: deleting an object with finalizers marks it for deletion
/// (`metadata.deletionTimestamp`) and keeps it, "the target object remains in a terminating
/// state"; when the finalizers field is emptied, the object is deleted — not before.
#[tokio::test]
async fn delete_marks_and_keeps_until_the_last_finalizer_goes() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    namespace(&client, "fin-keep").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "fin-keep");
    configmap(&cms, "held", vec![], &[HOLD, "lifecycle.test/second"], &[]).await;

    let answer = cms
        .delete("held", &DeleteParams::default())
        .await
        .expect("delete");
    let marked = answer.left().expect("the object is returned, not a Status");
    assert!(is_deleting(&marked));
    assert_eq!(marked.finalizers(), [HOLD, "lifecycle.test/second"]);
    let kept = present(&cms, "held").await;
    assert_eq!(
        kept.meta().deletion_timestamp,
        marked.meta().deletion_timestamp
    );

    // A second DELETE changes nothing: the object is already terminating.
    cms.delete("held", &DeleteParams::default())
        .await
        .expect("delete again");
    let again = present(&cms, "held").await;
    assert_eq!(
        again.meta().deletion_timestamp,
        marked.meta().deletion_timestamp
    );

    remove_finalizer(&cms, "held", "lifecycle.test/second").await;
    let one_left = present(&cms, "held").await;
    assert_eq!(one_left.finalizers(), [HOLD]);
    remove_finalizer(&cms, "held", HOLD).await;
    assert!(
        cms.get_opt("held").await.expect("get").is_none(),
        "removing the last finalizer deletes the object"
    );
    sandbox.shutdown().await;
}

/// "Finalizers" and kube-apiserver's `ValidateObjectMetaUpdate`: once `deletionTimestamp` is
/// set, no new finalizer can be added; the new ones are listed sorted in the 422.
#[tokio::test]
async fn no_new_finalizers_while_deleting() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    namespace(&client, "fin-add").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "fin-add");
    configmap(&cms, "held", vec![], &[HOLD], &[]).await;
    cms.delete("held", &DeleteParams::default())
        .await
        .expect("delete");

    let patch = json!({"metadata": {"finalizers": [HOLD, "z.test/late", "a.test/late"]}});
    let s = status(
        cms.patch("held", &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    );
    assert_eq!(s.code, 422);
    assert_eq!(s.reason, "Invalid");
    assert_eq!(
        s.message,
        "ConfigMap \"held\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"a.test/late\", \"z.test/late\"}"
    );
    let details = s.details.as_ref().expect("details");
    assert_eq!(details.kind, "ConfigMap");
    assert_eq!(details.name, "held");
    assert_eq!(details.causes.len(), 1);
    assert_eq!(details.causes[0].reason, "FieldValueForbidden");
    assert_eq!(details.causes[0].field, "metadata.finalizers");

    // Removing finalizers is still allowed, and the object is unchanged by the refusal.
    assert_eq!(present(&cms, "held").await.finalizers(), [HOLD]);
    remove_finalizer(&cms, "held", HOLD).await;
    assert!(cms.get_opt("held").await.expect("get").is_none());
    sandbox.shutdown().await;
}

/// kube-apiserver's DELETE preconditions (`DeleteOptions.preconditions`, checked in
/// `rest.BeforeDelete`): a UID or resourceVersion that does not match the stored object is a
/// 409 Conflict, and nothing is deleted.
#[tokio::test]
async fn delete_with_a_mismatched_precondition_is_a_conflict() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    namespace(&client, "fin-precondition").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "fin-precondition");
    let cm = configmap(&cms, "target", vec![], &[HOLD], &[]).await;
    let uid = cm.uid().expect("uid");
    let rv = cm.resource_version().expect("resourceVersion");

    let wrong_uid = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("00000000-0000-4000-8000-000000000000".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let s = status(cms.delete("target", &wrong_uid).await);
    assert_eq!(s.code, 409);
    assert_eq!(s.reason, "Conflict");
    assert_eq!(
        s.message,
        format!(
            "Operation cannot be fulfilled on ConfigMap \"target\": the UID in the precondition (00000000-0000-4000-8000-000000000000) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )
    );
    let details = s.details.as_ref().expect("details");
    assert_eq!(details.kind, "ConfigMap");
    assert_eq!(details.name, "target");

    let wrong_rv = DeleteParams {
        preconditions: Some(Preconditions {
            uid: None,
            resource_version: Some("1".into()),
        }),
        ..DeleteParams::default()
    };
    let s = status(cms.delete("target", &wrong_rv).await);
    assert_eq!(s.code, 409);
    assert_eq!(
        s.message,
        format!(
            "Operation cannot be fulfilled on ConfigMap \"target\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ({rv}). The object might have been modified"
        )
    );
    let untouched = present(&cms, "target").await;
    assert!(!is_deleting(&untouched), "a refused delete marks nothing");

    // The matching UID is accepted.
    let right = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    cms.delete("target", &right).await.expect("delete");
    assert!(is_deleting(&present(&cms, "target").await));
    sandbox.shutdown().await;
}
