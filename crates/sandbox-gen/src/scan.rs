//! Reads k8s-openapi's generated source and finds every type that implements `crate::Resource`:
//! its group, version, kind, plural (`URL_PATH_SEGMENT`), scope, whether it is listable
//! (`crate::ListableResource`, with `LIST_KIND`) and whether it has a `status` field.
//!
//! k8s-openapi generates that source from kube-apiserver's own OpenAPI document, so this is the
//! API's shape as Kubernetes publishes it; pure logic over the source text, no I/O.

use std::collections::BTreeMap;

use syn::{Expr, ImplItem, Item, Lit, Type};

/// A Kubernetes scope as k8s-openapi spells it (`crate::NamespaceResourceScope`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Namespaced,
    Cluster,
    /// A subresource's body (`Scale`, `Eviction`, `TokenRequest`) or a meta type.
    SubResource,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// `k8s_openapi::api::apps::v1::Deployment`.
    pub rust_path: String,
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub scope: Scope,
    /// `LIST_KIND` when the type is a `ListableResource`.
    pub list_kind: Option<String>,
    pub has_status: bool,
}

impl Found {
    /// A GA version (`v1`, `v2`): kube-apiserver 1.32 serves only these by default (alpha APIs
    /// are off, and beta APIs introduced since 1.24 are off by default — KEP-3136; the last
    /// legacy beta, `flowcontrol.apiserver.k8s.io/v1beta3`, stopped being served in 1.32).
    pub fn is_ga(&self) -> bool {
        self.version
            .strip_prefix('v')
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    }

    /// A top-level resource with a collection URL (not a subresource body or a meta type).
    pub fn is_resource(&self) -> bool {
        !self.plural.is_empty() && self.scope != Scope::SubResource
    }
}

#[derive(Default)]
struct ImplData {
    consts: BTreeMap<String, String>,
    scope: Option<Scope>,
}

/// Scans one source file; `module` is its parent module's path (`api::apps::v1`).
pub fn scan_file(module: &str, source: &str) -> Result<Vec<Found>, String> {
    let file = syn::parse_file(source).map_err(|e| format!("{module}: {e}"))?;
    let mut status_fields: BTreeMap<String, bool> = BTreeMap::new();
    let mut resources: BTreeMap<String, ImplData> = BTreeMap::new();
    let mut list_kinds: BTreeMap<String, String> = BTreeMap::new();
    for item in &file.items {
        match item {
            Item::Struct(s) => {
                let has_status = s
                    .fields
                    .iter()
                    .any(|f| f.ident.as_ref().is_some_and(|i| i == "status"));
                status_fields.insert(s.ident.to_string(), has_status);
            }
            Item::Impl(imp) => {
                let Some((_, trait_path, _)) = &imp.trait_ else {
                    continue;
                };
                if !imp.generics.params.is_empty() {
                    // `impl<T> Resource for List<T>`: a wrapper, not a resource of its own.
                    continue;
                }
                let Some(trait_name) = trait_path.segments.last().map(|s| s.ident.to_string())
                else {
                    continue;
                };
                let Some(self_name) = type_name(&imp.self_ty) else {
                    continue;
                };
                match trait_name.as_str() {
                    "Resource" => {
                        read_resource_impl(&imp.items, resources.entry(self_name).or_default())
                    }
                    "ListableResource" => {
                        if let Some(s) = string_const(&imp.items, "LIST_KIND") {
                            list_kinds.insert(self_name, s);
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    for (name, data) in resources {
        let get = |k: &str| data.consts.get(k).cloned().unwrap_or_default();
        let Some(scope) = data.scope else {
            return Err(format!(
                "{module}::{name}: impl Resource without a known Scope"
            ));
        };
        found.push(Found {
            rust_path: format!("k8s_openapi::{module}::{name}"),
            group: get("GROUP"),
            version: get("VERSION"),
            kind: get("KIND"),
            plural: get("URL_PATH_SEGMENT"),
            scope,
            list_kind: list_kinds.get(&name).cloned(),
            has_status: status_fields.get(&name).copied().unwrap_or(false),
        });
    }
    Ok(found)
}

/// The string constants and the `Scope` of an `impl Resource`.
fn read_resource_impl(items: &[ImplItem], data: &mut ImplData) {
    for it in items {
        match it {
            ImplItem::Const(c) => {
                if let Some(s) = string_literal(&c.expr) {
                    data.consts.insert(c.ident.to_string(), s);
                }
            }
            ImplItem::Type(t) if t.ident == "Scope" => {
                data.scope = type_name(&t.ty).and_then(|n| match n.as_str() {
                    "NamespaceResourceScope" => Some(Scope::Namespaced),
                    "ClusterResourceScope" => Some(Scope::Cluster),
                    "SubResourceScope" => Some(Scope::SubResource),
                    _ => None,
                });
            }
            _ => {}
        }
    }
}

/// The string constant `name` of an impl block, if it has one.
fn string_const(items: &[ImplItem], name: &str) -> Option<String> {
    items.iter().find_map(|it| match it {
        ImplItem::Const(c) if c.ident == name => string_literal(&c.expr),
        _ => None,
    })
}

fn type_name(ty: &Type) -> Option<String> {
    match ty {
        Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

fn string_literal(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Lit(l) => match &l.lit {
            Lit::Str(s) => Some(s.value()),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEPLOYMENT: &str = r#"
        pub struct Deployment {
            pub metadata: crate::apimachinery::pkg::apis::meta::v1::ObjectMeta,
            pub spec: Option<crate::api::apps::v1::DeploymentSpec>,
            pub status: Option<crate::api::apps::v1::DeploymentStatus>,
        }
        impl crate::Resource for Deployment {
            const API_VERSION: &'static str = "apps/v1";
            const GROUP: &'static str = "apps";
            const KIND: &'static str = "Deployment";
            const VERSION: &'static str = "v1";
            const URL_PATH_SEGMENT: &'static str = "deployments";
            type Scope = crate::NamespaceResourceScope;
        }
        impl crate::ListableResource for Deployment {
            const LIST_KIND: &'static str = "DeploymentList";
        }
        impl crate::Metadata for Deployment {
            type Ty = crate::apimachinery::pkg::apis::meta::v1::ObjectMeta;
        }
    "#;

    #[test]
    fn finds_a_listable_namespaced_resource_with_status() {
        let found = scan_file("api::apps::v1", DEPLOYMENT).expect("parses");
        assert_eq!(
            found,
            vec![Found {
                rust_path: "k8s_openapi::api::apps::v1::Deployment".into(),
                group: "apps".into(),
                version: "v1".into(),
                kind: "Deployment".into(),
                plural: "deployments".into(),
                scope: Scope::Namespaced,
                list_kind: Some("DeploymentList".into()),
                has_status: true,
            }]
        );
        assert!(found[0].is_ga() && found[0].is_resource());
    }

    #[test]
    fn a_review_is_not_listable_and_a_subresource_body_is_not_a_resource() {
        let src = r#"
            pub struct SelfSubjectReview { pub status: Option<u8> }
            impl crate::Resource for SelfSubjectReview {
                const GROUP: &'static str = "authentication.k8s.io";
                const KIND: &'static str = "SelfSubjectReview";
                const VERSION: &'static str = "v1beta1";
                const URL_PATH_SEGMENT: &'static str = "selfsubjectreviews";
                type Scope = crate::ClusterResourceScope;
            }
            pub struct Scale { pub spec: Option<u8> }
            impl crate::Resource for Scale {
                const GROUP: &'static str = "autoscaling";
                const KIND: &'static str = "Scale";
                const VERSION: &'static str = "v1";
                const URL_PATH_SEGMENT: &'static str = "scale";
                type Scope = crate::SubResourceScope;
            }
        "#;
        let found = scan_file("api::x::v1", src).expect("parses");
        let review = found
            .iter()
            .find(|f| f.kind == "SelfSubjectReview")
            .expect("review");
        assert_eq!(review.list_kind, None);
        assert_eq!(review.scope, Scope::Cluster);
        assert!(!review.is_ga(), "v1beta1 is not GA");
        let scale = found.iter().find(|f| f.kind == "Scale").expect("scale");
        assert!(!scale.is_resource() && scale.is_ga() && !scale.has_status);
    }

    #[test]
    fn an_impl_without_a_scope_is_an_error_not_a_guess() {
        let src = r#"
            pub struct X {}
            impl crate::Resource for X { const KIND: &'static str = "X"; }
        "#;
        let err = scan_file("api::x::v1", src).expect_err("no scope");
        assert!(err.contains("api::x::v1::X"), "{err}");
    }
}
