//! The built-in API as a newcomer meets it through kubectl: `api-resources`, `explain`, `get all`
//! and strict field validation of built-in kinds.

use super::*;

/// `kubectl api-resources` lists Kubernetes 1.32's built-in resources with their short names
/// (kube-apiserver's discovery; short names from k/k's `ShortNames()` of each storage).
#[tokio::test]
async fn api_resources_lists_every_builtin_with_short_names() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "apires").await;
    let out = k.run(&["api-resources", "--no-headers"]).await.out();
    let rows = table(&out);
    let row = |name: &str, group: &str| {
        rows.iter()
            .find(|r| r[0] == name && r.iter().any(|c| c == group))
            .unwrap_or_else(|| panic!("{name} ({group}) not in:\n{out}"))
            .clone()
    };
    assert_eq!(row("pods", "v1")[1], "po");
    assert_eq!(row("nodes", "v1")[1], "no");
    assert_eq!(row("cronjobs", "batch/v1")[1], "cj");
    assert_eq!(row("deployments", "apps/v1")[1], "deploy");
    // No short name: NAME, APIVERSION, NAMESPACED, KIND.
    assert_eq!(row("jobs", "batch/v1")[1..], ["batch/v1", "true", "Job"]);
    assert_eq!(row("priorityclasses", "scheduling.k8s.io/v1")[1], "pc");
    let wide = k
        .run(&[
            "api-resources",
            "--no-headers",
            "-o",
            "wide",
            "--api-group=batch",
        ])
        .await
        .out();
    assert!(
        wide.lines()
            .any(|l| l.starts_with("jobs ") && l.contains("all")),
        "jobs are in category all:\n{wide}"
    );
}

/// `kubectl explain` prints kube-apiserver's description of a built-in field (it reads the
/// OpenAPI v3 document of apps/v1).
#[tokio::test]
async fn explain_prints_the_builtin_field_description() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "explain").await;
    let out = k.run(&["explain", "deployment.spec.replicas"]).await.out();
    assert!(out.contains("KIND:") && out.contains("Deployment"), "{out}");
    assert!(
        out.contains("replicas") && out.contains("<integer>"),
        "{out}"
    );
    assert!(
        out.contains("Number of desired pods."),
        "kube-apiserver's text:\n{out}"
    );
}

/// `kubectl get all` expands the `all` category from discovery: Services, Deployments and Jobs
/// are in it, ConfigMaps are not (k/k `Categories()` of each storage).
#[tokio::test]
async fn get_all_lists_the_all_category() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "getall").await;
    k.apply_yaml(
        "objects.yaml",
        r#"apiVersion: v1
kind: ConfigMap
metadata: {name: not-in-all}
---
apiVersion: batch/v1
kind: Job
metadata: {name: once}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: 10.96.0.42
  ports: [{port: 80}]
"#,
    )
    .await;
    let out = k.ns(&["get", "all", "-o", "name"]).await.out();
    let names: Vec<&str> = out.lines().collect();
    assert!(names.contains(&"job.batch/once"), "{out}");
    assert!(names.contains(&"service/web"), "{out}");
    assert!(!out.contains("not-in-all"), "{out}");
}

const BOGUS_CM: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bogus\ndata:\n  a: b\nbogus: 1\n";

/// kubectl's default `--validate=strict` sends `fieldValidation=Strict`; kube-apiserver answers
/// an unknown field of a built-in kind with 400 and strict decoding's wording
/// (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/create.go, rest.go).
#[tokio::test]
async fn create_with_an_unknown_field_is_refused_then_warned() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "strict").await;
    let path = k.file("cm.yaml", BOGUS_CM);
    let refused = k.ns(&["create", "-f", &path_str(&path)]).await.err();
    assert!(
        refused.contains(
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"bogus\""
        ),
        "{refused}"
    );
    let warned = k
        .ns(&["create", "--validate=warn", "-f", &path_str(&path)])
        .await;
    assert!(warned.ok, "{}", warned.stderr);
    assert!(
        warned.stderr.contains("unknown field \"bogus\""),
        "{}",
        warned.stderr
    );
    // Server-side apply refuses the field too (kube-apiserver words it from structured-merge
    // typing, `.bogus: field not declared in schema`; the sandbox from the strict decoder —
    // docs/sandbox.md).
    let other = k.file(
        "cm2.yaml",
        &BOGUS_CM.replace("name: bogus", "name: applied"),
    );
    let refused = k
        .ns(&["apply", "--server-side", "-f", &path_str(&other)])
        .await
        .err();
    assert!(refused.contains("bogus"), "{refused}");
    let stored = k.ns(&["get", "cm", "bogus", "-o", "json"]).await.out();
    let stored: serde_json::Value = serde_json::from_str(&stored).expect("json");
    assert!(
        stored.get("bogus").is_none(),
        "dropped from storage: {stored}"
    );
    assert_eq!(stored["data"]["a"], "b");
}
