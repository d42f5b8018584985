//! Issue 19 §5 and §2, as a person reads them: `kubectl get usages` shows what each Usage
//! protects (the object, or the selector with how many objects it matches) and READY with its
//! reason; the `lien` category and the short names; a DependencyRule whose CEL fails on an
//! object is `Ready=False` in `kubectl get dependencyrules`; a Usage with `by` being deleted
//! names the users it waits for, and goes once they are.

use serde_json::json;

use crate::harness::*;

/// Polls `kubectl ARGS` until its stdout satisfies `check`; the stdout. The last output is in
/// the timeout's panic message (through `what`).
async fn wait_kubectl(
    k: &Kubectl,
    args: &[&str],
    what: &str,
    check: impl Fn(&str) -> bool,
) -> String {
    let last = std::sync::Mutex::new(String::new());
    let found = tokio::time::timeout(scaled(DEADLINE), async {
        loop {
            let (ok, out, err) = k.run(args).await;
            if ok && check(&out) {
                return out;
            }
            *last.lock().expect("lock") = format!("{out}{err}");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
    found.unwrap_or_else(|_| {
        panic!(
            "timed out waiting for `kubectl {}` to show {what}; last output:\n{}",
            args.join(" "),
            last.lock().expect("lock")
        )
    })
}

/// The row of `name` in a `kubectl get` table (the line starting with it).
fn row<'a>(table: &'a str, name: &str) -> Option<&'a str> {
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
}

/// The cells of `name`'s row, cut where the header's columns start (kubectl aligns them; a
/// cell may hold spaces, or be empty).
fn cells(table: &str, name: &str) -> Vec<String> {
    let header = table.lines().next().unwrap_or_default();
    let mut starts: Vec<usize> = header
        .char_indices()
        .filter(|&(i, c)| c != ' ' && (i == 0 || header.as_bytes()[i - 1] == b' '))
        .map(|(i, _)| i)
        .collect();
    let line = row(table, name).unwrap_or_default();
    starts.push(usize::MAX);
    starts
        .windows(2)
        .map(|w| {
            let end = w[1].min(line.len());
            line.get(w[0].min(end)..end)
                .unwrap_or_default()
                .trim()
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn kubectl_get_usages_shows_what_is_protected_and_why_it_is_not_ready() {
    let mut env = Env::start("status-columns").await;
    let ns = env.ns.clone();
    env.configmap("settings", json!({})).await;
    for name in ["web-1", "web-2", "web-3"] {
        env.configmap(name, json!({"app": "web"})).await;
    }
    env.configmap("other", json!({"app": "other"})).await;
    let of = |target: serde_json::Value| {
        let mut side = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        side.as_object_mut()
            .expect("object")
            .extend(target.as_object().expect("object").clone());
        side
    };
    env.usage(
        "one",
        json!({"of": of(json!({"resourceRef": {"name": "settings"}})), "reason": "production settings"}),
    )
    .await;
    env.usage(
        "web",
        json!({"of": of(json!({"resourceSelector": {"matchLabels": {"app": "web"}}})),
               "reason": "the web tier's settings"}),
    )
    .await;
    env.usage(
        "missing",
        json!({"of": of(json!({"resourceRef": {"name": "nope"}})), "reason": "not there yet"}),
    )
    .await;
    env.usage(
        "used",
        json!({"of": of(json!({"resourceRef": {"name": "settings"}})),
               "by": of(json!({"resourceSelector": {"matchLabels": {"app": "web"}}}))}),
    )
    .await;
    let cluster = env.cluster_name("cu");
    env.create(
        json!({"apiVersion": "lien.dev/v1alpha1", "kind": "ClusterUsage",
        "metadata": {"name": cluster},
        "spec": {"of": of(json!({"resourceRef": {"name": "other", "namespace": ns}})),
                 "reason": "shared"}}),
    )
    .await;

    let k = Kubectl::new(&env);
    let table = wait_kubectl(
        &k,
        &["get", "usages", "-n", &ns],
        "every Usage's summary and READY reason",
        |t| {
            row(t, "one").is_some_and(|r| r.contains("ConfigMap/settings"))
                && row(t, "web").is_some_and(|r| r.contains("ConfigMap app=web (3)"))
                && row(t, "missing").is_some_and(|r| r.contains("NotFound"))
                && row(t, "used").is_some_and(|r| r.contains("ConfigMap app=web (3)"))
        },
    )
    .await;
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "OF", "BY", "READY", "REASON", "IN-USE", "AGE"],
        "{table}"
    );
    let cells = |name: &str| cells(&table, name);
    // A reason-only Usage has no BY: an empty cell, as kube-apiserver leaves it.
    assert_eq!(
        cells("one")[..6],
        ["one", "ConfigMap/settings", "", "True", "Resolved", "True"],
        "{table}"
    );
    assert_eq!(
        cells("web")[..6],
        [
            "web",
            "ConfigMap app=web (3)",
            "",
            "True",
            "Resolved",
            "True"
        ],
        "{table}"
    );
    assert_eq!(
        cells("missing")[..6],
        [
            "missing",
            "ConfigMap/nope",
            "",
            "False",
            "NotFound",
            "False"
        ],
        "{table}"
    );
    assert_eq!(
        cells("used")[..6],
        [
            "used",
            "ConfigMap/settings",
            "ConfigMap app=web (3)",
            "True",
            "Resolved",
            "True"
        ],
        "{table}"
    );

    // `-o wide` adds the reason the Usage gives.
    let (ok, wide, err) = k.run(&["get", "usages", "-n", &ns, "-o", "wide"]).await;
    assert!(ok, "{err}");
    assert!(
        wide.lines().next().is_some_and(|h| h.ends_with("WHY")),
        "{wide}"
    );
    assert!(
        row(&wide, "web").is_some_and(|r| r.ends_with("the web tier's settings")),
        "{wide}"
    );

    // A selector's count follows the objects.
    let (ok, _, err) = k
        .run(&[
            "label",
            "configmap",
            "web-3",
            "-n",
            &ns,
            "app=gone",
            "--overwrite",
        ])
        .await;
    assert!(ok, "{err}");
    wait_kubectl(&k, &["get", "usages", "-n", &ns], "web's count of 2", |t| {
        row(t, "web").is_some_and(|r| r.contains("ConfigMap app=web (2)"))
    })
    .await;

    // A ClusterUsage names the namespace of what it protects.
    wait_kubectl(
        &k,
        &["get", "clusterusages", &cluster],
        "the ClusterUsage's object with its namespace",
        |t| row(t, &cluster).is_some_and(|r| r.contains(&format!("ConfigMap/{ns}/other"))),
    )
    .await;

    // Short names: the same lists.
    let (ok, short, err) = k.run(&["get", "lu", "-n", &ns]).await;
    assert!(ok && row(&short, "web").is_some(), "{short}{err}");
    let (ok, short, err) = k.run(&["get", "lcu", &cluster]).await;
    assert!(ok && row(&short, &cluster).is_some(), "{short}{err}");
    for name in ["ldr", "lcr"] {
        let (ok, _, err) = k.run(&["get", name]).await;
        assert!(ok, "kubectl get {name}: {err}");
    }

    // The `lien` category: every kind of Lien's in one list.
    let (ok, all, err) = k.run(&["get", "lien", "-n", &ns]).await;
    assert!(ok, "{err}");
    for name in [
        "usage.lien.dev/one".to_owned(),
        "usage.lien.dev/web".to_owned(),
        format!("clusterusage.lien.dev/{cluster}"),
    ] {
        assert!(
            all.lines().any(|l| l.starts_with(&name)),
            "{name} in:\n{all}"
        );
    }
    env.finish().await;
}

/// A namespaced `WebApp` kind in `group` (free-form `spec`), served.
async fn install_webapps(env: &mut Env, group: &str) {
    env.create(namespaced_crd(group, "WebApp")).await;
    let k = Kubectl::new(env);
    wait_kubectl(
        &k,
        &["get", &format!("webapps.{group}"), "-n", &env.ns],
        "WebApps served",
        |_| true,
    )
    .await;
}

#[tokio::test]
async fn a_rule_whose_cel_fails_on_an_object_is_not_ready_in_kubectl_get() {
    let mut env = Env::start("status-rule-errors").await;
    let ns = env.ns.clone();
    let group = format!("{}.example.org", env.ns);
    install_webapps(&mut env, &group).await;
    env.configmap("settings", json!({})).await;
    let rule = env.cluster_name("rule");
    env.create(
        json!({"apiVersion": "lien.dev/v1alpha1", "kind": "DependencyRule",
        "metadata": {"name": rule},
        "spec": {
            "of": {"apiVersion": "v1", "kind": "ConfigMap"},
            "by": {"apiVersion": format!("{group}/v1"), "kind": "WebApp"},
            "keys": {"of": "[self.metadata.name]", "by": "[self.spec.settings]"},
            "reason": "the web app reads its settings from it"
        }}),
    )
    .await;
    let k = Kubectl::new(&env);
    wait_kubectl(
        &k,
        &["get", "dependencyrules", &rule],
        "Ready=True, Derived",
        |t| row(t, &rule).is_some_and(|r| r.contains(" True ") && r.contains("Derived")),
    )
    .await;
    // `spec.settings` is missing: the keys cannot be evaluated on this one.
    let broken = format!(
        "apiVersion: {group}/v1\nkind: WebApp\nmetadata:\n  name: broken\n  namespace: {ns}\nspec: {{}}\n"
    );
    let (ok, _, err) = k.run_with_stdin(&["apply", "-f", "-"], Some(&broken)).await;
    assert!(ok, "{err}");
    let table = wait_kubectl(
        &k,
        &["get", "ldr", &rule],
        "Ready=False, EvaluationErrors",
        |t| row(t, &rule).is_some_and(|r| r.contains(" False ") && r.contains("EvaluationErrors")),
    )
    .await;
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "OF",
            "BY",
            "SCOPE",
            "READY",
            "REASON",
            "RELATIONS",
            "AGE"
        ],
        "{table}"
    );
    let message = wait_kubectl(
        &k,
        &[
            "get",
            "dependencyrule",
            &rule,
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="Ready")].message}"#,
        ],
        "the message naming the count and the object",
        |m| m.contains("fails on 1 object") && m.contains("broken"),
    )
    .await;
    assert!(message.contains("spec.keys.by"), "{message}");
    // Fixed: Ready again.
    let (ok, _, err) = k
        .run(&[
            "patch",
            &format!("webapps.{group}"),
            "broken",
            "-n",
            &ns,
            "--type=merge",
            "-p",
            r#"{"spec":{"settings":"settings"}}"#,
        ])
        .await;
    assert!(ok, "{err}");
    wait_kubectl(&k, &["get", "ldr", &rule], "Ready=True again", |t| {
        row(t, &rule).is_some_and(|r| r.contains(" True ") && r.contains("Derived"))
    })
    .await;
    env.finish().await;
}

#[tokio::test]
async fn a_deleting_usage_names_the_users_it_waits_for_and_goes_with_them() {
    let mut env = Env::start("status-waiting").await;
    let ns = env.ns.clone();
    env.configmap("db", json!({})).await;
    env.configmap("app", json!({})).await;
    env.usage(
        "u",
        json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "db"}},
               "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "app"}}}),
    )
    .await;
    let k = Kubectl::new(&env);
    wait_label(&env.configmaps(), "db", true).await;
    wait_kubectl(
        &k,
        &[
            "get",
            "usage",
            "u",
            "-n",
            &ns,
            "-o",
            "jsonpath={.metadata.finalizers}",
        ],
        "Lien's finalizer",
        |f| f.contains("lien.dev/usage"),
    )
    .await;
    let (ok, _, err) = k
        .run(&["delete", "usage", "u", "-n", &ns, "--wait=false"])
        .await;
    assert!(ok, "{err}");
    let waiting = r#"jsonpath={.status.conditions[?(@.type=="WaitingForUsers")]}"#;
    let condition = wait_kubectl(
        &k,
        &["get", "usage", "u", "-n", &ns, "-o", waiting],
        "WaitingForUsers naming configmap/app",
        |c| c.contains("configmap/app"),
    )
    .await;
    let condition: serde_json::Value = serde_json::from_str(&condition).expect("JSON");
    assert_eq!(condition["status"], "True", "{condition}");
    assert_eq!(condition["reason"], "UsersRemain", "{condition}");
    assert!(
        condition["message"]
            .as_str()
            .is_some_and(|m| m.contains("lien.dev/usage")),
        "{condition}"
    );
    // It still protects meanwhile.
    let (ok, _, err) = k
        .run(&["delete", "configmap", "db", "-n", &ns, "--dry-run=server"])
        .await;
    assert!(!ok && err.contains("Conflict"), "{err}");
    // The user goes: so does the Usage, and the protection.
    let (ok, _, err) = k.run(&["delete", "configmap", "app", "-n", &ns]).await;
    assert!(ok, "{err}");
    wait_for("the Usage to be gone", DEADLINE, || async {
        let (ok, _, err) = k.run(&["get", "usage", "u", "-n", &ns]).await;
        (!ok && err.contains("NotFound")).then_some(())
    })
    .await;
    wait_for("db to be deletable", DEADLINE, || async {
        let (ok, _, _) = k.run(&["delete", "configmap", "db", "-n", &ns]).await;
        ok.then_some(())
    })
    .await;
    env.finish().await;
}
