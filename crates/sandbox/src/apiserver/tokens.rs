//! Service account tokens, as kube-apiserver's TokenRequest issues them: ES256 JWTs signed by a
//! key of this API server, with the `kubernetes.io` private claims naming the ServiceAccount
//! (k/k `pkg/serviceaccount/claims.go`). ring (already under rustls) signs and verifies; the
//! JWT framing is three base64url parts.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair,
    UnparsedPublicKey,
};
use serde::{Deserialize, Serialize};

/// kube-apiserver's default issuer and audience (`--service-account-issuer`,
/// `--api-audiences`) on a cluster named `cluster.local`.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ServiceAccountRef {
    pub name: String,
    pub uid: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KubernetesClaims {
    pub namespace: String,
    pub serviceaccount: ServiceAccountRef,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Claims {
    pub aud: Vec<String>,
    pub exp: i64,
    pub iat: i64,
    pub nbf: i64,
    pub iss: String,
    pub jti: String,
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaims,
    pub sub: String,
}

pub struct TokenSigner {
    key: EcdsaKeyPair,
    rng: SystemRandom,
}

impl std::fmt::Debug for TokenSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSigner").finish_non_exhaustive()
    }
}

impl TokenSigner {
    /// A fresh key per API server: tokens of another sandbox do not authenticate here.
    pub fn generate() -> Result<Self, String> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| "unable to generate the service account signing key".to_string())?;
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .map_err(|_| "unable to load the service account signing key".to_string())?;
        Ok(TokenSigner { key, rng })
    }

    pub fn sign(&self, claims: &Claims) -> Result<String, String> {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"ES256","typ":"JWT"}"#);
        let payload = serde_json::to_vec(claims).map_err(|e| e.to_string())?;
        let signing_input = format!("{header}.{}", URL_SAFE_NO_PAD.encode(payload));
        let signature = self
            .key
            .sign(&self.rng, signing_input.as_bytes())
            .map_err(|_| "unable to sign the token".to_string())?;
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature.as_ref())
        ))
    }

    /// The claims of a token this signer signed that is valid at `now` (Unix seconds) for the
    /// API server's audience; `None` otherwise.
    pub fn verify(&self, token: &str, now: i64) -> Option<Claims> {
        let (signing_input, signature) = token.rsplit_once('.')?;
        let (header, payload) = signing_input.split_once('.')?;
        let header: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).ok()?).ok()?;
        if header["alg"] != "ES256" {
            return None;
        }
        let signature = URL_SAFE_NO_PAD.decode(signature).ok()?;
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, self.key.public_key().as_ref())
            .verify(signing_input.as_bytes(), &signature)
            .ok()?;
        let claims: Claims = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
        let valid = claims.iss == ISSUER
            && claims.nbf <= now
            && now < claims.exp
            && claims.aud.iter().any(|a| a == ISSUER);
        valid.then_some(claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(exp: i64) -> Claims {
        Claims {
            aud: vec![ISSUER.into()],
            exp,
            iat: 100,
            nbf: 100,
            iss: ISSUER.into(),
            jti: "j".into(),
            kubernetes: KubernetesClaims {
                namespace: "ns".into(),
                serviceaccount: ServiceAccountRef {
                    name: "sa".into(),
                    uid: "u".into(),
                },
            },
            sub: "system:serviceaccount:ns:sa".into(),
        }
    }

    #[test]
    fn tokens_verify_only_with_their_key_and_until_they_expire() {
        let signer = TokenSigner::generate().expect("key");
        let token = signer.sign(&claims(1000)).expect("signed");
        assert_eq!(signer.verify(&token, 500), Some(claims(1000)));
        assert_eq!(signer.verify(&token, 1000), None, "expired");
        assert_eq!(signer.verify(&token, 50), None, "not yet valid");
        let other = TokenSigner::generate().expect("key");
        assert_eq!(other.verify(&token, 500), None, "another key");
        let mut tampered = token.clone();
        tampered.insert(token.find('.').expect("dot") + 2, 'x');
        assert_eq!(signer.verify(&tampered, 500), None);
    }
}
