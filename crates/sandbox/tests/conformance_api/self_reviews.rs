//! Who am I and what may I do: `SelfSubjectReview` (`kubectl auth whoami`) and
//! `SelfSubjectRulesReview` (`kubectl auth can-i --list`).

use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, PostParams};
use lien_sandbox::apiserver::Authorization;
use serde_json::{Value, json};

use crate::common::{client, client_for, sandbox, sandbox_with};
use crate::support::{post_json, whoami};

/// POSTs a review as JSON and returns the answer.
async fn post(client: &kube::Client, path: &str, body: Value) -> Value {
    post_json(client, path, body)
        .await
        .expect("review answered")
}

/// `SelfSubjectReview` answers with the requester's user info as authentication found it
/// (<https://kubernetes.io/docs/reference/access-authn-authz/authentication/#self-subject-review>,
/// k/k `pkg/registry/authentication/selfsubjectreview/rest.go`).
#[tokio::test]
async fn self_subject_review_returns_the_authenticated_user() {
    let sandbox = sandbox().await;
    let admin = whoami(&client(&sandbox).await)
        .await
        .expect("review answered");
    assert_eq!(admin["kind"], "SelfSubjectReview");
    assert_eq!(admin["apiVersion"], "authentication.k8s.io/v1");
    assert_eq!(
        admin["status"]["userInfo"],
        json!({"username": "sandbox-admin", "uid": "sandbox-admin-uid",
            "groups": ["system:masters", "system:authenticated"]})
    );
    let user = whoami(&client_for(&sandbox, "sandbox-user").await)
        .await
        .expect("review answered");
    assert_eq!(user["status"]["userInfo"]["username"], "sandbox-user");
    assert_eq!(
        user["status"]["userInfo"]["groups"],
        json!(["developers", "system:authenticated"])
    );
    sandbox.shutdown().await;
}

fn rules_review(namespace: &str) -> Value {
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": namespace}})
}

const RULES_PATH: &str = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";

/// Under RBAC, `SelfSubjectRulesReview` lists the rules of every ClusterRoleBinding and of the
/// namespace's RoleBindings that name the requester (`RulesFor`, k/k
/// `plugin/pkg/auth/authorizer/rbac/rbac.go`; <https://kubernetes.io/docs/reference/access-authn-authz/authorization/#checking-api-access>):
/// a RoleBinding in another namespace does not show.
#[tokio::test]
async fn self_subject_rules_review_lists_rbac_rules() {
    let sandbox = sandbox_with(|c| c.authorization = Authorization::Rbac).await;
    let admin = client(&sandbox).await;
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "cm-reader", "namespace": "default"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["app"],
            "verbs": ["get", "list"]}]
    }))
    .expect("role");
    Api::<Role>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &role)
        .await
        .expect("role");
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "cm-reader", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "developers"}]
    }))
    .expect("binding");
    Api::<RoleBinding>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding");

    let user = client_for(&sandbox, "sandbox-user").await;
    let here = post(&user, RULES_PATH, rules_review("default")).await;
    assert_eq!(here["spec"]["namespace"], "default");
    assert_eq!(here["status"]["incomplete"], false);
    let resource_rules = here["status"]["resourceRules"].as_array().expect("rules");
    assert!(
        resource_rules.contains(&json!({"verbs": ["get", "list"], "apiGroups": [""],
            "resources": ["configmaps"], "resourceNames": ["app"]})),
        "{here}"
    );
    // system:basic-user, bound to every authenticated user.
    assert!(
        resource_rules.contains(&json!({"verbs": ["create"],
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]})),
        "{here}"
    );
    let non_resource = here["status"]["nonResourceRules"]
        .as_array()
        .expect("rules");
    assert!(
        non_resource.iter().any(|r| r["nonResourceURLs"]
            .as_array()
            .is_some_and(|u| u.contains(&json!("/api")))),
        "{here}"
    );

    let elsewhere = post(&user, RULES_PATH, rules_review("kube-system")).await;
    let rules = elsewhere["status"]["resourceRules"]
        .as_array()
        .expect("rules");
    assert!(
        !rules
            .iter()
            .any(|r| r["resources"] == json!(["configmaps"])),
        "a RoleBinding of another namespace shows: {elsewhere}"
    );

    // system:masters may do everything.
    let masters = post(&admin, RULES_PATH, rules_review("default")).await;
    assert_eq!(
        masters["status"]["resourceRules"][0],
        json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})
    );
    assert_eq!(
        masters["status"]["nonResourceRules"][0],
        json!({"verbs": ["*"], "nonResourceURLs": ["*"]})
    );
    sandbox.shutdown().await;
}

/// Under AlwaysAllow (the sandbox's default), every user may do everything, and the rules say
/// so (the AlwaysAllow authorizer's `RulesFor`, k8s.io/apiserver
/// `pkg/authorization/authorizerfactory/builtin.go`).
#[tokio::test]
async fn self_subject_rules_review_under_always_allow_is_everything() {
    let sandbox = sandbox().await;
    let user = client_for(&sandbox, "sandbox-user").await;
    let review = post(&user, RULES_PATH, rules_review("default")).await;
    assert_eq!(
        review["status"],
        json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        })
    );
    sandbox.shutdown().await;
}

/// An access review's answer is the request with its status, and kube's create handler has
/// recorded the writer's fields on it first (k8s.io/apiserver `handlers/create.go`): kube-apiserver
/// answers a SelfSubjectAccessReview with `metadata: {creationTimestamp: null, managedFields:
/// [the writer's spec fields]}` (the differential's `rbac/self-subject-access-review`), not the
/// zero status a protobuf body carries; a
/// SelfSubjectReview's answer is a new object, without them.
#[tokio::test]
async fn an_access_review_answer_carries_the_writers_fields() {
    let sandbox = sandbox().await;
    let client = client(&sandbox).await;
    let answer = post(
        &client,
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews?fieldManager=asker",
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
               "spec": {"resourceAttributes": {"namespace": "default", "verb": "get",
                                               "resource": "configmaps"}},
               // What a protobuf body decodes to: Go's zero status, which is no change from
               // the typed empty object the writer's fields are computed against.
               "status": {"allowed": false}}),
    )
    .await;
    assert_eq!(answer["status"]["allowed"], true, "{answer}");
    let meta = &answer["metadata"];
    assert_eq!(meta["creationTimestamp"], Value::Null, "{answer}");
    assert!(
        meta.as_object()
            .is_some_and(|m| m.contains_key("creationTimestamp"))
    );
    let entries = meta["managedFields"].as_array().expect("managedFields");
    assert_eq!(entries.len(), 1, "{answer}");
    assert_eq!(entries[0]["manager"], "asker");
    assert_eq!(entries[0]["operation"], "Update");
    assert_eq!(entries[0]["apiVersion"], "authorization.k8s.io/v1");
    assert_eq!(
        entries[0]["fieldsV1"],
        json!({"f:spec": {"f:resourceAttributes": {".": {}, "f:namespace": {},
                                                   "f:resource": {}, "f:verb": {}}}})
    );
    let me = whoami(&client).await.expect("review answered");
    assert!(me["metadata"].get("managedFields").is_none(), "{me}");
    sandbox.shutdown().await;
}
