//! `lien sandbox`: the embedded API server, until Ctrl-C.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use lien_sandbox::{Sandbox, SandboxConfig};

#[derive(Debug, Args)]
pub struct SandboxArgs {
    /// Port on 127.0.0.1 to serve the API on (0 picks a free one).
    #[arg(long, default_value_t = 6443, env = "LIEN_SANDBOX_PORT")]
    pub port: u16,
    /// Where to write the kubeconfig for kubectl and clients.
    #[arg(
        long,
        default_value = "lien-sandbox.kubeconfig",
        env = "LIEN_SANDBOX_KUBECONFIG"
    )]
    pub kubeconfig: PathBuf,
}

pub async fn run(args: SandboxArgs) -> anyhow::Result<()> {
    let sandbox = Sandbox::start(SandboxConfig {
        port: args.port,
        ..Default::default()
    })
    .await
    .context("starting the sandbox API server")?;
    sandbox.write_kubeconfig(&args.kubeconfig)?;
    let kubeconfig = args.kubeconfig.display();
    println!("Lien sandbox API server listening on {}", sandbox.url());
    println!(
        "Kubeconfig written to {kubeconfig} (contexts: sandbox = admin, sandbox-user = a second user)."
    );
    println!();
    println!("Try:");
    println!("  export KUBECONFIG={kubeconfig}");
    println!("  kubectl get namespaces");
    // Not `kubectl create configmap`: kubectl's generators send protobuf, which the sandbox
    // does not speak; manifests (JSON or YAML) work.
    println!(
        r#"  echo '{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"demo"}},"data":{{"a":"b"}}}}' | kubectl apply -f -"#
    );
    println!("  kubectl get configmaps --context sandbox-user");
    println!();
    println!("Ctrl-C stops it.");
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    println!("Shutting down.");
    sandbox.shutdown().await;
    Ok(())
}
