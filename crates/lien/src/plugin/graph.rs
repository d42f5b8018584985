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

/// Graphviz DOT, left to right.
pub fn to_dot(view: &View) -> String {
    to_dot_with(view, Direction::LeftRight)
}

/// Graphviz DOT, drawn in `direction`.
pub fn to_dot_with(view: &View, direction: Direction) -> String {
    let ids = ids(view);
    let rankdir = match direction {
        Direction::LeftRight => "LR",
        Direction::TopBottom => "TB",
    };
    let mut out = format!("digraph lien {{\n  rankdir={rankdir};\n");
    out.push_str(
        "  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n  edge [fontname=\"Helvetica\", fontsize=10];\n",
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
    to_mermaid_with(view, Direction::LeftRight)
}

/// Mermaid `flowchart`, drawn in `direction`.
pub fn to_mermaid_with(view: &View, direction: Direction) -> String {
    let ids = ids(view);
    let mut out = match direction {
        Direction::LeftRight => String::from("flowchart LR\n"),
        Direction::TopBottom => String::from("flowchart TB\n"),
    };
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

/// Why a picture could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("drawing the graph failed: {0}")]
pub struct SvgError(String);

pub use super::layout::Direction;
use super::layout::{self, Layout, Point, Size};

/// The font the SVG asks for: the usual sans faces, DejaVu Sans (what most Linux machines
/// have, and what the PNG is drawn with here) before the generic one.
const FONT_FAMILY: &str = "Helvetica, Arial, 'DejaVu Sans', sans-serif";
/// Font sizes, in pixels.
const NODE_FONT: f64 = 13.0;
const LABEL_FONT: f64 = 11.0;
/// How wide a character is, as a share of the font size: DejaVu Sans's average, the widest
/// of the faces named, so that the text fits whichever one draws it.
const CHAR_WIDTH: f64 = 0.62;
/// Line height, as a share of the font size.
const LINE_HEIGHT: f64 = 1.3;
/// Longest line of a node or an edge label before it wraps (the text is never cut).
const NODE_WRAP: usize = 34;
const LABEL_WRAP: usize = 32;
/// Inside a node's box.
const PAD_X: f64 = 9.0;
const PAD_Y: f64 = 6.0;

/// Splits `line` into pieces of at most `width` characters that concatenate back to it:
/// after a space, else after `/`, `-`, `.`, `_` or `:`, else anywhere.
pub fn wrap(line: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut out = Vec::new();
    let mut rest: Vec<char> = line.chars().collect();
    while rest.len() > width {
        let window = &rest[..=width];
        let cut = window[..width]
            .iter()
            .rposition(|&c| c == ' ')
            .or_else(|| {
                window[..width]
                    .iter()
                    .rposition(|c| matches!(c, '/' | '-' | '.' | '_' | ':' | ','))
            })
            .filter(|&i| i > 0)
            .map_or(width, |i| i + 1);
        out.push(rest[..cut].iter().collect());
        rest.drain(..cut);
    }
    if !rest.is_empty() || out.is_empty() {
        out.push(rest.into_iter().collect());
    }
    out
}

fn wrapped(lines: &[String], width: usize) -> Vec<String> {
    lines.iter().flat_map(|l| wrap(l, width)).collect()
}

/// The size of `lines` of text at `font` pixels.
fn text_size(lines: &[String], font: f64) -> Size {
    let longest = lines
        .iter()
        .map(|l| l.trim_end().chars().count())
        .max()
        .unwrap_or(0);
    Size {
        w: longest as f64 * font * CHAR_WIDTH,
        h: lines.len() as f64 * font * LINE_HEIGHT,
    }
}

/// What the picture holds: the layout, and each node's and edge's lines of text (wrapped), in
/// `view`'s node and edge order.
#[derive(Debug, Clone)]
pub struct Picture {
    pub layout: Layout,
    pub node_lines: Vec<Vec<String>>,
    pub edge_lines: Vec<Vec<String>>,
}

/// Lays `view` out for the SVG and PNG.
pub fn picture(view: &View, direction: Direction) -> Picture {
    let index: BTreeMap<&ObjectKey, usize> =
        view.nodes.keys().enumerate().map(|(i, k)| (k, i)).collect();
    let node_lines: Vec<Vec<String>> = view
        .nodes
        .iter()
        .map(|(key, node)| wrapped(&node_lines(key, node), NODE_WRAP))
        .collect();
    let edge_lines: Vec<Vec<String>> = view
        .edges
        .iter()
        .map(|e| wrapped(&edge_lines(e), LABEL_WRAP))
        .collect();
    let input = layout::Input {
        nodes: node_lines
            .iter()
            .map(|lines| {
                let t = text_size(lines, NODE_FONT);
                Size {
                    w: t.w + 2.0 * PAD_X,
                    h: t.h + 2.0 * PAD_Y,
                }
            })
            .collect(),
        edges: view
            .edges
            .iter()
            .zip(&edge_lines)
            .map(|(e, lines)| (index[&e.by], index[&e.of], text_size(lines, LABEL_FONT)))
            .collect(),
        direction,
    };
    Picture {
        layout: layout::layout(&input),
        node_lines,
        edge_lines,
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `n` with at most two decimals and no trailing zeros.
fn num(n: f64) -> String {
    let s = format!("{:.2}", n);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_owned()
    } else {
        s.to_owned()
    }
}

/// `<tspan>` lines, the first baseline at `top`.
fn tspans(lines: &[String], x: f64, top: f64, font: f64) -> String {
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        let baseline =
            top + font * (1.0 + (LINE_HEIGHT - 1.0) / 2.0) + i as f64 * font * LINE_HEIGHT
                - font * 0.2;
        let _ = write!(
            out,
            "<tspan x=\"{}\" y=\"{}\">{}</tspan>",
            num(x),
            num(baseline),
            xml_escape(line.trim_end())
        );
    }
    out
}

/// The arrowhead at the end of `route`: a triangle on its last segment, the tip on the node.
fn arrowhead(route: &[Point]) -> Option<[Point; 3]> {
    let [.., a, b] = route else { return None };
    let (dx, dy) = (b.x - a.x, b.y - a.y);
    let len = (dx * dx + dy * dy).sqrt();
    if len == 0.0 {
        return None;
    }
    let (ux, uy) = (dx / len, dy / len);
    let back = layout::ARROW.min(len);
    let base = Point {
        x: b.x - ux * back,
        y: b.y - uy * back,
    };
    let half = 3.5;
    Some([
        *b,
        Point {
            x: base.x - uy * half,
            y: base.y + ux * half,
        },
        Point {
            x: base.x + uy * half,
            y: base.y - ux * half,
        },
    ])
}

/// SVG, laid out in-process (`layout`): left to right, users before what they use.
pub fn to_svg(view: &View) -> Result<String, SvgError> {
    Ok(to_svg_with(view, Direction::LeftRight))
}

/// SVG, laid out in-process in `direction`, cropped to its content.
pub fn to_svg_with(view: &View, direction: Direction) -> String {
    let pic = picture(view, direction);
    let l = &pic.layout;
    let (w, h) = (num(l.width), num(l.height));
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"{FONT_FAMILY}\">\n<rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>\n"
    );
    for (e, edge) in view.edges.iter().enumerate() {
        let route = &l.routes[e];
        let points: Vec<String> = route
            .iter()
            .map(|p| format!("{},{}", num(p.x), num(p.y)))
            .collect();
        let _ = write!(
            out,
            "<g class=\"edge\"><title>{} → {}</title><polyline points=\"{}\" fill=\"none\" stroke=\"#555\" stroke-width=\"1.3\"/>",
            xml_escape(&object_label(&edge.by)),
            xml_escape(&object_label(&edge.of)),
            points.join(" ")
        );
        if let Some(tri) = arrowhead(route) {
            let pts: Vec<String> = tri
                .iter()
                .map(|p| format!("{},{}", num(p.x), num(p.y)))
                .collect();
            let _ = write!(out, "<polygon points=\"{}\" fill=\"#555\"/>", pts.join(" "));
        }
        let r = l.labels[e];
        let _ = writeln!(
            out,
            "<text font-size=\"{}\" fill=\"#333\">{}</text></g>",
            num(LABEL_FONT),
            tspans(&pic.edge_lines[e], r.x, r.y, LABEL_FONT)
        );
    }
    for (i, (key, node)) in view.nodes.iter().enumerate() {
        let (line, fill, dash, width) = match look(node) {
            Some(Look::Deleting) => ("#777", "#eeeeee", " stroke-dasharray=\"5 3\"", 1.5),
            Some(Look::Refused) => ("#d00", "#ffecec", "", 2.5),
            Some(Look::Protected) => ("#e90", "#fff6e6", "", 2.5),
            None => ("#222", "white", "", 1.5),
        };
        let r = l.nodes[i];
        let _ = writeln!(
            out,
            "<g class=\"node\"><title>{}</title><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"5\" fill=\"{fill}\" stroke=\"{line}\" stroke-width=\"{width}\"{dash}/><text font-size=\"{}\" text-anchor=\"middle\" fill=\"#111\">{}</text></g>",
            xml_escape(&object_label(key)),
            num(r.x),
            num(r.y),
            num(r.w),
            num(r.h),
            num(NODE_FONT),
            tspans(&pic.node_lines[i], r.x + r.w / 2.0, r.y + PAD_Y, NODE_FONT)
        );
    }
    out.push_str("</svg>\n");
    out
}

/// How many device pixels a PNG has per SVG pixel: sharp on a projector.
pub const PNG_SCALE: f32 = 2.0;

/// PNG: the SVG drawn by a pure-Rust rasteriser (resvg), [`PNG_SCALE`] times its size, with
/// the machine's fonts.
pub fn to_png(view: &View, direction: Direction) -> Result<Vec<u8>, SvgError> {
    let svg = to_svg_with(view, direction);
    let mut options = resvg::usvg::Options::default();
    options.fontdb_mut().load_system_fonts();
    if options.fontdb.is_empty() {
        return Err(SvgError(
            "no fonts found to draw the PNG's text: install one (e.g. Debian's fonts-dejavu-core), or use -o svg".into(),
        ));
    }
    let tree = resvg::usvg::Tree::from_str(&svg, &options)
        .map_err(|e| SvgError(format!("reading the SVG back: {e}")))?;
    // Rounded up: the last column and row of pixels hold the margin's end.
    let (w, h) = (
        (tree.size().width() * PNG_SCALE).ceil() as u32,
        (tree.size().height() * PNG_SCALE).ceil() as u32,
    );
    let mut pixmap = resvg::tiny_skia::Pixmap::new(w, h)
        .ok_or_else(|| SvgError(format!("a {w}×{h} PNG is too large")))?;
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::from_scale(PNG_SCALE, PNG_SCALE),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| SvgError(format!("encoding the PNG: {e}")))
}
