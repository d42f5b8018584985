//! `kubectl lien tree TYPE/NAME`: one object, what uses it (and what uses those, up to the
//! objects nobody uses) and what it uses (down to what uses nothing), as a terminal tree with
//! a status column, as `kubectl tree` and `crossplane beta trace` show ownership. Pure.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use lien_core::{ObjectKey, RelationIndex};

use super::graph::object_label;
use super::snapshot::Graph;

/// How deep the tree goes in each direction before it says "…" (a chain longer than this is
/// rare; `plan` and `graph` show the whole of it).
pub const MAX_DEPTH: usize = 12;

/// One line of the tree: its branch drawing and object, the object's status, and the relation
/// that put it there.
struct Row {
    object: String,
    status: String,
    through: String,
}

/// What is known of `key` in a few words: `in use (N)`, `deleting`, `delete refused by USER`,
/// or `-`.
fn status(graph: &Graph, key: &ObjectKey) -> String {
    let mut parts = Vec::new();
    let n = graph.index.blocker_count(key);
    if n > 0 {
        parts.push(format!("in use ({n})"));
    }
    if let Some(info) = graph.nodes.get(key) {
        if info.deleting {
            parts.push("deleting".to_owned());
        }
        if let Some(a) = &info.attempt {
            parts.push(format!("delete refused ({})", a.attempt.user));
        }
    }
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join(", ")
    }
}

/// `source: reason`, one line.
fn through(source: &lien_core::Source, reason: Option<&str>) -> String {
    match reason {
        Some(r) if !r.is_empty() => {
            let r: String = r
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .take(80)
                .collect();
            format!("{source}: {r}")
        }
        _ => source.to_string(),
    }
}

/// Which way a branch goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    /// To the users of an object.
    UsedBy,
    /// To what an object uses.
    Uses,
}

/// The children of `key` one way: (object, or `None` for a protection; its source and reason).
fn children(index: &RelationIndex, key: &ObjectKey, way: Way) -> Vec<(Option<ObjectKey>, String)> {
    let mut out: Vec<(Option<ObjectKey>, String)> = match way {
        Way::UsedBy => index
            .blockers(key)
            .map(|r| {
                let r = r.to_relation();
                (r.by, through(&r.source, r.reason.as_deref()))
            })
            .collect(),
        Way::Uses => index
            .uses_of(key)
            .map(|r| {
                let r = r.to_relation();
                (Some(r.of), through(&r.source, r.reason.as_deref()))
            })
            .collect(),
    };
    // Protections first, then by object: the same tree for the same state.
    out.sort();
    out.dedup();
    out
}

#[allow(clippy::too_many_arguments)]
fn branch(
    graph: &Graph,
    key: &ObjectKey,
    way: Way,
    prefix: &str,
    depth: usize,
    path: &mut BTreeSet<ObjectKey>,
    rows: &mut Vec<Row>,
) {
    let kids = children(&graph.index, key, way);
    let last = kids.len().saturating_sub(1);
    for (i, (child, via)) in kids.into_iter().enumerate() {
        let (elbow, more) = if i == last {
            ("└─ ", "   ")
        } else {
            ("├─ ", "│  ")
        };
        let verb = match way {
            Way::UsedBy => "used by",
            Way::Uses => "uses",
        };
        let Some(child) = child else {
            rows.push(Row {
                object: format!("{prefix}{elbow}protected"),
                status: String::new(),
                through: via,
            });
            continue;
        };
        let cycle = path.contains(&child);
        let mut object = format!("{prefix}{elbow}{verb} {}", object_label(&child));
        if cycle {
            object.push_str(" (cycle)");
        }
        rows.push(Row {
            object,
            status: status(graph, &child),
            through: via,
        });
        if cycle {
            continue;
        }
        let next = format!("{prefix}{more}");
        if depth + 1 >= MAX_DEPTH {
            if !children(&graph.index, &child, way).is_empty() {
                rows.push(Row {
                    object: format!("{next}└─ …"),
                    status: String::new(),
                    through: format!("deeper than {MAX_DEPTH}: see `kubectl lien graph`"),
                });
            }
            continue;
        }
        path.insert(child.clone());
        branch(graph, &child, way, &next, depth + 1, path, rows);
        path.remove(&child);
    }
}

/// The tree of `root`: the object and its status, then what uses it, then what it uses, each
/// recursively, in columns `OBJECT`, `STATUS`, `THROUGH` (the Usage or rule, and its reason).
pub fn tree(graph: &Graph, root: &ObjectKey) -> String {
    let mut rows = vec![Row {
        object: object_label(root),
        status: status(graph, root),
        through: String::new(),
    }];
    for way in [Way::UsedBy, Way::Uses] {
        let mut path = BTreeSet::from([root.clone()]);
        branch(graph, root, way, "", 0, &mut path, &mut rows);
    }
    let object_width = rows
        .iter()
        .map(|r| r.object.chars().count())
        .max()
        .unwrap_or(0)
        .max("OBJECT".len());
    let status_width = rows
        .iter()
        .map(|r| r.status.chars().count())
        .max()
        .unwrap_or(0)
        .max("STATUS".len());
    let mut out = String::new();
    let mut line = |object: &str, status: &str, through: &str| {
        let pad = |s: &str, w: usize| format!("{s}{}", " ".repeat(w - s.chars().count()));
        let text = format!(
            "{}  {}  {through}",
            pad(object, object_width),
            pad(status, status_width)
        );
        let _ = writeln!(out, "{}", text.trim_end());
    };
    line("OBJECT", "STATUS", "THROUGH");
    for r in &rows {
        line(&r.object, &r.status, &r.through);
    }
    out
}
