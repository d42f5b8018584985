//! `kubectl apply -k deploy/` installs exactly what `lien manifests` prints (issue 12): the
//! kustomization is rendered by the real kubectl and compared object by object.

#[path = "support/helm.rs"]
mod helm;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// YAML has one kind of number: `0` and `0.0` are the same value (the CRDs' `minimum: 0.0` is
/// written back by kustomize as `0`).
fn normalized(value: Value) -> Value {
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(normalized).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, normalized(v))).collect())
        }
        other => other,
    }
}

fn sorted(objects: Vec<Value>) -> Vec<Value> {
    let mut objects: Vec<Value> = objects.into_iter().map(normalized).collect();
    let key = |o: &Value| {
        (
            o["kind"].as_str().unwrap_or_default().to_owned(),
            o["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        )
    };
    objects.sort_by_key(key);
    objects
}

#[test]
fn kustomize_renders_the_same_objects_as_lien_manifests() {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(&deploy)
        .output()
        .expect("kubectl is installed (.ci/run installs it)");
    assert!(
        out.status.success(),
        "kubectl kustomize failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let rendered: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("YAML"))
        .collect();
    let want = lien::manifests::objects();
    assert_eq!(rendered.len(), want.len(), "{text}");
    let (rendered, want) = (sorted(rendered), sorted(want));
    for (got, want) in rendered.iter().zip(&want) {
        assert_eq!(got, want, "deploy/ and `lien manifests` differ");
    }
}

fn workspace() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn parse_stream(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("YAML"))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// `lien manifests ARGS…` as a user runs it.
fn lien_manifests(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lien"))
        .arg("manifests")
        .args(args)
        .output()
        .expect("runs lien")
}

/// The chart's Helm hooks apart from the objects it installs: `lien manifests` has no hook
/// (without Helm, `lien uninstall` is run by hand).
/// Helm's standard labels are checked on every templated object and then taken off, leaving
/// what `lien manifests` prints.
fn without_hooks(objects: Vec<Value>) -> (Vec<Value>, Vec<Value>) {
    objects
        .into_iter()
        .map(without_chart_labels)
        .partition(|o| o["metadata"]["annotations"]["helm.sh/hook"].is_null())
}

fn without_chart_labels(mut object: Value) -> Value {
    if object["kind"] == "CustomResourceDefinition" {
        // crds/ is installed as is, not templated.
        return object;
    }
    let labels = object["metadata"]["labels"]
        .as_object_mut()
        .expect("every object is labelled");
    for (key, want) in [
        ("helm.sh/chart", concat!("lien-", env!("CARGO_PKG_VERSION"))),
        ("app.kubernetes.io/managed-by", "Helm"),
        ("app.kubernetes.io/instance", "lien"),
    ] {
        assert_eq!(
            labels.remove(key),
            Some(Value::from(want)),
            "{key} on {} {}",
            object["kind"],
            object["metadata"]["name"]
        );
    }
    object
}

/// The chart rendered by Helm's engine with `sets`, as objects and hook objects; panics with
/// Helm's error if it does not render.
fn render(sets: &[&str]) -> (Vec<Value>, Vec<Value>) {
    let out = helm::template(sets);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    without_hooks(parse_stream(&String::from_utf8(out.stdout).expect("UTF-8")))
}

/// The pre-delete hook `lien::manifests` generates for these options.
fn hook(options: &lien::manifests::Options, force: bool) -> Vec<Value> {
    lien::manifests::uninstall_hook(options, force)
        .into_iter()
        .map(|m| m.object)
        .collect()
}

fn assert_same_objects(got: Vec<Value>, want: Vec<Value>, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: number of objects");
    for (got, want) in sorted(got).iter().zip(&sorted(want)) {
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn helm_chart_renders_what_lien_manifests_prints_by_default() {
    let out = helm::template(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rendered = parse_stream(&String::from_utf8(out.stdout).expect("UTF-8"));
    let printed = lien_manifests(&[]);
    assert!(printed.status.success());
    let printed = parse_stream(&String::from_utf8(printed.stdout).expect("UTF-8"));
    let (rendered, hooks) = without_hooks(rendered);
    assert_same_objects(rendered, printed, "helm template vs lien manifests");
    // The pre-delete hook, without --force by default.
    assert_same_objects(
        hooks.clone(),
        hook(&lien::manifests::Options::default(), false),
        "the chart's pre-delete hook",
    );
    let job = hooks.iter().find(|o| o["kind"] == "Job").expect("a Job");
    assert_eq!(
        job["spec"]["template"]["spec"]["containers"][0]["args"],
        serde_json::json!([
            "uninstall",
            "--keep-installed-objects",
            "--namespace",
            "lien-system",
            "--timeout-seconds=120"
        ])
    );
}

#[test]
fn helm_chart_uninstall_hook_values_turn_it_off_or_force_it() {
    let (objects, hooks) = render(&["uninstallHook.enabled=false"]);
    assert!(hooks.is_empty(), "{hooks:?}");
    assert_eq!(objects.len(), lien::manifests::objects().len());
    let (_, hooks) = render(&["uninstallHook.force=true", "namespace=shop-lien"]);
    let options = lien::manifests::Options {
        namespace: "shop-lien".into(),
        ..Default::default()
    };
    assert_same_objects(hooks.clone(), hook(&options, true), "uninstallHook.force");
    let job = hooks.iter().find(|o| o["kind"] == "Job").expect("a Job");
    let args = &job["spec"]["template"]["spec"]["containers"][0]["args"];
    assert_eq!(args[3], "shop-lien");
    assert_eq!(args[5], "--force");
    // A value the hook does not know is refused, naming it.
    let out = helm::template(&["uninstallHook.forse=true"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("forse"), "{stderr}");
}

#[test]
fn helm_chart_with_values_renders_what_the_same_flags_print() {
    for (image, namespace, replicas) in [
        (
            "registry.example.com:5000/team/lien:1.2.3",
            "shop-lien",
            "3",
        ),
        (
            "lien@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "one",
            "1",
        ),
    ] {
        let out = helm::template(&[
            &format!("image={image}"),
            &format!("namespace={namespace}"),
            &format!("replicas={replicas}"),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rendered = parse_stream(&String::from_utf8(out.stdout).expect("UTF-8"));
        let printed = lien_manifests(&[
            "--image",
            image,
            "--namespace",
            namespace,
            "--replicas",
            replicas,
        ]);
        assert!(
            printed.status.success(),
            "{}",
            String::from_utf8_lossy(&printed.stderr)
        );
        let printed = parse_stream(&String::from_utf8(printed.stdout).expect("UTF-8"));
        let (rendered, hooks) = without_hooks(rendered);
        let options = lien::manifests::Options {
            image: image.into(),
            namespace: namespace.into(),
            replicas: replicas.parse().expect("a number"),
            ..Default::default()
        };
        assert_same_objects(hooks, hook(&options, false), "the hook with --set");
        let budgets = printed
            .iter()
            .filter(|o| o["kind"] == "PodDisruptionBudget")
            .count();
        assert_eq!(budgets, usize::from(replicas != "1"), "replicas {replicas}");
        assert_same_objects(rendered, printed, &format!("--set vs flags ({namespace})"));
    }
    // createNamespace=false: the same objects but the Namespace.
    let out = helm::template(&["createNamespace=false"]);
    assert!(out.status.success());
    let (rendered, _) = without_hooks(parse_stream(&String::from_utf8(out.stdout).expect("UTF-8")));
    let want: Vec<Value> = lien::manifests::objects()
        .into_iter()
        .filter(|o| o["kind"] != "Namespace")
        .collect();
    assert_same_objects(rendered, want, "createNamespace=false");
}

#[test]
fn helm_protected_resources_render_what_the_resource_flags_print() {
    // A team that protects only Rook's objects and PersistentVolumeClaims, in both install paths.
    // One --set: the render script merges separate flags map by map, and lists whole.
    let (rendered, hooks) = render(&["rbac.protectedResources[0].apiGroups[0]=,\
         rbac.protectedResources[0].resources[0]=persistentvolumeclaims,\
         rbac.protectedResources[1].apiGroups[0]=ceph.rook.io,\
         rbac.protectedResources[1].resources[0]=*"]);
    let flags = [
        "--no-default-resources",
        "--resource",
        "persistentvolumeclaims",
        "--resource",
        "*.ceph.rook.io",
    ];
    let printed = lien_manifests(&flags);
    assert!(
        printed.status.success(),
        "{}",
        String::from_utf8_lossy(&printed.stderr)
    );
    let printed = parse_stream(&String::from_utf8(printed.stdout).expect("UTF-8"));
    let role = |objects: &[Value]| {
        objects
            .iter()
            .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == "lien")
            .expect("Lien's ClusterRole")["rules"]
            .clone()
    };
    assert_eq!(role(&rendered), role(&printed));
    assert_same_objects(rendered, printed, "rbac.protectedResources vs --resource");
    let options = lien::manifests::Options {
        resources: ["*.ceph.rook.io", "persistentvolumeclaims"]
            .iter()
            .map(|r| lien::manifests::Resource::parse(r).expect("a resource"))
            .collect(),
        ..Default::default()
    };
    assert_same_objects(hooks, hook(&options, false), "the hook's grants follow");
    // No Secret is granted unless asked, and the defaults are what the docs list.
    let default = role(&lien::manifests::objects());
    let grants = |group: &str, resource: &str| {
        default.as_array().expect("rules").iter().any(|r| {
            let has = |k: &str, v: &str| {
                r[k].as_array()
                    .is_some_and(|a| a.iter().any(|x| x == v || x == "*"))
            };
            has("apiGroups", group) && has("resources", resource)
        })
    };
    assert!(!grants("", "secrets"), "{default:#}");
    assert!(grants("", "persistentvolumeclaims") && grants("apps", "deployments"));
    assert!(grants("", "namespaces"), "Namespaces are always granted");
    // A value of the wrong shape is refused by the schema, naming it.
    let out = helm::template(&["rbac.protectedResources[0].resources[0]=Secrets"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("protectedResources"), "{stderr}");
}

#[test]
fn helm_chart_and_flags_refuse_the_same_bad_values() {
    for (key, value) in [
        ("replicas", "0"),
        ("namespace", "Bad_NS"),
        ("image", "lien:bad tag"),
        ("image", "lien/UPPER:1"),
    ] {
        let out = helm::template(&[&format!("{key}={value}")]);
        assert!(!out.status.success(), "helm accepted {key}={value}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(&format!("/{key}")), "{stderr}");
        let out = lien_manifests(&[&format!("--{key}"), value]);
        assert!(
            !out.status.success(),
            "lien manifests accepted --{key} {value}"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(&format!("--{key}")), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn helm_lint_strict_finds_nothing_in_the_chart() {
    let out = helm::template(&["--lint"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn helm_chart_in_deploy_is_what_lien_manifests_writes() {
    let chart = workspace().join("deploy/helm/lien");
    let want = lien::manifests::helm_chart(&lien::manifests::Options::default()).expect("renders");
    for (path, text) in &want {
        let got = std::fs::read_to_string(chart.join(path))
            .unwrap_or_else(|e| panic!("deploy/helm/lien/{path}: {e}"));
        assert_eq!(
            &got, text,
            "deploy/helm/lien/{path} drifted: run 'cargo run -p lien -- manifests --helm-chart deploy/helm/lien'"
        );
    }
}

#[test]
fn manifests_flags_reach_every_object_that_names_them() {
    let out = lien_manifests(&[
        "--image",
        "registry.example.com/lien:9.9.9",
        "--namespace",
        "shop-lien",
        "--replicas",
        "4",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    assert!(
        !text.contains("lien-system"),
        "the default namespace is left: {text}"
    );
    let objects = parse_stream(&text);
    for o in &objects {
        let kind = o["kind"].as_str().unwrap_or_default();
        let cluster_scoped = matches!(
            kind,
            "Namespace" | "ClusterRole" | "ClusterRoleBinding" | "CustomResourceDefinition"
        );
        if !cluster_scoped {
            assert_eq!(o["metadata"]["namespace"], "shop-lien", "{o}");
        }
        for subject in o["subjects"].as_array().into_iter().flatten() {
            assert_eq!(subject["namespace"], "shop-lien", "{o}");
        }
        if kind == "Namespace" {
            assert_eq!(o["metadata"]["name"], "shop-lien");
        }
        if kind == "Deployment" {
            assert_eq!(o["spec"]["replicas"], 4);
            let pod = &o["spec"]["template"]["spec"];
            assert_eq!(
                pod["containers"][0]["image"],
                "registry.example.com/lien:9.9.9"
            );
            // `lien run` takes its namespace from the pod's: the Service the webhook
            // configuration names and the serving certificate's DNS name follow.
            let env = &pod["containers"][0]["env"];
            assert!(
                env.as_array()
                    .into_iter()
                    .flatten()
                    .any(|e| e["name"] == "LIEN_NAMESPACE"
                        && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"),
                "{env}"
            );
            assert!(
                env.as_array()
                    .into_iter()
                    .flatten()
                    .any(|e| e["name"] == "LIEN_OWN_USERNAME"
                        && e["value"] == "system:serviceaccount:$(LIEN_NAMESPACE):lien"),
                "{env}"
            );
        }
    }
    assert!(objects.iter().any(|o| o["kind"] == "PodDisruptionBudget"));
}

#[test]
fn helm_chart_values_reach_the_pod_and_bad_ones_are_refused_by_name() {
    let out = helm::template(&[
        "nodeSelector.pool=system",
        "tolerations[0].key=dedicated",
        "tolerations[0].operator=Exists",
        "priorityClassName=system-cluster-critical",
        "extraArgs[0]=--break-glass-group=platform-admins",
        "resources.limits.memory=1Gi",
        "podAnnotations.team=platform",
        "affinity=null",
        "networkPolicy.enabled=true",
        "networkPolicy.from[0].ipBlock.cidr=10.0.0.0/8",
        "extraVolumes[0].name=client-ca",
        "extraVolumes[0].configMap.name=api-server-client-ca",
        "extraVolumeMounts[0].name=client-ca",
        "extraVolumeMounts[0].mountPath=/etc/lien/client-ca",
        "extraVolumeMounts[0].readOnly=true",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (objects, _) = without_hooks(parse_stream(&String::from_utf8(out.stdout).expect("UTF-8")));
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("the Deployment");
    let pod = &deployment["spec"]["template"];
    assert_eq!(pod["metadata"]["annotations"]["team"], "platform");
    let spec = &pod["spec"];
    assert_eq!(spec["nodeSelector"], serde_json::json!({"pool": "system"}));
    assert_eq!(
        spec["tolerations"],
        serde_json::json!([{"key": "dedicated", "operator": "Exists"}])
    );
    assert_eq!(spec["priorityClassName"], "system-cluster-critical");
    assert!(spec.get("affinity").is_none(), "{spec}");
    let container = &spec["containers"][0];
    assert_eq!(
        container["args"].as_array().expect("args").last(),
        Some(&Value::from("--break-glass-group=platform-admins"))
    );
    assert_eq!(container["resources"]["limits"]["memory"], "1Gi");
    assert_eq!(
        spec["volumes"],
        serde_json::json!([{"name": "client-ca", "configMap": {"name": "api-server-client-ca"}}])
    );
    assert_eq!(
        container["volumeMounts"],
        serde_json::json!([{"name": "client-ca", "mountPath": "/etc/lien/client-ca", "readOnly": true}])
    );
    // The rest as `lien manifests` prints it.
    assert_eq!(container["resources"]["requests"]["memory"], "128Mi");
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    let policy = objects
        .iter()
        .find(|o| o["kind"] == "NetworkPolicy")
        .expect("the NetworkPolicy");
    assert_eq!(policy["metadata"]["namespace"], "lien-system");
    assert_eq!(
        policy["spec"]["ingress"],
        serde_json::json!([{"ports": [{"port": 8443, "protocol": "TCP"}],
                            "from": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}])
    );
    // Each object parses as its kind (a misplaced block would not).
    let _: k8s_openapi::api::apps::v1::Deployment =
        serde_json::from_value(deployment.clone()).expect("a Deployment");
    let _: k8s_openapi::api::networking::v1::NetworkPolicy =
        serde_json::from_value(policy.clone()).expect("a NetworkPolicy");

    for (set, named) in [
        ("extraArgs[0]=break-glass", "extraArgs"),
        ("nodeSelector.pool=3", ""),
        ("resources.limit.memory=1Gi", "limit"),
        ("networkPolicy.form[0].ipBlock.cidr=10.0.0.0/8", "form"),
    ] {
        let out = helm::template(&[set]);
        if named.is_empty() {
            // --set makes `3` a number; Helm's schema check names where.
            assert!(!out.status.success(), "helm accepted {set}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(stderr.contains("nodeSelector"), "{stderr}");
            continue;
        }
        assert!(!out.status.success(), "helm accepted {set}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(named), "{set}: {stderr}");
    }
}

/// Each shipped rule pack says at its top which `--resource` flags it needs; with those added
/// to the defaults, Lien's ClusterRole grants the resource of every kind the pack's rules and
/// Usages name (their plurals are the lower-cased kind plus `s`, as every one of them is) — so
/// the hint is one a platform engineer can follow and see the pack Ready.
#[test]
fn every_rule_pack_names_the_resources_it_needs() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/rules");
    for entry in std::fs::read_dir(&dir).expect("examples/rules") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("a pack");
        let header: Vec<&str> = text.lines().take_while(|l| l.starts_with('#')).collect();
        let flags: Vec<String> = header
            .iter()
            .flat_map(|l| l.split("--resource ").skip(1))
            .map(|rest| {
                rest.split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .trim_matches('\'')
                    .to_owned()
            })
            .collect();
        let mut options = lien::manifests::Options::default();
        for f in &flags {
            options.resources.push(
                lien::manifests::Resource::parse(f)
                    .unwrap_or_else(|e| panic!("{}: {f}: {e}", path.display())),
            );
        }
        let rules = lien::manifests::resource_rules(&options.resources);
        let granted = |group: &str, plural: &str| {
            rules.iter().any(|(g, rs)| {
                (g == group || g == "*") && rs.iter().any(|r| r == plural || r == "*")
            })
        };
        let mut checked = 0;
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let object = <Value as serde::Deserialize>::deserialize(doc).expect("YAML");
            for side in ["of", "by"] {
                let spec = &object["spec"][side];
                let (Some(api_version), Some(kind)) =
                    (spec["apiVersion"].as_str(), spec["kind"].as_str())
                else {
                    continue;
                };
                let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
                let plural = format!("{}s", kind.to_lowercase());
                assert!(
                    granted(group, &plural),
                    "{}: {kind} ({api_version}) is not granted by the defaults and the header's flags {flags:?}",
                    path.display()
                );
                checked += 1;
            }
        }
        assert!(checked > 2, "{}: only {checked} sides read", path.display());
    }
}

/// `certManager.enabled`: cert-manager's chain for a webhook (a self-signed Issuer, a CA
/// Certificate, an Issuer of it, the serving Certificate for the Service's names), and the pod
/// serving its Secret through `lien run --tls-*-file`; with an `issuerRef`, only the serving
/// Certificate, from that issuer. Off, nothing of it (the default render is `lien manifests`).
#[test]
fn helm_cert_manager_issues_the_serving_certificate_lien_run_serves() {
    let render = |sets: &[&str]| render(sets).0;
    let of_kind = |objects: &[Value], kind: &str| -> Vec<Value> {
        objects
            .iter()
            .filter(|o| o["kind"] == kind && o["apiVersion"] == "cert-manager.io/v1")
            .cloned()
            .collect()
    };
    let objects = render(&["certManager.enabled=true", "namespace=shop-lien"]);
    let issuers = of_kind(&objects, "Issuer");
    let certificates = of_kind(&objects, "Certificate");
    assert_eq!(
        (issuers.len(), certificates.len()),
        (2, 2),
        "{certificates:#?}"
    );
    let serving = certificates
        .iter()
        .find(|c| c["metadata"]["name"] == "lien-webhook")
        .expect("the serving Certificate");
    assert_eq!(
        serving["spec"]["dnsNames"],
        serde_json::json!([
            "lien-webhook.shop-lien.svc",
            "lien-webhook.shop-lien.svc.cluster.local"
        ])
    );
    assert_eq!(serving["spec"]["issuerRef"]["name"], "lien-ca");
    let ca = certificates
        .iter()
        .find(|c| c["metadata"]["name"] == "lien-webhook-ca")
        .expect("the CA Certificate");
    assert_eq!(ca["spec"]["isCA"], true);
    let ca_issuer = issuers
        .iter()
        .find(|i| i["metadata"]["name"] == "lien-ca")
        .expect("the CA Issuer");
    assert_eq!(
        ca_issuer["spec"]["ca"]["secretName"],
        ca["spec"]["secretName"]
    );
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("a Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for (flag, file) in [
        ("--tls-cert-file", "tls.crt"),
        ("--tls-key-file", "tls.key"),
        ("--tls-ca-file", "ca.crt"),
    ] {
        assert!(
            args.contains(&format!("{flag}=/etc/lien/tls/{file}").as_str()),
            "{args:?}"
        );
    }
    assert_eq!(
        pod["volumes"][0]["secret"]["secretName"],
        serving["spec"]["secretName"]
    );
    assert_eq!(container["volumeMounts"][0]["mountPath"], "/etc/lien/tls");
    // `lien run` takes the flags the chart passes.
    let help = Command::new(env!("CARGO_BIN_EXE_lien"))
        .args(["run", "--help"])
        .output()
        .expect("lien runs");
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in ["--tls-cert-file", "--tls-key-file", "--tls-ca-file"] {
        assert!(help.contains(flag), "lien run has no {flag}");
    }
    // An issuer of the platform team's: only the serving Certificate, from it; extra volumes
    // are kept beside cert-manager's.
    let objects = render(&[
        "certManager.enabled=true,certManager.issuerRef.name=corp-ca,certManager.issuerRef.kind=ClusterIssuer,\
         extraVolumes[0].name=client-ca,extraVolumes[0].configMap.name=apiserver-ca",
    ]);
    let certificates = of_kind(&objects, "Certificate");
    assert_eq!(certificates.len(), 1);
    assert!(of_kind(&objects, "Issuer").is_empty());
    assert_eq!(
        certificates[0]["spec"]["issuerRef"],
        serde_json::json!({"name": "corp-ca", "kind": "ClusterIssuer"})
    );
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("a Deployment");
    let volumes = &deployment["spec"]["template"]["spec"]["volumes"];
    assert_eq!(volumes.as_array().map(Vec::len), Some(2), "{volumes:#}");
    // Off: no cert-manager object, no flag.
    let objects = render(&[]);
    assert!(
        objects
            .iter()
            .all(|o| o["apiVersion"] != "cert-manager.io/v1")
    );
    // A wrong issuer kind is refused by the schema, naming it.
    let out = helm::template(&["certManager.issuerRef.kind=Issuers"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("issuerRef"));
}
