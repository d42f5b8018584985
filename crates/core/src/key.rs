//! Object identity.
//!
//! An [`ObjectKey`] names one Kubernetes object by API group, kind, namespace and name. It carries
//! **no version**: a CRD served at `v1beta1` and `v1` is one object, and a relation recorded while
//! the storage version was `v1beta1` must still protect the object after the CRD moves to `v1`.
//! The object's UID is not part of the key either: relations carry the UIDs they observed, and the
//! decision (`crate::decision`) compares them, so a recreated object with the same name is a new
//! object for deletion purposes but the same key for lookups.
//!
//! [`KeyRef`] is the borrowed form the index hands out without allocating.

use std::fmt::{self, Write as _};

use serde::{Deserialize, Serialize};

/// The identity of one Kubernetes object, independent of API version.
///
/// `group` is empty for the core API group (`v1` Pods, ConfigMaps…). `namespace` is `None` for
/// cluster-scoped objects.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ObjectKey {
    /// API group, without version; `""` for the core group.
    pub group: String,
    /// Kind, e.g. `CephBlockPool`.
    pub kind: String,
    /// Namespace, `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

/// Why an `apiVersion`/`kind`/name triple does not make an [`ObjectKey`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// `apiVersion` was empty, or had an empty group or version around its `/`.
    #[error("invalid apiVersion {0:?}: expected \"version\" or \"group/version\"")]
    ApiVersion(String),
    /// `kind` was empty.
    #[error("kind must not be empty")]
    EmptyKind,
    /// `metadata.name` was empty.
    #[error("name must not be empty")]
    EmptyName,
    /// A namespace was given but empty (use `None` for cluster-scoped objects).
    #[error("namespace must be absent or non-empty")]
    EmptyNamespace,
}

/// An object as `kubectl` takes it on its command line: `configmap/settings -n team-a`,
/// `cluster.eks.example.io/my-cluster` — the kind lower-cased, `.group` unless it is the core
/// group, the name, and ` -n NAMESPACE` for a namespaced object unless left out
/// ([`ObjectKey::kubectl_type_name`]). Written without allocating: refusals render it.
#[derive(Debug, Clone, Copy)]
pub struct KubectlArg<'a> {
    key: &'a ObjectKey,
    namespace: bool,
}

impl fmt::Display for KubectlArg<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.key.kind.chars().flat_map(char::to_lowercase) {
            f.write_char(c)?;
        }
        if !self.key.group.is_empty() {
            write!(f, ".{}", self.key.group)?;
        }
        write!(f, "/{}", self.key.name)?;
        match (&self.key.namespace, self.namespace) {
            (Some(ns), true) => write!(f, " -n {ns}"),
            _ => Ok(()),
        }
    }
}

impl ObjectKey {
    /// The object as `kubectl` takes it, namespace included: `configmap/settings -n team-a`.
    pub fn kubectl_arg(&self) -> KubectlArg<'_> {
        KubectlArg {
            key: self,
            namespace: true,
        }
    }

    /// `TYPE/NAME` as `kubectl` takes it, without the namespace: `deployment.apps/web` (for a
    /// command naming several objects of one namespace, or the namespace said elsewhere).
    pub fn kubectl_type_name(&self) -> KubectlArg<'_> {
        KubectlArg {
            key: self,
            namespace: false,
        }
    }

    /// A key from its parts, with no validation (see [`ObjectKey::parse`] for that).
    pub fn new(
        group: impl Into<String>,
        kind: impl Into<String>,
        namespace: Option<&str>,
        name: impl Into<String>,
    ) -> Self {
        Self {
            group: group.into(),
            kind: kind.into(),
            namespace: namespace.map(str::to_owned),
            name: name.into(),
        }
    }

    /// A key from what an object (or a reference to one) carries: `apiVersion` (`v1` or
    /// `group/version`), `kind`, namespace and name. The version is dropped on purpose.
    ///
    /// An empty namespace string is an error rather than "cluster-scoped": the callers see
    /// `metadata.namespace` as an `Option`, and an empty one means a bug upstream.
    pub fn parse(
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Self, KeyError> {
        let group = match api_version.split_once('/') {
            None if !api_version.is_empty() => "",
            Some((group, version)) if !group.is_empty() && !version.is_empty() => group,
            _ => return Err(KeyError::ApiVersion(api_version.to_owned())),
        };
        if kind.is_empty() {
            return Err(KeyError::EmptyKind);
        }
        if name.is_empty() {
            return Err(KeyError::EmptyName);
        }
        if namespace.is_some_and(str::is_empty) {
            return Err(KeyError::EmptyNamespace);
        }
        Ok(Self::new(group, kind, namespace, name))
    }

    /// The borrowed view of this key.
    pub fn as_key_ref(&self) -> KeyRef<'_> {
        KeyRef {
            group: &self.group,
            kind: &self.kind,
            namespace: self.namespace.as_deref(),
            name: &self.name,
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_key_ref().fmt(f)
    }
}

/// A borrowed [`ObjectKey`], as the index stores keys interned and hands out views of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyRef<'a> {
    /// API group, `""` for the core group.
    pub group: &'a str,
    /// Kind.
    pub kind: &'a str,
    /// Namespace, `None` for cluster-scoped objects.
    pub namespace: Option<&'a str>,
    /// Name.
    pub name: &'a str,
}

impl KeyRef<'_> {
    /// An owned copy.
    pub fn to_key(&self) -> ObjectKey {
        ObjectKey::new(self.group, self.kind, self.namespace, self.name)
    }
}

impl PartialEq<ObjectKey> for KeyRef<'_> {
    fn eq(&self, other: &ObjectKey) -> bool {
        *self == other.as_key_ref()
    }
}

/// `ceph.rook.io/CephBlockPool team-a/pool-1`, `eks.example.io/Cluster my-cluster`, and for the
/// core group just `Pod team-a/web-0`: the form `kubectl` users recognise, without a version.
impl fmt::Display for KeyRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.group.is_empty() {
            write!(f, "{}/", self.group)?;
        }
        write!(f, "{} ", self.kind)?;
        if let Some(ns) = self.namespace {
            write!(f, "{ns}/")?;
        }
        f.write_str(self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_takes_the_kind_lower_cased_with_its_group_and_the_namespace_as_a_flag() {
        let cm = ObjectKey::new("", "ConfigMap", Some("team-a"), "settings");
        assert_eq!(cm.kubectl_arg().to_string(), "configmap/settings -n team-a");
        assert_eq!(cm.kubectl_type_name().to_string(), "configmap/settings");
        let cluster = ObjectKey::new("eks.example.io", "Cluster", None, "my-cluster");
        assert_eq!(
            cluster.kubectl_arg().to_string(),
            "cluster.eks.example.io/my-cluster"
        );
    }

    #[test]
    fn parse_drops_the_version() {
        let v1 = ObjectKey::parse("ceph.rook.io/v1", "CephBlockPool", Some("team-a"), "pool-1");
        let v2 = ObjectKey::parse("ceph.rook.io/v2", "CephBlockPool", Some("team-a"), "pool-1");
        assert_eq!(v1, v2);
        assert_eq!(
            v1.map(|k| k.to_string()).as_deref(),
            Ok("ceph.rook.io/CephBlockPool team-a/pool-1")
        );
    }

    #[test]
    fn parse_core_group_and_cluster_scope() {
        let pod = ObjectKey::parse("v1", "Pod", Some("team-a"), "web-0").expect("valid");
        assert_eq!(pod.group, "");
        assert_eq!(pod.to_string(), "Pod team-a/web-0");
        let cluster =
            ObjectKey::parse("eks.example.io/v1", "Cluster", None, "my-cluster").expect("valid");
        assert_eq!(cluster.to_string(), "eks.example.io/Cluster my-cluster");
    }

    #[test]
    fn parse_rejects_malformed_input() {
        for bad in ["", "/v1", "apps/", "/"] {
            assert_eq!(
                ObjectKey::parse(bad, "Kind", None, "n"),
                Err(KeyError::ApiVersion(bad.to_owned())),
                "{bad:?}"
            );
        }
        assert_eq!(
            ObjectKey::parse("v1", "", None, "n"),
            Err(KeyError::EmptyKind)
        );
        assert_eq!(
            ObjectKey::parse("v1", "Pod", None, ""),
            Err(KeyError::EmptyName)
        );
        assert_eq!(
            ObjectKey::parse("v1", "Pod", Some(""), "n"),
            Err(KeyError::EmptyNamespace)
        );
    }

    #[test]
    fn key_ref_round_trips_and_compares() {
        let key = ObjectKey::new("apps", "Deployment", Some("ns"), "web");
        let r = key.as_key_ref();
        assert_eq!(r, key);
        assert_eq!(r.to_key(), key);
        assert_eq!(r.to_string(), "apps/Deployment ns/web");
    }
}

/// An API group and kind, without the version (Lien keys objects by group and kind, like
/// [`ObjectKey`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKind {
    /// API group, `""` for the core group.
    pub group: String,
    /// Kind.
    pub kind: String,
}

impl GroupKind {
    /// A group and kind.
    pub fn new(group: impl Into<String>, kind: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            kind: kind.into(),
        }
    }

    /// The group of `apiVersion` (`v1` → `""`, `apps/v1` → `apps`) with `kind`.
    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        let group = api_version.split_once('/').map_or("", |(g, _)| g);
        Self::new(group, kind)
    }

    /// The key of the object `namespace/name` of this kind.
    pub fn key(&self, namespace: Option<&str>, name: &str) -> ObjectKey {
        ObjectKey::new(&self.group, &self.kind, namespace, name)
    }

    /// Whether `key` is an object of this kind.
    pub fn matches(&self, key: &ObjectKey) -> bool {
        self.group == key.group && self.kind == key.kind
    }
}

/// `Kind.group` (`Deployment.apps`), or the kind alone for the core group.
impl fmt::Display for GroupKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.kind)
        } else {
            write!(f, "{}.{}", self.kind, self.group)
        }
    }
}
