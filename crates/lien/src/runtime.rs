//! Lien running: one relation index shared by the controller (which keeps it up to date from
//! watches and applies the writes) and the webhook (which answers DELETEs from it), the
//! webhook's TLS with its CA bundle published into the Validating- and
//! MutatingWebhookConfiguration, and the controller's answers to the webhook's questions
//! (`lien_core::seams`) — among them the replay key, with which the webhook seals deletion
//! requests (`kubectl lien delete --when-free`) as the controller seals its own records.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use lien_controller::{Controller, ControllerConfig, DenialSink};
use lien_core::RelationIndex;
use lien_webhook::validate::Record;
use lien_webhook::{
    CertManager, ClientCa, ClientConfig, ConfigurationOptions, ReviewAuth, Server, TlsSettings,
    mutating_webhook_configuration, validating_webhook_configuration,
};
use parking_lot::RwLock;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// The field manager of every write Lien makes.
pub const FIELD_MANAGER: &str = "lien";

/// How Lien runs.
#[derive(Debug, Clone)]
pub struct LienConfig {
    /// Where the webhook listens.
    pub webhook_addr: SocketAddr,
    /// How the API server reaches the webhook.
    pub webhook_client: ClientConfig,
    /// Names in the webhook's serving certificate (service DNS names and/or IPs).
    pub webhook_names: Vec<String>,
    /// The webhook's policy (listing bound, break-glass groups).
    pub policy: lien_webhook::validate::Policy,
    /// The controller's settings (leader election, replay TTL, retries).
    pub controller: ControllerConfig,
    /// Whether the webhook asks the API server (a `SubjectAccessReview`) that whoever creates a
    /// Usage, or changes its `spec.of`, may update the object it protects. On by default; off
    /// only where every Usage creator is trusted.
    pub usage_access_check: bool,
    /// PEM of the CA(s) whose client certificates authenticate the API server to the webhook
    /// (`--client-ca-file`). `None`: reviews are answered, but no refusal is recorded (no
    /// replay, no events), since anyone reaching the port could have sent it.
    pub webhook_client_ca: Option<String>,
    /// The CascadeRule reconciler's settings (its reporter is the controller's).
    pub cascade: lien_controller::cascade::CascadeConfig,
    /// Where the webhook's CA comes from.
    pub webhook_ca: WebhookCa,
    /// Lien's own identity as the API server names it (`userInfo.username`): the only user
    /// whose writes of `lien.dev/deletion-attempt` the mutating webhook lets through. `None`:
    /// asked at start (a SelfSubjectReview, Kubernetes 1.28+), else
    /// `system:serviceaccount:lien-system:lien`.
    pub own_username: Option<String>,
    /// At most this many reviews worked on at once (`--webhook-max-concurrency`); past it a
    /// review waits up to a second for a slot, then is answered 429 with `Retry-After`
    /// ([`lien_webhook::WebhookBuilder::max_concurrency`]).
    pub webhook_max_concurrency: usize,
    /// At most this many SubjectAccessReviews a second (a burst of twice that) for reviews from
    /// callers the webhook cannot authenticate (`--unauthenticated-access-checks`; only without
    /// a client CA: [`lien_webhook::WebhookBuilder::unauthenticated_access_checks`]).
    pub webhook_unauthenticated_access_checks: u32,
}

/// Where the webhook's CA set lives.
#[derive(Debug, Clone)]
pub enum WebhookCa {
    /// In this process only: right for one replica (`lien sandbox`, the e2e tests), wrong for
    /// several behind one Service (each would publish a bundle the others' certificates do not
    /// verify against).
    InMemory,
    /// Shared by every replica through a Secret (`lien run`): see [`crate::webhook_ca`].
    Secret {
        /// The Secret's namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
        /// How often each replica re-reads it (and the leader rotates it).
        sync_every: Duration,
    },
    /// Issued elsewhere (cert-manager: its Secret mounted as files), re-read every
    /// `reload_every` and served as renewed (`lien_webhook::IssuedCerts`).
    Files {
        /// The serving certificate (leaf first), PEM (`tls.crt`).
        cert: std::path::PathBuf,
        /// Its key, PEM (`tls.key`).
        key: std::path::PathBuf,
        /// The CA bundle published as `caBundle`, PEM (`ca.crt`).
        ca: std::path::PathBuf,
        /// How often the files are read again.
        reload_every: Duration,
    },
}

/// The three files of an issued serving certificate, read.
fn read_issued(cert: &Path, key: &Path, ca: &Path) -> anyhow::Result<(String, String, String)> {
    let read = |path: &Path, flag: &str| {
        std::fs::read_to_string(path).with_context(|| format!("reading {flag} {}", path.display()))
    };
    Ok((
        read(cert, "--tls-cert-file")?,
        read(key, "--tls-key-file")?,
        read(ca, "--tls-ca-file")?,
    ))
}

/// Re-reads the issued certificate's files every `every` and serves them as renewed; a set
/// that cannot be read or does not hold together is logged, and the current one kept.
fn spawn_issued_reload(
    certs: Arc<lien_webhook::IssuedCerts>,
    files: (PathBuf, PathBuf, PathBuf),
    every: Duration,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => return,
            }
            let loaded = read_issued(&files.0, &files.1, &files.2)
                .and_then(|(c, k, b)| Ok(certs.load(&c, &k, &b)?));
            match loaded {
                Ok(r) if r != lien_webhook::Rotation::default() => tracing::info!(
                    serving = r.serving,
                    bundle = r.bundle,
                    "serving the renewed certificate from --tls-cert-file"
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!(
                    error = format!("{e:#}"),
                    "the issued certificate's files: keeping the certificate served"
                ),
            }
        }
    })
}

/// A running Lien; dropping it stops it, `shutdown` stops it gracefully.
pub struct Lien {
    webhook_addr: SocketAddr,
    index: Arc<RwLock<RelationIndex>>,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    server: Option<Server>,
}

impl std::fmt::Debug for Lien {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lien")
            .field("webhook_addr", &self.webhook_addr)
            .finish_non_exhaustive()
    }
}

/// Forwards what the webhook saw to the controller: refusals become replay records and events,
/// break-glass overrides audit events.
async fn forward_records(mut records: mpsc::Receiver<Record>, sink: DenialSink) {
    while let Some(record) = records.recv().await {
        match record {
            Record::Denied(d) => sink.record(d),
            Record::BreakGlass(b) => {
                // The log line stays: it is the audit when events cannot be written.
                tracing::warn!(
                    object = %b.object,
                    user = b.user,
                    reason = b.reason,
                    overridden = b.overridden,
                    action = ?b.action,
                    "break-glass"
                );
                sink.break_glass(b);
            }
        }
    }
}

/// Creates or updates (server-side apply) the Validating- or MutatingWebhookConfiguration
/// `config` (its `kind` says which).
async fn apply_configuration(
    client: &kube::Client,
    config: &serde_json::Value,
) -> anyhow::Result<()> {
    let kind = config["kind"]
        .as_str()
        .unwrap_or("ValidatingWebhookConfiguration")
        .to_owned();
    let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", &kind);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk));
    let name = config["metadata"]["name"]
        .as_str()
        .unwrap_or("lien")
        .to_string();
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(config),
    )
    .await
    .with_context(|| format!("applying {kind} {name}"))?;
    Ok(())
}

/// Who Lien is to the API server: `configured`, else what a SelfSubjectReview says, else the
/// default install's service account. The mutating webhook lets only this user write replay
/// records, so a wrong answer can only refuse Lien's own records (loudly), never admit others'.
async fn own_username(client: &kube::Client, configured: Option<&str>) -> String {
    if let Some(name) = configured {
        return name.to_owned();
    }
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    match api
        .create(&Default::default(), &SelfSubjectReview::default())
        .await
    {
        Ok(review) => {
            if let Some(name) = review
                .status
                .and_then(|s| s.user_info)
                .and_then(|u| u.username)
                .filter(|n| !n.is_empty())
            {
                return name;
            }
            tracing::warn!("the SelfSubjectReview named no user");
        }
        Err(e) => {
            tracing::warn!(error = %e, "asking the API server who Lien is (SelfSubjectReview)")
        }
    }
    tracing::warn!(
        user = lien_webhook::mutate::LIEN_SERVICE_ACCOUNT,
        "taking Lien to be the default service account: if it is not, Lien's own replay records are refused by its mutating webhook (set --own-username)"
    );
    lien_webhook::mutate::LIEN_SERVICE_ACCOUNT.to_owned()
}

/// Installs Lien's CRDs (server-side apply), for the sandbox and for `lien run --install-crds`.
pub async fn install_crds(client: &kube::Client) -> anyhow::Result<()> {
    let api: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    for crd in lien_api::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .with_context(|| format!("installing CRD {name}"))?;
    }
    Ok(())
}

impl Lien {
    /// Starts the webhook and the controller against the cluster `client` talks to, and
    /// registers the webhook with the API server.
    pub async fn start(client: kube::Client, config: LienConfig) -> anyhow::Result<Lien> {
        let listener = TcpListener::bind(config.webhook_addr)
            .await
            .with_context(|| format!("binding the webhook to {}", config.webhook_addr))?;
        Self::start_with_listener(client, listener, config).await
    }

    /// As [`Lien::start`], serving the webhook on a listener already bound (its address must be
    /// known before the webhook configuration can name it).
    pub async fn start_with_listener(
        client: kube::Client,
        listener: TcpListener,
        config: LienConfig,
    ) -> anyhow::Result<Lien> {
        let index = Arc::new(RwLock::new(RelationIndex::new()));
        // The reconciler of Lien's webhook configuration sets this; the controller's statuses
        // read it.
        let (enforcement_tx, enforcement) = lien_controller::webhook_config::Enforcement::channel();
        let mut controller_config = ControllerConfig {
            webhook: enforcement,
            ..config.controller.clone()
        };
        if controller_config.replay_key.is_none() {
            // One process that is the only replica: a key in memory. Records it sealed are not
            // replayed after a restart (`lien run` loads a shared key instead).
            controller_config.replay_key =
                Some(lien_controller::ReplayKey::generate().context("generating a replay key")?);
        }
        // CascadeRules are reconciled by the controller too (one event loop, one write loop),
        // writing while this replica leads.
        let controller = Controller::new(client.clone(), index.clone(), controller_config.clone())
            .with_cascade(lien_controller::cascade::CascadeConfig {
                field_manager: FIELD_MANAGER.into(),
                reporter: kube::runtime::events::Reporter {
                    controller: controller_config.reporter.clone(),
                    instance: controller_config
                        .leader
                        .as_ref()
                        .map(|l| l.identity.clone()),
                },
                ..config.cascade.clone()
            });
        let (stop, stopped) = watch::channel(false);
        let mut tasks = Vec::new();

        let kinds = Arc::new(lien_controller::live::DiscoveryKinds::new());
        kinds
            .refresh(&client)
            .await
            .context("discovering the API server's kinds")?;
        // CRDs come and go; a Usage naming a kind installed later must be checked against it.
        tasks.push(tokio::spawn(refresh_kinds(
            client.clone(),
            kinds.clone(),
            controller.crd_changes(),
            stopped.clone(),
        )));

        let (records_tx, records_rx) = mpsc::channel(4096);
        tasks.push(tokio::spawn(forward_records(
            records_rx,
            controller.denial_sink(),
        )));

        let tls_settings = TlsSettings::new(config.webhook_names.clone());
        let certs = match &config.webhook_ca {
            WebhookCa::InMemory => {
                let certs = CertManager::new(tls_settings).context("creating the webhook's CA")?;
                // Rotate the serving certificate ahead of expiry; publish every new CA bundle.
                tasks.push(certs.spawn_rotation(Duration::from_secs(3600), stopped.clone()));
                certs.serving()
            }
            WebhookCa::Secret {
                namespace,
                name,
                sync_every,
            } => {
                let set =
                    crate::webhook_ca::load_or_create(&client, namespace, name, &tls_settings)
                        .await?;
                let certs =
                    CertManager::from_set(tls_settings, set, time::OffsetDateTime::now_utc())
                        .with_context(|| {
                            format!("serving from the CA set in Secret {namespace}/{name}")
                        })?;
                tasks.push(crate::webhook_ca::spawn_sync(
                    client.clone(),
                    namespace.clone(),
                    name.clone(),
                    certs.clone(),
                    controller.leader(),
                    *sync_every,
                    stopped.clone(),
                ));
                certs.serving()
            }
            WebhookCa::Files {
                cert,
                key,
                ca,
                reload_every,
            } => {
                let (c, k, b) = read_issued(cert, key, ca)?;
                let name = config.webhook_names.first().context(
                    "the webhook's name (its Service's DNS name, or --webhook-url's host)",
                )?;
                let issued = lien_webhook::IssuedCerts::from_pem(name, &c, &k, &b)
                    .context("serving the certificate of --tls-cert-file")?;
                tasks.push(spawn_issued_reload(
                    issued.clone(),
                    (cert.clone(), key.clone(), ca.clone()),
                    *reload_every,
                    stopped.clone(),
                ));
                issued.serving()
            }
        };
        let own_username = own_username(&client, config.own_username.as_deref()).await;
        tracing::info!(
            user = own_username,
            "Lien's identity, the only writer of replay records"
        );
        let replay_key = controller_config
            .replay_key
            .clone()
            .context("a replay key")?;
        let mut webhook = lien_webhook::Webhook::builder(index.clone())
            .policy(config.policy.clone())
            // Deletion requests (`kubectl lien delete --when-free`) are sealed with the
            // controller's key after a SubjectAccessReview for `delete` — asked whatever
            // --usage-access-check says: a replay runs with Lien's rights.
            .when_free(
                Arc::new(replay_key),
                Arc::new(lien_controller::live::ApiAccessCheck::new(client.clone())),
            )
            .own_username(own_username)
            .live_check(
                Arc::new(lien_controller::live::ApiLiveCheck::new(client.clone())),
                Duration::from_secs(3),
            )
            .kinds(kinds)
            .records(records_tx)
            .max_concurrency(
                config.webhook_max_concurrency,
                lien_webhook::DEFAULT_QUEUE_WAIT,
            )
            .unauthenticated_access_checks(config.webhook_unauthenticated_access_checks)
            // One `/metrics` for the process: the controller's beside the webhook's.
            .register_metrics(controller.metrics_registrar());
        if config.usage_access_check {
            // 3 s, like the live check: well inside the configuration's timeoutSeconds.
            webhook = webhook.access_check(
                Arc::new(lien_controller::live::ApiAccessCheck::new(client.clone())),
                Duration::from_secs(3),
            );
        } else {
            tracing::warn!(
                "--usage-access-check=false: any user who may create a Usage can protect any object"
            );
        }
        let tls = match &config.webhook_client_ca {
            Some(pem) => {
                let ca = ClientCa::from_pem(pem).context("--client-ca-file")?;
                webhook = webhook.review_auth(ReviewAuth::ClientCertificate);
                certs.server_config(Some(&ca)).context("webhook TLS")?
            }
            None => {
                tracing::warn!(
                    "no --client-ca-file: the webhook cannot tell the API server from any other client, so refused DELETEs are answered but not recorded — no replay, no DeletionRefused or BreakGlass events (metric lien_webhook_client_authentication{{mode=\"answer_only\"}}); see docs/ARCHITECTURE.md, \"Threat model\""
                );
                webhook = webhook.review_auth(ReviewAuth::AnswerOnly);
                certs.server_config(None).context("webhook TLS")?
            }
        };
        let webhook = webhook.build();
        // Ready (`/readyz`, so the Service routes to this replica) once the index is complete.
        let mut settled = controller.settled();
        let ready = webhook.clone();
        let mut ready_stop = stopped.clone();
        tasks.push(tokio::spawn(async move {
            tokio::select! {
                Ok(_) = settled.wait_for(|s| *s) => ready.set_ready(true),
                _ = ready_stop.changed() => {}
            }
        }));
        let server = Server::start(listener, tls, webhook.router())
            .context("starting the webhook server")?;
        let webhook_addr = server.addr();
        let options = ConfigurationOptions::new(config.webhook_client.clone());
        // The configuration as it should be: applied now, then kept by its reconciler and
        // rebuilt with every CA bundle.
        let desired = validating_webhook_configuration(&options, &certs.ca_bundle_base64());
        apply_configuration(&client, &desired).await?;
        let (desired_tx, desired_rx) = watch::channel(desired);
        let mutating = mutating_webhook_configuration(&options, &certs.ca_bundle_base64());
        apply_configuration(&client, &mutating).await?;
        let (mutating_tx, mutating_rx) = watch::channel(mutating);
        // A new CA bundle changes the desired configuration; the reconciler publishes it.
        let mut bundles = certs.watch_bundle();
        let mut bundle_stop = stopped.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = bundles.changed() => if changed.is_err() { return },
                    _ = bundle_stop.changed() => return,
                }
                // The watch carries PEM; `caBundle` is its base64.
                let bundle = lien_webhook::tls::ca_bundle_base64(&bundles.borrow_and_update());
                desired_tx.send_replace(validating_webhook_configuration(&options, &bundle));
                mutating_tx.send_replace(mutating_webhook_configuration(&options, &bundle));
            }
        }));
        // Deleted or edited, the configuration is restored, and Usages say so meanwhile.
        let reporter = kube::runtime::events::Reporter {
            controller: controller_config.reporter.clone(),
            instance: controller_config
                .leader
                .as_ref()
                .map(|l| l.identity.clone()),
        };
        let reconciler = lien_controller::webhook_config::Reconciler::new(
            client.clone(),
            desired_rx,
            enforcement_tx,
            controller.leader(),
            FIELD_MANAGER,
            reporter.clone(),
        );
        tasks.push(tokio::spawn(reconciler.run(stopped.clone())));
        // The mutating configuration, kept the same way. Protection does not rest on it, so its
        // drift is reported and restored but does not mark Usages unenforced: its flag goes
        // nowhere.
        let (mutating_enforcement, _) = lien_controller::webhook_config::Enforcement::channel();
        let reconciler = lien_controller::webhook_config::Reconciler::new(
            client.clone(),
            mutating_rx,
            mutating_enforcement,
            controller.leader(),
            FIELD_MANAGER,
            reporter.clone(),
        );
        tasks.push(tokio::spawn(reconciler.run(stopped.clone())));

        let mut controller_stop = stopped.clone();
        tasks.push(tokio::spawn(async move {
            let shutdown = async move {
                let _ = controller_stop.wait_for(|s| *s).await;
            };
            if let Err(e) = controller.run(shutdown).await {
                tracing::error!(error = %e, "the controller stopped");
            }
        }));
        Ok(Lien {
            webhook_addr,
            index,
            stop,
            tasks,
            server: Some(server),
        })
    }

    pub fn webhook_addr(&self) -> SocketAddr {
        self.webhook_addr
    }

    /// The relation index the webhook answers from.
    pub fn index(&self) -> Arc<RwLock<RelationIndex>> {
        self.index.clone()
    }

    /// Stops the controller (releasing its Lease) and the webhook.
    /// The tasks and the webhook's drain run together: the controller releases the Lease at
    /// once while reviews in flight are answered, and the task forwarding the webhook's records
    /// ends when the drained server drops the webhook (its channel's sender) instead of
    /// waiting out its timeout.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        let tasks = std::mem::take(&mut self.tasks);
        let server = self.server.take();
        let drain = async move {
            if let Some(server) = server {
                server.shutdown().await;
            }
        };
        let stop_tasks = async move {
            for t in tasks {
                let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
            }
        };
        tokio::join!(drain, stop_tasks);
    }
}

impl Drop for Lien {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// How a CRD change is followed: discovery is asked again until it shows a change, the first
/// time at once, then after these waits (doubling), ~6 s in all: kube-apiserver's discovery
/// follows a CRD's creation or deletion a moment after the CRD watch sees it.
const KIND_REFRESH_FIRST_RETRY: Duration = Duration::from_millis(50);
const KIND_REFRESH_LAST_RETRY: Duration = Duration::from_millis(3200);

/// Keeps the webhook's kind snapshot current until `stop`: CRDs come and go, and a Usage naming
/// a kind installed later must be checked against it. It follows the controller's CRD watch
/// (`Controller::crd_changes`, the process's one), not a watch of its own; changes that arrive
/// while a discovery runs are all seen by the next one.
///
/// A refresh made as the watch reports a change may find discovery as it was: on
/// kube-apiserver, apiextensions-apiserver's discovery controller adds or removes a CRD's
/// kind on its own a moment later (found on the real control plane: after a CRD's deletion,
/// Usages of its kind were still admitted a minute later, the snapshot having been refreshed
/// before discovery dropped the kind, and nothing refreshing it again). So a refresh that
/// changes nothing is retried, with backoff, until one does or [`KIND_REFRESH_LAST_RETRY`];
/// a CRD change that does not touch discovery (a status update) costs those few requests.
async fn refresh_kinds(
    client: kube::Client,
    kinds: Arc<lien_controller::live::DiscoveryKinds>,
    mut changes: watch::Receiver<u64>,
    mut stop: watch::Receiver<bool>,
) {
    let refresh = async {
        // `changed` marks the newest count seen: changes during a refresh make one more.
        'changes: while changes.changed().await.is_ok() {
            let mut retry = KIND_REFRESH_FIRST_RETRY;
            loop {
                match kinds.refresh_changed(&client).await {
                    Ok((_, true)) => continue 'changes,
                    Ok((_, false)) => {}
                    Err(e) => tracing::warn!(error = %e, "refreshing discovery"),
                }
                if retry > KIND_REFRESH_LAST_RETRY {
                    continue 'changes;
                }
                tokio::select! {
                    () = tokio::time::sleep(retry) => retry *= 2,
                    // Another change: follow it from the start.
                    changed = changes.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        retry = KIND_REFRESH_FIRST_RETRY;
                    }
                }
            }
        }
    };
    tokio::select! {
        _ = stop.changed() => {}
        () = refresh => {}
    }
}

/// `lien sandbox`: the embedded API server with Lien running inside it.
pub struct SandboxWithLien {
    pub sandbox: lien_sandbox::Sandbox,
    pub lien: Lien,
}

impl std::fmt::Debug for SandboxWithLien {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxWithLien").finish_non_exhaustive()
    }
}

/// A kube-rs client for the sandbox's admin.
pub async fn sandbox_client(sandbox: &lien_sandbox::Sandbox) -> anyhow::Result<kube::Client> {
    let kubeconfig: kube::config::Kubeconfig =
        serde_json::from_value(sandbox.kubeconfig()).context("sandbox kubeconfig")?;
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .context("client config for the sandbox")?;
    kube::Client::try_from(config).context("client for the sandbox")
}

impl SandboxWithLien {
    /// Starts a sandbox, installs Lien's CRDs and runs Lien in it, its webhook on 127.0.0.1,
    /// with the Usage access check on.
    pub async fn start(
        sandbox: lien_sandbox::SandboxConfig,
        controller: ControllerConfig,
    ) -> anyhow::Result<Self> {
        Self::start_with(sandbox, controller, true).await
    }

    /// As [`SandboxWithLien::start`], choosing whether the Usage access check runs.
    pub async fn start_with(
        sandbox: lien_sandbox::SandboxConfig,
        controller: ControllerConfig,
        usage_access_check: bool,
    ) -> anyhow::Result<Self> {
        let sandbox = lien_sandbox::Sandbox::start(sandbox)
            .await
            .context("starting the sandbox")?;
        let client = sandbox_client(&sandbox).await?;
        install_crds(&client).await?;
        // The webhook's address must be known before its configuration names it: bind first.
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the webhook")?;
        let addr = listener.local_addr().context("webhook address")?;
        let config = LienConfig {
            webhook_addr: addr,
            webhook_client: ClientConfig::Url(format!("https://{addr}/validate")),
            webhook_names: vec!["127.0.0.1".into(), "localhost".into()],
            policy: lien_webhook::validate::Policy::default(),
            controller,
            usage_access_check,
            // The sandbox presents a client certificate from its CA to every webhook.
            webhook_client_ca: Some(sandbox.ca().cert_pem().to_owned()),
            cascade: lien_controller::cascade::CascadeConfig::default(),
            // One process, one replica.
            webhook_ca: WebhookCa::InMemory,
            // The sandbox's admin, whom Lien runs as here (asked at start).
            own_username: None,
            webhook_max_concurrency: lien_webhook::DEFAULT_MAX_CONCURRENCY,
            webhook_unauthenticated_access_checks:
                lien_webhook::DEFAULT_UNAUTHENTICATED_CHECKS_PER_SECOND,
        };
        let lien = Lien::start_with_listener(client, listener, config).await?;
        Ok(SandboxWithLien { sandbox, lien })
    }

    pub async fn shutdown(self) {
        self.lien.shutdown().await;
        self.sandbox.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use lien_webhook::{
        ClientConfig, ConfigurationOptions, mutating_webhook_configuration,
        validating_webhook_configuration,
    };
    use serde_json::json;

    use lien_controller::webhook_config::drift;

    /// What the reconcilers keep is the configuration generated now: one installed by a Lien
    /// whose tamper, break-glass and seal hooks matched `*` (main resources only, so writes
    /// through `status` went unseen) departs from it, and is replaced whole at the next round.
    #[test]
    fn hooks_installed_without_subresources_are_drift_and_restored() {
        let opts = ConfigurationOptions::new(ClientConfig::Service {
            namespace: "lien-system".into(),
            name: "lien-webhook".into(),
            port: 443,
        });
        let desired = validating_webhook_configuration(&opts, "Q0E=");
        assert_eq!(drift(&desired, Some(&desired)), None);
        let mut older = desired.clone();
        for hook in older["webhooks"].as_array_mut().expect("webhooks") {
            if matches!(
                hook["name"].as_str(),
                Some("tamper.lien.dev" | "break-glass.lien.dev")
            ) {
                hook["rules"][0]["resources"] = json!(["*"]);
            }
        }
        let found = drift(&desired, Some(&older)).expect("drift");
        assert!(
            found.contains("webhooks[tamper.lien.dev].rules differs")
                && found.contains("webhooks[break-glass.lien.dev].rules differs"),
            "{found}"
        );
        let desired = mutating_webhook_configuration(&opts, "Q0E=");
        let mut older = desired.clone();
        older["webhooks"][0]["rules"] = json!([{"operations": ["UPDATE"], "apiGroups": ["*"],
            "apiVersions": ["*"], "resources": ["*"], "scope": "*"}]);
        let found = drift(&desired, Some(&older)).expect("drift");
        assert!(
            found.starts_with("MutatingWebhookConfiguration lien was changed")
                && found.contains("webhooks[seal.lien.dev].rules differs"),
            "{found}"
        );
    }
}
