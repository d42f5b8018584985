//! `kubectl lien delete --when-free TYPE/NAME`: delete an object now, or — when Lien refuses
//! because it is in use — have it deleted once it is free.
//!
//! Everything goes through the API server as the user (their kubeconfig, their rights), which
//! is what makes it safe: first a plain DELETE (the API server authorizes it; Lien's webhook
//! answers 409 if the object is in use); on Lien's refusal, a merge patch setting
//! `lien.dev/delete-when-free: <policy>` on the object. The API server sends that UPDATE to
//! Lien's mutating webhook, which checks that the user may delete the object
//! (a SubjectAccessReview) and replaces the annotation with a record sealed with Lien's key;
//! Lien's controller replays the DELETE once nothing holds the object. No client certificate
//! is needed anywhere, so this works on managed clusters too. Removing
//! `lien.dev/deletion-attempt` cancels the request.

use kube::Client;
use kube::api::{DeleteParams, Patch, PatchParams, PropagationPolicy};
use lien_core::ObjectKey;
use lien_core::seams::{DELETE_WHEN_FREE_ANNOTATION, DELETION_ATTEMPT_ANNOTATION};
use serde_json::json;

use super::read::{ReadError, Resource, api_for};

/// `--cascade`, as kubectl takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Cascade {
    /// Delete the dependents in the background (kubectl's default).
    #[default]
    Background,
    /// Delete the dependents first.
    Foreground,
    /// Leave the dependents.
    Orphan,
}

impl Cascade {
    /// The `propagationPolicy`.
    pub fn policy(self) -> &'static str {
        match self {
            Self::Background => "Background",
            Self::Foreground => "Foreground",
            Self::Orphan => "Orphan",
        }
    }

    fn params(self) -> DeleteParams {
        DeleteParams {
            propagation_policy: Some(match self {
                Self::Background => PropagationPolicy::Background,
                Self::Foreground => PropagationPolicy::Foreground,
                Self::Orphan => PropagationPolicy::Orphan,
            }),
            ..DeleteParams::default()
        }
    }
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deleted {
    /// The DELETE went through: the object is going.
    Now,
    /// Lien refused it (the message); the request to delete it when free is recorded.
    WhenFree {
        /// Lien's refusal.
        refusal: String,
    },
}

/// Why the command failed.
#[derive(Debug, thiserror::Error)]
pub enum DeleteError {
    /// Lien refused the DELETE and `--when-free` was not given. Lien's refusal already says
    /// whether it will be replayed and, if not, the `--when-free` command that asks for it.
    #[error("{source}")]
    InUse {
        /// The refusal.
        #[source]
        source: ReadError,
    },
    /// The DELETE, or the request, failed (not found, forbidden, refused by Lien's mutating
    /// webhook…): the server's answer.
    #[error("{0}")]
    Api(#[from] ReadError),
    /// The annotation was stored as written: no Lien mutating webhook sealed it.
    #[error(
        "error: {object}: the request was stored but not sealed: Lien's mutating webhook (MutatingWebhookConfiguration lien, hook seal.lien.dev) did not answer it. Is a Lien with --when-free support running? The annotation {DELETE_WHEN_FREE_ANNOTATION} was removed again"
    )]
    NotSealed {
        /// The object.
        object: String,
    },
}

/// Whether an API error is Lien's refusal of a DELETE (an object in use), by its webhooks'
/// names as kube-apiserver prefixes their denials.
pub fn refused_by_lien(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 && [
        "admission webhook \"delete.lien.dev\"",
        "admission webhook \"namespaces.lien.dev\"",
        "admission webhook \"namespace-contents.lien.dev\"",
    ].iter().any(|hook| s.message.contains(hook)))
}

/// The merge patch of a deletion request.
pub fn request_patch(cascade: Cascade) -> serde_json::Value {
    json!({"metadata": {"annotations": {DELETE_WHEN_FREE_ANNOTATION: cascade.policy()}}})
}

/// Deletes `key` now, or with `when_free` requests its deletion once free (see the module
/// docs).
pub async fn delete(
    client: &Client,
    key: &ObjectKey,
    resource: &Resource,
    cascade: Cascade,
    when_free: bool,
) -> Result<Deleted, DeleteError> {
    let api = api_for(client, resource, key.namespace.as_deref());
    let doing = format!("deleting {} {:?}", resource.plural_ref(), key.name);
    let refusal = match api.delete(&key.name, &cascade.params()).await {
        Ok(_) => return Ok(Deleted::Now),
        Err(e) if refused_by_lien(&e) => {
            let refusal = ReadError::from_kube(doing, e);
            if !when_free {
                return Err(DeleteError::InUse { source: refusal });
            }
            refusal
        }
        Err(e) => return Err(ReadError::from_kube(doing, e).into()),
    };
    let stored = api
        .patch(
            &key.name,
            &PatchParams::default(),
            &Patch::Merge(request_patch(cascade)),
        )
        .await
        .map_err(|e| {
            ReadError::from_kube(
                format!(
                    "requesting the deletion of {} {:?}",
                    resource.plural_ref(),
                    key.name
                ),
                e,
            )
        })?;
    let annotations = stored.metadata.annotations.unwrap_or_default();
    if annotations.contains_key(DELETE_WHEN_FREE_ANNOTATION) {
        // Nobody sealed it: take it back rather than leave a request nothing acts on.
        let undo = json!({"metadata": {"annotations": {DELETE_WHEN_FREE_ANNOTATION: null}}});
        let _ = api
            .patch(&key.name, &PatchParams::default(), &Patch::Merge(undo))
            .await;
        return Err(DeleteError::NotSealed {
            object: key.to_string(),
        });
    }
    Ok(Deleted::WhenFree {
        refusal: refusal.to_string(),
    })
}

/// What the command prints: `ty/name` as the user typed it.
pub fn report(ty: &str, key: &ObjectKey, deleted: &Deleted) -> String {
    let object = format!("{ty}/{}", key.name);
    let ns = key
        .namespace
        .as_deref()
        .map(|ns| format!(" -n {ns}"))
        .unwrap_or_default();
    match deleted {
        Deleted::Now => format!("{object} deleted\n"),
        Deleted::WhenFree { refusal } => format!(
            "{object} is in use; Lien will delete it when it is free.\n{refusal}\nTo cancel: kubectl annotate {ty} {}{ns} {DELETION_ATTEMPT_ANNOTATION}-\n",
            key.name
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            message: message.into(),
            ..Default::default()
        }))
    }

    #[test]
    fn only_lien_refusals_of_a_delete_lead_to_a_request() {
        assert!(refused_by_lien(&api_error(
            409,
            "admission webhook \"delete.lien.dev\" denied the request: cannot delete ConfigMap a/b: it is protected"
        )));
        assert!(refused_by_lien(&api_error(
            409,
            "admission webhook \"namespaces.lien.dev\" denied the request: …"
        )));
        // Another webhook's refusal, a conflict that is not an admission denial, a 403.
        assert!(!refused_by_lien(&api_error(
            409,
            "admission webhook \"other.example.com\" denied the request"
        )));
        assert!(!refused_by_lien(&api_error(
            409,
            "Operation cannot be fulfilled"
        )));
        assert!(!refused_by_lien(&api_error(
            403,
            "configmaps \"b\" is forbidden: admission webhook \"delete.lien.dev\""
        )));
    }

    #[test]
    fn the_request_names_the_policy_and_the_report_how_to_cancel() {
        assert_eq!(
            request_patch(Cascade::Foreground),
            json!({"metadata": {"annotations": {"lien.dev/delete-when-free": "Foreground"}}})
        );
        assert_eq!(Cascade::default().policy(), "Background");
        let key = ObjectKey::new("", "ConfigMap", Some("team-a"), "settings");
        let text = report(
            "configmap",
            &key,
            &Deleted::WhenFree {
                refusal: "Error from server (Conflict): in use".into(),
            },
        );
        assert!(
            text.starts_with("configmap/settings is in use; Lien will delete it when it is free."),
            "{text}"
        );
        assert!(
            text.contains(
                "To cancel: kubectl annotate configmap settings -n team-a lien.dev/deletion-attempt-"
            ),
            "{text}"
        );
        assert_eq!(
            report("configmap", &key, &Deleted::Now),
            "configmap/settings deleted\n"
        );
    }
}
