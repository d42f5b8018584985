//! Replay of refused DELETEs and leader election against the sandbox.

mod common;

use std::time::{Duration, Instant, SystemTime};

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use lien_controller::{DELETION_ATTEMPT_ANNOTATION, DeletionAttempt, Denial, LeaderConfig};
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

fn cluster_key() -> ObjectKey {
    ObjectKey::new("", "ConfigMap", Some("default"), "cluster")
}

fn denial(of: &ConfigMap, replay: bool) -> Denial {
    Denial {
        object: cluster_key(),
        uid: of.metadata.uid.clone(),
        propagation_policy: Some("Foreground".into()),
        user: "alice".into(),
        user_uid: String::new(),
        groups: Vec::new(),
        extra: Default::default(),
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
    // Sealed with Lien's key: only its age keeps it from being replayed.
    let old = DeletionAttempt {
        uid: of.metadata.uid.clone().expect("uid"),
        propagation_policy: Some("Background".into()),
        user: "alice".into(),
        user_uid: String::new(),
        groups: Vec::new(),
        extra: Default::default(),
        time: "2020-01-01T00:00:00Z".parse().expect("time"),
        replay: true,
        source: lien_controller::replay::RecordSource::Refusal,
    }
    .seal(&replay_key(), &cluster_key());
    let old = old.as_str();
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

/// A record Lien did not write — here as a user who may update the object would write it, with
/// every field right but no valid signature — is never replayed: it is removed and the object
/// stays.
#[tokio::test]
async fn a_forged_record_is_ignored_and_removed() {
    let (sandbox, client) = sandbox().await;
    let ctl = start(&client, test_config());
    let of = used_pair(&client, true).await;
    // Another Usage of a ConfigMap keeps the kind watched after `u` goes, as in any cluster
    // where Lien protects more than one ConfigMap.
    create_cm(&client, "default", "other", json!({})).await;
    protect_cm(&client, "default", "keep", "other", "r").await;
    wait_label(&client, "default", "other", true).await;
    let attempt = DeletionAttempt {
        uid: of.metadata.uid.clone().expect("uid"),
        propagation_policy: None,
        user: "someone-else".into(),
        user_uid: String::new(),
        groups: Vec::new(),
        extra: Default::default(),
        time: jiff::Timestamp::now(),
        replay: true,
        source: lien_controller::replay::RecordSource::Refusal,
    };
    let unsigned = serde_json::to_string(&attempt).expect("json");
    // Sealed with a key that is not Lien's.
    let other_key = lien_controller::ReplayKey::generate().expect("key");
    let wrong_key = attempt.seal(&other_key, &cluster_key());
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.delete("release", &DeleteParams::default())
        .await
        .expect("delete user");
    wait_for("the protection to lift", DEADLINE, || async {
        let cm = cms.get("cluster").await.ok()?;
        (!in_use(&cm)).then_some(())
    })
    .await;
    for forged in [unsigned.as_str(), wrong_key.as_str()] {
        cms.patch(
            "cluster",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {DELETION_ATTEMPT_ANNOTATION: forged}}}),
            ),
        )
        .await
        .expect("annotate");
        wait_for("the forged record to be removed", DEADLINE, || async {
            let cm = cms.get("cluster").await.ok()?;
            (!cm.metadata
                .annotations
                .unwrap_or_default()
                .contains_key(DELETION_ATTEMPT_ANNOTATION))
            .then_some(())
        })
        .await;
        assert!(
            cms.get_opt("cluster").await.expect("get").is_some(),
            "a forged record deleted the object"
        );
    }
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
    protect_cm(&client, "default", "p", "db", "r").await;
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

/// Replicas starting together race to create the key's Secret: all end up with one key, and a
/// restart reads it again.
#[tokio::test]
async fn the_replay_key_secret_is_created_once_and_shared() {
    use lien_controller::writer::replay_key_from_secret;
    let (sandbox, client) = sandbox().await;
    let (a, b, c) = tokio::join!(
        replay_key_from_secret(&client, "default", "lien-replay-key"),
        replay_key_from_secret(&client, "default", "lien-replay-key"),
        replay_key_from_secret(&client, "default", "lien-replay-key"),
    );
    let later = replay_key_from_secret(&client, "default", "lien-replay-key").await;
    let attempt = DeletionAttempt {
        uid: "u".into(),
        propagation_policy: None,
        user: "alice".into(),
        user_uid: String::new(),
        groups: Vec::new(),
        extra: Default::default(),
        time: jiff::Timestamp::now(),
        replay: true,
        source: lien_controller::replay::RecordSource::Refusal,
    };
    let seal =
        |k: Result<lien_controller::ReplayKey, _>| attempt.seal(&k.expect("a key"), &cluster_key());
    let first = seal(a);
    assert_eq!(first, seal(b));
    assert_eq!(first, seal(c));
    assert_eq!(first, seal(later));
    // A Secret without a usable key is an error naming it and the fix.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(client.clone(), "default");
    secrets
        .create(
            &Default::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "short"}, "data": {"key": "c2hvcnQ="}}),
            )
            .expect("secret"),
        )
        .await
        .expect("created");
    let err = replay_key_from_secret(&client, "default", "short")
        .await
        .expect_err("too short");
    let text = err.to_string();
    assert!(
        text.contains("default/short") && text.contains("delete the Secret"),
        "{text}"
    );
    sandbox.shutdown().await;
}
