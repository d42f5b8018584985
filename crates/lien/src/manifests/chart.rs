//! The Helm chart (`deploy/helm/lien`), generated from the same objects as `lien manifests`.
//!
//! The templates are `lien manifests` rendered with stand-ins in place of the values, each
//! stand-in then replaced by its template expression, so the two install paths cannot drift:
//! with the default values the chart renders exactly `lien manifests`' objects (plus Helm's
//! standard labels and the uninstall hook), with `--set image=…` what `--image …` prints.
//!
//! Values that `lien manifests` has no flag for — scheduling, resources, security contexts,
//! extra arguments, a NetworkPolicy — default to what it prints (or to nothing), and are put in
//! whole with `toYaml`.

use serde_json::{Value, json};

use super::{
    Manifest, NAME, Options, SERVICE, WEBHOOK_PORT, files_with, metadata, render, render_file,
    selector, service_monitor, uninstall_hook, wrap,
};
use super::{UNINSTALL_HOOK_FORCE, deployment};

/// Stand-ins rendered in place of the chart's values, then replaced by template expressions.
const CHART_IMAGE: &str = "lien-chart-image-placeholder";
const CHART_NAMESPACE: &str = "lien-chart-namespace-placeholder";
const CHART_REPLICAS: u32 = 918_273_645;
/// The key put into every templated object's labels, replaced by Helm's standard labels.
const CHART_LABELS: &str = "lien-chart-labels-placeholder";
/// cert-manager (`certManager.enabled`): the Secret its Certificate writes, the pod's volume of
/// it and where the container mounts it (`lien run --tls-cert-file` and the others read there).
const CERT_MANAGER_SECRET: &str = "lien-webhook-tls";
const CERT_MANAGER_VOLUME: &str = "webhook-tls";
const CERT_MANAGER_MOUNT: &str = "/etc/lien/tls";

/// `templates/cert-manager.yaml`: with `certManager.enabled`, cert-manager issues the webhook's
/// serving certificate (`lien run --tls-cert-file` …) instead of Lien's own CA. Without an
/// `issuerRef` the chart makes the usual chain for a webhook: a self-signed Issuer, a CA
/// Certificate from it (ten years), an Issuer of that CA, and the serving Certificate (90 days,
/// renewed 30 days ahead, a new key each time) — renewals keep the CA, so the published
/// `caBundle` does not change with them.
fn cert_manager_template() -> String {
    let labels = "  labels:\n    app.kubernetes.io/name: lien\n    app.kubernetes.io/part-of: lien\n    \
                  {{- include \"lien.labels\" . | nindent 4 }}\n  namespace: {{ .Values.namespace | quote }}\n";
    let object = |kind: &str, name: &str, spec: &str| {
        format!(
            "apiVersion: cert-manager.io/v1\nkind: {kind}\nmetadata:\n  name: {name}\n{labels}spec:\n{spec}"
        )
    };
    format!(
        "# cert-manager issues the webhook's serving certificate (values certManager); off by \
         default: Lien's own CA.\n\
         {{{{- if .Values.certManager.enabled }}}}\n\
         {{{{- if not .Values.certManager.issuerRef }}}}\n{}---\n{}---\n{}---\n{{{{- end }}}}\n{}{{{{- end }}}}\n",
        object("Issuer", "lien-selfsigned", "  selfSigned: {}\n"),
        object(
            "Certificate",
            "lien-webhook-ca",
            "  isCA: true\n  commonName: lien-webhook-ca\n  secretName: lien-webhook-ca-issued\n  \
             duration: 87600h\n  privateKey:\n    algorithm: ECDSA\n    size: 256\n  issuerRef:\n    \
             name: lien-selfsigned\n    kind: Issuer\n"
        ),
        object(
            "Issuer",
            "lien-ca",
            "  ca:\n    secretName: lien-webhook-ca-issued\n"
        ),
        object(
            "Certificate",
            "lien-webhook",
            &format!(
                "  secretName: {CERT_MANAGER_SECRET}\n  dnsNames:\n  - {SERVICE}.{{{{ .Values.namespace }}}}.svc\n  \
                 - {SERVICE}.{{{{ .Values.namespace }}}}.svc.cluster.local\n  duration: 2160h\n  renewBefore: 720h\n  \
                 privateKey:\n    algorithm: ECDSA\n    size: 256\n    rotationPolicy: Always\n  issuerRef:\n    \
                 {{{{- toYaml (.Values.certManager.issuerRef | default (dict \"name\" \"lien-ca\" \"kind\" \"Issuer\")) | nindent 4 }}}}\n"
            )
        ),
    )
}

/// The one resource granted in the stand-in render: its rule becomes a `range` over
/// `rbac.protectedResources` ([`put_in_resources`]).
const CHART_RBAC_GROUP: &str = "lien-chart-rbac-placeholder";

/// A value put in whole (`toYaml`), where in the Deployment it goes, and whether an empty one
/// is left out (`with`) rather than written.
struct BlockValue {
    /// The value's name in values.yaml.
    value: &'static str,
    /// The key it is written under in the pod (template) spec or container.
    key: &'static str,
    /// `true`: left out when empty (a map or list `lien manifests` does not write).
    optional: bool,
}

const POD_VALUES: [BlockValue; 7] = [
    BlockValue {
        value: "podSecurityContext",
        key: "securityContext",
        optional: false,
    },
    BlockValue {
        value: "topologySpreadConstraints",
        key: "topologySpreadConstraints",
        optional: true,
    },
    BlockValue {
        value: "affinity",
        key: "affinity",
        optional: true,
    },
    BlockValue {
        value: "nodeSelector",
        key: "nodeSelector",
        optional: true,
    },
    BlockValue {
        value: "tolerations",
        key: "tolerations",
        optional: true,
    },
    BlockValue {
        value: "priorityClassName",
        key: "priorityClassName",
        optional: true,
    },
    BlockValue {
        value: "extraVolumes",
        key: "volumes",
        optional: true,
    },
];

const CONTAINER_VALUES: [BlockValue; 3] = [
    BlockValue {
        value: "resources",
        key: "resources",
        optional: false,
    },
    BlockValue {
        value: "securityContext",
        key: "securityContext",
        optional: false,
    },
    BlockValue {
        value: "extraVolumeMounts",
        key: "volumeMounts",
        optional: true,
    },
];

fn stand_in(value: &str) -> String {
    format!("lien-chart-{value}-placeholder")
}

/// The values' defaults that `lien manifests` prints: the Deployment's own fields, so that the
/// default render is that Deployment.
fn block_defaults(o: &Options) -> Vec<(&'static str, Value)> {
    let deployment = deployment(o);
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let mut out = Vec::new();
    for v in &POD_VALUES {
        let default = match v.value {
            "nodeSelector" => json!({}),
            "tolerations" => json!([]),
            "priorityClassName" => json!(""),
            "extraVolumes" => json!([]),
            _ => pod[v.key].clone(),
        };
        out.push((v.value, default));
    }
    for v in &CONTAINER_VALUES {
        let default = match v.value {
            "extraVolumeMounts" => json!([]),
            _ => container[v.key].clone(),
        };
        out.push((v.value, default));
    }
    out.push(("podAnnotations", json!({})));
    out.push(("extraArgs", json!([])));
    out
}

/// The Deployment with stand-ins where the block values go.
fn templated_deployment(object: &mut Value) {
    let pod = &mut object["spec"]["template"];
    pod["metadata"]["annotations"] = json!(stand_in("podAnnotations"));
    let spec = &mut pod["spec"];
    for v in &POD_VALUES {
        spec[v.key] = json!(stand_in(v.value));
    }
    let container = &mut spec["containers"][0];
    for v in &CONTAINER_VALUES {
        container[v.key] = json!(stand_in(v.value));
    }
    if let Some(args) = container["args"].as_array_mut() {
        args.push(json!(stand_in("extraArgs")));
    }
}

/// The NetworkPolicy of `networkPolicy.enabled`: only the webhook's port is reachable, from
/// `networkPolicy.from` (empty: from anywhere — the API server's addresses are the cluster's
/// to know, not the chart's).
fn network_policy(namespace: &str) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(NAME, Some(namespace)),
        "spec": {
            "podSelector": {"matchLabels": selector()},
            "policyTypes": ["Ingress"],
            "ingress": [{
                "ports": [{"port": WEBHOOK_PORT, "protocol": "TCP"}],
                "from": stand_in("networkPolicy.from"),
            }],
        },
    })
}

/// Replaces every stand-in line of `text` by its template.
fn put_in_values(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let pad = " ".repeat(indent);
        let trimmed = line.trim_start();
        if trimmed == format!("{CHART_LABELS}: x") {
            out.push_str(&format!(
                "{pad}{{{{- include \"lien.labels\" . | nindent {indent} }}}}\n"
            ));
            continue;
        }
        if trimmed == format!("- {}", stand_in("extraArgs")) {
            out.push_str(&format!("{pad}{{{{- if .Values.certManager.enabled }}}}\n"));
            for (flag, file) in [
                ("--tls-cert-file", "tls.crt"),
                ("--tls-key-file", "tls.key"),
                ("--tls-ca-file", "ca.crt"),
            ] {
                out.push_str(&format!("{pad}- {flag}={CERT_MANAGER_MOUNT}/{file}\n"));
            }
            out.push_str(&format!(
                "{pad}{{{{- end }}}}\n{pad}{{{{- with .Values.extraArgs }}}}\n{pad}{{{{- toYaml . | nindent {indent} }}}}\n{pad}{{{{- end }}}}\n"
            ));
            continue;
        }
        // The volume of cert-manager's Secret and its mount, before any extra ones.
        if let Some((key, _)) = trimmed
            .split_once(": ")
            .filter(|(_, v)| *v == stand_in("extraVolumes") || *v == stand_in("extraVolumeMounts"))
        {
            let (value, item) = if key == "volumes" {
                (
                    "extraVolumes",
                    format!(
                        "{pad}  - name: {CERT_MANAGER_VOLUME}\n{pad}    secret:\n{pad}      secretName: {CERT_MANAGER_SECRET}\n"
                    ),
                )
            } else {
                (
                    "extraVolumeMounts",
                    format!(
                        "{pad}  - name: {CERT_MANAGER_VOLUME}\n{pad}    mountPath: {CERT_MANAGER_MOUNT}\n{pad}    readOnly: true\n"
                    ),
                )
            };
            out.push_str(&format!(
                "{pad}{{{{- if or .Values.{value} .Values.certManager.enabled }}}}\n{pad}{key}:\n\
                 {pad}  {{{{- if .Values.certManager.enabled }}}}\n{item}{pad}  {{{{- end }}}}\n\
                 {pad}  {{{{- with .Values.{value} }}}}\n{pad}  {{{{- toYaml . | nindent {inner} }}}}\n\
                 {pad}  {{{{- end }}}}\n{pad}{{{{- end }}}}\n",
                inner = indent + 2
            ));
            continue;
        }
        let stand_in_of = |name: &str| {
            trimmed
                .split_once(": ")
                .filter(|(_, v)| *v == stand_in(name))
        };
        let mut replaced = false;
        let blocks = POD_VALUES
            .iter()
            .chain(&CONTAINER_VALUES)
            .map(|v| (v.value, v.optional))
            .chain([("podAnnotations", true), ("networkPolicy.from", true)]);
        for (value, optional) in blocks {
            let Some((key, _)) = stand_in_of(value) else {
                continue;
            };
            let inner = indent + 2;
            if value == "priorityClassName" {
                out.push_str(&format!(
                    "{pad}{{{{- with .Values.priorityClassName }}}}\n{pad}{key}: {{{{ . | quote }}}}\n{pad}{{{{- end }}}}\n"
                ));
            } else if optional {
                out.push_str(&format!(
                    "{pad}{{{{- with .Values.{value} }}}}\n{pad}{key}:\n{pad}  {{{{- toYaml . | nindent {inner} }}}}\n{pad}{{{{- end }}}}\n"
                ));
            } else {
                out.push_str(&format!(
                    "{pad}{key}:\n{pad}  {{{{- toYaml .Values.{value} | nindent {inner} }}}}\n"
                ));
            }
            replaced = true;
            break;
        }
        if !replaced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Replaces the stand-in resource's rule (`CHART_RBAC_GROUP`) by one rule per entry of
/// `rbac.protectedResources`, with the stand-in rule's verbs.
fn put_in_resources(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        let starts = lines[i].trim() == "- apiGroups:"
            && lines
                .get(i + 1)
                .is_some_and(|l| l.trim() == format!("- {CHART_RBAC_GROUP}"));
        if !starts {
            out.push_str(lines[i]);
            out.push('\n');
            i += 1;
            continue;
        }
        let indent = lines[i].len() - lines[i].trim_start().len();
        let pad = " ".repeat(indent);
        // The rule ends where the next item (or its comment) at the list's indent begins.
        let mut end = i + 1;
        while end < lines.len() && lines[end].len() - lines[end].trim_start().len() > indent {
            end += 1;
        }
        let verbs_at = (i..end)
            .find(|&k| lines[k].trim() == "verbs:")
            .unwrap_or(end);
        out.push_str(&format!(
            "{pad}{{{{- range .Values.rbac.protectedResources }}}}\n\
             {pad}- apiGroups:\n{pad}  {{{{- toYaml .apiGroups | nindent {n} }}}}\n\
             {pad}  resources:\n{pad}  {{{{- toYaml .resources | nindent {n} }}}}\n",
            n = indent + 2
        ));
        for line in &lines[verbs_at..end] {
            out.push_str(line);
            out.push('\n');
        }
        out.push_str(&format!("{pad}{{{{- end }}}}\n"));
        i = end;
    }
    out
}

/// The object as a template: its labels with Helm's standard ones added.
fn with_chart_labels(manifest: &Manifest) -> Manifest {
    let mut m = manifest.clone();
    if let Some(labels) = m.object["metadata"]["labels"].as_object_mut() {
        labels.insert(CHART_LABELS.into(), json!("x"));
    }
    m
}

/// `templates/_helpers.tpl`: Helm's standard labels, on every object the chart templates.
const HELPERS: &str = "{{/* Helm's standard labels, added to every object's own labels (not to the pod \
template's:\n     a new chart version must not restart Lien by itself). */}}\n\
{{- define \"lien.labels\" -}}\n\
helm.sh/chart: {{ printf \"%s-%s\" .Chart.Name .Chart.Version | replace \"+\" \"_\" | trunc 63 | trimSuffix \"-\" }}\n\
app.kubernetes.io/managed-by: {{ .Release.Service }}\n\
app.kubernetes.io/instance: {{ .Release.Name }}\n\
{{- end }}\n";

fn yaml_block(value: &Value, indent: usize) -> Result<String, serde_yaml_ng::Error> {
    let text = serde_yaml_ng::to_string(value)?;
    let pad = " ".repeat(indent);
    Ok(text
        .lines()
        .map(|l| format!("{pad}{l}\n"))
        .collect::<String>())
}

/// A value's default in values.yaml: `key: scalar` or `key:` and an indented block.
fn value_line(key: &str, value: &Value) -> Result<String, serde_yaml_ng::Error> {
    let empty = value.as_object().is_some_and(|m| m.is_empty())
        || value.as_array().is_some_and(|a| a.is_empty());
    if (value.is_object() || value.is_array()) && !empty {
        Ok(format!("{key}:\n{}", yaml_block(value, 2)?))
    } else {
        Ok(format!("{key}: {}", serde_yaml_ng::to_string(value)?))
    }
}

fn values_yaml(defaults: &Options) -> Result<String, serde_yaml_ng::Error> {
    let mut text = format!(
        "# Generated by `lien manifests --helm-chart deploy/helm/lien`. With these defaults the \
         chart installs\n# exactly what `lien manifests` prints (and Helm's standard labels); \
         image, namespace and replicas\n# are the flags of the same name.\n\
         # The image: `docker build -t {image} .` builds this tag from the repository's \
         Dockerfile;\n# push it to your registry and set its name there.\n\
         image: {image}\n\
         # Every namespaced object goes here (not into the release's namespace).\n\
         namespace: {namespace}\n\
         # false when the namespace exists already (e.g. `helm install --create-namespace`): \
         then label it\n# pod-security.kubernetes.io/enforce=restricted yourself.\n\
         createNamespace: true\n\
         # At least 1; below 2 no PodDisruptionBudget is installed.\n\
         replicas: {replicas}\n\
         # true installs a Prometheus Operator ServiceMonitor scraping /metrics over HTTPS (the \
         CRD must\n# exist); docs/operations.md \"Scraping\" says how to verify the webhook's \
         certificate.\n\
         serviceMonitor:\n  enabled: false\n\
         # `helm uninstall` first runs `lien uninstall --keep-installed-objects` as a pre-delete \
         hook Job\n# (docs/operations.md \"Uninstall\"): it stops Lien, deletes its webhook \
         configurations and removes\n# its labels, records and finalizers, so that no DELETE \
         fails once the Deployment is gone. While a\n# Usage or rule still protects something it \
         refuses, and `helm uninstall` fails with nothing\n# removed (the Job's log lists them), \
         unless force is true. enabled: false skips it (then run\n# `lien uninstall` yourself \
         before `helm uninstall`). The CRDs stay, as Helm keeps a chart's crds/.\n\
         uninstallHook:\n  enabled: true\n  force: false\n\
         # true installs a NetworkPolicy letting only the webhook's port {WEBHOOK_PORT} be \
         reached, from `from`\n# (NetworkPolicyPeers; empty: from anywhere). The API server \
         calls the webhook there, and\n# Prometheus scrapes /metrics there: list both if you \
         restrict it.\n\
         networkPolicy:\n  enabled: false\n  from: []\n\
         # true: cert-manager (installed in the cluster) issues the webhook's serving \
         certificate, mounted from\n# its Secret lien-webhook-tls and served by `lien run \
         --tls-cert-file` (docs/operations.md \"cert-manager\"),\n# instead of Lien's own CA. \
         issuerRef: an Issuer or ClusterIssuer of yours ({{name, kind, group}}) that fills \
         ca.crt;\n# empty: the chart makes a self-signed CA (ten years) and issues from it.\n\
         certManager:\n  enabled: false\n  issuerRef: {{}}\n",
        image = serde_yaml_ng::to_string(&defaults.image)?.trim_end(),
        namespace = serde_yaml_ng::to_string(&defaults.namespace)?.trim_end(),
        replicas = defaults.replicas,
    );
    let comments = [
        (
            "extraArgs",
            "# Arguments added to `lien run` (`lien run --help`), e.g. --break-glass-group=… or\n\
             # --client-ca-file=/etc/lien/client-ca/ca.crt with the volume below (docs/operations.md\n\
             # \"Recording refused DELETEs\").\n",
        ),
        ("podAnnotations", "# Annotations on Lien's pods.\n"),
        (
            "podSecurityContext",
            "# The pod's and the container's security contexts: Pod Security \"restricted\" as \
             they are.\n",
        ),
        ("securityContext", ""),
        (
            "resources",
            "# docs/operations.md \"Sizing\": raise the memory limit with the number of \
             relations.\n",
        ),
        (
            "priorityClassName",
            "# Scheduling. Lien's webhook fails closed for objects in use: a high priority class \
             (e.g.\n# system-cluster-critical) keeps it scheduled under pressure.\n",
        ),
        ("nodeSelector", ""),
        ("tolerations", ""),
        ("affinity", ""),
        ("topologySpreadConstraints", ""),
        (
            "extraVolumes",
            "# Volumes of Lien's pod and where its container mounts them (e.g. a Secret or \
             ConfigMap with\n# the API server's client CA).\n",
        ),
        ("extraVolumeMounts", ""),
    ];
    let protected: Vec<Value> = super::resource_rules(&defaults.resources)
        .into_iter()
        .map(|(group, resources)| json!({"apiGroups": [group], "resources": resources}))
        .collect();
    text.push_str(
        "# The resources Lien may watch, label and delete (RBAC rules without verbs: Lien's \
         ClusterRole grants\n# get, list, watch, patch and delete on each, the uninstall hook \
         list and patch). A Usage or rule\n# naming a kind of another resource says NotPermitted \
         and names it: add it here. No Secrets unless\n# added (a list or watch reads them in \
         full); Namespaces are always granted. apiGroups: [\"*\"] with\n# resources: [\"*\"] \
         grants everything (`lien manifests --resource` is the same list).\n",
    );
    text.push_str(&format!(
        "rbac:\n{}",
        yaml_block(&json!({ "protectedResources": protected }), 2)?
    ));
    let defaults_of = block_defaults(defaults);
    for (key, comment) in comments {
        let value = defaults_of
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        text.push_str(comment);
        text.push_str(&value_line(key, &value)?);
    }
    Ok(text)
}

/// The Helm chart (`deploy/helm/lien`, written by `lien manifests --helm-chart DIR`): its
/// files, relative to the chart's directory, with `defaults` as the values' defaults. Rendered
/// by Helm with these values it yields the objects of [`super::objects_with`] with Helm's
/// standard labels added, and the pre-delete hook of [`uninstall_hook`] (`tests/manifests.rs`
/// renders it with Helm's own engine and compares).
pub fn helm_chart(defaults: &Options) -> Result<Vec<(String, String)>, serde_yaml_ng::Error> {
    let version = env!("CARGO_PKG_VERSION");
    let placeholders = Options {
        image: CHART_IMAGE.into(),
        namespace: CHART_NAMESPACE.into(),
        replicas: CHART_REPLICAS,
        resources: vec![super::Resource {
            group: CHART_RBAC_GROUP.to_owned(),
            resource: "placeholder".to_owned(),
        }],
    };
    let templated = |text: String| {
        put_in_values(
            &put_in_resources(&text)
                .replace(CHART_IMAGE, "{{ .Values.image | quote }}")
                .replace(CHART_NAMESPACE, "{{ .Values.namespace | quote }}")
                .replace(
                    &format!("replicas: {CHART_REPLICAS}"),
                    "replicas: {{ int .Values.replicas }}",
                ),
        )
    };
    let rendered = |m: &Manifest| render(&with_chart_labels(m)).map(templated);
    let mut out = vec![
        (
            "Chart.yaml".to_owned(),
            format!(
                "# Generated by `lien manifests --helm-chart deploy/helm/lien`: do not edit; its \
                 templates are\n# `lien manifests`, with the values below put in.\n\
                 apiVersion: v2\nname: lien\n\
                 description: Lien makes deletion safe in Kubernetes (webhook and controller)\n\
                 type: application\nversion: {version}\nappVersion: \"{version}\"\n"
            ),
        ),
        ("values.yaml".to_owned(), values_yaml(defaults)?),
        ("values.schema.json".to_owned(), values_schema()),
        ("templates/_helpers.tpl".to_owned(), HELPERS.to_owned()),
        (
            "templates/servicemonitor.yaml".to_owned(),
            format!(
                "# Off by default (serviceMonitor.enabled), so the default render is `lien \
                 manifests`.\n{{{{- if .Values.serviceMonitor.enabled }}}}\n{}{{{{- end }}}}\n",
                rendered(&Manifest::plain(service_monitor(CHART_NAMESPACE)))?
            ),
        ),
        (
            "templates/networkpolicy.yaml".to_owned(),
            format!(
                "# Off by default (networkPolicy.enabled).\n\
                 {{{{- if .Values.networkPolicy.enabled }}}}\n{}{{{{- end }}}}\n",
                rendered(&Manifest::plain(network_policy(CHART_NAMESPACE)))?
            ),
        ),
    ];
    out.push((
        "templates/cert-manager.yaml".to_owned(),
        cert_manager_template(),
    ));
    let mut hook = String::from(
        "# Helm's pre-delete hook: `lien uninstall --keep-installed-objects` before Helm deletes \
         anything\n# (values `uninstallHook`).\n{{- if .Values.uninstallHook.enabled }}\n",
    );
    let docs = uninstall_hook(&placeholders, true)
        .iter()
        .map(rendered)
        .collect::<Result<Vec<_>, _>>()?;
    for line in docs.join("---\n").lines() {
        if line.trim() == format!("- {UNINSTALL_HOOK_FORCE}") {
            // As the flag: only with `uninstallHook.force`.
            hook.push_str(&format!(
                "{{{{- if .Values.uninstallHook.force }}}}\n{line}\n{{{{- end }}}}\n"
            ));
        } else {
            hook.push_str(line);
            hook.push('\n');
        }
    }
    hook.push_str("{{- end }}\n");
    out.push(("templates/uninstall-hook.yaml".to_owned(), hook));
    for file in files_with(&placeholders) {
        if file.path.starts_with("crds/") {
            // Helm installs crds/ as is, before the templates (and never upgrades or deletes
            // them: docs/operations.md says what that means for upgrades).
            out.push((file.path.clone(), render_file(&file)?));
            continue;
        }
        let mut text = String::new();
        for line in file.comment.map(|c| wrap(c, 98)).unwrap_or_default() {
            text.push_str(&format!("# {line}\n"));
        }
        let mut docs = Vec::new();
        let mut budget = None;
        for manifest in &file.objects {
            let mut manifest = manifest.clone();
            if manifest.object["kind"] == "Deployment" {
                templated_deployment(&mut manifest.object);
            }
            let doc = rendered(&manifest)?;
            if manifest.object["kind"] == "PodDisruptionBudget" {
                budget = Some(doc);
            } else {
                docs.push(doc);
            }
        }
        text.push_str(&docs.join("---\n"));
        if let Some(budget) = budget {
            // As `lien manifests --replicas 1`: no budget for a single replica.
            text.push_str("{{- if ge (int .Values.replicas) 2 }}\n---\n");
            text.push_str(&budget);
            text.push_str("{{- end }}\n");
        }
        if file.path == "namespace.yaml" {
            text = format!("{{{{- if .Values.createNamespace }}}}\n{text}{{{{- end }}}}\n");
        }
        out.push((format!("templates/{}", file.path), text));
    }
    Ok(out)
}

/// `values.schema.json`: Helm refuses values that `lien manifests` would refuse as flags, and
/// values of the wrong shape, naming them.
fn values_schema() -> String {
    let component = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
    let image = format!(
        "^(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?{component}(?:/{component})*\
         (?::[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?\
         (?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{{32,}})?$"
    );
    let strings = json!({"type": "object", "additionalProperties": {"type": "string"}});
    let schema = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Lien's chart values (image, namespace and replicas are the flags of `lien manifests`)",
        "type": "object",
        "additionalProperties": false,
        "required": ["image", "namespace", "createNamespace", "replicas"],
        "properties": {
            "image": {"type": "string", "pattern": image,
                      "description": "an image reference, e.g. registry.example.com/lien:0.1.0"},
            "namespace": {"type": "string", "maxLength": 63,
                          "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                          "description": "a DNS label: lowercase letters, digits and '-'"},
            "createNamespace": {"type": "boolean"},
            "replicas": {"type": "integer", "minimum": 1},
            "serviceMonitor": {
                "type": "object",
                "additionalProperties": false,
                "properties": {"enabled": {"type": "boolean"}},
            },
            "uninstallHook": {
                "type": "object",
                "additionalProperties": false,
                "properties": {"enabled": {"type": "boolean"}, "force": {"type": "boolean"}},
            },
            "networkPolicy": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "enabled": {"type": "boolean"},
                    "from": {"type": "array", "items": {"type": "object"},
                             "description": "NetworkPolicyPeers (podSelector, namespaceSelector, ipBlock)"},
                },
            },
            "certManager": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "enabled": {"type": "boolean"},
                    "issuerRef": {
                        "type": "object",
                        "additionalProperties": false,
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "kind": {"type": "string", "enum": ["Issuer", "ClusterIssuer"]},
                            "group": {"type": "string"},
                        },
                        "description": "an Issuer or ClusterIssuer that fills ca.crt; empty: the chart's own self-signed CA",
                    },
                },
            },
            "rbac": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "protectedResources": {
                        "type": "array",
                        "description": "the resources Lien may watch, label and delete, as RBAC rules without verbs",
                        "items": {
                            "type": "object",
                            "additionalProperties": false,
                            "required": ["apiGroups", "resources"],
                            "properties": {
                                "apiGroups": {"type": "array", "minItems": 1,
                                              "items": {"type": "string", "pattern": "^(\\*|[a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$"},
                                              "description": "API groups: \"\" is the core group, * every group"},
                                "resources": {"type": "array", "minItems": 1,
                                              "items": {"type": "string", "pattern": "^(\\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$"},
                                              "description": "lowercase plurals as `kubectl api-resources` lists them, or *"},
                            },
                        },
                    },
                },
            },
            "extraArgs": {"type": "array",
                          "items": {"type": "string", "pattern": "^--[a-z]",
                                    "description": "a `lien run` flag, e.g. --break-glass-group=platform-admins"}},
            "podAnnotations": strings.clone(),
            "podSecurityContext": {"type": "object"},
            "securityContext": {"type": "object"},
            "resources": {"type": "object", "additionalProperties": false,
                          "properties": {"requests": {"type": "object"}, "limits": {"type": "object"},
                                         "claims": {"type": "array"}}},
            "priorityClassName": {"type": "string"},
            "nodeSelector": strings,
            "tolerations": {"type": "array", "items": {"type": "object"}},
            "affinity": {"type": "object"},
            "topologySpreadConstraints": {"type": "array", "items": {"type": "object"}},
            "extraVolumes": {"type": "array", "items": {"type": "object", "required": ["name"]}},
            "extraVolumeMounts": {"type": "array",
                                  "items": {"type": "object", "required": ["name", "mountPath"]}},
        },
    });
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chart_templates_every_value_as_a_whole_scalar() {
        let chart = helm_chart(&Options::default()).expect("renders");
        let mut seen = [0; 3];
        for (path, text) in &chart {
            assert!(!text.contains("placeholder"), "{path}: {text}");
            for line in text.lines() {
                for (i, expr) in [
                    "{{ .Values.image | quote }}",
                    "{{ .Values.namespace | quote }}",
                    "{{ int .Values.replicas }}",
                ]
                .iter()
                .enumerate()
                {
                    if line.contains(expr) {
                        seen[i] += 1;
                        assert!(
                            line.ends_with(&format!(": {expr}"))
                                || line.trim() == format!("- {expr}"),
                            "{path}: {line}"
                        );
                    }
                }
            }
        }
        // The image of the Deployment and of the uninstall hook's Job, one replicas, and the
        // namespace of: the Namespace, 8 namespaced RBAC objects + 3 subjects, Deployment,
        // Service, PodDisruptionBudget, ServiceMonitor, NetworkPolicy; and the hook's
        // ServiceAccount, Role, RoleBinding, 2 subjects, Job and its `--namespace` argument;
        // and cert-manager's two Issuers and two Certificates.
        assert_eq!(seen, [2, 28, 1], "templated values");
    }

    #[test]
    fn every_block_value_defaults_to_what_lien_manifests_prints() {
        let o = Options::default();
        let deployment = deployment(&o);
        let pod = &deployment["spec"]["template"]["spec"];
        let defaults = block_defaults(&o);
        let get = |k: &str| defaults.iter().find(|(key, _)| *key == k).map(|(_, v)| v);
        assert_eq!(get("affinity"), Some(&pod["affinity"]));
        assert_eq!(get("resources"), Some(&pod["containers"][0]["resources"]));
        assert_eq!(get("podSecurityContext"), Some(&pod["securityContext"]));
        // What `lien manifests` does not write defaults to nothing.
        for absent in [
            "nodeSelector",
            "tolerations",
            "priorityClassName",
            "volumes",
        ] {
            assert!(pod.get(absent).is_none(), "{absent}");
        }
        assert_eq!(get("extraArgs"), Some(&json!([])));
    }
}
