//! Replay of refused DELETEs (DESIGN.md §3).
//!
//! # Data model
//!
//! When the webhook refuses a non-dry-run DELETE it hands the controller a [`Denial`]. The
//! controller records it **on the object itself**, as the annotation
//! [`DELETION_ATTEMPT_ANNOTATION`] holding a [`DeletionAttempt`] in JSON — so the record survives
//! restarts and leader changes: a new leader finds it in its caches (which keep `lien.dev/`
//! annotations) with no extra state. The record also says whether a blocking relation asked for
//! replay at the time of the denial, because by the time the last relation goes, the Usage that
//! said so is usually gone too.
//!
//! [`replay_actions`] is pure: for every cached object with a record it decides whether to
//! re-issue the DELETE now (the object is not in use any more, replay was asked for, the record
//! is for this incarnation and not expired) or to forget the record (expired, another
//! incarnation, replay not asked for and nothing blocks any more). The writer re-issues the
//! DELETE with a UID precondition and the recorded propagation policy, and keeps retrying until
//! the object is gone, because every failed pass schedules another.

use std::time::Duration;

use jiff::Timestamp;
use lien_core::RelationIndex;
use serde::{Deserialize, Serialize};

use crate::cache::Caches;
use crate::desired::ObjectTarget;

/// The annotation that records a refused DELETE on the object.
pub const DELETION_ATTEMPT_ANNOTATION: &str = "lien.dev/deletion-attempt";
/// How long a recorded attempt stays valid by default: lifting a protection days later must not
/// delete by surprise.
pub const DEFAULT_REPLAY_TTL: Duration = Duration::from_secs(24 * 3600);

/// A refused DELETE, as the webhook reports it (the record type both share, from `lien_core`).
pub use lien_core::seams::Denial;

/// The durable record of a refused DELETE.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeletionAttempt {
    /// The UID of the object the DELETE was for.
    pub uid: String,
    /// The propagation policy to re-issue it with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub propagation_policy: Option<String>,
    /// Who tried.
    pub user: String,
    /// When.
    pub time: Timestamp,
    /// Whether a blocking relation asked for the DELETE to be replayed.
    #[serde(default)]
    pub replay: bool,
}

impl DeletionAttempt {
    /// Whether the record is older than `ttl` at `now`.
    pub fn expired(&self, now: Timestamp, ttl: Duration) -> bool {
        let age = now.duration_since(self.time);
        age.as_secs() >= 0 && age.unsigned_abs() > ttl
    }
}

/// What to do about one recorded attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayAction {
    /// Re-issue the DELETE now.
    Delete {
        /// The object.
        target: ObjectTarget,
        /// The record.
        attempt: DeletionAttempt,
    },
    /// Remove the record.
    Forget {
        /// The object.
        target: ObjectTarget,
        /// Why, for the log.
        why: &'static str,
    },
}

/// Decides, for every cached object with a recorded attempt, what to do. Nothing happens to an
/// object still in use, nor anything at all before the state is `settled` (a restarting
/// controller has not re-derived every relation yet, and "not in use" would be a guess).
pub fn replay_actions(
    index: &RelationIndex,
    caches: &Caches,
    settled: bool,
    now: Timestamp,
    ttl: Duration,
) -> Vec<ReplayAction> {
    let mut out = Vec::new();
    if !settled {
        return out;
    }
    for (gk, kind) in caches.kinds() {
        for ((ns, name), o) in &kind.objects {
            let Some(raw) = o.annotations.get(DELETION_ATTEMPT_ANNOTATION) else {
                continue;
            };
            if o.deleting {
                continue;
            }
            let target = || ObjectTarget::new(gk, kind, ns.as_deref(), name, o);
            let attempt: DeletionAttempt = match serde_json::from_str(raw) {
                Ok(a) => a,
                Err(_) => {
                    out.push(ReplayAction::Forget {
                        target: target(),
                        why: "the record does not parse",
                    });
                    continue;
                }
            };
            if attempt.uid != o.uid {
                out.push(ReplayAction::Forget {
                    target: target(),
                    why: "the record is for another incarnation of the object",
                });
            } else if attempt.expired(now, ttl) {
                out.push(ReplayAction::Forget {
                    target: target(),
                    why: "the record expired",
                });
            } else if index.is_in_use(&gk.key(ns.as_deref(), name)) {
                continue;
            } else if attempt.replay {
                out.push(ReplayAction::Delete {
                    target: target(),
                    attempt,
                });
            } else {
                out.push(ReplayAction::Forget {
                    target: target(),
                    why: "nothing blocks the object any more and replay was not asked for",
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use lien_core::{Relation, Source};

    use lien_core::ObjectKey;

    use super::*;
    use crate::cache::GroupKind;

    fn with_record(uid: &str, attempt: &DeletionAttempt) -> Caches {
        let gk = GroupKind::new("", "ConfigMap");
        let mut c = Caches::new();
        c.add_kind(gk.clone(), true, "v1", "configmaps");
        let meta = ObjectMeta {
            namespace: Some("ns".into()),
            name: Some("x".into()),
            uid: Some(uid.into()),
            annotations: Some(
                [(
                    DELETION_ATTEMPT_ANNOTATION.to_string(),
                    serde_json::to_string(attempt).expect("json"),
                )]
                .into(),
            ),
            ..Default::default()
        };
        c.reset(&gk, [&meta]);
        c
    }

    #[test]
    fn decisions() {
        let now = Timestamp::now();
        let attempt = DeletionAttempt {
            uid: "u1".into(),
            propagation_policy: Some("Foreground".into()),
            user: "alice".into(),
            time: now,
            replay: true,
        };
        let ttl = DEFAULT_REPLAY_TTL;
        let c = with_record("u1", &attempt);
        let mut index = RelationIndex::new();
        let src = Source::usage("ns", "u");
        let key = ObjectKey::new("", "ConfigMap", Some("ns"), "x");
        index
            .apply(&src, [Relation::protects(src.clone(), key, "r")])
            .expect("applies");
        assert!(
            replay_actions(&index, &c, true, now, ttl).is_empty(),
            "in use"
        );
        index.delete(&src);
        assert!(
            replay_actions(&index, &c, false, now, ttl).is_empty(),
            "not settled"
        );
        assert!(matches!(
            replay_actions(&index, &c, true, now, ttl)[..],
            [ReplayAction::Delete { .. }]
        ));
        let later = now + jiff::SignedDuration::from_hours(25);
        assert!(matches!(
            replay_actions(&index, &c, true, later, ttl)[..],
            [ReplayAction::Forget {
                why: "the record expired",
                ..
            }]
        ));
        let other = with_record("u2", &attempt);
        assert!(matches!(
            replay_actions(&index, &other, true, now, ttl)[..],
            [ReplayAction::Forget { .. }]
        ));
        let no_replay = with_record(
            "u1",
            &DeletionAttempt {
                replay: false,
                ..attempt
            },
        );
        assert!(matches!(
            replay_actions(&index, &no_replay, true, now, ttl)[..],
            [ReplayAction::Forget { .. }]
        ));
    }
}
