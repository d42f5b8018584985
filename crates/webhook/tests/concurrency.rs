//! The bound on reviews in flight (`WebhookBuilder::max_concurrency`): with N reviews held, the
//! N+1th waits for a slot and is answered once one frees; if none frees within the queue wait
//! it is answered 429 with `Retry-After`, which kube-apiserver's webhook client retries. The
//! reviews are held in a live check that answers only when the test says so.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use lien_core::{Decision, ObjectKey, RelationIndex};
use lien_webhook::{BoxFuture, LiveCheck, LiveCheckError, SharedIndex, Webhook};
use parking_lot::RwLock;
use tokio::sync::Semaphore;
use tower::ServiceExt;

/// A live check that holds every call until the test adds a permit, counting the calls begun.
struct Gate {
    begun: AtomicUsize,
    open: Semaphore,
}

impl LiveCheck for Gate {
    fn check<'a>(
        &'a self,
        _object: &'a ObjectKey,
        _uid: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Decision, LiveCheckError>> {
        self.begun.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            let permit = self.open.acquire().await.expect("never closed");
            permit.forget();
            Ok(Decision::Allowed)
        })
    }
}

const MAX: usize = 2;

fn router(gate: Arc<Gate>, queue_wait: Duration) -> Router {
    // Empty index: the labelled ConfigMap in the fixture is confirmed live, i.e. held in `gate`.
    let index: SharedIndex = Arc::new(RwLock::new(RelationIndex::new()));
    Webhook::builder(index)
        // Longer than any wait below: the live check answers only when opened.
        .live_check(gate, Duration::from_secs(60))
        .max_concurrency(MAX, queue_wait)
        .ready(true)
        .build()
        .router()
}

async fn post(router: Router, path: &str, body: Vec<u8>) -> axum::response::Response {
    router
        .oneshot(
            Request::post(path)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body))
                .expect("request"),
        )
        .await
        .expect("infallible")
}

async fn metric(router: &Router, name: &str) -> Option<String> {
    let resp = router
        .clone()
        .oneshot(
            Request::get("/metrics")
                .body(Body::empty())
                .expect("request"),
        )
        .await
        .expect("infallible");
    assert_eq!(resp.status(), StatusCode::OK, "/metrics is never limited");
    let text = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .expect("body");
    String::from_utf8_lossy(&text)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")).map(str::to_owned))
}

/// Polls `check` until it holds, for at most 5 s.
async fn wait_for(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Starts `MAX` reviews and waits until each is held in the live check.
async fn hold_max(router: &Router, gate: &Gate) -> Vec<tokio::task::JoinHandle<StatusCode>> {
    let review = common::fixture("delete-configmap.json");
    let held: Vec<_> = (0..MAX)
        .map(|_| {
            let (router, review) = (router.clone(), review.clone());
            tokio::spawn(async move { post(router, "/validate", review).await.status() })
        })
        .collect();
    wait_for("N reviews held in the live check", async || {
        gate.begun.load(Ordering::SeqCst) == MAX
    })
    .await;
    held
}

fn gate() -> Arc<Gate> {
    Arc::new(Gate {
        begun: AtomicUsize::new(0),
        open: Semaphore::new(0),
    })
}

#[tokio::test]
async fn past_the_bound_a_review_waits_for_a_slot_and_is_then_answered() {
    let gate = gate();
    let router = router(gate.clone(), Duration::from_secs(60));
    let held = hold_max(&router, &gate).await;

    let review = common::fixture("delete-configmap.json");
    let next = tokio::spawn(post(router.clone(), "/validate", review));
    wait_for("the N+1th review waiting for a slot", async || {
        metric(&router, "lien_webhook_requests_waiting")
            .await
            .as_deref()
            == Some("1")
    })
    .await;
    // Waiting, not worked on: the live check saw only the N held ones.
    assert_eq!(gate.begun.load(Ordering::SeqCst), MAX);
    assert!(!next.is_finished());
    // Probes are not limited.
    let healthz = router
        .clone()
        .oneshot(
            Request::get("/healthz")
                .body(Body::empty())
                .expect("request"),
        )
        .await
        .expect("infallible");
    assert_eq!(healthz.status(), StatusCode::OK);

    // One held review answers: its slot goes to the waiting one, which is then held too.
    gate.open.add_permits(1);
    wait_for("the waiting review takes the freed slot", async || {
        gate.begun.load(Ordering::SeqCst) == MAX + 1
    })
    .await;
    gate.open.add_permits(MAX);
    for h in held {
        assert_eq!(h.await.expect("task"), StatusCode::OK);
    }
    let resp = next.await.expect("task");
    assert_eq!(resp.status(), StatusCode::OK);
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .expect("body");
    let review: serde_json::Value = serde_json::from_slice(&body).expect("an AdmissionReview");
    assert_eq!(review["response"]["allowed"], true, "{review}");
    assert_eq!(
        metric(&router, "lien_webhook_requests_waiting")
            .await
            .as_deref(),
        Some("0")
    );
    assert_eq!(
        metric(&router, "lien_webhook_requests_throttled_total")
            .await
            .as_deref(),
        Some("0")
    );
}

#[tokio::test]
async fn past_the_bound_and_the_queue_wait_a_review_is_answered_429_with_retry_after() {
    let gate = gate();
    let router = router(gate.clone(), Duration::from_millis(50));
    let held = hold_max(&router, &gate).await;

    let review = common::fixture("delete-configmap.json");
    for path in ["/validate", "/mutate"] {
        let resp = post(router.clone(), path, review.clone()).await;
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS, "{path}");
        assert_eq!(
            resp.headers()
                .get(header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok()),
            Some("1"),
            "{path}"
        );
    }
    assert_eq!(gate.begun.load(Ordering::SeqCst), MAX, "not worked on");
    assert_eq!(
        metric(&router, "lien_webhook_requests_throttled_total")
            .await
            .as_deref(),
        Some("2")
    );

    // Once the held ones are answered, the retry is answered.
    gate.open.add_permits(MAX + 1);
    for h in held {
        assert_eq!(h.await.expect("task"), StatusCode::OK);
    }
    let resp = post(router.clone(), "/validate", review).await;
    assert_eq!(resp.status(), StatusCode::OK);
}
