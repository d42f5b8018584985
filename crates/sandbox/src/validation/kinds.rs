//! The `Validate<Kind>` rules of kinds whose strategies are otherwise generic (storage, node,
//! coordination, networking, discovery, scheduling and autoscaling kinds), each citing kube's
//! function (`pkg/apis/<group>/validation/validation.go` of k/k 1.32) and worded as
//! `field.ErrorList` prints. Only the checks listed in each function's comment are made; the
//! differential (docs/sandbox.md) measures what is left.
//!
//! Pure functions over JSON: no I/O, nothing panics on user input.

use serde_json::{Value, json};

use super::Path;
use super::names;
use crate::error::Cause;
use crate::schema::field::{forbidden, invalid, not_supported, required};

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|s| s.to_string()).collect()
}

/// No rules of the kind's own.
pub fn none(_object: &Value) -> Vec<Cause> {
    Vec::new()
}

/// storage `ValidateStorageClass`: `validateProvisioner` (required, a qualified name in lower
/// case), `validateReclaimPolicy`, `validateVolumeBindingMode`.
pub fn storage_class(object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    match object["provisioner"].as_str().unwrap_or_default() {
        "" => causes.push(required("provisioner", "")),
        provisioner => {
            for m in names::qualified_name(&provisioner.to_lowercase()) {
                causes.push(invalid("provisioner", &json!(provisioner), &m));
            }
        }
    }
    if let Some(policy) = object["reclaimPolicy"].as_str()
        && !matches!(policy, "" | "Delete" | "Retain")
    {
        causes.push(not_supported(
            "reclaimPolicy",
            &json!(policy),
            &strings(&["Delete", "Retain"]),
        ));
    }
    if let Some(mode) = object["volumeBindingMode"].as_str()
        && !matches!(mode, "Immediate" | "WaitForFirstConsumer")
    {
        causes.push(not_supported(
            "volumeBindingMode",
            &json!(mode),
            &strings(&["Immediate", "WaitForFirstConsumer"]),
        ));
    }
    causes
}

/// storage `ValidateVolumeAttachmentV1`: `validateAttacher` (required), then
/// `ValidateCSIDriverName` on the same field (required, at most 63 characters, a DNS subdomain
/// in lower case); the node name required.
pub fn volume_attachment(object: &Value) -> Vec<Cause> {
    let spec = &object["spec"];
    let attacher = spec["attacher"].as_str().unwrap_or_default();
    let mut causes = Vec::new();
    if attacher.is_empty() {
        causes.push(required("spec.attacher", ""));
    }
    if spec["nodeName"].as_str().is_none_or(str::is_empty) {
        causes.push(required("spec.nodeName", ""));
    }
    if attacher.len() > 63 {
        causes.push(crate::schema::field::too_long("spec.attacher", 63));
    }
    for m in names::dns1123_subdomain(&attacher.to_lowercase()) {
        causes.push(invalid("spec.attacher", &json!(attacher), &m));
    }
    causes
}

/// networking `ValidateIngressClass` → `IsDomainPrefixedPath` on `spec.controller`: required,
/// `<domain>/<path>`, the domain a DNS subdomain.
pub fn ingress_class(object: &Value) -> Vec<Cause> {
    const AT: &str = "spec.controller";
    let controller = object["spec"]["controller"].as_str().unwrap_or_default();
    if controller.is_empty() {
        return vec![required(AT, "")];
    }
    let Some((domain, _path)) = controller.split_once('/') else {
        return vec![invalid(
            AT,
            &json!(controller),
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        )];
    };
    names::dns1123_subdomain(domain)
        .into_iter()
        .map(|m| invalid(AT, &json!(domain), &m))
        .collect()
}

/// networking `ValidateNetworkPolicySpec`: each rule's ports (`validateNetworkPolicyPort`: a
/// protocol among three, a numbered port in range), then `policyTypes` (at most two, each
/// `Ingress` or `Egress`).
pub fn network_policy(object: &Value) -> Vec<Cause> {
    let spec = &object["spec"];
    let at = Path::root("spec");
    let mut causes = Vec::new();
    for direction in ["ingress", "egress"] {
        for (i, rule) in spec[direction].as_array().into_iter().flatten().enumerate() {
            for (j, port) in rule["ports"].as_array().into_iter().flatten().enumerate() {
                let p = at.child(direction).index(i).child("ports").index(j);
                if let Some(protocol) = port["protocol"].as_str()
                    && !matches!(protocol, "TCP" | "UDP" | "SCTP")
                {
                    causes.push(not_supported(
                        p.child("protocol").as_str(),
                        &json!(protocol),
                        &strings(&["TCP", "UDP", "SCTP"]),
                    ));
                }
                if let Some(number) = port["port"].as_i64()
                    && !(1..=65535).contains(&number)
                {
                    causes.push(invalid(
                        p.child("port").as_str(),
                        &json!(number),
                        "must be between 1 and 65535, inclusive",
                    ));
                }
            }
        }
    }
    let types = spec["policyTypes"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    if types.len() > 2 {
        causes.push(invalid(
            "spec.policyTypes",
            &spec["policyTypes"],
            "may not specify more than two policyTypes",
        ));
    }
    for (i, t) in types.iter().enumerate() {
        if !matches!(t.as_str(), Some("Ingress" | "Egress")) {
            causes.push(not_supported(
                at.child("policyTypes").index(i).as_str(),
                t,
                &strings(&["Ingress", "Egress"]),
            ));
        }
    }
    causes
}

/// discovery `ValidateEndpointSlice`: the address type among the supported ones.
pub fn endpoint_slice(object: &Value) -> Vec<Cause> {
    let kind = &object["addressType"];
    if matches!(kind.as_str(), Some("IPv4" | "IPv6" | "FQDN")) {
        return Vec::new();
    }
    vec![not_supported(
        "addressType",
        &json!(kind.as_str().unwrap_or_default()),
        &strings(&["FQDN", "IPv4", "IPv6"]),
    )]
}

/// coordination `ValidateLeaseSpec`: a duration above zero, transitions not negative.
pub fn lease(object: &Value) -> Vec<Cause> {
    let spec = &object["spec"];
    let mut causes = Vec::new();
    if let Some(d) = spec["leaseDurationSeconds"].as_i64()
        && d <= 0
    {
        causes.push(invalid(
            "spec.leaseDurationSeconds",
            &json!(d),
            "must be greater than 0",
        ));
    }
    if let Some(t) = spec["leaseTransitions"].as_i64()
        && t < 0
    {
        causes.push(invalid(
            "spec.leaseTransitions",
            &json!(t),
            "must be greater than or equal to 0",
        ));
    }
    causes
}

/// The system priority classes kube-apiserver creates (`scheduling/v1` `SystemPriorityClasses`).
const SYSTEM_PRIORITY_CLASSES: [(&str, i64); 2] = [
    ("system-node-critical", 2_000_001_000),
    ("system-cluster-critical", 2_000_000_000),
];

/// `HighestUserDefinablePriority`.
const HIGHEST_USER_PRIORITY: i64 = 1_000_000_000;

/// scheduling `ValidatePriorityClass`: unless it is one of the system classes as kube defines
/// them (`IsKnownSystemPriorityClass`), no `system-` name and no value above a billion.
pub fn priority_class(object: &Value) -> Vec<Cause> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let value = object["value"].as_i64().unwrap_or_default();
    let global_default = object["globalDefault"].as_bool().unwrap_or_default();
    let known = match SYSTEM_PRIORITY_CLASSES.iter().find(|(n, _)| *n == name) {
        None => Err(format!("{name} is not a known system priority class")),
        Some((_, v)) if *v != value => Err(format!("value of {name} PriorityClass must be {v}")),
        Some(_) if global_default => Err(format!(
            "globalDefault of {name} PriorityClass must be false"
        )),
        Some(_) => Ok(()),
    };
    let Err(why) = known else {
        return Vec::new();
    };
    let mut causes = Vec::new();
    if name.starts_with("system-") {
        causes.push(forbidden(
            "metadata.name",
            &format!("priority class names with 'system-' prefix are reserved for system use only. error: {why}"),
        ));
    }
    if value > HIGHEST_USER_PRIORITY {
        causes.push(forbidden(
            "value",
            &format!("maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}"),
        ));
    }
    causes
}

/// node `ValidateRuntimeClass`: the handler a DNS label.
pub fn runtime_class(object: &Value) -> Vec<Cause> {
    let handler = object["handler"].as_str().unwrap_or_default();
    names::dns1123_label(handler)
        .into_iter()
        .map(|m| invalid("handler", &json!(handler), &m))
        .collect()
}

/// autoscaling `validateHorizontalPodAutoscalerSpec`'s bounds: `minReplicas` (defaulted to 1)
/// at least 1, `maxReplicas` above 0 and not below `minReplicas`.
pub fn horizontal_pod_autoscaler(object: &Value) -> Vec<Cause> {
    let spec = &object["spec"];
    let min = spec["minReplicas"].as_i64().unwrap_or(1);
    let max = spec["maxReplicas"].as_i64().unwrap_or(0);
    let mut causes = Vec::new();
    if min < 1 {
        causes.push(invalid(
            "spec.minReplicas",
            &json!(min),
            "must be greater than or equal to 1",
        ));
    }
    if max < 1 {
        causes.push(invalid(
            "spec.maxReplicas",
            &json!(max),
            "must be greater than 0",
        ));
    }
    if max < min {
        causes.push(invalid(
            "spec.maxReplicas",
            &json!(max),
            "must be greater than or equal to `minReplicas`",
        ));
    }
    causes
}

/// The volume sources a PersistentVolume may name (`PersistentVolumeSource`'s fields).
const PV_SOURCES: [&str; 22] = [
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "hostPath",
    "glusterfs",
    "nfs",
    "rbd",
    "iscsi",
    "cinder",
    "cephfs",
    "fc",
    "flocker",
    "flexVolume",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "local",
    "storageos",
    "csi",
];

/// core `ValidatePersistentVolumeSpec`: a capacity of `storage` alone, and one volume source.
pub fn persistent_volume(object: &Value) -> Vec<Cause> {
    let spec = &object["spec"];
    let mut causes = Vec::new();
    let capacity = spec["capacity"].as_object();
    if capacity.is_none_or(|c| c.is_empty()) {
        causes.push(required("spec.capacity", ""));
    }
    if capacity.is_none_or(|c| !c.contains_key("storage") || c.len() > 1) {
        // Go's `%#v` of the `core.ResourceList`: the nil and empty maps are printed exactly.
        let printed = match capacity {
            None => "core.ResourceList(nil)".to_string(),
            Some(c) if c.is_empty() => "core.ResourceList{}".to_string(),
            Some(c) => format!(
                "core.ResourceList{{{}}}",
                c.keys()
                    .map(|k| format!("{k:?}:resource.Quantity{{…}}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        causes.push(Cause::new(
            crate::schema::field::NOT_SUPPORTED,
            "spec.capacity",
            format!("Unsupported value: {printed}: supported values: \"storage\""),
        ));
    }
    let sources = PV_SOURCES
        .iter()
        .filter(|s| spec.get(**s).is_some_and(|v| !v.is_null()))
        .count();
    if sources == 0 {
        causes.push(required("spec", "must specify a volume type"));
    }
    causes
}

/// core `ValidateLimitRange` → `validateLimitRangeTypeName`: a qualified name, and without a
/// `/` one of the standard types.
pub fn limit_range(object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let at = Path::root("spec").child("limits");
    for (i, limit) in object["spec"]["limits"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let p = at.index(i).child("type");
        let kind = limit["type"].as_str().unwrap_or_default();
        let problems = names::qualified_name(kind);
        if !problems.is_empty() {
            causes.extend(
                problems
                    .iter()
                    .map(|m| invalid(p.as_str(), &json!(kind), m)),
            );
        } else if !kind.contains('/')
            && !matches!(kind, "Pod" | "Container" | "PersistentVolumeClaim")
        {
            causes.push(invalid(
                p.as_str(),
                &json!(kind),
                "must be a standard limit type or fully qualified",
            ));
        }
    }
    causes
}

/// core `ValidateResourceQuotaSpec` → `ValidateResourceQuantityValue`: every hard limit not
/// negative, and whole for the counted resources.
pub fn resource_quota(object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let at = Path::root("spec").child("hard");
    for (name, value) in object["spec"]["hard"].as_object().into_iter().flatten() {
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => continue,
        };
        let Ok(q) = super::quantity::parse(&text) else {
            continue;
        };
        if q.is_negative() {
            causes.push(invalid(
                at.key(name).as_str(),
                &json!(q.to_string()),
                "must be greater than or equal to 0",
            ));
        }
    }
    causes
}

/// networking `ValidateIngressSpec`: a default backend or rules, and each rule's host a DNS
/// subdomain (wildcards and IPs aside).
pub fn ingress(object: &Value) -> Vec<Cause> {
    let spec = &object["spec"];
    let mut causes = Vec::new();
    let rules = spec["rules"].as_array();
    if rules.is_none_or(|r| r.is_empty()) && spec["defaultBackend"].is_null() {
        let printed = if rules.is_some() {
            "[]networking.IngressRule{}"
        } else {
            "[]networking.IngressRule(nil)"
        };
        causes.push(Cause::new(
            crate::schema::field::INVALID,
            "spec",
            format!(
                "Invalid value: {printed}: either `defaultBackend` or `rules` must be specified"
            ),
        ));
    }
    for (i, rule) in rules.into_iter().flatten().enumerate() {
        let host = rule["host"].as_str().unwrap_or_default();
        if host.is_empty() || host.contains('*') {
            continue;
        }
        let p = Path::root("spec").child("rules").index(i).child("host");
        if host.parse::<std::net::IpAddr>().is_ok() {
            causes.push(invalid(
                p.as_str(),
                &json!(host),
                "must be a DNS name, not an IP address",
            ));
            continue;
        }
        for m in names::dns1123_subdomain(host) {
            causes.push(invalid(p.as_str(), &json!(host), &m));
        }
    }
    causes
}

/// An int-or-string as Go's `%#v` prints an `intstr.IntOrString`.
fn go_int_or_string(value: &Value) -> String {
    match value {
        Value::String(s) => format!(
            "intstr.IntOrString{{Type:1, IntVal:0, StrVal:{}}}",
            crate::schema::field::go_quote(s)
        ),
        other => format!("intstr.IntOrString{{Type:0, IntVal:{other}, StrVal:\"\"}}"),
    }
}

/// policy `ValidatePodDisruptionBudgetSpec`: not both bounds, each a non-negative number or a
/// percentage of at most 100.
pub fn pod_disruption_budget(object: &Value) -> Vec<Cause> {
    let spec = &object["spec"];
    let mut causes = Vec::new();
    let (min, max) = (&spec["minAvailable"], &spec["maxUnavailable"]);
    if !min.is_null() && !max.is_null() {
        let pointer = |v: &Value| {
            if v.is_null() {
                "(nil)"
            } else {
                "(0xc000010000)"
            }
        };
        causes.push(Cause::new(
            crate::schema::field::INVALID,
            "spec",
            format!(
                "Invalid value: policy.PodDisruptionBudgetSpec{{MinAvailable:(*intstr.IntOrString){}, Selector:(*v1.LabelSelector){}, MaxUnavailable:(*intstr.IntOrString){}, UnhealthyPodEvictionPolicy:(*policy.UnhealthyPodEvictionPolicyType){}}}: minAvailable and maxUnavailable cannot be both set",
                pointer(min),
                pointer(&spec["selector"]),
                pointer(max),
                pointer(&spec["unhealthyPodEvictionPolicy"]),
            ),
        ));
    }
    for (field, value) in [("minAvailable", min), ("maxUnavailable", max)] {
        let p = format!("spec.{field}");
        match value {
            Value::Null => {}
            Value::String(s) => {
                let percent = s.strip_suffix('%').and_then(|n| n.parse::<i64>().ok());
                match percent {
                    None => causes.push(Cause::new(
                        crate::schema::field::INVALID,
                        p.clone(),
                        format!(
                            "Invalid value: {}: must be an integer or percentage (e.g '5%')",
                            go_int_or_string(value)
                        ),
                    )),
                    Some(n) if n > 100 => causes.push(Cause::new(
                        crate::schema::field::INVALID,
                        p.clone(),
                        format!(
                            "Invalid value: {}: must not be greater than 100%",
                            go_int_or_string(value)
                        ),
                    )),
                    Some(_) => {}
                }
            }
            other => {
                if other.as_i64().is_some_and(|n| n < 0) {
                    causes.push(invalid(&p, other, "must be greater than or equal to 0"));
                }
            }
        }
    }
    causes
}

/// core `ValidateEndpoints` → `validateEndpointAddress`: every address an IP (the legacy
/// field's check, then the non-special one, as kube 1.32 words them both).
pub fn endpoints(object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (i, subset) in object["subsets"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for list in ["addresses", "notReadyAddresses"] {
            for (j, address) in subset[list].as_array().into_iter().flatten().enumerate() {
                let ip = address["ip"].as_str().unwrap_or_default();
                if ip.parse::<std::net::IpAddr>().is_ok() {
                    continue;
                }
                let p = Path::root("subsets")
                    .index(i)
                    .child(list)
                    .index(j)
                    .child("ip");
                causes.push(invalid(
                    p.as_str(),
                    &json!(ip),
                    "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                ));
                causes.push(invalid(
                    p.as_str(),
                    &json!(ip),
                    "must be a valid IP address",
                ));
            }
        }
    }
    causes
}

/// core `ValidateEventCreate` (v1): the involved object's namespace is the event's own (or,
/// when empty, the event is in `default` or cluster-wide).
pub fn event(object: &Value) -> Vec<Cause> {
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let involved = object["involvedObject"]["namespace"]
        .as_str()
        .unwrap_or_default();
    let agrees = if involved.is_empty() {
        namespace.is_empty() || namespace == "default"
    } else {
        involved == namespace
    };
    if agrees {
        Vec::new()
    } else {
        vec![invalid(
            "involvedObject.namespace",
            &json!(involved),
            "does not match event.namespace",
        )]
    }
}

/// certificates `ValidateCertificateSigningRequestCreate`'s check of the request (`validateCSR`):
/// `spec.request` holds a PEM block of type `CERTIFICATE REQUEST` whose PKCS#10 request parses
/// and whose signature verifies. The invalid value is printed as Go's `%#v` of the bytes. Go's
/// x509 wording of a request that does not parse or verify is not reproduced (only the PEM
/// check's is kube's own text).
pub fn certificate_signing_request(object: &Value) -> Vec<Cause> {
    use base64::Engine;
    let Some(bytes) = object["spec"]["request"]
        .as_str()
        .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
    else {
        return Vec::new();
    };
    match csr_error(&bytes) {
        None => Vec::new(),
        Some(why) => {
            let shown = bytes
                .iter()
                .map(|b| format!("{b:#04x}"))
                .collect::<Vec<_>>()
                .join(", ");
            vec![Cause::new(
                "FieldValueInvalid",
                "spec.request",
                format!("Invalid value: []byte{{{shown}}}: {why}"),
            )]
        }
    }
}

/// Why `pem` is not a signed certificate request (`certificates.ParseCSR`, `CheckSignature`).
fn csr_error(pem: &[u8]) -> Option<String> {
    use x509_parser::prelude::FromDer;
    let block = match x509_parser::pem::parse_x509_pem(pem) {
        Ok((_, block)) if block.label == "CERTIFICATE REQUEST" => block,
        _ => return Some("PEM block type must be CERTIFICATE REQUEST".into()),
    };
    let request = match x509_parser::certification_request::X509CertificationRequest::from_der(
        &block.contents,
    ) {
        Ok((_, request)) => request,
        Err(e) => return Some(format!("x509: malformed certificate request: {e}")),
    };
    request
        .verify_signature()
        .err()
        .map(|e| format!("x509: signature verification failure: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Each expectation is kube-apiserver 1.32's answer to the differential's case of the same
    // name (tests/differential/cases/invalid.yaml).

    fn said(causes: Vec<Cause>) -> Vec<String> {
        causes.iter().map(Cause::message_with_field).collect()
    }

    #[test]
    fn storage_classes_name_a_provisioner_and_a_known_reclaim_policy() {
        assert_eq!(
            said(storage_class(&json!({}))),
            ["provisioner: Required value"]
        );
        assert_eq!(
            said(storage_class(
                &json!({"provisioner": "x.example.com", "reclaimPolicy": "Recycle"})
            )),
            [
                "reclaimPolicy: Unsupported value: \"Recycle\": supported values: \"Delete\", \"Retain\""
            ]
        );
        assert!(
            storage_class(&json!({"provisioner": "ebs.csi.aws.com", "reclaimPolicy": "Retain"}))
                .is_empty()
        );
    }

    #[test]
    fn a_volume_attachment_names_its_attacher() {
        let causes = said(volume_attachment(
            &json!({"spec": {"nodeName": "n", "source": {}}}),
        ));
        assert_eq!(causes.len(), 2, "{causes:?}");
        assert_eq!(causes[0], "spec.attacher: Required value");
        assert!(
            causes[1]
                .starts_with("spec.attacher: Invalid value: \"\": a lowercase RFC 1123 subdomain")
        );
    }

    #[test]
    fn ingress_classes_network_policies_and_endpoint_slices() {
        assert_eq!(
            said(ingress_class(&json!({"spec": {}}))),
            ["spec.controller: Required value"]
        );
        assert!(ingress_class(&json!({"spec": {"controller": "example.com/ingress"}})).is_empty());
        assert_eq!(
            said(network_policy(
                &json!({"spec": {"podSelector": {}, "ingress": [{"ports": [{"port": 0}]}]}})
            )),
            [
                "spec.ingress[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive"
            ]
        );
        assert_eq!(
            said(network_policy(
                &json!({"spec": {"podSelector": {}, "policyTypes": ["Sideways"]}})
            )),
            [
                "spec.policyTypes[0]: Unsupported value: \"Sideways\": supported values: \"Ingress\", \"Egress\""
            ]
        );
        assert_eq!(
            said(endpoint_slice(&json!({"addressType": "IPv5"}))),
            [
                "addressType: Unsupported value: \"IPv5\": supported values: \"FQDN\", \"IPv4\", \"IPv6\""
            ]
        );
    }

    #[test]
    fn volumes_limits_quotas_ingresses_budgets_endpoints_and_events() {
        assert_eq!(
            said(persistent_volume(
                &json!({"spec": {"accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"}}})
            )),
            [
                "spec.capacity: Required value",
                "spec.capacity: Unsupported value: core.ResourceList(nil): supported values: \"storage\""
            ]
        );
        assert_eq!(
            said(persistent_volume(
                &json!({"spec": {"capacity": {"storage": "1Gi"}}})
            )),
            ["spec: Required value: must specify a volume type"]
        );
        assert_eq!(
            said(limit_range(
                &json!({"spec": {"limits": [{"type": "Cluster"}]}})
            )),
            [
                "spec.limits[0].type: Invalid value: \"Cluster\": must be a standard limit type or fully qualified"
            ]
        );
        assert_eq!(
            said(resource_quota(&json!({"spec": {"hard": {"pods": "-1"}}}))),
            ["spec.hard[pods]: Invalid value: \"-1\": must be greater than or equal to 0"]
        );
        assert_eq!(
            said(ingress(&json!({"spec": {}}))),
            [
                "spec: Invalid value: []networking.IngressRule(nil): either `defaultBackend` or `rules` must be specified"
            ]
        );
        assert_eq!(
            ingress(&json!({"spec": {"rules": [{"host": "https://example.com"}]}})).len(),
            1
        );
        assert_eq!(
            said(pod_disruption_budget(
                &json!({"spec": {"minAvailable": "150%"}})
            )),
            [
                "spec.minAvailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%"
            ]
        );
        assert_eq!(
            pod_disruption_budget(&json!({"spec": {"minAvailable": 1, "maxUnavailable": 1}})).len(),
            1
        );
        assert_eq!(
            endpoints(&json!({"subsets": [{"addresses": [{"ip": "not-an-ip"}]}]})).len(),
            2
        );
        assert!(endpoints(&json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}]}]})).is_empty());
        assert_eq!(
            said(event(
                &json!({"metadata": {"namespace": "ns"}, "involvedObject": {}})
            )),
            ["involvedObject.namespace: Invalid value: \"\": does not match event.namespace"]
        );
    }

    #[test]
    fn leases_priority_classes_runtime_classes_and_autoscalers() {
        assert_eq!(
            said(lease(&json!({"spec": {"leaseDurationSeconds": -1}}))),
            ["spec.leaseDurationSeconds: Invalid value: -1: must be greater than 0"]
        );
        assert_eq!(
            said(priority_class(
                &json!({"metadata": {"name": "pc"}, "value": 2000000001})
            )),
            ["value: Forbidden: maximum allowed value of a user defined priority is 1000000000"]
        );
        assert_eq!(
            said(priority_class(
                &json!({"metadata": {"name": "system-x"}, "value": 1})
            )),
            [
                "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-x is not a known system priority class"
            ]
        );
        assert!(
            priority_class(
                &json!({"metadata": {"name": "system-node-critical"}, "value": 2000001000})
            )
            .is_empty()
        );
        assert_eq!(runtime_class(&json!({})).len(), 1);
        assert_eq!(
            said(horizontal_pod_autoscaler(&json!({"spec": {}}))),
            [
                "spec.maxReplicas: Invalid value: 0: must be greater than 0",
                "spec.maxReplicas: Invalid value: 0: must be greater than or equal to `minReplicas`"
            ]
        );
        assert_eq!(
            said(horizontal_pod_autoscaler(
                &json!({"spec": {"minReplicas": 5, "maxReplicas": 2}})
            )),
            ["spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`"]
        );
    }
}
