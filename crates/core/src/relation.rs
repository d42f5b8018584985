//! Relations and where they come from.
//!
//! A [`Relation`] says "`of` is used by `by`" (or, with `by: None`, "`of` is protected for
//! `reason`"). Relations are never written to the API server: they are derived in memory from a
//! [`Source`] — a `Usage`, a `ClusterUsage`, or a `DependencyRule` — and each source contributes a
//! *set* of relations that the controller replaces as a whole whenever the source or the objects
//! its selectors match change (`RelationIndex::apply`).
//!
//! A relation records the UIDs it observed for both ends. The key (group, kind, namespace, name)
//! says which object is meant; the UID says *which incarnation* of it, so that a relation recorded
//! against an object that was since deleted and recreated under the same name does not block the
//! new one (see `crate::decision`).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::key::{KeyRef, ObjectKey};

/// What contributed a relation. Every relation belongs to exactly one source, and a source's
/// relations are replaced or removed together.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum Source {
    /// A namespaced `Usage`.
    Usage {
        /// The Usage's namespace.
        namespace: String,
        /// The Usage's name.
        name: String,
    },
    /// A cluster-scoped `ClusterUsage`.
    ClusterUsage {
        /// The ClusterUsage's name.
        name: String,
    },
    /// A cluster-scoped `DependencyRule`.
    #[serde(rename = "DependencyRule")]
    Rule {
        /// The rule's name.
        name: String,
    },
}

/// A source as `kubectl` takes it: Lien's kinds qualified with their group, so that another
/// product's `Usage` kind (Crossplane has one) is never the one acted on —
/// `usage.lien.dev/NAME -n NAMESPACE`, `clusterusage.lien.dev/NAME`,
/// `dependencyrule.lien.dev/NAME`.
#[derive(Debug, Clone, Copy)]
pub struct SourceKubectlArg<'a>(&'a Source);

impl fmt::Display for SourceKubectlArg<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Source::Usage { namespace, name } => write!(f, "usage.lien.dev/{name} -n {namespace}"),
            Source::ClusterUsage { name } => write!(f, "clusterusage.lien.dev/{name}"),
            Source::Rule { name } => write!(f, "dependencyrule.lien.dev/{name}"),
        }
    }
}

impl Source {
    /// The source as `kubectl` takes it ([`SourceKubectlArg`]).
    pub fn kubectl_arg(&self) -> SourceKubectlArg<'_> {
        SourceKubectlArg(self)
    }

    /// A `Usage` source.
    pub fn usage(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self::Usage {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// A `ClusterUsage` source.
    pub fn cluster_usage(name: impl Into<String>) -> Self {
        Self::ClusterUsage { name: name.into() }
    }

    /// A `DependencyRule` source.
    pub fn rule(name: impl Into<String>) -> Self {
        Self::Rule { name: name.into() }
    }

    /// The borrowed view.
    pub fn as_source_ref(&self) -> SourceRef<'_> {
        match self {
            Self::Usage { namespace, name } => SourceRef::Usage { namespace, name },
            Self::ClusterUsage { name } => SourceRef::ClusterUsage { name },
            Self::Rule { name } => SourceRef::Rule { name },
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_source_ref().fmt(f)
    }
}

/// A borrowed [`Source`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SourceRef<'a> {
    /// A namespaced `Usage`.
    Usage {
        /// Namespace.
        namespace: &'a str,
        /// Name.
        name: &'a str,
    },
    /// A `ClusterUsage`.
    ClusterUsage {
        /// Name.
        name: &'a str,
    },
    /// A `DependencyRule`.
    Rule {
        /// Name.
        name: &'a str,
    },
}

impl SourceRef<'_> {
    /// An owned copy.
    pub fn to_source(&self) -> Source {
        match *self {
            Self::Usage { namespace, name } => Source::usage(namespace, name),
            Self::ClusterUsage { name } => Source::cluster_usage(name),
            Self::Rule { name } => Source::rule(name),
        }
    }
}

/// `Usage team-a/release-uses-cluster`, `ClusterUsage protect-prod`,
/// `DependencyRule nfs-uses-pool`: the kind a person would `kubectl get`, then the name.
impl fmt::Display for SourceRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Usage { namespace, name } => write!(f, "Usage {namespace}/{name}"),
            Self::ClusterUsage { name } => write!(f, "ClusterUsage {name}"),
            Self::Rule { name } => write!(f, "DependencyRule {name}"),
        }
    }
}

/// "`of` is used by `by`", as contributed by `source`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Relation {
    /// The object in use (or protected).
    pub of: ObjectKey,
    /// The object using it; `None` for protection by reason only.
    pub by: Option<ObjectKey>,
    /// The source that contributed this relation.
    pub source: Source,
    /// Why, in words a person reading a denied `kubectl delete` understands. Required when `by`
    /// is `None`: a protection must say why.
    pub reason: Option<String>,
    /// Re-issue a DELETE of `of` that this relation blocked once the last blocker is gone.
    pub replay: bool,
    /// Warn only (the source's `spec.enforcement: Warn`): a DELETE of `of` is not refused for
    /// this relation, and answered with a warning that says it would be.
    pub warn: bool,
    /// The UID of `of` when the relation was derived, if known.
    pub of_uid: Option<String>,
    /// The UID of `by` when the relation was derived, if known.
    pub by_uid: Option<String>,
}

impl Relation {
    /// "`of` is used by `by`", from `source`, with no reason, no replay, no UIDs.
    pub fn uses(source: Source, of: ObjectKey, by: ObjectKey) -> Self {
        Self {
            of,
            by: Some(by),
            source,
            reason: None,
            replay: false,
            warn: false,
            of_uid: None,
            by_uid: None,
        }
    }

    /// "`of` is protected because `reason`", from `source`.
    pub fn protects(source: Source, of: ObjectKey, reason: impl Into<String>) -> Self {
        Self {
            of,
            by: None,
            source,
            reason: Some(reason.into()),
            replay: false,
            warn: false,
            of_uid: None,
            by_uid: None,
        }
    }

    /// With a reason.
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// With replay on or off.
    pub fn with_replay(mut self, replay: bool) -> Self {
        self.replay = replay;
        self
    }

    /// Warn only, or enforced.
    pub fn with_warn(mut self, warn: bool) -> Self {
        self.warn = warn;
        self
    }

    /// With the observed UIDs.
    pub fn with_uids(mut self, of_uid: Option<&str>, by_uid: Option<&str>) -> Self {
        self.of_uid = of_uid.map(str::to_owned);
        self.by_uid = by_uid.map(str::to_owned);
        self
    }

    /// The `of` key as a view (for symmetry with the index's views).
    pub fn of_ref(&self) -> KeyRef<'_> {
        self.of.as_key_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_display_as_kubectl_kinds() {
        assert_eq!(
            Source::usage("team-a", "release-uses-cluster").to_string(),
            "Usage team-a/release-uses-cluster"
        );
        assert_eq!(
            Source::cluster_usage("protect").to_string(),
            "ClusterUsage protect"
        );
        assert_eq!(
            Source::rule("nfs-uses-pool").to_string(),
            "DependencyRule nfs-uses-pool"
        );
        let s = Source::usage("a", "b");
        assert_eq!(s.as_source_ref().to_source(), s);
    }

    #[test]
    fn builders_set_fields() {
        let of = ObjectKey::new("g", "K", None, "a");
        let by = ObjectKey::new("g", "K", None, "b");
        let r = Relation::uses(Source::rule("r"), of.clone(), by.clone())
            .with_reason("why")
            .with_replay(true)
            .with_uids(Some("u1"), Some("u2"));
        assert_eq!(r.of, of);
        assert_eq!(r.by, Some(by));
        assert_eq!(r.reason.as_deref(), Some("why"));
        assert!(r.replay);
        assert_eq!(r.of_uid.as_deref(), Some("u1"));
        assert_eq!(r.by_uid.as_deref(), Some("u2"));
        let p = Relation::protects(Source::rule("r"), of, "prod");
        assert_eq!(p.by, None);
        assert_eq!(p.reason.as_deref(), Some("prod"));
    }
}
