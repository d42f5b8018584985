//! High availability end to end: two `lien run` processes against one sandbox, both behind the
//! webhook's Service, one leading through the Lease in `lien-system` (issue 12).
//!
//! Numbers (takeover time, replay delay after takeover) are printed with `--nocapture` and
//! recorded in docs/benchmarks.md, "High availability (issue 12)".

#[path = "ha/cluster.rs"]
mod cluster;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cluster::Cluster;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(30);

async fn wait_for<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let end = Instant::now() + deadline;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < end,
            "timed out after {deadline:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn create(client: &kube::Client, ns: &str, object: serde_json::Value) {
    let gvk = if object["kind"] == "Usage" {
        kube::core::GroupVersionKind::gvk("lien.dev", "v1alpha1", "Usage")
    } else {
        kube::core::GroupVersionKind::gvk("", "v1", "ConfigMap")
    };
    let mut ar = kube::core::ApiResource::from_gvk(&gvk);
    if object["kind"] == "Usage" {
        ar.plural = "usages".into();
    }
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    api.create(
        &PostParams::default(),
        &serde_json::from_value(object).expect("object"),
    )
    .await
    .expect("create");
}

async fn namespace(client: &kube::Client, name: &str) {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}})).expect("ns"),
        )
        .await
        .expect("namespace");
}

/// Waits until both replicas answer over TLS with certificates the published caBundle
/// trusts, and `identity` of replica 0 holds the Lease.
async fn both_ready(c: &Cluster) {
    ready(c, 0, "a").await;
    ready(c, 1, "b").await;
}

/// Waits until replica `i` (`identity`) answers `/readyz` over TLS with a certificate the
/// published caBundle trusts: ready, as its pod's readiness probe would say.
async fn ready(c: &Cluster, i: usize, identity: &str) {
    let end = Instant::now() + DEADLINE;
    loop {
        match c.get(i, "/readyz").await {
            Ok(_) => break,
            Err(e) => assert!(
                Instant::now() < end,
                "replica {i} does not serve a certificate the caBundle trusts: {e}\n--- log ---\n{}",
                c.log(identity)
            ),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until a dry-run DELETE of `name` is refused with 409.
async fn wait_refused(cms: &Api<ConfigMap>, name: &str) {
    wait_for(&format!("{name}'s DELETE refused"), DEADLINE, || async {
        match cms.delete(name, &DeleteParams::default().dry_run()).await {
            Err(kube::Error::Api(s)) if s.code == 409 => Some(()),
            _ => None,
        }
    })
    .await;
}

/// Starts replica `a` first (so it leads), then `b`; protects ConfigMap `used` in `ns`.
async fn two_replicas(lease: &[&str], ns: &str, replay: bool) -> Cluster {
    two_replicas_of(2, lease, ns, replay).await
}

/// As [`two_replicas`], with `slots` addresses behind the Service (the first two running).
async fn two_replicas_of(slots: usize, lease: &[&str], ns: &str, replay: bool) -> Cluster {
    two_replicas_of_bin(None, slots, lease, ns, replay).await
}

/// [`two_replicas_of`], `a` and `b` running `bin` (an earlier version's) if given.
async fn two_replicas_of_bin(
    bin: Option<&std::path::Path>,
    slots: usize,
    lease: &[&str],
    ns: &str,
    replay: bool,
) -> Cluster {
    let mut c = Cluster::start(slots).await;
    c.spawn_of(bin, 0, "a", lease);
    wait_for("a to lead", DEADLINE, || async {
        (c.lease_holder().await.as_deref() == Some("a")).then_some(())
    })
    .await;
    c.spawn_of(bin, 1, "b", lease);
    both_ready(&c).await;
    namespace(&c.client, ns).await;
    for name in ["used", "user"] {
        create(
            &c.client,
            ns,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns}}),
        )
        .await;
    }
    create(
        &c.client,
        ns,
        json!({"apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
        "metadata": {"name": "user-uses-used", "namespace": ns},
        "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "used"}},
                 "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "user"}},
                 "replayDeletion": replay}}),
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(c.client.clone(), ns);
    wait_refused(&cms, "used").await;
    c
}

const DENIED: &[&str] = &["operation=\"DELETE\"", "outcome=\"denied\""];

/// Stops the [`probe_deletes`] tasks and gathers their answers.
async fn stop_probes(
    stop: &AtomicBool,
    probes: Vec<tokio::task::JoinHandle<Vec<String>>>,
) -> Vec<String> {
    stop.store(true, Ordering::Relaxed);
    let mut answers = Vec::new();
    for probe in probes {
        answers.extend(probe.await.expect("probe task"));
    }
    answers
}

/// The answers that are not a 409 refusal.
fn not_refused(answers: &[String]) -> Vec<&String> {
    answers.iter().filter(|a| !a.starts_with("409 ")).collect()
}

/// `tasks` tasks sending dry-run DELETEs of ConfigMap `used` until `stop`, `pause` apart; each
/// returns its answers (`409 <message>`, `error …` or `allowed`).
fn probe_deletes(
    cms: &Api<ConfigMap>,
    stop: &Arc<AtomicBool>,
    tasks: usize,
    pause: Duration,
) -> Vec<tokio::task::JoinHandle<Vec<String>>> {
    (0..tasks)
        .map(|_| {
            let cms = cms.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut answers = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    answers.push(
                        match cms.delete("used", &DeleteParams::default().dry_run()).await {
                            Err(kube::Error::Api(s)) => format!("{} {}", s.code, s.message),
                            Err(e) => format!("error {e}"),
                            Ok(_) => "allowed".to_owned(),
                        },
                    );
                    if !pause.is_zero() {
                        tokio::time::sleep(pause).await;
                    }
                }
                answers
            })
        })
        .collect()
}

/// Both replicas answer the webhook with certificates from the one CA the caBundle holds;
/// SIGTERM of the leader: every review in flight is answered (409, never a 500 or a connection
/// error), the Lease is released at once and the other replica leads within 2 s (the lease
/// duration here is 10 s, so only the release explains it).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn both_replicas_answer_and_sigterm_hands_over_at_once() {
    let lease = [
        "--lease-duration=10s",
        "--lease-renew-deadline=5s",
        "--lease-retry-period=200ms",
    ];
    let mut c = two_replicas(&lease, "ha-term", false).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.client.clone(), "ha-term");
    assert_eq!(c.metric(0, "lien_controller_leader", &[]).await, 1.0);
    assert_eq!(c.metric(1, "lien_controller_leader", &[]).await, 0.0);
    let b_denied_before = c.metric(1, "lien_webhook_requests_total", DENIED).await;

    // A burst of concurrent dry-run DELETEs across the SIGTERM.
    let stop = Arc::new(AtomicBool::new(false));
    let burst = probe_deletes(&cms, &stop, 8, Duration::ZERO);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let term = Instant::now();
    c.sigterm(0);
    // Poll the Lease: the release (empty holder) may last only until b's next try.
    let mut released = None;
    let takeover = loop {
        match c.lease_holder().await.as_deref() {
            Some("b") => break term.elapsed(),
            Some("") => {
                released.get_or_insert(term.elapsed());
            }
            _ => {}
        }
        assert!(term.elapsed() < Duration::from_secs(5), "b never led");
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let exited = wait_for("a to exit", DEADLINE, || {
        let status = c.exited(0);
        async move { status }
    })
    .await;
    let exit_after = term.elapsed();
    // Keep the burst going on the survivor for a while.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let answers = stop_probes(&stop, burst).await;
    let bad = not_refused(&answers);
    assert!(
        bad.is_empty(),
        "{} of {} reviews were not refused with 409: {:?}\n--- a ---\n{}",
        bad.len(),
        answers.len(),
        &bad[..bad.len().min(5)],
        c.log("a")
    );
    assert!(exited.success(), "a exits cleanly on SIGTERM: {exited}");
    assert!(
        takeover <= Duration::from_secs(2),
        "b led {takeover:?} after the SIGTERM (lease duration 10 s): the lease was not released"
    );
    // With a gone, the Service's calls go to b, which answers them.
    wait_refused(&cms, "used").await;
    assert!(c.metric(1, "lien_webhook_requests_total", DENIED).await > b_denied_before);
    assert!(
        c.metric(
            1,
            "lien_webhook_delete_decisions_total",
            &["result=\"denied\"", "source=\"Usage\""]
        )
        .await
            > 0.0
    );
    assert_eq!(c.metric(1, "lien_controller_leader", &[]).await, 1.0);
    eprintln!(
        "HA sigterm: {} concurrent reviews across the SIGTERM, all 409; lease released after {:?}, b leads after {takeover:?}, a exited after {exit_after:?}",
        answers.len(),
        released.unwrap_or(takeover),
    );
}

/// What `helm upgrade` (or `kubectl rollout restart`) does to the chart's Deployment — a
/// rolling update with `maxSurge: 1, maxUnavailable: 0` — replayed with processes: a new
/// replica starts and is ready before an old one gets SIGTERM, twice. Every DELETE of an object
/// in use is refused with 409 throughout (none let through, none a 500 or a connection error),
/// a new replica leads afterwards, and a protection made after the rollout holds. The old
/// replicas run the previous version (`LIEN_PREVIOUS_BIN`, built by scripts/previous-lien.sh
/// from the commit scripts/previous-version names — scripts/test.sh sets it): an upgrade
/// between two versions, as `helm upgrade` to a new release does; without it, this build to
/// itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rolling_update_refuses_every_delete_of_an_object_in_use_throughout() {
    let lease = [
        "--lease-duration=10s",
        "--lease-renew-deadline=5s",
        "--lease-retry-period=200ms",
    ];
    let previous = std::env::var_os("LIEN_PREVIOUS_BIN").map(std::path::PathBuf::from);
    match &previous {
        Some(bin) => eprintln!("rolling from {} to this build", bin.display()),
        None => eprintln!("no LIEN_PREVIOUS_BIN: rolling from this build to itself"),
    }
    let mut c = two_replicas_of_bin(previous.as_deref(), 4, &lease, "ha-rollout", false).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.client.clone(), "ha-rollout");
    let stop = Arc::new(AtomicBool::new(false));
    let probes = probe_deletes(&cms, &stop, 4, Duration::from_millis(2));
    // The surge: `c` ready, then `a` (the leader) stopped; `d` ready, then `b` stopped.
    for (new, old) in [(2, 0), (3, 1)] {
        let (new_id, old_id) = (["a", "b", "c", "d"][new], ["a", "b", "c", "d"][old]);
        c.spawn(new, new_id, &lease);
        ready(&c, new, new_id).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        c.sigterm(old);
        let status = wait_for(&format!("{old_id} to exit"), DEADLINE, || {
            let status = c.exited(old);
            async move { status }
        })
        .await;
        assert!(status.success(), "{old_id} exits cleanly: {status}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let leader = wait_for("a new replica to lead", DEADLINE, || async {
        c.lease_holder().await.filter(|h| h == "c" || h == "d")
    })
    .await;
    let answers = stop_probes(&stop, probes).await;
    let bad = not_refused(&answers);
    assert!(
        bad.is_empty(),
        "{} of {} DELETEs during the rollout were not refused with 409: {:?}",
        bad.len(),
        answers.len(),
        &bad[..bad.len().min(5)],
    );
    assert!(answers.len() > 50, "{} DELETEs probed", answers.len());
    // The new replicas protect what is protected after the rollout, too.
    create(
        &c.client,
        "ha-rollout",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "later", "namespace": "ha-rollout"}}),
    )
    .await;
    create(
        &c.client,
        "ha-rollout",
        json!({"apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
        "metadata": {"name": "protect-later", "namespace": "ha-rollout"},
        "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "later"}},
                 "reason": "created after the rollout"}}),
    )
    .await;
    wait_refused(&cms, "later").await;
    eprintln!(
        "rolling update: {} DELETEs across two surges, all 409; {leader} leads",
        answers.len()
    );
}

/// `kill -9` of the leader while a replay is pending: the other replica leads within the lease
/// duration and replays the refused DELETE exactly once, when the user is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_of_the_leader_with_a_replay_pending_replays_once() {
    let lease_duration = Duration::from_secs(2);
    let lease = [
        "--lease-duration=2s",
        "--lease-renew-deadline=1500ms",
        "--lease-retry-period=200ms",
    ];
    let mut c = two_replicas(&lease, "ha-kill", true).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.client.clone(), "ha-kill");
    // The refused DELETE, recorded for replay (by a: the Service sends to it first).
    let refused = cms.delete("used", &DeleteParams::default()).await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(s)) if s.code == 409),
        "{refused:?}"
    );
    wait_for("the refusal to be recorded", DEADLINE, || async {
        cms.get("used")
            .await
            .ok()?
            .metadata
            .annotations?
            .contains_key(lien_controller::replay::DELETION_ATTEMPT_ANNOTATION)
            .then_some(())
    })
    .await;
    // The gauge follows the record once a's controller has seen its own write come back
    // through its watch, which may be after the test reads the annotation.
    wait_for("a to count the pending replay", DEADLINE, || async {
        (c.metric(0, "lien_controller_replays_pending", &[]).await == 1.0).then_some(())
    })
    .await;
    assert_eq!(c.metric(0, "lien_controller_replays_total", &[]).await, 0.0);

    let kill = Instant::now();
    c.kill9(0);
    // The user goes while nobody leads: only the next leader can replay.
    cms.delete("user", &DeleteParams::default())
        .await
        .expect("the user is not protected");
    let takeover = wait_for("b to lead", DEADLINE, || async {
        (c.lease_holder().await.as_deref() == Some("b")).then(|| kill.elapsed())
    })
    .await;
    wait_for("the replayed DELETE", DEADLINE, || async {
        cms.get_opt("used").await.ok()?.is_none().then_some(())
    })
    .await;
    let gone = kill.elapsed();
    assert!(
        takeover <= lease_duration + Duration::from_millis(800),
        "b led {takeover:?} after a's kill -9 (lease duration {lease_duration:?})\n--- b ---\n{}",
        c.log("b")
    );
    // Exactly once: b replayed once, and a, killed before the user was deleted, never could
    // (a replay waits for the user to be gone); nothing is left to replay. (The counter moves
    // just after the DELETE's answer, so it may lag the object's disappearance a little.)
    let replays = wait_for("b to count its replay", DEADLINE, || async {
        let n = c.metric(1, "lien_controller_replays_total", &[]).await;
        (n > 0.0).then_some(n)
    })
    .await;
    assert_eq!(replays, 1.0);
    // The gauge is computed when a pass is planned, before its replay runs: the next pass
    // (after the DELETE's watch event) finds nothing pending.
    wait_for("b to find nothing pending", DEADLINE, || async {
        (c.metric(1, "lien_controller_replays_pending", &[]).await == 0.0).then_some(())
    })
    .await;
    // Nothing more happens later either.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(c.metric(1, "lien_controller_replays_total", &[]).await, 1.0);
    eprintln!(
        "HA kill -9: b leads {takeover:?} after the kill (lease duration {lease_duration:?}); the object is gone {gone:?} after the kill, {:?} after the takeover",
        gone.saturating_sub(takeover)
    );
}
