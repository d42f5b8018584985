//! The protobuf wire format and content negotiation, over raw HTTP with k8s-pb's prost types as
//! the client's encoder (what client-go sends when configured for protobuf, as kubectl is).

use http_body_util::BodyExt;
use k8s_pb::api::core::v1 as pb;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pbmeta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use kube::api::Api;
use prost::Message as _;
use serde_json::{Value, json};

use crate::common;
use crate::support::widget_crd;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// What client-go sends when configured for protobuf (kubectl's typed clients).
const PROTOBUF_THEN_JSON: &str = "application/vnd.kubernetes.protobuf,application/json";

struct Answer {
    status: u16,
    content_type: String,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The typeMeta and message of a `k8s\0` + `runtime.Unknown` body.
    fn unknown(&self) -> (String, String, Vec<u8>) {
        assert_eq!(
            self.content_type,
            PROTOBUF,
            "{}",
            String::from_utf8_lossy(&self.body)
        );
        open(&self.body)
    }
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
) -> Answer {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("accept", accept)
        .header("content-type", content_type)
        .body(body.into())
        .expect("a request");
    let response = client.send(request).await.expect("an answer");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("the body")
        .to_bytes()
        .to_vec();
    Answer {
        status,
        content_type,
        body,
    }
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

/// k/k `staging/src/k8s.io/apimachinery/pkg/runtime/serializer/protobuf/protobuf.go`: a
/// protobuf object is `k8s\0` + `runtime.Unknown{typeMeta, raw}`; kube-apiserver decodes such a
/// body for a built-in kind, and answers in protobuf when the `Accept` header prefers it
/// (`negotiation/negotiate.go`, `NegotiateOutputMediaType`).
#[tokio::test]
async fn a_protobuf_body_is_stored_and_answered_in_protobuf() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let body = envelope("v1", "ConfigMap", &config_map("pb"));
    let created = call(
        &client,
        "POST",
        CONFIGMAPS,
        PROTOBUF_THEN_JSON,
        PROTOBUF,
        body,
    )
    .await;
    assert_eq!(
        created.status,
        201,
        "{}",
        String::from_utf8_lossy(&created.body)
    );
    let (api_version, kind, raw) = created.unknown();
    assert_eq!((api_version.as_str(), kind.as_str()), ("v1", "ConfigMap"));
    let answer = pb::ConfigMap::decode(raw.as_slice()).expect("a ConfigMap message");
    let meta = answer.metadata.expect("metadata");
    assert_eq!(meta.name.as_deref(), Some("pb"));
    assert!(meta.uid.is_some_and(|u| !u.is_empty()));
    assert!(meta.creation_timestamp.and_then(|t| t.seconds).is_some());
    assert_eq!(answer.binary_data.get("bin"), Some(&vec![0, 255, 1]));

    // The same object read as JSON: what a JSON client stored would look like.
    let got = call(
        &client,
        "GET",
        &format!("{CONFIGMAPS}/pb"),
        "application/json",
        "",
        vec![],
    )
    .await;
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
    let body = envelope("v1", "ConfigMap", &config_map("neg"));
    let created = call(
        &client,
        "POST",
        CONFIGMAPS,
        "application/json",
        PROTOBUF,
        body,
    )
    .await;
    assert_eq!(created.status, 201);
    assert_eq!(created.json()["metadata"]["name"], "neg");

    let path = format!("{CONFIGMAPS}/neg");
    let q = "application/json;q=0.5, application/vnd.kubernetes.protobuf";
    assert_eq!(
        call(&client, "GET", &path, q, "", vec![])
            .await
            .content_type,
        PROTOBUF
    );
    let any = call(&client, "GET", &path, "*/*", "", vec![]).await;
    assert_eq!(any.content_type, "application/json");

    let list = call(&client, "GET", CONFIGMAPS, PROTOBUF, "", vec![]).await;
    let (_, kind, raw) = list.unknown();
    assert_eq!(kind, "ConfigMapList");
    let list = pb::ConfigMapList::decode(raw.as_slice()).expect("a list message");
    assert!(
        list.items
            .iter()
            .any(|c| c.metadata.as_ref().and_then(|m| m.name.as_deref()) == Some("neg"))
    );

    let missing = call(
        &client,
        "GET",
        &format!("{CONFIGMAPS}/nope"),
        PROTOBUF,
        "",
        vec![],
    )
    .await;
    assert_eq!(missing.status, 404);
    let (api_version, kind, raw) = missing.unknown();
    assert_eq!((api_version.as_str(), kind.as_str()), ("v1", "Status"));
    let status = pbmeta::Status::decode(raw.as_slice()).expect("a Status message");
    assert_eq!(status.reason.as_deref(), Some("NotFound"));
    assert_eq!(
        status.message.as_deref(),
        Some("configmaps \"nope\" not found")
    );

    let html = call(&client, "GET", &path, "text/html", "", vec![]).await;
    assert_eq!(html.status, 406);
    assert_eq!(html.json()["reason"], "NotAcceptable");
}

/// Custom resources have no protobuf form: apiextensions-apiserver serves them as JSON and YAML
/// only (k/k PR 77817, `customresource_handler.go`): a protobuf-only `Accept` is 406 `only the
/// following media types are accepted: application/json, application/yaml`, a protobuf body 415,
/// and `protobuf,json` gets JSON.
#[tokio::test]
async fn custom_resources_are_json_only() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    widget_crd(&client).await;
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    let refused = call(&client, "GET", path, PROTOBUF, "", vec![]).await;
    assert_eq!(refused.status, 406);
    assert_eq!(
        refused.json()["message"],
        "only the following media types are accepted: application/json, application/yaml"
    );
    let json = call(&client, "GET", path, PROTOBUF_THEN_JSON, "", vec![]).await;
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
    let body = envelope("v1", "ConfigMap", &config_map("watched"));
    assert_eq!(
        call(&client, "POST", CONFIGMAPS, PROTOBUF, PROTOBUF, body)
            .await
            .status,
        201
    );
    let request = http::Request::builder()
        .uri(format!("{CONFIGMAPS}?watch=true&timeoutSeconds=1"))
        .header("accept", "application/vnd.kubernetes.protobuf;stream=watch")
        .body(Vec::new().into())
        .expect("a request");
    let response = client.send(request).await.expect("an answer");
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/vnd.kubernetes.protobuf;stream=watch")
    );
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("the stream ends at its timeout")
        .to_bytes();
    let len = u32::from_be_bytes(bytes[..4].try_into().expect("a length")) as usize;
    let event = pbmeta::WatchEvent::decode(&bytes[4..4 + len]).expect("a WatchEvent");
    assert_eq!(event.r#type.as_deref(), Some("ADDED"));
    let raw = event.object.and_then(|o| o.raw).expect("the object");
    let (_, kind, raw) = open(&raw);
    assert_eq!(kind, "ConfigMap");
    let cm = pb::ConfigMap::decode(raw.as_slice()).expect("a ConfigMap");
    assert_eq!(cm.metadata.and_then(|m| m.name).as_deref(), Some("watched"));
}
