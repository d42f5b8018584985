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
