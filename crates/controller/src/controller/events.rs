//! Refused DELETEs, replays and break-glass overrides: what their records and Events need from
//! the [`State`] (taken by the event loop, in the order of events) and the tasks that write the
//! record and publish the Events (the wording is `crate::audit`'s and `crate::replay`'s).

use std::collections::BTreeSet;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};
use lien_api::{GROUP, VERSION};
use lien_core::{RelationIndex, Source};
use parking_lot::RwLock;

use super::Shared;
use super::state::State;
use super::terminating::{
    BrokenCycle, CYCLE_BROKEN_REASON, HeldNamespace, NAMESPACE_HELD_CONDITION,
    NAMESPACE_HELD_REASON,
};
use crate::audit::{self, BreakGlass};
use crate::cache::GroupKind;
use crate::desired::ObjectTarget;
use crate::metrics::Metrics;
use crate::refusals;
use crate::replay::{self, DELETION_ATTEMPT_ANNOTATION, DeletionAttempt, Denial, ReplayKey};
use crate::writer::Writer;

pub(super) fn denial_target(st: &State, denial: &Denial) -> Option<ObjectTarget> {
    let key = &denial.object;
    let gk = GroupKind::new(&key.group, &key.kind);
    let kind = st.caches.kind(&gk)?;
    let o = kind
        .objects
        .get(&(key.namespace.clone(), key.name.clone()))?;
    Some(ObjectTarget::new(
        &gk,
        kind,
        key.namespace.as_deref(),
        &key.name,
        o,
    ))
}

fn object_reference(t: &ObjectTarget) -> ObjectReference {
    ObjectReference {
        api_version: Some(t.api_version.clone()),
        kind: Some(t.gk.kind.clone()),
        namespace: t.namespace.clone(),
        name: Some(t.name.clone()),
        uid: Some(t.uid.clone()),
        ..Default::default()
    }
}

/// The object a source is: a Usage, a ClusterUsage or a DependencyRule.
fn source_reference(source: &Source, uid: &str) -> ObjectReference {
    let (kind, namespace, name) = match source {
        Source::Usage { namespace, name } => ("Usage", Some(namespace.clone()), name.clone()),
        Source::ClusterUsage { name } => ("ClusterUsage", None, name.clone()),
        Source::Rule { name } => ("DependencyRule", None, name.clone()),
    };
    ObjectReference {
        api_version: Some(format!("{GROUP}/{VERSION}")),
        kind: Some(kind.into()),
        namespace,
        name: Some(name),
        uid: Some(uid.to_owned()),
        ..Default::default()
    }
}

/// The record Lien sealed on the object of `denial`, as cached, opened, with the object's UID
/// (`None`: no key, no such object, no record, or one that does not verify).
pub(super) fn cached_record(
    st: &State,
    denial: &Denial,
    key: Option<&ReplayKey>,
) -> Option<(String, DeletionAttempt)> {
    let key = key?;
    let object = &denial.object;
    let gk = GroupKind::new(&object.group, &object.kind);
    let o = st.caches.kind(&gk).and_then(|k| {
        k.objects
            .get(&(object.namespace.clone(), object.name.clone()))
    })?;
    let raw = o.annotations.get(DELETION_ATTEMPT_ANNOTATION)?;
    let attempt = replay::open(raw, key, object).ok()?;
    Some((o.uid.clone(), attempt))
}

/// Whether `recorded` (on an object of UID `uid`) will replay it — for this incarnation, not
/// expired: typically a deletion requested with `kubectl lien delete --when-free`. A refusal
/// that asks for no replay must not replace it (the user's request would be lost to someone
/// else's plain `kubectl delete`).
pub(super) fn replay_pending(
    uid: &str,
    recorded: &DeletionAttempt,
    ttl: std::time::Duration,
) -> bool {
    recorded.replay && recorded.uid == uid && !recorded.expired(Timestamp::now(), ttl)
}

/// Publishes the Normal Event of a replay on the object it deleted, naming who asked.
pub(super) async fn replayed(
    recorder: &Recorder,
    metrics: &Metrics,
    target: &ObjectTarget,
    attempt: &DeletionAttempt,
) {
    let event = Event {
        type_: EventType::Normal,
        reason: replay::DELETION_REPLAYED_REASON.into(),
        note: Some(replay::replayed_note(attempt)),
        action: "Delete".into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, &object_reference(target)).await {
        metrics.write_error("event");
        tracing::warn!(error = %e, "publishing the replay's event");
    }
}

/// Publishes the Warning Event of a replay dropped because its requester may no longer delete
/// the object, naming them.
pub(super) async fn replay_not_authorized(
    recorder: &Recorder,
    metrics: &Metrics,
    target: &ObjectTarget,
    attempt: &DeletionAttempt,
    reason: &str,
) {
    let event = Event {
        type_: EventType::Warning,
        reason: replay::REPLAY_NOT_AUTHORIZED_REASON.into(),
        note: Some(truncate_note(replay::refused_note(attempt, reason))),
        action: "Delete".into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, &object_reference(target)).await {
        metrics.write_error("event");
        tracing::warn!(error = %e, "publishing a dropped replay's event");
    }
}

/// An Event's note within the API's 1 KiB (the requester's groups are as long as their
/// identity provider made them).
fn truncate_note(mut note: String) -> String {
    const MAX: usize = 1024;
    if note.len() > MAX {
        let mut cut = MAX - '…'.len_utf8();
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
        note.push('…');
    }
    note
}

/// The record a refused DELETE would leave on `target`.
pub(super) fn attempt_of(denial: &Denial, target: &ObjectTarget) -> DeletionAttempt {
    DeletionAttempt {
        uid: denial.uid.clone().unwrap_or_else(|| target.uid.clone()),
        propagation_policy: denial.propagation_policy.clone(),
        user: denial.user.clone(),
        user_uid: denial.user_uid.clone(),
        groups: denial.groups.clone(),
        extra: denial.extra.clone(),
        time: Timestamp::try_from(denial.time).unwrap_or_else(|_| Timestamp::now()),
        replay: denial.replay,
        source: replay::RecordSource::Refusal,
    }
}

/// Whether `recorded` already says what `attempt` would, and is under
/// [`refusals::RECORD_REFRESH`] old: a repeated refusal then rewrites nothing.
pub(super) fn record_repeats(attempt: &DeletionAttempt, recorded: &DeletionAttempt) -> bool {
    attempt.repeats(recorded, Timestamp::now(), refusals::RECORD_REFRESH)
}

/// What a refused DELETE still has written once its repeats are coalesced
/// ([`refusals`]): the record, unless `keep_pending` (a record that replays it is there
/// already, and this refusal asks for no replay) or `repeats` (the record says the same, and
/// is fresh); its Events, unless `hold_events` (published for the same refusal within the
/// window).
#[derive(Debug, Clone, Copy)]
pub(super) struct Coalesced {
    pub keep_pending: bool,
    pub repeats: bool,
    pub hold_events: bool,
}

/// Writes the record of a refused DELETE and publishes its Warning Events, each unless
/// `coalesced` says it is there already.
#[allow(clippy::too_many_arguments)]
pub(super) async fn record_denial(
    writer: &Writer,
    recorder: &Recorder,
    shared: &Shared,
    key: Option<&ReplayKey>,
    target: Option<ObjectTarget>,
    sources: Vec<(Source, String)>,
    denial: Denial,
    coalesced: Coalesced,
) {
    let Some(target) = target else {
        tracing::warn!(object = %denial.object, "denial for an object not in the caches: not recorded");
        return;
    };
    let attempt = attempt_of(&denial, &target);
    match key {
        Some(_) if coalesced.keep_pending && !denial.replay => {
            tracing::debug!(object = %denial.object, "a pending deletion request is kept over a refusal that asks for no replay");
        }
        Some(_) if coalesced.repeats => {
            shared.metrics.refusal_coalesced("record");
            tracing::debug!(object = %denial.object, user = denial.user, "a repeated refusal: the record on the object says the same");
        }
        Some(key) => {
            let sealed = attempt.seal(key, &denial.object);
            let written = if denial.replay {
                writer.record(&target, Some(&sealed)).await
            } else {
                let object = &denial.object;
                writer
                    .record_unless_replaying(&target, &sealed, |raw, uid| {
                        replay::open(raw, key, object).is_ok_and(|a| a.replay && a.uid == uid)
                    })
                    .await
                    .map(|written| {
                        if !written {
                            tracing::debug!(object = %denial.object, "a pending deletion request is kept over a refusal that asks for no replay");
                        }
                    })
            };
            if let Err(e) = written {
                shared.metrics.write_error(e.category());
                tracing::warn!(error = %e, "recording a denied deletion");
            }
        }
        None => {
            tracing::debug!(object = %denial.object, "no replay key: the refusal is not recorded");
        }
    }
    if coalesced.hold_events {
        shared.metrics.refusal_coalesced("events");
        return;
    }
    let event = Event {
        type_: EventType::Warning,
        reason: audit::DELETION_REFUSED_REASON.into(),
        note: Some(audit::denial_note(&denial)),
        action: "Delete".into(),
        secondary: None,
    };
    publish(recorder, shared, &event, &object_reference(&target)).await;
    let event = Event {
        secondary: Some(object_reference(&target)),
        ..event
    };
    for (source, uid) in sources {
        publish(recorder, shared, &event, &source_reference(&source, &uid)).await;
    }
}

/// The sources (sources and rules, with their UIDs) whose relations blocked a refused DELETE,
/// for its events.
pub(super) fn blocking_sources(
    st: &State,
    index: &RwLock<RelationIndex>,
    denial: &Denial,
) -> Vec<(Source, String)> {
    let sources: BTreeSet<Source> = index
        .read()
        .blockers(&denial.object)
        .map(|r| r.source().to_source())
        .collect();
    sources
        .into_iter()
        .filter_map(|s| st.source_uid(&s).map(str::to_owned).map(|uid| (s, uid)))
        .collect()
}

/// The object a break-glass record is about and the sources it overrode, as event references.
pub(super) fn break_glass_references(
    st: &State,
    record: &BreakGlass,
) -> (ObjectReference, Vec<ObjectReference>) {
    let key = &record.object;
    let gk = GroupKind::new(&key.group, &key.kind);
    // A deleted object may have left the caches already; its kind (and so its apiVersion) is
    // still watched while a usage refers to it. An object not in use may be of a kind Lien does
    // not watch: its Event then names it without an apiVersion, which the API accepts.
    let kind = st.caches.kind(&gk);
    let uid = record.uid.clone().or_else(|| {
        kind.and_then(|k| k.objects.get(&(key.namespace.clone(), key.name.clone())))
            .map(|o| o.uid.clone())
    });
    let object = ObjectReference {
        api_version: kind.map(|k| k.api_version.clone()),
        kind: Some(key.kind.clone()),
        namespace: key.namespace.clone(),
        name: Some(key.name.clone()),
        uid,
        ..Default::default()
    };
    let sources = record
        .sources
        .iter()
        .filter_map(|s| st.source_uid(s).map(|uid| source_reference(s, uid)))
        .collect();
    (object, sources)
}

pub(super) async fn audit_break_glass(
    recorder: &Recorder,
    shared: &Shared,
    (object, sources): (ObjectReference, Vec<ObjectReference>),
    record: &BreakGlass,
) {
    let event = Event {
        type_: EventType::Warning,
        reason: audit::BREAK_GLASS_REASON.into(),
        note: Some(audit::break_glass_note(record)),
        action: audit::event_action(record.action).into(),
        secondary: None,
    };
    publish(recorder, shared, &event, &object).await;
    let event = Event {
        secondary: Some(object),
        ..event
    };
    for reference in &sources {
        publish(recorder, shared, &event, reference).await;
    }
}

/// Announces cycles broken inside namespaces being deleted (`super::terminating`): a Warning
/// Event on each Namespace, naming the objects and the sources.
pub(super) async fn cycles_broken(recorder: &Recorder, shared: &Shared, cycles: &[BrokenCycle]) {
    for cycle in cycles {
        let event = Event {
            type_: EventType::Warning,
            reason: CYCLE_BROKEN_REASON.into(),
            note: Some(cycle.note()),
            action: "Delete".into(),
            secondary: None,
        };
        let namespace = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Namespace".into()),
            name: Some(cycle.namespace.clone()),
            uid: Some(cycle.namespace_uid.clone()),
            ..Default::default()
        };
        publish(recorder, shared, &event, &namespace).await;
    }
}

/// Says what holds each namespace being deleted (`super::terminating`, issue 27): a Warning
/// Event `NamespaceHeld` on the Namespace, and the condition `LienContentHeld` in its status —
/// which `kubectl describe namespace` shows beside the namespace controller's conditions —
/// cleared once nothing Lien enforces holds it. The condition is written with a strategic merge
/// patch of `namespaces/status` keyed by its type, so the namespace controller's conditions,
/// written concurrently, are neither overwritten nor rewritten; Lien writes only its own type.
pub(super) async fn namespaces_held(
    client: &kube::Client,
    recorder: &Recorder,
    shared: &Shared,
    held: &[HeldNamespace],
) {
    let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client.clone());
    for h in held {
        let namespace = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Namespace".into()),
            name: Some(h.namespace.clone()),
            uid: Some(h.namespace_uid.clone()),
            ..Default::default()
        };
        let condition = if h.count > 0 {
            let event = Event {
                type_: EventType::Warning,
                reason: NAMESPACE_HELD_REASON.into(),
                note: Some(h.note()),
                action: "Delete".into(),
                secondary: None,
            };
            publish(recorder, shared, &event, &namespace).await;
            serde_json::json!({
                "type": NAMESPACE_HELD_CONDITION,
                "status": "True",
                "reason": NAMESPACE_HELD_REASON,
                "message": h.note(),
                "lastTransitionTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::now()),
            })
        } else {
            serde_json::json!({"type": NAMESPACE_HELD_CONDITION, "$patch": "delete"})
        };
        let patch = serde_json::json!({"status": {"conditions": [condition]}});
        if let Err(e) = api
            .patch_status(
                &h.namespace,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Strategic(patch),
            )
            .await
        {
            shared.metrics.write_error("namespace_condition");
            tracing::warn!(namespace = %h.namespace, error = %e, "writing the Namespace's condition");
        }
    }
}

async fn publish(recorder: &Recorder, shared: &Shared, event: &Event, reference: &ObjectReference) {
    if let Err(e) = recorder.publish(event, reference).await {
        shared.metrics.write_error("event");
        tracing::warn!(error = %e, "publishing an event");
    }
}
