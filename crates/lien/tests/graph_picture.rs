//! `kubectl lien graph -o svg|png` as a picture for a slide (issue 21, item 4): the layout's
//! promises checked on random graphs (cycles and loops included) — no route through a node or
//! a label, no two boxes overlapping, the canvas equal to the content's bounds plus the
//! margin — and on the SVG as written (its viewBox against every coordinate in it); labels
//! whole (wrapped, never cut); `--direction`; the PNG.
//!
//! The pictures of a 6-node shop, a 50-node chain and a 50-node tree are written to
//! `$CARGO_TARGET_TMPDIR/graph-pictures/` to be looked at.

use lien::plugin::Graph;
use lien::plugin::graph::{self, Direction, Selection, View};
use lien::plugin::layout::{self, Input, MARGIN, Size};
use lien_core::{ObjectKey, Relation, RelationIndex, Source};
use proptest::prelude::*;

fn key(group: &str, kind: &str, ns: &str, name: &str) -> ObjectKey {
    ObjectKey::new(group, kind, Some(ns), name)
}

fn view_of(relations: Vec<Relation>) -> View {
    // Each source's relations applied together (applying a source replaces its relations).
    let mut by_source: std::collections::BTreeMap<Source, Vec<Relation>> = Default::default();
    for r in relations {
        by_source.entry(r.source.clone()).or_default().push(r);
    }
    let mut index = RelationIndex::new();
    for (source, rs) in by_source {
        index.apply(&source, rs).expect("applies");
    }
    let g = Graph {
        index,
        ..Graph::default()
    };
    graph::select(&g, &Selection::default())
}

/// The shop of `examples/plugin-demo.yaml`, as its Usages and rules relate it: 6 objects.
fn shop() -> View {
    let ns = "shop";
    let web = key("apps", "Deployment", ns, "web");
    let db = key("apps", "Deployment", ns, "db");
    let worker = key("batch", "CronJob", ns, "nightly-report");
    let settings = key("", "ConfigMap", ns, "settings");
    let creds = key("", "Secret", ns, "db-credentials");
    let data = key("", "PersistentVolumeClaim", ns, "orders-data");
    view_of(vec![
        Relation::uses(
            Source::rule("core-configmap-refs"),
            settings.clone(),
            web.clone(),
        )
        .with_reason("a container reads it through envFrom (configMapRef)"),
        Relation::uses(Source::rule("core-secret-refs"), creds.clone(), db.clone())
            .with_reason("a container reads it through env (secretKeyRef: password)"),
        Relation::uses(Source::usage(ns, "web-needs-db"), db.clone(), web)
            .with_reason("the storefront stops taking orders without its database"),
        Relation::uses(Source::rule("core-pvc-mounts"), data.clone(), db.clone())
            .with_reason("mounted as a volume"),
        Relation::uses(Source::usage(ns, "report-reads-db"), db, worker.clone())
            .with_reason("reads yesterday's orders every night at 02:00"),
        Relation::uses(Source::rule("core-configmap-refs"), settings, worker)
            .with_reason("a container reads it through envFrom (configMapRef)"),
    ])
}

/// `app-0` uses `app-1` uses … `app-49`.
fn chain(n: usize) -> View {
    view_of(
        (0..n - 1)
            .map(|i| {
                Relation::uses(
                    Source::usage("big", format!("step-{i}")),
                    key("apps", "Deployment", "big", &format!("app-{}", i + 1)),
                    key("apps", "Deployment", "big", &format!("app-{i}")),
                )
                .with_reason("calls it")
            })
            .collect(),
    )
}

/// A binary tree of `n` objects: each `svc-i` uses its two children.
fn tree(n: usize) -> View {
    view_of(
        (1..n)
            .map(|i| {
                Relation::uses(
                    Source::usage("big", format!("edge-{i}")),
                    key("", "Service", "big", &format!("svc-{i}")),
                    key("", "Service", "big", &format!("svc-{}", (i - 1) / 2)),
                )
                .with_reason("routes to it")
            })
            .collect(),
    )
}

fn write_picture(name: &str, view: &View, direction: Direction) -> (f64, f64) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("graph-pictures");
    std::fs::create_dir_all(&dir).expect("dir");
    let svg = graph::to_svg_with(view, direction);
    std::fs::write(dir.join(format!("{name}.svg")), &svg).expect("svg");
    let png = graph::to_png(view, direction).expect("png");
    std::fs::write(dir.join(format!("{name}.png")), &png).expect("png");
    let pic = graph::picture(view, direction);
    (pic.layout.width, pic.layout.height)
}

/// Every coordinate the SVG draws at (rectangles but the background, polylines, polygons,
/// text lines' anchors), parsed back.
fn drawn_extent(svg: &str) -> ((f64, f64), (f64, f64), (f64, f64)) {
    let doc = roxmltree::Document::parse(svg).expect("the SVG is XML");
    let root = doc.root_element();
    let attr =
        |n: roxmltree::Node, a: &str| -> f64 { n.attribute(a).expect(a).parse().expect("number") };
    let (w, h) = (attr(root, "width"), attr(root, "height"));
    assert_eq!(
        root.attribute("viewBox"),
        Some(
            format!(
                "0 0 {} {}",
                root.attribute("width").unwrap_or_default(),
                root.attribute("height").unwrap_or_default()
            )
            .as_str()
        ),
        "the viewBox is the canvas"
    );
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for n in doc.descendants() {
        match n.tag_name().name() {
            "rect" if n.parent() != Some(root) => {
                let (x, y) = (attr(n, "x"), attr(n, "y"));
                xs.extend([x, x + attr(n, "width")]);
                ys.extend([y, y + attr(n, "height")]);
            }
            "polyline" | "polygon" => {
                for p in n.attribute("points").unwrap_or_default().split(' ') {
                    let (x, y) = p.split_once(',').expect("x,y");
                    xs.push(x.parse().expect("x"));
                    ys.push(y.parse().expect("y"));
                }
            }
            _ => {}
        }
    }
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    ((w, h), (min(&xs), max(&xs)), (min(&ys), max(&ys)))
}

fn assert_cropped(name: &str, svg: &str) {
    let ((w, h), (x0, x1), (y0, y1)) = drawn_extent(svg);
    // Two decimals in the SVG, and the label text boxes (not drawn as rectangles) lie inside
    // the bounds too: the drawn extent is within the margin, and touches it.
    let near = |a: f64, b: f64| (a - b).abs() < 0.02;
    assert!(
        x0 >= MARGIN - 0.02 && y0 >= MARGIN - 0.02,
        "{name}: {x0},{y0}"
    );
    assert!(
        x1 <= w - MARGIN + 0.02 && y1 <= h - MARGIN + 0.02,
        "{name}: {x1},{y1} in {w}×{h}"
    );
    assert!(
        near(x0, MARGIN) || near(y0, MARGIN),
        "{name}: blank before the content"
    );
}

#[test]
fn pictures_are_cropped_to_their_content_and_nothing_crosses_a_label() {
    let mut sizes = Vec::new();
    for (name, view) in [
        ("shop", shop()),
        ("chain-50", chain(50)),
        ("tree-50", tree(50)),
    ] {
        for (suffix, direction) in [("lr", Direction::LeftRight), ("tb", Direction::TopBottom)] {
            let svg = graph::to_svg_with(&view, direction);
            assert_cropped(name, &svg);
            let pic = graph::picture(&view, direction);
            let l = &pic.layout;
            let b = layout::bounds(l);
            let near = |a: f64, b: f64| (a - b).abs() < 1e-6;
            assert!(near(b.x, MARGIN) && near(b.y, MARGIN), "{name}: {b:?}");
            assert!(
                near(l.width, b.w + 2.0 * MARGIN),
                "{name}: {} vs {b:?}",
                l.width
            );
            assert!(
                near(l.height, b.h + 2.0 * MARGIN),
                "{name}: {} vs {b:?}",
                l.height
            );
            assert_eq!(layout::crossings(l), [], "{name} {suffix}");
            sizes.push((
                format!("{name}-{suffix}"),
                write_picture(&format!("{name}-{suffix}"), &view, direction),
            ));
        }
    }
    // A 50-node chain fits a slide top to bottom: one column, not 19,579 px of row.
    let size = |n: &str| sizes.iter().find(|(s, _)| s == n).expect(n).1;
    let (w, _) = size("chain-50-tb");
    assert!(w < 400.0, "chain top to bottom is {w} px wide");
    let (_, h) = size("chain-50-lr");
    assert!(h < 200.0, "chain left to right is {h} px high");
    let (w, h) = size("shop-lr");
    assert!(w < 1400.0 && h < 600.0, "shop: {w}×{h}");
    eprintln!("{sizes:?}");
}

#[test]
fn labels_are_wrapped_whole_never_cut() {
    let long = "the storefront cannot take a single order without its database, and the nightly report reads the same tables";
    let view = view_of(vec![
        Relation::uses(
            Source::usage("shop", "a-usage-with-a-rather-long-name-for-a-slide"),
            key("", "ConfigMap", "shop", "settings"),
            key(
                "apps",
                "Deployment",
                "shop",
                "a-deployment-whose-name-is-longer-than-forty-characters",
            ),
        )
        .with_reason(long),
    ]);
    let svg = graph::to_svg(&view).expect("draws");
    let doc = roxmltree::Document::parse(&svg).expect("XML");
    let texts: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|t| {
            t.children()
                .filter(|n| n.has_tag_name("tspan"))
                .map(|s| s.text().unwrap_or_default().to_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let squash = |s: &str| s.replace(' ', "");
    assert!(
        texts.iter().any(|t| squash(t).contains(&squash(long))),
        "the reason whole: {texts:?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| squash(t).contains("a-deployment-whose-name-is-longer-than-forty-characters")),
        "{texts:?}"
    );
    assert!(!svg.contains('…'), "nothing cut");
    for line in &doc
        .descendants()
        .filter(|n| n.has_tag_name("tspan"))
        .map(|n| n.text().unwrap_or_default().chars().count())
        .collect::<Vec<_>>()
    {
        assert!(*line <= 34, "a line of {line} characters");
    }
    assert_eq!(
        layout::crossings(&graph::picture(&view, Direction::LeftRight).layout),
        []
    );
}

#[test]
fn wrapping_keeps_every_character() {
    for (text, width) in [
        ("Usage shop/a-usage-with-a-rather-long-name", 12),
        ("no-break-opportunity-at-all-in-here", 8),
        ("short", 40),
        ("", 10),
        ("a b c d e f g h i j k l m n o p", 5),
        ("ünïcödé/ñames/all-the-way-down", 7),
    ] {
        let pieces = graph::wrap(text, width);
        assert_eq!(pieces.concat(), text, "{text:?} at {width}");
        assert!(
            pieces.iter().all(|p| p.chars().count() <= width),
            "{pieces:?}"
        );
    }
}

#[test]
fn png_is_the_svg_at_twice_its_size() {
    let view = shop();
    let png = graph::to_png(&view, Direction::LeftRight).expect("png");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // IHDR: width and height, big-endian, at bytes 16..24.
    let w = u32::from_be_bytes(png[16..20].try_into().expect("4 bytes"));
    let h = u32::from_be_bytes(png[20..24].try_into().expect("4 bytes"));
    let l = graph::picture(&view, Direction::LeftRight).layout;
    let scale = f64::from(graph::PNG_SCALE);
    assert!((f64::from(w) - l.width * scale).abs() <= 1.0, "width {w}");
    assert!((f64::from(h) - l.height * scale).abs() <= 1.0, "height {h}");
}

fn sizes() -> impl Strategy<Value = Size> {
    (5.0f64..300.0, 5.0f64..120.0).prop_map(|(w, h)| Size { w, h })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    /// Random graphs — cycles, loops, parallel edges and all — in both directions: no route
    /// segment passes through a node or a label, no two boxes overlap, and the canvas is the
    /// content's bounds plus the margin.
    #[test]
    fn no_route_crosses_a_box_and_the_canvas_is_the_content(
        nodes in prop::collection::vec(sizes(), 1..20),
        raw in prop::collection::vec((0usize..20, 0usize..20, sizes()), 0..40),
        top_bottom in any::<bool>(),
    ) {
        let n = nodes.len();
        let edges = raw.into_iter().map(|(a, b, s)| (a % n, b % n, s)).collect();
        let input = Input {
            nodes,
            edges,
            direction: if top_bottom { Direction::TopBottom } else { Direction::LeftRight },
        };
        let l = layout::layout(&input);
        prop_assert_eq!(layout::crossings(&l), Vec::<(usize, String)>::new());
        let boxes: Vec<layout::Rect> = l.nodes.iter().chain(&l.labels).copied().collect();
        for (i, a) in boxes.iter().enumerate() {
            for b in &boxes[i + 1..] {
                let overlap = a.x < b.x + b.w - 1e-6 && b.x < a.x + a.w - 1e-6
                    && a.y < b.y + b.h - 1e-6 && b.y < a.y + a.h - 1e-6;
                prop_assert!(!overlap, "{:?} overlaps {:?}", a, b);
            }
        }
        let b = layout::bounds(&l);
        prop_assert!((b.x - MARGIN).abs() < 1e-6 && (b.y - MARGIN).abs() < 1e-6);
        prop_assert!((l.width - b.w - 2.0 * MARGIN).abs() < 1e-6);
        prop_assert!((l.height - b.h - 2.0 * MARGIN).abs() < 1e-6);
        prop_assert_eq!(l.routes.len(), input.edges.len());
        for route in &l.routes {
            prop_assert!(route.len() >= 2);
        }
    }
}
