//! The use graph: cycles and a safe deletion order.
//!
//! Every relation with a user is an edge `by → of` ("by uses of"). Protections (no user) are not
//! edges: they block deletion, but no order of deletions lifts them. UIDs are ignored here — the
//! graph is about names, and a stale relation is about to be re-derived anyway.
//!
//! A cycle (A uses B, B uses A, or A uses itself) means neither can ever be deleted first, so the
//! controller reports it on the sources involved. [`find_cycles`] reports each strongly connected
//! component that contains a cycle, as its sorted members, rather than every elementary cycle:
//! there can be exponentially many of those, and the component already names every object a
//! person must look at.

use std::collections::BTreeSet;
use std::fmt;

use hashbrown::{HashMap, HashSet};

use crate::index::{RelationIndex, RelationRef};
use crate::key::ObjectKey;
use crate::relation::{Source, SourceRef};

/// Objects that use each other, so that none of them can be deleted first.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("deletion cannot be ordered: {}", Cycles(&self.cycles))]
pub struct Cycle {
    /// Each group of objects that use each other (a strongly connected component), sorted; the
    /// groups sorted by their first member.
    pub cycles: Vec<Vec<ObjectKey>>,
}

struct Cycles<'a>(&'a [Vec<ObjectKey>]);

impl fmt::Display for Cycles<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, group) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            match group.as_slice() {
                [one] => write!(f, "{one} uses itself")?,
                many => {
                    for (j, key) in many.iter().enumerate() {
                        if j > 0 {
                            f.write_str(", ")?;
                        }
                        write!(f, "{key}")?;
                    }
                    f.write_str(" use each other")?;
                }
            }
        }
        Ok(())
    }
}

/// Every group of objects that use each other, directly or through others. Deterministic: each
/// group sorted, groups sorted.
pub fn find_cycles(index: &RelationIndex) -> Vec<Vec<ObjectKey>> {
    let nodes: Vec<u32> = (0..index.key_slots() as u32)
        .filter(|&id| index.key_is_live(id))
        .collect();
    cyclic_components(index, &nodes, |_| true)
}

/// Every group of objects of `namespace` that use each other through relations whose both ends
/// are in `namespace` (a cycle through an object elsewhere is not one: that object stays when
/// the namespace goes). Deterministic, as [`find_cycles`]. What a namespace being deleted
/// breaks ([`RelationIndex::set_broken_cycles`]).
///
/// Cost: one pass over the index's keys comparing an interned namespace (no strings), then
/// Tarjan over the namespace's own keys — the controller runs it only while a namespace is
/// being deleted, with the read lock the webhook shares.
pub fn cycles_in_namespace(index: &RelationIndex, namespace: &str) -> Vec<Vec<ObjectKey>> {
    let Some(ns) = index.namespace_symbol(namespace) else {
        return Vec::new();
    };
    let nodes: Vec<u32> = (0..index.key_slots() as u32)
        .filter(|&id| index.key_is_live(id) && index.key_namespace(id) == ns)
        .collect();
    cyclic_components(index, &nodes, |id| index.key_namespace(id) == ns)
}

/// The groups of [`cycles_in_namespace`] that still hold once the relations made by Usages of
/// `namespace` itself are dropped: cycles (in part) of DependencyRule or ClusterUsage relations,
/// which a namespace's deletion does not break ([`RelationIndex::set_broken_cycles`]), so the
/// namespace waits until a person breaks them. Deterministic, as [`find_cycles`].
pub fn unbreakable_cycles_in_namespace(
    index: &RelationIndex,
    namespace: &str,
) -> Vec<Vec<ObjectKey>> {
    let Some(ns) = index.namespace_symbol(namespace) else {
        return Vec::new();
    };
    let nodes: Vec<u32> = (0..index.key_slots() as u32)
        .filter(|&id| index.key_is_live(id) && index.key_namespace(id) == ns)
        .collect();
    let not_own = |r: &RelationRef<'_>| !matches!(r.source(), SourceRef::Usage { namespace: n, .. } if n == namespace);
    components(index, &nodes, |id| index.key_namespace(id) == ns, not_own)
}

/// The sources of the relations between members of `group` (both ends in it) — the Usages and
/// rules that make a cycle [`find_cycles`] or [`cycles_in_namespace`] found — sorted.
pub fn sources_within(index: &RelationIndex, group: &[ObjectKey]) -> Vec<Source> {
    let members: BTreeSet<&ObjectKey> = group.iter().collect();
    let mut sources: BTreeSet<Source> = BTreeSet::new();
    for key in group {
        for r in index.uses_of(key) {
            if members.contains(&r.of().to_key()) {
                sources.insert(r.source().to_source());
            }
        }
    }
    sources.into_iter().collect()
}

/// A safe order to delete `objects` in: waves, each of which may be deleted (in parallel) once
/// the waves before it are gone. Everything that uses one of `objects`, directly or through
/// others, must go first and is included. The first wave holds the objects nobody uses. Each wave
/// is sorted. Objects the index does not know are used by nobody and land in the first wave.
///
/// Protections are not part of the order: check [`crate::decide_delete`] for them.
pub fn deletion_order(
    index: &RelationIndex,
    objects: &[ObjectKey],
) -> Result<Vec<Vec<ObjectKey>>, Cycle> {
    let mut unknown: BTreeSet<ObjectKey> = BTreeSet::new();
    let mut todo: Vec<u32> = Vec::new();
    for key in objects {
        match index.key_id(key) {
            Some(id) => todo.push(id),
            None => {
                unknown.insert(key.clone());
            }
        }
    }
    // The closure under "is used by": everything that has to go before `objects` can.
    let mut members: HashSet<u32> = HashSet::new();
    while let Some(id) = todo.pop() {
        if members.insert(id) {
            todo.extend(index.user_ids(id).filter(|u| !members.contains(u)));
        }
    }
    // Kahn's algorithm, counting each edge once per relation (both directions walk the same
    // relations, so the counts agree).
    let mut users_left: HashMap<u32, usize> = members
        .iter()
        .map(|&id| (id, index.user_ids(id).count()))
        .collect();
    let mut wave: Vec<u32> = users_left
        .iter()
        .filter(|&(_, &n)| n == 0)
        .map(|(&id, _)| id)
        .collect();
    let mut waves: Vec<Vec<ObjectKey>> = Vec::new();
    let mut first: Vec<ObjectKey> = unknown.into_iter().collect();
    let mut done = 0usize;
    while !wave.is_empty() || !first.is_empty() {
        let mut next = Vec::new();
        for &id in &wave {
            for of in index.used_ids(id) {
                // Objects outside the closure are not being deleted; nothing to release there.
                if let Some(n) = users_left.get_mut(&of) {
                    *n -= 1;
                    if *n == 0 {
                        next.push(of);
                    }
                }
            }
        }
        done += wave.len();
        let mut keys: Vec<ObjectKey> = std::mem::take(&mut first);
        keys.extend(wave.iter().map(|&id| index.key_by_id(id).to_key()));
        keys.sort_unstable();
        keys.dedup();
        waves.push(keys);
        wave = next;
    }
    if done < members.len() {
        let stuck: Vec<u32> = users_left
            .iter()
            .filter(|&(_, &n)| n > 0)
            .map(|(&id, _)| id)
            .collect();
        let stuck_set: HashSet<u32> = stuck.iter().copied().collect();
        let mut cycles = cyclic_components(index, &stuck, |id| stuck_set.contains(&id));
        if cycles.is_empty() {
            // Cannot happen: a node is stuck only behind a cycle. Still, never return an order
            // that would delete something before its users.
            let mut all: Vec<ObjectKey> = stuck
                .iter()
                .map(|&id| index.key_by_id(id).to_key())
                .collect();
            all.sort_unstable();
            cycles.push(all);
        }
        return Err(Cycle { cycles });
    }
    Ok(waves)
}

/// Tarjan's strongly connected components over `nodes` (edges `by → of`, restricted to nodes
/// for which `inside` holds), iterative so a long chain cannot overflow the stack. Returns the
/// components that contain a cycle, as sorted keys, sorted.
fn cyclic_components(
    index: &RelationIndex,
    nodes: &[u32],
    inside: impl Fn(u32) -> bool,
) -> Vec<Vec<ObjectKey>> {
    components(index, nodes, inside, |_| true)
}

/// Tarjan's strongly connected components of the `by → of` graph over `nodes`, following only
/// edges to nodes `inside` through relations `edge` keeps; those with a cycle, as sorted keys.
fn components(
    index: &RelationIndex,
    nodes: &[u32],
    inside: impl Fn(u32) -> bool,
    edge: impl Fn(&RelationRef<'_>) -> bool,
) -> Vec<Vec<ObjectKey>> {
    struct Frame {
        node: u32,
        succ: Vec<u32>,
        pos: usize,
    }
    let mut order: HashMap<u32, u32> = HashMap::new();
    let mut low: HashMap<u32, u32> = HashMap::new();
    let mut on_stack: HashSet<u32> = HashSet::new();
    let mut stack: Vec<u32> = Vec::new();
    let mut counter = 0u32;
    let mut out: Vec<Vec<ObjectKey>> = Vec::new();
    let succ_of = |id: u32| -> Vec<u32> {
        index
            .uses_by_id(id)
            .filter(|r| edge(r))
            .map(|r| r.of_id())
            .filter(|&s| inside(s))
            .collect()
    };

    for &root in nodes {
        if order.contains_key(&root) {
            continue;
        }
        let mut frames = vec![Frame {
            node: root,
            succ: succ_of(root),
            pos: 0,
        }];
        order.insert(root, counter);
        low.insert(root, counter);
        counter += 1;
        stack.push(root);
        on_stack.insert(root);
        while let Some(frame) = frames.last_mut() {
            let v = frame.node;
            if let Some(&w) = frame.succ.get(frame.pos) {
                frame.pos += 1;
                match order.get(&w) {
                    None => {
                        order.insert(w, counter);
                        low.insert(w, counter);
                        counter += 1;
                        stack.push(w);
                        on_stack.insert(w);
                        frames.push(Frame {
                            node: w,
                            succ: succ_of(w),
                            pos: 0,
                        });
                    }
                    Some(&w_order) if on_stack.contains(&w) => {
                        let lv = low.entry(v).or_insert(w_order);
                        *lv = (*lv).min(w_order);
                    }
                    Some(_) => {}
                }
                continue;
            }
            // All successors done: close v, propagate its low-link to its parent.
            let self_loop = frame.succ.contains(&v);
            frames.pop();
            let v_low = low.get(&v).copied().unwrap_or(u32::MAX);
            if let Some(parent) = frames.last() {
                let lp = low.entry(parent.node).or_insert(v_low);
                *lp = (*lp).min(v_low);
            }
            if Some(&v_low) == order.get(&v) {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack.remove(&w);
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 || self_loop {
                    let mut keys: Vec<ObjectKey> = component
                        .iter()
                        .map(|&id| index.key_by_id(id).to_key())
                        .collect();
                    keys.sort_unstable();
                    keys.dedup();
                    out.push(keys);
                }
            }
        }
    }
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relation::Relation;

    fn k(name: &str) -> ObjectKey {
        ObjectKey::new("example.io", "Thing", None, name)
    }

    /// An index where each `(by, of)` pair is a relation from its own rule.
    fn graph(edges: &[(&str, &str)]) -> RelationIndex {
        let mut idx = RelationIndex::new();
        for (i, (by, of)) in edges.iter().enumerate() {
            let s = Source::rule(format!("r{i}"));
            idx.apply(&s, [Relation::uses(s.clone(), k(of), k(by))])
                .expect("valid");
        }
        idx
    }

    fn keys(names: &[&str]) -> Vec<ObjectKey> {
        names.iter().map(|n| k(n)).collect()
    }

    /// A ConfigMap `name` in namespace `ns` (`None`: a cluster-scoped Thing).
    fn at(ns: Option<&str>, name: &str) -> ObjectKey {
        match ns {
            Some(ns) => ObjectKey::new("", "ConfigMap", Some(ns), name),
            None => k(name),
        }
    }

    /// An object: its namespace (`None`: cluster-scoped) and name.
    type At<'a> = (Option<&'a str>, &'a str);

    /// An index where each `(by, of)` pair, with namespaces, is a relation from its own Usage.
    fn spanning(edges: &[(At<'_>, At<'_>)]) -> RelationIndex {
        let mut idx = RelationIndex::new();
        for (i, ((bns, by), (ons, of))) in edges.iter().enumerate() {
            let s = Source::usage(bns.unwrap_or("team-a"), format!("u{i}"));
            idx.apply(&s, [Relation::uses(s.clone(), at(*ons, of), at(*bns, by))])
                .expect("valid");
        }
        idx
    }

    #[test]
    fn cycles_in_a_namespace_are_those_whose_every_relation_is_inside_it() {
        let a = Some("team-a");
        let b = Some("team-b");
        let idx = spanning(&[
            // Inside team-a: x and y use each other; z uses itself.
            ((a, "x"), (a, "y")),
            ((a, "y"), (a, "x")),
            ((a, "z"), (a, "z")),
            // Through team-b: p uses q in team-b, which uses p back; not inside team-a.
            ((a, "p"), (b, "q")),
            ((b, "q"), (a, "p")),
            // Through a cluster-scoped object.
            ((a, "c"), (None, "node")),
            ((None, "node"), (a, "c")),
            // A chain, no cycle.
            ((a, "m"), (a, "n")),
        ]);
        assert_eq!(
            cycles_in_namespace(&idx, "team-a"),
            vec![vec![at(a, "x"), at(a, "y")], vec![at(a, "z")],]
        );
        assert!(cycles_in_namespace(&idx, "team-b").is_empty());
        assert!(cycles_in_namespace(&idx, "nowhere").is_empty());
    }

    #[test]
    fn a_broken_cycle_no_longer_blocks_its_members_but_everything_else_still_does() {
        let a = Some("team-a");
        let mut idx = spanning(&[
            ((a, "x"), (a, "y")),
            ((a, "y"), (a, "x")),
            // From outside the namespace: still holds x.
            ((Some("team-b"), "outsider"), (a, "x")),
        ]);
        let blocked_by = |idx: &RelationIndex, name: &str| -> Vec<String> {
            let mut users: Vec<String> = match crate::decide_delete(idx, &at(a, name), None) {
                crate::Decision::Allowed | crate::Decision::Warned { .. } => vec![],
                crate::Decision::Denied { blockers, .. } => blockers
                    .iter()
                    .map(|b| b.by.as_ref().map_or("-".into(), |k| k.name.clone()))
                    .collect(),
            };
            users.sort();
            users
        };
        assert_eq!(blocked_by(&idx, "x"), ["outsider", "y"]);
        assert_eq!(blocked_by(&idx, "y"), ["x"]);
        let cycles = cycles_in_namespace(&idx, "team-a");
        idx.set_broken_cycles("team-a", &cycles);
        assert_eq!(idx.broken_cycles("team-a"), cycles);
        assert_eq!(blocked_by(&idx, "x"), ["outsider"]);
        assert!(blocked_by(&idx, "y").is_empty());
        // The relations themselves stay.
        assert_eq!(idx.len(), 3);
        // The namespace no longer stuck (or gone): every relation blocks again.
        idx.set_broken_cycles("team-a", &[]);
        assert!(idx.broken_cycles("team-a").is_empty());
        assert_eq!(blocked_by(&idx, "y"), ["x"]);
    }

    #[test]
    fn no_cycles_in_a_dag() {
        let idx = graph(&[("a", "b"), ("b", "c"), ("a", "c")]);
        assert!(find_cycles(&idx).is_empty());
    }

    #[test]
    fn cycles_are_found_and_sorted() {
        let idx = graph(&[
            ("b", "a"),
            ("a", "b"),
            ("x", "y"),
            ("y", "z"),
            ("z", "x"),
            ("self", "self"),
            ("a", "x"), // joins nothing: x's component does not reach back to a
        ]);
        assert_eq!(
            find_cycles(&idx),
            vec![keys(&["a", "b"]), keys(&["self"]), keys(&["x", "y", "z"])]
        );
    }

    #[test]
    fn protections_are_not_edges() {
        let mut idx = RelationIndex::new();
        let s = Source::cluster_usage("p");
        idx.apply(&s, [Relation::protects(s.clone(), k("a"), "keep")])
            .expect("valid");
        assert!(find_cycles(&idx).is_empty());
        assert_eq!(deletion_order(&idx, &keys(&["a"])), Ok(vec![keys(&["a"])]));
    }

    #[test]
    fn order_puts_users_first_in_waves() {
        // release uses cluster, nfs uses pool uses cluster, app uses nfs.
        let idx = graph(&[
            ("release", "cluster"),
            ("nfs", "pool"),
            ("pool", "cluster"),
            ("app", "nfs"),
        ]);
        assert_eq!(
            deletion_order(&idx, &keys(&["cluster"])),
            Ok(vec![
                keys(&["app", "release"]),
                keys(&["nfs"]),
                keys(&["pool"]),
                keys(&["cluster"])
            ])
        );
        // Deleting only a leaf needs nothing else.
        assert_eq!(
            deletion_order(&idx, &keys(&["app"])),
            Ok(vec![keys(&["app"])])
        );
        // Unknown objects are used by nobody.
        assert_eq!(
            deletion_order(&idx, &keys(&["nfs", "ghost"])),
            Ok(vec![keys(&["app", "ghost"]), keys(&["nfs"])])
        );
        assert_eq!(deletion_order(&idx, &[]), Ok(vec![]));
    }

    #[test]
    fn order_counts_duplicate_edges_consistently() {
        let mut idx = graph(&[("a", "b")]);
        let s = Source::usage("ns", "dup");
        idx.apply(&s, [Relation::uses(s.clone(), k("b"), k("a"))])
            .expect("valid");
        assert_eq!(
            deletion_order(&idx, &keys(&["b"])),
            Ok(vec![keys(&["a"]), keys(&["b"])])
        );
    }

    #[test]
    fn order_reports_cycles() {
        let idx = graph(&[("a", "b"), ("b", "a"), ("c", "a"), ("b", "d")]);
        let err = deletion_order(&idx, &keys(&["d"])).expect_err("cycle");
        assert_eq!(err.cycles, vec![keys(&["a", "b"])]);
        assert_eq!(
            err.to_string(),
            "deletion cannot be ordered: example.io/Thing a, example.io/Thing b use each other"
        );
        let idx = graph(&[("s", "s")]);
        assert_eq!(
            deletion_order(&idx, &keys(&["s"])).map_err(|e| e.to_string()),
            Err("deletion cannot be ordered: example.io/Thing s uses itself".to_owned())
        );
    }

    #[test]
    fn long_chains_do_not_overflow() {
        let names: Vec<String> = (0..20_000).map(|i| format!("n{i}")).collect();
        let edges: Vec<(&str, &str)> = names
            .windows(2)
            .map(|w| (w[0].as_str(), w[1].as_str()))
            .collect();
        let idx = graph(&edges);
        assert!(find_cycles(&idx).is_empty());
        let order = deletion_order(&idx, &keys(&["n19999"])).expect("acyclic");
        assert_eq!(order.len(), 20_000);
    }
}
