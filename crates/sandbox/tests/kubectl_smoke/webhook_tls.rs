//! A webhook whose serving certificate a user made with `openssl req -x509`, as the quick-start
//! guides of many webhooks do.

use super::*;

/// `openssl req -x509 … -addext subjectAltName=…` makes a self-signed certificate with
/// `CA:TRUE` (OpenSSL's default `v3_ca` extensions). Listed in `caBundle`, Go's crypto/x509
/// trusts it — a root in the pool verifies itself — so kube-apiserver calls the webhook
/// (k/k `staging/src/k8s.io/apiserver/pkg/util/webhook/authentication.go` and `client.go` build
/// the root pool from `caBundle`).
#[tokio::test]
async fn a_webhook_serving_an_openssl_self_signed_certificate_is_called() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "webhook-tls").await;
    let (key, cert) = (k.dir.join("hook.key"), k.dir.join("hook.crt"));
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=lien test hook"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl runs (CI's .ci/run installs it)");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let constraints = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-ext", "basicConstraints", "-in"])
        .arg(&cert)
        .output()
        .expect("openssl runs");
    let constraints = String::from_utf8_lossy(&constraints.stdout);
    assert!(
        constraints.contains("CA:TRUE"),
        "the premise: {constraints}"
    );

    let hook = TestWebhook::start_with_pem(
        &std::fs::read_to_string(&cert).expect("cert"),
        &std::fs::read_to_string(&key).expect("key"),
        deny_deletes("kept by a webhook with an openssl certificate"),
    )
    .await
    .expect("webhook starts");
    guard_config_maps(&k, &hook, "openssl-hook").await;
    let err = k.ns(&["delete", "configmap", "guarded"]).await.err();
    assert_eq!(
        err,
        "Error from server: admission webhook \"openssl-hook.test.lien.dev\" denied the request: \
         kept by a webhook with an openssl certificate\n"
    );
    assert_eq!(hook.requests().len(), 1);
    hook.stop().await;
    sandbox.shutdown().await;
}
