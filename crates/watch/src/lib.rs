//! The one watch-and-discovery service every part asks for kinds: the controller's source and
//! kind watches, the CascadeRule reconciler's rule, parent and child watches, the live check
//! and the kubectl plugin (through `live`).
//!
//! - [`discover`]: one kind's resource and scope (`pinned_kind`), with a typed error naming
//!   the kind; [`discover_until_served`] retries it under the one backoff policy
//!   ([`DISCOVERY_RETRY_BASE`] doubling to [`DISCOVERY_RETRY_MAX`]) while the kind is not
//!   served (a CRD installed later).
//! - [`served_resources`]: every served resource, for a whole-cluster look (a discovery
//!   snapshot, the dependents of a foreground deletion).
//! - [`forward`] / [`spawn_forward`]: the one "watcher with kube's default backoff, forwarded
//!   into an event loop's channel" loop: a failed list or watch is retried, never fatal; the
//!   loop ends when the channel closes (its event loop stopped) or the task is aborted.

use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{ApiCapabilities, Discovery, Scope};
use kube::runtime::watcher;
use lien_core::GroupKind;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The first wait before asking discovery again for a kind it did not serve.
pub const DISCOVERY_RETRY_BASE: Duration = Duration::from_millis(200);
/// The longest wait between two discoveries of a kind not served.
pub const DISCOVERY_RETRY_MAX: Duration = Duration::from_secs(30);

/// A kind as discovery serves it.
#[derive(Debug, Clone, PartialEq)]
pub struct Discovered {
    /// Its resource (group, version, plural).
    pub ar: ApiResource,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
}

/// Why discovery found no resource.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// The API server does not serve the kind (no CRD for it, or not established yet).
    #[error("kind {group}/{version} {kind} is not served: {source}")]
    NotServed {
        /// The kind's group (empty: the core group).
        group: String,
        /// The version asked for.
        version: String,
        /// The kind.
        kind: String,
        /// What discovery answered.
        #[source]
        source: kube::Error,
    },
    /// Discovery of every group failed.
    #[error("discovery failed: {0}")]
    All(#[source] kube::Error),
}

/// The group-version-kind of `gk` at `api_version` (`group/version` or `version`).
pub fn gvk_of(gk: &GroupKind, api_version: &str) -> GroupVersionKind {
    let version = api_version.split_once('/').map_or(api_version, |(_, v)| v);
    GroupVersionKind::gvk(&gk.group, version, &gk.kind)
}

/// Discovers one kind.
pub async fn discover(
    client: &Client,
    gk: &GroupKind,
    api_version: &str,
) -> Result<Discovered, DiscoveryError> {
    let gvk = gvk_of(gk, api_version);
    kube::discovery::pinned_kind(client, &gvk)
        .await
        .map(|(ar, caps)| Discovered {
            ar,
            namespaced: caps.scope == Scope::Namespaced,
        })
        .map_err(|source| DiscoveryError::NotServed {
            group: gvk.group,
            version: gvk.version,
            kind: gvk.kind,
            source,
        })
}

/// Discovers one kind, retrying under the one backoff policy while it is not served.
/// `not_served` hears of each miss and returns `false` to give up (its listener stopped);
/// `None` then.
pub async fn discover_until_served(
    client: &Client,
    gk: &GroupKind,
    api_version: &str,
    mut not_served: impl FnMut(DiscoveryError) -> bool,
) -> Option<Discovered> {
    let mut delay = DISCOVERY_RETRY_BASE;
    loop {
        match discover(client, gk, api_version).await {
            Ok(found) => return Some(found),
            Err(e) => {
                if !not_served(e) {
                    return None;
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(DISCOVERY_RETRY_MAX);
            }
        }
    }
}

/// Every resource the API server serves: at each group's preferred version, or with
/// `all_versions` at every version it serves.
pub async fn served_resources(
    client: &Client,
    all_versions: bool,
) -> Result<Vec<(ApiResource, ApiCapabilities)>, DiscoveryError> {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .map_err(DiscoveryError::All)?;
    Ok(discovery
        .groups()
        .flat_map(|g| {
            if all_versions {
                g.versions()
                    .flat_map(|v| g.versioned_resources(v))
                    .collect::<Vec<_>>()
            } else {
                g.recommended_resources()
            }
        })
        .collect())
}

/// Forwards a watch's events into `tx`, mapped by `map` (`None`: not forwarded), with kube's
/// default backoff on failures (each reported to `failed`). Returns when `tx` closes or the
/// stream ends.
pub async fn forward<K, S, M>(
    stream: S,
    tx: &mpsc::UnboundedSender<M>,
    mut map: impl FnMut(watcher::Event<K>) -> Option<M>,
    failed: impl Fn(&watcher::Error),
) where
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    let stream = kube::runtime::WatchStreamExt::default_backoff(stream);
    futures::pin_mut!(stream);
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(ev) => {
                if let Some(msg) = map(ev)
                    && tx.send(msg).is_err()
                {
                    return;
                }
            }
            Err(e) => failed(&e),
        }
    }
}

/// [`forward`] in a task of its own.
pub fn spawn_forward<K, S, M>(
    stream: S,
    tx: mpsc::UnboundedSender<M>,
    map: impl FnMut(watcher::Event<K>) -> Option<M> + Send + 'static,
    failed: impl Fn(&watcher::Error) + Send + 'static,
) -> JoinHandle<()>
where
    K: Send + 'static,
    M: Send + 'static,
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    tokio::spawn(async move { forward(stream, &tx, map, failed).await })
}
