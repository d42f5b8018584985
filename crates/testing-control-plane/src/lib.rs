//! A real Kubernetes control plane for one test: etcd, kube-apiserver and
//! kube-controller-manager (the versions `tools/control-plane/` pins), run as plain processes on
//! 127.0.0.1 by the launcher `scripts/control-plane.sh start` runs (docs/testing.md).
//!
//! [`ControlPlane::start`] builds the binaries first if this machine has not yet (once, into a
//! cache outside the checkout), then starts an instance and returns once the API server is ready
//! and the controller-manager healthy. The instance stops when the value is dropped, and also
//! when the test process dies however it dies: the launcher holds the read end of a pipe whose
//! only writer is this process, stops everything when the pipe closes, and its processes get
//! SIGKILL from the kernel if the launcher itself is killed.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};
use serde::Deserialize;

/// The admin's context in the kubeconfig (user `sandbox-admin`, group `system:masters`), named
/// as `lien sandbox` names it.
pub const ADMIN_CONTEXT: &str = "sandbox";
/// The non-admin's context (user `sandbox-user`, group `developers`, no RBAC bindings).
pub const USER_CONTEXT: &str = "sandbox-user";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("building the control plane (scripts/control-plane.sh build): {0}")]
    Build(String),
    #[error("starting the launcher: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("the control plane did not become ready: {0} (its logs are above, on stderr)")]
    NotReady(String),
    #[error("a client for context {context}: {message}")]
    Client { context: String, message: String },
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// How an instance is configured.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// kube-apiserver presents a client certificate (from the admission client CA) to every
    /// webhook, as an admin can configure a self-managed cluster. `false`: it presents none, as
    /// on most managed clusters.
    pub admission_client_cert: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            admission_client_cert: true,
        }
    }
}

/// The launcher's ready line.
#[derive(Debug, Clone, Deserialize)]
pub struct Ready {
    pub server: String,
    pub kubeconfig: PathBuf,
    /// The cluster CA (serving certificate, users' client certificates).
    pub ca: PathBuf,
    /// The CA of the client certificate kube-apiserver presents to webhooks (for
    /// `lien run --client-ca-file`); written in both modes.
    pub admission_client_ca: PathBuf,
    pub admission_client_cert: bool,
    pub mode: String,
    pub data_dir: PathBuf,
    pub launcher_pid: u32,
    /// The pids of `etcd`, `kube-apiserver` and `kube-controller-manager`.
    pub pids: BTreeMap<String, u32>,
    pub startup_seconds: f64,
}

/// One running control plane; stopped on drop.
pub struct ControlPlane {
    launcher: Child,
    stdin: Option<ChildStdin>,
    /// Held open after the ready line: the launcher must not meet a closed stdout.
    _stdout: BufReader<ChildStdout>,
    ready: Ready,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("ready", &self.ready)
            .finish_non_exhaustive()
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn script() -> PathBuf {
    repo_root().join("scripts/control-plane.sh")
}

/// Builds the control plane's binaries unless cached (once per process; the script's lock makes
/// concurrent test processes wait for one build).
pub fn build() -> Result<(), Error> {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            // The script's output goes to the test's: a first build's progress shows there.
            let status = Command::new("bash")
                .arg(script())
                .arg("build")
                .stdin(Stdio::null())
                .status()
                .map_err(|e| e.to_string())?;
            if status.success() {
                Ok(())
            } else {
                Err(format!("exited with {status}"))
            }
        })
        .clone()
        .map_err(Error::Build)
}

impl ControlPlane {
    /// Starts an instance whose API server presents the admission client certificate.
    pub fn start() -> Result<ControlPlane, Error> {
        ControlPlane::start_with(Options::default())
    }

    /// Starts an instance; blocks until it is ready (seconds; the first call on a machine also
    /// builds the binaries, for many minutes).
    pub fn start_with(options: Options) -> Result<ControlPlane, Error> {
        build()?;
        let mut command = Command::new("bash");
        command.arg(script()).arg("start");
        if !options.admission_client_cert {
            command.arg("--no-admission-client-cert");
        }
        // stdin: the pipe whose end of file stops the instance. stderr: the launcher's messages
        // (and the processes' last log lines on a failure) in the test's output.
        let mut launcher = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(Error::Spawn)?;
        let stdin = launcher.stdin.take();
        let Some(stdout) = launcher.stdout.take() else {
            let _ = launcher.kill();
            let _ = launcher.wait();
            return Err(Error::NotReady("no stdout pipe".into()));
        };
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        // The launcher prints one line when ready, or exits (its own deadline bounds the wait).
        let read = stdout.read_line(&mut line);
        let parsed = match read {
            Ok(n) if n > 0 => serde_json::from_str::<Ready>(&line)
                .map_err(|e| format!("unreadable ready line {line:?}: {e}")),
            Ok(_) => Err(match launcher.wait() {
                Ok(status) => format!("the launcher exited ({status})"),
                Err(e) => format!("the launcher's stdout closed: {e}"),
            }),
            Err(e) => Err(format!("reading the launcher's stdout: {e}")),
        };
        match parsed {
            Ok(ready) => Ok(ControlPlane {
                launcher,
                stdin,
                _stdout: stdout,
                ready,
            }),
            Err(message) => {
                drop(stdin);
                let _ = launcher.kill();
                let _ = launcher.wait();
                Err(Error::NotReady(message))
            }
        }
    }

    pub fn ready(&self) -> &Ready {
        &self.ready
    }

    /// The API server's URL, `https://127.0.0.1:<port>`.
    pub fn server(&self) -> &str {
        &self.ready.server
    }

    /// The kubeconfig with the contexts [`ADMIN_CONTEXT`] (current) and [`USER_CONTEXT`].
    pub fn kubeconfig(&self) -> &Path {
        &self.ready.kubeconfig
    }

    /// The admission client CA's certificate, PEM.
    pub fn admission_client_ca_pem(&self) -> Result<String, Error> {
        let path = &self.ready.admission_client_ca;
        std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.clone(),
            source,
        })
    }

    /// A client as the admin.
    pub async fn client(&self) -> Result<kube::Client, Error> {
        self.client_for(ADMIN_CONTEXT).await
    }

    /// A client for one of the kubeconfig's contexts.
    pub async fn client_for(&self, context: &str) -> Result<kube::Client, Error> {
        let err = |message: String| Error::Client {
            context: context.to_string(),
            message,
        };
        let kubeconfig =
            Kubeconfig::read_from(self.kubeconfig()).map_err(|e| err(e.to_string()))?;
        let options = KubeConfigOptions {
            context: Some(context.to_string()),
            ..KubeConfigOptions::default()
        };
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|e| err(e.to_string()))?;
        kube::Client::try_from(config).map_err(|e| err(e.to_string()))
    }

    pub fn launcher_pid(&self) -> u32 {
        self.launcher.id()
    }

    /// The pids of `etcd`, `kube-apiserver` and `kube-controller-manager`.
    pub fn pids(&self) -> &BTreeMap<String, u32> {
        &self.ready.pids
    }

    /// Closes the launcher's stdin without waiting, as the kernel does when the test process
    /// dies: the launcher stops the instance by itself.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Kills the launcher with SIGKILL: its processes go by the kernel's hand (Pdeathsig); its
    /// temporary directory stays until another launcher sweeps it.
    pub fn kill_launcher(&mut self) -> std::io::Result<()> {
        self.launcher.kill()
    }

    /// Stops the instance and waits for the launcher to exit (it first waits for its processes
    /// and removes its directory). Dropping does the same.
    pub fn stop(mut self) -> Option<ExitStatus> {
        self.shut_down()
    }

    fn shut_down(&mut self) -> Option<ExitStatus> {
        self.stdin = None;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self.launcher.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                _ => {
                    // Past the deadline (or unwaitable): SIGKILL, and Pdeathsig takes the rest.
                    let _ = self.launcher.kill();
                    return self.launcher.wait().ok();
                }
            }
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// Whether `pid` is a live process (not a zombie) whose command line mentions `marker` (an
/// instance's data directory, in every one of its processes' arguments), so that a pid reused
/// by an unrelated process does not count.
pub fn process_running(pid: u32, marker: &Path) -> bool {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let Ok(stat) = std::fs::read_to_string(proc_dir.join("stat")) else {
        return false;
    };
    // The state follows the command name in parentheses, which may itself hold spaces.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    if state == Some("Z") {
        return false;
    }
    let Ok(cmdline) = std::fs::read(proc_dir.join("cmdline")) else {
        return false;
    };
    let marker = marker.to_string_lossy();
    String::from_utf8_lossy(&cmdline).contains(marker.as_ref())
}
