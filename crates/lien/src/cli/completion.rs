//! `lien completion bash|zsh|fish`: shell completion scripts. bash's asks the binary itself at
//! each <TAB> (`lien __complete …`, `complete.rs`): commands, flags, their values, and types,
//! object names and namespaces read from the cluster. zsh's and fish's are generated from the
//! command definition by clap_complete (commands, flags and their values; no names from the
//! cluster).

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
    if shell == Shell::Bash {
        lien::output::print(&bash_script(bin_name)).context("writing the script")?;
        return Ok(());
    }
    let mut cmd = super::Cli::command();
    // Generated into memory: clap_complete panics on a failed write, and a closed pipe
    // (`| head`) must end the output quietly instead (`lien::output`).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, bin_name, &mut script);
    lien::output::print(&String::from_utf8_lossy(&script)).context("writing the script")?;
    Ok(())
}

/// A bash completion function asking `BIN __complete WORDS…` (cobra's protocol, as kubectl's
/// scripts do): the candidates before the last line, `:<directive>` on the last; directive 0
/// lets bash complete file names when there is no candidate.
fn bash_script(bin_name: &str) -> String {
    let func = format!(
        "_{}_complete",
        bin_name.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
    );
    format!(
        r#"# bash completion for {bin_name}: source it, e.g. `source <({bin_name} completion bash)`.
{func}() {{
    local out directive line
    out=$("${{COMP_WORDS[0]}}" __complete "${{COMP_WORDS[@]:1:COMP_CWORD}}" 2>/dev/null) || return 0
    directive=${{out##*:}}
    out=${{out%:*}}
    COMPREPLY=()
    while IFS= read -r line; do
        [[ -n $line ]] && COMPREPLY+=("${{line%%$'\t'*}}")
    done <<< "$out"
    if [[ $directive == 0 && ${{#COMPREPLY[@]}} -eq 0 ]]; then
        compopt -o default 2>/dev/null
    fi
    return 0
}}
complete -o nosort -F {func} {bin_name} 2>/dev/null || complete -F {func} {bin_name}
"#
    )
}
