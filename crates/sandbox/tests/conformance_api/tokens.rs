//! TokenRequest (`kubectl create token`): a token the API server then authenticates as the
//! ServiceAccount (<https://kubernetes.io/docs/reference/kubernetes-api/authentication-resources/token-request-v1/>,
//! <https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/#bound-service-account-token-volume>).

use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use lien_sandbox::Sandbox;
use serde_json::json;

use crate::common::{client, sandbox};
use crate::support::{post_json, status, whoami};

/// A client of the sandbox that presents `token`.
async fn client_with_token(sandbox: &Sandbox, token: &str) -> kube::Client {
    let mut kubeconfig = sandbox.kubeconfig();
    kubeconfig["users"][0]["user"]["token"] = json!(token);
    let kubeconfig: Kubeconfig = serde_json::from_value(kubeconfig).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}

async fn create_account(admin: &kube::Client, name: &str) -> String {
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": name}})).expect("sa");
    Api::<ServiceAccount>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &sa)
        .await
        .expect("service account")
        .metadata
        .uid
        .expect("uid")
}

const TOKEN_PATH: &str = "/api/v1/namespaces/default/serviceaccounts/robot/token";

/// The token authenticates as `system:serviceaccount:<ns>:<name>` with the service account
/// groups, expires after `expirationSeconds` (at least 10 minutes, validation of
/// `pkg/apis/authentication/validation`), and stops working once its ServiceAccount is gone,
/// even if one of the same name is created again (the token names the object's uid).
#[tokio::test]
async fn token_request_issues_a_token_for_the_service_account() {
    let sandbox = sandbox().await;
    let admin = client(&sandbox).await;
    let uid = create_account(&admin, "robot").await;

    let issued = post_json(
        &admin,
        TOKEN_PATH,
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600}}),
    )
    .await
    .expect("token issued");
    assert_eq!(issued["kind"], "TokenRequest");
    assert_eq!(issued["spec"]["expirationSeconds"], 600);
    let expires: jiff::Timestamp = issued["status"]["expirationTimestamp"]
        .as_str()
        .expect("expirationTimestamp")
        .parse()
        .expect("RFC 3339");
    let left = expires.as_second() - jiff::Timestamp::now().as_second();
    assert!((590..=600).contains(&left), "expires in {left} s");
    let token = issued["status"]["token"]
        .as_str()
        .expect("token")
        .to_string();
    assert_eq!(token.split('.').count(), 3, "a JWT");

    let robot = client_with_token(&sandbox, &token).await;
    let me = whoami(&robot).await.expect("whoami as the robot");
    let user = &me["status"]["userInfo"];
    assert_eq!(user["username"], "system:serviceaccount:default:robot");
    assert_eq!(user["uid"], uid.as_str());
    assert_eq!(
        user["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ])
    );
    Api::<ConfigMap>::namespaced(robot.clone(), "default")
        .list(&Default::default())
        .await
        .expect("the token is accepted for requests");

    let s = status(
        post_json(
            &admin,
            TOKEN_PATH,
            json!({"spec": {"expirationSeconds": 300}}),
        )
        .await,
    );
    assert_eq!(s.code, 422, "{s:?}");
    assert!(
        s.message
            .contains("spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 minutes"),
        "{s:?}"
    );
    let s = status(
        post_json(
            &admin,
            "/api/v1/namespaces/default/serviceaccounts/nobody/token",
            json!({}),
        )
        .await,
    );
    assert_eq!(s.code, 404, "{s:?}");

    Api::<ServiceAccount>::namespaced(admin.clone(), "default")
        .delete("robot", &Default::default())
        .await
        .expect("delete the service account");
    assert_eq!(status(whoami(&robot).await).code, 401);
    create_account(&admin, "robot").await;
    assert_eq!(
        status(whoami(&robot).await).code,
        401,
        "a new ServiceAccount of the same name does not revive the token"
    );
    sandbox.shutdown().await;
}
