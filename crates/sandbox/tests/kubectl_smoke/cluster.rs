//! What kube-apiserver does that a user meets through kubectl without asking for it: the
//! defaults of generated objects, the objects every cluster starts with, and switching from
//! client-side to server-side apply.

use super::*;

/// `kubectl create service clusterip` sends `nodePort: 0` (protobuf writes the Go zero);
/// kube-apiserver reads 0 as unset (`ServicePort.NodePort` is an `int32` with `omitempty`) and a
/// ClusterIP Service must have none (`ValidateService`: "may not be used when `type` is
/// 'ClusterIP'").
#[tokio::test]
async fn create_service_clusterip_stores_no_node_port() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "svc-clusterip").await;
    let out = k
        .ns(&["create", "service", "clusterip", "web", "--tcp=80:8080"])
        .await
        .out();
    assert_eq!(out.trim(), "service/web created");
    let ports = k.jsonpath("service", "web", "{.spec.ports}").await;
    let ports: serde_json::Value = serde_json::from_str(&ports).expect("ports are JSON");
    assert_eq!(
        ports,
        json!([{"name": "80-8080", "port": 80, "protocol": "TCP", "targetPort": 8080}])
    );

    // A node port given for a ClusterIP Service is refused in kube-apiserver's words.
    let path = k.file(
        "bad.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: bad}\nspec:\n  type: ClusterIP\n  \
         ports: [{port: 80, nodePort: 30080}]\n",
    );
    let err = k.ns(&["apply", "-f", &path_str(&path)]).await.err();
    assert!(
        err.contains(
            "The Service \"bad\" is invalid: spec.ports[0].nodePort: Forbidden: may not be used \
             when `type` is 'ClusterIP'"
        ),
        "{err}"
    );

    // Changing a NodePort Service's type alone drops its node ports
    // (`dropTypeDependentFields`), as `kubectl patch` of the type does on a cluster.
    let path = k.file(
        "np.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: np}\nspec:\n  type: NodePort\n  \
         ports: [{port: 80}]\n",
    );
    k.ns(&["apply", "-f", &path_str(&path)]).await.out();
    let node_port = k
        .jsonpath("service", "np", "{.spec.ports[0].nodePort}")
        .await;
    assert!(node_port.parse::<u16>().is_ok(), "{node_port}");
    k.ns(&[
        "patch",
        "service",
        "np",
        "-p",
        r#"{"spec":{"type":"ClusterIP"}}"#,
    ])
    .await
    .out();
    let node_port = k
        .jsonpath("service", "np", "{.spec.ports[0].nodePort}")
        .await;
    assert_eq!(node_port, "");
}

fn settings(a: &str, b: Option<&str>) -> String {
    let b = b.map(|b| format!("  b: \"{b}\"\n")).unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: \"{a}\"\n{b}"
    )
}

/// "Upgrading from client-side apply to server-side apply"
/// (<https://kubernetes.io/docs/reference/using-api/server-side-apply/#upgrading-from-client-side-apply-to-server-side-apply>):
/// `kubectl apply --server-side` takes over, without conflicts, the fields
/// `kubectl-client-side-apply` recorded in the last-applied annotation, and keeps that
/// annotation in step; a field another manager changed since still conflicts.
#[tokio::test]
async fn server_side_apply_takes_over_from_client_side_apply() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "csa-ssa").await;
    let out = k.apply_yaml("settings.yaml", &settings("1", None)).await;
    assert_eq!(out.trim(), "configmap/settings created");

    let path = k.file("settings.yaml", &settings("2", None));
    let out = k
        .ns(&["apply", "--server-side", "-f", &path_str(&path)])
        .await
        .out();
    assert_eq!(out.trim(), "configmap/settings serverside-applied");
    assert_eq!(k.jsonpath("configmap", "settings", "{.data.a}").await, "2");
    let managers = k
        .jsonpath(
            "configmap",
            "settings",
            "{range .metadata.managedFields[*]}{.manager}/{.operation} {end}",
        )
        .await;
    assert!(managers.contains("kubectl/Apply"), "{managers}");
    let last = k
        .jsonpath(
            "configmap",
            "settings",
            "{.metadata.annotations.kubectl\\.kubernetes\\.io/last-applied-configuration}",
        )
        .await;
    let last: serde_json::Value = serde_json::from_str(&last).expect("annotation is JSON");
    assert_eq!(last["data"], json!({"a": "2"}));

    // A value another manager set is not client-side apply's to hand over.
    k.ns(&[
        "patch",
        "configmap",
        "settings",
        "-p",
        r#"{"data":{"b":"patched"}}"#,
    ])
    .await
    .out();
    let path = k.file("settings.yaml", &settings("2", Some("applied")));
    let err = k
        .ns(&["apply", "--server-side", "-f", &path_str(&path)])
        .await
        .err();
    assert!(
        err.contains("conflict with \"kubectl-patch\"") && err.contains(".data.b"),
        "{err}"
    );
}
