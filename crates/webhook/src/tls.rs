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
//! [`CaSet::rotate`] is the CA policy, driven by an explicit `now` so tests can move time:
//! create a pending CA when the signing CA has less than `ca_renew_before` left; promote it to
//! signing once it has been in the bundle for `ca_propagation` (long enough for the bundle to
//! reach the API servers); drop expired retired CAs. [`CertManager::adopt`] is the serving
//! side: serve a certificate from the set's signing CA, renewed when less than
//! `cert_renew_before` is left.
//!
//! # Several replicas
//!
//! Every replica sits behind the same Service and the configuration has one `caBundle`, so
//! every replica must serve a certificate that bundle trusts. The [`CaSet`] (certificates and
//! keys) is therefore shared — `lien run` keeps it in a Secret (`lien::webhook_ca`) — and each
//! replica issues its own serving certificate from the set's signing CA. Only the leader runs
//! [`CaSet::rotate`] and writes the result (guarded by resourceVersion); every replica re-reads
//! the Secret and [`CertManager::adopt`]s what it finds. That is safe whatever the lag between
//! replicas: a pending CA is in the bundle `ca_propagation` before anyone signs with it, and a
//! replica still serving from the previous signing CA stays trusted because that CA stays in
//! the bundle (retired) until it expires, and no serving certificate outlives its CA.
//! [`CertManager::rotate`] is both steps in one process (`lien sandbox`, tests).

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use base64::Engine;
use parking_lot::Mutex;
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
    /// The stored CA set (the Secret) cannot be used.
    #[error("the stored webhook CA set {0}")]
    Stored(String),
    /// The client CA bundle (`--client-ca-file`) holds no usable certificate.
    #[error("the client CA bundle {0}")]
    ClientCa(String),
    /// A certificate issued elsewhere (`--tls-cert-file`, `--tls-key-file`, `--tls-ca-file`)
    /// cannot be served.
    #[error("the issued serving certificate {0}")]
    Issued(String),
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
    /// Renewal must start before expiry.
    fn check(&self) -> Result<(), TlsError> {
        if self.cert_renew_before >= self.cert_validity || self.ca_renew_before >= self.ca_validity
        {
            return Err(TlsError::Validity);
        }
        Ok(())
    }

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
    key_pem: String,
    der: CertificateDer<'static>,
    created: OffsetDateTime,
    not_after: OffsetDateTime,
}

/// One CA as stored: certificate and private key (PEM) with its lifetimes (unix seconds), so a
/// replica that did not create it can sign with it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredCa {
    /// The CA certificate (PEM).
    pub cert_pem: String,
    /// Its private key (PKCS#8 PEM).
    pub key_pem: String,
    /// When it was created (unix seconds): also in its common name.
    pub created: i64,
    /// When it expires (unix seconds).
    pub not_after: i64,
}

/// The CAs the webhook's `caBundle` holds: the signing one, optionally a pending one (in the
/// bundle, not signing yet) and retired ones (in the bundle until they expire). Shared by
/// every replica; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaSet {
    /// Signs the serving certificates.
    pub signing: StoredCa,
    /// Created ahead of the signing one's expiry; signs once it has propagated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<StoredCa>,
    /// Former signing CAs, kept while serving certificates they signed may be served.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retired: Vec<StoredCa>,
}

fn unix(t: OffsetDateTime) -> i64 {
    t.unix_timestamp()
}

fn at(secs: i64) -> Result<OffsetDateTime, TlsError> {
    OffsetDateTime::from_unix_timestamp(secs).map_err(|_| TlsError::Validity)
}

impl CaSet {
    /// A set with one fresh signing CA, valid from `now`.
    pub fn generate(settings: &TlsSettings, now: OffsetDateTime) -> Result<Self, TlsError> {
        settings.check()?;
        Ok(Self {
            signing: Ca::new(now, settings.ca_validity)?.stored(),
            pending: None,
            retired: Vec::new(),
        })
    }

    /// The CA policy at `now` (the leader's job): drop expired retired CAs, start a pending CA
    /// `ca_renew_before` ahead of the signing one's expiry, promote it after `ca_propagation`.
    /// Returns whether the set changed (then it must be stored and adopted).
    pub fn rotate(
        &mut self,
        settings: &TlsSettings,
        now: OffsetDateTime,
    ) -> Result<bool, TlsError> {
        let mut changed = false;
        let retired_before = self.retired.len();
        self.retired.retain(|ca| ca.not_after > unix(now));
        changed |= self.retired.len() != retired_before;
        let signing_left = at(self.signing.not_after)? - now;
        if self.pending.is_none() && signing_left < settings.ca_renew_before {
            self.pending = Some(Ca::new(now, settings.ca_validity)?.stored());
            changed = true;
        }
        let promote = match &self.pending {
            Some(p) => now - at(p.created)? >= settings.ca_propagation,
            None => false,
        };
        if promote {
            if let Some(next) = self.pending.take() {
                let old = std::mem::replace(&mut self.signing, next);
                self.retired.push(old);
                changed = true;
            }
        }
        Ok(changed)
    }

    /// The CA bundle (PEM), newest first: pending, signing, retired.
    pub fn bundle_pem(&self) -> String {
        let mut out = String::new();
        for ca in self
            .pending
            .iter()
            .chain(std::iter::once(&self.signing))
            .chain(self.retired.iter())
        {
            out.push_str(&ca.cert_pem);
        }
        out
    }

    /// As stored (JSON).
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// From [`CaSet::to_json`]'s output, checking that the signing CA can sign.
    pub fn from_json(bytes: &[u8]) -> Result<Self, TlsError> {
        let set: CaSet = serde_json::from_slice(bytes)
            .map_err(|e| TlsError::Stored(format!("is not a CA set: {e}")))?;
        Ca::load(&set.signing)?;
        Ok(set)
    }
}

fn ca_params(
    created: OffsetDateTime,
    not_after: OffsetDateTime,
) -> Result<CertificateParams, TlsError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let mut dn = DistinguishedName::new();
    // The creation time in the name tells CAs apart in the bundle.
    dn.push(
        DnType::CommonName,
        format!("lien webhook CA {}", created.unix_timestamp()),
    );
    params.distinguished_name = dn;
    // Backdate a little: API servers' clocks differ from ours.
    params.not_before = created - Duration::from_secs(300);
    params.not_after = not_after;
    Ok(params)
}

impl Ca {
    fn new(now: OffsetDateTime, validity: Duration) -> Result<Self, TlsError> {
        let key = KeyPair::generate()?;
        let not_after = now + validity;
        let params = ca_params(now, not_after)?;
        let cert = params.self_signed(&key)?;
        Ok(Self {
            pem: cert.pem(),
            der: cert.der().clone(),
            key_pem: key.serialize_pem(),
            issuer: Issuer::new(params, key),
            created: now,
            not_after,
        })
    }

    fn stored(&self) -> StoredCa {
        StoredCa {
            cert_pem: self.pem.clone(),
            key_pem: self.key_pem.clone(),
            created: unix(self.created),
            not_after: unix(self.not_after),
        }
    }

    /// A stored CA, ready to sign. The issuer is rebuilt from the same parameters the CA was
    /// made with (its name derives from `created`), so what it signs chains to the stored
    /// certificate; the certificate itself is served as stored.
    fn load(stored: &StoredCa) -> Result<Self, TlsError> {
        use rustls::pki_types::pem::PemObject;
        let created = at(stored.created)?;
        let not_after = at(stored.not_after)?;
        let key = KeyPair::from_pem(&stored.key_pem)
            .map_err(|e| TlsError::Stored(format!("holds an unusable CA key: {e}")))?;
        let der = CertificateDer::from_pem_slice(stored.cert_pem.as_bytes())
            .map_err(|e| TlsError::Stored(format!("holds an unusable CA certificate: {e}")))?;
        let params = ca_params(created, not_after)?;
        // The stored key must be the certificate's: its SubjectPublicKeyInfo is in the
        // certificate verbatim.
        let spki = rcgen::PublicKeyData::subject_public_key_info(&key);
        if !der.windows(spki.len()).any(|w| w == spki.as_slice()) {
            return Err(TlsError::Stored(
                "holds a CA key that does not match its certificate".into(),
            ));
        }
        Ok(Self {
            pem: stored.cert_pem.clone(),
            der,
            key_pem: stored.key_pem.clone(),
            issuer: Issuer::new(params, key),
            created,
            not_after,
        })
    }
}

/// The serving certificate as rustls serves it, swappable while serving.
///
/// An [`ArcSwap`]: every TLS handshake reads it and a rotation replaces it whole, so a read is
/// an atomic load with no lock to contend on (a rotation never stalls a handshake).
#[derive(Debug)]
pub struct CertResolver {
    current: ArcSwap<CertifiedKey>,
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

impl CertResolver {
    /// The certificate currently served (leaf first).
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current.load_full()
    }
}

/// A CA bundle (PEM) as a webhook configuration's `caBundle` wants it: its base64.
pub fn ca_bundle_base64(pem: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(pem.as_bytes())
}

/// What the webhook serves TLS with, whoever issues its certificate (Lien's own CA,
/// [`CertManager`], or another issuer, [`IssuedCerts`]): the resolver every handshake reads, and
/// the CA bundle to publish as the configurations' `caBundle` as it changes.
#[derive(Debug, Clone)]
pub struct ServingTls {
    provider: Arc<CryptoProvider>,
    resolver: Arc<CertResolver>,
    bundle: watch::Receiver<String>,
}

impl ServingTls {
    /// A rustls server configuration (ring, HTTP/2 and HTTP/1.1) serving through the resolver,
    /// so renewals apply to every new handshake; with `client_ca`, also asking clients for a
    /// certificate it issued. A client may still connect without one (kubelet's probes of
    /// `/healthz` and Prometheus present none): the handshake of a client that presents a
    /// certificate that does not verify fails, and the handlers see who presented a verified
    /// one (`lien_serve::ClientCertificates`).
    pub fn server_config(
        &self,
        client_ca: Option<&ClientCa>,
    ) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        server_config(&self.provider, &self.resolver, client_ca)
    }

    /// The CA bundle as `caBundle` wants it: base64 of the PEM.
    pub fn ca_bundle_base64(&self) -> String {
        ca_bundle_base64(&self.bundle.borrow())
    }

    /// Follows the CA bundle (PEM) as it changes.
    pub fn watch_bundle(&self) -> watch::Receiver<String> {
        self.bundle.clone()
    }

    /// The certificate served now (leaf first).
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.resolver.current()
    }
}

struct State {
    /// The CAs as shared.
    set: CaSet,
    /// `set.signing`, loaded.
    signing: Ca,
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

impl CertManager {
    /// A fresh CA and serving certificate, valid from `now`.
    pub fn new(settings: TlsSettings) -> Result<Arc<Self>, TlsError> {
        Self::new_at(settings, OffsetDateTime::now_utc())
    }

    /// As [`CertManager::new`], at a given time.
    pub fn new_at(settings: TlsSettings, now: OffsetDateTime) -> Result<Arc<Self>, TlsError> {
        let set = CaSet::generate(&settings, now)?;
        Self::from_set(settings, set, now)
    }

    /// Serving from a shared CA set (read from where the replicas keep it): a serving
    /// certificate of this replica's own, issued by the set's signing CA.
    pub fn from_set(
        settings: TlsSettings,
        set: CaSet,
        now: OffsetDateTime,
    ) -> Result<Arc<Self>, TlsError> {
        settings.check()?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let signing = Ca::load(&set.signing)?;
        let (key, cert_not_after) = issue(
            &signing,
            &settings.names,
            now,
            settings.cert_validity,
            &provider,
        )?;
        let (bundle, _) = watch::channel(set.bundle_pem());
        Ok(Arc::new(Self {
            settings,
            provider,
            state: Mutex::new(State {
                set,
                signing,
                cert_not_after,
            }),
            resolver: Arc::new(CertResolver {
                current: ArcSwap::from_pointee(key),
            }),
            bundle,
        }))
    }

    /// The settings it was made with.
    pub fn settings(&self) -> &TlsSettings {
        &self.settings
    }

    /// The CA set it serves from.
    pub fn ca_set(&self) -> CaSet {
        self.state.lock().set.clone()
    }

    /// The CA bundle (PEM), as it is now.
    pub fn ca_bundle_pem(&self) -> String {
        self.bundle.borrow().clone()
    }

    /// The CA bundle as `caBundle` wants it: base64 of the PEM.
    pub fn ca_bundle_base64(&self) -> String {
        ca_bundle_base64(&self.ca_bundle_pem())
    }

    /// Follows the CA bundle as it changes.
    pub fn watch_bundle(&self) -> watch::Receiver<String> {
        self.bundle.subscribe()
    }

    /// The resolver to serve with.
    pub fn resolver(&self) -> Arc<CertResolver> {
        self.resolver.clone()
    }

    /// What the webhook serves with ([`ServingTls`]).
    pub fn serving(&self) -> ServingTls {
        ServingTls {
            provider: self.provider.clone(),
            resolver: self.resolver.clone(),
            bundle: self.bundle.subscribe(),
        }
    }

    /// A rustls server configuration (ring, HTTP/2 and HTTP/1.1) serving through the resolver,
    /// so rotations apply to every new handshake.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        server_config(&self.provider, &self.resolver, None)
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
        server_config(&self.provider, &self.resolver, Some(client_ca))
    }

    /// When the current serving certificate expires.
    pub fn serving_not_after(&self) -> OffsetDateTime {
        self.state.lock().cert_not_after
    }

    /// Serves from `set` (a replica's view of the shared set) at `now`: a new signing CA
    /// re-issues the serving certificate from it, a changed bundle is published, and the
    /// serving certificate is renewed when due.
    pub fn adopt(&self, set: CaSet, now: OffsetDateTime) -> Result<Rotation, TlsError> {
        let mut state = self.state.lock();
        let mut rotation = Rotation::default();
        let new_signer = set.signing != state.set.signing;
        if new_signer {
            // Load before changing anything: an unusable set leaves the current one serving.
            state.signing = Ca::load(&set.signing)?;
        }
        rotation.bundle = set.bundle_pem() != state.set.bundle_pem();
        state.set = set;
        if new_signer || state.cert_not_after - now < self.settings.cert_renew_before {
            let (key, not_after) = issue(
                &state.signing,
                &self.settings.names,
                now,
                self.settings.cert_validity,
                &self.provider,
            )?;
            self.resolver.current.store(Arc::new(key));
            state.cert_not_after = not_after;
            rotation.serving = true;
        }
        if rotation.bundle {
            self.bundle.send_replace(state.set.bundle_pem());
        }
        Ok(rotation)
    }

    /// The whole policy in one process, sole owner of its CA set (`lien sandbox`, tests):
    /// [`CaSet::rotate`], then [`CertManager::adopt`].
    pub fn rotate(&self, now: OffsetDateTime) -> Result<Rotation, TlsError> {
        let mut set = self.ca_set();
        set.rotate(&self.settings, now)?;
        self.adopt(set, now)
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

/// A rustls server configuration (ring, HTTP/2 and HTTP/1.1) serving through `resolver`, asking
/// clients for a certificate of `client_ca` if given (see
/// [`CertManager::server_config_with_client_ca`]).
fn server_config(
    provider: &Arc<CryptoProvider>,
    resolver: &Arc<CertResolver>,
    client_ca: Option<&ClientCa>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let mut config = match client_ca {
        Some(client_ca) => {
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                client_ca.roots.clone(),
                provider.clone(),
            )
            .allow_unauthenticated()
            .build()
            .map_err(|e| TlsError::ClientCa(format!("cannot verify clients: {e}")))?;
            builder
                .with_client_cert_verifier(verifier)
                .with_cert_resolver(resolver.clone())
        }
        None => builder
            .with_no_client_auth()
            .with_cert_resolver(resolver.clone()),
    };
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A serving certificate, its key and the CA bundle issued elsewhere — cert-manager's Secret
/// (`tls.crt`, `tls.key`, `ca.crt`) mounted as files — served as they are and replaced whole when
/// they change ([`IssuedCerts::load`]). Lien issues nothing then: the issuer renews, Lien follows,
/// and publishes the bundle into its webhook configurations as it does its own.
///
/// A set is taken only if it holds together — the key is the certificate's, and the
/// certificate verifies against the bundle for the webhook's name — since a bundle published
/// that does not vouch for the served certificate would make every call the API server sends
/// fail (closed): the set already served stays until a consistent one arrives.
pub struct IssuedCerts {
    name: String,
    provider: Arc<CryptoProvider>,
    resolver: Arc<CertResolver>,
    bundle: watch::Sender<String>,
    loaded: Mutex<(String, String, String)>,
}

impl std::fmt::Debug for IssuedCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedCerts")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

fn issued_key(
    provider: &CryptoProvider,
    name: &str,
    cert_pem: &str,
    key_pem: &str,
    bundle_pem: &str,
) -> Result<CertifiedKey, TlsError> {
    use rustls::client::danger::ServerCertVerifier;
    use rustls::pki_types::pem::PemObject;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Issued(format!("(--tls-cert-file) is not valid PEM: {e}")))?;
    let leaf = chain.first().cloned().ok_or_else(|| {
        TlsError::Issued(
            "(--tls-cert-file) holds no certificate (expected -----BEGIN CERTIFICATE-----)".into(),
        )
    })?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| {
        TlsError::Issued(format!(
            "key (--tls-key-file) is not a PEM private key: {e}"
        ))
    })?;
    let signing_key = provider.key_provider.load_private_key(key)?;
    let certified = CertifiedKey::new(chain.clone(), signing_key);
    certified
        .keys_match()
        .map_err(|e| TlsError::Issued(format!("and its key (--tls-key-file) do not match: {e}")))?;
    let roots = ClientCa::from_pem(bundle_pem)
        .map_err(|e| TlsError::Issued(format!("'s CA bundle (--tls-ca-file): {e}")))?
        .roots;
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        roots,
        Arc::new(provider.clone()),
    )
    .build()
    .map_err(|e| TlsError::Issued(format!("'s CA bundle (--tls-ca-file) cannot verify: {e}")))?;
    let server_name = rustls::pki_types::ServerName::try_from(name.to_owned())
        .map_err(|e| TlsError::Issued(format!("name {name:?}: {e}")))?;
    let now = rustls::pki_types::UnixTime::now();
    verifier
        .verify_server_cert(&leaf, &chain[1..], &server_name, &[], now)
        .map_err(|e| {
            TlsError::Issued(format!(
                "(--tls-cert-file) does not verify for {name} against the CA bundle (--tls-ca-file): {e}"
            ))
        })?;
    Ok(certified)
}

impl IssuedCerts {
    /// Serving `cert_pem` (the leaf first, then any intermediates) with `key_pem`, publishing
    /// `bundle_pem`; `name` is the webhook's (its Service's DNS name), which the certificate
    /// must be valid for.
    pub fn from_pem(
        name: &str,
        cert_pem: &str,
        key_pem: &str,
        bundle_pem: &str,
    ) -> Result<Arc<Self>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = issued_key(&provider, name, cert_pem, key_pem, bundle_pem)?;
        let (bundle, _) = watch::channel(bundle_pem.to_owned());
        Ok(Arc::new(Self {
            name: name.to_owned(),
            provider,
            resolver: Arc::new(CertResolver {
                current: ArcSwap::from_pointee(key),
            }),
            bundle,
            loaded: Mutex::new((
                cert_pem.to_owned(),
                key_pem.to_owned(),
                bundle_pem.to_owned(),
            )),
        }))
    }

    /// Takes a renewed set (the issuer rewrote the files): served from the next handshake on,
    /// the bundle published if it changed. Unchanged: nothing happens. One that does not hold
    /// together is refused, and the current set stays.
    pub fn load(
        &self,
        cert_pem: &str,
        key_pem: &str,
        bundle_pem: &str,
    ) -> Result<Rotation, TlsError> {
        let mut loaded = self.loaded.lock();
        let next = (
            cert_pem.to_owned(),
            key_pem.to_owned(),
            bundle_pem.to_owned(),
        );
        if *loaded == next {
            return Ok(Rotation::default());
        }
        let key = issued_key(&self.provider, &self.name, cert_pem, key_pem, bundle_pem)?;
        let rotation = Rotation {
            serving: loaded.0 != next.0 || loaded.1 != next.1,
            bundle: loaded.2 != next.2,
        };
        // A renewal under the same CA (what cert-manager does until the CA itself expires:
        // the chart's lives ten years) leaves the bundle as it is. A new CA changes both: the
        // bundle is published first, then the certificate served; until the configuration
        // carries the new bundle a call may fail verification (docs/operations.md,
        // "cert-manager").
        if rotation.bundle {
            self.bundle.send_replace(bundle_pem.to_owned());
        }
        self.resolver.current.store(Arc::new(key));
        *loaded = next;
        Ok(rotation)
    }

    /// What the webhook serves with ([`ServingTls`]).
    pub fn serving(&self) -> ServingTls {
        ServingTls {
            provider: self.provider.clone(),
            resolver: self.resolver.clone(),
            bundle: self.bundle.subscribe(),
        }
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
        // After the propagation delay it signs, and the serving certificate follows; the
        // bundle holds the same CAs (newest first), so there is nothing to publish.
        let before = leaf(&m);
        let r = m.rotate(t1 + Duration::from_secs(601)).expect("rotate");
        assert_eq!(
            r,
            Rotation {
                serving: true,
                bundle: false
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

    /// Whether `m`'s serving certificate verifies for `name` at `now` against `bundle`, as the
    /// API server checks it against `caBundle`.
    fn trusted(m: &CertManager, bundle: &str, name: &str, now: OffsetDateTime) -> bool {
        use rustls::client::danger::ServerCertVerifier;
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{ServerName, UnixTime};
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(bundle.as_bytes()) {
            roots.add(cert.expect("pem")).expect("root");
        }
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .expect("verifier");
        let served = m.resolver().current();
        let when = UnixTime::since_unix_epoch(Duration::from_secs(
            u64::try_from(now.unix_timestamp()).expect("after 1970"),
        ));
        verifier
            .verify_server_cert(
                &served.cert[0],
                &served.cert[1..],
                &ServerName::try_from(name.to_owned()).expect("name"),
                &[],
                when,
            )
            .is_ok()
    }

    const NAME: &str = "lien-webhook.lien-system.svc";

    #[test]
    fn replicas_sharing_a_ca_set_are_trusted_by_one_bundle() {
        let t0 = OffsetDateTime::now_utc();
        // The first replica creates the set; the second reads it as stored.
        let a = CertManager::new_at(settings(), t0).expect("a");
        let stored = a.ca_set().to_json();
        let b = CertManager::from_set(
            settings(),
            CaSet::from_json(&stored).expect("stored set"),
            t0,
        )
        .expect("b");
        assert_ne!(leaf(&a), leaf(&b), "each replica has its own serving key");
        assert_eq!(a.ca_bundle_pem(), b.ca_bundle_pem());
        // Whichever replica publishes its bundle, calls to either verify.
        for m in [&a, &b] {
            assert!(trusted(m, &a.ca_bundle_pem(), NAME, t0));
            assert!(trusted(m, &b.ca_bundle_pem(), NAME, t0));
        }
        // Two replicas each with a CA of its own (the bug): one of them is not trusted.
        let c = CertManager::new_at(settings(), t0).expect("c");
        assert!(!trusted(&c, &a.ca_bundle_pem(), NAME, t0));
    }

    #[test]
    fn a_replica_lagging_behind_the_leaders_rotation_stays_trusted() {
        let s = settings();
        let t0 = OffsetDateTime::now_utc();
        let leader = CertManager::new_at(s.clone(), t0).expect("leader");
        let follower = CertManager::from_set(s.clone(), leader.ca_set(), t0).expect("follower");
        // The leader starts a pending CA and publishes the bundle; the follower has not
        // re-read the set yet.
        let t1 = t0 + 306 * DAY;
        // Meanwhile the follower has renewed its serving certificate, from the old CA.
        let r = follower.adopt(follower.ca_set(), t1).expect("renew");
        assert!(r.serving && !r.bundle);
        let mut set = leader.ca_set();
        assert!(set.rotate(&s, t1).expect("rotate"), "a pending CA");
        leader.adopt(set.clone(), t1).expect("adopt");
        assert!(trusted(&follower, &leader.ca_bundle_pem(), NAME, t1));
        // The leader promotes it and re-issues; the follower, still behind, is still trusted.
        let t2 = t1 + Duration::from_secs(601);
        assert!(set.rotate(&s, t2).expect("rotate"), "promoted");
        let r = leader.adopt(set.clone(), t2).expect("adopt");
        assert!(r.serving);
        assert!(trusted(&follower, &leader.ca_bundle_pem(), NAME, t2));
        assert!(trusted(&leader, &leader.ca_bundle_pem(), NAME, t2));
        // The follower catches up: it serves from the new CA, as the leader does.
        let before = leaf(&follower);
        let r = follower
            .adopt(CaSet::from_json(&set.to_json()).expect("stored"), t2)
            .expect("adopt");
        assert!(r.serving && r.bundle);
        assert_ne!(leaf(&follower), before);
        assert_eq!(follower.ca_bundle_pem(), leader.ca_bundle_pem());
        // Adopting the same set again changes nothing.
        assert_eq!(
            follower.adopt(set.clone(), t2).expect("adopt"),
            Rotation::default()
        );
        // When the old CA expires it leaves the bundle; both replicas serve from the new one.
        let t3 = t0 + 366 * DAY;
        assert!(set.rotate(&s, t3).expect("rotate"), "retired CA dropped");
        assert!(set.retired.is_empty());
        for m in [&leader, &follower] {
            m.adopt(set.clone(), t3).expect("adopt");
            assert!(trusted(m, &set.bundle_pem(), NAME, t3));
        }
    }

    #[test]
    fn an_unusable_stored_set_is_refused_and_the_current_one_keeps_serving() {
        let t0 = OffsetDateTime::now_utc();
        let m = CertManager::new_at(settings(), t0).expect("manager");
        let err = CaSet::from_json(b"{}").expect_err("not a set");
        assert!(err.to_string().contains("is not a CA set"), "{err}");
        // A key from another CA.
        let mut set = m.ca_set();
        set.signing.key_pem = CaSet::generate(&settings(), t0)
            .expect("other")
            .signing
            .key_pem;
        let err = CaSet::from_json(&set.to_json()).expect_err("mismatched key");
        assert!(err.to_string().contains("does not match"), "{err}");
        let before = leaf(&m);
        assert!(m.adopt(set, t0).is_err());
        assert_eq!(leaf(&m), before);
        assert!(trusted(&m, &m.ca_bundle_pem(), NAME, t0));
    }

    /// A CA of its own, as an issuer outside Lien has (cert-manager's CA Issuer).
    struct OtherCa {
        pem: String,
        issuer: Issuer<'static, KeyPair>,
    }

    fn other_ca(name: &str) -> OtherCa {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).expect("CA");
        OtherCa {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A serving certificate for `name` from `ca`, and its key (what cert-manager writes to
    /// `tls.crt` and `tls.key`).
    fn issued_by(ca: &OtherCa, name: &str) -> (String, String) {
        let key = KeyPair::generate().expect("key");
        let params = CertificateParams::new(vec![name.to_owned()]).expect("params");
        let cert = params.signed_by(&key, &ca.issuer).expect("signed");
        (cert.pem(), key.serialize_pem())
    }

    const WEBHOOK: &str = "lien-webhook.lien-system.svc";

    #[test]
    fn an_issued_set_is_served_renewed_and_refused_when_it_does_not_hold_together() {
        let ca = other_ca("issuer");
        let (cert, key) = issued_by(&ca, WEBHOOK);
        let issued = IssuedCerts::from_pem(WEBHOOK, &cert, &key, &ca.pem).expect("served");
        let serving = issued.serving();
        let served = |_: &IssuedCerts| serving.current().cert[0].to_vec();
        let first = served(&issued);
        assert!(serving.ca_bundle_base64().len() > 100);
        let mut bundles = serving.watch_bundle();
        // The same files again: nothing changes.
        assert_eq!(
            issued.load(&cert, &key, &ca.pem).expect("same"),
            Rotation::default()
        );
        // Renewed under the same CA: a new certificate served, the bundle unchanged.
        let (renewed, renewed_key) = issued_by(&ca, WEBHOOK);
        let r = issued
            .load(&renewed, &renewed_key, &ca.pem)
            .expect("renewed");
        assert_eq!((r.serving, r.bundle), (true, false));
        assert_ne!(served(&issued), first);
        assert!(!bundles.has_changed().expect("open"));
        // Sets that do not hold together are refused, naming why; the renewed one stays.
        let now = served(&issued);
        let other = other_ca("another");
        let (foreign, foreign_key) = issued_by(&other, WEBHOOK);
        let e = issued
            .load(&foreign, &foreign_key, &ca.pem)
            .expect_err("another CA's");
        assert!(e.to_string().contains("does not verify"), "{e}");
        let e = issued
            .load(&renewed, &key, &ca.pem)
            .expect_err("another key");
        assert!(e.to_string().contains("do not match"), "{e}");
        let (wrong_name, wrong_key) = issued_by(&ca, "elsewhere.example.com");
        let e = issued
            .load(&wrong_name, &wrong_key, &ca.pem)
            .expect_err("another name");
        assert!(e.to_string().contains(WEBHOOK), "{e}");
        let e = issued
            .load("not PEM", &renewed_key, &ca.pem)
            .expect_err("no certificate");
        assert!(e.to_string().contains("--tls-cert-file"), "{e}");
        assert_eq!(served(&issued), now);
        // A new CA: its bundle published, its certificate served.
        let (moved, moved_key) = issued_by(&other, WEBHOOK);
        let r = issued
            .load(&moved, &moved_key, &other.pem)
            .expect("a new CA");
        assert_eq!((r.serving, r.bundle), (true, true));
        assert!(bundles.has_changed().expect("open"));
        assert_eq!(*bundles.borrow_and_update(), other.pem);
        // At start, an inconsistent set is an error, not a server.
        assert!(IssuedCerts::from_pem(WEBHOOK, &foreign, &foreign_key, &ca.pem).is_err());
    }
}
