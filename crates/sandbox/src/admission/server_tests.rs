//! End-to-end dispatch against real HTTPS webhook servers on 127.0.0.1 (axum behind
//! tokio-rustls, certificates from a throw-away rcgen CA handed over as `caBundle`).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::routing::post;
use base64::Engine;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

use super::matching::tests::pod_attrs;
use super::{Attributes, Dispatcher, DispatcherConfig, Operation};

struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    fn new() -> Self {
        Ca::named("lien test webhook CA")
    }

    fn named(common_name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        let key = KeyPair::generate().expect("ca key");
        Ca {
            issuer: CertifiedIssuer::self_signed(params, key).expect("ca cert"),
        }
    }

    /// `caBundle` as stored in a webhook configuration: base64 of the PEM.
    fn bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.issuer.pem())
    }

    fn leaf(&self, names: &[&str]) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let params = CertificateParams::new(names).expect("leaf params");
        let key = KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.issuer).expect("leaf cert");
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        (vec![cert.der().clone()], key)
    }
}

/// A webhook server; every review it receives is kept in `seen`.
struct Server {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Value>>>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Server {
    /// Serves `answer(review)` on every path, over TLS with a certificate for `names`.
    async fn start(
        ca: &Ca,
        names: &[&str],
        answer: impl Fn(Value) -> Option<Value> + Send + Sync + Clone + 'static,
        delay: Duration,
    ) -> Server {
        let (certs, key) = ca.leaf(names);
        Server::start_with(certs, key, answer, delay).await
    }

    /// Serves `answer(review)` over TLS with the given certificate chain.
    async fn start_with(
        certs: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        answer: impl Fn(Value) -> Option<Value> + Send + Sync + Clone + 'static,
        delay: Duration,
    ) -> Server {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("tls versions")
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("server cert");
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));

        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorded = seen.clone();
        let handler = move |Json(review): Json<Value>| {
            let recorded = recorded.clone();
            let answer = answer.clone();
            async move {
                recorded.lock().expect("seen").push(review.clone());
                tokio::time::sleep(delay).await;
                Json(answer(review).unwrap_or(Value::Null))
            }
        };
        let router = Router::new().fallback(post(handler));

        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            // Dropping the set when the loop ends aborts every open connection.
            let mut connections = JoinSet::new();
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    accepted = listener.accept() => {
                        let Ok((tcp, _)) = accepted else { continue };
                        let acceptor = acceptor.clone();
                        let service = TowerToHyperService::new(router.clone());
                        connections.spawn(async move {
                            if let Ok(tls) = acceptor.accept(tcp).await {
                                let _ = auto::Builder::new(TokioExecutor::new())
                                    .serve_connection(TokioIo::new(tls), service)
                                    .await;
                            }
                        });
                    }
                }
            }
        });
        Server {
            addr,
            seen,
            stop: Some(stop),
            task,
        }
    }

    fn seen(&self) -> Vec<Value> {
        self.seen.lock().expect("seen").clone()
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}

/// An allowing (or denying) v1 answer for the review's uid.
fn answer(review: &Value, allowed: bool, extra: Value) -> Value {
    let mut response = json!({"uid": review["request"]["uid"], "allowed": allowed});
    if let (Some(r), Some(e)) = (response.as_object_mut(), extra.as_object()) {
        r.extend(e.clone());
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

fn allow(review: Value) -> Option<Value> {
    Some(answer(&review, true, json!({})))
}

fn hook(name: &str, client_config: Value) -> Value {
    json!({
        "name": name,
        "clientConfig": client_config,
        "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
            "resources": ["pods", "pods/status"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    })
}

fn url_hook(name: &str, ca: &Ca, addr: SocketAddr, path: &str) -> Value {
    hook(
        name,
        json!({"url": format!("https://{addr}{path}"), "caBundle": ca.bundle()}),
    )
}

fn configuration(name: &str, webhooks: Vec<Value>) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": webhooks,
    })
}

fn dispatcher() -> Dispatcher {
    Dispatcher::new(DispatcherConfig::default())
}

#[tokio::test]
async fn allowed_requests_pass_with_warnings() {
    let ca = Ca::new();
    let server = Server::start(
        &ca,
        &["127.0.0.1"],
        |review| Some(answer(&review, true, json!({"warnings": ["mind the gap"]}))),
        Duration::ZERO,
    )
    .await;
    let configs = [configuration(
        "c",
        vec![url_hook("allow.example.org", &ca, server.addr, "/validate")],
    )];
    let result = dispatcher()
        .validate(&configs, &pod_attrs(Operation::Create))
        .await;
    assert_eq!(result, Ok(vec!["mind the gap".to_string()]));
    assert_eq!(server.seen().len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn request_body_carries_every_field() {
    let ca = Ca::new();
    let server = Server::start(&ca, &["127.0.0.1"], allow, Duration::ZERO).await;
    let configs = [configuration(
        "c",
        vec![url_hook("body.example.org", &ca, server.addr, "/")],
    )];
    let mut attrs: Attributes = pod_attrs(Operation::Update);
    attrs.sub_resource = "status".into();
    attrs.options =
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions", "fieldManager": "kubectl"});
    attrs.dry_run = true;
    let result = dispatcher().validate(&configs, &attrs).await;
    assert_eq!(result, Ok(vec![]));

    let seen = server.seen();
    let review = &seen[0];
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(review["kind"], "AdmissionReview");
    let request = &review["request"];
    let uid = request["uid"].as_str().unwrap_or_default();
    assert!(uuid::Uuid::parse_str(uid).is_ok(), "{uid}");
    let pods = json!({"group": "", "version": "v1", "resource": "pods"});
    let pod = json!({"group": "", "version": "v1", "kind": "Pod"});
    assert_eq!(request["kind"], pod);
    assert_eq!(request["resource"], pods);
    assert_eq!(request["subResource"], "status");
    assert_eq!(request["requestKind"], pod);
    assert_eq!(request["requestResource"], pods);
    assert_eq!(request["requestSubResource"], "status");
    assert_eq!(request["name"], "p");
    assert_eq!(request["namespace"], "team-a");
    assert_eq!(request["operation"], "UPDATE");
    assert_eq!(
        request["userInfo"],
        json!({"username": "alice", "groups": ["system:authenticated"]})
    );
    // The objects as Go encodes a typed Pod: a zero creation time as `null`, `containers`
    // (no `omitempty`) as `null`, the `status` struct as `{}`.
    let as_go = |o: &Option<Value>| {
        let mut o = o.clone().unwrap_or_default();
        o["metadata"]["creationTimestamp"] = Value::Null;
        o["spec"] = json!({"containers": null});
        o["status"] = json!({});
        o
    };
    assert_eq!(request["object"], as_go(&attrs.object));
    assert_eq!(request["oldObject"], as_go(&attrs.old_object));
    assert_eq!(request["dryRun"], true);
    assert_eq!(request["options"], attrs.options);

    // On CREATE the absent old object is sent as null, and each call gets a fresh uid.
    let created = dispatcher()
        .validate(&configs, &pod_attrs(Operation::Create))
        .await;
    assert_eq!(created, Ok(vec![]));
    let seen = server.seen();
    assert!(
        seen[1]["request"]
            .as_object()
            .is_some_and(|r| r["oldObject"].is_null()
                && !r.contains_key("subResource")
                && r["dryRun"] == false)
    );
    assert_ne!(seen[1]["request"]["uid"], seen[0]["request"]["uid"]);
    server.stop().await;
}

#[tokio::test]
async fn denial_keeps_the_webhooks_code_and_message() {
    let ca = Ca::new();
    let server = Server::start(
        &ca,
        &["127.0.0.1"],
        |review| {
            Some(answer(
                &review,
                false,
                json!({"status": {"code": 409, "message": "name already claimed", "reason": "AlreadyExists"}}),
            ))
        },
        Duration::ZERO,
    )
    .await;
    let configs = [configuration(
        "c",
        vec![url_hook("deny.example.org", &ca, server.addr, "/validate")],
    )];
    let err = dispatcher()
        .validate(&configs, &pod_attrs(Operation::Create))
        .await
        .err();
    let err = err.expect("denied");
    assert_eq!(err.code, 409);
    assert_eq!(err.reason, "AlreadyExists");
    assert_eq!(
        err.message,
        "admission webhook \"deny.example.org\" denied the request: name already claimed"
    );
    server.stop().await;
}

#[tokio::test]
async fn response_uid_must_match() {
    let ca = Ca::new();
    let server = Server::start(
        &ca,
        &["127.0.0.1"],
        |_| {
            Some(
                json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": "not-the-uid", "allowed": true}}),
            )
        },
        Duration::ZERO,
    )
    .await;
    let configs = [configuration(
        "c",
        vec![url_hook("uid.example.org", &ca, server.addr, "/")],
    )];
    let err = dispatcher()
        .validate(&configs, &pod_attrs(Operation::Create))
        .await
        .expect_err("invalid response fails closed");
    let uid = server.seen()[0]["request"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!((err.code, err.reason.as_str()), (500, "InternalError"));
    assert_eq!(
        err.message,
        format!(
            "Internal error occurred: failed calling webhook \"uid.example.org\": received invalid webhook response: expected response.uid=\"{uid}\", got \"not-the-uid\""
        )
    );
    server.stop().await;
}

/// An address that refuses every connection for as long as the returned socket lives: bound,
/// never listening. (A port bound and then released, as these tests used before, can be taken by
/// another test's server meanwhile: CI once got a TLS error there instead of a refusal.)
fn refusing() -> (tokio::net::TcpSocket, std::net::SocketAddr) {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .expect("bind");
    let addr = socket.local_addr().expect("addr");
    (socket, addr)
}

#[tokio::test]
async fn webhook_down_fails_or_is_ignored_by_failure_policy() {
    let (_refusing, addr) = refusing();
    let ca = Ca::new();
    let down = url_hook("down.example.org", &ca, addr, "/validate/");
    let err = dispatcher()
        .validate(
            &[configuration("c", vec![down.clone()])],
            &pod_attrs(Operation::Create),
        )
        .await
        .expect_err("fails closed");
    assert_eq!((err.code, err.reason.as_str()), (500, "InternalError"));
    assert_eq!(
        err.message,
        format!(
            "Internal error occurred: failed calling webhook \"down.example.org\": failed to call webhook: Post \"https://{addr}/validate?timeout=10s\": dial tcp {addr}: connect: connection refused"
        )
    );

    let mut ignored = down;
    ignored["failurePolicy"] = json!("Ignore");
    let result = dispatcher()
        .validate(
            &[configuration("c", vec![ignored])],
            &pod_attrs(Operation::Create),
        )
        .await;
    assert_eq!(result, Ok(vec![]));
}

#[tokio::test]
async fn slow_webhooks_time_out() {
    let ca = Ca::new();
    let server = Server::start(&ca, &["127.0.0.1"], allow, Duration::from_secs(3)).await;
    let mut slow = url_hook("slow.example.org", &ca, server.addr, "/slow");
    slow["timeoutSeconds"] = json!(1);
    let configs = [configuration("c", vec![slow.clone()])];
    let started = Instant::now();
    let err = dispatcher()
        .validate(&configs, &pod_attrs(Operation::Create))
        .await
        .expect_err("times out");
    assert!(started.elapsed() < Duration::from_millis(2500));
    assert_eq!(err.code, 500);
    assert_eq!(
        err.message,
        format!(
            "Internal error occurred: failed calling webhook \"slow.example.org\": failed to call webhook: Post \"https://{}/slow?timeout=1s\": context deadline exceeded",
            server.addr
        )
    );
    slow["failurePolicy"] = json!("Ignore");
    let ignored = dispatcher()
        .validate(
            &[configuration("c", vec![slow])],
            &pod_attrs(Operation::Create),
        )
        .await;
    assert_eq!(ignored, Ok(vec![]));
    server.stop().await;
}

#[tokio::test]
async fn services_are_mapped_and_tls_names_verified() {
    let ca = Ca::new();
    let server = Server::start(&ca, &["hook.webhooks.svc"], allow, Duration::ZERO).await;
    // An address that refuses connections, tried first: skipped.
    let (_refusing, dead) = refusing();
    let services = [
        (
            ("webhooks".to_string(), "hook".to_string()),
            vec![dead, server.addr],
        ),
        // Same server, but a name its certificate does not carry.
        (
            ("webhooks".to_string(), "impostor".to_string()),
            vec![server.addr],
        ),
        (("webhooks".to_string(), "down".to_string()), vec![dead]),
    ];
    let dispatcher = Dispatcher::new(DispatcherConfig {
        services: services.into_iter().collect(),
        ..DispatcherConfig::default()
    });
    let service_hook = |webhook: &str, service: &str, bundle: String| {
        hook(
            webhook,
            json!({"service": {"namespace": "webhooks", "name": service, "path": "/validate", "port": 8443},
                "caBundle": bundle}),
        )
    };

    let ok = [configuration(
        "c",
        vec![service_hook("svc.example.org", "hook", ca.bundle())],
    )];
    assert_eq!(
        dispatcher
            .validate(&ok, &pod_attrs(Operation::Create))
            .await,
        Ok(vec![])
    );
    assert_eq!(server.seen().len(), 1);

    let misnamed = [configuration(
        "c",
        vec![service_hook(
            "impostor.example.org",
            "impostor",
            ca.bundle(),
        )],
    )];
    let err = dispatcher
        .validate(&misnamed, &pod_attrs(Operation::Create))
        .await
        .expect_err("name mismatch");
    assert_eq!(
        err.message,
        "Internal error occurred: failed calling webhook \"impostor.example.org\": failed to call webhook: Post \"https://impostor.webhooks.svc:8443/validate?timeout=10s\": tls: failed to verify certificate: x509: certificate is valid for hook.webhooks.svc, not impostor.webhooks.svc"
    );

    let untrusted = [configuration(
        "c",
        vec![service_hook(
            "untrusted.example.org",
            "hook",
            Ca::new().bundle(),
        )],
    )];
    let err = dispatcher
        .validate(&untrusted, &pod_attrs(Operation::Create))
        .await
        .expect_err("unknown CA");
    assert!(
        err.message.ends_with(
            "Post \"https://hook.webhooks.svc:8443/validate?timeout=10s\": tls: failed to verify certificate: x509: certificate signed by unknown authority"
        ),
        "{}",
        err.message
    );

    let down = [configuration(
        "c",
        vec![service_hook("down.example.org", "down", ca.bundle())],
    )];
    let err = dispatcher
        .validate(&down, &pod_attrs(Operation::Create))
        .await
        .expect_err("no endpoint answers");
    assert!(
        err.message
            .ends_with(&format!("dial tcp {dead}: connect: connection refused")),
        "{}",
        err.message
    );

    let unmapped = [configuration(
        "c",
        vec![service_hook("unmapped.example.org", "nowhere", ca.bundle())],
    )];
    let err = dispatcher
        .validate(&unmapped, &pod_attrs(Operation::Create))
        .await
        .expect_err("unresolvable");
    assert!(
        err.message
            .ends_with("dial tcp: lookup nowhere.webhooks.svc: no such host"),
        "{}",
        err.message
    );
    assert_eq!(server.seen().len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn every_matching_webhook_is_called_and_the_first_denial_wins() {
    let ca = Ca::new();
    let allowing = Server::start(&ca, &["127.0.0.1"], allow, Duration::ZERO).await;
    let denying = Server::start(
        &ca,
        &["127.0.0.1"],
        |review| Some(answer(&review, false, json!({}))),
        Duration::ZERO,
    )
    .await;
    let mut configmaps_only = url_hook("configmaps.example.org", &ca, allowing.addr, "/cm");
    configmaps_only["rules"][0]["resources"] = json!(["configmaps"]);
    let configs = [
        configuration(
            "b",
            vec![url_hook("deny.example.org", &ca, denying.addr, "/")],
        ),
        configuration(
            "a",
            vec![
                url_hook("allow.example.org", &ca, allowing.addr, "/"),
                configmaps_only,
            ],
        ),
    ];
    let err = dispatcher()
        .validate(&configs, &pod_attrs(Operation::Create))
        .await
        .expect_err("denied");
    assert_eq!(
        (err.code, err.reason.as_str(), err.message.as_str()),
        (
            400,
            "",
            "admission webhook \"deny.example.org\" denied the request without explanation"
        )
    );
    assert_eq!(allowing.seen().len(), 1, "non-matching webhook not called");
    assert_eq!(denying.seen().len(), 1);

    // Admission configuration objects themselves never reach webhooks.
    let mut vwc = pod_attrs(Operation::Create);
    vwc.kind = super::GroupVersionKind::new(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
    );
    let mut catch_all = url_hook("deny.example.org", &ca, denying.addr, "/");
    catch_all["rules"] = json!([{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}]);
    assert_eq!(
        dispatcher()
            .validate(&[configuration("x", vec![catch_all])], &vwc)
            .await,
        Ok(vec![])
    );
    assert_eq!(denying.seen().len(), 1);
    allowing.stop().await;
    denying.stop().await;
}

#[tokio::test]
async fn dry_run_needs_side_effect_free_webhooks() {
    let ca = Ca::new();
    let server = Server::start(&ca, &["127.0.0.1"], allow, Duration::ZERO).await;
    let mut attrs = pod_attrs(Operation::Create);
    attrs.dry_run = true;
    let mut some = url_hook("effects.example.org", &ca, server.addr, "/");
    some["sideEffects"] = json!("Some");
    // Refused whatever the failure policy: a dry run must not trigger side effects.
    some["failurePolicy"] = json!("Ignore");
    let err = dispatcher()
        .validate(&[configuration("c", vec![some])], &attrs)
        .await
        .expect_err("refused");
    assert_eq!(
        (err.code, err.reason.as_str(), err.message.as_str()),
        (
            400,
            "BadRequest",
            "admission webhook \"effects.example.org\" does not support dry run"
        )
    );
    let mut on_dry_run = url_hook("dry.example.org", &ca, server.addr, "/");
    on_dry_run["sideEffects"] = json!("NoneOnDryRun");
    assert_eq!(
        dispatcher()
            .validate(&[configuration("c", vec![on_dry_run])], &attrs)
            .await,
        Ok(vec![])
    );
    assert_eq!(server.seen().len(), 1);
    server.stop().await;
}

/// A self-signed certificate for `names`, as `openssl req -x509 -addext subjectAltName=…` makes
/// it: `CA:TRUE`, its own issuer. `expired` dates it 2019–2020.
fn self_signed(
    names: &[&str],
    expired: bool,
) -> (String, Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut params = CertificateParams::new(names).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "hook.webhooks.svc");
    if expired {
        params.not_before = rcgen::date_time_ymd(2019, 1, 1);
        params.not_after = rcgen::date_time_ymd(2020, 1, 1);
    }
    let key = KeyPair::generate().expect("key");
    let cert = params.self_signed(&key).expect("self-signed cert");
    let bundle = base64::engine::general_purpose::STANDARD.encode(cert.pem());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    (bundle, vec![cert.der().clone()], key)
}

/// Calls a webhook at service `webhooks/<service>` (mapped to `addr`) trusting `bundle`.
async fn call_service(addr: SocketAddr, service: &str, bundle: &str) -> Result<(), String> {
    let dispatcher = Dispatcher::new(DispatcherConfig {
        services: [(("webhooks".to_string(), service.to_string()), vec![addr])]
            .into_iter()
            .collect(),
        ..DispatcherConfig::default()
    });
    let configs = [configuration(
        "c",
        vec![hook(
            "tls.example.org",
            json!({"service": {"namespace": "webhooks", "name": service, "path": "/validate", "port": 8443},
                "caBundle": bundle}),
        )],
    )];
    dispatcher
        .validate(&configs, &pod_attrs(Operation::Create))
        .await
        .map(|_| ())
        .map_err(|e| e.message)
}

const CALL_PREFIX: &str = "Internal error occurred: failed calling webhook \"tls.example.org\": failed to call webhook: Post \"https://";

/// Go's `crypto/x509` trusts a certificate that is itself in the root pool (`Verify` in
/// `crypto/x509/verify.go`: the chain is the certificate alone), CA or not — so kube-apiserver
/// accepts a self-signed `CA:TRUE` serving certificate listed in `caBundle`, and so must the
/// sandbox.
#[tokio::test]
async fn self_signed_ca_serving_certificate_in_ca_bundle_is_trusted() {
    let (bundle, certs, key) = self_signed(&["hook.webhooks.svc"], false);
    let server = Server::start_with(certs, key, allow, Duration::ZERO).await;
    assert_eq!(call_service(server.addr, "hook", &bundle).await, Ok(()));
    assert_eq!(server.seen().len(), 1);
    server.stop().await;

    // Go does not refuse a CA as the leaf of a chain either: a CA:TRUE serving certificate
    // that a bundled CA signed is trusted.
    let ca = Ca::new();
    let mut params = CertificateParams::new(vec!["hook.webhooks.svc".to_string()]).expect("p");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let leaf_key = KeyPair::generate().expect("key");
    let leaf = params.signed_by(&leaf_key, &ca.issuer).expect("leaf");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let server = Server::start_with(vec![leaf.der().clone()], key, allow, Duration::ZERO).await;
    assert_eq!(
        call_service(server.addr, "hook", &ca.bundle()).await,
        Ok(())
    );
    server.stop().await;
}

/// Trusted or not, the host name must be among the certificate's names (Go's
/// `Certificate.VerifyHostname`, `HostnameError`: "certificate is valid for …, not …").
#[tokio::test]
async fn a_trusted_certificate_for_another_name_is_refused() {
    let (bundle, certs, key) = self_signed(&["hook.webhooks.svc"], false);
    let server = Server::start_with(certs, key, allow, Duration::ZERO).await;
    let err = call_service(server.addr, "impostor", &bundle)
        .await
        .expect_err("wrong SAN");
    assert_eq!(
        err,
        format!(
            "{CALL_PREFIX}impostor.webhooks.svc:8443/validate?timeout=10s\": tls: failed to verify certificate: x509: certificate is valid for hook.webhooks.svc, not impostor.webhooks.svc"
        )
    );
    assert!(server.seen().is_empty());
    server.stop().await;
}

/// An expired certificate is refused whether it is trusted directly (in `caBundle`) or through
/// a CA (Go's `CertificateInvalidError` `Expired`: "certificate has expired or is not yet
/// valid: current time … is after …").
#[tokio::test]
async fn an_expired_certificate_is_refused() {
    let (bundle, certs, key) = self_signed(&["hook.webhooks.svc"], true);
    let server = Server::start_with(certs, key, allow, Duration::ZERO).await;
    let err = call_service(server.addr, "hook", &bundle)
        .await
        .expect_err("expired");
    let expected = format!(
        "{CALL_PREFIX}hook.webhooks.svc:8443/validate?timeout=10s\": tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time "
    );
    assert!(err.starts_with(&expected), "{err}");
    assert!(err.ends_with(" is after 2020-01-01T00:00:00Z"), "{err}");
    server.stop().await;

    let ca = Ca::new();
    let mut params = CertificateParams::new(vec!["hook.webhooks.svc".to_string()]).expect("p");
    params.not_before = rcgen::date_time_ymd(2019, 1, 1);
    params.not_after = rcgen::date_time_ymd(2020, 1, 1);
    let leaf_key = KeyPair::generate().expect("key");
    let leaf = params.signed_by(&leaf_key, &ca.issuer).expect("leaf");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let server = Server::start_with(vec![leaf.der().clone()], key, allow, Duration::ZERO).await;
    let err = call_service(server.addr, "hook", &ca.bundle())
        .await
        .expect_err("expired leaf");
    assert!(err.starts_with(&expected), "{err}");
    assert!(err.ends_with(" is after 2020-01-01T00:00:00Z"), "{err}");
    assert!(server.seen().is_empty());
    server.stop().await;
}

/// A self-signed certificate that `caBundle` does not list is signed by an unknown authority
/// (Go's `UnknownAuthorityError`).
#[tokio::test]
async fn a_certificate_from_an_unknown_ca_is_refused() {
    let (_, certs, key) = self_signed(&["hook.webhooks.svc"], false);
    let (other_bundle, _, _) = self_signed(&["hook.webhooks.svc"], false);
    let server = Server::start_with(certs, key, allow, Duration::ZERO).await;
    for bundle in [other_bundle, Ca::new().bundle()] {
        let err = call_service(server.addr, "hook", &bundle)
            .await
            .expect_err("unknown CA");
        assert_eq!(
            err,
            format!(
                "{CALL_PREFIX}hook.webhooks.svc:8443/validate?timeout=10s\": tls: failed to verify certificate: x509: certificate signed by unknown authority"
            )
        );
    }
    assert!(server.seen().is_empty());
    server.stop().await;
}
