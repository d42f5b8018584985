//! The real Kubernetes control plane as a target of the end-to-end tests: one switch,
//! `LIEN_E2E_TARGET=real` (default `sandbox`), read here by every harness that starts a cluster
//! (`e2e/harness.rs`, `ha/cluster.rs`).
//!
//! On the real target each test gets a control plane of its own (etcd, kube-apiserver and
//! kube-controller-manager, `lien-testing-control-plane`), Lien's install minus its Deployment
//! (the Namespace, the RBAC of `lien manifests`, the CRDs), and Lien as `lien run` processes
//! outside the cluster — the built binary, with a URL webhook configuration
//! (`--webhook-url https://127.0.0.1:PORT`) and the identity a pod of the Deployment would have:
//! a token of the ServiceAccount `lien-system/lien`, bound to `deploy/rbac.yaml` and nothing
//! else. Every `lien run` is started through `setpriv --pdeathsig KILL`, so a test killed
//! outright takes its Lien processes with it (its control plane stops on its own: the launcher
//! reads end of file on its stdin).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use lien_testing_control_plane::{ControlPlane, Options as ControlPlaneOptions};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The switch: `real` runs the tests against a real control plane, anything else unset or
/// `sandbox` against the sandbox.
pub const TARGET_VAR: &str = "LIEN_E2E_TARGET";

/// Lien's namespace in the install (`lien manifests`' default).
pub const LIEN_NAMESPACE: &str = "lien-system";
/// Lien's ServiceAccount there.
pub const LIEN_SERVICE_ACCOUNT: &str = "lien";
/// Its username as the API server names it.
pub const LIEN_USER: &str = "system:serviceaccount:lien-system:lien";

/// Which API server the tests run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `lien sandbox`'s API server, in the test's process (the default).
    Sandbox,
    /// etcd, kube-apiserver and kube-controller-manager as processes, Lien as `lien run`.
    Real,
}

pub fn target() -> Target {
    match std::env::var(TARGET_VAR).as_deref() {
        Ok("real") => Target::Real,
        Ok("" | "sandbox") | Err(_) => Target::Sandbox,
        Ok(other) => panic!("{TARGET_VAR}={other:?}: expected `sandbox` (the default) or `real`"),
    }
}

/// How much longer every deadline is on the real target: its garbage collector and namespace
/// controller back off for real (client-go's rate limiters, up to tens of seconds), its watch
/// caches and webhook configuration informer lag by milliseconds to a second, and each test
/// shares the machine with a whole control plane. The one place deadlines are scaled.
pub const REAL_DEADLINE_FACTOR: u32 = 3;

/// `d` for the target the tests run against.
pub fn scaled(d: Duration) -> Duration {
    match target() {
        Target::Real => d * REAL_DEADLINE_FACTOR,
        Target::Sandbox => d,
    }
}

/// A new directory in the system's temporary directory, named after `prefix`, this process
/// and a counter.
pub fn temp_dir(prefix: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// What the scenarios may protect beyond Lien's default resources: everything (`--resource
/// '*.*'`, the explicit wildcard a platform team chooses when it cannot list its kinds). The
/// scenarios make CRDs in groups of their own namespace's name (`<ns>.example.org`), which no
/// RBAC rule can name ahead; the verbs granted are the same as on a listed resource, so a verb
/// Lien lacks still shows (`forbidden_lines`). Lien's default install, and a Usage of a kind it
/// does not grant, run in `least_privilege.rs`.
pub const TEST_RESOURCES: &[&str] = &["*.*"];

/// `lien manifests --resource …` for each of [`TEST_RESOURCES`].
pub fn test_install() -> lien::manifests::Options {
    let mut options = lien::manifests::Options::default();
    options.resources.extend(
        TEST_RESOURCES
            .iter()
            .map(|r| lien::manifests::Resource::parse(r).expect("a resource")),
    );
    options
}

/// Whether `object` is part of what the tests install before Lien runs: everything of
/// `lien manifests` but what runs Lien in the cluster (the Deployment, its Service and
/// disruption budget), since Lien runs outside it here.
pub fn installed_outside_the_cluster(object: &Value) -> bool {
    !matches!(
        object["kind"].as_str(),
        Some("Deployment" | "Service" | "PodDisruptionBudget")
    )
}

/// The API resource of `object` as the API server serves it (discovery).
pub async fn served_api(client: &kube::Client, object: &Value) -> Option<Api<DynamicObject>> {
    let api_version = object["apiVersion"].as_str()?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, object["kind"].as_str()?);
    let (ar, _) = kube::discovery::pinned_kind(client, &gvk).await.ok()?;
    Some(match object["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    })
}

/// Applies `objects` (server-side apply, as `kubectl apply --server-side`), each of a served
/// kind; panics naming the one that fails.
pub async fn apply_all(client: &kube::Client, objects: impl IntoIterator<Item = Value>) {
    for object in objects {
        let name = object["metadata"]["name"]
            .as_str()
            .expect("a name")
            .to_owned();
        let api = served_api(client, &object)
            .await
            .unwrap_or_else(|| panic!("{} {name}: not served", object["kind"]));
        api.patch(
            &name,
            &PatchParams::apply("kubectl").force(),
            &Patch::Apply(&object),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {} {name}: {e}", object["kind"]));
    }
}

/// One real control plane with Lien's install in it (no Lien running yet).
pub struct RealCluster {
    control_plane: Option<ControlPlane>,
    /// The admin (`sandbox`, group `system:masters`).
    pub client: kube::Client,
    dir: PathBuf,
    lien_kubeconfig: PathBuf,
    client_ca: PathBuf,
    admission_client_cert: bool,
}

impl RealCluster {
    /// Starts a control plane — presenting the admission client certificate to webhooks, or
    /// none (`admission_client_cert: false`, a managed cluster) — and installs Lien's
    /// Namespace, RBAC and CRDs as `lien manifests` makes them; Lien's kubeconfig carries a
    /// token of its ServiceAccount.
    pub async fn start(admission_client_cert: bool) -> RealCluster {
        let control_plane = tokio::task::spawn_blocking(move || {
            ControlPlane::start_with(ControlPlaneOptions {
                admission_client_cert,
            })
        })
        .await
        .expect("the control plane's start joins")
        .unwrap_or_else(|e| panic!("the real control plane: {e}"));
        let client = control_plane.client().await.expect("an admin client");
        let dir = temp_dir("lien-real");
        apply_all(
            &client,
            lien::manifests::objects_with(&test_install())
                .into_iter()
                .filter(installed_outside_the_cluster),
        )
        .await;
        let cluster = RealCluster {
            client_ca: control_plane.ready().admission_client_ca.clone(),
            control_plane: Some(control_plane),
            client,
            lien_kubeconfig: dir.join("lien.kubeconfig"),
            dir,
            admission_client_cert,
        };
        cluster.wait_crds_served().await;
        cluster.write_lien_kubeconfig().await;
        cluster
    }

    fn control_plane(&self) -> &ControlPlane {
        self.control_plane.as_ref().expect("running")
    }

    /// The admin's kubeconfig (contexts `sandbox` and `sandbox-user`).
    pub fn kubeconfig(&self) -> &Path {
        self.control_plane().kubeconfig()
    }

    /// Lien's kubeconfig: the API server, its CA, and a token of `lien-system/lien`.
    pub fn lien_kubeconfig(&self) -> &Path {
        &self.lien_kubeconfig
    }

    /// The CA of the client certificate the API server presents to webhooks (written in both
    /// modes; only the default mode presents a certificate from it).
    pub fn admission_client_ca(&self) -> &Path {
        &self.client_ca
    }

    /// The pids of `etcd`, `kube-apiserver` and `kube-controller-manager`.
    pub fn pids(&self) -> std::collections::BTreeMap<String, u32> {
        self.control_plane().pids().clone()
    }

    pub fn presents_client_certificate(&self) -> bool {
        self.admission_client_cert
    }

    /// A scratch directory of this cluster's (logs, kubeconfigs), removed on drop.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A client for a context of the admin's kubeconfig (`sandbox-user`: group `developers`).
    pub async fn client_for(&self, context: &str) -> kube::Client {
        self.control_plane()
            .client_for(context)
            .await
            .unwrap_or_else(|e| panic!("a client for {context}: {e}"))
    }

    /// What `Authorization::AlwaysAllow` means on the sandbox, as far as a real cluster can say
    /// it: the second user's group `developers` is bound to `cluster-admin`. (Lien's own
    /// ServiceAccount keeps its RBAC: binding every authenticated user would make Lien
    /// cluster-admin too.)
    pub async fn developers_may_do_everything(&self) {
        apply_all(
            &self.client,
            [
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "developers-cluster-admin"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": "cluster-admin"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                              "name": "developers"}]}),
            ],
        )
        .await;
    }

    async fn wait_crds_served(&self) {
        let wanted: Vec<String> = lien_api::crds()
            .into_iter()
            .map(|c| c.spec.names.plural)
            .collect();
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            let served = self
                .client
                .list_api_group_resources(&format!("{}/v1alpha1", lien_api::GROUP))
                .await
                .map(|l| l.resources.into_iter().map(|r| r.name).collect::<Vec<_>>())
                .unwrap_or_default();
            if wanted.iter().all(|w| served.contains(w)) {
                return;
            }
            assert!(
                Instant::now() < end,
                "Lien's CRDs not served after 60 s: {served:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A kubeconfig for Lien's ServiceAccount (a TokenRequest, as the kubelet mounts one into
    /// a pod), so that Lien runs with exactly the rights `deploy/rbac.yaml` gives it.
    async fn write_lien_kubeconfig(&self) {
        let sas: Api<ServiceAccount> = Api::namespaced(self.client.clone(), LIEN_NAMESPACE);
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                // Longer than any test.
                expiration_seconds: Some(24 * 3600),
                ..TokenRequestSpec::default()
            }),
            ..TokenRequest::default()
        };
        let token = sas
            .create_token_request(LIEN_SERVICE_ACCOUNT, &PostParams::default(), &request)
            .await
            .expect("a token for lien-system/lien")
            .status
            .expect("a TokenRequest's status")
            .token;
        let admin: Value = serde_yaml_ng::from_str(
            &std::fs::read_to_string(self.kubeconfig()).expect("the admin's kubeconfig"),
        )
        .expect("kubeconfig");
        let cluster = admin["clusters"][0]["cluster"].clone();
        let kubeconfig = json!({"apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "real", "cluster": cluster}],
            "users": [{"name": "lien", "user": {"token": token}}],
            "contexts": [{"name": "lien", "context": {"cluster": "real", "user": "lien",
                                                     "namespace": LIEN_NAMESPACE}}],
            "current-context": "lien"});
        std::fs::write(&self.lien_kubeconfig, kubeconfig.to_string()).expect("Lien's kubeconfig");
    }

    /// Stops the control plane without blocking the runtime (the launcher takes a moment to
    /// stop its processes and remove its directory).
    pub async fn stop(mut self) {
        if let Some(cp) = self.control_plane.take() {
            let _ = tokio::task::spawn_blocking(move || cp.stop()).await;
        }
    }
}

impl Drop for RealCluster {
    /// Stops the control plane (if still here) and removes the directory — after printing the
    /// log of every `lien run` the test started, when the test is failing.
    fn drop(&mut self) {
        self.control_plane.take();
        if std::thread::panicking() {
            let mut logs: Vec<PathBuf> = std::fs::read_dir(&self.dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "log"))
                .collect();
            logs.sort();
            for log in logs {
                eprintln!(
                    "---- last lines of {} ----\n{}",
                    log.display(),
                    log_tail(&log, 80)
                );
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The `lien` binary: the one Cargo built for this test, or for an example (where Cargo
/// names none) `$LIEN_BIN`.
pub fn lien_bin() -> PathBuf {
    match option_env!("CARGO_BIN_EXE_lien") {
        Some(bin) => PathBuf::from(bin),
        None => std::env::var_os("LIEN_BIN")
            .map(PathBuf::from)
            .expect("LIEN_BIN names the lien binary (e.g. target/release/lien)"),
    }
}

/// `lien ARGS…` as a child of this test that dies with it: `setpriv --pdeathsig KILL` (the
/// kernel kills it when the thread that started it ends — keep that a runtime's worker or the
/// test's own thread, never a `spawn_blocking` one), logging to `log`, with no inherited
/// `lien run` environment variables.
pub fn lien_command(log: &Path) -> Command {
    lien_command_of(&lien_bin(), log)
}

/// [`lien_command`] of another `lien` binary (an earlier version's: `LIEN_PREVIOUS_BIN`).
pub fn lien_command_of(bin: &Path, log: &Path) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args(["--pdeathsig", "KILL", "--"]).arg(bin);
    let log = std::fs::File::create(log).expect("log file");
    for var in [
        "LIEN_WEBHOOK_ADDR",
        "LIEN_NAMESPACE",
        "LIEN_CLIENT_CA_FILE",
        "LIEN_OWN_USERNAME",
        "POD_NAME",
        "KUBECONFIG",
    ] {
        cmd.env_remove(var);
    }
    cmd.env(
        "RUST_LOG",
        std::env::var("LIEN_TEST_LOG").unwrap_or_else(|_| "info".into()),
    )
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(log);
    cmd
}

/// A free port on 127.0.0.1 (the kernel's pick, released for `lien run` to bind: a start that
/// loses it to another process is retried on a new one).
pub fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
}

/// The lines of a `lien run` log where the API server refused Lien's ServiceAccount something
/// (RBAC's 403 names the user: `User "system:serviceaccount:lien-system:lien" cannot …`).
pub fn forbidden_lines(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains(LIEN_USER) && l.contains("cannot"))
        .map(str::to_owned)
        .collect()
}

/// The last `n` lines of a log file.
pub fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// One `lien run` process, its webhook at `https://<addr>` (where the API server calls it,
/// directly: one replica needs no load balancer).
pub struct LienProcess {
    child: Option<Child>,
    addr: SocketAddr,
    log: PathBuf,
}

impl LienProcess {
    /// Runs `lien run` as Lien's ServiceAccount against `cluster`, its webhook on a free port of
    /// 127.0.0.1 named by `--webhook-url`, with `args`; returns once it is ready (its webhook
    /// configuration names it and its `/readyz` answers 200: the index has synced).
    pub async fn start(cluster: &RealCluster, name: &str, args: &[String]) -> LienProcess {
        static STARTS: AtomicU32 = AtomicU32::new(0);
        let mut last = String::new();
        for _ in 0..3 {
            let addr = free_addr();
            // One log per process: a restarted Lien's does not overwrite its predecessor's.
            let n = STARTS.fetch_add(1, Ordering::Relaxed);
            let log = cluster.dir().join(format!("{name}-{n}.log"));
            let child = lien_command(&log)
                .arg("run")
                .arg(format!(
                    "--kubeconfig={}",
                    cluster.lien_kubeconfig().display()
                ))
                .arg(format!("--webhook-addr={addr}"))
                .arg(format!("--webhook-url=https://{addr}"))
                .args(args)
                .spawn()
                .expect("lien run starts (setpriv is util-linux's)");
            let mut lien = LienProcess {
                child: Some(child),
                addr,
                log,
            };
            match lien
                .wait_ready(&cluster.client, &format!("https://{addr}/"))
                .await
            {
                Ok(()) => return lien,
                Err(why) if why.contains("binding the webhook") => last = why,
                Err(why) => panic!("lien run did not become ready: {why}"),
            }
        }
        panic!("lien run could not bind a webhook port in 3 tries: {last}")
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The process's pid (`None` once stopped).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The lines of its log where the API server refused Lien something for want of rights
    /// (403 to Lien's ServiceAccount): a verb or a subresource `deploy/rbac.yaml` misses.
    pub fn forbidden(&self) -> Vec<String> {
        forbidden_lines(&self.log())
    }

    /// Waits until the configuration names `url` and `/readyz` answers 200; `Err` with the
    /// log if the process exits first, or after 60 s.
    async fn wait_ready(&mut self, client: &kube::Client, url: &str) -> Result<(), String> {
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return Err(format!(
                    "it exited ({status}):\n{}",
                    log_tail(&self.log, 40)
                ));
            }
            if let Some(roots) = published_roots(client, Some(url)).await {
                if https_get(self.addr, "127.0.0.1", roots, "/readyz")
                    .await
                    .is_ok()
                {
                    return Ok(());
                }
            }
            if Instant::now() > end {
                return Err(format!(
                    "not ready after 60 s:\n{}",
                    log_tail(&self.log, 40)
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGTERM, as the kubelet stops a pod, and waits for the exit (SIGKILL after 15 s);
    /// returns [`LienProcess::forbidden`] of its whole log.
    pub async fn stop(mut self) -> Vec<String> {
        self.terminate().await;
        self.forbidden()
    }

    async fn terminate(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let end = Instant::now() + Duration::from_secs(15);
        while child.try_wait().ok().flatten().is_none() {
            if Instant::now() > end {
                let _ = child.kill();
                let _ = child.wait();
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for LienProcess {
    fn drop(&mut self) {
        // Its log is printed by its cluster's drop when the test fails.
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The roots in Lien's ValidatingWebhookConfiguration `lien` — if `url` is given, only once
/// its first hook's URL starts with it (the configuration written by the process there).
pub async fn published_roots(
    client: &kube::Client,
    url: Option<&str>,
) -> Option<rustls::RootCertStore> {
    use base64::Engine;
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
    ));
    let vwc = Api::<DynamicObject>::all_with(client.clone(), &ar)
        .get_opt("lien")
        .await
        .ok()??;
    let config = &vwc.data["webhooks"][0]["clientConfig"];
    if let Some(url) = url {
        if !config["url"].as_str()?.starts_with(url) {
            return None;
        }
    }
    let pem = base64::engine::general_purpose::STANDARD
        .decode(config["caBundle"].as_str()?)
        .ok()?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        roots.add(cert.ok()?).ok()?;
    }
    Some(roots)
}

/// `GET path` over TLS from `addr`, verifying its certificate for `server_name` against
/// `roots`, without a client certificate; the body of a 200, else `Err` saying why.
pub async fn https_get(
    addr: SocketAddr,
    server_name: &str,
    roots: rustls::RootCertStore,
    path: &str,
) -> Result<String, String> {
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let name = rustls::pki_types::ServerName::try_from(server_name.to_owned())
        .map_err(|e| e.to_string())?;
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS: {e}"))?;
    let request =
        format!("GET {path} HTTP/1.1\r\nhost: {server_name}\r\nconnection: close\r\n\r\n");
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

/// A TCP load balancer on 127.0.0.1 in front of several `lien run` replicas, as a platform
/// team puts one in front of Lien outside a cluster: each connection goes to the first
/// backend that accepts it, in order (so replica 0 takes the calls while it is up, as a
/// Service's kube-proxy skips an endpoint that refuses). TLS passes through: the API server
/// verifies each replica's certificate and each replica sees the API server's client
/// certificate.
pub struct Balancer {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Balancer {
    pub async fn start(backends: Vec<SocketAddr>) -> Balancer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the balancer");
        let addr = listener.local_addr().expect("addr");
        let backends = Arc::new(backends);
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let backends = backends.clone();
                tokio::spawn(async move {
                    for backend in backends.iter() {
                        if let Ok(mut outbound) = tokio::net::TcpStream::connect(backend).await {
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                            return;
                        }
                    }
                });
            }
        });
        Balancer { addr, task }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
