//! Events: a refused DELETE and a break-glass override are reported as Kubernetes Warning Events
//! on the object and on the Usages involved, naming who did it and why.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::harness::*;

const ATTEMPT: &str = "lien.dev/deletion-attempt";
const BREAK_GLASS: &str = "lien.dev/break-glass";

/// `used` in use by `app` through the Usage `name`, with `reason`.
async fn in_use(env: &mut Env, name: &str, used: &str, reason: &str) {
    env.usage(
        name,
        json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": used}},
               "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "app"}},
               "reason": reason}),
    )
    .await;
    wait_label(&env.configmaps(), used, true).await;
}

/// ConfigMaps `app` and `db`, `db` in use by `app` through the Usage `app-uses-db`.
async fn app_uses_db(env: &mut Env) {
    for name in ["app", "db"] {
        env.configmap(name, json!({})).await;
    }
    in_use(env, "app-uses-db", "db", "the app keeps its orders in db").await;
}

fn note(e: &Event) -> &str {
    e.note.as_deref().unwrap_or_default()
}

/// The one Warning event of `events`, with `action` (one refusal: one event, not a series).
fn the_warning<'e>(events: &'e [Event], action: &str) -> &'e Event {
    let [event] = events else {
        panic!("one event, got {events:#?}");
    };
    assert_eq!(event.type_.as_deref(), Some("Warning"), "{event:#?}");
    assert_eq!(event.action.as_deref(), Some(action), "{event:#?}");
    assert!(event.series.is_none(), "published once: {event:#?}");
    event
}

/// A refused DELETE produces a Warning `DeletionRefused` event on the used object and on the
/// Usage that blocked it, naming who tried and why it was refused; a refused dry run produces
/// neither an event nor a replay record.
#[tokio::test]
async fn a_refused_delete_is_a_warning_event_on_the_object_and_the_usage_and_a_dry_run_leaves_no_trace()
 {
    let mut env = Env::start("events-refused").await;
    let ns = env.ns.clone();
    let user = env.user().await;
    app_uses_db(&mut env).await;
    env.configmap("cache", json!({})).await;
    in_use(&mut env, "app-uses-cache", "cache", "the app warms it").await;
    let cms = env.configmaps();

    // The dry run first: had it left a record, the controller would have taken it before the
    // real refusal's (one ordered channel from the webhook), so by the time the real one's
    // events are visible, the dry run's would be too.
    let err = cms
        .delete("cache", &DeleteParams::default().dry_run())
        .await
        .expect_err("the dry run is refused like the real thing");
    assert_eq!(api_error(err).0, 409);
    let err = cms
        .delete("db", &DeleteParams::default())
        .await
        .expect_err("the DELETE is refused");
    let (code, message) = api_error(err);
    assert_eq!(code, 409);
    let who = format!(
        "cannot delete ConfigMap {ns}/db: it is in use by ConfigMap {ns}/app (Usage \
         {ns}/app-uses-db: the app keeps its orders in db)"
    );
    let next = format!(
        "not replayed: to have Lien delete it once free, run \
         `kubectl lien delete --when-free configmap/db -n {ns}`"
    );
    assert!(
        message.contains(&format!("{who}.\n{next}.\nTo free it now, ")),
        "{message}"
    );
    // The Event says who and what next on one line.
    let refusal = format!("{who}; {next}");

    let on_object = env.wait_events("ConfigMap", "db", "DeletionRefused").await;
    let on_object = the_warning(&on_object, "Delete");
    assert_eq!(
        note(on_object),
        format!("DELETE by {user} refused: {refusal}")
    );
    assert_eq!(
        on_object.regarding.as_ref().and_then(|r| r.uid.clone()),
        cms.get("db").await.expect("db").metadata.uid,
        "the event regards this incarnation of db"
    );

    let on_usage = env
        .wait_events("Usage", "app-uses-db", "DeletionRefused")
        .await;
    let on_usage = the_warning(&on_usage, "Delete");
    assert_eq!(note(on_usage), note(on_object));
    let related = on_usage
        .related
        .as_ref()
        .expect("the usage's event names the object");
    assert_eq!(
        (related.kind.as_deref(), related.name.as_deref()),
        (Some("ConfigMap"), Some("db"))
    );

    // The real refusal was recorded for replay; the dry run was not, and produced no event.
    let db = wait_for("the refusal to be recorded", DEADLINE, || async {
        cms.get("db").await.ok().filter(has_attempt)
    })
    .await;
    assert!(has_attempt(&db));
    assert!(!has_attempt(&cms.get("cache").await.expect("cache")));
    for (kind, name) in [("ConfigMap", "cache"), ("Usage", "app-uses-cache")] {
        let events = env.events(kind, name, "DeletionRefused").await;
        assert!(events.is_empty(), "the dry run left events: {events:#?}");
    }
    env.finish().await;
}

/// A client retrying a refused DELETE in a loop costs one record and one Event per object, user
/// and refusal — not one per retry, which at a few hundred a second saturates kube-apiserver
/// (docs/benchmarks.md). Another user's refusal of the same object is new: recorded and
/// published at once.
#[tokio::test]
async fn a_delete_retried_in_a_loop_is_recorded_and_reported_once_and_another_users_at_once() {
    let mut env = Env::start("events-retried").await;
    let ns = env.ns.clone();
    let alice = env.user().await;
    app_uses_db(&mut env).await;
    let cms = env.configmaps();
    let refused = |cms: Api<ConfigMap>| async move {
        let err = cms
            .delete("db", &DeleteParams::default())
            .await
            .expect_err("db is in use");
        assert_eq!(api_error(err).0, 409);
    };
    refused(cms.clone()).await;
    let record = |cm: &ConfigMap| {
        cm.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ATTEMPT).cloned())
    };
    let first = wait_for("the refusal to be recorded", DEADLINE, || async {
        cms.get("db").await.ok().as_ref().and_then(record)
    })
    .await;
    env.wait_events("ConfigMap", "db", "DeletionRefused").await;

    for _ in 0..20 {
        refused(cms.clone()).await;
    }
    assert_eq!(
        record(&cms.get("db").await.expect("db")).as_deref(),
        Some(first.as_str()),
        "the record already said it: not rewritten for a retry"
    );

    // Bob's refusal comes after Alice's retries (one ordered channel from the webhook): once it
    // is visible, theirs would be too.
    let bob = format!("bob-{ns}");
    grant(
        &mut env,
        &ns,
        "configmap-deleter",
        &bob,
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["delete"]}]),
    )
    .await;
    let as_bob: Api<ConfigMap> =
        Api::namespaced(env.client_as(&bob, &["system:authenticated"]).await, &ns);
    refused(as_bob).await;
    let by = |user: &str| format!("DELETE by {user} refused");
    let events = wait_for("Bob's refusal to be an Event", DEADLINE, || async {
        let events = env.events("ConfigMap", "db", "DeletionRefused").await;
        events
            .iter()
            .any(|e| note(e).starts_with(&by(&bob)))
            .then_some(events)
    })
    .await;
    let alices: Vec<Event> = events
        .into_iter()
        .filter(|e| note(e).starts_with(&by(&alice)))
        .collect();
    the_warning(&alices, "Delete");
    let on_usage = env.events("Usage", "app-uses-db", "DeletionRefused").await;
    assert_eq!(
        on_usage
            .iter()
            .filter(|e| note(e).starts_with(&by(&alice)))
            .count(),
        1,
        "{on_usage:#?}"
    );
    wait_for("Bob's refusal to be recorded", DEADLINE, || async {
        record(&cms.get("db").await.expect("db")).filter(|r| r.contains(&bob))
    })
    .await;
    env.finish().await;
}

fn has_attempt(cm: &ConfigMap) -> bool {
    cm.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ATTEMPT))
}

fn break_glass(reason: &str) -> Patch<serde_json::Value> {
    Patch::Merge(json!({"metadata": {"annotations": {BREAK_GLASS: reason}}}))
}

/// Break-glass, with the group `developers` allowed to break glass: a user outside it cannot set
/// the annotation; the sandbox's second user, in it, sets it and deletes an object in use, and a
/// Warning `BreakGlass` event on the object and on the overridden Usage names that user, the
/// reason and the relation overridden.
#[tokio::test]
async fn break_glass_is_only_for_its_group_and_is_audited_as_events_naming_user_and_reason() {
    let mut env = Env::start_with(
        "events-break-glass",
        Options {
            break_glass_groups: &["developers"],
            ..Options::default()
        },
    )
    .await;
    let ns = env.ns.clone();
    for name in ["app", "db"] {
        env.configmap(name, json!({})).await;
    }
    in_use(&mut env, "app-uses-db", "db", "orders").await;
    let cms = env.configmaps();

    // The harness's user is not in a break-glass group (on the sandbox: the admin, in
    // `system:masters`; on a real cluster break-glass is off unless installed otherwise).
    let err = cms
        .patch("db", &PatchParams::default(), &break_glass("INC-42"))
        .await
        .expect_err("only break-glass groups may set the annotation");
    let (code, message) = api_error(err);
    assert_eq!(code, 403, "{message}");
    assert!(
        message.contains(&format!(
            "cannot set annotation {BREAK_GLASS} on ConfigMap {ns}/db"
        )),
        "{message}"
    );
    if env.is_local() {
        assert!(
            message.ends_with(
                "user \"sandbox-admin\" is not in a break-glass group (developers); ask a member \
                 to set it"
            ),
            "{message}"
        );
    }

    let Some((client, user)) = env.second_user().await else {
        println!(
            "break-glass by a member of a break-glass group: skipped on this cluster \
             (LIEN_E2E_KUBECONFIG): the harness has a single identity there and cannot \
             authenticate as a member of Lien's configured break-glass groups; it runs on the \
             sandbox, whose second user is in the group `developers`"
        );
        env.finish().await;
        return;
    };
    let as_member: Api<ConfigMap> = Api::namespaced(client, &ns);
    let reason = "INC-42: restore db from backup";
    as_member
        .patch("db", &PatchParams::default(), &break_glass(reason))
        .await
        .expect("a break-glass group member sets the annotation");
    let armed = env.wait_events("ConfigMap", "db", "BreakGlass").await;
    let armed = the_warning(&armed, "Update");
    assert_eq!(
        note(armed),
        format!(
            "{BREAK_GLASS} set by {user} (reason: {reason:?}): the object may now be deleted \
             although it is in use by ConfigMap {ns}/app (Usage {ns}/app-uses-db: orders)"
        )
    );

    as_member
        .delete("db", &DeleteParams::default())
        .await
        .expect("the object in use is deleted under break-glass");
    wait_gone(&cms, "db", DEADLINE).await;
    let expected = format!(
        "DELETE by {user} allowed under {BREAK_GLASS} (reason: {reason:?}), overriding: it is in \
         use by ConfigMap {ns}/app (Usage {ns}/app-uses-db: orders)"
    );
    let used = wait_for("the break-glass DELETE's event", DEADLINE, || async {
        env.events("ConfigMap", "db", "BreakGlass")
            .await
            .into_iter()
            .find(|e| e.action.as_deref() == Some("Delete"))
    })
    .await;
    assert_eq!(used.type_.as_deref(), Some("Warning"));
    assert_eq!(note(&used), expected);

    let on_usage = wait_for("both events on the overridden Usage", DEADLINE, || async {
        Some(env.events("Usage", "app-uses-db", "BreakGlass").await).filter(|e| e.len() == 2)
    })
    .await;
    let deleted = on_usage
        .iter()
        .find(|e| e.action.as_deref() == Some("Delete"))
        .expect("the DELETE's event on the Usage");
    assert_eq!(deleted.type_.as_deref(), Some("Warning"));
    assert_eq!(note(deleted), expected);
    assert_eq!(
        deleted.related.as_ref().and_then(|r| r.name.as_deref()),
        Some("db")
    );
    // No refusal was recorded: nothing was refused.
    let refused = env.events("ConfigMap", "db", "DeletionRefused").await;
    assert!(refused.is_empty(), "{refused:#?}");
    env.finish().await;
}
