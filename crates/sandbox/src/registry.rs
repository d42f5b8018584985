//! The kinds this API server serves: the built-in table and, at run time, every established CRD.
//!
//! A [`ResourceType`] is one resource (`configmaps`, `widgets.example.org`) with the versions it is
//! served at. Objects are stored once per resource, whatever version they were written at; a read
//! at another version only rewrites `apiVersion` (a CRD's conversion strategy `None`, which is
//! what kube-apiserver does for CRDs without a conversion webhook).

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use serde_json::Value;

/// `(group, resource)`: the storage identity of a resource, independent of version.
pub type ResourceKey = (String, String);

/// One additional printer column (`kubectl get` tables), as in a CRD's
/// `additionalPrinterColumns`.
#[derive(Debug, Clone, PartialEq)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    /// A simple JSONPath (`.spec.size`, `.metadata.labels.app`, `.status.conditions[?(@.type=="Ready")].status`).
    pub json_path: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct VersionInfo {
    pub name: String,
    /// The version's `openAPIV3Schema` (custom resources only).
    pub schema: Option<Value>,
    pub printer_columns: Vec<PrinterColumn>,
    pub status_subresource: bool,
    /// The `scale` subresource's paths, if declared.
    pub scale_subresource: Option<Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ResourceType {
    pub group: String,
    /// Served versions, the storage (preferred) version first.
    pub versions: Vec<VersionInfo>,
    pub kind: String,
    pub list_kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub verbs: Vec<&'static str>,
    /// Set for custom resources: the owning CRD's name.
    pub crd: Option<String>,
    /// Built-in subresources other than `status` (e.g. a namespace's `finalize`).
    pub extra_subresources: Vec<&'static str>,
}

impl ResourceType {
    /// Where the objects are stored. Usually `(group, plural)`; `events.k8s.io` `events` share
    /// core `events`' storage, as kube-apiserver serves both from one registry
    /// (k/k `pkg/registry/events/rest/storage_events.go` builds the core event store).
    pub fn key(&self) -> ResourceKey {
        if self.is_events_api() {
            return (String::new(), "events".to_string());
        }
        self.id()
    }

    /// `(group, plural)`: the resource's identity in the API, which the registry is keyed by.
    pub fn id(&self) -> ResourceKey {
        (self.group.clone(), self.plural.clone())
    }

    /// `events.k8s.io` `events`: served from core events' storage, converted on the way.
    pub fn is_events_api(&self) -> bool {
        self.group == "events.k8s.io" && self.plural == "events"
    }

    pub fn version(&self, version: &str) -> Option<&VersionInfo> {
        self.versions.iter().find(|v| v.name == version)
    }

    pub fn storage_version(&self) -> &str {
        self.versions.first().map_or("v1", |v| v.name.as_str())
    }

    /// `apiVersion` as written in objects: `v1` for the core group, `group/version` otherwise.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    pub fn has_status(&self) -> bool {
        self.versions.iter().any(|v| v.status_subresource)
    }

    pub fn is_custom(&self) -> bool {
        self.crd.is_some()
    }
}

/// Every resource served, by `(group, plural)`.
#[derive(Debug, Clone)]
pub struct Registry {
    resources: BTreeMap<ResourceKey, Arc<ResourceType>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::with_builtins()
    }
}

impl Registry {
    /// Every built-in resource of Kubernetes 1.32 ([`crate::builtins::BUILTINS`]). The table is
    /// built once per process; each sandbox's registry starts as a copy of its `Arc`s.
    pub fn with_builtins() -> Self {
        static BUILTIN_REGISTRY: LazyLock<Registry> = LazyLock::new(|| {
            let mut merged: BTreeMap<ResourceKey, ResourceType> = BTreeMap::new();
            for b in crate::builtins::BUILTINS {
                let rt = builtin_resource_type(b);
                match merged.get_mut(&rt.id()) {
                    // One resource served at several versions (autoscaling/v1 and v2
                    // horizontalpodautoscalers): one store, the preferred version first.
                    Some(existing) => {
                        existing.versions.extend(rt.versions);
                        existing
                            .versions
                            .sort_by(|a, b| compare_versions(&b.name, &a.name));
                    }
                    None => {
                        merged.insert(rt.id(), rt);
                    }
                }
            }
            let resources = merged
                .into_iter()
                .map(|(k, rt)| (k, Arc::new(rt)))
                .collect();
            Registry { resources }
        });
        BUILTIN_REGISTRY.clone()
    }

    pub fn get(&self, group: &str, plural: &str) -> Option<&Arc<ResourceType>> {
        self.resources.get(&(group.to_string(), plural.to_string()))
    }

    /// The resource serving `group/version` and `plural`, if that version is served.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<&Arc<ResourceType>> {
        self.get(group, plural)
            .filter(|rt| rt.version(version).is_some())
    }

    /// The resource of a kind (`apiVersion` + `kind`, as in an owner reference).
    pub fn by_kind(&self, group: &str, kind: &str) -> Option<&Arc<ResourceType>> {
        self.resources
            .values()
            .find(|rt| rt.group == group && rt.kind == kind)
    }

    pub fn all(&self) -> impl Iterator<Item = &Arc<ResourceType>> {
        self.resources.values()
    }

    pub fn insert(&mut self, rt: ResourceType) {
        self.resources.insert(rt.id(), Arc::new(rt));
    }

    pub fn remove(&mut self, key: &ResourceKey) -> Option<Arc<ResourceType>> {
        self.resources.remove(key)
    }

    /// Groups in discovery order (the core group is served under `/api`, not listed here),
    /// each with its served versions, preferred first.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for rt in self.resources.values() {
            if rt.group.is_empty() {
                continue;
            }
            let versions = groups.entry(rt.group.clone()).or_default();
            for v in &rt.versions {
                if !versions.contains(&v.name) {
                    versions.push(v.name.clone());
                }
            }
        }
        for versions in groups.values_mut() {
            versions.sort_by(|a, b| compare_versions(b, a));
        }
        groups.into_iter().collect()
    }
}

fn builtin_resource_type(b: &crate::builtins::Builtin) -> ResourceType {
    ResourceType {
        group: b.group.to_string(),
        versions: vec![VersionInfo {
            name: b.version.to_string(),
            // Built-in schemas are served from `crate::builtins`, not per resource type.
            schema: None,
            printer_columns: vec![],
            status_subresource: b.subresources.iter().any(|s| s.name == "status"),
            scale_subresource: None,
        }],
        kind: b.kind.to_string(),
        list_kind: if b.list_kind.is_empty() {
            format!("{}List", b.kind)
        } else {
            b.list_kind.to_string()
        },
        plural: b.plural.to_string(),
        // kube-apiserver's singularName for built-ins is the lower-cased kind.
        singular: b.kind.to_lowercase(),
        namespaced: b.namespaced,
        short_names: b.short_names.iter().map(|s| s.to_string()).collect(),
        categories: b.categories.iter().map(|s| s.to_string()).collect(),
        verbs: b.verbs.to_vec(),
        crd: None,
        // Subresources the sandbox serves besides `status`; discovery lists every subresource
        // kube-apiserver has (`crate::builtins::Builtin::subresources`).
        extra_subresources: b
            .subresources
            .iter()
            .map(|s| s.name)
            // A namespace's `finalize`, a ServiceAccount's `token` (TokenRequest), a Pod's
            // `eviction`, `ephemeralcontainers` and `binding`.
            .filter(|s| {
                matches!(
                    (b.plural, *s),
                    (_, "finalize")
                        | ("serviceaccounts", "token")
                        | ("pods", "eviction" | "ephemeralcontainers" | "binding")
                )
            })
            .collect(),
    }
}

/// Kubernetes version priority: GA > beta > alpha, then by number (`v2 > v1 > v1beta2 > v1beta1 >
/// v1alpha1`), and anything that is not a Kubernetes version last, alphabetically.
pub fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    fn rank(v: &str) -> (u8, u64, u64, String) {
        let Some(rest) = v.strip_prefix('v') else {
            return (0, 0, 0, v.to_string());
        };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let Ok(major) = digits.parse::<u64>() else {
            return (0, 0, 0, v.to_string());
        };
        let tail = &rest[digits.len()..];
        let (stability, minor_str) = if tail.is_empty() {
            (3, "")
        } else if let Some(m) = tail.strip_prefix("beta") {
            (2, m)
        } else if let Some(m) = tail.strip_prefix("alpha") {
            (1, m)
        } else {
            return (0, 0, 0, v.to_string());
        };
        let minor = if minor_str.is_empty() {
            0
        } else {
            match minor_str.parse::<u64>() {
                Ok(m) => m,
                Err(_) => return (0, 0, 0, v.to_string()),
            }
        };
        (stability, major, minor, String::new())
    }
    let (ra, rb) = (rank(a), rank(b));
    if ra.0 == 0 && rb.0 == 0 {
        return b.cmp(a);
    }
    (ra.0, ra.1, ra.2).cmp(&(rb.0, rb.1, rb.2))
}

/// The `(group, version)` of an `apiVersion` string.
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_priority_follows_kubernetes() {
        let mut v = vec!["v1alpha1", "v1", "v1beta2", "v2", "v1beta1", "foo"];
        v.sort_by(|a, b| compare_versions(b, a));
        assert_eq!(v, ["v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]);
    }

    #[test]
    fn builtins_are_found_by_kind_and_resource() {
        let r = Registry::with_builtins();
        assert!(r.lookup("", "v1", "configmaps").is_some());
        assert!(r.lookup("", "v2", "configmaps").is_none());
        assert_eq!(
            r.by_kind("apps", "Deployment").map(|rt| rt.plural.as_str()),
            Some("deployments")
        );
        assert!(!r.get("", "namespaces").expect("ns").namespaced);
    }
}
