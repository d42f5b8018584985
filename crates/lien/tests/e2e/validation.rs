//! Usages that cannot be enforced as written: cycles and invalid input.

use kube::api::DeleteParams;
use serde_json::{Value, json};

use crate::harness::*;

/// A uses B and B uses A: both Usages report `Ready=False` reason `Cycle`, naming the objects.
///
/// Deletion then: each object is in use by the other, so the DELETE of either is refused, naming
/// the other. Lien does not pick an order for you.
#[tokio::test]
async fn a_usage_cycle_is_reported_on_both_usages() {
    let mut env = Env::start("cycle").await;
    let ns = env.ns.clone();
    env.configmap("a", json!({})).await;
    env.configmap("b", json!({})).await;
    let cm = |n: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": n}});
    env.usage("a-uses-b", json!({"of": cm("b"), "by": cm("a")}))
        .await;
    env.usage("b-uses-a", json!({"of": cm("a"), "by": cm("b")}))
        .await;
    for name in ["a-uses-b", "b-uses-a"] {
        let (status, reason, message) =
            wait_for(&format!("{name}: Ready=False Cycle"), DEADLINE, || async {
                env.usages()
                    .get(name)
                    .await
                    .ok()
                    .and_then(|u| condition(&u, "Ready"))
                    .filter(|c| c.1 == "Cycle")
            })
            .await;
        assert_eq!(status, "False");
        assert_eq!(reason, "Cycle");
        assert!(message.contains(&format!("ConfigMap {ns}/a")), "{message}");
        assert!(message.contains(&format!("ConfigMap {ns}/b")), "{message}");
    }
    let cms = env.configmaps();
    for (name, other) in [("a", "b"), ("b", "a")] {
        let msg = wait_refused(&cms, name).await;
        assert!(
            msg.contains(&format!("in use by ConfigMap {ns}/{other}")),
            "{msg}"
        );
    }
    let err = cms
        .delete("a", &DeleteParams::default())
        .await
        .expect_err("refused");
    assert_eq!(api_error(err).0, 409);
    env.finish().await;
}

fn cm_ref(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": name}})
}

/// Every invalid Usage is refused with an error naming the field: the CRD's CEL rules and the
/// webhook's kind check.
#[tokio::test]
async fn invalid_usages_are_refused_naming_the_field() {
    let mut env = Env::start("bad-input").await;
    let ns = env.ns.clone();
    let cases: Vec<(&str, Value, &str, &str)> = vec![
        (
            "reason-without-by",
            json!({"of": cm_ref("x")}),
            "spec",
            "spec.reason is required when spec.by is not set",
        ),
        (
            "ref-and-selector",
            json!({"of": {"apiVersion": "v1", "kind": "ConfigMap",
                          "resourceRef": {"name": "x"},
                          "resourceSelector": {"matchLabels": {"a": "b"}}},
                   "reason": "r"}),
            "spec.of",
            "exactly one of resourceRef or resourceSelector must be set",
        ),
        (
            "cross-namespace-without-by",
            json!({"of": {"apiVersion": "v1", "kind": "ConfigMap",
                          "resourceRef": {"name": "x", "namespace": "elsewhere"}},
                   "reason": "r"}),
            "spec",
            "spec.of may name another namespace only together with spec.by",
        ),
        (
            "namespace-in-by",
            json!({"of": cm_ref("x"),
                   "by": {"apiVersion": "v1", "kind": "ConfigMap",
                          "resourceRef": {"name": "y", "namespace": "elsewhere"}}}),
            "spec",
            "spec.by always refers to the Usage's own namespace: remove its namespace",
        ),
        (
            "unknown-kind",
            json!({"of": {"apiVersion": "example.org/v1", "kind": "Widget",
                          "resourceRef": {"name": "x"}},
                   "reason": "r"}),
            "spec.of",
            "spec.of: kind Widget is not served in example.org/v1",
        ),
    ];
    for (name, spec, field, text) in cases {
        let err = env
            .try_create(json!({"apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
                "metadata": {"name": name, "namespace": ns}, "spec": spec}))
            .await
            .expect_err(name);
        let (code, msg) = api_error(err);
        println!("{name}: {code} {msg}");
        assert_eq!(code, 422, "{name}: {msg}");
        assert!(msg.contains(field), "{name}: names {field}: {msg}");
        assert!(msg.contains(text), "{name}: says {text:?}: {msg}");
    }
    env.finish().await;
}
