//! End to end: the sandbox API server calls this webhook over HTTPS, as kube-apiserver would,
//! through the configuration Lien manages, and kube-rs sees the refusals.

mod common;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use lien_core::{ObjectKey, Relation, RelationIndex, Source};
use lien_webhook::{
    CertManager, ClientConfig, ConfigurationOptions, Policy, Record, Server, TlsSettings, Webhook,
    validating_webhook_configuration,
};
use parking_lot::RwLock;
use serde_json::json;
use time::OffsetDateTime;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

const NS: &str = "e2e";

/// The leaf certificate the server presents to a new connection, verified against `bundle`.
async fn served_leaf(addr: std::net::SocketAddr, bundle: &str) -> Vec<u8> {
    let tls = common::connect_tls(addr, bundle).await;
    tls.get_ref().1.peer_certificates().expect("certificates")[0].to_vec()
}

fn api_error(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn the_api_server_refuses_deleting_an_object_in_use() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;

    // The webhook: an index with one relation, its own CA, TLS on 127.0.0.1.
    let settings = ObjectKey::new("", "ConfigMap", Some(NS), "settings");
    let web = ObjectKey::new("apps", "Deployment", Some(NS), "web");
    let source = Source::usage(NS, "web-uses-settings");
    let mut idx = RelationIndex::new();
    idx.apply(
        &source,
        [Relation::uses(source.clone(), settings, web).with_reason("web reads its settings")],
    )
    .expect("apply");
    let index = Arc::new(RwLock::new(idx));
    let (tx, mut records) = mpsc::channel(16);
    let webhook = Webhook::builder(index.clone())
        .policy(Policy {
            break_glass_groups: vec!["lien:break-glass".into()],
            ..Policy::default()
        })
        .records(tx)
        .ready(true)
        .build();
    let now = OffsetDateTime::now_utc();
    let minutes = |m: u64| Duration::from_secs(60 * m);
    let tls = TlsSettings {
        cert_validity: minutes(60),
        cert_renew_before: minutes(30),
        ca_validity: minutes(120),
        ca_renew_before: minutes(90),
        ca_propagation: Duration::from_secs(1),
        ..TlsSettings::new(vec!["127.0.0.1".into()])
    };
    let certs = CertManager::new_at(tls, now - minutes(35)).expect("certs");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let server = Server::start(
        listener,
        certs.server_config().expect("tls"),
        webhook.router(),
    )
    .expect("serve");

    // Lien's configuration, pointing at it.
    let opts = ConfigurationOptions::new(ClientConfig::Url(format!(
        "https://{}/validate",
        server.addr()
    )));
    let vwcs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let config = validating_webhook_configuration(&opts, &certs.ca_bundle_base64());
    vwcs.create(
        &PostParams::default(),
        &serde_json::from_value(config).expect("vwc"),
    )
    .await
    .expect("register webhook");

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}})).expect("ns"),
        )
        .await
        .expect("namespace");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    for (name, labels) in [
        ("settings", json!({"lien.dev/in-use": "true"})),
        ("unrelated", json!({"app": "web"})),
    ] {
        cms.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}}))
                .expect("cm"),
        )
        .await
        .expect("configmap");
    }

    // DELETE of the object in use: 409, with the exact message, its lines as the API server
    // passes them through.
    let expected = "admission webhook \"delete.lien.dev\" denied the request: cannot delete \
                    ConfigMap e2e/settings: it is in use by apps/Deployment e2e/web \
                    (Usage e2e/web-uses-settings: web reads its settings).\n\
                    not replayed: to have Lien delete it once free, run \
                    `kubectl lien delete --when-free configmap/settings -n e2e`.\n\
                    To free it now, delete the user first: `kubectl delete deployment.apps/web -n e2e`; \
                    for the other ways: `kubectl lien why configmap/settings -n e2e`.";
    let err = cms
        .delete("settings", &DeleteParams::foreground())
        .await
        .expect_err("refused");
    assert_eq!(api_error(err), (409, expected.to_owned()));
    let Ok(Record::Denied(denial)) = records.try_recv() else {
        panic!("a denial record");
    };
    assert_eq!(denial.propagation_policy.as_deref(), Some("Foreground"));
    assert_eq!(denial.user, "sandbox-admin");

    // Other objects delete fine.
    cms.delete("unrelated", &DeleteParams::default())
        .await
        .expect("unrelated object deletes");

    // Tamper guard: the label stays while the object is in use.
    let strip = json!({"metadata": {"labels": {"lien.dev/in-use": null}}});
    let err = cms
        .patch("settings", &PatchParams::default(), &Patch::Merge(&strip))
        .await
        .expect_err("label removal refused");
    let (code, message) = api_error(err);
    assert_eq!(code, 409);
    assert!(
        message.starts_with(
            "admission webhook \"tamper.lien.dev\" denied the request: cannot remove label"
        ),
        "{message}"
    );

    // Break-glass: the admin is not in the break-glass group. On an object in use both the
    // tamper and the break-glass hooks see the write; on one not (yet) in use only the
    // break-glass hook's match condition sends it to Lien — and it is refused all the same.
    let glass = json!({"metadata": {"annotations": {"lien.dev/break-glass": "INC-1"}}});
    let err = cms
        .patch("settings", &PatchParams::default(), &Patch::Merge(&glass))
        .await
        .expect_err("break-glass refused");
    let (code, message) = api_error(err);
    assert_eq!(code, 403);
    assert!(
        message.contains("cannot set annotation lien.dev/break-glass on ConfigMap e2e/settings"),
        "{message}"
    );
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "plain"}})).expect("cm"),
    )
    .await
    .expect("configmap");
    let err = cms
        .patch("plain", &PatchParams::default(), &Patch::Merge(&glass))
        .await
        .expect_err("break-glass refused");
    let (code, message) = api_error(err);
    assert_eq!(code, 403);
    assert!(
        message.starts_with("admission webhook \"break-glass.lien.dev\" denied the request"),
        "{message}"
    );
    let note = json!({"metadata": {"annotations": {"note": "hello"}}});
    cms.patch("plain", &PatchParams::default(), &Patch::Merge(&note))
        .await
        .expect("other annotations are not Lien's business");

    // Serving certificate rotation, then CA rotation with overlap — without a restart. The
    // lifetimes are short and the certificates were made "35 minutes ago", so that both
    // rotations fall due now, in real time (TLS peers check validity against the real clock).
    let leaf0 = served_leaf(server.addr(), &certs.ca_bundle_pem()).await;
    let r = certs.rotate(now).expect("rotate");
    assert!(
        r.serving && r.bundle,
        "serving renewed, pending CA joins the bundle: {r:?}"
    );
    let leaf1 = served_leaf(server.addr(), &certs.ca_bundle_pem()).await;
    assert_ne!(
        leaf0, leaf1,
        "a new certificate is served by the same server"
    );
    let err = cms
        .delete("settings", &DeleteParams::default())
        .await
        .expect_err("still refused with a new serving certificate");
    assert_eq!(api_error(err).0, 409);
    // Publish the bundle holding both CAs, then let the new CA sign.
    let mut vwc = vwcs.get("lien").await.expect("get vwc");
    for hook in vwc.webhooks.iter_mut().flatten() {
        hook.client_config.ca_bundle =
            Some(k8s_openapi::ByteString(certs.ca_bundle_pem().into_bytes()));
    }
    vwcs.replace("lien", &PostParams::default(), &vwc)
        .await
        .expect("publish the new bundle");
    let r = certs.rotate(now + Duration::from_secs(2)).expect("rotate");
    // The bundle already holds both CAs, newest first: only the serving certificate changes.
    assert!(r.serving && !r.bundle, "{r:?}");
    let leaf2 = served_leaf(server.addr(), &certs.ca_bundle_pem()).await;
    assert_ne!(leaf1, leaf2);
    // The API server (a new client for the new bundle) verifies the new CA's certificate.
    let err = cms
        .delete("settings", &DeleteParams::default())
        .await
        .expect_err("still refused, served by the new CA");
    assert_eq!(api_error(err).0, 409);

    // Once the relation goes, the DELETE goes through although the label is still there: this
    // index saw the relation go, so the label is stale for a reason it knows, and no live read
    // is needed (this webhook has none; an object it never saw protected would fail closed:
    // `router.rs`, `labelled_but_unknown_is_confirmed_live_and_fails_closed`).
    index.write().delete(&source);
    cms.delete("settings", &DeleteParams::default())
        .await
        .expect("deletes once not in use");

    server.shutdown().await;
    sandbox.shutdown().await;
}
