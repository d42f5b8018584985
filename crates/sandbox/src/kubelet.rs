//! The sandbox's one node. A kubelet registers its Node once, when it starts
//! (`registerWithAPIServer` in k/k `pkg/kubelet/kubelet_node_status.go` returns at once after a
//! successful registration): so the Node `sandbox` is registered when the sandbox starts, Ready,
//! and a deleted Node stays deleted until the sandbox restarts, as on a cluster until its kubelet
//! restarts. No pod runs on it: nothing schedules or starts containers.

use serde_json::{Value, json};

use crate::apiserver::{ApiServer, Target, WriteOptions};
use crate::auth::UserInfo;
use crate::error::ApiError;

pub const NODE_NAME: &str = "sandbox";
/// What `/version` reports, and so the node's kubelet version.
pub const KUBELET_VERSION: &str = crate::http::GIT_VERSION;

fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    }
}

/// Total memory as the kubelet's cadvisor reads it (`MemTotal` of /proc/meminfo), in `Ki`.
fn memory_kib() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(8 * 1024 * 1024)
}

/// The Node a kubelet on this machine would register, with the status it posts.
pub fn node(now: &str, boot_id: &str) -> Value {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let resources = json!({
        "cpu": cpus.to_string(),
        "ephemeral-storage": "10Gi",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": format!("{}Ki", memory_kib()),
        "pods": "110",
    });
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({
            "type": type_, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": now, "lastTransitionTime": now,
        })
    };
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE_NAME,
            "labels": {
                "beta.kubernetes.io/arch": arch(),
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": arch(),
                "kubernetes.io/hostname": NODE_NAME,
                "kubernetes.io/os": "linux",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": NODE_NAME},
            ],
            "allocatable": resources,
            "capacity": resources,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": arch(),
                "bootID": boot_id,
                "containerRuntimeVersion": "lien-sandbox://0.0.0",
                "kernelVersion": "",
                "kubeProxyVersion": KUBELET_VERSION,
                "kubeletVersion": KUBELET_VERSION,
                "machineID": "",
                "operatingSystem": "linux",
                "osImage": "lien sandbox",
                "systemUUID": boot_id,
            },
        },
    })
}

/// Registers the node and its heartbeat Lease (`kube-node-lease/sandbox`), as the kubelet
/// `system:node:sandbox`.
pub async fn register(server: &ApiServer) -> Result<(), ApiError> {
    let user = UserInfo::new(
        &format!("system:node:{NODE_NAME}"),
        "",
        &["system:nodes", "system:authenticated"],
    );
    let mut write = WriteOptions::as_user(user);
    write.field_manager = "kubelet".to_string();
    let now = crate::object::now();
    let boot_id = uuid::Uuid::new_v4().to_string();
    if let Some(rt) = server.resolve("", "v1", "nodes") {
        let created = server
            .create(
                &Target::new(rt, "v1", "", NODE_NAME),
                node(&now, &boot_id),
                &write,
            )
            .await?;
        let uid = created.object["metadata"]["uid"].clone();
        if let Some(rt) = server.resolve("coordination.k8s.io", "v1", "leases") {
            let lease = json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": NODE_NAME,
                    "namespace": "kube-node-lease",
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": NODE_NAME, "uid": uid}],
                },
                "spec": {
                    "holderIdentity": NODE_NAME,
                    "leaseDurationSeconds": 40,
                    "renewTime": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string(),
                },
            });
            server
                .create(
                    &Target::new(rt, "v1", "kube-node-lease", NODE_NAME),
                    lease,
                    &write,
                )
                .await?;
        }
    }
    Ok(())
}
