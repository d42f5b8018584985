//! `kubectl lien graph`: the "X is used by Y" graph, selected from a [`Graph`] and rendered as
//! DOT, Mermaid, SVG (laid out in-process by `layout-rs`: no Graphviz needed) or JSON. Pure.
//!
//! Edges point from the user to what it uses (`by → of`), so a drawing read left to right is
//! also a deletion order: what is on the left goes first. Each edge is one relation, labelled
//! with its source (Usage, ClusterUsage, DependencyRule) and reason. Nodes are labelled with
//! the kind and `namespace/name`, and marked when they are being deleted, when Lien recorded a
//! refused DELETE for them, and when a reason-only Usage protects them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use lien_core::{ObjectKey, Source};
use serde::Serialize;

use super::snapshot::{Graph, NodeInfo};

/// Which part of the graph to show.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only relations with an end in this namespace; `None`: every namespace (`-A`).
    pub namespace: Option<String>,
    /// Only what is connected to these objects, in both directions, transitively (the
    /// namespace then does not apply). Empty: everything.
    pub objects: Vec<ObjectKey>,
}

/// One relation with a user.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge {
    /// The user.
    pub by: ObjectKey,
    /// What it uses.
    pub of: ObjectKey,
    /// Where the relation comes from.
    pub source: Source,
    /// Why.
    pub reason: Option<String>,
    /// A refused DELETE of `of` is replayed once its users are gone.
    pub replay: bool,
}

/// A reason-only protection.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Protection {
    /// The Usage or ClusterUsage.
    pub source: Source,
    /// Why.
    pub reason: String,
}

/// One object of the selected graph.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    /// What was read of it (`None`: named by a relation but not read, e.g. outside the
    /// namespaces the user may list).
    pub info: Option<NodeInfo>,
    /// Reason-only protections.
    pub protections: Vec<Protection>,
}

/// The selected graph: nodes in key order, edges in (by, of, source) order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// Every object that is an end of a selected relation (or was asked for).
    pub nodes: BTreeMap<ObjectKey, Node>,
    /// The selected relations with a user.
    pub edges: Vec<Edge>,
}

fn in_namespace(key: &ObjectKey, ns: &str) -> bool {
    key.namespace.as_deref() == Some(ns)
}

/// Selects the part of `graph` to show.
pub fn select(graph: &Graph, selection: &Selection) -> View {
    let index = &graph.index;
    let keep: Option<BTreeSet<ObjectKey>> = if selection.objects.is_empty() {
        None
    } else {
        // Everything connected to the objects asked for, following relations both ways.
        let mut seen: BTreeSet<ObjectKey> = BTreeSet::new();
        let mut todo: Vec<ObjectKey> = selection.objects.clone();
        while let Some(key) = todo.pop() {
            if !seen.insert(key.clone()) {
                continue;
            }
            for r in index.blockers(&key) {
                if let Some(by) = r.by() {
                    todo.push(by.to_key());
                }
            }
            for r in index.uses_of(&key) {
                todo.push(r.of().to_key());
            }
        }
        Some(seen)
    };
    let mut view = View::default();
    for r in index.relations() {
        let of = r.of().to_key();
        let by = r.by().map(|b| b.to_key());
        let wanted = match (&keep, &selection.namespace) {
            (Some(keep), _) => keep.contains(&of),
            (None, Some(ns)) => {
                in_namespace(&of, ns) || by.as_ref().is_some_and(|b| in_namespace(b, ns))
            }
            (None, None) => true,
        };
        if !wanted {
            continue;
        }
        match by {
            Some(by) => {
                view.edges.push(Edge {
                    by: by.clone(),
                    of: of.clone(),
                    source: r.source().to_source(),
                    reason: r.reason().map(str::to_owned),
                    replay: r.replay(),
                });
                view.nodes.entry(by).or_default();
                view.nodes.entry(of).or_default();
            }
            None => view
                .nodes
                .entry(of)
                .or_default()
                .protections
                .push(Protection {
                    source: r.source().to_source(),
                    reason: r.reason().unwrap_or_default().to_owned(),
                }),
        }
    }
    for key in &selection.objects {
        view.nodes.entry(key.clone()).or_default();
    }
    for (key, node) in &mut view.nodes {
        node.info = graph.nodes.get(key).cloned();
        node.protections.sort();
        node.protections.dedup();
    }
    view.edges.sort();
    view.edges.dedup();
    view
}

/// `Kind` for the core group, `Kind.group` otherwise: how `kubectl get` names a kind.
pub fn kind_label(key: &ObjectKey) -> String {
    if key.group.is_empty() {
        key.kind.clone()
    } else {
        format!("{}.{}", key.kind, key.group)
    }
}

/// `namespace/name`, or `name` for a cluster-scoped object.
pub fn name_label(key: &ObjectKey) -> String {
    match &key.namespace {
        Some(ns) => format!("{ns}/{}", key.name),
        None => key.name.clone(),
    }
}

/// `Kind namespace/name`: how the plugin names an object in its messages.
pub fn object_label(key: &ObjectKey) -> String {
    format!("{} {}", kind_label(key), name_label(key))
}

/// The marks a node carries, in words.
fn marks(node: &Node) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(info) = &node.info {
        if info.deleting {
            out.push("deleting".to_owned());
        }
        if info.attempt.is_some() {
            out.push("delete refused".to_owned());
        }
    }
    for p in &node.protections {
        out.push(format!("protected: {}", p.reason));
    }
    out
}

fn node_lines(key: &ObjectKey, node: &Node) -> Vec<String> {
    let mut lines = vec![kind_label(key), name_label(key)];
    lines.extend(marks(node).into_iter().map(|m| format!("[{m}]")));
    lines
}

fn edge_lines(edge: &Edge) -> Vec<String> {
    let mut lines = vec![edge.source.to_string()];
    if let Some(reason) = &edge.reason {
        lines.push(reason.clone());
    }
    lines
}

/// `lines`, each escaped for the output format, joined by its line break.
fn joined(lines: &[String], escape: impl Fn(&str) -> String, line_break: &str) -> String {
    lines
        .iter()
        .map(|l| escape(l))
        .collect::<Vec<_>>()
        .join(line_break)
}

/// How a node stands out, by the first of its marks that applies (every format draws the same).
#[derive(Debug, Clone, Copy)]
enum Look {
    Deleting,
    Refused,
    Protected,
}

fn look(node: &Node) -> Option<Look> {
    let info = node.info.as_ref();
    if info.is_some_and(|i| i.deleting) {
        Some(Look::Deleting)
    } else if info.is_some_and(|i| i.attempt.is_some()) {
        Some(Look::Refused)
    } else if !node.protections.is_empty() {
        Some(Look::Protected)
    } else {
        None
    }
}

fn ids(view: &View) -> BTreeMap<&ObjectKey, String> {
    view.nodes
        .keys()
        .enumerate()
        .map(|(i, k)| (k, format!("n{i}")))
        .collect()
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Graphviz DOT.
pub fn to_dot(view: &View) -> String {
    let ids = ids(view);
    let mut out = String::from(
        "digraph lien {\n  rankdir=LR;\n  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n  edge [fontname=\"Helvetica\", fontsize=10];\n",
    );
    for (key, node) in &view.nodes {
        let label = joined(&node_lines(key, node), dot_escape, "\\n");
        let mut attrs = format!("label=\"{label}\"");
        attrs.push_str(match look(node) {
            Some(Look::Deleting) => ", style=\"rounded,dashed\", color=\"gray40\"",
            Some(Look::Refused) => ", style=\"rounded,bold\", color=\"red\"",
            Some(Look::Protected) => ", style=\"rounded,bold\", color=\"orange\"",
            None => "",
        });
        let _ = writeln!(out, "  {} [{attrs}];", ids[key]);
    }
    for edge in &view.edges {
        let label = joined(&edge_lines(edge), dot_escape, "\\n");
        let _ = writeln!(
            out,
            "  {} -> {} [label=\"{label}\"];",
            ids[&edge.by], ids[&edge.of]
        );
    }
    out.push_str("}\n");
    out
}

fn mermaid_escape(s: &str) -> String {
    // Mermaid's quoted labels take HTML entities; `#quot;` is its own escape for `"`.
    s.replace('&', "#amp;")
        .replace('"', "#quot;")
        .replace('<', "#lt;")
        .replace('>', "#gt;")
        .replace('|', "#124;")
}

/// Mermaid `flowchart`, ready to paste into a ```` ```mermaid ```` block of a Markdown file.
pub fn to_mermaid(view: &View) -> String {
    let ids = ids(view);
    let mut out = String::from("flowchart LR\n");
    let mut classes: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (key, node) in &view.nodes {
        let label = joined(&node_lines(key, node), mermaid_escape, "<br/>");
        let id = ids[key].as_str();
        let _ = writeln!(out, "  {id}[\"{label}\"]");
        let class = match look(node) {
            Some(Look::Deleting) => "deleting",
            Some(Look::Refused) => "refused",
            Some(Look::Protected) => "protected",
            None => continue,
        };
        classes.entry(class).or_default().push(id);
    }
    for edge in &view.edges {
        let label = joined(&edge_lines(edge), mermaid_escape, "<br/>");
        let _ = writeln!(
            out,
            "  {} -->|\"{label}\"| {}",
            ids[&edge.by], ids[&edge.of]
        );
    }
    if !classes.is_empty() {
        out.push_str("  classDef deleting stroke-dasharray: 5 5,stroke:#666;\n");
        out.push_str("  classDef refused stroke:#d00,stroke-width:3px;\n");
        out.push_str("  classDef protected stroke:#e90,stroke-width:3px;\n");
        for (class, members) in classes {
            let _ = writeln!(out, "  class {} {class}", members.join(","));
        }
    }
    out
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonNode<'a> {
    id: String,
    group: &'a str,
    kind: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: Option<&'a str>,
    deleting: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    deletion_refused: Option<JsonAttempt<'a>>,
    protections: Vec<JsonSource<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonAttempt<'a> {
    user: &'a str,
    time: String,
    replay: bool,
    signed: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonSource<'a> {
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
}

fn json_source<'a>(source: &'a Source, reason: Option<&'a str>) -> JsonSource<'a> {
    let (kind, namespace, name) = match source {
        Source::Usage { namespace, name } => ("Usage", Some(namespace.as_str()), name.as_str()),
        Source::ClusterUsage { name } => ("ClusterUsage", None, name.as_str()),
        Source::Rule { name } => ("DependencyRule", None, name.as_str()),
    };
    JsonSource {
        kind,
        namespace,
        name,
        reason,
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonEdge<'a> {
    by: &'a str,
    of: &'a str,
    source: JsonSource<'a>,
    replay: bool,
}

#[derive(Serialize)]
struct JsonGraph<'a> {
    nodes: Vec<JsonNode<'a>>,
    edges: Vec<JsonEdge<'a>>,
}

/// JSON: `{nodes: [...], edges: [{by, of, source, replay}]}`, edges naming node ids.
pub fn to_json(view: &View) -> String {
    let ids = ids(view);
    let nodes = view
        .nodes
        .iter()
        .map(|(key, node)| JsonNode {
            id: ids[key].clone(),
            group: &key.group,
            kind: &key.kind,
            namespace: key.namespace.as_deref(),
            name: &key.name,
            uid: node.info.as_ref().map(|i| i.uid.as_str()),
            deleting: node.info.as_ref().is_some_and(|i| i.deleting),
            deletion_refused: node
                .info
                .as_ref()
                .and_then(|i| i.attempt.as_ref())
                .map(|a| JsonAttempt {
                    user: &a.attempt.user,
                    time: a.attempt.time.to_string(),
                    replay: a.attempt.replay,
                    signed: a.signed,
                }),
            protections: node
                .protections
                .iter()
                .map(|p| json_source(&p.source, Some(&p.reason)))
                .collect(),
        })
        .collect();
    let edges = view
        .edges
        .iter()
        .map(|e| JsonEdge {
            by: &ids[&e.by],
            of: &ids[&e.of],
            source: json_source(&e.source, e.reason.as_deref()),
            replay: e.replay,
        })
        .collect();
    let mut out = serde_json::to_string_pretty(&JsonGraph { nodes, edges }).unwrap_or_default();
    out.push('\n');
    out
}

/// Why an SVG could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("laying out the graph failed: {0}")]
pub struct SvgError(String);

/// Longest edge label line in the SVG; longer reasons are cut (the DOT, Mermaid and JSON keep
/// them whole), so that 50 nodes stay readable at a glance.
const SVG_LABEL_CHARS: usize = 40;

fn shorten(s: &str) -> String {
    if s.chars().count() <= SVG_LABEL_CHARS {
        s.to_owned()
    } else {
        let cut: String = s.chars().take(SVG_LABEL_CHARS - 1).collect();
        format!("{cut}…")
    }
}

/// SVG, laid out and drawn in-process by `layout-rs` (users on the left, what they use on the
/// right).
pub fn to_svg(view: &View) -> Result<String, SvgError> {
    use layout::backends::svg::SVGWriter;
    use layout::core::base::Orientation;
    use layout::core::color::Color;
    use layout::core::style::{LineStyleKind, StyleAttr};
    use layout::std_shapes::shapes::{Arrow, Element, LineEndKind, ShapeKind};
    use layout::topo::layout::VisualGraph;

    if view.nodes.is_empty() {
        // layout-rs cannot lay out an empty graph; an empty drawing says the same.
        return Ok(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"0\" height=\"0\"></svg>\n"
                .to_owned(),
        );
    }
    let mut graph = VisualGraph::new(Orientation::LeftToRight);
    let mut handles = BTreeMap::new();
    for (key, node) in &view.nodes {
        let (line, fill) = match look(node) {
            Some(Look::Deleting) => ("gray", "#eeeeee"),
            Some(Look::Refused) => ("red", "#ffecec"),
            Some(Look::Protected) => ("orange", "#fff6e6"),
            None => ("black", "white"),
        };
        let label = joined(&node_lines(key, node), shorten, "\n");
        let look = StyleAttr::new(Color::fast(line), 2, Color::from_name(fill), 5, 13);
        let shape = ShapeKind::new_box(&label);
        let size =
            layout::std_shapes::render::get_shape_size(Orientation::LeftToRight, &shape, 13, false);
        let element = Element::create(shape, look, Orientation::LeftToRight, size);
        handles.insert(key, graph.add_node(element));
    }
    for edge in &view.edges {
        let label = joined(&edge_lines(edge), shorten, "\n");
        let look = StyleAttr::new(Color::fast("black"), 1, None, 0, 11);
        let arrow = Arrow::new(
            LineEndKind::None,
            LineEndKind::Arrow,
            LineStyleKind::Normal,
            &label,
            &look,
            &None,
            &None,
        );
        graph.add_edge(arrow, handles[&edge.by], handles[&edge.of]);
    }
    // layout-rs asserts on inputs it cannot handle; a drawing must never take the process down.
    let drawn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let mut svg = SVGWriter::new();
        graph.do_it(false, false, false, &mut svg);
        svg.finalize()
    }));
    drawn.map_err(|e| {
        SvgError(
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "the layout engine panicked".to_owned()),
        )
    })
}
