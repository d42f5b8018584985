//! `kubectl auth whoami`, `kubectl auth can-i --list` and `kubectl create token`, as a user types
//! them: kubectl sends these reviews and the TokenRequest as protobuf.

use super::*;

/// `kubectl auth whoami` is a SelfSubjectReview, `auth can-i --list` a SelfSubjectRulesReview
/// (k/k `staging/src/k8s.io/kubectl/pkg/cmd/auth/whoami.go` and `cani.go`).
#[tokio::test]
async fn auth_whoami_and_can_i_list() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "auth").await;
    let whoami = k.run(&["auth", "whoami"]).await.out();
    assert_eq!(
        table(&whoami),
        [
            vec!["ATTRIBUTE", "VALUE"],
            vec!["Username", "sandbox-admin"],
            vec!["UID", "sandbox-admin-uid"],
            vec!["Groups", "[system:masters", "system:authenticated]"],
        ],
        "{whoami}"
    );
    let listed = k.ns(&["auth", "can-i", "--list"]).await.out();
    let rows = table(&listed);
    assert_eq!(
        rows[0],
        [
            "Resources",
            "Non-Resource",
            "URLs",
            "Resource",
            "Names",
            "Verbs"
        ],
        "{listed}"
    );
    assert!(
        rows.contains(&vec!["*.*".into(), "[]".into(), "[]".into(), "[*]".into()]),
        "{listed}"
    );
    assert!(
        rows.contains(&vec!["[*]".into(), "[]".into(), "[*]".into()]),
        "{listed}"
    );
    sandbox.shutdown().await;
}

/// `kubectl create token default` asks the namespace's `default` ServiceAccount (made by the
/// serviceaccounts controller) for a token; the token then authenticates as that account
/// (https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/).
#[tokio::test]
async fn create_token_then_use_it() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "token").await;
    common::wait_for(
        "the namespace's default ServiceAccount",
        DEADLINE,
        || async {
            k.ns(&["get", "serviceaccount", "default"])
                .await
                .ok
                .then_some(())
        },
    )
    .await;
    let token = k.ns(&["create", "token", "default"]).await.out();
    let token = token.trim();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    let whoami = k.run(&["--token", token, "auth", "whoami"]).await.out();
    let rows = table(&whoami);
    let username = format!("system:serviceaccount:{}:default", k.namespace);
    assert_eq!(rows[1], ["Username", username.as_str()], "{whoami}");
    let listed = k
        .ns(&["--token", token, "get", "configmaps", "-o", "name"])
        .await
        .out();
    assert!(listed.contains("configmap/kube-root-ca.crt"), "{listed}");
    sandbox.shutdown().await;
}
