//! The command line: one binary, one subcommand per way of running Lien.

mod crds;
mod manifests;
mod run;
mod sandbox;
mod uninstall;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "lien",
    version,
    about = "Lien makes deletion safe in Kubernetes"
)]
pub struct Cli {
    /// How log lines are written to stderr: `text` for people, `json` (one object per line)
    /// for log pipelines.
    #[arg(long, global = true, default_value = "text", env = "LIEN_LOG_FORMAT")]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (timestamp, level, target, fields, span).
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run an embedded Kubernetes API server on 127.0.0.1: try everything with the real kubectl,
    /// no cluster needed.
    Sandbox(sandbox::SandboxArgs),
    /// Run Lien (controller and admission webhook) against a cluster.
    Run(Box<run::RunArgs>),
    /// Print the CustomResourceDefinitions Lien installs (or write one file per CRD).
    Crds(crds::CrdsArgs),
    /// Print the complete install (namespace, RBAC, CRDs, Deployment, Service, disruption
    /// budget), or write it as the files of `deploy/`.
    Manifests(manifests::ManifestsArgs),
    /// Remove Lien from the cluster: stop it, its webhook configuration, its labels, records
    /// and finalizers on every object, its objects and CRDs (refused while something is
    /// protected, unless --force).
    Uninstall(uninstall::UninstallArgs),
}

pub fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().with_current_span(true).init(),
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Sandbox(args) => sandbox::run(args).await,
            Command::Crds(args) => crds::run(args),
            Command::Manifests(args) => manifests::run(args),
            Command::Run(args) => run::run(*args).await,
            Command::Uninstall(args) => uninstall::run(args).await,
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
