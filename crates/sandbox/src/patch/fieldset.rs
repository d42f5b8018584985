//! Field paths and sets of them, in structured-merge-diff's model and `FieldsV1` encoding.
//!
//! A path is a sequence of elements: a field name (`f:spec`), the key of an associative-list item
//! (`k:{"name":"a"}`), the value of a set-list item (`v:"x"`) or a list index (`i:0`). A set is a
//! trie whose nodes are either members (owned paths) or only lead to members; `FieldsV1` writes
//! a member that also has children with a `".": {}` entry.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};

/// One step of a field path. The derived order (fields, then keys, values, indices) is the order
/// `FieldsV1` lists them in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum PathElement {
    Field(String),
    /// The canonical JSON of the key fields, e.g. `{"name":"a"}`.
    Key(String),
    /// The canonical JSON of a set member.
    Value(String),
    Index(usize),
}

pub(crate) type Path = Vec<PathElement>;

/// `v` with object keys sorted, as structured-merge-diff serializes key and set values.
pub(crate) fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for k in keys {
                out.insert(k.clone(), canonical(&m[k]));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

pub(crate) fn canonical_string(v: &Value) -> String {
    canonical(v).to_string()
}

/// A path as structured-merge-diff prints it in conflict messages: `.spec.ports[port=80,protocol="TCP"].name`.
pub(crate) fn path_string(path: &[PathElement]) -> String {
    let mut s = String::new();
    for pe in path {
        match pe {
            PathElement::Field(f) => {
                s.push('.');
                s.push_str(f);
            }
            PathElement::Key(k) => {
                let parsed: Value = serde_json::from_str(k).unwrap_or(Value::Null);
                let fields: Vec<String> = parsed
                    .as_object()
                    .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect())
                    .unwrap_or_default();
                let _ = write!(s, "[{}]", fields.join(","));
            }
            PathElement::Value(v) => {
                let _ = write!(s, "[={v}]");
            }
            PathElement::Index(i) => {
                let _ = write!(s, "[{i}]");
            }
        }
    }
    s
}

#[derive(Debug, Clone, Default, PartialEq)]
struct Node {
    member: bool,
    children: BTreeMap<PathElement, Node>,
}

/// A set of field paths.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldSet {
    root: BTreeMap<PathElement, Node>,
}

impl FieldSet {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn from_paths<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Self {
        let mut s = Self::new();
        for p in paths {
            s.insert(p);
        }
        s
    }

    pub(crate) fn insert(&mut self, path: &[PathElement]) {
        let Some((last, parents)) = path.split_last() else {
            return;
        };
        let mut level = &mut self.root;
        for pe in parents {
            level = &mut level.entry(pe.clone()).or_default().children;
        }
        level.entry(last.clone()).or_default().member = true;
    }

    fn node(&self, path: &[PathElement]) -> Option<&Node> {
        let (first, rest) = path.split_first()?;
        let mut node = self.root.get(first)?;
        for pe in rest {
            node = node.children.get(pe)?;
        }
        Some(node)
    }

    pub(crate) fn has(&self, path: &[PathElement]) -> bool {
        self.node(path).is_some_and(|n| n.member)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.root.is_empty()
    }

    /// Every member, in `FieldsV1` order (a parent before its children).
    pub(crate) fn members(&self) -> Vec<Path> {
        fn walk(level: &BTreeMap<PathElement, Node>, prefix: &mut Path, out: &mut Vec<Path>) {
            for (pe, node) in level {
                prefix.push(pe.clone());
                if node.member {
                    out.push(prefix.clone());
                }
                walk(&node.children, prefix, out);
                prefix.pop();
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &mut Vec::new(), &mut out);
        out
    }

    pub(crate) fn union(&self, other: &FieldSet) -> FieldSet {
        let mut s = self.clone();
        for p in other.members() {
            s.insert(&p);
        }
        s
    }

    pub(crate) fn difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members();
        FieldSet::from_paths(members.iter().filter(|p| !other.has(p)))
    }

    pub(crate) fn intersection(&self, other: &FieldSet) -> FieldSet {
        let members = self.members();
        FieldSet::from_paths(members.iter().filter(|p| other.has(p)))
    }

    /// Drops members that are in `other` or lie below one of its members.
    pub(crate) fn recursive_difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members();
        FieldSet::from_paths(
            members
                .iter()
                .filter(|p| !(1..=p.len()).any(|n| other.has(&p[..n]))),
        )
    }

    /// Adds every ancestor of every member (structured-merge-diff's
    /// `EnsureNamedFieldsAreMembers`, which pruning uses so that emptied parents go too).
    pub(crate) fn with_ancestors(&self) -> FieldSet {
        let mut s = FieldSet::new();
        for p in self.members() {
            for n in 1..=p.len() {
                s.insert(&p[..n]);
            }
        }
        s
    }

    /// The `fieldsV1` object.
    pub(crate) fn to_fields_v1(&self) -> Value {
        fn level(children: &BTreeMap<PathElement, Node>, include_self: bool) -> Value {
            let mut m = Map::new();
            if include_self && !children.is_empty() {
                m.insert(".".into(), Value::Object(Map::new()));
            }
            for (pe, node) in children {
                m.insert(encode_element(pe), level(&node.children, node.member));
            }
            Value::Object(m)
        }
        level(&self.root, false)
    }

    /// Parses a `fieldsV1` object; `None` when it is not one.
    pub(crate) fn from_fields_v1(v: &Value) -> Option<FieldSet> {
        fn walk(v: &Value, prefix: &mut Path, set: &mut FieldSet) -> Option<()> {
            let m = v.as_object()?;
            if m.is_empty() {
                set.insert(prefix);
                return Some(());
            }
            for (k, child) in m {
                if k == "." {
                    set.insert(prefix);
                    continue;
                }
                prefix.push(decode_element(k)?);
                walk(child, prefix, set)?;
                prefix.pop();
            }
            Some(())
        }
        let m = v.as_object()?;
        let mut set = FieldSet::new();
        for (k, child) in m {
            let mut prefix = vec![decode_element(k)?];
            walk(child, &mut prefix, &mut set)?;
        }
        Some(set)
    }
}

fn encode_element(pe: &PathElement) -> String {
    match pe {
        PathElement::Field(f) => format!("f:{f}"),
        PathElement::Key(k) => format!("k:{k}"),
        PathElement::Value(v) => format!("v:{v}"),
        PathElement::Index(i) => format!("i:{i}"),
    }
}

fn decode_element(s: &str) -> Option<PathElement> {
    let (tag, rest) = s.split_once(':')?;
    Some(match tag {
        "f" => PathElement::Field(rest.to_string()),
        "k" => PathElement::Key(canonical_string(&serde_json::from_str(rest).ok()?)),
        "v" => PathElement::Value(canonical_string(&serde_json::from_str(rest).ok()?)),
        "i" => PathElement::Index(rest.parse().ok()?),
        _ => return None,
    })
}

/// Shorthand for tests and fixed paths: `f(&["metadata", "name"])`.
pub(crate) fn fields(names: &[&str]) -> Path {
    names
        .iter()
        .map(|n| PathElement::Field((*n).to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_v1_round_trips_with_dot_for_owned_parents() {
        let v = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:name": {}}}},
            "f:x": {}
        });
        let set = FieldSet::from_fields_v1(&v).expect("parses");
        assert!(set.has(&fields(&["metadata", "labels"])));
        assert!(set.has(&fields(&["metadata", "labels", "app"])));
        assert!(!set.has(&fields(&["metadata"])));
        assert_eq!(set.to_fields_v1(), v);
    }

    #[test]
    fn path_strings_read_like_structured_merge_diff() {
        let mut p = fields(&["spec", "ports"]);
        p.push(PathElement::Key(r#"{"port":80,"protocol":"TCP"}"#.into()));
        p.push(PathElement::Field("name".into()));
        assert_eq!(
            path_string(&p),
            r#".spec.ports[port=80,protocol="TCP"].name"#
        );
        let q = vec![
            PathElement::Field("f".into()),
            PathElement::Value("\"x\"".into()),
            PathElement::Index(2),
        ];
        assert_eq!(path_string(&q), r#".f[="x"][2]"#);
    }

    #[test]
    fn set_algebra() {
        let a = FieldSet::from_paths(&[fields(&["a", "b"]), fields(&["c"])]);
        let b = FieldSet::from_paths(&[fields(&["a"])]);
        assert_eq!(a.recursive_difference(&b).members(), vec![fields(&["c"])]);
        assert_eq!(a.difference(&b), a);
        assert!(a.intersection(&b).is_empty());
        assert!(a.with_ancestors().has(&fields(&["a"])));
    }
}
