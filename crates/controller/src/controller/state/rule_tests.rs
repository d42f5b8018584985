//! DependencyRules driven through the event loop's handling by hand, without a runtime or an
//! API server: rule and object events in (objects reduced by the same `KindReader` the watch
//! task uses), the shared index and the rules' state out.

use std::sync::Arc;

use jiff::Timestamp;
use kube::core::{ApiResource, GroupVersionKind};
use lien_api::{DependencyKeys, DependencyRule, DependencyRuleSpec, KindRef};
use lien_core::{ObjectKey, Relation};
use serde_json::{Value, json};

use super::*;
use crate::rules::rule_status;

fn configmaps() -> GroupKind {
    GroupKind::new("", "ConfigMap")
}

fn webapps() -> GroupKind {
    GroupKind::new("example.org", "WebApp")
}

fn ar(gk: &GroupKind) -> ApiResource {
    let (version, plural) = if gk.group.is_empty() {
        ("v1", "configmaps")
    } else {
        ("v1", "webapps")
    };
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&gk.group, version, &gk.kind), plural)
}

fn cm_key(name: &str) -> ObjectKey {
    configmaps().key(Some("ns"), name)
}

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"namespace": "ns", "name": name, "uid": format!("uid-{name}"), "resourceVersion": "1"}})
}

/// A WebApp reading its settings from ConfigMap `settings` (none: no `spec.settings`).
fn webapp(name: &str, settings: Option<&str>) -> Value {
    let spec = match settings {
        Some(s) => json!({"settings": s}),
        None => json!({}),
    };
    json!({"apiVersion": "example.org/v1", "kind": "WebApp",
        "metadata": {"namespace": "ns", "name": name, "uid": format!("uid-{name}"), "resourceVersion": "1"},
        "spec": spec})
}

fn rule(name: &str, generation: i64, keys_by: &str) -> DependencyRule {
    let mut r = DependencyRule::new(
        name,
        DependencyRuleSpec {
            of: KindRef {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
            },
            by: KindRef {
                api_version: "example.org/v1".into(),
                kind: "WebApp".into(),
            },
            keys: Some(DependencyKeys {
                of: "[self.metadata.name]".into(),
                by: keys_by.into(),
            }),
            reason: "the web app reads its settings from it".into(),
            replay_deletion: true,
            ..Default::default()
        },
    );
    r.metadata.uid = Some(format!("uid-rule-{name}"));
    r.metadata.generation = Some(generation);
    r.metadata.resource_version = Some(generation.to_string());
    r
}

struct Harness {
    st: State,
    index: RwLock<RelationIndex>,
    metrics: Metrics,
}

impl Harness {
    fn new() -> Self {
        Self {
            st: State::default(),
            index: RwLock::new(RelationIndex::new()),
            metrics: Metrics::default(),
        }
    }

    fn send(&mut self, msg: Msg) -> BTreeMap<GroupKind, WantedKind> {
        handle(&mut self.st, &self.index, &self.metrics, msg)
    }

    /// Every source list done (no usages), with `rules`.
    fn list_sources(&mut self, rules: Vec<DependencyRule>) {
        for ev in [watcher::Event::Init, watcher::Event::InitDone] {
            self.send(Msg::Usage(ev));
        }
        for ev in [watcher::Event::Init, watcher::Event::InitDone] {
            self.send(Msg::ClusterUsage(ev));
        }
        self.send(Msg::Rule(watcher::Event::Init));
        for r in rules {
            self.send(Msg::Rule(watcher::Event::InitApply(r)));
        }
        self.send(Msg::Rule(watcher::Event::InitDone));
    }

    /// An event of `gk`'s full-object watch, reduced as the watch task does with the reader
    /// the state gives the kind now.
    fn read(&mut self, gk: &GroupKind, ev: watcher::Event<Value>) {
        let reader = Arc::new(self.st.reader(gk));
        self.read_with(gk, &reader, ev);
    }

    fn read_with(&mut self, gk: &GroupKind, reader: &Arc<KindReader>, ev: watcher::Event<Value>) {
        let reduce = |o: Value| Observed {
            meta: serde_json::from_value(o["metadata"].clone()).expect("metadata"),
            evals: reader.reduce(&o),
        };
        let ev = match ev {
            watcher::Event::Apply(o) => watcher::Event::Apply(reduce(o)),
            watcher::Event::Delete(o) => watcher::Event::Delete(reduce(o)),
            watcher::Event::InitApply(o) => watcher::Event::InitApply(reduce(o)),
            watcher::Event::Init => watcher::Event::Init,
            watcher::Event::InitDone => watcher::Event::InitDone,
        };
        self.send(Msg::Read(gk.clone(), reader.clone(), ev));
    }

    /// Discovery found `gk` and its (full) watch listed `objects`.
    fn list(&mut self, gk: &GroupKind, objects: Vec<Value>) {
        self.send(Msg::KindFound(gk.clone(), ar(gk), true));
        let reader = Arc::new(self.st.reader(gk));
        self.read_with(gk, &reader, watcher::Event::Init);
        for o in objects {
            self.read_with(gk, &reader, watcher::Event::InitApply(o));
        }
        self.read_with(gk, &reader, watcher::Event::InitDone);
    }

    fn in_use(&self, name: &str) -> bool {
        self.index.read().is_in_use(&cm_key(name))
    }

    fn users(&self, name: &str) -> Vec<String> {
        let index = self.index.read();
        let mut v: Vec<String> = index
            .blockers(&cm_key(name))
            .filter_map(|r| r.by().map(|b| b.name.to_owned()))
            .collect();
        v.sort();
        v
    }

    fn rule_len(&self, name: &str) -> usize {
        self.index.read().source_len(&Source::rule(name))
    }

    /// The status rule `name` should have now (no cycle, webhook configured); `None` when it
    /// has it already.
    fn status(&self, name: &str) -> Option<lien_api::DependencyRuleStatus> {
        rule_status(
            &self.st.rules[name],
            &self.index.read(),
            &self.st.caches,
            None,
            None,
            Timestamp::now(),
        )
    }

    /// How many of the objects rule `name`'s join holds failed their last evaluation.
    fn error_count(&self, name: &str) -> usize {
        let index = self.index.read();
        let id = self.st.rules[name].join.expect("the rule has a join");
        index
            .join(id)
            .expect("the join is in the index")
            .error_count()
    }
}

/// Rule `r` (a WebApp uses the ConfigMap its `spec.settings` names), ConfigMaps a and b, and
/// WebApp w1 using a: listed, settled, a held.
fn held() -> Harness {
    let mut h = Harness::new();
    h.list_sources(vec![rule("r", 1, "[self.spec.settings]")]);
    let wanted = h.send(Msg::CrdChanged);
    for gk in [configmaps(), webapps()] {
        assert_eq!(wanted[&gk].programs.len(), 1, "{gk} is read by the rule");
        assert!(!wanted[&gk].labels, "no usage selects {gk}s by label");
    }
    assert!(!h.st.settled(), "the rule's kinds are not listed yet");
    h.list(&configmaps(), vec![cm("a"), cm("b")]);
    assert!(!h.st.settled(), "WebApps are not listed yet");
    assert_eq!(
        h.rule_len("r"),
        0,
        "nothing is applied before both sides are listed"
    );
    h.list(&webapps(), vec![webapp("w1", Some("a"))]);
    assert!(h.st.settled());
    assert_eq!(h.users("a"), vec!["w1"]);
    assert!(!h.in_use("b"));
    h
}

#[test]
fn a_rule_derives_relations_that_follow_updates_and_deletions_of_both_sides() {
    let mut h = held();
    let index = h.index.read();
    let r = index.blockers(&cm_key("a")).next().expect("a is in use");
    assert_eq!(r.source().to_source(), Source::rule("r"));
    assert_eq!(r.reason(), Some("the web app reads its settings from it"));
    assert!(r.replay(), "replayDeletion is carried per relation");
    drop(index);

    // The hold moves with the dependent's keys.
    h.read(&webapps(), watcher::Event::Apply(webapp("w1", Some("b"))));
    assert!(!h.in_use("a"));
    assert_eq!(h.users("b"), vec!["w1"]);

    // A second dependent, then the provider goes and comes back under a new UID.
    h.read(&webapps(), watcher::Event::Apply(webapp("w2", Some("b"))));
    assert_eq!(h.users("b"), vec!["w1", "w2"]);
    h.read(&configmaps(), watcher::Event::Delete(cm("b")));
    assert!(!h.in_use("b"));
    let mut b = cm("b");
    b["metadata"]["uid"] = json!("uid-b-2");
    h.read(&configmaps(), watcher::Event::Apply(b));
    assert_eq!(h.users("b"), vec!["w1", "w2"]);
    let index = h.index.read();
    assert!(
        index
            .blockers(&cm_key("b"))
            .all(|r| r.of_uid().as_deref() == Some("uid-b-2")),
        "relations carry the new incarnation's UID"
    );
    drop(index);

    // Dependents count until they are gone, not while merely deleting.
    let mut w1 = webapp("w1", Some("b"));
    w1["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    h.read(&webapps(), watcher::Event::Apply(w1.clone()));
    assert_eq!(h.users("b"), vec!["w1", "w2"]);
    h.read(&webapps(), watcher::Event::Delete(w1));
    h.read(&webapps(), watcher::Event::Delete(webapp("w2", Some("b"))));
    assert!(!h.in_use("b"));
    assert_eq!(h.rule_len("r"), 0);
}

#[test]
fn deleting_a_rule_releases_everything_it_held() {
    let mut h = held();
    h.send(Msg::Rule(watcher::Event::Delete(rule(
        "r",
        1,
        "[self.spec.settings]",
    ))));
    assert!(!h.in_use("a"));
    assert!(h.st.rules.is_empty());
    let wanted = h.st.wanted_kinds();
    assert!(
        !wanted.contains_key(&webapps()),
        "no source reads WebApps any more"
    );
}

/// A rule's join lives in the shared index and pins its objects' keys and strings there: a
/// replaced generation's join, a deleted rule's and a rule gone from a relist must not leak.
#[test]
fn a_replaced_deleted_or_unlisted_rule_leaves_nothing_pinned_in_the_index() {
    let pinned = |h: &Harness| {
        let index = h.index.read();
        (index.len(), index.key_count(), index.string_count())
    };
    let mut h = held();
    assert_ne!(pinned(&h), (0, 0, 0));
    // A new generation: the old join goes at once (its relations stay until the new one is
    // attached), then the rule is deleted.
    h.send(Msg::Rule(watcher::Event::Apply(rule(
        "r",
        2,
        "[self.spec.other]",
    ))));
    assert_eq!(h.users("a"), vec!["w1"], "held meanwhile");
    h.send(Msg::Rule(watcher::Event::Delete(rule(
        "r",
        2,
        "[self.spec.other]",
    ))));
    assert_eq!(pinned(&h), (0, 0, 0));

    // A relist of the rules without `r`.
    let mut h = held();
    h.list_sources(vec![]);
    assert!(h.st.rules.is_empty());
    assert_eq!(pinned(&h), (0, 0, 0));
}

#[test]
fn relists_of_usages_kinds_or_rules_keep_what_they_do_not_replace() {
    let mut h = held();
    // The usage watches restart with empty lists: the rule's relations are not theirs.
    h.send(Msg::Usage(watcher::Event::Init));
    h.send(Msg::Usage(watcher::Event::InitDone));
    h.send(Msg::ClusterUsage(watcher::Event::Init));
    h.send(Msg::ClusterUsage(watcher::Event::InitDone));
    assert_eq!(h.users("a"), vec!["w1"]);
    // A usage's relation survives a relist of the rules.
    h.index
        .write()
        .apply(
            &Source::usage("ns", "u"),
            [Relation::protects(
                Source::usage("ns", "u"),
                cm_key("b"),
                "kept",
            )],
        )
        .expect("valid");
    h.send(Msg::Rule(watcher::Event::Init));
    h.send(Msg::Rule(watcher::Event::InitApply(rule(
        "r",
        1,
        "[self.spec.settings]",
    ))));
    h.send(Msg::Rule(watcher::Event::InitDone));
    assert!(h.in_use("b"));
    assert_eq!(h.users("a"), vec!["w1"]);
    // A relist of WebApps without w1 (deleted while the watch was down) releases a.
    h.list(&webapps(), vec![webapp("w3", Some("b"))]);
    assert!(!h.in_use("a"));
    assert_eq!(h.users("b"), vec!["w3"]);
}

#[test]
fn an_evaluation_error_keeps_the_relations_and_is_counted() {
    let mut h = held();
    // w1 loses `spec.settings`: its keys cannot be evaluated; it keeps holding a.
    h.read(&webapps(), watcher::Event::Apply(webapp("w1", None)));
    assert_eq!(h.users("a"), vec!["w1"], "an error never lifts protection");
    // A new dependent that fails from the start joins nothing; a valid one is unaffected.
    h.read(&webapps(), watcher::Event::Apply(webapp("w2", None)));
    h.read(&webapps(), watcher::Event::Apply(webapp("w3", Some("b"))));
    assert_eq!(h.users("b"), vec!["w3"]);
    assert_eq!(h.error_count("r"), 2);
    let status = h.status("r").expect("changed");
    assert_eq!(status.evaluation_errors, 2);
    assert_eq!(status.errors.len(), 2);
    // READY in `kubectl get dependencyrules` says so.
    let ready = &status.conditions[0];
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "EvaluationErrors")
    );
    assert!(
        ready.message.contains("fails on 2 objects"),
        "{}",
        ready.message
    );
    assert_eq!(status.errors[0].field, "spec.keys.by");
    assert!(
        status.errors[0].object.contains("w1"),
        "{:?}",
        status.errors
    );
    assert!(
        status.errors[0].message.contains("settings"),
        "{:?}",
        status.errors
    );
    assert_eq!(status.relations, 2);
    assert_eq!((status.of_objects, status.by_objects), (2, 3));
    // Fixed: the error goes, the hold follows the new keys.
    h.read(&webapps(), watcher::Event::Apply(webapp("w1", Some("b"))));
    assert!(!h.in_use("a"));
    assert_eq!(h.error_count("r"), 1);
    assert_eq!(h.st.rules["r"].errors.len(), 1);
}

/// One rule failing on every object it reads stops neither the objects nor the other rules
/// over the same kinds: each rule's errors are its own.
#[test]
fn a_rule_failing_on_every_object_does_not_stop_another_rule_over_the_same_kinds() {
    let mut h = Harness::new();
    h.list_sources(vec![
        rule("good", 1, "[self.spec.settings]"),
        rule("broken", 1, "[self.spec.missing]"),
    ]);
    h.send(Msg::CrdChanged);
    h.list(&configmaps(), vec![cm("a"), cm("b")]);
    h.list(
        &webapps(),
        vec![webapp("w1", Some("a")), webapp("w2", Some("b"))],
    );
    assert!(h.st.settled());
    assert_eq!(h.users("a"), vec!["w1"]);
    assert_eq!(h.users("b"), vec!["w2"]);
    assert_eq!((h.rule_len("good"), h.rule_len("broken")), (2, 0));
    assert_eq!((h.error_count("good"), h.error_count("broken")), (0, 2));
    let broken = h.status("broken").expect("a status");
    assert_eq!((broken.evaluation_errors, broken.relations), (2, 0));
    assert!(
        broken.errors.iter().all(|e| e.field == "spec.keys.by"),
        "{:?}",
        broken.errors
    );
    let good = h.status("good").expect("a status");
    assert_eq!((good.evaluation_errors, good.relations), (0, 2));
    assert_eq!(good.conditions[0].status, "True");
    // Updates keep flowing to the good rule while the broken one keeps failing.
    h.read(&webapps(), watcher::Event::Apply(webapp("w1", Some("b"))));
    assert!(!h.in_use("a"));
    assert_eq!(h.users("b"), vec!["w1", "w2"]);
    assert_eq!((h.error_count("good"), h.error_count("broken")), (0, 2));
}

#[test]
fn a_changed_rule_keeps_its_previous_relations_until_its_kinds_are_relisted() {
    let mut h = held();
    let old_reader = Arc::new(h.st.reader(&webapps()));
    // The rule now reads `spec.other`; its kinds' watches restart with the new program.
    let wanted = h.send(Msg::Rule(watcher::Event::Apply(rule(
        "r",
        2,
        "[self.spec.other]",
    ))));
    assert_ne!(
        wanted[&webapps()].programs,
        old_reader.signature(),
        "the watch restarts"
    );
    assert!(!h.st.settled());
    assert_eq!(h.users("a"), vec!["w1"], "held meanwhile");
    // An event of the old watch, reduced by the old program, is ignored.
    h.read_with(
        &webapps(),
        &old_reader,
        watcher::Event::Apply(webapp("w1", Some("b"))),
    );
    assert_eq!(h.users("a"), vec!["w1"]);
    let mut w1 = webapp("w1", Some("a"));
    w1["spec"]["other"] = json!("b");
    h.list(&configmaps(), vec![cm("a"), cm("b")]);
    assert_eq!(
        h.users("a"),
        vec!["w1"],
        "one side listed: still the old relations"
    );
    h.list(&webapps(), vec![w1]);
    assert!(h.st.settled());
    assert!(!h.in_use("a"));
    assert_eq!(h.users("b"), vec!["w1"]);
}

/// A changed rule's next generation is fed each listed object as it comes (one write-lock hold
/// per object: docs/benchmarks.md, "Issue 20, continued", on why not batches), the previous
/// generation holding meanwhile, and attaches with every listed object; the replaced join is
/// released in steps and nothing of it is left.
#[test]
fn a_listed_generation_is_fed_as_it_comes_and_attached_whole() {
    let mut h = held();
    let keys_before = h.index.read().key_count();
    h.send(Msg::Rule(watcher::Event::Apply(rule(
        "r",
        2,
        "[self.spec.other]",
    ))));
    assert!(
        !h.index.read().has_pending_release(),
        "the old join is released"
    );
    let join = h.st.rules["r"].join.expect("a join");
    let fed = |h: &Harness| h.index.read().join(join).expect("join").object_counts();
    let n = 519;
    let reader = Arc::new(h.st.reader(&configmaps()));
    h.read_with(&configmaps(), &reader, watcher::Event::Init);
    for i in 0..n {
        h.read_with(
            &configmaps(),
            &reader,
            watcher::Event::InitApply(cm(&format!("c{i}"))),
        );
        assert_eq!(fed(&h), (i + 1, 0), "fed as it comes");
        assert_eq!(h.users("a"), vec!["w1"], "the previous generation holds");
    }
    h.read_with(&configmaps(), &reader, watcher::Event::InitDone);
    let webapps_listed: Vec<Value> = (0..1025)
        .map(|i| {
            let mut w = webapp(&format!("w{i}"), None);
            w["spec"]["other"] = json!(format!("c{}", i % n));
            w
        })
        .collect();
    h.list(&webapps(), webapps_listed);
    assert!(h.st.settled());
    assert_eq!(h.rule_len("r"), 1025);
    assert_eq!(fed(&h), (n, 1025));
    assert_eq!(h.users("c0"), vec!["w0", &format!("w{n}")]);
    assert!(!h.in_use("a"));
    assert_eq!(h.error_count("r"), 0);
    assert!(h.index.read().key_count() > keys_before);
    // The rule deleted: nothing of it is left once its release has run.
    h.send(Msg::Rule(watcher::Event::Delete(rule(
        "r",
        2,
        "[self.spec.other]",
    ))));
    let index = h.index.read();
    assert!(!index.has_pending_release());
    assert_eq!((index.len(), index.key_count()), (0, 0));
}

#[test]
fn a_rule_over_a_kind_not_served_is_not_ready_until_it_is() {
    let mut h = Harness::new();
    h.list_sources(vec![rule("r", 1, "[self.spec.settings]")]);
    h.list(&configmaps(), vec![cm("a")]);
    h.send(Msg::KindUnknown(webapps()));
    assert!(
        h.st.settled(),
        "a kind not served is settled: it has no objects"
    );
    let status = h.status("r").expect("changed");
    let ready = &status.conditions[0];
    assert_eq!(
        (ready.type_.as_str(), ready.status.as_str()),
        ("Ready", "False")
    );
    assert_eq!(ready.reason, "UnknownKind");
    assert!(ready.message.contains("spec.by"), "{}", ready.message);
    // The CRD is installed: the kind is found and listed.
    h.list(&webapps(), vec![webapp("w1", Some("a"))]);
    assert_eq!(h.users("a"), vec!["w1"]);
    let status = h.status("r").expect("changed");
    assert_eq!(status.conditions[0].status, "True");
    assert_eq!(status.conditions[1].reason, "InUse");
}

#[test]
fn a_rule_over_a_kind_lien_may_not_list_says_which_resource_to_grant() {
    let mut h = Harness::new();
    h.list_sources(vec![rule("r", 1, "[self.spec.settings]")]);
    h.list(&configmaps(), vec![cm("a")]);
    h.send(Msg::KindForbidden(webapps(), "webapps.example.org".into()));
    assert!(
        !h.st.settled(),
        "a kind Lien may not list is not settled: its objects exist"
    );
    let status = h.status("r").expect("changed");
    let ready = &status.conditions[0];
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "NotPermitted")
    );
    assert!(
        ready.message.contains("spec.by")
            && ready.message.contains("--resource webapps.example.org"),
        "{}",
        ready.message
    );
    // Granted: the list goes through.
    h.list(&webapps(), vec![webapp("w1", Some("a"))]);
    assert_eq!(h.users("a"), vec!["w1"]);
    assert_eq!(h.status("r").expect("changed").conditions[0].status, "True");
}

#[test]
fn a_rule_whose_cel_does_not_compile_holds_nothing_and_says_why() {
    let mut h = held();
    h.send(Msg::Rule(watcher::Event::Apply(rule(
        "r",
        2,
        "[self.spec.settings",
    ))));
    assert!(!h.in_use("a"));
    assert!(h.st.settled(), "an invalid rule waits for nothing");
    assert!(
        !h.st.wanted_kinds().contains_key(&webapps()),
        "nothing to read"
    );
    let status = h.status("r").expect("changed");
    assert_eq!(status.conditions[0].reason, "InvalidExpression");
    assert!(
        status.conditions[0].message.starts_with("spec.keys.by: "),
        "{}",
        status.conditions[0].message
    );
}

#[test]
fn a_cycle_through_a_rule_is_reported_on_the_rule() {
    let mut h = Harness::new();
    // ConfigMaps use the ConfigMap their `data.uses` names: a uses b, b uses a.
    let mut r = rule("loop", 1, "[self.data.uses]");
    r.spec.by = r.spec.of.clone();
    h.list_sources(vec![r]);
    let mut a = cm("a");
    a["data"] = json!({"uses": "b"});
    let mut b = cm("b");
    b["data"] = json!({"uses": "a"});
    h.list(&configmaps(), vec![a, b]);
    assert_eq!(h.users("a"), vec!["b"]);
    assert_eq!(h.users("b"), vec!["a"]);
    let cycles = crate::resolve::cycle_problems(&h.index.read());
    let problem = cycles
        .get(&Source::rule("loop"))
        .expect("the rule is in the cycle");
    let status = rule_status(
        &h.st.rules["loop"],
        &h.index.read(),
        &h.st.caches,
        Some(problem),
        None,
        Timestamp::now(),
    )
    .expect("changed");
    assert_eq!(status.conditions[0].reason, "Cycle");
    assert!(
        status.conditions[0].message.contains("ConfigMap ns/a"),
        "{}",
        status.conditions[0].message
    );
    // The objects without `data.uses` are `by` objects whose keys fail: counted, nothing more.
    h.read(&configmaps(), watcher::Event::Apply(cm("c")));
    assert_eq!(h.error_count("loop"), 1);
    assert_eq!(h.users("a"), vec!["b"]);
}

#[test]
fn a_rules_counts_alone_are_rewritten_at_most_every_few_seconds() {
    let mut h = held();
    let config = crate::controller::ControllerConfig {
        leader: None,
        ..Default::default()
    };
    let plan = crate::controller::write::plan(&mut h.st, &h.index, &config);
    let written = plan.rule_statuses()[0].clone();
    assert_eq!(written.relations, 1);
    h.st.rules.get_mut("r").expect("rule").view.status = Some(written.clone());
    // Another dependent: only the counts change, so the write waits, and a pass is planned.
    h.read(&webapps(), watcher::Event::Apply(webapp("w2", Some("b"))));
    let plan = crate::controller::write::plan(&mut h.st, &h.index, &config);
    assert!(plan.rule_statuses().is_empty(), "a count-only change waits");
    let revisit = plan.revisit().expect("a later pass writes it");
    assert!(revisit <= crate::rules::STATUS_COUNTS_INTERVAL);
    // An evaluation error is listed in status: written at once.
    h.read(&webapps(), watcher::Event::Apply(webapp("w3", None)));
    let plan = crate::controller::write::plan(&mut h.st, &h.index, &config);
    let status = plan.rule_statuses()[0];
    assert_eq!((status.relations, status.evaluation_errors), (2, 1));
}

#[test]
fn same_namespace_over_a_cluster_scoped_kind_is_reported_with_the_fix() {
    let mut h = Harness::new();
    h.list_sources(vec![rule("r", 1, "[self.spec.settings]")]);
    h.send(Msg::KindFound(webapps(), ar(&webapps()), false));
    let status = h.status("r").expect("changed");
    assert_eq!(status.conditions[0].reason, "InvalidScope");
    assert!(
        status.conditions[0]
            .message
            .starts_with("spec.by: WebApp is cluster-scoped")
            && status.conditions[0]
                .message
                .ends_with("set spec.scope to Cluster"),
        "{}",
        status.conditions[0].message
    );
}

#[test]
fn refusals_and_overrides_name_the_dependency_rule_that_held_the_object() {
    let h = held();
    let denial = crate::replay::Denial {
        object: cm_key("a"),
        uid: Some("uid-a".into()),
        propagation_policy: None,
        user: "alice".into(),
        user_uid: String::new(),
        groups: Vec::new(),
        extra: Default::default(),
        time: std::time::SystemTime::UNIX_EPOCH,
        replay: true,
        message: String::new(),
    };
    let sources = crate::controller::events::blocking_sources(&h.st, &h.index, &denial);
    assert_eq!(sources, vec![(Source::rule("r"), "uid-rule-r".to_owned())]);
    let record = crate::audit::BreakGlass {
        action: crate::audit::BreakGlassAction::Used,
        object: cm_key("a"),
        uid: Some("uid-a".into()),
        user: "alice".into(),
        reason: "INC-42".into(),
        overridden: String::new(),
        sources: vec![Source::rule("r")],
        time: std::time::SystemTime::UNIX_EPOCH,
    };
    let (_, references) = crate::controller::events::break_glass_references(&h.st, &record);
    assert_eq!(references.len(), 1);
    let r = &references[0];
    assert_eq!(
        (r.kind.as_deref(), r.name.as_deref(), r.namespace.as_deref()),
        (Some("DependencyRule"), Some("r"), None)
    );
    assert_eq!(r.api_version.as_deref(), Some("lien.dev/v1alpha1"));
    assert_eq!(r.uid.as_deref(), Some("uid-rule-r"));
}

/// Usage `ns/u` of ConfigMap `b`, with the rest of `spec` as given.
fn usage_of_b(spec: lien_api::UsageSpec) -> lien_api::Usage {
    let mut u = lien_api::Usage::new(
        "u",
        lien_api::UsageSpec {
            of: lien_api::ResourceSpec {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                resource_ref: Some(lien_api::ResourceRef {
                    name: "b".into(),
                    namespace: None,
                }),
                resource_selector: None,
            },
            ..spec
        },
    );
    u.metadata.namespace = Some("ns".into());
    u
}

#[test]
fn a_kind_usages_and_rules_both_read_has_one_full_watch_keeping_labels() {
    let mut h = held();
    let wanted = h.send(Msg::Usage(watcher::Event::Apply(usage_of_b(
        lien_api::UsageSpec {
            reason: Some("kept".into()),
            ..Default::default()
        },
    ))));
    let w = &wanted[&configmaps()];
    assert_eq!(w.programs.len(), 1, "one watch, with the rule's program");
    assert!(w.labels, "a usage may select by label");
    assert!(!wanted[&webapps()].labels);
    assert!(h.in_use("b"), "the usage holds b");
    // The rule goes; the usage's hold and the kind's watch stay.
    h.send(Msg::Rule(watcher::Event::Delete(rule(
        "r",
        1,
        "[self.spec.settings]",
    ))));
    assert!(!h.in_use("a"));
    assert!(h.in_use("b"));
    let wanted = h.st.wanted_kinds();
    assert!(
        wanted[&configmaps()].programs.is_empty(),
        "metadata only now"
    );
}

#[test]
fn a_kind_read_only_as_users_caches_only_the_objects_lien_marked() {
    let mut h = held();
    let cached = |h: &Harness, gk: &GroupKind| -> Vec<String> {
        h.st.caches
            .kind(gk)
            .map(|k| k.objects.keys().map(|(_, n)| n.clone()).collect())
            .unwrap_or_default()
    };
    let wanted = h.st.wanted_kinds();
    assert!(
        wanted[&webapps()].marked_only,
        "WebApps are only ever users"
    );
    assert!(
        !wanted[&configmaps()].marked_only,
        "ConfigMaps are protected"
    );
    assert_eq!(cached(&h, &configmaps()), ["a", "b"]);
    assert!(
        cached(&h, &webapps()).is_empty(),
        "w1 carries nothing of Lien's"
    );
    assert!(h.st.caches.is_settled(&webapps()));

    // A stale in-use label (from a source since gone) keeps w1 cached, so that it is removed.
    let mut w1 = webapp("w1", Some("a"));
    w1["metadata"]["labels"] = json!({"lien.dev/in-use": "true", "app": "web"});
    h.read(&webapps(), watcher::Event::Apply(w1));
    assert_eq!(cached(&h, &webapps()), ["w1"]);
    let removals = crate::desired::label_writes(
        &h.index.read(),
        &h.st.caches,
        h.st.settled(),
        &h.st.of_kinds(),
    );
    assert!(
        removals.iter().any(|w| w.target.name == "w1" && !w.in_use),
        "{removals:?}"
    );
    // The label gone, so is the cache entry; w1 is still a user.
    h.read(&webapps(), watcher::Event::Apply(webapp("w1", Some("a"))));
    assert!(cached(&h, &webapps()).is_empty());
    assert_eq!(h.users("a"), vec!["w1"]);

    // A relist without w1: w1 leaves the join (the list's end says what is gone).
    h.list(&webapps(), vec![webapp("w2", Some("a"))]);
    assert_eq!(h.users("a"), vec!["w2"]);
    assert!(cached(&h, &webapps()).is_empty());

    // A usage reading WebApps needs every one of them: the kind's watch restarts (the wanted
    // kind changed) and its relist caches them all.
    let wanted = h.send(Msg::Usage(watcher::Event::Apply(usage_of_b(
        lien_api::UsageSpec {
            by: Some(lien_api::ResourceSpec {
                api_version: "example.org/v1".into(),
                kind: "WebApp".into(),
                resource_ref: Some(lien_api::ResourceRef {
                    name: "w2".into(),
                    namespace: None,
                }),
                resource_selector: None,
            }),
            ..Default::default()
        },
    ))));
    assert!(!wanted[&webapps()].marked_only);
    assert!(wanted[&webapps()].labels);
    h.list(&webapps(), vec![webapp("w2", Some("a"))]);
    assert_eq!(cached(&h, &webapps()), ["w2"]);
    assert!(h.in_use("b"), "the usage resolved its user from the cache");
}
