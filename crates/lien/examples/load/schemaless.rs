//! Schemaless custom kinds for the CascadeRule examples (`cascade_load`, `cascade_memory`): a
//! CRD of `group`/v1 that keeps any field, applied and waited for until it is served.

use std::time::Duration;

use anyhow::Context;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

/// The resource of `group`/v1 `kind`, served as `plural`.
pub fn resource(group: &str, kind: &str, plural: &str) -> ApiResource {
    let mut ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, "v1", kind));
    ar.plural = plural.into();
    ar
}

/// Applies (as `manager`) a CRD for `group`/v1 `kind` that keeps any field, and waits until the
/// API server serves it (established).
pub async fn crd(
    client: &Client,
    manager: &str,
    group: &str,
    (kind, plural): (&str, &str),
    namespaced: bool,
) -> anyhow::Result<()> {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": if namespaced { "Namespaced" } else { "Cluster" },
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(),
                      "listKind": format!("{kind}List")},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))?;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch(
        &format!("{plural}.{group}"),
        &PatchParams::apply(manager).force(),
        &Patch::Apply(&crd),
    )
    .await
    .with_context(|| format!("CRD {plural}"))?;
    let objects: Api<DynamicObject> = Api::all_with(client.clone(), &resource(group, kind, plural));
    for _ in 0..200 {
        if objects.list(&ListParams::default().limit(1)).await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!("CRD {plural} not served")
}
