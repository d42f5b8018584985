//! Helpers shared by the conformance tests.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::core::Status;
use serde_json::json;

/// Generous deadline for anything that should happen at once.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// The `Status` of an API error; anything else fails the test.
pub fn status<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> Box<Status> {
    match result {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
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
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("create crd");
    let ar = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    crate::common::wait_for("widgets to be served", DEADLINE, || {
        let widgets = widgets.clone();
        async move { widgets.list(&ListParams::default()).await.ok().map(|_| ()) }
    })
    .await;
    ar
}

pub fn widget(ar: &ApiResource, name: &str, spec: serde_json::Value) -> DynamicObject {
    DynamicObject::new(name, ar).data(json!({ "spec": spec }))
}
