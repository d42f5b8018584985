//! The protobuf wire format and content negotiation, over raw HTTP with k8s-pb's prost types as
//! the client's encoder (what client-go sends when configured for protobuf, as kubectl is).

use k8s_pb::api::core::v1 as pb;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pbmeta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use kube::api::Api;
use prost::Message as _;
use serde_json::json;

use crate::common;
use crate::support::{Reply, request, widget_crd};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// What client-go sends when configured for protobuf (kubectl's typed clients).
const PROTOBUF_THEN_JSON: &str = "application/vnd.kubernetes.protobuf,application/json";

/// The typeMeta and message of a `k8s\0` + `runtime.Unknown` answer.
fn unknown(answer: &Reply) -> (String, String, Vec<u8>) {
    assert_eq!(
        answer.content_type,
        PROTOBUF,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    open(&answer.body)
}

fn open(bytes: &[u8]) -> (String, String, Vec<u8>) {
    let rest = bytes
        .strip_prefix(b"k8s\0")
        .expect("protobuf.go's magic number");
    let unknown = Unknown::decode(rest).expect("a runtime.Unknown");
    let meta = unknown.type_meta.unwrap_or_default();
    (
        meta.api_version.unwrap_or_default(),
        meta.kind.unwrap_or_default(),
        unknown.raw.unwrap_or_default(),
    )
}

fn envelope(api_version: &str, kind: &str, message: &impl prost::Message) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(message.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = b"k8s\0".to_vec();
    out.extend(unknown.encode_to_vec());
    out
}

async fn call(
    client: &kube::Client,
    method: &str,
    path: &str,
    accept: &str,
    content_type: &str,
    body: Vec<u8>,
) -> Reply {
    let headers = [("accept", accept), ("content-type", content_type)];
    request(client, method, path, &headers, body).await
}

/// A GET, its content type empty as [`call`] sends it.
async fn get(client: &kube::Client, path: &str, accept: &str) -> Reply {
    call(client, "GET", path, accept, "", vec![]).await
}

fn config_map(name: &str) -> pb::ConfigMap {
    pb::ConfigMap {
        metadata: Some(pbmeta::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        }),
        data: [("a".to_string(), "b".to_string())].into(),
        binary_data: [("bin".to_string(), vec![0, 255, 1])].into(),
        ..Default::default()
    }
}

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// POSTs ConfigMap `name` (see [`config_map`]) as a protobuf body, the answer in `accept`.
async fn create(client: &kube::Client, name: &str, accept: &str) -> Reply {
    let body = envelope("v1", "ConfigMap", &config_map(name));
    call(client, "POST", CONFIGMAPS, accept, PROTOBUF, body).await
}

/// k/k `staging/src/k8s.io/apimachinery/pkg/runtime/serializer/protobuf/protobuf.go`: a
/// protobuf object is `k8s\0` + `runtime.Unknown{typeMeta, raw}`; kube-apiserver decodes such a
/// body for a built-in kind, and answers in protobuf when the `Accept` header prefers it
/// (`negotiation/negotiate.go`, `NegotiateOutputMediaType`).
#[tokio::test]
async fn a_protobuf_body_is_stored_and_answered_in_protobuf() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let created = create(&client, "pb", PROTOBUF_THEN_JSON).await;
    assert_eq!(
        created.status,
        201,
        "{}",
        String::from_utf8_lossy(&created.body)
    );
    let (api_version, kind, raw) = unknown(&created);
    assert_eq!((api_version.as_str(), kind.as_str()), ("v1", "ConfigMap"));
    let answer = pb::ConfigMap::decode(raw.as_slice()).expect("a ConfigMap message");
    let meta = answer.metadata.expect("metadata");
    assert_eq!(meta.name.as_deref(), Some("pb"));
    assert!(meta.uid.is_some_and(|u| !u.is_empty()));
    assert!(meta.creation_timestamp.and_then(|t| t.seconds).is_some());
    assert_eq!(answer.binary_data.get("bin"), Some(&vec![0, 255, 1]));

    // The same object read as JSON: what a JSON client stored would look like.
    let got = get(&client, &format!("{CONFIGMAPS}/pb"), "application/json").await;
    assert_eq!(got.content_type, "application/json");
    let object = got.json();
    assert_eq!(object["data"], json!({"a": "b"}));
    assert_eq!(object["binaryData"], json!({"bin": "AP8B"}));
    assert!(object["metadata"].get("generateName").is_none());
}

/// `negotiation/negotiate.go`: clauses by quality, the client's order among equals; `*/*` gets
/// the first served type (JSON). Lists are `…List` messages and errors a protobuf `Status`
/// (`responsewriters/writers.go`, `ErrorNegotiated`).
#[tokio::test]
async fn accept_chooses_the_answer_format_for_objects_lists_and_errors() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let created = create(&client, "neg", "application/json").await;
    assert_eq!(created.status, 201);
    assert_eq!(created.json()["metadata"]["name"], "neg");

    let path = format!("{CONFIGMAPS}/neg");
    let q = "application/json;q=0.5, application/vnd.kubernetes.protobuf";
    assert_eq!(get(&client, &path, q).await.content_type, PROTOBUF);
    let any = get(&client, &path, "*/*").await;
    assert_eq!(any.content_type, "application/json");

    let list = get(&client, CONFIGMAPS, PROTOBUF).await;
    let (_, kind, raw) = unknown(&list);
    assert_eq!(kind, "ConfigMapList");
    let list = pb::ConfigMapList::decode(raw.as_slice()).expect("a list message");
    assert!(
        list.items
            .iter()
            .any(|c| c.metadata.as_ref().and_then(|m| m.name.as_deref()) == Some("neg"))
    );

    let missing = get(&client, &format!("{CONFIGMAPS}/nope"), PROTOBUF).await;
    assert_eq!(missing.status, 404);
    let (api_version, kind, raw) = unknown(&missing);
    assert_eq!((api_version.as_str(), kind.as_str()), ("v1", "Status"));
    let status = pbmeta::Status::decode(raw.as_slice()).expect("a Status message");
    assert_eq!(status.reason.as_deref(), Some("NotFound"));
    assert_eq!(
        status.message.as_deref(),
        Some("configmaps \"nope\" not found")
    );

    let html = get(&client, &path, "text/html").await;
    assert_eq!(html.status, 406);
    assert_eq!(html.json()["reason"], "NotAcceptable");
}

/// Custom resources have no protobuf form: apiextensions-apiserver serves them as JSON and YAML
/// only (k/k PR 77817, `customresource_handler.go`): a protobuf-only `Accept` is 406 `only the
/// following media types are accepted: application/json, application/yaml` (itself in
/// protobuf), a protobuf body 415,
/// and `protobuf,json` gets JSON.
#[tokio::test]
async fn custom_resources_are_json_only() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    widget_crd(&client).await;
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    let refused = get(&client, path, PROTOBUF).await;
    assert_eq!(refused.status, 406);
    // The refusal is a `Status`, which has a protobuf form: kube-apiserver writes it in the
    // protobuf the client asked for (the differential's `crd/get-widget-protobuf`).
    let (_, kind, raw) = unknown(&refused);
    assert_eq!(kind, "Status");
    let status = pbmeta::Status::decode(raw.as_slice()).expect("a Status message");
    assert_eq!(
        status.message.as_deref(),
        Some("only the following media types are accepted: application/json, application/yaml")
    );
    let json = get(&client, path, PROTOBUF_THEN_JSON).await;
    assert_eq!(
        (json.status, json.content_type.as_str()),
        (200, "application/json")
    );
    let body = envelope("example.com/v1", "Widget", &config_map("w"));
    let unsupported = call(&client, "POST", path, "application/json", PROTOBUF, body).await;
    assert_eq!(unsupported.status, 415);
    assert_eq!(unsupported.json()["reason"], "UnsupportedMediaType");
}

/// A body that is not a protobuf object is a 400 naming what is wrong, not a crash.
#[tokio::test]
async fn a_malformed_protobuf_body_is_a_bad_request() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    for (body, says) in [
        (b"{\"kind\":\"ConfigMap\"}".to_vec(), "magic number"),
        (b"k8s\0\x0a\x05\x0a\x02v1".to_vec(), "runs past the end"),
        (
            envelope("v1", "NoSuchKind", &config_map("x")),
            "no kind \"NoSuchKind\"",
        ),
    ] {
        let answer = call(
            &client,
            "POST",
            CONFIGMAPS,
            "application/json",
            PROTOBUF,
            body,
        )
        .await;
        assert_eq!(answer.status, 400);
        let message = answer.json()["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(message.contains(says), "{message}");
    }
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::default_namespaced(client);
    assert!(cms.get_opt("x").await.expect("get").is_none());
}

/// A protobuf watch (`Accept: application/vnd.kubernetes.protobuf;stream=watch`) is a stream of
/// frames, each a 4-byte big-endian length and a `WatchEvent` whose `object.raw` is the object's
/// own protobuf envelope (protobuf.go's `RawSerializer`, `streaming/streaming.go`,
/// `framer/framer.go` length-delimited framing); the content type carries `;stream=watch`.
#[tokio::test]
async fn a_protobuf_watch_is_length_framed_watch_events() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    assert_eq!(create(&client, "watched", PROTOBUF).await.status, 201);
    // The stream ends at its timeout, so the whole body can be read.
    let watch = request(
        &client,
        "GET",
        &format!("{CONFIGMAPS}?watch=true&timeoutSeconds=1&fieldSelector=metadata.name%3Dwatched"),
        &[("accept", "application/vnd.kubernetes.protobuf;stream=watch")],
        vec![],
    )
    .await;
    assert_eq!(
        watch.content_type,
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    let bytes = watch.body;
    let len = u32::from_be_bytes(bytes[..4].try_into().expect("a length")) as usize;
    let event = pbmeta::WatchEvent::decode(&bytes[4..4 + len]).expect("a WatchEvent");
    assert_eq!(event.r#type.as_deref(), Some("ADDED"));
    let raw = event.object.and_then(|o| o.raw).expect("the object");
    let (_, kind, raw) = open(&raw);
    assert_eq!(kind, "ConfigMap");
    let cm = pb::ConfigMap::decode(raw.as_slice()).expect("a ConfigMap");
    assert_eq!(cm.metadata.and_then(|m| m.name).as_deref(), Some("watched"));
}

/// A DELETE body in protobuf is a `DeleteOptions` (meta/v1) like its JSON form: a wrong
/// `preconditions.uid` is a 409 Conflict and the object stays (k/k
/// `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/delete.go` decodes the body with the
/// request's content type).
#[tokio::test]
async fn a_protobuf_delete_options_body_is_honoured() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    assert_eq!(
        create(&client, "kept", "application/json").await.status,
        201
    );
    let options = pbmeta::DeleteOptions {
        preconditions: Some(pbmeta::Preconditions {
            uid: Some("not-the-uid".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let body = envelope("v1", "DeleteOptions", &options);
    let path = format!("{CONFIGMAPS}/kept");
    let refused = call(&client, "DELETE", &path, PROTOBUF_THEN_JSON, PROTOBUF, body).await;
    assert_eq!(
        refused.status,
        409,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    let (_, kind, raw) = unknown(&refused);
    assert_eq!(kind, "Status");
    let status = pbmeta::Status::decode(raw.as_slice()).expect("a Status");
    assert_eq!(status.reason.as_deref(), Some("Conflict"));
    let still = get(&client, &path, "application/json").await;
    assert_eq!(still.status, 200);
}

/// A body nested far deeper than any object (100,000 `[`, 200 KB) is refused 400 — as JSON, as
/// the YAML it falls back to, and as a server-side apply body — in one pass over it: the YAML
/// parser used to spend O(depth²) first (more than 30 s of a core here) only to refuse it at
/// its depth limit all the same.
#[tokio::test]
async fn a_deeply_nested_body_is_refused_at_once() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let deep = "[".repeat(100_000) + &"]".repeat(100_000);
    let object = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"deep"}},"data":{deep}}}"#
    );
    let started = std::time::Instant::now();
    let created = request(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[("content-type", "application/json")],
        object.clone().into_bytes(),
    )
    .await;
    assert_eq!(created.status, 400, "{}", created.json_or_null());
    let message = created.json()["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.starts_with("the object provided is unrecognized: recursion limit exceeded"),
        "{message}"
    );
    let applied = request(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/deep?fieldManager=test",
        &[("content-type", "application/apply-patch+yaml")],
        object.into_bytes(),
    )
    .await;
    assert_eq!(applied.status, 400, "{}", applied.json_or_null());
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?} for two refusals",
        started.elapsed()
    );
    sandbox.shutdown().await;
}

/// "API discovery": `/api` tells clients where the server is — its address with its port, as
/// kube-apiserver advertises it (checked against v1.32.13: differential entry
/// `server-address-without-port`).
#[tokio::test]
async fn the_legacy_api_advertises_the_address_and_port_served() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let reply = crate::support::request(&client, "GET", "/api", &[], vec![]).await;
    assert_eq!(
        reply.json()["serverAddressByClientCIDRs"],
        serde_json::json!([{"clientCIDR": "0.0.0.0/0", "serverAddress": sandbox.addr().to_string()}])
    );
    sandbox.shutdown().await;
}

/// "API discovery": every resource kept in storage names the hash of the version it is stored
/// at (`storageVersionHash`, what the storage version migrator watches), computed as
/// kube-apiserver computes it — a ConfigMap's is kube-apiserver v1.32.13's own value — and
/// what is not stored (ComponentStatus, bindings, reviews) has none.
#[tokio::test]
async fn discovery_names_the_storage_version_hash_of_stored_resources() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let core = request(&client, "GET", "/api/v1", &[], vec![]).await.json();
    let hash = |name: &str| {
        core["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|r| r["name"] == name)
            .map(|r| r.get("storageVersionHash").cloned())
            .expect("listed")
    };
    assert_eq!(hash("configmaps"), Some(serde_json::json!("qFsyl6wFWjQ=")));
    assert_eq!(hash("componentstatuses"), None);
    assert_eq!(hash("bindings"), None);
    let authz = request(&client, "GET", "/apis/authorization.k8s.io/v1", &[], vec![])
        .await
        .json();
    assert!(
        authz["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .all(|r| r.get("storageVersionHash").is_none()),
        "{authz}"
    );
    sandbox.shutdown().await;
}

/// A refusal of the filter chain (authorization here) is written in what `Accept` prefers, as
/// kube-apiserver's `responsewriters.ErrorNegotiated` writes it: kubectl's protobuf clients get
/// the 403 `Status` in protobuf (the differential's `protobuf/status-forbidden`), a JSON client
/// in JSON.
#[tokio::test]
async fn a_refusal_of_the_filter_chain_is_answered_in_the_negotiated_format() {
    let sandbox =
        common::sandbox_with(|c| c.authorization = lien_sandbox::apiserver::Authorization::Rbac)
            .await;
    let user = common::client_for(&sandbox, "sandbox-user").await;
    let path = "/api/v1/namespaces/kube-system/secrets";
    let answer = get(&user, path, PROTOBUF_THEN_JSON).await;
    assert_eq!(answer.status, 403);
    let (api_version, kind, raw) = unknown(&answer);
    assert_eq!((api_version.as_str(), kind.as_str()), ("v1", "Status"));
    let status = pbmeta::Status::decode(raw.as_slice()).expect("a Status");
    assert_eq!(status.reason.as_deref(), Some("Forbidden"));
    assert_eq!(status.code, Some(403));
    assert!(
        status
            .message
            .as_deref()
            .is_some_and(|m| m.contains("cannot list resource \"secrets\"")),
        "{status:?}"
    );
    let answer = get(&user, path, "application/json").await;
    assert_eq!(
        (answer.status, answer.content_type.as_str()),
        (403, "application/json")
    );
    assert_eq!(answer.json()["reason"], "Forbidden");
    sandbox.shutdown().await;
}
