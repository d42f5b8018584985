//! Helpers shared by the conformance tests.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams, WatchEvent,
};
use kube::core::Status;
use lien_sandbox::testing::{TestWebhook, Verdict};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Generous deadline for anything that should happen at once.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// The `Status` of an API error; anything else fails the test.
pub fn status<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> Box<Status> {
    match result {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// What a raw request through the test client got back.
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    /// The `Warning` headers, in order.
    pub warnings: Vec<String>,
    /// The `ETag` header, or empty.
    pub etag: String,
    pub body: Vec<u8>,
}

impl Reply {
    /// The body as JSON, failing the test with the body when it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The body as JSON, `Null` when there is none or it is not JSON.
    pub fn json_or_null(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// One raw request through the test client with exactly these headers, for what kube-rs's typed
/// API does not show or send (status codes, `Warning` headers, protobuf); the whole body is read.
pub async fn request(
    client: &kube::Client,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> Reply {
    let mut request = http::Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(kube::client::Body::from(body))
        .expect("a request");
    let response = client.send(request).await.expect("an answer");
    let header = |v: &http::HeaderValue| v.to_str().unwrap_or_default().to_string();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(header)
        .unwrap_or_default();
    let warnings = response
        .headers()
        .get_all("warning")
        .iter()
        .map(header)
        .collect();
    let etag = response
        .headers()
        .get("etag")
        .map(header)
        .unwrap_or_default();
    let body = response
        .into_body()
        .collect_bytes()
        .await
        .expect("the body")
        .to_vec();
    Reply {
        status,
        content_type,
        warnings,
        etag,
        body,
    }
}

/// POSTs `body` as JSON; a non-2xx answer is kube-rs's `Error::Api` with the Status.
pub async fn post_json(
    client: &kube::Client,
    path: &str,
    body: Value,
) -> Result<Value, kube::Error> {
    let request = http::Request::post(path)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).expect("body"))
        .expect("request");
    client.request::<Value>(request).await
}

/// `kubectl auth whoami`: the SelfSubjectReview the API server answers for `client`.
pub async fn whoami(client: &kube::Client) -> Result<Value, kube::Error> {
    post_json(
        client,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
    )
    .await
}

/// The next event of a watch, failing the test after [`DEADLINE`].
pub async fn next_event<K, S>(stream: &mut S) -> WatchEvent<K>
where
    S: Stream<Item = kube::Result<WatchEvent<K>>> + Unpin,
{
    tokio::time::timeout(DEADLINE, stream.next())
        .await
        .expect("a watch event before the deadline")
        .expect("the watch is still open")
        .expect("a decodable watch event")
}

/// Registers a validating webhook configuration (`TestWebhook::configuration`'s JSON).
pub async fn register(client: &kube::Client, configuration: Value) {
    register_as::<ValidatingWebhookConfiguration>(client, configuration, "webhook").await;
}

/// Creates a webhook configuration, given as its JSON, as a `K`; `what` names the webhook
/// when that fails.
pub async fn register_as<K>(client: &kube::Client, configuration: Value, what: &str)
where
    K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let config: K = serde_json::from_value(configuration).expect("configuration parses");
    Api::<K>::all(client.clone())
        .create(&PostParams::default(), &config)
        .await
        .unwrap_or_else(|e| panic!("register the {what}: {e:?}"));
}

/// Deletes the webhook configuration `name`, a `K`; `what` names the webhook when that fails.
pub async fn unregister_as<K>(client: &kube::Client, name: &str, what: &str)
where
    K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    Api::<K>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("unregister the {what}: {e:?}"));
}

/// The admission rules the webhook tests register: create, update and delete of ConfigMaps.
pub fn configmap_rules() -> Value {
    json!([{
        "operations": ["CREATE", "UPDATE", "DELETE"],
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "resources": ["configmaps"],
        "scope": "Namespaced",
    }])
}

/// A test webhook on 127.0.0.1 answering with `decide`.
pub async fn start_webhook(
    decide: impl Fn(&Value) -> Verdict + Send + Sync + 'static,
) -> TestWebhook {
    TestWebhook::start(decide).await.expect("webhook")
}

/// A test webhook denying every request with `code` and `message`.
pub async fn denying_webhook(code: u16, message: &'static str) -> TestWebhook {
    start_webhook(move |_| Verdict::Deny {
        code,
        message: message.into(),
    })
    .await
}

/// The Status refusing the create of an unlabelled ConfigMap `name`.
pub async fn refused_create(cms: &Api<ConfigMap>, name: &str) -> Box<Status> {
    status(
        cms.create(&PostParams::default(), &configmap(name, &[]))
            .await,
    )
}

/// `s` is the internal error of a call to webhook `webhook`, registered at `url` with a 2s
/// timeout, that nothing answered.
pub fn assert_unreachable(s: &Status, webhook: &str, url: &str) {
    assert_eq!((s.code, s.reason.as_str()), (500, "InternalError"), "{s:?}");
    let prefix = format!(
        "Internal error occurred: failed calling webhook \"{webhook}.test.lien.dev\": failed to call webhook: Post \"{url}?timeout=2s\": "
    );
    assert!(s.message.starts_with(&prefix), "{}", s.message);
    assert!(s.message.contains("connection refused"), "{}", s.message);
}

pub fn configmap(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_string());
    if !labels.is_empty() {
        cm.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        );
    }
    cm
}

pub async fn create_configmaps(api: &Api<ConfigMap>, names: &[&str]) {
    for n in names {
        api.create(&PostParams::default(), &configmap(n, &[]))
            .await
            .expect("create configmap");
    }
}

pub fn names<K: kube::Resource>(items: &[K]) -> Vec<String> {
    let mut v: Vec<String> = items
        .iter()
        .filter_map(|o| o.meta().name.clone())
        .filter(|n| n != crate::common::ROOT_CA)
        .collect();
    v.sort();
    v
}

/// `widgets.example.com`, namespaced, with a status subresource and a schema exercising
/// types, required, enum, maximum and CEL rules (one of them a transition rule).
pub async fn widget_crd(client: &kube::Client) -> ApiResource {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": ["size"],
                            "x-kubernetes-validations": [{
                                "rule": "!has(self.min) || !has(self.max) || self.min <= self.max",
                                "message": "min must not exceed max"
                            }],
                            "properties": {
                                "size": {"type": "integer", "maximum": 10},
                                "color": {"type": "string", "enum": ["red", "green"]},
                                "min": {"type": "integer"},
                                "max": {"type": "integer"},
                                "owner": {
                                    "type": "string",
                                    "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "owner is immutable"}]
                                }
                            }
                        },
                        "status": {
                            "type": "object",
                            "properties": {"ready": {"type": "boolean"}}
                        }
                    }
                }}
            }]
        }
    }))
    .expect("crd parses");
    serve_crd(client, &crd).await
}

/// Creates `crd` and waits until its first version is served; that version's resource.
pub async fn serve_crd(client: &kube::Client, crd: &CustomResourceDefinition) -> ApiResource {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), crd)
        .await
        .expect("create crd");
    let (spec, version) = (&crd.spec, &crd.spec.versions[0].name);
    let ar = ApiResource {
        group: spec.group.clone(),
        version: version.clone(),
        api_version: format!("{}/{version}", spec.group),
        kind: spec.names.kind.clone(),
        plural: spec.names.plural.clone(),
    };
    let served: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let what = format!("{} to be served", ar.plural);
    crate::common::wait_for(&what, DEADLINE, || {
        let served = served.clone();
        async move { served.list(&ListParams::default()).await.ok().map(|_| ()) }
    })
    .await;
    ar
}

pub fn widget(ar: &ApiResource, name: &str, spec: Value) -> DynamicObject {
    DynamicObject::new(name, ar).data(json!({ "spec": spec }))
}
