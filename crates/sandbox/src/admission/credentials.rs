//! The credentials the API server presents to webhooks: the kubeconfig that kube-apiserver's
//! AdmissionConfiguration names (`plugins[].configuration.kubeConfigFile` of the
//! `ValidatingAdmissionWebhook` plugin), and the lookup kube-apiserver makes in it for each call.
//!
//! The kubeconfig's `users` are keyed by the webhook's host, not by a person:
//!
//! * a webhook reached by `clientConfig.url` is looked up by the URL's host and port as written
//!   (`www.example.com`, `127.0.0.1:8443`);
//! * one reached by `clientConfig.service` by `<name>.<namespace>.svc:<port>`.
//!
//! For that target kube-apiserver tries, in order: the exact name; each `*.`-prefixed suffix of
//! it (`*.ns.svc:443`, `*.svc:443`); when the port is 443, the same two without the port
//! (`hook.ns.svc`, `*.ns.svc`, `*.svc`); the default user `*`; the current context's user; and
//! finally no credentials at all. The user's `client-certificate(-data)`/`client-key(-data)` make
//! the TLS client present that certificate; `token` is sent as a bearer token.

use std::collections::BTreeMap;

use base64::Engine;
use serde_json::Value;

/// What one kubeconfig user presents.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// PEM certificate chain (leaf first) and PEM private key of a client certificate.
    pub client_certificate: Option<(String, String)>,
    /// A bearer token.
    pub token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys and tokens are secrets: say only what there is.
        f.debug_struct("Credentials")
            .field("client_certificate", &self.client_certificate.is_some())
            .field("token", &self.token.is_some())
            .finish()
    }
}

/// The parsed `kubeConfigFile`: users by name, and the current context's user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebhookKubeconfig {
    users: BTreeMap<String, Credentials>,
    current_user: Option<String>,
}

impl WebhookKubeconfig {
    /// A kubeconfig with one user, `*` (the default match), presenting a client certificate.
    pub fn with_default_client_certificate(cert_pem: &str, key_pem: &str) -> Self {
        let mut users = BTreeMap::new();
        users.insert(
            "*".to_owned(),
            Credentials {
                client_certificate: Some((cert_pem.to_owned(), key_pem.to_owned())),
                token: None,
            },
        );
        WebhookKubeconfig {
            users,
            current_user: None,
        }
    }

    /// Reads a kubeconfig (as JSON, or YAML parsed to JSON). File references
    /// (`client-certificate`, `client-key`) are read now, as kube-apiserver reads them at start;
    /// an error names the user and the field.
    pub fn from_value(kubeconfig: &Value) -> Result<Self, String> {
        let mut users = BTreeMap::new();
        for (i, entry) in kubeconfig["users"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let name = entry["name"]
                .as_str()
                .ok_or_else(|| format!("users[{i}].name: required"))?;
            let user = &entry["user"];
            let field = |f: &str| format!("users[{i}] ({name}).user.{f}");
            let read = |data: &str, file: &str| -> Result<Option<String>, String> {
                if let Some(b64) = user[data].as_str() {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(b64.trim())
                        .map_err(|e| format!("{}: not valid base64: {e}", field(data)))?;
                    return String::from_utf8(bytes)
                        .map(Some)
                        .map_err(|_| format!("{}: not PEM text", field(data)));
                }
                if let Some(path) = user[file].as_str() {
                    return std::fs::read_to_string(path)
                        .map(Some)
                        .map_err(|e| format!("{}: reading {path}: {e}", field(file)));
                }
                Ok(None)
            };
            let cert = read("client-certificate-data", "client-certificate")?;
            let key = read("client-key-data", "client-key")?;
            let client_certificate = match (cert, key) {
                (Some(c), Some(k)) => Some((c, k)),
                (None, None) => None,
                (Some(_), None) => {
                    return Err(format!(
                        "{}: a client certificate needs its key (client-key or client-key-data)",
                        field("client-certificate")
                    ));
                }
                (None, Some(_)) => {
                    return Err(format!(
                        "{}: a client key needs its certificate (client-certificate or client-certificate-data)",
                        field("client-key")
                    ));
                }
            };
            let token = user["token"].as_str().map(str::to_owned);
            users.insert(
                name.to_owned(),
                Credentials {
                    client_certificate,
                    token,
                },
            );
        }
        let current_user = kubeconfig["current-context"].as_str().and_then(|current| {
            kubeconfig["contexts"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["name"] == current)
                .and_then(|c| c["context"]["user"].as_str())
                .map(str::to_owned)
        });
        Ok(WebhookKubeconfig {
            users,
            current_user,
        })
    }

    /// The user kube-apiserver picks for `target` (`host[:port]`), with its name (the module
    /// docs give the order); `None`: no credentials.
    pub fn lookup(&self, target: &str) -> Option<(&str, &Credentials)> {
        let get = |name: &str| self.users.get_key_value(name).map(|(k, v)| (k.as_str(), v));
        let exact_or_star = |target: &str| {
            get(target).or_else(|| {
                // `*.` and each suffix after a dot: `*.ns.svc:443`, `*.svc:443`.
                target
                    .match_indices('.')
                    .find_map(|(dot, _)| get(&format!("*{}", &target[dot..])))
            })
        };
        exact_or_star(target)
            .or_else(|| {
                let (host, port) = split_host_port(target)?;
                (port == "443").then(|| exact_or_star(host)).flatten()
            })
            .or_else(|| get("*"))
            .or_else(|| self.current_user.as_deref().and_then(get))
    }
}

/// Go's `net.SplitHostPort` for what it is used on here: `host:port` or `[v6]:port`.
fn split_host_port(target: &str) -> Option<(&str, &str)> {
    let (host, port) = target.rsplit_once(':')?;
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return None;
    }
    Some((host, port))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn user(name: &str, token: &str) -> Value {
        json!({"name": name, "user": {"token": token}})
    }

    fn token<'a>(k: &'a WebhookKubeconfig, target: &str) -> Option<&'a str> {
        k.lookup(target).and_then(|(_, c)| c.token.as_deref())
    }

    #[test]
    fn lookup_follows_kube_apiserver_order() {
        let k = WebhookKubeconfig::from_value(&json!({"users": [
            user("hook.ns.svc:8443", "exact-port"),
            user("hook.ns.svc", "exact"),
            user("*.other.svc", "star"),
            user("www.example.com", "url"),
            user("127.0.0.1:9443", "ip"),
            user("*", "default"),
        ]}))
        .expect("kubeconfig");
        assert_eq!(token(&k, "hook.ns.svc:8443"), Some("exact-port"));
        // Port 443 falls back to the name without it; other ports do not.
        assert_eq!(token(&k, "hook.ns.svc:443"), Some("exact"));
        assert_eq!(token(&k, "hook.ns.svc:9000"), Some("default"));
        assert_eq!(token(&k, "x.other.svc:443"), Some("star"));
        assert_eq!(token(&k, "www.example.com"), Some("url"));
        assert_eq!(token(&k, "127.0.0.1:9443"), Some("ip"));
        assert_eq!(token(&k, "127.0.0.1:9444"), Some("default"));
    }

    #[test]
    fn without_a_match_the_current_context_user_then_nothing() {
        let k = WebhookKubeconfig::from_value(&json!({
            "users": [user("me", "mine"), user("hook.ns.svc", "hook")],
            "contexts": [{"name": "c", "context": {"user": "me"}}],
            "current-context": "c",
        }))
        .expect("kubeconfig");
        assert_eq!(token(&k, "elsewhere:443"), Some("mine"));
        let none = WebhookKubeconfig::from_value(&json!({"users": [user("hook.ns.svc", "t")]}))
            .expect("kubeconfig");
        assert!(none.lookup("elsewhere").is_none());
    }

    #[test]
    fn errors_name_the_user_and_field() {
        let err = WebhookKubeconfig::from_value(&json!({"users": [
            {"name": "hook.ns.svc", "user": {"client-certificate-data": "not base64!"}}]}))
        .expect_err("bad");
        assert!(
            err.contains("users[0] (hook.ns.svc).user.client-certificate-data"),
            "{err}"
        );
        let err = WebhookKubeconfig::from_value(&json!({"users": [
            {"name": "h", "user": {"client-certificate-data": "QUJD"}}]}))
        .expect_err("no key");
        assert!(err.contains("needs its key"), "{err}");
    }
}
