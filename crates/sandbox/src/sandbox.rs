//! A running sandbox: the API server behind HTTPS on 127.0.0.1, its controllers, two users,
//! and a kubeconfig that the real `kubectl` and kube-rs accept unchanged.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::apiserver::{ApiServer, Config};
use crate::auth::{Authenticator, UserInfo};
use crate::http::{HttpState, router};
use crate::tls::{CertificateAuthority, TlsError};

/// The admin's user name in the kubeconfig: a cluster admin (`system:masters`).
pub const ADMIN_USER: &str = "sandbox-admin";
/// The second user: authenticated but not an admin, so `userInfo` differs in admission.
pub const SECOND_USER: &str = "sandbox-user";
/// The common name of the client certificate the sandbox presents to webhooks by default
/// (issued by its CA, [`Sandbox::ca`]).
pub const ADMISSION_CLIENT: &str = "lien-sandbox-apiserver";

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("binding 127.0.0.1:{port}: {source}")]
    Bind {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("writing the kubeconfig to {path}: {source}")]
    Kubeconfig {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

#[derive(Debug, Clone, Default)]
pub struct SandboxConfig {
    /// 0 picks an ephemeral port.
    pub port: u16,
    pub api: Config,
}

pub struct Sandbox {
    addr: SocketAddr,
    server: Arc<ApiServer>,
    ca: Arc<CertificateAuthority>,
    admin_token: String,
    user_token: String,
    shutdown: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

fn token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

impl Sandbox {
    pub async fn start(config: SandboxConfig) -> Result<Sandbox, SandboxError> {
        let listener = TcpListener::bind(("127.0.0.1", config.port))
            .await
            .map_err(|source| SandboxError::Bind {
                port: config.port,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| SandboxError::Bind {
            port: config.port,
            source,
        })?;
        let ca = Arc::new(CertificateAuthority::new("lien-sandbox-ca")?);
        let serving = ca.issue(&["127.0.0.1", "localhost", "kubernetes.default.svc"])?;

        let admin_token = token();
        let user_token = token();
        let mut auth = Authenticator::default();
        auth.add_token(
            admin_token.clone(),
            UserInfo::new(
                ADMIN_USER,
                "sandbox-admin-uid",
                &["system:masters", "system:authenticated"],
            ),
        );
        auth.add_token(
            user_token.clone(),
            UserInfo::new(
                SECOND_USER,
                "sandbox-user-uid",
                &["developers", "system:authenticated"],
            ),
        );

        let mut api = config.api;
        if api.admission_kubeconfig.is_none() {
            // As a cluster whose admin gave kube-apiserver an AdmissionConfiguration with a
            // client certificate for every webhook (`*`): webhooks trusting the sandbox's CA can
            // tell its calls from anyone else's.
            let client = ca.issue_client(ADMISSION_CLIENT)?;
            api.admission_kubeconfig = Some(
                crate::admission::WebhookKubeconfig::with_default_client_certificate(
                    &client.cert_pem,
                    &client.key_pem,
                ),
            );
        }
        let server = ApiServer::new(api);
        server.publish_endpoints(addr);
        let mut tasks = crate::controllers::spawn_all(&server);
        tasks.push(crate::controllers::spawn_bootstrap(&server, ca.cert_pem()));
        if let Err(e) = crate::kubelet::register(&server).await {
            tracing::warn!(error = %e.message, "registering the sandbox's node");
        }
        let app = router(HttpState {
            server: server.clone(),
            auth: Arc::new(auth),
        });
        let (shutdown, stop) = watch::channel(false);
        tasks.push(lien_serve::serve_tls(
            listener,
            serving.server_config(&ca)?,
            app,
            stop,
        ));
        Ok(Sandbox {
            addr,
            server,
            ca,
            admin_token,
            user_token,
            shutdown,
            tasks,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    pub fn api(&self) -> &Arc<ApiServer> {
        &self.server
    }

    pub fn ca(&self) -> &Arc<CertificateAuthority> {
        &self.ca
    }

    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    pub fn user_token(&self) -> &str {
        &self.user_token
    }

    /// A kubeconfig with two contexts: `sandbox` (the admin, current) and `sandbox-user`.
    pub fn kubeconfig(&self) -> Value {
        use base64::Engine;
        let ca = base64::engine::general_purpose::STANDARD.encode(self.ca.cert_pem());
        json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "lien-sandbox", "cluster": {"server": self.url(), "certificate-authority-data": ca}}],
            "users": [
                {"name": ADMIN_USER, "user": {"token": self.admin_token}},
                {"name": SECOND_USER, "user": {"token": self.user_token}},
            ],
            "contexts": [
                {"name": "sandbox", "context": {"cluster": "lien-sandbox", "user": ADMIN_USER, "namespace": "default"}},
                {"name": "sandbox-user", "context": {"cluster": "lien-sandbox", "user": SECOND_USER, "namespace": "default"}},
            ],
            "current-context": "sandbox",
        })
    }

    /// Writes the kubeconfig (JSON is valid YAML) readable by its owner only: it holds tokens.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), SandboxError> {
        let err = |source| SandboxError::Kubeconfig {
            path: path.display().to_string(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let text = serde_json::to_string_pretty(&self.kubeconfig()).unwrap_or_default();
        std::fs::write(path, text).map_err(err)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
        }
        Ok(())
    }

    /// Stops serving, closes connections and stops the controllers.
    pub async fn shutdown(mut self) {
        self.stop().await;
    }

    async fn stop(&mut self) {
        let _ = self.shutdown.send(true);
        for t in self.tasks.drain(..) {
            t.abort();
            let _ = t.await;
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        for t in &self.tasks {
            t.abort();
        }
    }
}
