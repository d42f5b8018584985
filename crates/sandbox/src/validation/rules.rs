//! The rules kube-apiserver 1.32 decides in Go, written per type (`of_type`, called wherever the
//! schema walk meets the type) and per kind (`kind`). Each cites its function in k/k:
//! `core` is `pkg/apis/core/validation/validation.go`, `apps` `pkg/apis/apps/validation/
//! validation.go`, `batch` `pkg/apis/batch/validation/validation.go`, `networking`
//! `pkg/apis/networking/validation/validation.go`, `content` apimachinery's
//! `pkg/util/validation/validation.go`.

use serde_json::{Value, json};

use super::Path;
use super::names;
use super::quantity;
use crate::error::Cause;
use crate::schema::field::{duplicate, forbidden, invalid, not_supported, required, too_long};

/// `content.IsNegativeErrorMsg`.
const NEGATIVE: &str = "must be greater than or equal to 0";
/// `content.InclusiveRangeError(1, 65535)`, what `IsValidPortNum` says.
const PORT_RANGE: &str = "must be between 1 and 65535, inclusive";
/// `core.MaxSecretSize`.
const MAX_SECRET_SIZE: i64 = 1024 * 1024;
/// `field.ErrorTypeNotFound`'s reason.
const NOT_FOUND: &str = "FieldValueNotFound";
const SELECTOR_MISMATCH: &str = "`selector` does not match template `labels`";
const CONFIG_KEY: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|s| s.to_string()).collect()
}

/// The rules of one type, wherever it occurs.
pub fn of_type(definition: &str, value: &Value, path: &Path) -> Vec<Cause> {
    match definition {
        "io.k8s.api.core.v1.PodTemplateSpec" => pod_template_spec(value, path),
        "io.k8s.api.core.v1.PodSpec" => pod_spec(value, path),
        "io.k8s.api.networking.v1.HTTPIngressPath" => http_ingress_path(value, path),
        _ => Vec::new(),
    }
}

// The rules of one kind on the whole object, each called by its kind's strategy
// (`crate::strategy`), as each k/k registry's `Validate` calls its `Validate<Kind>`.

/// apps `ValidateDeploymentSpec` / `ValidateReplicaSetSpec` / `ValidateStatefulSetSpec`:
/// replicas not negative, a selector that matches the template's labels.
pub fn replicated(object: &Value) -> Vec<Cause> {
    let at = Path::root("spec");
    let mut causes = nonnegative(&object["spec"], &at, "replicas");
    causes.extend(selector_and_template(&object["spec"], &at));
    causes
}

/// apps `ValidateDeploymentSpec`: what [`replicated`] checks, a selector that selects something,
/// and `ValidateDeploymentStrategy`.
pub fn deployment(object: &Value) -> Vec<Cause> {
    let at = Path::root("spec");
    let spec = &object["spec"];
    let mut causes = replicated(object);
    let selector = &spec["selector"];
    let empty = |k: &str| {
        selector[k].as_object().is_none_or(|m| m.is_empty())
            && selector[k].as_array().is_none_or(|a| a.is_empty())
    };
    if selector.is_object() && empty("matchLabels") && empty("matchExpressions") {
        // Go's `%#v` of the selector: nil or empty, as sent.
        let labels = if selector["matchLabels"].is_object() {
            "map[string]string{}"
        } else {
            "map[string]string(nil)"
        };
        let expressions = if selector["matchExpressions"].is_array() {
            "[]v1.LabelSelectorRequirement{}"
        } else {
            "[]v1.LabelSelectorRequirement(nil)"
        };
        causes.push(Cause::new(
            crate::schema::field::INVALID,
            at.child("selector").as_str(),
            format!(
                "Invalid value: v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{expressions}}}: empty selector is invalid for deployment"
            ),
        ));
    }
    let strategy = &spec["strategy"];
    let at = at.child("strategy");
    match strategy["type"].as_str() {
        Some("Recreate") => {
            if !strategy["rollingUpdate"].is_null() {
                causes.push(forbidden(
                    at.child("rollingUpdate").as_str(),
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        // Defaulted, with its rollingUpdate, when absent.
        Some("RollingUpdate") | None => {}
        Some(other) => {
            let rolling = if strategy["rollingUpdate"].is_null() {
                "(*apps.RollingUpdateDeployment)(nil)"
            } else {
                "(*apps.RollingUpdateDeployment)(0xc000010000)"
            };
            causes.push(Cause::new(
                crate::schema::field::NOT_SUPPORTED,
                at.as_str(),
                format!(
                    "Unsupported value: apps.DeploymentStrategy{{Type:{}, RollingUpdate:{rolling}}}: supported values: \"Recreate\", \"RollingUpdate\"",
                    crate::schema::field::go_quote(other)
                ),
            ));
        }
    }
    causes
}

/// apps `ValidateStatefulSetSpec`: what [`replicated`] checks, and the pod management policy.
pub fn stateful_set(object: &Value) -> Vec<Cause> {
    let mut causes = replicated(object);
    if let Some(policy) = object["spec"]["podManagementPolicy"].as_str()
        && !matches!(policy, "OrderedReady" | "Parallel" | "")
    {
        causes.push(invalid(
            "spec.podManagementPolicy",
            &json!(policy),
            "must be 'OrderedReady' or 'Parallel'",
        ));
    }
    causes
}

/// apps `ValidateDaemonSetSpec`: a selector that matches the template's labels.
pub fn daemon_set(object: &Value) -> Vec<Cause> {
    selector_and_template(&object["spec"], &Path::root("spec"))
}

/// core `ValidateReplicationControllerSpec`: replicas not negative.
pub fn replication_controller(object: &Value) -> Vec<Cause> {
    let at = Path::root("spec");
    let spec = &object["spec"];
    let mut causes = Vec::new();
    // `ValidateNonEmptySelector` (defaulting copied the template's labels, when there is one).
    if spec["selector"].as_object().is_none_or(|m| m.is_empty()) {
        causes.push(required(at.child("selector").as_str(), ""));
    }
    causes.extend(nonnegative(spec, &at, "replicas"));
    // `ValidatePodTemplateSpecForRC`: the template is a pointer, and required.
    if spec["template"].is_null() {
        causes.push(required(at.child("template").as_str(), ""));
    }
    causes
}

/// batch `ValidateJobSpec`.
pub fn job(object: &Value) -> Vec<Cause> {
    job_spec(&object["spec"], &Path::root("spec"))
}

/// batch `ValidateCronJobSpec`.
pub fn cron_job(object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    // `ValidateCronJobCreate`: the name leaves room for the 11 characters of a Job's suffix in
    // a DNS-1035 label.
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    if name.len() > 52 {
        causes.push(invalid(
            "metadata.name",
            &json!(name),
            "must be no more than 52 characters",
        ));
    }
    causes.extend(cron_job_spec(&object["spec"], &Path::root("spec")));
    causes
}

/// core `ValidateService`'s spec checks, and `ValidateLoadBalancerStatus`'s rule that only a
/// `LoadBalancer` Service has ingress points (v1.32: a status write of `loadBalancer.ingress` on
/// a ClusterIP Service is refused 422; the status strategy keeps spec, so this holds on every
/// write).
pub fn service(object: &Value) -> Vec<Cause> {
    let mut causes = service_spec(&object["spec"], &Path::root("spec"));
    let ingress = &object["status"]["loadBalancer"]["ingress"];
    if ingress.as_array().is_some_and(|a| !a.is_empty())
        && object["spec"]["type"].as_str() != Some("LoadBalancer")
    {
        causes.push(forbidden(
            "status.loadBalancer.ingress",
            "may only be used when `spec.type` is 'LoadBalancer'",
        ));
    }
    causes
}

/// core `ValidatePersistentVolumeClaimSpec`.
pub fn persistent_volume_claim(object: &Value) -> Vec<Cause> {
    pvc_spec(&object["spec"], &Path::root("spec"))
}

/// The apps strategies' `ValidateUpdate` (`pkg/registry/apps/{deployment,replicaset,daemonset}/
/// strategy.go`) keep the selector immutable through `apivalidation.ValidateImmutableField`
/// in apps/v1.
pub fn selector_unchanged(object: &Value, old: &Value) -> Vec<Cause> {
    let (new_selector, old_selector) = (&object["spec"]["selector"], &old["spec"]["selector"]);
    if normalized(new_selector) == normalized(old_selector) {
        return Vec::new();
    }
    vec![Cause::new(
        crate::schema::field::INVALID,
        "spec.selector",
        format!(
            "Invalid value: {}: field is immutable",
            go_label_selector(new_selector)
        ),
    )]
}

/// A StatefulSet's spec changes only where `ValidateStatefulSetUpdate` allows.
pub fn stateful_set_update(object: &Value, old: &Value) -> Vec<Cause> {
    stateful_set_spec_update(&object["spec"], &old["spec"])
}

/// apps `ValidateStatefulSetUpdate`: the spec may change only in the fields it copies from the
/// old spec before comparing (`apiequality.Semantic.DeepEqual`, empty and absent alike).
fn stateful_set_spec_update(spec: &Value, old: &Value) -> Vec<Cause> {
    const MUTABLE: [&str; 6] = [
        "replicas",
        "ordinals",
        "template",
        "updateStrategy",
        "persistentVolumeClaimRetentionPolicy",
        "minReadySeconds",
    ];
    let rest = |spec: &Value| {
        let mut spec = spec.clone();
        if let Some(m) = spec.as_object_mut() {
            m.retain(|k, _| !MUTABLE.contains(&k.as_str()));
        }
        semantic(&spec)
    };
    if rest(spec) == rest(old) {
        return Vec::new();
    }
    vec![crate::schema::field::forbidden(
        "spec",
        "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
    )]
}

/// A value as `apiequality.Semantic.DeepEqual` sees it: null, empty maps and empty lists are
/// all Go's nil.
fn semantic(value: &Value) -> Value {
    match value {
        Value::Object(m) => {
            let kept: serde_json::Map<String, Value> = m
                .iter()
                .map(|(k, v)| (k.clone(), semantic(v)))
                .filter(|(_, v)| !v.is_null())
                .collect();
            if kept.is_empty() {
                Value::Null
            } else {
                Value::Object(kept)
            }
        }
        Value::Array(a) if a.is_empty() => Value::Null,
        Value::Array(a) => Value::Array(a.iter().map(semantic).collect()),
        other => other.clone(),
    }
}

/// A selector as `apiequality.Semantic.DeepEqual` compares it: empty maps and lists are nil.
fn normalized(selector: &Value) -> (Value, Value) {
    let non_empty = |v: &Value| match v {
        Value::Object(m) if m.is_empty() => Value::Null,
        Value::Array(a) if a.is_empty() => Value::Null,
        other => other.clone(),
    };
    (
        non_empty(&selector["matchLabels"]),
        non_empty(&selector["matchExpressions"]),
    )
}

/// `%#v` of a `metav1.LabelSelector` (what `field.Invalid` prints for the dereferenced pointer).
fn go_label_selector(selector: &Value) -> String {
    let strings = |v: &Value| match v.as_array() {
        Some(items) if !items.is_empty() => format!(
            "[]string{{{}}}",
            items
                .iter()
                .map(|s| quote(s.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => "[]string(nil)".into(),
    };
    let expressions = match selector["matchExpressions"].as_array() {
        Some(items) if !items.is_empty() => format!(
            "[]v1.LabelSelectorRequirement{{{}}}",
            items
                .iter()
                .map(|e| format!(
                    "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{}}}",
                    quote(e["key"].as_str().unwrap_or_default()),
                    quote(e["operator"].as_str().unwrap_or_default()),
                    strings(&e["values"])
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => "[]v1.LabelSelectorRequirement(nil)".into(),
    };
    let labels = match selector["matchLabels"].as_object() {
        Some(m) if !m.is_empty() => go_string_map(&selector["matchLabels"]),
        _ => "map[string]string(nil)".into(),
    };
    format!("v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{expressions}}}")
}

/// `ValidateNonnegativeField` on an integer field, when set.
fn nonnegative(spec: &Value, at: &Path, field: &str) -> Vec<Cause> {
    match spec[field].as_i64() {
        Some(n) if n < 0 => vec![invalid(at.child(field).as_str(), &json!(n), NEGATIVE)],
        _ => Vec::new(),
    }
}

/// A label map as Go's `%#v` prints a `map[string]string`: sorted, or `(nil)` when absent.
fn go_string_map(labels: &Value) -> String {
    let Some(map) = labels.as_object() else {
        return "map[string]string(nil)".into();
    };
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    let inner: Vec<String> = keys
        .into_iter()
        .map(|k| {
            let v = map[k.as_str()].as_str().unwrap_or_default();
            format!("{}:{}", quote(k), quote(v))
        })
        .collect();
    format!("map[string]string{{{}}}", inner.join(", "))
}

/// Go's `%q` of a string (JSON escaping is close enough for label text).
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// `metav1.LabelSelectorAsSelector(...).Matches(labels)`: matchLabels and matchExpressions.
/// A missing selector matches nothing (`labels.Nothing()`).
fn selector_matches(selector: &Value, labels: &Value) -> bool {
    if !selector.is_object() {
        return false;
    }
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let by_labels = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    let by_expressions = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match e["operator"].as_str() {
                Some("In") => label(key).is_some_and(|v| values.contains(&v)),
                Some("NotIn") => label(key).is_none_or(|v| !values.contains(&v)),
                Some("Exists") => label(key).is_some(),
                Some("DoesNotExist") => label(key).is_none(),
                _ => false,
            }
        });
    by_labels && by_expressions
}

/// apps `ValidateDeploymentSpec` / `ValidateReplicaSetSpec` / `ValidateStatefulSetSpec` /
/// `ValidateDaemonSetSpec`: selector required; apps `ValidatePodTemplateSpecForReplicaSet`
/// (and its StatefulSet and DaemonSet twins): the selector matches the template's labels and
/// the template's `restartPolicy` is `Always`.
fn selector_and_template(spec: &Value, at: &Path) -> Vec<Cause> {
    let mut causes = Vec::new();
    let selector = &spec["selector"];
    if selector.is_null() {
        causes.push(required(at.child("selector").as_str(), ""));
    }
    let template = at.child("template");
    let labels = &spec["template"]["metadata"]["labels"];
    if !selector_matches(selector, labels) {
        causes.push(crate::error::Cause::new(
            crate::schema::field::INVALID,
            template.child("metadata").child("labels").as_str(),
            format!(
                "Invalid value: {}: {SELECTOR_MISMATCH}",
                go_string_map(labels)
            ),
        ));
    }
    if let Some(policy) = spec["template"]["spec"]["restartPolicy"].as_str()
        && policy != "Always"
    {
        causes.push(not_supported(
            template.child("spec").child("restartPolicy").as_str(),
            &json!(policy),
            &strings(&["Always"]),
        ));
    }
    causes
}

/// batch `validateJobSpec`: counts not negative; the template's `restartPolicy` `OnFailure` or
/// `Never`.
fn job_spec(spec: &Value, at: &Path) -> Vec<Cause> {
    let mut causes = Vec::new();
    for field in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
    ] {
        causes.extend(nonnegative(spec, at, field));
    }
    let pod = at.child("template").child("spec");
    // The template is a struct in Go, validated even when the request has none; a PodSpec
    // present is judged wherever it occurs (`of_type`).
    if spec["template"]["spec"].is_null() {
        causes.push(required(pod.child("containers").as_str(), ""));
    }
    // `validateJobSpec` words any other policy (the defaulted `Always` included) as required.
    if !matches!(
        spec["template"]["spec"]["restartPolicy"].as_str(),
        Some("OnFailure" | "Never")
    ) {
        causes.push(required(
            pod.child("restartPolicy").as_str(),
            "valid values: \"OnFailure\", \"Never\"",
        ));
    }
    causes
}

/// batch `ValidateCronJobSpec` → `validateScheduleFormat`: `cron.ParseStandard` (robfig/cron
/// v3) must accept the schedule; then the job template as a Job's spec.
fn cron_job_spec(spec: &Value, at: &Path) -> Vec<Cause> {
    let mut causes = Vec::new();
    match spec["schedule"].as_str() {
        None | Some("") => causes.push(required(at.child("schedule").as_str(), "")),
        Some(schedule) => {
            if let Err(e) = cron_standard(schedule) {
                causes.push(invalid(at.child("schedule").as_str(), &json!(schedule), &e));
            }
        }
    }
    causes.extend(job_spec(
        &spec["jobTemplate"]["spec"],
        &at.child("jobTemplate").child("spec"),
    ));
    causes
}

/// robfig/cron v3 `ParseStandard`'s field count and ranges (`parser.go` `normalizeFields`,
/// `getRange`), with its error text. Descriptors (`@hourly`, `@every 1h`) are accepted.
fn cron_standard(schedule: &str) -> Result<(), String> {
    let mut spec = schedule.trim();
    if let Some(rest) = spec
        .strip_prefix("TZ=")
        .or_else(|| spec.strip_prefix("CRON_TZ="))
    {
        spec = rest.split_once(' ').map_or("", |(_, s)| s.trim());
    }
    if spec.starts_with('@') {
        return Ok(());
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    // minute, hour, day of month, month, day of week.
    let bounds = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 6)];
    for (field, (min, max)) in fields.iter().zip(bounds) {
        for part in field.split(',') {
            let range = part.split('/').next().unwrap_or_default();
            if range == "*" || range == "?" {
                continue;
            }
            for end in range.split('-') {
                // Month and weekday names are accepted by robfig; only numbers are checked.
                let Ok(n) = end.parse::<i64>() else { continue };
                if n < min {
                    return Err(format!(
                        "beginning of range ({n}) below minimum ({min}): {part}"
                    ));
                }
                if n > max {
                    return Err(format!("end of range ({n}) above maximum ({max}): {part}"));
                }
            }
        }
    }
    Ok(())
}

/// core `ValidatePodTemplateSpec`: the template's labels and annotation keys, reported at
/// `template.labels` (kube's path, without `metadata`).
fn pod_template_spec(template: &Value, at: &Path) -> Vec<Cause> {
    let mut causes = names::labels(&template["metadata"]["labels"], &at.child("labels"));
    causes.extend(names::annotation_keys(
        &template["metadata"]["annotations"],
        &at.child("annotations"),
    ));
    causes
}

/// core `ValidatePodSpec` (the parts written here): `ValidateVolumes`, containers
/// (`validateContainers`, `validateInitContainers`, `validateContainerCommon`,
/// `validateContainerPorts`, `ValidateVolumeMounts`, `ValidateResourceRequirements`) and
/// `validateRestartPolicy`, in that order.
fn pod_spec(spec: &Value, at: &Path) -> Vec<Cause> {
    let (mut causes, volumes) = volumes(&spec["volumes"], &at.child("volumes"));
    let list = |field: &str| spec[field].as_array().map_or(&[][..], Vec::as_slice);
    let containers = list("containers");
    if containers.is_empty() {
        causes.push(required(at.child("containers").as_str(), ""));
    }
    // Init containers' names may not repeat the containers' either.
    let mut seen = std::collections::HashSet::new();
    for field in ["containers", "initContainers"] {
        for (i, c) in list(field).iter().enumerate() {
            causes.extend(container(c, &at.child(field).index(i), &mut seen, &volumes));
        }
    }
    if let Some(policy) = spec["restartPolicy"].as_str()
        && !matches!(policy, "Always" | "OnFailure" | "Never")
    {
        causes.push(not_supported(
            at.child("restartPolicy").as_str(),
            &json!(policy),
            &strings(&["Always", "OnFailure", "Never"]),
        ));
    }
    // `validateDNSPolicy`, its values in its own order.
    if let Some(policy) = spec["dnsPolicy"].as_str()
        && !policy.is_empty()
        && !matches!(
            policy,
            "ClusterFirstWithHostNet" | "ClusterFirst" | "Default" | "None"
        )
    {
        causes.push(not_supported(
            at.child("dnsPolicy").as_str(),
            &json!(policy),
            &strings(&["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"]),
        ));
    }
    causes
}

/// core `ValidateVolumes`: a name (a DNS-1123 label, unique) and a volume source each; returns
/// the names of the volumes without errors, which mounts may refer to.
fn volumes(volumes: &Value, at: &Path) -> (Vec<Cause>, std::collections::HashSet<String>) {
    let mut causes = Vec::new();
    let mut valid = std::collections::HashSet::new();
    for (i, volume) in volumes.as_array().into_iter().flatten().enumerate() {
        let p = at.index(i);
        let mut errors = Vec::new();
        // `validateVolumeSource`: every field but the name is a volume source.
        let sources = volume.as_object().map_or(0, |m| {
            m.iter()
                .filter(|(k, v)| *k != "name" && !v.is_null())
                .count()
        });
        if sources == 0 {
            errors.push(required(p.as_str(), "must specify a volume type"));
        }
        let name = volume["name"].as_str().unwrap_or_default();
        let name_path = p.child("name");
        if name.is_empty() {
            errors.push(required(name_path.as_str(), ""));
        } else {
            for m in names::dns1123_label(name) {
                errors.push(invalid(name_path.as_str(), &json!(name), &m));
            }
        }
        if valid.contains(name) {
            errors.push(duplicate(name_path.as_str(), &json!(name)));
        }
        if errors.is_empty() {
            valid.insert(name.to_string());
        }
        causes.extend(errors);
    }
    (causes, valid)
}

fn container<'a>(
    c: &'a Value,
    at: &Path,
    seen: &mut std::collections::HashSet<&'a str>,
    volumes: &std::collections::HashSet<String>,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = c["name"].as_str().unwrap_or_default();
    let name_path = at.child("name");
    if name.is_empty() {
        causes.push(required(name_path.as_str(), ""));
    } else {
        for m in names::dns1123_label(name) {
            causes.push(invalid(name_path.as_str(), &json!(name), &m));
        }
    }
    if c["image"].as_str().unwrap_or_default().is_empty() {
        causes.push(required(at.child("image").as_str(), ""));
    }
    for (i, port) in c["ports"].as_array().into_iter().flatten().enumerate() {
        let p = at.child("ports").index(i);
        match port["containerPort"].as_i64() {
            None | Some(0) => causes.push(required(p.child("containerPort").as_str(), "")),
            Some(n) if !(1..=65535).contains(&n) => causes.push(invalid(
                p.child("containerPort").as_str(),
                &json!(n),
                PORT_RANGE,
            )),
            _ => {}
        }
        causes.extend(protocol(&port["protocol"], &p));
    }
    causes.extend(volume_mounts(
        &c["volumeMounts"],
        &at.child("volumeMounts"),
        volumes,
    ));
    if let Some(policy) = c["imagePullPolicy"].as_str()
        && !matches!(policy, "Always" | "IfNotPresent" | "Never")
    {
        causes.push(not_supported(
            at.child("imagePullPolicy").as_str(),
            &json!(policy),
            &strings(&["Always", "IfNotPresent", "Never"]),
        ));
    }
    causes.extend(requests_within_limits(
        &c["resources"],
        &at.child("resources"),
    ));
    // Checked after the common rules, as `validateContainers` does.
    causes.extend(probes(c, at));
    if !seen.insert(name) {
        causes.push(duplicate(name_path.as_str(), &json!(name)));
    }
    causes
}

/// core `validateProbe` → `validateHandler`: a probe has exactly one handler.
fn probes(c: &Value, at: &Path) -> Vec<Cause> {
    let mut causes = Vec::new();
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        let Some(fields) = c[probe].as_object() else {
            continue;
        };
        let path = at.child(probe);
        let handlers: Vec<&str> = ["exec", "httpGet", "tcpSocket", "grpc"]
            .into_iter()
            .filter(|h| fields.get(*h).is_some_and(|v| !v.is_null()))
            .collect();
        match handlers.as_slice() {
            [] => causes.push(required(path.as_str(), "must specify a handler type")),
            [_] => {}
            [_, extra, ..] => causes.push(forbidden(
                path.child(extra).as_str(),
                "may not specify more than 1 handler type",
            )),
        }
    }
    causes
}

/// core `ValidateVolumeMounts`: a name naming a volume of the pod, a unique mount path.
fn volume_mounts(
    mounts: &Value,
    at: &Path,
    volumes: &std::collections::HashSet<String>,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut paths = std::collections::HashSet::new();
    for (i, mount) in mounts.as_array().into_iter().flatten().enumerate() {
        let p = at.index(i);
        let name = mount["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            causes.push(required(p.child("name").as_str(), ""));
        }
        if !volumes.contains(name) {
            causes.push(Cause::new(
                NOT_FOUND,
                p.child("name").as_str(),
                format!(
                    "Not found: {}",
                    crate::schema::field::go_value(&json!(name))
                ),
            ));
        }
        let path = mount["mountPath"].as_str().unwrap_or_default();
        if path.is_empty() {
            causes.push(required(p.child("mountPath").as_str(), ""));
        }
        if !paths.insert(path) {
            causes.push(invalid(
                p.child("mountPath").as_str(),
                &json!(path),
                "must be unique",
            ));
        }
    }
    causes
}

/// `supportedPortProtocols`, listed sorted as `sets.List` lists them.
fn protocol(value: &Value, at: &Path) -> Vec<Cause> {
    match value.as_str() {
        Some(p) if !matches!(p, "TCP" | "UDP" | "SCTP") => vec![not_supported(
            at.child("protocol").as_str(),
            &json!(p),
            &strings(&["SCTP", "TCP", "UDP"]),
        )],
        _ => Vec::new(),
    }
}

/// core `ValidateResourceRequirements`: each limit and request names a container resource
/// (`validateContainerResourceName`) and is not negative (`ValidateNonnegativeQuantity`); a
/// request is at most its limit. Quantities are printed in their canonical form, as
/// `Quantity.String()` prints them.
fn requests_within_limits(resources: &Value, at: &Path) -> Vec<Cause> {
    let mut causes = Vec::new();
    let parsed = |v: &Value| match v {
        Value::String(s) => quantity::parse(s).ok(),
        Value::Number(n) => quantity::parse(&n.to_string()).ok(),
        _ => None,
    };
    for field in ["limits", "requests"] {
        for (name, value) in resources[field].as_object().into_iter().flatten() {
            let p = at.child(field).key(name);
            causes.extend(container_resource_name(name, &p));
            let Some(q) = parsed(value) else {
                continue;
            };
            if q.is_negative() {
                causes.push(invalid(p.as_str(), &json!(q.to_string()), NEGATIVE));
            }
            if field == "requests"
                && let Some(limit) = resources["limits"].get(name).and_then(parsed)
                && q > limit
            {
                causes.push(invalid(
                    p.as_str(),
                    &json!(q.to_string()),
                    &format!("must be less than or equal to {name} limit of {limit}"),
                ));
            }
        }
    }
    causes
}

/// core `validateContainerResourceName` (with `validateResourceName`): a name without a
/// domain must be a standard resource (`helper.IsStandardResourceName`) and one a container
/// may ask for (`IsStandardContainerResourceName`).
fn container_resource_name(name: &str, at: &Path) -> Vec<Cause> {
    let mut causes = Vec::new();
    let qualified = names::qualified_name(name);
    if !qualified.is_empty() {
        return qualified
            .iter()
            .map(|m| invalid(at.as_str(), &json!(name), m))
            .collect();
    }
    if name.contains('/') {
        return causes;
    }
    let hugepages = name.starts_with("hugepages-");
    let container = hugepages || matches!(name, "cpu" | "memory" | "ephemeral-storage");
    let standard = container
        || name.starts_with("requests.hugepages-")
        || matches!(
            name,
            "requests.cpu"
                | "requests.memory"
                | "requests.ephemeral-storage"
                | "limits.cpu"
                | "limits.memory"
                | "limits.ephemeral-storage"
                | "pods"
                | "services"
                | "replicationcontrollers"
                | "resourcequotas"
                | "secrets"
                | "configmaps"
                | "persistentvolumeclaims"
                | "requests.storage"
                | "services.nodeports"
                | "services.loadbalancers"
        );
    if !standard {
        causes.push(invalid(
            at.as_str(),
            &json!(name),
            "must be a standard resource type or fully qualified",
        ));
    }
    if !container {
        causes.push(invalid(
            at.as_str(),
            &json!(name),
            "must be a standard resource for containers",
        ));
    }
    causes
}

/// core `ValidateService` → `validateServicePort` for each port, and the type enum.
fn service_spec(spec: &Value, at: &Path) -> Vec<Cause> {
    let mut causes = Vec::new();
    let ports = spec["ports"].as_array().map_or(&[][..], Vec::as_slice);
    let external_name = spec["type"].as_str() == Some("ExternalName");
    let headless = spec["clusterIP"].as_str() == Some("None");
    if ports.is_empty() && !headless && !external_name {
        causes.push(required(at.child("ports").as_str(), ""));
    }
    if external_name {
        // A CNAME, which may end in a dot.
        let cname = spec["externalName"].as_str().unwrap_or_default();
        let cname = cname.strip_suffix('.').unwrap_or(cname);
        if cname.is_empty() {
            causes.push(required(at.child("externalName").as_str(), ""));
        } else {
            for m in names::dns1123_subdomain(cname) {
                causes.push(invalid(
                    at.child("externalName").as_str(),
                    &json!(cname),
                    &m,
                ));
            }
        }
    }
    let require_name = ports.len() > 1;
    let mut seen = std::collections::HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let p = at.child("ports").index(i);
        let name = port["name"].as_str().unwrap_or_default();
        if require_name && name.is_empty() {
            causes.push(required(p.child("name").as_str(), ""));
        } else if !name.is_empty() {
            for m in names::dns1123_label(name) {
                causes.push(invalid(p.child("name").as_str(), &json!(name), &m));
            }
            if !seen.insert(name) {
                causes.push(duplicate(p.child("name").as_str(), &json!(name)));
            }
        }
        let number = port["port"].as_i64().unwrap_or(0);
        if !(1..=65535).contains(&number) {
            causes.push(invalid(
                p.child("port").as_str(),
                &json!(number),
                PORT_RANGE,
            ));
        }
        causes.extend(protocol(&port["protocol"], &p));
        if let Some(target) = port["targetPort"].as_i64()
            && !(1..=65535).contains(&target)
        {
            causes.push(invalid(
                p.child("targetPort").as_str(),
                &json!(target),
                PORT_RANGE,
            ));
        }
    }
    if let Some(kind) = spec["type"].as_str()
        && !matches!(
            kind,
            "ClusterIP" | "NodePort" | "LoadBalancer" | "ExternalName"
        )
    {
        causes.push(not_supported(
            at.child("type").as_str(),
            &json!(kind),
            &strings(&["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]),
        ));
    }
    causes
}

/// content `IsConfigMapKey`: length, characters, and no `.`/`..` prefix.
fn config_key(key: &str, at: &Path) -> Vec<Cause> {
    let mut messages: Vec<String> = Vec::new();
    if key.len() > 253 {
        messages.push("must be no more than 253 characters".into());
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'))
    {
        messages.push(CONFIG_KEY.into());
    }
    if key == "." {
        messages.push("must not be '.'".into());
    } else if key == ".." {
        messages.push("must not be '..'".into());
    } else if key.starts_with("..") {
        messages.push("must not start with '..'".into());
    }
    messages
        .iter()
        .map(|m| invalid(at.key(key).as_str(), &json!(key), m))
        .collect()
}

/// core `ValidateConfigMap`: keys of `data` and `binaryData`, no key in both, and at most 1 MiB
/// of values, reported at the root path kube builds with `field.NewPath("")`, which prints `[]`.
pub fn config_map(object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut size: i64 = 0;
    for (field, other) in [("data", "binaryData"), ("binaryData", "data")] {
        for (key, value) in object[field].as_object().into_iter().flatten() {
            let at = Path::root(field);
            causes.extend(config_key(key, &at));
            if object[other].get(key).is_some() {
                causes.push(invalid(
                    at.key(key).as_str(),
                    &json!(key),
                    &format!("duplicate of key present in {other}"),
                ));
            }
            let text = value.as_str().unwrap_or_default();
            size += if field == "binaryData" {
                decoded_len(text)
            } else {
                text.len() as i64
            };
        }
    }
    if size > MAX_SECRET_SIZE {
        causes.push(too_long("[]", MAX_SECRET_SIZE));
    }
    causes
}

/// What `ValidateConfigMapUpdate` and `ValidateSecretUpdate` keep of an object stored with
/// `immutable: true`: `immutable` itself and the `fields` holding its data (compared as Go's
/// `reflect.DeepEqual` compares the maps: absent and empty differ).
pub fn immutable_when_set(object: &Value, old: &Value, fields: &[&str]) -> Vec<Cause> {
    const WHY: &str = "field is immutable when `immutable` is set";
    if old["immutable"].as_bool() != Some(true) {
        return Vec::new();
    }
    let mut causes = Vec::new();
    if object["immutable"].as_bool() != Some(true) {
        causes.push(forbidden("immutable", WHY));
    }
    let present = |o: &Value, f: &str| o.get(f).filter(|v| !v.is_null()).cloned();
    for field in fields {
        if present(object, field) != present(old, field) {
            causes.push(forbidden(field, WHY));
        }
    }
    causes
}

/// Two specs alike as Go compares the decoded structs: a field set to `null` is a field left
/// out.
fn same_spec(a: &Value, b: &Value) -> bool {
    let set = |v: &Value| -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            other => other.clone(),
        }
    };
    set(a) == set(b)
}

/// core `ValidatePodUpdate`: a pod's spec changes only in its containers' images, its active
/// deadline, added tolerations and a negative grace period set to 1 (ephemeral containers
/// change through their own subresource). The diff kube appends is not reproduced.
pub fn pod_update(object: &Value, old: &Value) -> Vec<Cause> {
    let (new_spec, old_spec) = (&object["spec"], &old["spec"]);
    let mut comparable = new_spec.clone();
    for list in ["containers", "initContainers"] {
        if let (Some(items), Some(old_items)) =
            (comparable[list].as_array_mut(), old_spec[list].as_array())
            && items.len() == old_items.len()
        {
            for (item, old_item) in items.iter_mut().zip(old_items) {
                item["image"] = old_item["image"].clone();
            }
        }
    }
    for field in ["activeDeadlineSeconds", "ephemeralContainers"] {
        comparable[field] = old_spec[field].clone();
    }
    let old_tolerations = old_spec["tolerations"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let new_tolerations = new_spec["tolerations"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    if old_tolerations.iter().all(|t| new_tolerations.contains(t)) {
        comparable["tolerations"] = old_spec["tolerations"].clone();
    }
    if old_spec["terminationGracePeriodSeconds"]
        .as_i64()
        .is_some_and(|g| g < 0)
        && new_spec["terminationGracePeriodSeconds"].as_i64() == Some(1)
    {
        comparable["terminationGracePeriodSeconds"] =
            old_spec["terminationGracePeriodSeconds"].clone();
    }
    if same_spec(&comparable, old_spec) {
        return Vec::new();
    }
    vec![forbidden(
        "spec",
        "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
    )]
}

/// core `ValidatePersistentVolumeClaimUpdate`: an unbound claim's spec is immutable; a bound
/// one's may change in `resources.requests` and `volumeAttributesClassName` only. The diff kube
/// appends is not reproduced.
pub fn persistent_volume_claim_update(object: &Value, old: &Value) -> Vec<Cause> {
    let bound = old["status"]["phase"].as_str() == Some("Bound");
    let mut comparable = object["spec"].clone();
    if bound {
        comparable["resources"]["requests"] = old["spec"]["resources"]["requests"].clone();
        comparable["volumeAttributesClassName"] = old["spec"]["volumeAttributesClassName"].clone();
    }
    if same_spec(&comparable, &old["spec"]) {
        return Vec::new();
    }
    vec![forbidden(
        "spec",
        "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
    )]
}

/// batch `ValidateJobSpecUpdate`: the selector, the pod template and the completions are
/// immutable (the template's dump kube prints is not reproduced).
pub fn job_update(object: &Value, old: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let (spec, old_spec) = (&object["spec"], &old["spec"]);
    if spec["selector"] != old_spec["selector"] {
        causes.push(invalid("spec.selector", &json!("…"), "field is immutable"));
    }
    if spec["template"] != old_spec["template"] {
        causes.push(Cause::new(
            crate::schema::field::INVALID,
            "spec.template",
            "Invalid value: core.PodTemplateSpec{…}: field is immutable",
        ));
    }
    if spec["completions"] != old_spec["completions"] {
        causes.push(invalid(
            "spec.completions",
            &spec["completions"],
            "field is immutable",
        ));
    }
    causes
}

/// The number of bytes a base64 text decodes to.
fn decoded_len(text: &str) -> i64 {
    let padding = text.bytes().rev().take_while(|&c| c == b'=').count();
    (text.len() / 4 * 3).saturating_sub(padding) as i64
}

/// core `ValidateSecret`: keys and total size of `data` (`stringData` is merged into `data` by
/// the conversion before validation, so its keys are reported under `data` too).
pub fn secret(object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let data = Path::root("data");
    let mut size: i64 = 0;
    for field in ["data", "stringData"] {
        for (key, value) in object[field].as_object().into_iter().flatten() {
            causes.extend(config_key(key, &data));
            // `data` holds base64 of the bytes; the limit is on the bytes.
            let text = value.as_str().unwrap_or_default();
            size += if field == "data" {
                decoded_len(text)
            } else {
                text.len() as i64
            };
        }
    }
    if size > MAX_SECRET_SIZE {
        causes.push(too_long(data.as_str(), MAX_SECRET_SIZE));
    }
    causes.extend(secret_type(object, &data));
    causes
}

/// `ValidateSecret`'s switch on the type: the keys each well-known type must carry. (The JSON
/// of a docker config is not parsed here.)
fn secret_type(object: &Value, data: &Path) -> Vec<Cause> {
    let has =
        |key: &str| object["data"].get(key).is_some() || object["stringData"].get(key).is_some();
    let needed = |keys: &[&str]| -> Vec<Cause> {
        keys.iter()
            .filter(|k| !has(k))
            .map(|k| required(data.key(k).as_str(), ""))
            .collect()
    };
    match object["type"].as_str().unwrap_or_default() {
        "kubernetes.io/service-account-token" => {
            let key = "kubernetes.io/service-account.name";
            if object["metadata"]["annotations"][key]
                .as_str()
                .is_none_or(str::is_empty)
            {
                vec![required(
                    Path::root("metadata")
                        .child("annotations")
                        .key(key)
                        .as_str(),
                    "",
                )]
            } else {
                Vec::new()
            }
        }
        "kubernetes.io/dockercfg" => needed(&[".dockercfg"]),
        "kubernetes.io/dockerconfigjson" => needed(&[".dockerconfigjson"]),
        // Either may be empty, but not both absent.
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            needed(&["username", "password"])
        }
        "kubernetes.io/ssh-auth" => {
            let key = object["data"]["ssh-privatekey"]
                .as_str()
                .or(object["stringData"]["ssh-privatekey"].as_str());
            if key.is_none_or(str::is_empty) {
                vec![required(data.key("ssh-privatekey").as_str(), "")]
            } else {
                Vec::new()
            }
        }
        "kubernetes.io/tls" => needed(&["tls.crt", "tls.key"]),
        _ => Vec::new(),
    }
}

/// networking `validateHTTPIngressPath`: `pathType` required and one of three; `Exact` and
/// `Prefix` paths absolute.
fn http_ingress_path(path: &Value, at: &Path) -> Vec<Cause> {
    let mut causes = Vec::new();
    match path["pathType"].as_str() {
        None => causes.push(required(
            at.child("pathType").as_str(),
            "pathType must be specified",
        )),
        Some("Exact" | "Prefix") => {
            let p = path["path"].as_str().unwrap_or_default();
            if !p.starts_with('/') {
                causes.push(invalid(
                    at.child("path").as_str(),
                    &json!(p),
                    "must be an absolute path",
                ));
            }
        }
        Some("ImplementationSpecific") => {}
        Some(other) => causes.push(not_supported(
            at.child("pathType").as_str(),
            &json!(other),
            &strings(&["Exact", "ImplementationSpecific", "Prefix"]),
        )),
    }
    causes
}

/// core `ValidatePersistentVolumeClaimSpec`: at least one access mode, and a storage request.
fn pvc_spec(spec: &Value, at: &Path) -> Vec<Cause> {
    let mut causes = Vec::new();
    if spec["accessModes"].as_array().is_none_or(Vec::is_empty) {
        causes.push(required(
            at.child("accessModes").as_str(),
            "at least 1 access mode is required",
        ));
    }
    for mode in spec["accessModes"].as_array().into_iter().flatten() {
        if !matches!(
            mode.as_str(),
            Some("ReadWriteOnce" | "ReadOnlyMany" | "ReadWriteMany" | "ReadWriteOncePod")
        ) {
            causes.push(not_supported(
                at.child("accessModes").as_str(),
                mode,
                &strings(&[
                    "ReadOnlyMany",
                    "ReadWriteMany",
                    "ReadWriteOnce",
                    "ReadWriteOncePod",
                ]),
            ));
        }
    }
    if spec["resources"]["requests"]["storage"].is_null() {
        causes.push(required(at.child("resources").key("storage").as_str(), ""));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cron_schedules_are_read_as_robfig_reads_them() {
        assert_eq!(cron_standard("*/5 * * * *"), Ok(()));
        assert_eq!(cron_standard("@hourly"), Ok(()));
        assert_eq!(cron_standard("0 9 * * MON-FRI"), Ok(()));
        assert_eq!(
            cron_standard("every minute"),
            Err("expected exactly 5 fields, found 2: [every minute]".into())
        );
        assert_eq!(
            cron_standard("61 * * * *"),
            Err("end of range (61) above maximum (59): 61".into())
        );
    }

    #[test]
    fn secrets_hold_at_most_one_mebibyte() {
        // 1,048,578 bytes: base64 without padding, one quantum over the limit.
        let over = json!({"data": {"k": "A".repeat(1_398_104)}});
        assert_eq!(
            secret(&over),
            [too_long("data", MAX_SECRET_SIZE)],
            "over the limit"
        );
        let at = json!({"data": {"k": "A".repeat(1_398_100)}, "stringData": {"s": "x"}});
        assert!(secret(&at).is_empty());
    }

    #[test]
    fn selectors_print_as_go_prints_a_label_selector() {
        assert_eq!(
            go_label_selector(&json!({"matchLabels": {"app": "web2"}})),
            r#"v1.LabelSelector{MatchLabels:map[string]string{"app":"web2"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}"#
        );
        assert_eq!(
            go_label_selector(
                &json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]})
            ),
            r#"v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:"tier", Operator:"In", Values:[]string{"a", "b"}}}}"#
        );
    }

    #[test]
    fn config_maps_hold_at_most_one_mebibyte_of_values() {
        let over = json!({"data": {"a": "x".repeat(1024 * 1024)}, "binaryData": {"b": "eA=="}});
        assert_eq!(config_map(&over), [too_long("[]", MAX_SECRET_SIZE)]);
        let at = json!({"data": {"a": "x".repeat(1024 * 1024 - 1)}, "binaryData": {"b": "eA=="}});
        assert!(config_map(&at).is_empty());
        let both = json!({"data": {"k": "x"}, "binaryData": {"k": "eA=="}});
        assert_eq!(config_map(&both).len(), 2);
    }

    #[test]
    fn labels_print_as_go_prints_a_string_map() {
        assert_eq!(
            go_string_map(&json!({"b": "2", "a": "1"})),
            r#"map[string]string{"a":"1", "b":"2"}"#
        );
        assert_eq!(go_string_map(&Value::Null), "map[string]string(nil)");
    }

    #[test]
    fn selectors_match_labels_and_expressions() {
        let labels = json!({"app": "web", "tier": "front"});
        assert!(selector_matches(
            &json!({"matchLabels": {"app": "web"}}),
            &labels
        ));
        assert!(!selector_matches(
            &json!({"matchLabels": {"app": "db"}}),
            &labels
        ));
        assert!(selector_matches(
            &json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]}),
            &labels
        ));
        assert!(!selector_matches(&Value::Null, &labels));
    }
}
