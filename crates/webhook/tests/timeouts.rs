//! Issue 7 §4: a client that opens a connection and stalls is let go within a bound: a request
//! whose headers arrived but whose body stalls gets 408 and a closed connection, and one whose
//! headers stall is disconnected. Before the bounds, 100 such clients held 100 connections for
//! as long as they liked.

mod common;

use std::sync::Arc;
use std::time::Duration;

use lien_core::RelationIndex;
use lien_webhook::{CertManager, Server, TlsSettings, Webhook};
use parking_lot::RwLock;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::client::TlsStream;

/// Far above the bounds under test (300 ms), far below "held forever".
const PATIENCE: Duration = Duration::from_secs(20);

struct Served {
    server: Server,
    bundle: String,
}

async fn serve(body_timeout: Duration, header_read: Duration) -> Served {
    let certs = CertManager::new(TlsSettings::new(vec!["127.0.0.1".into()])).expect("certs");
    let webhook = Webhook::builder(Arc::new(RwLock::new(RelationIndex::new())))
        .body_timeout(body_timeout)
        .ready(true)
        .build();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let timeouts = lien_serve::Timeouts {
        header_read: Some(header_read),
        ..lien_serve::Timeouts::default()
    };
    let server = Server::start_with(
        listener,
        certs.server_config().expect("tls"),
        webhook.router(),
        timeouts,
    )
    .expect("serve");
    Served {
        server,
        bundle: certs.ca_bundle_pem(),
    }
}

/// Reads until the server closes the connection; panics if it is still open after
/// [`PATIENCE`].
async fn read_until_closed(tls: &mut TlsStream<TcpStream>) -> String {
    let mut out = Vec::new();
    let read = tokio::time::timeout(PATIENCE, tls.read_to_end(&mut out))
        .await
        .expect("the server let the stalled client go");
    // A reset or a TLS close without close_notify is a disconnect as good as any.
    let _ = read;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn a_stalled_body_is_answered_408_and_disconnected() {
    let s = serve(Duration::from_millis(300), Duration::from_secs(30)).await;
    let mut tls = common::connect_tls(s.server.addr(), &s.bundle).await;
    tls.write_all(
        b"POST /validate HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
          content-length: 100\r\n\r\n{\"request\":",
    )
    .await
    .expect("write");
    let answer = read_until_closed(&mut tls).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
    s.server.shutdown().await;
}

#[tokio::test]
async fn a_stalled_request_head_is_disconnected() {
    let s = serve(Duration::from_secs(30), Duration::from_millis(300)).await;
    let mut tls = common::connect_tls(s.server.addr(), &s.bundle).await;
    tls.write_all(b"POST /validate HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        .await
        .expect("write");
    let answer = read_until_closed(&mut tls).await;
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer:?}"
    );
    s.server.shutdown().await;
}

/// The bounds do not cut short a client that sends at an ordinary pace.
#[tokio::test]
async fn a_whole_review_is_still_answered() {
    let s = serve(Duration::from_secs(5), Duration::from_secs(5)).await;
    let mut tls = common::connect_tls(s.server.addr(), &s.bundle).await;
    let body = br#"{"request":{"uid":"u1","operation":"CONNECT","kind":{"group":"","version":"v1","kind":"Pod"},"name":"p"}}"#;
    let head = format!(
        "POST /validate HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.expect("write");
    tls.write_all(body).await.expect("write");
    let answer = read_until_closed(&mut tls).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    assert!(answer.contains("\"uid\":\"u1\""), "{answer:?}");
    s.server.shutdown().await;
}
