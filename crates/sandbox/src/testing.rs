//! Test support shared by the sandbox's own tests and Lien's end-to-end tests: an admission
//! webhook (validating or mutating) served over HTTPS on 127.0.0.1 whose answers a test decides,
//! and which records every `AdmissionReview` it receives.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::routing::post;
use base64::Engine;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::tls::{CertificateAuthority, TlsError};

/// What a test webhook answers for one `AdmissionRequest`.
pub type Decide = dyn Fn(&Value) -> Verdict + Send + Sync;

/// A webhook's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Allow,
    /// `allowed: false` with this HTTP code and message.
    Deny {
        code: u16,
        message: String,
    },
    /// No answer for this long (to test `timeoutSeconds`).
    Hang(Duration),
    /// `allowed: false` with this whole `Status` (`code`, `reason`, `message`, `details`), as
    /// webhooks built on controller-runtime answer.
    DenyStatus(Value),
    /// `allowed: true` with this RFC 6902 JSON patch (`patchType: JSONPatch`, the patch base64
    /// encoded), as a mutating webhook answers.
    Patch(Value),
    /// This `response` as it is (its `uid` filled in when it has none): for answers no
    /// well-behaved webhook gives, such as a malformed patch.
    Response(Value),
}

impl Verdict {
    /// A JSON patch setting annotation `key` to `value` on `object`: adding the whole
    /// `annotations` map when the object has none (a JSON patch cannot add a member to a
    /// missing map).
    pub fn annotate(object: &Value, key: &str, value: &str) -> Verdict {
        let patch = if object["metadata"]["annotations"].is_object() {
            // JSON Pointer escapes `~` and `/` in a member name.
            let escaped = key.replace('~', "~0").replace('/', "~1");
            json!([{"op": "add", "path": format!("/metadata/annotations/{escaped}"), "value": value}])
        } else {
            json!([{"op": "add", "path": "/metadata/annotations", "value": {key: value}}])
        };
        Verdict::Patch(patch)
    }
}

pub struct TestWebhook {
    url: String,
    ca_bundle: String,
    seen: Arc<Mutex<Vec<Value>>>,
    decide: Arc<Mutex<Arc<Decide>>>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for TestWebhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestWebhook")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl TestWebhook {
    /// Starts a webhook on 127.0.0.1 with an ephemeral port and its own CA.
    pub async fn start(
        decide: impl Fn(&Value) -> Verdict + Send + Sync + 'static,
    ) -> Result<TestWebhook, TlsError> {
        let ca = CertificateAuthority::new("lien test webhook CA")?;
        let cert = ca.issue(&["127.0.0.1", "localhost"])?;
        let tls = cert.server_config(&ca)?;
        Self::serve(tls, ca.cert_pem(), decide).await
    }

    /// Starts a webhook on 127.0.0.1 serving a certificate the test made itself (e.g. with
    /// `openssl req -x509`, as users do); `caBundle` is that certificate.
    pub async fn start_with_pem(
        cert_pem: &str,
        key_pem: &str,
        decide: impl Fn(&Value) -> Verdict + Send + Sync + 'static,
    ) -> Result<TestWebhook, TlsError> {
        let chain = rustls_pemfile::certs(&mut cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::Io(format!("reading the certificate PEM: {e}")))?;
        let key = rustls_pemfile::private_key(&mut key_pem.as_bytes())
            .map_err(|e| TlsError::Io(format!("reading the key PEM: {e}")))?
            .ok_or_else(|| TlsError::Io("the key PEM holds no private key".into()))?;
        Self::serve(crate::tls::server_config(chain, key)?, cert_pem, decide).await
    }

    async fn serve(
        tls: Arc<rustls::ServerConfig>,
        ca_bundle_pem: &str,
        decide: impl Fn(&Value) -> Verdict + Send + Sync + 'static,
    ) -> Result<TestWebhook, TlsError> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| TlsError::Io(e.to_string()))?;
        let addr = listener
            .local_addr()
            .map_err(|e| TlsError::Io(e.to_string()))?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let decide: Arc<Mutex<Arc<Decide>>> = Arc::new(Mutex::new(Arc::new(decide)));
        let (recorded, current) = (seen.clone(), decide.clone());
        let handler = move |Json(review): Json<Value>| {
            let (recorded, current) = (recorded.clone(), current.clone());
            async move {
                let request = review["request"].clone();
                recorded
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(request.clone());
                let decide = current.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let verdict = decide(&request);
                let mut response = json!({"uid": request["uid"], "allowed": true});
                match verdict {
                    Verdict::Allow => {}
                    Verdict::Deny { code, message } => {
                        response["allowed"] = json!(false);
                        response["status"] = json!({"code": code, "message": message});
                    }
                    Verdict::DenyStatus(status) => {
                        response["allowed"] = json!(false);
                        response["status"] = status;
                    }
                    Verdict::Hang(d) => tokio::time::sleep(d).await,
                    Verdict::Patch(patch) => {
                        let bytes = serde_json::to_vec(&patch).unwrap_or_default();
                        response["patchType"] = json!("JSONPatch");
                        response["patch"] =
                            json!(base64::engine::general_purpose::STANDARD.encode(bytes));
                    }
                    Verdict::Response(mut raw) => {
                        if raw["uid"].is_null() {
                            raw["uid"] = request["uid"].clone();
                        }
                        response = raw;
                    }
                }
                Json(
                    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}),
                )
            }
        };
        let (stop, stopped) = watch::channel(false);
        let task = lien_serve::serve_tls(
            listener,
            tls,
            Router::new().fallback(post(handler)),
            stopped,
        );
        Ok(TestWebhook {
            url: format!("https://{addr}/validate"),
            ca_bundle: base64::engine::general_purpose::STANDARD.encode(ca_bundle_pem),
            seen,
            decide,
            stop,
            task,
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// `caBundle` for the webhook configuration: base64 of the CA's PEM.
    pub fn ca_bundle(&self) -> &str {
        &self.ca_bundle
    }

    /// Changes the answers from now on.
    pub fn set_decide(&self, decide: impl Fn(&Value) -> Verdict + Send + Sync + 'static) {
        *self.decide.lock().unwrap_or_else(|e| e.into_inner()) = Arc::new(decide);
    }

    /// Every `AdmissionRequest` received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A `ValidatingWebhookConfiguration` calling this webhook with the given `rules`, failure
    /// policy and optional object selector.
    pub fn configuration(
        &self,
        name: &str,
        rules: Value,
        failure_policy: &str,
        object_selector: Option<Value>,
    ) -> Value {
        let mut hook = json!({
            "name": format!("{name}.test.lien.dev"),
            "clientConfig": {"url": self.url, "caBundle": self.ca_bundle},
            "rules": rules,
            "failurePolicy": failure_policy,
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 2,
        });
        if let Some(sel) = object_selector {
            hook["objectSelector"] = sel;
        }
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [hook],
        })
    }

    /// A `MutatingWebhookConfiguration` calling this webhook (at `/mutate`) with the given
    /// `rules`, failure policy and optional object selector; `reinvocationPolicy` is left to its
    /// default (`Never`).
    pub fn mutating_configuration(
        &self,
        name: &str,
        rules: Value,
        failure_policy: &str,
        object_selector: Option<Value>,
    ) -> Value {
        let mut configuration = self.configuration(name, rules, failure_policy, object_selector);
        configuration["kind"] = json!("MutatingWebhookConfiguration");
        let url = self.url.trim_end_matches("/validate").to_string() + "/mutate";
        configuration["webhooks"][0]["clientConfig"]["url"] = json!(url);
        configuration
    }

    /// Stops serving; the port refuses connections afterwards.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        let _ = (&mut self.task).await;
    }
}

impl Drop for TestWebhook {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        self.task.abort();
    }
}

/// Polls `check` every few milliseconds until it returns `Some`, and fails the test (panics)
/// naming `what` after `deadline`: tests wait for a condition, never sleep as synchronisation.
pub async fn wait_for<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let end = tokio::time::Instant::now() + deadline;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "timed out after {deadline:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
