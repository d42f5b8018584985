//! Authentication: bearer tokens map to users, as kube-apiserver's static token file does.
//!
//! Who made a request matters twice: `userInfo` in admission reviews is what webhooks — Lien's
//! among them — audit and decide on, and authorization (`crate::authz`) decides on it.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

/// `authentication.k8s.io/v1` `UserInfo`, as it appears in an `AdmissionRequest`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UserInfo {
    pub username: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    pub groups: Vec<String>,
    /// Set by impersonation (`Impersonate-Extra-<key>`); token users carry none.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    pub fn new(username: &str, uid: &str, groups: &[&str]) -> Self {
        UserInfo {
            username: username.to_string(),
            uid: uid.to_string(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            extra: BTreeMap::new(),
        }
    }

    /// A service account as kube-apiserver names it, e.g. the garbage collector's
    /// `system:serviceaccount:kube-system:generic-garbage-collector`.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        UserInfo {
            username: format!("system:serviceaccount:{namespace}:{name}"),
            uid: String::new(),
            groups: vec![
                "system:serviceaccounts".to_string(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".to_string(),
            ],
            extra: BTreeMap::new(),
        }
    }

    pub fn garbage_collector() -> Self {
        Self::service_account("kube-system", "generic-garbage-collector")
    }

    pub fn namespace_controller() -> Self {
        Self::service_account("kube-system", "namespace-controller")
    }
}

/// Bearer token → user.
#[derive(Debug, Clone, Default)]
pub struct Authenticator {
    tokens: HashMap<String, UserInfo>,
}

impl Authenticator {
    pub fn add_token(&mut self, token: impl Into<String>, user: UserInfo) {
        self.tokens.insert(token.into(), user);
    }

    /// The user behind an `Authorization` header value, if it carries a known bearer token.
    pub fn authenticate(&self, authorization: Option<&str>) -> Option<&UserInfo> {
        let token = authorization?.strip_prefix("Bearer ")?.trim();
        self.tokens.get(token)
    }
}
