//! Replay on a cluster whose API server presents no client certificate to Lien (issue 18 §3):
//! Lien records no refusal it answers there, so a user asks through the API server instead —
//! `kubectl lien delete --when-free`, sealed by Lien's mutating webhook after a
//! SubjectAccessReview for `delete`. Under RBAC with non-admin users: the requester's object is
//! deleted once free, with a `DeletionReplayed` Event naming them; a user who may not delete
//! gets 403 and nothing is recorded; reviews forged and POSTed straight to the webhook's
//! `/validate` and `/mutate` change nothing, before and after.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use lien::plugin::delete::{Cascade, DeleteError, Deleted, delete};
use lien::plugin::read::Resource;
use lien_controller::DELETION_ATTEMPT_ANNOTATION;
use lien_controller::replay::DELETION_REPLAYED_REASON;
use lien_core::ObjectKey;
use lien_core::seams::DELETE_WHEN_FREE_ANNOTATION;
use lien_sandbox::apiserver::Authorization;
use serde_json::{Value, json};

use crate::harness::*;

fn annotation(cm: &ConfigMap, key: &str) -> Option<String> {
    cm.metadata.annotations.as_ref()?.get(key).cloned()
}

/// A Role in the scenario's namespace over ConfigMaps with `verbs`, bound to `user`.
async fn grant_configmaps(env: &mut Env, name: &str, user: &str, verbs: &[&str]) {
    let ns = env.ns.clone();
    grant(
        env,
        &ns,
        name,
        user,
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]),
    )
    .await;
}

/// ConfigMaps as the plugin resolves `configmap` (no discovery needed for the test's users).
fn configmaps_resource() -> Resource {
    Resource {
        api: kube::core::ApiResource::erase::<ConfigMap>(&()),
        namespaced: true,
        singular: "configmap".into(),
        short_names: vec!["cm".into()],
    }
}

/// A DELETE of `name` and an UPDATE asking for its deletion when free, forged in the name of
/// the sandbox's admin (who may delete anything), POSTed to `/validate` and `/mutate`. The
/// webhook answers both — the UPDATE even with a sealed record — but nothing is stored:
/// returns that record, to try writing it by hand.
async fn forge_both(env: &Env, name: &str) -> String {
    let cms = env.configmaps();
    let stored = serde_json::to_value(cms.get(name).await.expect("get")).expect("json");
    let mut asked = stored.clone();
    asked["metadata"]["annotations"] = json!({DELETE_WHEN_FREE_ANNOTATION: "Background"});
    let kind = ("ConfigMap", "configmaps");
    let delete = forged_review("forged-DELETE", kind, "DELETE", Value::Null, &stored);
    let answer = post_without_client_certificate(env, "/validate", &delete).await;
    // Answered (protection does not stop), as a refusal nobody records.
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    assert_eq!(answer["response"]["status"]["code"], 409, "{answer}");
    let update = forged_review("forged-UPDATE", kind, "UPDATE", asked, &stored);
    sealed_record(&post_without_client_certificate(env, "/mutate", &update).await)
}

/// The object is intact: same UID, no record, no request.
async fn intact(env: &Env, name: &str, uid: &Option<String>) {
    let cm = env
        .configmaps()
        .get_opt(name)
        .await
        .expect("get")
        .unwrap_or_else(|| panic!("{name} was deleted"));
    assert_eq!(&cm.metadata.uid, uid, "{name} was replaced");
    assert_eq!(annotation(&cm, DELETION_ATTEMPT_ANNOTATION), None, "{name}");
    assert_eq!(annotation(&cm, DELETE_WHEN_FREE_ANNOTATION), None, "{name}");
}

#[tokio::test]
async fn without_a_client_certificate_a_deletion_requested_when_free_is_replayed() {
    let mut env = Env::start_with(
        "when-free",
        Options {
            authorization: Authorization::Rbac,
            client_certificate: false,
            ..Options::default()
        },
    )
    .await;
    if !env.is_local() {
        // A real cluster's webhook port is not reachable from here, and its Lien may have a
        // client CA: the scenario is the sandbox's.
        env.finish().await;
        return;
    }
    let ns = env.ns.clone();
    let used = env.configmap("used", json!({})).await;
    let other = env.configmap("other", json!({})).await;
    env.configmap("user", json!({})).await;
    for (usage, of) in [("u-used", "used"), ("u-other", "other")] {
        env.usage(
            usage,
            json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": of}},
                   "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "user"}}}),
        )
        .await;
    }
    let cms = env.configmaps();
    wait_label(&cms, "used", true).await;
    wait_label(&cms, "other", true).await;

    let alice = format!("alice-{ns}");
    let bob = format!("bob-{ns}");
    grant_configmaps(
        &mut env,
        "deleter",
        &alice,
        &["get", "list", "watch", "update", "patch", "delete"],
    )
    .await;
    grant_configmaps(
        &mut env,
        "editor",
        &bob,
        &["get", "list", "watch", "update", "patch"],
    )
    .await;
    let as_alice = env.client_as(&alice, &["system:authenticated"]).await;
    let as_bob = env.client_as(&bob, &["system:authenticated"]).await;

    // Forged reviews before anything: nothing changes.
    let forged_record = forge_both(&env, "other").await;
    intact(&env, "other", &other.metadata.uid).await;

    // Alice's DELETE is refused, and the refusal names the command.
    let alice_cms: Api<ConfigMap> = Api::namespaced(as_alice.clone(), &ns);
    let (code, message) = api_error(
        alice_cms
            .delete("used", &DeleteParams::default())
            .await
            .expect_err("in use"),
    );
    assert_eq!(code, 409, "{message}");
    assert!(
        message.contains(&format!(
            "\nnot replayed: to have Lien delete it once free, run \
             `kubectl lien delete --when-free configmap/used -n {ns}`.\n"
        )),
        "{message}"
    );
    // Answered, not recorded: anyone could have sent that review.
    intact(&env, "used", &used.metadata.uid).await;

    // Bob may update but not delete. Through the plugin, his DELETE is refused by RBAC and
    // nothing is requested; annotating by hand, as `kubectl annotate` would, his request is
    // refused by Lien's mutating webhook: 403, and nothing is recorded.
    let key = |name: &str| ObjectKey::new("", "ConfigMap", Some(&ns), name);
    let err = delete(
        &as_bob,
        &key("other"),
        &configmaps_resource(),
        Cascade::Background,
        true,
    )
    .await
    .expect_err("bob may not delete");
    assert!(
        matches!(&err, DeleteError::Api(_)) && err.to_string().contains("Forbidden"),
        "{err}"
    );
    intact(&env, "other", &other.metadata.uid).await;
    let bob_cms: Api<ConfigMap> = Api::namespaced(as_bob, &ns);
    let (code, message) = api_error(
        bob_cms
            .patch(
                "other",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"annotations": {DELETE_WHEN_FREE_ANNOTATION: "Background"}}}),
                ),
            )
            .await
            .expect_err("bob may not have it deleted"),
    );
    assert_eq!(code, 403, "{message}");
    for part in [
        "admission webhook \"seal.lien.dev\" denied the request",
        &format!("user \"{bob}\" may not delete it"),
        "you must be allowed to delete it yourself",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    intact(&env, "other", &other.metadata.uid).await;
    // Nor may he write the record forged above by hand.
    let (code, message) = api_error(
        bob_cms
            .patch(
                "other",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"annotations": {DELETION_ATTEMPT_ANNOTATION: forged_record}}}),
                ),
            )
            .await
            .expect_err("written by Lien only"),
    );
    assert_eq!(code, 403, "{message}");
    assert!(message.contains("written by Lien only"), "{message}");
    intact(&env, "other", &other.metadata.uid).await;

    // Alice asks through the plugin's code: refused now, requested for when free.
    let done = delete(
        &as_alice,
        &key("used"),
        &configmaps_resource(),
        Cascade::Foreground,
        true,
    )
    .await
    .expect("requested");
    let Deleted::WhenFree { refusal } = &done else {
        panic!("the object is in use: {done:?}");
    };
    assert!(refusal.contains("delete.lien.dev"), "{refusal}");
    let now = cms.get("used").await.expect("get");
    assert_eq!(annotation(&now, DELETE_WHEN_FREE_ANNOTATION), None);
    let record: Value = serde_json::from_str(
        &annotation(&now, DELETION_ATTEMPT_ANNOTATION).expect("a sealed record"),
    )
    .expect("json");
    assert_eq!(record["user"], alice.as_str());
    assert_eq!(record["propagationPolicy"], "Foreground");
    assert_eq!(record["replay"], true);
    assert!(record["signature"].is_string(), "{record}");

    // Forged reviews after: still nothing.
    forge_both(&env, "other").await;
    intact(&env, "other", &other.metadata.uid).await;

    // The user goes, with it both Usages: `used` is deleted for Alice, `other` stays.
    cms.delete("user", &DeleteParams::default())
        .await
        .expect("delete the user");
    wait_gone(&cms, "used", DEADLINE).await;
    let events = env
        .wait_events("ConfigMap", "used", DELETION_REPLAYED_REASON)
        .await;
    let note = events[0].note.clone().unwrap_or_default();
    assert_eq!(events[0].type_.as_deref(), Some("Normal"));
    assert!(
        note.contains(&format!("requested by {alice}")) && note.contains("Foreground"),
        "{note}"
    );
    wait_label(&cms, "other", false).await;
    intact(&env, "other", &other.metadata.uid).await;
    env.finish().await;
}

/// Lien keeps its MutatingWebhookConfiguration as it keeps the validating one: edited to send
/// nothing, or deleted, it comes back, and hand-written records are refused again.
#[tokio::test]
async fn an_edited_or_deleted_mutating_configuration_is_restored() {
    let mut env = Env::start("mwc-restore").await;
    if !env.is_local() {
        // Editing a real cluster's webhook configuration is not a test to run on it.
        env.finish().await;
        return;
    }
    env.protected_configmap("db", "protect-db", "production data")
        .await;
    let cms = env.configmaps();
    wait_label(&cms, "db", true).await;
    let ar = api_resource(&json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration"}));
    let api = Api::<DynamicObject>::all_with(env.client.clone(), &ar);
    let restored = |why: &'static str| {
        let api = api.clone();
        async move {
            wait_for(why, DEADLINE, || async {
                let c = api.get_opt("lien").await.ok()??;
                let hook = &c.data["webhooks"][0];
                (hook["name"] == "seal.lien.dev"
                    && hook["failurePolicy"] == "Fail"
                    && hook["matchConditions"][0]["name"] == "requests-or-writes-a-deletion-record")
                    .then_some(())
            })
            .await;
        }
    };
    restored("Lien's mutating configuration").await;
    let mut edited = api.get("lien").await.expect("the configuration");
    edited.data["webhooks"][0]["failurePolicy"] = json!("Ignore");
    edited.data["webhooks"][0]["matchConditions"][0]["expression"] = json!("false");
    edited.metadata.managed_fields = None;
    api.replace("lien", &Default::default(), &edited)
        .await
        .expect("edited");
    restored("the edited configuration to be restored").await;
    api.delete("lien", &DeleteParams::default())
        .await
        .expect("deleted");
    restored("the deleted configuration to be recreated").await;
    // And it works again: a user other than Lien may not write a record.
    let as_someone = env
        .client_as(&format!("someone-{}", env.ns), &["system:masters"])
        .await;
    let (code, message) = api_error(
        Api::<ConfigMap>::namespaced(as_someone, &env.ns)
            .patch(
                "db",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"annotations": {DELETION_ATTEMPT_ANNOTATION: "{}"}}}),
                ),
            )
            .await
            .expect_err("written by Lien only"),
    );
    assert_eq!(code, 403, "{message}");
    env.finish().await;
}

/// Through the real kubectl, on a Lien that records refusals (client certificate) and a Usage
/// that asks for no replay: `kubectl lien delete` alone prints the refusal and the hint;
/// with `--when-free` right after a refusal, the request is what stays recorded (the refusal's
/// own record, which replays nothing, does not replace it), and the object goes with its user.
/// An object that goes at once is just deleted.
#[tokio::test]
async fn kubectl_lien_delete_when_free_through_kubectl() {
    let mut env = Env::start("kubectl-when-free").await;
    let ns = env.ns.clone();
    env.configmap("db", json!({})).await;
    env.configmap("app", json!({})).await;
    env.configmap("scratch", json!({})).await;
    env.usage(
        "app-uses-db",
        json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "db"}},
               "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "app"}}}),
    )
    .await;
    let cms = env.configmaps();
    wait_label(&cms, "db", true).await;
    let k = Kubectl::new(&env);

    let (ok, _, stderr) = k.run(&["lien", "delete", "cm/db", "-n", &ns]).await;
    assert!(!ok, "{stderr}");
    assert!(
        stderr.contains("admission webhook \"delete.lien.dev\" denied the request")
            && stderr.contains(&format!(
                "\nnot replayed: to have Lien delete it once free, run \
                 `kubectl lien delete --when-free configmap/db -n {ns}`.\n"
            )),
        "{stderr}"
    );
    let (ok, stdout, stderr) = k
        .run(&[
            "lien",
            "delete",
            "--when-free",
            "cm/db",
            "-n",
            &ns,
            "--cascade=orphan",
        ])
        .await;
    assert!(ok, "{stdout}{stderr}");
    assert!(
        stdout.starts_with("cm/db is in use; Lien will delete it when it is free.")
            && stdout.contains(&format!(
                "To cancel: kubectl annotate cm db -n {ns} lien.dev/deletion-attempt-"
            )),
        "{stdout}"
    );
    // Both refusals were recorded by Lien (client certificate mode), asking no replay; the
    // request, sealed after them, is what stays.
    wait_for("the request's record to stay", DEADLINE, || async {
        let record: Value = serde_json::from_str(&annotation(
            &cms.get("db").await.ok()?,
            DELETION_ATTEMPT_ANNOTATION,
        )?)
        .ok()?;
        (record["replay"] == true && record["propagationPolicy"] == "Orphan").then_some(())
    })
    .await;

    let (ok, stdout, stderr) = k
        .run(&["lien", "delete", "--when-free", "cm/scratch", "-n", &ns])
        .await;
    assert!(ok, "{stdout}{stderr}");
    assert_eq!(stdout, "cm/scratch deleted\n");
    let (ok, _, stderr) = k
        .run(&["lien", "delete", "--when-free", "cm/nope", "-n", &ns])
        .await;
    assert!(!ok);
    assert!(stderr.contains("NotFound"), "{stderr}");

    cms.delete("app", &DeleteParams::default())
        .await
        .expect("the user goes");
    wait_gone(&cms, "db", DEADLINE).await;
    let events = env
        .wait_events("ConfigMap", "db", DELETION_REPLAYED_REASON)
        .await;
    assert!(
        events[0]
            .note
            .as_deref()
            .is_some_and(|n| n.contains("propagationPolicy Orphan")),
        "{events:?}"
    );
    let _ = std::fs::remove_dir_all(std::env::temp_dir().join(format!(
        "lien-when-free-{}-{}",
        std::process::id(),
        ns
    )));
    env.finish().await;
}

/// Which way a replay was asked for.
#[derive(Clone, Copy, Debug)]
enum Asked {
    /// `kubectl lien delete --when-free`, sealed by the mutating webhook.
    WhenFree,
    /// A DELETE the API server sent and Lien refused (client certificate), replayed because
    /// its Usage says `replayDeletion`.
    Refused,
}

/// Issue 28, finding 5: a replay outlived its requester's right — Alice asks for `used` to be
/// deleted once free, her RoleBinding is removed, the object is freed, and Lien deleted it
/// for her anyway. Now the replay is authorized again when it is about to run: it is dropped,
/// with a Warning on the object naming Alice, and the object stays.
async fn a_replay_is_dropped_once_its_requester_may_no_longer_delete(asked: Asked) {
    let mut env = Env::start_with(
        &format!("revoked-{}", format!("{asked:?}").to_lowercase()),
        Options {
            authorization: Authorization::Rbac,
            client_certificate: matches!(asked, Asked::Refused),
            ..Options::default()
        },
    )
    .await;
    let ns = env.ns.clone();
    let used = env.configmap("used", json!({})).await;
    env.configmap("user", json!({})).await;
    env.usage(
        "u-used",
        json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "used"}},
               "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "user"}},
               "replayDeletion": true}),
    )
    .await;
    let cms = env.configmaps();
    wait_label(&cms, "used", true).await;
    let alice = format!("alice-{ns}");
    grant_configmaps(
        &mut env,
        "deleter",
        &alice,
        &["get", "list", "watch", "update", "patch", "delete"],
    )
    .await;
    let as_alice = env.client_as(&alice, &["system:authenticated"]).await;
    let alice_cms: Api<ConfigMap> = Api::namespaced(as_alice.clone(), &ns);
    match asked {
        Asked::WhenFree => {
            let key = ObjectKey::new("", "ConfigMap", Some(&ns), "used");
            // RBAC on a real cluster applies a new binding within moments, not at once.
            let done = wait_for("Alice may ask", DEADLINE, || async {
                delete(
                    &as_alice,
                    &key,
                    &configmaps_resource(),
                    Cascade::Background,
                    true,
                )
                .await
                .ok()
            })
            .await;
            assert!(matches!(done, Deleted::WhenFree { .. }), "{done:?}");
        }
        Asked::Refused => {
            let (code, message) = wait_for("Alice's DELETE refused by Lien", DEADLINE, || async {
                match alice_cms.delete("used", &DeleteParams::default()).await {
                    Err(e) => Some(api_error(e)).filter(|(code, _)| *code == 409),
                    Ok(_) => panic!("used was deleted while in use"),
                }
            })
            .await;
            assert!(message.contains("Lien will delete it"), "{code}: {message}");
        }
    }
    let record: Value = wait_for("the sealed record", DEADLINE, || async {
        let cm = cms.get("used").await.ok()?;
        serde_json::from_str(&annotation(&cm, DELETION_ATTEMPT_ANNOTATION)?).ok()
    })
    .await;
    assert_eq!(record["user"], alice.as_str());
    assert!(
        record["groups"]
            .as_array()
            .is_some_and(|g| g.iter().any(|g| g == "system:authenticated")),
        "the record carries Alice's groups: {record}"
    );

    // Alice's right goes; once the API server says so, the object is freed.
    Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(env.client.clone(), &ns)
        .delete("deleter", &DeleteParams::default())
        .await
        .expect("the RoleBinding removed");
    wait_for("Alice may no longer delete", DEADLINE, || async {
        match alice_cms
            .delete("never-existed", &DeleteParams::default())
            .await
        {
            Err(e) => Some(api_error(e)).filter(|(code, _)| *code == 403),
            Ok(_) => None,
        }
    })
    .await;
    cms.delete("user", &DeleteParams::default())
        .await
        .expect("delete the user");

    let events = env
        .wait_events(
            "ConfigMap",
            "used",
            lien_controller::replay::REPLAY_NOT_AUTHORIZED_REASON,
        )
        .await;
    let note = events[0].note.clone().unwrap_or_default();
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    assert!(
        note.contains(&format!("requested by {alice}"))
            && note.contains(&format!("{alice} may no longer delete it")),
        "{note}"
    );
    // The record went with the decision, and the object stayed.
    wait_for("the record removed", DEADLINE, || async {
        let cm = cms.get("used").await.ok()?;
        annotation(&cm, DELETION_ATTEMPT_ANNOTATION)
            .is_none()
            .then_some(())
    })
    .await;
    intact(&env, "used", &used.metadata.uid).await;
    assert!(
        env.events("ConfigMap", "used", DELETION_REPLAYED_REASON)
            .await
            .is_empty(),
        "nothing was replayed"
    );
    env.finish().await;
}

#[tokio::test]
async fn a_when_free_request_is_dropped_once_its_requester_may_no_longer_delete() {
    a_replay_is_dropped_once_its_requester_may_no_longer_delete(Asked::WhenFree).await;
}

#[tokio::test]
async fn a_refused_delete_is_not_replayed_once_its_requester_may_no_longer_delete() {
    a_replay_is_dropped_once_its_requester_may_no_longer_delete(Asked::Refused).await;
}
