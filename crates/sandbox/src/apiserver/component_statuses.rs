//! The deprecated ComponentStatus API (`kubectl get componentstatuses`), as kube-apiserver's
//! `pkg/registry/core/componentstatus` answers it: nothing stored — each read probes the
//! scheduler and kube-controller-manager at their default secure ports on this machine and
//! reports the storage (`etcd-0`) healthy, since the sandbox's store answers whenever the
//! server does. A probe here only connects: a port that accepts is reported `ok` (kube also
//! reads `/healthz` over TLS); a refused one in Go's words.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::{Value, json};

use super::server::ApiServer;
use crate::error::ApiError;

/// The warning kube-apiserver sends with every ComponentStatus read.
pub const DEPRECATION: &str = "v1 ComponentStatus is deprecated in v1.19+";

/// The components in kube's order, with the `/healthz` each is probed at.
const PROBED: [(&str, u16); 2] = [("scheduler", 10259), ("controller-manager", 10257)];

fn component(name: &str, healthy: Result<(), String>) -> Value {
    // kube's probe reports a failed check in `message` (its `error` stays empty, so absent),
    // which `kubectl get componentstatuses` prints under MESSAGE.
    let (status, message) = match healthy {
        Ok(()) => ("True", "ok".to_string()),
        Err(why) => ("False", why),
    };
    json!({
        "kind": "ComponentStatus",
        "apiVersion": "v1",
        // Never stored: Go's zero creation time, written as null.
        "metadata": {"name": name, "creationTimestamp": null},
        "conditions": [{"type": "Healthy", "status": status, "message": message}],
    })
}

fn probe(port: u16) -> Result<(), String> {
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&address, Duration::from_secs(1))
        .map(drop)
        .map_err(|e| {
            let why = match e.kind() {
                std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
                std::io::ErrorKind::TimedOut => "i/o timeout".to_string(),
                _ => e.to_string(),
            };
            format!(
                "Get \"https://127.0.0.1:{port}/healthz\": dial tcp 127.0.0.1:{port}: connect: {why}"
            )
        })
}

impl ApiServer {
    /// Every component's status, probed now.
    pub(super) fn component_statuses(&self) -> Vec<Value> {
        let mut all: Vec<Value> = PROBED
            .iter()
            .map(|(name, port)| component(name, probe(*port)))
            .collect();
        all.push(component("etcd-0", Ok(())));
        all
    }

    /// One component's status, probed now.
    pub(super) fn component_status(&self, name: &str) -> Result<Value, ApiError> {
        if name == "etcd-0" {
            return Ok(component(name, Ok(())));
        }
        PROBED
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(n, port)| component(n, probe(*port)))
            .ok_or_else(|| ApiError::not_found("", "componentstatuses", name))
    }
}

/// Whether a resource is the ComponentStatus API.
pub fn is_component_statuses(group: &str, plural: &str) -> bool {
    group.is_empty() && plural == "componentstatuses"
}
