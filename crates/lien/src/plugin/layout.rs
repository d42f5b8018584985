//! A layered drawing of a directed graph for `kubectl lien graph -o svg|png`. Pure.
//!
//! Sugiyama's scheme, kept small enough to reason about:
//! 1. **Ranks**: cycles are broken by turning around the edges a depth-first search finds
//!    going back; each node's rank is its longest path from a source, so every edge goes from
//!    a lower rank to a higher one (users before what they use: a deletion order).
//! 2. **Layers**: nodes sit in even layers; each edge's **label is an item of the layer right
//!    after its user**, and a longer edge passes through a thin dummy item in every layer it
//!    crosses. So every segment joins two neighbouring layers.
//! 3. **Order** within a layer: barycentre sweeps, to untangle.
//! 4. **Positions** across the layers: each item as near the mean of its neighbours as the
//!    order allows (isotonic regression: the pool-adjacent-violators algorithm), swept a few
//!    times both ways.
//! 5. **Routes**: an edge leaves its item straight (along the rank axis) to the end of that
//!    item's layer, crosses the empty gap to the next layer, and enters the next item
//!    straight. Items of one layer never overlap across the layer, and the straight stubs stay
//!    inside their own item's band, so **no segment can cross a node or a label** — by
//!    construction; the tests check it on random graphs. Through its own label an edge runs
//!    along the label's edge (above it left to right, beside it top to bottom), never over
//!    the text.
//! 6. **Cropping**: everything is moved so that the drawing's bounds, plus a margin, are the
//!    canvas.

use std::collections::BTreeSet;

/// Which way users point to what they use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    /// Left to right (ranks are columns).
    #[default]
    LeftRight,
    /// Top to bottom (ranks are rows).
    TopBottom,
}

/// A width and a height.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Size {
    pub w: f64,
    pub h: f64,
}

/// A point.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Point {
    pub x: f64,
    pub y: f64,
}

/// An axis-aligned rectangle.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Rect {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

impl Rect {
    /// Whether the segment `a`–`b` passes through the inside of the rectangle (touching its
    /// border does not count).
    pub fn crossed_by(&self, a: Point, b: Point) -> bool {
        // Liang–Barsky clipping against the rectangle shrunk by a hair.
        let eps = 1e-6;
        let (x0, x1, y0, y1) = (
            self.x + eps,
            self.x + self.w - eps,
            self.y + eps,
            self.y + self.h - eps,
        );
        if x0 >= x1 || y0 >= y1 {
            return false;
        }
        let (dx, dy) = (b.x - a.x, b.y - a.y);
        let mut t0: f64 = 0.0;
        let mut t1: f64 = 1.0;
        for (p, q) in [
            (-dx, a.x - x0),
            (dx, x1 - a.x),
            (-dy, a.y - y0),
            (dy, y1 - a.y),
        ] {
            if p == 0.0 {
                if q < 0.0 {
                    return false;
                }
            } else {
                let r = q / p;
                if p < 0.0 {
                    t0 = t0.max(r);
                } else {
                    t1 = t1.min(r);
                }
            }
        }
        t0 < t1
    }
}

/// What to lay out: node sizes, and edges `(from, to, label size)`.
#[derive(Debug, Clone, Default)]
pub struct Input {
    pub nodes: Vec<Size>,
    pub edges: Vec<(usize, usize, Size)>,
    pub direction: Direction,
}

/// Where everything goes, on a canvas of `width` × `height` whose content bounds, plus
/// [`MARGIN`] on every side, are the canvas.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    pub nodes: Vec<Rect>,
    /// Each edge's label text box.
    pub labels: Vec<Rect>,
    /// Each edge's route, from its `from` node to its `to` node (the arrow at the end).
    pub routes: Vec<Vec<Point>>,
    pub width: f64,
    pub height: f64,
}

/// Blank space around the drawing.
pub const MARGIN: f64 = 12.0;
/// Between the items of a layer.
const ITEM_GAP: f64 = 14.0;
/// Between layers: room for the slanted part of a route and the arrowhead.
const LAYER_GAP: f64 = 36.0;
/// A label's line runs this far from the text.
const LINE_GAP: f64 = 6.0;
/// The width of a dummy item (a route passing through a layer).
const DUMMY: f64 = 6.0;
/// Barycentre and placement sweeps.
const SWEEPS: usize = 12;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Item {
    Node(usize),
    /// Edge `e`'s label; `self_loop`: the route comes back along the far side.
    Label(usize),
    Dummy(usize),
}

/// An item's sizes in layer terms: `along` the rank axis, `across` it.
#[derive(Debug, Clone, Copy)]
struct Extent {
    along: f64,
    across: f64,
}

fn orient(direction: Direction, s: Size) -> Extent {
    match direction {
        Direction::LeftRight => Extent {
            along: s.w,
            across: s.h,
        },
        Direction::TopBottom => Extent {
            along: s.h,
            across: s.w,
        },
    }
}

/// Ranks with every edge going up (cycles broken by reversing back edges); and which edges
/// were reversed.
fn ranks(n: usize, edges: &[(usize, usize, Size)]) -> (Vec<usize>, Vec<bool>) {
    let mut out: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for (i, &(a, b, _)) in edges.iter().enumerate() {
        if a != b {
            out[a].push((b, i));
        }
    }
    // Iterative DFS: 0 unseen, 1 on the stack, 2 done.
    let mut state = vec![0u8; n];
    let mut reversed = vec![false; edges.len()];
    for root in 0..n {
        if state[root] != 0 {
            continue;
        }
        let mut stack = vec![(root, 0usize)];
        state[root] = 1;
        while let Some(&mut (v, ref mut next)) = stack.last_mut() {
            if let Some(&(w, e)) = out[v].get(*next) {
                *next += 1;
                match state[w] {
                    0 => {
                        state[w] = 1;
                        stack.push((w, 0));
                    }
                    1 => reversed[e] = true,
                    _ => {}
                }
            } else {
                state[v] = 2;
                stack.pop();
            }
        }
    }
    // Longest path from the sources, over the acyclic edges (Kahn's order).
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut indeg = vec![0usize; n];
    for (i, &(a, b, _)) in edges.iter().enumerate() {
        if a == b {
            continue;
        }
        let (a, b) = if reversed[i] { (b, a) } else { (a, b) };
        succ[a].push(b);
        indeg[b] += 1;
    }
    let mut rank = vec![0usize; n];
    let mut ready: Vec<usize> = (0..n).filter(|&v| indeg[v] == 0).collect();
    while let Some(v) = ready.pop() {
        for &w in &succ[v] {
            rank[w] = rank[w].max(rank[v] + 1);
            indeg[w] -= 1;
            if indeg[w] == 0 {
                ready.push(w);
            }
        }
    }
    (rank, reversed)
}

/// Isotonic regression with minimum separations: positions `p` as near `want` as possible
/// with `p[i+1] >= p[i] + sep[i]` (pool adjacent violators).
fn place(want: &[f64], sep: &[f64]) -> Vec<f64> {
    let n = want.len();
    let mut offset = vec![0.0; n];
    for i in 1..n {
        offset[i] = offset[i - 1] + sep[i - 1];
    }
    // Blocks of (mean of want - offset, count).
    let mut blocks: Vec<(f64, usize)> = Vec::new();
    for i in 0..n {
        blocks.push((want[i] - offset[i], 1));
        while blocks.len() > 1 {
            let (m2, c2) = blocks[blocks.len() - 1];
            let (m1, c1) = blocks[blocks.len() - 2];
            if m1 <= m2 {
                break;
            }
            blocks.pop();
            let last = blocks.len() - 1;
            blocks[last] = (
                (m1 * c1 as f64 + m2 * c2 as f64) / (c1 + c2) as f64,
                c1 + c2,
            );
        }
    }
    let mut out = Vec::with_capacity(n);
    for (m, c) in blocks {
        for _ in 0..c {
            let i = out.len();
            out.push(m + offset[i]);
        }
    }
    out
}

/// Lays out `input`.
pub fn layout(input: &Input) -> Layout {
    let n = input.nodes.len();
    let dir = input.direction;
    if n == 0 {
        return Layout {
            width: 2.0 * MARGIN,
            height: 2.0 * MARGIN,
            ..Layout::default()
        };
    }
    let (rank, reversed) = ranks(n, &input.edges);
    let max_rank = rank.iter().copied().max().unwrap_or(0);
    let layers_n = 2 * max_rank + 2;
    let mut layers: Vec<Vec<Item>> = vec![Vec::new(); layers_n];
    for (v, &r) in rank.iter().enumerate() {
        layers[2 * r].push(Item::Node(v));
    }
    // Each edge's chain of items, in rank order (for a reversed edge, from `to` to `from`).
    let mut chains: Vec<Vec<(usize, Item)>> = Vec::with_capacity(input.edges.len());
    for (e, &(a, b, _)) in input.edges.iter().enumerate() {
        let (lo, hi) = if reversed[e] { (b, a) } else { (a, b) };
        let mut chain = vec![(2 * rank[lo], Item::Node(lo))];
        let label_layer = 2 * rank[lo] + 1;
        chain.push((label_layer, Item::Label(e)));
        layers[label_layer].push(Item::Label(e));
        if lo != hi {
            // (Ranks grow along every edge once cycles are broken; `max` keeps a range that
            // could not be one empty rather than a panic.)
            let crossed = label_layer + 1..(2 * rank[hi]).max(label_layer + 1);
            for (l, layer) in layers[crossed.clone()].iter_mut().enumerate() {
                chain.push((crossed.start + l, Item::Dummy(e)));
                layer.push(Item::Dummy(e));
            }
            chain.push((2 * rank[hi], Item::Node(hi)));
        }
        chains.push(chain);
    }
    let extent = |item: Item| -> Extent {
        match item {
            Item::Node(v) => orient(dir, input.nodes[v]),
            Item::Label(e) => {
                let t = orient(dir, input.edges[e].2);
                let self_loop = input.edges[e].0 == input.edges[e].1;
                Extent {
                    along: t.along,
                    // The line's lane before the text (and, for a loop, the way back after).
                    across: t.across + LINE_GAP * if self_loop { 2.0 } else { 1.0 },
                }
            }
            Item::Dummy(_) => Extent {
                along: 0.0,
                across: DUMMY,
            },
        }
    };
    // Neighbours of each (layer, item) in the layers before and after.
    let key = |item: Item| match item {
        Item::Node(v) => (0u8, v),
        Item::Label(e) => (1, e),
        Item::Dummy(e) => (2, e),
    };
    let mut before: Links = Default::default();
    let mut after: Links = Default::default();
    for chain in &chains {
        for w in chain.windows(2) {
            let ((la, a), (lb, b)) = (w[0], w[1]);
            after.entry((la, key(a))).or_default().push((lb, b));
            before.entry((lb, key(b))).or_default().push((la, a));
        }
    }
    // The port: where on its across-axis extent a route meets an item.
    let port = |item: Item| -> f64 {
        match item {
            Item::Node(_) | Item::Dummy(_) => extent(item).across / 2.0,
            Item::Label(_) => LINE_GAP / 2.0,
        }
    };
    // Order within layers: barycentres of the neighbours' indexes, swept down and up,
    // keeping the order with the fewest crossings.
    order_layers(&mut layers, &before, &after, key);
    // Initial positions: stacked in that order.
    let mut pos: std::collections::HashMap<(usize, (u8, usize)), f64> = Default::default();
    let stack = |layer: &[Item], pos: &mut std::collections::HashMap<_, _>, l: usize| {
        let mut at = 0.0;
        for &item in layer {
            pos.insert((l, key(item)), at);
            at += extent(item).across + ITEM_GAP;
        }
    };
    for (l, layer) in layers.iter().enumerate() {
        stack(layer, &mut pos, l);
    }
    for sweep in 0..SWEEPS {
        let down = sweep % 2 == 0;
        let order: Vec<usize> = if down {
            (0..layers_n).collect()
        } else {
            (0..layers_n).rev().collect()
        };
        for l in order {
            let neighbours = if down { &before } else { &after };
            let layer = &mut layers[l];
            if layer.is_empty() {
                continue;
            }
            // The port position each item would like: its neighbours' mean port.
            let wanted: Vec<(Item, Option<f64>)> = layer
                .iter()
                .map(|&item| {
                    let ns = neighbours.get(&(l, key(item)));
                    let mean = ns.filter(|ns| !ns.is_empty()).map(|ns| {
                        ns.iter()
                            .map(|&(nl, ni)| pos[&(nl, key(ni))] + port(ni))
                            .sum::<f64>()
                            / ns.len() as f64
                    });
                    (item, mean)
                })
                .collect();
            let means: std::collections::HashMap<(u8, usize), Option<f64>> =
                wanted.iter().map(|&(i, m)| (key(i), m)).collect();
            let want: Vec<f64> = layer
                .iter()
                .map(|&item| {
                    means
                        .get(&key(item))
                        .copied()
                        .flatten()
                        .map_or(pos[&(l, key(item))], |m| m - port(item))
                })
                .collect();
            let sep: Vec<f64> = layer
                .iter()
                .map(|&item| extent(item).across + ITEM_GAP)
                .collect();
            for (&item, p) in layer.iter().zip(place(&want, &sep)) {
                pos.insert((l, key(item)), p);
            }
        }
    }
    // Along the rank axis: each layer as wide as its widest item; empty layers take no room.
    let mut start = vec![0.0; layers_n];
    let mut width = vec![0.0; layers_n];
    let mut at = 0.0;
    for l in 0..layers_n {
        width[l] = layers[l]
            .iter()
            .map(|&i| extent(i).along)
            .fold(0.0, f64::max);
        start[l] = at;
        if !layers[l].is_empty() {
            at += width[l] + LAYER_GAP;
        }
    }
    // An item's box in layer terms: (along start, across start, along, across); centred in
    // its layer.
    let boxed = |l: usize, item: Item| -> (f64, f64, f64, f64) {
        let e = extent(item);
        (
            start[l] + (width[l] - e.along) / 2.0,
            pos[&(l, key(item))],
            e.along,
            e.across,
        )
    };
    let point = |along: f64, across: f64| match dir {
        Direction::LeftRight => Point {
            x: along,
            y: across,
        },
        Direction::TopBottom => Point {
            x: across,
            y: along,
        },
    };
    let rect = |(a, c, al, ac): (f64, f64, f64, f64)| match dir {
        Direction::LeftRight => Rect {
            x: a,
            y: c,
            w: al,
            h: ac,
        },
        Direction::TopBottom => Rect {
            x: c,
            y: a,
            w: ac,
            h: al,
        },
    };
    // Where each edge meets its nodes: spread along the side, in the order of the items at
    // the other end, so that arrowheads do not pile up on one point. (Inside the node's band:
    // the routes still cannot cross anything.)
    let mut node_port: std::collections::HashMap<(usize, usize, bool), f64> = Default::default();
    for (v, &r) in rank.iter().enumerate() {
        let l = 2 * r;
        let across = extent(Item::Node(v)).across;
        for (links, outgoing) in [(&after, true), (&before, false)] {
            let mut ends: Vec<(f64, usize)> = links
                .get(&(l, key(Item::Node(v))))
                .map_or(&[][..], Vec::as_slice)
                .iter()
                .filter_map(|&(nl, item)| match item {
                    Item::Label(e) | Item::Dummy(e) => {
                        Some((pos[&(nl, key(item))] + port(item), e))
                    }
                    Item::Node(_) => None,
                })
                .collect();
            ends.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let k = ends.len() as f64;
            for (i, &(_, e)) in ends.iter().enumerate() {
                node_port.insert((v, e, outgoing), across * (i as f64 + 1.0) / (k + 1.0));
            }
        }
    }
    let mut nodes = vec![Rect::default(); n];
    for (v, &r) in rank.iter().enumerate() {
        nodes[v] = rect(boxed(2 * r, Item::Node(v)));
    }
    let mut labels = vec![Rect::default(); input.edges.len()];
    let mut routes = Vec::with_capacity(input.edges.len());
    for (e, chain) in chains.iter().enumerate() {
        let mut pts: Vec<Point> = Vec::new();
        for (i, &(l, item)) in chain.iter().enumerate() {
            let (a, c, al, ac) = boxed(l, item);
            let p = c + port(item);
            let layer_end = start[l] + width[l];
            match item {
                Item::Label(_) => {
                    // The text after the line's lane.
                    labels[e] = rect((a, c + LINE_GAP, al, ac - LINE_GAP * chain_loops(chain)));
                    pts.push(point(start[l], p));
                    pts.push(point(layer_end, p));
                }
                Item::Dummy(_) => {
                    pts.push(point(start[l], p));
                    pts.push(point(layer_end, p));
                }
                Item::Node(v) if i == 0 => {
                    let p = c + node_port.get(&(v, e, true)).copied().unwrap_or(ac / 2.0);
                    pts.push(point(a + al, p));
                    pts.push(point(layer_end, p));
                }
                Item::Node(v) => {
                    let p = c + node_port.get(&(v, e, false)).copied().unwrap_or(ac / 2.0);
                    pts.push(point(start[l], p));
                    pts.push(point(a, p));
                }
            }
            // Between layers: the previous point is at the end of the previous layer.
        }
        if chain.len() == 2 {
            // A loop: back along the label's far side, then into the node below its port.
            let (l, item) = chain[1];
            let (_, c, _, ac) = boxed(l, item);
            let back = c + ac - LINE_GAP / 2.0;
            let (nl, node) = chain[0];
            let (na, nc, nal, nac) = boxed(nl, node);
            let node_end = start[nl] + width[nl];
            let into = nc + nac * 0.75;
            pts.push(point(start[l] + width[l], back));
            pts.push(point(start[l], back));
            pts.push(point(node_end, into));
            pts.push(point(na + nal, into));
        }
        if reversed[e] {
            pts.reverse();
        }
        pts.dedup();
        routes.push(pts);
    }
    crop(Layout {
        nodes,
        labels,
        routes,
        width: 0.0,
        height: 0.0,
    })
}

type Links = std::collections::HashMap<(usize, (u8, usize)), Vec<(usize, Item)>>;

/// Crossings between layer `l` and `l + 1`; `None` when there are too many segments to count
/// cheaply.
fn crossings_between(
    layers: &[Vec<Item>],
    l: usize,
    after: &Links,
    key: impl Fn(Item) -> (u8, usize),
) -> Option<usize> {
    let index: std::collections::HashMap<(u8, usize), usize> = layers[l + 1]
        .iter()
        .enumerate()
        .map(|(i, &it)| (key(it), i))
        .collect();
    let mut segs: Vec<(usize, usize)> = Vec::new();
    for (i, &it) in layers[l].iter().enumerate() {
        for &(_, next) in after.get(&(l, key(it))).map_or(&[][..], Vec::as_slice) {
            segs.push((i, index[&key(next)]));
        }
    }
    if segs.len() > 600 {
        return None;
    }
    let mut n = 0;
    for (i, a) in segs.iter().enumerate() {
        for b in &segs[i + 1..] {
            if (a.0 < b.0 && a.1 > b.1) || (a.0 > b.0 && a.1 < b.1) {
                n += 1;
            }
        }
    }
    Some(n)
}

/// Orders each layer by its items' neighbours' mean index (barycentres), sweeping down and
/// up, and keeps the order with the fewest crossings seen.
fn order_layers(
    layers: &mut [Vec<Item>],
    before: &Links,
    after: &Links,
    key: impl Fn(Item) -> (u8, usize) + Copy,
) {
    let total = |layers: &[Vec<Item>]| -> Option<usize> {
        (0..layers.len().saturating_sub(1))
            .map(|l| crossings_between(layers, l, after, key))
            .sum()
    };
    let mut best = layers.to_vec();
    let mut best_count = total(layers);
    for sweep in 0..2 * SWEEPS {
        let down = sweep % 2 == 0;
        let order: Vec<usize> = if down {
            (1..layers.len()).collect()
        } else {
            (0..layers.len().saturating_sub(1)).rev().collect()
        };
        for l in order {
            let (neighbours, other) = if down {
                (before, l - 1)
            } else {
                (after, l + 1)
            };
            let index: std::collections::HashMap<(u8, usize), usize> = layers[other]
                .iter()
                .enumerate()
                .map(|(i, &it)| (key(it), i))
                .collect();
            let mut keyed: Vec<(f64, usize, Item)> = layers[l]
                .iter()
                .enumerate()
                .map(|(i, &item)| {
                    let ns = neighbours
                        .get(&(l, key(item)))
                        .map_or(&[][..], Vec::as_slice);
                    let bary = if ns.is_empty() {
                        i as f64
                    } else {
                        ns.iter().map(|&(_, n)| index[&key(n)] as f64).sum::<f64>()
                            / ns.len() as f64
                    };
                    (bary, i, item)
                })
                .collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            layers[l] = keyed.into_iter().map(|k| k.2).collect();
        }
        transpose(layers, before, after, key);
        match (total(layers), best_count) {
            (Some(now), Some(b)) if now < b => {
                best = layers.to_vec();
                best_count = Some(now);
            }
            // Too large to count: the sweeps' result stands.
            (None, _) | (_, None) => return,
            _ => {}
        }
    }
    layers.clone_from_slice(&best);
}

/// Crossings between the links of `u` and of `v` (with `u` placed before `v`) to the layers
/// on both sides.
fn pair_crossings(u: &[usize], v: &[usize]) -> usize {
    u.iter()
        .map(|&a| v.iter().filter(|&&b| b < a).count())
        .sum()
}

/// Swaps neighbours within layers while that removes crossings (the "transpose" step of
/// Gansner et al.), for layers small enough to do it cheaply.
fn transpose(
    layers: &mut [Vec<Item>],
    before: &Links,
    after: &Links,
    key: impl Fn(Item) -> (u8, usize) + Copy,
) {
    for _ in 0..8 {
        let mut improved = false;
        for l in 0..layers.len() {
            if layers[l].len() < 2 || layers[l].len() > 200 {
                continue;
            }
            // Each item's neighbours' indexes, on each side.
            let sides: Vec<Vec<Vec<usize>>> = [(before, l.checked_sub(1)), (after, Some(l + 1))]
                .into_iter()
                .map(|(links, other)| {
                    let index: std::collections::HashMap<(u8, usize), usize> = other
                        .and_then(|o| layers.get(o))
                        .map(|layer| {
                            layer
                                .iter()
                                .enumerate()
                                .map(|(i, &it)| (key(it), i))
                                .collect()
                        })
                        .unwrap_or_default();
                    layers[l]
                        .iter()
                        .map(|&it| {
                            links
                                .get(&(l, key(it)))
                                .map_or(&[][..], Vec::as_slice)
                                .iter()
                                .filter_map(|&(_, n)| index.get(&key(n)).copied())
                                .collect()
                        })
                        .collect()
                })
                .collect();
            let mut order: Vec<usize> = (0..layers[l].len()).collect();
            for i in 0..order.len() - 1 {
                let (a, b) = (order[i], order[i + 1]);
                let now: usize = sides.iter().map(|s| pair_crossings(&s[a], &s[b])).sum();
                let swapped: usize = sides.iter().map(|s| pair_crossings(&s[b], &s[a])).sum();
                if swapped < now {
                    order.swap(i, i + 1);
                    improved = true;
                }
            }
            let old = layers[l].clone();
            layers[l] = order.into_iter().map(|i| old[i]).collect();
        }
        if !improved {
            break;
        }
    }
}

/// How many lanes a label's item has besides the text (1, or 2 for a loop).
fn chain_loops(chain: &[(usize, Item)]) -> f64 {
    if chain.len() == 2 { 2.0 } else { 1.0 }
}

/// Moves everything so that the content bounds start at [`MARGIN`], and sizes the canvas to
/// them plus the margin.
fn crop(mut out: Layout) -> Layout {
    let b = bounds(&out);
    let (dx, dy) = (MARGIN - b.x, MARGIN - b.y);
    for r in out.nodes.iter_mut().chain(out.labels.iter_mut()) {
        r.x += dx;
        r.y += dy;
    }
    for p in out.routes.iter_mut().flatten() {
        p.x += dx;
        p.y += dy;
    }
    out.width = b.w + 2.0 * MARGIN;
    out.height = b.h + 2.0 * MARGIN;
    out
}

/// The box holding every node, label and route point (and the arrowheads: [`ARROW`] around
/// each route's end).
pub fn bounds(l: &Layout) -> Rect {
    let mut xs: Vec<f64> = Vec::new();
    let mut ys: Vec<f64> = Vec::new();
    for r in l.nodes.iter().chain(&l.labels) {
        if r.w > 0.0 || r.h > 0.0 {
            xs.extend([r.x, r.x + r.w]);
            ys.extend([r.y, r.y + r.h]);
        }
    }
    for p in l.routes.iter().flatten() {
        xs.push(p.x);
        ys.push(p.y);
    }
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if xs.is_empty() {
        return Rect::default();
    }
    let (x0, x1, y0, y1) = (min(&xs), max(&xs), min(&ys), max(&ys));
    Rect {
        x: x0,
        y: y0,
        w: x1 - x0,
        h: y1 - y0,
    }
}

/// The arrowhead's length; it lies on the route's last segment, inside the bounds.
pub const ARROW: f64 = 8.0;

/// Every pair (edge, box) where a segment of the edge's route crosses a node or a label box.
/// Empty for every layout this module makes; the tests say so.
pub fn crossings(l: &Layout) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let boxes: Vec<(String, Rect)> = l
        .nodes
        .iter()
        .enumerate()
        .map(|(i, r)| (format!("node {i}"), *r))
        .chain(
            l.labels
                .iter()
                .enumerate()
                .map(|(i, r)| (format!("label {i}"), *r)),
        )
        .collect();
    for (e, route) in l.routes.iter().enumerate() {
        let mut hit = BTreeSet::new();
        for w in route.windows(2) {
            for (name, r) in &boxes {
                if r.crossed_by(w[0], w[1]) {
                    hit.insert(name.clone());
                }
            }
        }
        out.extend(hit.into_iter().map(|h| (e, h)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_adjacent_violators_keeps_order_and_spacing() {
        assert_eq!(place(&[0.0, 0.0, 0.0], &[10.0, 10.0]), [-10.0, 0.0, 10.0]);
        assert_eq!(place(&[0.0, 50.0], &[10.0]), [0.0, 50.0]);
    }

    #[test]
    fn a_segment_through_a_box_is_seen_and_one_along_its_border_is_not() {
        let r = Rect {
            x: 0.0,
            y: 0.0,
            w: 10.0,
            h: 10.0,
        };
        let p = |x, y| Point { x, y };
        assert!(r.crossed_by(p(-5.0, 5.0), p(15.0, 5.0)));
        assert!(r.crossed_by(p(-5.0, -5.0), p(15.0, 15.0)));
        assert!(!r.crossed_by(p(-5.0, 0.0), p(15.0, 0.0)));
        assert!(!r.crossed_by(p(10.0, 5.0), p(20.0, 5.0)));
        assert!(!r.crossed_by(p(-5.0, 20.0), p(15.0, 12.0)));
    }
}
