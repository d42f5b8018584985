//! The command line: one binary, one subcommand per way of running Lien.

mod cluster;
mod complete;
mod completion;
mod crds;
mod manifests;
mod plugin;
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
    /// Every relation holding an object (who uses it, through which Usage or rule, why), the
    /// refused DELETE recorded for replay, and what to do.
    Why(plugin::WhyArgs),
    /// One object as a tree: what uses it (and what uses those), what it uses, each with its
    /// status and the Usage or rule that relates them; --watch draws it again as it changes.
    Tree(plugin::TreeArgs),
    /// The "X is used by Y" graph as DOT, Mermaid, SVG or JSON.
    Graph(plugin::GraphArgs),
    /// A safe deletion order (users before what they use), in numbered steps; --apply performs
    /// it.
    Plan(plugin::PlanArgs),
    /// Delete an object; with --when-free, if Lien refuses because it is in use, Lien deletes
    /// it once it is free.
    Delete(plugin::DeleteArgs),
    /// Whether Lien is enforcing right now: its webhook configuration, whether the webhook
    /// answers, replicas and leader, client authentication, CA expiry, version, and how many
    /// Usages and rules are Ready. Exit status 0 only when enforced.
    Status(plugin::StatusArgs),
    /// Print a shell completion script (bash, zsh or fish).
    Completion(completion::CompletionArgs),
}

/// The name the binary answers to as a kubectl plugin (`kubectl lien …` runs `kubectl-lien`).
const PLUGIN_BIN: &str = "kubectl-lien";

/// Whether the binary was started as `kubectl-lien` (argv[0]): then it is the kubectl plugin,
/// named `kubectl lien` in help and offering the plugin commands only.
fn invoked_as_plugin() -> bool {
    invoked_as().is_some_and(|stem| stem == PLUGIN_BIN)
}

/// The name the binary was started under (argv[0]'s file stem).
fn invoked_as() -> Option<String> {
    std::env::args_os()
        .next()
        .map(std::path::PathBuf::from)
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
}

/// A completion request, if this is one: started as `kubectl_complete-lien` (kubectl's
/// plugin completion: every argument is the request), or `… __complete ARGS…` (cobra's
/// protocol, as `kubectl __complete` speaks it). Returns the request's words and whether to
/// offer the plugin commands only.
fn completion_request() -> Option<(Vec<String>, bool)> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if invoked_as().is_some_and(|stem| stem == complete::COMPLETE_BIN) {
        return Some((args, true));
    }
    (args.first().map(String::as_str) == Some(complete::COMPLETE_CMD))
        .then(|| (args, invoked_as_plugin()))
}

fn parse() -> (Cli, bool) {
    use clap::{CommandFactory, FromArgMatches};
    let as_plugin = invoked_as_plugin();
    let mut cmd = Cli::command();
    if as_plugin {
        cmd = cmd.name(PLUGIN_BIN).bin_name("kubectl lien").about(
            "kubectl lien: why is this object blocked, the dependency graph, a safe deletion order, delete when free",
        );
        for hidden in ["sandbox", "run", "crds", "manifests", "uninstall"] {
            cmd = cmd.mut_subcommand(hidden, |s| s.hide(true));
        }
    }
    let matches = cmd.get_matches();
    match Cli::from_arg_matches(&matches) {
        Ok(cli) => (cli, as_plugin),
        Err(e) => e.exit(),
    }
}

pub fn main() -> std::process::ExitCode {
    if let Some((words, as_plugin)) = completion_request() {
        // No logging: whatever goes wrong, the prompt gets candidates or nothing.
        return match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt.block_on(complete::run(words, as_plugin)),
            Err(_) => std::process::ExitCode::FAILURE,
        };
    }
    let (cli, as_plugin) = parse();
    // The plugin commands print their answer; only warnings belong on stderr.
    let quiet = matches!(
        cli.command,
        Command::Why(_)
            | Command::Tree(_)
            | Command::Graph(_)
            | Command::Plan(_)
            | Command::Delete(_)
            | Command::Status(_)
            | Command::Completion(_)
    );
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        // kube's HTTP layer logs every failed request at ERROR before the caller sees the
        // error; the caller says it once, in its own words (the unreachable API server at
        // startup is one line, not two).
        tracing_subscriber::EnvFilter::new(if quiet {
            "warn,kube_client::client::builder=off"
        } else {
            "info,kube_client::client::builder=off"
        })
    });
    // Colour codes only for a person at a terminal: in a pod's log, a file or a pipe they are
    // noise that breaks grep.
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
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
            // The plugin commands print their errors as kubectl does and choose the exit code.
            Command::Why(args) => Err(Exit(plugin::why(args).await)),
            Command::Tree(args) => Err(Exit(plugin::tree(args).await)),
            Command::Graph(args) => Err(Exit(plugin::graph(args).await)),
            Command::Plan(args) => Err(Exit(plugin::plan(args).await)),
            Command::Delete(args) => Err(Exit(plugin::delete(args).await)),
            Command::Status(args) => Err(Exit(plugin::status(args).await)),
            Command::Completion(args) => {
                completion::run(args, if as_plugin { PLUGIN_BIN } else { "lien" }).map_err(Fail)
            }
            Command::Sandbox(args) => sandbox::run(args).await.map_err(Fail),
            Command::Crds(args) => crds::run(args).map_err(Fail),
            Command::Manifests(args) => manifests::run(args).map_err(Fail),
            Command::Run(args) => run::run(*args).await.map_err(Fail),
            Command::Uninstall(args) => uninstall::run(args).await.map_err(Fail),
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(Exit(code)) => code,
        Err(Fail(e)) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// How a command ended other than with success.
enum Ended {
    /// An exit code chosen by the command, its message already printed.
    Exit(std::process::ExitCode),
    /// An error to print.
    Fail(anyhow::Error),
}
use Ended::{Exit, Fail};

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn completion_scripts_ask_the_binary_under_the_name_it_was_started_as() {
        // What they offer is `__complete`'s answer (complete.rs; tests/cli.rs runs each shell);
        // here: each script is registered for `kubectl-lien` as krew installs it, asks the
        // command typed, and names its functions without the `-` bash and fish may refuse.
        for (shell, registers) in [
            ("bash", "-F _kubectl_lien_complete kubectl-lien"),
            ("zsh", "compdef _kubectl_lien kubectl-lien"),
            ("fish", "complete -c kubectl-lien -n __kubectl_lien_prepare"),
        ] {
            let script = completion::script(shell, "kubectl-lien");
            assert!(script.contains(registers), "{shell}: {script}");
            assert!(script.contains(" __complete "), "{shell}: {script}");
            assert!(
                !script.contains("@BIN@") && !script.contains("@FUNC@"),
                "{script}"
            );
        }
    }

    #[test]
    fn plugin_commands_take_kubectl_flags() {
        let cli = Cli::try_parse_from([
            "lien",
            "graph",
            "-A",
            "--context",
            "prod",
            "--kubeconfig",
            "/k",
            "-o",
            "svg",
        ])
        .expect("parses");
        let Command::Graph(g) = cli.command else {
            panic!("not graph")
        };
        assert!(g.kube.all_namespaces);
        assert_eq!(g.kube.context.as_deref(), Some("prod"));
        assert!(matches!(g.output, plugin::GraphFormat::Svg));
        let cli = Cli::try_parse_from(["lien", "why", "cm", "x", "-n", "shop"]).expect("parses");
        let Command::Why(w) = cli.command else {
            panic!("not why")
        };
        assert_eq!(w.object, ["cm", "x"]);
        assert_eq!(w.kube.namespace.as_deref(), Some("shop"));
        assert!(Cli::try_parse_from(["lien", "why", "a", "b", "c"]).is_err());
        let cli = Cli::try_parse_from([
            "lien",
            "delete",
            "--when-free",
            "cm/settings",
            "-n",
            "shop",
            "--cascade=foreground",
        ])
        .expect("parses");
        let Command::Delete(d) = cli.command else {
            panic!("not delete")
        };
        assert!(d.when_free);
        assert_eq!(d.object, ["cm/settings"]);
        assert_eq!(d.cascade.policy(), "Foreground");
        assert_eq!(d.kube.namespace.as_deref(), Some("shop"));
    }
}
