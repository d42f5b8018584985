//! What `kubectl lien status` reads, with the user's own credentials: the webhook
//! configurations, whether the webhook answers (its URL's `/readyz`, or its Service's ready
//! endpoints), Lien's Deployment and Lease, and its objects' Ready conditions. The I/O edge of
//! [`super::status`], which decides.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::status::{ClientTarget, Facts, Lookup, Reach, SourceCount, client_target};

/// How long the webhook's `/readyz` may take to answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Why the webhook's URL gave no answer.
#[derive(Debug)]
enum ProbeError {
    /// As it would for kube-apiserver: the connection refused, TLS not verifying against the
    /// caBundle, a broken answer.
    Down(String),
    /// Perhaps only from this machine: no such name here, no route, no answer in time — the
    /// API server may reach what we cannot.
    NotFromHere(String),
}

impl From<String> for ProbeError {
    fn from(e: String) -> Self {
        Self::Down(e)
    }
}

impl From<&str> for ProbeError {
    fn from(e: &str) -> Self {
        Self::Down(e.to_owned())
    }
}

/// Where Lien is: the names `lien run` and `lien manifests` use by default.
#[derive(Debug, Clone)]
pub struct Names {
    /// The webhook configurations' name.
    pub configuration: String,
    /// Lien's namespace (the Lease's when Lien runs outside the cluster).
    pub namespace: String,
    /// The leader-election Lease.
    pub lease: String,
    /// The Deployment beside the webhook's Service.
    pub deployment: String,
}

impl Default for Names {
    fn default() -> Self {
        Self {
            configuration: "lien".to_owned(),
            namespace: "lien-system".to_owned(),
            lease: "lien-controller".to_owned(),
            deployment: "lien".to_owned(),
        }
    }
}

fn said(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({})", s.message, s.reason),
        e => e.to_string(),
    }
}

async fn lookup<K>(api: &Api<K>, name: &str) -> Lookup<Value>
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.get_opt(name).await {
        Ok(Some(o)) => serde_json::to_value(o)
            .map_or_else(|e| Lookup::Unreadable(e.to_string()), Lookup::Found),
        Ok(None) => Lookup::Missing,
        Err(e) => Lookup::Unreadable(said(&e)),
    }
}

/// The webhook configuration and whether the webhook answers: what `why`, `plan` and `graph`
/// need for their warning.
pub async fn enforcement(client: &Client, names: &Names) -> Facts {
    let configuration = lookup(
        &Api::<ValidatingWebhookConfiguration>::all(client.clone()),
        &names.configuration,
    )
    .await;
    let reach = match &configuration {
        Lookup::Found(c) => Some(reach(client, c).await),
        _ => None,
    };
    let ca_not_after = match &configuration {
        Lookup::Found(c) => ca_not_after(c),
        _ => Ok(vec![]),
    };
    Facts {
        configuration,
        mutating: Lookup::Missing,
        reach,
        deployment: None,
        lease: Lookup::Missing,
        ca_not_after,
        controller_says: None,
        sources: vec![],
        plugin_version: env!("CARGO_PKG_VERSION").to_owned(),
        now: jiff::Timestamp::now().as_second(),
    }
}

/// Everything `status` reports.
pub async fn gather(client: &Client, names: &Names) -> Facts {
    let mut facts = enforcement(client, names).await;
    facts.mutating = lookup(
        &Api::<MutatingWebhookConfiguration>::all(client.clone()),
        &names.configuration,
    )
    .await;
    let target = match &facts.configuration {
        Lookup::Found(c) => client_target(c),
        _ => None,
    };
    let namespace = match &target {
        Some(ClientTarget::Service { namespace, .. }) => namespace.clone(),
        _ => names.namespace.clone(),
    };
    facts.deployment = match &target {
        Some(ClientTarget::Url(_)) => None,
        _ => Some(
            lookup(
                &Api::<Deployment>::namespaced(client.clone(), &namespace),
                &names.deployment,
            )
            .await,
        ),
    };
    facts.lease = lookup(
        &Api::<Lease>::namespaced(client.clone(), &namespace),
        &names.lease,
    )
    .await;
    for (kind, plural) in [
        ("Usage", "usages"),
        ("ClusterUsage", "clusterusages"),
        ("DependencyRule", "dependencyrules"),
        ("CascadeRule", "cascaderules"),
    ] {
        let (count, says) = count_ready(client, kind, plural).await;
        if kind == "Usage" {
            facts.controller_says = says;
        }
        facts.sources.push(count);
    }
    facts
}

/// How many of a kind of Lien's objects are Ready; for Usages, also the running controller's
/// word that its webhook configuration changed (a `Ready=False` reason it sets on every Usage).
async fn count_ready(client: &Client, kind: &str, plural: &str) -> (SourceCount, Option<String>) {
    let gvk = GroupVersionKind::gvk(lien_api::GROUP, lien_api::VERSION, kind);
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    );
    let mut count = SourceCount {
        kind: kind.to_owned(),
        ready: 0,
        not_ready: vec![],
        error: None,
        not_permitted: Default::default(),
    };
    let list = match api.list(&ListParams::default()).await {
        Ok(l) => l,
        Err(e) => {
            count.error = Some(said(&e));
            return (count, None);
        }
    };
    let mut says = None;
    for o in list.items {
        let ready = o.data["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            .cloned()
            .unwrap_or(Value::Null);
        if ready["status"] == "True" {
            count.ready += 1;
            continue;
        }
        let reason = ready["reason"]
            .as_str()
            .unwrap_or("no status yet")
            .to_owned();
        if let Some(resource) = ready["message"]
            .as_str()
            .and_then(lien_decide::resolve::not_permitted_resource)
        {
            count.not_permitted.insert(resource.to_owned());
        }
        if reason == lien_decide::desired::NOT_CONFIGURED_REASON && says.is_none() {
            says = ready["message"].as_str().map(str::to_owned);
        }
        let name = o.metadata.name.clone().unwrap_or_default();
        let name = match &o.metadata.namespace {
            Some(ns) => format!("{ns}/{name}"),
            None => name,
        };
        count.not_ready.push((name, reason));
    }
    (count, says)
}

/// The caBundle of the DELETE hook, decoded.
fn ca_bundle(config: &Value) -> Option<Vec<u8>> {
    let hooks = config["webhooks"].as_array()?;
    let delete = hooks
        .iter()
        .find(|h| h["name"] == super::status::DELETE_HOOK)?;
    let b64 = delete["clientConfig"]["caBundle"].as_str()?;
    base64::engine::general_purpose::STANDARD.decode(b64).ok()
}

/// When each certificate of the DELETE hook's caBundle expires.
fn ca_not_after(config: &Value) -> Result<Vec<i64>, String> {
    let Some(pem) = ca_bundle(config) else {
        return Err("no caBundle on the delete hook (or not base64)".to_owned());
    };
    let mut out = Vec::new();
    for block in x509_parser::pem::Pem::iter_from_buffer(&pem) {
        let block = block.map_err(|e| e.to_string())?;
        if block.label != "CERTIFICATE" {
            continue;
        }
        let cert = block.parse_x509().map_err(|e| e.to_string())?;
        out.push(cert.validity().not_after.timestamp());
    }
    Ok(out)
}

/// Whether the webhook answers: its URL's `/readyz`, or its Service's ready endpoints.
async fn reach(client: &Client, config: &Value) -> Reach {
    match client_target(config) {
        None => Reach::Unknown {
            what: "the delete hook's clientConfig".to_owned(),
            error: "names neither a URL nor a Service".to_owned(),
        },
        Some(ClientTarget::Url(url)) => {
            let base = url
                .trim_end_matches('/')
                .trim_end_matches("/validate")
                .to_owned();
            let roots = ca_bundle(config).unwrap_or_default();
            match tokio::time::timeout(PROBE_TIMEOUT, get(&base, &roots, "/readyz")).await {
                Ok(Ok((200, _))) => {
                    // How it authenticates the API server and its version, as its own
                    // metrics say (the same port, the same certificate).
                    let metrics =
                        tokio::time::timeout(PROBE_TIMEOUT, get(&base, &roots, "/metrics"))
                            .await
                            .ok()
                            .and_then(Result::ok)
                            .filter(|(code, _)| *code == 200)
                            .map(|(_, body)| body)
                            .unwrap_or_default();
                    Reach::Ready {
                        url: base,
                        client_authentication: label_of(
                            &metrics,
                            "lien_webhook_client_authentication",
                            "mode",
                        ),
                        version: label_of(&metrics, "lien_webhook_build_info", "version"),
                    }
                }
                Ok(Ok((code, body))) => Reach::NotReady {
                    url: base,
                    answer: format!("{code} {}", body.trim()),
                },
                Ok(Err(ProbeError::Down(error))) => Reach::Unreachable { url: base, error },
                Ok(Err(ProbeError::NotFromHere(error))) => Reach::Unknown {
                    what: format!("the webhook at {base}, from this machine"),
                    error: format!("{error} (kube-apiserver may still reach it: not a verdict)"),
                },
                Err(_) => Reach::Unknown {
                    what: format!("the webhook at {base}, from this machine"),
                    error: format!(
                        "no answer within {} s (kube-apiserver may still reach it: not a verdict)",
                        PROBE_TIMEOUT.as_secs()
                    ),
                },
            }
        }
        Some(ClientTarget::Service { namespace, name }) => {
            let service = format!("{namespace}/{name}");
            match Api::<Service>::namespaced(client.clone(), &namespace)
                .get_opt(&name)
                .await
            {
                Ok(None) => return Reach::NoService { service },
                Err(e) => {
                    return Reach::Unknown {
                        what: format!("Service {service}"),
                        error: said(&e),
                    };
                }
                Ok(Some(_)) => {}
            }
            let slices = Api::<EndpointSlice>::namespaced(client.clone(), &namespace)
                .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={name}")))
                .await;
            match slices {
                Ok(list) => {
                    let endpoints: Vec<_> = list
                        .items
                        .iter()
                        .flat_map(|s| s.endpoints.iter().flatten())
                        .collect();
                    // A nil `ready` is to be taken as ready (discovery/v1's EndpointConditions).
                    let ready = endpoints
                        .iter()
                        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
                        .count();
                    Reach::Endpoints {
                        service,
                        ready,
                        total: endpoints.len(),
                    }
                }
                Err(e) => Reach::Unknown {
                    what: format!("the EndpointSlices of Service {service}"),
                    error: said(&e),
                },
            }
        }
    }
}

/// The value of `label` on the sample of gauge `family` that is 1, in a Prometheus text
/// exposition (`lien_webhook_client_authentication{mode="client_certificate"} 1`).
fn label_of(exposition: &str, family: &str, label: &str) -> Option<String> {
    exposition.lines().find_map(|line| {
        let rest = line.strip_prefix(family)?.strip_prefix('{')?;
        let (labels, value) = rest.split_once('}')?;
        if value.trim() != "1" {
            return None;
        }
        labels.split(',').find_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            (k.trim() == label).then(|| v.trim().trim_matches('"').to_owned())
        })
    })
}

/// `GET {base}{path}` over TLS verified against `roots` (the caBundle, as kube-apiserver
/// verifies it): the status code and body.
async fn get(base: &str, roots: &[u8], path: &str) -> Result<(u16, String), ProbeError> {
    let uri: hyper::Uri = format!("{base}{path}")
        .parse()
        .map_err(|e| format!("{base}: {e}"))?;
    let host = uri
        .host()
        .ok_or("no host")?
        .trim_matches(['[', ']'])
        .to_owned();
    let port = uri.port_u16().unwrap_or(443);
    let mut store = rustls::RootCertStore::empty();
    for block in x509_parser::pem::Pem::iter_from_buffer(roots).flatten() {
        if block.label == "CERTIFICATE" {
            store
                .add(rustls::pki_types::CertificateDer::from(block.contents))
                .map_err(|e| format!("the caBundle: {e}"))?;
        }
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(store)
    .with_no_client_auth();
    let server_name = rustls::pki_types::ServerName::try_from(host.clone())
        .map_err(|e| format!("{host}: {e}"))?;
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| {
            // Refused: the host answered and nothing listens — Lien is down there, for the API
            // server as for us. Anything else (no such name, no route) may be this machine's
            // view only.
            if e.kind() == std::io::ErrorKind::ConnectionRefused {
                ProbeError::Down(e.to_string())
            } else {
                ProbeError::NotFromHere(e.to_string())
            }
        })?;
    let stream = tokio_rustls::TlsConnector::from(Arc::new(tls))
        .connect(server_name, tcp)
        .await
        .map_err(|e| format!("TLS: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let request = hyper::Request::get(uri.path())
        .header(hyper::header::HOST, format!("{host}:{port}"))
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let answer = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let code = answer.status().as_u16();
    let body = answer
        .into_body()
        .collect()
        .await
        .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
        .unwrap_or_default();
    Ok((code, body))
}

#[cfg(test)]
mod tests {
    use super::{ProbeError, get, label_of};

    /// A refused connection is Lien down there — for the API server too — not "cannot tell".
    #[tokio::test]
    async fn a_refused_connection_is_down_not_unknown() {
        // Bound, never listening: refused while the test runs.
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind("127.0.0.1:0".parse().expect("addr"))
            .expect("bind");
        let port = socket.local_addr().expect("addr").port();
        let got = get(&format!("https://127.0.0.1:{port}"), &[], "/readyz").await;
        assert!(
            matches!(got, Err(ProbeError::Down(ref e)) if e.contains("refused")),
            "{got:?}"
        );
        drop(socket);
    }

    #[test]
    fn a_gauges_label_is_read_from_the_sample_at_1() {
        let exposition = "# HELP lien_webhook_client_authentication how\n\
            lien_webhook_client_authentication{mode=\"answer_only\"} 0\n\
            lien_webhook_client_authentication{mode=\"client_certificate\"} 1\n\
            lien_webhook_build_info{version=\"0.1.0\"} 1\n";
        assert_eq!(
            label_of(exposition, "lien_webhook_client_authentication", "mode").as_deref(),
            Some("client_certificate")
        );
        assert_eq!(
            label_of(exposition, "lien_webhook_build_info", "version").as_deref(),
            Some("0.1.0")
        );
        assert_eq!(label_of(exposition, "lien_webhook_build", "version"), None);
    }
}
