//! What the webhook asks of the controller, answered from the API server.
//!
//! - [`LiveCheck`]: an object carries the in-use label but the index knows no relation (a
//!   replica that just started, a watch lagging): before allowing the DELETE, decide from a live
//!   read — list the usages, list the kinds they refer to (metadata only), resolve them with the
//!   same pure [`resolve`] the controller uses into a scratch index; add the relations of
//!   every DependencyRule whose `of` kind is the object's, evaluated live against the object
//!   and the rule's `by` objects in scope; and decide. Slow and rare, and never a stale allow.
//! - [`KindResolver`]: does `apiVersion`/`kind` exist, with which scope and under which resource
//!   — from a discovery snapshot ([`DiscoveryKinds`]), refreshed by the caller, so the webhook's
//!   question is a synchronous map lookup.
//! - [`AccessCheck`]: may the creator of a Usage update the object it protects — a
//!   `SubjectAccessReview` ([`ApiAccessCheck`]), so the cluster's own authorizers (RBAC, webhook
//!   authorizers…) decide, exactly as they would for the update itself.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::watch::Discovered;
use arc_swap::ArcSwap;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::ApiResource;
use lien_api::{ClusterUsage, DependencyRule, DependencyScope, Usage};
use lien_core::seams::{
    AccessCheck, AccessCheckError, AccessDecision, AccessRequest, BoxFuture, KindResolver,
    LiveCheck, LiveCheckError, Scope,
};
use lien_core::{Decision, IndexError, JoinError, ObjectKey, RelationIndex, decide_delete};

use crate::cache::{Caches, GroupKind};
use crate::resolve::{UsageView, resolve};
use crate::rules::{KindReader, Program, Read, RuleView, SideEval};

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
    #[error("{0}")]
    Discovery(#[source] crate::watch::DiscoveryError),
    /// A rule's CEL failed on an object the check needs.
    #[error("DependencyRule {rule}: {field} failed: {message}")]
    Evaluation {
        /// The rule.
        rule: String,
        /// The field.
        field: String,
        /// Why.
        message: String,
    },
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
            Self::Evaluation { .. } => "evaluation",
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
            let Ok(Discovered { ar, namespaced }) =
                crate::watch::discover(&self.client, &gk, &api_version).await
            else {
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
            caches.add_kind(gk.clone(), namespaced, &ar.api_version, &ar.plural);
            caches.reset(&gk, list.items.iter().map(|m| &m.metadata));
        }
        let mut index = RelationIndex::new();
        for v in &views {
            let res = resolve(v, &caches);
            index
                .apply(&v.source(), res.relations)
                .map_err(LiveError::Index)?;
        }
        self.rule_relations(object, &target, &mut index).await?;
        Ok(decide_delete(&index, object, uid))
    }

    /// The relations of `object` from every DependencyRule whose `of` kind is its kind,
    /// evaluated live: the object itself, then the rule's `by` objects in scope (in pages, each
    /// reduced to its keys and dropped), joined by the same index-held join the controller
    /// uses (`RelationIndex::add_join`), attached once fed and then removed (its relations
    /// stay, as the rule's). A rule that does not compile holds nothing (as in the controller).
    /// The object's own keys failing fails the check (the webhook then refuses: never a stale
    /// allow); a `by` object whose CEL fails joins nothing, as one the controller never
    /// evaluated.
    async fn rule_relations(
        &self,
        object: &ObjectKey,
        target: &GroupKind,
        index: &mut RelationIndex,
    ) -> Result<(), LiveError> {
        let rules = Api::<DependencyRule>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(LiveError::ListUsages)?;
        for rule in &rules.items {
            let Some(view) = RuleView::from_rule(rule) else {
                continue;
            };
            if &view.of() != target {
                continue;
            }
            let Ok(program) = Program::compile(&view.spec) else {
                continue;
            };
            let Some(of_ar) = self.discover(&view.spec.of.api_version, &view.of()).await else {
                continue;
            };
            let Some(by_ar) = self.discover(&view.spec.by.api_version, &view.by()).await else {
                continue;
            };
            let of_api: Api<DynamicObject> = match &object.namespace {
                Some(ns) => Api::namespaced_with(self.client.clone(), ns, &of_ar.0),
                None => Api::all_with(self.client.clone(), &of_ar.0),
            };
            let Some(of) =
                of_api
                    .get_opt(&object.name)
                    .await
                    .map_err(|source| LiveError::ListObjects {
                        kind: target.to_string(),
                        source,
                    })?
            else {
                continue;
            };
            let reader = KindReader {
                reads: vec![Read {
                    program: program.clone(),
                    of: true,
                    by: view.of() == view.by(),
                }],
            };
            let eval_error = |field: &str, message: String| LiveError::Evaluation {
                rule: view.name.clone(),
                field: field.to_owned(),
                message,
            };
            let of_uid = of.metadata.uid.clone();
            let json = serde_json::to_value(&of).unwrap_or_default();
            let of_keys = match reader.reduce(&json).pop().and_then(|e| e.of) {
                Some(SideEval::Ok { keys, .. }) => keys,
                Some(SideEval::Failed { field, message }) => {
                    return Err(eval_error(field, message));
                }
                None => continue,
            };
            // Dependents: in the object's namespace under SameNamespace, everywhere otherwise.
            let by_api: Api<DynamicObject> = match (&view.spec.scope, &object.namespace, by_ar.1) {
                (DependencyScope::SameNamespace, Some(ns), true) => {
                    Api::namespaced_with(self.client.clone(), ns, &by_ar.0)
                }
                (DependencyScope::SameNamespace, _, _) => continue,
                (DependencyScope::Cluster, _, _) => Api::all_with(self.client.clone(), &by_ar.0),
            };
            // The join lives in the scratch index (dropped with it if a list below fails).
            let join = index
                .add_join(view.join_config(program.cel.keyed()))
                .map_err(|e| match e {
                    JoinError::Full(full) | JoinError::Detached(full) => {
                        LiveError::Index(IndexError::Full(full))
                    }
                    e @ JoinError::WrongKind { .. } => eval_error("spec.of", e.to_string()),
                })?;
            if let Some(mut j) = index.join_mut(join) {
                j.upsert_of(object, of_uid.as_deref(), Some(of_keys))
                    .map_err(|e| eval_error("spec.of", e.to_string()))?;
            }
            let by_reader = KindReader {
                reads: vec![Read {
                    program: program.clone(),
                    of: false,
                    by: true,
                }],
            };
            let mut lp = ListParams::default().limit(500);
            loop {
                let page = by_api
                    .list(&lp)
                    .await
                    .map_err(|source| LiveError::ListObjects {
                        kind: view.by().to_string(),
                        source,
                    })?;
                for o in page.items {
                    let Some(name) = o.metadata.name.clone() else {
                        continue;
                    };
                    let key = view.by().key(o.metadata.namespace.as_deref(), &name);
                    let uid = o.metadata.uid.clone();
                    let json = serde_json::to_value(&o).unwrap_or_default();
                    match by_reader.reduce(&json).pop().and_then(|e| e.by) {
                        Some(SideEval::Ok { keys, when }) => {
                            if let Some(mut j) = index.join_mut(join) {
                                j.upsert_by(&key, uid.as_deref(), Some(keys), when)
                                    .map_err(|e| eval_error("spec.by", e.to_string()))?;
                            }
                        }
                        // As for an object the controller never evaluated: it joins nothing
                        // (the controller's status counts such errors).
                        Some(SideEval::Failed { .. }) | None => {}
                    }
                }
                match page.metadata.continue_ {
                    Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
                    _ => break,
                }
            }
            // The join's relations become the rule's (as `apply` of them did); the join itself,
            // and what it pins of objects that relate nothing, is not needed any more.
            let attached = index.join_mut(join).map_or(Ok(0), |mut j| j.attach());
            index.remove_join(join);
            attached.map_err(LiveError::Index)?;
        }
        Ok(())
    }

    /// The resource of a kind and whether it is namespaced; `None` when it is not served.
    async fn discover(&self, api_version: &str, gk: &GroupKind) -> Option<(ApiResource, bool)> {
        let found = crate::watch::discover(&self.client, gk, api_version)
            .await
            .ok()?;
        Some((found.ar, found.namespaced))
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

/// `apiVersion` → `kind` → (scope, resource plural): looked up by two `&str`, no key built.
type KindMap = HashMap<String, HashMap<String, (Scope, String)>>;

/// [`KindResolver`] from a discovery snapshot; call [`DiscoveryKinds::refresh`] at start and
/// whenever CRDs change. The snapshot is replaced whole, so readers (the webhook's Usage checks)
/// load it without a lock and a refresh never waits for them, nor they for it.
#[derive(Default)]
pub struct DiscoveryKinds {
    kinds: ArcSwap<KindMap>,
}

impl std::fmt::Debug for DiscoveryKinds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n: usize = self.kinds.load().values().map(HashMap::len).sum();
        f.debug_struct("DiscoveryKinds").field("kinds", &n).finish()
    }
}

impl DiscoveryKinds {
    /// An empty snapshot (every kind unknown until `refresh`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the snapshot with a fresh discovery. Returns how many kinds are served.
    pub async fn refresh(&self, client: &Client) -> Result<usize, LiveError> {
        self.refresh_changed(client).await.map(|(n, _)| n)
    }

    /// As [`DiscoveryKinds::refresh`]; also says whether the snapshot changed. kube-apiserver's
    /// discovery follows a CRD's creation or deletion a moment after a watch of CRDs sees it
    /// (apiextensions-apiserver's discovery controller runs on its own), so a refresh made on
    /// a CRD watch's event may find the kinds as they were: the caller asks again until this
    /// says `true` (`lien::runtime`'s refresh loop).
    pub async fn refresh_changed(&self, client: &Client) -> Result<(usize, bool), LiveError> {
        let resources = crate::watch::served_resources(client, crate::watch::Versions::All)
            .await
            .map_err(LiveError::Discovery)?;
        let mut kinds = KindMap::new();
        let mut n = 0;
        for r in resources {
            let scope = if r.namespaced {
                Scope::Namespaced
            } else {
                Scope::Cluster
            };
            let previous = kinds
                .entry(r.ar.api_version)
                .or_default()
                .insert(r.ar.kind, (scope, r.ar.plural));
            n += usize::from(previous.is_none());
        }
        let changed = **self.kinds.load() != kinds;
        self.kinds.store(Arc::new(kinds));
        Ok((n, changed))
    }
}

impl KindResolver for DiscoveryKinds {
    fn scope(&self, api_version: &str, kind: &str) -> Option<Scope> {
        let kinds = self.kinds.load();
        kinds.get(api_version)?.get(kind).map(|(scope, _)| *scope)
    }

    fn resource(&self, api_version: &str, kind: &str) -> Option<String> {
        let kinds = self.kinds.load();
        kinds
            .get(api_version)?
            .get(kind)
            .map(|(_, plural)| plural.clone())
    }
}

/// [`AccessCheck`] with a `SubjectAccessReview` (`authorization.k8s.io/v1`): the API server
/// asks its authorizers whether the user may do what the request says, with the user's name,
/// UID, groups and extra passed on as kube-apiserver received them. Lien's service account
/// needs `create` on `subjectaccessreviews`.
#[derive(Clone)]
pub struct ApiAccessCheck {
    client: Client,
}

impl std::fmt::Debug for ApiAccessCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiAccessCheck")
    }
}

impl ApiAccessCheck {
    /// An access check with `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

/// The `SubjectAccessReview` for `request`. Empty strings and collections are left out, as
/// Go's `omitempty` would: an empty `namespace` means every namespace, an empty `name` every
/// object.
pub fn subject_access_review(request: &AccessRequest) -> SubjectAccessReview {
    let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    let u = &request.user;
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: non_empty(&u.username),
            uid: non_empty(&u.uid),
            groups: (!u.groups.is_empty()).then(|| u.groups.clone()),
            extra: (!u.extra.is_empty()).then(|| u.extra.clone()),
            resource_attributes: Some(ResourceAttributes {
                verb: non_empty(&request.verb),
                group: Some(request.group.clone()),
                resource: non_empty(&request.resource),
                namespace: request.namespace.clone().filter(|ns| !ns.is_empty()),
                name: request.name.clone().filter(|n| !n.is_empty()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    }
}

/// The decision a review's status carries. When an authorizer could not evaluate (a webhook
/// authorizer was down…) an allow still stands — another authorizer decided — but a refusal
/// may be wrong, so its reason says why.
pub fn decision_of(status: SubjectAccessReviewStatus) -> AccessDecision {
    if status.allowed {
        return AccessDecision::Allowed;
    }
    let mut reasons: Vec<String> = status
        .reason
        .into_iter()
        .filter(|r| !r.is_empty())
        .collect();
    if let Some(error) = status.evaluation_error.filter(|e| !e.is_empty()) {
        reasons.push(format!("evaluation error: {error}"));
    }
    AccessDecision::Denied {
        reason: reasons.join("; "),
    }
}

impl AccessCheck for ApiAccessCheck {
    fn check<'a>(
        &'a self,
        request: &'a AccessRequest,
    ) -> BoxFuture<'a, Result<AccessDecision, AccessCheckError>> {
        Box::pin(async move {
            let review = subject_access_review(request);
            let api = Api::<SubjectAccessReview>::all(self.client.clone());
            // A review creates nothing, so asking again is always safe. A connection the API
            // server closed while it idled in the pool fails the first send (`SendRequest`:
            // seen against kube-apiserver under load, refusing a Usage with "retry shortly");
            // one more try, on a fresh connection, answers. An answer from the API server, even
            // an error, is final.
            let answer = match api.create(&PostParams::default(), &review).await {
                Err(e) if !matches!(e, kube::Error::Api(_)) => {
                    tracing::debug!(error = %e, "SubjectAccessReview not sent; asking once more");
                    api.create(&PostParams::default(), &review).await
                }
                answered => answered,
            }
            .map_err(|e| AccessCheckError::Review(e.to_string()))?;
            let status = answer.status.ok_or_else(|| {
                AccessCheckError::Review(
                    "the SubjectAccessReview came back without a status".into(),
                )
            })?;
            Ok(decision_of(status))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lien_core::seams::Requester;

    /// An `ApiAccessCheck` over a fake API server: its first answer is `first` (`None`: the
    /// request was never sent, as with a pooled connection the server had closed), then an
    /// allowing review. Returns the decision and how many requests the server saw.
    async fn check_after(first: Option<u16>) -> (Result<AccessDecision, String>, usize) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let service = tower::service_fn(move |_: http::Request<kube::client::Body>| {
            let n = seen.fetch_add(1, Ordering::SeqCst);
            async move {
                let (code, body) = match (n, first) {
                    (0, None) => {
                        return Err::<http::Response<kube::client::Body>, tower::BoxError>(
                            "connection closed before message completed".into(),
                        );
                    }
                    (0, Some(code)) => (
                        code,
                        serde_json::json!({"kind": "Status", "apiVersion": "v1",
                            "status": "Failure", "code": code, "reason": "Forbidden",
                            "message": "no"}),
                    ),
                    _ => (
                        201,
                        serde_json::json!({"apiVersion": "authorization.k8s.io/v1",
                            "kind": "SubjectAccessReview", "spec": {},
                            "status": {"allowed": true}}),
                    ),
                };
                Ok(http::Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(
                        serde_json::to_vec(&body).expect("json"),
                    ))
                    .expect("response"))
            }
        });
        let check = ApiAccessCheck {
            client: Client::new(service, "default"),
        };
        let request = AccessRequest {
            user: Requester {
                username: "alice".into(),
                uid: String::new(),
                groups: vec![],
                extra: BTreeMap::new(),
            },
            verb: "update".into(),
            group: String::new(),
            resource: "configmaps".into(),
            namespace: Some("team-b".into()),
            name: Some("db".into()),
        };
        let decision = check.check(&request).await.map_err(|e| e.to_string());
        (decision, calls.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn a_review_that_was_never_sent_is_asked_once_more() {
        assert_eq!(check_after(None).await, (Ok(AccessDecision::Allowed), 2));
    }

    #[tokio::test]
    async fn an_answer_of_the_api_server_is_final_even_an_error() {
        let (decision, calls) = check_after(Some(403)).await;
        assert_eq!(calls, 1);
        assert!(decision.is_err(), "{decision:?}");
    }

    #[test]
    fn reviews_ask_what_the_request_says_leaving_empty_fields_out() {
        let mut extra = BTreeMap::new();
        extra.insert("scopes".to_string(), vec!["a".to_string()]);
        let request = AccessRequest {
            user: Requester {
                username: "alice".into(),
                uid: String::new(),
                groups: vec!["dev".into()],
                extra,
            },
            verb: "update".into(),
            group: String::new(),
            resource: "configmaps".into(),
            namespace: Some("team-b".into()),
            name: None,
        };
        let json = serde_json::to_value(subject_access_review(&request)).expect("json");
        assert_eq!(
            json["spec"],
            serde_json::json!({"user": "alice", "groups": ["dev"], "extra": {"scopes": ["a"]},
                "resourceAttributes": {"verb": "update", "group": "", "resource": "configmaps",
                    "namespace": "team-b"}})
        );
    }

    #[test]
    fn statuses_become_decisions() {
        let status = |allowed: bool, reason: Option<&str>, error: Option<&str>| {
            decision_of(SubjectAccessReviewStatus {
                allowed,
                reason: reason.map(str::to_owned),
                evaluation_error: error.map(str::to_owned),
                ..Default::default()
            })
        };
        assert_eq!(
            status(true, Some("RBAC: x"), Some("webhook down")),
            AccessDecision::Allowed
        );
        assert_eq!(
            status(false, None, None),
            AccessDecision::Denied {
                reason: String::new()
            }
        );
        assert_eq!(
            status(false, Some("no"), Some("webhook down")),
            AccessDecision::Denied {
                reason: "no; evaluation error: webhook down".into()
            }
        );
    }
}
