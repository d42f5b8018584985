//! Usages with selectors driven through the event loop's handling by hand (issue 28, finding
//! 1): the work an object event costs stays in the size of what it changed — Lien's own label
//! writes cost none — and the index, kept current event by event, always holds exactly what a
//! whole resolution of the final state derives (a property test over random objects, usages,
//! missed events and relists).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::core::ApiResource;
use lien_api::{
    ClusterUsage, ClusterUsageSpec, ResourceRef, ResourceSelector, ResourceSpec, UsageSpec,
};
use proptest::prelude::*;

use super::*;
use crate::resolve::resolve;

fn configmaps() -> GroupKind {
    GroupKind::new("", "ConfigMap")
}

fn secrets() -> GroupKind {
    GroupKind::new("", "Secret")
}

fn selector(
    kind: &str,
    labels: &[(&str, &str)],
    controller: bool,
    ns: Option<&str>,
) -> ResourceSpec {
    ResourceSpec {
        api_version: "v1".into(),
        kind: kind.into(),
        resource_ref: None,
        resource_selector: Some(ResourceSelector {
            match_labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            match_controller_ref: controller,
            namespace: ns.map(str::to_owned),
        }),
    }
}

fn named(kind: &str, name: &str, ns: Option<&str>) -> ResourceSpec {
    ResourceSpec {
        api_version: "v1".into(),
        kind: kind.into(),
        resource_ref: Some(ResourceRef {
            name: name.into(),
            namespace: ns.map(str::to_owned),
        }),
        resource_selector: None,
    }
}

/// Usage `ns/name` of `of` (by `by`), with a reason.
fn usage(name: &str, of: ResourceSpec, by: Option<ResourceSpec>) -> Usage {
    let mut u = Usage::new(
        name,
        UsageSpec {
            of,
            by,
            reason: Some("why".into()),
            ..Default::default()
        },
    );
    u.metadata.namespace = Some("ns".into());
    u.metadata.uid = Some(format!("uid-usage-{name}"));
    u.metadata.resource_version = Some("1".into());
    u
}

/// ConfigMap `ns/name` with `labels`.
fn cm(ns: &str, name: &str, labels: &[(&str, &str)], rv: u32) -> ObjectMeta {
    ObjectMeta {
        namespace: Some(ns.into()),
        name: Some(name.into()),
        uid: Some(format!("uid-{ns}-{name}")),
        resource_version: Some(rv.to_string()),
        labels: Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        ..Default::default()
    }
}

/// The event loop's state, its index and metrics, driven one message at a time.
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

    fn send(&mut self, msg: Msg) {
        handle(&mut self.st, &self.index, &self.metrics, msg);
    }

    /// Every source list done, with `usages` and `cluster_usages`.
    fn list_sources(&mut self, usages: Vec<Usage>, cluster_usages: Vec<ClusterUsage>) {
        self.send(Msg::Usage(watcher::Event::Init));
        for u in usages {
            self.send(Msg::Usage(watcher::Event::InitApply(u)));
        }
        self.send(Msg::Usage(watcher::Event::InitDone));
        self.send(Msg::ClusterUsage(watcher::Event::Init));
        for u in cluster_usages {
            self.send(Msg::ClusterUsage(watcher::Event::InitApply(u)));
        }
        self.send(Msg::ClusterUsage(watcher::Event::InitDone));
        self.send(Msg::Rule(watcher::Event::Init));
        self.send(Msg::Rule(watcher::Event::InitDone));
    }

    /// Discovery found `gk` (namespaced) and its watch listed `objects`.
    fn list_kind(&mut self, gk: &GroupKind, ar: ApiResource, objects: Vec<ObjectMeta>) {
        self.send(Msg::KindFound(gk.clone(), ar, true));
        self.relist(gk, objects);
    }

    /// The watch of `gk` (re)lists `objects`.
    fn relist(&mut self, gk: &GroupKind, objects: Vec<ObjectMeta>) {
        self.send(Msg::Object(gk.clone(), watcher::Event::Init));
        for o in objects {
            self.send(Msg::Object(gk.clone(), watcher::Event::InitApply(o)));
        }
        self.send(Msg::Object(gk.clone(), watcher::Event::InitDone));
    }

    fn apply(&mut self, gk: &GroupKind, o: ObjectMeta) {
        self.send(Msg::Object(gk.clone(), watcher::Event::Apply(o)));
    }

    fn delete(&mut self, gk: &GroupKind, o: ObjectMeta) {
        self.send(Msg::Object(gk.clone(), watcher::Event::Delete(o)));
    }

    fn work(&self) -> u64 {
        self.st.selections.work
    }

    fn source_len(&self, source: &Source) -> usize {
        self.index.read().source_len(source)
    }

    fn in_use(&self, ns: &str, name: &str) -> bool {
        self.index
            .read()
            .is_in_use(&configmaps().key(Some(ns), name))
    }
}

const OBJECTS: usize = 1_000;

/// `big` protects the 1,000 ConfigMaps labelled `app: big` (of 1,001), listed and settled.
fn big() -> Harness {
    let mut h = Harness::new();
    let big = usage(
        "big",
        selector("ConfigMap", &[("app", "big")], false, None),
        None,
    );
    h.list_sources(vec![big], vec![]);
    let mut objects: Vec<ObjectMeta> = (0..OBJECTS)
        .map(|i| cm("ns", &format!("cm-{i}"), &[("app", "big")], 1))
        .collect();
    objects.push(cm("ns", "other", &[("app", "small")], 1));
    h.list_kind(&configmaps(), ApiResource::erase::<ConfigMap>(&()), objects);
    assert!(h.st.settled());
    assert_eq!(h.source_len(&Source::usage("ns", "big")), OBJECTS);
    h
}

/// The finding: every label Lien wrote fired an event, and each event resolved every selector
/// source over all N objects again (`state::handle → re_resolve → resolve`): O(N²), minutes of
/// lag at 10,000 objects. Now an event that changes nothing a selector reads costs nothing,
/// and one that moves an object in or out of a selector costs that object.
#[test]
fn lien_label_writes_cost_no_resolution_and_an_object_event_costs_that_object() {
    let mut h = big();
    let source = Source::usage("ns", "big");
    // The echo of Lien's label on every object it protects (a new resourceVersion and the
    // in-use label): no side is even looked at.
    let before = h.work();
    for i in 0..OBJECTS {
        let labels = [("app", "big"), ("lien.dev/in-use", "true")];
        h.apply(&configmaps(), cm("ns", &format!("cm-{i}"), &labels, 2));
    }
    assert_eq!(
        h.work() - before,
        0,
        "Lien's own label writes resolve nothing"
    );
    assert_eq!(h.source_len(&source), OBJECTS);

    // One object leaves the selector: that object's relation goes, one side looked at.
    let before = h.work();
    h.apply(&configmaps(), cm("ns", "cm-7", &[("app", "small")], 3));
    assert_eq!(h.work() - before, 1);
    assert_eq!(h.source_len(&source), OBJECTS - 1);
    assert!(!h.in_use("ns", "cm-7"));
    assert!(h.in_use("ns", "cm-8"));
    // … and comes back, then goes for good.
    let before = h.work();
    h.apply(&configmaps(), cm("ns", "cm-7", &[("app", "big")], 4));
    h.delete(&configmaps(), cm("ns", "cm-8", &[("app", "big")], 4));
    assert_eq!(h.work() - before, 2);
    assert_eq!(h.source_len(&source), OBJECTS - 1);
    assert!(h.in_use("ns", "cm-7") && !h.in_use("ns", "cm-8"));
    // A new object with the label joins; an unrelated one costs nothing.
    let before = h.work();
    h.apply(&configmaps(), cm("ns", "new", &[("app", "big")], 5));
    h.apply(&configmaps(), cm("ns", "unrelated", &[("tier", "x")], 5));
    assert_eq!(h.work() - before, 1);
    assert_eq!(h.source_len(&source), OBJECTS);

    // A second Usage, by name, is resolved with one lookup — not a scan of the kind — and
    // Lien's status write to the big one resolves nothing again.
    let before = h.work();
    let second = usage("second", named("ConfigMap", "other", None), None);
    h.send(Msg::Usage(watcher::Event::Apply(second)));
    assert!(h.in_use("ns", "other"));
    let mut written = usage(
        "big",
        selector("ConfigMap", &[("app", "big")], false, None),
        None,
    );
    written.metadata.resource_version = Some("2".into());
    written.status = Some(lien_api::UsageStatus::default());
    h.send(Msg::Usage(watcher::Event::Apply(written)));
    assert_eq!(h.work() - before, 1);
}

/// The write pass sends a bounded part of the labels at a time (`write::LABEL_PASS_BUDGET`) and
/// plans again; the labels go in turns by the source holding them, so a Usage made while 1,000
/// objects of another wait for their label is labelled in the next pass — where in the order
/// of the caches its object came after all of them.
#[test]
fn a_new_usages_label_is_planned_among_the_first_while_a_large_selector_waits() {
    let mut h = big();
    let config = crate::controller::ControllerConfig {
        leader: None,
        ..Default::default()
    };
    let labels = |h: &mut Harness| {
        let plan = crate::controller::write::plan(&mut h.st, &h.index, &config);
        plan.labels()
            .iter()
            .map(|l| l.target.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        labels(&mut h).len(),
        OBJECTS,
        "every object of `big` waits for its label"
    );
    h.apply(&configmaps(), cm("ns", "zzz-late", &[], 1));
    let late = usage("late", named("ConfigMap", "zzz-late", None), None);
    h.send(Msg::Usage(watcher::Event::Apply(late)));
    let planned = labels(&mut h);
    assert_eq!(planned.len(), OBJECTS + 1);
    let at = planned
        .iter()
        .position(|n| n == "zzz-late")
        .expect("planned");
    assert!(at < 2, "the new Usage's label is planned at {at}");
    // Each source's labels keep their order among themselves.
    let big: Vec<&String> = planned.iter().filter(|n| n.starts_with("cm-")).collect();
    let mut sorted = big.clone();
    sorted.sort();
    assert_eq!(big, sorted);
}

/// A relist is compared with the cache it replaces: only what it changed is looked at.
#[test]
fn a_relist_costs_what_it_changed() {
    let mut h = big();
    let source = Source::usage("ns", "big");
    let mut objects: Vec<ObjectMeta> = (0..OBJECTS)
        .map(|i| cm("ns", &format!("cm-{i}"), &[("app", "big")], 1))
        .collect();
    // Missed while the watch was down: one object left the selector, one was deleted (not
    // listed), one was created.
    objects[3] = cm("ns", "cm-3", &[("app", "small")], 9);
    objects.remove(5);
    objects.push(cm("ns", "late", &[("app", "big")], 9));
    objects.push(cm("ns", "other", &[("app", "small")], 1));
    let before = h.work();
    h.relist(&configmaps(), objects);
    assert_eq!(h.work() - before, 3);
    assert_eq!(h.source_len(&source), OBJECTS - 1);
    assert!(!h.in_use("ns", "cm-3") && !h.in_use("ns", "cm-5") && h.in_use("ns", "late"));
}

/// A user joining a selector `by` relates it to the one used object; a user's relations go
/// with its label, and the used object's status counts follow.
#[test]
fn a_user_entering_and_leaving_a_by_selector_changes_its_relations_only() {
    let mut h = Harness::new();
    let u = usage(
        "web",
        named("ConfigMap", "settings", None),
        Some(selector("Secret", &[("app", "web")], false, None)),
    );
    h.list_sources(vec![u], vec![]);
    h.list_kind(
        &configmaps(),
        ApiResource::erase::<ConfigMap>(&()),
        vec![cm("ns", "settings", &[], 1)],
    );
    let users: Vec<ObjectMeta> = (0..50)
        .map(|i| cm("ns", &format!("user-{i}"), &[("app", "web")], 1))
        .collect();
    h.list_kind(&secrets(), ApiResource::erase::<Secret>(&()), users);
    let source = Source::usage("ns", "web");
    assert_eq!(h.source_len(&source), 50);
    let before = h.work();
    h.send(Msg::Object(
        secrets(),
        watcher::Event::Apply(cm("ns", "user-3", &[("app", "api")], 2)),
    ));
    h.send(Msg::Object(
        secrets(),
        watcher::Event::Apply(cm("ns", "user-50", &[("app", "web")], 2)),
    ));
    assert_eq!(h.work() - before, 2);
    assert_eq!(h.source_len(&source), 50);
    let sel = h.st.selections.get(&source).expect("tracked");
    let by = sel.by.as_ref().expect("a by side");
    assert_eq!(by.matched.len(), 50);
    assert!(
        !by.matched
            .contains_key(&(Some("ns".into()), "user-3".into()))
    );
}

// ----- the index always holds what a whole resolution derives --------------------------------

/// One object of the model: ConfigMap or Secret, in `ns-0` or `ns-1`.
#[derive(Debug, Clone)]
struct Obj {
    secret: bool,
    ns: u8,
    name: u8,
    /// `app` label: none, `a` or `b`.
    app: u8,
    tier: bool,
    controller: Option<u8>,
    /// Incarnation: a new one is a new UID.
    incarnation: u8,
}

impl Obj {
    fn gk(&self) -> GroupKind {
        if self.secret { secrets() } else { configmaps() }
    }

    fn key(&self) -> (bool, u8, u8) {
        (self.secret, self.ns, self.name)
    }

    fn meta(&self, rv: u32) -> ObjectMeta {
        let mut labels = BTreeMap::new();
        if self.app > 0 {
            labels.insert(
                "app".to_owned(),
                ["", "a", "b"][usize::from(self.app)].to_owned(),
            );
        }
        if self.tier {
            labels.insert("tier".to_owned(), "x".to_owned());
        }
        // Lien's own label, on some objects: it must never change what is selected.
        if self.name.is_multiple_of(2) {
            labels.insert("lien.dev/in-use".to_owned(), "true".to_owned());
        }
        ObjectMeta {
            namespace: Some(format!("ns-{}", self.ns)),
            name: Some(format!("o-{}", self.name)),
            uid: Some(format!(
                "uid-{}-{}-{}-{}",
                self.secret, self.ns, self.name, self.incarnation
            )),
            resource_version: Some(rv.to_string()),
            labels: Some(labels),
            owner_references: self.controller.map(|c| {
                vec![OwnerReference {
                    uid: format!("parent-{c}"),
                    controller: Some(true),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }
    }
}

/// One side of a model usage.
#[derive(Debug, Clone)]
enum SideSpec {
    Name {
        secret: bool,
        name: u8,
        ns: Option<u8>,
    },
    Labels {
        secret: bool,
        app: u8,
        tier: bool,
        controller: bool,
        ns: Option<u8>,
    },
}

impl SideSpec {
    fn spec(&self) -> ResourceSpec {
        let kind = |secret: bool| if secret { "Secret" } else { "ConfigMap" };
        match self {
            Self::Name { secret, name, ns } => named(
                kind(*secret),
                &format!("o-{name}"),
                ns.map(|n| format!("ns-{n}")).as_deref(),
            ),
            Self::Labels {
                secret,
                app,
                tier,
                controller,
                ns,
            } => {
                let mut labels = Vec::new();
                if *app > 0 {
                    labels.push(("app", ["", "a", "b"][usize::from(*app)]));
                }
                if *tier {
                    labels.push(("tier", "x"));
                }
                let ns = ns.map(|n| format!("ns-{n}"));
                selector(kind(*secret), &labels, *controller, ns.as_deref())
            }
        }
    }
}

/// A model usage: a Usage in `ns-0` or a ClusterUsage.
#[derive(Debug, Clone)]
struct UsageSpecModel {
    cluster: bool,
    name: u8,
    of: SideSpec,
    by: Option<SideSpec>,
    reason: bool,
    replay: bool,
    controller: Option<u8>,
}

impl UsageSpecModel {
    fn msg(&self, delete: bool) -> Msg {
        let name = format!("u-{}", self.name);
        let reason = Some(if self.reason { "one reason" } else { "another" }.to_owned());
        let owners = self.controller.map(|c| {
            vec![OwnerReference {
                uid: format!("parent-{c}"),
                controller: Some(true),
                ..Default::default()
            }]
        });
        if self.cluster {
            let mut u = ClusterUsage::new(
                &name,
                ClusterUsageSpec {
                    enforcement: lien_api::Enforcement::Deny,
                    of: self.of.spec(),
                    by: self.by.as_ref().map(SideSpec::spec),
                    reason,
                    replay_deletion: self.replay,
                },
            );
            u.metadata.uid = Some(format!("uid-{name}"));
            u.metadata.owner_references = owners;
            let ev = if delete {
                watcher::Event::Delete(u)
            } else {
                watcher::Event::Apply(u)
            };
            Msg::ClusterUsage(ev)
        } else {
            let mut u = Usage::new(
                &name,
                UsageSpec {
                    enforcement: lien_api::Enforcement::Deny,
                    of: self.of.spec(),
                    by: self.by.as_ref().map(SideSpec::spec),
                    reason,
                    replay_deletion: self.replay,
                },
            );
            u.metadata.namespace = Some("ns-0".into());
            u.metadata.uid = Some(format!("uid-{name}"));
            u.metadata.owner_references = owners;
            let ev = if delete {
                watcher::Event::Delete(u)
            } else {
                watcher::Event::Apply(u)
            };
            Msg::Usage(ev)
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// An object created or changed, its event delivered (or missed: seen at the next relist).
    Set(Obj, bool),
    /// An object deleted, its event delivered (or missed).
    Delete(bool, u8, u8, bool),
    /// A kind's watch relists (ConfigMaps or Secrets).
    Relist(bool),
    /// A usage created or changed.
    SetUsage(UsageSpecModel),
    /// A usage deleted.
    DeleteUsage(bool, u8),
}

fn side_spec() -> impl Strategy<Value = SideSpec> {
    prop_oneof![
        (any::<bool>(), 0..4u8, proptest::option::of(0..2u8))
            .prop_map(|(secret, name, ns)| SideSpec::Name { secret, name, ns }),
        (
            any::<bool>(),
            0..3u8,
            any::<bool>(),
            any::<bool>(),
            proptest::option::of(0..2u8)
        )
            .prop_map(|(secret, app, tier, controller, ns)| SideSpec::Labels {
                secret,
                app,
                tier,
                controller,
                ns
            }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let obj = (
        any::<bool>(),
        0..2u8,
        0..4u8,
        0..3u8,
        any::<bool>(),
        proptest::option::of(0..2u8),
        0..2u8,
    )
        .prop_map(
            |(secret, ns, name, app, tier, controller, incarnation)| Obj {
                secret,
                ns,
                name,
                app,
                tier,
                controller,
                incarnation,
            },
        );
    let usage = (
        any::<bool>(),
        0..3u8,
        side_spec(),
        proptest::option::weighted(0.7, side_spec()),
        // Mostly the same reason and replay, so that a change keeps the relations' shape and
        // is applied as a difference.
        proptest::bool::weighted(0.9),
        proptest::bool::weighted(0.1),
        proptest::option::of(0..2u8),
    )
        .prop_map(
            |(cluster, name, of, by, reason, replay, controller)| UsageSpecModel {
                cluster,
                name,
                of,
                by,
                reason,
                replay,
                controller,
            },
        );
    prop_oneof![
        4 => (obj, proptest::bool::weighted(0.8)).prop_map(|(o, sent)| Op::Set(o, sent)),
        2 => (any::<bool>(), 0..2u8, 0..4u8, proptest::bool::weighted(0.8))
            .prop_map(|(s, ns, name, sent)| Op::Delete(s, ns, name, sent)),
        1 => any::<bool>().prop_map(Op::Relist),
        2 => usage.prop_map(Op::SetUsage),
        1 => (any::<bool>(), 0..3u8).prop_map(|(c, n)| Op::DeleteUsage(c, n)),
    ]
}

/// Every usage's relations in the index equal a whole resolution of the state's caches, and
/// its selection lists the same objects.
fn check(h: &Harness) -> Result<(), TestCaseError> {
    let index = h.index.read();
    let mut expected_total = 0;
    for (source, view) in &h.st.usages {
        let whole = resolve(view, &h.st.caches);
        let sel = h.st.selections.get(source).expect("every usage is tracked");
        let of: Vec<_> = sel.of.matched_list().collect();
        prop_assert_eq!(&of, &whole.of, "{} of", source);
        let by: Vec<_> = sel.by.iter().flat_map(|b| b.matched_list()).collect();
        prop_assert_eq!(&by, &whole.by, "{} by", source);
        prop_assert_eq!(
            sel.problems(),
            whole.problems.clone(),
            "{} problems",
            source
        );
        prop_assert!(whole.complete, "both kinds are listed");
        let mut held: Vec<Relation> = index
            .relations_of_source(source)
            .map(|r| r.to_relation())
            .collect();
        held.sort();
        let mut want = whole.relations;
        want.sort();
        expected_total += want.len();
        prop_assert_eq!(held, want, "{} relations", source);
    }
    prop_assert_eq!(
        index.len(),
        expected_total,
        "no other source holds anything"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn the_index_holds_what_a_whole_resolution_derives(ops in proptest::collection::vec(op(), 1..40)) {
        let mut h = Harness::new();
        h.list_sources(vec![], vec![]);
        h.list_kind(&configmaps(), ApiResource::erase::<ConfigMap>(&()), vec![]);
        h.list_kind(&secrets(), ApiResource::erase::<Secret>(&()), vec![]);
        // The cluster as it is (what a relist shows), and a resourceVersion counter.
        let mut truth: BTreeMap<(bool, u8, u8), Obj> = BTreeMap::new();
        let mut rv = 1;
        for op in ops {
            rv += 1;
            match op {
                Op::Set(o, sent) => {
                    truth.insert(o.key(), o.clone());
                    if sent {
                        h.apply(&o.gk(), o.meta(rv));
                    }
                }
                Op::Delete(secret, ns, name, sent) => {
                    if let Some(o) = truth.remove(&(secret, ns, name))
                        && sent
                    {
                        h.delete(&o.gk(), o.meta(rv));
                    }
                }
                Op::Relist(secret) => {
                    let gk = if secret { secrets() } else { configmaps() };
                    let objects = truth
                        .values()
                        .filter(|o| o.secret == secret)
                        .map(|o| o.meta(rv))
                        .collect();
                    h.relist(&gk, objects);
                }
                Op::SetUsage(u) => h.send(u.msg(false)),
                Op::DeleteUsage(cluster, name) => {
                    let u = UsageSpecModel {
                        cluster,
                        name,
                        of: SideSpec::Name { secret: false, name: 0, ns: None },
                        by: None,
                        reason: true,
                        replay: false,
                        controller: None,
                    };
                    h.send(u.msg(true));
                }
            }
            // Missed events make the caches differ from the cluster until the next relist;
            // the index must follow the caches exactly, event by event.
            check(&h)?;
        }
        for secret in [false, true] {
            let gk = if secret { secrets() } else { configmaps() };
            let objects = truth.values().filter(|o| o.secret == secret).map(|o| o.meta(rv)).collect();
            h.relist(&gk, objects);
        }
        check(&h)?;
    }
}

/// RBAC withdrawn from a kind a Usage's `by` names: a relist refused (403) must not read as
/// "every user is gone". The relations stay, nothing counts as settled (no label is removed),
/// and the grant back resolves the Usage again from what the list then says.
#[test]
fn a_kind_lien_may_no_longer_list_keeps_its_relations_until_a_list_goes_through() {
    let mut h = Harness::new();
    let u = usage(
        "u",
        named("ConfigMap", "cm-a", None),
        Some(named("Secret", "s", None)),
    );
    h.list_sources(vec![u], vec![]);
    h.list_kind(
        &configmaps(),
        ApiResource::erase::<ConfigMap>(&()),
        vec![cm("ns", "cm-a", &[], 1)],
    );
    h.list_kind(
        &secrets(),
        ApiResource::erase::<Secret>(&()),
        vec![cm("ns", "s", &[], 2)],
    );
    assert!(h.in_use("ns", "cm-a"));
    assert!(h.st.settled());
    // The watch broke and its relist was refused.
    h.send(Msg::Object(secrets(), watcher::Event::Init));
    h.send(Msg::KindForbidden(secrets(), "secrets".into()));
    assert!(
        h.in_use("ns", "cm-a"),
        "a refused list takes nobody for gone"
    );
    assert!(!h.st.settled(), "no label may be removed meanwhile");
    assert_eq!(h.st.caches.forbidden(&secrets()), Some("secrets"));
    // Granted again: the list goes through and says the user is gone.
    h.relist(&secrets(), vec![]);
    assert_eq!(h.st.caches.forbidden(&secrets()), None);
    assert!(h.st.settled());
    assert!(!h.in_use("ns", "cm-a"));
}

/// A Usage of a kind Lien was never allowed to list: nothing protected, nothing settled, and
/// the Usage's `of` side says which resource to grant.
#[test]
fn a_usage_of_a_kind_lien_may_not_list_says_not_permitted_and_protects_nothing() {
    let mut h = Harness::new();
    h.list_sources(vec![usage("u", named("Secret", "s", None), None)], vec![]);
    h.send(Msg::KindFound(
        secrets(),
        ApiResource::erase::<Secret>(&()),
        true,
    ));
    h.send(Msg::Object(secrets(), watcher::Event::Init));
    h.send(Msg::KindForbidden(secrets(), "secrets".into()));
    assert!(!h.st.settled());
    let source = Source::Usage {
        namespace: "ns".into(),
        name: "u".into(),
    };
    assert_eq!(h.source_len(&source), 0);
    let problem =
        h.st.selections
            .get(&source)
            .and_then(|s| s.sides().find_map(|side| side.problem_now()))
            .expect("a problem");
    assert_eq!(problem.reason.as_str(), "NotPermitted");
    assert!(
        problem.message.contains("--resource secrets"),
        "{}",
        problem.message
    );
}
