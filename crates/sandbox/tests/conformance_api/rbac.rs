//! Authorization in `--authorization-mode=RBAC`
//! (<https://kubernetes.io/docs/reference/access-authn-authz/rbac/>,
//! <https://kubernetes.io/docs/reference/access-authn-authz/authorization/>,
//! <https://kubernetes.io/docs/reference/access-authn-authz/authentication/#user-impersonation>).

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec, SubjectAccessReview,
    SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use lien_sandbox::Sandbox;
use lien_sandbox::apiserver::Authorization;
use serde_json::json;

use super::support::*;
use crate::common::{client, client_for, sandbox, sandbox_with};

async fn rbac_sandbox() -> Sandbox {
    sandbox_with(|c| c.authorization = Authorization::Rbac).await
}

/// A client of the admin that impersonates `user` (with `groups`).
async fn impersonating(sandbox: &Sandbox, user: &str, groups: &[&str]) -> kube::Client {
    let kubeconfig: Kubeconfig =
        serde_json::from_value(sandbox.kubeconfig()).expect("kubeconfig parses");
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("client config");
    config.auth_info.impersonate = Some(user.to_string());
    config.auth_info.impersonate_groups = Some(groups.iter().map(|g| g.to_string()).collect());
    kube::Client::try_from(config).expect("client")
}

async fn grant_configmap_reader(admin: &kube::Client, ns: &str, user: &str) {
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "cm-reader", "namespace": ns},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]
    }))
    .expect("role");
    Api::<Role>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &role)
        .await
        .expect("role created");
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "cm-reader", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
    }))
    .expect("binding");
    Api::<RoleBinding>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding created");
}

/// An authenticated user without bindings may do nothing but discovery; the refusal is
/// kube-apiserver's 403, worded as it words it. A Role and RoleBinding grant exactly their
/// rules, in their namespace only.
#[tokio::test]
async fn rbac_refuses_until_a_binding_grants() {
    let sandbox = rbac_sandbox().await;
    let admin = client(&sandbox).await;
    let user = client_for(&sandbox, "sandbox-user").await;
    // Discovery is granted to every authenticated user by the bootstrap policy.
    user.apiserver_version().await.expect("version");
    user.list_api_groups().await.expect("discovery");

    let cms: Api<ConfigMap> = Api::namespaced(user.clone(), "default");
    let s = status(cms.list(&ListParams::default()).await);
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        s.message,
        "configmaps is forbidden: User \"sandbox-user\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    let s = status(Api::<Namespace>::all(user.clone()).get("default").await);
    assert_eq!(
        s.message,
        "namespaces \"default\" is forbidden: User \"sandbox-user\" cannot get resource \"namespaces\" in API group \"\" in the namespace \"default\""
    );

    Api::<ConfigMap>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &configmap("settings", &[]))
        .await
        .expect("admin creates");
    grant_configmap_reader(&admin, "default", "sandbox-user").await;
    assert_eq!(
        names(&cms.list(&ListParams::default()).await.expect("list").items),
        ["settings"]
    );
    cms.get("settings").await.expect("get");
    // Reading is granted, writing is not.
    let s = status(
        cms.create(&PostParams::default(), &configmap("mine", &[]))
            .await,
    );
    assert!(
        s.message.contains("cannot create resource \"configmaps\""),
        "{}",
        s.message
    );
    // Nor anything in another namespace.
    let s = status(
        Api::<ConfigMap>::namespaced(user.clone(), "kube-system")
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(s.code, 403);
    sandbox.shutdown().await;
}

/// A ClusterRoleBinding grants its ClusterRole everywhere, to a group; `system:masters` needs no
/// binding.
#[tokio::test]
async fn cluster_role_bindings_grant_to_groups_everywhere() {
    let sandbox = rbac_sandbox().await;
    let admin = client(&sandbox).await;
    let user = client_for(&sandbox, "sandbox-user").await;
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "ns-reader"},
        "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list"]}]
    }))
    .expect("cluster role");
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .expect("created");
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "developers-read-namespaces"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "ns-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "developers"}]
    }))
    .expect("binding");
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("created");
    let listed = Api::<Namespace>::all(user.clone())
        .list(&ListParams::default())
        .await
        .expect("list");
    assert!(names(&listed.items).contains(&"default".to_string()));
    // The bootstrap policy is there, as on a real cluster.
    let roles = Api::<ClusterRole>::all(admin.clone())
        .list(&ListParams::default())
        .await
        .expect("list");
    assert!(names(&roles.items).contains(&"cluster-admin".to_string()));
    sandbox.shutdown().await;
}

fn sar(user: &str, verb: &str, resource: &str, ns: &str, name: &str) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_string()),
            groups: Some(vec!["system:authenticated".to_string()]),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.to_string()),
                group: Some(String::new()),
                resource: Some(resource.to_string()),
                namespace: Some(ns.to_string()),
                name: Some(name.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// SubjectAccessReviews are answered by the authorizer that authorizes requests: not allowed
/// with no reason (RBAC has no opinion), then allowed naming the binding.
#[tokio::test]
async fn subject_access_reviews_are_answered_by_rbac() {
    let sandbox = rbac_sandbox().await;
    let admin = client(&sandbox).await;
    let reviews: Api<SubjectAccessReview> = Api::all(admin.clone());
    let ask = |verb: &'static str| {
        let reviews = reviews.clone();
        async move {
            reviews
                .create(
                    &PostParams::default(),
                    &sar("alice", verb, "configmaps", "default", "settings"),
                )
                .await
                .expect("review")
                .status
                .expect("status")
        }
    };
    let before = ask("get").await;
    assert!(!before.allowed);
    assert_eq!(before.reason, None);
    assert_eq!(before.denied, None);
    grant_configmap_reader(&admin, "default", "alice").await;
    let after = ask("get").await;
    assert!(after.allowed);
    assert_eq!(
        after.reason.as_deref(),
        Some(
            "RBAC: allowed by RoleBinding \"cm-reader/default\" of Role \"cm-reader\" to User \"alice\""
        )
    );
    assert!(!ask("update").await.allowed);
    // A review must name a user or a group.
    let mut anonymous = sar("", "get", "configmaps", "default", "x");
    anonymous.spec.user = None;
    anonymous.spec.groups = None;
    let s = status(reviews.create(&PostParams::default(), &anonymous).await);
    assert_eq!(s.code, 422);
    assert!(
        s.message
            .contains("at least one of user or group must be specified"),
        "{}",
        s.message
    );
    // Creating reviews is itself authorized: an unbound user may not.
    let user = client_for(&sandbox, "sandbox-user").await;
    let s = status(
        Api::<SubjectAccessReview>::all(user.clone())
            .create(
                &PostParams::default(),
                &sar("alice", "get", "configmaps", "default", "x"),
            )
            .await,
    );
    assert_eq!(s.code, 403);
    // …but may ask about itself (system:basic-user).
    let ssar = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some("get".into()),
                resource: Some("configmaps".into()),
                namespace: Some("default".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SelfSubjectAccessReview>::all(user)
        .create(&PostParams::default(), &ssar)
        .await
        .expect("self review");
    assert!(!answer.status.expect("status").allowed);
    sandbox.shutdown().await;
}

/// Impersonation needs `impersonate` on the user and each group; the request then acts as the
/// impersonated user, authorization included.
#[tokio::test]
async fn impersonation_is_authorized_and_acts_as_the_target() {
    let sandbox = rbac_sandbox().await;
    let admin = client(&sandbox).await;
    grant_configmap_reader(&admin, "default", "alice").await;
    let as_alice = impersonating(&sandbox, "alice", &["team"]).await;
    Api::<ConfigMap>::namespaced(as_alice.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect("alice may list");
    let s = status(
        Api::<ConfigMap>::namespaced(as_alice, "kube-system")
            .list(&ListParams::default())
            .await,
    );
    assert!(
        s.message.contains("User \"alice\" cannot list"),
        "{}",
        s.message
    );
    // sandbox-user may not impersonate.
    let kubeconfig: Kubeconfig =
        serde_json::from_value(sandbox.kubeconfig()).expect("kubeconfig parses");
    let mut config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &KubeConfigOptions {
            context: Some("sandbox-user".into()),
            ..Default::default()
        },
    )
    .await
    .expect("config");
    config.auth_info.impersonate = Some("alice".into());
    let user_as_alice = kube::Client::try_from(config).expect("client");
    let s = status(
        Api::<ConfigMap>::namespaced(user_as_alice, "default")
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(s.code, 403);
    assert_eq!(
        s.message,
        "users \"alice\" is forbidden: User \"sandbox-user\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
    );
    sandbox.shutdown().await;
}

/// The default mode authorizes every authenticated user and allows every review.
#[tokio::test]
async fn always_allow_stays_the_default() {
    let sandbox = sandbox().await;
    let user = client_for(&sandbox, "sandbox-user").await;
    Api::<ConfigMap>::namespaced(user.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect("allowed");
    let answer = Api::<SubjectAccessReview>::all(user)
        .create(
            &PostParams::default(),
            &sar("alice", "delete", "configmaps", "default", "x"),
        )
        .await
        .expect("review");
    assert!(answer.status.expect("status").allowed);
    sandbox.shutdown().await;
}
