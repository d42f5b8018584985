//! kube-apiserver's table convertors for built-in kinds, as one table of column specs per
//! resource: k/k `pkg/printers/internalversion/printers.go` (`AddHandlers`' column definitions
//! and each `print*` function's cells), and kube-aggregator's APIService printer. Every column is
//! filled, the priority-1 (`-o wide`) ones included: kube-apiserver's `TableConvertor` generates
//! with `Wide: true` and kubectl hides what it does not show.
//!
//! A kind without a printer there (Roles, ClusterRoles, LimitRanges, CRDs, …) is printed by
//! `rest.DefaultTableConvertor` (`Name`, `Created At`), which `table.rs` supplies.

use serde_json::{Value, json};

use super::{AGE_DESCRIPTION, age_of, human_duration};

pub(super) struct Column {
    pub name: &'static str,
    pub type_: &'static str,
    pub priority: i64,
    pub cell: fn(&Value) -> Value,
}

pub(super) struct Printer {
    pub group: &'static str,
    pub resource: &'static str,
    pub columns: &'static [Column],
}

pub(super) fn printer(group: &str, resource: &str) -> Option<&'static Printer> {
    PRINTERS
        .iter()
        .find(|p| p.group == group && p.resource == resource)
}

pub(super) fn description(column: &Column) -> &'static str {
    match column.name {
        "Name" => super::descriptions::NAME,
        "Age" => AGE_DESCRIPTION,
        _ => "",
    }
}

const fn c(name: &'static str, type_: &'static str, cell: fn(&Value) -> Value) -> Column {
    Column {
        name,
        type_,
        priority: 0,
        cell,
    }
}

/// A priority-1 column: shown by `kubectl get -o wide`.
const fn w(name: &'static str, type_: &'static str, cell: fn(&Value) -> Value) -> Column {
    Column {
        name,
        type_,
        priority: 1,
        cell,
    }
}

const NAME: Column = c("Name", "string", |o| o["metadata"]["name"].clone());
const AGE: Column = c("Age", "string", |o| json!(age(o)));

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn int(v: &Value) -> Value {
    json!(v.as_i64().unwrap_or(0))
}

fn or(s: String, default: &str) -> String {
    if s.is_empty() { default.to_string() } else { s }
}

fn age(o: &Value) -> String {
    since(&o["metadata"]["creationTimestamp"])
}

/// `translateTimestampSince`: `<unknown>` for a zero time.
fn since(v: &Value) -> String {
    match v.as_str().filter(|s| !s.is_empty()) {
        Some(s) => age_of(s),
        None => "<unknown>".into(),
    }
}

fn seconds(v: &Value) -> Option<i64> {
    v.as_str()?
        .parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_second())
}

/// `layoutContainerCells`: the names and the images, comma-separated.
fn containers(spec: &Value) -> (String, String) {
    let list = spec["containers"].as_array().cloned().unwrap_or_default();
    let names: Vec<String> = list.iter().map(|c| text(&c["name"])).collect();
    let images: Vec<String> = list.iter().map(|c| text(&c["image"])).collect();
    (names.join(","), images.join(","))
}

fn container_names(spec: &Value) -> Value {
    json!(containers(spec).0)
}

fn container_images(spec: &Value) -> Value {
    json!(containers(spec).1)
}

/// `labels.FormatLabels`: `k=v` sorted by key, `<none>` when empty.
fn format_labels(map: &Value) -> String {
    let mut pairs: Vec<String> = map
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", text(v)))
        .collect();
    pairs.sort();
    or(pairs.join(","), "<none>")
}

/// `metav1.LabelSelectorAsSelector(…).String()`: requirements sorted by key, `k=v`,
/// `k in (a,b)`, `k notin (a,b)`, `k`, `!k`; `None` for an operator Go refuses.
fn selector_string(selector: &Value) -> Option<String> {
    let mut reqs: Vec<(String, String)> = Vec::new();
    for (k, v) in selector["matchLabels"].as_object().into_iter().flatten() {
        reqs.push((k.clone(), format!("{k}={}", text(v))));
    }
    for e in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = text(&e["key"]);
        let mut values: Vec<String> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .map(text)
            .collect();
        values.sort();
        let r = match e["operator"].as_str() {
            Some("In") => format!("{key} in ({})", values.join(",")),
            Some("NotIn") => format!("{key} notin ({})", values.join(",")),
            Some("Exists") => key.clone(),
            Some("DoesNotExist") => format!("!{key}"),
            _ => return None,
        };
        reqs.push((key, r));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    Some(
        reqs.into_iter()
            .map(|(_, r)| r)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// `metav1.FormatLabelSelector`: `<none>` when empty (or absent), `<error>` when invalid.
fn format_selector(selector: &Value) -> Value {
    json!(match selector_string(selector) {
        Some(s) => or(s, "<none>"),
        None => "<error>".into(),
    })
}

/// `IntOrString.String()`.
fn int_or_string(v: &Value) -> String {
    text(v)
}

/// `helper.GetAccessModesAsString`: RWO, ROX, RWX, RWOP in that order, each once.
fn access_modes(modes: &Value) -> String {
    let have: Vec<&str> = modes
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(m, _)| have.contains(m))
    .map(|(_, s)| *s)
    .collect::<Vec<_>>()
    .join(",")
}

/// `<ip or hostname>,…` of a load balancer status, sorted and unique (`sets.String`), clipped
/// to 16 bytes unless wide; kube-apiserver prints wide.
fn load_balancer(status: &Value) -> String {
    let mut ips: Vec<String> = status["ingress"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| {
            let ip = text(&i["ip"]);
            let host = text(&i["hostname"]);
            (!ip.is_empty())
                .then_some(ip)
                .or((!host.is_empty()).then_some(host))
        })
        .collect();
    ips.sort();
    ips.dedup();
    ips.join(",")
}

/// `N more...` lists of three (`listWithMoreString`).
fn three_and_more(list: Vec<String>, empty: &str) -> String {
    let count = list.len();
    let shown = list.iter().take(3).cloned().collect::<Vec<_>>().join(",");
    if count > 3 {
        format!("{shown} + {} more...", count - 3)
    } else {
        or(shown, empty)
    }
}

fn has_condition(o: &Value, type_: &str) -> bool {
    o["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
        .is_some_and(|c| c["status"] == "True")
}

fn pod_ready(o: &Value) -> Value {
    json!(pod(o).0)
}

fn pod_status(o: &Value) -> Value {
    json!(pod(o).1)
}

fn pod_restarts(o: &Value) -> Value {
    json!(pod(o).2)
}

/// `printPod`'s Ready, Status and Restarts.
fn pod(o: &Value) -> (String, String, String) {
    let spec = &o["spec"];
    let status = &o["status"];
    let phase = text(&status["phase"]);
    let mut reason = or(text(&status["reason"]), &phase);
    if status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "PodScheduled" && c["reason"] == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }
    let init_specs = spec["initContainers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let restartable = |name: &Value| {
        init_specs
            .iter()
            .any(|c| c["name"] == *name && c["restartPolicy"] == "Always")
    };
    let mut total = spec["containers"].as_array().map_or(0, Vec::len);
    total += init_specs
        .iter()
        .filter(|c| c["restartPolicy"] == "Always")
        .count();
    let mut ready = 0;
    let mut restarts = 0;
    let mut sidecar_restarts = 0;
    let mut last_restart: Option<i64> = None;
    let mut sidecar_last_restart: Option<i64> = None;
    let finished = |c: &Value| seconds(&c["lastState"]["terminated"]["finishedAt"]);
    let mut initializing = false;
    let init_statuses = status["initContainerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (i, c) in init_statuses.iter().enumerate() {
        let count = c["restartCount"].as_i64().unwrap_or(0);
        restarts += count;
        last_restart = last_restart.max(finished(c));
        let sidecar = restartable(&c["name"]);
        if sidecar {
            sidecar_restarts += count;
            sidecar_last_restart = sidecar_last_restart.max(finished(c));
        }
        let terminated = &c["state"]["terminated"];
        let waiting = &c["state"]["waiting"];
        if terminated.is_object() && terminated["exitCode"].as_i64().unwrap_or(0) == 0 {
            continue;
        }
        if sidecar && c["started"] == json!(true) {
            if c["ready"] == json!(true) {
                ready += 1;
            }
            continue;
        }
        reason = if terminated.is_object() {
            match text(&terminated["reason"]).as_str() {
                "" if terminated["signal"].as_i64().unwrap_or(0) != 0 => {
                    format!("Init:Signal:{}", terminated["signal"])
                }
                "" => format!("Init:ExitCode:{}", terminated["exitCode"]),
                r => format!("Init:{r}"),
            }
        } else if waiting.is_object()
            && !text(&waiting["reason"]).is_empty()
            && waiting["reason"] != "PodInitializing"
        {
            format!("Init:{}", text(&waiting["reason"]))
        } else {
            format!("Init:{i}/{}", init_specs.len())
        };
        initializing = true;
        break;
    }
    if !initializing || has_condition(o, "Initialized") {
        restarts = sidecar_restarts;
        last_restart = sidecar_last_restart;
        let mut running = false;
        for c in status["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
            .rev()
        {
            restarts += c["restartCount"].as_i64().unwrap_or(0);
            last_restart = last_restart.max(finished(c));
            let waiting = &c["state"]["waiting"];
            let terminated = &c["state"]["terminated"];
            if waiting.is_object() && !text(&waiting["reason"]).is_empty() {
                reason = text(&waiting["reason"]);
            } else if terminated.is_object() && !text(&terminated["reason"]).is_empty() {
                reason = text(&terminated["reason"]);
            } else if terminated.is_object() {
                reason = if terminated["signal"].as_i64().unwrap_or(0) != 0 {
                    format!("Signal:{}", terminated["signal"])
                } else {
                    format!("ExitCode:{}", terminated["exitCode"].as_i64().unwrap_or(0))
                };
            } else if c["ready"] == json!(true) && c["state"]["running"].is_object() {
                running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && running {
            reason = if has_condition(o, "Ready") {
                "Running".into()
            } else {
                "NotReady".into()
            };
        }
    }
    let deleting = !o["metadata"]["deletionTimestamp"].is_null();
    if deleting && status["reason"] == "NodeLost" {
        reason = "Unknown".into();
    } else if deleting && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".into();
    }
    let restarts_text = match last_restart {
        Some(at) if restarts != 0 => format!(
            "{restarts} ({} ago)",
            human_duration(jiff::Timestamp::now().as_second() - at)
        ),
        _ => restarts.to_string(),
    };
    (format!("{ready}/{total}"), reason, restarts_text)
}

fn pod_readiness_gates(o: &Value) -> Value {
    let gates = o["spec"]["readinessGates"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if gates.is_empty() {
        return json!("<none>");
    }
    let conditions = o["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let true_ = gates
        .iter()
        .filter(|g| {
            conditions
                .iter()
                .find(|c| c["type"] == g["conditionType"])
                .is_some_and(|c| c["status"] == "True")
        })
        .count();
    json!(format!("{true_}/{}", gates.len()))
}

fn node_status(o: &Value) -> Value {
    let ready = o["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready");
    let mut status = vec![match ready {
        Some(c) if c["status"] == "True" => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if o["spec"]["unschedulable"] == json!(true) {
        status.push("SchedulingDisabled");
    }
    json!(status.join(","))
}

fn node_roles(o: &Value) -> Value {
    let mut roles: Vec<String> = o["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| match k.strip_prefix("node-role.kubernetes.io/") {
            Some(role) if !role.is_empty() => Some(role.to_string()),
            Some(_) => None,
            None => (k == "kubernetes.io/role" && !text(v).is_empty()).then(|| text(v)),
        })
        .collect();
    roles.sort();
    roles.dedup();
    json!(or(roles.join(","), "<none>"))
}

fn node_address(o: &Value, type_: &str) -> Value {
    json!(
        o["status"]["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["type"] == type_)
            .map_or("<none>".to_string(), |a| text(&a["address"]))
    )
}

fn node_info(o: &Value, field: &str) -> Value {
    json!(or(text(&o["status"]["nodeInfo"][field]), "<unknown>"))
}

fn service_external_ip(o: &Value) -> Value {
    let spec = &o["spec"];
    let external: Vec<String> = spec["externalIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(text)
        .collect();
    json!(match spec["type"].as_str().unwrap_or_default() {
        "ClusterIP" | "NodePort" => or(external.join(","), "<none>"),
        "LoadBalancer" => {
            let lb = load_balancer(&o["status"]["loadBalancer"]);
            let mut all: Vec<String> = if lb.is_empty() {
                vec![]
            } else {
                lb.split(',').map(str::to_string).collect()
            };
            if external.is_empty() {
                or(lb, "<pending>")
            } else {
                all.extend(external);
                all.join(",")
            }
        }
        "ExternalName" => text(&spec["externalName"]),
        _ => "<unknown>".into(),
    })
}

fn service_ports(o: &Value) -> Value {
    let ports: Vec<String> = o["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let protocol = text(&p["protocol"]);
            match p["nodePort"].as_i64().filter(|n| *n > 0) {
                Some(n) => format!("{}:{n}/{protocol}", p["port"]),
                None => format!("{}/{protocol}", p["port"]),
            }
        })
        .collect();
    json!(or(ports.join(","), "<none>"))
}

/// `formatEndpoints`: up to three `ip:port`, then ` + N more...`.
fn endpoints(o: &Value) -> Value {
    let subsets = o["subsets"].as_array().cloned().unwrap_or_default();
    if subsets.is_empty() {
        return json!("<none>");
    }
    let mut list = Vec::new();
    let mut count = 0;
    for ss in &subsets {
        let addresses = ss["addresses"].as_array().cloned().unwrap_or_default();
        let ports = ss["ports"].as_array().cloned().unwrap_or_default();
        if ports.is_empty() {
            count += addresses.len();
            for a in &addresses {
                if list.len() == 3 {
                    break;
                }
                list.push(text(&a["ip"]));
            }
            continue;
        }
        for p in &ports {
            count += addresses.len();
            for a in &addresses {
                if list.len() == 3 {
                    break;
                }
                let ip = text(&a["ip"]);
                let host = if ip.contains(':') {
                    format!("[{ip}]")
                } else {
                    ip
                };
                list.push(format!("{host}:{}", p["port"]));
            }
        }
    }
    let shown = list.join(",");
    json!(if count > 3 {
        format!("{shown} + {} more...", count - 3)
    } else {
        shown
    })
}

fn job_completions(o: &Value) -> Value {
    let succeeded = o["status"]["succeeded"].as_i64().unwrap_or(0);
    let spec = &o["spec"];
    json!(match spec["completions"].as_i64() {
        Some(n) => format!("{succeeded}/{n}"),
        None => match spec["parallelism"].as_i64().unwrap_or(0) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    })
}

fn job_duration(o: &Value) -> Value {
    let status = &o["status"];
    json!(match (
        seconds(&status["startTime"]),
        seconds(&status["completionTime"])
    ) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(jiff::Timestamp::now().as_second() - start),
        (Some(start), Some(end)) => human_duration(end - start),
    })
}

fn job_status(o: &Value) -> Value {
    json!(if has_condition(o, "Complete") {
        "Complete"
    } else if has_condition(o, "Failed") {
        "Failed"
    } else if !o["metadata"]["deletionTimestamp"].is_null() {
        "Terminating"
    } else if has_condition(o, "Suspended") {
        "Suspended"
    } else if has_condition(o, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    })
}

/// `printBoolPtr`: `True`/`False`, `<unset>` for nil.
fn bool_ptr(v: &Value) -> Value {
    json!(match v.as_bool() {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    })
}

fn ingress_hosts(o: &Value) -> Value {
    let rules = o["spec"]["rules"].as_array().cloned().unwrap_or_default();
    let hosts: Vec<String> = rules
        .iter()
        .take(3)
        .map(|r| text(&r["host"]))
        .filter(|h| !h.is_empty())
        .collect();
    if hosts.is_empty() {
        return json!("*");
    }
    let shown = hosts.join(",");
    json!(if rules.len() > 3 {
        format!("{shown} + {} more...", rules.len() - 3)
    } else {
        shown
    })
}

/// `formatHPAMetrics`, for what autoscaling/v2 stores (and v1's CPU target, which kube converts
/// to a Resource metric).
fn hpa_targets(o: &Value) -> Value {
    let spec = &o["spec"];
    let status = &o["status"];
    if let Some(target) = spec["targetCPUUtilizationPercentage"].as_i64() {
        let current = status["currentCPUUtilizationPercentage"]
            .as_i64()
            .map_or("<unknown>".to_string(), |c| format!("{c}%"));
        return json!(format!("cpu: {current}/{target}%"));
    }
    let specs = spec["metrics"].as_array().cloned().unwrap_or_default();
    if specs.is_empty() {
        return json!("<none>");
    }
    let statuses = status["currentMetrics"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let unknown = || "<unknown>".to_string();
    let list: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let st = statuses.get(i).cloned().unwrap_or(Value::Null);
            let value_pair = |key: &str| {
                let target = &m[key]["target"];
                let current = &st[key]["current"];
                if !target["averageValue"].is_null() {
                    let cur = current["averageValue"]
                        .as_str()
                        .map_or_else(unknown, str::to_string);
                    format!("{cur}/{} (avg)", text(&target["averageValue"]))
                } else {
                    let cur = if st[key].is_object() {
                        text(&current["value"])
                    } else {
                        unknown()
                    };
                    format!("{cur}/{}", text(&target["value"]))
                }
            };
            let resource = |key: &str| {
                let target = &m[key]["target"];
                let current = &st[key]["current"];
                let name = text(&m[key]["name"]);
                if !target["averageValue"].is_null() {
                    let cur = if st[key].is_object() {
                        text(&current["averageValue"])
                    } else {
                        unknown()
                    };
                    format!("{name}: {cur}/{}", text(&target["averageValue"]))
                } else {
                    let cur = current["averageUtilization"]
                        .as_i64()
                        .map_or_else(unknown, |u| format!("{u}%"));
                    let tgt = target["averageUtilization"]
                        .as_i64()
                        .map_or("<auto>".to_string(), |u| format!("{u}%"));
                    format!("{name}: {cur}/{tgt}")
                }
            };
            match m["type"].as_str().unwrap_or_default() {
                "External" => value_pair("external"),
                "Object" => value_pair("object"),
                "Pods" => {
                    let cur = if st["pods"].is_object() {
                        text(&st["pods"]["current"]["averageValue"])
                    } else {
                        unknown()
                    };
                    format!("{cur}/{}", text(&m["pods"]["target"]["averageValue"]))
                }
                "Resource" => resource("resource"),
                "ContainerResource" => resource("containerResource"),
                _ => "<unknown type>".into(),
            }
        })
        .collect();
    let shown = list.iter().take(2).cloned().collect::<Vec<_>>().join(", ");
    json!(if list.len() > 2 {
        format!("{shown} + {} more...", list.len() - 2)
    } else {
        shown
    })
}

fn role_ref(o: &Value) -> Value {
    json!(format!(
        "{}/{}",
        text(&o["roleRef"]["kind"]),
        text(&o["roleRef"]["name"])
    ))
}

/// `rbac.SubjectsStrings`: users, groups, and service accounts as `namespace/name`.
fn subjects(o: &Value, kind: &str) -> Value {
    let list: Vec<String> = o["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["kind"] == kind)
        .map(|s| {
            if kind == "ServiceAccount" {
                format!("{}/{}", text(&s["namespace"]), text(&s["name"]))
            } else {
                text(&s["name"])
            }
        })
        .collect();
    json!(list.join(", "))
}

fn csr_condition(o: &Value) -> Value {
    let types: Vec<String> = o["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| text(&c["type"]))
        .collect();
    let has = |t: &str| types.iter().any(|x| x == t);
    let mut status = if has("Denied") {
        "Denied"
    } else if has("Approved") {
        "Approved"
    } else {
        "Pending"
    }
    .to_string();
    if has("Failed") {
        status.push_str(",Failed");
    }
    if !text(&o["status"]["certificate"]).is_empty() {
        status.push_str(",Issued");
    }
    json!(status)
}

fn storage_class_name(o: &Value) -> Value {
    let annotations = &o["metadata"]["annotations"];
    let default = [
        "storageclass.kubernetes.io/is-default-class",
        "storageclass.beta.kubernetes.io/is-default-class",
    ]
    .iter()
    .any(|k| annotations[*k] == "true");
    let name = text(&o["metadata"]["name"]);
    json!(if default {
        format!("{name} (default)")
    } else {
        name
    })
}

/// `helper.GetPersistentVolume(Claim)Class`: the field, else the beta annotation.
fn volume_class(o: &Value, field: &Value) -> Value {
    let annotation = &o["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"];
    json!(if annotation.is_string() {
        text(annotation)
    } else {
        text(field)
    })
}

fn controller_of(o: &Value) -> Value {
    let owner = o["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["controller"] == json!(true));
    json!(match owner {
        None => "<none>".to_string(),
        Some(r) => {
            let api_version = text(&r["apiVersion"]);
            let group = api_version
                .split_once('/')
                .map_or("", |(g, _)| g)
                .to_string();
            let kind = text(&r["kind"]);
            let gk = if group.is_empty() {
                kind
            } else {
                format!("{kind}.{group}")
            };
            format!("{}/{}", gk.to_lowercase(), text(&r["name"]))
        }
    })
}

fn resource_quota(o: &Value, limits: bool) -> Value {
    let hard = o["status"]["hard"].as_object().cloned().unwrap_or_default();
    let mut names: Vec<&String> = hard.keys().collect();
    names.sort();
    let parts: Vec<String> = names
        .into_iter()
        .filter(|n| {
            let pieces: Vec<&str> = n.split('.').collect();
            (pieces.len() > 1 && pieces[0] == "limits") == limits
        })
        .map(|n| {
            let used = text(&o["status"]["used"][n.as_str()]);
            format!("{n}: {}/{}", or(used, "0"), text(&hard[n.as_str()]))
        })
        .collect();
    json!(parts.join(", "))
}

fn param_ref(o: &Value) -> Value {
    let pr = &o["spec"]["paramRef"];
    json!(if !pr.is_object() {
        "<unset>".to_string()
    } else if !text(&pr["name"]).is_empty() {
        match text(&pr["namespace"]).as_str() {
            "" => format!("*/{}", text(&pr["name"])),
            ns => format!("{ns}/{}", text(&pr["name"])),
        }
    } else if pr["selector"].is_object() {
        selector_string(&pr["selector"]).unwrap_or_default()
    } else {
        "<unset>".to_string()
    })
}

fn apiservice_available(o: &Value) -> Value {
    let condition = o["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Available");
    json!(match condition {
        None => "Unknown".to_string(),
        Some(c) if c["status"] == "True" => "True".to_string(),
        Some(c) if !text(&c["reason"]).is_empty() => {
            format!("{} ({})", text(&c["status"]), text(&c["reason"]))
        }
        Some(c) => text(&c["status"]),
    })
}

fn template_spec(o: &Value) -> &Value {
    &o["spec"]["template"]["spec"]
}

static PRINTERS: &[Printer] = &[
    Printer {
        group: "",
        resource: "pods",
        columns: &[
            NAME,
            c("Ready", "string", pod_ready),
            c("Status", "string", pod_status),
            c("Restarts", "string", pod_restarts),
            AGE,
            w("IP", "string", |o| {
                json!(or(text(&o["status"]["podIPs"][0]["ip"]), "<none>"))
            }),
            w("Node", "string", |o| {
                json!(or(text(&o["spec"]["nodeName"]), "<none>"))
            }),
            w("Nominated Node", "string", |o| {
                json!(or(text(&o["status"]["nominatedNodeName"]), "<none>"))
            }),
            w("Readiness Gates", "string", pod_readiness_gates),
        ],
    },
    Printer {
        group: "",
        resource: "podtemplates",
        columns: &[
            NAME,
            c("Containers", "string", |o| {
                container_names(&o["template"]["spec"])
            }),
            c("Images", "string", |o| {
                container_images(&o["template"]["spec"])
            }),
            c("Pod Labels", "string", |o| {
                json!(format_labels(&o["template"]["metadata"]["labels"]))
            }),
        ],
    },
    Printer {
        group: "policy",
        resource: "poddisruptionbudgets",
        columns: &[
            NAME,
            c("Min Available", "string", |o| {
                let v = &o["spec"]["minAvailable"];
                json!(if v.is_null() {
                    "N/A".into()
                } else {
                    int_or_string(v)
                })
            }),
            c("Max Unavailable", "string", |o| {
                let v = &o["spec"]["maxUnavailable"];
                json!(if v.is_null() {
                    "N/A".into()
                } else {
                    int_or_string(v)
                })
            }),
            c("Allowed Disruptions", "integer", |o| {
                int(&o["status"]["disruptionsAllowed"])
            }),
            AGE,
        ],
    },
    Printer {
        group: "",
        resource: "replicationcontrollers",
        columns: &[
            NAME,
            c("Desired", "integer", |o| int(&o["spec"]["replicas"])),
            c("Current", "integer", |o| int(&o["status"]["replicas"])),
            c("Ready", "integer", |o| int(&o["status"]["readyReplicas"])),
            AGE,
            w("Containers", "string", |o| {
                container_names(template_spec(o))
            }),
            w("Images", "string", |o| container_images(template_spec(o))),
            w("Selector", "string", |o| {
                json!(format_labels(&o["spec"]["selector"]))
            }),
        ],
    },
    Printer {
        group: "apps",
        resource: "replicasets",
        columns: &[
            NAME,
            c("Desired", "integer", |o| int(&o["spec"]["replicas"])),
            c("Current", "integer", |o| int(&o["status"]["replicas"])),
            c("Ready", "integer", |o| int(&o["status"]["readyReplicas"])),
            AGE,
            w("Containers", "string", |o| {
                container_names(template_spec(o))
            }),
            w("Images", "string", |o| container_images(template_spec(o))),
            w("Selector", "string", |o| {
                format_selector(&o["spec"]["selector"])
            }),
        ],
    },
    Printer {
        group: "apps",
        resource: "daemonsets",
        columns: &[
            NAME,
            c("Desired", "integer", |o| {
                int(&o["status"]["desiredNumberScheduled"])
            }),
            c("Current", "integer", |o| {
                int(&o["status"]["currentNumberScheduled"])
            }),
            c("Ready", "integer", |o| int(&o["status"]["numberReady"])),
            c("Up-to-date", "integer", |o| {
                int(&o["status"]["updatedNumberScheduled"])
            }),
            c("Available", "integer", |o| {
                int(&o["status"]["numberAvailable"])
            }),
            c("Node Selector", "string", |o| {
                json!(format_labels(&template_spec(o)["nodeSelector"]))
            }),
            AGE,
            w("Containers", "string", |o| {
                container_names(template_spec(o))
            }),
            w("Images", "string", |o| container_images(template_spec(o))),
            w("Selector", "string", |o| {
                format_selector(&o["spec"]["selector"])
            }),
        ],
    },
    Printer {
        group: "batch",
        resource: "jobs",
        columns: &[
            NAME,
            c("Status", "string", job_status),
            c("Completions", "string", job_completions),
            c("Duration", "string", job_duration),
            AGE,
            w("Containers", "string", |o| {
                container_names(template_spec(o))
            }),
            w("Images", "string", |o| container_images(template_spec(o))),
            w("Selector", "string", |o| {
                format_selector(&o["spec"]["selector"])
            }),
        ],
    },
    Printer {
        group: "batch",
        resource: "cronjobs",
        columns: &[
            NAME,
            c("Schedule", "string", |o| {
                json!(text(&o["spec"]["schedule"]))
            }),
            c("Timezone", "string", |o| {
                json!(or(text(&o["spec"]["timeZone"]), "<none>"))
            }),
            c("Suspend", "boolean", |o| bool_ptr(&o["spec"]["suspend"])),
            c("Active", "integer", |o| {
                json!(o["status"]["active"].as_array().map_or(0, Vec::len))
            }),
            c("Last Schedule", "string", |o| {
                let t = &o["status"]["lastScheduleTime"];
                json!(if t.is_null() {
                    "<none>".into()
                } else {
                    since(t)
                })
            }),
            AGE,
            w("Containers", "string", |o| {
                container_names(&o["spec"]["jobTemplate"]["spec"]["template"]["spec"])
            }),
            w("Images", "string", |o| {
                container_images(&o["spec"]["jobTemplate"]["spec"]["template"]["spec"])
            }),
            w("Selector", "string", |o| {
                format_selector(&o["spec"]["jobTemplate"]["spec"]["selector"])
            }),
        ],
    },
    Printer {
        group: "",
        resource: "services",
        columns: &[
            NAME,
            c("Type", "string", |o| json!(text(&o["spec"]["type"]))),
            c("Cluster-IP", "string", |o| {
                json!(or(text(&o["spec"]["clusterIPs"][0]), "<none>"))
            }),
            c("External-IP", "string", service_external_ip),
            c("Port(s)", "string", service_ports),
            AGE,
            w("Selector", "string", |o| {
                json!(format_labels(&o["spec"]["selector"]))
            }),
        ],
    },
    Printer {
        group: "networking.k8s.io",
        resource: "ingresses",
        columns: &[
            NAME,
            c("Class", "string", |o| {
                json!(or(text(&o["spec"]["ingressClassName"]), "<none>"))
            }),
            c("Hosts", "string", ingress_hosts),
            c("Address", "string", |o| {
                json!(load_balancer(&o["status"]["loadBalancer"]))
            }),
            c("Ports", "string", |o| {
                let tls = o["spec"]["tls"].as_array().is_some_and(|t| !t.is_empty());
                json!(if tls { "80, 443" } else { "80" })
            }),
            AGE,
        ],
    },
    Printer {
        group: "networking.k8s.io",
        resource: "ingressclasses",
        columns: &[
            NAME,
            c("Controller", "string", |o| {
                json!(text(&o["spec"]["controller"]))
            }),
            c("Parameters", "string", |o| {
                let p = &o["spec"]["parameters"];
                json!(if p.is_object() {
                    let mut s = text(&p["kind"]);
                    if p["apiGroup"].is_string() {
                        s = format!("{s}.{}", text(&p["apiGroup"]));
                    }
                    format!("{s}/{}", text(&p["name"]))
                } else {
                    "<none>".into()
                })
            }),
            AGE,
        ],
    },
    Printer {
        group: "apps",
        resource: "statefulsets",
        columns: &[
            NAME,
            c("Ready", "string", |o| {
                json!(format!(
                    "{}/{}",
                    o["status"]["readyReplicas"].as_i64().unwrap_or(0),
                    o["spec"]["replicas"].as_i64().unwrap_or(0)
                ))
            }),
            AGE,
            w("Containers", "string", |o| {
                container_names(template_spec(o))
            }),
            w("Images", "string", |o| container_images(template_spec(o))),
        ],
    },
    Printer {
        group: "",
        resource: "endpoints",
        columns: &[NAME, c("Endpoints", "string", endpoints), AGE],
    },
    Printer {
        group: "",
        resource: "nodes",
        columns: &[
            NAME,
            c("Status", "string", node_status),
            c("Roles", "string", node_roles),
            AGE,
            c("Version", "string", |o| {
                json!(text(&o["status"]["nodeInfo"]["kubeletVersion"]))
            }),
            w("Internal-IP", "string", |o| node_address(o, "InternalIP")),
            w("External-IP", "string", |o| node_address(o, "ExternalIP")),
            w("OS-Image", "string", |o| node_info(o, "osImage")),
            w("Kernel-Version", "string", |o| {
                node_info(o, "kernelVersion")
            }),
            w("Container-Runtime", "string", |o| {
                node_info(o, "containerRuntimeVersion")
            }),
        ],
    },
    Printer {
        group: "",
        resource: "namespaces",
        columns: &[
            NAME,
            c("Status", "string", |o| json!(text(&o["status"]["phase"]))),
            AGE,
        ],
    },
    Printer {
        group: "",
        resource: "secrets",
        columns: &[
            NAME,
            c("Type", "string", |o| json!(text(&o["type"]))),
            c("Data", "string", |o| {
                json!(o["data"].as_object().map_or(0, |m| m.len()))
            }),
            AGE,
        ],
    },
    Printer {
        group: "",
        resource: "serviceaccounts",
        columns: &[
            NAME,
            c("Secrets", "string", |o| {
                json!(o["secrets"].as_array().map_or(0, Vec::len))
            }),
            AGE,
        ],
    },
    Printer {
        group: "",
        resource: "persistentvolumes",
        columns: &[
            NAME,
            c("Capacity", "string", |o| {
                json!(text(&o["spec"]["capacity"]["storage"]))
            }),
            c("Access Modes", "string", |o| {
                json!(access_modes(&o["spec"]["accessModes"]))
            }),
            c("Reclaim Policy", "string", |o| {
                json!(text(&o["spec"]["persistentVolumeReclaimPolicy"]))
            }),
            c("Status", "string", |o| {
                json!(if o["metadata"]["deletionTimestamp"].is_null() {
                    text(&o["status"]["phase"])
                } else {
                    "Terminating".into()
                })
            }),
            c("Claim", "string", |o| {
                let r = &o["spec"]["claimRef"];
                json!(if r.is_object() {
                    format!("{}/{}", text(&r["namespace"]), text(&r["name"]))
                } else {
                    String::new()
                })
            }),
            c("StorageClass", "string", |o| {
                volume_class(o, &o["spec"]["storageClassName"])
            }),
            c("VolumeAttributesClass", "string", |o| {
                json!(or(text(&o["spec"]["volumeAttributesClassName"]), "<unset>"))
            }),
            c("Reason", "string", |o| json!(text(&o["status"]["reason"]))),
            AGE,
            w("VolumeMode", "string", |o| {
                json!(or(text(&o["spec"]["volumeMode"]), "<unset>"))
            }),
        ],
    },
    Printer {
        group: "",
        resource: "persistentvolumeclaims",
        columns: &[
            NAME,
            c("Status", "string", |o| {
                json!(if o["metadata"]["deletionTimestamp"].is_null() {
                    text(&o["status"]["phase"])
                } else {
                    "Terminating".into()
                })
            }),
            c("Volume", "string", |o| {
                json!(text(&o["spec"]["volumeName"]))
            }),
            c("Capacity", "string", |o| {
                json!(if text(&o["spec"]["volumeName"]).is_empty() {
                    String::new()
                } else {
                    text(&o["status"]["capacity"]["storage"])
                })
            }),
            c("Access Modes", "string", |o| {
                json!(if text(&o["spec"]["volumeName"]).is_empty() {
                    String::new()
                } else {
                    access_modes(&o["status"]["accessModes"])
                })
            }),
            c("StorageClass", "string", |o| {
                volume_class(o, &o["spec"]["storageClassName"])
            }),
            c("VolumeAttributesClass", "string", |o| {
                json!(or(text(&o["spec"]["volumeAttributesClassName"]), "<unset>"))
            }),
            AGE,
            w("VolumeMode", "string", |o| {
                json!(or(text(&o["spec"]["volumeMode"]), "<unset>"))
            }),
        ],
    },
    Printer {
        group: "",
        resource: "componentstatuses",
        columns: &[
            NAME,
            c("Status", "string", |o| {
                let healthy = o["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|c| c["type"] == "Healthy");
                json!(match healthy {
                    Some(c) if c["status"] == "True" => "Healthy",
                    Some(_) => "Unhealthy",
                    None => "Unknown",
                })
            }),
            c("Message", "string", |o| {
                json!(component_condition(o, "message"))
            }),
            c("Error", "string", |o| {
                json!(component_condition(o, "error"))
            }),
        ],
    },
    Printer {
        group: "apps",
        resource: "deployments",
        columns: &[
            NAME,
            c("Ready", "string", |o| {
                json!(format!(
                    "{}/{}",
                    o["status"]["readyReplicas"].as_i64().unwrap_or(0),
                    o["spec"]["replicas"].as_i64().unwrap_or(0)
                ))
            }),
            c("Up-to-date", "string", |o| {
                int(&o["status"]["updatedReplicas"])
            }),
            c("Available", "string", |o| {
                int(&o["status"]["availableReplicas"])
            }),
            AGE,
            w("Containers", "string", |o| {
                container_names(template_spec(o))
            }),
            w("Images", "string", |o| container_images(template_spec(o))),
            // `selector.String()` here, not FormatLabelSelector: empty prints empty.
            w("Selector", "string", |o| {
                json!(selector_string(&o["spec"]["selector"]).unwrap_or_else(|| "<invalid>".into()))
            }),
        ],
    },
    Printer {
        group: "autoscaling",
        resource: "horizontalpodautoscalers",
        columns: &[
            NAME,
            c("Reference", "string", |o| {
                let r = &o["spec"]["scaleTargetRef"];
                json!(format!("{}/{}", text(&r["kind"]), text(&r["name"])))
            }),
            c("Targets", "string", hpa_targets),
            c("MinPods", "string", |o| {
                json!(or(text(&o["spec"]["minReplicas"]), "<unset>"))
            }),
            c("MaxPods", "string", |o| int(&o["spec"]["maxReplicas"])),
            c("Replicas", "string", |o| {
                int(&o["status"]["currentReplicas"])
            }),
            AGE,
        ],
    },
    Printer {
        group: "",
        resource: "configmaps",
        columns: &[
            NAME,
            c("Data", "string", |o| {
                let n = |v: &Value| v.as_object().map_or(0, |m| m.len());
                json!(n(&o["data"]) + n(&o["binaryData"]))
            }),
            AGE,
        ],
    },
    Printer {
        group: "networking.k8s.io",
        resource: "networkpolicies",
        columns: &[
            NAME,
            c("Pod-Selector", "string", |o| {
                format_selector(&o["spec"]["podSelector"])
            }),
            AGE,
        ],
    },
    Printer {
        group: "rbac.authorization.k8s.io",
        resource: "rolebindings",
        columns: &[
            NAME,
            c("Role", "string", role_ref),
            AGE,
            w("Users", "string", |o| subjects(o, "User")),
            w("Groups", "string", |o| subjects(o, "Group")),
            w("ServiceAccounts", "string", |o| {
                subjects(o, "ServiceAccount")
            }),
        ],
    },
    Printer {
        group: "rbac.authorization.k8s.io",
        resource: "clusterrolebindings",
        columns: &[
            NAME,
            c("Role", "string", role_ref),
            AGE,
            w("Users", "string", |o| subjects(o, "User")),
            w("Groups", "string", |o| subjects(o, "Group")),
            w("ServiceAccounts", "string", |o| {
                subjects(o, "ServiceAccount")
            }),
        ],
    },
    Printer {
        group: "certificates.k8s.io",
        resource: "certificatesigningrequests",
        columns: &[
            NAME,
            AGE,
            c("SignerName", "string", |o| {
                json!(or(text(&o["spec"]["signerName"]), "<none>"))
            }),
            c("Requestor", "string", |o| {
                json!(text(&o["spec"]["username"]))
            }),
            c("RequestedDuration", "string", |o| {
                json!(match o["spec"]["expirationSeconds"].as_i64() {
                    Some(s) => human_duration(s),
                    None => "<none>".into(),
                })
            }),
            c("Condition", "string", csr_condition),
        ],
    },
    Printer {
        group: "coordination.k8s.io",
        resource: "leases",
        columns: &[
            NAME,
            c("Holder", "string", |o| {
                json!(text(&o["spec"]["holderIdentity"]))
            }),
            AGE,
        ],
    },
    Printer {
        group: "storage.k8s.io",
        resource: "storageclasses",
        columns: &[
            c("Name", "string", storage_class_name),
            c("Provisioner", "string", |o| json!(text(&o["provisioner"]))),
            c("ReclaimPolicy", "string", |o| {
                json!(or(text(&o["reclaimPolicy"]), "Delete"))
            }),
            c("VolumeBindingMode", "string", |o| {
                json!(or(text(&o["volumeBindingMode"]), "Immediate"))
            }),
            c("AllowVolumeExpansion", "string", |o| {
                json!(o["allowVolumeExpansion"].as_bool().unwrap_or(false))
            }),
            AGE,
        ],
    },
    Printer {
        group: "apps",
        resource: "controllerrevisions",
        columns: &[
            NAME,
            c("Controller", "string", controller_of),
            c("Revision", "string", |o| int(&o["revision"])),
            AGE,
        ],
    },
    Printer {
        group: "",
        resource: "resourcequotas",
        columns: &[
            NAME,
            AGE,
            c("Request", "string", |o| resource_quota(o, false)),
            c("Limit", "string", |o| resource_quota(o, true)),
        ],
    },
    Printer {
        group: "scheduling.k8s.io",
        resource: "priorityclasses",
        columns: &[
            NAME,
            c("Value", "integer", |o| int(&o["value"])),
            c("Global-Default", "boolean", |o| {
                json!(o["globalDefault"].as_bool().unwrap_or(false))
            }),
            AGE,
            c("PreemptionPolicy", "string", |o| {
                json!(text(&o["preemptionPolicy"]))
            }),
        ],
    },
    Printer {
        group: "node.k8s.io",
        resource: "runtimeclasses",
        columns: &[
            NAME,
            c("Handler", "string", |o| json!(text(&o["handler"]))),
            AGE,
        ],
    },
    Printer {
        group: "storage.k8s.io",
        resource: "volumeattachments",
        columns: &[
            NAME,
            c("Attacher", "string", |o| {
                json!(text(&o["spec"]["attacher"]))
            }),
            c("PV", "string", |o| {
                json!(text(&o["spec"]["source"]["persistentVolumeName"]))
            }),
            c("Node", "string", |o| json!(text(&o["spec"]["nodeName"]))),
            c("Attached", "boolean", |o| {
                json!(o["status"]["attached"].as_bool().unwrap_or(false))
            }),
            AGE,
        ],
    },
    Printer {
        group: "discovery.k8s.io",
        resource: "endpointslices",
        columns: &[
            NAME,
            c("AddressType", "string", |o| json!(text(&o["addressType"]))),
            c("Ports", "string", |o| {
                let ports: Vec<String> = o["ports"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| match (&p["port"], &p["name"]) {
                        (Value::Number(n), _) => n.to_string(),
                        (_, Value::String(n)) => n.clone(),
                        _ => "*".into(),
                    })
                    .collect();
                json!(three_and_more(ports, "<unset>"))
            }),
            c("Endpoints", "string", |o| {
                let addresses: Vec<String> = o["endpoints"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|e| e["addresses"].as_array().cloned().unwrap_or_default())
                    .map(|a| text(&a))
                    .collect();
                json!(three_and_more(addresses, "<unset>"))
            }),
            AGE,
        ],
    },
    Printer {
        group: "storage.k8s.io",
        resource: "csinodes",
        columns: &[
            NAME,
            c("Drivers", "integer", |o| {
                json!(o["spec"]["drivers"].as_array().map_or(0, Vec::len))
            }),
            AGE,
        ],
    },
    Printer {
        group: "storage.k8s.io",
        resource: "csidrivers",
        columns: &[
            NAME,
            c("AttachRequired", "boolean", |o| {
                json!(o["spec"]["attachRequired"].as_bool().unwrap_or(true))
            }),
            c("PodInfoOnMount", "boolean", |o| {
                json!(o["spec"]["podInfoOnMount"].as_bool().unwrap_or(false))
            }),
            c("StorageCapacity", "boolean", |o| {
                json!(o["spec"]["storageCapacity"].as_bool().unwrap_or(false))
            }),
            c("TokenRequests", "string", |o| {
                json!(match o["spec"]["tokenRequests"].as_array() {
                    Some(list) => list
                        .iter()
                        .map(|t| text(&t["audience"]))
                        .collect::<Vec<_>>()
                        .join(","),
                    None => "<unset>".into(),
                })
            }),
            c("RequiresRepublish", "boolean", |o| {
                json!(o["spec"]["requiresRepublish"].as_bool().unwrap_or(false))
            }),
            c("Modes", "string", |o| {
                let modes: Vec<String> = o["spec"]["volumeLifecycleModes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(text)
                    .collect();
                json!(or(modes.join(","), "<none>"))
            }),
            AGE,
        ],
    },
    Printer {
        group: "admissionregistration.k8s.io",
        resource: "mutatingwebhookconfigurations",
        columns: &[
            NAME,
            c("Webhooks", "integer", |o| {
                json!(o["webhooks"].as_array().map_or(0, Vec::len))
            }),
            AGE,
        ],
    },
    Printer {
        group: "admissionregistration.k8s.io",
        resource: "validatingwebhookconfigurations",
        columns: &[
            NAME,
            c("Webhooks", "integer", |o| {
                json!(o["webhooks"].as_array().map_or(0, Vec::len))
            }),
            AGE,
        ],
    },
    Printer {
        group: "admissionregistration.k8s.io",
        resource: "validatingadmissionpolicies",
        columns: &[
            NAME,
            c("Validations", "integer", |o| {
                json!(o["spec"]["validations"].as_array().map_or(0, Vec::len))
            }),
            c("ParamKind", "string", |o| {
                let p = &o["spec"]["paramKind"];
                json!(if p.is_object() {
                    format!("{}/{}", text(&p["apiVersion"]), text(&p["kind"]))
                } else {
                    "<unset>".into()
                })
            }),
            AGE,
        ],
    },
    Printer {
        group: "admissionregistration.k8s.io",
        resource: "validatingadmissionpolicybindings",
        columns: &[
            NAME,
            c("PolicyName", "string", |o| {
                json!(text(&o["spec"]["policyName"]))
            }),
            c("ParamRef", "string", param_ref),
            AGE,
        ],
    },
    Printer {
        group: "flowcontrol.apiserver.k8s.io",
        resource: "flowschemas",
        columns: &[
            NAME,
            c("PriorityLevel", "string", |o| {
                json!(text(&o["spec"]["priorityLevelConfiguration"]["name"]))
            }),
            c("MatchingPrecedence", "string", |o| {
                int(&o["spec"]["matchingPrecedence"])
            }),
            c("DistinguisherMethod", "string", |o| {
                json!(or(
                    text(&o["spec"]["distinguisherMethod"]["type"]),
                    "<none>"
                ))
            }),
            AGE,
            c("MissingPL", "string", |o| {
                json!(
                    o["status"]["conditions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|c| c["type"] == "Dangling")
                        .map_or("?".to_string(), |c| text(&c["status"]))
                )
            }),
        ],
    },
    Printer {
        group: "flowcontrol.apiserver.k8s.io",
        resource: "prioritylevelconfigurations",
        columns: &[
            NAME,
            c("Type", "string", |o| json!(text(&o["spec"]["type"]))),
            c("NominalConcurrencyShares", "string", |o| {
                limited(o, &["nominalConcurrencyShares"])
            }),
            c("Queues", "string", |o| {
                limited(o, &["limitResponse", "queuing", "queues"])
            }),
            c("HandSize", "string", |o| {
                limited(o, &["limitResponse", "queuing", "handSize"])
            }),
            c("QueueLengthLimit", "string", |o| {
                limited(o, &["limitResponse", "queuing", "queueLengthLimit"])
            }),
            AGE,
        ],
    },
    Printer {
        group: "apiregistration.k8s.io",
        resource: "apiservices",
        columns: &[
            NAME,
            c("Service", "string", |o| {
                let s = &o["spec"]["service"];
                json!(if s.is_object() {
                    format!("{}/{}", text(&s["namespace"]), text(&s["name"]))
                } else {
                    "Local".into()
                })
            }),
            c("Available", "string", apiservice_available),
            AGE,
        ],
    },
];

fn component_condition(o: &Value, field: &str) -> String {
    o["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Healthy")
        .map(|c| text(&c[field]))
        .unwrap_or_default()
}

/// A `Limited` priority level's field, `<none>` for an `Exempt` one (or without queuing).
fn limited(o: &Value, path: &[&str]) -> Value {
    let mut v = &o["spec"]["limited"];
    if !v.is_object() {
        return json!("<none>");
    }
    for p in path {
        v = &v[*p];
    }
    if v.is_null() {
        json!("<none>")
    } else {
        v.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_print_as_go_prints_them() {
        let s = json!({"matchLabels": {"b": "2", "a": "1"}, "matchExpressions": [
            {"key": "c", "operator": "In", "values": ["y", "x"]},
            {"key": "d", "operator": "DoesNotExist"}]});
        assert_eq!(
            selector_string(&s).as_deref(),
            Some("a=1,b=2,c in (x,y),!d")
        );
        assert_eq!(format_selector(&json!({})), json!("<none>"));
        assert_eq!(format_labels(&json!({"z": "1", "a": "2"})), "a=2,z=1");
    }

    #[test]
    fn every_printer_has_a_name_and_each_resource_one_printer() {
        for (i, p) in PRINTERS.iter().enumerate() {
            assert_eq!(p.columns[0].name, "Name", "{}", p.resource);
            assert!(
                PRINTERS[..i]
                    .iter()
                    .all(|q| (q.group, q.resource) != (p.group, p.resource)),
                "{} twice",
                p.resource
            );
        }
    }

    /// Every listable built-in kind prints as kube-apiserver prints it: a printer here, the
    /// events' own table (table.rs), or — only for the kinds printers.go has no handler for —
    /// `DefaultTableConvertor`'s `NAME`/`CREATED AT`.
    #[test]
    fn every_listable_builtin_kind_has_kube_apiservers_printer() {
        const DEFAULT_CONVERTOR: &[(&str, &str)] = &[
            ("", "limitranges"),
            ("rbac.authorization.k8s.io", "roles"),
            ("rbac.authorization.k8s.io", "clusterroles"),
            ("apiextensions.k8s.io", "customresourcedefinitions"),
            // printers.go has a handler, but kube-apiserver v1.32.13 answers CSIStorageCapacity
            // with the default convertor's columns (as measured: the generated descriptions).
            ("storage.k8s.io", "csistoragecapacities"),
        ];
        for b in crate::builtins::BUILTINS {
            if b.list_kind.is_empty() || b.plural == "events" {
                continue;
            }
            let key = (b.group, b.plural);
            assert!(
                printer(b.group, b.plural).is_some() != DEFAULT_CONVERTOR.contains(&key),
                "{key:?}: a printer, or kube's default convertor, not both or neither"
            );
        }
    }

    #[test]
    fn pods_read_their_container_statuses() {
        let o = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
                {"name": "b", "ready": false, "restartCount": 2,
                 "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        let (ready, status, restarts) = pod(&o);
        assert_eq!(
            (ready.as_str(), status.as_str(), restarts.as_str()),
            ("1/2", "CrashLoopBackOff", "2")
        );
    }
}
