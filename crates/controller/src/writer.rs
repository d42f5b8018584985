//! The writer: applies desired writes to the API server.
//!
//! # Data model
//!
//! Every write is a JSON merge patch carrying the `resourceVersion` the decision was made on, so
//! the API server refuses it (409) if the object changed meanwhile — optimistic concurrency: the
//! watch then brings the new version and the decision is made again. DELETEs carry a UID
//! precondition. Each call has a timeout. The writer does not loop on failure itself: the
//! controller's write pass records the failure and schedules another pass with backoff, which
//! recomputes the decision from fresh caches (retrying a stale decision would be wrong).

use std::future::Future;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::core::{ApiResource, GroupVersionKind};
use lien_api::{ClusterUsage, DependencyRule, IN_USE_LABEL, USAGE_OWNERS_ANNOTATION, Usage};
use lien_core::Source;
use lien_core::seams::{AccessCheck, AccessDecision, AccessRequest, Requester};
use serde_json::json;

use crate::desired::{LabelWrite, ObjectTarget, UsageMetaWrite};
use crate::replay::{DELETION_ATTEMPT_ANNOTATION, DeletionAttempt, SealedRecord};

/// The field manager Lien's writes are recorded under.
pub const FIELD_MANAGER: &str = "lien";

/// A write that failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Setting or removing the in-use label.
    #[error("labelling {target}: {source}")]
    Label {
        /// The object.
        target: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Setting a Usage's finalizers and owner references.
    #[error("updating finalizers and owners of {target}: {source}")]
    UsageMeta {
        /// The usage.
        target: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Deleting a Usage whose users are gone.
    #[error("deleting {target}, whose users are gone: {source}")]
    UsageDelete {
        /// The usage.
        target: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Writing a Usage's status.
    #[error("writing the status of {target}: {source}")]
    Status {
        /// The usage.
        target: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Re-issuing a refused DELETE.
    #[error("replaying the deletion of {target}: {source}")]
    Replay {
        /// The object.
        target: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Asking whether a replay's requester may still delete the object.
    #[error("authorizing the replay of {target}: {reason}")]
    ReplayCheck {
        /// The object.
        target: String,
        /// Why the SubjectAccessReview failed.
        reason: String,
    },
    /// Recording or forgetting a deletion attempt.
    #[error("updating the deletion record of {target}: {source}")]
    Record {
        /// The object.
        target: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Deleting what a namespace being deleted is stuck behind (`namespace_content`).
    #[error("deleting {target} in its namespace being deleted: {source}")]
    NamespaceContent {
        /// The object.
        target: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// A call did not finish in time.
    #[error("{what} timed out after {after:?}")]
    Timeout {
        /// What was written.
        what: String,
        /// The timeout.
        after: Duration,
    },
}

impl WriteError {
    /// A bounded label for metrics; a new one goes into `metrics::ERROR_CATEGORIES` too
    /// (exported at 0 from start).
    pub fn category(&self) -> &'static str {
        match self {
            Self::Label { .. } => "label",
            Self::UsageMeta { .. } => "usage_meta",
            Self::UsageDelete { .. } => "usage_delete",
            Self::Status { .. } => "status",
            Self::Replay { .. } | Self::ReplayCheck { .. } => "replay",
            Self::Record { .. } => "record",
            Self::NamespaceContent { .. } => "namespace_content",
            Self::Timeout { .. } => "timeout",
        }
    }

    /// Whether the API server said the object changed or went (409 / 404): the next pass
    /// decides again from fresh caches, so this is not worth a warning.
    pub fn is_stale(&self) -> bool {
        let source = match self {
            Self::Label { source, .. }
            | Self::UsageMeta { source, .. }
            | Self::UsageDelete { source, .. }
            | Self::Status { source, .. }
            | Self::Replay { source, .. }
            | Self::Record { source, .. }
            | Self::NamespaceContent { source, .. } => source,
            Self::Timeout { .. } | Self::ReplayCheck { .. } => return false,
        };
        matches!(source, kube::Error::Api(s) if s.code == 409 || s.code == 404)
    }
}

/// Applies writes with a timeout per call.
#[derive(Clone)]
pub struct Writer {
    client: Client,
    timeout: Duration,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// The API of a source — a Usage, ClusterUsage or DependencyRule — untyped (every write here
/// only needs its name), and its name.
fn source_api<'s>(client: &Client, source: &'s Source) -> (Api<DynamicObject>, &'s str) {
    match source {
        Source::Usage { namespace, name } => (
            Api::namespaced_with(client.clone(), namespace, &ApiResource::erase::<Usage>(&())),
            name,
        ),
        Source::ClusterUsage { name } => (
            Api::all_with(client.clone(), &ApiResource::erase::<ClusterUsage>(&())),
            name,
        ),
        Source::Rule { name } => (
            Api::all_with(client.clone(), &ApiResource::erase::<DependencyRule>(&())),
            name,
        ),
    }
}

fn api_for(client: &Client, t: &ObjectTarget) -> Api<DynamicObject> {
    let (group, version) = match t.api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", t.api_version.as_str()),
    };
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, &t.gk.kind),
        &t.plural,
    );
    match &t.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

fn describe(t: &ObjectTarget) -> String {
    t.gk.key(t.namespace.as_deref(), &t.name).to_string()
}

impl Writer {
    /// A writer with `timeout` per call.
    pub fn new(client: Client, timeout: Duration) -> Self {
        Self { client, timeout }
    }

    async fn timed<T>(
        &self,
        what: impl FnOnce() -> String,
        fut: impl Future<Output = Result<T, WriteError>>,
    ) -> Result<T, WriteError> {
        match tokio::time::timeout(self.timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(WriteError::Timeout {
                what: what(),
                after: self.timeout,
            }),
        }
    }

    fn params() -> PatchParams {
        PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..Default::default()
        }
    }

    /// Sets or removes the in-use label.
    pub async fn label(&self, w: &LabelWrite) -> Result<(), WriteError> {
        let value = if w.in_use { json!("true") } else { json!(null) };
        let patch = json!({"metadata": {
            "resourceVersion": w.target.resource_version,
            "labels": {IN_USE_LABEL: value},
        }});
        let api = api_for(&self.client, &w.target);
        self.timed(|| format!("labelling {}", describe(&w.target)), async {
            api.patch(&w.target.name, &Self::params(), &Patch::Merge(&patch))
                .await
                .map(drop)
                .map_err(|source| WriteError::Label {
                    target: describe(&w.target),
                    source,
                })
        })
        .await
    }

    /// Sets a usage's finalizers and owner references.
    pub async fn usage_meta(&self, w: &UsageMetaWrite) -> Result<(), WriteError> {
        // The record of Lien's references travels in the same request as the references.
        let record = if w.lien_owners.is_empty() {
            json!(null)
        } else {
            json!(
                w.lien_owners
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(",")
            )
        };
        let patch = json!({"metadata": {
            "resourceVersion": w.resource_version,
            "finalizers": w.finalizers,
            "ownerReferences": w.owner_references,
            "annotations": {USAGE_OWNERS_ANNOTATION: record},
        }});
        let target = w.source.to_string();
        let (api, name) = source_api(&self.client, &w.source);
        let fut = async {
            let r = api
                .patch(name, &Self::params(), &Patch::Merge(&patch))
                .await
                .map(drop);
            r.map_err(|source| WriteError::UsageMeta {
                target: target.clone(),
                source,
            })
        };
        self.timed(|| format!("updating {}", w.source), fut).await
    }

    /// Deletes a usage, if it is still the incarnation `uid`; one already gone counts as done.
    pub async fn delete_usage(&self, source: &Source, uid: &str) -> Result<(), WriteError> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: None,
            }),
            ..Default::default()
        };
        let (api, name) = source_api(&self.client, source);
        let fut = async {
            let r = api.delete(name, &params).await.map(drop);
            match r {
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                r => r.map_err(|e| WriteError::UsageDelete {
                    target: source.to_string(),
                    source: e,
                }),
            }
        };
        self.timed(|| format!("deleting {source}"), fut).await
    }

    /// Writes a source's status (a `UsageStatus` or a `DependencyRuleStatus`).
    pub async fn status(
        &self,
        source: &Source,
        status: &impl serde::Serialize,
    ) -> Result<(), WriteError> {
        let patch = json!({"status": status});
        let (api, name) = source_api(&self.client, source);
        let fut = async {
            let r = api
                .patch_status(name, &Self::params(), &Patch::Merge(&patch))
                .await
                .map(drop);
            r.map_err(|e| WriteError::Status {
                target: source.to_string(),
                source: e,
            })
        };
        self.timed(|| format!("status of {source}"), fut).await
    }

    /// Whether `requester` may delete `target` now: a SubjectAccessReview with their whole
    /// identity, as the replay's authorization (Lien's service account may create reviews,
    /// `deploy/rbac.yaml`). An error is not an answer: the replay waits for one.
    pub async fn may_delete(
        &self,
        target: &ObjectTarget,
        requester: &Requester,
    ) -> Result<AccessDecision, WriteError> {
        let request = AccessRequest {
            user: requester.clone(),
            verb: "delete".into(),
            group: target.gk.group.clone(),
            resource: target.plural.clone(),
            namespace: target.namespace.clone(),
            name: Some(target.name.clone()),
        };
        let check = crate::live::ApiAccessCheck::new(self.client.clone());
        self.timed(
            || format!("authorizing the replay of {}", describe(target)),
            async {
                check
                    .check(&request)
                    .await
                    .map_err(|e| WriteError::ReplayCheck {
                        target: describe(target),
                        reason: e.to_string(),
                    })
            },
        )
        .await
    }

    /// Re-issues a refused DELETE with a UID precondition and the recorded propagation policy.
    /// An object already gone counts as done: `Ok(false)`, so that a replay retried after an
    /// answer that was lost, or sent again from a stale cache, is not counted twice
    /// (`lien_controller_replays_total` counts DELETEs the API server accepted).
    pub async fn replay(
        &self,
        target: &ObjectTarget,
        attempt: &DeletionAttempt,
    ) -> Result<bool, WriteError> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(attempt.uid.clone()),
                resource_version: None,
            }),
            propagation_policy: match attempt.propagation_policy.as_deref() {
                Some("Foreground") => Some(kube::api::PropagationPolicy::Foreground),
                Some("Orphan") => Some(kube::api::PropagationPolicy::Orphan),
                Some("Background") => Some(kube::api::PropagationPolicy::Background),
                _ => None,
            },
            ..Default::default()
        };
        let api = api_for(&self.client, target);
        self.timed(
            || format!("replaying the deletion of {}", describe(target)),
            async {
                match api.delete(&target.name, &params).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
                    Err(source) => Err(WriteError::Replay {
                        target: describe(target),
                        source,
                    }),
                }
            },
        )
        .await
    }

    /// Deletes an object in a namespace being deleted that the namespace controller is stuck
    /// behind (`lien_decide::namespace_content`): background propagation, as the namespace
    /// controller deletes; with a UID precondition when the UID is known (no other incarnation
    /// can appear in a namespace being deleted). `Ok(false)`: already gone.
    pub async fn delete_namespace_content(
        &self,
        target: &ObjectTarget,
    ) -> Result<bool, WriteError> {
        let params = DeleteParams {
            preconditions: (!target.uid.is_empty()).then(|| Preconditions {
                uid: Some(target.uid.clone()),
                resource_version: None,
            }),
            propagation_policy: Some(kube::api::PropagationPolicy::Background),
            ..Default::default()
        };
        let api = api_for(&self.client, target);
        self.timed(
            || {
                format!(
                    "deleting {} in its namespace being deleted",
                    describe(target)
                )
            },
            async {
                match api.delete(&target.name, &params).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
                    Err(source) => Err(WriteError::NamespaceContent {
                        target: describe(target),
                        source,
                    }),
                }
            },
        )
        .await
    }

    /// Records a deletion attempt on the object (`Some`: sealed, see [`crate::replay`]) or
    /// removes the record (`None`).
    pub async fn record(
        &self,
        target: &ObjectTarget,
        attempt: Option<&SealedRecord>,
    ) -> Result<(), WriteError> {
        let value = match attempt {
            Some(a) => json!(a.as_str()),
            None => json!(null),
        };
        let mut meta = json!({"annotations": {DELETION_ATTEMPT_ANNOTATION: value}});
        // Forgetting is guarded by the version the decision saw; recording is not, because a
        // denial is news that must land whatever else changed on the object.
        if attempt.is_none() {
            meta["resourceVersion"] = json!(target.resource_version);
        }
        let patch = json!({ "metadata": meta });
        let api = api_for(&self.client, target);
        self.timed(|| format!("recording on {}", describe(target)), async {
            api.patch(&target.name, &Self::params(), &Patch::Merge(&patch))
                .await
                .map(drop)
                .map_err(|source| WriteError::Record {
                    target: describe(target),
                    source,
                })
        })
        .await
    }

    /// Records a refusal that asks for no replay — unless the object carries a record that
    /// `replays` says will replay it (a deletion request sealed by the webhook, e.g.
    /// `kubectl lien delete --when-free` right after this refusal), which such a record must
    /// not replace. Read, then written guarded by the version read, retried on a conflict.
    /// `Ok(false)`: not written, a replaying record is there.
    pub async fn record_unless_replaying(
        &self,
        target: &ObjectTarget,
        attempt: &SealedRecord,
        replays: impl Fn(&str, &str) -> bool,
    ) -> Result<bool, WriteError> {
        let api = api_for(&self.client, target);
        let error = |source| WriteError::Record {
            target: describe(target),
            source,
        };
        let fut = async {
            let mut tries = 0;
            loop {
                let current = api.get_metadata(&target.name).await.map_err(error)?;
                let uid = current.metadata.uid.as_deref().unwrap_or_default();
                if current
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(DELETION_ATTEMPT_ANNOTATION))
                    .is_some_and(|raw| replays(raw, uid))
                {
                    return Ok(false);
                }
                let patch = json!({"metadata": {
                    "resourceVersion": current.metadata.resource_version,
                    "annotations": {DELETION_ATTEMPT_ANNOTATION: attempt.as_str()},
                }});
                match api
                    .patch(&target.name, &Self::params(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => return Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 && tries < 3 => tries += 1,
                    Err(e) => return Err(error(e)),
                }
            }
        };
        self.timed(|| format!("recording on {}", describe(target)), fut)
            .await
    }
}

/// The Secret `lien run` keeps the replay key in, in Lien's namespace, by default.
pub const REPLAY_KEY_SECRET: &str = "lien-replay-key";
/// The Secret's data key holding the key's bytes.
pub const REPLAY_KEY_FIELD: &str = "key";

/// Why the replay key could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ReplayKeyError {
    /// Reading or creating the Secret failed.
    #[error(
        "reading or creating Secret {namespace}/{name} (the replay key): {source}; Lien's service account needs get and create on it (deploy/rbac.yaml)"
    )]
    Api {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The Secret exists but holds no usable key.
    #[error(
        "Secret {namespace}/{name} does not hold a usable replay key in data.{REPLAY_KEY_FIELD}: {source}; delete the Secret and Lien creates a new one (pending replays are then forgotten)"
    )]
    Unusable {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Why.
        #[source]
        source: crate::replay::KeyError,
    },
    /// No random bytes for a new key.
    #[error("generating a replay key: {0}")]
    Random(#[source] crate::replay::KeyError),
}

/// The replay key from the Secret `namespace/name`, which is created with a fresh random key if
/// it does not exist. Replicas starting together race to create it: the loser's create is
/// refused (409) and it reads the winner's, so all end up with the same key.
pub async fn replay_key_from_secret(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<crate::replay::ReplayKey, ReplayKeyError> {
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::Secret;
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let api_error = |source| ReplayKeyError::Api {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source,
    };
    let existing = match api.get_opt(name).await.map_err(api_error)? {
        Some(secret) => secret,
        None => {
            let bytes = crate::replay::ReplayKey::random_bytes().map_err(ReplayKeyError::Random)?;
            let secret = Secret {
                metadata: kube::api::ObjectMeta {
                    name: Some(name.to_owned()),
                    namespace: Some(namespace.to_owned()),
                    labels: Some([("app.kubernetes.io/name".to_owned(), "lien".to_owned())].into()),
                    ..Default::default()
                },
                type_: Some("Opaque".to_owned()),
                data: Some([(REPLAY_KEY_FIELD.to_owned(), ByteString(bytes.to_vec()))].into()),
                ..Default::default()
            };
            match api.create(&kube::api::PostParams::default(), &secret).await {
                Ok(created) => {
                    tracing::info!(namespace, name, "created the replay key's Secret");
                    created
                }
                // Another replica created it first: use its key.
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    api.get(name).await.map_err(api_error)?
                }
                Err(e) => return Err(api_error(e)),
            }
        }
    };
    let unusable = |source| ReplayKeyError::Unusable {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source,
    };
    let bytes = existing
        .data
        .as_ref()
        .and_then(|d| d.get(REPLAY_KEY_FIELD))
        .map(|b| b.0.as_slice())
        .unwrap_or_default();
    crate::replay::ReplayKey::from_bytes(bytes).map_err(unusable)
}
