//! The [`State`] the event loop owns, and how each watch event changes it.
//!
//! Everything here is synchronous and free of I/O: [`handle`] applies one event to the state
//! and to the shared [`RelationIndex`] and returns the kinds to watch, so it can be driven
//! without a runtime (see the tests below).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher;
use lien_api::{ClusterUsage, Usage};
use lien_core::{Relation, RelationIndex, Source};
use parking_lot::RwLock;

use super::Msg;
use crate::cache::{Caches, GroupKind};
use crate::desired::is_labelled;
use crate::metrics::Metrics;
use crate::replay;
use crate::resolve::{Problem, Resolution, UsageView, resolve};

/// Everything the event loop maintains.
#[derive(Debug, Default)]
pub struct State {
    /// Object metadata per referenced kind.
    pub caches: Caches,
    /// Every usage, by source.
    pub usages: BTreeMap<Source, UsageView>,
    /// The latest resolution of each usage.
    pub resolutions: BTreeMap<Source, Resolution>,
    /// The usages that take part in a cycle, as of the last search.
    pub cycles: BTreeMap<Source, Problem>,
    /// Whether the index changed since `cycles` was computed.
    pub(super) cycles_stale: bool,
    /// Sources whose last complete resolution did not reach the index (it was full), so that
    /// the next one is applied even if it is the same.
    unapplied: BTreeSet<Source>,
    usages_listed: bool,
    cluster_usages_listed: bool,
    usage_buffer: Vec<Usage>,
    cluster_usage_buffer: Vec<ClusterUsage>,
    object_buffers: HashMap<GroupKind, Vec<ObjectMeta>>,
}

impl State {
    /// Whether every usage list completed and every referenced kind is listed or known not to
    /// exist: only then does the absence of a relation mean "not in use".
    pub fn settled(&self) -> bool {
        self.usages_listed
            && self.cluster_usages_listed
            && self
                .usages
                .values()
                .flat_map(|u| u.kinds())
                .all(|(gk, _)| self.caches.is_settled(&gk))
    }

    /// Kinds to watch: every referenced kind, plus kinds whose objects still carry the label
    /// (so that it can be removed before the watch stops).
    pub(super) fn wanted_kinds(&self) -> BTreeMap<GroupKind, String> {
        let mut out: BTreeMap<GroupKind, String> = BTreeMap::new();
        // Namespaces, always (metadata-only, and there are few): a refused Namespace DELETE
        // (its contents used from outside) is recorded on the Namespace and replayed like any
        // other, which needs the Namespace in the caches when the denial arrives.
        out.insert(GroupKind::new("", "Namespace"), "v1".to_owned());
        for u in self.usages.values() {
            for (gk, api_version) in u.kinds() {
                out.entry(gk).or_insert_with(|| api_version.to_owned());
            }
        }
        // A kind stays watched while an object of it carries the label or a recorded DELETE:
        // both must be cleared (the label removed, the record replayed or forgotten) after the
        // last usage referring to the kind is gone.
        for (gk, kind) in self.caches.kinds() {
            let pending = |o: &crate::cache::CachedObject| {
                is_labelled(o)
                    || o.annotations
                        .contains_key(replay::DELETION_ATTEMPT_ANNOTATION)
            };
            if !out.contains_key(gk) && kind.objects.values().any(pending) {
                out.insert(gk.clone(), kind.api_version.clone());
            }
        }
        out
    }

    /// Re-resolves `sources` and applies complete resolutions that changed to the index.
    ///
    /// Resolution reads only the state, so it runs with no lock held; the write lock is taken
    /// once, for the per-source replacements (work in the size of the sources that changed).
    fn re_resolve(&mut self, sources: &[Source], index: &RwLock<RelationIndex>, metrics: &Metrics) {
        // `None`: the source is gone.
        let mut updates: Vec<(&Source, Option<Vec<Relation>>)> = Vec::new();
        for source in sources {
            let Some(view) = self.usages.get(source) else {
                self.resolutions.remove(source);
                updates.push((source, None));
                continue;
            };
            let res = resolve(view, &self.caches);
            // An incomplete resolution keeps the previous relations: a watch that is still
            // listing must not lift protection. A complete one equal to the last applied one
            // (an echo of Lien's own write, an unrelated change of the kind) leaves the index
            // alone.
            if res.complete {
                let applied = self.resolutions.get(source).is_some_and(|old| {
                    old.complete
                        && old.relations == res.relations
                        && !self.unapplied.contains(source)
                });
                if !applied {
                    updates.push((source, Some(res.relations.clone())));
                }
            }
            self.resolutions.insert(source.clone(), res);
        }
        if updates.is_empty() {
            return;
        }
        self.cycles_stale = true;
        let mut index = index.write();
        for (source, relations) in updates {
            match relations {
                None => {
                    index.delete(source);
                    self.unapplied.remove(source);
                }
                Some(relations) => match index.apply(source, relations) {
                    Ok(_) => {
                        self.unapplied.remove(source);
                    }
                    Err(e) => {
                        self.unapplied.insert(source.clone());
                        metrics.index_error();
                        tracing::error!(%source, error = %e, "applying relations");
                    }
                },
            }
        }
        metrics.set_relations(index.len());
    }

    fn sources_referring_to(&self, gk: &GroupKind) -> Vec<Source> {
        self.usages
            .iter()
            .filter(|(_, u)| u.kinds().any(|(k, _)| &k == gk))
            .map(|(s, _)| s.clone())
            .collect()
    }

    fn replace_usages(&mut self, cluster: bool, views: Vec<UsageView>) -> Vec<Source> {
        let mut touched: Vec<Source> = self
            .usages
            .keys()
            .filter(|s| matches!(s, Source::ClusterUsage { .. }) == cluster)
            .cloned()
            .collect();
        let views: Vec<UsageView> = views
            .into_iter()
            .map(|v| {
                let previous = self.usages.get(&v.source());
                v.remembering(previous)
            })
            .collect();
        self.usages
            .retain(|s, _| matches!(s, Source::ClusterUsage { .. }) != cluster);
        for v in views {
            let s = v.source();
            touched.push(s.clone());
            self.usages.insert(s, v);
        }
        touched
    }
}

/// Applies one event to the state and the index; returns the kinds to watch.
pub(super) fn handle(
    st: &mut State,
    index: &RwLock<RelationIndex>,
    metrics: &Metrics,
    msg: Msg,
) -> BTreeMap<GroupKind, String> {
    metrics.event();
    let touched: Vec<Source> = match msg {
        Msg::Usage(ev) => usage_event(st, ev, false, UsageView::from_usage, |st| {
            &mut st.usage_buffer
        }),
        Msg::ClusterUsage(ev) => usage_event(st, ev, true, UsageView::from_cluster_usage, |st| {
            &mut st.cluster_usage_buffer
        }),
        Msg::Object(gk, ev) => {
            let changed = match ev {
                watcher::Event::Apply(m) => st.caches.apply(&gk, &m),
                watcher::Event::Delete(m) => {
                    st.caches
                        .delete(&gk, m.namespace.as_deref(), m.name.as_deref().unwrap_or(""))
                }
                watcher::Event::Init => {
                    st.object_buffers.insert(gk.clone(), Vec::new());
                    false
                }
                watcher::Event::InitApply(m) => {
                    st.object_buffers.entry(gk.clone()).or_default().push(m);
                    false
                }
                watcher::Event::InitDone => {
                    let buffered = st.object_buffers.remove(&gk).unwrap_or_default();
                    st.caches.reset(&gk, &buffered);
                    true
                }
            };
            if changed {
                st.sources_referring_to(&gk)
            } else {
                vec![]
            }
        }
        Msg::KindFound(gk, ar, namespaced) => {
            st.caches
                .add_kind(gk, namespaced, &ar.api_version, &ar.plural);
            vec![]
        }
        Msg::KindUnknown(gk) => {
            if st.caches.is_unknown(&gk) {
                vec![]
            } else {
                st.caches.mark_unknown(gk.clone());
                st.sources_referring_to(&gk)
            }
        }
        Msg::Denial(_) | Msg::BreakGlass(_) | Msg::Plan(_) => vec![],
    };
    if !touched.is_empty() {
        st.re_resolve(&touched, index, metrics);
    }
    st.wanted_kinds()
}

fn usage_event<K>(
    st: &mut State,
    ev: watcher::Event<K>,
    cluster: bool,
    view: impl Fn(&K) -> Option<UsageView>,
    buffer: impl Fn(&mut State) -> &mut Vec<K>,
) -> Vec<Source> {
    match ev {
        watcher::Event::Apply(u) => match view(&u) {
            Some(v) => {
                let s = v.source();
                let v = v.remembering(st.usages.get(&s));
                st.usages.insert(s.clone(), v);
                vec![s]
            }
            None => vec![],
        },
        watcher::Event::Delete(u) => match view(&u) {
            Some(v) => {
                let s = v.source();
                st.usages.remove(&s);
                vec![s]
            }
            None => vec![],
        },
        watcher::Event::Init => {
            buffer(st).clear();
            vec![]
        }
        watcher::Event::InitApply(u) => {
            buffer(st).push(u);
            vec![]
        }
        watcher::Event::InitDone => {
            // A restarted list replaces this kind of usage wholesale: sources that vanished
            // meanwhile are deleted from the index, the rest re-applied. (Not `reset`: the index
            // is shared with other sources, e.g. dependency rules.)
            let items = std::mem::take(buffer(st));
            let views = items.iter().filter_map(view).collect();
            if cluster {
                st.cluster_usages_listed = true;
            } else {
                st.usages_listed = true;
            }
            st.replace_usages(cluster, views)
        }
    }
}

#[cfg(test)]
mod tests {
    //! The event loop's handling driven by hand, without a runtime or an API server: watch
    //! events in, the shared index and the resolutions out.

    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use kube::core::ApiResource;
    use lien_api::{ResourceRef, ResourceSpec, UsageSpec};
    use lien_core::ObjectKey;

    use super::*;

    fn spec(kind: &str, name: &str) -> ResourceSpec {
        ResourceSpec {
            api_version: "v1".into(),
            kind: kind.into(),
            resource_ref: Some(ResourceRef {
                name: name.into(),
                namespace: None,
            }),
            resource_selector: None,
        }
    }

    /// Usage `ns/name`: ConfigMap `of` is used by `by_kind` `by`.
    fn usage(name: &str, of: &str, by_kind: &str, by: &str) -> Usage {
        let mut u = Usage::new(
            name,
            UsageSpec {
                of: spec("ConfigMap", of),
                by: Some(spec(by_kind, by)),
                ..Default::default()
            },
        );
        u.metadata.namespace = Some("ns".into());
        u.metadata.uid = Some(format!("uid-usage-{name}"));
        u
    }

    fn object(name: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: Some("ns".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some("1".into()),
            ..Default::default()
        }
    }

    fn configmaps() -> GroupKind {
        GroupKind::new("", "ConfigMap")
    }

    fn key(kind: &str, name: &str) -> ObjectKey {
        ObjectKey {
            group: String::new(),
            kind: kind.into(),
            namespace: Some("ns".into()),
            name: name.into(),
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

        fn send(&mut self, msg: Msg) -> BTreeMap<GroupKind, String> {
            handle(&mut self.st, &self.index, &self.metrics, msg)
        }

        /// The usage watch's first list, with `usages`.
        fn list_usages(&mut self, usages: Vec<Usage>) {
            self.send(Msg::Usage(watcher::Event::Init));
            for u in usages {
                self.send(Msg::Usage(watcher::Event::InitApply(u)));
            }
            self.send(Msg::Usage(watcher::Event::InitDone));
        }

        /// Discovery found `gk` and its watch listed `objects`.
        fn list_kind(&mut self, gk: &GroupKind, ar: ApiResource, objects: &[&str]) {
            self.send(Msg::KindFound(gk.clone(), ar, true));
            self.send(Msg::Object(gk.clone(), watcher::Event::Init));
            for o in objects {
                self.send(Msg::Object(
                    gk.clone(),
                    watcher::Event::InitApply(object(o)),
                ));
            }
            self.send(Msg::Object(gk.clone(), watcher::Event::InitDone));
        }

        fn in_use(&self, kind: &str, name: &str) -> bool {
            self.index.read().is_in_use(&key(kind, name))
        }

        fn source_len(&self, source: &Source) -> usize {
            self.index.read().source_len(source)
        }
    }

    /// `u` (db used by app) applied and both ConfigMaps listed: the relation is in the index.
    fn held() -> Harness {
        let mut h = Harness::new();
        h.list_usages(vec![usage("u", "db", "ConfigMap", "app")]);
        assert!(!h.st.settled(), "ConfigMaps are not listed yet");
        h.list_kind(
            &configmaps(),
            ApiResource::erase::<ConfigMap>(&()),
            &["db", "app"],
        );
        assert!(!h.st.settled(), "ClusterUsages are not listed yet");
        h.send(Msg::ClusterUsage(watcher::Event::Init));
        h.send(Msg::ClusterUsage(watcher::Event::InitDone));
        assert!(h.st.settled());
        assert!(h.in_use("ConfigMap", "db"));
        h
    }

    #[test]
    fn a_usage_over_a_listed_kind_puts_its_relation_in_the_index_and_wants_the_kind() {
        let mut h = Harness::new();
        let wanted = h.send(Msg::Usage(watcher::Event::Apply(usage(
            "u",
            "db",
            "ConfigMap",
            "app",
        ))));
        // Namespaces are always watched (refused namespace DELETEs are recorded on them).
        assert_eq!(
            wanted.into_iter().collect::<Vec<_>>(),
            vec![
                (configmaps(), "v1".to_owned()),
                (GroupKind::new("", "Namespace"), "v1".to_owned())
            ]
        );
        let source = Source::usage("ns", "u");
        assert!(
            !h.st.resolutions[&source].complete,
            "the kind is not listed yet"
        );
        assert_eq!(h.source_len(&source), 0);
        h.list_kind(
            &configmaps(),
            ApiResource::erase::<ConfigMap>(&()),
            &["db", "app"],
        );
        assert!(h.st.resolutions[&source].complete);
        assert_eq!(h.source_len(&source), 1);
        let index = h.index.read();
        let r = index
            .blockers(&key("ConfigMap", "db"))
            .next()
            .expect("db is in use");
        assert_eq!(r.by().map(|b| b.name.to_owned()), Some("app".into()));
    }

    #[test]
    fn a_relist_does_not_delete_other_sources_relations() {
        let mut h = held();
        // A relation of another kind of source (a dependency rule), which the usage watch
        // knows nothing of.
        let rule = Source::rule("r");
        h.index
            .write()
            .apply(
                &rule,
                [Relation::uses(
                    rule.clone(),
                    key("ConfigMap", "other"),
                    key("ConfigMap", "app"),
                )],
            )
            .expect("the rule's relation is valid");
        // The usage watch restarts with a fresh list that no longer holds `u`, and the
        // ConfigMap watch relists.
        h.list_usages(vec![]);
        h.list_kind(
            &configmaps(),
            ApiResource::erase::<ConfigMap>(&()),
            &["db", "app", "other"],
        );
        assert_eq!(h.source_len(&Source::usage("ns", "u")), 0, "u is gone");
        assert!(!h.in_use("ConfigMap", "db"));
        assert_eq!(h.source_len(&rule), 1, "the rule's relation stays");
        assert!(h.in_use("ConfigMap", "other"));
    }

    #[test]
    fn an_incomplete_resolution_keeps_the_previous_relations() {
        let mut h = held();
        let source = Source::usage("ns", "u");
        // `u` now names a Secret as its user; Secrets are not listed yet.
        let wanted = h.send(Msg::Usage(watcher::Event::Apply(usage(
            "u", "db", "Secret", "app",
        ))));
        assert!(wanted.contains_key(&GroupKind::new("", "Secret")));
        assert!(!h.st.resolutions[&source].complete);
        assert!(h.in_use("ConfigMap", "db"), "protection is not lifted");
        let index = h.index.read();
        let r = index
            .blockers(&key("ConfigMap", "db"))
            .next()
            .expect("db is in use");
        assert_eq!(r.by().map(|b| b.kind.to_owned()), Some("ConfigMap".into()));
        drop(index);
        // Once Secrets are listed (without `app`), the new resolution replaces the old one.
        h.list_kind(
            &GroupKind::new("", "Secret"),
            ApiResource::erase::<Secret>(&()),
            &[],
        );
        assert!(h.st.resolutions[&source].complete);
        assert!(!h.in_use("ConfigMap", "db"));
    }

    #[test]
    fn deleting_the_user_releases_the_relation() {
        let mut h = held();
        h.send(Msg::Object(
            configmaps(),
            watcher::Event::Delete(object("app")),
        ));
        assert!(!h.in_use("ConfigMap", "db"));
        assert_eq!(h.source_len(&Source::usage("ns", "u")), 0);
        assert!(h.st.resolutions[&Source::usage("ns", "u")].complete);
    }

    #[test]
    fn an_unchanged_resolution_does_not_rewrite_the_index() {
        let mut h = held();
        let source = Source::usage("ns", "u");
        h.st.cycles_stale = false;
        // Take the relation out behind the state's back: a rewrite would put it back.
        h.index.write().delete(&source);
        // An unrelated ConfigMap and an echo of `db` with a new resourceVersion: `u` is
        // re-resolved to the same relations.
        h.send(Msg::Object(
            configmaps(),
            watcher::Event::Apply(object("unrelated")),
        ));
        let mut db = object("db");
        db.resource_version = Some("2".into());
        h.send(Msg::Object(configmaps(), watcher::Event::Apply(db)));
        assert_eq!(h.source_len(&source), 0, "the index was not written");
        assert!(!h.st.cycles_stale, "nothing marked the cycles stale");
        // A change of the resolution is written.
        h.send(Msg::Usage(watcher::Event::Apply(usage(
            "u",
            "unrelated",
            "ConfigMap",
            "app",
        ))));
        assert!(h.in_use("ConfigMap", "unrelated"));
        assert!(h.st.cycles_stale);
    }
}
