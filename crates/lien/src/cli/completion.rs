//! `lien completion bash|zsh|fish`: shell completion scripts, generated from the command
//! definition by clap_complete (so they never drift from the flags).

use anyhow::Context as _;
use clap::{Args, CommandFactory};
use clap_complete::Shell;

/// `completion`.
#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell.
    #[arg(value_parser = ["bash", "zsh", "fish"])]
    pub shell: String,
}

/// Prints the script for `args.shell`, for the command as it was invoked (`lien`, or
/// `kubectl-lien` for kubectl's plugin completion).
pub fn run(args: CompletionArgs, bin_name: &str) -> anyhow::Result<()> {
    let shell = match args.shell.as_str() {
        "bash" => Shell::Bash,
        "zsh" => Shell::Zsh,
        _ => Shell::Fish,
    };
    let mut cmd = super::Cli::command();
    // Generated into memory: clap_complete panics on a failed write, and a closed pipe
    // (`| head`) must end the output quietly instead (`lien::output`).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, bin_name, &mut script);
    lien::output::print(&String::from_utf8_lossy(&script)).context("writing the script")?;
    Ok(())
}
