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

    let get = |args: &'static [&'static str]| {
        let k = &k;
        async move { k.ns(args).await.out() }
    };
    assert_eq!(
        get(&["get", "cm", "x", "-o", "jsonpath={.data.a}"]).await,
        "b"
    );
    assert_eq!(
        get(&["get", "secret", "s", "-o", "jsonpath={.data.token}"]).await,
        "czNjcjN0"
    );
    assert_eq!(
        get(&[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image} {.spec.selector.matchLabels.app}",
        ])
        .await,
        "2 nginx web"
    );
    assert_eq!(
        get(&[
            "get",
            "service",
            "svc",
            "-o",
            "jsonpath={.spec.ports[0].port} {.spec.ports[0].targetPort} {.spec.ports[0].name}",
        ])
        .await,
        "80 8080 80-8080"
    );
    assert_eq!(
        get(&[
            "get",
            "rolebinding",
            "rb",
            "-o",
            "jsonpath={.roleRef.name} {.subjects[0].kind} {.subjects[0].name}",
        ])
        .await,
        "view ServiceAccount robot"
    );
    // Empty strings Go writes to protobuf are not stored (JSON omits them).
    let yaml = get(&["get", "cm", "x", "-o", "yaml"]).await;
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
