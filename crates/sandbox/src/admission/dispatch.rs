//! Calling webhooks: kube-apiserver's validating dispatcher and the `callHook` both dispatchers
//! share, with the REST client's URL building and error wording. The mutating dispatcher, which
//! calls webhooks one after the other and applies their patches, is in `mutating.rs`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use serde_json::Value;

use super::matching::{fails_closed, matches};
use super::review::admission_review;
use super::{Attributes, is_exempt_kind};
use crate::error::ApiError;

/// `timeoutSeconds` when the configuration leaves it out (the v1 default).
const DEFAULT_TIMEOUT_SECONDS: u64 = 10;

/// How the sandbox reaches webhooks.
#[derive(Debug, Clone, Default)]
pub struct DispatcherConfig {
    /// Maps a webhook's `clientConfig.service` (namespace, name) to the local socket addresses
    /// of its endpoints, so service-based webhooks can be reached from the sandbox; TLS still
    /// verifies the certificate for `<name>.<namespace>.svc` against `caBundle`. The addresses
    /// are dialled in order and one that refuses the connection is skipped — what a client of
    /// a Service sees when kube-proxy leaves a not-ready endpoint out.
    pub services: HashMap<(String, String), Vec<SocketAddr>>,
    /// The credentials presented to webhooks, as kube-apiserver's AdmissionConfiguration
    /// `kubeConfigFile` gives them (default: none).
    pub kubeconfig: super::credentials::WebhookKubeconfig,
}

/// Calls admission webhooks, validating and mutating. Holds one HTTP client per `caBundle` and
/// kubeconfig user, so connections are reused across calls as kube-apiserver's client manager
/// reuses them.
pub struct Dispatcher {
    config: DispatcherConfig,
    clients: Mutex<HashMap<String, reqwest::Client>>,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// How one webhook call went wrong; the two cases are treated differently by `failurePolicy`.
#[derive(Debug)]
pub(super) enum CallError {
    /// kube-apiserver's `ErrCallingWebhook`: the webhook could not be asked or gave no usable
    /// answer. The text follows `failed calling webhook "<name>": `. Fails the request under
    /// `failurePolicy: Fail`, is ignored under `Ignore`.
    Calling(String),
    /// A denial (or a refusal such as "does not support dry run"): fails the request whatever
    /// the failure policy.
    Rejected(ApiError),
}

/// Where to send one webhook's request.
struct Endpoint {
    /// The URL as kube-apiserver's REST client builds and prints it (`…?timeout=10s`).
    display: String,
    /// The URL to request: `display`, except that a mapped service is requested without its
    /// port so that reqwest dials the mapped address while keeping the service DNS name for
    /// TLS verification.
    request: String,
    /// What a refused connection names, as Go's `dial tcp <addr>`.
    dial: String,
    /// A service webhook with no mapping: cannot be resolved from the sandbox.
    unresolvable_host: Option<String>,
    /// What the kubeconfig's users are looked up by: the URL's host (and port, if written), or
    /// `<name>.<namespace>.svc:<port>`.
    auth_target: String,
}

impl Dispatcher {
    pub fn new(config: DispatcherConfig) -> Self {
        Dispatcher {
            config,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// Calls every matching webhook of every ValidatingWebhookConfiguration (v1 objects as
    /// stored) in parallel, as kube-apiserver does; `Ok(warnings)` if all allow, else the first
    /// denial/failure as an [`ApiError`].
    ///
    /// Matching errors (an unknown namespace under a namespace selector, a failing match
    /// condition under `failurePolicy: Fail`) fail the request before any webhook is called.
    /// Configurations are taken in name order and their webhooks in list order; when several
    /// webhooks fail, the first in that order is reported (kube-apiserver reports whichever
    /// finished first). Warnings of webhooks that answered are returned de-duplicated in the
    /// same order; a failed request loses them (kube-apiserver still sends them as headers).
    pub async fn validate(
        &self,
        configurations: &[Value],
        attrs: &Attributes,
    ) -> Result<Vec<String>, ApiError> {
        if is_exempt_kind(&attrs.kind) {
            return Ok(Vec::new());
        }
        let mut ordered: Vec<&Value> = configurations.iter().collect();
        ordered.sort_by_key(|c| c["metadata"]["name"].as_str().unwrap_or_default());
        let mut hooks = Vec::new();
        for configuration in ordered {
            for hook in configuration["webhooks"].as_array().into_iter().flatten() {
                if matches(hook, attrs)? {
                    hooks.push(hook);
                }
            }
        }
        if hooks.is_empty() {
            return Ok(Vec::new());
        }
        let outcomes = futures::future::join_all(
            hooks
                .iter()
                .map(|hook| self.call_hook(hook, attrs, Kind::Validating)),
        )
        .await;

        let mut warnings: Vec<String> = Vec::new();
        let mut first_error = None;
        for (hook, (hook_warnings, result)) in hooks.iter().zip(outcomes) {
            for w in hook_warnings {
                if !warnings.contains(&w) {
                    warnings.push(w);
                }
            }
            let name = hook["name"].as_str().unwrap_or_default();
            let error = match result {
                Ok(_) => continue,
                Err(CallError::Calling(reason)) => {
                    let message = format!("failed calling webhook \"{name}\": {reason}");
                    if !fails_closed(hook) {
                        tracing::warn!("Failed calling webhook, failing open {name}: {message}");
                        continue;
                    }
                    tracing::warn!("Failed calling webhook, failing closed {name}: {message}");
                    ApiError::internal(message)
                }
                Err(CallError::Rejected(error)) => {
                    tracing::debug!("rejected by webhook {name:?}: {}", error.message);
                    error
                }
            };
            first_error.get_or_insert(error);
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(warnings),
        }
    }

    /// One webhook: its warnings (when it answered) and its verified answer if it allowed the
    /// request; a denial is `CallError::Rejected`.
    pub(super) async fn call_hook(
        &self,
        hook: &Value,
        attrs: &Attributes,
        kind: Kind,
    ) -> (Vec<String>, Result<VerifiedResponse, CallError>) {
        let name = hook["name"].as_str().unwrap_or_default();
        if attrs.dry_run {
            match hook["sideEffects"].as_str() {
                None => {
                    return (
                        Vec::new(),
                        Err(CallError::Calling("Webhook SideEffects is nil".into())),
                    );
                }
                Some("None" | "NoneOnDryRun") => {}
                Some(_) => {
                    return (
                        Vec::new(),
                        Err(CallError::Rejected(ApiError::bad_request(format!(
                            "admission webhook \"{name}\" does not support dry run"
                        )))),
                    );
                }
            }
        }
        // The first version kube-apiserver knows, in the webhook's order of preference.
        let Some(version) = hook["admissionReviewVersions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .find(|v| matches!(*v, "v1" | "v1beta1"))
        else {
            return (
                Vec::new(),
                Err(CallError::Calling(
                    "could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)".into(),
                )),
            );
        };
        let uid = uuid::Uuid::new_v4().to_string();
        let body = admission_review(&format!("admission.k8s.io/{version}"), &uid, attrs);

        let client_config = &hook["clientConfig"];
        let timeout_seconds = hook["timeoutSeconds"]
            .as_u64()
            .unwrap_or(DEFAULT_TIMEOUT_SECONDS);
        let endpoint = match self.endpoint(client_config, timeout_seconds) {
            Ok(e) => e,
            Err(e) => {
                return (
                    Vec::new(),
                    Err(CallError::Calling(format!(
                        "could not get REST client: {e}"
                    ))),
                );
            }
        };

        let credentials = self.config.kubeconfig.lookup(&endpoint.auth_target);
        let client = match self.client(
            client_config["caBundle"].as_str().unwrap_or_default(),
            credentials,
        ) {
            Ok(c) => c,
            Err(e) => {
                return (
                    Vec::new(),
                    Err(CallError::Calling(format!(
                        "could not get REST client: {e}"
                    ))),
                );
            }
        };
        let token = credentials.and_then(|(_, c)| c.token.as_deref());
        let review = match post(
            &client,
            token,
            &endpoint,
            &body,
            Duration::from_secs(timeout_seconds),
        )
        .await
        {
            Ok(review) => review,
            Err(e) => {
                return (
                    Vec::new(),
                    Err(CallError::Calling(format!("failed to call webhook: {e}"))),
                );
            }
        };
        let response = match verify_response(version, &uid, &review, kind) {
            Ok(r) => r,
            Err(e) => {
                return (
                    Vec::new(),
                    Err(CallError::Calling(format!(
                        "received invalid webhook response: {e}"
                    ))),
                );
            }
        };
        if response.allowed {
            (response.warnings.clone(), Ok(response))
        } else {
            (
                response.warnings,
                Err(CallError::Rejected(denial(name, response.status.as_ref()))),
            )
        }
    }

    /// The client for one `caBundle` (base64 of PEM certificates) and kubeconfig user, built
    /// on first use.
    fn client(
        &self,
        ca_bundle: &str,
        credentials: Option<(&str, &super::credentials::Credentials)>,
    ) -> Result<reqwest::Client, String> {
        let key = format!(
            "{ca_bundle}\n{}",
            credentials.map(|(name, _)| name).unwrap_or_default()
        );
        let mut clients = self
            .clients
            .lock()
            .map_err(|_| "client cache poisoned".to_string())?;
        if let Some(c) = clients.get(&key) {
            return Ok(c.clone());
        }
        let certificate = credentials.and_then(|(_, c)| c.client_certificate.as_ref());
        let client = build_client(ca_bundle, &self.config.services, certificate)?;
        clients.insert(key, client.clone());
        Ok(client)
    }

    fn endpoint(&self, client_config: &Value, timeout_seconds: u64) -> Result<Endpoint, String> {
        let query = format!("?timeout={}", go_duration_seconds(timeout_seconds));
        if let Some(url) = client_config["url"].as_str() {
            let parsed = reqwest::Url::parse(url).map_err(|e| format!("parse {url:?}: {e}"))?;
            if parsed.scheme() != "https" {
                return Err(format!(
                    "webhook URL {url:?} must use the https scheme (the sandbox calls webhooks over TLS only)"
                ));
            }
            let host = parsed.host_str().unwrap_or_default();
            let port = parsed.port_or_known_default().unwrap_or(443);
            let authority = match parsed.port() {
                Some(p) => format!("{host}:{p}"),
                None => host.to_string(),
            };
            let display = format!("https://{authority}{}{query}", clean_path(parsed.path()));
            return Ok(Endpoint {
                request: display.clone(),
                display,
                dial: format!("{host}:{port}"),
                unresolvable_host: None,
                auth_target: authority,
            });
        }
        let service = &client_config["service"];
        if !service.is_object() {
            return Err("one of url or service must be set".into());
        }
        let namespace = service["namespace"].as_str().unwrap_or_default();
        let name = service["name"].as_str().unwrap_or_default();
        let port = service["port"].as_u64().unwrap_or(443);
        let path = clean_path(service["path"].as_str().unwrap_or_default());
        let host = format!("{name}.{namespace}.svc");
        let display = format!("https://{host}:{port}{path}{query}");
        let auth_target = format!("{host}:{port}");
        match self
            .config
            .services
            .get(&(namespace.to_string(), name.to_string()))
        {
            Some(addrs) => Ok(Endpoint {
                display,
                request: format!("https://{host}{path}{query}"),
                // Every endpoint refused: the last one tried is the one the error names.
                dial: addrs.last().map(SocketAddr::to_string).unwrap_or_default(),
                unresolvable_host: None,
                auth_target,
            }),
            None => Ok(Endpoint {
                request: display.clone(),
                display,
                dial: format!("{host}:{port}"),
                unresolvable_host: Some(host),
                auth_target,
            }),
        }
    }
}

fn build_client(
    ca_bundle: &str,
    services: &HashMap<(String, String), Vec<SocketAddr>>,
    client_certificate: Option<&(String, String)>,
) -> Result<reqwest::Client, String> {
    let pem = base64::engine::general_purpose::STANDARD
        .decode(ca_bundle.trim())
        .map_err(|e| format!("caBundle is not valid base64: {e}"))?;
    let bundle = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("unable to load root certificates: {e}"))?;
    if !pem.is_empty() && bundle.is_empty() {
        return Err("unable to load root certificates: unable to parse bytes as PEM block".into());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = super::trust::BundleVerifier::new(bundle, provider.clone())?;
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier));
    let mut tls = match client_certificate {
        None => builder.with_no_client_auth(),
        Some((cert_pem, key_pem)) => {
            let chain = rustls_pemfile::certs(&mut cert_pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("unable to load client certificate: {e}"))?;
            let key = rustls_pemfile::private_key(&mut key_pem.as_bytes())
                .map_err(|e| format!("unable to load client key: {e}"))?
                .ok_or("unable to load client key: no private key in PEM")?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("unable to load client certificate: {e}"))?
        }
    };
    // kube-apiserver's Go client offers HTTP/2 and falls back to HTTP/1.1.
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let mut builder = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        // Webhook traffic goes straight to the webhook, whatever the environment's proxy says.
        .no_proxy()
        .user_agent("kube-apiserver-admission");
    for ((namespace, name), addrs) in services {
        builder = builder.resolve_to_addrs(&format!("{name}.{namespace}.svc"), addrs);
    }
    builder.build().map_err(|e| e.to_string())
}

/// Go's `path.Join("/", p)`: rooted, cleaned, no trailing slash.
fn clean_path(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Go's `time.Duration.String()` for whole seconds.
fn go_duration_seconds(seconds: u64) -> String {
    match (seconds / 3600, seconds % 3600 / 60, seconds % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}

/// POSTs the review and decodes the answer as client-go's REST client would; errors read as
/// the Go error after `failed to call webhook: `.
async fn post(
    client: &reqwest::Client,
    token: Option<&str>,
    endpoint: &Endpoint,
    body: &Value,
    timeout: Duration,
) -> Result<Value, String> {
    let transport = |cause: String| format!("Post \"{}\": {cause}", endpoint.display);
    if let Some(host) = &endpoint.unresolvable_host {
        return Err(transport(format!("dial tcp: lookup {host}: no such host")));
    }
    let bytes = serde_json::to_vec(body).map_err(|e| e.to_string())?;
    let exchange = async {
        let mut request = client
            .post(&endpoint.request)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "application/json, */*");
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.body(bytes).send().await?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = response.bytes().await?;
        Ok::<_, reqwest::Error>((status, content_type, body))
    };
    let (status, content_type, body) = match tokio::time::timeout(timeout, exchange).await {
        Err(_) => return Err(transport("context deadline exceeded".into())),
        Ok(Err(e)) => return Err(transport(describe_transport_error(&e, &endpoint.dial))),
        Ok(Ok(parts)) => parts,
    };
    decode_response(status, content_type.as_deref(), &body)
}

/// client-go's `transformResponse` + `Into`: a non-2xx answer becomes its `Status` message if
/// the body is a failure `Status`, else the generic message for the code.
fn decode_response(status: u16, content_type: Option<&str>, body: &[u8]) -> Result<Value, String> {
    // No Content-Type means the client's own, JSON.
    let content_type = content_type.unwrap_or("application/json");
    let media_type = crate::http::media_type(content_type);
    let is_json = media_type == "application/json";
    let parsed: Option<Value> = is_json
        .then(|| serde_json::from_slice::<Value>(body).ok())
        .flatten();
    let failure_status = parsed.as_ref().filter(|v| {
        v["kind"] == "Status"
            && matches!(v["apiVersion"].as_str(), None | Some("v1"))
            && v["status"] == "Failure"
    });

    if !(200..=206).contains(&status) {
        if let Some(s) = failure_status {
            return Err(s["message"].as_str().unwrap_or_default().to_string());
        }
        let text = if media_type.starts_with("text/") {
            let cut = &body[..body.len().min(2048)];
            String::from_utf8_lossy(cut).trim().to_string()
        } else {
            "unknown".to_string()
        };
        return Err(generic_server_message(status, &text));
    }
    if !is_json {
        return Err(format!("serializer for {content_type} doesn't exist"));
    }
    if body.is_empty() {
        return Err(format!(
            "0-length response with status code: {status} and content type: {content_type}"
        ));
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    if value["kind"] == "Status" && value["status"] != "Success" {
        return Err(value["message"].as_str().unwrap_or_default().to_string());
    }
    Ok(value)
}

/// `apierrors.NewGenericServerResponse`'s messages for an unexpected answer.
fn generic_server_message(code: u16, server_message: &str) -> String {
    match code {
        409 => "the server reported a conflict".into(),
        404 => "the server could not find the requested resource".into(),
        400 => "the server rejected our request for an unknown reason".into(),
        401 => "the server has asked for the client to provide credentials".into(),
        403 => server_message.into(),
        406 if server_message.is_empty() || server_message == "unknown" => {
            "the server was unable to respond with a content type that the client supports".into()
        }
        406 | 415 => server_message.into(),
        405 => "the server does not allow this method on the requested resource".into(),
        422 => "the server rejected our request due to an error in our request".into(),
        503 => "the server is currently unable to handle the request".into(),
        504 => "the server was unable to return a response in the time allotted, but may still be processing the request".into(),
        429 => "the server has received too many requests and has asked us to try again later".into(),
        c if c >= 500 => format!(
            "an error on the server ({server_message:?}) has prevented the request from succeeding"
        ),
        c => format!("the server responded with the status code {c} but did not return more information"),
    }
}

/// The cause of a transport failure, in the words of Go's `net/http` and `crypto/tls` where
/// the failure is a common one (refused connection, untrusted or misnamed certificate).
fn describe_transport_error(error: &reqwest::Error, dial: &str) -> String {
    if let Some(known) = describe_known_cause(error, dial) {
        return known;
    }
    // Otherwise the whole chain, innermost last, as Go wraps errors.
    let mut parts = vec![error.to_string()];
    let mut source = std::error::Error::source(error);
    while let Some(e) = source {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = e.source();
    }
    parts.join(": ")
}

/// Looks through the error chain, and into the errors `std::io::Error` wraps (which its own
/// `source` skips), for a refused connection or a TLS failure.
fn describe_known_cause(error: &(dyn std::error::Error + 'static), dial: &str) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(describe_tls_error(tls));
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return Some(format!("dial tcp {dial}: connect: connection refused"));
            }
            if let Some(inner) = io.get_ref() {
                let inner: &(dyn std::error::Error + 'static) = inner;
                if let Some(found) = describe_known_cause(inner, dial) {
                    return Some(found);
                }
            }
        }
        source = e.source();
    }
    None
}

fn describe_tls_error(error: &rustls::Error) -> String {
    use rustls::CertificateError as C;
    const VERIFY: &str = "tls: failed to verify certificate: x509: ";
    match error {
        // A CA of the same name that did not sign the certificate is as unknown to Go.
        rustls::Error::InvalidCertificate(C::UnknownIssuer | C::BadSignature) => {
            format!("{VERIFY}certificate signed by unknown authority")
        }
        rustls::Error::InvalidCertificate(C::NotValidForNameContext {
            expected,
            presented,
        }) => {
            let names: Vec<String> = presented
                .iter()
                .map(|p| unquote_presented_name(p))
                .collect();
            format!(
                "{VERIFY}certificate is valid for {}, not {}",
                names.join(", "),
                expected.to_str()
            )
        }
        rustls::Error::InvalidCertificate(C::NotValidForName) => {
            format!("{VERIFY}certificate is not valid for the requested name")
        }
        // Go adds the times (RFC 3339, whole seconds) when it knows them.
        rustls::Error::InvalidCertificate(C::ExpiredContext { time, not_after }) => format!(
            "{VERIFY}certificate has expired or is not yet valid: current time {} is after {}",
            rfc3339(*time),
            rfc3339(*not_after)
        ),
        rustls::Error::InvalidCertificate(C::NotValidYetContext { time, not_before }) => format!(
            "{VERIFY}certificate has expired or is not yet valid: current time {} is before {}",
            rfc3339(*time),
            rfc3339(*not_before)
        ),
        rustls::Error::InvalidCertificate(C::Expired | C::NotValidYet) => {
            format!("{VERIFY}certificate has expired or is not yet valid")
        }
        other => format!("tls: {other}"),
    }
}

fn rfc3339(t: rustls::pki_types::UnixTime) -> String {
    jiff::Timestamp::from_second(t.as_secs() as i64)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| t.as_secs().to_string())
}

/// rustls reports presented names as `DnsName("x")` / `IpAddress(…)`; Go lists the bare names.
fn unquote_presented_name(presented: &str) -> String {
    match presented.split_once('(') {
        Some((_, rest)) => rest.trim_end_matches(')').trim_matches('"').to_string(),
        None => presented.to_string(),
    }
}

/// Which dispatcher calls a webhook: they verify answers differently (only a mutating webhook
/// may answer with a patch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Validating,
    Mutating,
}

/// The parts of an `AdmissionResponse` the dispatchers use.
#[derive(Debug, Clone)]
pub(super) struct VerifiedResponse {
    allowed: bool,
    status: Option<Value>,
    pub(super) warnings: Vec<String>,
    /// The decoded `patch` (a mutating webhook's; empty when it sent none).
    pub(super) patch: Vec<u8>,
    /// `patchType` as sent (`""` when absent); a v1beta1 answer with a patch is pinned to
    /// `JSONPatch`, as kube-apiserver pins it.
    pub(super) patch_type: String,
}

#[cfg(test)]
impl VerifiedResponse {
    pub(super) fn for_tests(patch: Vec<u8>, patch_type: &str) -> Self {
        VerifiedResponse {
            allowed: true,
            status: None,
            warnings: Vec::new(),
            patch,
            patch_type: patch_type.to_string(),
        }
    }
}

/// `VerifyAdmissionResponse`, after Go's typed decoding.
fn verify_response(
    version: &str,
    uid: &str,
    review: &Value,
    kind: Kind,
) -> Result<VerifiedResponse, String> {
    let response = match review.get("response") {
        None | Some(Value::Null) => return Err("webhook response was absent".into()),
        Some(r) => r,
    };
    let allowed = match &response["allowed"] {
        Value::Null => false,
        Value::Bool(b) => *b,
        other => return Err(unmarshal_error(other, "allowed", "bool")),
    };
    let warnings = match &response["warnings"] {
        Value::Null => Vec::new(),
        Value::Array(items) => items
            .iter()
            .map(|w| {
                w.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| unmarshal_error(w, "warnings", "string"))
            })
            .collect::<Result<_, _>>()?,
        other => return Err(unmarshal_error(other, "warnings", "[]string")),
    };
    let got_uid = match &response["uid"] {
        Value::Null => "",
        Value::String(s) => s.as_str(),
        other => return Err(unmarshal_error(other, "uid", "types.UID")),
    };
    let status = response.get("status").filter(|s| !s.is_null()).cloned();
    // v1beta1 answers were never checked for uid, kind or patches.
    if version == "v1" {
        if got_uid != uid {
            return Err(format!(
                "expected response.uid=\"{uid}\", got \"{got_uid}\""
            ));
        }
        let api_version = review["apiVersion"].as_str().unwrap_or_default();
        let (group, ver) = api_version.split_once('/').unwrap_or(("", api_version));
        let review_kind = review["kind"].as_str().unwrap_or_default();
        if (group, ver, review_kind) != ("admission.k8s.io", "v1", "AdmissionReview") {
            return Err(format!(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {group}/{ver}, Kind={review_kind}"
            ));
        }
    }
    // `patch` is a Go `[]byte`: base64 in JSON, decoded with the rest of the answer.
    let patch = match &response["patch"] {
        Value::Null => Vec::new(),
        Value::String(s) => base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|e| go_base64_error(&e))?,
        other => return Err(unmarshal_error(other, "patch", "[]uint8")),
    };
    let patch_type = match &response["patchType"] {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => return Err(unmarshal_error(other, "patchType", "v1.PatchType")),
    };
    let mut verified = VerifiedResponse {
        allowed,
        status,
        warnings,
        patch: Vec::new(),
        patch_type: String::new(),
    };
    if version != "v1" {
        // v1beta1 answers were never checked: a patch is taken as a JSON patch, and a
        // validating webhook's patch is dropped.
        if kind == Kind::Mutating && !patch.is_empty() {
            verified.patch = patch;
            verified.patch_type = "JSONPatch".into();
        }
        return Ok(verified);
    }
    match kind {
        Kind::Validating => {
            if !patch.is_empty() {
                return Err("validating webhook may not return response.patch".into());
            }
            if patch_type.is_some() {
                return Err("validating webhook may not return response.patchType".into());
            }
        }
        Kind::Mutating => {
            if !patch.is_empty() && patch_type.is_none() {
                return Err("webhook returned response.patch but not response.patchType".into());
            }
            if patch.is_empty() && patch_type.is_some() {
                return Err("webhook returned response.patchType but not response.patch".into());
            }
            if patch_type.as_deref() == Some("") {
                return Err("webhook returned invalid response.patchType of \"\"".into());
            }
            verified.patch = patch;
            verified.patch_type = patch_type.unwrap_or_default();
        }
    }
    Ok(verified)
}

/// Go's `base64.CorruptInputError`, which `encoding/json` returns for a bad `[]byte` field.
fn go_base64_error(error: &base64::DecodeError) -> String {
    let offset = match error {
        base64::DecodeError::InvalidByte(at, _) | base64::DecodeError::InvalidLastSymbol(at, _) => {
            *at
        }
        base64::DecodeError::InvalidLength(at) => *at,
        base64::DecodeError::InvalidPadding => 0,
    };
    format!("illegal base64 data at input byte {offset}")
}

fn unmarshal_error(value: &Value, field: &str, go_type: &str) -> String {
    let json_type = match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    format!(
        "json: cannot unmarshal {json_type} into Go struct field AdmissionResponse.response.{field} of type {go_type}"
    )
}

/// `webhookerrors.ToStatusErr`: the webhook's own `Status`, with a code of at least 400 and the
/// message prefixed by who denied the request.
fn denial(name: &str, status: Option<&Value>) -> ApiError {
    let empty = Value::Null;
    let status = status.unwrap_or(&empty);
    let code = status["code"].as_i64().unwrap_or(0);
    let code = if code < 400 {
        400
    } else {
        u16::try_from(code).unwrap_or(500)
    };
    let reason = status["reason"].as_str().unwrap_or_default().to_string();
    let message = status["message"].as_str().unwrap_or_default();
    let denied = format!("admission webhook \"{name}\" denied the request");
    let message = if !message.is_empty() {
        format!("{denied}: {message}")
    } else if !reason.is_empty() {
        format!("{denied}: {reason}")
    } else {
        format!("{denied} without explanation")
    };
    ApiError {
        code,
        reason,
        message,
        details: status.get("details").filter(|d| !d.is_null()).cloned(),
        continue_token: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn denial_wording() {
        let e = denial(
            "w.example.org",
            Some(&json!({"code": 409, "message": "taken", "reason": "Conflict"})),
        );
        assert_eq!(e.code, 409);
        assert_eq!(e.reason, "Conflict");
        assert_eq!(
            e.message,
            "admission webhook \"w.example.org\" denied the request: taken"
        );
        let e = denial("w", Some(&json!({"code": 200, "reason": "NotAllowed"})));
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                "admission webhook \"w\" denied the request: NotAllowed"
            )
        );
        let e = denial("w", None);
        assert_eq!(
            (e.code, e.message.as_str(), e.reason.as_str()),
            (
                400,
                "admission webhook \"w\" denied the request without explanation",
                ""
            )
        );
        assert!(
            !e.to_status()
                .as_object()
                .is_some_and(|s| s.contains_key("reason"))
        );
        let details = json!({"causes": [{"field": "spec.x", "message": "bad"}]});
        let e = denial(
            "w",
            Some(&json!({"code": 422, "message": "m", "details": details})),
        );
        assert_eq!(e.details, Some(details));
    }

    #[test]
    fn response_verification_wording() {
        let ok = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": "u1", "allowed": true, "warnings": ["w1"]}});
        let r = verify_response("v1", "u1", &ok, Kind::Validating);
        assert!(
            r.as_ref().is_ok_and(|r| r.allowed && r.warnings == ["w1"]),
            "{r:?}"
        );
        assert_eq!(
            verify_response("v1", "u2", &ok, Kind::Validating)
                .err()
                .as_deref(),
            Some("expected response.uid=\"u2\", got \"u1\"")
        );
        let bare = json!({"response": {"uid": "u1", "allowed": true}});
        assert_eq!(
            verify_response("v1", "u1", &bare, Kind::Validating)
                .err()
                .as_deref(),
            Some(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got /, Kind="
            )
        );
        assert!(verify_response("v1beta1", "other", &bare, Kind::Validating).is_ok());
        assert_eq!(
            verify_response("v1", "u1", &json!({}), Kind::Validating)
                .err()
                .as_deref(),
            Some("webhook response was absent")
        );
        let mut patched = ok.clone();
        patched["response"]["patchType"] = json!("JSONPatch");
        assert_eq!(
            verify_response("v1", "u1", &patched, Kind::Validating)
                .err()
                .as_deref(),
            Some("validating webhook may not return response.patchType")
        );
        let mut odd = ok;
        odd["response"]["allowed"] = json!("yes");
        assert!(verify_response("v1", "u1", &odd, Kind::Validating).is_err());
    }

    #[test]
    fn paths_and_durations_as_go_prints_them() {
        assert_eq!(clean_path(""), "/");
        assert_eq!(clean_path("/validate/"), "/validate");
        assert_eq!(clean_path("a//b/./c/../d"), "/a/b/d");
        assert_eq!(go_duration_seconds(10), "10s");
        assert_eq!(go_duration_seconds(30), "30s");
        assert_eq!(go_duration_seconds(90), "1m30s");
    }

    #[test]
    fn unexpected_answers_read_like_client_go() {
        assert_eq!(
            decode_response(404, Some("text/plain"), b"nope")
                .err()
                .as_deref(),
            Some("the server could not find the requested resource")
        );
        assert_eq!(
            decode_response(500, Some("text/plain; charset=utf-8"), b"boom\n")
                .err()
                .as_deref(),
            Some("an error on the server (\"boom\") has prevented the request from succeeding")
        );
        let status = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"go away","code":403}"#;
        assert_eq!(
            decode_response(403, Some("application/json"), status)
                .err()
                .as_deref(),
            Some("go away")
        );
        assert_eq!(
            decode_response(200, Some("text/html"), b"<html>")
                .err()
                .as_deref(),
            Some("serializer for text/html doesn't exist")
        );
        assert_eq!(
            decode_response(200, None, b"").err().as_deref(),
            Some("0-length response with status code: 200 and content type: application/json")
        );
    }
}
