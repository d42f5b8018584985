//! `kind: List` files: kubectl validates them on the client side against `/openapi/v2` (in
//! protobuf, with no fallback), item by item, since no server validates a List; so a
//! `kubectl get -o yaml` dump applies back only where `/openapi/v2` is served (issue 22).

use super::*;

fn config_map(name: &str, value: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  key: {value}\n")
}

#[tokio::test]
async fn a_get_o_yaml_dump_applies_back_as_a_list() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "dump").await;
    for name in ["one", "two"] {
        k.apply_yaml(&format!("{name}.yaml"), &config_map(name, name))
            .await;
    }
    let dump = k.ns(&["get", "configmaps", "-o", "yaml"]).await.out();
    assert!(dump.starts_with("apiVersion: v1\nitems:\n"), "{dump}");
    assert!(dump.contains("\nkind: List\n"), "{dump}");
    let path = k.file("dump.yaml", &dump);
    // Unchanged objects: kubectl applies each item of the List, validated, and says so.
    let out = k.ns(&["apply", "-f", &path_str(&path)]).await.out();
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "configmap/kube-root-ca.crt configured",
            "configmap/one configured",
            "configmap/two configured",
        ],
        "{out}"
    );
    // Dumped again (the first apply moved every resourceVersion, and a stale one is a
    // conflict as on kube-apiserver), edited, applied with strict validation.
    let dump = k.ns(&["get", "configmaps", "-o", "yaml"]).await.out();
    let edited = dump.replace("key: two", "key: changed");
    let path = k.file("edited.yaml", &edited);
    k.ns(&["apply", "--validate=strict", "-f", &path_str(&path)])
        .await
        .out();
    assert_eq!(
        k.jsonpath("configmap", "two", "{.data.key}").await,
        "changed"
    );
}

#[tokio::test]
async fn strict_validation_refuses_an_unknown_field_in_a_list_item() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "strict").await;
    let list = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: bogus\n  bogus: field\n  data:\n    key: value\n";
    let path = k.file("list.yaml", list);
    let err = k
        .ns(&["apply", "--validate=strict", "-f", &path_str(&path)])
        .await
        .err();
    // kubectl's words against kube-apiserver 1.32 for the same file.
    assert!(
        err.contains(r#"error validating data: ValidationError(ConfigMap): unknown field "bogus" in io.k8s.api.core.v1.ConfigMap"#),
        "{err}"
    );
    assert!(
        !k.ns(&["get", "configmap", "bogus"]).await.ok,
        "a refused item must not be created"
    );
    // `--validate=false` skips the client-side check: the server prunes the field (a List's
    // items are sent one by one, each without fieldValidation).
    let out = k
        .ns(&["apply", "--validate=false", "-f", &path_str(&path)])
        .await
        .out();
    assert_eq!(out.trim(), "configmap/bogus created");
}

#[tokio::test]
async fn a_list_of_custom_resources_is_validated_against_the_crd_schema() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "crlist").await;
    widget_crd(&k).await;
    let good = format!(
        "apiVersion: v1\nkind: List\nitems:\n- {}",
        widget("w1", 3, "red").trim_end().replace('\n', "\n  ")
    );
    let path = k.file("widgets.yaml", &format!("{good}\n"));
    let out = k.ns(&["apply", "-f", &path_str(&path)]).await.out();
    assert_eq!(out.trim(), "widget.smoke.lien.dev/w1 created");
    let bad = good.replace("size: 3", "size: 3\n    weight: 9");
    let path = k.file("bad.yaml", &format!("{bad}\n"));
    let err = k
        .ns(&["apply", "--validate=strict", "-f", &path_str(&path)])
        .await
        .err();
    assert!(
        err.contains(r#"unknown field "weight" in dev.lien.smoke.v1.Widget.spec"#),
        "{err}"
    );
}
