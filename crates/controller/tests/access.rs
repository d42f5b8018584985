//! `ApiAccessCheck` against an RBAC-mode sandbox: a real `SubjectAccessReview`, answered by the
//! API server's authorizer.

use std::time::Duration;

use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use lien_controller::live::ApiAccessCheck;
use lien_core::seams::{AccessCheck, AccessCheckError, AccessDecision, AccessRequest, Requester};
use lien_sandbox::apiserver::{Authorization, Config};
use lien_sandbox::{Sandbox, SandboxConfig};
use serde_json::json;

async fn client(sandbox: &Sandbox, context: &str) -> kube::Client {
    let kubeconfig: Kubeconfig =
        serde_json::from_value(sandbox.kubeconfig()).expect("kubeconfig parses");
    let options = KubeConfigOptions {
        context: Some(context.into()),
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .expect("client config");
    kube::Client::try_from(config).expect("client")
}

fn update_settings(user: &str, name: Option<&str>) -> AccessRequest {
    AccessRequest {
        user: Requester {
            username: user.into(),
            groups: vec!["system:authenticated".into()],
            ..Requester::default()
        },
        verb: "update".into(),
        group: String::new(),
        resource: "configmaps".into(),
        namespace: Some("default".into()),
        name: name.map(str::to_owned),
    }
}

#[tokio::test]
async fn subject_access_reviews_answer_from_rbac() {
    let api = Config {
        authorization: Authorization::Rbac,
        gc_backoff_max: Duration::from_millis(200),
        ..Config::default()
    };
    let sandbox = Sandbox::start(SandboxConfig { port: 0, api })
        .await
        .expect("sandbox starts");
    let admin = client(&sandbox, "sandbox").await;
    let check = ApiAccessCheck::new(admin.clone());
    let denied = check
        .check(&update_settings("alice", Some("settings")))
        .await
        .expect("answered");
    assert_eq!(
        denied,
        AccessDecision::Denied {
            reason: String::new()
        }
    );
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "settings-editor", "namespace": "default"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                   "resourceNames": ["settings"], "verbs": ["update"]}]}))
    .expect("role");
    Api::<Role>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &role)
        .await
        .expect("role");
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "settings-editor", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "settings-editor"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]}))
    .expect("binding");
    Api::<RoleBinding>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding");
    assert_eq!(
        check
            .check(&update_settings("alice", Some("settings")))
            .await
            .expect("answered"),
        AccessDecision::Allowed
    );
    // A selector needs every object: a rule limited to one name does not grant that.
    assert!(matches!(
        check
            .check(&update_settings("alice", None))
            .await
            .expect("answered"),
        AccessDecision::Denied { .. }
    ));
    // Whoever runs the check must be allowed to create reviews; if not, it fails (and the
    // webhook fails closed).
    let unprivileged = ApiAccessCheck::new(client(&sandbox, "sandbox-user").await);
    let err = unprivileged
        .check(&update_settings("alice", Some("settings")))
        .await
        .expect_err("forbidden");
    assert!(
        matches!(err, AccessCheckError::Review(ref m) if m.contains("subjectaccessreviews")),
        "{err}"
    );
    sandbox.shutdown().await;
}
