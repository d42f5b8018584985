//! A sandbox with `lien run` replicas as child processes, as a platform team runs Lien outside a
//! cluster: each replica reads the sandbox's kubeconfig through `KUBECONFIG` (like kubectl),
//! serves the webhook on its own 127.0.0.1 port, and the sandbox sends the
//! `lien-system/lien-webhook` Service's calls to those ports in order, skipping one that
//! refuses the connection (kube-proxy skipping a not-ready endpoint). Every child is killed
//! when the `Cluster` is dropped, also when the test panics.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use lien::runtime::{install_crds, sandbox_client};
use lien_sandbox::apiserver::Config;
use lien_sandbox::{Sandbox, SandboxConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub const NAMESPACE: &str = "lien-system";
pub const SERVICE: &str = "lien-webhook";
pub const LEASE: &str = "lien-controller";

pub struct Cluster {
    pub sandbox: Sandbox,
    pub client: kube::Client,
    dir: PathBuf,
    kubeconfig: PathBuf,
    client_ca: PathBuf,
    pub addrs: Vec<SocketAddr>,
    children: Vec<Option<Child>>,
}

/// Free ports on 127.0.0.1, released for the replicas to bind.
fn free_addrs(n: usize) -> Vec<SocketAddr> {
    let listeners: Vec<_> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("addr"))
        .collect()
}

impl Cluster {
    /// A sandbox whose `lien-system/lien-webhook` Service goes to `replicas` local addresses,
    /// with Lien's CRDs and namespace; no replica runs yet.
    pub async fn start(replicas: usize) -> Cluster {
        static N: AtomicU32 = AtomicU32::new(0);
        let addrs = free_addrs(replicas);
        let api = Config {
            webhook_services: HashMap::from([(
                (NAMESPACE.to_owned(), SERVICE.to_owned()),
                addrs.clone(),
            )]),
            gc_backoff_max: Duration::from_millis(200),
            ..Config::default()
        };
        let sandbox = Sandbox::start(SandboxConfig { port: 0, api })
            .await
            .expect("the sandbox starts");
        let client = sandbox_client(&sandbox).await.expect("client");
        install_crds(&client).await.expect("CRDs");
        Api::<Namespace>::all(client.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(serde_json::json!({"metadata": {"name": NAMESPACE}}))
                    .expect("namespace"),
            )
            .await
            .expect("lien-system");
        let dir = std::env::temp_dir().join(format!(
            "lien-cluster-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let kubeconfig = dir.join("kubeconfig");
        // JSON is YAML: kubectl and kube-rs read it alike.
        std::fs::write(&kubeconfig, sandbox.kubeconfig().to_string()).expect("kubeconfig");
        let client_ca = dir.join("client-ca.pem");
        std::fs::write(&client_ca, sandbox.ca().cert_pem()).expect("client CA");
        Cluster {
            sandbox,
            client,
            dir,
            kubeconfig,
            client_ca,
            children: (0..replicas).map(|_| None).collect(),
            addrs,
        }
    }

    pub fn kubeconfig(&self) -> &std::path::Path {
        &self.kubeconfig
    }

    /// A `lien` command run against the sandbox (`KUBECONFIG`), logging into the temp dir.
    pub fn lien(&self, log: &str) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lien"));
        let log = std::fs::File::create(self.dir.join(log)).expect("log file");
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .env_remove("LIEN_WEBHOOK_ADDR")
            .env_remove("POD_NAME")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        cmd
    }

    /// Starts replica `i` (`lien run --identity <identity>` on its address) with `lease` flags.
    pub fn spawn(&mut self, i: usize, identity: &str, lease: &[&str]) {
        let mut cmd = self.lien(&format!("{identity}.log"));
        cmd.arg("run")
            .arg(format!("--webhook-addr={}", self.addrs[i]))
            .arg(format!("--identity={identity}"))
            .arg(format!("--client-ca-file={}", self.client_ca.display()))
            .args(lease);
        self.children[i] = Some(cmd.spawn().expect("lien run starts"));
    }

    fn pid(&self, i: usize) -> u32 {
        self.children[i].as_ref().expect("running").id()
    }

    /// SIGTERM, as the kubelet stops a pod.
    pub fn sigterm(&self, i: usize) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid(i).to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// `kill -9`.
    pub fn kill9(&mut self, i: usize) {
        let mut child = self.children[i].take().expect("running");
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
    }

    /// Whether replica `i` has exited (reaping it).
    pub fn exited(&mut self, i: usize) -> Option<std::process::ExitStatus> {
        let child = self.children[i].as_mut()?;
        let status = child.try_wait().expect("try_wait")?;
        self.children[i] = None;
        Some(status)
    }

    /// The replica log, for failure messages.
    pub fn log(&self, identity: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("{identity}.log"))).unwrap_or_default()
    }

    /// The Lease's holder (`None`: no Lease yet; `Some("")`: released).
    pub async fn lease_holder(&self) -> Option<String> {
        let lease = Api::<Lease>::namespaced(self.client.clone(), NAMESPACE)
            .get_opt(LEASE)
            .await
            .ok()??;
        Some(
            lease
                .spec
                .and_then(|s| s.holder_identity)
                .unwrap_or_default(),
        )
    }

    /// The roots the API server trusts the webhook with: the caBundle Lien published.
    pub async fn webhook_roots(&self) -> Option<rustls::RootCertStore> {
        use base64::Engine;
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let gvk = GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
        );
        let vwcs =
            Api::<DynamicObject>::all_with(self.client.clone(), &ApiResource::from_gvk(&gvk))
                .list(&Default::default())
                .await
                .ok()?;
        let bundle = vwcs
            .items
            .iter()
            .find_map(|c| c.data["webhooks"][0]["clientConfig"]["caBundle"].as_str())?;
        let pem = base64::engine::general_purpose::STANDARD
            .decode(bundle)
            .ok()?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&pem) {
            roots.add(cert.ok()?).ok()?;
        }
        Some(roots)
    }

    /// `GET path` from replica `i` over TLS, verifying its certificate against the published
    /// caBundle for the Service's name, as the API server does. `Err`: why not.
    pub async fn get(&self, i: usize, path: &str) -> Result<String, String> {
        let roots = self.webhook_roots().await.ok_or("no caBundle published")?;
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let tcp = tokio::net::TcpStream::connect(self.addrs[i])
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let name = rustls::pki_types::ServerName::try_from(format!("{SERVICE}.{NAMESPACE}.svc"))
            .map_err(|e| e.to_string())?;
        let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS: {e}"))?;
        let request = format!(
            "GET {path} HTTP/1.1\r\nhost: {SERVICE}.{NAMESPACE}.svc\r\nconnection: close\r\n\r\n"
        );
        tls.write_all(request.as_bytes())
            .await
            .map_err(|e| format!("write: {e}"))?;
        let mut out = String::new();
        let _ = tls.read_to_string(&mut out).await;
        let (head, body) = out.split_once("\r\n\r\n").ok_or("no HTTP answer")?;
        if !head.starts_with("HTTP/1.1 200") {
            return Err(format!("answer: {head}"));
        }
        Ok(body.to_owned())
    }

    /// A sample from replica `i`'s `/metrics`: the sum of the lines named `name` whose labels
    /// contain every one of `labels`.
    pub async fn metric(&self, i: usize, name: &str, labels: &[&str]) -> f64 {
        let body = self.get(i, "/metrics").await.expect("/metrics");
        sum_metric(&body, name, labels)
    }
}

pub fn sum_metric(body: &str, name: &str, labels: &[&str]) -> f64 {
    body.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for child in self.children.iter_mut().filter_map(Option::take) {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
