//! Lien's replicas as `lien run` child processes, as a platform team runs Lien outside a
//! cluster, against one of two targets (`LIEN_E2E_TARGET`, `support/real.rs`):
//! - the sandbox (default): each replica reads the sandbox's kubeconfig through `KUBECONFIG`
//!   (like kubectl, as its admin), serves the webhook on its own 127.0.0.1 port, and the sandbox
//!   sends the `lien-system/lien-webhook` Service's calls to those ports in order, skipping one
//!   that refuses the connection (kube-proxy skipping a not-ready endpoint);
//! - a real control plane (`real`): each replica runs as Lien's ServiceAccount
//!   (`deploy/rbac.yaml`) with `--webhook-url` naming a TCP load balancer on 127.0.0.1 that
//!   sends each connection to the first replica accepting it, in order — the same routing.
//!
//! Every child is killed when the `Cluster` is dropped, also when the test panics, and by the
//! kernel when the test process dies (`setpriv --pdeathsig`).

#![allow(dead_code)]

#[path = "../support/real.rs"]
pub mod real;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use lien::runtime::{install_crds, sandbox_client};
use lien_sandbox::apiserver::Config;
use lien_sandbox::{Sandbox, SandboxConfig};
use real::{Balancer, RealCluster, Target};

pub const NAMESPACE: &str = "lien-system";
pub const SERVICE: &str = "lien-webhook";
pub const LEASE: &str = "lien-controller";

/// Where the replicas run.
enum Backend {
    Sandbox(Sandbox),
    /// The control plane, and the load balancer the webhook URL names.
    Real(Box<RealCluster>, Balancer),
}

pub struct Cluster {
    backend: Backend,
    /// The admin.
    pub client: kube::Client,
    dir: PathBuf,
    kubeconfig: PathBuf,
    client_ca: PathBuf,
    pub addrs: Vec<SocketAddr>,
    children: Vec<Option<Child>>,
    /// Resources the scenario expects the API server to refuse Lien (`expect_refused`).
    refused: Vec<String>,
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
    /// A cluster whose webhook calls go to `replicas` local addresses (the sandbox's
    /// `lien-system/lien-webhook` Service, or the load balancer in front of them), with Lien's
    /// CRDs and namespace (on the real target, all of `lien manifests` but the Deployment);
    /// no replica runs yet.
    pub async fn start(replicas: usize) -> Cluster {
        let addrs = free_addrs(replicas);
        let dir = real::temp_dir("lien-cluster");
        let kubeconfig = dir.join("kubeconfig");
        let client_ca = dir.join("client-ca.pem");
        let (backend, client) = match real::target() {
            Target::Sandbox => {
                let api = Config {
                    webhook_services: HashMap::from([(
                        (NAMESPACE.to_owned(), SERVICE.to_owned()),
                        addrs.clone(),
                    )]),
                    gc_backoff_max: Duration::from_millis(200),
                    // As a real cluster: what a ServiceAccount may do is what it is bound to
                    // (the uninstall hook runs with its own).
                    authorization: lien_sandbox::authz::Authorization::Rbac,
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
                        &serde_json::from_value(
                            serde_json::json!({"metadata": {"name": NAMESPACE}}),
                        )
                        .expect("namespace"),
                    )
                    .await
                    .expect("lien-system");
                // JSON is YAML: kubectl and kube-rs read it alike.
                std::fs::write(&kubeconfig, sandbox.kubeconfig().to_string()).expect("kubeconfig");
                // The sandbox presents a client certificate from its own CA.
                std::fs::write(&client_ca, sandbox.ca().cert_pem()).expect("client CA");
                (Backend::Sandbox(sandbox), client)
            }
            Target::Real => {
                let cluster = RealCluster::start(true).await;
                std::fs::copy(cluster.kubeconfig(), &kubeconfig).expect("kubeconfig");
                std::fs::copy(cluster.admission_client_ca(), &client_ca).expect("client CA");
                let balancer = Balancer::start(addrs.clone()).await;
                let client = cluster.client.clone();
                (Backend::Real(Box::new(cluster), balancer), client)
            }
        };
        Cluster {
            backend,
            client,
            dir,
            kubeconfig,
            client_ca,
            children: (0..replicas).map(|_| None).collect(),
            refused: Vec::new(),
            addrs,
        }
    }

    /// A kubeconfig with a token of the ServiceAccount `lien-system/NAME` (what the kubelet
    /// mounts into the hook's pod): the Job runs with exactly the rights the chart binds it.
    pub async fn service_account_kubeconfig(&self, name: &str) -> std::path::PathBuf {
        use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
        use k8s_openapi::api::core::v1::ServiceAccount;
        let sas: Api<ServiceAccount> = Api::namespaced(self.client.clone(), NAMESPACE);
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(3600),
                ..TokenRequestSpec::default()
            }),
            ..TokenRequest::default()
        };
        let token = sas
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .expect("a token")
            .status
            .expect("a TokenRequest's status")
            .token;
        let admin: serde_json::Value = serde_yaml_ng::from_str(
            &std::fs::read_to_string(self.kubeconfig()).expect("the admin's kubeconfig"),
        )
        .expect("kubeconfig");
        let kubeconfig = serde_json::json!({"apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "c", "cluster": admin["clusters"][0]["cluster"].clone()}],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": name, "context": {"cluster": "c", "user": name}}],
            "current-context": name});
        let path = self
            .kubeconfig()
            .with_file_name(format!("{name}.kubeconfig"));
        std::fs::write(&path, kubeconfig.to_string()).expect("kubeconfig");
        path
    }

    /// The API server's refusals of `resource` to Lien's ServiceAccount are the scenario's
    /// point, not a grant `deploy/rbac.yaml` misses.
    pub fn expect_refused(&mut self, resource: &str) {
        self.refused.push(format!("resource \\\"{resource}\\\""));
    }

    /// Creates the Namespace `name`, as the admin.
    pub async fn create_namespace(&self, name: &str) {
        Api::<Namespace>::all(self.client.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))
                    .expect("namespace"),
            )
            .await
            .unwrap_or_else(|e| panic!("namespace {name}: {e}"));
    }

    /// The admin's kubeconfig.
    pub fn kubeconfig(&self) -> &std::path::Path {
        &self.kubeconfig
    }

    pub fn is_real(&self) -> bool {
        matches!(self.backend, Backend::Real(..))
    }

    /// A `lien` command run as the admin (`KUBECONFIG`), logging into the temp dir.
    pub fn lien(&self, log: &str) -> Command {
        let mut cmd = real::lien_command(&self.dir.join(log));
        cmd.env("KUBECONFIG", &self.kubeconfig);
        cmd
    }

    /// Starts replica `i` (`lien run --identity <identity>` on its address) with `lease` flags:
    /// as the admin behind the sandbox's Service, or as Lien's ServiceAccount behind the load
    /// balancer's URL.
    pub fn spawn(&mut self, i: usize, identity: &str, lease: &[&str]) {
        self.spawn_of(None, i, identity, lease);
    }

    /// [`Cluster::spawn`] of the binary `bin` (an earlier version's, for an upgrade), or this
    /// build's.
    pub fn spawn_of(
        &mut self,
        bin: Option<&std::path::Path>,
        i: usize,
        identity: &str,
        lease: &[&str],
    ) {
        let log = self.dir.join(format!("{identity}.log"));
        let mut cmd = match bin {
            Some(bin) => real::lien_command_of(bin, &log),
            None => real::lien_command(&log),
        };
        cmd.env("KUBECONFIG", &self.kubeconfig);
        cmd.arg("run")
            .arg(format!("--webhook-addr={}", self.addrs[i]))
            .arg(format!("--identity={identity}"))
            .arg(format!("--client-ca-file={}", self.client_ca.display()))
            .args(lease);
        if let Backend::Real(cluster, balancer) = &self.backend {
            cmd.arg(format!(
                "--kubeconfig={}",
                cluster.lien_kubeconfig().display()
            ))
            .arg(format!("--webhook-url=https://{}", balancer.addr()));
        }
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

    /// `GET path` from replica `i` over TLS, verifying its certificate against the published
    /// caBundle for the name the API server calls it by (the Service's, or the URL's host), as
    /// the API server does. `Err`: why not.
    pub async fn get(&self, i: usize, path: &str) -> Result<String, String> {
        let roots = real::published_roots(&self.client, None)
            .await
            .ok_or("no caBundle published")?;
        let name = match &self.backend {
            Backend::Sandbox(_) => format!("{SERVICE}.{NAMESPACE}.svc"),
            Backend::Real(..) => "127.0.0.1".to_owned(),
        };
        real::https_get(self.addrs[i], &name, roots, path).await
    }

    /// The leaf certificate replica `i` serves now (DER), from a handshake that verifies it
    /// against the published caBundle for the name the webhook is called by.
    pub async fn peer_certificate(&self, i: usize) -> Vec<u8> {
        let roots = real::published_roots(&self.client, None)
            .await
            .expect("a caBundle published");
        let name = match &self.backend {
            Backend::Sandbox(_) => format!("{SERVICE}.{NAMESPACE}.svc"),
            Backend::Real(..) => "127.0.0.1".to_owned(),
        };
        let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        let tcp = tokio::net::TcpStream::connect(self.addrs[i])
            .await
            .expect("connect");
        let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
            .connect(
                rustls::pki_types::ServerName::try_from(name).expect("a name"),
                tcp,
            )
            .await
            .expect("a handshake the published caBundle verifies");
        tls.get_ref().1.peer_certificates().expect("a certificate")[0].to_vec()
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
    /// Kills every replica. On the real target, a test that passed still fails if the API
    /// server refused a replica anything for want of rights (`deploy/rbac.yaml`).
    fn drop(&mut self) {
        for mut child in self.children.iter_mut().filter_map(Option::take) {
            let _ = child.kill();
            let _ = child.wait();
        }
        let forbidden: Vec<String> = if self.is_real() && !std::thread::panicking() {
            std::fs::read_dir(&self.dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
                .flat_map(|e| {
                    real::forbidden_lines(&std::fs::read_to_string(e.path()).unwrap_or_default())
                })
                .filter(|line| !self.refused.iter().any(|r| line.contains(r.as_str())))
                .collect()
        } else {
            vec![]
        };
        let _ = std::fs::remove_dir_all(&self.dir);
        assert!(
            forbidden.is_empty(),
            "the API server refused Lien's ServiceAccount (deploy/rbac.yaml):\n{}",
            forbidden.join("\n")
        );
    }
}
