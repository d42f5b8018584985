//! Dynamic completion, in cobra's `__complete` protocol, which kubectl speaks: `kubectl lien
//! <TAB>` makes kubectl (≥ 1.26) run `kubectl_complete-lien ARGS… WORD` (the words after
//! `lien`, the last one being completed, `""` for a fresh word) and read one candidate per
//! line (`value<TAB>description`) then `:<directive>`. The binary answers when started as
//! `kubectl_complete-lien` (a link, as for `kubectl-lien`), and as `lien __complete …` /
//! `kubectl lien __complete …`.
//!
//! Subcommands and flags come from the clap definition (never drifting from it); flag values
//! from their possible values, contexts from the kubeconfig; types (`configmaps`,
//! `deployments.apps`), object names (`configmap/<TAB>`, `cm <TAB>`) and namespaces (`-n
//! <TAB>`) from the cluster, through the user's kubeconfig as the commands read it. A cluster
//! that cannot be asked yields no candidates, never an error on the user's prompt.

use std::time::Duration;

use clap::CommandFactory as _;
use lien::plugin::read::{self, Connection, Discovery};

/// The argv[0] kubectl runs for plugin completion.
pub const COMPLETE_BIN: &str = "kubectl_complete-lien";

/// The hidden subcommand cobra's scripts call.
pub const COMPLETE_CMD: &str = "__complete";

/// cobra's `ShellCompDirectiveNoFileComp`: no file names after these candidates.
const NO_FILES: u8 = 4;
/// cobra's `ShellCompDirectiveDefault`: the shell may complete file names.
const FILES: u8 = 0;

/// How long completion may wait on the cluster: a prompt must not hang.
const CLUSTER_TIMEOUT: Duration = Duration::from_secs(5);

/// The commands offered as the plugin.
const PLUGIN_COMMANDS: [&str; 7] = [
    "why",
    "tree",
    "graph",
    "plan",
    "delete",
    "status",
    "completion",
];

/// What the words typed so far ask to be completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    /// A subcommand.
    Subcommand,
    /// A flag of the subcommand (or of the root).
    Flag,
    /// The value of a flag with fixed values (`-o`, `--cascade`, `--log-format`).
    Values(Vec<(String, String)>),
    /// A file name (`--kubeconfig`, `-f`).
    File,
    /// A namespace.
    Namespace,
    /// A kubeconfig context.
    Context,
    /// A type (`configmaps`), or `TYPE/NAME` once a `/` is typed.
    TypeOrObject,
    /// A name of objects of this type (`cm <TAB>`).
    Name(String),
    /// Nothing to offer.
    Nothing,
}

/// The words typed, read as the command would read them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Typed {
    pub subcommand: Option<String>,
    pub positionals: Vec<String>,
    pub namespace: Option<String>,
    pub context: Option<String>,
    pub kubeconfig: Option<String>,
}

fn takes_value(arg: &clap::Arg) -> bool {
    arg.get_action().takes_values()
}

fn find_flag<'a>(cmd: &'a clap::Command, word: &str) -> Option<&'a clap::Arg> {
    let flag = word.split_once('=').map_or(word, |(f, _)| f);
    cmd.get_arguments().find(|a| {
        if let Some(long) = flag.strip_prefix("--") {
            a.get_long() == Some(long)
        } else if let Some(short) = flag.strip_prefix('-') {
            let mut chars = short.chars();
            matches!((chars.next(), chars.next()), (Some(c), None) if a.get_short() == Some(c))
        } else {
            false
        }
    })
}

/// Reads `words` (before the one being completed) against `root`, and decides what `current`
/// should be completed to. Pure.
pub fn analyse(root: &clap::Command, words: &[String], current: &str) -> (Typed, Want) {
    let mut typed = Typed::default();
    let mut cmd = root;
    let mut pending: Option<&clap::Arg> = None;
    for word in words {
        if let Some(arg) = pending.take() {
            record(&mut typed, arg, word);
            continue;
        }
        if word.starts_with('-') && word.len() > 1 {
            if let Some(arg) = find_flag(cmd, word) {
                match word.split_once('=') {
                    Some((_, value)) => record(&mut typed, arg, value),
                    None if takes_value(arg) => pending = Some(arg),
                    None => {}
                }
            }
            continue;
        }
        match (&typed.subcommand, cmd.find_subcommand(word)) {
            (None, Some(sub)) => {
                typed.subcommand = Some(word.clone());
                cmd = sub;
            }
            _ => typed.positionals.push(word.clone()),
        }
    }
    let want = if let Some(arg) = pending {
        value_want(arg)
    } else if current.starts_with('-') {
        match current.split_once('=') {
            Some((flag, _)) => find_flag(cmd, flag).map_or(Want::Nothing, value_want),
            None => Want::Flag,
        }
    } else {
        match typed.subcommand.as_deref() {
            None => Want::Subcommand,
            Some("completion") if typed.positionals.is_empty() => Want::Values(
                ["bash", "zsh", "fish"]
                    .map(|s| (s.to_owned(), String::new()))
                    .to_vec(),
            ),
            Some("why" | "tree" | "delete") if typed.positionals.len() >= 2 => Want::Nothing,
            Some("why" | "tree" | "delete" | "graph" | "plan") => match typed.positionals.first() {
                // `TYPE NAME…`: names of that type.
                Some(ty) if !ty.contains('/') => Want::Name(ty.clone()),
                _ => Want::TypeOrObject,
            },
            _ => Want::Nothing,
        }
    };
    (typed, want)
}

fn record(typed: &mut Typed, arg: &clap::Arg, value: &str) {
    match arg.get_id().as_str() {
        "namespace" => typed.namespace = Some(value.to_owned()),
        "context" => typed.context = Some(value.to_owned()),
        "kubeconfig" => typed.kubeconfig = Some(value.to_owned()),
        _ => {}
    }
}

fn value_want(arg: &clap::Arg) -> Want {
    match arg.get_id().as_str() {
        "namespace" => return Want::Namespace,
        "context" => return Want::Context,
        _ => {}
    }
    let values = arg.get_possible_values();
    if !values.is_empty() {
        return Want::Values(
            values
                .iter()
                .filter(|v| !v.is_hide_set())
                .map(|v| {
                    (
                        v.get_name().to_owned(),
                        v.get_help().map(ToString::to_string).unwrap_or_default(),
                    )
                })
                .collect(),
        );
    }
    match arg.get_value_hint() {
        clap::ValueHint::FilePath | clap::ValueHint::AnyPath | clap::ValueHint::DirPath => {
            Want::File
        }
        _ if matches!(arg.get_id().as_str(), "kubeconfig" | "file") => Want::File,
        _ => Want::Nothing,
    }
}

/// The first line of a help text: what a candidate's description shows.
fn first_line(text: Option<&clap::builder::StyledStr>) -> String {
    text.map(|t| t.to_string())
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// cobra's output: `value\tdescription` lines starting with `current`, then `:directive`.
pub fn render(candidates: &[(String, String)], current: &str, directive: u8) -> String {
    let mut out = String::new();
    for (value, help) in candidates.iter().filter(|(v, _)| v.starts_with(current)) {
        out.push_str(value);
        if !help.is_empty() {
            out.push('\t');
            out.push_str(&help.replace(['\t', '\n'], " "));
        }
        out.push('\n');
    }
    out.push_str(&format!(":{directive}\n"));
    out
}

/// Candidates read from the cluster (types, names, namespaces); empty when it cannot be
/// asked.
async fn from_cluster(typed: &Typed, want: &Want, current: &str) -> Vec<(String, String)> {
    let conn = Connection {
        kubeconfig: typed.kubeconfig.clone().map(Into::into),
        context: typed.context.clone(),
    };
    let ask = async {
        let (client, default_ns) = read::connect(&conn).await.ok()?;
        let namespace = typed.namespace.clone().unwrap_or(default_ns);
        let discovery = Discovery::read(&client).await.ok()?;
        let names = |ty: &str| {
            let client = client.clone();
            let resource = discovery.resolve_type(ty).ok().cloned();
            let namespace = namespace.clone();
            async move {
                let r = resource?;
                let api: kube::Api<kube::api::DynamicObject> = if r.namespaced {
                    kube::Api::namespaced_with(client, &namespace, &r.api)
                } else {
                    kube::Api::all_with(client, &r.api)
                };
                let list = api.list_metadata(&Default::default()).await.ok()?;
                Some(
                    list.items
                        .into_iter()
                        .filter_map(|o| o.metadata.name)
                        .collect::<Vec<_>>(),
                )
            }
        };
        Some(match want {
            Want::Namespace => names("namespaces")
                .await?
                .into_iter()
                .map(|n| (n, String::new()))
                .collect(),
            Want::Name(ty) => names(ty)
                .await?
                .into_iter()
                .map(|n| (n, String::new()))
                .collect(),
            Want::TypeOrObject => match current.split_once('/') {
                Some((ty, _)) => names(ty)
                    .await?
                    .into_iter()
                    .map(|n| (format!("{ty}/{n}"), String::new()))
                    .collect(),
                None => {
                    let mut types: Vec<(String, String)> = discovery
                        .resources()
                        .iter()
                        .map(|r| (r.plural_ref(), String::new()))
                        .collect();
                    types.sort();
                    types.dedup();
                    types
                }
            },
            _ => Vec::new(),
        })
    };
    tokio::time::timeout(CLUSTER_TIMEOUT, ask)
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
}

fn contexts(typed: &Typed) -> Vec<(String, String)> {
    let kubeconfig = match &typed.kubeconfig {
        Some(path) => kube::config::Kubeconfig::read_from(path),
        None => kube::config::Kubeconfig::read(),
    };
    kubeconfig
        .map(|k| {
            k.contexts
                .into_iter()
                .map(|c| (c.name, String::new()))
                .collect()
        })
        .unwrap_or_default()
}

/// Answers one completion request: `args` are the words after the command name (a leading
/// `__complete` is skipped), the last one being completed. Prints cobra's output.
pub async fn run(args: Vec<String>, as_plugin: bool) -> std::process::ExitCode {
    let mut args = args;
    if args.first().map(String::as_str) == Some(COMPLETE_CMD) {
        args.remove(0);
    }
    let current = args.pop().unwrap_or_default();
    let root = super::Cli::command();
    let (typed, want) = analyse(&root, &args, &current);
    let (candidates, directive) = match &want {
        Want::Subcommand => (
            root.get_subcommands()
                .filter(|s| {
                    !s.is_hide_set() && (!as_plugin || PLUGIN_COMMANDS.contains(&s.get_name()))
                })
                .map(|s| (s.get_name().to_owned(), first_line(s.get_about())))
                .collect(),
            NO_FILES,
        ),
        Want::Flag => {
            let cmd = typed
                .subcommand
                .as_deref()
                .and_then(|s| root.find_subcommand(s))
                .unwrap_or(&root);
            let mut flags: Vec<(String, String)> = cmd
                .get_arguments()
                .filter(|a| !a.is_hide_set() && !a.is_positional())
                .flat_map(|a| {
                    let help = first_line(a.get_help());
                    let long = a.get_long().map(|l| (format!("--{l}"), help.clone()));
                    let short = a.get_short().map(|s| (format!("-{s}"), help.clone()));
                    long.into_iter().chain(short)
                })
                .collect();
            flags.sort();
            (flags, NO_FILES)
        }
        Want::Values(values) => (values.clone(), NO_FILES),
        Want::File => (Vec::new(), FILES),
        Want::Context => (contexts(&typed), NO_FILES),
        Want::Namespace | Want::Name(_) | Want::TypeOrObject => {
            (from_cluster(&typed, &want, &current).await, NO_FILES)
        }
        Want::Nothing => (Vec::new(), NO_FILES),
    };
    // A flag's value typed as `--flag=val` is completed whole, as cobra does.
    let (prefix, word) = match (&want, current.split_once('=')) {
        (Want::Values(_) | Want::Namespace | Want::Context, Some((flag, value)))
            if current.starts_with('-') =>
        {
            (format!("{flag}="), value.to_owned())
        }
        _ => (String::new(), current.clone()),
    };
    let candidates: Vec<(String, String)> = candidates
        .into_iter()
        .map(|(v, h)| (format!("{prefix}{v}"), h))
        .collect();
    let text = render(&candidates, &format!("{prefix}{word}"), directive);
    match lien::output::print(&text) {
        Ok(_) => std::process::ExitCode::SUCCESS,
        Err(_) => std::process::ExitCode::FAILURE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(ws: &[&str]) -> Vec<String> {
        ws.iter().map(|w| (*w).to_owned()).collect()
    }

    fn want(ws: &[&str], current: &str) -> Want {
        analyse(&super::super::Cli::command(), &words(ws), current).1
    }

    #[test]
    fn positions_are_read_as_the_command_reads_them() {
        assert_eq!(want(&[], "wh"), Want::Subcommand);
        assert_eq!(want(&["why"], ""), Want::TypeOrObject);
        assert_eq!(want(&["why"], "configmap/"), Want::TypeOrObject);
        assert_eq!(want(&["why", "cm"], ""), Want::Name("cm".into()));
        assert_eq!(want(&["why", "cm", "x"], ""), Want::Nothing);
        assert_eq!(want(&["why", "-n"], ""), Want::Namespace);
        assert_eq!(want(&["why", "--context"], ""), Want::Context);
        assert_eq!(want(&["graph", "-n", "shop"], ""), Want::TypeOrObject);
        assert_eq!(want(&["graph"], "--"), Want::Flag);
        assert_eq!(want(&["plan", "-f"], ""), Want::File);
        let Want::Values(v) = want(&["graph", "-o"], "") else {
            panic!("values")
        };
        assert!(v.iter().any(|(n, _)| n == "svg"), "{v:?}");
        let Want::Values(v) = want(&["graph"], "--output=") else {
            panic!("values")
        };
        assert!(v.iter().any(|(n, _)| n == "mermaid"), "{v:?}");
        let (typed, _) = analyse(
            &super::super::Cli::command(),
            &words(&["why", "-n", "shop", "--context=prod", "cm"]),
            "",
        );
        assert_eq!(typed.namespace.as_deref(), Some("shop"));
        assert_eq!(typed.context.as_deref(), Some("prod"));
        assert_eq!(typed.positionals, ["cm"]);
    }

    #[test]
    fn output_is_cobras() {
        let c = vec![
            ("why".to_owned(), "Every relation".to_owned()),
            ("graph".to_owned(), String::new()),
        ];
        assert_eq!(render(&c, "wh", NO_FILES), "why\tEvery relation\n:4\n");
        assert_eq!(render(&c, "", FILES), "why\tEvery relation\ngraph\n:0\n");
    }
}
