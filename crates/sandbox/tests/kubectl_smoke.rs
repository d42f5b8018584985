//! The real `kubectl` against a sandbox: what a user types must work unchanged and print what it
//! prints against kube-apiserver.
//!
//! Each test starts its own sandbox, writes its kubeconfig to a private directory and runs the
//! machine's `kubectl` there with its own discovery cache, in its own namespace. kubectl's
//! generator commands (`kubectl create configmap …`) send protobuf and read protobuf answers
//! (kubectl_smoke/wire.rs); the other tests build objects from YAML manifests. `kubectl` must be
//! on PATH: CI installs it.

#[path = "kubectl_smoke/auth.rs"]
mod auth;
#[path = "kubectl_smoke/catalog.rs"]
mod catalog;
#[path = "kubectl_smoke/cluster.rs"]
mod cluster;
mod common;

#[path = "kubectl_smoke/events.rs"]
mod events;
#[path = "kubectl_smoke/kinds.rs"]
mod kinds;
#[path = "kubectl_smoke/lists.rs"]
mod lists;
#[path = "kubectl_smoke/printers.rs"]
mod printers;
#[path = "kubectl_smoke/validation.rs"]
mod validation;
#[path = "kubectl_smoke/webhook_tls.rs"]
mod webhook_tls;
#[path = "kubectl_smoke/wire.rs"]
mod wire;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use lien_sandbox::Sandbox;
use lien_sandbox::testing::{TestWebhook, Verdict};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// How long one kubectl command may take before the test fails.
const COMMAND_DEADLINE: Duration = Duration::from_secs(60);
/// How long to wait for something to happen (a watch event, the garbage collector).
const DEADLINE: Duration = Duration::from_secs(20);

/// The machine's kubectl, or a failure that says how to get one.
fn kubectl_binary() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("kubectl"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "kubectl is not on PATH: these smoke tests drive the real kubectl against the \
                 sandbox. Install it (Debian: `apt-get install kubectl`; CI's .ci/run does) and \
                 run them again."
            )
        })
}

/// What one kubectl run printed.
#[derive(Debug)]
struct Output {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Output {
    /// The output of a run that must have succeeded.
    fn out(self) -> String {
        assert!(
            self.ok,
            "kubectl failed:\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self.stdout
    }

    /// The error output of a run that must have failed.
    fn err(self) -> String {
        assert!(
            !self.ok,
            "kubectl succeeded but should have failed:\nstdout: {}",
            self.stdout
        );
        self.stderr
    }
}

/// kubectl bound to one sandbox through a kubeconfig in a private directory, which goes with it.
struct Kubectl {
    binary: PathBuf,
    dir: PathBuf,
    namespace: String,
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Kubectl {
    /// Writes the sandbox's kubeconfig and creates the test's own namespace `<prefix>-<random>`.
    async fn new(sandbox: &Sandbox, prefix: &str) -> Kubectl {
        let binary = kubectl_binary();
        let unique = uuid::Uuid::new_v4().simple().to_string();
        let dir = std::env::temp_dir().join(format!("lien-kubectl-smoke-{unique}"));
        sandbox
            .write_kubeconfig(&dir.join("kubeconfig"))
            .expect("write the kubeconfig");
        let kubectl = Kubectl {
            binary,
            dir,
            namespace: format!("{prefix}-{}", &unique[..8]),
        };
        let ns = kubectl.namespace.clone();
        let created = kubectl
            .apply_yaml(
                "namespace.yaml",
                &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n"),
            )
            .await;
        assert_eq!(created.trim(), format!("namespace/{ns} created"));
        kubectl
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.args(args)
            .arg(format!("--cache-dir={}", self.dir.join("cache").display()))
            .arg("--request-timeout=30s")
            .env("KUBECONFIG", self.dir.join("kubeconfig"))
            .env_remove("KUBECTL_EXTERNAL_DIFF")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    /// Runs kubectl to completion (killing it after [`COMMAND_DEADLINE`]).
    async fn run(&self, args: &[&str]) -> Output {
        let child = self.command(args).output();
        let out = tokio::time::timeout(COMMAND_DEADLINE, child)
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} ran longer than {COMMAND_DEADLINE:?}"))
            .unwrap_or_else(|e| panic!("running kubectl {args:?}: {e}"));
        Output {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs kubectl in the test's namespace.
    async fn ns(&self, args: &[&str]) -> Output {
        let mut all = vec!["-n", self.namespace.as_str()];
        all.extend_from_slice(args);
        self.run(&all).await
    }

    /// Writes a manifest into the test's directory and returns its path.
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, text).expect("write a manifest");
        path
    }

    /// `kubectl get <kind> <name> -o jsonpath=<template>` in the test's namespace.
    async fn jsonpath(&self, kind: &str, name: &str, template: &str) -> String {
        self.ns(&["get", kind, name, "-o", &format!("jsonpath={template}")])
            .await
            .out()
    }

    /// `kubectl wait` until the CustomResourceDefinition `name` is established; what it printed.
    async fn wait_established(&self, name: &str) -> String {
        let crd = format!("crd/{name}");
        self.run(&["wait", "--for=condition=established", &crd, "--timeout=20s"])
            .await
            .out()
    }

    async fn apply_yaml(&self, name: &str, text: &str) -> String {
        let path = self.file(name, text);
        self.ns(&["apply", "-f", &path_str(&path)]).await.out()
    }
}

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

/// The whitespace-separated cells of each line of a `kubectl get` table.
fn table(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// An age as kubectl prints it for a fresh object: `0s`, `12s`, `2m3s`.
fn is_age(cell: &str) -> bool {
    !cell.is_empty()
        && cell.ends_with('s')
        && cell
            .chars()
            .all(|c| c.is_ascii_digit() || c == 's' || c == 'm')
}

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.smoke.lien.dev
spec:
  group: smoke.lien.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wg]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Tags, type: string, jsonPath: .spec.tags, priority: 1}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              color: {type: string}
              tags: {type: array, items: {type: string}}
"#;

/// Applies the Widget CRD and waits, with `kubectl wait`, until it is established.
async fn widget_crd(k: &Kubectl) {
    let out = k.apply_yaml("crd.yaml", CRD).await;
    assert_eq!(
        out.trim(),
        "customresourcedefinition.apiextensions.k8s.io/widgets.smoke.lien.dev created"
    );
    let out = k.wait_established("widgets.smoke.lien.dev").await;
    assert_eq!(
        out.trim(),
        "customresourcedefinition.apiextensions.k8s.io/widgets.smoke.lien.dev condition met"
    );
}

fn widget(name: &str, size: i64, color: &str) -> String {
    format!(
        "apiVersion: smoke.lien.dev/v1\nkind: Widget\nmetadata:\n  name: {name}\nspec:\n  size: {size}\n  color: {color}\n  tags: [a, b]\n"
    )
}

#[tokio::test]
async fn crd_printer_columns_label_and_patch() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "columns").await;
    widget_crd(&k).await;

    let manifests = format!(
        "{}---\n{}",
        widget("w1", 3, "red"),
        r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  a: "1"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: nginx:1.27
        env: [{name: MODE, value: smoke}]
"#
    );
    let out = k.apply_yaml("objects.yaml", &manifests).await;
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "widget.smoke.lien.dev/w1 created",
            "configmap/settings created",
            "deployment.apps/web created"
        ]
    );

    // The CRD's printer columns, by plural, short name and `-o wide` (priority 1 columns).
    for resource in ["widgets", "wg"] {
        let rows = table(&k.ns(&["get", resource]).await.out());
        assert_eq!(rows[0], ["NAME", "SIZE", "COLOR", "AGE"], "{rows:?}");
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(rows[1][..3], ["w1", "3", "red"], "{rows:?}");
        assert!(is_age(&rows[1][3]), "{rows:?}");
    }
    let rows = table(&k.ns(&["get", "widget", "w1", "-o", "wide"]).await.out());
    assert_eq!(
        rows[0],
        ["NAME", "SIZE", "COLOR", "TAGS", "AGE"],
        "{rows:?}"
    );
    assert_eq!(rows[1][..4], ["w1", "3", "red", r#"["a","b"]"#], "{rows:?}");
    // A built-in kind's own columns.
    let rows = table(&k.ns(&["get", "configmaps"]).await.out());
    assert_eq!(rows[0], ["NAME", "DATA", "AGE"], "{rows:?}");
    // The namespace's own kube-root-ca.crt (kube-controller-manager's) is listed first.
    assert_eq!(rows[1][..2], ["kube-root-ca.crt", "1"], "{rows:?}");
    assert_eq!(rows[2][..2], ["settings", "1"], "{rows:?}");

    // label: add, select by it, overwrite only with --overwrite, remove.
    let out = k.ns(&["label", "widget", "w1", "tier=gold"]).await.out();
    assert_eq!(out.trim(), "widget.smoke.lien.dev/w1 labeled");
    let out = k
        .ns(&["label", "configmap", "settings", "tier=gold"])
        .await
        .out();
    assert_eq!(out.trim(), "configmap/settings labeled");
    let out = k
        .ns(&["get", "widgets,configmaps", "-l", "tier=gold", "-o", "name"])
        .await
        .out();
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["widget.smoke.lien.dev/w1", "configmap/settings"]
    );
    let err = k.ns(&["label", "widget", "w1", "tier=silver"]).await.err();
    assert_eq!(
        err.trim(),
        "error: 'tier' already has a value (gold), and --overwrite is false"
    );
    k.ns(&["label", "widget", "w1", "tier=silver", "--overwrite"])
        .await
        .out();
    let out = k
        .ns(&["label", "configmap", "settings", "tier-"])
        .await
        .out();
    assert_eq!(out.trim(), "configmap/settings unlabeled");
    let out = k
        .ns(&["get", "widgets", "-l", "tier=silver", "-o", "name"])
        .await
        .out();
    assert_eq!(out.trim(), "widget.smoke.lien.dev/w1");
    let out = k
        .ns(&["get", "configmaps", "-l", "tier", "-o", "name"])
        .await;
    assert_eq!(out.out(), "");
    // Without its last label the object has no `labels` at all (`omitempty`), not `{}`.
    let labels = k
        .jsonpath("configmap", "settings", "{.metadata.labels}")
        .await;
    assert_eq!(labels, "");

    // Applying again with one change: kubectl computes its patch for the built-in from its own
    // types and says nothing on stderr.
    let changed = manifests.replace("a: \"1\"", "a: \"one\"");
    let path = k.file("objects.yaml", &changed);
    let out = k.ns(&["apply", "-f", &path_str(&path)]).await;
    assert_eq!(out.stderr, "");
    assert_eq!(
        out.out().lines().collect::<Vec<_>>(),
        [
            "widget.smoke.lien.dev/w1 unchanged",
            "configmap/settings configured",
            "deployment.apps/web unchanged"
        ]
    );

    // patch on a built-in: merge, and strategic (the default), which merges containers by name.
    let out = k
        .ns(&[
            "patch",
            "configmap",
            "settings",
            "--type=merge",
            "-p",
            r#"{"data":{"b":"2"}}"#,
        ])
        .await
        .out();
    assert_eq!(out.trim(), "configmap/settings patched");
    let data = k.jsonpath("configmap", "settings", "{.data}").await;
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&data).expect("json"),
        json!({"a": "one", "b": "2"})
    );
    let out = k
        .ns(&[
            "patch",
            "deployment",
            "web",
            "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"nginx:1.28"},{"name":"sidecar","image":"busybox"}]}}}}"#,
        ])
        .await
        .out();
    assert_eq!(out.trim(), "deployment.apps/web patched");
    let containers = k
        .jsonpath("deployment", "web", "{.spec.template.spec.containers}")
        .await;
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&containers).expect("json"),
        // With the container defaults kube-apiserver applies (`SetDefaults_Container`).
        json!([
            {"name": "app", "image": "nginx:1.28", "env": [{"name": "MODE", "value": "smoke"}],
             "imagePullPolicy": "IfNotPresent", "resources": {},
             "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"},
            {"name": "sidecar", "image": "busybox", "imagePullPolicy": "Always", "resources": {},
             "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"},
        ])
    );
    // The same patch again changes nothing and kubectl says so.
    let out = k
        .ns(&[
            "patch",
            "deployment",
            "web",
            "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"nginx:1.28"}]}}}}"#,
        ])
        .await
        .out();
    assert_eq!(out.trim(), "deployment.apps/web patched (no change)");

    // patch on the custom resource: merge and JSON patch; strategic is refused, as for any CR.
    k.ns(&[
        "patch",
        "widget",
        "w1",
        "--type=merge",
        "-p",
        r#"{"spec":{"size":5}}"#,
    ])
    .await
    .out();
    let out = k
        .ns(&[
            "patch",
            "widget",
            "w1",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/color","value":"blue"},{"op":"add","path":"/spec/tags/-","value":"c"}]"#,
        ])
        .await
        .out();
    assert_eq!(out.trim(), "widget.smoke.lien.dev/w1 patched");
    let rows = table(&k.ns(&["get", "widgets", "-o", "wide"]).await.out());
    assert_eq!(
        rows[1][..4],
        ["w1", "5", "blue", r#"["a","b","c"]"#],
        "{rows:?}"
    );
    let err = k
        .ns(&["patch", "widget", "w1", "-p", r#"{"spec":{"size":6}}"#])
        .await
        .err();
    assert_eq!(
        err.trim(),
        "error: application/strategic-merge-patch+json is not supported by \
         smoke.lien.dev/v1, Kind=Widget: the body of the request was in an unknown format - \
         accepted media types include: application/json-patch+json, \
         application/merge-patch+json, application/apply-patch+yaml"
    );
    // A JSON patch whose test fails changes nothing.
    let err = k
        .ns(&[
            "patch",
            "widget",
            "w1",
            "--type=json",
            "-p",
            r#"[{"op":"test","path":"/spec/size","value":1},{"op":"replace","path":"/spec/size","value":1}]"#,
        ])
        .await
        .err();
    // kube-apiserver answers `NewGenericServerResponse(422, …)`, which drops jsonpatch's reason.
    assert_eq!(
        err,
        "The request is invalid: the server rejected our request due to an error in our request\n"
    );
    let size = k.jsonpath("widget", "w1", "{.spec.size}").await;
    assert_eq!(size, "5");
    sandbox.shutdown().await;
}

#[tokio::test]
async fn server_side_apply_conflicts_and_force() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "ssa").await;
    widget_crd(&k).await;

    let path = k.file("w.yaml", &widget("w1", 7, "teal"));
    let file = path_str(&path);
    let out = k.ns(&["apply", "--server-side", "-f", &file]).await.out();
    assert_eq!(out.trim(), "widget.smoke.lien.dev/w1 serverside-applied");
    // Applying the same configuration again is a no-op that succeeds.
    k.ns(&["apply", "--server-side", "-f", &file]).await.out();

    // Another manager changing a field kubectl owns conflicts…
    k.file("w.yaml", &widget("w1", 8, "teal"));
    let err = k
        .ns(&[
            "apply",
            "--server-side",
            "--field-manager=other",
            "-f",
            &file,
        ])
        .await
        .err();
    assert!(
        err.starts_with(
            "error: Apply failed with 1 conflict: conflict with \"kubectl\": .spec.size\n"
        ),
        "{err}"
    );
    assert!(err.contains("--force-conflicts"), "{err}");
    let size = k.jsonpath("widget", "w1", "{.spec.size}").await;
    assert_eq!(size, "7");

    // …unless forced: the field moves to the applier, and both stay `Apply` owners.
    let out = k
        .ns(&[
            "apply",
            "--server-side",
            "--field-manager=other",
            "--force-conflicts",
            "-f",
            &file,
        ])
        .await
        .out();
    assert_eq!(out.trim(), "widget.smoke.lien.dev/w1 serverside-applied");
    let managers = k
        .jsonpath(
            "widget",
            "w1",
            "{range .metadata.managedFields[*]}{.manager}/{.operation}={.fieldsV1.f:spec} {end}",
        )
        .await;
    let managers: Vec<&str> = managers.split_whitespace().collect();
    assert_eq!(
        managers,
        [
            r#"kubectl/Apply={"f:color":{},"f:tags":{}}"#,
            r#"other/Apply={"f:color":{},"f:size":{},"f:tags":{}}"#,
        ]
    );
    let size = k.jsonpath("widget", "w1", "{.spec.size}").await;
    assert_eq!(size, "8");

    // A client-side edit after it is an Update owner of what it changed (`kubectl patch`
    // names itself `kubectl-patch`).
    k.ns(&[
        "patch",
        "widget",
        "w1",
        "--type=merge",
        "-p",
        r#"{"spec":{"color":"navy"}}"#,
    ])
    .await
    .out();
    let managers = k
        .jsonpath(
            "widget",
            "w1",
            "{range .metadata.managedFields[*]}{.manager}/{.operation} {end}",
        )
        .await;
    assert_eq!(
        managers.trim(),
        "kubectl/Apply other/Apply kubectl-patch/Update"
    );
    sandbox.shutdown().await;
}

/// An owner ConfigMap and one dependent ConfigMap that blocks the owner's foreground deletion.
async fn owner_and_dependent(k: &Kubectl, owner: &str) -> String {
    let manifest = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {owner}\n");
    k.apply_yaml(&format!("{owner}.yaml"), &manifest).await;
    let uid = k.jsonpath("configmap", owner, "{.metadata.uid}").await;
    assert!(!uid.is_empty());
    let dependent = format!("{owner}-dependent");
    let manifest = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {dependent}\n  ownerReferences:\n  - {{apiVersion: v1, kind: ConfigMap, name: {owner}, uid: {uid}, blockOwnerDeletion: true}}\n"
    );
    k.apply_yaml(&format!("{dependent}.yaml"), &manifest).await;
    dependent
}

async fn exists(cms: &Api<ConfigMap>, name: &str) -> bool {
    cms.get_opt(name).await.expect("get configmap").is_some()
}

#[tokio::test]
async fn delete_cascades_background_foreground_and_orphan() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "cascade").await;
    let cms: Api<ConfigMap> = Api::namespaced(common::client(&sandbox).await, &k.namespace);

    // Background: the owner goes at once, the garbage collector deletes the dependent after.
    let dependent = owner_and_dependent(&k, "bg").await;
    let out = k
        .ns(&["delete", "configmap", "bg", "--cascade=background"])
        .await
        .out();
    assert_eq!(out.trim(), r#"configmap "bg" deleted"#);
    assert!(!exists(&cms, "bg").await);
    let dep = format!("configmap/{dependent}");
    let out = k.ns(&["wait", "--for=delete", &dep, "--timeout=20s"]).await;
    // `kubectl wait --for=delete` succeeds at once, printing nothing, if it is already gone.
    assert!(out.ok, "{out:?}");
    assert!(!exists(&cms, &dependent).await);

    // Foreground: kubectl waits until the owner is gone, which is after its dependent.
    let dependent = owner_and_dependent(&k, "fg").await;
    let out = k
        .ns(&["delete", "configmap", "fg", "--cascade=foreground"])
        .await
        .out();
    assert_eq!(out.trim(), r#"configmap "fg" deleted"#);
    assert!(!exists(&cms, "fg").await);
    assert!(!exists(&cms, &dependent).await);

    // Orphan: the owner goes, the dependent stays without its owner reference.
    let dependent = owner_and_dependent(&k, "orphan").await;
    let out = k
        .ns(&["delete", "configmap", "orphan", "--cascade=orphan"])
        .await
        .out();
    assert_eq!(out.trim(), r#"configmap "orphan" deleted"#);
    assert!(!exists(&cms, "orphan").await);
    let refs = k
        .jsonpath("configmap", &dependent, "{.metadata.ownerReferences}")
        .await;
    assert_eq!(refs, "", "the orphan keeps an owner reference");

    let rows = table(&k.ns(&["get", "configmaps", "-o", "name"]).await.out());
    assert_eq!(
        rows,
        [
            ["configmap/kube-root-ca.crt".to_string()],
            [format!("configmap/{dependent}")]
        ]
    );
    sandbox.shutdown().await;
}

/// A webhook's decision: every DELETE denied with code 409 and `message`, the rest allowed.
fn deny_deletes(message: &'static str) -> impl Fn(&serde_json::Value) -> Verdict + Send + Sync {
    move |request| {
        if request["operation"] == "DELETE" {
            Verdict::Deny {
                code: 409,
                message: message.into(),
            }
        } else {
            Verdict::Allow
        }
    }
}

/// Registers `hook` (as `name`) for the DELETE of ConfigMaps labelled `guarded: "yes"` with
/// `kubectl apply`, then applies one such ConfigMap, `guarded`, in the test's namespace. Returns
/// what the webhook configuration's apply printed and the ConfigMap's manifest path.
async fn guard_config_maps(k: &Kubectl, hook: &TestWebhook, name: &str) -> (String, String) {
    let configuration = hook.configuration(
        name,
        json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"], "resources": ["configmaps"]}]),
        "Fail",
        Some(json!({"matchLabels": {"guarded": "yes"}})),
    );
    let path = k.file(
        "webhook.json",
        &serde_json::to_string(&configuration).expect("json"),
    );
    let out = k.run(&["apply", "-f", &path_str(&path)]).await.out();
    let guarded = k.file(
        "guarded.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: guarded\n  labels: {guarded: \"yes\"}\n",
    );
    let guarded = path_str(&guarded);
    k.ns(&["apply", "-f", &guarded]).await.out();
    (out, guarded)
}

#[tokio::test]
async fn webhook_denial_is_printed_as_kubectl_prints_it() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "webhook").await;
    let hook = TestWebhook::start(deny_deletes("guarded objects are kept"))
        .await
        .expect("webhook starts");
    let (out, guarded) = guard_config_maps(&k, &hook, "deny-delete").await;
    assert_eq!(
        out.trim(),
        "validatingwebhookconfiguration.admissionregistration.k8s.io/deny-delete created"
    );

    // The webhook answers code 409 and a message but no reason: kube-apiserver passes its
    // Status on unchanged (`webhookerrors.ToStatusErr`), and kubectl prints a Status without a
    // reason as `Error from server: <message>`.
    let err = k.ns(&["delete", "configmap", "guarded"]).await.err();
    assert_eq!(
        err,
        "Error from server: admission webhook \"deny-delete.test.lien.dev\" denied the request: \
         guarded objects are kept\n"
    );
    let seen = hook.requests();
    let last = seen.last().expect("the webhook was called");
    assert_eq!(last["operation"], "DELETE");
    assert_eq!(last["name"], "guarded");
    assert_eq!(last["userInfo"]["username"], "sandbox-admin");

    // With a reason, as controller-runtime webhooks answer, kubectl prints it in parentheses;
    // deleting from a file adds which file.
    hook.set_decide(|request| {
        if request["operation"] == "DELETE" {
            Verdict::DenyStatus(json!({
                "code": 409,
                "reason": "Conflict",
                "message": "guarded objects are kept",
            }))
        } else {
            Verdict::Allow
        }
    });
    let err = k.ns(&["delete", "configmap", "guarded"]).await.err();
    assert_eq!(
        err,
        "Error from server (Conflict): admission webhook \"deny-delete.test.lien.dev\" denied \
         the request: guarded objects are kept\n"
    );
    let err = k.ns(&["delete", "-f", &guarded]).await.err();
    assert_eq!(
        err,
        format!(
            "Error from server (Conflict): error when deleting \"{guarded}\": admission webhook \
             \"deny-delete.test.lien.dev\" denied the request: guarded objects are kept\n"
        )
    );
    let out = k
        .ns(&["get", "configmap", "guarded", "-o", "name"])
        .await
        .out();
    assert_eq!(out.trim(), "configmap/guarded");

    // Objects the selector does not match, and allowed requests, delete as usual.
    hook.set_decide(|_| Verdict::Allow);
    let out = k.ns(&["delete", "configmap", "guarded"]).await.out();
    assert_eq!(out.trim(), r#"configmap "guarded" deleted"#);
    sandbox.shutdown().await;
    hook.stop().await;
}

/// `kubectl annotate` through a mutating webhook that seals a request annotation, as Lien's
/// `seal.lien.dev` does: on UPDATE it replaces `example.com/request` with
/// `example.com/sealed: <requester>`. kubectl sends a merge patch; what is stored is the
/// webhook's version, and `kubectl annotate` prints the object as annotated.
#[tokio::test]
async fn kubectl_annotate_through_a_mutating_webhook() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "mutating").await;
    let hook = TestWebhook::start(|request| {
        let requested = &request["object"]["metadata"]["annotations"]["example.com/request"];
        if request["operation"] != "UPDATE" || requested.is_null() {
            return Verdict::Allow;
        }
        let user = request["userInfo"]["username"].as_str().unwrap_or_default();
        Verdict::Patch(json!([
            {"op": "remove", "path": "/metadata/annotations/example.com~1request"},
            {"op": "add", "path": "/metadata/annotations/example.com~1sealed", "value": user},
        ]))
    })
    .await
    .expect("webhook starts");
    let configuration = hook.mutating_configuration(
        "seal",
        json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["configmaps"]}]),
        "Fail",
        None,
    );
    let path = k.file(
        "mutating.json",
        &serde_json::to_string(&configuration).expect("json"),
    );
    let out = k.run(&["apply", "-f", &path_str(&path)]).await.out();
    assert_eq!(
        out.trim(),
        "mutatingwebhookconfiguration.admissionregistration.k8s.io/seal created"
    );
    k.ns(&["create", "configmap", "sealed-one"]).await.out();

    let out = k
        .ns(&[
            "annotate",
            "configmap",
            "sealed-one",
            "example.com/request=please",
        ])
        .await
        .out();
    assert_eq!(out.trim(), "configmap/sealed-one annotated");
    let annotations = k
        .jsonpath("configmap", "sealed-one", "{.metadata.annotations}")
        .await;
    assert_eq!(annotations, r#"{"example.com/sealed":"sandbox-admin"}"#);
    let seen = hook.requests();
    assert_eq!(
        seen.last().map(|r| r["operation"].clone()),
        Some(json!("UPDATE"))
    );
    sandbox.shutdown().await;
    hook.stop().await;
}

/// A running `kubectl get -w`: its lines as they come, killed when dropped.
struct Watch {
    child: Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Watch {
    /// The next line's cells, failing the test if none comes within [`DEADLINE`].
    async fn next(&mut self) -> Vec<String> {
        let line = tokio::time::timeout(DEADLINE, self.lines.next_line())
            .await
            .expect("kubectl get -w printed nothing in time")
            .expect("reading kubectl's output")
            .expect("kubectl get -w exited");
        line.split_whitespace().map(str::to_string).collect()
    }

    async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(COMMAND_DEADLINE, self.child.wait()).await;
    }
}

#[tokio::test]
async fn get_watch_prints_each_change() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "watch").await;
    widget_crd(&k).await;
    k.apply_yaml("w1.yaml", &widget("w1", 1, "red")).await;

    let mut child = k
        .command(&[
            "-n",
            &k.namespace,
            "get",
            "widgets",
            "--watch",
            "--output-watch-events",
        ])
        .spawn()
        .expect("start kubectl get -w");
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut watch = Watch {
        child,
        lines: BufReader::new(stdout).lines(),
    };
    assert_eq!(
        watch.next().await,
        ["EVENT", "NAME", "SIZE", "COLOR", "AGE"]
    );
    assert_eq!(watch.next().await[..4], ["ADDED", "w1", "1", "red"]);

    // Each change comes only after the previous line was read: no timing assumptions.
    k.ns(&[
        "patch",
        "widget",
        "w1",
        "--type=merge",
        "-p",
        r#"{"spec":{"size":2}}"#,
    ])
    .await
    .out();
    assert_eq!(watch.next().await[..4], ["MODIFIED", "w1", "2", "red"]);
    k.apply_yaml("w2.yaml", &widget("w2", 9, "green")).await;
    assert_eq!(watch.next().await[..4], ["ADDED", "w2", "9", "green"]);
    k.ns(&["delete", "widget", "w1"]).await.out();
    assert_eq!(watch.next().await[..4], ["DELETED", "w1", "2", "red"]);
    watch.stop().await;
    sandbox.shutdown().await;
}
