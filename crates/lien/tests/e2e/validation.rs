//! Usages that cannot be enforced as written: cycles and invalid input.

use kube::Api;
use kube::api::{DeleteParams, DynamicObject, PostParams};
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

/// Creates the Usage `name` with `spec` in the scenario's namespace, which must be refused as
/// invalid (422); returns the refusal's message.
async fn refused_usage(env: &mut Env, name: &str, spec: Value) -> String {
    let ns = env.ns.clone();
    let err = env
        .try_create(json!({"apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}))
        .await
        .expect_err(name);
    let (code, msg) = api_error(err);
    assert_eq!(code, 422, "{name}: {msg}");
    msg
}

fn cm_ref(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": name}})
}

/// Every invalid Usage is refused with an error naming the field: the CRD's CEL rules and the
/// webhook's kind check.
#[tokio::test]
async fn invalid_usages_are_refused_naming_the_field() {
    let mut env = Env::start("bad-input").await;
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
        let msg = refused_usage(&mut env, name, spec).await;
        println!("{name}: 422 {msg}");
        assert!(msg.contains(field), "{name}: names {field}: {msg}");
        assert!(msg.contains(text), "{name}: says {text:?}: {msg}");
    }
    env.finish().await;
}

/// A Usage of a kind no CRD serves is refused; once the CRD is installed, the webhook's kind
/// snapshot follows the cluster's CRDs (the CRD watch) and the same Usage is admitted, Lien
/// running on; once the CRD is gone, refused again.
#[tokio::test]
async fn a_usage_of_a_kind_is_admitted_once_its_crd_is_installed_and_refused_once_it_goes() {
    let mut env = Env::start("later-kind").await;
    let group = format!("{}.example.org", env.ns);
    let spec = json!({"of": {"apiVersion": format!("{group}/v1"), "kind": "Gadget",
                             "resourceRef": {"name": "g"}},
                      "reason": "the gadget is in use"});
    let not_served = format!("spec.of: kind Gadget is not served in {group}/v1");
    let msg = refused_usage(&mut env, "before", spec.clone()).await;
    assert!(msg.contains(&not_served), "{msg}");

    let crd = namespaced_crd(&group, "Gadget");
    let ar = api_resource(&crd);
    env.create(crd).await;
    // Each attempt a new Usage: the answer of one create, 201 or 422.
    let (client, ns) = (env.client.clone(), env.ns.clone());
    let attempt = |n: usize| {
        let usage = json!({"apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
            "metadata": {"name": format!("attempt-{n}"), "namespace": ns}, "spec": spec});
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &ns, &api_resource(&usage));
        async move {
            let usage: DynamicObject = serde_json::from_value(usage).expect("a Usage");
            api.create(&PostParams::default(), &usage).await
        }
    };
    let mut n = 0;
    wait_for("a Usage of a Gadget to be admitted", DEADLINE, || {
        n += 1;
        let created = attempt(n);
        async move { created.await.ok().map(drop) }
    })
    .await;

    let crds: Api<DynamicObject> = Api::all_with(env.client.clone(), &ar);
    crds.delete(&format!("gadgets.{group}"), &DeleteParams::default())
        .await
        .expect("the CRD is deleted");
    let refused = wait_for("a new Usage of a Gadget to be refused", DEADLINE, || {
        n += 1;
        let created = attempt(n);
        async move {
            match created.await {
                Err(kube::Error::Api(e)) if e.code == 422 => Some(e.message),
                _ => None,
            }
        }
    })
    .await;
    assert!(refused.contains(&not_served), "{refused}");
    env.finish().await;
}

/// Issue 7 §4: malformed Usages are refused at apply time, naming the field — by the CRD's
/// schema alone (Lien stopped: kube-apiserver validates the schema before calling webhooks),
/// and what the schema cannot check by the webhook.
#[tokio::test]
async fn malformed_usages_are_refused_by_the_schema_and_the_webhook() {
    let mut env = Env::start("malformed").await;
    let of_selector = |selector: Value| {
        json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceSelector": selector},
               "reason": "r"})
    };
    let many: serde_json::Map<String, Value> =
        (0..33).map(|i| (format!("k{i}"), json!("v"))).collect();
    let schema_cases: Vec<(&str, Value, &str)> = vec![
        (
            "blank-reason",
            json!({"of": cm_ref("x"), "reason": "   "}),
            "spec.reason",
        ),
        (
            "long-reason",
            json!({"of": cm_ref("x"), "reason": "x".repeat(1025)}),
            "spec.reason",
        ),
        (
            "empty-selector",
            of_selector(json!({})),
            "spec.of.resourceSelector",
        ),
        (
            "bad-label-value",
            of_selector(json!({"matchLabels": {"app": "-x"}})),
            "spec.of.resourceSelector.matchLabels",
        ),
        (
            "too-many-labels",
            of_selector(json!({"matchLabels": many})),
            "spec.of.resourceSelector.matchLabels",
        ),
        (
            "bad-kind",
            json!({"of": {"apiVersion": "v1", "kind": "Config Map",
                          "resourceRef": {"name": "x"}}, "reason": "r"}),
            "spec.of.kind",
        ),
        (
            "bad-api-version",
            json!({"of": {"apiVersion": "Apps/v1/", "kind": "ConfigMap",
                          "resourceRef": {"name": "x"}}, "reason": "r"}),
            "spec.of.apiVersion",
        ),
    ];
    let stopped = env.stop_lien().await;
    for (name, spec, field) in schema_cases {
        let msg = refused_usage(&mut env, name, spec).await;
        assert!(msg.contains(field), "{name}: names {field}: {msg}");
    }
    if stopped {
        env.start_lien().await;
    }
    let webhook_cases: Vec<(&str, Value, &str)> = vec![
        (
            "of-is-by",
            json!({"of": cm_ref("x"), "by": cm_ref("x")}),
            "spec.by: is identical to spec.of",
        ),
        (
            "bad-label-key",
            of_selector(json!({"matchLabels": {"bad key": "x"}})),
            "spec.of.resourceSelector.matchLabels: invalid label key",
        ),
        (
            "bad-name",
            json!({"of": cm_ref("Not_A_Name"), "reason": "r"}),
            "spec.of.resourceRef.name: invalid name",
        ),
        (
            "usage-of-a-usage",
            json!({"of": {"apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
                          "resourceRef": {"name": "other"}}, "reason": "r"}),
            "spec.of: Usage (lien.dev/v1alpha1) is one of Lien's own kinds",
        ),
    ];
    for (name, spec, text) in webhook_cases {
        let msg = refused_usage(&mut env, name, spec).await;
        assert!(msg.contains(text), "{name}: says {text:?}: {msg}");
    }
    env.finish().await;
}
