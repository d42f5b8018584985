//! The codec against two independent oracles: k8s-pb's prost types (what Go's generated
//! protobuf code writes and reads) and k8s-openapi's serde JSON (what kube-apiserver writes as
//! JSON) of the same object. For each kind: prost bytes → [`decode`] equals the serde JSON, and
//! the serde JSON → [`encode`] → prost decodes to the same message.

use k8s_openapi::Resource;
use k8s_pb::apimachinery::pkg::api::resource::Quantity as PbQuantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pbmeta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString as PbIntOrString;
use prost::Message as _;
use serde_json::{Value, json};

use super::{decode, encode};

/// The `k8s\0` + `runtime.Unknown` envelope around a prost message, as Go writes it.
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

/// The prost message inside an envelope [`encode`] wrote, checking the envelope's typeMeta.
fn open<M: prost::Message + Default>(bytes: &[u8], api_version: &str, kind: &str) -> M {
    let rest = bytes.strip_prefix(b"k8s\0").expect("the magic number");
    let unknown = Unknown::decode(rest).expect("a runtime.Unknown");
    let meta = unknown.type_meta.expect("typeMeta");
    assert_eq!(
        (meta.api_version.as_deref(), meta.kind.as_deref()),
        (Some(api_version), Some(kind))
    );
    M::decode(unknown.raw.unwrap_or_default().as_slice()).expect("the kind's message")
}

/// The JSON k8s-openapi writes for `json` read as `K` (its canonical form).
fn canonical<K: serde::de::DeserializeOwned + serde::Serialize>(json: Value) -> Value {
    let typed: K = serde_json::from_value(json).expect("k8s-openapi reads the object");
    serde_json::to_value(typed).expect("k8s-openapi writes the object")
}

/// Both directions for one object.
fn round_trip<K, M>(json: Value, message: M)
where
    K: Resource + serde::de::DeserializeOwned + serde::Serialize,
    M: prost::Message + Default + PartialEq + std::fmt::Debug,
{
    let expected = canonical::<K>(json);
    let decoded = decode(&envelope(K::API_VERSION, K::KIND, &message)).expect("decode");
    assert_eq!(
        go_zeros_removed(decoded.clone()),
        go_zeros_removed(expected.clone()),
        "protobuf → JSON of {}:\n{}",
        K::KIND,
        serde_json::to_string_pretty(&decoded).unwrap_or_default()
    );
    let encoded = encode(&expected).expect("encode");
    let reopened: M = open(&encoded, K::API_VERSION, K::KIND);
    let read =
        |m: &M| go_zeros_removed(decode(&envelope(K::API_VERSION, K::KIND, m)).expect("decode"));
    assert_eq!(
        read(&reopened),
        read(&message),
        "JSON → protobuf of {}",
        K::KIND
    );
}

/// `value` without the zeros Go adds and prost leaves out: prost (like k8s-openapi) writes a
/// field only when set, Go writes every field it holds as a value (an empty string, 0, false,
/// an empty message) and JSON then keeps those without `omitempty`. The oracles here agree
/// with Go on everything but those zeros; which zeros Go writes is held to kube-apiserver's own
/// bytes by `kube_apiserver_answers_are_written_byte_for_byte`.
fn go_zeros_removed(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, go_zeros_removed(v)))
                .filter(|(_, v)| match v {
                    Value::String(s) => !s.is_empty(),
                    Value::Bool(b) => *b,
                    Value::Number(n) => n.as_f64() != Some(0.0),
                    Value::Object(m) => !m.is_empty(),
                    Value::Null => false,
                    Value::Array(_) => true,
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(go_zeros_removed).collect()),
        other => other,
    }
}

fn s(text: &str) -> Option<String> {
    Some(text.to_string())
}

fn meta(name: &str, namespace: &str) -> Option<pbmeta::ObjectMeta> {
    Some(pbmeta::ObjectMeta {
        name: s(name),
        namespace: s(namespace),
        ..Default::default()
    })
}

fn quantity(text: &str) -> PbQuantity {
    PbQuantity { string: s(text) }
}

#[test]
fn config_map_with_labels_and_data() {
    use k8s_pb::api::core::v1 as pb;
    let mut labels = std::collections::BTreeMap::new();
    labels.insert("app".to_string(), "web".to_string());
    let message = pb::ConfigMap {
        metadata: Some(pbmeta::ObjectMeta {
            name: s("x"),
            namespace: s("demo"),
            labels,
            ..Default::default()
        }),
        data: [("a".to_string(), "b".to_string())].into(),
        ..Default::default()
    };
    round_trip::<k8s_openapi::api::core::v1::ConfigMap, _>(
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "x", "namespace": "demo", "labels": {"app": "web"}},
               "data": {"a": "b"}}),
        message,
    );
}

#[test]
fn secret_with_binary_data() {
    use k8s_pb::api::core::v1 as pb;
    let binary = vec![0u8, 159, 146, 150, 255];
    let message = pb::Secret {
        metadata: meta("s", "demo"),
        data: [("key".to_string(), binary.clone())].into(),
        r#type: s("Opaque"),
        ..Default::default()
    };
    round_trip::<k8s_openapi::api::core::v1::Secret, _>(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "demo"},
               "data": {"key": "AJ+Slv8="}, "type": "Opaque"}),
        message,
    );
}

#[test]
fn deployment_with_quantities_and_int_or_string() {
    use k8s_pb::api::apps::v1 as apps;
    use k8s_pb::api::core::v1 as pb;
    let message = apps::Deployment {
        metadata: meta("web", "demo"),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(0),
            selector: Some(pbmeta::LabelSelector {
                match_labels: [("app".to_string(), "web".to_string())].into(),
                ..Default::default()
            }),
            strategy: Some(apps::DeploymentStrategy {
                r#type: s("RollingUpdate"),
                rolling_update: Some(apps::RollingUpdateDeployment {
                    max_surge: Some(PbIntOrString {
                        r#type: Some(1),
                        int_val: None,
                        str_val: s("25%"),
                    }),
                    max_unavailable: Some(PbIntOrString {
                        r#type: Some(0),
                        int_val: Some(1),
                        str_val: None,
                    }),
                }),
            }),
            template: Some(pb::PodTemplateSpec {
                metadata: Some(pbmeta::ObjectMeta {
                    labels: [("app".to_string(), "web".to_string())].into(),
                    ..Default::default()
                }),
                spec: Some(pb::PodSpec {
                    containers: vec![pb::Container {
                        name: s("nginx"),
                        image: s("nginx"),
                        resources: Some(pb::ResourceRequirements {
                            limits: [("memory".to_string(), quantity("128Mi"))].into(),
                            requests: [("cpu".to_string(), quantity("250m"))].into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }),
        status: None,
    };
    round_trip::<k8s_openapi::api::apps::v1::Deployment, _>(
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": "demo"},
               "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                        "strategy": {"type": "RollingUpdate",
                                     "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                        "template": {"metadata": {"labels": {"app": "web"}},
                                     "spec": {"containers": [{"name": "nginx", "image": "nginx",
                                        "resources": {"limits": {"memory": "128Mi"},
                                                      "requests": {"cpu": "250m"}}}]}}}}),
        message,
    );
}

#[test]
fn pod_with_probes_and_a_security_context() {
    use k8s_pb::api::core::v1 as pb;
    let message = pb::Pod {
        metadata: meta("p", "demo"),
        spec: Some(pb::PodSpec {
            containers: vec![pb::Container {
                name: s("app"),
                image: s("nginx"),
                command: vec!["sh".into(), "-c".into()],
                ports: vec![pb::ContainerPort {
                    container_port: Some(8080),
                    protocol: s("TCP"),
                    ..Default::default()
                }],
                liveness_probe: Some(pb::Probe {
                    handler: Some(pb::ProbeHandler {
                        http_get: Some(pb::HttpGetAction {
                            path: s("/healthz"),
                            port: Some(PbIntOrString {
                                r#type: Some(1),
                                int_val: None,
                                str_val: s("http"),
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    period_seconds: Some(10),
                    ..Default::default()
                }),
                security_context: Some(pb::SecurityContext {
                    run_as_user: Some(0),
                    allow_privilege_escalation: Some(false),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            host_ipc: Some(true),
            ..Default::default()
        }),
        status: None,
    };
    round_trip::<k8s_openapi::api::core::v1::Pod, _>(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "demo"},
               "spec": {"hostIPC": true, "containers": [{"name": "app", "image": "nginx",
                 "command": ["sh", "-c"],
                 "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                 "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"},
                                   "periodSeconds": 10},
                 "securityContext": {"runAsUser": 0, "allowPrivilegeEscalation": false}}]}}),
        message,
    );
}

#[test]
fn service_ports_with_named_and_numbered_target_ports() {
    use k8s_pb::api::core::v1 as pb;
    let port = |name: &str, port: i32, target: PbIntOrString| pb::ServicePort {
        name: s(name),
        protocol: s("TCP"),
        port: Some(port),
        target_port: Some(target),
        ..Default::default()
    };
    let message = pb::Service {
        metadata: meta("svc", "demo"),
        spec: Some(pb::ServiceSpec {
            ports: vec![
                port(
                    "http",
                    80,
                    PbIntOrString {
                        r#type: Some(0),
                        int_val: Some(8080),
                        str_val: None,
                    },
                ),
                port(
                    "metrics",
                    9090,
                    PbIntOrString {
                        r#type: Some(1),
                        int_val: None,
                        str_val: s("metrics"),
                    },
                ),
            ],
            r#type: s("ClusterIP"),
            ..Default::default()
        }),
        status: None,
    };
    round_trip::<k8s_openapi::api::core::v1::Service, _>(
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": "demo"},
               "spec": {"type": "ClusterIP", "ports": [
                   {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
                   {"name": "metrics", "protocol": "TCP", "port": 9090, "targetPort": "metrics"}]}}),
        message,
    );
}

#[test]
fn event_with_times_and_micro_times() {
    use k8s_pb::api::core::v1 as pb;
    let message = pb::Event {
        metadata: meta("e", "demo"),
        involved_object: Some(pb::ObjectReference {
            kind: s("ConfigMap"),
            name: s("x"),
            namespace: s("demo"),
            ..Default::default()
        }),
        reason: s("Refused"),
        first_timestamp: Some(pbmeta::Time {
            seconds: Some(1_700_000_000),
            nanos: Some(0),
        }),
        event_time: Some(pbmeta::MicroTime {
            seconds: Some(1_700_000_001),
            nanos: Some(123_456_000),
        }),
        count: Some(2),
        ..Default::default()
    };
    round_trip::<k8s_openapi::api::core::v1::Event, _>(
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "demo"},
               "involvedObject": {"kind": "ConfigMap", "name": "x", "namespace": "demo"},
               "reason": "Refused", "count": 2,
               "firstTimestamp": "2023-11-14T22:13:20Z",
               "eventTime": "2023-11-14T22:13:21.123456Z"}),
        message,
    );
}

#[test]
fn subject_access_review_and_token_request() {
    use k8s_pb::api::authentication::v1 as authn;
    use k8s_pb::api::authorization::v1 as authz;
    let review = authz::SelfSubjectAccessReview {
        metadata: Some(pbmeta::ObjectMeta::default()),
        spec: Some(authz::SelfSubjectAccessReviewSpec {
            resource_attributes: Some(authz::ResourceAttributes {
                namespace: s("demo"),
                verb: s("list"),
                resource: s("secrets"),
                ..Default::default()
            }),
            non_resource_attributes: None,
        }),
        status: None,
    };
    round_trip::<k8s_openapi::api::authorization::v1::SelfSubjectAccessReview, _>(
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
               "metadata": {},
               "spec": {"resourceAttributes": {"namespace": "demo", "verb": "list",
                                               "resource": "secrets"}}}),
        review,
    );
    let token = authn::TokenRequest {
        metadata: meta("default", "demo"),
        spec: Some(authn::TokenRequestSpec {
            audiences: vec!["https://kubernetes.default.svc".into()],
            expiration_seconds: Some(3600),
            bound_object_ref: None,
        }),
        status: None,
    };
    let json = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                      "metadata": {"name": "default", "namespace": "demo"},
                      "spec": {"audiences": ["https://kubernetes.default.svc"],
                               "expirationSeconds": 3600}});
    // TokenRequest is not a top-level resource in k8s-openapi; compare with its serde form.
    let expected = canonical::<k8s_openapi::api::authentication::v1::TokenRequest>(json);
    let decoded = decode(&envelope(
        "authentication.k8s.io/v1",
        "TokenRequest",
        &token,
    ))
    .expect("decode");
    assert_eq!(
        go_zeros_removed(decoded),
        go_zeros_removed(expected.clone())
    );
    let reopened: authn::TokenRequest = open(
        &encode(&expected).expect("encode"),
        "authentication.k8s.io/v1",
        "TokenRequest",
    );
    let read = |m: &authn::TokenRequest| {
        go_zeros_removed(
            decode(&envelope("authentication.k8s.io/v1", "TokenRequest", m)).expect("decode"),
        )
    };
    assert_eq!(read(&reopened), read(&token));
}

#[test]
fn go_writes_empty_strings_that_json_omits() {
    use k8s_pb::api::core::v1 as pb;
    // Go's generated code writes every non-pointer string, empty or not.
    let message = pb::ConfigMap {
        metadata: Some(pbmeta::ObjectMeta {
            name: s("x"),
            generate_name: s(""),
            namespace: s(""),
            resource_version: s(""),
            creation_timestamp: Some(pbmeta::Time::default()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let decoded = decode(&envelope("v1", "ConfigMap", &message)).expect("decode");
    // …and JSON leaves them out under `omitempty`; a zero `Time` is written as null whatever
    // its tag says (a struct is never empty to encoding/json).
    assert_eq!(
        decoded,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "x", "creationTimestamp": null}})
    );
}

#[test]
fn lists_and_statuses_have_messages_custom_resources_do_not() {
    let list = json!({"apiVersion": "v1", "kind": "ConfigMapList",
                      "metadata": {"resourceVersion": "7"},
                      "items": [{"metadata": {"name": "a"}, "data": {"k": "v"}}]});
    let message: k8s_pb::api::core::v1::ConfigMapList =
        open(&encode(&list).expect("encode"), "v1", "ConfigMapList");
    assert_eq!(message.items.len(), 1);
    assert_eq!(
        message.items[0].data.get("k").map(String::as_str),
        Some("v")
    );
    let status = json!({"apiVersion": "v1", "kind": "Status", "status": "Failure",
                        "message": "nope", "reason": "NotFound", "code": 404,
                        "details": {"name": "x", "kind": "configmaps"}});
    let message: pbmeta::Status = open(&encode(&status).expect("encode"), "v1", "Status");
    assert_eq!(message.code, Some(404));
    assert_eq!(message.reason.as_deref(), Some("NotFound"));
    assert!(encode(&json!({"apiVersion": "example.org/v1", "kind": "Widget"})).is_err());
}

#[test]
fn every_served_built_in_kind_and_its_list_have_a_message() {
    let registry = crate::registry::Registry::with_builtins();
    for rt in registry.all() {
        for version in &rt.versions {
            let api_version = rt.api_version(&version.name);
            // Create-only kinds (reviews) have no list.
            let lists = rt.verbs.contains(&"list");
            for kind in std::iter::once(&rt.kind).chain(lists.then_some(&rt.list_kind)) {
                assert!(
                    super::has_message(&api_version, kind),
                    "{api_version} {kind} has no protobuf message"
                );
            }
        }
    }
}

#[test]
fn every_resource_kind_round_trips_its_metadata() {
    for resource in super::schema::RESOURCES {
        let object = json!({
            "apiVersion": resource.api_version, "kind": resource.kind,
            "metadata": {"name": "x", "namespace": "n", "labels": {"a": "b"},
                         "creationTimestamp": "2024-05-06T07:08:09Z",
                         "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                                              "name": "o", "uid": "u", "controller": true}]}
        });
        let bytes = encode(&object).expect("encode");
        assert_eq!(
            go_zeros_removed(decode(&bytes).expect("decode")),
            object,
            "{}",
            resource.kind
        );
    }
}

/// `UserInfo.extra` maps to `ExtraValue`, Go's `[]string`: a message with a repeated `items`
/// field in protobuf, a plain array in JSON (`kubectl auth whoami` reads it back in protobuf).
#[test]
fn self_subject_review_with_extra_user_info() {
    use k8s_pb::api::authentication::v1 as authn;
    let review = authn::SelfSubjectReview {
        metadata: Some(pbmeta::ObjectMeta::default()),
        status: Some(authn::SelfSubjectReviewStatus {
            user_info: Some(authn::UserInfo {
                username: s("system:serviceaccount:demo:default"),
                uid: s("4f1c"),
                groups: vec!["system:serviceaccounts".into()],
                extra: [(
                    "authentication.kubernetes.io/credential-id".to_string(),
                    authn::ExtraValue {
                        items: vec!["JTI=917a".into()],
                    },
                )]
                .into_iter()
                .collect(),
            }),
        }),
    };
    round_trip::<k8s_openapi::api::authentication::v1::SelfSubjectReview, _>(
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
               "metadata": {},
               "status": {"userInfo": {"username": "system:serviceaccount:demo:default",
                                       "uid": "4f1c", "groups": ["system:serviceaccounts"],
                                       "extra": {"authentication.kubernetes.io/credential-id":
                                                 ["JTI=917a"]}}}}),
        review,
    );
}

/// kube-apiserver v1.32.13's own answers (`kube/`: a GET of each object as JSON and as
/// protobuf, captured from `scripts/control-plane.sh`): the sandbox writes the same protobuf
/// bytes from the JSON — every field Go holds as a value, zero or not, in Go's order — and
/// reads the protobuf back to the same JSON.
#[test]
fn kube_apiserver_answers_are_written_byte_for_byte() {
    macro_rules! answer {
        ($name:literal) => {
            (
                $name,
                &include_bytes!(concat!("kube/", $name, ".json"))[..],
                &include_bytes!(concat!("kube/", $name, ".pb"))[..],
            )
        };
    }
    for (name, json, pb) in [
        answer!("configmaps-app"),
        answer!("deployments-web"),
        answer!("services-api"),
        answer!("secrets-creds"),
        answer!("rolebindings-read"),
        answer!("serviceaccounts-robot"),
        answer!("status-notfound"),
    ] {
        let json: Value = serde_json::from_slice(json).expect("kube's JSON");
        let written = encode(&json).expect("encode");
        let first_difference = written.iter().zip(pb).position(|(a, b)| a != b);
        assert!(
            written == pb,
            "{name}: JSON → protobuf differs from kube-apiserver's at byte {first_difference:?} \
             ({} bytes written, kube's {}):\nsandbox {:?}\nkube    {:?}",
            written.len(),
            pb.len(),
            String::from_utf8_lossy(&written),
            String::from_utf8_lossy(pb),
        );
        let read = decode(pb).expect("decode");
        assert!(
            read == json,
            "{name}: protobuf → JSON differs from kube-apiserver's at {:?}",
            differences(&read, &json, "")
        );
    }
}

/// kube-apiserver's JSON answers (`kube/`) already carry every zero field Go writes: adding them
/// changes nothing (the sandbox never writes a zero kube leaves out). And with the zeros a
/// Deployment's answer has taken out — its template's `creationTimestamp: null`, a container's
/// `resources: {}` — they come back exactly as kube wrote them.
#[test]
fn go_json_zeros_are_those_kube_apiserver_writes() {
    for json in [
        &include_bytes!("kube/configmaps-app.json")[..],
        include_bytes!("kube/deployments-web.json"),
        include_bytes!("kube/services-api.json"),
        include_bytes!("kube/secrets-creds.json"),
        include_bytes!("kube/rolebindings-read.json"),
        include_bytes!("kube/serviceaccounts-robot.json"),
    ] {
        let kube: Value = serde_json::from_slice(json).expect("kube's JSON");
        let mut zeros = kube.clone();
        super::go_json_zeros(&mut zeros);
        assert!(
            zeros == kube,
            "{}: {:?}",
            kube["kind"],
            differences(&zeros, &kube, "")
        );
    }
    let kube: Value =
        serde_json::from_slice(include_bytes!("kube/deployments-web.json")).expect("JSON");
    let mut stripped = kube.clone();
    let template = &mut stripped["spec"]["template"];
    template["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("creationTimestamp");
    template["spec"]["containers"][0]
        .as_object_mut()
        .expect("container")
        .remove("resources");
    assert_ne!(stripped, kube);
    super::go_json_zeros(&mut stripped);
    assert!(stripped == kube, "{:?}", differences(&stripped, &kube, ""));
    // A custom resource is not a Go struct on the server: left as it is.
    let mut custom = json!({"apiVersion": "example.com/v1", "kind": "Deployment", "spec": {}});
    let before = custom.clone();
    super::go_json_zeros(&mut custom);
    assert_eq!(custom, before);
}

/// The paths where `a` and `b` differ, with both values.
fn differences(a: &Value, b: &Value, at: &str) -> Vec<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter()
                .flat_map(|k| {
                    let absent = Value::String("<absent>".into());
                    let at = format!("{at}.{k}");
                    differences(
                        x.get(k).unwrap_or(&absent),
                        y.get(k).unwrap_or(&absent),
                        &at,
                    )
                })
                .collect()
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .flat_map(|(i, (a, b))| differences(a, b, &format!("{at}[{i}]")))
            .collect(),
        _ if a == b => Vec::new(),
        _ => vec![format!("{at}: {a} ≠ {b}")],
    }
}

/// A pointer set to its zero is not unset: a PVC's `storageClassName: ""` (a `*string`: "no
/// class", which kube-apiserver keeps) and a Deployment's `replicas: 0` (a `*int32`) survive a
/// protobuf body, while a value field's zero under `omitempty` (`paused: false`) is left out
/// of JSON as Go leaves it.
#[test]
fn a_pointer_set_to_zero_is_kept_a_value_zero_is_not() {
    use k8s_pb::api::apps::v1 as apps;
    use k8s_pb::api::core::v1 as pb;
    let claim = pb::PersistentVolumeClaim {
        metadata: meta("data", "demo"),
        spec: Some(pb::PersistentVolumeClaimSpec {
            storage_class_name: s(""),
            volume_mode: s("Filesystem"),
            ..Default::default()
        }),
        ..Default::default()
    };
    let decoded = decode(&envelope("v1", "PersistentVolumeClaim", &claim)).expect("decode");
    assert_eq!(
        decoded["spec"],
        json!({"storageClassName": "", "volumeMode": "Filesystem"})
    );
    let deployment = apps::Deployment {
        metadata: meta("web", "demo"),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(0),
            paused: Some(false),
            min_ready_seconds: Some(0),
            ..Default::default()
        }),
        ..Default::default()
    };
    let decoded = decode(&envelope("apps/v1", "Deployment", &deployment)).expect("decode");
    assert_eq!(decoded["spec"], json!({"replicas": 0}));
}
