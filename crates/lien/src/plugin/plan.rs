//! `kubectl lien plan`: a safe deletion order — users before what they use, a Namespace after
//! everything of the plan inside it — as numbered steps whose objects may be deleted in
//! parallel. The order is core's [`deletion_order`] (Kahn's algorithm over the `by → of`
//! graph), then [`namespaces_last`]; a cycle is refused, naming the objects, the Usages and
//! rules that make it, and how to break it. Objects a protection holds (a Usage or ClusterUsage
//! without `by`: nothing will ever release them) are named up front; [`skip_held`] leaves them,
//! and everything they need, out of the steps. Pure.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

use lien_core::{ObjectKey, Source, deletion_order, sources_within};
use serde::Serialize;

use super::graph::object_label;
use super::snapshot::Graph;
use super::why::source_fix;

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

/// Why an object of the plan is left in place by [`skip_held`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kept {
    /// A protection holds it (its entries are in [`Plan::protected`]).
    Held,
    /// An object that stays uses it.
    UsedBy(ObjectKey),
    /// It is the Namespace of an object that stays (deleting it would delete that object).
    Holds(ObjectKey),
}

/// An object of the plan left in place.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Skipped {
    /// The object.
    pub object: ObjectKey,
    /// Why it stays.
    pub because: Kept,
}

/// A deletion order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Steps, in order; each sorted.
    pub steps: Vec<Vec<ObjectKey>>,
    /// Protections no order lifts (their DELETE will be refused until the Usage goes), on
    /// objects of the steps or of `skipped`.
    pub protected: Vec<Held>,
    /// Objects left out of the steps by [`skip_held`], sorted.
    pub skipped: Vec<Skipped>,
    /// Users outside a planned Namespace of objects in it: the plan does not delete them, and
    /// Lien refuses the Namespace's DELETE until they are gone.
    pub outside: Vec<Outside>,
}

/// A user outside a planned Namespace of an object in it (a relation holding the Namespace).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Outside {
    /// The object in the Namespace.
    pub object: ObjectKey,
    /// Its user, in another namespace or cluster-scoped.
    pub user: ObjectKey,
    /// The Usage or rule.
    pub source: Source,
}

impl Plan {
    /// How many objects the steps delete.
    pub fn count(&self) -> usize {
        self.steps.iter().map(Vec::len).sum()
    }

    /// The protections on objects the steps would delete: `--apply` cannot finish while there
    /// are any.
    pub fn held(&self) -> Vec<&Held> {
        let planned: BTreeSet<&ObjectKey> = self.steps.iter().flatten().collect();
        self.protected
            .iter()
            .filter(|h| planned.contains(&h.object))
            .collect()
    }
}

/// One group of objects that use each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CycleGroup {
    /// The objects, sorted.
    pub objects: Vec<ObjectKey>,
    /// The sources of the relations between them, sorted.
    pub sources: Vec<Source>,
    /// How to make each source stop holding (`why`'s advice, one entry per source).
    pub fixes: Vec<String>,
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
        if g.objects.iter().any(is_namespace) {
            out.push_str("\n  and: a Namespace goes after everything inside it");
        }
        if !g.fixes.is_empty() {
            out.push_str("\n  to break it, one of:");
            for fix in &g.fixes {
                let _ = write!(out, "\n  - {}", fix.replace('\n', "\n    "));
            }
        }
    }
    out
}

/// Whether `key` is a Namespace.
fn is_namespace(key: &ObjectKey) -> bool {
    key.group.is_empty() && key.kind == "Namespace" && key.namespace.is_none()
}

/// The key of the Namespace `name`.
fn namespace_key(name: &str) -> ObjectKey {
    ObjectKey::new("", "Namespace", None, name)
}

/// Reorders `steps` (already users before what they use) so that a Namespace also comes after
/// every object of the steps inside it: deleting a Namespace deletes its contents in no order
/// of ours, and Lien refuses a Namespace whose contents are still in use. `users` gives the
/// users of an object. The result is again the earliest step for every object (Kahn's
/// algorithm over both kinds of edge). `Err` holds the objects that cannot be ordered: a
/// Namespace that uses, directly or not, something inside it.
pub fn namespaces_last(
    steps: Vec<Vec<ObjectKey>>,
    users: impl Fn(&ObjectKey) -> Vec<ObjectKey>,
) -> Result<Vec<Vec<ObjectKey>>, Vec<ObjectKey>> {
    let nodes: Vec<ObjectKey> = steps.iter().flatten().cloned().collect();
    // Without a Namespace the order stands as it is (the common case; no second pass).
    if !nodes.iter().any(is_namespace) {
        return Ok(steps);
    }
    let at: HashMap<&ObjectKey, usize> = nodes.iter().enumerate().map(|(i, k)| (k, i)).collect();
    let mut inside: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, k) in nodes.iter().enumerate() {
        if let Some(ns) = &k.namespace {
            inside.entry(ns.as_str()).or_default().push(i);
        }
    }
    // before[i]: what must be gone before nodes[i] is deleted.
    let before: Vec<BTreeSet<usize>> = nodes
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let mut b: BTreeSet<usize> = users(k)
                .iter()
                .filter_map(|u| at.get(u).copied())
                .filter(|&j| j != i)
                .collect();
            if is_namespace(k) {
                b.extend(inside.get(k.name.as_str()).into_iter().flatten().copied());
            }
            b
        })
        .collect();
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, b) in before.iter().enumerate() {
        for &j in b {
            after[j].push(i);
        }
    }
    let mut left: Vec<usize> = before.iter().map(BTreeSet::len).collect();
    let mut wave: Vec<usize> = (0..nodes.len()).filter(|&i| left[i] == 0).collect();
    let mut out: Vec<Vec<ObjectKey>> = Vec::new();
    let mut done = 0;
    while !wave.is_empty() {
        let mut next = Vec::new();
        for &j in &wave {
            for &i in &after[j] {
                left[i] -= 1;
                if left[i] == 0 {
                    next.push(i);
                }
            }
        }
        done += wave.len();
        let mut step: Vec<ObjectKey> = wave.iter().map(|&i| nodes[i].clone()).collect();
        step.sort_unstable();
        out.push(step);
        wave = next;
    }
    if done < nodes.len() {
        let mut stuck: Vec<ObjectKey> = (0..nodes.len())
            .filter(|&i| left[i] > 0)
            .map(|i| nodes[i].clone())
            .collect();
        stuck.sort_unstable();
        return Err(stuck);
    }
    Ok(out)
}

/// A cycle group of `objects`: the sources of the relations between them and how to break
/// each.
fn cycle_group(graph: &Graph, objects: Vec<ObjectKey>) -> CycleGroup {
    let sources = sources_within(&graph.index, &objects);
    let fixes = sources.iter().map(|s| source_fix(graph, s)).collect();
    CycleGroup {
        objects,
        sources,
        fixes,
    }
}

/// The order to delete `objects` in, with everything that uses them (transitively) first and
/// each Namespace after what the plan deletes inside it.
///
/// A Namespace brings in what holds it (issue 27, `RelationIndex::holding`): an object in it
/// under a protection joins the steps, so the protection is named (and `--apply` refuses up
/// front, `--skip-held` keeps it and the Namespace); a protection of a cluster-scoped object by
/// one of its Usages, which deleting the Namespace would lift, holds the Namespace itself; a user
/// outside is named in [`Plan::outside`] but not deleted — planning a Namespace's deletion does
/// not reach into other namespaces (plan that user to have it deleted first).
pub fn plan(graph: &Graph, objects: &[ObjectKey]) -> Result<Plan, PlanCycle> {
    let index = &graph.index;
    let mut objects = objects.to_vec();
    let mut holds_namespace: Vec<Held> = Vec::new();
    let mut outside: Vec<Outside> = Vec::new();
    let namespaces: Vec<ObjectKey> = objects
        .iter()
        .filter(|k| is_namespace(k))
        .cloned()
        .collect();
    for ns in &namespaces {
        for r in index.holding(&ns.name) {
            let of = r.of().to_key();
            let source = r.source().to_source();
            match r.by() {
                Some(by) => outside.push(Outside {
                    object: of,
                    user: by.to_key(),
                    source,
                }),
                None if of.namespace.as_deref() == Some(ns.name.as_str()) => objects.push(of),
                None => holds_namespace.push(Held {
                    object: ns.clone(),
                    source,
                    reason: r.reason().unwrap_or_default().to_owned(),
                }),
            }
        }
    }
    objects.sort();
    objects.dedup();
    // A user outside that the plan deletes anyway (it was asked for) holds nothing after it.
    outside.retain(|o| !objects.contains(&o.user));
    outside.sort();
    outside.dedup();
    let steps = deletion_order(index, &objects).map_err(|cycle| PlanCycle {
        groups: cycle
            .cycles
            .into_iter()
            .map(|objects| cycle_group(graph, objects))
            .collect(),
    })?;
    let steps = namespaces_last(steps, |key| {
        index
            .blockers(key)
            .filter_map(|r| r.by().map(|b| b.to_key()))
            .collect()
    })
    .map_err(|objects| PlanCycle {
        groups: vec![cycle_group(graph, objects)],
    })?;
    let mut protected = holds_namespace;
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
    Ok(Plan {
        steps,
        protected,
        skipped: Vec::new(),
        outside,
    })
}

/// `plan` without what must stay: every object a protection holds, what such an object uses
/// (it keeps using it), and the Namespace of anything that stays (deleting a Namespace deletes
/// its contents) — transitively. Nothing that stays uses an object that goes, so the steps that
/// remain are still a valid order of what remains.
pub fn skip_held(graph: &Graph, mut plan: Plan) -> Plan {
    let planned: BTreeSet<ObjectKey> = plan.steps.iter().flatten().cloned().collect();
    let mut stay: BTreeMap<ObjectKey, Kept> = BTreeMap::new();
    let mut todo: Vec<ObjectKey> = Vec::new();
    for h in plan.held() {
        if stay.insert(h.object.clone(), Kept::Held).is_none() {
            todo.push(h.object.clone());
        }
    }
    while let Some(key) = todo.pop() {
        let mut needed: Vec<(ObjectKey, Kept)> = graph
            .index
            .uses_of(&key)
            .map(|r| (r.of().to_key(), Kept::UsedBy(key.clone())))
            .collect();
        if let Some(ns) = &key.namespace {
            needed.push((namespace_key(ns), Kept::Holds(key.clone())));
        }
        for (k, because) in needed {
            if planned.contains(&k) && !stay.contains_key(&k) {
                stay.insert(k.clone(), because);
                todo.push(k);
            }
        }
    }
    for step in &mut plan.steps {
        step.retain(|k| !stay.contains_key(k));
    }
    plan.steps.retain(|s| !s.is_empty());
    plan.skipped.extend(
        stay.into_iter()
            .map(|(object, because)| Skipped { object, because }),
    );
    plan.skipped.sort();
    plan
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

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// Why `key` stays, in words.
fn kept_label(plan: &Plan, s: &Skipped) -> String {
    match &s.because {
        Kept::Held => {
            let holds: Vec<String> = plan
                .protected
                .iter()
                .filter(|h| h.object == s.object)
                .map(|h| format!("{} ({})", h.source, h.reason))
                .collect();
            format!("protected by {}", holds.join(", "))
        }
        Kept::UsedBy(by) => format!("used by {}, which stays", object_label(by)),
        Kept::Holds(inner) => format!("holds {}, which stays", object_label(inner)),
    }
}

/// The plan as text.
pub fn to_text(plan: &Plan) -> String {
    let mut out = format!(
        "Deletion plan: {} in {} (users before what they use, a Namespace after its contents; the objects of one step can go in parallel)\n",
        plural(plan.count(), "object"),
        plural(plan.steps.len(), "step"),
    );
    for (i, step) in plan.steps.iter().enumerate() {
        let _ = writeln!(out, "step {}:", i + 1);
        for key in step {
            let _ = writeln!(out, "  {}", object_label(key));
        }
    }
    for h in plan.held() {
        let _ = writeln!(
            out,
            "warning: {} is protected by {} ({}): nothing releases it, so its DELETE is refused; --apply will not start unless told to leave it (--skip-held)",
            object_label(&h.object),
            h.source,
            h.reason
        );
    }
    for o in &plan.outside {
        let _ = writeln!(
            out,
            "warning: {} is used by {} outside its namespace ({}): the plan does not delete it, and its Namespace's DELETE is refused until it is gone (plan it too: kubectl lien plan {})",
            object_label(&o.object),
            object_label(&o.user),
            o.source,
            o.user.kubectl_arg()
        );
    }
    if !plan.skipped.is_empty() {
        let _ = writeln!(
            out,
            "left in place ({}):",
            plural(plan.skipped.len(), "object")
        );
        for s in &plan.skipped {
            let _ = writeln!(
                out,
                "  {}: {}",
                object_label(&s.object),
                kept_label(plan, s)
            );
        }
    }
    out
}

/// How many objects a printed `kubectl lien plan … TYPE/NAME…` command may name.
const NAMED_AT_MOST: usize = 12;

/// Why `--apply` does not start on `plan` (taken without `--skip-held`): it would delete
/// objects a protection holds, and stop half-way at the first of them. `None` when nothing
/// holds an object of the steps. Names the objects, the Usages and their reasons, and the ways
/// on: `--skip-held` (with what it leaves), naming only the other objects (the command, when it
/// fits on a line), or lifting the protection.
pub fn held_refusal(graph: &Graph, plan: &Plan) -> Option<String> {
    let held = plan.held();
    if held.is_empty() {
        return None;
    }
    let objects: BTreeSet<&ObjectKey> = held.iter().map(|h| &h.object).collect();
    let mut out = format!(
        "error: {} of this plan {} protected by a Usage or ClusterUsage without `by`: nothing will release {}, so Lien refuses {} DELETE and --apply would stop half-way. Nothing was deleted.\n",
        plural(objects.len(), "object"),
        if objects.len() == 1 { "is" } else { "are" },
        if objects.len() == 1 { "it" } else { "them" },
        if objects.len() == 1 { "its" } else { "their" },
    );
    for h in &held {
        let _ = writeln!(
            out,
            "  {}: {} ({})",
            object_label(&h.object),
            h.source,
            h.reason
        );
    }
    let rest = skip_held(graph, plan.clone());
    let left: Vec<String> = rest
        .skipped
        .iter()
        .map(|s| object_label(&s.object))
        .collect();
    out.push_str("Ways on:\n");
    let _ = writeln!(
        out,
        "  - leave {} and delete the other {}: add --skip-held",
        if left.len() == objects.len() {
            left.join(", ")
        } else {
            format!(
                "{} (and what they need: {})",
                plural(left.len(), "object"),
                left.join(", ")
            )
        },
        plural(rest.count(), "object")
    );
    let remaining: Vec<&ObjectKey> = rest.steps.iter().flatten().collect();
    let namespaces: BTreeSet<&str> = remaining
        .iter()
        .filter_map(|k| k.namespace.as_deref())
        .collect();
    if !remaining.is_empty() && remaining.len() <= NAMED_AT_MOST && namespaces.len() <= 1 {
        let mut cmd = String::from("kubectl lien plan --apply");
        if let Some(ns) = namespaces.first() {
            let _ = write!(cmd, " -n {ns}");
        }
        for k in &remaining {
            let _ = write!(cmd, " {}", k.kubectl_type_name());
        }
        let _ = writeln!(out, "  - name only the objects to delete: {cmd}");
    } else if !remaining.is_empty() {
        out.push_str("  - name only the objects to delete: kubectl lien plan --apply TYPE/NAME…\n");
    }
    let sources: BTreeSet<&Source> = held.iter().map(|h| &h.source).collect();
    for s in sources {
        let _ = writeln!(
            out,
            "  - or lift the protection first: {}",
            source_fix(graph, s).replace('\n', "\n    ")
        );
    }
    Some(out)
}

/// What `--apply --dry-run` prints after the plan: each step as it would run, and what it would
/// leave.
pub fn dry_run_text(plan: &Plan) -> String {
    let n = plan.steps.len();
    let mut out = format!(
        "dry run: nothing was deleted. --apply would delete {} in {}:\n",
        plural(plan.count(), "object"),
        plural(n, "step")
    );
    for (i, step) in plan.steps.iter().enumerate() {
        let names: Vec<String> = step.iter().map(object_label).collect();
        let _ = writeln!(
            out,
            "  step {}/{n}: delete {}, then wait until {} gone",
            i + 1,
            names.join(", "),
            if step.len() == 1 { "it is" } else { "they are" }
        );
    }
    for s in &plan.skipped {
        let _ = writeln!(
            out,
            "  leave {}: {}",
            object_label(&s.object),
            kept_label(plan, s)
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
struct JsonSkipped<'a> {
    object: JsonKey<'a>,
    because: String,
}

#[derive(Serialize)]
struct JsonPlan<'a> {
    steps: Vec<JsonStep<'a>>,
    protected: Vec<JsonHeld<'a>>,
    skipped: Vec<JsonSkipped<'a>>,
    /// Only for a planned Namespace held from outside.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    outside: Vec<JsonOutside<'a>>,
}

#[derive(Serialize)]
struct JsonOutside<'a> {
    object: JsonKey<'a>,
    user: JsonKey<'a>,
    source: String,
}

/// The plan as JSON: `{steps: [{step, objects: [{group, kind, namespace, name}]}], protected:
/// [{object, source, reason}], skipped: [{object, because}]}`, and `outside: [{object, user,
/// source}]` when a planned Namespace is held from outside.
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
        skipped: plan
            .skipped
            .iter()
            .map(|s| JsonSkipped {
                object: json_key(&s.object),
                because: kept_label(plan, s),
            })
            .collect(),
        outside: plan
            .outside
            .iter()
            .map(|o| JsonOutside {
                object: json_key(&o.object),
                user: json_key(&o.user),
                source: o.source.to_string(),
            })
            .collect(),
    };
    let mut out = serde_json::to_string_pretty(&doc).unwrap_or_default();
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(ns: &str, name: &str) -> ObjectKey {
        ObjectKey::new("", "ConfigMap", Some(ns), name)
    }

    #[test]
    fn a_namespace_goes_after_everything_of_the_plan_inside_it() {
        let ns = namespace_key("shop");
        let crd = ObjectKey::new(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            None,
            "x",
        );
        let (a, b, elsewhere) = (cm("shop", "a"), cm("shop", "b"), cm("other", "c"));
        // As core orders them: no relation involves the Namespace, so it comes first.
        let steps = vec![
            vec![a.clone(), crd.clone(), ns.clone()],
            vec![b.clone(), elsewhere.clone()],
        ];
        let users = |k: &ObjectKey| if *k == b { vec![a.clone()] } else { vec![] };
        let out = namespaces_last(steps, users).expect("orderable");
        assert_eq!(
            out,
            vec![vec![elsewhere, a.clone(), crd], vec![b], vec![ns.clone()]]
        );
        // What uses the Namespace still goes before it, and the Namespace before what it uses.
        let user = ObjectKey::new("example.org", "Tenant", None, "t");
        let steps = vec![vec![user.clone(), a.clone()], vec![ns.clone()]];
        let out = namespaces_last(
            steps,
            |k: &ObjectKey| {
                if *k == ns { vec![user.clone()] } else { vec![] }
            },
        )
        .expect("orderable");
        assert_eq!(out, vec![vec![a.clone(), user.clone()], vec![ns.clone()]]);
    }

    #[test]
    fn without_a_namespace_the_order_is_left_alone() {
        let steps = vec![vec![cm("a", "x")], vec![cm("b", "y")]];
        assert_eq!(namespaces_last(steps.clone(), |_| vec![]), Ok(steps));
    }

    #[test]
    fn a_namespace_that_uses_its_own_contents_cannot_be_ordered() {
        let ns = namespace_key("shop");
        let a = cm("shop", "a");
        // The Namespace uses `a` (so goes first) and holds it (so goes last).
        let steps = vec![vec![ns.clone()], vec![a.clone()]];
        let err = namespaces_last(
            steps,
            |k: &ObjectKey| {
                if *k == a { vec![ns.clone()] } else { vec![] }
            },
        )
        .expect_err("a cycle");
        assert_eq!(err, vec![a, ns]);
    }

    /// Issue 27: a plan of a Namespace names what holds it — a protection inside (held, so
    /// `--skip-held` keeps the Namespace), a user outside (named, not deleted) — and puts the
    /// Namespace last.
    #[test]
    fn a_namespace_brings_in_what_holds_it() {
        use lien_core::{Relation, RelationIndex};
        let mut index = RelationIndex::new();
        let keep = Source::usage("shop", "keep-orders");
        index
            .apply(
                &keep,
                [Relation::protects(
                    keep.clone(),
                    cm("shop", "orders"),
                    "customer data",
                )],
            )
            .expect("valid");
        let uses = Source::usage("web", "reads-prices");
        index
            .apply(
                &uses,
                [Relation::uses(
                    uses.clone(),
                    cm("shop", "prices"),
                    cm("web", "app"),
                )],
            )
            .expect("valid");
        let graph = Graph {
            index,
            nodes: Default::default(),
            problems: Default::default(),
            usages: Default::default(),
        };
        let ns = namespace_key("shop");
        let p = plan(&graph, std::slice::from_ref(&ns)).expect("orderable");
        // The protected object joins the steps; the user outside is named, not deleted.
        assert_eq!(p.steps, vec![vec![cm("shop", "orders")], vec![ns.clone()]]);
        assert_eq!(
            p.outside,
            vec![Outside {
                object: cm("shop", "prices"),
                user: cm("web", "app"),
                source: uses,
            }]
        );
        assert!(to_text(&p).contains(
            "warning: ConfigMap shop/prices is used by ConfigMap web/app outside its namespace"
        ));
        assert_eq!(
            p.protected,
            vec![Held {
                object: cm("shop", "orders"),
                source: keep,
                reason: "customer data".into(),
            }]
        );
        let kept = skip_held(&graph, p);
        assert!(kept.steps.is_empty(), "{:?}", kept.steps);
        assert!(kept.skipped.iter().any(|s| s.object == ns));
    }
}
