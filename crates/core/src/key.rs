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

use std::cmp::Ordering;
use std::fmt::{self, Write as _};

use serde::{Deserialize, Serialize};

/// The identity of one Kubernetes object, independent of API version.
///
/// `group` is empty for the core API group (`v1` Pods, ConfigMaps…). `namespace` is `None` for
/// cluster-scoped objects.
///
/// Equality and order are those of the fields' text in declaration order, as derived ones
/// would be, written out so that no empty field is handed to `memcmp` (see [`text`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
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
/// Compared as [`ObjectKey`] is.
#[derive(Debug, Clone, Copy)]
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
    use std::hash::Hash as _;

    use proptest::prelude::*;

    use super::*;

    fn text() -> impl Strategy<Value = String> {
        // Empty strings (a core group) and strings that share prefixes or differ in length.
        prop_oneof![Just(String::new()), "[ab]{1,3}"]
    }

    fn key() -> impl Strategy<Value = ObjectKey> {
        (text(), text(), proptest::option::of(text()), text()).prop_map(|(g, k, ns, n)| ObjectKey {
            group: g,
            kind: k,
            namespace: ns,
            name: n,
        })
    }

    proptest! {
        /// Keys compare exactly as their fields' text does, field by field in declaration
        /// order (what a derived comparison did), owned, borrowed and as kinds.
        #[test]
        fn keys_compare_as_their_fields(a in key(), b in key()) {
            let (fa, fb) = (a.fields(), b.fields());
            prop_assert_eq!(a == b, fa == fb);
            prop_assert_eq!(a.cmp(&b), fa.cmp(&fb));
            prop_assert_eq!(a.partial_cmp(&b), Some(fa.cmp(&fb)));
            prop_assert_eq!(a.as_key_ref() == b.as_key_ref(), fa == fb);
            prop_assert_eq!(a.as_key_ref().cmp(&b.as_key_ref()), fa.cmp(&fb));
            let (ka, kb) = (GroupKind::new(&a.group, &a.kind), GroupKind::new(&b.group, &b.kind));
            prop_assert_eq!(ka == kb, (fa.0, fa.1) == (fb.0, fb.1));
            prop_assert_eq!(ka.cmp(&kb), (fa.0, fa.1).cmp(&(fb.0, fb.1)));
            prop_assert_eq!(ka.matches(&b), (fa.0, fa.1) == (fb.0, fb.1));
            let hash = |h: &dyn Fn(&mut std::hash::DefaultHasher)| {
                let mut state = std::hash::DefaultHasher::new();
                h(&mut state);
                std::hash::Hasher::finish(&state)
            };
            let (ha, hb) = (hash(&|s| a.hash(s)), hash(&|s| b.hash(s)));
            prop_assert_eq!(ha, hash(&|s| a.as_key_ref().hash(s)));
            if a == b {
                prop_assert_eq!(ha, hb);
            }
        }
    }

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
/// [`ObjectKey`]). Compared as [`ObjectKey`] is.
#[derive(Debug, Clone)]
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
        text::eq(&self.kind, &key.kind) && text::eq(&self.group, &key.group)
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

/// Equality and order of text that never call `memcmp` with an empty string. An empty
/// `String` (a core-group key's `group`) points at the dangling address `0x1`, and glibc's
/// AVX-512 `memcmp` (`__memcmp_evex_movbe`, 2.36, the one Debian 12 and distroless images
/// pick on such CPUs) loads from its pointers under a mask even for length 0: the fault the
/// mask suppresses costs ~130 ns per comparison on the AMD EPYC machines we measure on, against
/// ~1 ns for valid memory — half of a rule decision over 100 PersistentVolumes
/// (docs/benchmarks.md, "the rule decision's regression"). The results are exactly `str`'s.
mod text {
    use std::cmp::Ordering;

    pub(super) fn eq(a: &str, b: &str) -> bool {
        a.len() == b.len() && (a.is_empty() || a == b)
    }

    pub(super) fn cmp(a: &str, b: &str) -> Ordering {
        if a.is_empty() || b.is_empty() {
            // The empty string is before every other one.
            a.len().cmp(&b.len())
        } else {
            a.cmp(b)
        }
    }

    pub(super) fn eq_opt(a: Option<&str>, b: Option<&str>) -> bool {
        match (a, b) {
            (Some(a), Some(b)) => eq(a, b),
            (a, b) => a.is_none() && b.is_none(),
        }
    }

    /// `None` first, as `Option`'s order.
    pub(super) fn cmp_opt(a: Option<&str>, b: Option<&str>) -> Ordering {
        match (a, b) {
            (Some(a), Some(b)) => cmp(a, b),
            (a, b) => a.is_some().cmp(&b.is_some()),
        }
    }
}

/// A key's fields as text, in declaration order (a [`GroupKind`]'s namespace and name: none).
type Fields<'a> = (&'a str, &'a str, Option<&'a str>, &'a str);

impl ObjectKey {
    fn fields(&self) -> Fields<'_> {
        let ns = self.namespace.as_deref();
        (&self.group, &self.kind, ns, &self.name)
    }
}

impl KeyRef<'_> {
    fn fields(&self) -> Fields<'_> {
        (self.group, self.kind, self.namespace, self.name)
    }
}

impl GroupKind {
    fn fields(&self) -> Fields<'_> {
        (&self.group, &self.kind, None, "")
    }
}

/// Equality, order and hash of the text of keys' fields, as derived ones would be (field by field,
/// in declaration order) but through [`text`]; equality looks at the name first, the field
/// that tells keys of one kind apart.
macro_rules! ordered_by_fields {
    ($($ty:ty),+) => {$(
        impl PartialEq for $ty {
            fn eq(&self, other: &Self) -> bool {
                let (a, b) = (self.fields(), other.fields());
                text::eq(a.3, b.3) && text::eq_opt(a.2, b.2) && text::eq(a.1, b.1) && text::eq(a.0, b.0)
            }
        }

        impl Eq for $ty {}

        /// The fields' hash, in order: an [`ObjectKey`] and its [`KeyRef`] hash alike.
        impl std::hash::Hash for $ty {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                self.fields().hash(state);
            }
        }

        impl PartialOrd for $ty {
            fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
                Some(self.cmp(other))
            }
        }

        impl Ord for $ty {
            fn cmp(&self, other: &Self) -> Ordering {
                let (a, b) = (self.fields(), other.fields());
                text::cmp(a.0, b.0)
                    .then_with(|| text::cmp(a.1, b.1))
                    .then_with(|| text::cmp_opt(a.2, b.2))
                    .then_with(|| text::cmp(a.3, b.3))
            }
        }
    )+};
}

ordered_by_fields!(ObjectKey, KeyRef<'_>, GroupKind);
