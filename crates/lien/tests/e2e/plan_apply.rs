//! `kubectl lien plan --apply` correct by construction, typed as a user types it (the real
//! kubectl, the built `lien` on PATH as `kubectl-lien`): a 50-step chain of Usages torn down 100
//! times, every run complete although the controller learns of each step's objects going a
//! moment after the API server (Lien's 409 is retried); a Namespace deleted after its contents
//! (seed 002's bundle); the README's shop refused up front for its reason-protected PVC, then
//! deleted around it with `--skip-held`; `--dry-run` deleting nothing; no confirmation without
//! a terminal unless `--yes`, and `[y/N]` on one; a refusal that outlasts `--timeout` stopping
//! with Lien's message, one that clears being waited for; the cycle hint followed to a plan
//! that works.
//!
//! The bundle's and the shop's examples have fixed names: like `packs.rs`, run against
//! `LIEN_E2E_KUBECONFIG` one at a time.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};

use super::harness::{
    DEADLINE, Env, Kubectl, api_resource, gone, labelled, wait_for, wait_gone, wait_guarded,
    wait_label,
};

// Files of the repository, as `packs.rs` reads them.
use super::packs::{load, repo_file};

/// The API of `object`'s kind, in its namespace if it has one.
fn api_of(env: &Env, object: &Value) -> Api<DynamicObject> {
    let ar = api_resource(object);
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(env.client.clone(), ns, &ar),
        None => Api::all_with(env.client.clone(), &ar),
    }
}

fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().expect("a name")
}

// ---------------------------------------------------------------------------------------------
// The chain.

/// Links in the chain: ConfigMaps `c0`..`c49`, `c(i+1)` uses `c(i)`: 50 steps.
const LINKS: usize = 50;
/// Fresh chains torn down, each through the real kubectl.
const RUNS: usize = 100;

/// Creates the chain of run `run` (`r{run}-c0`..) and waits until Lien holds every used link.
async fn chain(env: &Env, run: usize) -> String {
    let prefix = format!("r{run}");
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let usages: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        &env.ns,
        &api_resource(&json!({"apiVersion": "lien.dev/v1alpha1", "kind": "Usage"})),
    );
    futures::future::try_join_all((0..LINKS).map(|i| {
        let cms = cms.clone();
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": format!("{prefix}-c{i}"), "labels": {"chain": prefix}}
        }))
        .expect("a ConfigMap");
        async move { cms.create(&PostParams::default(), &cm).await }
    }))
    .await
    .expect("the chain's ConfigMaps");
    futures::future::try_join_all((0..LINKS - 1).map(|i| {
        let usages = usages.clone();
        let u: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
            "metadata": {"name": format!("{prefix}-u{i}")},
            "spec": {
                "of": {"apiVersion": "v1", "kind": "ConfigMap",
                       "resourceRef": {"name": format!("{prefix}-c{i}")}},
                "by": {"apiVersion": "v1", "kind": "ConfigMap",
                       "resourceRef": {"name": format!("{prefix}-c{}", i + 1)}},
                "reason": "the next link reads it"
            }
        }))
        .expect("a Usage");
        async move { usages.create(&PostParams::default(), &u).await }
    }))
    .await
    .expect("the chain's Usages");
    let selector = format!("chain={prefix},{}=true", lien_api::IN_USE_LABEL);
    wait_for("Lien to hold every used link", DEADLINE, || async {
        let held = cms
            .list(&ListParams::default().labels(&selector))
            .await
            .ok()?;
        (held.items.len() == LINKS - 1).then_some(())
    })
    .await;
    prefix
}

/// What is left of the chain `prefix`.
async fn left_of(env: &Env, prefix: &str) -> Vec<String> {
    Api::<ConfigMap>::namespaced(env.client.clone(), &env.ns)
        .list(&ListParams::default().labels(&format!("chain={prefix}")))
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect()
}

/// The test: 100 fresh 50-step chains, each torn down by `plan --apply` without a
/// refusal ending it (before, 4 of 5 runs stopped on a 409: a step's DELETE reached Lien
/// before the controller had seen the previous step's object go).
#[tokio::test]
async fn plan_apply_tears_down_a_50_step_chain_100_times() {
    let env = Env::start("plan-chain").await;
    let k = Kubectl::new(&env);
    let ns = env.ns.clone();
    let started = Instant::now();
    let mut applying = Duration::ZERO;
    let mut waited = 0;
    for run in 0..RUNS {
        let prefix = chain(&env, run).await;
        let t = Instant::now();
        let c0 = format!("configmap/{prefix}-c0");
        let (ok, out, err) = k
            .run(&["lien", "plan", &c0, "-n", &ns, "--apply", "--yes"])
            .await;
        applying += t.elapsed();
        assert!(ok, "run {run}: {out}\n{err}");
        assert!(
            out.contains(&format!("done: {LINKS} objects deleted in {LINKS} steps")),
            "run {run}: {out}"
        );
        assert_eq!(
            left_of(&env, &prefix).await,
            Vec::<String>::new(),
            "run {run}"
        );
        waited += out.matches("waiting for Lien to release").count();
    }
    eprintln!(
        "{RUNS} runs of a {LINKS}-step chain in {:?} ({applying:?} in kubectl lien plan --apply); Lien still held the next link {waited} times",
        started.elapsed()
    );
    env.finish().await;
}

// ---------------------------------------------------------------------------------------------
// A Namespace after its contents: seed 002's bundle.

// The bundle's finalizer controller, played by the test as in `packs.rs`.
use super::packs::finalizer_controller;

/// `plan -f examples/critical-service-bundle.yaml --apply`: the Namespace used to come first
/// (no relation names it) and its DELETE failed at step 1; now it is the last step, and the
/// whole bundle goes.
#[tokio::test]
async fn plan_apply_deletes_the_critical_service_bundle_namespace_last() {
    let mut env = Env::start("plan-bundle").await;
    for doc in load("examples/rules/critical-service.yaml") {
        env.create(doc).await;
    }
    let bundle = load("examples/critical-service-bundle.yaml");
    let find = |kind: &str| {
        bundle
            .iter()
            .find(|o| o["kind"] == kind)
            .unwrap_or_else(|| panic!("the bundle has a {kind}"))
            .clone()
    };
    let (namespace, deployment, crd, cool) = (
        find("Namespace"),
        find("Deployment"),
        find("CustomResourceDefinition"),
        find("CoolResource"),
    );
    for o in [&namespace, &deployment, &crd] {
        env.create(o.clone()).await;
    }
    let cool_api = api_of(&env, &cool);
    wait_for("CoolResources to be served", DEADLINE, || async {
        cool_api.list(&Default::default()).await.ok().map(drop)
    })
    .await;
    env.create(cool.clone()).await;
    let deployments = api_of(&env, &deployment);
    wait_for("Lien to hold the Deployment", DEADLINE, || async {
        deployments
            .get(name_of(&deployment))
            .await
            .ok()
            .filter(|d| labelled(d.metadata.labels.as_ref()))
            .map(drop)
    })
    .await;
    let k = Kubectl::new(&env);
    let file = repo_file("examples/critical-service-bundle.yaml");
    let file = file.to_str().expect("a UTF-8 path");

    let (ok, plan, err) = k.run(&["lien", "plan", "-f", file]).await;
    assert!(ok, "{err}");
    let last = plan.rfind("step 3:").expect("three steps");
    assert!(
        plan[last..].contains("Namespace finalizer-namespace") && !plan.contains("step 4:"),
        "the Namespace is the last step: {plan}"
    );
    let deployment_at = plan
        .find("Deployment.apps finalizer-namespace/finalizer-deployment")
        .expect("the Deployment is planned");
    assert!(deployment_at < last, "{plan}");

    let controller = tokio::spawn(finalizer_controller(
        env.new_client().await,
        api_of(&env, &deployment),
    ));
    let (ok, out, err) = k
        .run(&[
            "lien",
            "plan",
            "-f",
            file,
            "--apply",
            "--yes",
            "--timeout",
            "60s",
        ])
        .await;
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("done: 4 objects deleted in 3 steps"), "{out}");
    for o in [&cool, &crd, &deployment, &namespace] {
        let read = api_of(&env, o).get_opt(name_of(o)).await;
        assert!(
            gone(&read),
            "{} is gone when --apply returns: {read:?}",
            name_of(o)
        );
    }
    controller.await.expect("the finalizer controller stops");
    env.finish().await;
}

// ---------------------------------------------------------------------------------------------
// The README's shop: a reason-protected PVC.

/// `examples/rules/core.yaml` and `examples/plugin-demo.yaml`, applied with kubectl as the
/// README says, the shop moved to `ns` (a name of this scenario's).
async fn shop(env: &mut Env, k: &Kubectl, ns: &str) {
    let (ok, out, err) = k
        .run(&[
            "apply",
            "-f",
            repo_file("examples/rules/core.yaml")
                .to_str()
                .expect("path"),
        ])
        .await;
    assert!(ok, "{out}\n{err}");
    // Created first so the scenario removes it at the end; the demo's Namespace applies to it.
    env.namespace(ns).await;
    // With no Pods: where a deployment controller runs (a real control plane; not the
    // sandbox), a Deployment's Pods would join the core pack's relations, and with them the
    // namespace's `kube-root-ca.crt` and `default` ServiceAccount that every Pod references —
    // objects the scenario is not about (`plan_apply_finishes_when_a_controller_re_creates_what_it_deleted`
    // is).
    let demo = std::fs::read_to_string(repo_file("examples/plugin-demo.yaml"))
        .expect("examples/plugin-demo.yaml")
        .replace("{name: shop}", &format!("{{name: {ns}}}"))
        .replace("namespace: shop}", &format!("namespace: {ns}}}"))
        .replace("spec:\n  selector:", "spec:\n  replicas: 0\n  selector:");
    assert_eq!(demo.matches("replicas: 0").count(), 3, "{demo}");
    let (ok, out, err) = k.run_with_stdin(&["apply", "-f", "-"], Some(&demo)).await;
    assert!(ok, "{out}\n{err}");
    let pvcs: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        ns,
        &api_resource(&json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim"})),
    );
    let secrets: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        ns,
        &api_resource(&json!({"apiVersion": "v1", "kind": "Secret"})),
    );
    // Lien holds what the demo's relations hold (the PVC by reason, the Secret through the
    // rules): the plugin's plan and Lien's webhook see the same relations.
    for (api, name) in [(&pvcs, "orders-data"), (&secrets, "db-credentials")] {
        wait_for(&format!("Lien to hold {name}"), DEADLINE, || async {
            api.get(name)
                .await
                .ok()
                .filter(|o| labelled(o.metadata.labels.as_ref()))
                .map(drop)
        })
        .await;
    }
}

/// The shop's objects that take part in a relation, by (kubectl type, name).
const SHOP: [(&str, &str); 6] = [
    ("deployment", "web"),
    ("deployment", "worker"),
    ("deployment", "db"),
    ("configmap", "settings"),
    ("secret", "db-credentials"),
    ("persistentvolumeclaim", "orders-data"),
];

/// Which of the shop's objects exist.
async fn shop_left(k: &Kubectl, ns: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (ty, name) in SHOP {
        let (ok, _, _) = k.run(&["get", ty, name, "-n", ns]).await;
        if ok {
            out.push(format!("{ty}/{name}"));
        }
    }
    out
}

/// `kubectl lien plan -n shop --all --apply`, the README's line: it used to delete four
/// objects and stop at the PVC. Now it refuses up front, naming the PVC, its Usage and reason
/// and the ways on; `--dry-run` and a missing `--yes` delete nothing; `--skip-held --yes`
/// deletes everything but the PVC (which needs nothing).
#[tokio::test]
async fn plan_apply_refuses_held_objects_up_front_and_skips_them_when_told() {
    let mut env = Env::start("plan-shop").await;
    let k = Kubectl::new(&env);
    let ns = env.another_namespace_name("shop");
    shop(&mut env, &k, &ns).await;
    let everything: Vec<String> = SHOP.iter().map(|(t, n)| format!("{t}/{n}")).collect();

    let (ok, out, err) = k
        .run(&["lien", "plan", "-n", &ns, "--all", "--apply", "--yes"])
        .await;
    assert!(!ok, "refused: {out}");
    assert!(out.contains("Deletion plan: 6 objects in 3 steps"), "{out}");
    for needle in [
        format!(
            "PersistentVolumeClaim {ns}/orders-data: Usage {ns}/keep-orders (the orders of 2026 are kept until the audit)"
        ),
        "Nothing was deleted.".to_owned(),
        "leave PersistentVolumeClaim ".to_owned()
            + &ns
            + "/orders-data and delete the other 5 objects: add --skip-held",
        format!("name only the objects to delete: kubectl lien plan --apply -n {ns} "),
        format!("kubectl delete usage.lien.dev/keep-orders -n {ns}"),
    ] {
        assert!(err.contains(&needle), "{needle} missing from: {err}");
    }
    assert_eq!(shop_left(&k, &ns).await, everything, "nothing was deleted");

    // --dry-run says what --skip-held would do and deletes nothing.
    let (ok, out, err) = k
        .run(&[
            "lien",
            "plan",
            "-n",
            &ns,
            "--all",
            "--skip-held",
            "--dry-run",
        ])
        .await;
    assert!(ok, "{out}\n{err}");
    for needle in [
        "dry run: nothing was deleted. --apply would delete 5 objects in 3 steps:".to_owned(),
        format!("step 1/3: delete Deployment.apps {ns}/web, Deployment.apps {ns}/worker"),
        format!(
            "leave PersistentVolumeClaim {ns}/orders-data: protected by Usage {ns}/keep-orders"
        ),
    ] {
        assert!(out.contains(&needle), "{needle} missing from: {out}");
    }
    // Without --skip-held, the dry run refuses as --apply would.
    let (ok, _, err) = k
        .run(&["lien", "plan", "-n", &ns, "--all", "--dry-run=client"])
        .await;
    assert!(!ok && err.contains("add --skip-held"), "{err}");
    assert_eq!(
        shop_left(&k, &ns).await,
        everything,
        "a dry run deletes nothing"
    );

    // Not on a terminal and no --yes: nobody can confirm, so nothing is deleted.
    let (ok, _, err) = k
        .run(&["lien", "plan", "-n", &ns, "--all", "--skip-held", "--apply"])
        .await;
    assert!(!ok);
    assert!(
        err.contains("stdin is not a terminal to ask on: pass --yes"),
        "{err}"
    );
    assert_eq!(shop_left(&k, &ns).await, everything, "nothing was deleted");

    // The explicit list the refusal printed works as well as --skip-held; --skip-held here.
    let (ok, out, err) = k
        .run(&[
            "lien",
            "plan",
            "-n",
            &ns,
            "--all",
            "--skip-held",
            "--apply",
            "--yes",
        ])
        .await;
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("done: 5 objects deleted in 3 steps"), "{out}");
    assert!(
        out.contains(&format!(
            "left in place (1 object):\n  PersistentVolumeClaim {ns}/orders-data"
        )),
        "{out}"
    );
    assert_eq!(
        shop_left(&k, &ns).await,
        ["persistentvolumeclaim/orders-data"],
        "only the protected PVC stays"
    );
    env.finish().await;
}

/// The refusal's other way on: the command it prints, naming only the objects to delete.
#[tokio::test]
async fn the_explicit_list_the_refusal_prints_deletes_all_but_the_held() {
    let mut env = Env::start("plan-shop-list").await;
    let k = Kubectl::new(&env);
    let ns = env.another_namespace_name("shop");
    shop(&mut env, &k, &ns).await;
    let (ok, _, err) = k
        .run(&["lien", "plan", "-n", &ns, "--all", "--apply", "--yes"])
        .await;
    assert!(!ok);
    let line = err
        .lines()
        .find_map(|l| l.split_once("name only the objects to delete: kubectl "))
        .map(|(_, cmd)| cmd.to_owned())
        .unwrap_or_else(|| panic!("no command in: {err}"));
    let mut args: Vec<&str> = line.split_whitespace().collect();
    args.push("--yes");
    let (ok, out, err) = k.run(&args).await;
    assert!(ok, "{args:?}: {out}\n{err}");
    assert!(out.contains("done: 5 objects deleted in 3 steps"), "{out}");
    assert_eq!(
        shop_left(&k, &ns).await,
        ["persistentvolumeclaim/orders-data"]
    );
    env.finish().await;
}

// ---------------------------------------------------------------------------------------------
// Lien's refusals during --apply.

/// A namespace of the scenario holding ConfigMap `m`, which ConfigMap `user` of the scenario's
/// namespace uses (a ClusterUsage): Lien refuses to delete the namespace while `user` exists
/// (its contents are in use from outside), though no relation names the Namespace itself, so
/// the plan of the Namespace alone is one step that Lien refuses. Returns its name.
async fn namespace_used_from_outside(env: &mut Env, suffix: &str) -> String {
    let target = env.another_namespace_name(suffix);
    env.namespace(&target).await;
    let m: Api<ConfigMap> = Api::namespaced(env.client.clone(), &target);
    m.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "m"}})).expect("cm"),
    )
    .await
    .expect("m");
    env.configmap(&format!("{suffix}-user"), json!({})).await;
    let ns = env.ns.clone();
    let name = env.cluster_name(suffix);
    env.create(
        json!({"apiVersion": "lien.dev/v1alpha1", "kind": "ClusterUsage",
        "metadata": {"name": name},
        "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap",
                        "resourceRef": {"name": "m", "namespace": target}},
                 "by": {"apiVersion": "v1", "kind": "ConfigMap",
                        "resourceRef": {"name": format!("{suffix}-user"), "namespace": ns}},
                 "reason": "the user reads m",
                 // A refused DELETE is then recorded on the Namespace (what the test waits
                 // for), and replayed once free — racing the plugin's retry, as it may.
                 "replayDeletion": true}}),
    )
    .await;
    wait_label(&m, "m", true).await;
    target
}

/// A refusal of Lien's that does not clear stops the step at --timeout with Lien's message;
/// one that clears is waited for, said once, and the plan completes.
#[tokio::test]
async fn plan_apply_waits_for_lien_to_let_go_until_the_timeout() {
    let mut env = Env::start("plan-wait").await;
    let k = Kubectl::new(&env);

    let stuck = namespace_used_from_outside(&mut env, "stuck").await;
    let ns_ref = format!("namespace/{stuck}");
    let (ok, out, err) = k
        .run(&[
            "lien",
            "plan",
            &ns_ref,
            "--apply",
            "--yes",
            "--timeout",
            "1s",
        ])
        .await;
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!(
            "step 1/1: waiting for Lien to release Namespace {stuck}"
        )),
        "{out}"
    );
    assert!(
        err.contains(&format!(
            "step 1: Lien still refuses to delete Namespace {stuck} after 1s (--timeout); stopping."
        )),
        "{err}"
    );
    assert!(err.contains("denied the request"), "{err}");
    assert!(err.contains("the user reads m"), "{err}");
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    let live = namespaces.get(&stuck).await.expect("still there");
    assert!(live.metadata.deletion_timestamp.is_none());

    // Now one that clears: the user goes while --apply waits.
    let freed = namespace_used_from_outside(&mut env, "freed").await;
    let run = {
        let ns_ref = format!("namespace/{freed}");
        let k = Kubectl::new(&env);
        tokio::spawn(async move {
            k.run(&[
                "lien",
                "plan",
                &ns_ref,
                "--apply",
                "--yes",
                "--timeout",
                "60s",
            ])
            .await
        })
    };
    // Lien records the refused DELETE on the Namespace: --apply is waiting.
    wait_for("the refusal to be recorded", DEADLINE, || async {
        namespaces.get(&freed).await.ok().and_then(|n| {
            n.metadata
                .annotations
                .and_then(|a| a.get("lien.dev/deletion-attempt").cloned())
        })
    })
    .await;
    env.configmaps()
        .delete("freed-user", &DeleteParams::default())
        .await
        .expect("the user goes");
    let (ok, out, err) = run.await.expect("kubectl ran");
    assert!(ok, "{out}\n{err}");
    assert_eq!(
        out.matches("waiting for Lien to release").count(),
        1,
        "said once: {out}"
    );
    assert!(out.contains("done: 1 object deleted in 1 step"), "{out}");
    wait_gone(&namespaces, &freed, DEADLINE).await;
    env.finish().await;
}

// ---------------------------------------------------------------------------------------------
// Confirmation on a terminal.

/// Runs `kubectl ARGS…` on a terminal (util-linux `script` gives it a pseudo-terminal), typing
/// `answer`; (success, what the terminal showed).
async fn on_a_terminal(k: &Kubectl, args: &[&str], answer: &str) -> (bool, String) {
    use tokio::io::AsyncWriteExt as _;
    let command = std::iter::once("kubectl")
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let path = format!(
        "{}:{}",
        k.dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = tokio::process::Command::new("script")
        .args(["-q", "-e", "-c", &command, "/dev/null"])
        .env("PATH", path)
        .env("KUBECONFIG", k.dir().join("kubeconfig"))
        .env("KUBECACHEDIR", k.dir().join("cache"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("script runs (util-linux)");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(answer.as_bytes()).await.expect("type");
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("finishes within 120 s")
        .expect("output");
    drop(stdin);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// On a terminal, --apply shows the plan and asks `Delete N objects in M steps? [y/N]`: `n`
/// deletes nothing, `y` deletes.
#[tokio::test]
async fn plan_apply_asks_on_a_terminal() {
    let mut env = Env::start("plan-tty").await;
    let ns = env.ns.clone();
    for name in ["a", "b"] {
        env.configmap(name, json!({})).await;
    }
    env.usage(
        "b-uses-a",
        json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "a"}},
               "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "b"}}}),
    )
    .await;
    wait_label(&env.configmaps(), "a", true).await;
    let k = Kubectl::new(&env);
    let args = ["lien", "plan", "configmap/a", "-n", &ns, "--apply"];

    let (ok, shown) = on_a_terminal(&k, &args, "n\n").await;
    assert!(!ok, "{shown}");
    assert!(
        shown.contains("Delete 2 objects in 2 steps? [y/N]"),
        "{shown}"
    );
    assert!(shown.contains("aborted: nothing was deleted"), "{shown}");
    for name in ["a", "b"] {
        assert!(env.configmaps().get_opt(name).await.expect("get").is_some());
    }

    let (ok, shown) = on_a_terminal(&k, &args, "y\n").await;
    assert!(ok, "{shown}");
    assert!(
        shown.contains("done: 2 objects deleted in 2 steps"),
        "{shown}"
    );
    for name in ["a", "b"] {
        wait_gone(&env.configmaps(), name, DEADLINE).await;
    }
    env.finish().await;
}

// ---------------------------------------------------------------------------------------------
// The cycle hint.

/// `plan` refuses a cycle with `why`'s advice for each Usage in it; following the first piece
/// of advice (the commands as printed) breaks the cycle, and the plan then applies.
#[tokio::test]
async fn the_plan_s_cycle_hint_breaks_the_cycle() {
    let mut env = Env::start("plan-cycle-hint").await;
    let ns = env.ns.clone();
    for name in ["x", "y"] {
        env.configmap(name, json!({})).await;
    }
    for (usage, of, by) in [("x-uses-y", "y", "x"), ("y-uses-x", "x", "y")] {
        env.usage(
            usage,
            json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": of}},
                   "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": by}},
                   "reason": "loop"}),
        )
        .await;
    }
    // The advice depends on the Usages' finalizers: wait until Lien has added its own.
    for usage in ["x-uses-y", "y-uses-x"] {
        wait_guarded(&env.usages(), usage).await;
    }
    wait_label(&env.configmaps(), "x", true).await;
    let k = Kubectl::new(&env);

    let (ok, _, err) = k.run(&["lien", "plan", "cm", "x", "-n", &ns]).await;
    assert!(!ok, "a cycle must fail");
    assert!(err.contains("to break it, one of:"), "{err}");
    // The first way: its commands, up to the next way.
    let first: Vec<String> = err
        .split("to break it, one of:")
        .nth(1)
        .expect("ways")
        .split("\n  - ")
        .nth(1)
        .expect("a first way")
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("kubectl "))
        .map(str::to_owned)
        .collect();
    assert!(!first.is_empty(), "no command in: {err}");
    for command in &first {
        let path = format!(
            "{}:{}",
            k.dir().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = tokio::process::Command::new("sh")
            .args(["-c", command])
            .env("PATH", path)
            .env("KUBECONFIG", k.dir().join("kubeconfig"))
            .env("KUBECACHEDIR", k.dir().join("cache"))
            .output()
            .await
            .expect("sh runs");
        assert!(
            out.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The cycle is broken once Lien's and the API server's views agree: the plan orders it.
    let (ok, out, err) = k
        .run(&["lien", "plan", "cm", "x", "-n", &ns, "--apply", "--yes"])
        .await;
    assert!(ok, "{first:?}\n{out}\n{err}");
    for name in ["x", "y"] {
        wait_gone(&env.configmaps(), name, DEADLINE).await;
    }
    env.finish().await;
}

/// An object a controller re-creates as soon as it is deleted, under the same name — as
/// kube-controller-manager re-creates a namespace's `default` ServiceAccount and its
/// `kube-root-ca.crt` (found on the real control plane, where `plan --all` takes them: every
/// Pod references both) — is gone once its UID is: `--apply` goes on instead of waiting for
/// the name to disappear until `--timeout`. The test plays the controller, on both targets.
#[tokio::test]
async fn plan_apply_finishes_when_a_controller_re_creates_what_it_deleted() {
    let mut env = Env::start("plan-recreated").await;
    let k = Kubectl::new(&env);
    const HOLD: &str = "example.org/hold";
    let ns = env.ns.clone();
    env.configmap("reader", json!({})).await;
    // Its finalizer keeps it a moment after its DELETE (so that --apply checks for it going,
    // by name, while the controller brings a new one).
    let root_ca = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "root-ca", "namespace": ns, "finalizers": [HOLD]}});
    let first = env.create(root_ca.clone()).await;
    env.usage(
        "reader-uses-root-ca",
        json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "root-ca"}},
               "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "reader"}}}),
    )
    .await;
    let cms = env.configmaps();
    wait_label(&cms, "root-ca", true).await;
    // The controller: it finalizes `root-ca` once deleted, and brings it back at once.
    let controller = {
        let cms = cms.clone();
        tokio::spawn(async move {
            loop {
                match cms.get_opt("root-ca").await {
                    Ok(None) => {
                        let cm: ConfigMap =
                            serde_json::from_value(root_ca.clone()).expect("a ConfigMap");
                        let _ = cms.create(&PostParams::default(), &cm).await;
                    }
                    Ok(Some(cm)) if cm.metadata.deletion_timestamp.is_some() => {
                        let _ = cms
                            .patch(
                                "root-ca",
                                &kube::api::PatchParams::default(),
                                &kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}})),
                            )
                            .await;
                    }
                    _ => {}
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    let (ok, out, err) = k
        .run(&[
            "lien",
            "plan",
            "configmap/root-ca",
            "-n",
            &ns,
            "--apply",
            "--yes",
            "--timeout",
            "60s",
        ])
        .await;
    controller.abort();
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("done: 2 objects deleted in 2 steps"), "{out}");
    let now = cms.get("root-ca").await.expect("re-created");
    assert_ne!(now.metadata.uid, first.metadata.uid, "a new one");
    cms.patch(
        "root-ca",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("the scenario's finalizer goes");
    env.finish().await;
}
