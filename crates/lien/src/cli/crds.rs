//! `lien crds`: the CRDs, generated from the Rust types in `lien-api`.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

#[derive(Debug, Args)]
pub struct CrdsArgs {
    /// Write one `<name>.yaml` per CRD into this directory instead of printing a YAML stream.
    #[arg(long)]
    pub out_dir: Option<PathBuf>,
}

pub fn run(args: CrdsArgs) -> anyhow::Result<()> {
    let files = lien_api::crd_files().context("rendering the CRDs as YAML")?;
    match args.out_dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            for (name, yaml) in files {
                let path = dir.join(name);
                std::fs::write(&path, yaml)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
        }
        None => {
            let stream: Vec<String> = files.into_iter().map(|(_, yaml)| yaml).collect();
            // A closed pipe ends the output quietly (`lien::output`).
            lien::output::print(&stream.join("---\n")).context("writing the CRDs")?;
        }
    }
    Ok(())
}
