//! How the commands that change a cluster (`lien run`, `lien uninstall`) reach it, with
//! kubectl's `--kubeconfig` and `--context`, and the checks `lien run` makes before it starts:
//! each startup failure said in one line, naming its real cause and the fix, instead of a
//! later step blaming RBAC or retrying forever.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use kube::config::{KubeConfigOptions, Kubeconfig};
// One wording for an API server that gives no answer, here and in the plugin.
pub use lien::plugin::read::{UNREACHABLE_HINT, root_cause};

/// kubectl's connection flags.
#[derive(Debug, Clone, Default, Args)]
pub struct ClusterArgs {
    /// Path to the kubeconfig file (default: the in-cluster service account inside a pod,
    /// else $KUBECONFIG, else ~/.kube/config).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

/// A client for the cluster, and the API server's URL (for messages).
pub struct Connected {
    pub client: kube::Client,
    pub url: String,
}

impl ClusterArgs {
    /// Like kubectl: without flags, the in-cluster service account inside a pod, else
    /// $KUBECONFIG (or ~/.kube/config) and its current context; with them, that file and
    /// context.
    pub async fn connect(&self) -> anyhow::Result<Connected> {
        let config = if self.kubeconfig.is_none() && self.context.is_none() {
            kube::Config::infer()
                .await
                .context("finding the cluster (no in-cluster service account, and no kubeconfig: pass --kubeconfig or set KUBECONFIG)")?
        } else {
            let kubeconfig = match &self.kubeconfig {
                Some(path) => Kubeconfig::read_from(path)
                    .with_context(|| format!("reading --kubeconfig {}", path.display()))?,
                None => Kubeconfig::read()
                    .context("reading the kubeconfig ($KUBECONFIG or ~/.kube/config)")?,
            };
            let options = KubeConfigOptions {
                context: self.context.clone(),
                ..KubeConfigOptions::default()
            };
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .with_context(|| match &self.context {
                    Some(c) => format!("using context {c:?} of the kubeconfig"),
                    None => "using the kubeconfig's current context".to_owned(),
                })?
        };
        let url = config.cluster_url.to_string();
        let url = url.trim_end_matches('/').to_owned();
        let client = kube::Client::try_from(config).context("building the client")?;
        Ok(Connected { client, url })
    }
}

/// The API server could not be asked anything.
pub fn unreachable(url: &str, cause: &str) -> String {
    format!("cannot reach the API server at {url}: {cause} — {UNREACHABLE_HINT}")
}

/// The answer to `GET /api/v1/namespaces/<namespace>`, judged: `Err` is the message. Only a
/// 404 is conclusive; one who may not read namespaces (403) may still work in it.
pub fn namespace_verdict(namespace: &str, code: Option<u16>) -> Result<(), String> {
    match code {
        Some(404) => Err(format!(
            "namespace {namespace} does not exist: create it (kubectl create namespace {namespace}), install Lien with `lien manifests | kubectl apply -f -`, or pass --namespace"
        )),
        _ => Ok(()),
    }
}

/// Which of Lien's resources (plurals) `served` (what `GET /apis/lien.dev/<version>` lists)
/// lacks, judged: `Err` is the message.
pub fn crds_verdict(version: &str, wanted: &[String], served: &[String]) -> Result<(), String> {
    let missing: Vec<&str> = wanted
        .iter()
        .filter(|w| !served.contains(w))
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let what = if missing.len() == wanted.len() {
        format!(
            "Lien's CRDs are not installed (the API server serves no {}/{version})",
            lien_api::GROUP
        )
    } else {
        format!(
            "Lien's CRDs are incomplete (the API server does not serve {} of {}/{version})",
            missing.join(", "),
            lien_api::GROUP
        )
    };
    Err(format!(
        "{what}: install them with `lien crds | kubectl apply -f -`, or start with --install-crds"
    ))
}

/// Lien's served version and the plurals of its kinds, from its own CRDs.
fn lien_resources() -> (String, Vec<String>) {
    let crds = lien_api::crds();
    let version = crds
        .first()
        .and_then(|c| c.spec.versions.iter().find(|v| v.served))
        .map(|v| v.name.clone())
        .unwrap_or_else(|| "v1alpha1".to_owned());
    let plurals = crds.into_iter().map(|c| c.spec.names.plural).collect();
    (version, plurals)
}

/// Whether the API server answers at all (its version).
pub async fn check_reachable(c: &Connected) -> anyhow::Result<()> {
    match c.client.apiserver_version().await {
        Ok(_) => Ok(()),
        // It answered: reachable (a 401/403 on /version is reported by whatever comes next,
        // with its own words).
        Err(kube::Error::Api(_)) => Ok(()),
        Err(e) => anyhow::bail!(unreachable(&c.url, &root_cause(&e))),
    }
}

/// `lien run`'s checks before anything starts: the API server answers, `namespace` exists,
/// Lien's CRDs are served. Each failure is one line with the fix.
pub async fn preflight(c: &Connected, namespace: &str) -> anyhow::Result<()> {
    check_reachable(c).await?;
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
        kube::Api::all(c.client.clone());
    let code = match namespaces.get(namespace).await {
        Ok(_) => None,
        Err(kube::Error::Api(s)) => Some(s.code),
        Err(e) => anyhow::bail!(unreachable(&c.url, &root_cause(&e))),
    };
    namespace_verdict(namespace, code).map_err(anyhow::Error::msg)?;
    let (version, wanted) = lien_resources();
    let served = match c
        .client
        .list_api_group_resources(&format!("{}/{version}", lien_api::GROUP))
        .await
    {
        Ok(list) => list.resources.into_iter().map(|r| r.name).collect(),
        Err(kube::Error::Api(s)) if s.code == 404 => Vec::new(),
        // Not allowed to ask, or another answer: the controller says more if it matters.
        Err(kube::Error::Api(_)) => wanted.clone(),
        Err(e) => anyhow::bail!(unreachable(&c.url, &root_cause(&e))),
    };
    crds_verdict(&version, &wanted, &served).map_err(anyhow::Error::msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_namespace_is_named_with_the_fix_and_403_is_not_conclusive() {
        let err = namespace_verdict("lien-system", Some(404)).expect_err("missing");
        assert!(
            err.contains("namespace lien-system does not exist"),
            "{err}"
        );
        assert!(
            err.contains("kubectl create namespace lien-system"),
            "{err}"
        );
        assert!(!err.contains('\n'));
        assert_eq!(namespace_verdict("lien-system", Some(403)), Ok(()));
        assert_eq!(namespace_verdict("lien-system", None), Ok(()));
    }

    #[test]
    fn missing_crds_are_named_with_the_fix() {
        let (version, wanted) = lien_resources();
        assert!(wanted.contains(&"usages".to_owned()), "{wanted:?}");
        let err = crds_verdict(&version, &wanted, &[]).expect_err("none");
        assert!(err.contains("Lien's CRDs are not installed"), "{err}");
        assert!(err.contains("lien crds | kubectl apply -f -"), "{err}");
        assert!(err.contains("--install-crds"), "{err}");
        let some: Vec<String> = wanted.iter().filter(|w| *w != "usages").cloned().collect();
        let err = crds_verdict(&version, &wanted, &some).expect_err("one");
        assert!(err.contains("does not serve usages of lien.dev/"), "{err}");
        assert_eq!(crds_verdict(&version, &wanted, &wanted), Ok(()));
    }

    #[test]
    fn unreachable_names_the_url_and_the_flags() {
        let msg = unreachable("https://127.0.0.1:1", "Connection refused (os error 111)");
        assert!(
            msg.starts_with(
                "cannot reach the API server at https://127.0.0.1:1: Connection refused"
            )
        );
        assert!(msg.contains("--kubeconfig/--context"));
    }
}
