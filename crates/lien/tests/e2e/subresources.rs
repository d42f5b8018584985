//! Lien's label and replay records through subresources, and sealed records obtained from
//! forged reviews (issue 28 §2). kube-apiserver keeps metadata written through `services/status`,
//! `pods/status`, `namespaces/status` and `namespaces/finalize` (their strategies reset spec,
//! or status, only), so a user who may write those but not delete the object must not be able to
//! strip the in-use label, arm break-glass, or write a replay record that way; and a record
//! `/mutate` seals for a forged review (no client CA: it answers anyone) must be useless even
//! to whoever may write past the record guard as Lien's own identity. See "Threat model:
//! replay records and forged reviews" in docs/ARCHITECTURE.md.

use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use lien_controller::DELETION_ATTEMPT_ANNOTATION;
use lien_core::seams::DELETE_WHEN_FREE_ANNOTATION;
use lien_sandbox::apiserver::Authorization;
use lien_webhook::BREAK_GLASS_ANNOTATION;
use serde_json::{Value, json};

use crate::harness::*;

/// A review of an UPDATE asking for `object`'s deletion when free, forged in the name of the
/// sandbox's admin (who may delete anything) and POSTed to `/mutate` without a client
/// certificate; the sealed record the answer's patch would store.
async fn forged_sealed_record(env: &Env, resource: &str, kind: &str, object: &Value) -> String {
    let mut asked = object.clone();
    asked["metadata"]["annotations"] = json!({DELETE_WHEN_FREE_ANNOTATION: "Background"});
    let review = forged_review("forged", (kind, resource), "UPDATE", asked, object);
    sealed_record(&post_without_client_certificate(env, "/mutate", &review).await)
}

fn refused_by(result: Result<impl std::fmt::Debug, kube::Error>, hook: &str, parts: &[&str]) {
    let (code, message) = api_error(result.expect_err("refused"));
    assert_eq!(code, 403, "{message}");
    assert!(
        message.contains(&format!("admission webhook \"{hook}\" denied the request")),
        "{message}"
    );
    for part in parts {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
}

fn annotation(meta: &kube::api::ObjectMeta, key: &str) -> Option<String> {
    meta.annotations.as_ref()?.get(key).cloned()
}

/// Under RBAC on a Lien without a client CA (a managed cluster): `mallory` may update
/// `services/status` (and the Namespace's `status` and `finalize`) but delete nothing. A record
/// sealed for a forged review naming the admin, written through those subresources, is refused
/// by `seal.lien.dev`; the in-use label stripped or break-glass armed that way, by
/// `tamper.lien.dev` and `break-glass.lien.dev`. Written as Lien's own identity on the object
/// itself, the same record is refused too (Lien writes only refusals' records). Once the
/// Service is free, nothing deletes it.
#[tokio::test]
async fn records_and_the_label_cannot_be_written_through_subresources() {
    let mut env = Env::start_with(
        "subresources",
        Options {
            authorization: Authorization::Rbac,
            client_certificate: false,
            ..Options::default()
        },
    )
    .await;
    if !env.is_local() {
        // A real cluster's webhook port is not reachable from here.
        env.finish().await;
        return;
    }
    let ns = env.ns.clone();
    let services: Api<Service> = Api::namespaced(env.client.clone(), &ns);
    let svc = services
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "db"},
                "spec": {"ports": [{"port": 5432}]}}))
            .expect("service"),
        )
        .await
        .expect("create the Service");
    env.configmap("app", json!({})).await;
    env.usage(
        "app-uses-db",
        json!({"of": {"apiVersion": "v1", "kind": "Service", "resourceRef": {"name": "db"}},
               "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "app"}},
               "replayDeletion": true}),
    )
    .await;
    wait_for("the Service to be labelled in use", DEADLINE, || async {
        labelled(services.get("db").await.ok()?.metadata.labels.as_ref()).then_some(())
    })
    .await;

    let mallory = format!("mallory-{ns}");
    grant(
        &mut env,
        &ns,
        "status-writer",
        &mallory,
        json!([{"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "watch"]},
               {"apiGroups": [""], "resources": ["services/status"],
                "verbs": ["get", "update", "patch"]}]),
    )
    .await;
    let victim = env.cluster_name("victim");
    env.namespace(&victim).await;
    env.create(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": victim},
        "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]},
                  {"apiGroups": [""], "resources": ["namespaces/status", "namespaces/finalize"],
                   "verbs": ["get", "update", "patch"]}]}),
    )
    .await;
    env.create(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": victim},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": victim},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": mallory}]}),
    )
    .await;
    let as_mallory = env.client_as(&mallory, &["system:authenticated"]).await;
    let mallory_services: Api<Service> = Api::namespaced(as_mallory.clone(), &ns);
    let (code, _) = api_error(
        mallory_services
            .delete("db", &DeleteParams::default())
            .await
            .expect_err("no delete rights"),
    );
    assert_eq!(code, 403);

    let stored = serde_json::to_value(services.get("db").await.expect("get")).expect("json");
    let record = forged_sealed_record(&env, "services", "Service", &stored).await;
    let pp = PatchParams::default();
    // The record, through `services/status`.
    refused_by(
        mallory_services
            .patch_status(
                "db",
                &pp,
                &Patch::Merge(
                    json!({"metadata": {"annotations": {DELETION_ATTEMPT_ANNOTATION: record}}}),
                ),
            )
            .await,
        "seal.lien.dev",
        &[
            "through services/status",
            "Lien writes it on the object itself only",
        ],
    );
    // A deletion request, the same way.
    refused_by_code(
        mallory_services
            .patch_status(
                "db",
                &pp,
                &Patch::Merge(
                    json!({"metadata": {"annotations": {DELETE_WHEN_FREE_ANNOTATION: ""}}}),
                ),
            )
            .await,
        400,
        "set it on the object itself",
    );
    // The in-use label stripped, and break-glass armed, through `services/status`.
    refused_by(
        mallory_services
            .patch_status(
                "db",
                &pp,
                &Patch::Merge(json!({"metadata": {"labels": {LABEL: null}}})),
            )
            .await,
        "tamper.lien.dev",
        &["cannot change label lien.dev/in-use through services/status"],
    );
    refused_by(
        mallory_services
            .patch_status(
                "db",
                &pp,
                &Patch::Merge(
                    json!({"metadata": {"annotations": {BREAK_GLASS_ANNOTATION: "now"}}}),
                ),
            )
            .await,
        "break-glass.lien.dev",
        &["through services/status"],
    );
    // A status write that leaves Lien's label and annotations alone goes through.
    mallory_services
        .patch_status(
            "db",
            &pp,
            // (Conditions: kube-apiserver refuses ingress points on a ClusterIP Service.)
            &Patch::Merge(
                json!({"status": {"conditions": [{"type": "Ready", "status": "True",
                "reason": "Checked", "message": "ok",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}),
            ),
        )
        .await
        .expect("an ordinary status write");

    // A Namespace: through `status` and `finalize`, which keep metadata too.
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    let ns_object =
        serde_json::to_value(namespaces.get(&victim).await.expect("get")).expect("json");
    let ns_record = forged_sealed_record(&env, "namespaces", "Namespace", &ns_object).await;
    let mallory_namespaces: Api<Namespace> = Api::all(as_mallory.clone());
    refused_by(
        mallory_namespaces
            .patch_status(
                &victim,
                &pp,
                &Patch::Merge(
                    json!({"metadata": {"annotations": {DELETION_ATTEMPT_ANNOTATION: ns_record}}}),
                ),
            )
            .await,
        "seal.lien.dev",
        &["through namespaces/status"],
    );
    let mut finalize = ns_object.clone();
    finalize["metadata"]["annotations"] = json!({DELETION_ATTEMPT_ANNOTATION: ns_record});
    refused_by(
        mallory_namespaces
            .replace_subresource("finalize", &victim, &PostParams::default(), &finalize)
            .await,
        "seal.lien.dev",
        &["through namespaces/finalize"],
    );
    let now = namespaces.get(&victim).await.expect("get");
    assert_eq!(annotation(&now.metadata, DELETION_ATTEMPT_ANNOTATION), None);

    // Whoever may act as Lien's own identity (the sandbox's admin, whom Lien runs as there; on
    // a real control plane Lien's ServiceAccount, impersonated) writes records past the guard's
    // "Lien only" — but not a deletion request's record: that is stored only by the API
    // server's write of the request.
    let as_lien: Api<Service> =
        Api::namespaced(env.lien_client().await.expect("Lien's identity"), &ns);
    refused_by(
        as_lien
            .patch(
                "db",
                &pp,
                &Patch::Merge(
                    json!({"metadata": {"annotations": {DELETION_ATTEMPT_ANNOTATION: record}}}),
                ),
            )
            .await,
        "seal.lien.dev",
        &["writes only the records of refused DELETEs"],
    );

    let now = services.get("db").await.expect("get");
    assert!(labelled(now.metadata.labels.as_ref()), "still labelled");
    assert_eq!(annotation(&now.metadata, DELETION_ATTEMPT_ANNOTATION), None);
    assert_eq!(annotation(&now.metadata, BREAK_GLASS_ANNOTATION), None);

    // Free: the user goes, the Usage with it, the label after. No record was stored, so
    // nothing is replayed: the Service stays.
    env.configmaps()
        .delete("app", &DeleteParams::default())
        .await
        .expect("the user goes");
    wait_for("the Service to be unlabelled", DEADLINE, || async {
        (!labelled(services.get("db").await.ok()?.metadata.labels.as_ref())).then_some(())
    })
    .await;
    let after = services
        .get("db")
        .await
        .expect("the Service is still there");
    assert_eq!(after.metadata.uid, svc.metadata.uid);
    env.finish().await;
}

fn refused_by_code(result: Result<impl std::fmt::Debug, kube::Error>, code: u16, part: &str) {
    let (got, message) = api_error(result.expect_err("refused"));
    assert_eq!(got, code, "{message}");
    assert!(message.contains(part), "{part:?} not in {message}");
}
