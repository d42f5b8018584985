//! The API server's state and what every verb shares: its store and registry, its
//! configuration, what a request addresses ([`Target`]), authorization, and how a stored
//! object is shown at a version. The verbs themselves are in `read`, `write`, `scale` and
//! `eviction`; what the server creates at start in `bootstrap`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use serde_json::Value;

use super::{events, services, tokens};
use crate::auth::UserInfo;
use crate::authz::{Attributes, Authorization, Decision, RbacPolicy};
use crate::error::ApiError;
use crate::registry::{Registry, ResourceType};
use crate::store::Store;

/// Tunables. The defaults are kube-apiserver's and kube-controller-manager's; tests shorten the
/// slow ones.
#[derive(Debug, Clone)]
pub struct Config {
    /// Changes kept for watch resumption; older resourceVersions get `410 Gone`.
    pub watch_history: usize,
    /// How far a live watcher may fall behind before it is closed.
    pub watch_buffer: usize,
    /// Garbage collector retry backoff for a refused delete: first delay…
    pub gc_backoff_base: Duration,
    /// …doubling up to this (kube-controller-manager: 5 ms to 1000 s).
    pub gc_backoff_max: Duration,
    /// How soon the namespace controller looks again at a namespace whose content remains.
    pub namespace_requeue: Duration,
    /// Interval between watch bookmarks.
    pub bookmark_interval: Duration,
    /// Watch duration when the client sets no `timeoutSeconds`.
    pub default_watch_timeout: Duration,
    /// Webhook `clientConfig.service` (namespace, name) → the local addresses of its endpoints,
    /// tried in order (an address that refuses the connection is skipped, as kube-proxy skips
    /// a not-ready endpoint).
    pub webhook_services: HashMap<(String, String), Vec<SocketAddr>>,
    /// How requests and SubjectAccessReviews are authorized (default: every authenticated user
    /// may do everything).
    pub authorization: Authorization,
    /// What the API server presents to webhooks: the kubeconfig its AdmissionConfiguration's
    /// `kubeConfigFile` would name. `None`: [`crate::Sandbox::start`] issues a client
    /// certificate from the sandbox's CA and presents it to every webhook (the default user
    /// `*`), so a webhook can authenticate the sandbox by trusting that CA; an empty
    /// [`WebhookKubeconfig`](crate::admission::WebhookKubeconfig) presents nothing.
    pub admission_kubeconfig: Option<crate::admission::WebhookKubeconfig>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            watch_history: 10_000,
            watch_buffer: 10_000,
            gc_backoff_base: Duration::from_millis(5),
            gc_backoff_max: Duration::from_secs(1000),
            namespace_requeue: Duration::from_secs(1),
            bookmark_interval: Duration::from_secs(60),
            default_watch_timeout: Duration::from_secs(1800),
            webhook_services: HashMap::new(),
            authorization: Authorization::default(),
            admission_kubeconfig: None,
        }
    }
}

/// What a request addresses: a resource at a version, and optionally a namespace, a name and a
/// subresource.
#[derive(Debug, Clone)]
pub struct Target {
    pub resource: Arc<ResourceType>,
    pub version: String,
    pub namespace: String,
    pub name: String,
    pub subresource: String,
}

impl Target {
    /// The structural schema of the version addressed, for a custom resource.
    pub fn schema(&self) -> Option<&serde_json::Value> {
        self.resource
            .version(&self.version)
            .and_then(|v| v.schema.as_ref())
    }

    /// The kind addressed, as server-side apply and managedFields walk it.
    pub fn typed(&self) -> crate::patch::Typed<'_> {
        crate::patch::Typed {
            group: &self.resource.group,
            version: &self.version,
            kind: &self.resource.kind,
            schema: self.schema(),
        }
    }

    pub fn new(resource: Arc<ResourceType>, version: &str, namespace: &str, name: &str) -> Self {
        Target {
            resource,
            version: version.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            subresource: String::new(),
        }
    }

    pub fn with_subresource(mut self, subresource: &str) -> Self {
        self.subresource = subresource.to_string();
        self
    }

    pub(super) fn object_key(&self) -> (String, String) {
        let ns = if self.resource.namespaced {
            self.namespace.clone()
        } else {
            String::new()
        };
        (ns, self.name.clone())
    }

    pub(super) fn not_found(&self) -> ApiError {
        ApiError::not_found(&self.resource.group, &self.resource.plural, &self.name)
    }
}

pub struct ApiServer {
    pub(super) store: Mutex<Store>,
    pub(super) registry: RwLock<Registry>,
    pub config: Config,
    pub(super) admission: crate::admission::Dispatcher,
    pub(super) service_allocator: services::Allocator,
    /// Signs and verifies the service account tokens TokenRequest issues.
    pub(super) tokens: Option<tokens::TokenSigner>,
    /// The address it serves on, once it serves (`publish_endpoints`).
    pub(super) serving: std::sync::OnceLock<std::net::SocketAddr>,
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServer").finish_non_exhaustive()
    }
}

impl ApiServer {
    pub fn new(config: Config) -> Arc<Self> {
        let store = Store::new(config.watch_history, config.watch_buffer);
        let admission = crate::admission::Dispatcher::new(crate::admission::DispatcherConfig {
            services: config.webhook_services.clone(),
            kubeconfig: config.admission_kubeconfig.clone().unwrap_or_default(),
        });
        let server = Arc::new(ApiServer {
            store: Mutex::new(store),
            registry: RwLock::new(Registry::with_builtins()),
            config,
            admission,
            service_allocator: services::Allocator::default(),
            tokens: tokens::TokenSigner::generate().ok(),
            serving: std::sync::OnceLock::new(),
        });
        server.bootstrap();
        server
    }

    /// The address and port it serves on, as `/api` advertises it (`serverAddressByClientCIDRs`);
    /// `None` before it serves.
    pub fn serving_address(&self) -> Option<std::net::SocketAddr> {
        self.serving.get().copied()
    }

    /// Whether `attrs` is allowed, by the configured [`Authorization`]. In RBAC mode the policy
    /// is read from the store at each call: a binding applies from the moment it is written, as
    /// kube-apiserver's informer-fed authorizer applies it a moment later.
    pub fn authorize(&self, attrs: &Attributes) -> Decision {
        match self.config.authorization {
            Authorization::AlwaysAllow => {
                Decision::Allow("the sandbox authorizes every authenticated user".to_string())
            }
            Authorization::Rbac => crate::authz::authorize(&self.rbac_policy(), attrs),
        }
    }

    pub(super) fn rbac_policy(&self) -> RbacPolicy {
        let key = |plural: &str| (crate::authz::RBAC_GROUP.to_string(), plural.to_string());
        let store = self.store();
        let roles = |plural: &str| {
            store
                .list(&key(plural), None)
                .iter()
                .filter_map(|o| crate::authz::Role::from_object(o))
                .collect()
        };
        let bindings = |plural: &str| {
            store
                .list(&key(plural), None)
                .iter()
                .filter_map(|o| crate::authz::Binding::from_object(o))
                .collect()
        };
        RbacPolicy {
            roles: roles("roles"),
            cluster_roles: roles("clusterroles"),
            role_bindings: bindings("rolebindings"),
            cluster_role_bindings: bindings("clusterrolebindings"),
        }
    }

    /// The answer to a `SubjectAccessReview` (about the user its spec names) or
    /// `SelfSubjectAccessReview` (about `requester`), from the same authorizer that authorizes
    /// requests.
    pub(crate) fn review_access(
        &self,
        kind: &str,
        mut review: Value,
        requester: &UserInfo,
    ) -> Result<Value, ApiError> {
        if kind == "SelfSubjectRulesReview" {
            let namespace = review["spec"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let rules = match self.config.authorization {
                Authorization::AlwaysAllow => crate::authz::everything(),
                Authorization::Rbac => {
                    crate::authz::rules_for(&self.rbac_policy(), requester, &namespace)
                }
            };
            review["status"] = crate::authz::rules_review_status(&rules);
            return Ok(review);
        }
        let requester = (kind == "SelfSubjectAccessReview").then_some(requester);
        let attrs = crate::authz::review_attributes(&review, requester)?;
        review["status"] = crate::authz::review_status(&self.authorize(&attrs));
        Ok(review)
    }

    /// A `SelfSubjectReview`: who the requester is, as authentication found them (k/k
    /// `pkg/registry/authentication/selfsubjectreview/rest.go`).
    pub(crate) fn review_self(&self, requester: &UserInfo) -> Value {
        let mut user = serde_json::to_value(requester).unwrap_or_default();
        if requester.groups.is_empty() {
            if let Some(u) = user.as_object_mut() {
                u.remove("groups");
            }
        }
        serde_json::json!({
            "metadata": {"creationTimestamp": crate::object::now()},
            "status": {"userInfo": user},
        })
    }

    /// `POST serviceaccounts/NAME/token`: a token for the ServiceAccount, valid for
    /// `spec.expirationSeconds` (default one hour, at least ten minutes), as kube-apiserver's
    /// TokenRequest (k/k `pkg/registry/core/serviceaccount/storage/token.go`,
    /// `pkg/apis/authentication/validation`).
    pub(crate) fn token_request(&self, t: &Target, body: Value) -> Result<Value, ApiError> {
        let invalid = |field: &str, message: String| {
            ApiError::invalid(
                "authentication.k8s.io",
                "TokenRequest",
                &t.name,
                vec![crate::error::Cause::new(
                    "FieldValueInvalid",
                    field,
                    message,
                )],
            )
        };
        match (body["apiVersion"].as_str(), body["kind"].as_str()) {
            (Some("authentication.k8s.io/v1") | None, Some("TokenRequest") | None) => {}
            (v, k) => {
                return Err(ApiError::bad_request(format!(
                    "the body of the request must be an authentication.k8s.io/v1 TokenRequest, not {} {}",
                    v.unwrap_or_default(),
                    k.unwrap_or_default()
                )));
            }
        }
        let expiration = match &body["spec"]["expirationSeconds"] {
            Value::Null => 3600,
            v => v.as_i64().ok_or_else(|| {
                invalid(
                    "spec.expirationSeconds",
                    format!("Invalid value: {v}: must be an integer"),
                )
            })?,
        };
        if expiration < 600 {
            return Err(invalid(
                "spec.expirationSeconds",
                format!(
                    "Invalid value: {expiration}: may not specify a duration less than 10 minutes"
                ),
            ));
        }
        if expiration > 1 << 32 {
            return Err(invalid(
                "spec.expirationSeconds",
                format!(
                    "Invalid value: {expiration}: may not specify a duration larger than 2^32 seconds"
                ),
            ));
        }
        let audiences: Vec<String> = match body["spec"]["audiences"].as_array() {
            Some(a) if !a.is_empty() => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            _ => vec![tokens::ISSUER.to_string()],
        };
        let account = self.current(t)?;
        let uid = account["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let signer = self
            .tokens
            .as_ref()
            .ok_or_else(|| ApiError::internal("no service account signing key"))?;
        let now = jiff::Timestamp::now().as_second();
        let claims = tokens::Claims {
            aud: audiences.clone(),
            exp: now + expiration,
            iat: now,
            nbf: now,
            iss: tokens::ISSUER.to_string(),
            jti: uuid::Uuid::new_v4().to_string(),
            kubernetes: tokens::KubernetesClaims {
                namespace: t.namespace.clone(),
                serviceaccount: tokens::ServiceAccountRef {
                    name: t.name.clone(),
                    uid,
                },
            },
            sub: format!("system:serviceaccount:{}:{}", t.namespace, t.name),
        };
        let token = signer.sign(&claims).map_err(ApiError::internal)?;
        let expires = jiff::Timestamp::from_second(claims.exp)
            .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_default();
        Ok(serde_json::json!({
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": t.name, "namespace": t.namespace, "creationTimestamp": null},
            "spec": {"audiences": audiences, "expirationSeconds": expiration, "boundObjectRef": null},
            "status": {"token": token, "expirationTimestamp": expires},
        }))
    }

    /// The user behind a service account token this server issued, while it has not expired
    /// and its ServiceAccount (the same object, by uid) still exists — kube-apiserver's
    /// service account token authenticator with its lookup of the live object.
    pub fn authenticate_service_account_token(&self, token: &str) -> Option<UserInfo> {
        let claims = self
            .tokens
            .as_ref()?
            .verify(token, jiff::Timestamp::now().as_second())?;
        let sa = &claims.kubernetes;
        let live = self.store().get(
            &(String::new(), "serviceaccounts".to_string()),
            &(sa.namespace.clone(), sa.serviceaccount.name.clone()),
        )?;
        if live["metadata"]["uid"].as_str() != Some(sa.serviceaccount.uid.as_str())
            || live["metadata"]["deletionTimestamp"].is_string()
        {
            return None;
        }
        let mut user = UserInfo::service_account(&sa.namespace, &sa.serviceaccount.name);
        user.uid = sa.serviceaccount.uid.clone();
        user.extra.insert(
            "authentication.kubernetes.io/credential-id".to_string(),
            vec![format!("JTI={}", claims.jti)],
        );
        Some(user)
    }

    pub(crate) fn store(&self) -> MutexGuard<'_, Store> {
        // A panic while holding the lock leaves the data consistent (every write is one insert),
        // so a poisoned lock is still usable.
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn registry(&self) -> RwLockReadGuard<'_, Registry> {
        self.registry.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn registry_mut(&self) -> RwLockWriteGuard<'_, Registry> {
        self.registry.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The resource served at `group/version` with this plural (or short name / kind for
    /// in-process callers).
    pub fn resolve(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.registry().lookup(group, version, plural).cloned()
    }

    /// Subscribes an in-process controller to every change.
    pub fn controller_feed(
        &self,
    ) -> tokio::sync::mpsc::UnboundedReceiver<Arc<crate::store::Change>> {
        self.store().register_controller()
    }

    /// Forces the watch window to be dropped, as etcd compaction does (tests of `410 Gone`).
    pub fn compact(&self) {
        self.store().compact();
    }

    pub fn revision(&self) -> u64 {
        self.store().revision()
    }

    /// Rewrites a stored object for output at the requested version.
    pub(crate) fn output(rt: &ResourceType, version: &str, object: &Value) -> Value {
        let mut out = Self::view(rt, object);
        out["apiVersion"] = Value::String(rt.api_version(version));
        out["kind"] = Value::String(rt.kind.clone());
        zero_template_times(rt, &mut out);
        out
    }

    /// A stored object as its API shows it: `events.k8s.io` events are stored as core events.
    pub(crate) fn view(rt: &ResourceType, object: &Value) -> Value {
        if rt.is_events_api() {
            events::to_events_v1(object)
        } else if rt.group.is_empty() && rt.plural == "events" {
            events::as_core_v1(object)
        } else {
            object.clone()
        }
    }

    /// An object as it is stored (the inverse of [`Self::view`]).
    pub(crate) fn to_storage(rt: &ResourceType, object: Value) -> Value {
        let mut object = if rt.is_events_api() {
            events::to_core(object)
        } else {
            object
        };
        // kube-apiserver keeps a built-in object as its Go struct: whatever it answers is
        // encoded from that, with the zero fields Go writes (`status: {}`, a template's
        // `creationTimestamp: null`).
        if !rt.is_custom() {
            crate::protobuf::go_json_zeros(&mut object);
        }
        object
    }

    pub(crate) fn namespace_labels(
        &self,
        namespace: &str,
    ) -> Option<std::collections::BTreeMap<String, String>> {
        let ns = self.store().get(
            &(String::new(), "namespaces".to_string()),
            &(String::new(), namespace.to_string()),
        )?;
        Some(crate::labels::labels_of(&ns))
    }
}

/// The user the in-process controllers and tests act as when no user is given.
pub fn system_admin() -> UserInfo {
    UserInfo::new(
        "system:admin",
        "",
        &["system:masters", "system:authenticated"],
    )
}

/// Where a built-in kind embeds an `ObjectMeta` of its own (a pod template, a job template, a
/// StatefulSet's claim templates), as paths of object fields; `[]` steps into every list item.
fn embedded_metadata(rt: &ResourceType) -> &'static [&'static [&'static str]] {
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("apps", "Deployment" | "ReplicaSet" | "DaemonSet") | ("batch", "Job") => {
            &[&["spec", "template"]]
        }
        ("apps", "StatefulSet") => &[
            &["spec", "template"],
            &["spec", "volumeClaimTemplates", "[]"],
        ],
        ("batch", "CronJob") => &[
            &["spec", "jobTemplate"],
            &["spec", "jobTemplate", "spec", "template"],
        ],
        ("", "ReplicationController") => &[&["spec", "template"]],
        ("", "PodTemplate") => &[&["template"]],
        _ => &[],
    }
}

/// Go's encoding of an embedded `ObjectMeta` (a struct, never omitted) whose `metav1.Time` is
/// zero: kube-apiserver writes `metadata: {creationTimestamp: null}` in every template of an
/// object it returns, where the sandbox stores nothing. Protobuf encodes the null as the empty
/// Time message kube sends.
fn zero_template_times(rt: &ResourceType, object: &mut Value) {
    fn at(value: &mut Value, path: &[&str]) {
        let Some((first, rest)) = path.split_first() else {
            if let Some(template) = value.as_object_mut() {
                let metadata = template
                    .entry("metadata")
                    .or_insert_with(|| Value::Object(Default::default()));
                if let Some(m) = metadata.as_object_mut()
                    && !m.contains_key("creationTimestamp")
                {
                    // Where Go's ObjectMeta has it: after the identity fields, before the rest.
                    const AFTER: [&str; 7] = [
                        "deletionTimestamp",
                        "deletionGracePeriodSeconds",
                        "labels",
                        "annotations",
                        "ownerReferences",
                        "finalizers",
                        "managedFields",
                    ];
                    let index = m
                        .keys()
                        .position(|k| AFTER.contains(&k.as_str()))
                        .unwrap_or(m.len());
                    m.shift_insert(index, "creationTimestamp".into(), Value::Null);
                }
            }
            return;
        };
        if *first == "[]" {
            for item in value.as_array_mut().into_iter().flatten() {
                at(item, rest);
            }
        } else if let Some(child) = value.get_mut(*first).filter(|c| !c.is_null()) {
            at(child, rest);
        }
    }
    for path in embedded_metadata(rt) {
        at(object, path);
    }
}
