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
//!
//! # Only Lien's own records count
//!
//! The annotation lives on the user's object, so anyone who may `update` the object can write
//! one — including a user who may not `delete` it. A record is therefore **sealed**: an
//! HMAC-SHA256 ([`ReplayKey`], ring's `hmac`) over everything the replay acts on — the
//! object's group, kind, namespace and name, its UID, the propagation policy, the user, the time
//! and the replay flag — in a length-prefixed encoding under a domain tag, so no two different
//! records sign the same bytes. [`replay_actions`] verifies the seal before anything else and
//! turns an unsigned or badly signed record into [`ReplayAction::Forged`]: it is never
//! replayed, and Lien removes it (the annotation key is Lien's) with a Warning. The key is
//! shared by every replica and survives restarts (`lien run` keeps it in a Secret only Lien's
//! service account may read); see "Threat model" in `docs/ARCHITECTURE.md`.
//!
//! # Two ways a record is written
//!
//! - The controller records a DELETE the webhook refused, when the webhook heard it from the
//!   API server (`--client-ca-file`): `replay` is whether a blocking relation asked for it.
//! - The webhook's mutating endpoint seals a deletion request the user made through the API
//!   server (`kubectl lien delete --when-free`, annotation `lien.dev/delete-when-free`): the
//!   API server writes the record the webhook answered, sealed with this same key
//!   ([`ReplayKey`] is the webhook's [`RecordSealer`]); `replay` is always true. This works
//!   on clusters whose API server presents no client certificate.
//!
//! Either way, the replay writes a Normal Event `DeletionReplayed` on the object naming the
//! requester and the propagation policy ([`replayed_note`]).
//!
//! Which of the two a record is ([`RecordSource`]) is sealed with it. The difference matters
//! because the webhook answers a deletion request to whoever posts one where the API server
//! cannot authenticate itself (`/mutate` on a managed cluster): a sealed `Request` record can be
//! had from a forged review. Such a value is useless written by hand: only the API server's own
//! write may store one (it applies the webhook's patch to the requester's write), so the webhook
//! refuses every write that carries a new or changed `Request` record — whoever sends it, Lien's
//! own identity included, through the object or any subresource — and [`replay_actions`] never
//! acts on a record found on a kind no admission webhook sees ([`unadmitted_kind`]). A
//! `Refusal` record is made only by the controller, from a refusal the API server proved it
//! sent (client certificate), and is never handed to anyone. See "Threat model: replay records
//! and forged reviews" in `docs/ARCHITECTURE.md`.
//!
//! # Re-authorized when replayed
//!
//! A replay deletes with Lien's rights on behalf of the requester, possibly hours after the
//! request. So the record carries who asked as the API server authenticated them — name, UID,
//! groups and extra, all sealed — and right before the DELETE the controller asks a
//! SubjectAccessReview whether that identity may still `delete` the object. A refused replay is
//! dropped (the record removed) with a Warning Event naming who lost the right
//! ([`refused_note`]). A record sealed before records carried their source and identity (signed as
//! `lien.dev/deletion-attempt/v1`) does not open at all ([`RecordError::Outdated`]).

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use jiff::Timestamp;
use lien_core::seams::Requester;
use lien_core::{ObjectKey, RelationIndex};
use ring::hmac;
use serde::{Deserialize, Serialize};

use crate::cache::Caches;
use crate::desired::ObjectTarget;

/// The annotation that records a refused DELETE on the object.
pub const DELETION_ATTEMPT_ANNOTATION: &str = lien_core::seams::DELETION_ATTEMPT_ANNOTATION;
/// The reason of the Normal Event a replay writes on the object it deleted.
pub const DELETION_REPLAYED_REASON: &str = "DeletionReplayed";
/// Why an expired record is forgotten (also how the write loop counts expiries).
pub const RECORD_EXPIRED: &str = "the record expired";

/// How many recorded refused deletions wait for their object to be free **and will be
/// replayed then**: the `lien_controller_replays_pending` gauge, which `LienReplaysStuck`
/// alerts on. A record that asks for no replay (a refusal under a reason-only Usage: it only
/// tells `why` who tried), one for an earlier incarnation of the object, an expired one, or
/// one that does not parse is not pending — counting them paged on every normal refusal.
/// The seal is not verified here (a forged record is dropped by [`replay_actions`]).
/// O(objects watched), like [`replay_actions`], and run beside it once per write pass.
pub fn pending_records(
    index: &RelationIndex,
    caches: &Caches,
    now: Timestamp,
    ttl: Duration,
) -> usize {
    caches
        .kinds()
        .map(|(gk, kind)| {
            kind.objects
                .iter()
                .filter(|((ns, name), o)| {
                    !o.deleting
                        && o.annotations
                            .get(DELETION_ATTEMPT_ANNOTATION)
                            .and_then(|raw| serde_json::from_str::<Wire>(raw).ok())
                            .is_some_and(|w| {
                                w.attempt.replay
                                    && w.attempt.uid == o.uid
                                    && !w.attempt.expired(now, ttl)
                            })
                        && index.is_in_use_ref(lien_core::KeyRef {
                            group: &gk.group,
                            kind: &gk.kind,
                            namespace: ns.as_deref(),
                            name,
                        })
                })
                .count()
        })
        .sum()
}

/// How long a recorded attempt stays valid by default: lifting a protection days later must not
/// delete by surprise.
pub const DEFAULT_REPLAY_TTL: Duration = Duration::from_secs(24 * 3600);

/// A refused DELETE, as the webhook reports it (the record type both share, from `lien_core`).
pub use lien_core::seams::Denial;

/// Where a record comes from (sealed with it: see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RecordSource {
    /// The controller recorded a DELETE its webhook refused, heard from the API server. Lien's
    /// own identity writes it, on the object itself.
    Refusal,
    /// The webhook sealed a deletion request (`kubectl lien delete --when-free`); only the API
    /// server's write of that request stores it.
    Request,
}

impl RecordSource {
    fn signed(self) -> &'static [u8] {
        match self {
            Self::Refusal => b"refusal",
            Self::Request => b"request",
        }
    }
}

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
    /// Their UID, as the API server authenticated them (empty when it gave none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user_uid: String,
    /// Their groups, as the API server authenticated them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Their extra attributes (a service account token's pod and node, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
    /// When.
    pub time: Timestamp,
    /// Whether a blocking relation asked for the DELETE to be replayed.
    #[serde(default)]
    pub replay: bool,
    /// Who made the record: the controller for a refusal, the webhook for a request.
    pub source: RecordSource,
}

impl DeletionAttempt {
    /// Whether the record is older than `ttl` at `now`.
    pub fn expired(&self, now: Timestamp, ttl: Duration) -> bool {
        let age = now.duration_since(self.time);
        age.as_secs() >= 0 && age.unsigned_abs() > ttl
    }

    /// Whether `recorded` (the record on the object, opened) already says what this attempt
    /// would: the same incarnation, request and requester as sealed (the identity fitted), only
    /// the time differs, and it is younger than `refresh` at `now`. A repeated refusal then
    /// writes nothing (`crate::refusals`); a record from the future is not trusted to be fresh.
    pub fn repeats(&self, recorded: &DeletionAttempt, now: Timestamp, refresh: Duration) -> bool {
        let age = now.duration_since(recorded.time);
        if age.is_negative() || age.unsigned_abs() >= refresh {
            return false;
        }
        let mut this = self.clone();
        this.fit_identity();
        this.time = recorded.time;
        this == *recorded
    }

    /// Who asked, as a SubjectAccessReview names them.
    pub fn requester(&self) -> Requester {
        Requester {
            username: self.user.clone(),
            uid: self.user_uid.clone(),
            groups: self.groups.clone(),
            extra: self.extra.clone(),
        }
    }

    /// The record as the annotation holds it, sealed with `key` for `object` (see the module
    /// docs). An identity too large for [`MAX_IDENTITY_BYTES`] loses its extra attributes,
    /// then its last groups, until it fits: the replay is then asked about fewer of the
    /// requester's rights (the safe side), and the record stays within what Lien keeps.
    pub fn seal(&self, key: &ReplayKey, object: &ObjectKey) -> SealedRecord {
        let mut attempt = self.clone();
        attempt.fit_identity();
        let tag = hmac::sign(&key.0, &signed_bytes(&attempt, object));
        let wire = Wire {
            attempt,
            version: Some(2),
            signature: Some(base64::engine::general_purpose::STANDARD.encode(tag.as_ref())),
        };
        // Serialising plain strings, a timestamp and a bool cannot fail.
        SealedRecord(serde_json::to_string(&wire).unwrap_or_default())
    }

    fn identity_bytes(&self) -> usize {
        self.user_uid.len()
            + self.groups.iter().map(String::len).sum::<usize>()
            + self
                .extra
                .iter()
                .map(|(k, v)| k.len() + v.iter().map(String::len).sum::<usize>())
                .sum::<usize>()
    }

    fn fit_identity(&mut self) {
        if self.identity_bytes() > MAX_IDENTITY_BYTES {
            self.extra.clear();
        }
        while self.identity_bytes() > MAX_IDENTITY_BYTES && self.groups.pop().is_some() {}
    }
}

/// The most bytes of identity (UID, groups, extra) a record carries. A record is an
/// annotation on the user's object, which Lien caches for every object it watches that carries
/// one, so it is bounded (the cache keeps at most [`MAX_RECORD_BYTES`] of it). 8 KiB is ≈ 200
/// groups of typical names; an identity provider's longer lists lose their last groups.
pub const MAX_IDENTITY_BYTES: usize = 8 * 1024;

/// The longest record Lien keeps and reads: its own are at most [`MAX_IDENTITY_BYTES`] of
/// identity plus the object's UID, the user's name (≤ 253 bytes for a service account, longer
/// names are rare), the time, the policy and the signature (≈ 1 KiB). Anything longer is not
/// Lien's: the cache keeps it as unreadable, and it is removed as forged.
pub const MAX_RECORD_BYTES: usize = 16 * 1024;

/// The bytes a record's signature covers: a domain tag (so a signature made for anything else
/// never verifies here), then every field the replay acts on, each length-prefixed so that no
/// two different records encode alike. The time is signed as nanoseconds since the epoch, not
/// as text, so a re-formatted timestamp still verifies and a different instant never does.
fn signed_bytes(attempt: &DeletionAttempt, object: &ObjectKey) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    let mut field = |bytes: &[u8]| {
        out.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
        out.extend_from_slice(bytes);
    };
    // v2: the source and the requester's whole identity are signed. A v1 record has neither
    // and does not open ([`RecordError::Outdated`]): v1 sealed deletion requests for forged
    // reviews alike, so none is trusted.
    field(b"lien.dev/deletion-attempt/v2");
    field(object.group.as_bytes());
    field(object.kind.as_bytes());
    // Present-or-absent is signed too: a cluster-scoped object is not the namespace "".
    match &object.namespace {
        Some(ns) => {
            field(b"namespaced");
            field(ns.as_bytes());
        }
        None => field(b"cluster"),
    }
    field(object.name.as_bytes());
    field(attempt.uid.as_bytes());
    match &attempt.propagation_policy {
        Some(p) => {
            field(b"policy");
            field(p.as_bytes());
        }
        None => field(b"no-policy"),
    }
    field(attempt.user.as_bytes());
    // Counted lists, each element length-prefixed: no two identities encode alike.
    field(attempt.user_uid.as_bytes());
    field(&(attempt.groups.len() as u64).to_be_bytes());
    for g in &attempt.groups {
        field(g.as_bytes());
    }
    field(&(attempt.extra.len() as u64).to_be_bytes());
    for (k, values) in &attempt.extra {
        field(k.as_bytes());
        field(&(values.len() as u64).to_be_bytes());
        for v in values {
            field(v.as_bytes());
        }
    }
    field(&attempt.time.as_nanosecond().to_be_bytes());
    field(&[u8::from(attempt.replay)]);
    field(attempt.source.signed());
    out
}

/// The annotation's JSON: the attempt, the version of what is signed (2) and the
/// signature.
#[derive(Debug, Serialize, Deserialize)]
struct Wire {
    #[serde(flatten)]
    attempt: DeletionAttempt,
    #[serde(default, rename = "v", skip_serializing_if = "Option::is_none")]
    version: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    signature: Option<String>,
}

/// A record sealed by [`DeletionAttempt::seal`]: the annotation's value, ready to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedRecord(String);

impl SealedRecord {
    /// The annotation's value.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Why a record is not acted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// Not a record at all.
    #[error("the record does not parse")]
    Malformed,
    /// No signature: Lien did not write it.
    #[error("the record is not signed (Lien did not write it)")]
    Unsigned,
    /// A signature that does not verify: written or changed by someone else, or sealed with
    /// another key.
    #[error("the record's signature does not verify (forged, altered, or sealed with another key)")]
    BadSignature,
    /// Sealed by a Lien before records said their source (v1), which sealed deletion requests
    /// for forged reviews too: not trusted.
    #[error("the record was sealed by an earlier Lien and says no source; it is not replayed")]
    Outdated,
    /// On a kind kube-apiserver sends to no admission webhook (webhook configurations,
    /// admission policies and their bindings), so no write of it was vetted by Lien.
    #[error(
        "the record is on a kind no admission webhook sees, so Lien cannot have vetted its write"
    )]
    Unadmitted,
}

/// The source a record says it has, read without verifying anything: for the webhook, which
/// refuses writes carrying `Request` records and lets Lien's identity write only `Refusal`
/// ones. A lie here breaks the seal, since the source is signed. `None`: not a record that says.
pub fn source_of(raw: &str) -> Option<RecordSource> {
    #[derive(Deserialize)]
    struct SourceOnly {
        source: RecordSource,
    }
    serde_json::from_str::<SourceOnly>(raw)
        .ok()
        .map(|s| s.source)
}

/// Kinds kube-apiserver never sends to admission webhooks (so that a broken webhook cannot lock
/// its own fix out): a record on one was written past every check Lien makes at admission.
pub fn unadmitted_kind(group: &str, kind: &str) -> bool {
    group == "admissionregistration.k8s.io"
        && matches!(
            kind,
            "ValidatingWebhookConfiguration"
                | "MutatingWebhookConfiguration"
                | "ValidatingAdmissionPolicy"
                | "ValidatingAdmissionPolicyBinding"
                | "MutatingAdmissionPolicy"
                | "MutatingAdmissionPolicyBinding"
        )
}

/// Reads and verifies the record `raw` found on `object`.
pub fn open(
    raw: &str,
    key: &ReplayKey,
    object: &ObjectKey,
) -> Result<DeletionAttempt, RecordError> {
    if raw.len() > MAX_RECORD_BYTES {
        return Err(RecordError::Malformed);
    }
    let wire: Wire = match serde_json::from_str(raw) {
        Ok(wire) => wire,
        Err(_) => {
            // A v1 record: its fields and a signature, no source.
            #[derive(Deserialize)]
            #[allow(dead_code)]
            struct V1 {
                uid: String,
                user: String,
                signature: String,
            }
            let earlier = source_of(raw).is_none() && serde_json::from_str::<V1>(raw).is_ok();
            return Err(if earlier {
                RecordError::Outdated
            } else {
                RecordError::Malformed
            });
        }
    };
    let signature = wire.signature.ok_or(RecordError::Unsigned)?;
    let tag = base64::engine::general_purpose::STANDARD
        .decode(signature)
        .map_err(|_| RecordError::BadSignature)?;
    // Lien writes only v2 (a source, and `v: 2`); anything else was not sealed as it reads.
    if wire.version != Some(2) {
        return Err(RecordError::BadSignature);
    }
    // `verify` compares in constant time.
    hmac::verify(&key.0, &signed_bytes(&wire.attempt, object), &tag)
        .map_err(|_| RecordError::BadSignature)?;
    Ok(wire.attempt)
}

/// The note of the [`DELETION_REPLAYED_REASON`] Event: who asked, with which policy, and why
/// now.
pub fn replayed_note(attempt: &DeletionAttempt) -> String {
    format!(
        "Lien re-issued the DELETE requested by {} (propagationPolicy {}): the object is no longer in use",
        attempt.user,
        attempt
            .propagation_policy
            .as_deref()
            .unwrap_or("the API server's default")
    )
}

/// The reason of the Warning Event on an object whose replay was dropped because its requester
/// may no longer delete it.
pub const REPLAY_NOT_AUTHORIZED_REASON: &str = "DeletionReplayNotAuthorized";

/// The note of the [`REPLAY_NOT_AUTHORIZED_REASON`] Event: who lost the right, what the
/// authorizer said, and what is left to do.
pub fn refused_note(attempt: &DeletionAttempt, reason: &str) -> String {
    let groups = if attempt.groups.is_empty() {
        String::new()
    } else {
        format!(" (groups {})", attempt.groups.join(", "))
    };
    let why = if reason.is_empty() {
        String::new()
    } else {
        format!(": {reason}")
    };
    format!(
        "Lien dropped the DELETE requested by {}{groups} at {}: the object is free, but {} may no longer delete it (SubjectAccessReview{why}); nothing was deleted. Someone allowed to delete it may do so, or ask again with `kubectl lien delete --when-free`",
        attempt.user, attempt.time, attempt.user
    )
}

/// The webhook seals deletion requests with the controller's key, so the controller verifies
/// them like its own records.
impl lien_core::seams::RecordSealer for ReplayKey {
    fn seal(&self, request: &lien_core::seams::DeletionRequest) -> String {
        let attempt = DeletionAttempt {
            uid: request.uid.clone(),
            propagation_policy: request.propagation_policy.clone(),
            user: request.user.clone(),
            user_uid: request.user_uid.clone(),
            groups: request.groups.clone(),
            extra: request.extra.clone(),
            time: Timestamp::try_from(request.time).unwrap_or_else(|_| Timestamp::now()),
            replay: true,
            source: RecordSource::Request,
        };
        attempt.seal(self, &request.object).0
    }
}

/// The number of bytes of a generated key, and the least a key may have: HMAC-SHA256's block
/// of security.
pub const REPLAY_KEY_BYTES: usize = 32;

/// The key Lien seals its replay records with. Every replica must hold the same one, across
/// restarts; nobody else may.
#[derive(Clone)]
pub struct ReplayKey(hmac::Key);

impl std::fmt::Debug for ReplayKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.write_str("ReplayKey(..)")
    }
}

/// A key that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Too short to be secret.
    #[error("the replay key has {0} bytes; it needs at least {REPLAY_KEY_BYTES} random bytes")]
    TooShort(usize),
    /// The system's random source failed.
    #[error("the system's random source failed")]
    Random,
}

impl ReplayKey {
    /// A key from secret bytes (at least [`REPLAY_KEY_BYTES`]).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, KeyError> {
        if bytes.len() < REPLAY_KEY_BYTES {
            return Err(KeyError::TooShort(bytes.len()));
        }
        Ok(Self(hmac::Key::new(hmac::HMAC_SHA256, bytes)))
    }

    /// [`REPLAY_KEY_BYTES`] fresh random bytes, to make a key of (and to store, so that other
    /// replicas and later restarts use the same).
    pub fn random_bytes() -> Result<[u8; REPLAY_KEY_BYTES], KeyError> {
        use ring::rand::SecureRandom;
        let mut bytes = [0u8; REPLAY_KEY_BYTES];
        ring::rand::SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| KeyError::Random)?;
        Ok(bytes)
    }

    /// A fresh random key that lives in memory only: for one process that is the only replica
    /// (`lien sandbox`, tests). Records sealed with it are not replayed after a restart.
    pub fn generate() -> Result<Self, KeyError> {
        Self::from_bytes(&Self::random_bytes()?)
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
    /// Remove a record Lien did not write (malformed, unsigned, or its signature does not
    /// verify); never replayed, and worth a Warning: someone wrote Lien's annotation.
    Forged {
        /// The object.
        target: ObjectTarget,
        /// Why.
        why: RecordError,
    },
}

/// Decides, for every cached object with a recorded attempt, what to do. Nothing happens to an
/// object still in use, nor anything at all before the state is `settled` (a restarting
/// controller has not re-derived every relation yet, and "not in use" would be a guess). A
/// record that `key` does not verify is [`ReplayAction::Forged`], whatever it says.
pub fn replay_actions(
    index: &RelationIndex,
    caches: &Caches,
    settled: bool,
    now: Timestamp,
    ttl: Duration,
    key: &ReplayKey,
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
            if unadmitted_kind(&gk.group, &gk.kind) {
                out.push(ReplayAction::Forged {
                    target: target(),
                    why: RecordError::Unadmitted,
                });
                continue;
            }
            let attempt = match open(raw, key, &gk.key(ns.as_deref(), name)) {
                Ok(a) => a,
                // Lien only writes well-formed, sealed records: anything else is someone else's.
                Err(why) => {
                    out.push(ReplayAction::Forged {
                        target: target(),
                        why,
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
                    why: RECORD_EXPIRED,
                });
            } else if index.is_in_use(&gk.key(ns.as_deref(), name))
                || (gk.group.is_empty() && gk.kind == "Namespace" && index.holding_count(name) > 0)
            {
                // A Namespace is "in use" also while objects in it are used from outside it
                // (the webhook refused its DELETE for them): replayed once the last one goes.
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

    fn key() -> ReplayKey {
        ReplayKey::from_bytes(&[7u8; REPLAY_KEY_BYTES]).expect("key")
    }

    fn object() -> ObjectKey {
        ObjectKey::new("", "ConfigMap", Some("ns"), "x")
    }

    fn with_raw(uid: &str, raw: &str) -> Caches {
        let gk = GroupKind::new("", "ConfigMap");
        let mut c = Caches::new();
        c.add_kind(gk.clone(), true, "v1", "configmaps");
        let meta = ObjectMeta {
            namespace: Some("ns".into()),
            name: Some("x".into()),
            uid: Some(uid.into()),
            annotations: Some([(DELETION_ATTEMPT_ANNOTATION.to_string(), raw.to_owned())].into()),
            ..Default::default()
        };
        c.reset(&gk, [&meta]);
        c
    }

    fn with_record(uid: &str, attempt: &DeletionAttempt) -> Caches {
        with_raw(uid, attempt.seal(&key(), &object()).as_str())
    }

    fn attempt(now: Timestamp) -> DeletionAttempt {
        DeletionAttempt {
            uid: "u1".into(),
            propagation_policy: Some("Foreground".into()),
            user: "alice".into(),
            user_uid: String::new(),
            groups: Vec::new(),
            extra: Default::default(),
            time: now,
            replay: true,
            source: RecordSource::Refusal,
        }
    }

    #[test]
    fn a_namespace_is_replayed_once_nothing_in_it_is_used_from_outside() {
        let now = Timestamp::now();
        let k = key();
        let gk = GroupKind::new("", "Namespace");
        let ns_key = ObjectKey::new("", "Namespace", None, "team-a");
        let mut c = Caches::new();
        c.add_kind(gk.clone(), false, "v1", "namespaces");
        let meta = ObjectMeta {
            name: Some("team-a".into()),
            uid: Some("u1".into()),
            annotations: Some(
                [(
                    DELETION_ATTEMPT_ANNOTATION.to_string(),
                    attempt(now).seal(&k, &ns_key).as_str().to_owned(),
                )]
                .into(),
            ),
            ..Default::default()
        };
        c.reset(&gk, [&meta]);
        let mut index = RelationIndex::new();
        let src = Source::cluster_usage("b-uses-a");
        let inside = ObjectKey::new("", "ConfigMap", Some("team-a"), "settings");
        let outside = ObjectKey::new("", "ConfigMap", Some("team-b"), "app");
        index
            .apply(&src, [Relation::uses(src.clone(), inside.clone(), outside)])
            .expect("applies");
        let ttl = DEFAULT_REPLAY_TTL;
        assert!(
            replay_actions(&index, &c, true, now, ttl, &k).is_empty(),
            "its contents are used from outside"
        );
        // A relation with both ends inside goes with the namespace: it does not hold the replay.
        let inner = ObjectKey::new("", "ConfigMap", Some("team-a"), "app");
        index
            .apply(&src, [Relation::uses(src.clone(), inside, inner)])
            .expect("applies");
        assert!(matches!(
            replay_actions(&index, &c, true, now, ttl, &k)[..],
            [ReplayAction::Delete { .. }]
        ));
    }

    /// `LienReplaysStuck` alerts on this count: a normal refusal under a reason-only Usage
    /// (recorded with `replay: false`) is not pending, nor is an expired record, one for an
    /// earlier incarnation, or one whose object is free (it is replayed on the next pass).
    #[test]
    fn only_records_that_will_be_replayed_are_pending() {
        let now = Timestamp::now();
        let ttl = DEFAULT_REPLAY_TTL;
        let mut index = RelationIndex::new();
        let src = Source::usage("ns", "u");
        index
            .apply(&src, [Relation::protects(src.clone(), object(), "r")])
            .expect("applies");
        let pending = |c: &Caches, index: &RelationIndex| pending_records(index, c, now, ttl);
        assert_eq!(pending(&with_record("u1", &attempt(now)), &index), 1);
        let normal = DeletionAttempt {
            replay: false,
            ..attempt(now)
        };
        assert_eq!(
            pending(&with_record("u1", &normal), &index),
            0,
            "no replay asked"
        );
        let old = DeletionAttempt {
            time: now - ttl - Duration::from_secs(1),
            ..attempt(now)
        };
        assert_eq!(pending(&with_record("u1", &old), &index), 0, "expired");
        assert_eq!(
            pending(&with_record("u2", &attempt(now)), &index),
            0,
            "an earlier incarnation's"
        );
        assert_eq!(
            pending(&with_raw("u1", "not json"), &index),
            0,
            "unreadable"
        );
        index.delete(&src);
        assert_eq!(
            pending(&with_record("u1", &attempt(now)), &index),
            0,
            "free"
        );
    }

    #[test]
    fn decisions() {
        let now = Timestamp::now();
        let attempt = attempt(now);
        let ttl = DEFAULT_REPLAY_TTL;
        let k = key();
        let c = with_record("u1", &attempt);
        let mut index = RelationIndex::new();
        let src = Source::usage("ns", "u");
        index
            .apply(&src, [Relation::protects(src.clone(), object(), "r")])
            .expect("applies");
        assert!(
            replay_actions(&index, &c, true, now, ttl, &k).is_empty(),
            "in use"
        );
        index.delete(&src);
        assert!(
            replay_actions(&index, &c, false, now, ttl, &k).is_empty(),
            "not settled"
        );
        assert!(matches!(
            replay_actions(&index, &c, true, now, ttl, &k)[..],
            [ReplayAction::Delete { .. }]
        ));
        let later = now + jiff::SignedDuration::from_hours(25);
        assert!(matches!(
            replay_actions(&index, &c, true, later, ttl, &k)[..],
            [ReplayAction::Forget {
                why: "the record expired",
                ..
            }]
        ));
        let other = with_record("u2", &attempt);
        assert!(matches!(
            replay_actions(&index, &other, true, now, ttl, &k)[..],
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
            replay_actions(&index, &no_replay, true, now, ttl, &k)[..],
            [ReplayAction::Forget { .. }]
        ));
    }

    #[test]
    fn a_sealed_record_opens_with_its_key_only() {
        let a = attempt(Timestamp::now());
        let sealed = a.seal(&key(), &object());
        assert_eq!(open(sealed.as_str(), &key(), &object()), Ok(a.clone()));
        let other = ReplayKey::generate().expect("key");
        assert_eq!(
            open(sealed.as_str(), &other, &object()),
            Err(RecordError::BadSignature)
        );
        // Another object (same UID, e.g. copied across) does not verify either.
        let elsewhere = ObjectKey::new("", "ConfigMap", Some("ns"), "y");
        assert_eq!(
            open(sealed.as_str(), &key(), &elsewhere),
            Err(RecordError::BadSignature)
        );
        let cluster = ObjectKey::new("", "ConfigMap", None, "x");
        assert_eq!(
            open(sealed.as_str(), &key(), &cluster),
            Err(RecordError::BadSignature)
        );
    }

    #[test]
    fn every_tampered_field_is_rejected() {
        let now = Timestamp::now();
        let sealed = attempt(now).seal(&key(), &object());
        let good: serde_json::Value = serde_json::from_str(sealed.as_str()).expect("json");
        let tampered: [(&str, serde_json::Value); 7] = [
            ("uid", "u2".into()),
            ("propagationPolicy", "Orphan".into()),
            ("propagationPolicy", serde_json::Value::Null),
            ("user", "mallory".into()),
            (
                "time",
                (now + jiff::SignedDuration::from_secs(1))
                    .to_string()
                    .into(),
            ),
            ("replay", false.into()),
            // A deletion request passed off as a refusal, or the other way round.
            ("source", "request".into()),
        ];
        for (field, value) in tampered {
            let mut v = good.clone();
            v[field] = value.clone();
            let raw = v.to_string();
            assert_eq!(
                open(&raw, &key(), &object()),
                Err(RecordError::BadSignature),
                "{field} = {value}"
            );
        }
        // A re-formatted but equal timestamp still verifies (the instant is signed).
        let mut v = good.clone();
        let t: Timestamp = v["time"].as_str().expect("time").parse().expect("ts");
        v["time"] = t.strftime("%Y-%m-%dT%H:%M:%S%.f+00:00").to_string().into();
        assert!(open(&v.to_string(), &key(), &object()).is_ok());
    }

    /// Issue 28, finding 5: the record carries the requester's whole identity, sealed, so the
    /// replay can be authorized again for exactly them; records sealed before (v1, the name
    /// alone) still open, and cannot be given groups.
    #[test]
    fn the_requesters_identity_is_sealed_and_old_records_still_open() {
        let now = Timestamp::now();
        let a = DeletionAttempt {
            user_uid: "alice-uid".into(),
            groups: vec!["team-a".into(), "system:authenticated".into()],
            extra: [("scopes".to_string(), vec!["x".to_string()])].into(),
            ..attempt(now)
        };
        let sealed = a.seal(&key(), &object());
        assert_eq!(open(sealed.as_str(), &key(), &object()), Ok(a.clone()));
        let requester = a.requester();
        assert_eq!(requester.username, "alice");
        assert_eq!(requester.groups, a.groups);
        let good: serde_json::Value = serde_json::from_str(sealed.as_str()).expect("json");
        let tampered: [(&str, serde_json::Value); 6] = [
            ("groups", serde_json::json!(["team-a", "system:masters"])),
            ("groups", serde_json::json!([])),
            ("userUid", "someone".into()),
            ("extra", serde_json::json!({"scopes": ["y"]})),
            ("v", 1.into()),
            ("v", serde_json::Value::Null),
        ];
        for (field, value) in tampered {
            let mut v = good.clone();
            v[field] = value.clone();
            assert_eq!(
                open(&v.to_string(), &key(), &object()),
                Err(RecordError::BadSignature),
                "{field} = {value}"
            );
        }
        // An identity too large to keep loses its extra, then its last groups (fewer rights,
        // the safe side), and the record stays within what the cache keeps.
        let huge = DeletionAttempt {
            groups: (0..2000).map(|i| format!("group-{i:05}")).collect(),
            ..a
        };
        let sealed = huge.seal(&key(), &object());
        assert!(
            sealed.as_str().len() <= MAX_RECORD_BYTES,
            "{}",
            sealed.as_str().len()
        );
        let opened = open(sealed.as_str(), &key(), &object()).expect("verifies");
        assert!(opened.extra.is_empty());
        assert!(opened.groups.len() < huge.groups.len());
        assert_eq!(opened.groups[..], huge.groups[..opened.groups.len()]);
        // Anything longer than Lien writes is not read.
        let long = format!("{{\"pad\": \"{}\"}}", "x".repeat(MAX_RECORD_BYTES));
        assert_eq!(open(&long, &key(), &object()), Err(RecordError::Malformed));
    }

    #[test]
    fn a_repeat_of_the_recorded_refusal_writes_nothing_until_the_record_is_a_minute_old() {
        let refresh = Duration::from_secs(60);
        let t0 = Timestamp::now();
        let recorded = attempt(t0);
        let at = |s: i64| t0 + jiff::SignedDuration::from_secs(s);
        assert!(attempt(at(5)).repeats(&recorded, at(5), refresh));
        assert!(
            !attempt(at(60)).repeats(&recorded, at(60), refresh),
            "a minute old: written again, so it never expires while refusals go on"
        );
        // Anything else the record says is new: written at once.
        let other_user = DeletionAttempt {
            user: "bob".into(),
            ..attempt(at(5))
        };
        let other_policy = DeletionAttempt {
            propagation_policy: None,
            ..attempt(at(5))
        };
        let no_replay = DeletionAttempt {
            replay: false,
            ..attempt(at(5))
        };
        let other_incarnation = DeletionAttempt {
            uid: "u2".into(),
            ..attempt(at(5))
        };
        for new in [other_user, other_policy, no_replay, other_incarnation] {
            assert!(!new.repeats(&recorded, at(5), refresh), "{new:?}");
        }
        // A record from the future is not taken to be fresh.
        assert!(!attempt(t0).repeats(&attempt(at(30)), t0, refresh));
        // The identity is compared as sealed: a huge one that was cut to fit still repeats.
        let huge = DeletionAttempt {
            groups: (0..2000).map(|i| format!("group-{i:05}")).collect(),
            ..attempt(t0)
        };
        let opened = open(huge.seal(&key(), &object()).as_str(), &key(), &object()).expect("opens");
        assert!(huge.repeats(&opened, at(1), refresh));
    }

    #[test]
    fn the_note_of_a_dropped_replay_names_who_lost_the_right() {
        let a = DeletionAttempt {
            groups: vec!["team-a".into()],
            ..attempt(Timestamp::now())
        };
        let note = refused_note(&a, "no RBAC policy matched");
        for part in [
            "requested by alice (groups team-a)",
            "alice may no longer delete it",
            "no RBAC policy matched",
            "nothing was deleted",
        ] {
            assert!(note.contains(part), "{part:?} not in {note}");
        }
    }

    #[test]
    fn unsigned_malformed_and_forged_records_are_never_replayed() {
        let now = Timestamp::now();
        let index = RelationIndex::new();
        let unsigned = serde_json::to_string(&attempt(now)).expect("json");
        let mut forged: serde_json::Value =
            serde_json::from_str(attempt(now).seal(&key(), &object()).as_str()).expect("json");
        forged["user"] = "mallory".into();
        let garbage_signature = {
            let mut v = forged.clone();
            v["signature"] = "not base64!".into();
            v
        };
        for (raw, why) in [
            (unsigned, RecordError::Unsigned),
            (forged.to_string(), RecordError::BadSignature),
            (garbage_signature.to_string(), RecordError::BadSignature),
            ("{not json".to_owned(), RecordError::Malformed),
        ] {
            let c = with_raw("u1", &raw);
            let actions = replay_actions(&index, &c, true, now, DEFAULT_REPLAY_TTL, &key());
            assert!(
                matches!(&actions[..], [ReplayAction::Forged { why: w, .. }] if *w == why),
                "{raw}: {actions:?}"
            );
        }
    }

    #[test]
    fn a_deletion_request_sealed_for_the_webhook_opens_as_a_record_to_replay() {
        use lien_core::seams::{DeletionRequest, RecordSealer};
        let now = Timestamp::now();
        let request = DeletionRequest {
            object: object(),
            uid: "u1".into(),
            propagation_policy: Some("Background".into()),
            user: "alice".into(),
            user_uid: String::new(),
            groups: Vec::new(),
            extra: Default::default(),
            time: std::time::SystemTime::from(now),
        };
        let raw = RecordSealer::seal(&key(), &request);
        let opened = open(&raw, &key(), &object()).expect("verifies");
        assert_eq!(
            opened,
            DeletionAttempt {
                uid: "u1".into(),
                propagation_policy: Some("Background".into()),
                user: "alice".into(),
                user_uid: String::new(),
                groups: Vec::new(),
                extra: Default::default(),
                time: now,
                replay: true,
                source: RecordSource::Request,
            }
        );
        // Another object, or another key: not a record Lien wrote.
        let elsewhere = ObjectKey::new("", "ConfigMap", Some("ns"), "y");
        assert_eq!(
            open(&raw, &key(), &elsewhere),
            Err(RecordError::BadSignature)
        );
        // Free, it is replayed.
        let c = with_raw("u1", &raw);
        let actions = replay_actions(
            &RelationIndex::new(),
            &c,
            true,
            now,
            DEFAULT_REPLAY_TTL,
            &key(),
        );
        assert!(
            matches!(&actions[..], [ReplayAction::Delete { .. }]),
            "{actions:?}"
        );
        assert_eq!(
            replayed_note(&opened),
            "Lien re-issued the DELETE requested by alice (propagationPolicy Background): the object is no longer in use"
        );
    }

    #[test]
    fn a_record_says_its_source_and_an_earlier_one_that_says_none_is_outdated() {
        use lien_core::seams::{DeletionRequest, RecordSealer};
        let now = Timestamp::now();
        let refusal = attempt(now).seal(&key(), &object());
        assert_eq!(source_of(refusal.as_str()), Some(RecordSource::Refusal));
        let request = RecordSealer::seal(
            &key(),
            &DeletionRequest {
                object: object(),
                uid: "u1".into(),
                propagation_policy: None,
                user: "alice".into(),
                user_uid: String::new(),
                groups: Vec::new(),
                extra: Default::default(),
                time: std::time::SystemTime::from(now),
            },
        );
        assert_eq!(source_of(&request), Some(RecordSource::Request));
        assert_eq!(source_of("{not json"), None);
        // A v1 record (no source, signed without one) opens as outdated, never as a record.
        let mut v1: serde_json::Value = serde_json::from_str(refusal.as_str()).expect("json");
        v1.as_object_mut().expect("object").remove("source");
        assert_eq!(source_of(&v1.to_string()), None);
        assert_eq!(
            open(&v1.to_string(), &key(), &object()),
            Err(RecordError::Outdated)
        );
        let c = with_raw("u1", &v1.to_string());
        let actions = replay_actions(
            &RelationIndex::new(),
            &c,
            true,
            now,
            DEFAULT_REPLAY_TTL,
            &key(),
        );
        assert!(
            matches!(
                &actions[..],
                [ReplayAction::Forged {
                    why: RecordError::Outdated,
                    ..
                }]
            ),
            "{actions:?}"
        );
    }

    /// kube-apiserver sends writes of its admission configuration objects to no webhook, so a
    /// record there was written past every check: never replayed, even sealed.
    #[test]
    fn a_record_on_a_kind_no_webhook_sees_is_never_replayed() {
        let now = Timestamp::now();
        let gk = GroupKind::new(
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration",
        );
        let key_of = ObjectKey::new(&gk.group, &gk.kind, None, "vwc");
        let mut c = Caches::new();
        c.add_kind(
            gk.clone(),
            false,
            "admissionregistration.k8s.io/v1",
            "validatingwebhookconfigurations",
        );
        let meta = ObjectMeta {
            name: Some("vwc".into()),
            uid: Some("u1".into()),
            annotations: Some(
                [(
                    DELETION_ATTEMPT_ANNOTATION.to_string(),
                    attempt(now).seal(&key(), &key_of).as_str().to_owned(),
                )]
                .into(),
            ),
            ..Default::default()
        };
        c.reset(&gk, [&meta]);
        let actions = replay_actions(
            &RelationIndex::new(),
            &c,
            true,
            now,
            DEFAULT_REPLAY_TTL,
            &key(),
        );
        assert!(
            matches!(
                &actions[..],
                [ReplayAction::Forged {
                    why: RecordError::Unadmitted,
                    ..
                }]
            ),
            "{actions:?}"
        );
        assert!(unadmitted_kind(
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration"
        ));
        assert!(!unadmitted_kind("", "ConfigMap"));
    }

    #[test]
    fn keys_must_be_long_enough() {
        assert_eq!(
            ReplayKey::from_bytes(&[1u8; 16]).err(),
            Some(KeyError::TooShort(16))
        );
        assert!(format!("{:?}", key()).contains(".."), "never printed");
    }
}
