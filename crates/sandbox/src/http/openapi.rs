//! OpenAPI v3 discovery, enough for kubectl: `/openapi/v3` lists one document per group
//! version, and each document has the paths of its resources with their operations' query
//! parameters and `x-kubernetes-group-version-kind`. kubectl reads these to learn that the server
//! validates fields itself (`fieldValidation` on PATCH), and uses a CRD's schema from here when
//! one is declared.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::{HttpState, error_response, json_response};
use crate::error::ApiError;
use crate::registry::ResourceType;

fn doc_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: the index of group-version documents.
pub async fn index(State(state): State<HttpState>) -> Response {
    let revision = state.server.revision();
    let mut paths = Map::new();
    for rt in state.server.registry().all() {
        for v in &rt.versions {
            let p = doc_path(&rt.group, &v.name);
            paths.insert(
                p.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={revision:016X}")}),
            );
        }
    }
    json_response(StatusCode::OK, &json!({"paths": paths}))
}

fn param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": "string", "uniqueItems": true}})
}

fn write_params() -> Vec<Value> {
    vec![
        param(
            "dryRun",
            "When present, indicates that modifications should not be persisted.",
        ),
        param(
            "fieldManager",
            "fieldManager is a name associated with the actor or entity that is making these changes.",
        ),
        param(
            "fieldValidation",
            "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields.",
        ),
    ]
}

fn gvk(rt: &ResourceType, version: &str) -> Value {
    json!({"group": rt.group, "version": version, "kind": rt.kind})
}

fn schema_name(rt: &ResourceType, version: &str) -> String {
    let group = if rt.group.is_empty() {
        "core".to_string()
    } else {
        rt.group.clone()
    };
    format!("{}.{version}.{}", group, rt.kind)
}

fn operation(
    rt: &ResourceType,
    version: &str,
    action: &str,
    params: Vec<Value>,
    body_types: &[&str],
) -> Value {
    let schema_ref = json!({"$ref": format!("#/components/schemas/{}", schema_name(rt, version))});
    let mut op = json!({
        "operationId": format!("{action}{}", rt.kind),
        "parameters": params,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": schema_ref}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(rt, version),
    });
    if !body_types.is_empty() {
        let content: Map<String, Value> = body_types
            .iter()
            .map(|t| (t.to_string(), json!({"schema": schema_ref})))
            .collect();
        op["requestBody"] = json!({"content": content, "required": true});
    }
    op
}

/// `/openapi/v3/api/v1`, `/openapi/v3/apis/G/V`.
pub async fn group_version(State(state): State<HttpState>, Path(path): Path<String>) -> Response {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version) = match segs.as_slice() {
        ["api", v] => ("", *v),
        ["apis", g, v] => (*g, *v),
        _ => return error_response(&ApiError::path_not_found()),
    };
    let registry = state.server.registry();
    let resources: Vec<_> = registry
        .all()
        .filter(|rt| rt.group == group && rt.version(version).is_some())
        .cloned()
        .collect();
    if resources.is_empty() {
        return error_response(&ApiError::path_not_found());
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    let prefix = format!("/{}", doc_path(group, version));
    for rt in resources {
        let base = if rt.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", rt.plural)
        } else {
            format!("{prefix}/{}", rt.plural)
        };
        // The server takes strategic merge patches for built-in kinds, but these documents do
        // not advertise them: `kubectl apply` computes its patch from the OpenAPI v3 schema of
        // a kind whose PATCH lists that type, and the built-in schemas here are placeholders
        // without `metadata` or the patch strategies, so every apply printed "warning: error
        // calculating patch from openapi v3 spec: unable to find api field \"metadata\"".
        // Unadvertised, kubectl uses its compiled-in types, which carry the real strategies.
        let patch_types = [
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
        ];
        let mut patch_params = write_params();
        patch_params.push(param(
            "force",
            "Force is going to \"force\" Apply requests.",
        ));
        paths.insert(
            base.clone(),
            json!({
                "get": operation(&rt, version, "list", vec![param("labelSelector", ""), param("fieldSelector", ""), param("limit", ""), param("continue", ""), param("watch", "")], &[]),
                "post": operation(&rt, version, "post", write_params(), &["application/json", "application/yaml"]),
                "delete": operation(&rt, version, "deletecollection", vec![param("dryRun", ""), param("propagationPolicy", "")], &[]),
            }),
        );
        paths.insert(
            format!("{base}/{{name}}"),
            json!({
                "get": operation(&rt, version, "get", vec![], &[]),
                "put": operation(&rt, version, "put", write_params(), &["application/json", "application/yaml"]),
                "patch": operation(&rt, version, "patch", patch_params.clone(), &patch_types),
                "delete": operation(&rt, version, "delete", vec![param("dryRun", ""), param("propagationPolicy", ""), param("gracePeriodSeconds", "")], &[]),
            }),
        );
        if rt.version(version).is_some_and(|v| v.status_subresource) {
            paths.insert(
                format!("{base}/{{name}}/status"),
                json!({
                    "get": operation(&rt, version, "get", vec![], &[]),
                    "put": operation(&rt, version, "put", write_params(), &["application/json"]),
                    "patch": operation(&rt, version, "patch", patch_params, &patch_types),
                }),
            );
        }
        let mut schema = rt
            .version(version)
            .and_then(|v| v.schema.clone())
            .unwrap_or_else(
                || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            );
        schema["x-kubernetes-group-version-kind"] = json!([gvk(&rt, version)]);
        schemas.insert(schema_name(&rt, version), schema);
    }
    json_response(
        StatusCode::OK,
        &json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.32.0-lien-sandbox"},
            "paths": paths,
            "components": {"schemas": schemas},
        }),
    )
}
