//! `lien sandbox`: the embedded API server with Lien running inside it, until Ctrl-C.

use std::net::SocketAddr;
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
    /// Send webhook calls for a Service to local addresses:
    /// `NAMESPACE/NAME=HOST:PORT[,HOST:PORT…]` (repeatable). The addresses are tried in order
    /// and one that refuses the connection is skipped, as kube-proxy skips a not-ready
    /// endpoint. With `--no-lien`, this is how `lien run` replicas on this machine serve the
    /// sandbox's webhook calls (`--service lien-system/lien-webhook=127.0.0.1:8443`).
    #[arg(long = "service", value_name = "NS/NAME=ADDRS", value_parser = parse_service)]
    pub services: Vec<ServiceEndpoints>,
}

/// One `--service` mapping.
#[derive(Debug, Clone)]
pub struct ServiceEndpoints {
    namespace: String,
    name: String,
    addrs: Vec<SocketAddr>,
}

fn parse_service(text: &str) -> Result<ServiceEndpoints, String> {
    let usage = "expected NAMESPACE/NAME=HOST:PORT[,HOST:PORT…], e.g. lien-system/lien-webhook=127.0.0.1:8443";
    let (service, addrs) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?}: no '=': {usage}"))?;
    let (namespace, name) = service
        .split_once('/')
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty())
        .ok_or_else(|| format!("{service:?}: not NAMESPACE/NAME: {usage}"))?;
    let addrs = addrs
        .split(',')
        .map(|a| {
            a.trim()
                .parse::<SocketAddr>()
                .map_err(|e| format!("{a:?}: not HOST:PORT ({e}): {usage}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ServiceEndpoints {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        addrs,
    })
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
    for service in args.services {
        config
            .api
            .webhook_services
            .insert((service.namespace, service.name), service.addrs);
    }
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
    lien::outln!("Lien sandbox API server listening on {}", sandbox.url());
    if let Some(lien) = &lien {
        lien::outln!(
            "Lien is running inside it (webhook on {}).",
            lien.webhook_addr()
        );
    }
    lien::outln!(
        "Kubeconfig written to {kubeconfig} (contexts: sandbox = admin, sandbox-user = a second user)."
    );
    lien::outln!();
    lien::outln!("Try:");
    lien::outln!("  export KUBECONFIG={kubeconfig}");
    lien::outln!("  kubectl get namespaces");
    lien::outln!("  kubectl apply -f examples/usage-protect-by-reason.yaml");
    lien::outln!("  kubectl delete configmap production-settings     # refused: it is protected");
    lien::outln!();
    lien::outln!("Ctrl-C stops it.");
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    lien::outln!("Shutting down.");
    if let Some(lien) = lien {
        lien.shutdown().await;
    }
    sandbox.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_service;

    #[test]
    fn service_mappings_parse_and_bad_ones_say_what_is_expected() {
        let s = parse_service("lien-system/lien-webhook=127.0.0.1:8443,127.0.0.1:8444")
            .expect("parses");
        assert_eq!(
            (s.namespace.as_str(), s.name.as_str()),
            ("lien-system", "lien-webhook")
        );
        assert_eq!(s.addrs.len(), 2);
        for bad in [
            "lien-webhook=127.0.0.1:1",
            "lien-system/lien-webhook",
            "lien-system/lien-webhook=localhost",
            "/x=127.0.0.1:1",
        ] {
            let err = parse_service(bad).expect_err(bad);
            assert!(err.contains("NAMESPACE/NAME=HOST:PORT"), "{err}");
        }
    }
}
