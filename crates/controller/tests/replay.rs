//! Replay of refused DELETEs and leader election against the sandbox.

mod common;

use std::time::{Duration, Instant, SystemTime};

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use lien_controller::{DELETION_ATTEMPT_ANNOTATION, Denial, LeaderConfig};
use lien_core::ObjectKey;
use serde_json::json;

async fn used_pair(client: &kube::Client, replay: bool) -> ConfigMap {
    let of = create_cm(client, "default", "cluster", json!({})).await;
    create_cm(client, "default", "release", json!({})).await;
    create_usage(
        client,
        "default",
        json!({"metadata": {"name": "u"}, "spec": {
            "of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "cluster"}},
            "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "release"}},
            "replayDeletion": replay}}),
    )
    .await;
    wait_label(client, "default", "cluster", true).await;
    of
}

fn denial(of: &ConfigMap, replay: bool) -> Denial {
    Denial {
        object: ObjectKey::new("", "ConfigMap", Some("default"), "cluster"),
        uid: of.metadata.uid.clone(),
        propagation_policy: Some("Foreground".into()),
        user: "alice".into(),
        time: SystemTime::now(),
        replay,
        message: "in use".into(),
    }
}

async fn wait_recorded(client: &kube::Client) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    wait_for("the attempt to be recorded", DEADLINE, || async {
        let cm = cms.get("cluster").await.ok()?;
        cm.metadata
            .annotations?
            .contains_key(DELETION_ATTEMPT_ANNOTATION)
            .then_some(())
    })
    .await;
}

/// Deletes the user and returns how long the used object took to go after it.
async fn delete_user_and_time_replay(client: &kube::Client) -> Duration {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let started = Instant::now();
    cms.delete("release", &DeleteParams::default())
        .await
        .expect("delete user");
    wait_for("the replayed delete", DEADLINE, || async {
        matches!(cms.get_opt("cluster").await, Ok(None)).then_some(())
    })
    .await;
    started.elapsed()
}

#[tokio::test]
async fn a_refused_delete_is_replayed_when_the_last_user_goes() {
    let (sandbox, client) = sandbox().await;
    let ctl = start(&client, test_config());
    let of = used_pair(&client, true).await;
    ctl.denials.record(denial(&of, true));
    wait_recorded(&client).await;
    let delay = delete_user_and_time_replay(&client).await;
    eprintln!("replay delay after the last user was deleted: {delay:?}");
    assert!(delay < Duration::from_secs(1), "{delay:?}");
    ctl.stop().await;
    sandbox.shutdown().await;
}

#[tokio::test]
async fn no_replay_without_replay_deletion() {
    let (sandbox, client) = sandbox().await;
    let ctl = start(&client, test_config());
    let of = used_pair(&client, false).await;
    ctl.denials.record(denial(&of, false));
    wait_recorded(&client).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.delete("release", &DeleteParams::default())
        .await
        .expect("delete user");
    // The record is forgotten instead, and the object stays.
    wait_for("the record to be forgotten", DEADLINE, || async {
        let cm = cms.get("cluster").await.ok()?;
        (!in_use(&cm)
            && !cm
                .metadata
                .annotations
                .unwrap_or_default()
                .contains_key(DELETION_ATTEMPT_ANNOTATION))
        .then_some(())
    })
    .await;
    assert!(cms.get_opt("cluster").await.expect("get").is_some());
    ctl.stop().await;
    sandbox.shutdown().await;
}

#[tokio::test]
async fn an_expired_record_is_not_replayed() {
    let (sandbox, client) = sandbox().await;
    let ctl = start(&client, test_config());
    let of = used_pair(&client, true).await;
    let old = serde_json::to_string(&json!({
        "uid": of.metadata.uid, "propagationPolicy": "Background", "user": "alice",
        "time": "2020-01-01T00:00:00Z", "replay": true}))
    .expect("json");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.patch(
        "cluster",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {DELETION_ATTEMPT_ANNOTATION: old}}})),
    )
    .await
    .expect("annotate");
    cms.delete("release", &DeleteParams::default())
        .await
        .expect("delete user");
    wait_for("the expired record to be forgotten", DEADLINE, || async {
        let cm = cms.get("cluster").await.ok()?;
        (!in_use(&cm)
            && !cm
                .metadata
                .annotations
                .unwrap_or_default()
                .contains_key(DELETION_ATTEMPT_ANNOTATION))
        .then_some(())
    })
    .await;
    assert!(cms.get_opt("cluster").await.expect("get").is_some());
    ctl.stop().await;
    sandbox.shutdown().await;
}

#[tokio::test]
async fn a_restarted_controller_still_replays() {
    let (sandbox, client) = sandbox().await;
    let ctl = start(&client, test_config());
    let of = used_pair(&client, true).await;
    ctl.denials.record(denial(&of, true));
    wait_recorded(&client).await;
    ctl.stop().await;
    // The user goes while no controller runs; a new one finds the record on the object.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.delete("release", &DeleteParams::default())
        .await
        .expect("delete user");
    assert!(cms.get_opt("cluster").await.expect("get").is_some());
    let ctl = start(&client, test_config());
    wait_for("the replayed delete", DEADLINE, || async {
        matches!(cms.get_opt("cluster").await, Ok(None)).then_some(())
    })
    .await;
    ctl.stop().await;
    sandbox.shutdown().await;
}

fn elected(identity: &str) -> lien_controller::ControllerConfig {
    lien_controller::ControllerConfig {
        leader: Some(LeaderConfig {
            namespace: "default".into(),
            name: "lien".into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(1),
            renew_deadline: Duration::from_millis(800),
            retry_period: Duration::from_millis(100),
        }),
        ..test_config()
    }
}

#[tokio::test]
async fn one_leader_writes_and_another_takes_over() {
    let (sandbox, client) = sandbox().await;
    let one = start(&client, elected("one"));
    let mut one_leader = one.leader.clone();
    one_leader
        .wait_for(|l| *l)
        .await
        .expect("first controller leads");
    let two = start(&client, elected("two"));
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    create_cm(&client, "default", "db", json!({})).await;
    create_usage(
        &client,
        "default",
        json!({"metadata": {"name": "p"}, "spec": {
            "of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "db"}},
            "reason": "r"}}),
    )
    .await;
    wait_label(&client, "default", "db", true).await;
    // Both keep the index (the webhook in each replica answers from it); only one leads.
    wait_for("the follower's index", DEADLINE, || async {
        (two.index.read().len() == 1).then_some(())
    })
    .await;
    assert!(!*two.leader.borrow());
    let lease = leases.get("lien").await.expect("lease");
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("one")
    );
    // The leader shuts down and releases the lease: the other takes over at its next try.
    one.stop().await;
    let started = Instant::now();
    let mut two_leader = two.leader.clone();
    tokio::time::timeout(DEADLINE, two_leader.wait_for(|l| *l))
        .await
        .expect("takeover in time")
        .expect("second controller leads");
    eprintln!(
        "takeover after the leader released: {:?}",
        started.elapsed()
    );
    // And it writes: a new usage is acted on.
    create_cm(&client, "default", "db2", json!({})).await;
    create_usage(
        &client,
        "default",
        json!({"metadata": {"name": "p2"}, "spec": {
            "of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "db2"}},
            "reason": "r"}}),
    )
    .await;
    wait_label(&client, "default", "db2", true).await;
    two.stop().await;
    let lease = leases.get("lien").await.expect("lease");
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity),
        None,
        "released on shutdown"
    );
    sandbox.shutdown().await;
}

#[tokio::test]
async fn a_crashed_leaders_lease_is_taken_over_after_it_expires() {
    let (sandbox, client) = sandbox().await;
    // A leader that crashed: its lease was renewed just now and never will be again.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "lien", "namespace": "default"},
        "spec": {"holderIdentity": "crashed", "leaseDurationSeconds": 1,
                 "renewTime": jiff::Timestamp::now().to_string()}}))
    .expect("lease");
    leases
        .create(&Default::default(), &lease)
        .await
        .expect("lease created");
    let started = Instant::now();
    let two = start(&client, elected("two"));
    let mut leader = two.leader.clone();
    tokio::time::timeout(DEADLINE, leader.wait_for(|l| *l))
        .await
        .expect("takeover in time")
        .expect("leads");
    let waited = started.elapsed();
    eprintln!("takeover of a crashed leader's lease: {waited:?}");
    assert!(
        waited >= Duration::from_millis(900),
        "took over a live lease: {waited:?}"
    );
    let lease = leases.get("lien").await.expect("lease");
    let spec = lease.spec.expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("two"));
    assert_eq!(spec.lease_transitions, Some(1));
    two.stop().await;
    sandbox.shutdown().await;
}
