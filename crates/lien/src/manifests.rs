//! The complete install, generated from Rust (`lien manifests`), like the CRDs (`lien crds`).
//!
//! `deploy/` holds the same objects as files with a `kustomization.yaml` listing them, written by
//! `lien manifests --out-dir deploy`; CI checks the files against this module and
//! `kubectl kustomize deploy/` against [`objects`] (`tests/manifests.rs`), so the two install
//! paths cannot drift.
//!
//! Lien's Validating- and MutatingWebhookConfiguration are not here on purpose: each start of
//! `lien run` writes them with the CA bundle of the certificate it just issued itself, so there
//! is no bundle to template and no cert-manager to depend on.

use serde_json::{Value, json};

/// The namespace Lien runs in.
pub const NAMESPACE: &str = "lien-system";
/// Name of Lien's ServiceAccount, Deployment, ClusterRole and bindings.
pub const NAME: &str = "lien";
/// Name of the webhook's Service (`lien run --service-name`).
pub const SERVICE: &str = "lien-webhook";
/// The port the webhook (and `/metrics`, `/healthz`, `/readyz`) listens on in the pod.
pub const WEBHOOK_PORT: u16 = 8443;

/// The image the Deployment runs. Images are not built by CI here (no registry, no network):
/// see the `Dockerfile` and docs/operations.md.
pub fn image() -> String {
    format!("ghcr.io/lien-dev/lien:v{}", env!("CARGO_PKG_VERSION"))
}

/// One file of the install: its name under `deploy/`, a comment saying what it is for, and its
/// objects.
#[derive(Debug, Clone)]
pub struct ManifestFile {
    /// File name, relative to `deploy/`.
    pub path: String,
    /// Why the file exists, written as its leading comment (none for the CRDs, whose files
    /// are exactly what `lien crds --out-dir` writes).
    pub comment: Option<&'static str>,
    /// The objects, in apply order.
    pub objects: Vec<Manifest>,
}

/// One object, with a comment per RBAC rule where it has rules.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The object.
    pub object: Value,
    /// For a Role or ClusterRole: why each of its `rules` is needed, in order.
    pub rule_reasons: Vec<&'static str>,
}

impl Manifest {
    fn plain(object: Value) -> Self {
        Self {
            object,
            rule_reasons: Vec::new(),
        }
    }

    /// A Role or ClusterRole from `(why, rule)` pairs.
    fn role(mut object: Value, rules: Vec<(&'static str, Value)>) -> Self {
        let (rule_reasons, rules): (Vec<_>, Vec<_>) = rules.into_iter().unzip();
        object["rules"] = Value::Array(rules);
        Self {
            object,
            rule_reasons,
        }
    }
}

fn labels() -> Value {
    json!({
        "app.kubernetes.io/name": NAME,
        "app.kubernetes.io/part-of": NAME,
        "app.kubernetes.io/version": env!("CARGO_PKG_VERSION"),
    })
}

fn selector() -> Value {
    json!({"app.kubernetes.io/name": NAME})
}

fn metadata(name: &str, namespace: Option<&str>) -> Value {
    let mut meta = json!({"name": name, "labels": labels()});
    if let Some(ns) = namespace {
        meta["namespace"] = json!(ns);
    }
    meta
}

fn binding(kind: &str, name: &str, namespace: Option<&str>) -> Value {
    let role_kind = if kind == "ClusterRoleBinding" {
        "ClusterRole"
    } else {
        "Role"
    };
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": metadata(name, namespace),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}],
    })
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

fn rbac() -> Vec<Manifest> {
    let cluster_role = Manifest::role(
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": metadata(NAME, None),
        }),
        vec![
            (
                "Objects of every kind a Usage or rule may name, known only at run time: watch \
                 them (metadata, or the fields a rule's CEL reads), put and remove the in-use \
                 label and the replay record (patch), and re-issue a refused DELETE (delete; \
                 CascadeRule children too). This is why Lien needs a wildcard: narrow it to the \
                 kinds you protect if you know them.",
                rule(
                    &["*"],
                    &["*"],
                    &["get", "list", "watch", "patch", "update", "delete"],
                ),
            ),
            (
                "Lien's own API: read every Usage and rule, write their finalizers, owner \
                 references and status.",
                rule(
                    &["lien.dev"],
                    &[
                        "usages",
                        "clusterusages",
                        "dependencyrules",
                        "cascaderules",
                        "usages/status",
                        "clusterusages/status",
                        "dependencyrules/status",
                        "cascaderules/status",
                    ],
                    &["get", "list", "watch", "patch", "update", "delete"],
                ),
            ),
            (
                "DeletionRefused, BreakGlass and cascade progress events (core and \
                 events.k8s.io).",
                rule(
                    &["", "events.k8s.io"],
                    &["events"],
                    &["create", "patch", "update"],
                ),
            ),
            (
                "Lien writes its own Validating- and MutatingWebhookConfiguration with the CA \
                 bundle of the certificate it issues itself, and watches them for tampering.",
                rule(
                    &["admissionregistration.k8s.io"],
                    &[
                        "validatingwebhookconfigurations",
                        "mutatingwebhookconfigurations",
                    ],
                    &["get", "list", "watch", "create", "patch", "update"],
                ),
            ),
            (
                "Discovery of new kinds (a Usage or rule over a CRD that appears later), and \
                 `lien run --install-crds`.",
                rule(
                    &["apiextensions.k8s.io"],
                    &["customresourcedefinitions"],
                    &["get", "list", "watch", "create", "patch", "update"],
                ),
            ),
            (
                "\"May the creator of this Usage or rule update what it protects?\" \
                 (`--usage-access-check`), and \"may the requester of this deletion \
                 (kubectl lien delete --when-free) delete the object?\"",
                rule(
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                    &["create"],
                ),
            ),
        ],
    );
    let leases = Manifest::role(
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": metadata("lien-leader-election", Some(NAMESPACE)),
        }),
        vec![(
            "Leader election: one replica writes, every replica answers the webhook.",
            rule(
                &["coordination.k8s.io"],
                &["leases"],
                &["get", "create", "update", "patch"],
            ),
        )],
    );
    let replay_key = Manifest::role(
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": metadata("lien-replay-key", Some(NAMESPACE)),
        }),
        vec![
            (
                "The replay key's Secret is created at the first start (`create` cannot be \
                 restricted by name: the name is not known before the object exists).",
                rule(&[""], &["secrets"], &["create"]),
            ),
            (
                "…and read at every start, by name only. Grant no other subject access to \
                 Secrets in lien-system: the key seals the records of refused DELETEs.",
                json!({"apiGroups": [""], "resources": ["secrets"],
                       "resourceNames": [lien_controller::writer::REPLAY_KEY_SECRET], "verbs": ["get"]}),
            ),
        ],
    );
    let webhook_ca = Manifest::role(
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": metadata("lien-webhook-ca", Some(NAMESPACE)),
        }),
        vec![
            (
                "The webhook CA's Secret is created by the first replica to start (`create` \
                 cannot be restricted by name).",
                rule(&[""], &["secrets"], &["create"]),
            ),
            (
                "…read by every replica at start and then periodically, so that all serve \
                 certificates from the one CA the caBundle trusts; updated by the leader only, \
                 when it rotates the CA (a replace guarded by resourceVersion). By name only: \
                 the Secret holds the CA's private key.",
                json!({"apiGroups": [""], "resources": ["secrets"],
                       "resourceNames": [crate::webhook_ca::WEBHOOK_CA_SECRET],
                       "verbs": ["get", "update"]}),
            ),
        ],
    );
    vec![
        Manifest::plain(json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": metadata(NAME, Some(NAMESPACE)),
        })),
        cluster_role,
        Manifest::plain(binding("ClusterRoleBinding", NAME, None)),
        leases,
        Manifest::plain(binding(
            "RoleBinding",
            "lien-leader-election",
            Some(NAMESPACE),
        )),
        replay_key,
        Manifest::plain(binding("RoleBinding", "lien-replay-key", Some(NAMESPACE))),
        webhook_ca,
        Manifest::plain(binding("RoleBinding", "lien-webhook-ca", Some(NAMESPACE))),
    ]
}

fn deployment() -> Value {
    let probe = |path: &str, period: u32, failures: u32| {
        json!({
            "httpGet": {"path": path, "port": "https", "scheme": "HTTPS"},
            "periodSeconds": period,
            "failureThreshold": failures,
            "timeoutSeconds": 2,
        })
    };
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(NAME, Some(NAMESPACE)),
        "spec": {
            "replicas": 2,
            "revisionHistoryLimit": 5,
            "selector": {"matchLabels": selector()},
            // One replica at a time, never fewer than one ready: the webhook fails closed for
            // in-use objects, so a rollout must not leave it unanswered.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": labels()},
                "spec": {
                    "serviceAccountName": NAME,
                    "automountServiceAccountToken": true,
                    // Longer than the webhook's drain, so SIGTERM's in-flight answers and the
                    // lease release finish.
                    "terminationGracePeriodSeconds": 30,
                    "securityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": 65532,
                        "runAsGroup": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    // Two replicas on two nodes where there are two: a node lost never takes
                    // the webhook with it. `ScheduleAnyway` keeps a one-node cluster working.
                    "topologySpreadConstraints": [{
                        "maxSkew": 1,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": selector()},
                    }],
                    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": selector()},
                        },
                    }]}},
                    "containers": [{
                        "name": NAME,
                        "image": image(),
                        "imagePullPolicy": "IfNotPresent",
                        "args": [
                            "run",
                            format!("--webhook-addr=0.0.0.0:{WEBHOOK_PORT}"),
                            format!("--service-name={SERVICE}"),
                            "--log-format=json",
                        ],
                        "env": [
                            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            {"name": "LIEN_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                        ],
                        "ports": [{"name": "https", "containerPort": WEBHOOK_PORT, "protocol": "TCP"}],
                        "readinessProbe": probe("/readyz", 5, 3),
                        "livenessProbe": probe("/healthz", 10, 6),
                        // docs/operations.md "Sizing": about 130 MiB at 100,000 rule relations
                        // over 1.5 KB objects; raise the limit with the number of relations.
                        "resources": {
                            "requests": {"cpu": "100m", "memory": "128Mi"},
                            "limits": {"memory": "512Mi"},
                        },
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "runAsNonRoot": true,
                            "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                    }],
                },
            },
        },
    })
}

fn service() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(SERVICE, Some(NAMESPACE)),
        "spec": {
            "selector": selector(),
            "ports": [
                {"name": "webhook", "port": 443, "targetPort": "https", "protocol": "TCP"},
                // Prometheus scrapes `/metrics` over HTTPS on the same listener.
                {"name": "metrics", "port": WEBHOOK_PORT, "targetPort": "https", "protocol": "TCP"},
            ],
        },
    })
}

fn disruption_budget() -> Value {
    json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(NAME, Some(NAMESPACE)),
        "spec": {"minAvailable": 1, "selector": {"matchLabels": selector()}},
    })
}

/// Every file of the install, in apply order.
pub fn files() -> Vec<ManifestFile> {
    let mut files = vec![
        ManifestFile {
            path: "namespace.yaml".into(),
            comment: Some(
                "Lien's namespace. Pod Security \"restricted\" is enforced: Lien needs nothing more.",
            ),
            objects: vec![Manifest::plain(json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": NAMESPACE,
                    "labels": {
                        "app.kubernetes.io/part-of": NAME,
                        "pod-security.kubernetes.io/enforce": "restricted",
                        "pod-security.kubernetes.io/enforce-version": "latest",
                    },
                },
            }))],
        },
        ManifestFile {
            path: "rbac.yaml".into(),
            comment: Some(
                "Lien's ServiceAccount and what it may do, each rule with why (least privilege).",
            ),
            objects: rbac(),
        },
    ];
    for crd in lien_api::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let mut object = serde_json::to_value(&crd).unwrap_or_default();
        // `CustomResourceDefinition`'s Serialize writes apiVersion and kind already; keep the
        // object exactly as `lien crds` prints it.
        if object.get("apiVersion").is_none() {
            object["apiVersion"] = json!("apiextensions.k8s.io/v1");
            object["kind"] = json!("CustomResourceDefinition");
        }
        files.push(ManifestFile {
            path: format!("crds/{name}.yaml"),
            comment: None,
            objects: vec![Manifest::plain(object)],
        });
    }
    files.push(ManifestFile {
        path: "deployment.yaml".into(),
        comment: Some("Two replicas: both answer the webhook, one (the Lease holder) writes."),
        objects: vec![
            Manifest::plain(deployment()),
            Manifest::plain(service()),
            Manifest::plain(disruption_budget()),
        ],
    });
    files
}

/// Every object of the install, in apply order.
pub fn objects() -> Vec<Value> {
    files()
        .into_iter()
        .flat_map(|f| f.objects.into_iter().map(|m| m.object))
        .collect()
}

/// `deploy/kustomization.yaml`: the same objects, for `kubectl apply -k deploy/`.
pub fn kustomization() -> String {
    let mut out = String::from(
        "# Generated by `lien manifests --out-dir deploy`: the same objects as `lien manifests`.\n\
         apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n",
    );
    for file in files() {
        out.push_str(&format!("  - {}\n", file.path));
    }
    out
}

/// One object as YAML, with a comment line before each RBAC rule.
pub fn render(manifest: &Manifest) -> Result<String, serde_yaml_ng::Error> {
    if manifest.rule_reasons.is_empty() {
        return serde_yaml_ng::to_string(&manifest.object);
    }
    let mut head = manifest.object.clone();
    let rules = head
        .as_object_mut()
        .and_then(|o| o.remove("rules"))
        .unwrap_or_default();
    let mut out = serde_yaml_ng::to_string(&head)?;
    out.push_str("rules:\n");
    for (reason, rule) in manifest
        .rule_reasons
        .iter()
        .zip(rules.as_array().into_iter().flatten())
    {
        for line in wrap(reason, 96) {
            out.push_str(&format!("  # {line}\n"));
        }
        let yaml = serde_yaml_ng::to_string(rule)?;
        for (i, line) in yaml.lines().enumerate() {
            let prefix = if i == 0 { "  - " } else { "    " };
            out.push_str(prefix);
            out.push_str(line);
            out.push('\n');
        }
    }
    Ok(out)
}

/// A file: its comment, then its objects separated by `---`.
pub fn render_file(file: &ManifestFile) -> Result<String, serde_yaml_ng::Error> {
    let mut out = String::new();
    for line in file.comment.map(|c| wrap(c, 98)).unwrap_or_default() {
        out.push_str(&format!("# {line}\n"));
    }
    let objects = file
        .objects
        .iter()
        .map(render)
        .collect::<Result<Vec<_>, _>>()?;
    out.push_str(&objects.join("---\n"));
    Ok(out)
}

/// Words joined into lines of at most `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
    use serde::de::DeserializeOwned;

    use super::*;

    /// Through the typed API and back: a misspelt field would be dropped and the object differ.
    fn round_trips<T: DeserializeOwned + serde::Serialize>(object: &Value) {
        let typed: T = serde_json::from_value(object.clone()).expect("parses as the kind");
        let back = serde_json::to_value(&typed).expect("serialises");
        assert_eq!(&back, object, "fields lost in a round trip");
    }

    #[test]
    fn every_object_is_well_formed_for_its_kind() {
        for object in objects() {
            match object["kind"].as_str().unwrap_or_default() {
                "Deployment" => round_trips::<Deployment>(&object),
                "Service" => round_trips::<Service>(&object),
                "PodDisruptionBudget" => round_trips::<PodDisruptionBudget>(&object),
                "ClusterRole" => round_trips::<ClusterRole>(&object),
                "Role" => round_trips::<Role>(&object),
                _ => {}
            }
        }
    }

    #[test]
    fn the_pod_meets_pod_security_restricted() {
        let deployment = deployment();
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        for c in pod["containers"].as_array().into_iter().flatten() {
            let sc = &c["securityContext"];
            assert_eq!(sc["allowPrivilegeEscalation"], false);
            assert_eq!(sc["readOnlyRootFilesystem"], true);
            assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
            assert!(c["resources"]["requests"]["memory"].is_string());
            assert!(c["resources"]["limits"]["memory"].is_string());
            assert!(c["readinessProbe"].is_object() && c["livenessProbe"].is_object());
        }
        assert_eq!(deployment["spec"]["replicas"], 2);
        assert_eq!(
            deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
            0
        );
    }

    #[test]
    fn every_rbac_rule_says_why_and_the_yaml_parses_back_to_the_objects() {
        for file in files() {
            for manifest in &file.objects {
                if let Some(rules) = manifest.object["rules"].as_array() {
                    assert_eq!(rules.len(), manifest.rule_reasons.len());
                }
            }
            let text = render_file(&file).expect("renders");
            let parsed: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&text)
                .map(|doc| serde::Deserialize::deserialize(doc).expect("YAML"))
                .collect();
            let want: Vec<Value> = file.objects.iter().map(|m| m.object.clone()).collect();
            assert_eq!(parsed, want, "{}", file.path);
            if file.path == "rbac.yaml" {
                assert!(text.contains("  # Leader election"), "{text}");
            }
        }
    }
}
