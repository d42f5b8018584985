//! `lien completion bash|zsh|fish`: shell completion scripts that ask the binary itself at each
//! <TAB> (`lien __complete WORDS… CURRENT`, cobra's protocol, `complete.rs`): commands, flags,
//! their values, and types, object names and namespaces read from the cluster.
//!
//! The scripts are written here by hand, small, one per shell. clap_complete's static
//! generators cannot offer names from the cluster, and its dynamic completion
//! (`env::CompleteEnv`) is behind the `unstable-dynamic` feature, which needs clap's
//! `unstable-ext` (both exempt from semver: a patch release may change or drop them) and speaks
//! its own protocol, whereas kubectl's plugin completion (`kubectl_complete-lien`) needs
//! cobra's: one protocol, answered by `complete.rs`, serves kubectl and all three shells.
//!
//! Each script is registered for the name the binary was started as (`lien`, or
//! `kubectl-lien` as krew installs it) and runs the command the user typed, so a script made by
//! `kubectl-lien completion zsh` asks `kubectl-lien __complete …`.

use anyhow::Context as _;
use clap::Args;

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
    lien::output::print(&script(&args.shell, bin_name)).context("writing the script")?;
    Ok(())
}

/// The script for `shell` (`bash`, `zsh`, anything else is fish: the argument's parser allows
/// only these three).
pub fn script(shell: &str, bin_name: &str) -> String {
    // Shell function names: `kubectl-lien` gives `_kubectl_lien_complete`.
    let func = bin_name.replace(|c: char| !c.is_ascii_alphanumeric(), "_");
    let template = match shell {
        "bash" => BASH,
        "zsh" => ZSH,
        _ => FISH,
    };
    template.replace("@BIN@", bin_name).replace("@FUNC@", &func)
}

/// bash: asks `BIN __complete WORDS…` (as kubectl's scripts do): the candidates before the last
/// line, `:<directive>` on the last; directive 0 lets bash complete file names when there is no
/// candidate.
const BASH: &str = r#"# bash completion for @BIN@: source it, e.g. `source <(@BIN@ completion bash)`.
_@FUNC@_complete() {
    local out directive line
    out=$("${COMP_WORDS[0]}" __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null) || return 0
    directive=${out##*:}
    out=${out%:*}
    COMPREPLY=()
    while IFS= read -r line; do
        [[ -n $line ]] && COMPREPLY+=("${line%%$'\t'*}")
    done <<< "$out"
    if [[ $directive == 0 && ${#COMPREPLY[@]} -eq 0 ]]; then
        compopt -o default 2>/dev/null
    fi
    return 0
}
complete -o nosort -F _@FUNC@_complete @BIN@ 2>/dev/null || complete -F _@FUNC@_complete @BIN@
"#;

/// zsh: the same question; `value<TAB>description` lines become `_describe` entries (`value:
/// description`, a `:` in the value escaped), shown with their descriptions. With no candidate,
/// directive 0 completes file names (`_files`), NoFileComp (4) offers nothing. Works sourced
/// (after `compinit`) and as an autoloaded `_@FUNC@` file in `$fpath` (the `#compdef` line; the
/// last line then completes instead of registering, as cobra's scripts do).
const ZSH: &str = r#"#compdef @BIN@
# zsh completion for @BIN@: `source <(@BIN@ completion zsh)` after compinit, or save it as
# `_@FUNC@` in a directory of $fpath.
_@FUNC@() {
    local out directive line value
    local -a candidates
    out=$("${words[1]}" __complete "${(@)words[2,CURRENT]}" 2>/dev/null) || return 1
    directive=${out##*:}
    out=${out%:*}
    for line in "${(@f)out}"; do
        [[ -n $line ]] || continue
        value=${${line%%$'\t'*}//:/\\:}
        if [[ $line == *$'\t'* ]]; then
            candidates+=("$value:${line#*$'\t'}")
        else
            candidates+=("$value")
        fi
    done
    if (( ${#candidates} )); then
        _describe -t @FUNC@ '@BIN@' candidates
    elif (( (directive & 4) == 0 )); then
        _files
    fi
}
if [[ $funcstack[1] == _@FUNC@ ]]; then
    _@FUNC@ "$@"
else
    compdef _@FUNC@ @BIN@
fi
"#;

/// fish: a condition asks the binary and keeps the answer in a global; the `-f` entry offers it
/// (fish shows the text after a tab as the description). With no candidate and directive 0 the
/// condition fails, so no `-f` entry applies and fish completes file names, as cobra's script
/// does. NoFileComp (4) is read without `math bitand`, which older fish lacks.
const FISH: &str = r#"# fish completion for @BIN@: `@BIN@ completion fish | source`, or save it as
# ~/.config/fish/completions/@BIN@.fish.
function __@FUNC@_prepare
    set -l words (commandline -opc)
    set -g __@FUNC@_results ($words[1] __complete $words[2..-1] (commandline -ct) 2>/dev/null)
    or begin
        set -g __@FUNC@_results
        return 0
    end
    set -l directive (string replace -r '^:' '' -- $__@FUNC@_results[-1])
    set -e __@FUNC@_results[-1]
    set -l nofiles (math "floor($directive / 4) % 2")
    if test (count $__@FUNC@_results) -eq 0 -a "$nofiles" = 0
        return 1
    end
    return 0
end
complete -c @BIN@ -e
complete -c @BIN@ -n __@FUNC@_prepare -f -a '$__@FUNC@_results'
"#;
