//! Service cluster IPs and node ports, allocated as kube-apiserver's service registry does
//! (`pkg/registry/core/service/storage/alloc.go`, `ipallocator`, `portallocator`): from the
//! service range `10.96.0.0/12` (kubeadm's default, whose first address is the `kubernetes`
//! Service's) and the node port range 30000-32767, unique among stored Services, released when
//! the Service goes.
//!
//! What is in use is read from the stored Services, so a deleted Service frees its values with
//! no bookkeeping; a create in flight holds its values in a reservation until it is stored or
//! fails, so two concurrent creates never get the same one.

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::error::{ApiError, Cause};

/// The service range: `10.96.0.0/12`.
pub const SERVICE_CIDR: &str = "10.96.0.0/12";
const RANGE_BASE: u32 = u32::from_be_bytes([10, 96, 0, 0]);
const RANGE_SIZE: u32 = 1 << 20;
/// The bitmap allocator hands out dynamic addresses above this offset, keeping the lower band
/// for addresses users choose (`calculateRangeOffset`: min(max(16, size/16), 256)).
const DYNAMIC_OFFSET: u32 = 256;
pub const NODE_PORTS: std::ops::RangeInclusive<u16> = 30000..=32767;

/// The `kubernetes` Service's address: the range's first.
pub fn first_ip() -> Ipv4Addr {
    Ipv4Addr::from(RANGE_BASE + 1)
}

fn in_range(ip: Ipv4Addr) -> bool {
    let n = u32::from(ip);
    // The network address and the broadcast address are never allocated.
    n > RANGE_BASE && n < RANGE_BASE + RANGE_SIZE - 1
}

#[derive(Debug, Default)]
struct Pending {
    ips: HashSet<Ipv4Addr>,
    ports: HashSet<u16>,
}

/// The allocator's in-flight reservations.
#[derive(Debug, Default)]
pub struct Allocator {
    pending: Arc<Mutex<Pending>>,
}

/// Values held for a create until it is stored (or fails); dropping it releases them.
#[derive(Debug)]
pub struct Reservation {
    pending: Arc<Mutex<Pending>>,
    ips: Vec<Ipv4Addr>,
    ports: Vec<u16>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        for ip in &self.ips {
            p.ips.remove(ip);
        }
        for port in &self.ports {
            p.ports.remove(port);
        }
    }
}

/// What the stored Services hold.
#[derive(Debug, Default)]
pub struct InUse {
    pub ips: HashSet<Ipv4Addr>,
    pub ports: HashSet<u16>,
}

impl InUse {
    pub fn of(services: &[Arc<Value>]) -> InUse {
        let mut used = InUse::default();
        for s in services {
            let spec = &s["spec"];
            for ip in spec["clusterIPs"].as_array().into_iter().flatten() {
                if let Some(ip) = ip.as_str().and_then(|i| i.parse().ok()) {
                    used.ips.insert(ip);
                }
            }
            for port in spec["ports"].as_array().into_iter().flatten() {
                if let Some(p) = port["nodePort"].as_u64() {
                    used.ports.insert(p as u16);
                }
            }
            if let Some(p) = spec["healthCheckNodePort"].as_u64() {
                used.ports.insert(p as u16);
            }
        }
        used
    }
}

fn invalid(name: &str, field: &str, message: String) -> ApiError {
    ApiError::invalid(
        "",
        "Service",
        name,
        vec![Cause::new("FieldValueInvalid", field, message)],
    )
}

impl Allocator {
    /// Fills a new Service's cluster IP, IP families and node ports, or refuses values that are
    /// taken or out of range, with kube-apiserver's wording.
    pub fn allocate(&self, service: &mut Value, in_use: InUse) -> Result<Reservation, ApiError> {
        // Declared before the lock is taken, so an early return releases the lock before the
        // reservation's drop takes it again.
        let mut reservation = Reservation {
            pending: self.pending.clone(),
            ips: vec![],
            ports: vec![],
        };
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let name = service["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        forbid_cluster_ip_node_ports(service)?;
        let spec = &mut service["spec"];
        let kind = spec["type"].as_str().unwrap_or("ClusterIP").to_string();
        if kind == "ExternalName" {
            return Ok(reservation);
        }
        let requested = spec["clusterIP"]
            .as_str()
            .filter(|s| !s.is_empty())
            .or_else(|| spec["clusterIPs"][0].as_str().filter(|s| !s.is_empty()))
            .map(str::to_string);
        let ip = match requested.as_deref() {
            Some("None") => "None".to_string(),
            Some(text) => {
                let Ok(ip) = text.parse::<Ipv4Addr>() else {
                    return Err(invalid(
                        &name,
                        "spec.clusterIPs[0]",
                        format!(
                            "Invalid value: \"{text}\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
                        ),
                    ));
                };
                if !in_range(ip) {
                    return Err(invalid(
                        &name,
                        "spec.clusterIPs",
                        format!(
                            "Invalid value: []string{{\"{ip}\"}}: failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. The range of valid IPs is {SERVICE_CIDR}"
                        ),
                    ));
                }
                if in_use.ips.contains(&ip) || pending.ips.contains(&ip) {
                    return Err(invalid(
                        &name,
                        "spec.clusterIPs",
                        format!(
                            "Invalid value: []string{{\"{ip}\"}}: failed to allocate IP {ip}: provided IP is already allocated"
                        ),
                    ));
                }
                pending.ips.insert(ip);
                reservation.ips.push(ip);
                ip.to_string()
            }
            None => {
                let ip = free_ip(&in_use.ips, &pending.ips).ok_or_else(|| {
                    ApiError::internal("failed to allocate a serviceIP: range is full")
                })?;
                pending.ips.insert(ip);
                reservation.ips.push(ip);
                ip.to_string()
            }
        };
        spec["clusterIP"] = json!(ip);
        spec["clusterIPs"] = json!([ip]);
        spec["ipFamilies"] = json!(["IPv4"]);
        spec["ipFamilyPolicy"] = json!("SingleStack");
        if kind == "NodePort" || kind == "LoadBalancer" {
            let allocate_lb = spec["allocateLoadBalancerNodePorts"] != json!(false);
            let wanted = kind == "NodePort" || allocate_lb;
            for (i, port) in spec
                .get_mut("ports")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
                .enumerate()
            {
                match port["nodePort"].as_u64() {
                    Some(p) => {
                        let p16 = u16::try_from(p).unwrap_or(0);
                        if !NODE_PORTS.contains(&p16) {
                            return Err(invalid(
                                &name,
                                &format!("spec.ports[{i}].nodePort"),
                                format!(
                                    "Invalid value: {p}: provided port is not in the valid range. The range of valid ports is 30000-32767"
                                ),
                            ));
                        }
                        if in_use.ports.contains(&p16) || pending.ports.contains(&p16) {
                            return Err(invalid(
                                &name,
                                &format!("spec.ports[{i}].nodePort"),
                                format!("Invalid value: {p}: provided port is already allocated"),
                            ));
                        }
                        pending.ports.insert(p16);
                        reservation.ports.push(p16);
                    }
                    None if wanted => {
                        let p = free_port(&in_use.ports, &pending.ports).ok_or_else(|| {
                            ApiError::internal("failed to allocate a nodePort: range is full")
                        })?;
                        pending.ports.insert(p);
                        reservation.ports.push(p);
                        port["nodePort"] = json!(p);
                    }
                    None => {}
                }
            }
        }
        Ok(reservation)
    }
}

/// A random free address of the dynamic band, as the bitmap allocator picks one.
fn free_ip(used: &HashSet<Ipv4Addr>, pending: &HashSet<Ipv4Addr>) -> Option<Ipv4Addr> {
    let span = RANGE_SIZE - DYNAMIC_OFFSET - 1;
    let start = (uuid::Uuid::new_v4().as_u128() % u128::from(span)) as u32;
    let candidates = (0..span)
        .map(|i| RANGE_BASE + DYNAMIC_OFFSET + (start + i) % span)
        .chain(1..DYNAMIC_OFFSET)
        .map(|n| {
            if n < DYNAMIC_OFFSET {
                RANGE_BASE + n
            } else {
                n
            }
        });
    candidates
        .map(Ipv4Addr::from)
        .find(|ip| in_range(*ip) && !used.contains(ip) && !pending.contains(ip))
}

fn free_port(used: &HashSet<u16>, pending: &HashSet<u16>) -> Option<u16> {
    let span = u32::from(NODE_PORTS.end() - NODE_PORTS.start()) + 1;
    let start = (uuid::Uuid::new_v4().as_u128() % u128::from(span)) as u32;
    (0..span)
        .map(|i| NODE_PORTS.start() + ((start + i) % span) as u16)
        .find(|p| !used.contains(p) && !pending.contains(p))
}

fn needs_node_ports(spec: &Value) -> bool {
    spec["type"] == "NodePort" || spec["type"] == "LoadBalancer"
}

/// `ValidateService`: a ClusterIP Service has no node ports (`nodePort: 0` is unset, dropped by
/// the defaults before this).
fn forbid_cluster_ip_node_ports(service: &Value) -> Result<(), ApiError> {
    let spec = &service["spec"];
    if spec["type"] != "ClusterIP" {
        return Ok(());
    }
    let causes: Vec<Cause> = spec["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, p)| !p["nodePort"].is_null())
        .map(|(i, _)| {
            Cause::new(
                "FieldValueForbidden",
                format!("spec.ports[{i}].nodePort"),
                "Forbidden: may not be used when `type` is 'ClusterIP'",
            )
        })
        .collect();
    if causes.is_empty() {
        return Ok(());
    }
    let name = service["metadata"]["name"].as_str().unwrap_or_default();
    Err(ApiError::invalid("", "Service", name, causes))
}

/// An update keeps what was allocated: fields the new object leaves empty are copied from the
/// old one (`patchAllocatedValues`, node ports only while the new type needs them), and a
/// changed cluster IP is refused. A type change away from NodePort/LoadBalancer that leaves
/// the node ports as they were drops them (the strategy's `dropTypeDependentFields`), so
/// `kubectl edit` of `type` alone works as on kube-apiserver.
pub fn keep_allocated(new: &mut Value, old: &Value) -> Result<(), ApiError> {
    let name = old["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let (ns, os) = (&mut new["spec"], &old["spec"]);
    if needs_node_ports(os) && !needs_node_ports(ns) {
        let ports = |spec: &Value| -> Vec<Value> {
            spec["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| p["nodePort"].clone())
                .collect()
        };
        if ports(ns) == ports(os) {
            for port in ns
                .get_mut("ports")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                port.as_object_mut().map(|p| p.remove("nodePort"));
            }
        }
    }
    forbid_cluster_ip_node_ports(new)?;
    let (ns, os) = (&mut new["spec"], &old["spec"]);
    if !ns.is_object() || ns["type"] == "ExternalName" || os["clusterIP"].is_null() {
        return Ok(());
    }
    let new_ip = ns["clusterIP"].as_str().unwrap_or_default();
    if new_ip.is_empty() {
        for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            if ns[field].is_null() || ns[field] == "" {
                ns[field] = os[field].clone();
            }
        }
    } else if ns["clusterIP"] != os["clusterIP"] {
        return Err(invalid(
            &name,
            "spec.clusterIPs[0]",
            format!("Invalid value: []string{{\"{new_ip}\"}}: may not change once set"),
        ));
    }
    for field in ["clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        if ns[field].is_null() {
            ns[field] = os[field].clone();
        }
    }
    let old_ports: Vec<Value> = os["ports"].as_array().cloned().unwrap_or_default();
    let needs_node_ports_now = needs_node_ports(ns);
    for port in ns
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if port["nodePort"].is_null()
            && needs_node_ports_now
            && let Some(same) = old_ports
                .iter()
                .find(|p| p["port"] == port["port"] && p["protocol"] == port["protocol"])
            && !same["nodePort"].is_null()
        {
            port["nodePort"] = same["nodePort"].clone();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(spec: Value) -> Value {
        json!({"metadata": {"name": "s"}, "spec": spec})
    }

    #[test]
    fn addresses_are_unique_and_in_range() {
        let a = Allocator::default();
        let mut one = svc(json!({"type": "ClusterIP"}));
        let _r1 = a.allocate(&mut one, InUse::default()).expect("first");
        let ip: Ipv4Addr = one["spec"]["clusterIP"]
            .as_str()
            .unwrap_or_default()
            .parse()
            .expect("ip");
        assert!(in_range(ip) && ip != first_ip());
        let mut same = svc(json!({"clusterIP": ip.to_string()}));
        let err = a
            .allocate(&mut same, InUse::default())
            .expect_err("reserved");
        assert!(
            err.message.contains("provided IP is already allocated"),
            "{}",
            err.message
        );
        drop(_r1);
        let used = InUse::of(&[Arc::new(one.clone())]);
        assert!(a.allocate(&mut same, used).is_err(), "stored");
        assert!(a.allocate(&mut same, InUse::default()).is_ok(), "released");
    }

    #[test]
    fn out_of_range_and_headless() {
        let a = Allocator::default();
        let mut out = svc(json!({"clusterIP": "1.2.3.4"}));
        let err = a
            .allocate(&mut out, InUse::default())
            .expect_err("out of range");
        assert!(
            err.message.contains("not in the valid range"),
            "{}",
            err.message
        );
        let mut headless = svc(json!({"clusterIP": "None"}));
        a.allocate(&mut headless, InUse::default())
            .expect("headless");
        assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
    }

    #[test]
    fn node_ports_for_node_port_services() {
        let a = Allocator::default();
        let mut s = svc(json!({"type": "NodePort", "ports": [{"port": 80}]}));
        let _r = a.allocate(&mut s, InUse::default()).expect("allocates");
        let p = s["spec"]["ports"][0]["nodePort"]
            .as_u64()
            .expect("a node port");
        assert!(NODE_PORTS.contains(&(p as u16)));
    }
}
