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
