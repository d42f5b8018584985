//! `kubectl lien` through the real kubectl: the built `lien` binary is put on PATH as
//! `kubectl-lien` (a symlink in a temporary directory), so kubectl finds it as a plugin and it
//! runs in plugin mode (chosen by argv[0]), reading through the scenario's kubeconfig.

use serde_json::json;

use super::harness::{DEADLINE, Env, Kubectl, wait_gone, wait_label};

/// The Usage `usage`: ConfigMap `by` uses ConfigMap `of`, for `reason`.
async fn configmap_uses(env: &mut Env, usage: &str, of: &str, by: &str, reason: &str) {
    env.usage(
        usage,
        json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": of}},
               "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": by}},
               "reason": reason}),
    )
    .await;
}

/// `c` uses `b` uses `a`, through two Usages.
async fn chain(env: &mut Env) {
    for name in ["a", "b", "c"] {
        env.configmap(name, json!({})).await;
    }
    for (usage, of, by) in [("b-uses-a", "a", "b"), ("c-uses-b", "b", "c")] {
        configmap_uses(env, usage, of, by, &format!("{by} reads {of}")).await;
    }
    wait_label(&env.configmaps(), "a", true).await;
    wait_label(&env.configmaps(), "b", true).await;
}

#[tokio::test]
async fn kubectl_lien_why_graph_and_plan_apply_tear_down_a_chain() {
    let mut env = Env::start("plugin-chain").await;
    chain(&mut env).await;
    let k = Kubectl::new(&env);
    let ns = env.ns.clone();

    // why, in both of kubectl's forms.
    for args in [
        vec!["lien", "why", "configmap/a", "-n", &ns],
        vec!["lien", "why", "cm", "a", "--namespace", &ns],
    ] {
        let (ok, out, err) = k.run(&args).await;
        assert!(ok, "{args:?}: {err}");
        assert!(out.contains(&format!("used by ConfigMap {ns}/b")), "{out}");
        assert!(
            out.contains(&format!("source: Usage {ns}/b-uses-a")),
            "{out}"
        );
        assert!(out.contains("reason: b reads a"), "{out}");
        assert!(
            out.contains(&format!("kubectl delete configmap/b -n {ns}")),
            "{out}"
        );
    }
    let (ok, out, _) = k.run(&["lien", "why", "configmap/c", "-n", &ns]).await;
    assert!(ok && out.contains("is not in use"), "{out}");
    let (ok, _, err) = k
        .run(&["lien", "why", "configmap/missing", "-n", &ns])
        .await;
    assert!(!ok);
    assert!(
        err.contains("Error from server (NotFound): configmaps \"missing\" not found"),
        "{err}"
    );
    let (ok, _, err) = k.run(&["lien", "why", "nosuchkind/x", "-n", &ns]).await;
    assert!(!ok);
    assert!(
        err.contains("the server doesn't have a resource type \"nosuchkind\""),
        "{err}"
    );

    // graph: DOT and SVG name the three objects and the two Usages.
    let (ok, dot, err) = k.run(&["lien", "graph", "-n", &ns, "-o", "dot"]).await;
    assert!(ok, "{err}");
    for needle in [
        format!("{ns}/a"),
        format!("{ns}/b"),
        format!("{ns}/c"),
        format!("Usage {ns}/b-uses-a"),
        format!("Usage {ns}/c-uses-b"),
    ] {
        assert!(dot.contains(&needle), "{needle} missing from {dot}");
    }
    assert_eq!(dot.matches(" -> ").count(), 2, "{dot}");
    let (ok, svg, err) = k
        .run(&["lien", "graph", "-A", "-o", "svg", "configmap/b", "-n", &ns])
        .await;
    assert!(ok, "{err}");
    let doc = roxmltree::Document::parse(&svg).expect("SVG is XML");
    let text: String = doc
        .descendants()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text())
        .collect();
    for name in ["a", "b", "c"] {
        assert!(
            text.contains(&format!("{ns}/{name}")),
            "{name} not in the SVG"
        );
    }

    // plan, then --apply: c, then b, then a; all gone.
    let (ok, plan, err) = k.run(&["lien", "plan", "configmap/a", "-n", &ns]).await;
    assert!(ok, "{err}");
    let c = plan.find(&format!("ConfigMap {ns}/c")).expect("c planned");
    let b = plan.find(&format!("ConfigMap {ns}/b")).expect("b planned");
    let a = plan.find(&format!("ConfigMap {ns}/a")).expect("a planned");
    assert!(c < b && b < a, "{plan}");
    assert!(plan.contains("3 objects in 3 steps"), "{plan}");
    let (ok, out, err) = k
        .run(&[
            "lien",
            "plan",
            "--apply",
            "--yes",
            "--timeout",
            "20s",
            "configmap/a",
            "-n",
            &ns,
        ])
        .await;
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("done: 3 objects deleted in 3 steps"), "{out}");
    for name in ["a", "b", "c"] {
        wait_gone(&env.configmaps(), name, DEADLINE).await;
    }
    env.finish().await;
}

#[tokio::test]
async fn kubectl_lien_plan_refuses_a_cycle_and_apply_refuses_a_protection() {
    let mut env = Env::start("plugin-cycle").await;
    let ns = env.ns.clone();
    for name in ["x", "y"] {
        env.configmap(name, json!({})).await;
    }
    for (usage, of, by) in [("x-uses-y", "y", "x"), ("y-uses-x", "x", "y")] {
        configmap_uses(&mut env, usage, of, by, "loop").await;
    }
    env.protected_configmap("kept", "keep-it", "kept for the audit")
        .await;
    wait_label(&env.configmaps(), "x", true).await;
    wait_label(&env.configmaps(), "kept", true).await;
    let k = Kubectl::new(&env);

    let (ok, _, err) = k.run(&["lien", "plan", "cm", "x", "-n", &ns]).await;
    assert!(!ok, "a cycle must fail");
    for needle in [
        format!("ConfigMap {ns}/x"),
        format!("ConfigMap {ns}/y"),
        format!("Usage {ns}/x-uses-y"),
        format!("Usage {ns}/y-uses-x"),
    ] {
        assert!(err.contains(&needle), "{needle} missing from {err}");
    }

    // A protection no order lifts: the plan warns, --apply refuses before deleting anything,
    // naming the Usage and its reason (crates/lien/tests/e2e/plan_apply.rs has the rest).
    let (ok, out, err) = k
        .run(&[
            "lien",
            "plan",
            "--apply",
            "--yes",
            "configmap/kept",
            "-n",
            &ns,
        ])
        .await;
    assert!(!ok, "{out}");
    assert!(out.contains("is protected by Usage"), "{out}");
    assert!(
        err.contains(&format!(
            "ConfigMap {ns}/kept: Usage {ns}/keep-it (kept for the audit)"
        )),
        "{err}"
    );
    assert!(err.contains("Nothing was deleted."), "{err}");
    assert!(env.configmaps().get("kept").await.is_ok(), "kept must stay");
    env.finish().await;
}

/// `kubectl lien status` says whether Lien is enforcing, and `why` never claims a protection
/// that is not: enforced while Lien answers; failing closed once it stops (its configuration
/// left behind) — the DELETE then fails with an error, as the warning says; not enforced once
/// the configuration is gone too — and the DELETE then goes through, as the warning says.
#[tokio::test]
async fn status_says_whether_protection_is_enforced_and_why_warns_when_it_is_not() {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    use kube::api::{Api, DeleteParams};

    let mut env = Env::start("plugin-status").await;
    if !env.is_local() {
        // Stopping Lien needs a cluster of the scenario's own.
        env.finish().await;
        return;
    }
    let ns = env.ns.clone();
    env.protected_configmap("db", "db-in-use", "orders live here")
        .await;
    wait_label(&env.configmaps(), "db", true).await;
    let k = Kubectl::new(&env);

    let (ok, stdout, stderr) = k.run(&["lien", "status"]).await;
    assert!(ok, "status exits 0 while enforced:\n{stdout}{stderr}");
    assert!(stdout.starts_with("Lien: enforced"), "{stdout}");
    assert!(stdout.contains("(ready)"), "{stdout}");
    assert!(stdout.contains("Usages: 1 of 1 Ready"), "{stdout}");
    // The webhook's own /metrics tell its version (and how it authenticates the API server).
    assert!(
        stdout.contains(&format!("server and plugin {}", env!("CARGO_PKG_VERSION"))),
        "{stdout}"
    );
    let (ok, stdout, stderr) = k.run(&["lien", "why", "cm/db", "-n", &ns]).await;
    assert!(ok, "{stdout}{stderr}");
    assert!(
        !stderr.contains("warning:"),
        "no warning while enforced: {stderr}"
    );

    // Lien stops; its configuration stays (failurePolicy Fail).
    assert!(env.stop_lien().await);
    let (ok, stdout, stderr) = k.run(&["lien", "status", "-o", "json"]).await;
    assert!(
        !ok,
        "status exits non-zero while not enforced:\n{stdout}{stderr}"
    );
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("status -o json");
    assert_eq!(report["verdict"], "failing-closed", "{stdout}");
    assert!(
        report["reason"]
            .as_str()
            .is_some_and(|r| r.contains("does not answer")),
        "{stdout}"
    );
    let (ok, stdout, stderr) = k.run(&["lien", "why", "cm/db", "-n", &ns]).await;
    assert!(ok, "{stdout}{stderr}");
    assert!(
        stderr.contains("warning: Lien is not answering") && stderr.contains("fails with an error"),
        "{stderr}"
    );
    // As said: the DELETE fails with an error (not Lien's refusal), and the object stays.
    let (ok, stdout, stderr) = k.run(&["delete", "configmap/db", "-n", &ns]).await;
    assert!(!ok, "{stdout}{stderr}");
    assert!(stderr.contains("failed calling webhook"), "{stderr}");
    assert!(env.configmaps().get_opt("db").await.expect("get").is_some());

    // The configuration goes too: nothing asks Lien any more.
    Api::<ValidatingWebhookConfiguration>::all(env.client.clone())
        .delete("lien", &DeleteParams::default())
        .await
        .expect("configuration deleted");
    let (ok, stdout, _) = k.run(&["lien", "status"]).await;
    assert!(!ok);
    assert!(
        stdout.starts_with("Lien: NOT enforced — ValidatingWebhookConfiguration lien is missing"),
        "{stdout}"
    );
    let (ok, stdout, stderr) = k.run(&["lien", "why", "cm/db", "-n", &ns]).await;
    assert!(ok, "{stdout}{stderr}");
    assert!(
        stderr.contains("warning: protection is NOT enforced"),
        "{stderr}"
    );
    // As said: the DELETE goes through.
    let (ok, stdout, stderr) = k.run(&["delete", "configmap/db", "-n", &ns]).await;
    assert!(ok, "{stdout}{stderr}");
    wait_gone(&env.configmaps(), "db", DEADLINE).await;
    env.finish().await;
}

/// `kubectl lien tree` shows an object's users (and theirs) and what it uses, each with its
/// status and the Usage that relates them; `--watch` draws it again as it changes: the user's
/// user deleted, its branch goes from the next frame.
#[tokio::test]
async fn tree_shows_users_and_what_is_used_and_watch_follows_a_deletion() {
    use tokio::io::AsyncBufReadExt as _;

    let mut env = Env::start("plugin-tree").await;
    let ns = env.ns.clone();
    chain(&mut env).await;
    let k = Kubectl::new(&env);
    let (ok, stdout, stderr) = k.run(&["lien", "tree", "cm/b", "-n", &ns]).await;
    assert!(ok, "{stdout}{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("OBJECT"), "{stdout}");
    assert!(
        lines[1].starts_with(&format!("ConfigMap {ns}/b")),
        "{stdout}"
    );
    assert!(lines[1].contains("in use (1)"), "{stdout}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("└─ used by ConfigMap {ns}/c"))
                && l.contains(&format!("Usage {ns}/c-uses-b: c reads b"))),
        "{stdout}"
    );
    assert!(
        lines.iter().any(
            |l| l.starts_with(&format!("└─ uses ConfigMap {ns}/a")) && l.contains("in use (1)")
        ),
        "{stdout}"
    );

    // --watch on `a`: b uses it, c uses b.
    let path = format!(
        "{}:{}",
        k.dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = tokio::process::Command::new("kubectl")
        .args([
            "lien",
            "tree",
            "cm/a",
            "-n",
            &ns,
            "--watch",
            "--interval",
            "200ms",
        ])
        .env("PATH", path)
        .env("KUBECONFIG", k.dir().join("kubeconfig"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("kubectl runs");
    let mut out = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    // Frames, each from its `Every …` header to the next.
    let mut frame = String::new();
    let mut next_frame = async || -> String {
        loop {
            let line = tokio::time::timeout(DEADLINE, out.next_line())
                .await
                .expect("a frame within the deadline")
                .expect("read")
                .expect("the watch goes on");
            if line.starts_with("Every ") && !frame.is_empty() {
                return std::mem::replace(&mut frame, line);
            }
            frame.push_str(&line);
            frame.push('\n');
        }
    };
    let c = format!("used by ConfigMap {ns}/c");
    let first = next_frame().await;
    assert!(
        first.contains(&format!("used by ConfigMap {ns}/b")),
        "{first}"
    );
    assert!(first.contains(&c), "c uses b, which uses a:\n{first}");
    let (ok, o, e) = k.run(&["delete", "configmap/c", "-n", &ns]).await;
    assert!(ok, "{o}{e}");
    let mut frames = 0;
    loop {
        let f = next_frame().await;
        frames += 1;
        if !f.contains(&c) {
            assert!(f.contains(&format!("used by ConfigMap {ns}/b")), "{f}");
            break;
        }
        assert!(frames < 200, "c's branch never went:\n{f}");
    }
    let _ = child.kill().await;
    env.finish().await;
}
