//! Shared by the conformance tests: a sandbox per test (own port, own state), a kube-rs client
//! for it, and waiting for a condition with a deadline (never sleeping as synchronisation).

#![allow(dead_code)]

use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use lien_sandbox::apiserver::Config;
use lien_sandbox::{Sandbox, SandboxConfig};

/// A sandbox with kube-controller-manager's retry delays shortened so tests finish quickly:
/// the GC backs off from 5 ms to 200 ms instead of 1000 s.
pub async fn sandbox() -> Sandbox {
    sandbox_with(|_| {}).await
}

pub async fn sandbox_with(tune: impl FnOnce(&mut Config)) -> Sandbox {
    let mut api = Config {
        gc_backoff_max: Duration::from_millis(200),
        namespace_requeue: Duration::from_millis(50),
        ..Config::default()
    };
    tune(&mut api);
    let sandbox = Sandbox::start(SandboxConfig { port: 0, api })
        .await
        .expect("sandbox starts");
    settled(&sandbox).await;
    sandbox
}

/// The ConfigMap kube-controller-manager's root-ca-cert-publisher puts in every namespace, as on
/// any cluster: tests that count a namespace's ConfigMaps leave it out.
pub const ROOT_CA: &str = "kube-root-ca.crt";

/// Waits until kube-controller-manager's bootstrap objects are in the initial namespaces, as a
/// cluster's are by the time anyone uses it, so they do not show up in a test's watch.
async fn settled(sandbox: &Sandbox) {
    let api = sandbox.api().clone();
    wait_for(
        "the initial namespaces' bootstrap objects",
        Duration::from_secs(10),
        || {
            let api = api.clone();
            async move {
                let rt = api.resolve("", "v1", "configmaps")?;
                ["default", "kube-system", "kube-public", "kube-node-lease"]
                    .iter()
                    .all(|ns| {
                        api.get(&lien_sandbox::apiserver::Target::new(
                            rt.clone(),
                            "v1",
                            ns,
                            ROOT_CA,
                        ))
                        .is_ok()
                    })
                    .then_some(())
            }
        },
    )
    .await;
}

/// A client for a context of the sandbox's kubeconfig (`sandbox` = admin, `sandbox-user`).
pub async fn client_for(sandbox: &Sandbox, context: &str) -> kube::Client {
    let kubeconfig: Kubeconfig =
        serde_json::from_value(sandbox.kubeconfig()).expect("kubeconfig parses");
    let options = KubeConfigOptions {
        context: Some(context.to_string()),
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .expect("client config");
    kube::Client::try_from(config).expect("client")
}

pub async fn client(sandbox: &Sandbox) -> kube::Client {
    client_for(sandbox, "sandbox").await
}

// Not every test binary waits for something.
#[allow(unused_imports)]
pub use lien_sandbox::testing::wait_for;
