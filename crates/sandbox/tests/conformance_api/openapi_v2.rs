//! `/openapi/v2` as kube-apiserver serves it (k8s.io/kube-openapi `pkg/handler`
//! `OpenAPIService`): JSON, or gnostic's `openapi.v2.Document` protobuf for
//! `Accept: application/com.github.proto-openapi.spec.v2.v1.0+protobuf` (what client-go's
//! `DiscoveryClient.OpenAPISchema` sends, with no fallback; kubectl validates `kind: List`
//! files with it), `406` for neither; an `ETag` shared by both forms and `304` on
//! `If-None-Match`. Custom resources appear as apiextensions-apiserver publishes them in v2
//! (`controller/openapi/v2.ToStructuralOpenAPIV2`, `builder.BuildOpenAPIV2`): named by the
//! reversed group, with `x-kubernetes-group-version-kind`, `metadata` as `ObjectMeta`, and no
//! `nullable` or properties under `x-kubernetes-preserve-unknown-fields`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

use super::common;
use crate::support::{request, serve_crd};

const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
/// kube-openapi's `subTypeProtobufDeprecated`, what kubectl 1.32 sends: answered with the
/// same document under the name above (Go's mime parser refuses the `@`).
const PROTOBUF_DEPRECATED: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// The parts of gnostic's `openapiv2/OpenAPIv2.proto` the tests read (field numbers as there).
mod gnostic {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Document {
        #[prost(string, tag = "1")]
        pub swagger: String,
        #[prost(message, optional, tag = "2")]
        pub info: Option<Info>,
        #[prost(message, optional, tag = "9")]
        pub definitions: Option<Properties>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Info {
        #[prost(string, tag = "1")]
        pub title: String,
        #[prost(string, tag = "2")]
        pub version: String,
    }
    /// `Definitions` and `Properties` have the same shape.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Properties {
        #[prost(message, repeated, tag = "1")]
        pub additional_properties: Vec<NamedSchema>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NamedSchema {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<Schema>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Schema {
        #[prost(string, tag = "1")]
        pub r#ref: String,
        #[prost(string, tag = "4")]
        pub description: String,
        #[prost(string, repeated, tag = "19")]
        pub required: Vec<String>,
        #[prost(message, optional, tag = "22")]
        pub r#type: Option<TypeItem>,
        #[prost(message, optional, tag = "25")]
        pub properties: Option<Properties>,
        #[prost(message, repeated, tag = "31")]
        pub vendor_extension: Vec<NamedAny>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TypeItem {
        #[prost(string, repeated, tag = "1")]
        pub value: Vec<String>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NamedAny {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<Any>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Any {
        #[prost(string, tag = "2")]
        pub yaml: String,
    }

    impl Properties {
        pub fn get(&self, name: &str) -> Option<&Schema> {
            self.additional_properties
                .iter()
                .find(|n| n.name == name)
                .and_then(|n| n.value.as_ref())
        }
    }
}

async fn get(client: &kube::Client, accept: &str, etag: Option<&str>) -> crate::support::Reply {
    let mut headers = vec![("accept", accept)];
    if let Some(etag) = etag {
        headers.push(("if-none-match", etag));
    }
    request(client, "GET", "/openapi/v2", &headers, vec![]).await
}

fn gadget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.parts.example.com"},
        "spec": {
            "group": "parts.example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": ["size", "note"],
                            "properties": {
                                "size": {"type": "integer"},
                                "note": {"type": "string", "nullable": true},
                                "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                                    "properties": {"known": {"type": "string"}}}
                            }
                        }
                    }
                }}
            }]
        }
    }))
    .expect("crd parses")
}

#[tokio::test]
async fn openapi_v2_is_served_as_protobuf_for_client_go() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let reply = get(&client, PROTOBUF, None).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.content_type, PROTOBUF);
    let doc: gnostic::Document = prost::Message::decode(reply.body.as_slice()).expect("a Document");
    assert_eq!(doc.swagger, "2.0");
    assert_eq!(doc.info.expect("info").title, "Kubernetes");
    let defs = doc.definitions.expect("definitions");
    let cm = defs.get("io.k8s.api.core.v1.ConfigMap").expect("ConfigMap");
    let props = cm.properties.as_ref().expect("properties");
    assert_eq!(
        props.get("metadata").expect("metadata").r#ref,
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    assert_eq!(
        props
            .get("data")
            .expect("data")
            .r#type
            .as_ref()
            .expect("type")
            .value,
        ["object"]
    );
    // kube-openapi reads the kind a definition is for from this extension's YAML.
    let gvk = cm
        .vendor_extension
        .iter()
        .find(|e| e.name == "x-kubernetes-group-version-kind")
        .and_then(|e| e.value.as_ref())
        .expect("x-kubernetes-group-version-kind");
    let gvk: Value = serde_yaml_ng::from_str(&gvk.yaml).expect("YAML");
    assert_eq!(
        gvk,
        json!([{"group": "", "kind": "ConfigMap", "version": "v1"}])
    );
    let deployment_spec = defs
        .get("io.k8s.api.apps.v1.DeploymentSpec")
        .expect("DeploymentSpec");
    assert!(deployment_spec.required.contains(&"selector".to_string()));

    // The JSON form, the same document: same ETag.
    let json_reply = get(&client, "application/json", None).await;
    assert_eq!(json_reply.status, 200);
    assert_eq!(json_reply.content_type, "application/json");
    assert!(
        json_reply.etag.starts_with('"') && json_reply.etag.len() == 130,
        "{}",
        json_reply.etag
    );
    assert_eq!(json_reply.etag, reply.etag);
    // An Accept listing protobuf after something unserved gets protobuf; */* gets JSON.
    let reply = get(&client, &format!("application/xml, {PROTOBUF}"), None).await;
    assert_eq!(reply.content_type, PROTOBUF);
    assert_eq!(
        get(&client, "*/*", None).await.content_type,
        "application/json"
    );
    let old = get(&client, PROTOBUF_DEPRECATED, None).await;
    assert_eq!((old.status, old.content_type.as_str()), (200, PROTOBUF));
    let refused = get(&client, "application/xml", None).await;
    assert_eq!(
        refused.status,
        406,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    sandbox.shutdown().await;
}

#[tokio::test]
async fn openapi_v2_etag_answers_304_until_a_crd_changes_it() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let first = get(&client, PROTOBUF, None).await;
    let not_modified = get(&client, PROTOBUF, Some(&first.etag)).await;
    assert_eq!(not_modified.status, 304);
    assert!(not_modified.body.is_empty());
    assert_eq!(not_modified.etag, first.etag);
    serve_crd(&client, &gadget_crd()).await;
    let changed = get(&client, PROTOBUF, Some(&first.etag)).await;
    assert_eq!(changed.status, 200);
    assert_ne!(changed.etag, first.etag);
    sandbox.shutdown().await;
}

#[tokio::test]
async fn openapi_v2_publishes_crd_schemas_as_kube_apiserver_does() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    serve_crd(&client, &gadget_crd()).await;
    let doc = get(&client, "application/json", None).await.json();
    let gadget = &doc["definitions"]["com.example.parts.v1.Gadget"];
    assert_eq!(
        gadget["x-kubernetes-group-version-kind"],
        json!([{"group": "parts.example.com", "version": "v1", "kind": "Gadget"}]),
        "{gadget}"
    );
    assert_eq!(gadget["properties"]["kind"]["type"], "string");
    assert_eq!(gadget["properties"]["apiVersion"]["type"], "string");
    assert_eq!(
        gadget["properties"]["metadata"],
        json!({"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"})
    );
    let spec = &gadget["properties"]["spec"];
    // A nullable field loses its type and is no longer required; int-or-string is untyped
    // and has no anyOf; a field keeping unknown fields has no properties.
    assert_eq!(spec["required"], json!(["size"]), "{spec}");
    assert_eq!(spec["properties"]["note"], json!({}), "{spec}");
    assert_eq!(
        spec["properties"]["port"],
        json!({"x-kubernetes-int-or-string": true}),
        "{spec}"
    );
    assert_eq!(
        spec["properties"]["extra"],
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        "{spec}"
    );
    // The protobuf form carries it too.
    let reply = get(&client, PROTOBUF, None).await;
    let doc: gnostic::Document = prost::Message::decode(reply.body.as_slice()).expect("a Document");
    let defs = doc.definitions.expect("definitions");
    let gadget = defs.get("com.example.parts.v1.Gadget").expect("Gadget");
    let spec = gadget
        .properties
        .as_ref()
        .and_then(|p| p.get("spec"))
        .expect("spec");
    assert_eq!(spec.required, ["size"]);
    sandbox.shutdown().await;
}
