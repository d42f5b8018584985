//! The one watch-and-discovery service every part asks for kinds: the controller's source and
//! kind watches, the CascadeRule reconciler's rule, parent and child watches, the live check,
//! the webhook configuration's reconciler, the webhook's kind snapshot (`lien::runtime`, which
//! follows the controller's CRD watch, `Controller::crd_changes`: one CRD watch per process),
//! `lien uninstall` and the kubectl plugin.
//!
//! A crate of its own, below both the controller and the plugin: the plugin asks it for kinds
//! without linking the controller (it depends on `lien-decide` for the pure code, never on
//! `lien-controller`, which re-exports this crate as `lien_controller::watch`).
//!
//! - [`discover`]: one kind's resource and scope (`pinned_kind`), with a typed error naming
//!   the kind; [`discover_until_served`] retries it under the one backoff policy
//!   ([`DISCOVERY_RETRY_BASE`] doubling to [`DISCOVERY_RETRY_MAX`]) while the kind is not
//!   served (a CRD installed later).
//! - [`served_resources`]: every served resource, for a whole-cluster look (the webhook's kind
//!   snapshot, the plugin's `TYPE` names, the dependents of a foreground deletion, what
//!   `lien uninstall` strips): core first, then the groups in the server's order, each at its
//!   preferred version first; with names (singular, short names) and verbs.
//! - [`forward`] / [`spawn_forward`]: the one "watch an `Api` with kube's default backoff,
//!   forwarded into an event loop's channel" loop, the only place a watcher is made: a failed
//!   list or watch is retried, never fatal; the loop ends when the channel closes (its event
//!   loop stopped) or the task is aborted. [`forward_while_served`] also ends when the kind
//!   stops being served (a 404: its CRD deleted), for the caller to discover it again.

use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use futures::future::try_join_all;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroupList, APIResourceList};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Scope;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use lien_core::GroupKind;
use serde::de::DeserializeOwned;
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
    /// The kind is served, but the API server refuses the caller a list or watch of it (403).
    #[error(
        "Lien's ServiceAccount may not list and watch {resource}: grant it (`lien manifests --resource {resource}`, or the Helm value rbac.protectedResources) and Lien retries within 10 s"
    )]
    Forbidden {
        /// The resource to grant: `plural`, or `plural.group`.
        resource: String,
    },
}

impl DiscoveryError {
    /// What the API server (or the connection) answered.
    pub fn into_kube(self) -> kube::Error {
        match self {
            Self::NotServed { source, .. } | Self::All(source) => source,
            Self::Forbidden { resource } => kube::Error::Api(
                kube::core::Status::failure(
                    &format!("the API server refuses a list or watch of {resource}"),
                    "Forbidden",
                )
                .with_code(403)
                .boxed(),
            ),
        }
    }
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

/// One served resource, as the whole-cluster snapshot ([`served_resources`]) lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedResource {
    /// For the client (group, version, kind, plural).
    pub ar: ApiResource,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
    /// `singularName`, or the kind lowercased when the server leaves it empty (as kubectl
    /// takes it).
    pub singular: String,
    /// `shortNames`.
    pub short_names: Vec<String>,
    /// The verbs it supports (`list`, `patch`, …).
    pub verbs: Vec<String>,
}

impl ServedResource {
    /// Its group and kind.
    pub fn gk(&self) -> GroupKind {
        GroupKind::new(&self.ar.group, &self.ar.kind)
    }

    /// Whether it supports `verb` (`kube::discovery::verbs`).
    pub fn supports(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }
}

/// Which versions a whole-cluster snapshot reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Versions {
    /// Each group's preferred version (what kubectl resolves names against).
    Preferred,
    /// Every version a group serves, the preferred one first (a kind at any `apiVersion`).
    All,
}

/// The group versions to read of `groups` (`group/version`): per group its preferred
/// version (the first listed when the server names none), then with [`Versions::All`] the
/// others in the server's order. A group listing no version has nothing to read.
pub fn group_versions(groups: &APIGroupList, versions: Versions) -> Vec<String> {
    let mut out = Vec::new();
    for g in &groups.groups {
        let Some(preferred) = g.preferred_version.as_ref().or(g.versions.first()) else {
            continue;
        };
        out.push(preferred.group_version.clone());
        if versions == Versions::All {
            out.extend(
                g.versions
                    .iter()
                    .filter(|v| v.group_version != preferred.group_version)
                    .map(|v| v.group_version.clone()),
            );
        }
    }
    out
}

/// The resources of one discovery document, in its order; subresources (`pods/log`) are not
/// resources of their own and are left out.
pub fn resources_of(list: APIResourceList) -> Vec<ServedResource> {
    let (group, version) = match list.group_version.split_once('/') {
        Some((g, v)) => (g.to_owned(), v.to_owned()),
        None => (String::new(), list.group_version.clone()),
    };
    list.resources
        .into_iter()
        .filter(|r| !r.name.contains('/'))
        .map(|r| ServedResource {
            ar: ApiResource {
                group: group.clone(),
                version: version.clone(),
                api_version: list.group_version.clone(),
                kind: r.kind.clone(),
                plural: r.name,
            },
            namespaced: r.namespaced,
            singular: if r.singular_name.is_empty() {
                r.kind.to_lowercase()
            } else {
                r.singular_name
            },
            short_names: r.short_names.unwrap_or_default(),
            verbs: r.verbs,
        })
        .collect()
}

/// Every resource the API server serves (see [`Versions`]): the core group first, then the
/// groups in the server's order. One request per group version, all at once; any failing
/// fails the snapshot (a partial one would call kinds unknown that are served).
pub async fn served_resources(
    client: &Client,
    versions: Versions,
) -> Result<Vec<ServedResource>, DiscoveryError> {
    let groups = client
        .list_api_groups()
        .await
        .map_err(DiscoveryError::All)?;
    // The core group has had one version, v1, since Kubernetes 1.0; kube's discovery prefers it
    // by name too.
    let core = client.list_core_api_resources("v1");
    // A group version gone between the two requests (a CRD deleted meanwhile: kube-apiserver
    // answers its path with a bare 404) is not served any more, not a failed discovery — found
    // on the real control plane, where every refresh during a CRD's deletion failed so.
    let lists = group_versions(&groups, versions)
        .into_iter()
        .map(|gv| async move {
            match client.list_api_group_resources(&gv).await {
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
                other => other.map(Some),
            }
        });
    let (core, lists) =
        futures::try_join!(core, try_join_all(lists)).map_err(DiscoveryError::All)?;
    Ok(std::iter::once(core)
        .chain(lists.into_iter().flatten())
        .flat_map(resources_of)
        .collect())
}

/// Watches every object of `api` (a list, then a watch, as kube's watcher does) and forwards
/// the events into `tx`, mapped by `map` (`None`: not forwarded), with kube's default backoff
/// on failures (each reported to `failed`). Returns when `tx` closes.
pub async fn forward<K, M>(
    api: Api<K>,
    tx: &mpsc::UnboundedSender<M>,
    map: impl FnMut(watcher::Event<K>) -> Option<M>,
    failed: impl Fn(&watcher::Error),
) where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    forward_until(api, tx, map, failed, |_| None).await;
}

/// Why [`forward_while_served`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The listener's channel closed: its event loop stopped.
    Closed,
    /// The API server answered 404 to the list or the watch: the kind is not served any more
    /// (its CRD was deleted). The caller discovers it again ([`discover_until_served`]), and a
    /// CRD made again is watched from a fresh list, not after a backoff that grew while the
    /// kind was away.
    NotServed,
    /// The API server answered 403 to the list or the watch: the caller's RBAC does not grant
    /// the resource. The caller says so (a status the person who can grant it reads) and
    /// tries again on its own schedule, rather than after kube's backoff of up to minutes.
    Forbidden,
}

/// [`forward`], for a kind that may stop being served (a custom resource): returns
/// [`Ended::NotServed`] when the API server says the resource does not exist, rather than
/// retrying a list that cannot succeed until the CRD is back, and [`Ended::Forbidden`] when it
/// refuses the caller the list or watch.
pub async fn forward_while_served<K, M>(
    api: Api<K>,
    tx: &mpsc::UnboundedSender<M>,
    map: impl FnMut(watcher::Event<K>) -> Option<M>,
    failed: impl Fn(&watcher::Error),
) -> Ended
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    forward_until(api, tx, map, failed, |e| {
        if is_not_served(e) {
            Some(Ended::NotServed)
        } else if is_forbidden(e) {
            Some(Ended::Forbidden)
        } else {
            None
        }
    })
    .await
}

/// A resource as RBAC and `lien manifests --resource` name it: `plural` in the core group, else
/// `plural.group`.
pub fn grantable_resource(ar: &ApiResource) -> String {
    if ar.group.is_empty() {
        ar.plural.clone()
    } else {
        format!("{}.{}", ar.plural, ar.group)
    }
}

/// Whether a watcher's failure is the API server refusing the list or the start of the watch
/// (403: RBAC does not grant it).
pub fn is_forbidden(e: &watcher::Error) -> bool {
    matches!(
        e,
        watcher::Error::InitialListFailed(kube::Error::Api(s))
            | watcher::Error::WatchStartFailed(kube::Error::Api(s))
            if s.code == 403
    )
}

/// Whether a watcher's failure says its resource is not served: a 404 to the list or to the
/// start of the watch (a 410 Gone is the watcher's own relist, never this).
pub fn is_not_served(e: &watcher::Error) -> bool {
    matches!(
        e,
        watcher::Error::InitialListFailed(kube::Error::Api(s))
            | watcher::Error::WatchStartFailed(kube::Error::Api(s))
            if s.code == 404
    )
}

async fn forward_until<K, M>(
    api: Api<K>,
    tx: &mpsc::UnboundedSender<M>,
    mut map: impl FnMut(watcher::Event<K>) -> Option<M>,
    failed: impl Fn(&watcher::Error),
    stop: impl Fn(&watcher::Error) -> Option<Ended>,
) -> Ended
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(ev) => {
                if let Some(msg) = map(ev)
                    && tx.send(msg).is_err()
                {
                    return Ended::Closed;
                }
            }
            Err(e) => match stop(&e) {
                Some(ended) => return ended,
                None => failed(&e),
            },
        }
    }
    // The watcher's stream does not end on its own; treat an end as the listener's.
    Ended::Closed
}

/// [`forward`] in a task of its own.
pub fn spawn_forward<K, M>(
    api: Api<K>,
    tx: mpsc::UnboundedSender<M>,
    map: impl FnMut(watcher::Event<K>) -> Option<M> + Send + 'static,
    failed: impl Fn(&watcher::Error) + Send + 'static,
) -> JoinHandle<()>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    M: Send + 'static,
{
    tokio::spawn(async move { forward(api, &tx, map, failed).await })
}

/// A task aborted when this is dropped: a [`spawn_forward`] whose listener returns on more than
/// one path ends with it on every one.
#[derive(Debug)]
pub struct AbortOnDrop(pub JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        APIGroup, APIResource, GroupVersionForDiscovery,
    };

    use super::*;

    fn version(group_version: &str) -> GroupVersionForDiscovery {
        GroupVersionForDiscovery {
            group_version: group_version.into(),
            version: group_version
                .split_once('/')
                .map_or(group_version, |(_, v)| v)
                .into(),
        }
    }

    fn group(name: &str, versions: &[&str], preferred: Option<&str>) -> APIGroup {
        APIGroup {
            name: name.into(),
            preferred_version: preferred.map(version),
            versions: versions.iter().map(|v| version(v)).collect(),
            ..APIGroup::default()
        }
    }

    fn resource(name: &str, kind: &str, namespaced: bool) -> APIResource {
        APIResource {
            name: name.into(),
            kind: kind.into(),
            namespaced,
            verbs: vec!["get".into(), "list".into()],
            ..APIResource::default()
        }
    }

    #[test]
    fn the_preferred_version_is_read_first_and_alone_unless_all_are_asked_for() {
        let groups = APIGroupList {
            groups: vec![
                group(
                    "example.com",
                    &["example.com/v2", "example.com/v1"],
                    Some("example.com/v1"),
                ),
                // No preferred version named: the first listed stands in for it.
                group("apps", &["apps/v1"], None),
                group("empty.io", &[], None),
            ],
        };
        assert_eq!(
            group_versions(&groups, Versions::Preferred),
            ["example.com/v1", "apps/v1"]
        );
        assert_eq!(
            group_versions(&groups, Versions::All),
            ["example.com/v1", "example.com/v2", "apps/v1"]
        );
    }

    #[test]
    fn a_discovery_document_gives_its_resources_without_subresources() {
        let mut pods = resource("pods", "Pod", true);
        pods.short_names = Some(vec!["po".into()]);
        pods.singular_name = "pod".into();
        let list = APIResourceList {
            group_version: "v1".into(),
            resources: vec![
                pods,
                resource("pods/log", "Pod", true),
                // No singular name served: the kind, lowercased, as kubectl takes it.
                resource("namespaces", "Namespace", false),
            ],
        };
        let got = resources_of(list);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].ar.api_version, "v1");
        assert_eq!(got[0].ar.group, "");
        assert_eq!(got[0].ar.version, "v1");
        assert_eq!(got[0].ar.plural, "pods");
        assert_eq!(got[0].singular, "pod");
        assert_eq!(got[0].short_names, ["po"]);
        assert!(got[0].namespaced);
        assert!(got[0].supports("list") && !got[0].supports("patch"));
        assert_eq!(got[1].singular, "namespace");
        assert!(!got[1].namespaced);
        assert_eq!(got[1].gk(), GroupKind::new("", "Namespace"));

        let list = APIResourceList {
            group_version: "example.com/v1".into(),
            resources: vec![resource("widgets", "Widget", true)],
        };
        let got = resources_of(list);
        assert_eq!(
            (got[0].ar.group.as_str(), got[0].ar.version.as_str()),
            ("example.com", "v1")
        );
    }
}
