//! `lien sandbox`: the embedded API server with Lien running inside it, until Ctrl-C.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use lien::runtime::SandboxWithLien;
use lien_controller::ControllerConfig;
use lien_sandbox::apiserver::Authorization;
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
    /// Run the API server alone, without Lien.
    #[arg(long)]
    pub no_lien: bool,
    /// How the API server authorizes requests: `AlwaysAllow` (every authenticated user may do
    /// everything) or `RBAC` (Roles, ClusterRoles and their bindings, as kube-apiserver's
    /// `--authorization-mode=RBAC`; `system:masters` may do everything).
    #[arg(long, default_value = "AlwaysAllow", value_parser = parse_authorization)]
    pub authorization_mode: Authorization,
    /// Refuse a Usage whose creator may not `update` the object in its `spec.of`.
    /// `--usage-access-check=false` turns the check off.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub usage_access_check: bool,
}

fn parse_authorization(mode: &str) -> Result<Authorization, String> {
    mode.parse()
}

pub async fn run(args: SandboxArgs) -> anyhow::Result<()> {
    let mut config = SandboxConfig {
        port: args.port,
        ..Default::default()
    };
    config.api.authorization = args.authorization_mode;
    let (sandbox, lien) = if args.no_lien {
        (
            Sandbox::start(config)
                .await
                .context("starting the sandbox API server")?,
            None,
        )
    } else {
        // One process, one replica: no leader election needed.
        let controller = ControllerConfig {
            leader: None,
            ..Default::default()
        };
        let both = SandboxWithLien::start_with(config, controller, args.usage_access_check).await?;
        (both.sandbox, Some(both.lien))
    };
    sandbox.write_kubeconfig(&args.kubeconfig)?;
    let kubeconfig = args.kubeconfig.display();
    println!("Lien sandbox API server listening on {}", sandbox.url());
    if let Some(lien) = &lien {
        println!(
            "Lien is running inside it (webhook on {}).",
            lien.webhook_addr()
        );
    }
    println!(
        "Kubeconfig written to {kubeconfig} (contexts: sandbox = admin, sandbox-user = a second user)."
    );
    println!();
    println!("Try:");
    println!("  export KUBECONFIG={kubeconfig}");
    println!("  kubectl get namespaces");
    println!("  kubectl apply -f examples/usage-protect-by-reason.yaml");
    println!("  kubectl delete configmap production-settings     # refused: it is protected");
    println!();
    println!("Ctrl-C stops it.");
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    println!("Shutting down.");
    if let Some(lien) = lien {
        lien.shutdown().await;
    }
    sandbox.shutdown().await;
    Ok(())
}
