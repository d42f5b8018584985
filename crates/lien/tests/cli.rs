//! The `lien` binary as a person meets it at the terminal (issue 21, item 3): output into a
//! closed pipe ends quietly, every startup failure of `lien run` is one line naming its cause
//! and the fix, `lien uninstall` says what it waits for, and `kubectl lien <TAB>` completes
//! through `kubectl_complete-lien` with names read from the cluster.

#[path = "ha/cluster.rs"]
mod cluster;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use lien::runtime::{install_crds, sandbox_client};
use lien_sandbox::{Sandbox, SandboxConfig};

const BIN: &str = env!("CARGO_BIN_EXE_lien");
const DEADLINE: Duration = Duration::from_secs(60);

/// A temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "lien-cli-{what}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A stdout whose reader is already gone: every write meets EPIPE.
fn closed_stdout() -> Stdio {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    Stdio::from(writer)
}

/// Runs `cmd` to its end, at most [`DEADLINE`] (killed and failed past it).
fn finish(mut cmd: Command) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawns");
    let end = Instant::now() + DEADLINE;
    // stderr is drained on a thread so that a chatty child never blocks on a full pipe.
    let mut stderr = child.stderr.take().expect("stderr");
    let drain = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stderr, &mut out);
        out
    });
    let mut stdout = child.stdout.take();
    let drain_out = std::thread::spawn(move || {
        let mut out = Vec::new();
        if let Some(s) = stdout.as_mut() {
            let _ = std::io::Read::read_to_end(s, &mut out);
        }
        out
    });
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} still running after {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: drain_out.join().expect("stdout"),
        stderr: drain.join().expect("stderr"),
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn output_into_a_closed_pipe_ends_quietly_with_status_0() {
    for args in [
        &["completion", "fish"][..],
        &["completion", "bash"],
        &["completion", "zsh"],
        &["crds"],
        &["manifests"],
        &["--help"],
        &["graph", "--help"],
    ] {
        let mut cmd = Command::new(BIN);
        cmd.args(args).stdout(closed_stdout());
        let out = finish(cmd);
        let stderr = text(&out.stderr);
        assert!(
            out.status.success(),
            "lien {args:?} into a closed pipe: {:?}\n{stderr}",
            out.status
        );
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "lien {args:?}: {stderr}"
        );
    }
}

/// A sandbox's kubeconfig in `dir`, and the sandbox.
async fn sandbox(dir: &Path) -> (Sandbox, PathBuf) {
    let sandbox = Sandbox::start(SandboxConfig {
        port: 0,
        ..SandboxConfig::default()
    })
    .await
    .expect("the sandbox starts");
    let path = dir.join("kubeconfig");
    std::fs::write(&path, sandbox.kubeconfig().to_string()).expect("kubeconfig");
    (sandbox, path)
}

async fn create_namespace(client: &kube::Client, name: &str) {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))
                .expect("namespace"),
        )
        .await
        .expect("namespace");
}

/// `lien run --kubeconfig PATH` (KUBECONFIG pointing nowhere, so the flag is what is used),
/// run to its end off the runtime serving the sandbox.
async fn lien_run(kubeconfig: &Path, extra: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.arg("run")
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args([
            "--webhook-addr=127.0.0.1:0",
            "--no-leader-election",
            "--log-format=text",
        ])
        .args(extra)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("LIEN_NAMESPACE")
        .env_remove("POD_NAME")
        .stdout(Stdio::null());
    tokio::task::spawn_blocking(move || finish(cmd))
        .await
        .expect("joined")
}

/// The run failed with exactly one `error:` line, starting with `want`, and no retried
/// warnings or debug dumps.
fn assert_one_line_failure(out: &Output, want: &str) -> String {
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "lien run succeeded: {stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "one error line: {stderr}");
    assert_eq!(
        stderr.lines().filter(|l| !l.trim().is_empty()).count(),
        1,
        "nothing but the error: {stderr}"
    );
    assert!(errors[0].starts_with(want), "{want:?} in {stderr}");
    assert!(!stderr.contains("WARN"), "no warnings: {stderr}");
    assert!(!stderr.contains("RBAC"), "RBAC is not the cause: {stderr}");
    assert!(!stderr.contains("{ "), "no debug dumps: {stderr}");
    errors[0].to_owned()
}

/// A kubeconfig in `dir` whose server is `https://127.0.0.1:PORT` where PORT is bound and never
/// listening (connections are refused while the socket lives; a port bound and released could
/// be taken by another test's server meanwhile): the socket, the kubeconfig, the URL.
async fn refusing_kubeconfig(dir: &Path) -> (tokio::net::TcpSocket, PathBuf, String) {
    let (sandbox, kubeconfig) = sandbox(dir).await;
    let mut config = sandbox.kubeconfig();
    drop(sandbox);
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.1:0".parse().expect("addr"))
        .expect("bind");
    let port = socket.local_addr().expect("addr").port();
    let url = format!("https://127.0.0.1:{port}");
    for cluster in config["clusters"].as_array_mut().expect("clusters") {
        cluster["cluster"]["server"] = serde_json::json!(url);
    }
    std::fs::write(&kubeconfig, config.to_string()).expect("kubeconfig");
    (socket, kubeconfig, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_against_a_closed_port_names_the_url() {
    let dir = TempDir::new("closed-port");
    let (socket, kubeconfig, url) = refusing_kubeconfig(&dir.0).await;
    let out = lien_run(&kubeconfig, &[]).await;
    let line = assert_one_line_failure(
        &out,
        &format!("error: cannot reach the API server at {url}: "),
    );
    assert!(line.contains("refused"), "{line}");
    assert!(line.contains("--kubeconfig/--context"), "{line}");
    drop(socket);
}

/// The plugin's connection errors are `lien run`'s: one line with the real cause and the fix —
/// a closed port (not kube's "ServiceError: client error (Connect)"), a context the kubeconfig
/// lacks (not "failed to load current context").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plugin_names_an_unreachable_server_and_a_missing_context_in_one_line() {
    let dir = TempDir::new("plugin-errors");
    let (socket, kubeconfig, _) = refusing_kubeconfig(&dir.0).await;
    let plugin = |args: Vec<String>| async move {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .stdout(Stdio::null());
        tokio::task::spawn_blocking(move || finish(cmd))
            .await
            .expect("joined")
    };
    let k = format!("--kubeconfig={}", kubeconfig.display());
    for command in [vec!["why", "cm/x"], vec!["status"]] {
        let mut args: Vec<String> = command.iter().map(|a| a.to_string()).collect();
        args.push(k.clone());
        let out = plugin(args).await;
        let line = assert_one_line_failure(&out, "error: ");
        assert!(
            line.contains("cannot reach the API server: ") && line.contains("refused"),
            "{line}"
        );
        assert!(line.contains("--kubeconfig/--context"), "{line}");
        assert!(!line.contains("ServiceError"), "{line}");
    }
    let out = plugin(vec![
        "why".into(),
        "cm/x".into(),
        k.clone(),
        "--context=prod".into(),
    ])
    .await;
    let line = assert_one_line_failure(
        &out,
        "error: loading the kubeconfig: context \"prod\" does not exist in ",
    );
    assert!(line.contains("kubectl config get-contexts"), "{line}");
    drop(socket);
}

/// `-n` naming a namespace that does not exist is said as such, in one line, not as the
/// object being "not found".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plugin_names_a_missing_namespace_in_one_line() {
    let dir = TempDir::new("plugin-namespace");
    let (sandbox, kubeconfig) = sandbox(&dir.0).await;
    let mut cmd = Command::new(BIN);
    cmd.args(["why", "cm/x", "-n", "nope"])
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .stdout(Stdio::null());
    let out = tokio::task::spawn_blocking(move || finish(cmd))
        .await
        .expect("joined");
    let line = assert_one_line_failure(&out, "error: namespace \"nope\" does not exist");
    assert!(line.contains("kubectl get namespaces"), "{line}");
    drop(sandbox);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_without_its_namespace_says_to_create_it() {
    let dir = TempDir::new("no-namespace");
    let (sandbox, kubeconfig) = sandbox(&dir.0).await;
    let client = sandbox_client(&sandbox).await.expect("client");
    install_crds(&client).await.expect("CRDs");
    let out = lien_run(&kubeconfig, &[]).await;
    let line = assert_one_line_failure(&out, "error: namespace lien-system does not exist");
    assert!(
        line.contains("kubectl create namespace lien-system"),
        "{line}"
    );
    drop(sandbox);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_without_the_crds_says_how_to_install_them() {
    let dir = TempDir::new("no-crds");
    let (sandbox, kubeconfig) = sandbox(&dir.0).await;
    let client = sandbox_client(&sandbox).await.expect("client");
    create_namespace(&client, "lien-system").await;
    let out = lien_run(&kubeconfig, &[]).await;
    let line = assert_one_line_failure(&out, "error: Lien's CRDs are not installed");
    assert!(line.contains("lien crds | kubectl apply -f -"), "{line}");
    assert!(line.contains("--install-crds"), "{line}");
    drop(sandbox);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_with_another_context_uses_it() {
    // --context picks the kubeconfig's context: one that does not exist is named.
    let dir = TempDir::new("context");
    let (sandbox, kubeconfig) = sandbox(&dir.0).await;
    let out = lien_run(&kubeconfig, &["--context=nowhere"]).await;
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("context \"nowhere\""), "{stderr}");
    drop(sandbox);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_force_says_which_replica_it_waits_for() {
    let mut c = cluster::Cluster::start(1).await;
    c.spawn(0, "replica-a", &[]);
    let end = Instant::now() + DEADLINE;
    while c.lease_holder().await.is_none_or(|h| h.is_empty()) {
        assert!(Instant::now() < end, "no leader: {}", c.log("replica-a"));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut cmd = Command::new(BIN);
    cmd.args(["uninstall", "--force", "--timeout-seconds=2"])
        .arg(format!("--kubeconfig={}", c.kubeconfig().display()))
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .stdout(Stdio::null());
    let started = Instant::now();
    let out = tokio::task::spawn_blocking(move || finish(cmd))
        .await
        .expect("joined");
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("waiting up to 2s for Lien replica \"replica-a\" to stop"),
        "{stderr}"
    );
    assert!(stderr.contains("still holds the Lease"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(30), "{stderr}");
}

/// `kubectl` with `lien` on PATH as `kubectl-lien` and `kubectl_complete-lien` (links in
/// `dir`), reading `kubeconfig`; returns stdout.
fn kubectl(dir: &Path, kubeconfig: &Path, args: &[&str]) -> String {
    for name in ["kubectl-lien", "kubectl_complete-lien"] {
        let link = dir.join(name);
        if !link.exists() {
            std::os::unix::fs::symlink(BIN, &link).expect("link");
        }
    }
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("kubectl");
    cmd.args(args)
        .env("PATH", path)
        .env("KUBECONFIG", kubeconfig)
        .env("KUBECACHEDIR", dir.join("cache"))
        .stdout(Stdio::piped());
    let out = finish(cmd);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

fn candidates(out: &str) -> Vec<&str> {
    out.lines()
        .filter(|l| !l.starts_with(':'))
        .map(|l| l.split('\t').next().unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_lien_tab_completes_commands_types_names_and_namespaces() {
    let dir = TempDir::new("complete");
    let (sandbox, kubeconfig) = sandbox(&dir.0).await;
    let client = sandbox_client(&sandbox).await.expect("client");
    create_namespace(&client, "shop").await;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), "shop");
    for name in ["settings", "secrets-index"] {
        cms.create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))
                .expect("configmap"),
        )
        .await
        .expect("configmap");
    }
    let (d, k) = (dir.0.clone(), kubeconfig.clone());
    let run = move |args: &'static [&'static str]| {
        let (d, k) = (d.clone(), k.clone());
        tokio::task::spawn_blocking(move || kubectl(&d, &k, args))
    };
    let out = run(&["__complete", "lien", "wh"]).await.expect("joined");
    assert_eq!(candidates(&out), ["why"], "{out}");
    assert!(out.ends_with(":4\n"), "{out}");
    let out = run(&["__complete", "lien", ""]).await.expect("joined");
    assert_eq!(
        candidates(&out),
        [
            "why",
            "tree",
            "graph",
            "plan",
            "delete",
            "status",
            "completion"
        ],
        "the plugin's commands only: {out}"
    );
    let out = run(&["__complete", "lien", "why", "-n", "shop", "configmap/s"])
        .await
        .expect("joined");
    let mut names = candidates(&out);
    names.sort_unstable();
    // (kube-root-ca.crt, the namespace's own, starts otherwise.)
    assert_eq!(
        names,
        ["configmap/secrets-index", "configmap/settings"],
        "{out}"
    );
    let out = run(&["__complete", "lien", "why", "-n", "shop", "configmap/"])
        .await
        .expect("joined");
    for name in [
        "configmap/settings",
        "configmap/secrets-index",
        "configmap/kube-root-ca.crt",
    ] {
        assert!(candidates(&out).contains(&name), "{name} in {out}");
    }
    let out = run(&["__complete", "lien", "why", "-n", "shop", "cm", "se"])
        .await
        .expect("joined");
    assert_eq!(candidates(&out).len(), 2, "{out}");
    let out = run(&["__complete", "lien", "graph", "-n", "sh"])
        .await
        .expect("joined");
    assert_eq!(candidates(&out), ["shop"], "{out}");
    let out = run(&["__complete", "lien", "why", "configm"])
        .await
        .expect("joined");
    assert_eq!(candidates(&out), ["configmaps"], "{out}");
    let out = run(&["__complete", "lien", "graph", "-o", "s"])
        .await
        .expect("joined");
    assert_eq!(candidates(&out), ["svg"], "{out}");
    drop(sandbox);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_lien_graph_into_a_closed_pipe_ends_quietly() {
    let dir = TempDir::new("graph-pipe");
    let (sandbox, kubeconfig) = sandbox(&dir.0).await;
    let client = sandbox_client(&sandbox).await.expect("client");
    install_crds(&client).await.expect("CRDs");
    let d = dir.0.clone();
    let out = tokio::task::spawn_blocking(move || {
        // The links, as for completion.
        let _ = kubectl(&d, &kubeconfig, &["version", "--client"]);
        let path = format!(
            "{}:{}",
            d.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new("kubectl");
        cmd.args(["lien", "graph", "-A", "-o", "svg"])
            .env("PATH", path)
            .env("KUBECONFIG", d.join("kubeconfig"))
            .env("KUBECACHEDIR", d.join("cache"))
            .stdout(closed_stdout());
        finish(cmd)
    })
    .await
    .expect("joined");
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    drop(sandbox);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_lien_graph_draws_png_and_top_to_bottom_svg_of_the_demo() {
    let dir = TempDir::new("graph-png");
    let (sandbox, kubeconfig) = sandbox(&dir.0).await;
    let client = sandbox_client(&sandbox).await.expect("client");
    install_crds(&client).await.expect("CRDs");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let (d, k) = (dir.0.clone(), kubeconfig.clone());
    let (png, svg) = tokio::task::spawn_blocking(move || {
        let rules = examples.join("rules/core.yaml");
        let demo = examples.join("plugin-demo.yaml");
        kubectl(
            &d,
            &k,
            &[
                "apply",
                "-f",
                rules.to_str().expect("utf-8"),
                "-f",
                demo.to_str().expect("utf-8"),
            ],
        );
        let png = d.join("shop.png");
        let path = format!(
            "{}:{}",
            d.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new("kubectl");
        cmd.args(["lien", "graph", "-n", "shop", "-o", "png"])
            .env("PATH", path)
            .env("KUBECONFIG", &k)
            .env("KUBECACHEDIR", d.join("cache"))
            .stdout(std::fs::File::create(&png).expect("png file"));
        let out = finish(cmd);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let svg = kubectl(
            &d,
            &k,
            &[
                "lien",
                "graph",
                "-n",
                "shop",
                "-o",
                "svg",
                "--direction",
                "TB",
            ],
        );
        (std::fs::read(&png).expect("png"), svg)
    })
    .await
    .expect("joined");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let doc = roxmltree::Document::parse(&svg).expect("SVG");
    let names: String = doc
        .descendants()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text())
        .collect();
    for name in [
        "shop/web",
        "shop/db",
        "shop/orders-data",
        "protected: the orders",
    ] {
        assert!(names.contains(name), "{name} in {svg}");
    }
    let root = doc.root_element();
    let (w, h): (f64, f64) = (
        root.attribute("width").expect("width").parse().expect("w"),
        root.attribute("height")
            .expect("height")
            .parse()
            .expect("h"),
    );
    // Top to bottom: users above what they use, so taller than one row of boxes.
    assert!(h > 300.0 && w > 0.0, "{w}×{h}");
    drop(sandbox);
}

/// What `lien completion bash`'s function offers for `words` (the last being completed), run
/// in bash as a <TAB> would.
fn bash_completes(kubeconfig: &Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = std::iter::once(BIN)
        .chain(words.iter().copied())
        .map(|w| format!("'{w}'"))
        .collect();
    let script = format!(
        "source <('{BIN}' completion bash) && COMP_WORDS=({}) && COMP_CWORD={} && _lien_complete && printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        quoted.join(" "),
        words.len()
    );
    let mut cmd = Command::new("bash");
    cmd.args(["-c", &script])
        .env("KUBECONFIG", kubeconfig)
        .stdout(Stdio::piped());
    let out = finish(cmd);
    assert!(out.status.success(), "bash: {}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lien_completion_bash_completes_names_from_the_cluster() {
    let dir = TempDir::new("bash");
    let (sandbox, kubeconfig) = sandbox(&dir.0).await;
    let client = sandbox_client(&sandbox).await.expect("client");
    create_namespace(&client, "shop").await;
    Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), "shop")
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": "settings"}}))
                .expect("configmap"),
        )
        .await
        .expect("configmap");
    let k = kubeconfig.clone();
    let (commands, names, namespaces, flags) = tokio::task::spawn_blocking(move || {
        (
            bash_completes(&k, &["wh"]),
            bash_completes(&k, &["why", "-n", "shop", "configmap/se"]),
            bash_completes(&k, &["plan", "-n", "sh"]),
            bash_completes(&k, &["graph", "--dir"]),
        )
    })
    .await
    .expect("joined");
    assert_eq!(commands, ["why"]);
    assert_eq!(names, ["configmap/settings"]);
    assert_eq!(namespaces, ["shop"]);
    assert_eq!(flags, ["--direction"]);
    drop(sandbox);
}

/// `--webhook-max-concurrency` bounds the reviews in flight; 0 would refuse every review, so it
/// is refused at once, naming the flag and the range.
#[test]
fn a_webhook_max_concurrency_of_zero_is_refused_naming_the_flag() {
    let mut cmd = Command::new(BIN);
    cmd.args(["run", "--webhook-max-concurrency", "0"])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .stdout(Stdio::null());
    let out = finish(cmd);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("invalid value '0' for '--webhook-max-concurrency <N>'")
            && stderr.contains("0 is not in 1..="),
        "{stderr}"
    );
}

/// A folder for a shell test in `dir`: `lien` and `kubectl-lien` (as krew installs it) linked
/// in `bin/` (returned as a PATH putting them first), and `files/manifest.yaml` for file-name
/// completion.
fn shell_home(dir: &Path) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    for name in ["lien", "kubectl-lien"] {
        std::os::unix::fs::symlink(BIN, bin.join(name)).expect("link");
    }
    std::fs::create_dir_all(dir.join("files")).expect("files");
    std::fs::write(dir.join("files/manifest.yaml"), "").expect("file");
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// A candidate as a shell shows it: the value, and the description (empty when none).
fn value_and_description(line: &str) -> (String, String) {
    let (value, description) = line.split_once('\t').unwrap_or((line, ""));
    (value.to_owned(), description.to_owned())
}

/// What fish offers at <TAB> after `line`, with the script of `bin completion fish` (`bin` on
/// PATH as `shell_home` links it; `dir` the working directory), as `complete -C` lists it.
fn fish_completes(
    dir: &Path,
    path: &str,
    kubeconfig: &Path,
    bin: &str,
    line: &str,
) -> Vec<(String, String)> {
    let mut cmd = Command::new("fish");
    cmd.args([
        "--no-config",
        "-c",
        &format!("{bin} completion fish | source; and complete -C '{line}'"),
    ])
    .current_dir(dir)
    .env("PATH", path)
    .env("KUBECONFIG", kubeconfig)
    // fish keeps history and universal variables there: not in the user's home.
    .env("XDG_DATA_HOME", dir)
    .env("XDG_CONFIG_HOME", dir)
    .stdout(Stdio::piped());
    let out = finish(cmd);
    assert!(out.status.success(), "fish: {}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(value_and_description)
        .collect()
}

/// Drives an interactive zsh in a pseudo-terminal (zsh's own `zpty`), types `$2` and <TAB>,
/// and prints what the completion system added between the two NUL lines `init.zsh` marks.
const ZSH_DRIVER: &str = r#"zmodload zsh/zpty || exit 2
zpty z zsh -f -i
zpty -w z "source ${(q)1}"
typeset line
repeat 20; do
    zpty -r z line || exit 2
    [[ $line == ok* ]] && break
done
[[ $line == ok* ]] || { print -u2 'zsh did not start'; exit 2 }
zpty -w -n z "$2"$'\t'
integer seen=0
while zpty -r z line; do
    if [[ $line == *$'\0'* ]]; then
        (( seen++ )) && exit 0 || continue
    fi
    line=${line%$'\n'}
    (( seen )) && print -r -- "${line%$'\r'}"
done
exit 2
"#;

/// The interactive zsh's setup: the real completion system (compinit) with the script of
/// `$COMPLETE_AS completion zsh`; <TAB> completes; each completion is marked by a NUL line
/// before and after, and ends the shell; `compadd` prints each match it adds (with the
/// description `_describe` shows) and adds it, while `_describe`'s own queries (-O/-A/-D) pass
/// through.
const ZSH_INIT: &str = r#"PROMPT=
autoload -U compinit && compinit -u -D
source <("$COMPLETE_AS" completion zsh)
bindkey '^I' complete-word
null-line() { print -n $'\0\r\n' }
compprefuncs=( null-line )
comppostfuncs=( null-line exit )
compadd() {
    if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then
        builtin compadd "$@"
        return $?
    fi
    typeset -a __hits __dscr
    if (( $@[(I)-d] )); then
        local __tmp=${@[$[${@[(i)-d]}+1]]}
        if [[ $__tmp == \(* ]]; then eval "__dscr=$__tmp"; else __dscr=( "${(@P)__tmp}" ); fi
    fi
    builtin compadd -A __hits -D __dscr "$@"
    local i
    for i in {1..$#__hits}; do
        print -r -- "$__hits[$i]${__dscr[$i]:+	$__dscr[$i]}"
    done
}
echo ok
"#;

/// What zsh's completion system offers at <TAB> after `line`, with the script of `bin
/// completion zsh` sourced after compinit; descriptions as `_describe` shows them (`value --
/// description`, cut at the terminal's width) reduced to the description.
fn zsh_completes(
    dir: &Path,
    path: &str,
    kubeconfig: &Path,
    bin: &str,
    line: &str,
) -> Vec<(String, String)> {
    let (driver, init) = (dir.join("driver.zsh"), dir.join("init.zsh"));
    std::fs::write(&driver, ZSH_DRIVER).expect("driver");
    std::fs::write(&init, ZSH_INIT).expect("init");
    let mut cmd = Command::new("zsh");
    cmd.arg("-f")
        .arg(&driver)
        .arg(&init)
        .arg(line)
        .current_dir(dir)
        .env("PATH", path)
        .env("KUBECONFIG", kubeconfig)
        .env("COMPLETE_AS", bin)
        .stdout(Stdio::piped());
    let out = finish(cmd);
    assert!(out.status.success(), "zsh: {}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (value, shown) = value_and_description(l);
            let description = shown.split_once(" -- ").map_or("", |(_, d)| d).to_owned();
            (value, description)
        })
        .collect()
}

/// A sandbox holding namespace `shop` and ConfigMap `shop/settings`, its kubeconfig.
async fn sandbox_with_settings(dir: &Path) -> (Sandbox, PathBuf) {
    let (sandbox, kubeconfig) = sandbox(dir).await;
    let client = sandbox_client(&sandbox).await.expect("client");
    create_namespace(&client, "shop").await;
    Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), "shop")
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": "settings"}}))
                .expect("configmap"),
        )
        .await
        .expect("configmap");
    (sandbox, kubeconfig)
}

type Completes = fn(&Path, &str, &Path, &str, &str) -> Vec<(String, String)>;

/// What `lien completion zsh|fish` gives at <TAB>, in that shell, against a cluster with
/// `shop/settings`: commands with their descriptions, types, object names (`TYPE/NAME` and
/// `TYPE NAME`), namespaces after `-n`, file names where the command takes a file (directive
/// 0), nothing where it takes nothing (NoFileComp, with files in the folder), and the same names
/// through the script `kubectl-lien completion …` makes.
fn assert_completes_from_the_cluster(dir: &Path, kubeconfig: &Path, completes: Completes) {
    let path = shell_home(dir);
    let ask = |bin: &str, line: &str| completes(dir, &path, kubeconfig, bin, line);
    let values = |bin: &str, line: &str| -> Vec<String> {
        let mut v: Vec<String> = ask(bin, line).into_iter().map(|(v, _)| v).collect();
        v.sort();
        v
    };
    let commands = ask("lien", "lien wh");
    assert_eq!(commands.len(), 1, "{commands:?}");
    assert_eq!(commands[0].0, "why");
    assert!(commands[0].1.starts_with("Every relation"), "{commands:?}");
    assert_eq!(
        values("lien", "lien why -n shop configmap/se"),
        ["configmap/settings"]
    );
    assert_eq!(values("lien", "lien why -n shop cm se"), ["settings"]);
    assert_eq!(values("lien", "lien plan -n sh"), ["shop"]);
    let types = values("lien", "lien graph -n shop config");
    assert!(types.iter().any(|t| t == "configmaps"), "{types:?}");
    let files = values("lien", "lien plan -f files/man");
    assert!(
        files.iter().any(|f| f.ends_with("manifest.yaml")),
        "{files:?}"
    );
    assert_eq!(
        values("lien", "lien why -n shop cm settings "),
        Vec::<String>::new()
    );
    assert_eq!(
        values("kubectl-lien", "kubectl-lien why -n shop cm se"),
        ["settings"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lien_completion_fish_completes_names_from_the_cluster() {
    completes_from_the_cluster_in("fish", fish_completes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lien_completion_zsh_completes_names_from_the_cluster() {
    completes_from_the_cluster_in("zsh", zsh_completes).await;
}

/// [`assert_completes_from_the_cluster`] through one shell, against a sandbox of its own.
async fn completes_from_the_cluster_in(shell: &'static str, completes: Completes) {
    let dir = TempDir::new(shell);
    let (sandbox, kubeconfig) = sandbox_with_settings(&dir.0).await;
    let d = dir.0.clone();
    tokio::task::spawn_blocking(move || {
        assert_completes_from_the_cluster(&d, &kubeconfig, completes)
    })
    .await
    .expect("joined");
    drop(sandbox);
}
