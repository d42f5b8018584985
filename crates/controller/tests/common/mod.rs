//! A sandbox per test with Lien's CRDs installed, a controller running against it, and waiting
//! for a condition with a deadline (never sleeping as synchronisation).

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use lien_controller::{Controller, ControllerConfig, DenialSink};
use lien_core::RelationIndex;
use lien_sandbox::apiserver::Config;
use lien_sandbox::{Sandbox, SandboxConfig};
use parking_lot::RwLock;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const DEADLINE: Duration = Duration::from_secs(20);

/// A sandbox whose garbage collector retries quickly, with Lien's CRDs established.
pub async fn sandbox() -> (Sandbox, kube::Client) {
    let api = Config {
        gc_backoff_max: Duration::from_millis(200),
        namespace_requeue: Duration::from_millis(50),
        ..Config::default()
    };
    let sandbox = Sandbox::start(SandboxConfig { port: 0, api })
        .await
        .expect("sandbox starts");
    let kubeconfig: Kubeconfig =
        serde_json::from_value(sandbox.kubeconfig()).expect("kubeconfig parses");
    let options = KubeConfigOptions {
        context: Some("sandbox".into()),
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .expect("client config");
    let client = kube::Client::try_from(config).expect("client");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in lien_api::crds() {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("crd created");
    }
    let usages: Api<lien_api::Usage> = Api::all(client.clone());
    let cus: Api<lien_api::ClusterUsage> = Api::all(client.clone());
    wait_for("the CRDs to be served", DEADLINE, || async {
        (usages.list(&ListParams::default()).await.is_ok()
            && cus.list(&ListParams::default()).await.is_ok())
        .then_some(())
    })
    .await;
    (sandbox, client)
}

/// A running controller; `stop` shuts it down gracefully.
pub struct Running {
    pub index: Arc<RwLock<RelationIndex>>,
    pub denials: DenialSink,
    pub leader: tokio::sync::watch::Receiver<bool>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Running {
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.task.await.expect("controller task");
    }
}

/// One replay key per test process: a controller started again (a restart) or alongside (a
/// replica) seals and verifies with the same key, as `lien run`'s Secret makes them.
pub fn replay_key() -> lien_controller::ReplayKey {
    static KEY: std::sync::OnceLock<lien_controller::ReplayKey> = std::sync::OnceLock::new();
    KEY.get_or_init(|| lien_controller::ReplayKey::generate().expect("a replay key"))
        .clone()
}

pub fn test_config() -> ControllerConfig {
    ControllerConfig {
        leader: None,
        retry_base: Duration::from_millis(20),
        retry_max: Duration::from_millis(500),
        replay_key: Some(replay_key()),
        ..ControllerConfig::default()
    }
}

pub fn start(client: &kube::Client, config: ControllerConfig) -> Running {
    let index = Arc::new(RwLock::new(RelationIndex::new()));
    let controller = Controller::new(client.clone(), index.clone(), config);
    let denials = controller.denial_sink();
    let leader = controller.leader();
    let (tx, rx) = oneshot::channel();
    let task = tokio::spawn(async move {
        controller
            .run(async {
                let _ = rx.await;
            })
            .await
            .expect("controller runs");
    });
    Running {
        index,
        denials,
        leader,
        stop: Some(tx),
        task,
    }
}

// Not every test binary waits for something.
#[allow(unused_imports)]
pub use lien_sandbox::testing::wait_for;

pub async fn create_cm(client: &kube::Client, ns: &str, name: &str, labels: Value) -> ConfigMap {
    create_cm_with(client, ns, name, json!({"labels": labels})).await
}

pub async fn create_cm_with(client: &kube::Client, ns: &str, name: &str, meta: Value) -> ConfigMap {
    let mut meta = meta;
    meta["name"] = json!(name);
    let cm: ConfigMap =
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}))
            .expect("configmap");
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &cm)
        .await
        .expect("configmap created")
}

pub async fn create_usage(client: &kube::Client, ns: &str, usage: Value) -> lien_api::Usage {
    let mut usage = usage;
    usage["apiVersion"] = json!("lien.dev/v1alpha1");
    usage["kind"] = json!("Usage");
    let u: lien_api::Usage = serde_json::from_value(usage).expect("usage");
    Api::<lien_api::Usage>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &u)
        .await
        .expect("usage created")
}

/// A reason-only Usage `name` in `ns` of the ConfigMap `cm` there.
pub async fn protect_cm(
    client: &kube::Client,
    ns: &str,
    name: &str,
    cm: &str,
    reason: &str,
) -> lien_api::Usage {
    create_usage(
        client,
        ns,
        json!({"metadata": {"name": name}, "spec": {
            "of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": cm}},
            "reason": reason}}),
    )
    .await
}

pub fn in_use(cm: &ConfigMap) -> bool {
    cm.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(lien_api::IN_USE_LABEL))
        .is_some_and(|v| v == "true")
}

/// Waits until the ConfigMap's label is `want`.
pub async fn wait_label(client: &kube::Client, ns: &str, name: &str, want: bool) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    wait_for(
        &format!("{ns}/{name} in-use label = {want}"),
        DEADLINE,
        || async {
            api.get(name)
                .await
                .ok()
                .filter(|cm| in_use(cm) == want)
                .map(drop)
        },
    )
    .await;
}

/// The condition `type_` of a Usage: (status, reason).
pub fn condition(u: &lien_api::Usage, type_: &str) -> Option<(String, String)> {
    u.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}
