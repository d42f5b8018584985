//! A private certificate authority and the TLS configurations made from it: the sandbox's
//! serving certificate (trusted through the kubeconfig's `certificate-authority-data`), and
//! certificates for test webhooks.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("generating a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("building the TLS configuration: {0}")]
    Config(#[from] rustls::Error),
    #[error("binding a TLS listener: {0}")]
    Io(String),
}

/// A CA that lives as long as the process.
pub struct CertificateAuthority {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
}

impl std::fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority")
            .finish_non_exhaustive()
    }
}

/// A certificate and its key, PEM and DER.
#[derive(Debug, Clone)]
pub struct IssuedCertificate {
    pub cert_pem: String,
    pub key_pem: String,
    pub cert_der: CertificateDer<'static>,
    pub key_der: Vec<u8>,
}

impl IssuedCertificate {
    /// A rustls server configuration offering HTTP/2 and HTTP/1.1.
    pub fn server_config(
        &self,
        ca: &CertificateAuthority,
    ) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let chain = vec![self.cert_der.clone(), ca.cert_der()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()));
        server_config(chain, key)
    }
}

/// A rustls server configuration for a certificate chain and its key, offering HTTP/2 and
/// HTTP/1.1.
pub fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

impl CertificateAuthority {
    pub fn new(common_name: &str) -> Result<Self, TlsError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        let cert = params.self_signed(&key)?;
        Ok(CertificateAuthority {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    pub fn cert_der(&self) -> CertificateDer<'static> {
        rustls_pemfile::certs(&mut self.cert_pem.as_bytes())
            .next()
            .and_then(Result::ok)
            .unwrap_or_else(|| CertificateDer::from(Vec::new()))
    }

    /// Issues a client certificate (extended key usage `clientAuth`) for `common_name`.
    pub fn issue_client(&self, common_name: &str) -> Result<IssuedCertificate, TlsError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(key, &params)
    }

    /// Issues a serving certificate for DNS names and IP addresses.
    pub fn issue(&self, names: &[&str]) -> Result<IssuedCertificate, TlsError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        let mut dn = DistinguishedName::new();
        dn.push(
            DnType::CommonName,
            names.first().copied().unwrap_or("localhost"),
        );
        params.distinguished_name = dn;
        for name in names {
            let san = match name.parse::<std::net::IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName((*name).try_into()?),
            };
            params.subject_alt_names.push(san);
        }
        self.sign(key, &params)
    }

    /// Signs `params` for `key` with this CA.
    fn sign(
        &self,
        key: KeyPair,
        params: &CertificateParams,
    ) -> Result<IssuedCertificate, TlsError> {
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(IssuedCertificate {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().clone(),
            key_der: key.serialize_der(),
        })
    }
}
