//! Ordering: a used object goes only after its users; replay makes that fast.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject};
use kube::runtime::watcher;
use serde_json::json;

use crate::harness::*;

/// `db` used by `app` through the Usage `app-uses-db`.
async fn used_pair(env: &mut Env, replay: bool) {
    env.configmap("db", json!({})).await;
    env.configmap("app", json!({})).await;
    env.usage(
        "app-uses-db",
        json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "db"}},
               "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "app"}},
               "replayDeletion": replay}),
    )
    .await;
    wait_label(&env.configmaps(), "db", true).await;
}

/// The refusal names the user, what happens next (`replay`: Lien deletes it when its last user
/// is gone, else the when-free command) and what to do; returns when the refusal has been
/// recorded on the object.
async fn refused_naming_the_user(env: &Env, replay: bool) {
    let ns = &env.ns;
    let cms = env.configmaps();
    let err = cms
        .delete("db", &DeleteParams::default())
        .await
        .expect_err("the used object's DELETE is refused");
    let next = if replay {
        "Lien will delete it when its last user is gone.".to_owned()
    } else {
        format!(
            "not replayed: to have Lien delete it once free, run \
             `kubectl lien delete --when-free configmap/db -n {ns}`."
        )
    };
    assert_eq!(
        api_error(err),
        (
            409,
            format!(
                "admission webhook \"delete.lien.dev\" denied the request: cannot delete \
                 ConfigMap {ns}/db: it is in use by ConfigMap {ns}/app (Usage {ns}/app-uses-db).\n\
                 {next}\n\
                 To free it now, delete the user first: `kubectl delete configmap/app -n {ns}`; \
                 for the other ways: `kubectl lien why configmap/db -n {ns}`."
            )
        )
    );
    wait_for("the refusal to be recorded", DEADLINE, || async {
        cms.get("db")
            .await
            .ok()
            .and_then(|c| c.metadata.annotations)
            .filter(|a| a.contains_key("lien.dev/deletion-attempt"))
    })
    .await;
}

/// With `replayDeletion: true`, the refused DELETE of the used object is replayed within 2 s of
/// its user's DELETE, and the Usage goes with its user.
#[tokio::test]
async fn ordering_the_used_object_is_deleted_by_replay_after_its_user() {
    let mut env = Env::start("order-replay").await;
    used_pair(&mut env, true).await;
    refused_naming_the_user(&env, true).await;
    let cms = env.configmaps();
    cms.delete("app", &DeleteParams::default())
        .await
        .expect("the user deletes");
    let start = Instant::now();
    wait_gone(&cms, "db", DEADLINE).await;
    let delay = start.elapsed();
    println!("replay: the used object went {delay:?} after its user's DELETE");
    assert!(delay < Duration::from_secs(2), "replay took {delay:?}");
    // The Usage goes by its owner reference to the user: the garbage collector's work, which on
    // kube-controller-manager waits until the collector watches the Usage kind (its discovery
    // resync, up to 30 s after the CRD was installed; CI's real tier once saw 28 s). The
    // replay above does not wait for it: the relation ended when the user was gone.
    wait_gone(&env.usages(), "app-uses-db", scaled(DEADLINE)).await;
    env.finish().await;
}

/// With `replayDeletion: false`, deleting the user removes the Usage and the label, and the used
/// object stays.
#[tokio::test]
async fn ordering_without_replay_the_used_object_stays_after_its_user_goes() {
    let mut env = Env::start("order-no-replay").await;
    used_pair(&mut env, false).await;
    refused_naming_the_user(&env, false).await;
    let cms = env.configmaps();
    let uid = cms.get("db").await.expect("db").metadata.uid;
    cms.delete("app", &DeleteParams::default())
        .await
        .expect("the user deletes");
    wait_gone(&env.usages(), "app-uses-db", DEADLINE).await;
    // The label goes, and with it the record of the refusal: nothing will replay it.
    let db = wait_for("label and record to go", DEADLINE, || async {
        cms.get("db").await.ok().filter(|c| {
            !labelled(c.metadata.labels.as_ref())
                && !c
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key("lien.dev/deletion-attempt"))
        })
    })
    .await;
    assert_eq!(db.metadata.uid, uid, "not deleted");
    cms.delete("db", &DeleteParams::default())
        .await
        .expect("now deletable");
    env.finish().await;
}

/// Deleted ConfigMaps of a namespace, in order, with when.
/// Each deletion seen: name, when, and the resourceVersion of its DELETED event (the storage
/// order, printed when an ordering assertion fails).
struct Deletions(
    Arc<Mutex<Vec<(String, Instant, String)>>>,
    tokio::task::JoinHandle<()>,
    /// Every event seen, in order: what a failure prints (was the in-use label taken off
    /// before the used object went? did the user start deleting?).
    Arc<Mutex<Vec<String>>>,
);

impl Deletions {
    async fn watch(api: Api<ConfigMap>) -> Deletions {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let events = Arc::new(Mutex::new(Vec::new()));
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let log = seen.clone();
        let all = events.clone();
        let started = Instant::now();
        let describe = move |what: &str, cm: &ConfigMap| {
            let m = &cm.metadata;
            format!(
                "{what} {} rv {} in-use {:?} deleting {} finalizers {:?} (+{:?})",
                m.name.as_deref().unwrap_or_default(),
                m.resource_version.as_deref().unwrap_or_default(),
                m.labels
                    .as_ref()
                    .and_then(|l| l.get("lien.dev/in-use"))
                    .map(String::as_str),
                m.deletion_timestamp.is_some(),
                m.finalizers.as_deref().unwrap_or_default(),
                started.elapsed(),
            )
        };
        let task = tokio::spawn(async move {
            let mut ready = Some(ready_tx);
            let mut stream = watcher(api, watcher::Config::default()).boxed();
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = ready.take() {
                            let _ = tx.send(());
                        }
                    }
                    Ok(watcher::Event::Apply(cm)) => {
                        all.lock().expect("log").push(describe("changed", &cm));
                    }
                    Ok(watcher::Event::Delete(cm)) => {
                        all.lock().expect("log").push(describe("deleted", &cm));
                        let name = cm.metadata.name.unwrap_or_default();
                        let rv = cm.metadata.resource_version.unwrap_or_default();
                        log.lock().expect("log").push((name, Instant::now(), rv));
                    }
                    _ => {}
                }
            }
        });
        ready_rx.await.expect("watch started");
        Deletions(seen, task, events)
    }

    /// Every event seen, one per line.
    fn events(&self) -> String {
        self.2.lock().expect("log").join("\n")
    }

    fn when(&self, name: &str) -> Option<Instant> {
        self.0
            .lock()
            .expect("log")
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, t, _)| *t)
    }

    /// Every deletion seen, in the order seen, with its resourceVersion.
    fn seen(&self) -> String {
        let log = self.0.lock().expect("log");
        let first = log.first().map(|(_, t, _)| *t);
        log.iter()
            .map(|(n, t, rv)| {
                let after = first.map(|f| t.duration_since(f)).unwrap_or_default();
                format!("{n} (rv {rv}, +{after:?})")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Drop for Deletions {
    fn drop(&mut self) {
        self.1.abort();
    }
}

/// A composition: `parent` owns the used `db`, the user `app` and the Usage between them.
/// With `slow_user`, the user carries a finalizer the teardown removes after a while, like a
/// cloud resource whose deletion takes time.
async fn composition(env: &mut Env, replay: bool, slow_user: bool) {
    let ns = env.ns.clone();
    let parent = env.configmap("parent", json!({})).await;
    let owned = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "parent",
        "uid": parent.metadata.uid, "controller": true, "blockOwnerDeletion": true}]);
    for name in ["db", "app"] {
        let finalizers = if slow_user && name == "app" {
            json!([SLOW])
        } else {
            json!([])
        };
        env.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "ownerReferences": owned,
                         "finalizers": finalizers}}))
            .await;
    }
    env.create(json!({"apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
        "metadata": {"name": "app-uses-db", "namespace": ns, "ownerReferences": owned},
        "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "db"}},
                 "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "app"}},
                 "replayDeletion": replay}}))
        .await;
    wait_label(&env.configmaps(), "db", true).await;
    // Guarded, too: Lien writes the label first and the Usage's finalizer just after (labels
    // are the protection); a teardown that starts between the two lets the
    // garbage collector delete the unguarded Usage, and its protection with it — the window
    // this scenario is not about (docs/operations.md, "A Usage's first moments").
    wait_guarded(&env.usages(), "app-uses-db").await;
}

const SLOW: &str = "e2e.lien.dev/slow-teardown";

/// Deletes the parent with `policy` and waits (up to `bound`) for everything to be gone; the
/// user must go before the used object. Returns the time from the parent's DELETE to the last
/// object gone, or `None` if `bound` passed first.
/// With `hold`, the user's finalizer is removed `hold` after its deletion starts (the workload's
/// own teardown time, not synchronisation).
async fn teardown(
    env: &Env,
    foreground: bool,
    bound: Duration,
    hold: Option<Duration>,
) -> Option<Duration> {
    let cms = env.configmaps();
    let deletions = Deletions::watch(cms.clone()).await;
    let params = if foreground {
        DeleteParams::foreground()
    } else {
        DeleteParams::background()
    };
    let start = Instant::now();
    cms.delete("parent", &params).await.expect("parent DELETE");
    let _release = hold.map(|hold| {
        let cms = cms.clone();
        AbortOnDrop(tokio::spawn(async move {
            wait_for("the user's deletion to start", DEADLINE, || async {
                cms.get("app")
                    .await
                    .ok()
                    .and_then(|c| c.metadata.deletion_timestamp)
            })
            .await;
            tokio::time::sleep(hold).await;
            cms.patch(
                "app",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&json!({"metadata": {"finalizers": null}})),
            )
            .await
            .expect("the user's teardown finishes");
        }))
    });
    let gone = |name: &'static str| {
        let cms = cms.clone();
        async move { matches!(cms.get_opt(name).await, Ok(None)) }
    };
    let end = tokio::time::Instant::now() + bound;
    loop {
        if gone("parent").await && gone("app").await && gone("db").await {
            break;
        }
        if tokio::time::Instant::now() >= end {
            // The user still goes first, whatever the GC's backoff does to the used object.
            assert!(gone("app").await, "the user is gone within {bound:?}");
            assert!(
                !gone("db").await || deletions.when("db") >= deletions.when("app"),
                "the used object went first; events:\n{}",
                deletions.events()
            );
            return None;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let total = start.elapsed();
    let usages: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        &env.ns,
        &api_resource(&json!({"apiVersion": "lien.dev/v1alpha1", "kind": "Usage"})),
    );
    wait_gone(&usages, "app-uses-db", DEADLINE).await;
    // The watch may report the last deletion a moment after the GET says it is gone.
    let (app, db) = wait_for("both deletions to be watched", DEADLINE, || async {
        deletions.when("app").zip(deletions.when("db"))
    })
    .await;
    assert!(
        app <= db,
        "the user went first; deletions seen: {}\nevents:\n{}",
        deletions.seen(),
        deletions.events()
    );
    Some(total)
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Background and foreground deletion of the parent delete the user first and the used object
/// after it, and everything ends gone (GC backoff capped at 200 ms; Lien replays).
#[tokio::test]
async fn composition_teardown_deletes_the_user_before_the_used_object() {
    for foreground in [false, true] {
        let mut env = Env::start(if foreground { "comp-fg" } else { "comp-bg" }).await;
        composition(&mut env, true, false).await;
        let total = teardown(&env, foreground, DEADLINE, None)
            .await
            .expect("everything gone");
        println!(
            "composition teardown ({}): {total:?}",
            if foreground {
                "foreground"
            } else {
                "background"
            }
        );
        env.finish().await;
    }
}

/// Ordered teardown with the GC's real backoff (5 ms doubling to 1000 s): Lien's replay against
/// the GC's retries alone (`replayDeletion: false`), bounded by the test's deadline, with a user
/// that goes at once and one whose own teardown takes 5 s or 7 s (while it lasts, the GC's refused
/// retries of the used object back off). Prints the numbers (docs/benchmarks.md "Ordered teardown").
#[tokio::test]
async fn ordered_teardown_with_replay_against_the_gcs_real_backoff() {
    const BOUND: Duration = Duration::from_secs(60);
    let real = Options {
        gc_backoff_max: Duration::from_secs(1000),
        ..Options::default()
    };
    for (foreground, hold) in [
        (false, None),
        (true, None),
        (false, Some(Duration::from_secs(5))),
        (true, Some(Duration::from_secs(5))),
        // The GC retries the refused used object at 5 ms × (2^n − 1) after the parent's DELETE:
        // …, 2.555 s, 5.115 s, 10.235 s. A 5 s teardown ends just before a retry; a 7 s one ends
        // after it, and the used object waits for the next (10.2 s) without replay.
        (false, Some(Duration::from_secs(7))),
    ] {
        let policy = if foreground {
            "foreground"
        } else {
            "background"
        };
        let mut env = Env::start_with("teardown-replay", real).await;
        composition(&mut env, true, hold.is_some()).await;
        let with_replay = teardown(&env, foreground, BOUND, hold)
            .await
            .expect("replay finishes the teardown");
        env.finish().await;

        let mut env = Env::start_with("teardown-gc", real).await;
        composition(&mut env, false, hold.is_some()).await;
        let gc_alone = teardown(&env, foreground, BOUND, hold).await;
        env.finish().await;
        println!(
            "ordered teardown ({policy}, user teardown {hold:?}, GC backoff 5 ms → 1000 s): \
             with replay {with_replay:?}, GC backoff alone {}",
            gc_alone.map_or_else(|| format!("> {BOUND:?} (bound)"), |d| format!("{d:?}"))
        );
        let budget = hold.unwrap_or_default() + Duration::from_secs(2);
        assert!(with_replay < budget, "replay took {with_replay:?}");
    }
}
