//! What the webhook asks of the controller, answered from the API server.
//!
//! - [`LiveCheck`]: an object carries the in-use label but the index knows no relation (a
//!   replica that just started, a watch lagging): before allowing the DELETE, decide from a live
//!   read — list the usages, list the kinds they refer to (metadata only), resolve them with the
//!   same pure [`resolve`] the controller uses into a scratch index, and decide. Slow and rare,
//!   and never a stale allow.
//! - [`KindResolver`]: does `apiVersion`/`kind` exist, and with which scope — from a discovery
//!   snapshot ([`DiscoveryKinds`]), refreshed by the caller, so the webhook's question is a
//!   synchronous map lookup.

use std::collections::{BTreeMap, HashMap};

use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Discovery, Scope as KubeScope};
use lien_api::{ClusterUsage, Usage};
use lien_core::seams::{BoxFuture, KindResolver, LiveCheck, LiveCheckError, Scope};
use lien_core::{Decision, ObjectKey, RelationIndex, decide_delete};
use parking_lot::RwLock;

use crate::cache::{Caches, GroupKind};
use crate::resolve::{UsageView, resolve};

/// A live read failed.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// Listing Usages or ClusterUsages.
    #[error("listing usages: {0}")]
    ListUsages(#[source] kube::Error),
    /// Listing the objects of a kind a usage refers to.
    #[error("listing {kind}: {source}")]
    ListObjects {
        /// The kind.
        kind: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Discovery.
    #[error("discovery: {0}")]
    Discovery(#[source] kube::Error),
    /// The scratch index refused the relations.
    #[error("building the index: {0}")]
    Index(#[source] lien_core::IndexError),
}

impl LiveError {
    /// A bounded label for metrics.
    pub fn category(&self) -> &'static str {
        match self {
            Self::ListUsages(_) => "list_usages",
            Self::ListObjects { .. } => "list_objects",
            Self::Discovery(_) => "discovery",
            Self::Index(_) => "index",
        }
    }
}

/// [`LiveCheck`] against the API server.
#[derive(Clone)]
pub struct ApiLiveCheck {
    client: Client,
}

impl std::fmt::Debug for ApiLiveCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiLiveCheck")
    }
}

impl ApiLiveCheck {
    /// A live check with `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    async fn decide(&self, object: &ObjectKey, uid: Option<&str>) -> Result<Decision, LiveError> {
        let lp = ListParams::default();
        let usages = Api::<Usage>::all(self.client.clone())
            .list(&lp)
            .await
            .map_err(LiveError::ListUsages)?;
        let cluster = Api::<ClusterUsage>::all(self.client.clone())
            .list(&lp)
            .await
            .map_err(LiveError::ListUsages)?;
        let target = GroupKind::new(&object.group, &object.kind);
        let views: Vec<UsageView> = usages
            .items
            .iter()
            .filter_map(UsageView::from_usage)
            .chain(
                cluster
                    .items
                    .iter()
                    .filter_map(UsageView::from_cluster_usage),
            )
            .filter(|v| GroupKind::from_api_version(&v.of.api_version, &v.of.kind) == target)
            .collect();
        let mut kinds: BTreeMap<GroupKind, String> = BTreeMap::new();
        for v in &views {
            for (gk, api_version) in v.kinds() {
                kinds.entry(gk).or_insert_with(|| api_version.to_owned());
            }
        }
        let mut caches = Caches::new();
        for (gk, api_version) in kinds {
            let version = api_version
                .split_once('/')
                .map_or(api_version.as_str(), |(_, v)| v);
            let gvk = GroupVersionKind::gvk(&gk.group, version, &gk.kind);
            let Ok((ar, caps)) = kube::discovery::pinned_kind(&self.client, &gvk).await else {
                caches.mark_unknown(gk);
                continue;
            };
            let list = Api::<DynamicObject>::all_with(self.client.clone(), &ar)
                .list_metadata(&lp)
                .await
                .map_err(|source| LiveError::ListObjects {
                    kind: gk.to_string(),
                    source,
                })?;
            caches.add_kind(
                gk.clone(),
                caps.scope == KubeScope::Namespaced,
                &ar.api_version,
                &ar.plural,
            );
            caches.reset(&gk, list.items.iter().map(|m| &m.metadata));
        }
        let mut index = RelationIndex::new();
        for v in &views {
            let res = resolve(v, &caches);
            index
                .apply(&v.source(), res.relations)
                .map_err(LiveError::Index)?;
        }
        Ok(decide_delete(&index, object, uid))
    }
}

impl LiveCheck for ApiLiveCheck {
    fn check<'a>(
        &'a self,
        object: &'a ObjectKey,
        uid: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Decision, LiveCheckError>> {
        Box::pin(async move {
            self.decide(object, uid)
                .await
                .map_err(|e| LiveCheckError::Read(e.to_string()))
        })
    }
}

/// [`KindResolver`] from a discovery snapshot; call [`DiscoveryKinds::refresh`] at start and
/// whenever CRDs change.
#[derive(Default)]
pub struct DiscoveryKinds {
    kinds: RwLock<HashMap<(String, String), Scope>>,
}

impl std::fmt::Debug for DiscoveryKinds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscoveryKinds")
            .field("kinds", &self.kinds.read().len())
            .finish()
    }
}

impl DiscoveryKinds {
    /// An empty snapshot (every kind unknown until `refresh`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the snapshot with a fresh discovery. Returns how many kinds are served.
    pub async fn refresh(&self, client: &Client) -> Result<usize, LiveError> {
        let discovery = Discovery::new(client.clone())
            .run()
            .await
            .map_err(LiveError::Discovery)?;
        let mut kinds = HashMap::new();
        for group in discovery.groups() {
            for version in group.versions() {
                for (ar, caps) in group.versioned_resources(version) {
                    let scope = match caps.scope {
                        KubeScope::Namespaced => Scope::Namespaced,
                        KubeScope::Cluster => Scope::Cluster,
                    };
                    kinds.insert((ar.api_version.clone(), ar.kind.clone()), scope);
                }
            }
        }
        let n = kinds.len();
        *self.kinds.write() = kinds;
        Ok(n)
    }
}

impl KindResolver for DiscoveryKinds {
    fn scope(&self, api_version: &str, kind: &str) -> Option<Scope> {
        self.kinds
            .read()
            .get(&(api_version.to_owned(), kind.to_owned()))
            .copied()
    }
}
