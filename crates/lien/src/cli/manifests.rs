//! `lien manifests`: the complete install as YAML, generated from Rust (`lien::manifests`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use lien::manifests::{self, Options};

#[derive(Debug, Args)]
pub struct ManifestsArgs {
    /// Write the files of `deploy/` (one per part, `crds/`, and a `kustomization.yaml` listing
    /// them) into this directory instead of printing one YAML stream.
    #[arg(long, conflicts_with = "helm_chart")]
    pub out_dir: Option<PathBuf>,
    /// Write the Helm chart (`deploy/helm/lien`) into this directory instead; --image,
    /// --namespace and --replicas become its values' defaults.
    #[arg(long, value_name = "DIR")]
    pub helm_chart: Option<PathBuf>,
    /// The image the Deployment runs [default: lien:<version>, what `docker build -t
    /// lien:<version> .` builds from the repository's Dockerfile].
    #[arg(long, value_name = "REF", value_parser = parse_image)]
    pub image: Option<String>,
    /// The namespace Lien runs in: every namespaced object, the RBAC subjects, the Service the
    /// webhook configuration names and the certificate's DNS name follow it.
    #[arg(long, value_name = "NAME", default_value = manifests::NAMESPACE, value_parser = parse_namespace)]
    pub namespace: String,
    /// How many replicas answer the webhook (one of them leads); at least 1. Below 2 no
    /// PodDisruptionBudget is installed (it would block every node drain).
    #[arg(long, value_name = "N", default_value_t = manifests::REPLICAS, value_parser = parse_replicas,
          allow_negative_numbers = true)]
    pub replicas: u32,
    /// One more resource Lien may watch, label and delete, as `kubectl api-resources` names
    /// it: `plural` (core group), `plural.group`, `*.group` (all of a group) or `*.*`
    /// (everything, Secrets included). Repeatable; added to the defaults (built-in workload,
    /// storage and config kinds, never Secrets; `lien manifests --help` lists them). A Usage
    /// or rule naming a kind not granted says NotPermitted and names the resource to add here.
    #[arg(long = "resource", value_name = "RESOURCE", value_parser = parse_resource,
          long_help = resource_help())]
    pub resources: Vec<manifests::Resource>,
    /// Grant only the --resource flags given (and Namespaces, always), not the defaults.
    #[arg(long)]
    pub no_default_resources: bool,
}

fn resource_help() -> String {
    format!(
        "One more resource Lien may watch, label and delete, as `kubectl api-resources` names it: \
         `plural` (core group), `plural.group`, `*.group` (all of a group) or `*.*` (everything, \
         Secrets included). Repeatable; added to the defaults: {}. A Usage or rule naming a kind \
         not granted says NotPermitted and names the resource to add here.",
        manifests::DEFAULT_RESOURCES.join(", ")
    )
}

fn parse_resource(value: &str) -> Result<manifests::Resource, String> {
    manifests::Resource::parse(value)
}

fn parse_image(value: &str) -> Result<String, String> {
    manifests::check_image(value).map_err(|why| {
        format!(
            "not an image reference: {why} (e.g. lien:{0} or registry.example.com:5000/team/lien:{0})",
            env!("CARGO_PKG_VERSION")
        )
    })?;
    Ok(value.to_owned())
}

fn parse_namespace(value: &str) -> Result<String, String> {
    manifests::check_dns_label(value).map_err(|why| {
        format!(
            "not a namespace name: {why} (a DNS label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit)"
        )
    })?;
    Ok(value.to_owned())
}

fn parse_replicas(value: &str) -> Result<u32, String> {
    let n: i64 = value
        .parse()
        .map_err(|_| "not a whole number (e.g. 2)".to_owned())?;
    if n < 1 {
        return Err("Lien's webhook needs at least 1 replica (2, the default, keeps it answering during a rollout or a node drain)".into());
    }
    u32::try_from(n).map_err(|_| format!("more than {}", u32::MAX))
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

pub fn run(args: ManifestsArgs) -> anyhow::Result<()> {
    let options = Options {
        image: args.image.unwrap_or_else(manifests::image),
        namespace: args.namespace,
        replicas: args.replicas,
        resources: if args.no_default_resources {
            args.resources
        } else {
            manifests::default_resources()
                .into_iter()
                .chain(args.resources)
                .collect()
        },
    };
    // The parsers above checked each flag already; this holds the library's rules too.
    options.validate().map_err(anyhow::Error::msg)?;
    if let Some(dir) = args.helm_chart {
        for (path, text) in manifests::helm_chart(&options).context("rendering the chart")? {
            write(&dir.join(path), &text)?;
        }
        return Ok(());
    }
    let files = manifests::files_with(&options);
    match args.out_dir {
        Some(dir) => {
            for file in &files {
                let text = manifests::render_file(file)
                    .with_context(|| format!("rendering {}", file.path))?;
                write(&dir.join(&file.path), &text)?;
            }
            write(
                &dir.join("kustomization.yaml"),
                &manifests::kustomization_with(&options),
            )?;
        }
        None => {
            let stream = files
                .iter()
                .map(manifests::render_file)
                .collect::<Result<Vec<_>, _>>()
                .context("rendering the manifests")?;
            lien::output::print(&stream.join("---\n")).context("writing the manifests")?;
        }
    }
    Ok(())
}
