//! Forged replays (issue 7 §2): a replay is armed only by a DELETE the API server sent, and a
//! deletion record Lien did not write is ignored. See "Threat model: replay records and forged
//! reviews" in docs/ARCHITECTURE.md.

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use lien_controller::DELETION_ATTEMPT_ANNOTATION;
use lien_controller::audit::DELETION_REFUSED_REASON;
use lien_sandbox::apiserver::Authorization;
use serde_json::json;

use crate::harness::*;

fn record_of(cm: &k8s_openapi::api::core::v1::ConfigMap) -> Option<String> {
    cm.metadata
        .annotations
        .as_ref()?
        .get(DELETION_ATTEMPT_ANNOTATION)
        .cloned()
}

/// Under RBAC, a user who may update a ConfigMap but not delete it tries to write a replay
/// record on it (a protected ConfigMap whose protection was then lifted, so a genuine record
/// would be replayed now): Lien's mutating webhook refuses (403). Written all the same by an
/// identity the webhook lets through, the unsealed record does not delete the ConfigMap, and
/// Lien removes it.
#[tokio::test]
async fn a_forged_replay_record_does_not_delete_under_rbac() {
    let mut env = Env::start_with(
        "forged-record",
        Options {
            authorization: Authorization::Rbac,
            ..Options::default()
        },
    )
    .await;
    let ns = env.ns.clone();
    let used = env.configmap("used", json!({})).await;
    env.configmap("user", json!({})).await;
    // Another protected ConfigMap keeps ConfigMaps watched, as in any cluster using Lien.
    env.protected_configmap("other", "keep", "kept").await;
    env.usage(
        "u",
        json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "used"}},
               "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "user"}},
               "replayDeletion": true}),
    )
    .await;
    let cms = env.configmaps();
    wait_label(&cms, "used", true).await;
    // Released: its user goes, and with it the Usage.
    cms.delete("user", &DeleteParams::default())
        .await
        .expect("delete the user");
    wait_label(&cms, "used", false).await;

    let user = format!("mallory-{ns}");
    env.create(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "cm-editor", "namespace": ns},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                   "verbs": ["get", "list", "watch", "update", "patch"]}]}),
    )
    .await;
    env.create(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "cm-editor", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-editor"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}),
    )
    .await;
    let mallory = env.client_as(&user, &["system:authenticated"]).await;
    let as_mallory: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(mallory, &ns);
    let (code, _) = api_error(
        as_mallory
            .delete("used", &DeleteParams::default())
            .await
            .expect_err("no delete rights"),
    );
    assert_eq!(code, 403);
    // The record as Lien would write it (a refusal's: the only kind Lien's identity may write),
    // but not sealed by Lien.
    let forged = json!({"uid": used.metadata.uid, "propagationPolicy": "Background",
        "user": "an-admin", "time": jiff::Timestamp::now().to_string(), "replay": true,
        "source": "refusal"})
    .to_string();
    let forge = || {
        Patch::Merge(json!({"metadata": {"annotations": {DELETION_ATTEMPT_ANNOTATION: forged}}}))
    };
    // Lien's mutating webhook lets no one but Lien write it.
    let (code, message) = api_error(
        as_mallory
            .patch("used", &PatchParams::default(), &forge())
            .await
            .expect_err("the record is Lien's to write"),
    );
    assert_eq!(code, 403, "{message}");
    assert!(message.contains("written by Lien only"), "{message}");
    let Some(as_lien) = env.lien_client().await else {
        env.finish().await;
        return;
    };
    // Written past that check — with Lien's own identity (the sandbox's admin, whom the
    // in-process Lien runs as; Lien's ServiceAccount on a real control plane), or on a cluster
    // whose mutating configuration was removed — it is still never acted on.
    Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(as_lien, &ns)
        .patch("used", &PatchParams::default(), &forge())
        .await
        .expect("Lien's identity may write it");
    wait_for("Lien to remove the forged record", DEADLINE, || async {
        let cm = cms.get("used").await.ok()?;
        record_of(&cm).is_none().then_some(())
    })
    .await;
    assert!(
        cms.get_opt("used").await.expect("get").is_some(),
        "a forged record deleted the ConfigMap"
    );
    env.finish().await;
}

/// A DELETE review forged and POSTed straight to the webhook port, naming an invented user,
/// arms no replay and makes no events; a genuine refused DELETE through the API server after
/// it is still recorded.
#[tokio::test]
async fn a_forged_review_arms_no_replay_and_makes_no_events() {
    let mut env = Env::start("forged-review").await;
    if !env.is_local() {
        // The webhook's port is reachable only from inside the cluster there.
        env.finish().await;
        return;
    }
    let ns = env.ns.clone();
    let target = env.configmap("target", json!({})).await;
    env.configmap("barrier", json!({})).await;
    env.configmap("user", json!({})).await;
    for (name, of) in [("u1", "target"), ("u2", "barrier")] {
        env.usage(
            name,
            json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": of}},
                   "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "user"}},
                   "replayDeletion": true}),
        )
        .await;
    }
    let cms = env.configmaps();
    wait_label(&cms, "target", true).await;
    wait_label(&cms, "barrier", true).await;
    let stored = serde_json::to_value(cms.get("target").await.expect("get")).expect("json");
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "forged-1", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "target", "namespace": ns, "operation": "DELETE",
            "userInfo": {"username": "invented-user", "groups": ["system:authenticated"]},
            "object": null, "oldObject": stored, "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions",
                        "propagationPolicy": "Background"}}});
    let answer = post_without_client_certificate(&env, "/validate", &review).await;
    let response = &answer["response"];
    assert_eq!(response["allowed"], false, "{answer}");
    assert_eq!(response["status"]["code"], 401, "{answer}");
    // A genuine refusal, through the API server (which presents its client certificate).
    let (code, _) = api_error(
        cms.delete("barrier", &DeleteParams::default())
            .await
            .expect_err("refused"),
    );
    assert_eq!(code, 409);
    env.wait_events("ConfigMap", "barrier", DELETION_REFUSED_REASON)
        .await;
    wait_for("the genuine refusal's record", DEADLINE, || async {
        record_of(&cms.get("barrier").await.ok()?)
    })
    .await;
    let target_now = cms.get("target").await.expect("get");
    assert_eq!(target_now.metadata.uid, target.metadata.uid);
    assert_eq!(
        record_of(&target_now),
        None,
        "a forged review armed a replay"
    );
    assert!(
        env.events("ConfigMap", "target", DELETION_REFUSED_REASON)
            .await
            .is_empty(),
        "a forged review made an event"
    );
    // Its user goes: the genuine refusal is replayed, the forged one is not.
    cms.delete("user", &DeleteParams::default())
        .await
        .expect("delete user");
    wait_gone(&cms, "barrier", DEADLINE).await;
    wait_label(&cms, "target", false).await;
    assert!(cms.get_opt("target").await.expect("get").is_some());
    env.finish().await;
}
