//! The HTTP layer: one `/validate` endpoint that routes by operation and kind to the pure
//! validators, `/mutate` that seals deletion requests ([`crate::mutate`]), plus `/healthz`,
//! `/readyz` and `/metrics`, served over TLS.
//!
//! # Data model
//!
//! A [`Webhook`] is cheap to clone (one `Arc`) and holds what answering needs: the
//! [`SharedIndex`] (written by the controller, read here for the lookup only), the [`Policy`],
//! the injected [`LiveCheck`], [`KindResolver`] and (optional) [`AccessCheck`], the optional channel on which [`Record`]s go
//! to the controller, the readiness flag and the metrics.
//!
//! The contract with kube-apiserver: **every** POST to `/validate` gets HTTP 200 and an
//! `AdmissionReview`. A body that is too large, of the wrong content type or not a review is
//! answered `allowed: false` with a 4xx `status.code` and a message; a panic in a validator is
//! caught and answered 500. With `failurePolicy: Fail` an error would deny anyway, but a message
//! from Lien says why. The one exception is overload: past
//! [`WebhookBuilder::max_concurrency`] reviews in flight, one that finds no slot within the
//! queue wait is answered HTTP 429 with `Retry-After: 1`, which the API server's webhook
//! client retries by itself.
//!
//! # Who is heard
//!
//! A review only says who asked; anyone who reaches the port can send one. What a review makes
//! Lien *do* beyond answering — record a refused DELETE for replay, publish `DeletionRefused`
//! and `BreakGlass` events naming the user — is therefore done only for a caller that proved it
//! is the API server, by a client certificate the TLS layer verified against `--client-ca-file`
//! ([`ReviewAuth`]). kube-apiserver presents one when its AdmissionConfiguration's
//! `kubeConfigFile` names it for the webhook's host. `/healthz`, `/readyz` and `/metrics` need
//! no certificate (kubelet's probes present none).
//!
//! `/mutate` is held to the same rule as `/validate`: with a client CA, a caller without a
//! verified certificate is refused (401) before anything is asked. Without one (managed
//! clusters) it answers every caller, since the API server cannot be told apart: what it
//! answers is a patch that only takes effect when the API server applies it to the write it
//! sent, so a forged review there persists nothing, and the sealed record it returns is useless
//! by hand — the same endpoint refuses every write that carries a deletion request's record,
//! through the object or any subresource, whoever sends it ([`crate::mutate`]).
//!
//! A SubjectAccessReview asked for a caller that is not authenticated (no client CA configured)
//! is one API call made with Lien's identity per forged request: those are bounded by a token
//! bucket ([`WebhookBuilder::unauthenticated_access_checks`], [`crate::throttle`]); a review
//! past it is refused 429 without asking, and counted
//! (`lien_webhook_unauthenticated_reviews_total{action="throttled"}`).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use lien_core::{Decision, ObjectKey, RelationIndex};
use parking_lot::RwLock;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::mutate::{LIEN_SERVICE_ACCOUNT, Mutation, decide_mutation};
use crate::review::{Answer, Operation, Request, Review, salvage_uid};
use crate::rules::{CelCompiler, RuleCompiler, is_rule_kind, validate_rule};
use crate::throttle::{DEFAULT_UNAUTHENTICATED_CHECKS_PER_SECOND, TokenBucket};
use crate::validate::{
    BreakGlassAction, KindResolver, Outcome, Policy, Record, Scope, decide, decide_eviction,
    decide_namespace, finish_delete, finish_eviction, finish_namespace_delete, is_eviction,
    is_lien_kind, object_key, validate_usage, validate_write,
};

/// kube-apiserver caps request bodies at 3 MiB of object, sent twice for an UPDATE plus the
/// review around them; controller-runtime's webhooks accept 7 MiB for the same reason.
pub const MAX_BODY_BYTES: usize = 7 * 1024 * 1024;

/// How long a request's body may take to arrive once its headers have: kube-apiserver sends a
/// review in one go and gives up after the hook's `timeoutSeconds` (5 s in Lien's
/// configuration), so a body still incomplete after that is from a client holding a connection
/// open (100 such clients used to hold 100 connections and tasks indefinitely). Answered 408
/// and the connection closed.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an HTTP/1 request's head may take (and so how long a keep-alive connection may
/// idle): kube-apiserver's own `ReadHeaderTimeout` is 32 s.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How many reviews are worked on at once by default ([`WebhookBuilder::max_concurrency`]). A
/// review from the index costs microseconds of CPU, so this many are only ever in flight when
/// they wait on something — a live read or an access check (up to 3 s each) — and then the
/// bound keeps those waits (and the bodies they hold, up to [`MAX_BODY_BYTES`] each) from
/// growing without limit.
pub const DEFAULT_MAX_CONCURRENCY: usize = 256;

/// How long a review past [`DEFAULT_MAX_CONCURRENCY`] waits for a slot by default before it is
/// answered 429: well inside the configuration's `timeoutSeconds` (5 s), so that a retry can
/// still be answered in time.
pub const DEFAULT_QUEUE_WAIT: Duration = Duration::from_secs(1);

/// The relation index as shared by the controller (writer) and the webhook (reader).
pub type SharedIndex = Arc<RwLock<RelationIndex>>;

pub use lien_core::seams::{
    AccessCheck, AccessCheckError, AccessDecision, AccessRequest, BoxFuture, LiveCheck,
    LiveCheckError, RecordSealer, Requester,
};

/// The default live check: there is none, so labelled objects the index does not know are
/// refused (fail closed) until the controller provides one.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoLiveCheck;

impl LiveCheck for NoLiveCheck {
    fn check<'a>(
        &'a self,
        _object: &'a ObjectKey,
        _uid: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Decision, LiveCheckError>> {
        Box::pin(async { Err(LiveCheckError::Unavailable) })
    }
}

/// A fixed table of kinds, for tests and for callers that know their kinds up front:
/// `(apiVersion, kind, scope, resource)`.
#[derive(Debug, Clone, Default)]
pub struct StaticKinds(pub Vec<(String, String, Scope, String)>);

impl StaticKinds {
    /// With one more `(apiVersion, kind, scope)`, served as the lower-cased kind plus `s`
    /// (right for most kinds; [`StaticKinds::with_resource`] for the others).
    pub fn with(self, api_version: &str, kind: &str, scope: Scope) -> Self {
        let resource = format!("{}s", kind.to_lowercase());
        self.with_resource(api_version, kind, scope, &resource)
    }

    /// With one more `(apiVersion, kind, scope)` served as `resource`.
    pub fn with_resource(
        mut self,
        api_version: &str,
        kind: &str,
        scope: Scope,
        resource: &str,
    ) -> Self {
        self.0.push((
            api_version.to_owned(),
            kind.to_owned(),
            scope,
            resource.to_owned(),
        ));
        self
    }

    fn find(&self, api_version: &str, kind: &str) -> Option<&(String, String, Scope, String)> {
        self.0
            .iter()
            .find(|(v, k, _, _)| v == api_version && k == kind)
    }
}

impl KindResolver for StaticKinds {
    fn scope(&self, api_version: &str, kind: &str) -> Option<Scope> {
        self.find(api_version, kind).map(|(_, _, s, _)| *s)
    }

    fn resource(&self, api_version: &str, kind: &str) -> Option<String> {
        self.find(api_version, kind).map(|(_, _, _, r)| r.clone())
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    operation: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    /// `allowed` or `denied`, as the index decided (before break-glass or a live check).
    result: &'static str,
    /// The kind of a blocking source (`Usage`, `ClusterUsage`, `DependencyRule`), `none` when
    /// allowed.
    source: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabels {
    action: &'static str,
}

/// Whose reviews the webhook acts on beyond answering them (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReviewAuth {
    /// Every caller is taken for the API server: records are forwarded. Only for callers that
    /// cannot be reached from the network (in-process use, tests); the default of
    /// [`Webhook::builder`], as `lien::runtime` always chooses one of the others.
    #[default]
    TrustAll,
    /// No client CA is configured: every review is answered as usual (protection does not
    /// stop), but nothing a review says is recorded — no replay record, no events — since the
    /// API server cannot be told from anyone else.
    AnswerOnly,
    /// The server asks for client certificates (verified by the TLS layer against the client
    /// CA): a review from a client that presented none is refused (401, `allowed: false`) and
    /// records nothing; one from a verified client is answered and recorded.
    ClientCertificate,
}

impl ReviewAuth {
    fn label(self) -> &'static str {
        match self {
            Self::TrustAll => "trust_all",
            Self::AnswerOnly => "answer_only",
            Self::ClientCertificate => "client_certificate",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModeLabels {
    mode: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UnauthenticatedLabels {
    /// `refused` (client CA configured), `unrecorded` (answered, records dropped) or
    /// `throttled` (an access check it needed was over the bound: refused 429, not asked).
    action: &'static str,
}

type HistogramFamily = Family<OperationLabels, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 5 µs … ~5 s: the index path is microseconds, a live check is milliseconds.
    Histogram::new(exponential_buckets(5e-6, 2.0, 20))
}

struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    decisions: Family<DecisionLabels, Counter>,
    latency: HistogramFamily,
    live_checks: Family<ResultLabels, Counter>,
    access_checks: Family<ResultLabels, Counter>,
    records_dropped: Counter,
    break_glass: Family<ActionLabels, Counter>,
    client_auth: Family<ModeLabels, prometheus_client::metrics::gauge::Gauge>,
    unauthenticated: Family<UnauthenticatedLabels, Counter>,
    mutations: Family<ResultLabels, Counter>,
    waiting: prometheus_client::metrics::gauge::Gauge,
    throttled: Counter,
}

impl Metrics {
    /// The webhook's metrics under `lien_webhook_`, then whatever `others` register at the
    /// root (the controller's `lien_controller_*`): one `/metrics` for the whole process.
    fn new(others: Vec<MetricsHook>) -> Self {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("lien_webhook");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Admission reviews answered, by operation and outcome (allowed, denied, invalid, error)",
            requests.clone(),
        );
        let decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "delete_decisions",
            "DELETE decisions from the index, by result (allowed; denied; warned: allowed, with a warning, because every relation that would refuse it is in warn mode) and, when denied or warned, by the kind of each distinct blocking source (Usage, ClusterUsage, DependencyRule)",
            decisions.clone(),
        );
        let latency: HistogramFamily = Family::new_with_constructor(latency_histogram);
        registry.register(
            "request_duration_seconds",
            "Time from a complete request body to the encoded answer",
            latency.clone(),
        );
        let live_checks = Family::<ResultLabels, Counter>::default();
        registry.register(
            "live_checks",
            "Live checks of labelled objects the index did not know, by result",
            live_checks.clone(),
        );
        let access_checks = Family::<ResultLabels, Counter>::default();
        registry.register(
            "access_checks",
            "Access checks of Usage and rule creators (may they update spec.of, or delete every parent?), by result",
            access_checks.clone(),
        );
        let records_dropped = Counter::default();
        registry.register(
            "records_dropped",
            "Denial and break-glass records dropped because the controller's channel was full or closed",
            records_dropped.clone(),
        );
        let break_glass = Family::<ActionLabels, Counter>::default();
        registry.register(
            "break_glass",
            "Break-glass overrides let through (not dry runs), by action: armed (the annotation set on an object in use or not), used (an object in use deleted under it)",
            break_glass.clone(),
        );
        let client_auth = Family::<ModeLabels, prometheus_client::metrics::gauge::Gauge>::default();
        registry.register(
            "client_authentication",
            "1 for how the webhook authenticates the API server: client_certificate (--client-ca-file), answer_only (no client CA: refusals are not recorded, nothing is replayed) or trust_all",
            client_auth.clone(),
        );
        // Prometheus's `build_info` convention: a dashboard or `kubectl lien status` tells
        // which version answers (and a rollout's two versions apart).
        let build_info = Family::<BuildLabels, prometheus_client::metrics::gauge::Gauge>::default();
        registry.register(
            "build_info",
            "1, labelled with the version of Lien answering",
            build_info.clone(),
        );
        build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        let unauthenticated = Family::<UnauthenticatedLabels, Counter>::default();
        registry.register(
            "unauthenticated_reviews",
            "Reviews from clients without a verified client certificate, by action: refused (a client CA is configured), unrecorded (answered, but no replay record or event) or throttled (the SubjectAccessReview it needed was over --unauthenticated-access-checks: refused 429 without asking)",
            unauthenticated.clone(),
        );
        let mutations = Family::<ResultLabels, Counter>::default();
        registry.register(
            "mutations",
            "Reviews answered on /mutate, by result: sealed (a deletion request sealed into a replay record), guarded (a Usage created with Lien's finalizer added), allowed (nothing to do), forbidden (the requester may not delete the object, or a hand-written replay record), throttled (its access check was over the bound for unauthenticated callers), invalid, error",
            mutations.clone(),
        );
        let waiting = prometheus_client::metrics::gauge::Gauge::default();
        registry.register(
            "requests_waiting",
            "Reviews waiting for a slot because --webhook-max-concurrency reviews are in flight",
            waiting.clone(),
        );
        let throttled = Counter::default();
        registry.register(
            "requests_throttled",
            "Reviews answered 429 (Retry-After: 1) because no slot freed within the queue wait",
            throttled.clone(),
        );
        for hook in others {
            hook(&mut root);
        }
        root.register_collector(Box::new(crate::process::ProcessCollector));
        // prometheus-client leaves a labelled series out until it is first touched: touching
        // every label set the webhook counts under exports it at 0 from start, so a dashboard
        // shows 0 rather than "No data" and `rate()` sees the first count as an increase.
        for operation in ["CREATE", "UPDATE", "DELETE", "CONNECT", "unknown"] {
            for outcome in ["allowed", "denied", "invalid", "error"] {
                let _ = requests.get_or_create(&RequestLabels { operation, outcome });
            }
        }
        let _ = decisions.get_or_create(&DecisionLabels {
            result: "allowed",
            source: "none",
        });
        for source in ["Usage", "ClusterUsage", "DependencyRule"] {
            for result in ["denied", "warned"] {
                let _ = decisions.get_or_create(&DecisionLabels { result, source });
            }
        }
        for result in ["in_use", "not_in_use", "failed"] {
            let _ = live_checks.get_or_create(&ResultLabels { result });
        }
        for result in ["allowed", "denied", "failed"] {
            let _ = access_checks.get_or_create(&ResultLabels { result });
        }
        for action in ["armed", "used"] {
            let _ = break_glass.get_or_create(&ActionLabels { action });
        }
        for action in ["refused", "unrecorded", "throttled"] {
            let _ = unauthenticated.get_or_create(&UnauthenticatedLabels { action });
        }
        // `pending` is never counted: `resolve` always finishes a seal.
        for result in [
            "sealed",
            "allowed",
            "forbidden",
            "throttled",
            "invalid",
            "error",
        ] {
            let _ = mutations.get_or_create(&ResultLabels { result });
        }
        Self {
            registry: root,
            requests,
            decisions,
            latency,
            live_checks,
            access_checks,
            records_dropped,
            break_glass,
            client_auth,
            unauthenticated,
            mutations,
            waiting,
            throttled,
        }
    }
}

impl Metrics {
    /// One count per distinct kind of blocking source: the blockers are few (sorted, per
    /// request), and the labels are a fixed set.
    fn count_decision(&self, decision: &lien_core::Decision) {
        let (result, blockers) = match decision {
            lien_core::Decision::Warned { blockers, .. } => ("warned", blockers.as_slice()),
            _ => ("denied", decision.blockers()),
        };
        let mut kinds: Vec<&'static str> = blockers
            .iter()
            .map(|b| match *b.source {
                lien_core::Source::Usage { .. } => "Usage",
                lien_core::Source::ClusterUsage { .. } => "ClusterUsage",
                lien_core::Source::Rule { .. } => "DependencyRule",
            })
            .collect();
        kinds.sort_unstable();
        kinds.dedup();
        if kinds.is_empty() {
            self.decisions
                .get_or_create(&DecisionLabels {
                    result: "allowed",
                    source: "none",
                })
                .inc();
        }
        for source in kinds {
            self.decisions
                .get_or_create(&DecisionLabels { result, source })
                .inc();
        }
    }
}

struct Inner {
    index: SharedIndex,
    policy: Policy,
    live: Arc<dyn LiveCheck>,
    live_timeout: Duration,
    kinds: Arc<dyn KindResolver>,
    rules: Arc<dyn RuleCompiler>,
    access: Option<Arc<dyn AccessCheck>>,
    access_timeout: Duration,
    records: Option<mpsc::Sender<Record>>,
    review_auth: ReviewAuth,
    sealer: Option<Arc<dyn RecordSealer>>,
    seal_access: Option<Arc<dyn AccessCheck>>,
    own_username: String,
    ready: Arc<AtomicBool>,
    body_timeout: Duration,
    /// One permit per review in flight ([`WebhookBuilder::max_concurrency`]).
    slots: tokio::sync::Semaphore,
    queue_wait: Duration,
    metrics: Metrics,
    /// The break-glass overrides audited lately ([`Webhook::first_audit`]), most recent last.
    audited: parking_lot::Mutex<std::collections::VecDeque<String>>,
    /// Access checks asked for callers that are not authenticated
    /// ([`WebhookBuilder::unauthenticated_access_checks`]).
    unauthenticated_checks: parking_lot::Mutex<TokenBucket>,
}

/// How many recent break-glass overrides [`Webhook::first_audit`] remembers: the hooks' calls
/// for one request arrive together, so a short memory suffices.
const AUDITED_REQUESTS: usize = 256;

/// The admission webhook; see the module docs.
#[derive(Clone)]
pub struct Webhook {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("policy", &self.inner.policy)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Webhook`].
pub struct WebhookBuilder {
    index: SharedIndex,
    policy: Policy,
    live: Arc<dyn LiveCheck>,
    live_timeout: Duration,
    kinds: Arc<dyn KindResolver>,
    rules: Arc<dyn RuleCompiler>,
    access: Option<Arc<dyn AccessCheck>>,
    access_timeout: Duration,
    records: Option<mpsc::Sender<Record>>,
    review_auth: ReviewAuth,
    sealer: Option<Arc<dyn RecordSealer>>,
    seal_access: Option<Arc<dyn AccessCheck>>,
    own_username: String,
    ready: Arc<AtomicBool>,
    body_timeout: Duration,
    max_concurrency: usize,
    queue_wait: Duration,
    metrics_hooks: Vec<MetricsHook>,
    unauthenticated_checks: u32,
}

/// Registers more metrics on the webhook's `/metrics` (at the registry's root).
pub type MetricsHook = Box<dyn FnOnce(&mut Registry) + Send>;

impl std::fmt::Debug for WebhookBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookBuilder").finish_non_exhaustive()
    }
}

impl WebhookBuilder {
    /// The policy (default: [`Policy::default`]).
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// The live check (default: [`NoLiveCheck`], which fails closed) and how long to wait for
    /// it (default 3 s: well inside the configuration's `timeoutSeconds`).
    pub fn live_check(mut self, live: Arc<dyn LiveCheck>, timeout: Duration) -> Self {
        self.live = live;
        self.live_timeout = timeout;
        self
    }

    /// The kind resolver for Usage validation (default: no kinds, every Usage is refused).
    pub fn kinds(mut self, kinds: Arc<dyn KindResolver>) -> Self {
        self.kinds = kinds;
        self
    }

    /// The CEL compiler for DependencyRule and CascadeRule admission (default: [`CelCompiler`]).
    pub fn rule_compiler(mut self, rules: Arc<dyn RuleCompiler>) -> Self {
        self.rules = rules;
        self
    }

    /// Checks, on Usage CREATE (and UPDATE of `spec.of`), that the user may update the object
    /// the Usage protects, waiting at most `timeout` for an answer (a failure or timeout
    /// refuses the Usage). Default: no check — only what callers that trust every Usage
    /// creator (tests, `--usage-access-check=false`) should run with.
    pub fn access_check(mut self, access: Arc<dyn AccessCheck>, timeout: Duration) -> Self {
        self.access = Some(access);
        self.access_timeout = timeout;
        self
    }

    /// Where denial and break-glass records go. Sends never wait: a full channel drops the
    /// record and counts it (`lien_webhook_records_dropped_total`).
    pub fn records(mut self, records: mpsc::Sender<Record>) -> Self {
        self.records = Some(records);
        self
    }

    /// How long a request body may take once its headers are in (default [`BODY_TIMEOUT`]).
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout;
        self
    }

    /// At most `max` reviews (`/validate` and `/mutate`) worked on at once (at least 1); one
    /// past it waits up to `queue_wait` for a slot, then is answered HTTP 429 with
    /// `Retry-After: 1`. Defaults: [`DEFAULT_MAX_CONCURRENCY`], [`DEFAULT_QUEUE_WAIT`].
    ///
    /// Why wait, then 429: a decision takes microseconds, so a slot usually frees long before
    /// the API server's `timeoutSeconds`, and a short queue answers a burst without any retry.
    /// A 429 with `Retry-After` is what kube-apiserver's webhook client (client-go's REST
    /// client) retries by itself within that timeout, where a refusal in an `AdmissionReview`
    /// would reach the user as a denied request. Probes and `/metrics` are never limited, so
    /// a busy webhook is not restarted by kubelet.
    pub fn max_concurrency(mut self, max: usize, queue_wait: Duration) -> Self {
        self.max_concurrency = max.max(1);
        self.queue_wait = queue_wait;
        self
    }

    /// At most `per_second` SubjectAccessReviews a second (with a burst of twice that) asked
    /// for callers that are not authenticated: every caller when no client CA is configured
    /// ([`ReviewAuth::AnswerOnly`]), where a forged review would otherwise make Lien ask the API
    /// server once per request. A review past the bound is refused 429 ("retry shortly")
    /// without asking. Default [`DEFAULT_UNAUTHENTICATED_CHECKS_PER_SECOND`]. Authenticated
    /// callers and [`ReviewAuth::TrustAll`] are not bounded; with
    /// [`ReviewAuth::ClientCertificate`] an unauthenticated caller is refused before asking.
    pub fn unauthenticated_access_checks(mut self, per_second: u32) -> Self {
        self.unauthenticated_checks = per_second;
        self
    }

    /// Whose reviews are recorded (default [`ReviewAuth::TrustAll`]). With
    /// [`ReviewAuth::ClientCertificate`], serve with a TLS configuration that asks for client
    /// certificates ([`crate::CertManager::server_config_with_client_ca`]).
    pub fn review_auth(mut self, auth: ReviewAuth) -> Self {
        self.review_auth = auth;
        self
    }

    /// Seals deletion requests on `/mutate` (`kubectl lien delete --when-free`,
    /// [`crate::mutate`]) with `sealer` (the controller's replay key), after asking `access`
    /// whether the requester may delete the object — asked whatever
    /// [`WebhookBuilder::access_check`] says, since Lien replays with its own rights. Default:
    /// none, and every deletion request is refused (500, fail closed).
    pub fn when_free(
        mut self,
        sealer: Arc<dyn RecordSealer>,
        access: Arc<dyn AccessCheck>,
    ) -> Self {
        self.sealer = Some(sealer);
        self.seal_access = Some(access);
        self
    }

    /// Lien's own identity as the API server names it in `userInfo.username`: the only user
    /// whose writes of `lien.dev/deletion-attempt` `/mutate` lets through (default
    /// [`LIEN_SERVICE_ACCOUNT`]).
    pub fn own_username(mut self, username: impl Into<String>) -> Self {
        self.own_username = username.into();
        self
    }

    /// Starts ready (default: not ready until [`Webhook::set_ready`], i.e. until the
    /// controller's index has synced).
    pub fn ready(self, ready: bool) -> Self {
        self.ready.store(ready, Ordering::Release);
        self
    }

    /// Serves more metrics on `/metrics`: `hook` registers them (with their own prefix) when
    /// the webhook is built.
    pub fn register_metrics(mut self, hook: impl FnOnce(&mut Registry) + Send + 'static) -> Self {
        self.metrics_hooks.push(Box::new(hook));
        self
    }

    /// The webhook.
    pub fn build(self) -> Webhook {
        let metrics = Metrics::new(self.metrics_hooks);
        // What a refusal says will happen follows from whether it is recorded.
        let policy = Policy {
            refusals_recorded: self.review_auth != ReviewAuth::AnswerOnly,
            ..self.policy
        };
        metrics
            .client_auth
            .get_or_create(&ModeLabels {
                mode: self.review_auth.label(),
            })
            .set(1);
        Webhook {
            inner: Arc::new(Inner {
                index: self.index,
                policy,
                live: self.live,
                live_timeout: self.live_timeout,
                kinds: self.kinds,
                rules: self.rules,
                access: self.access,
                access_timeout: self.access_timeout,
                records: self.records,
                review_auth: self.review_auth,
                sealer: self.sealer,
                seal_access: self.seal_access,
                own_username: self.own_username,
                ready: self.ready,
                body_timeout: self.body_timeout,
                slots: tokio::sync::Semaphore::new(self.max_concurrency),
                queue_wait: self.queue_wait,
                metrics,
                audited: parking_lot::Mutex::new(std::collections::VecDeque::new()),
                unauthenticated_checks: parking_lot::Mutex::new(TokenBucket::new(
                    self.unauthenticated_checks,
                    self.unauthenticated_checks.saturating_mul(2).max(1),
                    Instant::now(),
                )),
            }),
        }
    }
}

fn is_usage_kind(req: &Request<'_>) -> bool {
    req.kind.group == lien_api::GROUP && matches!(req.kind.kind.as_ref(), "Usage" | "ClusterUsage")
}

fn outcome_label(answer: &Answer) -> &'static str {
    match (&answer.allowed, answer.status.as_ref().map(|s| s.code)) {
        (true, _) => "allowed",
        (false, Some(400 | 408 | 413 | 415)) => "invalid",
        (false, Some(c)) if c >= 500 => "error",
        (false, _) => "denied",
    }
}

impl Webhook {
    /// A builder over the shared index.
    pub fn builder(index: SharedIndex) -> WebhookBuilder {
        WebhookBuilder {
            index,
            policy: Policy::default(),
            live: Arc::new(NoLiveCheck),
            live_timeout: Duration::from_secs(3),
            kinds: Arc::new(StaticKinds::default()),
            rules: Arc::new(CelCompiler),
            access: None,
            access_timeout: Duration::from_secs(3),
            records: None,
            review_auth: ReviewAuth::default(),
            sealer: None,
            seal_access: None,
            own_username: LIEN_SERVICE_ACCOUNT.to_owned(),
            ready: Arc::new(AtomicBool::new(false)),
            body_timeout: BODY_TIMEOUT,
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            queue_wait: DEFAULT_QUEUE_WAIT,
            metrics_hooks: Vec::new(),
            unauthenticated_checks: DEFAULT_UNAUTHENTICATED_CHECKS_PER_SECOND,
        }
    }

    /// Marks the webhook ready (or not) for `/readyz`.
    pub fn set_ready(&self, ready: bool) {
        self.inner.ready.store(ready, Ordering::Release);
    }

    /// The router: `POST /validate`, `POST /mutate`, `GET /healthz`, `/readyz`, `/metrics`.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/validate", post(validate_handler))
            .route("/mutate", post(mutate_handler))
            .route("/healthz", get(|| async { "ok" }))
            .route("/readyz", get(ready_handler))
            .route("/metrics", get(metrics_handler))
            .with_state(self.clone())
    }

    /// Answers one review body (already read and size-checked) from a caller taken for the API
    /// server. This is the whole decision path without HTTP: parse, decide, live check if
    /// needed, forward the record.
    pub async fn answer(&self, body: &[u8]) -> Answer {
        self.answer_from(body, true).await
    }

    /// As [`Webhook::answer`]; the record is forwarded only if `authenticated` (the caller is
    /// the API server) or the webhook trusts every caller ([`ReviewAuth::TrustAll`]).
    pub async fn answer_from(&self, body: &[u8], authenticated: bool) -> Answer {
        let heard = authenticated || self.inner.review_auth == ReviewAuth::TrustAll;
        let started = Instant::now();
        let (answer, operation) = match Review::parse(body) {
            Err(e) => (
                Answer::deny(salvage_uid(body), 400, "BadRequest", e.to_string()),
                "unknown",
            ),
            Ok(req) => {
                let outcome = self.decide(&req, body, SystemTime::now());
                let outcome = match outcome {
                    Outcome::Confirm(confirm) => {
                        let live = &self.inner.live;
                        let checked = tokio::time::timeout(
                            self.inner.live_timeout,
                            live.check(&confirm.object, confirm.uid.as_deref()),
                        )
                        .await
                        .unwrap_or(Err(LiveCheckError::Timeout(self.inner.live_timeout)));
                        let result = match &checked {
                            Ok(d) if d.is_allowed() => "not_in_use",
                            Ok(_) => "in_use",
                            Err(_) => "failed",
                        };
                        if let Err(e) = &checked {
                            tracing::warn!(error = %e, object = %confirm.object, "live check failed; the DELETE is refused (500)");
                        }
                        self.inner
                            .metrics
                            .live_checks
                            .get_or_create(&ResultLabels { result })
                            .inc();
                        confirm.resolve(checked, &self.inner.policy, SystemTime::now())
                    }
                    Outcome::Authorize(authorize) => {
                        // A chain of questions (a CascadeRule's kinds): each allowed answer
                        // may ask the next.
                        let mut outcome = self.authorize(authorize, authenticated).await;
                        while let Outcome::Authorize(next) = outcome {
                            outcome = self.authorize(next, authenticated).await;
                        }
                        outcome
                    }
                    final_outcome => final_outcome,
                };
                (self.finish(&req, outcome, heard), req.operation.as_str())
            }
        };
        let m = &self.inner.metrics;
        m.requests
            .get_or_create(&RequestLabels {
                operation,
                outcome: outcome_label(&answer),
            })
            .inc();
        m.latency
            .get_or_create(&OperationLabels { operation })
            .observe(started.elapsed().as_secs_f64());
        answer
    }

    /// Answers one review sent to `/mutate` (already read and size-checked) from a caller taken
    /// for the API server: parse, decide ([`decide_mutation`]), ask the access check if a
    /// deletion request needs it, seal. Whoever sent it, nothing is recorded: the answer is a
    /// patch for the API server to apply.
    pub async fn answer_mutation(&self, body: &[u8]) -> Answer {
        self.answer_mutation_from(body, true).await
    }

    /// As [`Webhook::answer_mutation`]; unless `authenticated` (or every caller is trusted) the
    /// access check is bounded ([`WebhookBuilder::unauthenticated_access_checks`]).
    pub async fn answer_mutation_from(&self, body: &[u8], authenticated: bool) -> Answer {
        let started = Instant::now();
        let inner = &*self.inner;
        let (answer, label) = match Review::parse(body) {
            Err(e) => (
                Answer::deny(salvage_uid(body), 400, "BadRequest", e.to_string()),
                "invalid",
            ),
            Ok(req) => {
                let decided = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    decide_mutation(&req, body, &inner.own_username, SystemTime::now())
                }))
                .unwrap_or_else(|_| {
                    tracing::error!(uid = %req.uid, "mutation panicked");
                    Mutation::Deny(crate::review::Status {
                        code: 500,
                        reason: "InternalError",
                        message: "lien: internal error while deciding this request".to_owned(),
                    })
                });
                let mutation = match decided {
                    Mutation::Seal(seal) if !self.may_ask_for(authenticated) => {
                        Mutation::Deny(self.throttled_status(&format!(
                            "cannot have {} deleted when free",
                            seal.request.object
                        )))
                    }
                    Mutation::Seal(seal) => {
                        let checked = match &inner.seal_access {
                            Some(access) => {
                                let timeout = inner.access_timeout;
                                tokio::time::timeout(timeout, access.check(&seal.access))
                                    .await
                                    .unwrap_or(Err(AccessCheckError::Timeout(timeout)))
                            }
                            None => Err(AccessCheckError::Review(
                                "this Lien webhook is not configured to check deletion requests"
                                    .to_owned(),
                            )),
                        };
                        if let Err(e) = &checked {
                            tracing::warn!(error = %e, user = seal.access.user.username, "access check of a deletion request failed");
                        }
                        seal.resolve(checked, inner.sealer.as_deref())
                    }
                    done => done,
                };
                let label = mutation.label();
                let answer = match mutation {
                    Mutation::Allow { patch, warnings } => {
                        let answer = Answer::allow(req.uid.as_ref()).with_warnings(warnings);
                        match patch {
                            Some(p) => answer.with_patch(p),
                            None => answer,
                        }
                    }
                    Mutation::Guarded(patch) => Answer::allow(req.uid.as_ref()).with_patch(patch),
                    Mutation::Deny(status) => {
                        Answer::deny(req.uid.as_ref(), status.code, status.reason, status.message)
                    }
                    // `resolve` never returns a pending seal; the safe answer to a bug is no.
                    Mutation::Seal(_) => Answer::deny(
                        req.uid.as_ref(),
                        500,
                        "InternalError",
                        "lien: unfinished deletion request",
                    ),
                };
                (answer, label)
            }
        };
        let m = &inner.metrics;
        m.mutations
            .get_or_create(&ResultLabels { result: label })
            .inc();
        m.latency
            .get_or_create(&OperationLabels {
                operation: "MUTATE",
            })
            .observe(started.elapsed().as_secs_f64());
        answer
    }

    /// Asks the access check (validation only returns [`Outcome::Authorize`] when one is
    /// configured) and finishes the Usage's decision. For a caller that is not authenticated
    /// the question is bounded ([`Webhook::may_ask_for`]).
    async fn authorize(
        &self,
        authorize: crate::validate::Authorize,
        authenticated: bool,
    ) -> Outcome {
        let Some(access) = &self.inner.access else {
            return authorize.resolve(Err("no access check is configured"));
        };
        if !self.may_ask_for(authenticated) {
            let status = self.throttled_status(&format!(
                "cannot check whether user {:?} may {} {}",
                authorize.request.user.username, authorize.request.verb, authorize.request.resource
            ));
            return Outcome::Deny {
                status,
                record: None,
            };
        }
        let timeout = self.inner.access_timeout;
        let checked = tokio::time::timeout(timeout, access.check(&authorize.request))
            .await
            .unwrap_or(Err(AccessCheckError::Timeout(timeout)));
        let result = match &checked {
            Ok(AccessDecision::Allowed) => "allowed",
            Ok(AccessDecision::Denied { .. }) => "denied",
            Err(_) => "failed",
        };
        if let Err(e) = &checked {
            tracing::warn!(error = %e, user = authorize.request.user.username, "access check failed");
        }
        self.inner
            .metrics
            .access_checks
            .get_or_create(&ResultLabels { result })
            .inc();
        authorize.resolve(checked)
    }

    /// Routes to a validator, catching panics (a bug must not take the webhook down, and
    /// kube-apiserver must still get an answer).
    pub fn decide(&self, req: &Request<'_>, body: &[u8], now: SystemTime) -> Outcome {
        std::panic::catch_unwind(AssertUnwindSafe(|| self.route(req, body, now))).unwrap_or_else(
            |_| {
                tracing::error!(uid = %req.uid, "validator panicked");
                Outcome::Deny {
                    status: crate::review::Status {
                        code: 500,
                        reason: "InternalError",
                        message: "lien: internal error while deciding this request".to_owned(),
                    },
                    record: None,
                }
            },
        )
    }

    fn route(&self, req: &Request<'_>, body: &[u8], now: SystemTime) -> Outcome {
        let inner = &*self.inner;
        match req.operation {
            Operation::Delete if req.kind.group.is_empty() && req.kind.kind == "Namespace" => {
                match object_key(req) {
                    Ok(key) => {
                        // The lock is held for the lookup and a bounded copy; sorting and
                        // rendering happen after.
                        let decision = decide_namespace(&inner.index.read(), &key, req);
                        finish_namespace_delete(decision, key, &inner.policy, req, now)
                    }
                    Err(e) => Outcome::invalid(e),
                }
            }
            // Lien's own objects are never protected (`validate::is_lien_kind`).
            Operation::Delete if is_lien_kind(req) => Outcome::allow(),
            Operation::Delete => match object_key(req) {
                Ok(key) => {
                    // The lock is held for the lookup only; rendering happens after.
                    let (decision, released) = {
                        let index = inner.index.read();
                        (decide(&index, &key, req), index.knows_why_free(&key))
                    };
                    inner.metrics.count_decision(&decision);
                    finish_delete(decision, released, key, &inner.policy, req, now)
                }
                Err(e) => Outcome::invalid(e),
            },
            // The Eviction API deletes the pod without admitting a DELETE (`validate::evict`).
            Operation::Create if is_eviction(req) => {
                let decision = decide_eviction(&inner.index.read(), req);
                finish_eviction(decision, &inner.policy)
            }
            // A write through a subresource (a Usage's status included) is only ever sent for
            // Lien's label, an object's last finalizer or break-glass: the tamper and break-glass
            // guards.
            Operation::Create | Operation::Update if req.subresource().is_some() => {
                validate_write(&inner.index.read(), &inner.policy, req, now)
            }
            Operation::Create | Operation::Update if is_rule_kind(req) => validate_rule(
                inner.kinds.as_ref(),
                inner.rules.as_ref(),
                req,
                body,
                inner.access.is_some(),
            ),
            Operation::Create | Operation::Update if is_usage_kind(req) => {
                validate_usage(inner.kinds.as_ref(), req, body, inner.access.is_some())
            }
            Operation::Create | Operation::Update => {
                validate_write(&inner.index.read(), &inner.policy, req, now)
            }
            Operation::Connect | Operation::Unknown => Outcome::allow(),
        }
    }

    fn finish(&self, req: &Request<'_>, outcome: Outcome, heard: bool) -> Answer {
        let (answer, record) = match outcome {
            Outcome::Allow { warnings, record } => (
                Answer::allow(req.uid.as_ref()).with_warnings(warnings),
                record,
            ),
            Outcome::Deny { status, record } => (
                Answer::deny(req.uid.as_ref(), status.code, status.reason, status.message),
                record,
            ),
            // `answer` resolves confirmations before finishing; reaching this is a bug, and
            // the safe answer to a bug is no.
            Outcome::Confirm(c) => (
                Answer::deny(
                    req.uid.as_ref(),
                    500,
                    "InternalError",
                    format!("lien: unconfirmed decision for {}", c.object),
                ),
                None,
            ),
            Outcome::Authorize(_) => (
                Answer::deny(
                    req.uid.as_ref(),
                    500,
                    "InternalError",
                    "lien: unfinished access check",
                ),
                None,
            ),
        };
        if let Some(record) = record {
            if !heard {
                // Anyone could have sent this review: what it says about who did what is not
                // recorded, audited or replayed (the module docs).
                self.inner
                    .metrics
                    .unauthenticated
                    .get_or_create(&UnauthenticatedLabels {
                        action: "unrecorded",
                    })
                    .inc();
                return answer;
            }
            if matches!(record, Record::BreakGlass(_)) && !self.first_audit(req) {
                return answer;
            }
            // Counted here, where every override passes, and not where records are delivered:
            // a record dropped on a full channel was still a use of break-glass.
            if let Record::BreakGlass(b) = &record {
                let action = match b.action {
                    BreakGlassAction::Armed => "armed",
                    BreakGlassAction::Used => "used",
                };
                self.inner
                    .metrics
                    .break_glass
                    .get_or_create(&ActionLabels { action })
                    .inc();
            }
            self.send(record);
        }
        answer
    }

    /// Whether `req`'s break-glass override is new here. An UPDATE that arms break-glass on an
    /// object in use reaches two hooks (`tamper.lien.dev` and `break-glass.lien.dev`), as a
    /// Namespace DELETE reaches `delete.lien.dev` and `namespaces.lien.dev`: one override, to be
    /// audited once. kube-apiserver gives each webhook call its own `request.uid`, so the
    /// override is known by what it changes instead: the operation, the object, the state it
    /// starts from (`oldObject`'s resourceVersion; a CREATE's new UID), who and why — a state can
    /// be overridden once. (Should the two calls land on different replicas, each audits it: a
    /// duplicate event, never a missing one.)
    fn first_audit(&self, req: &Request<'_>) -> bool {
        let rv = req
            .old_metadata()
            .and_then(|m| m.resource_version.as_deref());
        let uid = req.new_metadata().and_then(|m| m.uid.as_deref());
        let glass = |m: Option<&crate::review::Metadata<'_>>| {
            m.and_then(|m| m.annotations.get(crate::validate::BREAK_GLASS_ANNOTATION))
                .unwrap_or_default()
                .to_owned()
        };
        let key = format!(
            "{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}",
            req.operation.as_str(),
            req.kind.group,
            req.kind.kind,
            req.namespace.as_deref().unwrap_or_default(),
            req.name,
            rv.unwrap_or_default(),
            uid.unwrap_or_default(),
            req.user_info.username,
            // The reason being armed (new object) or used (old object).
            glass(req.new_metadata().or(req.old_metadata())),
        );
        let mut audited = self.inner.audited.lock();
        if audited.iter().any(|k| *k == key) {
            return false;
        }
        if audited.len() == AUDITED_REQUESTS {
            audited.pop_front();
        }
        audited.push_back(key);
        true
    }

    fn send(&self, record: Record) {
        let Some(tx) = &self.inner.records else {
            return;
        };
        if let Err(e) = tx.try_send(record) {
            tracing::warn!(error = %e, "dropping a webhook record");
            self.inner.metrics.records_dropped.inc();
        }
    }
}

fn review_response(answer: &Answer) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        answer.to_review_json(),
    )
        .into_response()
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

/// Reads a review's body, or answers what is not one (wrong content type, too large, too
/// slow, empty) as every endpoint does.
async fn read_review(
    webhook: &Webhook,
    headers: &HeaderMap,
    body: Body,
) -> Result<axum::body::Bytes, Response> {
    if !is_json(headers) {
        let got = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none");
        let answer = Answer::deny(
            "",
            415,
            "UnsupportedMediaType",
            format!("lien: expected Content-Type application/json, got {got}"),
        );
        webhook.count_rejected(&answer);
        return Err(review_response(&answer));
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
        let answer = too_large();
        webhook.count_rejected(&answer);
        return Err(review_response(&answer));
    }
    let read = tokio::time::timeout(
        webhook.inner.body_timeout,
        axum::body::to_bytes(body, MAX_BODY_BYTES),
    );
    let bytes = match read.await {
        Ok(Ok(bytes)) => bytes,
        Err(_) => {
            // Not an AdmissionReview: nobody who sends a review stalls, and the connection is
            // closed so that the client cannot hold it with the next request either.
            tracing::debug!(timeout = ?webhook.inner.body_timeout, "request body timed out");
            let answer = Answer::deny("", 408, "Timeout", "lien: request body timed out");
            webhook.count_rejected(&answer);
            return Err((
                StatusCode::REQUEST_TIMEOUT,
                [(header::CONNECTION, "close")],
                "lien: request body timed out\n",
            )
                .into_response());
        }
        Ok(Err(_)) => {
            let answer = too_large();
            webhook.count_rejected(&answer);
            return Err(review_response(&answer));
        }
    };
    if bytes.is_empty() {
        let answer = Answer::deny("", 400, "BadRequest", "lien: empty request body");
        webhook.count_rejected(&answer);
        return Err(review_response(&answer));
    }
    Ok(bytes)
}

async fn validate_handler(
    State(webhook): State<Webhook>,
    peer: Option<axum::Extension<lien_serve::ClientCertificates>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    // Present only when the TLS layer verified the client's certificate against the client CA.
    let authenticated = peer.is_some();
    let bytes = match read_review(&webhook, &headers, body).await {
        Ok(bytes) => bytes,
        Err(answered) => return answered,
    };
    let _slot = match webhook.slot().await {
        Ok(slot) => slot,
        Err(throttled) => return throttled,
    };
    if let Some(refused) = webhook.refuse_unauthenticated(authenticated, &bytes) {
        return refused;
    }
    review_response(&webhook.answer_from(&bytes, authenticated).await)
}

/// `/mutate`: refused to a caller without a verified certificate where a client CA is
/// configured, answered to every caller otherwise (see the module docs).
async fn mutate_handler(
    State(webhook): State<Webhook>,
    peer: Option<axum::Extension<lien_serve::ClientCertificates>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let authenticated = peer.is_some();
    let bytes = match read_review(&webhook, &headers, body).await {
        Ok(bytes) => bytes,
        Err(answered) => return answered,
    };
    let _slot = match webhook.slot().await {
        Ok(slot) => slot,
        Err(throttled) => return throttled,
    };
    if let Some(refused) = webhook.refuse_unauthenticated(authenticated, &bytes) {
        return refused;
    }
    review_response(&webhook.answer_mutation_from(&bytes, authenticated).await)
}

fn too_large() -> Answer {
    Answer::deny(
        "",
        413,
        "RequestEntityTooLarge",
        format!("lien: request body unreadable or larger than {MAX_BODY_BYTES} bytes"),
    )
}

impl Webhook {
    /// With a client CA configured, the answer to a caller that presented no verified
    /// certificate: 401, before anything is parsed, asked or recorded (a forged review must not
    /// make Lien ask the API server anything). `None`: go on.
    fn refuse_unauthenticated(&self, authenticated: bool, bytes: &[u8]) -> Option<Response> {
        if self.inner.review_auth != ReviewAuth::ClientCertificate || authenticated {
            return None;
        }
        self.inner
            .metrics
            .unauthenticated
            .get_or_create(&UnauthenticatedLabels { action: "refused" })
            .inc();
        tracing::warn!(
            "refused a review from a client without a verified client certificate (401): only \
             the API server, with a certificate from --client-ca-file, may send reviews"
        );
        // The request's uid, so that a misconfigured API server shows this message rather
        // than "expected response.uid".
        let answer = Answer::deny(
            salvage_uid(bytes),
            401,
            "Unauthorized",
            "lien: this webhook answers the API server only, which must present a client \
             certificate issued by the CA in Lien's --client-ca-file (the AdmissionConfiguration's \
             kubeConfigFile names it for the webhook's host)",
        );
        self.count_rejected(&answer);
        Some(review_response(&answer))
    }

    /// Whether an access check asked for this caller may go ahead: always for an authenticated
    /// caller or when every caller is trusted; otherwise if the bucket has a token. A refusal
    /// is counted.
    fn may_ask_for(&self, authenticated: bool) -> bool {
        if authenticated || self.inner.review_auth == ReviewAuth::TrustAll {
            return true;
        }
        if self
            .inner
            .unauthenticated_checks
            .lock()
            .try_take(Instant::now())
        {
            return true;
        }
        self.inner
            .metrics
            .unauthenticated
            .get_or_create(&UnauthenticatedLabels {
                action: "throttled",
            })
            .inc();
        false
    }

    /// The status of a review refused because its access check was over the bound.
    fn throttled_status(&self, what: &str) -> crate::review::Status {
        crate::review::Status {
            code: 429,
            reason: "TooManyRequests",
            message: format!(
                "lien: {what}: too many access checks asked for callers the webhook cannot authenticate (no --client-ca-file), so this one was not asked; retry shortly"
            ),
        }
    }

    /// A slot for one review, taken once its body is read: a client still sending its body
    /// holds no slot, so slow senders cannot starve the API server (their bodies are bounded by
    /// [`BODY_TIMEOUT`]). Past the queue wait: 429 with `Retry-After: 1` (see
    /// [`WebhookBuilder::max_concurrency`]).
    async fn slot(&self) -> Result<tokio::sync::SemaphorePermit<'_>, Response> {
        // The common case takes no timer.
        if let Ok(slot) = self.inner.slots.try_acquire() {
            return Ok(slot);
        }
        let metrics = &self.inner.metrics;
        let waited = {
            // Counted down when the wait ends or the client goes away mid-wait.
            struct Waiting<'a>(&'a prometheus_client::metrics::gauge::Gauge);
            impl Drop for Waiting<'_> {
                fn drop(&mut self) {
                    self.0.dec();
                }
            }
            metrics.waiting.inc();
            let _waiting = Waiting(&metrics.waiting);
            tokio::time::timeout(self.inner.queue_wait, self.inner.slots.acquire()).await
        };
        match waited {
            // The semaphore is never closed.
            Ok(Ok(slot)) => Ok(slot),
            Ok(Err(_)) | Err(_) => {
                metrics.throttled.inc();
                Err((
                    StatusCode::TOO_MANY_REQUESTS,
                    [
                        (header::RETRY_AFTER, "1"),
                        (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
                    ],
                    "lien: too many reviews in flight, retry\n",
                )
                    .into_response())
            }
        }
    }

    fn count_rejected(&self, answer: &Answer) {
        self.inner
            .metrics
            .requests
            .get_or_create(&RequestLabels {
                operation: "unknown",
                outcome: outcome_label(answer),
            })
            .inc();
    }
}

async fn ready_handler(State(webhook): State<Webhook>) -> Response {
    if webhook.inner.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ok").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "index not synced").into_response()
    }
}

async fn metrics_handler(State(webhook): State<Webhook>) -> Response {
    let mut out = String::new();
    match prometheus_client::encoding::text::encode(&mut out, &webhook.inner.metrics.registry) {
        Ok(()) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            out,
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// How long a stopping server waits for the reviews in flight: the configuration's
/// `timeoutSeconds`, after which the API server has given up on them anyway.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// A running TLS server; stop it with [`Server::shutdown`] (dropping it stops it too).
///
/// It runs on a runtime of its own, with worker threads of its own (`lien-webhook`): the
/// controller's work in the same process — decoding watch events, planning, writing labels
/// for a selector over 100,000 objects — would otherwise queue reviews behind it on the
/// shared workers (tokio schedules tasks cooperatively), and the API server's DELETEs would
/// wait for it. With threads of its own, a review that arrives is the kernel's to schedule,
/// (docs/benchmarks.md, "A selector Usage over many objects": with Lien on one core,
/// `/healthz`'s p99 rose 22× during a resolution on the shared runtime, 3–5× on its own).
#[derive(Debug)]
pub struct Server {
    addr: std::net::SocketAddr,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Server {
    /// Serves `app` over TLS on `listener` until shut down. Every connection gets its
    /// certificate from `tls` at handshake time, so a rotating resolver applies at once.
    pub fn start(
        listener: TcpListener,
        tls: Arc<rustls::ServerConfig>,
        app: Router,
    ) -> std::io::Result<Self> {
        let timeouts = lien_serve::Timeouts {
            header_read: Some(HEADER_READ_TIMEOUT),
            // On shutdown (SIGTERM) the reviews in flight are answered and the API server's
            // connections told to go elsewhere: a review is never cut off (tests/ha.rs).
            drain: Some(DRAIN_TIMEOUT),
            ..lien_serve::Timeouts::default()
        };
        Self::start_with(listener, tls, app, timeouts)
    }

    /// As [`Server::start`], with other connection timeouts (the request body's is the
    /// [`Webhook`]'s: [`WebhookBuilder::body_timeout`]).
    pub fn start_with(
        listener: TcpListener,
        tls: Arc<rustls::ServerConfig>,
        app: Router,
        timeouts: lien_serve::Timeouts,
    ) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .thread_name("lien-webhook")
            .enable_all()
            .build()?;
        // The listener moves to the webhook's runtime: registered with its I/O driver, so
        // connections are accepted and served by its threads alone.
        let listener = listener.into_std()?;
        let (stop, stopped) = watch::channel(false);
        let task = {
            let _in = runtime.enter();
            let listener = TcpListener::from_std(listener)?;
            lien_serve::serve_tls_with(listener, tls, app, stopped, timeouts)
        };
        Ok(Self {
            addr,
            stop,
            task,
            runtime: Some(runtime),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Stops accepting and closes every connection.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        let _ = (&mut self.task).await;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        self.task.abort();
        // Dropped from async code: its threads are told to stop, not waited for (a runtime
        // dropped in a runtime's context panics).
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
