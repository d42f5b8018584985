//! The e2e harness. Each scenario runs against one of three targets:
//! - the sandbox with Lien running inside it, one per test (the default);
//! - a real control plane per test (etcd, kube-apiserver, kube-controller-manager) with Lien as a
//!   `lien run` process outside it, with `LIEN_E2E_TARGET=real` (`support/real.rs`);
//! - the cluster `LIEN_E2E_KUBECONFIG` names (Lien assumed installed there).
//!
//! Each scenario works in its own namespace, removed at the end (also when the test fails).
//! Conditions are awaited with a deadline ([`wait_for`], scaled for the real target in one
//! place: [`scaled`]); nothing sleeps as synchronisation.

#![allow(dead_code)]

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use lien::runtime::{Lien, LienConfig, install_crds, sandbox_client};
use lien_controller::ControllerConfig;
use lien_sandbox::apiserver::{Authorization, Config};
use lien_sandbox::{Sandbox, SandboxConfig};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::real::{LienProcess, RealCluster};
pub use crate::real::{Target, scaled, target};

pub const DEADLINE: Duration = Duration::from_secs(20);
pub const LABEL: &str = lien_api::IN_USE_LABEL;

/// How the sandbox and Lien run (ignored against an external cluster, where Lien is installed
/// already). The real target follows them too: see each field.
#[derive(Clone, Copy)]
pub struct Options {
    /// The sandbox garbage collector's longest backoff (the real one's is client-go's, up to
    /// 1000 s: what a scenario setting this long imitates).
    pub gc_backoff_max: Duration,
    /// How the sandbox authorizes requests. A scenario that needs RBAC creates its Roles and
    /// bindings through the API, so it runs unchanged on a real cluster (which has RBAC). On the
    /// real target `AlwaysAllow` binds the second user's group (`developers`) to
    /// `cluster-admin`.
    pub authorization: Authorization,
    /// The webhook's break-glass groups (empty: break-glass off, Lien's default).
    pub break_glass_groups: &'static [&'static str],
    /// Whether Lien trusts the sandbox's CA for the API server's client certificate
    /// (`--client-ca-file`, as `lien sandbox` wires it). `false`: a cluster whose API server
    /// presents none (Lien answers but records no refusal). On the real target `false` starts
    /// the control plane without the admission client certificate.
    pub client_certificate: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            gc_backoff_max: Duration::from_millis(200),
            authorization: Authorization::AlwaysAllow,
            break_glass_groups: &[],
            client_certificate: true,
        }
    }
}

pub fn controller_config() -> ControllerConfig {
    ControllerConfig {
        leader: None,
        retry_base: Duration::from_millis(20),
        retry_max: Duration::from_millis(500),
        ..ControllerConfig::default()
    }
}

/// Reports early and often enough for a scenario to see them (CascadeRule).
fn cascade_config() -> lien_controller::cascade::CascadeConfig {
    lien_controller::cascade::CascadeConfig {
        report_after: Duration::from_millis(500),
        report_max: Duration::from_secs(2),
        stuck_after: Duration::from_secs(3),
        retry_base: Duration::from_millis(100),
        retry_max: Duration::from_secs(1),
        ..Default::default()
    }
}

/// `lien run`'s flags for the same settings as the in-process Lien of the sandbox target:
/// one replica, [`controller_config`]'s retries, [`cascade_config`]'s reports, the options'
/// break-glass groups and client CA.
fn lien_run_args(options: &Options, cluster: &RealCluster) -> Vec<String> {
    let c = controller_config();
    let cascade = cascade_config();
    let mut args = vec![
        "--no-leader-election".to_owned(),
        format!("--write-retry-base={}ms", c.retry_base.as_millis()),
        format!("--write-retry-max={}ms", c.retry_max.as_millis()),
        format!(
            "--cascade-report-after={}ms",
            cascade.report_after.as_millis()
        ),
        format!("--cascade-report-max={}ms", cascade.report_max.as_millis()),
        format!(
            "--cascade-stuck-after={}ms",
            cascade.stuck_after.as_millis()
        ),
        format!("--cascade-retry-base={}ms", cascade.retry_base.as_millis()),
        format!("--cascade-retry-max={}ms", cascade.retry_max.as_millis()),
    ];
    if options.client_certificate {
        args.push(format!(
            "--client-ca-file={}",
            cluster.admission_client_ca().display()
        ));
    }
    for group in options.break_glass_groups {
        args.push(format!("--break-glass-group={group}"));
    }
    args
}

/// The sandbox target: the sandbox and Lien in this process.
struct Local {
    sandbox: Sandbox,
    lien: Option<Lien>,
    policy: lien_webhook::validate::Policy,
    /// Kept across restarts of Lien, as `lien run` keeps it in a Secret.
    replay_key: lien_controller::ReplayKey,
    client_certificate: bool,
}

/// The real target: a control plane of the scenario's own and `lien run`.
struct Real {
    /// Before `cluster`: dropped first, so that a failing test's output shows its log before
    /// the cluster's directory goes.
    lien: Option<LienProcess>,
    cluster: RealCluster,
    args: Vec<String>,
    /// What the API server refused Lien for want of rights, from the logs of the `lien run`
    /// processes stopped so far: the scenario fails on any (see [`Env::finish`]).
    forbidden: Vec<String>,
}

/// A cluster of the scenario's own, with the Lien it can stop and start.
enum Backend {
    Sandbox(Local),
    Real(Real),
}

/// Starts Lien against the sandbox with `policy`, its webhook on 127.0.0.1 (a new process, as
/// after a restart: empty index, new webhook port).
async fn start_local_lien(
    sandbox: &Sandbox,
    policy: lien_webhook::validate::Policy,
    replay_key: &lien_controller::ReplayKey,
    client_certificate: bool,
) -> Lien {
    let client = sandbox_client(sandbox).await.expect("client");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let config = LienConfig {
        webhook_addr: addr,
        webhook_client: lien_webhook::ClientConfig::Url(format!("https://{addr}/validate")),
        webhook_names: vec!["127.0.0.1".into(), "localhost".into()],
        policy,
        controller: ControllerConfig {
            replay_key: Some(replay_key.clone()),
            ..controller_config()
        },
        usage_access_check: true,
        // The sandbox presents a client certificate from its CA (the default admission
        // kubeconfig): Lien trusts that CA, as `lien sandbox` wires it.
        webhook_client_ca: client_certificate.then(|| sandbox.ca().cert_pem().to_owned()),
        cascade: cascade_config(),
        // One replica.
        webhook_ca: lien::runtime::WebhookCa::InMemory,
        // The sandbox's admin, whom Lien runs as (asked at start).
        own_username: None,
        webhook_max_concurrency: lien_webhook::DEFAULT_MAX_CONCURRENCY,
        webhook_unauthenticated_access_checks:
            lien_webhook::DEFAULT_UNAUTHENTICATED_CHECKS_PER_SECOND,
    };
    Lien::start_with_listener(client, listener, config)
        .await
        .expect("Lien starts")
}

/// A sandbox as `options` say, with Lien's CRDs and Lien running in this process.
async fn start_sandbox(options: &Options) -> (kube::Client, Local) {
    let api = Config {
        gc_backoff_max: options.gc_backoff_max,
        namespace_requeue: Duration::from_millis(50),
        authorization: options.authorization,
        ..Config::default()
    };
    let sandbox = Sandbox::start(SandboxConfig { port: 0, api })
        .await
        .expect("the sandbox starts");
    let client = sandbox_client(&sandbox).await.expect("client");
    install_crds(&client).await.expect("Lien's CRDs install");
    let policy = lien_webhook::validate::Policy {
        break_glass_groups: options
            .break_glass_groups
            .iter()
            .map(|g| g.to_string())
            .collect(),
        ..lien_webhook::validate::Policy::default()
    };
    let replay_key = lien_controller::ReplayKey::generate().expect("a replay key");
    let lien = start_local_lien(
        &sandbox,
        policy.clone(),
        &replay_key,
        options.client_certificate,
    )
    .await;
    (
        client,
        Local {
            sandbox,
            lien: Some(lien),
            policy,
            replay_key,
            client_certificate: options.client_certificate,
        },
    )
}

/// A real control plane as `options` say, with Lien's install and `lien run`.
async fn start_real(options: &Options) -> Real {
    let cluster = RealCluster::start(options.client_certificate).await;
    if matches!(options.authorization, Authorization::AlwaysAllow) {
        cluster.developers_may_do_everything().await;
    }
    let args = lien_run_args(options, &cluster);
    let lien = LienProcess::start(&cluster, "lien", &args).await;
    Real {
        cluster,
        lien: Some(lien),
        args,
        forbidden: vec![],
    }
}

/// One scenario's world.
pub struct Env {
    pub client: kube::Client,
    pub ns: String,
    local: Option<Backend>,
    kubeconfig: Option<String>,
    namespaces: Vec<String>,
    cluster_objects: Vec<(ApiResource, String)>,
    finished: bool,
}

fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let n = N.fetch_add(1, Ordering::Relaxed);
    let mut p: String = prefix.chars().take(40).collect();
    p = p.trim_end_matches('-').to_string();
    format!("{p}-{:x}{n}", nanos ^ std::process::id())
}

async fn external_client(path: &str) -> kube::Client {
    let kubeconfig = Kubeconfig::read_from(path).expect("LIEN_E2E_KUBECONFIG reads");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("client config");
    kube::Client::try_from(config).expect("client")
}

impl Env {
    pub async fn start(name: &str) -> Env {
        Env::start_with(name, Options::default()).await
    }

    pub async fn start_with(name: &str, options: Options) -> Env {
        // `LIEN_TEST_LOG=lien_controller=debug` (an EnvFilter): Lien's log in each failing
        // test's output, to diagnose a failure seen once in many runs.
        if std::env::var_os("LIEN_TEST_LOG").is_some() {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::from_env("LIEN_TEST_LOG"))
                .with_test_writer()
                .try_init();
        }
        let (client, local, kubeconfig) = match std::env::var("LIEN_E2E_KUBECONFIG") {
            Ok(path) if !path.is_empty() => (external_client(&path).await, None, Some(path)),
            _ => match target() {
                Target::Sandbox => {
                    let (client, local) = start_sandbox(&options).await;
                    (client, Some(Backend::Sandbox(local)), None)
                }
                Target::Real => {
                    let real = start_real(&options).await;
                    (real.cluster.client.clone(), Some(Backend::Real(real)), None)
                }
            },
        };
        let mut env = Env {
            client,
            ns: unique(name),
            local,
            kubeconfig,
            namespaces: vec![],
            cluster_objects: vec![],
            finished: false,
        };
        let ns = env.ns.clone();
        env.namespace(&ns).await;
        env
    }

    /// A client of the same admin that impersonates `user` in `groups` (kubectl's `--as` and
    /// `--as-group`): how a scenario acts as an ordinary user, on the sandbox and on a real
    /// cluster alike.
    pub async fn client_as(&self, user: &str, groups: &[&str]) -> kube::Client {
        let mut config = self.admin_config().await;
        config.auth_info.impersonate = Some(user.to_string());
        config.auth_info.impersonate_groups = Some(groups.iter().map(|g| g.to_string()).collect());
        kube::Client::try_from(config).expect("client")
    }

    /// A new client of the scenario's admin. A client's connection task runs on the runtime
    /// it is created on, so a test can drive the API server from a runtime of its own (one
    /// that keeps running if the server's runtime stops).
    pub async fn new_client(&self) -> kube::Client {
        kube::Client::try_from(self.admin_config().await).expect("client")
    }

    /// A client of the scenario's admin that sees a 429 at once: kube-rs's default client
    /// retries 429, 503 and 504 with a backoff of up to 15 attempts (minutes in all), as a
    /// drain retries a refused eviction.
    pub async fn client_without_retry(&self) -> kube::Client {
        let mut config = self.admin_config().await;
        config.default_retry = false;
        kube::Client::try_from(config).expect("client")
    }

    async fn admin_config(&self) -> kube::Config {
        let kubeconfig: Kubeconfig = match (&self.local, &self.kubeconfig) {
            (Some(Backend::Sandbox(local)), _) => {
                serde_json::from_value(local.sandbox.kubeconfig()).expect("sandbox kubeconfig")
            }
            (Some(Backend::Real(real)), _) => {
                Kubeconfig::read_from(real.cluster.kubeconfig()).expect("the admin's kubeconfig")
            }
            (None, Some(path)) => Kubeconfig::read_from(path).expect("LIEN_E2E_KUBECONFIG reads"),
            (None, None) => unreachable!("an Env is local or has a kubeconfig"),
        };
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("client config")
    }

    /// The address of the scenario's Lien's webhook; `None` against an external cluster.
    pub fn webhook_addr(&self) -> Option<std::net::SocketAddr> {
        match self.local.as_ref()? {
            Backend::Sandbox(local) => local.lien.as_ref().map(Lien::webhook_addr),
            Backend::Real(real) => real.lien.as_ref().map(LienProcess::addr),
        }
    }

    /// Writes a kubeconfig for this scenario's admin to `path`, for the real `kubectl`: the
    /// sandbox's, or a copy of `LIEN_E2E_KUBECONFIG`.
    pub fn write_kubeconfig(&self, path: &std::path::Path) {
        match (&self.local, &self.kubeconfig) {
            (Some(Backend::Sandbox(local)), _) => local
                .sandbox
                .write_kubeconfig(path)
                .expect("the sandbox writes its kubeconfig"),
            (Some(Backend::Real(real)), _) => {
                std::fs::copy(real.cluster.kubeconfig(), path).expect("the kubeconfig copies");
            }
            (None, Some(from)) => {
                std::fs::copy(from, path).expect("LIEN_E2E_KUBECONFIG copies");
            }
            (None, None) => unreachable!("an Env is local or has a kubeconfig"),
        }
    }

    /// Whether the scenario has a cluster and a Lien of its own (the sandbox, or a real
    /// control plane with `lien run`): a test may stop and restart Lien, edit its
    /// configuration, reach its webhook's port, use fixed names.
    pub fn is_local(&self) -> bool {
        self.local.is_some()
    }

    /// Whether the scenario runs against a real control plane of its own.
    pub fn is_real(&self) -> bool {
        matches!(self.local, Some(Backend::Real(_)))
    }

    /// A client acting as Lien's own identity (the one its mutating webhook lets write replay
    /// records): the sandbox's admin, whom the in-process Lien runs as; on the real target
    /// Lien's ServiceAccount, impersonated by the admin. `None` against an external cluster.
    pub async fn lien_client(&self) -> Option<kube::Client> {
        match self.local.as_ref()? {
            Backend::Sandbox(_) => Some(self.new_client().await),
            Backend::Real(_) => Some(
                self.client_as(
                    crate::real::LIEN_USER,
                    &[
                        "system:serviceaccounts",
                        "system:serviceaccounts:lien-system",
                        "system:authenticated",
                    ],
                )
                .await,
            ),
        }
    }

    /// Creates a namespace, removed at the end.
    pub async fn namespace(&mut self, name: &str) {
        Api::<Namespace>::all(self.client.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": name}})).expect("ns"),
            )
            .await
            .expect("namespace created");
        self.namespaces.push(name.to_string());
    }

    /// A fresh name for another namespace of this scenario.
    pub fn another_namespace_name(&self, suffix: &str) -> String {
        unique(&format!("{}-{suffix}", &self.ns[..self.ns.len().min(30)]))
    }

    /// A unique name for a cluster-scoped object of this scenario.
    pub fn cluster_name(&self, suffix: &str) -> String {
        format!("{}-{suffix}", self.ns)
    }

    /// Creates any object from JSON (`apiVersion`, `kind` set); cluster-scoped ones are removed
    /// at the end.
    pub async fn create(&mut self, object: Value) -> DynamicObject {
        let ar = api_resource(&object);
        let obj: DynamicObject = serde_json::from_value(object).expect("object");
        let api: Api<DynamicObject> = match &obj.metadata.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        };
        let created = api
            .create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("creating {:?}: {e}", obj.metadata.name));
        if obj.metadata.namespace.is_none() {
            self.cluster_objects
                .push((ar, obj.metadata.name.clone().unwrap_or_default()));
        }
        created
    }

    /// Tries to create an object; returns the API error.
    pub async fn try_create(&mut self, object: Value) -> Result<DynamicObject, kube::Error> {
        let ar = api_resource(&object);
        let obj: DynamicObject = serde_json::from_value(object).expect("object");
        let api: Api<DynamicObject> = match &obj.metadata.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        };
        let created = api.create(&PostParams::default(), &obj).await?;
        if obj.metadata.namespace.is_none() {
            self.cluster_objects
                .push((ar, obj.metadata.name.clone().unwrap_or_default()));
        }
        Ok(created)
    }

    /// A ConfigMap in the scenario's namespace.
    pub async fn configmap(&mut self, name: &str, labels: Value) -> DynamicObject {
        let ns = self.ns.clone();
        self.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": labels}}))
            .await
    }

    /// A ConfigMap `name` in the scenario's namespace and the Usage `usage` that protects it
    /// with `reason`. Returns the ConfigMap.
    pub async fn protected_configmap(
        &mut self,
        name: &str,
        usage: &str,
        reason: &str,
    ) -> DynamicObject {
        let cm = self.configmap(name, json!({})).await;
        self.usage(
            usage,
            json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": name}},
                   "reason": reason}),
        )
        .await;
        cm
    }

    /// A Usage in the scenario's namespace, `spec` as given.
    pub async fn usage(&mut self, name: &str, spec: Value) -> DynamicObject {
        let ns = self.ns.clone();
        self.create(json!({"apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}))
            .await
    }

    pub fn configmaps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    pub fn usages(&self) -> Api<lien_api::Usage> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// Stops Lien (SIGTERM for `lien run`) but keeps its ValidatingWebhookConfiguration
    /// (failurePolicy Fail). `false` against an external cluster.
    pub async fn stop_lien(&mut self) -> bool {
        match self.local.as_mut() {
            Some(Backend::Sandbox(local)) => match local.lien.take() {
                Some(lien) => {
                    lien.shutdown().await;
                    true
                }
                None => false,
            },
            Some(Backend::Real(real)) => match real.lien.take() {
                Some(lien) => {
                    let forbidden = lien.stop().await;
                    real.forbidden.extend(forbidden);
                    true
                }
                None => false,
            },
            None => false,
        }
    }

    /// Starts Lien again (a new process, as after a restart: empty index, new webhook port).
    pub async fn start_lien(&mut self) {
        match self
            .local
            .as_mut()
            .expect("a cluster of the scenario's own")
        {
            Backend::Sandbox(local) => {
                assert!(local.lien.is_none(), "Lien is running");
                local.lien = Some(
                    start_local_lien(
                        &local.sandbox,
                        local.policy.clone(),
                        &local.replay_key,
                        local.client_certificate,
                    )
                    .await,
                );
            }
            Backend::Real(real) => {
                assert!(real.lien.is_none(), "Lien is running");
                real.lien = Some(LienProcess::start(&real.cluster, "lien", &real.args).await);
            }
        }
    }

    /// The user this scenario's client authenticates as, as admission sees it.
    pub async fn user(&self) -> String {
        if matches!(self.local, Some(Backend::Sandbox(_))) {
            return lien_sandbox::sandbox::ADMIN_USER.to_string();
        }
        // `kubectl auth whoami`: a SelfSubjectReview (authentication.k8s.io/v1, Kubernetes 1.28+).
        let ar = api_resource(
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
        );
        let review: DynamicObject = serde_json::from_value(
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
                   "metadata": {}}),
        )
        .expect("review");
        let answer = Api::<DynamicObject>::all_with(self.client.clone(), &ar)
            .create(&PostParams::default(), &review)
            .await
            .expect("SelfSubjectReview");
        answer.data["status"]["userInfo"]["username"]
            .as_str()
            .expect("a username")
            .to_string()
    }

    /// A client for the sandbox's second user (`sandbox-user`, group `developers`) and its name;
    /// `None` against an external cluster, where the harness has one identity only.
    pub async fn second_user(&self) -> Option<(kube::Client, String)> {
        let local = match self.local.as_ref()? {
            Backend::Sandbox(local) => local,
            Backend::Real(real) => {
                return Some((
                    real.cluster
                        .client_for(lien_testing_control_plane::USER_CONTEXT)
                        .await,
                    lien_sandbox::sandbox::SECOND_USER.to_string(),
                ));
            }
        };
        let kubeconfig: Kubeconfig =
            serde_json::from_value(local.sandbox.kubeconfig()).expect("kubeconfig");
        let options = KubeConfigOptions {
            context: Some("sandbox-user".into()),
            ..KubeConfigOptions::default()
        };
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .expect("client config");
        let client = kube::Client::try_from(config).expect("client");
        Some((client, lien_sandbox::sandbox::SECOND_USER.to_string()))
    }

    /// The `events.k8s.io/v1` Events of this scenario's namespace regarding `kind`/`name` with
    /// `reason`.
    pub async fn events(&self, kind: &str, name: &str, reason: &str) -> Vec<Event> {
        Api::<Event>::namespaced(self.client.clone(), &self.ns)
            .list(&Default::default())
            .await
            .expect("events list")
            .items
            .into_iter()
            .filter(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.regarding.as_ref().is_some_and(|r| {
                        r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name)
                    })
            })
            .collect()
    }

    /// Waits until an Event regarding `kind`/`name` with `reason` exists; returns them all.
    pub async fn wait_events(&self, kind: &str, name: &str, reason: &str) -> Vec<Event> {
        wait_for(
            &format!("a {reason} event regarding {kind} {name}"),
            DEADLINE,
            || async { Some(self.events(kind, name, reason).await).filter(|e| !e.is_empty()) },
        )
        .await
    }

    /// Removes what the scenario made and stops the sandbox, or Lien and the control plane
    /// (whose state goes with it: nothing to remove). On the real target the scenario fails
    /// if the API server refused Lien anything for want of rights (a verb or subresource
    /// `deploy/rbac.yaml` lacks), even if the scenario itself got what it wanted.
    pub async fn finish(mut self) {
        self.finished = true;
        match self.local.take() {
            Some(Backend::Real(mut real)) => {
                if let Some(lien) = real.lien.take() {
                    let forbidden = lien.stop().await;
                    real.forbidden.extend(forbidden);
                }
                real.cluster.stop().await;
                assert!(
                    real.forbidden.is_empty(),
                    "the API server refused Lien's ServiceAccount (deploy/rbac.yaml):\n{}",
                    real.forbidden.join("\n")
                );
            }
            local => {
                cleanup(
                    &self.client,
                    std::mem::take(&mut self.cluster_objects),
                    std::mem::take(&mut self.namespaces),
                )
                .await;
                if let Some(Backend::Sandbox(local)) = local {
                    if let Some(lien) = local.lien {
                        lien.shutdown().await;
                    }
                    local.sandbox.shutdown().await;
                }
            }
        }
    }
}

async fn cleanup(client: &kube::Client, cluster: Vec<(ApiResource, String)>, ns: Vec<String>) {
    for (ar, name) in cluster.iter().rev() {
        let _ = Api::<DynamicObject>::all_with(client.clone(), ar)
            .delete(name, &DeleteParams::background())
            .await;
    }
    for n in ns {
        let _ = Api::<Namespace>::all(client.clone())
            .delete(&n, &DeleteParams::background())
            .await;
    }
}

impl Drop for Env {
    /// A failed test still removes its namespaces from an external cluster (with a client of its
    /// own: the test's runtime is unwinding).
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let Some(path) = self.kubeconfig.clone() else {
            return;
        };
        let cluster = std::mem::take(&mut self.cluster_objects);
        let ns = std::mem::take(&mut self.namespaces);
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                let client = external_client(&path).await;
                cleanup(&client, cluster, ns).await;
            });
        })
        .join();
    }
}

/// A Role in `ns` with `rules`, bound to `user`: how a scenario gives an ordinary user rights,
/// through the API, the same on the sandbox under RBAC and on a real cluster.
pub async fn grant(env: &mut Env, ns: &str, name: &str, user: &str, rules: Value) {
    env.create(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": name, "namespace": ns}, "rules": rules}),
    )
    .await;
    env.create(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}),
    )
    .await;
}

/// The webhook's serving CA, as Lien published it in its ValidatingWebhookConfiguration.
pub async fn webhook_roots(env: &Env) -> rustls::RootCertStore {
    use base64::Engine;
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let ar = api_resource(&json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration"}));
    let vwcs = Api::<DynamicObject>::all_with(env.client.clone(), &ar)
        .list(&Default::default())
        .await
        .expect("list");
    let bundle = vwcs
        .items
        .iter()
        .find_map(|c| c.data["webhooks"][0]["clientConfig"]["caBundle"].as_str())
        .expect("Lien's configuration");
    let pem = base64::engine::general_purpose::STANDARD
        .decode(bundle)
        .expect("base64");
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        roots.add(cert.expect("pem")).expect("root");
    }
    roots
}

/// An AdmissionReview of `operation` on `object` (the stored `old_object` beside it), forged in
/// the name of the sandbox's admin (who may delete anything), as someone who reaches the
/// webhook's port would POST it (`post_without_client_certificate`).
pub fn forged_review(
    uid: &str,
    (kind, resource): (&str, &str),
    operation: &str,
    object: Value,
    old_object: &Value,
) -> Value {
    let mut request = json!({"uid": uid,
        "kind": {"group": "", "version": "v1", "kind": kind},
        "resource": {"group": "", "version": "v1", "resource": resource},
        "name": old_object["metadata"]["name"], "operation": operation,
        "userInfo": {"username": lien_sandbox::sandbox::ADMIN_USER,
                     "groups": ["system:masters", "system:authenticated"]},
        "object": object, "oldObject": old_object, "dryRun": false});
    if let Some(ns) = old_object["metadata"]["namespace"].as_str() {
        request["namespace"] = json!(ns);
    } else if resource == "namespaces" {
        request["namespace"] = old_object["metadata"]["name"].clone();
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

/// The sealed record the patch of `/mutate`'s `answer` would store, the review allowed.
pub fn sealed_record(answer: &Value) -> String {
    use base64::Engine;
    let response = &answer["response"];
    // No client CA: the webhook cannot tell a forged review from the API server, and answers.
    assert_eq!(response["allowed"], true, "{answer}");
    let patch: Value = serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(response["patch"].as_str().expect("a patch"))
            .expect("base64"),
    )
    .expect("json");
    patch[1]["value"]
        .as_str()
        .expect("a sealed record")
        .to_owned()
}

/// POSTs `review` to the webhook's `path` (`/validate`, `/mutate`) over TLS without a client
/// certificate, as anyone who can reach the port could; returns the AdmissionReview answered.
pub async fn post_without_client_certificate(env: &Env, path: &str, review: &Value) -> Value {
    let addr = env.webhook_addr().expect("a local webhook");
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(webhook_roots(env).await)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
    let mut tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("handshake without a client certificate");
    let body = review.to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(request.as_bytes()).await.expect("write");
    let mut out = String::new();
    let _ = tls.read_to_string(&mut out).await;
    let (_, json) = out.split_once("\r\n\r\n").expect("an HTTP answer");
    serde_json::from_str(json).expect("an AdmissionReview")
}

/// The CustomResourceDefinition of a namespaced kind `kind` in `group` (plural and singular:
/// the kind lower-cased, plural with an `s`), served and stored at `v1`, its `spec` free-form.
pub fn namespaced_crd(group: &str, kind: &str) -> Value {
    let singular = kind.to_lowercase();
    let plural = format!("{singular}s");
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": singular, "kind": kind,
                      "listKind": format!("{kind}List")},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }}}
            }]
        }
    })
}

pub fn api_resource(object: &Value) -> ApiResource {
    let api_version = object["apiVersion"].as_str().expect("apiVersion");
    let kind = object["kind"].as_str().expect("kind");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let mut ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    // from_gvk guesses the plural by appending "s"; fix the ones the scenarios use.
    ar.plural = match kind {
        "StorageClass" => "storageclasses".into(),
        "ClusterUsage" => "clusterusages".into(),
        _ => ar.plural,
    };
    ar
}

/// Polls `check` until it returns `Some`, failing the test with `what` after `deadline`
/// ([`scaled`] for the target).
pub async fn wait_for<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = scaled(deadline);
    let end = tokio::time::Instant::now() + deadline;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "timed out after {deadline:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Whether a read says the object is gone: absent, or its kind no longer served (the CRD gone:
/// kube-apiserver answers a bare `404 page not found`, not a `Status`, and kube-rs's
/// `is_not_found` — so `get_opt` — does not take it for NotFound).
pub fn gone<T>(read: &Result<Option<T>, kube::Error>) -> bool {
    match read {
        Ok(None) => true,
        Err(kube::Error::Api(s)) => s.code == 404,
        _ => false,
    }
}

/// (HTTP code, message) of an API error.
pub fn api_error(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("expected an API error, got {other:?}"),
    }
}

pub fn labelled(labels: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    labels
        .and_then(|l| l.get(LABEL))
        .is_some_and(|v| v == "true")
}

/// Waits until Lien has guarded the Usage or ClusterUsage `name` with its finalizer: from then
/// on deleting it alone lifts nothing (docs/operations.md, "A Usage's first moments").
pub async fn wait_guarded<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    wait_for(&format!("{name}'s finalizer"), DEADLINE, || async {
        api.get(name)
            .await
            .ok()?
            .meta()
            .finalizers
            .as_ref()?
            .iter()
            .any(|f| f == lien_api::USAGE_FINALIZER)
            .then_some(())
    })
    .await;
}

/// Waits until the ConfigMap's in-use label is `want`.
pub async fn wait_label(api: &Api<ConfigMap>, name: &str, want: bool) {
    wait_for(
        &format!("{name}: in-use label = {want}"),
        DEADLINE,
        || async {
            api.get(name)
                .await
                .ok()
                .filter(|cm| labelled(cm.metadata.labels.as_ref()) == want)
                .map(drop)
        },
    )
    .await;
}

/// Waits until `name` is gone (within `deadline`, [`scaled`] for the target); if it is not, the failure shows the object as last read (its
/// finalizers, owners, deletion mark and status say who was to remove it).
pub async fn wait_gone<K>(api: &Api<K>, name: &str, deadline: Duration)
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    let deadline = scaled(deadline);
    let end = tokio::time::Instant::now() + deadline;
    loop {
        let last = match api.get_opt(name).await {
            Ok(None) => return,
            // A kind no longer served (its CRD gone): kube-apiserver's bare "404 page not
            // found", which kube-rs does not take for NotFound.
            Err(kube::Error::Api(s)) if s.code == 404 => return,
            other => other,
        };
        assert!(
            tokio::time::Instant::now() < end,
            "timed out after {deadline:?} waiting for {name} to be gone; last read: {last:#?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The condition `type_` of a Usage: (status, reason, message).
pub fn condition(u: &lien_api::Usage, type_: &str) -> Option<(String, String, String)> {
    u.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Waits until a DELETE of the ConfigMap (dry run) is refused; the refusal's message.
pub async fn wait_refused(api: &Api<ConfigMap>, name: &str) -> String {
    wait_refused_where(api, name, "refused", |_| true).await
}

/// Waits until a DELETE of `name` (dry run) is refused with 409 and a message `accept`s (`what`
/// says which, for the timeout's panic); the message.
pub async fn wait_refused_where<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    accept: impl Fn(&str) -> bool,
) -> String
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    wait_for(
        &format!("a DELETE of {name} to be {what}"),
        DEADLINE,
        || async {
            match api.delete(name, &DeleteParams::default().dry_run()).await {
                Err(kube::Error::Api(s)) if s.code == 409 && accept(&s.message) => Some(s.message),
                _ => None,
            }
        },
    )
    .await
}

/// The machine's `kubectl` as a user types it: the built `lien` is on PATH as `kubectl-lien`
/// (a link in a temporary directory, so kubectl finds it as a plugin and it runs in plugin
/// mode, chosen by argv[0]), reading the scenario's kubeconfig. The directory goes on drop.
pub struct Kubectl {
    dir: std::path::PathBuf,
    kubeconfig: std::path::PathBuf,
}

impl Kubectl {
    /// A kubectl for `env`'s cluster.
    pub fn new(env: &Env) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "lien-kubectl-{}-{}-{}",
            std::process::id(),
            env.ns,
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let link = dir.join("kubectl-lien");
        let _ = std::fs::remove_file(&link);
        // A hard link keeps the binary this test started with, even if a build relinks
        // `target/debug/lien` meanwhile (a symlink would dangle for that moment: kubectl then
        // says `unknown command "lien"`); a symlink where the temp dir is another filesystem.
        let bin = std::path::Path::new(env!("CARGO_BIN_EXE_lien"));
        std::fs::hard_link(bin, &link)
            .or_else(|_| std::os::unix::fs::symlink(bin, &link))
            .expect("link kubectl-lien");
        let kubeconfig = dir.join("kubeconfig");
        env.write_kubeconfig(&kubeconfig);
        Self { dir, kubeconfig }
    }

    /// Runs `kubectl ARGS…` (without blocking the runtime that serves the sandbox), with no
    /// terminal on stdin, at most 120 s; returns (success, stdout, stderr).
    pub async fn run(&self, args: &[&str]) -> (bool, String, String) {
        self.run_with_stdin(args, None).await
    }

    /// As [`Kubectl::run`], writing `stdin` (a manifest for `-f -`, an answer to a prompt).
    pub async fn run_with_stdin(
        &self,
        args: &[&str],
        stdin: Option<&str>,
    ) -> (bool, String, String) {
        use tokio::io::AsyncWriteExt as _;
        let path = format!(
            "{}:{}",
            self.dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut child = tokio::process::Command::new("kubectl")
            .args(args)
            .env("PATH", path)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("KUBECACHEDIR", self.dir.join("cache"))
            .stdin(if stdin.is_some() {
                std::process::Stdio::piped()
            } else {
                std::process::Stdio::null()
            })
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("kubectl runs (is it on PATH?)");
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes()).await.expect("write stdin");
            drop(pipe);
        }
        let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
            .await
            .expect("kubectl finishes within 120 s")
            .expect("kubectl output");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// The directory holding the kubeconfig and the plugin link.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `line` as a person pastes it into a shell: `sh -c`, with the same kubectl, kubeconfig
/// and `kubectl-lien` as `k`. Panics with the output if it fails.
pub async fn run_hint(k: &Kubectl, line: &str) -> String {
    let path = format!(
        "{}:{}",
        k.dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("sh")
            .args(["-c", line])
            .env("PATH", path)
            .env("KUBECONFIG", k.dir().join("kubeconfig"))
            .env("KUBECACHEDIR", k.dir().join("cache"))
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the hint's command finishes within 120 s")
    .expect("sh runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "the hint's command failed: {line}\n{stdout}{stderr}"
    );
    stdout.into_owned()
}

/// A ClusterUsage relating two namespaces: ConfigMap `consumer`, in a second namespace of the
/// scenario, uses ConfigMap `shared` in the scenario's own; waits until `shared` is labelled.
/// Returns (the second namespace, the ClusterUsage's name).
pub async fn cluster_usage_across_namespaces(env: &mut Env) -> (String, String) {
    let (ns, other) = (env.ns.clone(), env.another_namespace_name("b"));
    env.namespace(&other).await;
    env.configmap("shared", json!({})).await;
    env.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "consumer", "namespace": other}}))
        .await;
    let name = env.cluster_name("cu");
    env.create(
        json!({"apiVersion": "lien.dev/v1alpha1", "kind": "ClusterUsage",
        "metadata": {"name": name},
        "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap",
                        "resourceRef": {"name": "shared", "namespace": ns}},
                 "by": {"apiVersion": "v1", "kind": "ConfigMap",
                        "resourceRef": {"name": "consumer", "namespace": other}}}}),
    )
    .await;
    wait_label(&env.configmaps(), "shared", true).await;
    (other, name)
}
