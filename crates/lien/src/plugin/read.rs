//! The plugin's reads, through the user's kubeconfig and permissions: the client (as kubectl
//! picks it: `--kubeconfig`, `KUBECONFIG`, `--context`, `-n`), discovery (the watch-and-discovery
//! service's snapshot, to name kinds as kubectl does: kind, plural, singular, short name, each
//! optionally `.group`), and the [`Snapshot`] — every Usage, ClusterUsage and DependencyRule and
//! the objects of the kinds they name.
//!
//! Lists are cluster-wide, because a ClusterUsage or a `Cluster`-scoped rule may relate objects
//! of any namespace; a user who may list only their namespace gets that namespace (said on
//! stderr), which is all their permissions let anyone see.

use std::collections::BTreeSet;
use std::path::PathBuf;

use futures::future::try_join_all;
use kube::api::{Api, DynamicObject, ListParams, ObjectList, TypeMeta};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, Status};
use kube::{Client, Config};
use lien_api::{ClusterUsage, DependencyRule, Usage};
use lien_core::ObjectKey;
use lien_decide::cache::GroupKind;
use lien_decide::resolve::UsageView;
use lien_decide::rules::RuleView;

use super::snapshot::{KindObjects, NodeInfo, Snapshot};

/// Objects per list page: large pages keep 10,000 objects at a few round trips.
const PAGE: u32 = 5000;

/// What went wrong, in words a person can act on.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// No usable kubeconfig.
    #[error("error: loading the kubeconfig: {0}")]
    Kubeconfig(String),
    /// The API server answered with an error (kubectl's wording: `Error from server (Reason):
    /// message`), while doing something the hint names.
    #[error("Error from server{}: {}{}", reason(.status), .status.message, hint(.status, .doing))]
    Api {
        /// What the plugin was doing.
        doing: String,
        /// The answer.
        status: Box<Status>,
    },
    /// The request failed before an answer.
    #[error("error: {doing}: {}", no_answer(.source))]
    Transport {
        /// What the plugin was doing.
        doing: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Lien's CRDs are not served.
    #[error(
        "error: Lien is not installed in this cluster: the API server does not serve usages.lien.dev.\nInstall it first: lien manifests | kubectl apply -f -"
    )]
    NotInstalled,
    /// A `TYPE` no served resource answers to.
    #[error("error: the server doesn't have a resource type \"{0}\"")]
    UnknownType(String),
    /// Bad arguments.
    #[error("error: {0}")]
    Usage(String),
}

fn reason(status: &Status) -> String {
    if status.reason.is_empty() {
        String::new()
    } else {
        format!(" ({})", status.reason)
    }
}

/// What to check when the API server gives no answer (`lien run` says the same:
/// `cli::cluster::unreachable`).
pub const UNREACHABLE_HINT: &str =
    "check that the cluster is up and that --kubeconfig/--context (or $KUBECONFIG) name it";

/// The innermost cause of an error (`Connection refused (os error 111)`, not kube's
/// `ServiceError: client error (Connect)`).
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// A request that got no answer, in `lien run`'s words (`cli::cluster::unreachable`): the
/// cause, and what to check.
fn no_answer(e: &kube::Error) -> String {
    match e {
        kube::Error::Service(_) | kube::Error::HyperError(_) => format!(
            "cannot reach the API server: {} — {UNREACHABLE_HINT}",
            root_cause(e)
        ),
        kube::Error::Auth(_) => format!(
            "authenticating to the API server: {} — check the kubeconfig's user for this context",
            root_cause(e)
        ),
        e => e.to_string(),
    }
}

fn hint(status: &Status, doing: &str) -> String {
    match status.code {
        403 => format!(
            "\n(while {doing}: ask for that permission, or narrow the command with -n NAMESPACE)"
        ),
        _ => String::new(),
    }
}

impl ReadError {
    /// Wraps a client error, keeping the server's own answer.
    pub fn from_kube(doing: impl Into<String>, e: kube::Error) -> Self {
        match e {
            kube::Error::Api(status) => Self::Api {
                doing: doing.into(),
                status,
            },
            source => Self::Transport {
                doing: doing.into(),
                source,
            },
        }
    }

    fn code(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. } => Some(status.code),
            _ => None,
        }
    }
}

/// kubectl's connection flags.
#[derive(Debug, Clone, Default)]
pub struct Connection {
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`.
    pub context: Option<String>,
}

/// A client as kubectl would make it, and the namespace kubectl would default to.
pub async fn connect(conn: &Connection) -> Result<(Client, String), ReadError> {
    let options = KubeConfigOptions {
        context: conn.context.clone(),
        ..KubeConfigOptions::default()
    };
    let (kubeconfig, origin) = match &conn.kubeconfig {
        Some(path) => (
            Kubeconfig::read_from(path)
                .map_err(|e| ReadError::Kubeconfig(format!("{}: {e}", path.display())))?,
            path.display().to_string(),
        ),
        // `KUBECONFIG` (paths merged) or `~/.kube/config`, as kubectl reads them.
        None => (
            Kubeconfig::read().map_err(|e| {
                ReadError::Kubeconfig(format!("{e} — pass --kubeconfig PATH or set KUBECONFIG"))
            })?,
            match std::env::var("KUBECONFIG") {
                Ok(v) if !v.is_empty() => format!("$KUBECONFIG ({v})"),
                _ => "~/.kube/config".to_owned(),
            },
        ),
    };
    // kube's own words here are "failed to load current context: prod"; kubectl's are clearer.
    let wanted = conn
        .context
        .clone()
        .or_else(|| kubeconfig.current_context.clone())
        .filter(|c| !c.is_empty());
    match wanted {
        None => {
            return Err(ReadError::Kubeconfig(format!(
                "{origin} has no current context — pass --context NAME, or set one with `kubectl config use-context NAME`"
            )));
        }
        Some(c) if !kubeconfig.contexts.iter().any(|n| n.name == c) => {
            return Err(ReadError::Kubeconfig(format!(
                "context \"{c}\" does not exist in {origin} — `kubectl config get-contexts` lists them"
            )));
        }
        Some(_) => {}
    }
    let config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| ReadError::Kubeconfig(e.to_string()))?;
    let namespace = config.default_namespace.clone();
    let client = Client::try_from(config).map_err(|e| ReadError::Kubeconfig(e.to_string()))?;
    Ok((client, namespace))
}

/// One served resource, as discovery lists it.
#[derive(Debug, Clone)]
pub struct Resource {
    /// For the client.
    pub api: ApiResource,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// `singularName` (or the kind, lowercased).
    pub singular: String,
    /// `shortNames`.
    pub short_names: Vec<String>,
}

impl Resource {
    /// The group and kind.
    pub fn gk(&self) -> GroupKind {
        GroupKind::new(&self.api.group, &self.api.kind)
    }

    /// `plural[.group]`, as kubectl names a resource in messages.
    pub fn plural_ref(&self) -> String {
        if self.api.group.is_empty() {
            self.api.plural.clone()
        } else {
            format!("{}.{}", self.api.plural, self.api.group)
        }
    }
}

/// Every served resource (preferred versions), core first: what kubectl resolves a `TYPE`
/// against.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    resources: Vec<Resource>,
}

impl From<lien_watch::ServedResource> for Resource {
    fn from(r: lien_watch::ServedResource) -> Self {
        Self {
            api: r.ar,
            namespaced: r.namespaced,
            singular: r.singular,
            short_names: r.short_names,
        }
    }
}

impl Discovery {
    /// Asks the watch-and-discovery service (`lien_watch`, the controller's too) for every
    /// served resource at its group's preferred version, core first.
    pub async fn read(client: &Client) -> Result<Self, ReadError> {
        let served = lien_watch::served_resources(client, lien_watch::Versions::Preferred)
            .await
            .map_err(|e| {
                ReadError::from_kube("reading the API server's discovery", e.into_kube())
            })?;
        Ok(Self {
            resources: served.into_iter().map(Resource::from).collect(),
        })
    }

    /// Every served resource, core first (for completion).
    pub fn resources(&self) -> &[Resource] {
        &self.resources
    }

    /// A discovery made of `resources` (tests).
    pub fn from_resources(resources: Vec<Resource>) -> Self {
        Self { resources }
    }

    /// The resource serving a group and kind.
    pub fn by_kind(&self, gk: &GroupKind) -> Option<&Resource> {
        self.resources
            .iter()
            .find(|r| r.api.group == gk.group && r.api.kind == gk.kind)
    }

    /// The resource serving the kind of `key`.
    pub fn for_key(&self, key: &ObjectKey) -> Option<&Resource> {
        self.by_kind(&GroupKind::new(&key.group, &key.kind))
    }

    /// Resolves a `TYPE` as kubectl does: `kind`, `plural`, `singular` or a short name, any of
    /// them optionally followed by `.group` or `.version.group`; case-insensitive; core group
    /// first.
    pub fn resolve_type(&self, ty: &str) -> Result<&Resource, ReadError> {
        let lower = ty.to_lowercase();
        let (name, qualifier) = match lower.split_once('.') {
            Some((n, q)) => (n.to_owned(), Some(q.to_owned())),
            None => (lower.clone(), None),
        };
        self.resources
            .iter()
            .find(|r| {
                let names = r.api.plural == name
                    || r.singular == name
                    || r.api.kind.to_lowercase() == name
                    || r.short_names.iter().any(|s| s.to_lowercase() == name);
                let group_ok = match &qualifier {
                    None => true,
                    Some(q) => {
                        *q == r.api.group || *q == format!("{}.{}", r.api.version, r.api.group)
                    }
                };
                names && group_ok
            })
            .ok_or_else(|| ReadError::UnknownType(ty.to_owned()))
    }

    /// Whether Lien's CRDs are served.
    pub fn lien_installed(&self) -> bool {
        self.by_kind(&GroupKind::new(lien_api::GROUP, "Usage"))
            .is_some()
    }
}

/// `TYPE/NAME …` or `TYPE NAME …`, as kubectl takes them.
pub fn parse_objects(args: &[String]) -> Result<Vec<(String, String)>, ReadError> {
    if args.is_empty() {
        return Ok(Vec::new());
    }
    if args.iter().any(|a| a.contains('/')) {
        return args
            .iter()
            .map(|a| match a.split_once('/') {
                Some((t, n)) if !t.is_empty() && !n.is_empty() && !n.contains('/') => {
                    Ok((t.to_owned(), n.to_owned()))
                }
                _ => Err(ReadError::Usage(format!(
                    "there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (got {a:?}); use TYPE/NAME or TYPE NAME"
                ))),
            })
            .collect();
    }
    match args {
        [_] => Err(ReadError::Usage(format!(
            "you must specify the name of the {} (TYPE NAME or TYPE/NAME)",
            args[0]
        ))),
        [ty, names @ ..] => Ok(names.iter().map(|n| (ty.clone(), n.clone())).collect()),
        [] => Ok(Vec::new()),
    }
}

/// Resolves object arguments to keys; `namespace` applies to namespaced kinds.
pub fn object_keys(
    discovery: &Discovery,
    args: &[(String, String)],
    namespace: &str,
) -> Result<Vec<(ObjectKey, Resource)>, ReadError> {
    args.iter()
        .map(|(ty, name)| {
            let r = discovery.resolve_type(ty)?;
            let ns = r.namespaced.then_some(namespace);
            Ok((r.gk().key(ns, name), r.clone()))
        })
        .collect()
}

/// The `Api` of a resource in `namespace` (`None`: all namespaces / cluster-scoped).
pub fn api_for(client: &Client, r: &Resource, namespace: Option<&str>) -> Api<DynamicObject> {
    match (r.namespaced, namespace) {
        (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, &r.api),
        _ => Api::all_with(client.clone(), &r.api),
    }
}

/// Reads one object: its state, or kubectl's NotFound.
pub async fn get_object(
    client: &Client,
    key: &ObjectKey,
    r: &Resource,
) -> Result<NodeInfo, ReadError> {
    let api = api_for(client, r, key.namespace.as_deref());
    let o = api
        .get(&key.name)
        .await
        .map_err(|e| ReadError::from_kube(format!("getting {}", r.plural_ref()), e))?;
    Ok(NodeInfo::of(&o.metadata))
}

async fn list_pages<T, F, Fut>(doing: &str, mut page: F) -> Result<Vec<T>, ReadError>
where
    T: Clone,
    F: FnMut(ListParams) -> Fut,
    Fut: std::future::Future<Output = Result<ObjectList<T>, kube::Error>>,
{
    let mut out = Vec::new();
    let mut lp = ListParams::default().limit(PAGE);
    loop {
        let list = page(lp.clone())
            .await
            .map_err(|e| ReadError::from_kube(doing, e))?;
        out.extend(list.items);
        match list.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => return Ok(out),
        }
    }
}

/// Lists cluster-wide; on 403 with a namespace to fall back to, lists that namespace and says
/// so on stderr.
async fn list_scoped<T, F, Fut>(
    what: &str,
    namespace: Option<&str>,
    mut page: F,
) -> Result<Vec<T>, ReadError>
where
    T: Clone,
    F: FnMut(Option<String>, ListParams) -> Fut,
    Fut: std::future::Future<Output = Result<ObjectList<T>, kube::Error>>,
{
    let doing = format!("listing {what} in all namespaces");
    match list_pages(&doing, |lp| page(None, lp)).await {
        Err(e) if e.code() == Some(403) && namespace.is_some() => {
            let ns = namespace.unwrap_or_default().to_owned();
            eprintln!(
                "warning: you may not list {what} in all namespaces; reading namespace {ns} only"
            );
            let doing = format!("listing {what} in namespace {ns}");
            list_pages(&doing, |lp| page(Some(ns.clone()), lp)).await
        }
        other => other,
    }
}

/// What [`read_snapshot`] needs to know.
#[derive(Debug, Clone)]
pub struct ReadScope<'a> {
    /// The namespace to fall back to when cluster-wide lists are forbidden.
    pub namespace: Option<&'a str>,
}

/// Reads every Usage, ClusterUsage and DependencyRule, and the objects of every kind they
/// name: metadata only for kinds only usages name (selectors read labels), full objects for
/// kinds a rule reads (its CEL reads any field).
pub async fn read_snapshot(
    client: &Client,
    discovery: &Discovery,
    scope: ReadScope<'_>,
) -> Result<Snapshot, ReadError> {
    if !discovery.lien_installed() {
        return Err(ReadError::NotInstalled);
    }
    let ns = scope.namespace;
    let usages = list_scoped("usages.lien.dev", ns, |n, lp| {
        let api: Api<Usage> = match n {
            Some(n) => Api::namespaced(client.clone(), &n),
            None => Api::all(client.clone()),
        };
        async move { api.list(&lp).await }
    });
    let cluster_usages = list_pages("listing clusterusages.lien.dev", |lp| {
        let api: Api<ClusterUsage> = Api::all(client.clone());
        async move { api.list(&lp).await }
    });
    let rules = list_pages("listing dependencyrules.lien.dev", |lp| {
        let api: Api<DependencyRule> = Api::all(client.clone());
        async move { api.list(&lp).await }
    });
    // The kinds rules read are listed as soon as the (few) rules are in, while the Usages are
    // still being listed: the two largest lists overlap instead of following each other.
    let rules_and_kinds = async {
        let rules: Vec<RuleView> = rules
            .await?
            .iter()
            .filter_map(RuleView::from_rule)
            .collect();
        let mut gks: BTreeSet<GroupKind> = BTreeSet::new();
        for r in &rules {
            gks.insert(r.of());
            gks.insert(r.by());
        }
        let (lists, unknown) = list_kinds(client, discovery, gks, true, ns).await?;
        Ok::<_, ReadError>((rules, lists, unknown))
    };
    let (usages, cluster_usages, (rules, mut lists, mut unknown)) =
        futures::try_join!(usages, cluster_usages, rules_and_kinds)?;
    let mut views: Vec<UsageView> = usages.iter().filter_map(UsageView::from_usage).collect();
    views.extend(
        cluster_usages
            .iter()
            .filter_map(UsageView::from_cluster_usage),
    );
    // Kinds only usages name: metadata is enough (selectors read labels).
    let listed: BTreeSet<GroupKind> = lists
        .iter()
        .map(|k| k.gk.clone())
        .chain(unknown.iter().cloned())
        .collect();
    let rest: BTreeSet<GroupKind> = views
        .iter()
        .flat_map(|v| v.kinds().map(|(gk, _)| gk))
        .filter(|gk| !listed.contains(gk))
        .collect();
    let (more, more_unknown) = list_kinds(client, discovery, rest, false, ns).await?;
    lists.extend(more);
    unknown.extend(more_unknown);
    Ok(Snapshot {
        usages: views,
        rules,
        kinds: lists,
        unknown,
    })
}

/// Lists every kind of `gks` that is served (full objects, or metadata only), concurrently;
/// returns the lists and the kinds not served.
async fn list_kinds(
    client: &Client,
    discovery: &Discovery,
    gks: BTreeSet<GroupKind>,
    full: bool,
    ns: Option<&str>,
) -> Result<(Vec<KindObjects>, Vec<GroupKind>), ReadError> {
    let mut unknown = Vec::new();
    let mut served = Vec::new();
    for gk in gks {
        match discovery.by_kind(&gk) {
            Some(r) => served.push(r.clone()),
            None => unknown.push(gk),
        }
    }
    let lists = try_join_all(served.into_iter().map(|r| async move {
        let what = r.plural_ref();
        let objects: Vec<DynamicObject> = if full {
            list_scoped(&what, ns, |n, lp| {
                let api = api_for(client, &r, n.as_deref());
                async move { api.list(&lp).await }
            })
            .await?
        } else {
            let types = TypeMeta {
                api_version: r.api.api_version.clone(),
                kind: r.api.kind.clone(),
            };
            list_scoped(&what, ns, |n, lp| {
                let api = api_for(client, &r, n.as_deref());
                async move { api.list_metadata(&lp).await }
            })
            .await?
            .into_iter()
            .map(|m| DynamicObject {
                types: Some(types.clone()),
                metadata: m.metadata,
                data: serde_json::Value::Null,
            })
            .collect()
        };
        Ok::<_, ReadError>(KindObjects {
            gk: r.gk(),
            namespaced: r.namespaced,
            api_version: r.api.api_version.clone(),
            plural: r.api.plural.clone(),
            objects,
        })
    }))
    .await?;
    Ok((lists, unknown))
}
