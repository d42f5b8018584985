//! `kubectl lien`'s pure layers on a fixed fixture (no cluster): golden files for `why`, DOT and
//! Mermaid, the SVG parsed as XML, JSON, plans and cycles; and property tests of the plan.
//!
//! Golden files live in `tests/golden/`; `LIEN_UPDATE_GOLDEN=1` rewrites them (review the diff).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kube::api::DynamicObject;
use lien::plugin::graph::{self, Selection};
use lien::plugin::{self, Graph, KindObjects, Snapshot, derive};
use lien_controller::cache::GroupKind;
use lien_controller::resolve::UsageView;
use lien_controller::rules::RuleView;
use lien_core::{ObjectKey, Relation, RelationIndex, Source};
use proptest::prelude::*;
use serde_json::{Value, json};

const TTL: Duration = Duration::from_secs(24 * 3600);

fn object(v: Value) -> DynamicObject {
    serde_json::from_value(v).expect("fixture object")
}

fn meta(ns: Option<&str>, name: &str, uid: &str) -> Value {
    match ns {
        Some(ns) => json!({"name": name, "namespace": ns, "uid": uid}),
        None => json!({"name": name, "uid": uid}),
    }
}

fn kind(gk: GroupKind, api_version: &str, plural: &str, objects: Vec<Value>) -> KindObjects {
    KindObjects {
        gk: gk.clone(),
        namespaced: true,
        api_version: api_version.into(),
        plural: plural.into(),
        objects: objects
            .into_iter()
            .map(|o| {
                if o.get("metadata").is_some() {
                    object(o)
                } else {
                    object(json!({"apiVersion": api_version, "kind": gk.kind, "metadata": o}))
                }
            })
            .collect(),
    }
}

fn usage(v: Value) -> UsageView {
    let u: lien_api::Usage = serde_json::from_value(v).expect("fixture usage");
    UsageView::from_usage(&u).expect("named")
}

fn cluster_usage(v: Value) -> UsageView {
    let u: lien_api::ClusterUsage = serde_json::from_value(v).expect("fixture cluster usage");
    UsageView::from_cluster_usage(&u).expect("named")
}

/// A shop: a web Deployment and a worker use a ConfigMap and a Secret through Usages (one by
/// name, one by selector), a ClusterUsage protects the ConfigMap, a DependencyRule derives
/// "a Report uses the ConfigMap its spec names". The ConfigMap carries a refused DELETE
/// recorded for replay; the worker is being deleted. The web's Usage carries Lien's finalizer
/// after another one (so `why` must name its position, not assume it is first).
fn fixture() -> Snapshot {
    let attempt = json!({
        "uid": "u-settings", "propagationPolicy": "Background", "user": "alice",
        "time": "2026-11-23T10:00:00Z", "replay": true, "source": "refusal",
        "signature": "c2lnbmVk"
    })
    .to_string();
    let mut settings = meta(Some("shop"), "settings", "u-settings");
    settings["annotations"] = json!({"lien.dev/deletion-attempt": attempt});
    let mut worker = meta(Some("shop"), "worker", "u-worker");
    worker["labels"] = json!({"tier": "backend"});
    worker["deletionTimestamp"] = json!("2026-11-23T11:00:00Z");
    worker["finalizers"] = json!(["example.org/drain"]);
    let mut web = meta(Some("shop"), "web", "u-web");
    web["labels"] = json!({"tier": "frontend"});
    Snapshot {
        usages: vec![
            usage(json!({
                "apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
                "metadata": {"name": "web-uses-settings", "namespace": "shop", "uid": "u1",
                             "finalizers": ["example.org/audit", "lien.dev/usage"]},
                "spec": {
                    "of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "settings"}},
                    "by": {"apiVersion": "apps/v1", "kind": "Deployment", "resourceRef": {"name": "web"}},
                    "reason": "web reads its settings at start",
                    "replayDeletion": true
                }
            })),
            usage(json!({
                "apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
                "metadata": {"name": "backends-use-db-password", "namespace": "shop", "uid": "u2"},
                "spec": {
                    "of": {"apiVersion": "v1", "kind": "Secret", "resourceRef": {"name": "db-password"}},
                    "by": {"apiVersion": "apps/v1", "kind": "Deployment",
                           "resourceSelector": {"matchLabels": {"tier": "backend"}}}
                }
            })),
            cluster_usage(json!({
                "apiVersion": "lien.dev/v1alpha1", "kind": "ClusterUsage",
                "metadata": {"name": "audit-hold", "uid": "u3"},
                "spec": {
                    "of": {"apiVersion": "v1", "kind": "ConfigMap",
                           "resourceRef": {"name": "settings", "namespace": "shop"}},
                    "reason": "kept for the audit until 2027"
                }
            })),
        ],
        rules: vec![{
            let r: lien_api::DependencyRule = serde_json::from_value(json!({
                "apiVersion": "lien.dev/v1alpha1", "kind": "DependencyRule",
                "metadata": {"name": "reports-read-configmaps", "uid": "r1"},
                "spec": {
                    "of": {"apiVersion": "v1", "kind": "ConfigMap"},
                    "by": {"apiVersion": "example.org/v1", "kind": "Report"},
                    "scope": "SameNamespace",
                    "keys": {"of": "[self.metadata.name]", "by": "[self.spec.settings]"},
                    "reason": "the report reads this ConfigMap"
                }
            }))
            .expect("fixture rule");
            RuleView::from_rule(&r).expect("named")
        }],
        kinds: vec![
            kind(
                GroupKind::new("", "ConfigMap"),
                "v1",
                "configmaps",
                vec![settings, meta(Some("shop"), "unused", "u-unused")],
            ),
            kind(
                GroupKind::new("", "Secret"),
                "v1",
                "secrets",
                vec![meta(Some("shop"), "db-password", "u-db-password")],
            ),
            kind(
                GroupKind::new("apps", "Deployment"),
                "apps/v1",
                "deployments",
                vec![web, worker],
            ),
            kind(
                GroupKind::new("example.org", "Report"),
                "example.org/v1",
                "reports",
                vec![json!({
                    "apiVersion": "example.org/v1", "kind": "Report",
                    "metadata": meta(Some("shop"), "weekly", "u-weekly"),
                    "spec": {"settings": "settings"}
                })],
            ),
        ],
        unknown: vec![],
    }
}

fn golden(name: &str, actual: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("LIEN_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
        std::fs::write(&path, actual).expect("write golden");
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (LIEN_UPDATE_GOLDEN=1 writes it)", path.display()));
    assert_eq!(actual, expected, "{name} differs from its golden file");
}

fn key(group: &str, kind: &str, ns: Option<&str>, name: &str) -> ObjectKey {
    ObjectKey::new(group, kind, ns, name)
}

fn settings() -> ObjectKey {
    key("", "ConfigMap", Some("shop"), "settings")
}

#[test]
fn relations_are_derived_as_the_controller_derives_them() {
    let g = derive(&fixture()).expect("derives");
    let mut held: Vec<(Option<String>, String)> = g
        .index
        .blockers(&settings())
        .map(|r| (r.by().map(|b| b.to_string()), r.source().to_string()))
        .collect();
    held.sort();
    assert_eq!(
        held,
        vec![
            (None, "ClusterUsage audit-hold".to_owned()),
            (
                Some("apps/Deployment shop/web".to_owned()),
                "Usage shop/web-uses-settings".to_owned()
            ),
            (
                Some("example.org/Report shop/weekly".to_owned()),
                "DependencyRule reports-read-configmaps".to_owned()
            ),
        ]
    );
    // The selector matches the backend only (labels), and a user being deleted still holds.
    let secret = key("", "Secret", Some("shop"), "db-password");
    let users: Vec<String> = g
        .index
        .blockers(&secret)
        .filter_map(|r| r.by().map(|b| b.to_string()))
        .collect();
    assert_eq!(users, vec!["apps/Deployment shop/worker".to_owned()]);
    assert!(
        !g.index
            .is_in_use(&key("", "ConfigMap", Some("shop"), "unused"))
    );
    assert!(g.problems.is_empty(), "{:?}", g.problems);
}

#[test]
fn why_text_matches_golden() {
    let g = derive(&fixture()).expect("derives");
    golden("why-settings.txt", &plugin::why(&g, &settings(), TTL));
    golden(
        "why-unused.txt",
        &plugin::why(&g, &key("", "ConfigMap", Some("shop"), "unused"), TTL),
    );
}

/// `why -o json|yaml` is the very report the text is written from: the same relations in
/// the same order, every command of the text in `toDo`, the recorded refusal, the same data in
/// YAML.
#[test]
fn why_json_and_yaml_carry_everything_the_text_says() {
    let g = derive(&fixture()).expect("derives");
    let report = plugin::why::why_report(&g, &settings(), TTL);
    let text = plugin::why::why_text(&report);
    assert_eq!(text, plugin::why(&g, &settings(), TTL));
    let json: Value = serde_json::from_str(&plugin::why::why_json(&report)).expect("JSON");
    let yaml: Value = serde_yaml_ng::from_str(&plugin::why::why_yaml(&report)).expect("YAML");
    assert_eq!(json, yaml);
    assert_eq!(json["object"]["kind"], "ConfigMap");
    assert_eq!(json["object"]["name"], "settings");
    let relations = json["relations"].as_array().expect("relations");
    assert_eq!(relations.len(), 3, "{json:#}");
    assert!(relations[0]["user"].is_null());
    assert_eq!(relations[0]["source"]["kind"], "ClusterUsage");
    assert_eq!(relations[1]["user"]["name"], "web");
    assert_eq!(relations[1]["source"]["kind"], "Usage");
    assert_eq!(relations[1]["replay"], true);
    assert_eq!(relations[2]["source"]["kind"], "DependencyRule");
    // Every command the text prints is in the data, and nothing else is.
    let mut in_json: Vec<String> = relations
        .iter()
        .flat_map(|r| r["toDo"].as_array().expect("toDo").clone())
        .flat_map(|s| s["commands"].as_array().expect("commands").clone())
        .map(|c| c.as_str().expect("a command").to_owned())
        .collect();
    in_json.push(json["breakGlass"].as_str().expect("breakGlass").to_owned());
    let in_text: Vec<&str> = text
        .lines()
        .filter_map(|l| l.find("kubectl ").map(|i| &l[i..]))
        .map(|c| c.trim_end_matches(", then delete it."))
        .collect();
    assert_eq!(in_json, in_text);
    assert_eq!(json["refusedDelete"]["user"], "alice");
    assert_eq!(json["refusedDelete"]["replayUntil"], "2026-11-24T10:00:00Z");
    let unused = plugin::why::why_report(&g, &key("", "ConfigMap", Some("shop"), "unused"), TTL);
    let json: Value = serde_json::from_str(&plugin::why::why_json(&unused)).expect("JSON");
    assert_eq!(json["relations"], json!([]));
    assert!(json.get("breakGlass").is_none());
}

#[test]
fn tree_text_matches_golden() {
    let g = derive(&fixture()).expect("derives");
    golden("tree-settings.txt", &plugin::tree::tree(&g, &settings()));
    golden(
        "tree-unused.txt",
        &plugin::tree::tree(&g, &key("", "ConfigMap", Some("shop"), "unused")),
    );
    // The other way: what the Deployment uses.
    golden(
        "tree-web.txt",
        &plugin::tree::tree(&g, &key("apps", "Deployment", Some("shop"), "web")),
    );
}

#[test]
fn dot_and_mermaid_match_golden() {
    let g = derive(&fixture()).expect("derives");
    let view = graph::select(&g, &Selection::default());
    golden("graph.dot", &graph::to_dot(&view));
    golden("graph.mmd", &graph::to_mermaid(&view));
    golden("graph.json", &graph::to_json(&view));
}

#[test]
fn svg_matches_golden() {
    // The layout is deterministic (no hash-order iteration): a change of the picture shows
    // as a diff of these files.
    let g = derive(&fixture()).expect("derives");
    let view = graph::select(&g, &Selection::default());
    golden("graph.svg", &graph::to_svg(&view).expect("draws"));
    golden(
        "graph-tb.svg",
        &graph::to_svg_with(&view, graph::Direction::TopBottom),
    );
}

#[test]
fn selecting_objects_follows_relations_both_ways() {
    let g = derive(&fixture()).expect("derives");
    let view = graph::select(
        &g,
        &Selection {
            namespace: None,
            objects: vec![key("", "Secret", Some("shop"), "db-password")],
        },
    );
    let names: Vec<String> = view.nodes.keys().map(ToString::to_string).collect();
    assert_eq!(
        names,
        vec!["Secret shop/db-password", "apps/Deployment shop/worker"]
    );
    let other = graph::select(
        &g,
        &Selection {
            namespace: Some("elsewhere".into()),
            objects: vec![],
        },
    );
    assert!(other.nodes.is_empty() && other.edges.is_empty());
}

/// Every `<text>` of the SVG, its `<tspan>` lines joined by newlines.
fn svg_texts(svg: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).expect("the SVG is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|t| {
            t.descendants()
                .filter(|n| n.is_text())
                .filter_map(|n| n.text())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

#[test]
fn svg_parses_as_xml_and_names_every_node() {
    let g = derive(&fixture()).expect("derives");
    let view = graph::select(&g, &Selection::default());
    let svg = graph::to_svg(&view).expect("draws");
    let texts = svg_texts(&svg);
    for k in view.nodes.keys() {
        let (kind, name) = (graph::kind_label(k), graph::name_label(k));
        assert!(
            texts.iter().any(|t| t.contains(&kind) && t.contains(&name)),
            "{k} is not named in the SVG"
        );
    }
}

/// A graph holding `relations`, each applied as its source's only relation.
fn graph_with(relations: impl IntoIterator<Item = Relation>) -> Graph {
    let mut index = RelationIndex::new();
    for r in relations {
        index.apply(&r.source.clone(), [r]).expect("applies");
    }
    Graph {
        index,
        ..Graph::default()
    }
}

#[test]
fn svg_of_fifty_nodes_names_every_node() {
    // A chain of 25 pairs fanning into shared ConfigMaps: 50 nodes.
    let g = graph_with((0..25).map(|i| {
        let by = key("apps", "Deployment", Some("big"), &format!("app-{i}"));
        let of = key("", "ConfigMap", Some("big"), &format!("cfg-{}", i % 25));
        Relation::uses(Source::usage("big", format!("u-{i}")), of, by).with_reason("reads it")
    }));
    let view = graph::select(&g, &Selection::default());
    assert_eq!(view.nodes.len(), 50);
    let svg = graph::to_svg(&view).expect("draws");
    let texts = svg_texts(&svg);
    for k in view.nodes.keys() {
        assert!(
            texts.iter().any(|t| t.contains(&graph::name_label(k))),
            "{k} is not named"
        );
    }
}

#[test]
fn plan_orders_users_first_and_warns_about_protections() {
    let g = derive(&fixture()).expect("derives");
    let p = plugin::plan(&g, &[settings()]).expect("no cycle");
    golden("plan-settings.txt", &plugin::plan::to_text(&p));
    golden("plan-settings.json", &plugin::plan::to_json(&p));
    assert_eq!(p.steps.len(), 2);
    assert_eq!(p.steps[1], vec![settings()]);
    assert_eq!(p.protected.len(), 1);
}

#[test]
fn a_cycle_is_refused_naming_objects_and_usages() {
    let a = key("", "ConfigMap", Some("c"), "a");
    let b = key("", "ConfigMap", Some("c"), "b");
    let g = graph_with(
        [("a-uses-b", &b, &a), ("b-uses-a", &a, &b)]
            .map(|(name, of, by)| Relation::uses(Source::usage("c", name), of.clone(), by.clone())),
    );
    let err = plugin::plan(&g, std::slice::from_ref(&a)).expect_err("a cycle");
    let text = err.to_string();
    for needle in [
        "ConfigMap c/a",
        "ConfigMap c/b",
        "Usage c/a-uses-b",
        "Usage c/b-uses-a",
    ] {
        assert!(text.contains(needle), "{needle} missing from: {text}");
    }
}

#[test]
fn a_cycle_names_how_to_break_it() {
    let a = key("", "ConfigMap", Some("c"), "a");
    let b = key("", "ConfigMap", Some("c"), "b");
    let g = graph_with(
        [("a-uses-b", &b, &a), ("b-uses-a", &a, &b)]
            .map(|(name, of, by)| Relation::uses(Source::usage("c", name), of.clone(), by.clone())),
    );
    let text = plugin::plan(&g, std::slice::from_ref(&a))
        .expect_err("a cycle")
        .to_string();
    // One way per source, as `why` says it (the advice itself is why.rs's).
    assert!(text.contains("to break it, one of:"), "{text}");
    for name in ["a-uses-b", "b-uses-a"] {
        assert!(
            text.contains(&format!("usage.lien.dev/{name} -n c")),
            "no way out through {name}: {text}"
        );
    }
}

/// A namespace `p`: Deployment `w` uses Deployment `d`, which uses the PVC `data`, which a
/// Usage without `by` protects; `data` uses the ConfigMap `x`; the plan takes them all and the
/// Namespace.
fn held_fixture() -> (Graph, Vec<ObjectKey>) {
    let w = key("apps", "Deployment", Some("p"), "w");
    let d = key("apps", "Deployment", Some("p"), "d");
    let data = key("", "PersistentVolumeClaim", Some("p"), "data");
    let x = key("", "ConfigMap", Some("p"), "x");
    let ns = key("", "Namespace", None, "p");
    let g = graph_with([
        Relation::uses(Source::usage("p", "w-calls-d"), d.clone(), w.clone()),
        Relation::uses(Source::usage("p", "d-mounts-data"), data.clone(), d.clone()),
        Relation::uses(Source::usage("p", "data-reads-x"), x.clone(), data.clone()),
        Relation::protects(
            Source::usage("p", "keep"),
            data.clone(),
            "kept for the audit",
        ),
    ]);
    (g, vec![ns, w, d, data, x])
}

#[test]
fn a_namespace_is_planned_after_its_contents() {
    let (g, objects) = held_fixture();
    let p = plugin::plan(&g, &objects).expect("no cycle");
    let names: Vec<Vec<&str>> = p
        .steps
        .iter()
        .map(|s| s.iter().map(|k| k.name.as_str()).collect())
        .collect();
    assert_eq!(
        names,
        [vec!["w"], vec!["d"], vec!["data"], vec!["x"], vec!["p"]]
    );
}

#[test]
fn skip_held_leaves_the_held_object_what_it_uses_and_its_namespace() {
    let (g, objects) = held_fixture();
    let p = plugin::plan(&g, &objects).expect("no cycle");
    assert_eq!(p.held().len(), 1);
    let refusal = plugin::plan::held_refusal(&g, &p).expect("refused");
    for needle in [
        "1 object of this plan is protected",
        "PersistentVolumeClaim p/data: Usage p/keep (kept for the audit)",
        "Nothing was deleted.",
        "add --skip-held",
        "kubectl lien plan --apply -n p deployment.apps/w deployment.apps/d",
        "usage.lien.dev/keep -n p",
    ] {
        assert!(refusal.contains(needle), "{needle} missing from: {refusal}");
    }
    let rest = plugin::plan::skip_held(&g, p);
    let names: Vec<Vec<&str>> = rest
        .steps
        .iter()
        .map(|s| s.iter().map(|k| k.name.as_str()).collect())
        .collect();
    assert_eq!(names, [vec!["w"], vec!["d"]]);
    assert!(rest.held().is_empty());
    assert!(plugin::plan::held_refusal(&g, &rest).is_none());
    let text = plugin::plan::to_text(&rest);
    for needle in [
        "left in place (3 objects):",
        "ConfigMap p/x: used by PersistentVolumeClaim p/data, which stays",
        "Namespace p: holds ",
        "PersistentVolumeClaim p/data: protected by Usage p/keep (kept for the audit)",
    ] {
        assert!(text.contains(needle), "{needle} missing from: {text}");
    }
    let dry = plugin::plan::dry_run_text(&rest);
    assert!(
        dry.contains("step 1/2: delete Deployment.apps p/w"),
        "{dry}"
    );
    assert!(dry.contains("leave PersistentVolumeClaim p/data"), "{dry}");
}

/// A graph of `n` objects and edges `(by, of)` given as indexes.
fn graph_of(n: usize, edges: &[(usize, usize)]) -> (Graph, Vec<ObjectKey>) {
    let keys: Vec<ObjectKey> = (0..n)
        .map(|i| key("", "ConfigMap", Some("p"), &format!("o{i}")))
        .collect();
    let g = graph_with(edges.iter().enumerate().map(|(i, &(by, of))| {
        Relation::uses(
            Source::usage("p", format!("u{i}")),
            keys[of].clone(),
            keys[by].clone(),
        )
    }));
    (g, keys)
}

proptest! {
    /// Random DAGs (edges only from a lower to a higher index, then relabelled at random):
    /// every plan of any subset respects every relation — a user is deleted in an earlier step
    /// than what it uses — and includes every user of what it deletes.
    #[test]
    fn every_plan_respects_every_relation(
        n in 1usize..30,
        raw in prop::collection::vec((0usize..30, 0usize..30), 0..80),
        perm_seed in any::<u64>(),
        pick in prop::collection::vec(any::<bool>(), 30),
    ) {
        let mut perm: Vec<usize> = (0..n).collect();
        let mut s = perm_seed;
        for i in (1..n).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            perm.swap(i, (s >> 33) as usize % (i + 1));
        }
        let edges: Vec<(usize, usize)> = raw
            .iter()
            .map(|&(a, b)| (a % n, b % n))
            .filter(|&(a, b)| a < b)
            .map(|(a, b)| (perm[a], perm[b]))
            .collect();
        let (g, keys) = graph_of(n, &edges);
        let asked: Vec<ObjectKey> = keys.iter().zip(&pick).filter(|(_, p)| **p).map(|(k, _)| k.clone()).collect();
        let p = plugin::plan(&g, &asked).expect("a DAG has an order");
        let step: BTreeMap<&ObjectKey, usize> = p.steps.iter().enumerate()
            .flat_map(|(i, s)| s.iter().map(move |k| (k, i))).collect();
        prop_assert_eq!(step.len(), p.steps.iter().map(Vec::len).sum::<usize>(), "an object twice");
        for k in &asked {
            prop_assert!(step.contains_key(k), "{} asked for but not planned", k);
        }
        for &(by, of) in &edges {
            let (by, of) = (&keys[by], &keys[of]);
            if let Some(&s_of) = step.get(of) {
                let s_by = step.get(by);
                prop_assert!(s_by.is_some(), "{} uses planned {} but is not planned", by, of);
                prop_assert!(s_by.copied() < Some(s_of), "{} must go before {}", by, of);
            }
        }
    }

    /// Add one edge closing a path into a cycle: the plan of any member is refused, naming
    /// every object of the cycle and the Usage that closed it.
    #[test]
    fn cycles_are_always_detected(
        len in 1usize..12,
        extra in prop::collection::vec((0usize..12, 0usize..12), 0..20),
        start in 0usize..12,
    ) {
        // A path o0 -> o1 -> ... -> o{len-1} (o_i uses o_{i+1}), closed by o{len-1} -> o0.
        let mut edges: Vec<(usize, usize)> = (0..len.saturating_sub(1)).map(|i| (i, i + 1)).collect();
        edges.extend(extra.iter().map(|&(a, b)| (a % len, b % len)).filter(|&(a, b)| a < b));
        edges.push((len - 1, 0));
        let closing = format!("Usage p/u{}", edges.len() - 1);
        let (g, keys) = graph_of(len, &edges);
        let err = plugin::plan(&g, &[keys[start % len].clone()]).expect_err("a cycle");
        let members: BTreeSet<ObjectKey> = err.groups.iter().flat_map(|g| g.objects.clone()).collect();
        for k in &keys {
            prop_assert!(members.contains(k), "{} missing from the cycle", k);
        }
        prop_assert!(err.to_string().contains(&closing), "{} not named: {}", closing, err);
    }
}
