//! What a newcomer types first about nodes, pods, services and scaling.

use super::*;

#[tokio::test]
async fn get_nodes_lists_the_ready_sandbox_node() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "nodes").await;
    let rows = table(&k.run(&["get", "nodes"]).await.out());
    assert_eq!(
        rows[0],
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
        "{rows:?}"
    );
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[1][..3], ["sandbox", "Ready", "<none>"], "{rows:?}");
    assert!(is_age(&rows[1][3]), "{rows:?}");
    assert_eq!(rows[1][4], "v1.32.0-lien-sandbox", "{rows:?}");
}

#[tokio::test]
async fn a_new_namespace_has_its_default_service_account_and_root_ca() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "bootstrap").await;
    let names = common::wait_for("the namespace's bootstrap objects", DEADLINE, || {
        let k = &k;
        async move {
            let out = k
                .ns(&["get", "serviceaccounts,configmaps", "-o", "name"])
                .await
                .out();
            let names: Vec<String> = out.lines().map(str::to_string).collect();
            (names.len() == 2).then_some(names)
        }
    })
    .await;
    assert_eq!(
        names,
        ["serviceaccount/default", "configmap/kube-root-ca.crt"]
    );
    let ca = k
        .jsonpath("configmap", "kube-root-ca.crt", "{.data.ca\\.crt}")
        .await;
    assert_eq!(ca, sandbox.ca().cert_pem());
}

const POD: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  containers:
  - name: app
    image: nginx
"#;

#[tokio::test]
async fn a_pod_created_from_yaml_is_pending() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "pods").await;
    assert_eq!(k.apply_yaml("pod.yaml", POD).await.trim(), "pod/p created");
    let rows = table(&k.ns(&["get", "pods"]).await.out());
    assert_eq!(
        rows[0],
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "{rows:?}"
    );
    assert_eq!(rows[1][..4], ["p", "0/1", "Pending", "0"], "{rows:?}");
    let yaml = k.ns(&["get", "pod", "p", "-o", "yaml"]).await.out();
    for line in [
        "restartPolicy: Always",
        "dnsPolicy: ClusterFirst",
        "imagePullPolicy: Always",
        "serviceAccountName: default",
        "qosClass: BestEffort",
    ] {
        assert!(yaml.contains(line), "{line} in\n{yaml}");
    }
}

const SERVICE_AND_SA: &str = r#"apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
  - port: 80
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: robot
"#;

#[tokio::test]
async fn a_service_gets_a_cluster_ip_and_deletes_print_what_they_deleted() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "services").await;
    let out = k.apply_yaml("svc.yaml", SERVICE_AND_SA).await;
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["service/web created", "serviceaccount/robot created"]
    );
    let rows = table(&k.ns(&["get", "service", "web"]).await.out());
    assert_eq!(
        rows[0],
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ],
        "{rows:?}"
    );
    assert_eq!(rows[1][..2], ["web", "ClusterIP"], "{rows:?}");
    assert!(rows[1][2].starts_with("10."), "{rows:?}");
    assert_eq!(rows[1][3..5], ["<none>", "80/TCP"], "{rows:?}");
    let out = k.ns(&["delete", "svc", "web"]).await.out();
    assert_eq!(out.trim(), "service \"web\" deleted");
    let out = k.ns(&["delete", "sa", "robot"]).await.out();
    assert_eq!(out.trim(), "serviceaccount \"robot\" deleted");
}

const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector: {matchLabels: {app: web}}
  strategy: {}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: nginx:1.27
"#;

const SCALABLE_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: pools.smoke.lien.dev
spec:
  group: smoke.lien.dev
  scope: Namespaced
  names: {plural: pools, singular: pool, kind: Pool}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.size, statusReplicasPath: .status.size}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: integer}}}
          status: {type: object, properties: {size: {type: integer}}}
"#;

#[tokio::test]
async fn scale_a_deployment_and_a_custom_resource() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "scale").await;
    assert_eq!(
        k.apply_yaml("deploy.yaml", DEPLOYMENT).await.trim(),
        "deployment.apps/web created"
    );
    let strategy = k.jsonpath("deployment", "web", "{.spec.strategy}").await;
    let strategy: serde_json::Value = serde_json::from_str(&strategy).expect("json");
    assert_eq!(
        strategy,
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
    );
    let out = k
        .ns(&["scale", "deployment", "web", "--replicas=3"])
        .await
        .out();
    assert_eq!(out.trim(), "deployment.apps/web scaled");
    let replicas = k.jsonpath("deployment", "web", "{.spec.replicas}").await;
    assert_eq!(replicas, "3");
    let history = k.ns(&["rollout", "history", "deployment/web"]).await.out();
    assert!(history.starts_with("deployment.apps/web"), "{history}");

    k.apply_yaml("crd.yaml", SCALABLE_CRD).await;
    k.wait_established("pools.smoke.lien.dev").await;
    k.apply_yaml(
        "pool.yaml",
        "apiVersion: smoke.lien.dev/v1\nkind: Pool\nmetadata:\n  name: p\nspec:\n  size: 1\n",
    )
    .await;
    let out = k.ns(&["scale", "pool", "p", "--replicas=4"]).await.out();
    assert_eq!(out.trim(), "pool.smoke.lien.dev/p scaled");
    let size = k.jsonpath("pool", "p", "{.spec.size}").await;
    assert_eq!(size, "4");
}
