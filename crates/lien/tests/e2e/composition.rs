//! Usages inside compositions: a parent controls the used object, its user and the Usage
//! between them (selected with `matchControllerRef`), and the parent's teardown must still
//! delete the user before the used object (issue 7 §3).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::harness::*;

/// How often kube-controller-manager's garbage collector looks for new kinds to watch (a
/// hard-coded 30 s): a Usage kind installed just before is not collected until then.
const GC_DISCOVERY_RESYNC: Duration = Duration::from_secs(30);

const SLOW: &str = "example.org/slow-teardown";
/// How long the user's own teardown holds it Terminating at least (it lasts until the garbage
/// collector has stripped the Usage's reference to the deleted parent too).
const HOLD: Duration = Duration::from_millis(2500);

/// The parent Secret `xr` controls ConfigMaps `used` and `using` (with a finalizer that holds
/// it Terminating) and the Usage `using-uses-used`, which selects both by label with
/// `matchControllerRef: true` and asks for replay.
async fn composition(env: &mut Env) {
    let ns = env.ns.clone();
    let xr = env
        .create(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "xr", "namespace": ns}}))
        .await;
    let owned = json!([{"apiVersion": "v1", "kind": "Secret", "name": "xr",
        "uid": xr.metadata.uid, "controller": true, "blockOwnerDeletion": true}]);
    env.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "used", "namespace": ns, "labels": {"role": "used"},
                     "ownerReferences": owned}}))
        .await;
    env.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "using", "namespace": ns, "labels": {"role": "using"},
                     "ownerReferences": owned, "finalizers": [SLOW]}}))
        .await;
    let selector = |role: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "resourceSelector": {"matchLabels": {"role": role}, "matchControllerRef": true}})
    };
    env.create(json!({"apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
        "metadata": {"name": "using-uses-used", "namespace": ns, "ownerReferences": owned},
        "spec": {"of": selector("used"), "by": selector("using"), "replayDeletion": true}}))
        .await;
    wait_label(&env.configmaps(), "used", true).await;
}

/// The Usage's `status.by.count`, `None` while it has none (or the Usage is gone).
async fn by_count(env: &Env) -> Option<u32> {
    let u = env.usages().get_opt("using-uses-used").await.ok()??;
    Some(u.status?.by?.count)
}

/// Deleting the parent (`foreground` or background propagation) while the user's teardown
/// holds it Terminating: the used object stays, refused, as long as the user exists, and the
/// refused DELETE is replayed as soon as the user is gone.
async fn teardown_keeps_the_used_object_until_the_user_is_gone(name: &str, foreground: bool) {
    let mut env = Env::start_with(
        name,
        Options {
            // The GC's real backoff: its refused retries of `used` come at 2.5 s, 5.1 s, …, so
            // a prompt deletion after the user goes is Lien's replay, not a GC retry.
            gc_backoff_max: Duration::from_secs(1000),
            ..Options::default()
        },
    )
    .await;
    composition(&mut env).await;
    let cms: Api<ConfigMap> = env.configmaps();
    let err = cms
        .delete("used", &DeleteParams::default())
        .await
        .expect_err("the used object's DELETE is refused");
    assert_eq!(api_error(err).0, 409);
    wait_for("the refusal to be recorded", DEADLINE, || async {
        cms.get("used")
            .await
            .ok()
            .and_then(|c| c.metadata.annotations)
            .filter(|a| a.contains_key("lien.dev/deletion-attempt"))
    })
    .await;
    wait_for("status.by.count = 1", DEADLINE, || async {
        (by_count(&env).await == Some(1)).then_some(())
    })
    .await;

    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &env.ns);
    let params = if foreground {
        DeleteParams::foreground()
    } else {
        DeleteParams::background()
    };
    secrets.delete("xr", &params).await.expect("xr's DELETE");
    wait_for("the user to be Terminating", DEADLINE, || async {
        cms.get("using")
            .await
            .ok()
            .and_then(|c| c.metadata.deletion_timestamp)
    })
    .await;
    // While the user's own teardown lasts, it is a user: the used object stays and the Usage
    // still counts it — for HOLD at least, and under background propagation until the Usage
    // has lost its reference to the deleted parent too (the GC strips references to absent
    // owners while another owner is solid: at once on the sandbox; on kube-controller-manager
    // once its garbage collector watches the Usage kind, which it notices at its next discovery
    // resync, up to 30 s after the CRD was installed). Under foreground propagation the real
    // GC looks at the Usage again only when the parent's deletion is requeued — by a
    // dependent's change, such as the user going — so the reference may stay until then:
    // nothing here depends on it.
    let held = Instant::now();
    // The collector's discovery resync comes on top of the usual deadline: CI's real tier, under
    // load, once saw the reference stay for 60 s.
    let end = held + scaled(DEADLINE) + GC_DISCOVERY_RESYNC;
    loop {
        let using = cms.get_opt("using").await.expect("GET using");
        assert!(using.is_some(), "the user is held by its finalizer");
        assert!(
            cms.get_opt("used").await.expect("GET used").is_some(),
            "the used object is deleted {:?} after its user became Terminating, while the user \
             still exists",
            held.elapsed()
        );
        let count = by_count(&env).await;
        assert!(
            count.is_some_and(|c| c >= 1),
            "status.by.count is {count:?} while the user still exists"
        );
        let usage = env
            .usages()
            .get("using-uses-used")
            .await
            .expect("the Usage");
        let owners = usage.metadata.owner_references.unwrap_or_default();
        let stripped = owners.iter().all(|o| o.kind != "Secret");
        if held.elapsed() >= HOLD && (stripped || foreground) {
            break;
        }
        assert!(
            Instant::now() < end,
            "the GC did not remove the reference to the parent deleted in the background: {owners:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The user's teardown finishes: the used object goes by replay, promptly.
    cms.patch(
        "using",
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("the user's teardown finishes");
    let released = Instant::now();
    wait_gone(&cms, "using", DEADLINE).await;
    wait_gone(&cms, "used", DEADLINE).await;
    let delay = released.elapsed();
    println!("composition teardown (foreground: {foreground}): used gone {delay:?} after the user");
    assert!(delay < Duration::from_secs(2), "replay took {delay:?}");
    wait_gone(&env.usages(), "using-uses-used", DEADLINE).await;
    wait_gone(&secrets, "xr", DEADLINE).await;
    env.finish().await;
}

#[tokio::test]
async fn composition_background_teardown_keeps_the_used_object_while_the_user_terminates() {
    teardown_keeps_the_used_object_until_the_user_is_gone("comp-xr-bg", false).await;
}

#[tokio::test]
async fn composition_foreground_teardown_keeps_the_used_object_while_the_user_terminates() {
    teardown_keeps_the_used_object_until_the_user_is_gone("comp-xr-fg", true).await;
}
