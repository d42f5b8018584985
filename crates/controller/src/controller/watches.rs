//! The watch tasks: one per usage kind, and one metadata-only watch per kind a usage refers
//! to, started after discovery finds the kind. Each forwards its events into the event loop's
//! channel and ends when the channel closes or the task is aborted.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject, PartialObjectMeta};
use kube::core::GroupVersionKind;
use kube::runtime::watcher::{self, watcher};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::Msg;
use super::state::State;
use crate::cache::GroupKind;
use crate::metrics::Metrics;

/// Starts watches for kinds newly wanted and stops those no longer wanted (dropping their
/// caches).
pub(super) fn sync_kind_watches(
    kind_tasks: &mut HashMap<GroupKind, JoinHandle<()>>,
    wanted: &BTreeMap<GroupKind, String>,
    st: &mut State,
    client: &Client,
    tx: &mpsc::UnboundedSender<Msg>,
    metrics: &Metrics,
) {
    for (gk, api_version) in wanted {
        if !kind_tasks.contains_key(gk) {
            metrics.kind_watch_started();
            kind_tasks.insert(
                gk.clone(),
                spawn_kind_watch(
                    client.clone(),
                    gk.clone(),
                    api_version.clone(),
                    tx.clone(),
                    metrics.clone(),
                ),
            );
        }
    }
    kind_tasks.retain(|gk, task| {
        let keep = wanted.contains_key(gk);
        if !keep {
            task.abort();
            st.caches.remove_kind(gk);
            tracing::info!(kind = %gk, "no usage refers to the kind any more: watch stopped");
        }
        keep
    });
    metrics.set_watched_kinds(kind_tasks.len());
}

pub(super) fn spawn_watch<K, S>(
    stream: S,
    tx: mpsc::UnboundedSender<Msg>,
    wrap: fn(watcher::Event<K>) -> Msg,
    metrics: Metrics,
) -> JoinHandle<()>
where
    K: Send + 'static,
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    tokio::spawn(async move {
        // The watcher's own backoff: a failed list or watch is retried, never fatal.
        let stream = kube::runtime::WatchStreamExt::default_backoff(stream);
        futures::pin_mut!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => {
                    if tx.send(wrap(ev)).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    metrics.watch_restarted("usage");
                    tracing::warn!(error = %e, "watch failed; retrying");
                }
            }
        }
    })
}

fn spawn_kind_watch(
    client: Client,
    gk: GroupKind,
    api_version: String,
    tx: mpsc::UnboundedSender<Msg>,
    metrics: Metrics,
) -> JoinHandle<()> {
    let span = tracing::info_span!("kind_watch", kind = %gk);
    tokio::spawn(
        async move {
            let version = api_version
                .split_once('/')
                .map_or(api_version.as_str(), |(_, v)| v)
                .to_owned();
            let gvk = GroupVersionKind::gvk(&gk.group, &version, &gk.kind);
            // Discovery; an unknown kind is retried with backoff (a CRD may be installed later).
            let mut delay = Duration::from_millis(500);
            let (ar, caps) = loop {
                match kube::discovery::pinned_kind(&client, &gvk).await {
                    Ok(found) => break found,
                    Err(e) => {
                        tracing::info!(error = %e, "kind not served");
                        if tx.send(Msg::KindUnknown(gk.clone())).is_err() {
                            return;
                        }
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(Duration::from_secs(30));
                    }
                }
            };
            let namespaced = caps.scope == kube::discovery::Scope::Namespaced;
            if tx
                .send(Msg::KindFound(gk.clone(), ar.clone(), namespaced))
                .is_err()
            {
                return;
            }
            // `Api<PartialObjectMeta<_>>` lists and watches metadata only.
            let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client, &ar);
            let stream = kube::runtime::WatchStreamExt::default_backoff(watcher(
                api,
                watcher::Config::default(),
            ));
            futures::pin_mut!(stream);
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(ev) => {
                        let ev = match ev {
                            watcher::Event::Apply(m) => watcher::Event::Apply(m.metadata),
                            watcher::Event::Delete(m) => watcher::Event::Delete(m.metadata),
                            watcher::Event::InitApply(m) => watcher::Event::InitApply(m.metadata),
                            watcher::Event::Init => watcher::Event::Init,
                            watcher::Event::InitDone => watcher::Event::InitDone,
                        };
                        if tx.send(Msg::Object(gk.clone(), ev)).is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        metrics.watch_restarted("object");
                        tracing::warn!(error = %e, "watch failed; retrying");
                    }
                }
            }
        }
        .instrument(span),
    )
}
