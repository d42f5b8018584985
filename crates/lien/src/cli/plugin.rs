//! `lien why | tree | graph | plan | delete | status` — also `kubectl lien …` when the binary is installed as
//! `kubectl-lien`. Flags follow kubectl's (`-n/--namespace`, `-A`, `--context`,
//! `--kubeconfig`, `TYPE NAME` and `TYPE/NAME`); errors are printed as kubectl prints them.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use lien::plugin::read::{self, Connection, Discovery, ReadError, ReadScope};
use lien::plugin::{self, Selection, apply, graph};
use lien_core::ObjectKey;

/// kubectl's connection and namespace flags.
#[derive(Debug, Clone, Args)]
pub struct KubeArgs {
    /// The namespace (default: the kubeconfig context's, else `default`).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Every namespace.
    #[arg(short = 'A', long = "all-namespaces")]
    pub all_namespaces: bool,
    /// The kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
    /// Path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

impl KubeArgs {
    fn connection(&self) -> Connection {
        Connection {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
        }
    }
}

/// `why`.
#[derive(Debug, Args)]
pub struct WhyArgs {
    /// The object: `TYPE/NAME` or `TYPE NAME` (e.g. `configmap/settings`, `cm settings`).
    #[arg(required = true, num_args = 1..=2, value_name = "TYPE/NAME")]
    pub object: Vec<String>,
    #[command(flatten)]
    pub kube: KubeArgs,
    /// Lien's `--replay-ttl-hours` (how long a refused DELETE stays replayable).
    #[arg(long, default_value_t = 24)]
    pub replay_ttl_hours: u64,
    /// `text` for people; `json` or `yaml` for scripts (the same report: relations, sources,
    /// reasons, the commands that lift each, the recorded refused DELETE).
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: WhyFormat,
}

/// `why -o`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum WhyFormat {
    /// For people.
    Text,
    /// The report as JSON.
    Json,
    /// The report as YAML.
    Yaml,
}

/// `delete`.
#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// The object: `TYPE/NAME` or `TYPE NAME` (e.g. `configmap/settings`, `cm settings`).
    #[arg(required = true, num_args = 1..=2, value_name = "TYPE/NAME")]
    pub object: Vec<String>,
    /// If Lien refuses the DELETE because the object is in use, have Lien delete it once it is
    /// free (as you: Lien checks that you may delete it). Without it, the refusal is printed.
    #[arg(long)]
    pub when_free: bool,
    /// The propagation policy, as for `kubectl delete --cascade`.
    #[arg(long, value_enum, default_value = "background")]
    pub cascade: plugin::delete::Cascade,
    #[command(flatten)]
    pub kube: KubeArgs,
}

/// `tree`.
#[derive(Debug, Args)]
pub struct TreeArgs {
    /// The object: `TYPE/NAME` or `TYPE NAME` (e.g. `configmap/settings`, `cm settings`).
    #[arg(required = true, num_args = 1..=2, value_name = "TYPE/NAME")]
    pub object: Vec<String>,
    #[command(flatten)]
    pub kube: KubeArgs,
    /// Draw the tree again every --interval until interrupted (Ctrl-C) or the object is gone.
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// With --watch: how often (e.g. `2s`, `500ms`).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub interval: Duration,
}

/// `status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
    /// Path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Lien's namespace (`lien run --namespace`): its leader-election Lease, and its
    /// Deployment when it runs in the cluster.
    #[arg(long, default_value = "lien-system")]
    pub lien_namespace: String,
    /// The name of Lien's webhook configurations.
    #[arg(long, default_value = "lien")]
    pub configuration: String,
    /// `text` for people, `json` for scripts.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: StatusFormat,
}

/// `status -o`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum StatusFormat {
    /// The verdict, then one line per check.
    Text,
    /// `{"verdict", "reason", "checks"}`.
    Json,
}

/// `graph -o`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum GraphFormat {
    /// Graphviz DOT.
    Dot,
    /// Mermaid flowchart (paste into a Markdown file).
    Mermaid,
    /// SVG, drawn in-process.
    Svg,
    /// JSON nodes and edges.
    Json,
    /// PNG, the SVG drawn by a pure-Rust rasteriser at twice its size (redirect it to a file).
    Png,
}

/// `graph --direction`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum GraphDirection {
    /// Left to right: users on the left, what they use on the right.
    #[value(name = "LR", alias = "lr")]
    Lr,
    /// Top to bottom: users above what they use (a long chain fits a slide).
    #[value(name = "TB", alias = "tb")]
    Tb,
}

/// `graph`.
#[derive(Debug, Args)]
pub struct GraphArgs {
    /// Only what is connected to these objects (`TYPE/NAME …` or `TYPE NAME …`).
    #[arg(value_name = "TYPE/NAME")]
    pub objects: Vec<String>,
    #[command(flatten)]
    pub kube: KubeArgs,
    /// Output format.
    #[arg(short = 'o', long, default_value = "dot")]
    pub output: GraphFormat,
    /// Which way the SVG and PNG are drawn (`-o dot` and `mermaid` say it too).
    #[arg(long, value_enum, default_value = "LR")]
    pub direction: GraphDirection,
}

/// `plan -o`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum PlanFormat {
    /// Numbered steps.
    Text,
    /// JSON.
    Json,
}

/// `plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The objects to delete (`TYPE/NAME …` or `TYPE NAME …`).
    #[arg(value_name = "TYPE/NAME")]
    pub objects: Vec<String>,
    /// A manifest (YAML or JSON, several documents or a List) naming the objects to delete, as
    /// for `kubectl delete -f`; `-` reads stdin.
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "FILE",
        conflicts_with = "objects"
    )]
    pub file: Option<PathBuf>,
    /// Every object of the namespace that takes part in a relation.
    #[arg(long, conflicts_with_all = ["objects", "file"])]
    pub all: bool,
    #[command(flatten)]
    pub kube: KubeArgs,
    /// Output format of the plan.
    #[arg(short = 'o', long, default_value = "text")]
    pub output: PlanFormat,
    /// Perform the plan: delete step by step, waiting for each step's objects to be gone (and,
    /// while Lien still refuses one as in use, retrying it until --timeout). Asks first on a
    /// terminal; without a terminal, needs --yes.
    #[arg(long)]
    pub apply: bool,
    /// With --apply: how long one step may take (e.g. `30s`, `5m`).
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Leave out the objects a Usage or ClusterUsage without `by` protects (nothing will release
    /// them), with what they use and their Namespaces, and delete the rest. Without it, --apply
    /// refuses to start on a plan holding such objects.
    #[arg(long)]
    pub skip_held: bool,
    /// With --apply: do not ask for confirmation.
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Print what --apply would do (each step, what it would leave) and delete nothing;
    /// `--dry-run` and `--dry-run=client` alike.
    #[arg(
        long,
        value_enum,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "client",
        default_value = "none"
    )]
    pub dry_run: DryRun,
}

/// `plan --dry-run`, with kubectl's values (only the plugin's side can be simulated: later
/// steps depend on earlier ones being gone, so a server-side dry run would refuse them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DryRun {
    /// Delete for real.
    None,
    /// Print what would be deleted; send nothing.
    Client,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map_or((s, "s"), |i| s.split_at(i));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration: use e.g. 30s, 5m, 1h"))?;
    let secs = match unit {
        "ms" => return Ok(Duration::from_millis(n)),
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (use ms, s, m or h)")),
    };
    Ok(Duration::from_secs(secs))
}

/// Prints the error as kubectl would and fails.
fn fail(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("{e}");
    ExitCode::FAILURE
}

fn print(out: &str) -> ExitCode {
    // A closed pipe (`| head`) ends the output quietly, status 0 (`lien::output`).
    match lien::output::print(out) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => fail(format!("error: writing the output: {e}")),
    }
}

struct Session {
    client: kube::Client,
    discovery: Discovery,
    /// `-n`, else the context's namespace.
    namespace: String,
}

async fn session(kube: &KubeArgs) -> Result<Session, ReadError> {
    let started = std::time::Instant::now();
    let (client, default_ns) = read::connect(&kube.connection()).await?;
    let discovery = Discovery::read(&client).await?;
    tracing::debug!(elapsed = ?started.elapsed(), "connected, discovery read");
    // A namespace given with -n that does not exist, said as such rather than as every object
    // in it being "not found" (a user who may not read Namespaces is not asked about it).
    if let Some(ns) = &kube.namespace {
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
            kube::Api::all(client.clone());
        if let Ok(None) = namespaces.get_opt(ns).await {
            return Err(ReadError::Usage(format!(
                "namespace \"{ns}\" does not exist (`kubectl get namespaces` lists them)"
            )));
        }
    }
    Ok(Session {
        client,
        discovery,
        namespace: kube.namespace.clone().unwrap_or(default_ns),
    })
}

async fn load(s: &Session, kube: &KubeArgs) -> Result<plugin::Graph, ReadError> {
    // With -A nothing narrows; otherwise a user who may not list cluster-wide still sees their
    // namespace.
    let fallback = (!kube.all_namespaces).then_some(s.namespace.as_str());
    let started = std::time::Instant::now();
    let snapshot = read::read_snapshot(
        &s.client,
        &s.discovery,
        ReadScope {
            namespace: fallback,
        },
    )
    .await?;
    tracing::debug!(elapsed = ?started.elapsed(), "listed");
    let started = std::time::Instant::now();
    let graph = plugin::derive(&snapshot)
        .map_err(|e| ReadError::Usage(format!("deriving relations: {e}")))?;
    tracing::debug!(elapsed = ?started.elapsed(), relations = graph.index.len(), "derived");
    Ok(graph)
}

/// How many source problems are printed before "and N more": a rule pack naming kinds the
/// cluster does not serve must not bury the answer.
const PROBLEMS_LISTED: usize = 5;

fn report_problems(graph: &plugin::Graph) {
    let all: Vec<String> = graph
        .problems
        .iter()
        .flat_map(|(source, problems)| problems.iter().map(move |p| format!("{source}: {p}")))
        .collect();
    for p in all.iter().take(PROBLEMS_LISTED) {
        eprintln!("warning: {p}");
    }
    if all.len() > PROBLEMS_LISTED {
        eprintln!(
            "warning: and {} more (Usages' and rules' status conditions say the same)",
            all.len() - PROBLEMS_LISTED
        );
    }
}

/// The one object a command (`why`, `delete`) takes, resolved.
fn one_object(
    s: &Session,
    objects: &[(String, String)],
    command: &str,
) -> Result<(lien_core::ObjectKey, read::Resource), ReadError> {
    let [one] = <[_; 1]>::try_from(read::object_keys(&s.discovery, objects, &s.namespace)?)
        .map_err(|v: Vec<_>| {
            ReadError::Usage(format!(
                "{command} takes one object, {} were given",
                v.len()
            ))
        })?;
    Ok(one)
}

/// `why`.
pub async fn why(args: WhyArgs) -> ExitCode {
    let result = async {
        let s = session(&args.kube).await?;
        let objects = read::parse_objects(&args.object)?;
        let (key, resource) = one_object(&s, &objects, "why")?;
        let info = read::get_object(&s.client, &key, &resource).await?;
        let mut g = load(&s, &args.kube).await?;
        g.nodes.insert(key.clone(), info);
        warn_if_not_enforced(&s.client).await;
        let report =
            plugin::why::why_report(&g, &key, Duration::from_secs(args.replay_ttl_hours * 3600));
        Ok::<_, ReadError>(match args.output {
            WhyFormat::Text => plugin::why::why_text(&report),
            WhyFormat::Json => plugin::why::why_json(&report),
            WhyFormat::Yaml => plugin::why::why_yaml(&report),
        })
    }
    .await;
    match result {
        Ok(text) => print(&text),
        Err(e) => fail(e),
    }
}

/// `tree`: once, or with --watch every --interval until Ctrl-C or the object is gone.
pub async fn tree(args: TreeArgs) -> ExitCode {
    use std::io::IsTerminal as _;
    let result = async {
        let s = session(&args.kube).await?;
        let objects = read::parse_objects(&args.object)?;
        let (key, resource) = one_object(&s, &objects, "tree")?;
        Ok::<_, ReadError>((s, key, resource))
    }
    .await;
    let (s, key, resource) = match result {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    warn_if_not_enforced(&s.client).await;
    let terminal = std::io::stdout().is_terminal();
    loop {
        let frame = async {
            let info = read::get_object(&s.client, &key, &resource).await?;
            let mut g = load(&s, &args.kube).await?;
            g.nodes.insert(key.clone(), info);
            Ok::<_, ReadError>(plugin::tree::tree(&g, &key))
        }
        .await;
        let text = match frame {
            Ok(text) => text,
            Err(e) => return fail(e),
        };
        if !args.watch {
            return print(&text);
        }
        // As `watch(1)`: a header, the screen cleared on a terminal; frames one after the other
        // into a pipe or a file.
        let header = format!(
            "{}Every {:?}: kubectl lien tree {} — {}\n\n",
            if terminal { "\x1b[H\x1b[2J" } else { "" },
            args.interval,
            key.kubectl_arg(),
            jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M:%S UTC"),
        );
        let code = print(&format!("{header}{text}\n"));
        if code != ExitCode::SUCCESS {
            return code;
        }
        tokio::select! {
            _ = tokio::signal::ctrl_c() => return ExitCode::SUCCESS,
            () = tokio::time::sleep(args.interval) => {}
        }
    }
}

/// `status`: exit status 0 only when enforced.
pub async fn status(args: StatusArgs) -> ExitCode {
    let conn = Connection {
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
    };
    let client = match read::connect(&conn).await {
        Ok((client, _)) => client,
        Err(e) => return fail(e),
    };
    // An API server that cannot be reached is one line, not a report of unreadable checks.
    if let Err(e) = client.apiserver_version().await {
        return fail(ReadError::from_kube("asking the API server its version", e));
    }
    let names = plugin::status_read::Names {
        configuration: args.configuration.clone(),
        namespace: args.lien_namespace.clone(),
        ..Default::default()
    };
    let facts = plugin::status_read::gather(&client, &names).await;
    let report = plugin::status::assess(&facts);
    let text = match args.output {
        StatusFormat::Text => plugin::status::to_text(&report),
        StatusFormat::Json => plugin::status::to_json(&report),
    };
    match print(&text) {
        code if code != ExitCode::SUCCESS => code,
        _ if report.enforced() => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}

/// The one-line warning (on stderr) when protection is not what `why`, `graph` and `plan`
/// describe: the webhook configuration missing, Lien not answering, or failing open. Nothing
/// when it cannot be told (a user who may not read the configuration): no claim either way.
async fn warn_if_not_enforced(client: &kube::Client) {
    let facts =
        plugin::status_read::enforcement(client, &plugin::status_read::Names::default()).await;
    if let Some(warning) = plugin::status::assess(&facts).verdict.warning() {
        eprintln!("{warning}");
    }
}

/// `delete`.
pub async fn delete(args: DeleteArgs) -> ExitCode {
    let result = async {
        let s = session(&args.kube).await?;
        let objects = read::parse_objects(&args.object)?;
        let (key, resource) = one_object(&s, &objects, "delete")?;
        let ty = objects.first().map(|(t, _)| t.clone()).unwrap_or_default();
        Ok::<_, ReadError>((s, key, resource, ty))
    }
    .await;
    let (s, key, resource, ty) = match result {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    // A DELETE that goes through because nothing enforces protection is said, not hidden.
    warn_if_not_enforced(&s.client).await;
    match plugin::delete::delete(&s.client, &key, &resource, args.cascade, args.when_free).await {
        Ok(deleted) => print(&plugin::delete::report(&ty, &key, &deleted)),
        Err(e) => fail(e),
    }
}

/// `graph`.
pub async fn graph(args: GraphArgs) -> ExitCode {
    use std::io::IsTerminal as _;
    if matches!(args.output, GraphFormat::Png) && std::io::stdout().is_terminal() {
        return fail(
            "error: -o png writes binary data: redirect it to a file (kubectl lien graph -o png > graph.png)",
        );
    }
    let result = async {
        let s = session(&args.kube).await?;
        let objects = read::parse_objects(&args.objects)?;
        let keys: Vec<ObjectKey> = read::object_keys(&s.discovery, &objects, &s.namespace)?
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let g = load(&s, &args.kube).await?;
        report_problems(&g);
        warn_if_not_enforced(&s.client).await;
        let started = std::time::Instant::now();
        let view = plugin::select(
            &g,
            &Selection {
                namespace: (!args.kube.all_namespaces).then(|| s.namespace.clone()),
                objects: keys,
            },
        );
        tracing::debug!(elapsed = ?started.elapsed(), edges = view.edges.len(), "selected");
        let started = std::time::Instant::now();
        let direction = match args.direction {
            GraphDirection::Lr => graph::Direction::LeftRight,
            GraphDirection::Tb => graph::Direction::TopBottom,
        };
        let out: Vec<u8> = match args.output {
            GraphFormat::Dot => graph::to_dot_with(&view, direction).into_bytes(),
            GraphFormat::Mermaid => graph::to_mermaid_with(&view, direction).into_bytes(),
            GraphFormat::Json => graph::to_json(&view).into_bytes(),
            GraphFormat::Svg => graph::to_svg_with(&view, direction).into_bytes(),
            GraphFormat::Png => {
                graph::to_png(&view, direction).map_err(|e| ReadError::Usage(e.to_string()))?
            }
        };
        tracing::debug!(elapsed = ?started.elapsed(), bytes = out.len(), "rendered");
        Ok(out) as Result<Vec<u8>, ReadError>
    }
    .await;
    match result {
        Ok(bytes) => match lien::output::print_bytes(&bytes) {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => fail(format!("error: writing the output: {e}")),
        },
        Err(e) => fail(e),
    }
}

/// The objects a manifest names (`kubectl delete -f`): every document, and the items of Lists.
fn manifest_objects(
    text: &str,
    origin: &str,
) -> Result<Vec<(String, String, Option<String>)>, ReadError> {
    use serde::Deserialize;
    let mut out = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        let value = serde_json::Value::deserialize(doc)
            .map_err(|e| ReadError::Usage(format!("{origin}: not YAML or JSON: {e}")))?;
        if value.is_null() {
            continue;
        }
        let items: Vec<serde_json::Value> = match value.get("items") {
            Some(serde_json::Value::Array(items))
                if value["kind"].as_str().is_some_and(|k| k.ends_with("List")) =>
            {
                items.clone()
            }
            _ => vec![value],
        };
        for item in items {
            let field = |path: &[&str]| {
                path.iter()
                    .try_fold(&item, |v, p| v.get(p))
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_owned)
            };
            let (Some(api_version), Some(kind), Some(name)) = (
                field(&["apiVersion"]),
                field(&["kind"]),
                field(&["metadata", "name"]),
            ) else {
                return Err(ReadError::Usage(format!(
                    "{origin}: every object needs apiVersion, kind and metadata.name"
                )));
            };
            let group = api_version
                .split_once('/')
                .map_or("", |(g, _)| g)
                .to_owned();
            let ty = if group.is_empty() {
                kind
            } else {
                format!("{kind}.{group}")
            };
            out.push((ty, name, field(&["metadata", "namespace"])));
        }
    }
    Ok(out)
}

/// `plan`.
pub async fn plan(args: PlanArgs) -> ExitCode {
    let result = async {
        let s = session(&args.kube).await?;
        let keys: Vec<ObjectKey> = if let Some(file) = &args.file {
            let origin = file.display().to_string();
            let text = if origin == "-" {
                std::io::read_to_string(std::io::stdin())
            } else {
                std::fs::read_to_string(file)
            }
            .map_err(|e| ReadError::Usage(format!("reading {origin}: {e}")))?;
            let mut keys = Vec::new();
            for (ty, name, ns) in manifest_objects(&text, &origin)? {
                let r = s.discovery.resolve_type(&ty)?;
                let ns = ns.unwrap_or_else(|| s.namespace.clone());
                keys.push(r.gk().key(r.namespaced.then_some(ns.as_str()), &name));
            }
            keys
        } else if !args.all {
            let objects = read::parse_objects(&args.objects)?;
            if objects.is_empty() {
                return Err(ReadError::Usage(
                    "name the objects to delete (TYPE/NAME …), or -f FILE, or -n NAMESPACE --all"
                        .into(),
                ));
            }
            read::object_keys(&s.discovery, &objects, &s.namespace)?
                .into_iter()
                .map(|(k, _)| k)
                .collect()
        } else {
            Vec::new()
        };
        // Named objects must exist, as for `kubectl delete` (NotFound in kubectl's words).
        futures::future::try_join_all(keys.iter().map(|k| {
            let s = &s;
            async move {
                let r = s
                    .discovery
                    .for_key(k)
                    .ok_or_else(|| ReadError::UnknownType(k.kind.clone()))?;
                read::get_object(&s.client, k, r).await
            }
        }))
        .await?;
        let g = load(&s, &args.kube).await?;
        report_problems(&g);
        warn_if_not_enforced(&s.client).await;
        let keys = if args.all {
            plugin::plan::all_in_namespace(&g, &s.namespace)
        } else {
            keys
        };
        let p = plugin::plan(&g, &keys).map_err(|e| ReadError::Usage(e.to_string()))?;
        Ok((s, g, p))
    }
    .await;
    let (s, g, mut p) = match result {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    let applying = args.apply || args.dry_run == DryRun::Client;
    // Checked on the whole plan: what --skip-held would leave is part of the message.
    let refusal = plugin::plan::held_refusal(&g, &p);
    if args.skip_held {
        p = plugin::plan::skip_held(&g, p);
    }
    let text = match args.output {
        PlanFormat::Text => plugin::plan::to_text(&p),
        PlanFormat::Json => plugin::plan::to_json(&p),
    };
    let code = print(&text);
    if !applying || code != ExitCode::SUCCESS {
        return code;
    }
    // Up front: deleting part of the plan and stopping at a protection leaves a half-deleted
    // set of objects; the plan already knows.
    if let (Some(refusal), false) = (refusal, args.skip_held) {
        eprint!("{refusal}");
        return ExitCode::FAILURE;
    }
    if args.dry_run == DryRun::Client {
        return print(&plugin::plan::dry_run_text(&p));
    }
    if p.count() == 0 {
        return print("nothing to delete\n");
    }
    if !args.yes {
        match confirm(&p, args.file.as_deref()) {
            Ok(true) => {}
            Ok(false) => return fail("aborted: nothing was deleted"),
            Err(e) => return fail(e),
        }
    }
    match apply::apply(&s.client, &s.discovery, &p, args.timeout).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(format!("error: {e}")),
    }
}

/// Asks on the terminal whether to delete `plan`'s objects, as `Delete N objects in M steps?
/// [y/N]` (the plan was printed just before). Without a terminal on stdin (a pipe, CI, or the
/// manifest was read from it), nobody can answer: an error saying to pass --yes, as kubectl
/// refuses to guess.
fn confirm(plan: &plugin::Plan, file: Option<&std::path::Path>) -> Result<bool, String> {
    use std::io::{BufRead as _, IsTerminal as _};
    let stdin = std::io::stdin();
    let from_stdin = file.is_some_and(|f| f.as_os_str() == "-");
    if from_stdin || !stdin.is_terminal() {
        return Err(format!(
            "error: --apply deletes {} without asking only with --yes, and stdin is not a terminal to ask on: pass --yes to delete them (or --dry-run to see what would happen)",
            objects_in_steps(plan)
        ));
    }
    eprint!("Delete {}? [y/N] ", objects_in_steps(plan));
    let _ = std::io::Write::flush(&mut std::io::stderr());
    let mut answer = String::new();
    stdin
        .lock()
        .read_line(&mut answer)
        .map_err(|e| format!("error: reading the answer: {e}"))?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "Yes" | "YES"))
}

/// `N objects in M steps`.
fn objects_in_steps(plan: &plugin::Plan) -> String {
    let (n, m) = (plan.count(), plan.steps.len());
    format!(
        "{n} object{} in {m} step{}",
        if n == 1 { "" } else { "s" },
        if m == 1 { "" } else { "s" }
    )
}
