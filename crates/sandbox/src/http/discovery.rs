//! Discovery: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/G`, `/apis/G/V` in the legacy
//! (unaggregated) format. A client asking for aggregated discovery (`as=APIGroupDiscoveryList`)
//! gets `application/json` and falls back, as it does against servers without it.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::{HttpState, json_response};
use crate::apiserver::ApiServer;
use crate::error::ApiError;

pub async fn version() -> Response {
    json_response(
        StatusCode::OK,
        &json!({
            "major": "1",
            "minor": "32",
            "gitVersion": super::GIT_VERSION,
            "gitCommit": env!("CARGO_PKG_VERSION"),
            "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "n/a (Rust)",
            "compiler": "rustc",
            "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
        }),
    )
}

/// `/api`: the legacy group's versions, and the address clients are told to reach the server
/// at — its advertised address and port, as kube-apiserver writes it.
pub async fn api_versions(State(state): State<HttpState>) -> Response {
    let address = state
        .server
        .serving_address()
        .map_or_else(|| "127.0.0.1".to_string(), |a| a.to_string());
    json_response(
        StatusCode::OK,
        &json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
        }),
    )
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let gvs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": gvs,
        "preferredVersion": gvs.first().cloned().unwrap_or(Value::Null),
    })
}

pub async fn api_groups(State(state): State<HttpState>) -> Response {
    let groups: Vec<Value> = state
        .server
        .registry()
        .groups()
        .iter()
        .map(|(g, vs)| group_json(g, vs))
        .collect();
    json_response(
        StatusCode::OK,
        &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
    )
}

/// `/apis/G` (an `APIGroup`; `version` empty) or `/api/v1`, `/apis/G/V` (an `APIResourceList`).
pub fn group_or_resources(
    server: &ApiServer,
    group: &str,
    version: &str,
) -> Result<Value, ApiError> {
    let registry = server.registry();
    let resources: Vec<_> = registry
        .all()
        .filter(|rt| rt.group == group && rt.version(version).is_some())
        .cloned()
        .collect();
    if resources.is_empty() {
        return Err(ApiError::path_not_found());
    }
    let mut list = Vec::new();
    for rt in resources {
        let mut entry = json!({
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": rt.verbs,
        });
        if !rt.short_names.is_empty() {
            entry["shortNames"] = json!(rt.short_names);
        }
        if !rt.categories.is_empty() {
            entry["categories"] = json!(rt.categories);
        }
        if let Some(hash) = storage_version_hash(&rt) {
            entry["storageVersionHash"] = json!(hash);
        }
        list.push(entry);
        if let Some(builtin) =
            crate::builtins::find(&rt.group, version, &rt.plural).filter(|_| !rt.is_custom())
        {
            // Every subresource kube-apiserver lists, served or not (docs/sandbox.md says which
            // are not); a subresource of another kind names its group, version and kind.
            for sub in builtin.subresources {
                let mut e = json!({
                    "name": format!("{}/{}", rt.plural, sub.name),
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": sub.kind,
                    "verbs": sub.verbs,
                });
                if sub.group != rt.group || sub.version != version {
                    e["group"] = json!(sub.group);
                    e["version"] = json!(sub.version);
                }
                list.push(e);
            }
            continue;
        }
        if rt.version(version).is_some_and(|v| v.status_subresource) {
            list.push(json!({
                "name": format!("{}/status", rt.plural),
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if crate::apiserver::scale::paths(&rt, version).is_some() {
            list.push(json!({
                "name": format!("{}/scale", rt.plural),
                "singularName": "",
                "namespaced": rt.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
        for sub in &rt.extra_subresources {
            list.push(json!({
                "name": format!("{}/{sub}", rt.plural),
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": ["update"],
            }));
        }
    }
    // kube-apiserver's installer registers a group version's paths sorted (`sort.Strings` in
    // `APIInstaller.Install`), and lists them in that order: `namespaces/finalize` before
    // `namespaces/status`, `deployments/scale` before `deployments/status`.
    list.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Ok(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": list,
    }))
}

/// `/apis/G`.
pub fn group(server: &ApiServer, group: &str) -> Result<Value, ApiError> {
    let groups = server.registry().groups();
    let (name, versions) = groups
        .iter()
        .find(|(g, _)| g == group)
        .ok_or_else(ApiError::path_not_found)?;
    let mut g = group_json(name, versions);
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    Ok(g)
}

/// `discovery.StorageVersionHash`: the first 8 bytes of the SHA-256 of `group/version/kind` of
/// the version a resource is stored at, in base64 — what the storage version migrator watches
/// for a change. Only resources kept in storage have one (not reviews, not ComponentStatus,
/// not the `bindings` a Pod's scheduling creates through).
fn storage_version_hash(rt: &crate::registry::ResourceType) -> Option<String> {
    use crate::strategy::Storage;
    use base64::Engine;
    let stored = matches!(
        crate::strategy::of(rt).storage(),
        Storage::Plain | Storage::Namespace | Storage::ClusterIps
    );
    let virtual_ =
        rt.group.is_empty() && matches!(rt.plural.as_str(), "bindings" | "componentstatuses");
    if !stored || virtual_ {
        return None;
    }
    let gvk = format!("{}/{}/{}", rt.group, rt.storage_version(), rt.kind);
    let digest = ring::digest::digest(&ring::digest::SHA256, gvk.as_bytes());
    Some(base64::engine::general_purpose::STANDARD.encode(&digest.as_ref()[..8]))
}
