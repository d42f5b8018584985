//! `kubectl lien why`: every relation holding one object, and what to do about each. Pure.

use std::fmt::Write as _;
use std::time::Duration;

use lien_core::{ObjectKey, Source, USAGE_FINALIZER, finalizer_removal_command, namespace_holds};

use super::graph::object_label;
use super::snapshot::Graph;

/// How to make `source` stop holding anything: what to do, and the exact commands, in order
/// (each one line, as typed in a shell).
///
/// - A DependencyRule: delete it (or change it), which drops every relation it derives.
/// - A ClusterUsage without `by`: delete it; it carries no finalizer, so it goes at once and
///   its protection with it.
/// - A Usage without `by`: delete it; Lien removes its finalizer at once — unless its
///   namespace is being deleted (issue 27): then Lien keeps it, and removing that finalizer is
///   what lifts it.
/// - One with `by`: deleting it is not enough — it keeps Lien's finalizer (`lien.dev/usage`)
///   until its users are gone, and holds until then.
///
/// Where deleting is not enough: delete it without waiting (unless it is being deleted
/// already), then remove that finalizer with a JSON patch whose `test` op checks the
/// finalizer's position (read from the live Usage), so the patch fails rather than remove
/// another controller's finalizer if the list changed since. The controller adds no finalizer
/// to a Usage being deleted, so it does not come back.
pub(crate) fn source_fix_steps(graph: &Graph, source: &Source) -> (String, Vec<String>) {
    let target = source.kubectl_arg().to_string();
    let kind = match source {
        Source::Usage { .. } => "Usage",
        Source::ClusterUsage { .. } => "ClusterUsage",
        Source::Rule { .. } => {
            return (
                "delete the DependencyRule, which holds every such pair (or change its spec so that it no longer relates them):".to_owned(),
                vec![format!("kubectl delete {target}")],
            );
        }
    };
    let facts = graph.usages.get(source);
    let finalizer = facts.and_then(|f| f.finalizers.iter().position(|f| f == USAGE_FINALIZER));
    let has_by = facts.is_some_and(|f| f.has_by);
    let deleting = facts.is_some_and(|f| f.deleting);
    match finalizer.filter(|_| has_by || deleting) {
        Some(i) => {
            let why = if has_by {
                format!("it keeps Lien's finalizer {USAGE_FINALIZER} while its users exist")
            } else {
                format!(
                    "it is being deleted, and Lien keeps it (its finalizer {USAGE_FINALIZER}) while its namespace is being deleted"
                )
            };
            let mut commands = Vec::new();
            if !deleting {
                commands.push(format!("kubectl delete {target} --wait=false"));
            }
            commands.push(finalizer_removal_command(source, i));
            let what = if deleting {
                "remove that finalizer"
            } else {
                "delete it and remove that finalizer"
            };
            (format!("drop the {kind}: {why}, so {what}:"), commands)
        }
        None if finalizer.is_some() => (
            format!("remove the {kind} (Lien removes its finalizer at once):"),
            vec![format!("kubectl delete {target}")],
        ),
        None => (
            format!("remove the {kind} (it carries no finalizer of Lien's, so it goes at once):"),
            vec![format!("kubectl delete {target}")],
        ),
    }
}

/// [`source_fix_steps`] as text: what to do on the first line, then each command on a line of
/// its own indented by two spaces (callers indent the whole block further).
pub(crate) fn source_fix(graph: &Graph, source: &Source) -> String {
    let (what, commands) = source_fix_steps(graph, source);
    let mut out = what;
    for c in commands {
        let _ = write!(out, "\n  {c}");
    }
    out
}

/// `text`'s lines after the first indented by `indent`, for a block under a label.
fn indented(text: &str, indent: &str) -> String {
    text.replace('\n', &format!("\n{indent}"))
}

/// The text of `kubectl lien why` for `key`: who holds it, through which source, why, the
/// refused DELETE Lien recorded (replayed until when, with Lien's `--replay-ttl-hours` as
/// `replay_ttl`), and what to do. The caller has checked that the object exists.
pub fn why(graph: &Graph, key: &ObjectKey, replay_ttl: Duration) -> String {
    let mut out = String::new();
    let mut held: Vec<_> = graph.index.blockers(key).map(|r| r.to_relation()).collect();
    held.sort();
    held.dedup();
    let info = graph.nodes.get(key);
    if held.is_empty() {
        let _ = writeln!(
            out,
            "{} is not in use{}: no Usage, ClusterUsage or DependencyRule holds it.",
            object_label(key),
            if key.kind == "Namespace" && key.group.is_empty() {
                " itself"
            } else {
                ""
            }
        );
    } else {
        let n = held.len();
        let _ = writeln!(
            out,
            "{} is in use ({n} relation{}); a DELETE is refused while any of them holds:",
            object_label(key),
            if n == 1 { "" } else { "s" }
        );
        for (i, r) in held.iter().enumerate() {
            let _ = writeln!(out);
            match &r.by {
                Some(by) => {
                    let _ = writeln!(out, "  {}. used by {}", i + 1, object_label(by));
                    let _ = writeln!(out, "     source: {}", r.source);
                    if let Some(reason) = &r.reason {
                        let _ = writeln!(out, "     reason: {reason}");
                    }
                    let _ = writeln!(
                        out,
                        "     replay: {}",
                        if r.replay {
                            "yes: a refused DELETE is re-issued once the last user is gone"
                        } else {
                            "no"
                        }
                    );
                    let by_state = graph.nodes.get(by);
                    if by_state.is_some_and(|b| b.deleting) {
                        let _ = writeln!(
                            out,
                            "     to do: wait: the user is being deleted (it still holds until it is gone)"
                        );
                    } else {
                        let _ = writeln!(
                            out,
                            "     to do: delete the user first: kubectl delete {}",
                            by.kubectl_arg()
                        );
                    }
                    let _ = writeln!(
                        out,
                        "        or: {}",
                        indented(&source_fix(graph, &r.source), "            ")
                    );
                }
                None => {
                    let _ = writeln!(out, "  {}. protected (no user)", i + 1);
                    let _ = writeln!(out, "     source: {}", r.source);
                    if let Some(reason) = &r.reason {
                        let _ = writeln!(out, "     reason: {reason}");
                    }
                    let _ = writeln!(
                        out,
                        "     to do: {}",
                        indented(&source_fix(graph, &r.source), "            ")
                    );
                }
            }
        }
    }
    if key.group.is_empty() && key.kind == "Namespace" && key.namespace.is_none() {
        namespace_holds_text(graph, &key.name, &mut out);
    }
    let _ = writeln!(out);
    if info.is_some_and(|i| i.deleting) {
        let _ = writeln!(
            out,
            "It is being deleted (deletionTimestamp is set): it goes once its finalizers are removed."
        );
    }
    match info.and_then(|i| i.attempt.as_ref()) {
        None => {
            let _ = writeln!(out, "Refused DELETE: none recorded.");
        }
        Some(a) => {
            let hours = replay_ttl.as_secs() / 3600;
            let who = format!("by {} at {}", a.attempt.user, a.attempt.time);
            if !a.signed {
                let _ = writeln!(
                    out,
                    "Refused DELETE: a record {who} is present but not signed: Lien did not write it and will not replay it."
                );
            } else if a.attempt.replay {
                let _ = writeln!(
                    out,
                    "Refused DELETE: recorded {who}; Lien re-issues it once nothing holds the object, until {} (--replay-ttl-hours={hours}).",
                    a.until(replay_ttl)
                );
            } else {
                let _ = writeln!(
                    out,
                    "Refused DELETE: recorded {who}; not replayed (no relation asked for replayDeletion): delete it again once it is free."
                );
            }
        }
    }
    if !held.is_empty() {
        let _ = writeln!(
            out,
            "Break-glass (only if Lien runs with --break-glass-group and you are in that group; audited): kubectl annotate {} lien.dev/break-glass=\"<reason>\", then delete it.",
            key.kubectl_arg()
        );
    }
    out
}

/// What in namespace `ns` holds its deletion (issue 27): every protection of an object in it,
/// every user outside, each with the command that lifts it — what the Namespace DELETE's
/// refusal counts. Users inside go with the namespace and are not listed.
fn namespace_holds_text(graph: &Graph, ns: &str, out: &mut String) {
    let (count, mut lines) = namespace_holds(&graph.index, ns, usize::MAX);
    lines.sort();
    let _ = writeln!(out);
    if count == 0 {
        let _ = writeln!(
            out,
            "Nothing in it holds its deletion: no protection, no user outside (users inside go with it)."
        );
        return;
    }
    let _ = writeln!(
        out,
        "What is in it holds its deletion ({count}); deleting the namespace is refused while any of them holds (users inside go with it and do not count):"
    );
    for (i, l) in lines.iter().enumerate() {
        let _ = writeln!(out);
        let _ = writeln!(out, "  {}. {}", i + 1, l.text);
        let _ = writeln!(out, "     to do: {}", l.command);
    }
}
