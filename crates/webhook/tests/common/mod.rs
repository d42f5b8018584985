//! Shared by the webhook's integration tests: a sandbox per test, a kube-rs client for it, and
//! waiting for a condition with a deadline (never sleeping as synchronisation).

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use lien_sandbox::apiserver::Config;
use lien_sandbox::{Sandbox, SandboxConfig};

pub async fn sandbox() -> Sandbox {
    let api = Config {
        gc_backoff_max: Duration::from_millis(200),
        namespace_requeue: Duration::from_millis(50),
        ..Config::default()
    };
    Sandbox::start(SandboxConfig { port: 0, api })
        .await
        .expect("sandbox starts")
}

pub async fn client(sandbox: &Sandbox) -> kube::Client {
    let kubeconfig: Kubeconfig =
        serde_json::from_value(sandbox.kubeconfig()).expect("kubeconfig parses");
    let options = KubeConfigOptions {
        context: Some("sandbox".to_string()),
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .expect("client config");
    kube::Client::try_from(config).expect("client")
}

// Not every test binary waits for something.
#[allow(unused_imports)]
pub use lien_sandbox::testing::wait_for;

pub fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A committed AdmissionReview fixture.
pub fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixture_path(name)).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

/// A TLS connection to the webhook at `addr`, its certificate verified against `bundle` (PEM)
/// for the name `127.0.0.1`.
pub async fn connect_tls(
    addr: std::net::SocketAddr,
    bundle: &str,
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};

    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(bundle.as_bytes()) {
        roots.add(cert.expect("pem")).expect("root");
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(ServerName::try_from("127.0.0.1").expect("name"), tcp)
        .await
        .expect("handshake verifies")
}
