//! `lien manifests`: the complete install as YAML, generated from Rust (`lien::manifests`).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use lien::manifests;

#[derive(Debug, Args)]
pub struct ManifestsArgs {
    /// Write the files of `deploy/` (one per part, `crds/`, and a `kustomization.yaml` listing
    /// them) into this directory instead of printing one YAML stream.
    #[arg(long)]
    pub out_dir: Option<PathBuf>,
}

pub fn run(args: ManifestsArgs) -> anyhow::Result<()> {
    let files = manifests::files();
    match args.out_dir {
        Some(dir) => {
            for file in &files {
                let path = dir.join(&file.path);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)
                        .with_context(|| format!("creating {}", parent.display()))?;
                }
                let text = manifests::render_file(file)
                    .with_context(|| format!("rendering {}", file.path))?;
                std::fs::write(&path, text)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            let path = dir.join("kustomization.yaml");
            std::fs::write(&path, manifests::kustomization())
                .with_context(|| format!("writing {}", path.display()))?;
        }
        None => {
            let stream = files
                .iter()
                .map(manifests::render_file)
                .collect::<Result<Vec<_>, _>>()
                .context("rendering the manifests")?;
            print!("{}", stream.join("---\n"));
        }
    }
    Ok(())
}
