//! The official Kubernetes Python client (pinned in `tests/python/requirements.txt`, installed
//! by `.ci/run`) drives CRUD, patch, watch and delete against a sandbox, so the sandbox is held
//! to what a typed client in another language needs, not only to what kubectl and kube-rs
//! tolerate.

mod common;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

/// How long the whole Python run may take.
const DEADLINE: Duration = Duration::from_secs(120);

fn python_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python")
}

/// Fails, saying how to install it, when the client library is missing: a skipped test would
/// let CI pass without checking anything.
async fn require_python_client() {
    let probe = Command::new("python3")
        .args(["-c", "import kubernetes"])
        .stdin(Stdio::null())
        .output()
        .await;
    let installed = probe.as_ref().is_ok_and(|o| o.status.success());
    assert!(
        installed,
        "python3 with the official `kubernetes` client is needed: install it with \
         `python3 -m pip install --user -r {}` (CI's .ci/run does). Probe: {probe:?}",
        python_dir().join("requirements.txt").display()
    );
}

/// Each step of `client_crud.py` (typed CRUD of ConfigMap, Service, ServiceAccount and
/// Deployment with strategic-merge and JSON patches; a watch from a list's resourceVersion;
/// a custom resource through the dynamic client; refusals read as `ApiException`s carrying
/// kube-apiserver's Status) must print `ok`.
#[tokio::test]
async fn python_client_crud_patch_watch_and_delete() {
    require_python_client().await;
    let sandbox = common::sandbox().await;
    let dir = std::env::temp_dir().join(format!(
        "lien-python-client-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let kubeconfig = dir.join("kubeconfig");
    sandbox
        .write_kubeconfig(&kubeconfig)
        .expect("write the kubeconfig");
    let run = Command::new("python3")
        .arg(python_dir().join("client_crud.py"))
        .arg(&kubeconfig)
        .arg("python-client")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(DEADLINE, run)
        .await
        .expect("the Python client finishes in time")
        .expect("python3 runs");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let steps: Vec<&str> = stdout.lines().collect();
    let want = [
        "ok namespace create",
        "ok configmap crud",
        "ok service crud",
        "ok serviceaccount crud",
        "ok deployment crud",
        "ok watch",
        "ok custom resource (dynamic client)",
        "ok status errors",
    ];
    assert_eq!(steps, want, "stderr:\n{stderr}");
    assert!(out.status.success(), "stderr:\n{stderr}");
    sandbox.shutdown().await;
}
