//! The real control plane the test support starts: its controllers run (garbage collector,
//! namespace controller), RBAC and the kubeconfig's two users work, kube-apiserver presents the
//! admission client certificate to webhooks in one mode and not in the other, two instances run
//! at once, and nothing outlives the test side. Conditions are polled with a deadline.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    RuleWithOperations, ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use lien_testing_control_plane::{ControlPlane, Options, USER_CONTEXT, process_running};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Generous: the controllers of several instances share two cores with the rest of the suite.
const DEADLINE: Duration = Duration::from_secs(60);

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{prefix}-{:x}", nanos ^ std::process::id())
}

async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + DEADLINE;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn eventually_sync(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !check() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn none_running(pids: &[(String, u32)], data_dir: &Path) -> bool {
    pids.iter().all(|(_, pid)| !process_running(*pid, data_dir))
}

fn all_running(pids: &[(String, u32)], data_dir: &Path) -> bool {
    pids.len() == 3 && pids.iter().all(|(_, pid)| process_running(*pid, data_dir))
}

fn named(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        ..ObjectMeta::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_garbage_collector_and_the_namespace_controller_run_and_rbac_holds() {
    let cp = ControlPlane::start().expect("the control plane starts");
    let client = cp.client().await.expect("an admin client");
    let version = client.apiserver_version().await.expect("/version");
    assert_eq!(version.git_version, "v1.32.13", "{version:?}");

    let ns = unique("smoke");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: named(&ns),
                ..Namespace::default()
            },
        )
        .await
        .expect("a namespace");
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let owner = configmaps
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: named("owner"),
                ..ConfigMap::default()
            },
        )
        .await
        .expect("the owner");
    let dependent = ConfigMap {
        metadata: ObjectMeta {
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: "owner".into(),
                uid: owner.metadata.uid.clone().expect("a uid"),
                ..OwnerReference::default()
            }]),
            ..named("dependent")
        },
        ..ConfigMap::default()
    };
    configmaps
        .create(&PostParams::default(), &dependent)
        .await
        .expect("the dependent");

    // RBAC: the second user is authenticated (its certificate) and may do nothing.
    let user = cp
        .client_for(USER_CONTEXT)
        .await
        .expect("the user's client");
    match Api::<ConfigMap>::namespaced(user, &ns)
        .list(&Default::default())
        .await
    {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("sandbox-user listed ConfigMaps: {other:?}"),
    }

    // The garbage collector deletes the dependent once its owner is gone (the DELETE's default
    // propagation for a ConfigMap is Background).
    configmaps
        .delete("owner", &DeleteParams::default())
        .await
        .expect("the owner's deletion");
    eventually("the garbage collector deletes the dependent", || async {
        matches!(configmaps.get_opt("dependent").await, Ok(None))
    })
    .await;

    // The root CA publisher's ConfigMap shows the controller-manager's other controllers at
    // work, and gives the namespace controller something to delete.
    eventually("kube-root-ca.crt is published in the namespace", || async {
        matches!(configmaps.get_opt("kube-root-ca.crt").await, Ok(Some(_)))
    })
    .await;
    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .expect("the namespace's deletion");
    eventually("the namespace controller finishes the deletion", || async {
        matches!(namespaces.get_opt(&ns).await, Ok(None))
    })
    .await;

    // Dropping the control plane stops every process and removes its directory.
    let data_dir = cp.ready().data_dir.clone();
    let pids: Vec<(String, u32)> = cp.pids().clone().into_iter().collect();
    assert!(all_running(&pids, &data_dir), "{pids:?} run");
    drop(cp);
    for (name, pid) in &pids {
        assert!(
            !process_running(*pid, &data_dir),
            "{name} ({pid}) outlived the drop"
        );
    }
    assert!(!data_dir.exists(), "{} is left", data_dir.display());
}

/// A validating webhook on 127.0.0.1 that denies every request, saying whether kube-apiserver
/// presented a client certificate that verifies against the admission client CA (rustls refuses
/// the handshake of one that does not, and the call then fails).
async fn start_probe_webhook(admission_client_ca_pem: &str) -> (String, ByteString) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut admission_client_ca_pem.as_bytes()) {
        roots
            .add(cert.expect("the admission client CA parses"))
            .expect("a root");
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .allow_unauthenticated()
    .build()
    .expect("a client verifier");

    let ca_key = rcgen::KeyPair::generate().expect("a key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).expect("the webhook's CA");
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().expect("a key");
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("params");
    let cert = params
        .signed_by(&key, &issuer)
        .expect("the webhook's certificate");

    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![cert.der().clone(), ca_cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .expect("a server configuration");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));

    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("https://{}/validate", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let presented = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .is_some_and(|c| !c.is_empty());
                let Some(body) = read_request(&mut tls).await else {
                    return;
                };
                let review: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                let message = if presented {
                    "probe: a client certificate from the admission client CA"
                } else {
                    "probe: no client certificate"
                };
                let answer = json!({
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": {
                        "uid": review["request"]["uid"],
                        "allowed": false,
                        "status": {"code": 403, "message": message},
                    },
                })
                .to_string();
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                );
                let _ = tls.write_all(response.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (url, ByteString(ca_cert.pem().into_bytes()))
}

/// Reads one HTTP/1.1 request and returns its body (the API server sends a Content-Length).
async fn read_request<S: AsyncReadExt + Unpin>(stream: &mut S) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())?;
            let body_start = end + 4;
            while buf.len() < body_start + length {
                let n = stream.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            return Some(buf[body_start..body_start + length].to_vec());
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Registers the probe webhook for labelled ConfigMaps and returns what it told the API server,
/// from the denial of a create (creates go through until the API server has loaded the
/// configuration).
async fn what_the_webhook_saw(cp: &ControlPlane) -> String {
    let client = cp.client().await.expect("an admin client");
    let ca = cp
        .admission_client_ca_pem()
        .expect("the admission client CA");
    let (url, ca_bundle) = start_probe_webhook(&ca).await;
    let label = unique("probe");
    let webhook = ValidatingWebhookConfiguration {
        metadata: named(&label),
        webhooks: Some(vec![ValidatingWebhook {
            name: "probe.lien.dev".into(),
            admission_review_versions: vec!["v1".into()],
            side_effects: "None".into(),
            failure_policy: Some("Fail".into()),
            timeout_seconds: Some(10),
            client_config: WebhookClientConfig {
                url: Some(url),
                ca_bundle: Some(ca_bundle),
                ..WebhookClientConfig::default()
            },
            object_selector: Some(LabelSelector {
                match_labels: Some([("probe".to_string(), label.clone())].into()),
                ..LabelSelector::default()
            }),
            rules: Some(vec![RuleWithOperations {
                api_groups: Some(vec!["".into()]),
                api_versions: Some(vec!["v1".into()]),
                operations: Some(vec!["CREATE".into()]),
                resources: Some(vec!["configmaps".into()]),
                scope: Some("Namespaced".into()),
            }]),
            ..ValidatingWebhook::default()
        }]),
    };
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &webhook)
        .await
        .expect("the webhook configuration");
    let configmaps: Api<ConfigMap> = Api::namespaced(client, "default");
    let deadline = Instant::now() + DEADLINE;
    for attempt in 0.. {
        let probe = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("{label}-{attempt}")),
                labels: Some([("probe".to_string(), label.clone())].into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        match configmaps.create(&PostParams::default(), &probe).await {
            Err(kube::Error::Api(status)) if status.message.contains("probe: ") => {
                return status.message;
            }
            Err(e) => panic!("creating a probe ConfigMap: {e:?}"),
            Ok(_) => {}
        }
        assert!(
            Instant::now() < deadline,
            "the API server never called the webhook"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    unreachable!()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_presents_the_admission_client_certificate_in_its_default_mode_only() {
    // Two instances at once: also shows that parallel control planes do not collide.
    let with = tokio::task::spawn_blocking(ControlPlane::start);
    let without = tokio::task::spawn_blocking(|| {
        ControlPlane::start_with(Options {
            admission_client_cert: false,
        })
    });
    let with = with.await.expect("join").expect("the first control plane");
    let without = without
        .await
        .expect("join")
        .expect("the second control plane");
    assert_ne!(with.server(), without.server());
    assert!(with.ready().admission_client_cert);
    assert!(!without.ready().admission_client_cert);

    let seen = what_the_webhook_saw(&with).await;
    assert!(
        seen.contains("a client certificate from the admission client CA"),
        "{seen}"
    );
    let seen = what_the_webhook_saw(&without).await;
    assert!(seen.contains("no client certificate"), "{seen}");
}

#[test]
fn nothing_outlives_the_test_side() {
    let first = std::thread::spawn(ControlPlane::start);
    let second = std::thread::spawn(ControlPlane::start);
    let mut first = first
        .join()
        .expect("join")
        .expect("the first control plane");
    let mut second = second
        .join()
        .expect("join")
        .expect("the second control plane");

    // The test process dies: the kernel closes its end of the launcher's stdin, and the
    // launcher stops everything and removes its directory.
    let dir = first.ready().data_dir.clone();
    let pids: Vec<(String, u32)> = first.pids().clone().into_iter().collect();
    assert!(all_running(&pids, &dir), "{pids:?} run");
    first.close_stdin();
    eventually_sync("the processes go when stdin closes", || {
        none_running(&pids, &dir)
    });
    eventually_sync("the data directory goes when stdin closes", || {
        !dir.exists()
    });
    assert!(first.stop().is_some(), "the launcher exited");

    // The launcher itself is killed outright: the kernel kills its processes (Pdeathsig).
    let dir = second.ready().data_dir.clone();
    let pids: Vec<(String, u32)> = second.pids().clone().into_iter().collect();
    assert!(all_running(&pids, &dir), "{pids:?} run");
    second.kill_launcher().expect("SIGKILL");
    eventually_sync("the processes go with their launcher", || {
        none_running(&pids, &dir)
    });
    drop(second);
    // Nobody was left to remove it (the next launcher's sweep would).
    let _ = std::fs::remove_dir_all(&dir);
}
