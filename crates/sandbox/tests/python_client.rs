//! The official Kubernetes Python client (pinned in `tests/python/requirements.txt`) drives
//! CRUD, patch, watch and delete against a sandbox, so the sandbox is held to what a typed
//! client in another language needs, not only to what kubectl and kube-rs tolerate. It runs in a
//! virtual environment of its own with exactly the pinned client, whatever else the machine has
//! installed (the newest client, 37.0.2, declares ConfigMap and Deployment DELETE answers as
//! `object` and hands back the Status as a dict: its own generated code, not the server's
//! answer, which is kube-apiserver's `Status`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

/// How long the whole Python run may take.
const DEADLINE: Duration = Duration::from_secs(120);
/// How long making the virtual environment (pip from PyPI) may take.
const VENV_DEADLINE: Duration = Duration::from_secs(600);

fn python_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python")
}

/// Runs one setup command to completion, failing with what it printed and how to fix it.
async fn setup(program: &Path, args: &[&str], fix: &str) {
    let run = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(VENV_DEADLINE, run)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{} {args:?} ran longer than {VENV_DEADLINE:?}",
                program.display()
            )
        })
        .unwrap_or_else(|e| panic!("running {} {args:?}: {e}. {fix}", program.display()));
    assert!(
        out.status.success(),
        "{} {args:?} failed. {fix}\nstdout: {}\nstderr: {}",
        program.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The python of a virtual environment under the target directory holding exactly the pinned
/// client: made once (`python3 -m venv`, `pip install -r requirements.txt`), remade when the
/// requirements change, under a file lock so parallel test processes make it once.
async fn pinned_python() -> PathBuf {
    let requirements = python_dir().join("requirements.txt");
    let pin = std::fs::read_to_string(&requirements).expect("read requirements.txt");
    let venv = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("python-client-venv");
    let python = venv.join("bin/python");
    let lock = std::fs::File::create(venv.with_extension("lock")).expect("create the venv lock");
    let lock = tokio::task::spawn_blocking(move || lock.lock().map(|()| lock))
        .await
        .expect("lock task")
        .expect("lock the venv");
    let marker = venv.join(".pinned");
    if std::fs::read_to_string(&marker).ok().as_deref() != Some(pin.as_str()) {
        let _ = std::fs::remove_dir_all(&venv);
        let venv_arg = venv.display().to_string();
        setup(
            Path::new("python3"),
            &["-m", "venv", &venv_arg],
            "The Python client test needs python3 with venv (Debian: apt-get install python3-venv).",
        )
        .await;
        let requirements_arg = requirements.display().to_string();
        setup(
            &python,
            &[
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
                &requirements_arg,
            ],
            "pip installs the pinned client from PyPI, which must be reachable.",
        )
        .await;
        std::fs::write(&marker, &pin).expect("mark the venv");
    }
    drop(lock);
    python
}

/// Each step of `client_crud.py` (typed CRUD of ConfigMap, Service, ServiceAccount and
/// Deployment with strategic-merge and JSON patches; a watch from a list's resourceVersion;
/// a custom resource through the dynamic client; refusals read as `ApiException`s carrying
/// kube-apiserver's Status) must print `ok`.
#[tokio::test]
async fn python_client_crud_patch_watch_and_delete() {
    let python = pinned_python().await;
    let sandbox = common::sandbox().await;
    let dir = std::env::temp_dir().join(format!(
        "lien-python-client-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let kubeconfig = dir.join("kubeconfig");
    sandbox
        .write_kubeconfig(&kubeconfig)
        .expect("write the kubeconfig");
    let run = Command::new(&python)
        .arg(python_dir().join("client_crud.py"))
        .arg(&kubeconfig)
        .arg("python-client")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        // Only the venv's packages: nothing from a PYTHONPATH or the user's site-packages.
        .env_remove("PYTHONPATH")
        .env("PYTHONNOUSERSITE", "1")
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
