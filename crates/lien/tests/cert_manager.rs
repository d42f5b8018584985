//! cert-manager instead of Lien's own CA (issue 31, item 5), on both targets: `lien run
//! --tls-cert-file/--tls-key-file/--tls-ca-file` serves a certificate issued elsewhere — the
//! three files of the Secret cert-manager writes (`tls.crt`, `tls.key`, `ca.crt`), made here by
//! a CA of the test's own as cert-manager's CA Issuer would — publishes `ca.crt` as its webhook
//! configurations' caBundle, and the API server calls it: a DELETE of an object in use is
//! refused. A renewal under the same CA is served without a change of the bundle; a new CA is
//! published and still refused; a set that does not hold together is not taken.

#[path = "ha/cluster.rs"]
mod cluster;

use std::time::{Duration, Instant};

use cluster::Cluster;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(30);

struct TestCa {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

fn test_ca(name: &str) -> TestCa {
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let cert = params.self_signed(&key).expect("CA");
    TestCa {
        pem: cert.pem(),
        issuer: Issuer::new(params, key),
    }
}

/// Writes `tls.crt`, `tls.key` and `ca.crt` as a kubelet writes a mounted Secret: the names
/// the webhook is called by (the sandbox's Service, or the real target's 127.0.0.1 URL).
fn issue(dir: &std::path::Path, ca: &TestCa, bundle: &str) {
    let key = KeyPair::generate().expect("key");
    let names = vec![
        "lien-webhook.lien-system.svc".to_owned(),
        "lien-webhook.lien-system.svc.cluster.local".to_owned(),
        "127.0.0.1".to_owned(),
    ];
    let cert = CertificateParams::new(names)
        .expect("params")
        .signed_by(&key, &ca.issuer)
        .expect("signed");
    // Each file replaced whole (rename), never seen half-written.
    for (name, text) in [
        ("tls.crt", cert.pem()),
        ("tls.key", key.serialize_pem()),
        ("ca.crt", bundle.to_owned()),
    ] {
        let tmp = dir.join(format!(".{name}"));
        std::fs::write(&tmp, text).expect("write");
        std::fs::rename(&tmp, dir.join(name)).expect("rename");
    }
}

async fn ca_bundle(c: &Cluster) -> Option<String> {
    let config = Api::<ValidatingWebhookConfiguration>::all(c.client.clone())
        .get_opt("lien")
        .await
        .ok()??;
    let bundle = config.webhooks?.first()?.client_config.ca_bundle.clone()?;
    Some(String::from_utf8(bundle.0).expect("PEM"))
}

async fn wait_bundle(c: &Cluster, want: &str) {
    let end = Instant::now() + DEADLINE;
    loop {
        let now = ca_bundle(c).await;
        if now.as_deref() == Some(want) {
            return;
        }
        assert!(
            Instant::now() < end,
            "caBundle is not the issued CA after {DEADLINE:?}: {now:?}\n{}",
            c.log("lien-0")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Dry runs until Lien refuses the DELETE (through the API server, which verified Lien's
/// certificate against the caBundle), then one more that must be refused too.
async fn refused(cms: &Api<ConfigMap>, name: &str) {
    let dry_run = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    let end = Instant::now() + DEADLINE;
    loop {
        match cms.delete(name, &dry_run).await {
            Err(kube::Error::Api(s)) if s.code == 409 => return,
            other => {
                assert!(
                    Instant::now() < end,
                    "the DELETE of {name} is not refused: {other:?}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_certificate_issued_elsewhere_is_served_published_renewed_and_checked() {
    let mut c = Cluster::start(1).await;
    let dir = cluster::real::temp_dir("lien-issued");
    let ca = test_ca("issuer");
    issue(&dir, &ca, &ca.pem);
    let flags: Vec<String> = [
        ("--tls-cert-file", "tls.crt"),
        ("--tls-key-file", "tls.key"),
        ("--tls-ca-file", "ca.crt"),
    ]
    .iter()
    .map(|(flag, file)| format!("{flag}={}", dir.join(file).display()))
    .chain(["--tls-reload=200ms".to_owned()])
    .collect();
    let args: Vec<&str> = flags.iter().map(String::as_str).collect();
    c.spawn(0, "lien-0", &args);
    wait_bundle(&c, &ca.pem).await;

    let ns = "issued";
    c.create_namespace(ns).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.client.clone(), ns);
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "settings"}})).expect("cm"),
    )
    .await
    .expect("configmap");
    let mut ar =
        ApiResource::from_gvk(&GroupVersionKind::gvk(lien_api::GROUP, "v1alpha1", "Usage"));
    ar.plural = "usages".into();
    Api::<DynamicObject>::namespaced_with(c.client.clone(), ns, &ar)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
                "metadata": {"name": "keep", "namespace": ns},
                "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap",
                                "resourceRef": {"name": "settings"}},
                         "reason": "the app reads it"},
            }))
            .expect("usage"),
        )
        .await
        .expect("the Usage is admitted (through the issued certificate)");
    refused(&cms, "settings").await;

    // Renewed under the same CA: the bundle stays, and the API server keeps calling Lien.
    let served_before = served_leaf(&c).await;
    issue(&dir, &ca, &ca.pem);
    let end = Instant::now() + DEADLINE;
    while served_leaf(&c).await == served_before {
        assert!(
            Instant::now() < end,
            "the renewed certificate is not served"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(ca_bundle(&c).await.as_deref(), Some(ca.pem.as_str()));
    refused(&cms, "settings").await;

    // A set that does not hold together (a certificate of another CA, the old bundle) is not
    // taken: the renewed one stays served, and Lien says why.
    let served = served_leaf(&c).await;
    let stranger = test_ca("stranger");
    issue(&dir, &stranger, &ca.pem);
    let end = Instant::now() + Duration::from_secs(5);
    while !c.log("lien-0").contains("does not verify") {
        assert!(
            Instant::now() < end,
            "no word of the refused set:\n{}",
            c.log("lien-0")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(served_leaf(&c).await, served);
    refused(&cms, "settings").await;

    // A new CA, bundle and certificate together: published, and still refused.
    let next = test_ca("next");
    issue(&dir, &next, &next.pem);
    wait_bundle(&c, &next.pem).await;
    refused(&cms, "settings").await;
}

/// The leaf certificate Lien's webhook presents now (DER), through a handshake that verifies it
/// against the published caBundle.
async fn served_leaf(c: &Cluster) -> Vec<u8> {
    c.peer_certificate(0).await
}
