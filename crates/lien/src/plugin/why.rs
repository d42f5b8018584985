//! `kubectl lien why`: every relation holding one object, and what to do about each — as text
//! or as data (`-o json|yaml`), both from one [`WhyReport`]. Pure.

use std::fmt::Write as _;
use std::time::Duration;

use lien_core::{ObjectKey, Source, USAGE_FINALIZER, finalizer_removal_command, namespace_holds};
use serde::Serialize;

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

/// What `kubectl lien why` says about one object, as data: the text ([`why`]) and
/// `-o json|yaml` ([`why_json`], [`why_yaml`]) are both written from it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WhyReport {
    /// The object.
    pub object: ObjectKey,
    /// Every relation holding it (empty: not in use), sorted.
    pub relations: Vec<Held>,
    /// For a Namespace: what in it holds its deletion.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<NamespaceHolds>,
    /// Whether it is being deleted (deletionTimestamp set).
    pub deleting: bool,
    /// The refused DELETE Lien recorded on it, if any.
    pub refused_delete: Option<RefusedDelete>,
    /// How to override every relation in an emergency (when it is held).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub break_glass: Option<String>,
}

/// One relation holding the object.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Held {
    /// The user; `None` for a protection by reason only.
    pub user: Option<ObjectKey>,
    /// Whether the user is being deleted (it still holds until it is gone).
    pub user_deleting: bool,
    /// The Usage, ClusterUsage or DependencyRule that makes the relation.
    pub source: Source,
    /// Its reason.
    pub reason: Option<String>,
    /// Whether a refused DELETE is re-issued once the relation goes.
    pub replay: bool,
    /// Warn only (its source's `spec.enforcement: Warn`): it refuses nothing; a DELETE goes
    /// through with a warning naming it.
    pub warn_only: bool,
    /// What lifts it, each way an alternative: its commands in order.
    pub to_do: Vec<Step>,
}

/// One way to lift a relation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    /// What to do, in words.
    pub what: String,
    /// The commands, one shell line each, in order.
    pub commands: Vec<String>,
}

/// What in a Namespace holds its deletion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NamespaceHolds {
    /// How many relations hold it.
    pub count: usize,
    /// Each, with the command that lifts it, sorted.
    pub holds: Vec<Step>,
}

/// A refused DELETE recorded on the object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RefusedDelete {
    /// Who was refused.
    pub user: String,
    /// When.
    pub time: String,
    /// Whether the record carries a signature (an unsigned one is not Lien's, never replayed).
    pub signed: bool,
    /// Whether Lien re-issues it once nothing holds the object.
    pub replay: bool,
    /// Until when it is replayable.
    pub replay_until: String,
    /// Lien's `--replay-ttl-hours`, which `replayUntil` assumes.
    pub replay_ttl_hours: u64,
}

/// The report of `kubectl lien why` for `key`: who holds it, through which source, why, the
/// refused DELETE Lien recorded (replayed until when, with Lien's `--replay-ttl-hours` as
/// `replay_ttl`), and what to do. The caller has checked that the object exists.
pub fn why_report(graph: &Graph, key: &ObjectKey, replay_ttl: Duration) -> WhyReport {
    let mut held: Vec<_> = graph.index.blockers(key).map(|r| r.to_relation()).collect();
    held.sort();
    held.dedup();
    let relations = held
        .into_iter()
        .map(|r| {
            let (what, commands) = source_fix_steps(graph, &r.source);
            let fix = Step { what, commands };
            let user_deleting =
                r.by.as_ref()
                    .is_some_and(|by| graph.nodes.get(by).is_some_and(|b| b.deleting));
            let to_do = match &r.by {
                Some(_) if user_deleting => vec![
                    Step {
                        what: "wait: the user is being deleted (it still holds until it is gone)"
                            .to_owned(),
                        commands: vec![],
                    },
                    fix,
                ],
                Some(by) => vec![
                    Step {
                        what: "delete the user first".to_owned(),
                        commands: vec![format!("kubectl delete {}", by.kubectl_arg())],
                    },
                    fix,
                ],
                None => vec![fix],
            };
            Held {
                user: r.by,
                user_deleting,
                source: r.source,
                reason: r.reason.map(|r| r.to_string()),
                replay: r.replay,
                warn_only: r.warn,
                to_do,
            }
        })
        .collect::<Vec<_>>();
    let namespace = (key.group.is_empty() && key.kind == "Namespace" && key.namespace.is_none())
        .then(|| {
            let (count, mut lines) = namespace_holds(&graph.index, &key.name, usize::MAX);
            lines.sort();
            NamespaceHolds {
                count,
                holds: lines
                    .into_iter()
                    .map(|l| Step {
                        what: l.text,
                        commands: vec![l.command],
                    })
                    .collect(),
            }
        });
    let info = graph.nodes.get(key);
    let refused_delete = info
        .and_then(|i| i.attempt.as_ref())
        .map(|a| RefusedDelete {
            user: a.attempt.user.clone(),
            time: a.attempt.time.to_string(),
            signed: a.signed,
            replay: a.attempt.replay,
            replay_until: a.until(replay_ttl).to_string(),
            replay_ttl_hours: replay_ttl.as_secs() / 3600,
        });
    let break_glass = (!relations.is_empty()).then(|| {
        format!(
            "kubectl annotate {} lien.dev/break-glass=\"<reason>\"",
            key.kubectl_arg()
        )
    });
    WhyReport {
        object: key.clone(),
        relations,
        namespace,
        deleting: info.is_some_and(|i| i.deleting),
        refused_delete,
        break_glass,
    }
}

/// A step as text: what to do, then each command on a line of its own indented by two spaces
/// (callers indent the whole block further).
fn step_text(step: &Step) -> String {
    let mut out = step.what.clone();
    for c in &step.commands {
        let _ = write!(out, "\n  {c}");
    }
    out
}

/// The text of `kubectl lien why` for `key` ([`why_report`], for people).
pub fn why(graph: &Graph, key: &ObjectKey, replay_ttl: Duration) -> String {
    why_text(&why_report(graph, key, replay_ttl))
}

/// `-o json`: the [`WhyReport`].
pub fn why_json(report: &WhyReport) -> String {
    let mut s = serde_json::to_string_pretty(report).unwrap_or_default();
    s.push('\n');
    s
}

/// `-o yaml`: the [`WhyReport`].
pub fn why_yaml(report: &WhyReport) -> String {
    serde_yaml_ng::to_string(report).unwrap_or_default()
}

/// Said under each relation in warn mode.
const WARN_ONLY_LINE: &str =
    "enforcement: Warn — refuses nothing; set spec.enforcement: Deny to enforce it";

/// The report for people.
pub fn why_text(report: &WhyReport) -> String {
    let mut out = String::new();
    let key = &report.object;
    if report.relations.is_empty() {
        let _ = writeln!(
            out,
            "{} is not in use{}: no Usage, ClusterUsage or DependencyRule holds it.",
            object_label(key),
            if report.namespace.is_some() {
                " itself"
            } else {
                ""
            }
        );
    } else {
        let n = report.relations.len();
        let warn_only = report.relations.iter().filter(|r| r.warn_only).count();
        let s = if n == 1 { "" } else { "s" };
        let _ = if warn_only == n {
            // Never claim a protection that is not enforced.
            writeln!(
                out,
                "{} is in use ({n} relation{s}), in warn mode only (spec.enforcement: Warn): a DELETE is NOT refused; it goes through with a warning naming them:",
                object_label(key),
            )
        } else if warn_only > 0 {
            writeln!(
                out,
                "{} is in use ({n} relation{s}); a DELETE is refused while any enforced one holds ({warn_only} only warn):",
                object_label(key),
            )
        } else {
            writeln!(
                out,
                "{} is in use ({n} relation{s}); a DELETE is refused while any of them holds:",
                object_label(key),
            )
        };
        for (i, r) in report.relations.iter().enumerate() {
            let _ = writeln!(out);
            match &r.user {
                Some(by) => {
                    let _ = writeln!(out, "  {}. used by {}", i + 1, object_label(by));
                    let _ = writeln!(out, "     source: {}", r.source);
                    if let Some(reason) = &r.reason {
                        let _ = writeln!(out, "     reason: {reason}");
                    }
                    if r.warn_only {
                        let _ = writeln!(out, "     {WARN_ONLY_LINE}");
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
                    let [first, fix] = &r.to_do[..] else {
                        continue;
                    };
                    match first.commands.first() {
                        Some(c) => {
                            let _ = writeln!(out, "     to do: {}: {c}", first.what);
                        }
                        None => {
                            let _ = writeln!(out, "     to do: {}", first.what);
                        }
                    }
                    let _ = writeln!(
                        out,
                        "        or: {}",
                        indented(&step_text(fix), "            ")
                    );
                }
                None => {
                    let _ = writeln!(out, "  {}. protected (no user)", i + 1);
                    let _ = writeln!(out, "     source: {}", r.source);
                    if let Some(reason) = &r.reason {
                        let _ = writeln!(out, "     reason: {reason}");
                    }
                    if r.warn_only {
                        let _ = writeln!(out, "     {WARN_ONLY_LINE}");
                    }
                    if let Some(fix) = r.to_do.first() {
                        let _ = writeln!(
                            out,
                            "     to do: {}",
                            indented(&step_text(fix), "            ")
                        );
                    }
                }
            }
        }
    }
    if let Some(ns) = &report.namespace {
        namespace_holds_text(ns, &mut out);
    }
    let _ = writeln!(out);
    if report.deleting {
        let _ = writeln!(
            out,
            "It is being deleted (deletionTimestamp is set): it goes once its finalizers are removed."
        );
    }
    match &report.refused_delete {
        None => {
            let _ = writeln!(out, "Refused DELETE: none recorded.");
        }
        Some(a) => {
            let who = format!("by {} at {}", a.user, a.time);
            if !a.signed {
                let _ = writeln!(
                    out,
                    "Refused DELETE: a record {who} is present but not signed: Lien did not write it and will not replay it."
                );
            } else if a.replay {
                let _ = writeln!(
                    out,
                    "Refused DELETE: recorded {who}; Lien re-issues it once nothing holds the object, until {} (--replay-ttl-hours={}).",
                    a.replay_until, a.replay_ttl_hours
                );
            } else {
                let _ = writeln!(
                    out,
                    "Refused DELETE: recorded {who}; not replayed (no relation asked for replayDeletion): delete it again once it is free."
                );
            }
        }
    }
    if let Some(command) = &report.break_glass {
        let _ = writeln!(
            out,
            "Break-glass (only if Lien runs with --break-glass-group and you are in that group; audited): {command}, then delete it."
        );
    }
    out
}

/// What in a namespace holds its deletion (issue 27): every protection of an object in it,
/// every user outside, each with the command that lifts it — what the Namespace DELETE's
/// refusal counts. Users inside go with the namespace and are not listed.
fn namespace_holds_text(holds: &NamespaceHolds, out: &mut String) {
    let _ = writeln!(out);
    if holds.count == 0 {
        let _ = writeln!(
            out,
            "Nothing in it holds its deletion: no protection, no user outside (users inside go with it)."
        );
        return;
    }
    let _ = writeln!(
        out,
        "What is in it holds its deletion ({}); deleting the namespace is refused while any of them holds (users inside go with it and do not count):",
        holds.count
    );
    for (i, l) in holds.holds.iter().enumerate() {
        let _ = writeln!(out);
        let _ = writeln!(out, "  {}. {}", i + 1, l.what);
        for c in &l.commands {
            let _ = writeln!(out, "     to do: {c}");
        }
    }
}
