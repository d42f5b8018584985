//! The defaults kube-apiserver applies to workloads and Services when it decodes them (k/k
//! `pkg/apis/{core,apps,batch}/v1/defaults.go`), the fields their strategies' `PrepareForCreate`
//! set, and what the admission plugins every cluster runs add to a Pod (`ServiceAccount`,
//! `Priority`, `DefaultTolerationSeconds`). Pure functions over JSON: no I/O.

use serde_json::{Map, Value, json};

/// Sets `object[field]` to `value` when absent or null.
fn default(object: &mut Value, field: &str, value: Value) {
    if object.is_object() && object[field].is_null() {
        object[field] = value;
    }
}

/// `object[field]`, made an empty object first unless it is one (a defaulted struct: Go decodes
/// a missing struct as its zero value, whose fields are then defaulted).
fn object_at<'a>(object: &'a mut Value, field: &str) -> &'a mut Value {
    if !object[field].is_object() {
        object[field] = json!({});
    }
    &mut object[field]
}

/// A workload's update strategy (`strategy` of a Deployment, `updateStrategy` of a StatefulSet
/// or DaemonSet): type `RollingUpdate` unless set, and then its `rollingUpdate` defaults.
fn rolling_update(spec: &mut Value, field: &str, defaults: &[(&str, Value)]) {
    let strategy = object_at(spec, field);
    default(strategy, "type", json!("RollingUpdate"));
    if strategy["type"] == "RollingUpdate" {
        let rolling = object_at(strategy, "rollingUpdate");
        for (name, value) in defaults {
            default(rolling, name, value.clone());
        }
    }
}

/// Calls `f` on each item of the array `object[field]`, if there is one (never inserting the
/// field: a missing list stays missing).
fn each(object: &mut Value, field: &str, mut f: impl FnMut(&mut Value)) {
    if let Some(items) = object.get_mut(field).and_then(Value::as_array_mut) {
        items.iter_mut().for_each(&mut f);
    }
}

/// `SetDefaults_Container` and friends, for one container of any kind.
fn container(c: &mut Value) {
    default(c, "terminationMessagePath", json!("/dev/termination-log"));
    default(c, "terminationMessagePolicy", json!("File"));
    if c["imagePullPolicy"].is_null() {
        let policy = if image_tag(c["image"].as_str().unwrap_or_default()) == "latest" {
            "Always"
        } else {
            "IfNotPresent"
        };
        c["imagePullPolicy"] = json!(policy);
    }
    default(c, "resources", json!({}));
    each(c, "ports", |p| default(p, "protocol", json!("TCP")));
    each(c, "env", |e| {
        if e["valueFrom"]["fieldRef"].is_object() {
            default(&mut e["valueFrom"]["fieldRef"], "apiVersion", json!("v1"));
        }
    });
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if c[probe].is_object() {
            let p = &mut c[probe];
            default(p, "timeoutSeconds", json!(1));
            default(p, "periodSeconds", json!(10));
            default(p, "successThreshold", json!(1));
            default(p, "failureThreshold", json!(3));
            if p["httpGet"].is_object() {
                default(&mut p["httpGet"], "path", json!("/"));
                default(&mut p["httpGet"], "scheme", json!("HTTP"));
            }
        }
    }
}

/// The tag `ParseImageName` finds: `latest` when the reference names neither tag nor digest.
pub fn image_tag(image: &str) -> &str {
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':') {
        Some((_, tag)) => tag,
        None if digest.is_some() => "",
        None => "latest",
    }
}

/// `SetDefaults_PodSpec` (and the container and volume defaults under it): what every pod
/// template and Pod gets.
pub fn pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    default(spec, "dnsPolicy", json!("ClusterFirst"));
    default(spec, "restartPolicy", json!("Always"));
    default(spec, "terminationGracePeriodSeconds", json!(30));
    default(spec, "securityContext", json!({}));
    default(spec, "schedulerName", json!("default-scheduler"));
    for field in ["containers", "initContainers", "ephemeralContainers"] {
        each(spec, field, container);
    }
    each(spec, "volumes", |v| {
        for source in ["configMap", "secret", "projected", "downwardAPI"] {
            if v[source].is_object() {
                default(&mut v[source], "defaultMode", json!(420));
            }
        }
        if v["hostPath"].is_object() {
            default(&mut v["hostPath"], "type", json!(""));
        }
    });
}

/// The pod template at `spec.template`, if there is one.
fn template_in(spec: &mut Value) {
    if let Some(t) = spec.get_mut("template") {
        pod_template(t);
    }
}

/// A pod template (`spec.template` of workloads).
pub fn pod_template(template: &mut Value) {
    if let Some(spec) = template.get_mut("spec") {
        pod_spec(spec);
    }
}

/// A Pod as decoding defaults it: `SetDefaults_Pod` (limits copied to unset requests,
/// `enableServiceLinks`) and the pod spec defaults — what the writer's managedFields own.
pub fn pod(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    for field in ["containers", "initContainers"] {
        each(spec, field, |c| {
            let limits = c["resources"]["limits"].as_object().cloned();
            if let Some(limits) = limits {
                let requests = object_at(&mut c["resources"], "requests");
                for (name, value) in limits {
                    default(requests, &name, value);
                }
            }
        });
    }
    pod_spec(spec);
    default(spec, "enableServiceLinks", json!(true));
}

/// A Pod on create, after decoding (and after its writer's managedFields are recorded, so
/// nobody owns these): what the `ServiceAccount`, `Priority` and `DefaultTolerationSeconds`
/// admission plugins add, and `PrepareForCreate`'s status (`Pending`, with its QoS class).
/// `volume_suffix` names the projected token volume (`kube-api-access-<suffix>`).
pub fn pod_admitted(object: &mut Value, volume_suffix: &str) {
    let Some(spec) = object.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    // A negative grace period is stored as 1 on create (kube-apiserver v1.32 answers a Pod
    // created with -5 with 1; a Pod stored negative before may be updated to 1, `pod_update`).
    if spec["terminationGracePeriodSeconds"]
        .as_i64()
        .is_some_and(|g| g < 0)
    {
        spec["terminationGracePeriodSeconds"] = json!(1);
    }
    // ServiceAccount admission plugin.
    default(spec, "serviceAccountName", json!("default"));
    let sa = spec["serviceAccountName"].clone();
    spec["serviceAccount"] = sa;
    if spec["automountServiceAccountToken"] != json!(false) {
        mount_service_account_token(spec, volume_suffix);
    }
    // Priority admission plugin (no default PriorityClass).
    if spec["priorityClassName"].is_null() {
        default(spec, "priority", json!(0));
    }
    default(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    // DefaultTolerationSeconds admission plugin.
    let mut tolerations = spec["tolerations"].as_array().cloned().unwrap_or_default();
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerated = tolerations.iter().any(|t| {
            (t["key"] == key || t["key"].is_null() && t["operator"] == "Exists")
                && (t["effect"] == "NoExecute" || t["effect"].is_null())
        });
        if !tolerated {
            tolerations.push(json!({
                "key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300,
            }));
        }
    }
    spec["tolerations"] = json!(tolerations);
    let qos = qos_class(&object["spec"]);
    object["status"] = json!({"phase": "Pending", "qosClass": qos});
}

/// The projected volume the `ServiceAccount` admission plugin adds, mounted in every container
/// that does not mount that path already.
fn mount_service_account_token(spec: &mut Value, suffix: &str) {
    const PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
    let mounted = |c: &Value| {
        c["volumeMounts"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["mountPath"] == PATH))
    };
    let name = format!("kube-api-access-{suffix}");
    let mut any = false;
    for field in ["containers", "initContainers"] {
        each(spec, field, |c| {
            if !mounted(c) {
                let mut mounts = c["volumeMounts"].as_array().cloned().unwrap_or_default();
                mounts.push(json!({"name": name, "readOnly": true, "mountPath": PATH}));
                c["volumeMounts"] = json!(mounts);
                any = true;
            }
        });
    }
    if !any {
        return;
    }
    let mut volumes = spec["volumes"].as_array().cloned().unwrap_or_default();
    volumes.push(json!({
        "name": name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
        },
    }));
    spec["volumes"] = json!(volumes);
}

/// `GetPodQOS` (k/k `pkg/apis/core/helper/qos`): Guaranteed when every container sets cpu and
/// memory limits equal to its requests, BestEffort when none sets any, Burstable otherwise.
pub fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .flat_map(|f| spec[*f].as_array().into_iter().flatten())
        .collect();
    let compute = |m: &Value| -> Map<String, Value> {
        m.as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| *k == "cpu" || *k == "memory")
                    .filter(|(_, v)| !is_zero(v))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut any = false;
    let mut guaranteed = true;
    for c in &containers {
        let requests = compute(&c["resources"]["requests"]);
        let limits = compute(&c["resources"]["limits"]);
        any |= !requests.is_empty() || !limits.is_empty();
        let full = limits.len() == 2;
        let equal = requests.iter().all(|(k, v)| limits.get(k) == Some(v));
        guaranteed &= full && equal;
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.trim_start_matches('0').is_empty() || s == "0m",
        _ => false,
    }
}

/// `SetDefaults_Deployment`.
pub fn deployment(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    default(spec, "replicas", json!(1));
    default(spec, "revisionHistoryLimit", json!(10));
    default(spec, "progressDeadlineSeconds", json!(600));
    rolling_update(
        spec,
        "strategy",
        &[("maxUnavailable", json!("25%")), ("maxSurge", json!("25%"))],
    );
    template_in(spec);
}

/// `SetDefaults_ReplicaSet`.
pub fn replica_set(object: &mut Value) {
    if let Some(spec) = object.get_mut("spec").filter(|s| s.is_object()) {
        default(spec, "replicas", json!(1));
        template_in(spec);
    }
}

/// `SetDefaults_ReplicationController`: replicas, and selector and labels from the template's
/// labels when unset.
pub fn replication_controller(object: &mut Value) {
    let labels = object["spec"]["template"]["metadata"]["labels"].clone();
    let Some(spec) = object.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    default(spec, "replicas", json!(1));
    if labels.as_object().is_some_and(|l| !l.is_empty()) {
        if spec["selector"].as_object().is_none_or(Map::is_empty) {
            spec["selector"] = labels.clone();
        }
        let meta = &mut object["metadata"];
        if meta["labels"].as_object().is_none_or(Map::is_empty) {
            meta["labels"] = labels;
        }
    }
    if let Some(spec) = object.get_mut("spec") {
        template_in(spec);
    }
}

/// `SetDefaults_PersistentVolumeClaimSpec`: a claim is for a file system unless it says block.
pub fn persistent_volume_claim(object: &mut Value) {
    if let Some(spec) = object.get_mut("spec").filter(|s| s.is_object()) {
        default(spec, "volumeMode", json!("Filesystem"));
    }
}

/// `SetDefaults_PersistentVolume` and `SetDefaults_HostPathVolumeSource`: reclaimed by hand
/// (`Retain`), a file system, and a hostPath of unset type (`""`: no check of what is there).
pub fn persistent_volume(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    default(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
    default(spec, "volumeMode", json!("Filesystem"));
    if let Some(host_path) = spec.get_mut("hostPath").filter(|h| h.is_object()) {
        default(host_path, "type", json!(""));
    }
}

/// `SetDefaults_StatefulSet`.
pub fn stateful_set(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    default(spec, "podManagementPolicy", json!("OrderedReady"));
    rolling_update(spec, "updateStrategy", &[("partition", json!(0))]);
    let retention = object_at(spec, "persistentVolumeClaimRetentionPolicy");
    default(retention, "whenDeleted", json!("Retain"));
    default(retention, "whenScaled", json!("Retain"));
    default(spec, "replicas", json!(1));
    default(spec, "revisionHistoryLimit", json!(10));
    template_in(spec);
    each(spec, "volumeClaimTemplates", |pvc| {
        // Not a default: apps/v1's conversion from the internal type writes every claim
        // template's type (`Convert_apps_StatefulSetSpec_To_v1_StatefulSetSpec`), whatever the
        // request said, so every answer carries it.
        pvc["apiVersion"] = json!("v1");
        pvc["kind"] = json!("PersistentVolumeClaim");
        default(&mut pvc["spec"], "volumeMode", json!("Filesystem"));
        default(pvc, "status", json!({"phase": "Pending"}));
    });
}

/// `SetDefaults_DaemonSet`.
pub fn daemon_set(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    rolling_update(
        spec,
        "updateStrategy",
        &[("maxUnavailable", json!(1)), ("maxSurge", json!(0))],
    );
    default(spec, "revisionHistoryLimit", json!(10));
    template_in(spec);
}

/// `SetDefaults_Job` (batch/v1): both completions and parallelism 1 when neither is set,
/// backoffLimit 6, NonIndexed, not suspended, `podReplacementPolicy` (JobPodReplacementPolicy,
/// beta and on in 1.32), and the Job's labels from its template's when it has none.
pub fn job(object: &mut Value) {
    let labels = object["spec"]["template"]["metadata"]["labels"].clone();
    let Some(spec) = object.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    job_spec(spec);
    if labels.as_object().is_some_and(|l| !l.is_empty())
        && object["metadata"]["labels"]
            .as_object()
            .is_none_or(Map::is_empty)
    {
        object["metadata"]["labels"] = labels;
    }
}

fn job_spec(spec: &mut Value) {
    if spec["completions"].is_null() && spec["parallelism"].is_null() {
        spec["completions"] = json!(1);
        spec["parallelism"] = json!(1);
    }
    default(spec, "parallelism", json!(1));
    if spec["backoffLimit"].is_null() {
        let limit = if spec["backoffLimitPerIndex"].is_null() {
            json!(6)
        } else {
            json!(i32::MAX)
        };
        spec["backoffLimit"] = limit;
    }
    default(spec, "completionMode", json!("NonIndexed"));
    default(spec, "suspend", json!(false));
    let replacement = if spec["podFailurePolicy"].is_null() {
        "TerminatingOrFailed"
    } else {
        "Failed"
    };
    default(spec, "podReplacementPolicy", json!(replacement));
    template_in(spec);
}

/// The Job strategy's `PrepareForCreate` without `manualSelector`: a selector on the Job's own
/// uid, and the labels that select it on the template (`generateSelector` in
/// `pkg/registry/batch/job/strategy.go`); status starts empty.
pub fn job_selector(object: &mut Value) {
    let uid = object["metadata"]["uid"].clone();
    let name = object["metadata"]["name"].clone();
    let Some(spec) = object.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    if spec["manualSelector"] == json!(true) {
        return;
    }
    spec["selector"] = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
    let template = &mut spec["template"];
    let labels = object_at(object_at(template, "metadata"), "labels");
    for (key, value) in [
        ("batch.kubernetes.io/controller-uid", &uid),
        ("batch.kubernetes.io/job-name", &name),
        ("controller-uid", &uid),
        ("job-name", &name),
    ] {
        default(labels, key, value.clone());
    }
}

/// `SetDefaults_CronJob`, and the pod template defaults inside its job template.
pub fn cron_job(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    default(spec, "concurrencyPolicy", json!("Allow"));
    default(spec, "suspend", json!(false));
    default(spec, "successfulJobsHistoryLimit", json!(3));
    default(spec, "failedJobsHistoryLimit", json!(1));
    if let Some(job) = spec.get_mut("jobTemplate").and_then(|j| j.get_mut("spec")) {
        template_in(job);
    }
}

/// `SetDefaults_Service` and `SetDefaults_ServicePort` (every write): type, session affinity,
/// ports' protocol and targetPort, traffic policies. Cluster IPs and IP families are the
/// allocator's (`apiserver::services`).
pub fn service(object: &mut Value) {
    let spec = object_at(object, "spec");
    default(spec, "type", json!("ClusterIP"));
    default(spec, "sessionAffinity", json!("None"));
    if spec["sessionAffinity"] == "ClientIP" {
        default(
            spec,
            "sessionAffinityConfig",
            json!({"clientIP": {"timeoutSeconds": 10800}}),
        );
    }
    let external_name = spec["type"] == "ExternalName";
    // `nodePort` and `healthCheckNodePort` are Go `int32`s with `omitempty`: kube-apiserver
    // reads 0 (what kubectl's protobuf generators send, `kubectl create service clusterip`)
    // as unset and never stores or prints it.
    if spec["healthCheckNodePort"] == json!(0) {
        spec.as_object_mut()
            .map(|s| s.remove("healthCheckNodePort"));
    }
    each(spec, "ports", |p| {
        if p["nodePort"] == json!(0) {
            p.as_object_mut().map(|p| p.remove("nodePort"));
        }
        default(p, "protocol", json!("TCP"));
        if p["targetPort"].is_null() || p["targetPort"] == json!(0) || p["targetPort"] == "" {
            p["targetPort"] = p["port"].clone();
        }
    });
    if !external_name {
        default(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    let kind = spec["type"].as_str().unwrap_or_default().to_string();
    if kind == "NodePort" || kind == "LoadBalancer" {
        default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if kind == "LoadBalancer" {
        default(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
}

/// A Secret's `stringData` merged into `data` (base64), as the v1 → internal conversion does
/// whenever kube-apiserver decodes a Secret (k/k `pkg/apis/core/v1/conversion.go`,
/// `Convert_v1_Secret_To_core_Secret`: "StringData overwrites Data"); the internal type has no
/// `stringData`, so it is never stored or returned. A `stringData` that is not a map of strings
/// is left for validation to refuse.
pub fn secret_string_data(object: &mut Value) {
    use base64::Engine;
    let Some(string_data) = object.get("stringData") else {
        return;
    };
    let Some(map) = string_data.as_object() else {
        if string_data.is_null()
            && let Some(o) = object.as_object_mut()
        {
            o.remove("stringData");
        }
        return;
    };
    if !map.values().all(Value::is_string) {
        return;
    }
    let encoded: Vec<(String, Value)> = map
        .iter()
        .map(|(k, v)| {
            let bytes = v.as_str().unwrap_or_default().as_bytes();
            let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
            (k.clone(), Value::String(b64))
        })
        .collect();
    if !encoded.is_empty() && !object["data"].is_object() {
        object["data"] = json!({});
    }
    if let Some(data) = object["data"].as_object_mut() {
        data.extend(encoded);
    }
    if let Some(o) = object.as_object_mut() {
        o.remove("stringData");
    }
}

/// `SetDefaults_EndpointPort` (core/v1): a port's protocol is TCP.
pub fn endpoints(object: &mut Value) {
    each(object, "subsets", |subset| {
        each(subset, "ports", |port| {
            default(port, "protocol", json!("TCP"))
        });
    });
}

/// `SetDefaults_NetworkPolicyPort` and `SetDefaults_NetworkPolicy` (networking/v1): a port's
/// protocol is TCP; `policyTypes` is `Ingress`, plus `Egress` when egress rules are given.
pub fn network_policy(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    for rules in ["ingress", "egress"] {
        each(spec, rules, |rule| {
            each(rule, "ports", |port| {
                default(port, "protocol", json!("TCP"))
            });
        });
    }
    if spec["policyTypes"].as_array().is_none_or(Vec::is_empty) {
        let mut types = vec![json!("Ingress")];
        if spec["egress"].as_array().is_some_and(|e| !e.is_empty()) {
            types.push(json!("Egress"));
        }
        spec["policyTypes"] = Value::Array(types);
    }
}

/// `SetDefaults_PriorityClass` (scheduling/v1): `preemptionPolicy: PreemptLowerPriority`.
pub fn priority_class(object: &mut Value) {
    default(object, "preemptionPolicy", json!("PreemptLowerPriority"));
}

/// `SetDefaults_StorageClass` (storage/v1): `reclaimPolicy: Delete`, `volumeBindingMode:
/// Immediate`.
pub fn storage_class(object: &mut Value) {
    default(object, "reclaimPolicy", json!("Delete"));
    default(object, "volumeBindingMode", json!("Immediate"));
}

/// `SetDefaults_CSIDriver` (storage/v1), with the feature gates of a v1.32 cluster's defaults.
pub fn csi_driver(object: &mut Value) {
    let spec = object_at(object, "spec");
    default(spec, "attachRequired", json!(true));
    default(spec, "podInfoOnMount", json!(false));
    default(spec, "storageCapacity", json!(false));
    default(spec, "fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
    default(spec, "requiresRepublish", json!(false));
    default(spec, "seLinuxMount", json!(false));
    if spec["volumeLifecycleModes"]
        .as_array()
        .is_none_or(Vec::is_empty)
    {
        spec["volumeLifecycleModes"] = json!(["Persistent"]);
    }
}

/// flowcontrol/v1's `SetDefaults_LimitedPriorityLevelConfiguration`: a limited level's
/// `lendablePercent` is 0 (its `nominalConcurrencyShares` is 30 unless set).
pub fn flow_control(object: &mut Value) {
    if let Some(limited) = object
        .get_mut("spec")
        .and_then(|s| s.get_mut("limited"))
        .filter(|l| l.is_object())
    {
        default(limited, "lendablePercent", json!(0));
        default(limited, "nominalConcurrencyShares", json!(30));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_pull_policy_follows_the_tag() {
        let policy = |image: &str| {
            let mut c = json!({"name": "c", "image": image});
            container(&mut c);
            c["imagePullPolicy"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        assert_eq!(policy("nginx"), "Always");
        assert_eq!(policy("nginx:latest"), "Always");
        assert_eq!(policy("registry:5000/nginx"), "Always");
        assert_eq!(policy("nginx:1.27"), "IfNotPresent");
        assert_eq!(policy("registry:5000/nginx:1.27"), "IfNotPresent");
        assert_eq!(policy("nginx@sha256:abc"), "IfNotPresent");
    }

    /// kube-apiserver v1.32 answers every claim template of an apps/v1 StatefulSet with
    /// `apiVersion: v1` and `kind: PersistentVolumeClaim` (the differential's
    /// `kinds/statefulset`), whatever the request said.
    #[test]
    fn a_stateful_sets_claim_templates_are_typed() {
        let mut set = json!({"spec": {"volumeClaimTemplates": [
            {"metadata": {"name": "data"}},
            {"apiVersion": "v9", "kind": "Other", "metadata": {"name": "logs"}}
        ]}});
        stateful_set(&mut set);
        for pvc in set["spec"]["volumeClaimTemplates"]
            .as_array()
            .expect("templates")
        {
            assert_eq!(pvc["apiVersion"], "v1");
            assert_eq!(pvc["kind"], "PersistentVolumeClaim");
        }
    }

    /// kube-apiserver v1.32's defaults of a PersistentVolume and a claim (the differential's
    /// `kinds/persistentvolume`, `errors/pvc-shrink`); what is set stays.
    #[test]
    fn volumes_and_claims_default_as_kube_apiserver_does() {
        let mut pv = json!({"spec": {"hostPath": {"path": "/d"}, "volumeMode": "Block"}});
        persistent_volume(&mut pv);
        assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        assert_eq!(pv["spec"]["volumeMode"], "Block");
        assert_eq!(pv["spec"]["hostPath"]["type"], "");
        let mut pvc = json!({"spec": {"accessModes": ["ReadWriteOnce"]}});
        persistent_volume_claim(&mut pvc);
        assert_eq!(pvc["spec"]["volumeMode"], "Filesystem");
    }

    /// kube-apiserver v1.32 stores a Pod created with `terminationGracePeriodSeconds: -5` as 1.
    #[test]
    fn a_negative_grace_period_is_admitted_as_one() {
        let mut pod = json!({"spec": {"terminationGracePeriodSeconds": -5, "containers": []}});
        pod_admitted(&mut pod, "abcde");
        assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 1);
        let mut pod = json!({"spec": {"terminationGracePeriodSeconds": 0, "containers": []}});
        pod_admitted(&mut pod, "abcde");
        assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 0);
    }

    #[test]
    fn qos_classes() {
        let spec =
            |resources: Value| json!({"containers": [{"name": "c", "resources": resources}]});
        assert_eq!(qos_class(&spec(json!({}))), "BestEffort");
        assert_eq!(
            qos_class(&spec(json!({"requests": {"cpu": "100m"}}))),
            "Burstable"
        );
        let full = json!({"cpu": "1", "memory": "1Gi"});
        assert_eq!(
            qos_class(&spec(json!({"limits": full, "requests": full}))),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&spec(
                json!({"limits": full, "requests": {"cpu": "500m", "memory": "1Gi"}})
            )),
            "Burstable"
        );
    }

    #[test]
    fn a_pod_gets_what_kube_apiserver_and_its_admission_plugins_add() {
        let mut p = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "image": "nginx", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}
        ]}});
        pod(&mut p);
        pod_admitted(&mut p, "abcde");
        let spec = &p["spec"];
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(spec["serviceAccountName"], "default");
        assert_eq!(spec["volumes"][0]["name"], "kube-api-access-abcde");
        assert_eq!(
            spec["containers"][0]["resources"]["requests"],
            json!({"cpu": "1", "memory": "1Gi"})
        );
        assert_eq!(spec["tolerations"].as_array().map(Vec::len), Some(2));
        assert_eq!(
            p["status"],
            json!({"phase": "Pending", "qosClass": "Guaranteed"})
        );
    }

    #[test]
    fn an_empty_deployment_strategy_is_rolling_update() {
        let mut d = json!({"spec": {"strategy": {}, "template": {"spec": {"containers": []}}}});
        deployment(&mut d);
        assert_eq!(
            d["spec"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        let mut r = json!({"spec": {"strategy": {"type": "Recreate"}}});
        deployment(&mut r);
        assert_eq!(r["spec"]["strategy"], json!({"type": "Recreate"}));
    }

    /// The defaults kube-apiserver v1.32.13 answered with in the differential (`kinds/csidriver`,
    /// `kinds/storageclass`, `kinds/priorityclass`, `kinds/endpoints`, `kinds/networkpolicy`,
    /// `kinds/prioritylevelconfiguration`).
    #[test]
    fn kinds_get_kube_apiservers_defaults() {
        let mut driver = json!({"spec": {"attachRequired": false}});
        csi_driver(&mut driver);
        assert_eq!(
            driver["spec"],
            json!({"attachRequired": false, "podInfoOnMount": false, "storageCapacity": false,
                   "fsGroupPolicy": "ReadWriteOnceWithFSType", "requiresRepublish": false,
                   "seLinuxMount": false, "volumeLifecycleModes": ["Persistent"]})
        );
        let mut class = json!({"provisioner": "x"});
        storage_class(&mut class);
        assert_eq!(
            (&class["reclaimPolicy"], &class["volumeBindingMode"]),
            (&json!("Delete"), &json!("Immediate"))
        );
        let mut priority = json!({"value": 10});
        priority_class(&mut priority);
        assert_eq!(priority["preemptionPolicy"], "PreemptLowerPriority");
        let mut endpoints = json!({"subsets": [{"ports": [{"port": 80}]}]});
        super::endpoints(&mut endpoints);
        assert_eq!(endpoints["subsets"][0]["ports"][0]["protocol"], "TCP");
        let mut policy = json!({"spec": {"podSelector": {},
                                         "ingress": [{"ports": [{"port": 80}]}],
                                         "egress": [{}]}});
        network_policy(&mut policy);
        assert_eq!(policy["spec"]["ingress"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        let mut level = json!({"spec": {"type": "Limited", "limited": {
            "limitResponse": {"type": "Reject"}}}});
        flow_control(&mut level);
        assert_eq!(level["spec"]["limited"]["lendablePercent"], 0);
        assert_eq!(level["spec"]["limited"]["nominalConcurrencyShares"], 30);
    }
}
