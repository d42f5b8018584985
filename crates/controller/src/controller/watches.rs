//! The watch tasks: one per source kind (Usages, ClusterUsages, DependencyRules), one on
//! CustomResourceDefinitions (a hint to retry kinds not served), and one per kind a source
//! refers to, started after discovery finds the kind. A kind only usages refer to is watched
//! metadata-only; a kind rules read is watched with full objects, each reduced in the watch
//! task to its metadata and the rules' evaluated keys (`crate::rules::KindReader`) and dropped
//! there. Each task forwards its events into the event loop's channel and ends when the channel
//! closes or the task is aborted.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, DynamicObject, PartialObjectMeta};
use kube::core::ApiResource;
use kube::runtime::watcher;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::Msg;
use super::state::{Observed, State, WantedKind};
use crate::cache::GroupKind;
use crate::metrics::Metrics;
use crate::rules::KindReader;

/// A running kind watch and the programs its reader evaluates.
pub(super) struct KindTask {
    /// The task.
    pub(super) task: JoinHandle<()>,
    programs: Vec<u64>,
    labels: bool,
    /// A change restarts the watch: the relist refills the cache (see `WantedKind`).
    marked_only: bool,
    api_version: String,
}

/// Starts watches for kinds newly wanted, restarts those whose rule programs changed (a new
/// program needs every object again: see `crate::rules`), and stops those no longer wanted
/// (dropping their caches).
pub(super) fn sync_kind_watches(
    kind_tasks: &mut HashMap<GroupKind, KindTask>,
    wanted: &BTreeMap<GroupKind, WantedKind>,
    st: &mut State,
    client: &Client,
    tx: &mpsc::UnboundedSender<Msg>,
    metrics: &Metrics,
) {
    for (gk, w) in wanted {
        let current = kind_tasks.get(gk);
        if current.is_some_and(|t| {
            t.programs == w.programs && t.labels == w.labels && t.marked_only == w.marked_only
        }) {
            continue;
        }
        if let Some(old) = kind_tasks.remove(gk) {
            old.task.abort();
            tracing::info!(kind = %gk, "the rules reading the kind changed: relisting");
        }
        metrics.kind_watch_started();
        kind_tasks.insert(gk.clone(), start(st, client, gk, w, tx, metrics));
    }
    kind_tasks.retain(|gk, t| {
        let keep = wanted.contains_key(gk);
        if !keep {
            t.task.abort();
            st.caches.remove_kind(gk);
            tracing::info!(kind = %gk, "no source refers to the kind any more: watch stopped");
        }
        keep
    });
    metrics.set_watched_kinds(kind_tasks.len());
}

fn start(
    st: &State,
    client: &Client,
    gk: &GroupKind,
    w: &WantedKind,
    tx: &mpsc::UnboundedSender<Msg>,
    metrics: &Metrics,
) -> KindTask {
    let reader = (!w.programs.is_empty()).then(|| Arc::new(st.reader(gk)));
    KindTask {
        task: spawn_kind_watch(
            client.clone(),
            gk.clone(),
            w.api_version.clone(),
            reader,
            w.labels,
            tx.clone(),
            metrics.clone(),
        ),
        programs: w.programs.clone(),
        labels: w.labels,
        marked_only: w.marked_only,
        api_version: w.api_version.clone(),
    }
}

/// Restarts the watches of kinds discovery did not serve, at once rather than after their
/// backoff (a CustomResourceDefinition changed).
pub(super) fn retry_unknown_kinds(
    kind_tasks: &mut HashMap<GroupKind, KindTask>,
    st: &State,
    client: &Client,
    tx: &mpsc::UnboundedSender<Msg>,
    metrics: &Metrics,
) {
    for (gk, t) in kind_tasks.iter_mut() {
        if st.caches.is_unknown(gk) {
            t.task.abort();
            let w = WantedKind {
                api_version: t.api_version.clone(),
                programs: t.programs.clone(),
                labels: t.labels,
                marked_only: t.marked_only,
            };
            *t = start(st, client, gk, &w, tx, metrics);
        }
    }
}

/// A source watch (`crate::watch`'s one loop), counted in the metrics when it restarts.
pub(super) fn spawn_watch<K>(
    api: Api<K>,
    tx: mpsc::UnboundedSender<Msg>,
    wrap: fn(watcher::Event<K>) -> Option<Msg>,
    metrics: Metrics,
) -> JoinHandle<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    crate::watch::spawn_forward(api, tx, wrap, move |e| {
        metrics.watch_restarted("usage");
        tracing::warn!(error = %e, "watch failed; retrying");
    })
}

/// The object as CEL's `self`: apiVersion, kind, metadata and the rest, moved (not copied)
/// out of the decoded object, with its metadata kept aside for the caches.
fn to_json(o: DynamicObject) -> (ObjectMeta, Value) {
    let mut map = match o.data {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    if let Some(t) = &o.types {
        map.insert("apiVersion".into(), Value::String(t.api_version.clone()));
        map.insert("kind".into(), Value::String(t.kind.clone()));
    }
    map.insert(
        "metadata".into(),
        serde_json::to_value(&o.metadata).unwrap_or(Value::Null),
    );
    (o.metadata, Value::Object(map))
}

/// Drops from an object's metadata what the caches never keep (`CachedObject`): managedFields
/// and annotations other than Lien's replay record (`kubectl apply`'s last-applied copy of the
/// object can be as large as the object, and anyone may write `lien.dev/` annotations); without `labels`, also labels other than Lien's (no usage selects
/// in the kind, and a label map is the largest part of a cached object).
fn slim(mut meta: ObjectMeta, labels: bool) -> ObjectMeta {
    let liens = |k: &String| k.starts_with(crate::cache::LIEN_ANNOTATION_PREFIX);
    meta.managed_fields = None;
    if let Some(a) = meta.annotations.as_mut() {
        // Only what the cache keeps (`cache::kept_annotation`): the replay record.
        a.retain(|k, _| crate::cache::kept_annotation(k));
    }
    if !labels && let Some(l) = meta.labels.as_mut() {
        l.retain(|k, _| liens(k));
    }
    meta
}

/// Reduces a full object at once: the evaluations are kept, the object is dropped here.
fn reduce(reader: &KindReader, o: DynamicObject, labels: bool) -> Observed {
    let (meta, json) = to_json(o);
    let evals = reader.reduce(&json);
    Observed {
        meta: slim(meta, labels),
        evals,
    }
}

fn map_event<A, B>(ev: watcher::Event<A>, f: impl Fn(A) -> B) -> watcher::Event<B> {
    match ev {
        watcher::Event::Apply(o) => watcher::Event::Apply(f(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(f(o)),
        watcher::Event::InitApply(o) => watcher::Event::InitApply(f(o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

fn spawn_kind_watch(
    client: Client,
    gk: GroupKind,
    api_version: String,
    reader: Option<Arc<KindReader>>,
    labels: bool,
    tx: mpsc::UnboundedSender<Msg>,
    metrics: Metrics,
) -> JoinHandle<()> {
    let span = tracing::info_span!("kind_watch", kind = %gk);
    tokio::spawn(
        async move {
            loop {
                // Discovery; an unknown kind is retried with the service's backoff (a CRD may
                // be installed later; a CRD change also restarts this task at once).
                let found = crate::watch::discover_until_served(&client, &gk, &api_version, |e| {
                    tracing::info!(error = %e, "kind not served");
                    tx.send(Msg::KindUnknown(gk.clone())).is_ok()
                })
                .await;
                let Some(crate::watch::Discovered { ar, namespaced }) = found else {
                    return;
                };
                if tx
                    .send(Msg::KindFound(gk.clone(), ar.clone(), namespaced))
                    .is_err()
                {
                    return;
                }
                let ended = match &reader {
                    None => {
                        watch_metadata(client.clone(), &ar, gk.clone(), tx.clone(), &metrics).await
                    }
                    Some(reader) => {
                        let (reader, tx) = (reader.clone(), tx.clone());
                        watch_full(
                            client.clone(),
                            &ar,
                            gk.clone(),
                            reader,
                            labels,
                            tx,
                            &metrics,
                        )
                        .await
                    }
                };
                match ended {
                    crate::watch::Ended::Closed => return,
                    // Its CRD was deleted: discovery again, whose miss marks the kind unknown
                    // (its objects leave the caches) and whose retry a new CRD hurries.
                    crate::watch::Ended::NotServed => {
                        tracing::info!("kind no longer served: discovering it again");
                    }
                    // RBAC does not grant the resource: the sources naming the kind say so
                    // (NotPermitted, naming the resource), and the list is tried again every
                    // FORBIDDEN_RETRY — Lien cannot watch its own ClusterRole being changed.
                    crate::watch::Ended::Forbidden => {
                        let resource = crate::watch::grantable_resource(&ar);
                        tracing::debug!(%resource, "the API server refuses Lien a list or watch of the kind; retrying in {FORBIDDEN_RETRY:?}");
                        if tx.send(Msg::KindForbidden(gk.clone(), resource)).is_err() {
                            return;
                        }
                        tokio::time::sleep(FORBIDDEN_RETRY).await;
                    }
                }
            }
        }
        .instrument(span),
    )
}

/// How long a kind the API server refused Lien (403) waits before its list is tried again: a
/// grant is picked up within this, and a refused list every 10 s costs the API server nothing.
pub(crate) const FORBIDDEN_RETRY: std::time::Duration = std::time::Duration::from_secs(10);

async fn watch_metadata(
    client: Client,
    ar: &ApiResource,
    gk: GroupKind,
    tx: mpsc::UnboundedSender<Msg>,
    metrics: &Metrics,
) -> crate::watch::Ended {
    // `Api<PartialObjectMeta<_>>` lists and watches metadata only.
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client, ar);
    crate::watch::forward_while_served(
        api,
        &tx,
        |ev| {
            let ev = map_event(ev, |m| slim(m.metadata, true));
            Some(Msg::Object(gk.clone(), ev))
        },
        |e| object_watch_failed(metrics, e),
    )
    .await
}

fn object_watch_failed(metrics: &Metrics, e: &watcher::Error) {
    metrics.watch_restarted("object");
    tracing::warn!(error = %e, "watch failed; retrying");
}

async fn watch_full(
    client: Client,
    ar: &ApiResource,
    gk: GroupKind,
    reader: Arc<KindReader>,
    labels: bool,
    tx: mpsc::UnboundedSender<Msg>,
    metrics: &Metrics,
) -> crate::watch::Ended {
    let api: Api<DynamicObject> = Api::all_with(client, ar);
    crate::watch::forward_while_served(
        api,
        &tx,
        |ev| {
            let ev = match ev {
                // A deleted object leaves every join whatever its keys: nothing to evaluate.
                watcher::Event::Delete(o) => watcher::Event::Delete(Observed {
                    meta: slim(o.metadata, labels),
                    evals: Vec::new(),
                }),
                ev => map_event(ev, |o| reduce(&reader, o, labels)),
            };
            Some(Msg::Read(gk.clone(), reader.clone(), ev))
        },
        |e| object_watch_failed(metrics, e),
    )
    .await
}
