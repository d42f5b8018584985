//! Every hint Lien prints works: each test reads the advice as a person does — from
//! `kubectl lien why`, from the 409 `kubectl delete` prints, from `kubectl lien plan`'s cycle
//! report — runs exactly the command(s) it names, in a shell, and then sees the object freed: its
//! DELETE, typed again, succeeds and it is gone. The text is the promise; these tests keep it.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams};
use lien_controller::replay::DELETION_REPLAYED_REASON;
use serde_json::json;

use super::harness::{
    DEADLINE, Env, Kubectl, api_resource, cluster_usage_across_namespaces, run_hint, wait_for,
    wait_gone, wait_guarded, wait_label,
};

/// `app` uses `db` through the Usage `app-uses-db` (with `by`, so it carries Lien's finalizer),
/// asking for replay when `replay`.
async fn app_uses_db(env: &mut Env, replay: bool) {
    env.configmap("db", json!({})).await;
    env.configmap("app", json!({})).await;
    env.usage(
        "app-uses-db",
        json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "db"}},
               "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "app"}},
               "reason": "the app keeps its orders in db",
               "replayDeletion": replay}),
    )
    .await;
    wait_label(&env.configmaps(), "db", true).await;
    // The finalizer is what makes "delete the Usage" alone not enough: wait until it is there,
    // as it is for anyone who reads `why` a moment after creating the Usage.
    wait_guarded(&env.usages(), "app-uses-db").await;
}

/// The commands of the piece of advice that starts on the first line containing `marker`: a
/// command on that line itself (`…: kubectl delete configmap/app -n ns`), then every line
/// right after it that is a command (indented `kubectl …`).
fn commands_after(text: &str, marker: &str) -> Vec<String> {
    let mut lines = text.lines().skip_while(|l| !l.contains(marker));
    let first = lines
        .next()
        .unwrap_or_else(|| panic!("no {marker:?} in:\n{text}"));
    let mut out: Vec<String> = first
        .find("kubectl ")
        .map(|i| first[i..].trim_end_matches(':').to_owned())
        .into_iter()
        .collect();
    out.extend(
        lines
            .map(str::trim)
            .take_while(|l| l.starts_with("kubectl "))
            .map(str::to_owned),
    );
    assert!(!out.is_empty(), "no command after {marker:?} in:\n{text}");
    out
}

/// The first `` `kubectl …` `` quoted on the line that starts with `prefix`.
fn quoted_command(text: &str, prefix: &str) -> String {
    let line = text
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{text}"));
    line.split('`')
        .nth(1)
        .filter(|c| c.starts_with("kubectl "))
        .unwrap_or_else(|| panic!("no quoted command on: {line}"))
        .to_owned()
}

/// `kubectl lien why TYPE/NAME -n NS`'s output.
async fn why(k: &Kubectl, object: &str, ns: &str) -> String {
    let (ok, stdout, stderr) = k.run(&["lien", "why", object, "-n", ns]).await;
    assert!(ok, "{stdout}{stderr}");
    stdout
}

/// The ConfigMap `name` is free: once Lien's index has caught up (a dry-run DELETE through the
/// API passes), `kubectl delete` of it succeeds, and it is gone.
async fn freed(env: &Env, k: &Kubectl, name: &str) {
    let cms = env.configmaps();
    wait_for(&format!("{name} to be free"), DEADLINE, || async {
        cms.delete(name, &DeleteParams::default().dry_run())
            .await
            .ok()
            .map(drop)
    })
    .await;
    let (ok, stdout, stderr) = k
        .run(&["delete", &format!("configmap/{name}"), "-n", &env.ns])
        .await;
    assert!(ok, "{stdout}{stderr}");
    wait_gone(&cms, name, DEADLINE).await;
}

/// `why` for a Usage with `by`, first way: delete the user first.
#[tokio::test]
async fn why_for_a_usage_with_by_delete_the_user_first_frees_it() {
    let mut env = Env::start("hint-why-user").await;
    let ns = env.ns.clone();
    app_uses_db(&mut env, false).await;
    let k = Kubectl::new(&env);
    let text = why(&k, "cm/db", &ns).await;
    let commands = commands_after(&text, "to do: delete the user first:");
    assert_eq!(commands, [format!("kubectl delete configmap/app -n {ns}")]);
    for c in &commands {
        run_hint(&k, c).await;
    }
    freed(&env, &k, "db").await;
    env.finish().await;
}

/// `why` for a Usage with `by`, second way: drop the Usage — delete it, which alone leaves it
/// Terminating on Lien's finalizer while its user exists, then remove that finalizer (the
/// printed JSON patch, checked by a `test` op). The user stays.
#[tokio::test]
async fn why_for_a_usage_with_by_drop_the_usage_frees_it() {
    let mut env = Env::start("hint-why-usage").await;
    let ns = env.ns.clone();
    app_uses_db(&mut env, false).await;
    let k = Kubectl::new(&env);
    let text = why(&k, "cm/db", &ns).await;
    let commands = commands_after(&text, "or: drop the Usage:");
    assert_eq!(commands.len(), 2, "{text}");
    assert_eq!(
        commands[0],
        format!("kubectl delete usage.lien.dev/app-uses-db -n {ns} --wait=false")
    );
    assert!(
        commands[1].starts_with(&format!(
            "kubectl patch usage.lien.dev/app-uses-db -n {ns} --type=json -p '[{{\"op\":\"test\""
        )),
        "{text}"
    );
    run_hint(&k, &commands[0]).await;
    // Deleting the Usage alone does not free db: it waits on Lien's finalizer.
    let u = env.usages().get("app-uses-db").await.expect("still there");
    assert!(u.metadata.deletion_timestamp.is_some(), "{u:?}");
    let (code, _) = super::harness::api_error(
        env.configmaps()
            .delete("db", &DeleteParams::default().dry_run())
            .await
            .expect_err("still held while the Usage is Terminating"),
    );
    assert_eq!(code, 409);
    run_hint(&k, &commands[1]).await;
    wait_gone(&env.usages(), "app-uses-db", DEADLINE).await;
    freed(&env, &k, "db").await;
    assert!(
        env.configmaps()
            .get_opt("app")
            .await
            .expect("get")
            .is_some(),
        "the user stays"
    );
    env.finish().await;
}

/// `why` for a protection (a Usage without `by`): deleting the Usage frees it at once.
#[tokio::test]
async fn why_for_a_protection_frees_it() {
    let mut env = Env::start("hint-why-protection").await;
    let ns = env.ns.clone();
    env.protected_configmap("settings", "keep-settings", "audit")
        .await;
    wait_label(&env.configmaps(), "settings", true).await;
    let k = Kubectl::new(&env);
    let text = why(&k, "cm/settings", &ns).await;
    let commands = commands_after(&text, "to do: remove the Usage");
    assert_eq!(
        commands,
        [format!(
            "kubectl delete usage.lien.dev/keep-settings -n {ns}"
        )]
    );
    run_hint(&k, &commands[0]).await;
    freed(&env, &k, "settings").await;
    env.finish().await;
}

/// `why` for a relation a DependencyRule derives: deleting the rule frees the object.
#[tokio::test]
async fn why_for_a_rule_derived_relation_frees_it() {
    let mut env = Env::start("hint-why-rule").await;
    let ns = env.ns.clone();
    let name = env.cluster_name("cm-uses-cm");
    let rule = json!({"apiVersion": "lien.dev/v1alpha1", "kind": "DependencyRule",
    "metadata": {"name": name},
    "spec": {
        "of": {"apiVersion": "v1", "kind": "ConfigMap"},
        "by": {"apiVersion": "v1", "kind": "ConfigMap"},
        "keys": {"of": "[self.metadata.name]",
                 "by": "has(self.data) && 'uses' in self.data ? [self.data.uses] : []"},
        "reason": "the app reads its settings"
    }});
    env.create(rule.clone()).await;
    env.configmap("settings", json!({})).await;
    env.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "app", "namespace": ns}, "data": {"uses": "settings"}}))
        .await;
    wait_label(&env.configmaps(), "settings", true).await;
    let k = Kubectl::new(&env);
    let text = why(&k, "cm/settings", &ns).await;
    let commands = commands_after(&text, "or: delete the DependencyRule");
    assert_eq!(
        commands,
        [format!("kubectl delete dependencyrule.lien.dev/{name}")]
    );
    run_hint(&k, &commands[0]).await;
    let rules: Api<kube::api::DynamicObject> =
        Api::all_with(env.client.clone(), &api_resource(&rule));
    wait_gone(&rules, &name, DEADLINE).await;
    freed(&env, &k, "settings").await;
    env.finish().await;
}

/// The 409 `kubectl delete` prints, as a terminal shows it: who holds it, that Lien will delete
/// it when its last user is gone, and what to do now. Following the third line (delete the
/// user) is enough: Lien replays the refused DELETE, with a `DeletionReplayed` Event naming who
/// asked.
#[tokio::test]
async fn the_refusals_what_to_do_line_frees_it_and_the_replay_is_reported() {
    let mut env = Env::start("hint-refusal").await;
    let ns = env.ns.clone();
    app_uses_db(&mut env, true).await;
    let k = Kubectl::new(&env);
    let (ok, stdout, stderr) = k.run(&["delete", "configmap/db", "-n", &ns]).await;
    assert!(!ok, "{stdout}");
    let refusal = format!(
        "Error from server (Conflict): admission webhook \"delete.lien.dev\" denied the request: \
         cannot delete ConfigMap {ns}/db: it is in use by ConfigMap {ns}/app \
         (Usage {ns}/app-uses-db: the app keeps its orders in db).\n\
         Lien will delete it when its last user is gone.\n\
         To free it now, delete the user first: `kubectl delete configmap/app -n {ns}`; \
         for the other ways: `kubectl lien why configmap/db -n {ns}`.\n"
    );
    assert_eq!(stderr, refusal);
    let command = quoted_command(&stderr, "To free it now, ");
    run_hint(&k, &command).await;
    // Nobody deletes db again: Lien does, as the second line said.
    let cms: Api<ConfigMap> = env.configmaps();
    wait_gone(&cms, "db", DEADLINE).await;
    let events = env
        .wait_events("ConfigMap", "db", DELETION_REPLAYED_REASON)
        .await;
    let user = env.user().await;
    let note = events[0].note.clone().unwrap_or_default();
    assert!(note.contains(&format!("requested by {user}")), "{note}");
    env.finish().await;
}

/// Without replay, the refusal's second line (and its Event) names the `--when-free` command;
/// typed as printed, it is recorded, and the object goes with its user.
#[tokio::test]
async fn the_refusals_when_free_line_works() {
    let mut env = Env::start("hint-when-free").await;
    let ns = env.ns.clone();
    app_uses_db(&mut env, false).await;
    let k = Kubectl::new(&env);
    let (ok, _, stderr) = k.run(&["delete", "configmap/db", "-n", &ns]).await;
    assert!(!ok);
    let command = quoted_command(&stderr, "not replayed: ");
    assert_eq!(
        command,
        format!("kubectl lien delete --when-free configmap/db -n {ns}")
    );
    // The refusal's Event gives the same advice, on one line.
    let events = env.wait_events("ConfigMap", "db", "DeletionRefused").await;
    let note = events[0].note.clone().unwrap_or_default();
    assert!(note.contains(&format!("`{command}`")), "{note}");
    run_hint(&k, &command).await;
    run_hint(&k, &quoted_command(&stderr, "To free it now, ")).await;
    wait_gone(&env.configmaps(), "db", DEADLINE).await;
    env.finish().await;
}

/// `kubectl lien plan`'s cycle report: following its first way to break the cycle (drop one
/// Usage: delete it and remove Lien's finalizer) lets both objects be deleted.
#[tokio::test]
async fn the_plans_cycle_hint_frees_the_cycle() {
    let mut env = Env::start("hint-cycle").await;
    let ns = env.ns.clone();
    env.configmap("a", json!({})).await;
    env.configmap("b", json!({})).await;
    for (name, of, by) in [("a-uses-b", "b", "a"), ("b-uses-a", "a", "b")] {
        env.usage(
            name,
            json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": of}},
                   "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": by}}}),
        )
        .await;
    }
    let cms = env.configmaps();
    wait_label(&cms, "a", true).await;
    wait_label(&cms, "b", true).await;
    let usages = env.usages();
    for name in ["a-uses-b", "b-uses-a"] {
        wait_for("the Usages' finalizers", DEADLINE, || async {
            usages
                .get(name)
                .await
                .ok()
                .filter(|u| {
                    u.metadata
                        .finalizers
                        .as_ref()
                        .is_some_and(|f| !f.is_empty())
                })
                .map(drop)
        })
        .await;
    }
    let k = Kubectl::new(&env);
    let (ok, stdout, stderr) = k.run(&["lien", "plan", "cm/a", "cm/b", "-n", &ns]).await;
    assert!(!ok, "a cycle cannot be planned: {stdout}");
    let report = format!("{stdout}{stderr}");
    let commands = commands_after(&report, "drop the Usage:");
    assert_eq!(commands.len(), 2, "{report}");
    for c in &commands {
        run_hint(&k, c).await;
    }
    // The cycle is broken: one of them is free now, the other once that one is gone.
    let first = wait_for("one of the cycle to be free", DEADLINE, || async {
        for name in ["a", "b"] {
            if cms
                .delete(name, &DeleteParams::default().dry_run())
                .await
                .is_ok()
            {
                return Some(name);
            }
        }
        None
    })
    .await;
    let second = if first == "a" { "b" } else { "a" };
    freed(&env, &k, first).await;
    freed(&env, &k, second).await;
    env.finish().await;
}

/// `why` for a ClusterUsage with `by` (its user in another namespace): the same as a Usage's —
/// delete it and remove Lien's finalizer, with the commands printed for `clusterusage.lien.dev`.
#[tokio::test]
async fn why_for_a_cluster_usage_with_by_drop_it_frees_it() {
    let mut env = Env::start("hint-why-cu").await;
    let ns = env.ns.clone();
    let (_, name) = cluster_usage_across_namespaces(&mut env).await;
    let cluster_usages: Api<lien_api::ClusterUsage> = Api::all(env.client.clone());
    wait_guarded(&cluster_usages, &name).await;
    let k = Kubectl::new(&env);
    let text = why(&k, "cm/shared", &ns).await;
    let commands = commands_after(&text, "or: drop the ClusterUsage:");
    assert_eq!(
        commands[0],
        format!("kubectl delete clusterusage.lien.dev/{name} --wait=false"),
        "{text}"
    );
    assert_eq!(commands.len(), 2, "{text}");
    for c in &commands {
        run_hint(&k, c).await;
    }
    wait_gone(&cluster_usages, &name, DEADLINE).await;
    freed(&env, &k, "shared").await;
    env.finish().await;
}
