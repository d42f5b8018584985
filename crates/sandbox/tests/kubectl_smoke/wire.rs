//! kubectl's generator commands: their typed clients send built-in kinds as protobuf and accept
//! protobuf answers (`application/vnd.kubernetes.protobuf,application/json`).

use super::*;

/// The rows of issue 10's first line, as a user types them: each prints what it prints against
/// kube-apiserver, and the object stored is the one kubectl built.
#[tokio::test]
async fn generator_commands_create_built_in_kinds() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "wire").await;
    let ns = k.namespace.clone();

    let demo = format!("demo-{}", &ns[ns.len() - 8..]);
    let out = k.run(&["create", "namespace", &demo]).await.out();
    assert_eq!(out.trim(), format!("namespace/{demo} created"));

    let subject = format!("--serviceaccount={ns}:robot");
    for (args, printed) in [
        (
            vec!["create", "configmap", "x", "--from-literal=a=b"],
            "configmap/x created",
        ),
        (
            vec![
                "create",
                "secret",
                "generic",
                "s",
                "--from-literal=token=s3cr3t",
            ],
            "secret/s created",
        ),
        (
            vec![
                "create",
                "deployment",
                "web",
                "--image=nginx",
                "--replicas=2",
            ],
            "deployment.apps/web created",
        ),
        (
            vec!["create", "serviceaccount", "robot"],
            "serviceaccount/robot created",
        ),
        (
            vec!["create", "service", "clusterip", "svc", "--tcp=80:8080"],
            "service/svc created",
        ),
        (
            vec![
                "create",
                "rolebinding",
                "rb",
                "--clusterrole=view",
                subject.as_str(),
            ],
            "rolebinding.rbac.authorization.k8s.io/rb created",
        ),
    ] {
        let out = k.ns(&args).await.out();
        assert_eq!(out.trim(), printed, "kubectl {args:?}");
    }

    assert_eq!(k.jsonpath("cm", "x", "{.data.a}").await, "b");
    assert_eq!(k.jsonpath("secret", "s", "{.data.token}").await, "czNjcjN0");
    assert_eq!(
        k.jsonpath(
            "deployment",
            "web",
            "{.spec.replicas} {.spec.template.spec.containers[0].image} {.spec.selector.matchLabels.app}",
        )
        .await,
        "2 nginx web"
    );
    assert_eq!(
        k.jsonpath(
            "service",
            "svc",
            "{.spec.ports[0].port} {.spec.ports[0].targetPort} {.spec.ports[0].name}",
        )
        .await,
        "80 8080 80-8080"
    );
    assert_eq!(
        k.jsonpath(
            "rolebinding",
            "rb",
            "{.roleRef.name} {.subjects[0].kind} {.subjects[0].name}",
        )
        .await,
        "view ServiceAccount robot"
    );
    // Empty strings Go writes to protobuf are not stored (JSON omits them).
    let yaml = k.ns(&["get", "cm", "x", "-o", "yaml"]).await.out();
    assert!(!yaml.contains("generateName"), "{yaml}");

    // A second create of the same name: the AlreadyExists Status travels as protobuf.
    let err = k
        .ns(&["create", "configmap", "x", "--from-literal=a=c"])
        .await
        .err();
    assert_eq!(
        err.trim(),
        "error: failed to create configmap: configmaps \"x\" already exists"
    );
}

/// kubectl's own log (`-v=8`) shows the request and the answer were protobuf.
#[tokio::test]
async fn generator_requests_and_answers_are_protobuf() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "wire-log").await;
    let run = k
        .ns(&[
            "create",
            "configmap",
            "logged",
            "--from-literal=a=b",
            "-v=8",
        ])
        .await;
    assert!(run.ok, "{}", run.stderr);
    let headers: Vec<&str> = run
        .stderr
        .lines()
        .filter_map(|l| l.split_once("]     ").map(|(_, h)| h.trim()))
        .collect();
    // client-go logs the request's headers, then the response's.
    assert!(
        headers.contains(&"Accept: application/vnd.kubernetes.protobuf,application/json"),
        "{}",
        run.stderr
    );
    let protobuf = "Content-Type: application/vnd.kubernetes.protobuf";
    assert_eq!(
        headers.iter().filter(|h| **h == protobuf).count(),
        2,
        "a protobuf request and a protobuf answer:\n{}",
        run.stderr
    );
    assert_eq!(run.stdout.trim(), "configmap/logged created");
}

/// `kubectl auth can-i` sends a SelfSubjectAccessReview in protobuf and reads the answer.
#[tokio::test]
async fn auth_can_i_is_answered() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "can-i").await;
    let out = k.ns(&["auth", "can-i", "list", "secrets"]).await.out();
    assert_eq!(out.trim(), "yes");
}

/// `--dry-run=server` goes through the same protobuf path and stores nothing.
#[tokio::test]
async fn server_dry_run_of_a_generator_prints_the_object() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "dry").await;
    let out = k
        .ns(&[
            "create",
            "configmap",
            "d",
            "--from-literal=k=v",
            "--dry-run=server",
            "-o",
            "jsonpath={.metadata.name}={.data.k}",
        ])
        .await
        .out();
    assert_eq!(out, "d=v");
    let err = k.ns(&["get", "cm", "d"]).await.err();
    assert!(err.contains("configmaps \"d\" not found"), "{err}");
}

/// `kubectl run`, `create job` and `create cronjob` send a Pod, a Job and a CronJob in protobuf
/// (pod templates with containers, restart policies and a schedule).
#[tokio::test]
async fn run_and_create_job_and_cronjob() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "wire-run").await;
    for (args, printed) in [
        (
            vec!["run", "p", "--image=nginx", "--port=80"],
            "pod/p created",
        ),
        (
            // No `-- command`: the harness appends its flags after the arguments.
            vec!["create", "job", "j", "--image=busybox"],
            "job.batch/j created",
        ),
        (
            vec![
                "create",
                "cronjob",
                "c",
                "--image=busybox",
                "--schedule=*/5 * * * *",
            ],
            "cronjob.batch/c created",
        ),
    ] {
        let out = k.ns(&args).await.out();
        assert_eq!(out.trim(), printed, "kubectl {args:?}");
    }
    assert_eq!(
        k.jsonpath(
            "pod",
            "p",
            "{.spec.containers[0].image} {.spec.containers[0].ports[0].containerPort} {.metadata.labels.run}"
        )
        .await,
        "nginx 80 p"
    );
    assert_eq!(
        k.jsonpath(
            "job",
            "j",
            "{.spec.template.spec.containers[0].image} {.spec.template.spec.restartPolicy}"
        )
        .await,
        "busybox Never"
    );
    assert_eq!(
        k.jsonpath(
            "cronjob",
            "c",
            "{.spec.schedule} {.spec.jobTemplate.spec.template.spec.restartPolicy}"
        )
        .await,
        "*/5 * * * * OnFailure"
    );
}
