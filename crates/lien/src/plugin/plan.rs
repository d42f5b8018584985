//! `kubectl lien plan`: a safe deletion order — users before what they use — as numbered steps
//! whose objects may be deleted in parallel. The order is core's [`deletion_order`] (Kahn's
//! algorithm over the `by → of` graph); a cycle is refused, naming the objects and the Usages
//! and rules that make it. Pure.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use lien_core::{ObjectKey, Source, deletion_order};
use serde::Serialize;

use super::graph::object_label;
use super::snapshot::Graph;

/// A reason-only protection on an object of the plan: no order lifts it, so the plan names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Held {
    /// The object.
    pub object: ObjectKey,
    /// The Usage or ClusterUsage.
    pub source: Source,
    /// Its reason.
    pub reason: String,
}

/// A deletion order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Steps, in order; each sorted.
    pub steps: Vec<Vec<ObjectKey>>,
    /// Protections no order lifts (their DELETE will be refused until the Usage goes).
    pub protected: Vec<Held>,
}

/// One group of objects that use each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CycleGroup {
    /// The objects, sorted.
    pub objects: Vec<ObjectKey>,
    /// The sources of the relations between them, sorted.
    pub sources: Vec<Source>,
}

/// The objects cannot be ordered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", render_cycles(&self.groups))]
pub struct PlanCycle {
    /// Each group of objects that use each other.
    pub groups: Vec<CycleGroup>,
}

fn render_cycles(groups: &[CycleGroup]) -> String {
    let mut out = String::from(
        "cannot order the deletion: these objects use each other, so none can be deleted first",
    );
    for g in groups {
        let objects: Vec<String> = g.objects.iter().map(object_label).collect();
        let sources: Vec<String> = g.sources.iter().map(ToString::to_string).collect();
        let _ = write!(
            out,
            "\n  objects: {}\n  through: {}",
            objects.join(", "),
            sources.join(", ")
        );
    }
    out.push_str("\nremove one of these Usages (or change the rule) to break the cycle");
    out
}

/// The order to delete `objects` in, with everything that uses them (transitively) first.
pub fn plan(graph: &Graph, objects: &[ObjectKey]) -> Result<Plan, PlanCycle> {
    let index = &graph.index;
    let steps = deletion_order(index, objects).map_err(|cycle| PlanCycle {
        groups: cycle
            .cycles
            .into_iter()
            .map(|objects| {
                let members: BTreeSet<&ObjectKey> = objects.iter().collect();
                let mut sources: BTreeSet<Source> = BTreeSet::new();
                for key in &objects {
                    for r in index.uses_of(key) {
                        if members.contains(&r.of().to_key()) {
                            sources.insert(r.source().to_source());
                        }
                    }
                }
                CycleGroup {
                    objects,
                    sources: sources.into_iter().collect(),
                }
            })
            .collect(),
    })?;
    let mut protected = Vec::new();
    for key in steps.iter().flatten() {
        for r in index.blockers(key) {
            if r.by().is_none() {
                protected.push(Held {
                    object: key.clone(),
                    source: r.source().to_source(),
                    reason: r.reason().unwrap_or_default().to_owned(),
                });
            }
        }
    }
    protected.sort();
    protected.dedup();
    Ok(Plan { steps, protected })
}

/// Every object of `namespace` that takes part in a relation (`plan -n NS --all`).
pub fn all_in_namespace(graph: &Graph, namespace: &str) -> Vec<ObjectKey> {
    let mut out: BTreeSet<ObjectKey> = BTreeSet::new();
    for r in graph.index.relations() {
        for key in std::iter::once(r.of()).chain(r.by()) {
            if key.namespace == Some(namespace) {
                out.insert(key.to_key());
            }
        }
    }
    out.into_iter().collect()
}

/// The plan as text.
pub fn to_text(plan: &Plan) -> String {
    let count: usize = plan.steps.iter().map(Vec::len).sum();
    let mut out = format!(
        "Deletion plan: {count} object{} in {} step{} (users before what they use; the objects of one step can go in parallel)\n",
        if count == 1 { "" } else { "s" },
        plan.steps.len(),
        if plan.steps.len() == 1 { "" } else { "s" },
    );
    for (i, step) in plan.steps.iter().enumerate() {
        let _ = writeln!(out, "step {}:", i + 1);
        for key in step {
            let _ = writeln!(out, "  {}", object_label(key));
        }
    }
    for h in &plan.protected {
        let _ = writeln!(
            out,
            "warning: {} is protected by {} ({}): its DELETE is refused until that goes",
            object_label(&h.object),
            h.source,
            h.reason
        );
    }
    out
}

#[derive(Serialize)]
struct JsonKey<'a> {
    group: &'a str,
    kind: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
    name: &'a str,
}

fn json_key(key: &ObjectKey) -> JsonKey<'_> {
    JsonKey {
        group: &key.group,
        kind: &key.kind,
        namespace: key.namespace.as_deref(),
        name: &key.name,
    }
}

#[derive(Serialize)]
struct JsonStep<'a> {
    step: usize,
    objects: Vec<JsonKey<'a>>,
}

#[derive(Serialize)]
struct JsonHeld<'a> {
    object: JsonKey<'a>,
    source: String,
    reason: &'a str,
}

#[derive(Serialize)]
struct JsonPlan<'a> {
    steps: Vec<JsonStep<'a>>,
    protected: Vec<JsonHeld<'a>>,
}

/// The plan as JSON: `{steps: [{step, objects: [{group, kind, namespace, name}]}], protected}`.
pub fn to_json(plan: &Plan) -> String {
    let doc = JsonPlan {
        steps: plan
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| JsonStep {
                step: i + 1,
                objects: s.iter().map(json_key).collect(),
            })
            .collect(),
        protected: plan
            .protected
            .iter()
            .map(|h| JsonHeld {
                object: json_key(&h.object),
                source: h.source.to_string(),
                reason: &h.reason,
            })
            .collect(),
    };
    let mut out = serde_json::to_string_pretty(&doc).unwrap_or_default();
    out.push('\n');
    out
}
