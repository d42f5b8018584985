//! Serving an axum [`Router`] over TLS on a bound listener until told to stop.
//!
//! Lien's webhook and the sandbox API server both need exactly this, and the accept loop has
//! details that are easy to get wrong twice:
//!
//! - `TCP_NODELAY` on every connection: admission reviews are request/response on keep-alive
//!   connections, and Nagle's algorithm with delayed ACKs would add up to 40 ms to an answer.
//! - A TLS handshake must finish within [`HANDSHAKE_TIMEOUT`]; otherwise a client that opens a
//!   TCP connection and says nothing holds a task and a file descriptor forever.
//! - With [`serve_tls_with`], an HTTP/1 request's headers must arrive within
//!   [`Timeouts::header_read`]; otherwise a client that sends half a request line and stalls
//!   holds a connection forever (slowloris). (A stalled *body* is the application's to bound:
//!   only it knows when it reads one.)
//! - A failed `accept` (out of file descriptors, most often) is retried after a short pause
//!   instead of spinning on a CPU.
//! - Stopping closes every open connection, watches included; finished connections are reaped
//!   as the loop goes, so the set of tasks does not grow without bound.
//! - HTTP/1.1 with upgrades and HTTP/2, as kube-apiserver and kubectl speak both.
//! - The certificate chain a client presented (which the configuration's client verifier, if
//!   any, has verified during the handshake) is put on every request of the connection as a
//!   [`ClientCertificates`] extension, so a handler can tell an authenticated client (e.g. the
//!   API server presenting its admission client certificate) from an anonymous one.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// The certificate chain (leaf first) the client presented during the TLS handshake, on every
/// request of its connection; absent when it presented none. A configuration with a client
/// verifier (rustls' `WebPkiClientVerifier`) refuses the handshake of a chain that does not
/// verify, so its presence means the client is authenticated; without a verifier rustls asks
/// for no certificate and this is never present.
#[derive(Debug, Clone)]
pub struct ClientCertificates(pub Arc<[rustls::pki_types::CertificateDer<'static>]>);

/// How long a client has to complete the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a closed connection of a draining server keeps reading (see [`Lingering`]).
const LINGER: Duration = Duration::from_secs(1);

/// A TCP connection that, when the server closes it, first shuts its write side and reads
/// (and drops) whatever the client still sends, for up to `linger` or until the client
/// closes. Closing a socket with unread data makes the kernel send a reset, and a client that
/// wrote a request just before it read our last frames (HTTP/2's final GOAWAY during a drain)
/// would see "broken pipe" instead of the GOAWAY that tells it to retry elsewhere — Go's
/// HTTP/2 server waits after its final GOAWAY for the same reason.
struct Lingering {
    tcp: Option<tokio::net::TcpStream>,
    /// How long to linger, and the tracker the serve loop waits on before it returns: a
    /// process that exits once its server has stopped would otherwise close the socket (and
    /// reset it) before the lingering read ran.
    linger: Option<(Duration, TaskTracker)>,
}

impl Lingering {
    fn tcp(&mut self) -> std::io::Result<&mut tokio::net::TcpStream> {
        self.tcp
            .as_mut()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotConnected))
    }
}

impl tokio::io::AsyncRead for Lingering {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.tcp() {
            Ok(tcp) => std::pin::Pin::new(tcp).poll_read(cx, buf),
            Err(e) => std::task::Poll::Ready(Err(e)),
        }
    }
}

impl tokio::io::AsyncWrite for Lingering {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.tcp() {
            Ok(tcp) => std::pin::Pin::new(tcp).poll_write(cx, buf),
            Err(e) => std::task::Poll::Ready(Err(e)),
        }
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.tcp() {
            Ok(tcp) => std::pin::Pin::new(tcp).poll_flush(cx),
            Err(e) => std::task::Poll::Ready(Err(e)),
        }
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.tcp() {
            Ok(tcp) => std::pin::Pin::new(tcp).poll_shutdown(cx),
            Err(e) => std::task::Poll::Ready(Err(e)),
        }
    }
}

impl Drop for Lingering {
    fn drop(&mut self) {
        let (Some(mut tcp), Some((linger, tracker))) = (self.tcp.take(), self.linger.take()) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        tracker.spawn_on(
            async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let _ = tcp.shutdown().await;
                let mut sink = [0u8; 4096];
                let _ = tokio::time::timeout(linger, async {
                    while matches!(tcp.read(&mut sink).await, Ok(n) if n > 0) {}
                })
                .await;
            },
            &runtime,
        );
    }
}

/// How long to wait before accepting again after `accept` failed.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// How long a client may take over the parts of a connection the loop reads itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// The TLS handshake.
    pub handshake: Duration,
    /// An HTTP/1 request's head (request line and headers), from when the connection is ready
    /// for the next request; so it also closes a keep-alive connection idle that long. `None`:
    /// no bound.
    pub header_read: Option<Duration>,
    /// On stop: `None` closes every connection at once; `Some(d)` stops accepting (new
    /// connections are refused, so a client with another endpoint goes there), asks every
    /// open connection to finish gracefully (HTTP/2 GOAWAY, HTTP/1 close after the response
    /// in progress) and closes what is still open after `d`. Requests in flight are answered.
    pub drain: Option<Duration>,
}

impl Default for Timeouts {
    /// [`HANDSHAKE_TIMEOUT`], no header bound, no drain (what [`serve_tls`] serves with).
    fn default() -> Self {
        Self {
            handshake: HANDSHAKE_TIMEOUT,
            header_read: None,
            drain: None,
        }
    }
}

/// Serves `app` over TLS on `listener` until `stop` turns true (or its sender is dropped); then
/// every open connection is closed. Each connection takes its certificate from `tls` at
/// handshake time, so a rotating certificate resolver applies at once.
pub fn serve_tls(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    serve_tls_with(listener, tls, app, stop, Timeouts::default())
}

/// As [`serve_tls`], with `timeouts`.
pub fn serve_tls_with(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    mut stop: watch::Receiver<bool>,
    timeouts: Timeouts,
) -> JoinHandle<()> {
    let acceptor = TlsAcceptor::from(tls);
    tokio::spawn(async move {
        // Dropping the set when the loop ends aborts every open connection.
        let mut connections = JoinSet::new();
        // Told to each connection when draining.
        let (drain_tx, drain_rx) = watch::channel(false);
        // The closed connections still lingering; waited for at the end of a drain.
        let lingering = TaskTracker::new();
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = stop.changed() => {
                    if let Some(drain) = timeouts.drain {
                        drop(listener);
                        drain_tx.send_replace(true);
                        let _ = tokio::time::timeout(drain, async {
                            while connections.join_next().await.is_some() {}
                        })
                        .await;
                        // What outlived the drain is cut off now (and lingers too), and the
                        // loop returns only once every closed connection has stopped
                        // lingering: its caller may exit the process next.
                        connections.shutdown().await;
                        lingering.close();
                        let _ = tokio::time::timeout(LINGER, lingering.wait()).await;
                    }
                    return;
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            };
            let tcp = match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            let tcp = Lingering {
                tcp: Some(tcp),
                linger: timeouts.drain.map(|_| (LINGER, lingering.clone())),
            };
            let acceptor = acceptor.clone();
            let app = app.clone();
            let mut drain = drain_rx.clone();
            connections.spawn(async move {
                let Ok(Ok(tls)) =
                    tokio::time::timeout(timeouts.handshake, acceptor.accept(tcp)).await
                else {
                    return;
                };
                let peer = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .filter(|chain| !chain.is_empty())
                    .map(|chain| {
                        ClientCertificates(chain.iter().map(|c| c.clone().into_owned()).collect())
                    });
                let service =
                    TowerToHyperService::new(app.map_request(move |mut req: Request<Incoming>| {
                        if let Some(peer) = &peer {
                            req.extensions_mut().insert(peer.clone());
                        }
                        req
                    }));
                let mut builder = auto::Builder::new(TokioExecutor::new());
                // hyper's own default (30 s) only applies with a timer, so it is set explicitly
                // or not at all.
                builder
                    .http1()
                    .timer(TokioTimer::new())
                    .header_read_timeout(timeouts.header_read);
                let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
                tokio::pin!(conn);
                tokio::select! {
                    _ = conn.as_mut() => {}
                    draining = async { drain.wait_for(|d| *d).await.is_ok() } => {
                        // Not draining: the serve loop ended (sender gone), close.
                        if draining {
                            conn.as_mut().graceful_shutdown();
                            let _ = conn.await;
                        }
                    }
                }
            });
        }
    })
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    use tokio_rustls::TlsConnector;
    use tokio_rustls::rustls::pki_types::ServerName;

    use super::*;

    fn tls_pair() -> (Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>) {
        let cert =
            rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("certificate");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into()),
            )
            .expect("server config");
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert.cert.der().clone()).expect("root");
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        (Arc::new(server), Arc::new(client))
    }

    async fn get_ok(
        addr: SocketAddr,
        client: Arc<rustls::ClientConfig>,
    ) -> std::io::Result<String> {
        let tcp = TcpStream::connect(addr).await?;
        let name = ServerName::try_from("localhost").expect("name");
        let mut tls = TlsConnector::from(client).connect(name, tcp).await?;
        tls.write_all(b"GET /ok HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
            .await?;
        let mut out = String::new();
        tls.read_to_string(&mut out).await?;
        Ok(out)
    }

    /// A client that sends part of a request head and stalls is disconnected once
    /// `header_read` has passed; before the bound existed it held the connection forever.
    #[tokio::test]
    async fn a_stalled_request_head_is_disconnected() {
        let (server, client) = tls_pair();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (_stop, stopped) = watch::channel(false);
        let app = Router::new().route("/ok", get(|| async { "served" }));
        let timeouts = Timeouts {
            header_read: Some(Duration::from_millis(300)),
            ..Timeouts::default()
        };
        let _task = serve_tls_with(listener, server, app, stopped, timeouts);

        let tcp = TcpStream::connect(addr).await.expect("connect");
        let name = ServerName::try_from("localhost").expect("name");
        let mut tls = TlsConnector::from(client.clone())
            .connect(name, tcp)
            .await
            .expect("handshake");
        tls.write_all(b"POST /ok HTTP/1.1\r\nhost: localhost\r\n")
            .await
            .expect("write");
        let mut out = Vec::new();
        // Generous against a slow machine, far below "forever".
        let read = tokio::time::timeout(Duration::from_secs(20), tls.read_to_end(&mut out))
            .await
            .expect("disconnected, not held");
        assert!(
            read.is_err() || out.is_empty() || out.starts_with(b"HTTP/1.1 408"),
            "{read:?} {}",
            String::from_utf8_lossy(&out)
        );
        // Others are still served.
        let answer = get_ok(addr, client).await.expect("request");
        assert!(answer.ends_with("served"), "{answer}");
    }

    /// A draining server's loop returns only once its closed connections have stopped
    /// lingering (the client closed, or the linger passed): the process that awaited it may
    /// exit next, and a socket closed by the exit with a late request unread is reset — the
    /// client would see "broken pipe" instead of the server's last frames (tests/ha.rs saw 3
    /// such reviews in 785 before the loop waited).
    #[tokio::test]
    async fn a_drain_ends_once_closed_connections_stop_lingering() {
        let (server, client) = tls_pair();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = watch::channel(false);
        let app = Router::new().route("/ok", get(|| async { "served" }));
        let timeouts = Timeouts {
            drain: Some(Duration::from_secs(5)),
            ..Timeouts::default()
        };
        let mut task = serve_tls_with(listener, server, app, stopped, timeouts);

        let tcp = TcpStream::connect(addr).await.expect("connect");
        let name = ServerName::try_from("localhost").expect("name");
        let mut tls = TlsConnector::from(client)
            .connect(name, tcp)
            .await
            .expect("handshake");
        tls.write_all(b"GET /ok HTTP/1.1\r\nhost: localhost\r\n\r\n")
            .await
            .expect("write");
        let mut answer = Vec::new();
        while !answer.ends_with(b"served") {
            let mut buf = [0u8; 512];
            let n = tls.read(&mut buf).await.expect("answer");
            assert!(n > 0, "{}", String::from_utf8_lossy(&answer));
            answer.extend_from_slice(&buf[..n]);
        }

        // The idle keep-alive connection is closed by the drain; the client sees it closed…
        stop.send(true).expect("stop");
        let mut rest = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut rest))
            .await
            .expect("closed by the drain");
        // …while the server still reads what it might send, so the loop has not returned.
        assert!(
            tokio::time::timeout(Duration::from_millis(100), &mut task)
                .await
                .is_err(),
            "the serve loop returned while a closed connection was still lingering"
        );
        // Once the client closes too, the loop returns (well before the 1 s linger).
        drop(tls);
        tokio::time::timeout(Duration::from_millis(800), task)
            .await
            .expect("the loop returns once the client has closed")
            .expect("loop ends");
    }

    #[tokio::test]
    async fn serves_over_tls_and_stops_with_its_connections() {
        let (server, client) = tls_pair();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = watch::channel(false);
        let app = Router::new().route("/ok", get(|| async { "served" }));
        let task = serve_tls(listener, server, app, stopped);

        let answer = get_ok(addr, client.clone()).await.expect("request");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("served"), "{answer}");

        // A client that connects and never handshakes does not stop others being served.
        let _silent = TcpStream::connect(addr).await.expect("connect");
        let answer = get_ok(addr, client.clone()).await.expect("request");
        assert!(answer.ends_with("served"), "{answer}");

        // An open connection is closed when the server stops.
        let mut idle = TcpStream::connect(addr).await.expect("connect");
        stop.send(true).expect("stop");
        task.await.expect("loop ends");
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(5), idle.read(&mut buf))
            .await
            .expect("closed, not hanging");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
        assert!(get_ok(addr, client).await.is_err(), "no longer accepting");
    }
}
