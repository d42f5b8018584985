//! Helm's engine for the tests (no helm binary can be installed here): `scripts/helm-venv.sh`
//! makes a virtual environment with helm-python-sdk from PyPI, `scripts/helm-render.py` renders.

use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// deploy/helm/lien rendered by Helm's engine (scripts/helm-render.py, in the virtual
/// environment scripts/helm-venv.sh makes) with these `--set` values.
pub fn template(sets: &[&str]) -> std::process::Output {
    let venv = std::process::Command::new("bash")
        .arg(workspace().join("scripts/helm-venv.sh"))
        .output()
        .expect("bash runs");
    assert!(
        venv.status.success(),
        "scripts/helm-venv.sh failed (it installs helm-python-sdk from PyPI): {}",
        String::from_utf8_lossy(&venv.stderr)
    );
    let python = String::from_utf8(venv.stdout).expect("UTF-8");
    let mut cmd = std::process::Command::new(python.trim());
    cmd.arg(workspace().join("scripts/helm-render.py"))
        .arg(workspace().join("deploy/helm/lien"));
    for set in sets {
        // `--lint` and other options as they are; anything else is a value to set.
        if set.starts_with("--") {
            cmd.arg(set);
        } else {
            cmd.arg("--set").arg(set);
        }
    }
    cmd.output().expect("the venv's python runs")
}
