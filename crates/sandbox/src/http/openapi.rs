//! OpenAPI, enough for kubectl: `/openapi/v3` lists one document per group version, and each
//! document has the paths of its resources with their operations' query parameters and
//! `x-kubernetes-group-version-kind`, and the schemas: kube-apiserver's definitions (with their
//! descriptions, for `kubectl explain`) for built-in kinds (`crate::builtins`), a CRD's own schema
//! for custom resources. kubectl learns from the documents that the server validates fields itself
//! (`fieldValidation` on PATCH). `/openapi/v2` is the same definitions as one Swagger 2.0 document,
//! in JSON or protobuf (`openapi_v2`).

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::{HttpState, error_response, json_response, openapi_v2};
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

/// A built-in kind's definition name (`io.k8s.api.apps.v1.Deployment`).
fn builtin_schema(rt: &ResourceType, version: &str) -> Option<&'static str> {
    if rt.is_custom() {
        return None;
    }
    crate::builtins::find(&rt.group, version, &rt.plural).map(|b| b.schema)
}

fn schema_name(rt: &ResourceType, version: &str) -> String {
    if let Some(name) = builtin_schema(rt, version) {
        return name.to_string();
    }
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
    let mut builtin_roots = Vec::new();
    let prefix = format!("/{}", doc_path(group, version));
    for rt in resources {
        let base = if rt.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", rt.plural)
        } else {
            format!("{prefix}/{}", rt.plural)
        };
        // The server takes strategic merge patches for built-in kinds, but these documents do
        // not advertise them: `kubectl apply` computes its patch from the OpenAPI v3 schema of
        // a kind whose PATCH lists that type, and the built-in definitions here (k8s-openapi's)
        // carry no `x-kubernetes-patch-strategy`/`-merge-key`, so kubectl would merge lists
        // wrongly. Unadvertised, kubectl uses its compiled-in types, which carry the strategies.
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
        if let Some(name) = builtin_schema(&rt, version) {
            builtin_roots.push(name);
            continue;
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
    let defs = crate::builtins::definitions();
    for name in crate::builtins::reachable(&builtin_roots) {
        if let Some(def) = defs.get(&name) {
            schemas.insert(name, to_v3(def));
        }
    }
    json_response(
        StatusCode::OK,
        &json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": super::GIT_VERSION},
            "paths": paths,
            "components": {"schemas": schemas},
        }),
    )
}

/// A stored definition in OpenAPI v3 form: a `$ref` with siblings (a description) becomes
/// `allOf: [{$ref}]` beside them, as kube-apiserver's v3 documents write it (v3 ignores a
/// `$ref`'s siblings).
fn to_v3(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out: Map<String, Value> =
                m.iter().map(|(k, v)| (k.clone(), to_v3(v))).collect();
            // Only a string is a reference: JSONSchemaProps has a *property* named `$ref`.
            if out.len() > 1 && out.get("$ref").is_some_and(Value::is_string) {
                if let Some(r) = out.remove("$ref") {
                    out.insert("allOf".into(), json!([{"$ref": r}]));
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(to_v3).collect()),
        other => other.clone(),
    }
}

/// A stored definition in Swagger 2.0 form: refs point at `#/definitions/`.
fn to_v2(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| match (k.as_str(), v.as_str()) {
                    ("$ref", Some(r)) => (
                        k.clone(),
                        json!(format!("#/definitions/{}", crate::builtins::ref_name(r))),
                    ),
                    _ => (k.clone(), to_v2(v)),
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(to_v2).collect()),
        other => other.clone(),
    }
}

/// `/openapi/v2`: every built-in definition and every served custom resource's schema (as
/// kube-apiserver publishes it in v2, with `x-kubernetes-group-version-kind`), in JSON or in
/// the protobuf form client-go asks for; an `ETag` of the document, and `304` for a request
/// that names it in `If-None-Match`, as kube-openapi's handler answers.
pub async fn v2(State(state): State<HttpState>, headers: HeaderMap) -> Response {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("*/*");
    // kube-openapi serves the first listed type it has (q-values aside; JSON for a
    // wildcard), and 406 if none.
    let mut format = None;
    for a in accept.split(',') {
        let media = a.split(';').next().unwrap_or_default().trim();
        format = match media {
            openapi_v2::PROTOBUF | openapi_v2::PROTOBUF_DEPRECATED => Some(true),
            "application/json" | "*/*" | "application/*" => Some(false),
            _ => continue,
        };
        break;
    }
    let Some(protobuf) = format else {
        // kube-openapi answers a bare 406, with no body.
        return StatusCode::NOT_ACCEPTABLE.into_response();
    };
    static BUILTIN_V2: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(|| {
        crate::builtins::definitions()
            .iter()
            .map(|(k, v)| (k.clone(), to_v2(v)))
            .collect()
    });
    let mut definitions = BUILTIN_V2.clone();
    for rt in state.server.registry().all().filter(|rt| rt.is_custom()) {
        for v in &rt.versions {
            let mut schema = v
                .schema
                .as_ref()
                .map(openapi_v2::crd_schema_v2)
                .unwrap_or_else(|| json!({"type": "object"}));
            schema["x-kubernetes-group-version-kind"] = json!([gvk(rt, &v.name)]);
            definitions.insert(
                openapi_v2::crd_definition_name(&rt.group, &v.name, &rt.kind),
                schema,
            );
        }
    }
    let doc = json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": super::GIT_VERSION},
        "paths": {},
        "definitions": definitions,
    });
    let json = serde_json::to_vec(&doc).unwrap_or_default();
    // kube-openapi's ETag: the upper-case hex SHA-512 of the JSON document, quoted, the same
    // for both forms.
    let etag = format!(
        "\"{}\"",
        ring::digest::digest(&ring::digest::SHA512, &json)
            .as_ref()
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect::<String>()
    );
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let (status, body, media) = if matches {
        (StatusCode::NOT_MODIFIED, Vec::new(), None)
    } else if protobuf {
        (
            StatusCode::OK,
            openapi_v2::encode(&doc),
            Some(openapi_v2::PROTOBUF),
        )
    } else {
        (StatusCode::OK, json, Some("application/json"))
    };
    let mut resp = (status, body).into_response();
    let h = resp.headers_mut();
    if let Some(media) = media {
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    }
    if let Ok(etag) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, etag);
    }
    h.insert(header::VARY, HeaderValue::from_static("Accept"));
    resp
}
