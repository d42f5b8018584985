//! How a webhook's serving certificate is trusted: as Go's `crypto/x509` `Certificate.Verify`
//! trusts it for kube-apiserver, not stricter.
//!
//! The one place webpki (which rustls uses) is stricter: a serving certificate that is itself in
//! `caBundle`. Go trusts such a certificate directly (its chain is the certificate alone, see
//! `Verify` in Go's `crypto/x509/verify.go`) even when it is a CA (`CA:TRUE`, what
//! `openssl req -x509` makes by default); webpki refuses a CA as end entity. For that case this
//! verifier runs Go's remaining checks itself — validity period, host name, extended key usage
//! — and leaves every other certificate to webpki.

use std::sync::Arc;
use std::time::Duration;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error, SignatureScheme};

#[derive(Debug)]
pub struct BundleVerifier {
    /// webpki over the bundle; `None` for an empty bundle, which trusts nothing.
    webpki: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
    bundle: Vec<CertificateDer<'static>>,
}

impl BundleVerifier {
    pub fn new(
        bundle: Vec<CertificateDer<'static>>,
        provider: Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<Self, String> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in &bundle {
            roots
                .add(cert.clone())
                .map_err(|e| format!("unable to load root certificates: {e}"))?;
        }
        let webpki = if roots.is_empty() {
            None
        } else {
            Some(
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| format!("unable to load root certificates: {e}"))?,
            )
        };
        Ok(BundleVerifier {
            webpki,
            provider,
            bundle,
        })
    }
}

fn is_ca_used_as_end_entity(error: &Error) -> bool {
    match error {
        Error::InvalidCertificate(CertificateError::Other(other)) => {
            other.0.downcast_ref::<webpki::Error>() == Some(&webpki::Error::CaUsedAsEndEntity)
        }
        _ => false,
    }
}

impl BundleVerifier {
    /// Whether a certificate of the bundle issued `der` (by name and signature).
    fn signed_by_bundle(&self, der: &CertificateDer<'_>) -> bool {
        let Ok((_, leaf)) = x509_parser::parse_x509_certificate(der) else {
            return false;
        };
        self.bundle.iter().any(|ca| {
            x509_parser::parse_x509_certificate(ca).is_ok_and(|(_, ca)| {
                ca.subject() == leaf.issuer()
                    && leaf.verify_signature(Some(ca.public_key())).is_ok()
            })
        })
    }
}

/// Go's checks of a certificate trusted because it is a root itself.
fn verify_trusted_leaf(
    der: &CertificateDer<'_>,
    server_name: &ServerName<'_>,
    now: UnixTime,
) -> Result<(), Error> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|_| Error::InvalidCertificate(CertificateError::BadEncoding))?;
    let validity = cert.validity();
    let now_secs = now.as_secs() as i64;
    let (not_before, not_after) = (
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
    );
    let unix = |secs: i64| UnixTime::since_unix_epoch(Duration::from_secs(secs.max(0) as u64));
    if now_secs < not_before {
        return Err(Error::InvalidCertificate(
            CertificateError::NotValidYetContext {
                time: now,
                not_before: unix(not_before),
            },
        ));
    }
    if now_secs > not_after {
        return Err(Error::InvalidCertificate(
            CertificateError::ExpiredContext {
                time: now,
                not_after: unix(not_after),
            },
        ));
    }
    // Go's default for a TLS client: the chain must allow server authentication, if the
    // certificate restricts its extended key usage at all.
    if let Ok(Some(eku)) = cert.extended_key_usage() {
        if !eku.value.any && !eku.value.server_auth {
            return Err(Error::InvalidCertificate(CertificateError::InvalidPurpose));
        }
    }
    let end_entity = webpki::EndEntityCert::try_from(der)
        .map_err(|_| Error::InvalidCertificate(CertificateError::BadEncoding))?;
    end_entity
        .verify_is_valid_for_subject_name(server_name)
        .map_err(|e| match e {
            webpki::Error::CertNotValidForName(cx) => {
                Error::InvalidCertificate(CertificateError::NotValidForNameContext {
                    expected: cx.expected,
                    presented: cx.presented,
                })
            }
            _ => Error::InvalidCertificate(CertificateError::NotValidForName),
        })
}

impl ServerCertVerifier for BundleVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        if self
            .bundle
            .iter()
            .any(|c| c.as_ref() == end_entity.as_ref())
        {
            verify_trusted_leaf(end_entity, server_name, now)?;
            return Ok(ServerCertVerified::assertion());
        }
        let Some(webpki) = &self.webpki else {
            return Err(Error::InvalidCertificate(CertificateError::UnknownIssuer));
        };
        match webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(e) if is_ca_used_as_end_entity(&e) => {
                // Go does not mind a CA as leaf: it is trusted when a bundled CA signed it, and
                // otherwise (e.g. self-signed, not bundled) unknown.
                if self.signed_by_bundle(end_entity) {
                    verify_trusted_leaf(end_entity, server_name, now)?;
                    Ok(ServerCertVerified::assertion())
                } else {
                    Err(Error::InvalidCertificate(CertificateError::UnknownIssuer))
                }
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
