//! The wire protocol: kube-apiserver's REST paths, query parameters, content negotiation (JSON,
//! `as=Table`), watch streams and `Status` errors, over axum.

mod discovery;
mod go_json;
mod negotiate;
mod openapi;
mod openapi_v2;
pub(crate) mod query;
mod stream;
mod table;

use query::query_bool;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Router, middleware};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::apiserver::{
    ApiServer, DeleteOptions, DeleteOutcome, FieldValidation, ListOptions, Target, WatchOptions,
    WriteOptions,
};
use crate::auth::{Authenticator, UserInfo};
use crate::error::ApiError;
use crate::patch::PatchKind;
use crate::protobuf;
use negotiate::{Format, negotiate};

/// The Kubernetes version the sandbox reports (`/version`, the node's kubelet).
pub const GIT_VERSION: &str = "v1.32.0-lien-sandbox";

/// kube-apiserver's limit on a request body.
const MAX_BODY: usize = 3 * 1024 * 1024;

#[derive(Clone)]
pub struct HttpState {
    pub server: Arc<ApiServer>,
    pub auth: Arc<Authenticator>,
}

pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/healthz", get(ok_text))
        .route("/livez", get(ok_text))
        .route("/readyz", get(ok_text))
        .route("/version", get(discovery::version))
        .route("/api", get(discovery::api_versions))
        .route("/apis", get(discovery::api_groups))
        .route("/openapi/v2", get(openapi::v2))
        .route("/openapi/v3", get(openapi::index))
        .route("/openapi/v3/{*path}", get(openapi::group_version))
        .fallback(dispatch)
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}

async fn ok_text() -> &'static str {
    "ok"
}

/// kube-apiserver's filter chain, in its order: authentication (a known bearer token, except
/// for the health and version endpoints served to everyone), impersonation (`Impersonate-*`
/// headers, each authorized with verb `impersonate`), then authorization of the request itself.
async fn authenticate(
    State(state): State<HttpState>,
    mut req: Request,
    next: middleware::Next,
) -> Response {
    let path = req.uri().path();
    let public = matches!(path, "/healthz" | "/livez" | "/readyz" | "/version");
    // A refusal of the filter chain is written as kube's `responsewriters.ErrorNegotiated`
    // writes it: in what `Accept` prefers among JSON, YAML and protobuf (a `Status` has a
    // protobuf message whatever the path), JSON when nothing matches.
    let format = negotiate(
        req.headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok()),
        true,
    )
    .unwrap_or(Format::Json);
    let refuse = |e: ApiError| encode_response(error_response(&e), format);
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let user = state.auth.authenticate(authorization).cloned().or_else(|| {
        let token = authorization?.strip_prefix("Bearer ")?.trim();
        state.server.authenticate_service_account_token(token)
    });
    let Some(user) = user else {
        return if public {
            next.run(req).await
        } else {
            refuse(ApiError::unauthorized()).await
        };
    };
    let user = match impersonate(&state.server, user, req.headers()) {
        Ok(user) => user,
        Err(e) => return refuse(e).await,
    };
    let attrs = crate::authz::request_attributes(
        &user,
        req.method().as_str(),
        req.uri().path(),
        &query_map(&req),
    );
    let decision = state.server.authorize(&attrs);
    if !decision.allowed() {
        return refuse(crate::authz::forbidden(&attrs, decision.reason())).await;
    }
    req.extensions_mut().insert(user);
    next.run(req).await
}

/// The user a request acts as: `user`, or whom its `Impersonate-*` headers name if `user` may
/// impersonate them (kube-apiserver's impersonation filter).
fn impersonate(
    server: &ApiServer,
    user: UserInfo,
    headers: &HeaderMap,
) -> Result<UserInfo, ApiError> {
    let text = |v: &HeaderValue| v.to_str().unwrap_or_default().to_string();
    let name = headers.get("impersonate-user").map(text);
    let groups: Vec<String> = headers
        .get_all("impersonate-group")
        .iter()
        .map(text)
        .collect();
    let uid = headers.get("impersonate-uid").map(text);
    let mut extra: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (key, value) in headers {
        if let Some(k) = key.as_str().strip_prefix("impersonate-extra-") {
            extra
                .entry(percent_decode(k).to_lowercase())
                .or_default()
                .push(text(value));
        }
    }
    let Some(name) = name else {
        if !groups.is_empty() || uid.is_some() || !extra.is_empty() {
            return Err(ApiError::internal(
                "requested impersonation of groups, uid or extra without impersonating a user",
            ));
        }
        return Ok(user);
    };
    let requested = UserInfo {
        username: name,
        uid: uid.unwrap_or_default(),
        groups,
        extra,
    };
    for attrs in crate::authz::impersonation_attributes(&user, &requested) {
        let decision = server.authorize(&attrs);
        if !decision.allowed() {
            return Err(crate::authz::forbidden(&attrs, decision.reason()));
        }
    }
    Ok(crate::authz::impersonated_user(
        &requested.username,
        requested.groups,
        requested.uid,
        requested.extra,
    ))
}

pub(crate) fn json_response(status: StatusCode, body: &Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response()
}

pub(crate) fn error_response(err: &ApiError) -> Response {
    let status = StatusCode::from_u16(err.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(status, &err.to_status())
}

/// An object written as an item of a built-in kind's list: kube-apiserver encodes each item
/// without `apiVersion` and `kind` (the Go objects' empty TypeMeta; the list's own `kind` names
/// them), where a custom resource's items, unstructured, keep theirs. Every client takes the
/// type from the list. Serialized in place, without copying the object.
pub(crate) struct Untyped<'a>(pub &'a Value);

impl serde::Serialize for Untyped<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Some(fields) = self.0.as_object() else {
            return self.0.serialize(serializer);
        };
        let kept = fields
            .iter()
            .filter(|(k, _)| k.as_str() != "apiVersion" && k.as_str() != "kind");
        let mut map = serializer.serialize_map(None)?;
        for (k, v) in kept {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// A read of a deprecated API carries kube-apiserver's deprecation warning (the only one the
/// sandbox serves is ComponentStatus).
fn deprecated(rt: &crate::registry::ResourceType, resp: Response) -> Response {
    if crate::apiserver::component_statuses::is_component_statuses(&rt.group, &rt.plural) {
        with_warnings(
            resp,
            &[crate::apiserver::component_statuses::DEPRECATION.to_string()],
        )
    } else {
        resp
    }
}

fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        // Quoted as Go's strconv.Quote does (apimachinery's util/net NewWarningHeader), so
        // clients unquote `unknown field "bogus"` back to kube-apiserver's text.
        let quoted = w.replace('\\', "\\\\").replace('"', "\\\"");
        let text = format!("299 - \"{quoted}\"");
        if let Ok(v) = HeaderValue::from_str(&text) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

/// A parsed resource path.
#[derive(Debug)]
struct PathInfo {
    group: String,
    version: String,
    /// Empty for a discovery request.
    resource: String,
    namespace: String,
    name: String,
    subresource: String,
}

fn parse_path(path: &str) -> Option<PathInfo> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => (String::new(), v.to_string(), rest),
        ["apis", g, v, rest @ ..] => (g.to_string(), v.to_string(), rest),
        _ => return None,
    };
    let mut info = PathInfo {
        group,
        version,
        resource: String::new(),
        namespace: String::new(),
        name: String::new(),
        subresource: String::new(),
    };
    match rest {
        [] => {}
        ["namespaces", ns, sub @ ("status" | "finalize")] if info.group.is_empty() => {
            info.resource = "namespaces".into();
            info.name = ns.to_string();
            info.subresource = sub.to_string();
        }
        ["namespaces", ns, res, tail @ ..] => {
            info.namespace = ns.to_string();
            info.resource = res.to_string();
            match tail {
                [] => {}
                [name] => info.name = name.to_string(),
                [name, sub] => {
                    info.name = name.to_string();
                    info.subresource = sub.to_string();
                }
                _ => return None,
            }
        }
        [res] => info.resource = res.to_string(),
        [res, name] => {
            info.resource = res.to_string();
            info.name = name.to_string();
        }
        [res, name, sub] => {
            info.resource = res.to_string();
            info.name = name.to_string();
            info.subresource = sub.to_string();
        }
        _ => return None,
    }
    Some(info)
}

fn query_map(req: &Request) -> std::collections::HashMap<String, String> {
    req.uri()
        .query()
        .map(|q| {
            url_pairs(q)
                .into_iter()
                .collect::<std::collections::HashMap<String, String>>()
        })
        .unwrap_or_default()
}

fn url_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn wants_table(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| {
            a.split(',')
                .next()
                .is_some_and(|first| first.contains("as=Table"))
        })
}

/// Whether kube-apiserver would answer `path` with its bare `404 page not found` (text, not a
/// `Status`): a path under `/apis/G` where G is no built-in group and no CRD serves what the
/// path names. The built-in groups' handlers answer their own unknown paths with a `Status`
/// ("the server could not find the requested resource"); a custom resource's request reaches
/// apiextensions-apiserver, which hands what it does not serve to the not-found handler —
/// so does the path of a kind whose CRD was just deleted, which kube-rs then does not take
/// for NotFound (it reads `reason`, and a bare 404 has none).
fn bare_not_found(server: &ApiServer, path: &str) -> bool {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let ["apis", group, rest @ ..] = segs.as_slice() else {
        return false;
    };
    if crate::builtins::BUILTINS.iter().any(|b| b.group == *group) {
        return false;
    }
    let registry = server.registry();
    match rest {
        [] => !registry.all().any(|rt| rt.group == *group),
        [version] => !registry
            .all()
            .any(|rt| rt.group == *group && rt.version(version).is_some()),
        _ => {
            drop(registry);
            let Some(info) = parse_path(path) else {
                return true;
            };
            match server.resolve(&info.group, &info.version, &info.resource) {
                None => true,
                // A namespaced kind's object named without its namespace.
                Some(rt) => rt.namespaced && info.namespace.is_empty() && !info.name.is_empty(),
            }
        }
    }
}

/// kube-apiserver's not-found handler's answer.
fn page_not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        "404 page not found\n",
    )
        .into_response()
}

async fn dispatch(State(state): State<HttpState>, req: Request) -> Response {
    if bare_not_found(&state.server, req.uri().path()) {
        return page_not_found();
    }
    // Protobuf is served for built-in kinds only; discovery stays JSON.
    let protobuf_served = parse_path(req.uri().path())
        .filter(|info| !info.resource.is_empty())
        .and_then(|info| {
            state
                .server
                .resolve(&info.group, &info.version, &info.resource)
        })
        .is_some_and(|rt| !rt.is_custom());
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let format = match negotiate(accept, protobuf_served) {
        Ok(format) => format,
        // The 406 itself is a `Status`, which has a protobuf message whatever the resource:
        // written in what `Accept` prefers (a custom resource asked for in protobuf only gets
        // its 406 in protobuf from kube-apiserver).
        Err(e) => {
            let format = negotiate(accept, true).unwrap_or(Format::Json);
            return encode_response(error_response(&e), format).await;
        }
    };
    let resp = match handle(state, req, format).await {
        Ok(resp) => resp,
        Err(e) => error_response(&e),
    };
    encode_response(resp, format).await
}

/// Re-encodes a JSON answer (an object, a list or a `Status`) in the negotiated format. Watch
/// streams are encoded as they are written, and `Table`s have no protobuf form (JSON stays).
async fn encode_response(resp: Response, format: Format) -> Response {
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v == "application/json");
    if format == Format::Json
        || !is_json
        || resp.headers().contains_key(header::TRANSFER_ENCODING)
        || resp.extensions().get::<stream::Streamed>().is_some()
    {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return error_response(&ApiError::internal("reading a response to re-encode"));
    };
    let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let encoded = match format {
        Format::Protobuf if value["kind"] != "Table" => protobuf::encode(&value)
            .map(|b| (b, protobuf::MEDIA_TYPE))
            .map_err(|e| e.to_string()),
        Format::Yaml => serde_yaml_ng::to_string(&value)
            .map(|y| (y.into_bytes(), "application/yaml"))
            .map_err(|e| e.to_string()),
        _ => return Response::from_parts(parts, Body::from(bytes)),
    };
    match encoded {
        Ok((body, media_type)) => {
            parts
                .headers
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(media_type));
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(body))
        }
        Err(e) => error_response(&ApiError::internal(format!(
            "encoding the response as {format:?}: {e}"
        ))),
    }
}

/// A protobuf request body as the JSON the rest of the server handles; other bodies unchanged.
/// Custom resources have no protobuf form: their bodies are refused as kube-apiserver refuses
/// them (415).
fn body_as_json(
    rt: &crate::registry::ResourceType,
    content_type: &mut String,
    body: Bytes,
) -> Result<Bytes, ApiError> {
    if !content_type.starts_with(protobuf::MEDIA_TYPE) {
        return Ok(body);
    }
    if rt.is_custom() {
        return Err(ApiError::unsupported_media_type(
            content_type,
            &["application/json", "application/yaml"],
        ));
    }
    let object = protobuf::decode(&body).map_err(|e| {
        ApiError::bad_request(format!(
            "the body of the request is not a valid protobuf object: {e}"
        ))
    })?;
    *content_type = "application/json".into();
    Ok(Bytes::from(serde_json::to_vec(&object).unwrap_or_default()))
}

/// A `Content-Type`'s media type without its parameters, in lower case (`application/json`).
pub(crate) fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// `NegotiateInputSerializer` for a create or an update: the body's media type is one the
/// resource decodes, or kube-apiserver's 415 (a plain `Status`, no details).
fn accepts_body(rt: &crate::registry::ResourceType, content_type: &str) -> Result<(), ApiError> {
    let media_type = media_type(content_type);
    let mut accepted = vec!["application/json", "application/yaml"];
    if !rt.is_custom() {
        accepted.push(protobuf::MEDIA_TYPE);
    }
    if accepted.contains(&media_type.as_str()) {
        return Ok(());
    }
    Err(ApiError::new(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: {}",
            accepted.join(", ")
        ),
    ))
}

async fn handle(state: HttpState, req: Request, format: Format) -> Result<Response, ApiError> {
    let path = req.uri().path().to_string();
    if let ["apis", group] = path
        .trim_matches('/')
        .split('/')
        .collect::<Vec<_>>()
        .as_slice()
    {
        return discovery::group(&state.server, group).map(|g| json_response(StatusCode::OK, &g));
    }
    let info = parse_path(&path).ok_or_else(ApiError::path_not_found)?;
    let server = state.server.clone();
    if info.resource.is_empty() {
        return discovery::group_or_resources(&server, &info.group, &info.version)
            .map(|body| json_response(StatusCode::OK, &body));
    }
    let rt = server
        .resolve(&info.group, &info.version, &info.resource)
        .ok_or_else(ApiError::path_not_found)?;
    let sub_ok = info.subresource.is_empty()
        || (info.subresource == "status"
            && rt
                .version(&info.version)
                .is_some_and(|v| v.status_subresource))
        || rt.extra_subresources.contains(&info.subresource.as_str())
        || (info.subresource == "scale"
            && crate::apiserver::scale::paths(&rt, &info.version).is_some());
    if !sub_ok && !rt.is_custom() && (rt.namespaced || info.namespace.is_empty()) {
        let listed = crate::builtins::find(&rt.group, &info.version, &rt.plural)
            .is_some_and(|b| b.subresources.iter().any(|s| s.name == info.subresource));
        if listed {
            // Their REST storages read the pod (the node, the service) first: a missing one is
            // kube-apiserver's 404 for it.
            if !info.name.is_empty() {
                server.get(&Target::new(
                    rt.clone(),
                    &info.version,
                    &info.namespace,
                    &info.name,
                ))?;
            }
            // Discovery lists it as kube-apiserver does, but nothing runs in the sandbox to
            // answer it (logs, exec, proxies…): refuse it plainly instead of serving the parent.
            return Err(ApiError::method_not_allowed(format!(
                "the Lien sandbox does not serve {}/{}: it stores objects and runs no workloads",
                rt.plural, info.subresource
            )));
        }
    }
    if !sub_ok || (!rt.namespaced && !info.namespace.is_empty()) {
        return Err(ApiError::path_not_found());
    }
    if !rt.is_custom() && info.subresource.is_empty() {
        let verb = match (req.method(), info.name.is_empty()) {
            (&Method::GET, false) => "get",
            (&Method::GET, true) => "list",
            (&Method::POST, _) => "create",
            (&Method::PUT, _) => "update",
            (&Method::PATCH, _) => "patch",
            (&Method::DELETE, false) => "delete",
            (&Method::DELETE, true) => "deletecollection",
            _ => "",
        };
        if !verb.is_empty() && !rt.verbs.contains(&verb) {
            // kube-apiserver installs a route per verb its storage implements
            // (staging/src/k8s.io/apiserver/pkg/endpoints/installer.go); any other method on
            // the path is go-restful's 405.
            return Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            ));
        }
    }
    let target = Target::new(rt.clone(), &info.version, &info.namespace, &info.name)
        .with_subresource(&info.subresource);
    let user = req
        .extensions()
        .get::<UserInfo>()
        .cloned()
        .unwrap_or_else(crate::apiserver::system_admin);
    let query = query_map(&req);
    let table = wants_table(req.headers());
    let method = req.method().clone();
    let mut content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let user_agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = axum::body::to_bytes(req.into_body(), MAX_BODY)
        .await
        .map_err(|_| ApiError::too_large("the request body is too large"))?;
    let write = write_options(&query, user.clone(), &user_agent, &method, &content_type)?;
    if matches!(method, Method::POST | Method::PUT) && info.subresource.is_empty() {
        accepts_body(&rt, &content_type)?;
    }
    let body = body_as_json(&rt, &mut content_type, body)?;
    let q = |k: &str| query.get(k).map(String::as_str);

    if matches!(
        info.subresource.as_str(),
        "eviction" | "ephemeralcontainers" | "binding"
    ) {
        // Routes exist only for the verbs the subresource's storage implements.
        let verb = req_method_verb(&method).unwrap_or_default();
        let served = crate::builtins::find(&rt.group, &info.version, &rt.plural)
            .and_then(|b| b.subresources.iter().find(|s| s.name == info.subresource))
            .is_some_and(|s| s.verbs.contains(&verb));
        if !served {
            return Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            ));
        }
    }
    if info.subresource == "scale" && !info.name.is_empty() {
        return scale(&server, &target, method, &content_type, &body, write).await;
    }
    match (method, info.name.is_empty()) {
        (Method::GET, true) if q("watch").is_some_and(query_bool) => {
            if format == Format::Yaml {
                // A watch has stream serializers for JSON and protobuf only (the watch
                // handler's negotiation), so YAML is not acceptable, as kube-apiserver says.
                let mut accepted = vec!["application/json;stream=watch"];
                if !rt.is_custom() {
                    accepted.push("application/vnd.kubernetes.protobuf;stream=watch");
                }
                return Err(negotiate::not_acceptable(&accepted));
            }
            let opts = watch_options(&query)?;
            let timeout = opts.timeout.unwrap_or(server.config.default_watch_timeout);
            let stream = server.watch(&target, opts)?;
            Ok(watch_response(
                server.config.bookmark_interval,
                stream,
                timeout,
                table,
                format == Format::Protobuf && !table,
            ))
        }
        (Method::GET, true) => {
            let opts = list_options(&query)?;
            // Unlimited lists are written as they are read (JSON, protobuf, and Tables, which
            // stay JSON whatever was negotiated); YAML is encoded from the whole list.
            if format != Format::Yaml
                && let Some(lazy) = server.list_lazily(&target, &opts)?
            {
                return if table {
                    Ok(stream::table(&rt, &info.version, lazy, q("includeObject")))
                } else if format == Format::Protobuf {
                    stream::protobuf_list(lazy).await
                } else {
                    Ok(stream::list(lazy))
                };
            }
            let mut list = server.list(&target, &opts)?;
            let body = if table {
                table::list_to_table(&rt, &info.version, &list, q("includeObject"))
            } else {
                if !rt.is_custom() {
                    for item in list["items"].as_array_mut().into_iter().flatten() {
                        if let Some(item) = item.as_object_mut() {
                            // `shift_remove`: the other fields keep their order, as streamed.
                            item.shift_remove("apiVersion");
                            item.shift_remove("kind");
                        }
                    }
                }
                list
            };
            Ok(deprecated(&rt, json_response(StatusCode::OK, &body)))
        }
        (Method::GET, false) => {
            let object = server.get(&target)?;
            let body = if table {
                table::objects_to_table(
                    &rt,
                    &info.version,
                    std::slice::from_ref(&object),
                    object["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or_default(),
                    q("includeObject"),
                )
            } else {
                object
            };
            Ok(deprecated(&rt, json_response(StatusCode::OK, &body)))
        }
        (Method::POST, true) => {
            let object = parse_json(&body)?;
            let write = WriteOptions {
                raw_body: Some(body.clone()),
                ..write
            };
            let w = server.create(&target, object, &write).await?;
            Ok(with_warnings(
                json_response(StatusCode::CREATED, &w.object),
                &w.warnings,
            ))
        }
        (Method::POST, false) if info.subresource == "eviction" => {
            let object = parse_json(&body)?;
            let status = server.evict(&target, object, &write).await?;
            Ok(json_response(StatusCode::CREATED, &status))
        }
        (Method::POST, false) if info.subresource == "binding" => {
            let binding = parse_json(&body)?;
            let status = server.bind(&target, &binding, &write)?;
            Ok(json_response(StatusCode::CREATED, &status))
        }
        (Method::POST, false) if info.subresource == "token" => {
            let object = parse_json(&body)?;
            let answer = server.token_request(&target, object)?;
            Ok(json_response(StatusCode::CREATED, &answer))
        }
        (Method::PUT, false) => {
            let object = parse_json(&body)?;
            let write = WriteOptions {
                raw_body: Some(body.clone()),
                ..write
            };
            let w = server.update(&target, object, &write).await?;
            Ok(with_warnings(
                json_response(StatusCode::OK, &w.object),
                &w.warnings,
            ))
        }
        (Method::PATCH, false) => {
            let kind = patch_kind(&content_type)?;
            let mut write = write;
            write.force = q("force").is_some_and(query_bool);
            let w = server.patch(&target, kind, &body, &write).await?;
            let code = if w.created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(with_warnings(json_response(code, &w.object), &w.warnings))
        }
        (Method::DELETE, false) => {
            let opts = delete_options(&query, &body, write)?;
            let (outcome, warnings) = server.delete_with_warnings(&target, &opts).await?;
            let (code, body) = delete_response(&rt, &opts, outcome);
            Ok(with_warnings(json_response(code, &body), &warnings))
        }
        (Method::DELETE, true) => {
            let list_opts = list_options(&query)?;
            let opts = delete_options(&query, &body, write)?;
            let deleted = server.delete_collection(&target, &list_opts, &opts).await?;
            let list = json!({
                "kind": rt.list_kind,
                "apiVersion": rt.api_version(&info.version),
                "metadata": {"resourceVersion": server.revision().to_string()},
                "items": deleted,
            });
            Ok(json_response(StatusCode::OK, &list))
        }
        _ => Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        )),
    }
}

/// The verb of a request on one object's subresource.
fn req_method_verb(method: &Method) -> Option<&'static str> {
    Some(match *method {
        Method::GET => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => return None,
    })
}

/// `…/scale`: get, update and patch of the `autoscaling/v1` Scale.
async fn scale(
    server: &ApiServer,
    target: &Target,
    method: Method,
    content_type: &str,
    body: &Bytes,
    write: WriteOptions,
) -> Result<Response, ApiError> {
    use crate::apiserver::scale::ScaleChange;
    let change = match method {
        Method::GET => {
            return Ok(json_response(StatusCode::OK, &server.get_scale(target)?));
        }
        Method::PUT => ScaleChange::Update(parse_json(body)?),
        // `force` is not read: a Scale takes no apply patch, and its writes are admitted with
        // UpdateOptions.
        Method::PATCH => ScaleChange::Patch(patch_kind(content_type)?, body),
        _ => {
            return Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            ));
        }
    };
    let w = server.write_scale(target, change, &write).await?;
    Ok(with_warnings(
        json_response(StatusCode::OK, &w.object),
        &w.warnings,
    ))
}

/// The patch type a PATCH's `Content-Type` names, or the 415 kube-apiserver gives.
fn patch_kind(content_type: &str) -> Result<PatchKind, ApiError> {
    PatchKind::from_content_type(content_type).ok_or_else(|| {
        ApiError::unsupported_media_type(
            content_type,
            &[
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/apply-patch+yaml",
                "application/strategic-merge-patch+json",
            ],
        )
    })
}

/// What kube-apiserver answers to a DELETE of one object (`endpoints/handlers/delete.go` and
/// `registry/generic/registry/store.go`): an object still waiting for finalizers is returned as it
/// now is, with 202 Accepted only if the client set the deprecated `orphanDependents: false`; a
/// deleted object is returned itself by the registries that set `ReturnDeletedObject`, else
/// `finalizeDelete` answers a `Status` naming it.
fn delete_response(
    rt: &crate::registry::ResourceType,
    opts: &DeleteOptions,
    outcome: DeleteOutcome,
) -> (StatusCode, Value) {
    match outcome {
        DeleteOutcome::Pending(o) => {
            let code = if opts.orphan_dependents == Some(false) {
                StatusCode::ACCEPTED
            } else {
                StatusCode::OK
            };
            (code, o)
        }
        DeleteOutcome::Deleted(mut o) if crate::strategy::of(rt).returns_deleted_object() => {
            // A Pod is deleted gracefully: kube-apiserver's `BeforeDelete` marks it first
            // (deletion timestamp, and grace period 0 for a Pod no kubelet runs) and answers
            // it so marked, though it is gone at once.
            if rt.group.is_empty() && rt.plural == "pods" && !crate::object::is_deleting(&o) {
                o["metadata"]["deletionTimestamp"] = json!(crate::object::now());
                o["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            }
            (StatusCode::OK, o)
        }
        DeleteOutcome::Deleted(o) => (StatusCode::OK, success_status(&rt.group, &rt.plural, &o)),
    }
}

fn success_status(group: &str, plural: &str, object: &Value) -> Value {
    let mut details = json!({
        "name": object["metadata"]["name"],
        "kind": plural,
        "uid": object["metadata"]["uid"],
    });
    if !group.is_empty() {
        details["group"] = json!(group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

fn parse_json(body: &Bytes) -> Result<Value, ApiError> {
    // YAML is a superset of JSON; kubectl sends JSON, but `curl --data-binary @x.yaml` works on
    // kube-apiserver too.
    serde_json::from_slice(body).or_else(|json_err| {
        let unrecognized =
            || ApiError::bad_request(format!("the object provided is unrecognized: {json_err}"));
        // A body the YAML decoder would refuse for its depth, refused before its parser spends
        // O(depth²) on it (`crate::nesting`).
        if crate::nesting::too_deep(body) {
            return Err(unrecognized());
        }
        serde_yaml_ng::from_slice::<Value>(body).map_err(|_| unrecognized())
    })
}

/// The default field manager kube-apiserver derives from the user agent (`kubectl/v1.32.0 …`
/// → `kubectl`).
fn default_manager(user_agent: &str) -> String {
    user_agent
        .split('/')
        .next()
        .unwrap_or_default()
        .chars()
        .take(128)
        .collect()
}

/// The options kind a write verb decodes its query into, as kube's handlers name it in a 422.
fn write_options_kind(method: &Method) -> Option<&'static str> {
    match *method {
        Method::POST => Some("CreateOptions"),
        Method::PUT => Some("UpdateOptions"),
        Method::PATCH => Some("PatchOptions"),
        _ => None,
    }
}

/// A write's options from its query, validated as kube's create, update and patch handlers
/// validate them before reading the body (`ValidateCreateOptions`, `…UpdateOptions`,
/// `…PatchOptions`). A DELETE's are validated with its body ([`delete_options`]).
fn write_options(
    query: &std::collections::HashMap<String, String>,
    user: UserInfo,
    user_agent: &str,
    method: &Method,
    content_type: &str,
) -> Result<WriteOptions, ApiError> {
    let dry_run: Vec<String> = query
        .get("dryRun")
        .filter(|v| !v.is_empty())
        .cloned()
        .into_iter()
        .collect();
    let field_validation = query.get("fieldValidation").map_or("", String::as_str);
    let explicit_manager = query.get("fieldManager").map(String::as_str);
    if let Some(kind) = write_options_kind(method) {
        let patch = (*method == Method::PATCH).then(|| {
            (
                PatchKind::from_content_type(content_type) == Some(PatchKind::Apply),
                query.contains_key("force"),
            )
        });
        crate::apiserver::invalid_options(
            kind,
            crate::apiserver::validate_write_options(
                explicit_manager,
                &dry_run,
                field_validation,
                patch,
            ),
        )?;
    }
    let manager = explicit_manager
        .map(str::to_string)
        .unwrap_or_else(|| default_manager(user_agent));
    Ok(WriteOptions {
        user,
        dry_run: !dry_run.is_empty(),
        field_manager: manager,
        field_validation: FieldValidation::parse(field_validation),
        force: false,
        raw_body: None,
        sent: crate::apiserver::SentWriteOptions {
            field_manager: explicit_manager.map(str::to_string),
            field_validation: query.get("fieldValidation").cloned(),
        },
    })
}

fn list_options(
    query: &std::collections::HashMap<String, String>,
) -> Result<ListOptions, ApiError> {
    let mut opts = ListOptions::parse(
        query.get("labelSelector").map(String::as_str),
        query.get("fieldSelector").map(String::as_str),
    )?;
    // A limit of zero or less is no limit (kube's `ListOptions.Limit` is an int64 it ignores
    // unless positive).
    opts.limit = match query.get("limit") {
        Some(l) if !l.is_empty() => {
            let limit: i64 = l
                .parse()
                .map_err(|_| ApiError::bad_request(format!("invalid limit: {l}")))?;
            usize::try_from(limit).ok().filter(|l| *l > 0)
        }
        _ => None,
    };
    let text = |k: &str| query.get(k).map_or("", String::as_str);
    crate::apiserver::validate_list_options(&crate::apiserver::SentListOptions {
        watch: query.get("watch").is_some_and(|v| query_bool(v)),
        resource_version: text("resourceVersion"),
        resource_version_match: text("resourceVersionMatch"),
        continue_token: text("continue"),
        send_initial_events: query.get("sendInitialEvents").map(|v| query_bool(v)),
    })?;
    opts.continue_token = query.get("continue").filter(|c| !c.is_empty()).cloned();
    opts.resource_version = query
        .get("resourceVersion")
        .filter(|c| !c.is_empty())
        .cloned();
    opts.resource_version_match = query
        .get("resourceVersionMatch")
        .filter(|c| !c.is_empty())
        .cloned();
    Ok(opts)
}

fn watch_options(
    query: &std::collections::HashMap<String, String>,
) -> Result<WatchOptions, ApiError> {
    let list = list_options(query)?;
    let timeout = match query.get("timeoutSeconds") {
        Some(t) if !t.is_empty() => {
            Some(Duration::from_secs(t.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid timeoutSeconds: {t}"))
            })?))
        }
        _ => None,
    };
    Ok(WatchOptions {
        list,
        allow_bookmarks: query
            .get("allowWatchBookmarks")
            .is_some_and(|v| query_bool(v)),
        send_initial_events: query
            .get("sendInitialEvents")
            .is_some_and(|v| query_bool(v)),
        timeout,
    })
}

/// A DELETE's options: from its body when it has one, else from its query — kube's delete
/// handler reads one or the other — validated as `ValidateDeleteOptions` validates them.
fn delete_options(
    query: &std::collections::HashMap<String, String>,
    body: &Bytes,
    write: WriteOptions,
) -> Result<DeleteOptions, ApiError> {
    let mut opts = DeleteOptions::new(write.user.clone());
    opts.write = write;
    let sent = if body.is_empty() {
        crate::apiserver::SentDeleteOptions {
            orphan_dependents: query.get("orphanDependents").map(|o| query_bool(o)),
            propagation: query
                .get("propagationPolicy")
                .filter(|p| !p.is_empty())
                .cloned(),
            dry_run: query
                .get("dryRun")
                .filter(|v| !v.is_empty())
                .cloned()
                .into_iter()
                .collect(),
            ..Default::default()
        }
    } else {
        crate::apiserver::SentDeleteOptions::from_body(&delete_body(body)?)
    };
    opts.apply(sent)?;
    Ok(opts)
}

/// A DELETE's body, decoded as kube's delete handler decodes it: JSON or YAML into a
/// `DeleteOptions`; what does not decode is its 500 (`couldn't get version/kind; json parse
/// error: …`, the decoder's words, not a `StatusError`).
fn delete_body(body: &Bytes) -> Result<Value, ApiError> {
    match parse_json(body) {
        Ok(value) if value.is_object() => Ok(value),
        _ => Err(ApiError::new(
            500,
            "",
            format!(
                "couldn't get version/kind; json parse error: {}",
                crate::http::go_json::syntax_error(body)
            ),
        )),
    }
}

fn watch_response(
    bookmark_every: Duration,
    mut stream: crate::apiserver::WatchStream,
    timeout: Duration,
    table: bool,
    protobuf: bool,
) -> Response {
    let rt = stream.target.resource.clone();
    let version = stream.target.version.clone();
    let events = async_stream_lines(move |tx| async move {
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut bookmark =
            tokio::time::interval_at(tokio::time::Instant::now() + bookmark_every, bookmark_every);
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                event = stream.next(&mut bookmark) => {
                    let Some(mut event) = event else { return };
                    if table && event.type_ != "BOOKMARK" && event.type_ != "ERROR" {
                        let rv = event.object["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string();
                        event.object = table::objects_to_table(&rt, &version, std::slice::from_ref(&event.object), &rv, None);
                    }
                    let line = if protobuf {
                        match protobuf::encode_watch_frame(event.type_, &event.object) {
                            Ok(frame) => frame,
                            Err(e) => {
                                tracing::warn!("a watch event has no protobuf form: {e}");
                                return;
                            }
                        }
                    } else {
                        let mut line = serde_json::to_vec(&event.to_json()).unwrap_or_default();
                        line.push(b'\n');
                        line
                    };
                    if tx.send(Bytes::from(line)).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        // kube-apiserver's watch handler: `;stream=watch` on every type but JSON.
        .header(
            header::CONTENT_TYPE,
            if protobuf {
                protobuf::WATCH_MEDIA_TYPE
            } else {
                "application/json"
            },
        )
        .header(header::TRANSFER_ENCODING, "chunked")
        .body(Body::from_stream(events.map(Ok::<Bytes, std::io::Error>)))
        .unwrap_or_else(|_| error_response(&ApiError::internal("watch response")))
}

/// Runs a producer task that sends lines into a bounded channel and exposes it as a stream.
fn async_stream_lines<F, Fut>(producer: F) -> impl futures::Stream<Item = Bytes>
where
    F: FnOnce(tokio::sync::mpsc::Sender<Bytes>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(producer(tx));
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse_like_kube_apiserver_routes() {
        let p = parse_path("/api/v1/namespaces/a/configmaps/b").expect("ok");
        assert_eq!(
            (p.namespace.as_str(), p.resource.as_str(), p.name.as_str()),
            ("a", "configmaps", "b")
        );
        let p = parse_path("/api/v1/namespaces/a/finalize").expect("ok");
        assert_eq!(
            (p.resource.as_str(), p.name.as_str(), p.subresource.as_str()),
            ("namespaces", "a", "finalize")
        );
        let p = parse_path("/api/v1/namespaces/a").expect("ok");
        assert_eq!((p.resource.as_str(), p.name.as_str()), ("namespaces", "a"));
        let p = parse_path("/apis/example.org/v1/widgets").expect("ok");
        assert_eq!(
            (p.group.as_str(), p.resource.as_str()),
            ("example.org", "widgets")
        );
        let p = parse_path("/apis/example.org/v1/namespaces/n/widgets/w/status").expect("ok");
        assert_eq!(p.subresource, "status");
        assert!(parse_path("/foo").is_none());
    }

    #[test]
    fn query_values_are_percent_decoded() {
        let pairs = url_pairs("labelSelector=app%20in%20(a%2Cb)&x=1+2");
        assert_eq!(pairs[0].1, "app in (a,b)");
        assert_eq!(pairs[1].1, "1 2");
    }
}
