//! Lien's own CA and serving certificate, rotated in place.
//!
//! # Data model
//!
//! - A [`CertManager`] owns a **signing CA**, optionally a **pending CA** (created before the
//!   signing one expires, already in the bundle but not yet signing), and **retired CAs** (kept
//!   in the bundle until they expire, because serving certificates they signed may still be
//!   served by other replicas).
//! - The **CA bundle** (PEM of every CA above, newest first) is what the
//!   `ValidatingWebhookConfiguration`'s `caBundle` must hold. It is published on a
//!   [`tokio::sync::watch`] channel; the controller patches the configuration when it changes.
//! - The **serving certificate** lives in a [`CertResolver`], a rustls `ResolvesServerCert` whose
//!   `CertifiedKey` is swapped atomically: new TLS handshakes get the new certificate, open
//!   connections keep theirs, nothing restarts.
//!
//! [`CertManager::rotate`] is the whole policy, driven by an explicit `now` so tests can move
//! time: renew the serving certificate when less than `cert_renew_before` is left; create a
//! pending CA when the signing CA has less than `ca_renew_before` left; promote it to signing
//! once it has been in the bundle for `ca_propagation` (long enough for the bundle to reach the
//! API servers), re-issuing the serving certificate from it; drop expired retired CAs.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use parking_lot::{Mutex, RwLock};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use time::OffsetDateTime;
use tokio::sync::watch;

/// Why a certificate could not be made or loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// rcgen refused the parameters or failed to sign.
    #[error("generating a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the key or configuration.
    #[error("building the TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// A duration does not fit the certificate's time type.
    #[error("certificate validity out of range")]
    Validity,
    /// The client CA bundle (`--client-ca-file`) holds no usable certificate.
    #[error("the client CA bundle {0}")]
    ClientCa(String),
}

/// The CAs whose client certificates authenticate the API server to the webhook
/// (`--client-ca-file`: the CA that issued the certificate kube-apiserver presents through its
/// AdmissionConfiguration's `kubeConfigFile`).
#[derive(Debug, Clone)]
pub struct ClientCa {
    roots: Arc<rustls::RootCertStore>,
}

impl ClientCa {
    /// From PEM text holding one or more CA certificates.
    pub fn from_pem(pem: &str) -> Result<Self, TlsError> {
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            let cert = cert.map_err(|e| TlsError::ClientCa(format!("is not valid PEM: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| TlsError::ClientCa(format!("holds an unusable certificate: {e}")))?;
        }
        if roots.is_empty() {
            return Err(TlsError::ClientCa(
                "holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)".into(),
            ));
        }
        Ok(Self {
            roots: Arc::new(roots),
        })
    }
}

/// Lifetimes and names of the certificates.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// Subject alternative names of the serving certificate: the Service's DNS names
    /// (`lien-webhook.lien-system.svc`) and/or IP addresses (`127.0.0.1`).
    pub names: Vec<String>,
    /// How long a CA is valid.
    pub ca_validity: Duration,
    /// Start a new CA when the signing one has less than this left.
    pub ca_renew_before: Duration,
    /// How long a new CA sits in the bundle before it signs.
    pub ca_propagation: Duration,
    /// How long a serving certificate is valid (capped at its CA's expiry).
    pub cert_validity: Duration,
    /// Renew the serving certificate when it has less than this left.
    pub cert_renew_before: Duration,
}

const DAY: Duration = Duration::from_secs(24 * 3600);

impl TlsSettings {
    /// A year-long CA renewed 60 days ahead, 30-day serving certificates renewed 10 days ahead.
    pub fn new(names: Vec<String>) -> Self {
        Self {
            names,
            ca_validity: 365 * DAY,
            ca_renew_before: 60 * DAY,
            ca_propagation: Duration::from_secs(600),
            cert_validity: 30 * DAY,
            cert_renew_before: 10 * DAY,
        }
    }
}

struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
    der: CertificateDer<'static>,
    created: OffsetDateTime,
    not_after: OffsetDateTime,
}

impl Ca {
    fn new(now: OffsetDateTime, validity: Duration) -> Result<Self, TlsError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let mut dn = DistinguishedName::new();
        // The creation time in the name tells CAs apart in the bundle.
        dn.push(
            DnType::CommonName,
            format!("lien webhook CA {}", now.unix_timestamp()),
        );
        params.distinguished_name = dn;
        // Backdate a little: API servers' clocks differ from ours.
        params.not_before = now - Duration::from_secs(300);
        params.not_after = now + validity;
        let cert = params.self_signed(&key)?;
        Ok(Self {
            pem: cert.pem(),
            der: cert.der().clone(),
            issuer: Issuer::new(params, key),
            created: now,
            not_after: now + validity,
        })
    }
}

/// The serving certificate as rustls serves it, swappable while serving.
#[derive(Debug)]
pub struct CertResolver {
    current: RwLock<Arc<CertifiedKey>>,
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().clone())
    }
}

impl CertResolver {
    /// The certificate currently served (leaf first).
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current.read().clone()
    }
}

struct State {
    signing: Ca,
    pending: Option<Ca>,
    retired: Vec<Ca>,
    cert_not_after: OffsetDateTime,
}

/// What [`CertManager::rotate`] changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rotation {
    /// A new serving certificate is being served.
    pub serving: bool,
    /// The CA bundle changed (publish it to the webhook configuration).
    pub bundle: bool,
}

/// Lien's CA, its bundle and the serving certificate.
pub struct CertManager {
    settings: TlsSettings,
    provider: Arc<CryptoProvider>,
    state: Mutex<State>,
    resolver: Arc<CertResolver>,
    bundle: watch::Sender<String>,
}

impl std::fmt::Debug for CertManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertManager")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

fn issue(
    ca: &Ca,
    names: &[String],
    now: OffsetDateTime,
    validity: Duration,
    provider: &CryptoProvider,
) -> Result<(CertifiedKey, OffsetDateTime), TlsError> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    let mut dn = DistinguishedName::new();
    dn.push(
        DnType::CommonName,
        names.first().map_or("lien-webhook", String::as_str),
    );
    params.distinguished_name = dn;
    for name in names {
        let san = match name.parse::<std::net::IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(name.as_str().try_into()?),
        };
        params.subject_alt_names.push(san);
    }
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.not_before = now - Duration::from_secs(300);
    // A certificate must not outlive the CA that vouches for it.
    let not_after = (now + validity).min(ca.not_after);
    params.not_after = not_after;
    let cert = params.signed_by(&key, &ca.issuer)?;
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let signing_key = provider.key_provider.load_private_key(key_der)?;
    let chain = vec![cert.der().clone(), ca.der.clone()];
    Ok((CertifiedKey::new(chain, signing_key), not_after))
}

fn bundle_of(state: &State) -> String {
    let mut out = String::new();
    for ca in state
        .pending
        .iter()
        .chain(std::iter::once(&state.signing))
        .chain(state.retired.iter())
    {
        out.push_str(&ca.pem);
    }
    out
}

impl CertManager {
    /// A fresh CA and serving certificate, valid from `now`.
    pub fn new(settings: TlsSettings) -> Result<Arc<Self>, TlsError> {
        Self::new_at(settings, OffsetDateTime::now_utc())
    }

    /// As [`CertManager::new`], at a given time.
    pub fn new_at(settings: TlsSettings, now: OffsetDateTime) -> Result<Arc<Self>, TlsError> {
        if settings.cert_renew_before >= settings.cert_validity
            || settings.ca_renew_before >= settings.ca_validity
        {
            return Err(TlsError::Validity);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let signing = Ca::new(now, settings.ca_validity)?;
        let (key, cert_not_after) = issue(
            &signing,
            &settings.names,
            now,
            settings.cert_validity,
            &provider,
        )?;
        let state = State {
            signing,
            pending: None,
            retired: Vec::new(),
            cert_not_after,
        };
        let (bundle, _) = watch::channel(bundle_of(&state));
        Ok(Arc::new(Self {
            settings,
            provider,
            state: Mutex::new(state),
            resolver: Arc::new(CertResolver {
                current: RwLock::new(Arc::new(key)),
            }),
            bundle,
        }))
    }

    /// The CA bundle (PEM), as it is now.
    pub fn ca_bundle_pem(&self) -> String {
        self.bundle.borrow().clone()
    }

    /// The CA bundle as `caBundle` wants it: base64 of the PEM.
    pub fn ca_bundle_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.ca_bundle_pem())
    }

    /// Follows the CA bundle as it changes.
    pub fn watch_bundle(&self) -> watch::Receiver<String> {
        self.bundle.subscribe()
    }

    /// The resolver to serve with.
    pub fn resolver(&self) -> Arc<CertResolver> {
        self.resolver.clone()
    }

    /// A rustls server configuration (ring, HTTP/2 and HTTP/1.1) serving through the resolver,
    /// so rotations apply to every new handshake.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let mut config = rustls::ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(self.resolver.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// As [`CertManager::server_config`], also asking clients for a certificate issued by
    /// `client_ca`. A client may still connect without one (kubelet's probes of `/healthz` and
    /// Prometheus present none): the handshake of a client that presents a certificate that
    /// does not verify fails, and the handlers see who presented a verified one
    /// (`lien_serve::ClientCertificates`).
    pub fn server_config_with_client_ca(
        &self,
        client_ca: &ClientCa,
    ) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            client_ca.roots.clone(),
            self.provider.clone(),
        )
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsError::ClientCa(format!("cannot verify clients: {e}")))?;
        let mut config = rustls::ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_cert_resolver(self.resolver.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// When the current serving certificate expires.
    pub fn serving_not_after(&self) -> OffsetDateTime {
        self.state.lock().cert_not_after
    }

    /// Applies the rotation policy (see the module docs) at `now`.
    pub fn rotate(&self, now: OffsetDateTime) -> Result<Rotation, TlsError> {
        let s = &self.settings;
        let mut state = self.state.lock();
        let mut rotation = Rotation::default();
        let retired_before = state.retired.len();
        state.retired.retain(|ca| ca.not_after > now);
        rotation.bundle |= state.retired.len() != retired_before;
        if state.pending.is_none() && state.signing.not_after - now < s.ca_renew_before {
            state.pending = Some(Ca::new(now, s.ca_validity)?);
            rotation.bundle = true;
        }
        let promote = state
            .pending
            .as_ref()
            .is_some_and(|p| now - p.created >= s.ca_propagation);
        if promote {
            if let Some(next) = state.pending.take() {
                let old = std::mem::replace(&mut state.signing, next);
                state.retired.push(old);
                rotation.bundle = true;
            }
        }
        if promote || state.cert_not_after - now < s.cert_renew_before {
            let (key, not_after) = issue(
                &state.signing,
                &s.names,
                now,
                s.cert_validity,
                &self.provider,
            )?;
            *self.resolver.current.write() = Arc::new(key);
            state.cert_not_after = not_after;
            rotation.serving = true;
        }
        if rotation.bundle {
            let bundle = bundle_of(&state);
            self.bundle.send_replace(bundle);
        }
        Ok(rotation)
    }

    /// Rotates every `every` until `stop` turns true, logging failures (the current
    /// certificate keeps being served; the next tick tries again).
    pub fn spawn_rotation(
        self: &Arc<Self>,
        every: Duration,
        mut stop: watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stop.changed() => return,
                }
                match this.rotate(OffsetDateTime::now_utc()) {
                    Ok(r) if r != Rotation::default() => {
                        tracing::info!(
                            serving = r.serving,
                            bundle = r.bundle,
                            "rotated webhook certificates"
                        );
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "certificate rotation failed"),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> TlsSettings {
        TlsSettings::new(vec![
            "127.0.0.1".into(),
            "lien-webhook.lien-system.svc".into(),
        ])
    }

    fn leaf(m: &CertManager) -> Vec<u8> {
        m.resolver().current().cert[0].to_vec()
    }

    fn pems(bundle: &str) -> usize {
        bundle.matches("BEGIN CERTIFICATE").count()
    }

    #[test]
    fn serving_certificate_renews_before_expiry_only() {
        let t0 = OffsetDateTime::now_utc();
        let m = CertManager::new_at(settings(), t0).expect("manager");
        let first = leaf(&m);
        assert_eq!(m.rotate(t0 + 5 * DAY).expect("rotate"), Rotation::default());
        assert_eq!(leaf(&m), first);
        let r = m.rotate(t0 + 21 * DAY).expect("rotate");
        assert_eq!(
            r,
            Rotation {
                serving: true,
                bundle: false
            }
        );
        assert_ne!(leaf(&m), first);
        assert_eq!(pems(&m.ca_bundle_pem()), 1);
    }

    #[test]
    fn ca_rotation_overlaps_in_the_bundle() {
        let t0 = OffsetDateTime::now_utc();
        let m = CertManager::new_at(settings(), t0).expect("manager");
        let mut bundle = m.watch_bundle();
        let old_bundle = m.ca_bundle_pem();
        // 60 days before the CA expires a pending CA joins the bundle; it does not sign yet.
        let t1 = t0 + 306 * DAY;
        let r = m.rotate(t1).expect("rotate");
        assert!(r.bundle);
        assert!(bundle.has_changed().expect("open"));
        let both = bundle.borrow_and_update().clone();
        assert_eq!(pems(&both), 2);
        assert!(both.ends_with(&old_bundle), "the old CA stays");
        // After the propagation delay it signs, and the serving certificate follows.
        let before = leaf(&m);
        let r = m.rotate(t1 + Duration::from_secs(601)).expect("rotate");
        assert_eq!(
            r,
            Rotation {
                serving: true,
                bundle: true
            }
        );
        assert_ne!(leaf(&m), before);
        assert_eq!(pems(&m.ca_bundle_pem()), 2);
        // The old CA leaves the bundle when it expires.
        let r = m.rotate(t0 + 366 * DAY).expect("rotate");
        assert!(r.bundle);
        assert_eq!(pems(&m.ca_bundle_pem()), 1);
        assert!(!m.ca_bundle_pem().contains(old_bundle.trim()));
    }

    #[test]
    fn serving_certificate_never_outlives_its_ca() {
        let t0 = OffsetDateTime::now_utc();
        let mut s = settings();
        s.ca_validity = 20 * DAY;
        s.ca_renew_before = 5 * DAY;
        let m = CertManager::new_at(s, t0).expect("manager");
        assert!(m.serving_not_after() <= t0 + 20 * DAY);
    }

    #[test]
    fn nonsensical_lifetimes_are_refused() {
        let mut s = settings();
        s.cert_renew_before = s.cert_validity;
        assert!(matches!(CertManager::new(s), Err(TlsError::Validity)));
    }
}
