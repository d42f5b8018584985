//! What a write is asked and what it answers: the options of create, update, patch and delete
//! (`?fieldValidation=`, `?dryRun=`, `propagationPolicy`, preconditions), their outcomes, and
//! the optimistic-concurrency retry every write verb shares.

use serde_json::{Value, json};

use crate::auth::UserInfo;
use crate::error::{ApiError, Cause};
use crate::registry::ResourceType;

/// `?fieldValidation=`: what to do with fields the schema does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    Ignore,
    #[default]
    Warn,
    Strict,
}

impl FieldValidation {
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        match s {
            "" | "Warn" => Ok(FieldValidation::Warn),
            "Ignore" => Ok(FieldValidation::Ignore),
            "Strict" => Ok(FieldValidation::Strict),
            other => Err(ApiError::bad_request(format!(
                "fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\", got \"{other}\""
            ))),
        }
    }
}

/// Who writes, and how.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    pub user: UserInfo,
    pub dry_run: bool,
    pub field_manager: String,
    pub field_validation: FieldValidation,
    /// Server-side apply: take ownership of conflicting fields.
    pub force: bool,
    /// A POST or PUT body as sent, for strict decoding in document order (duplicate fields
    /// are visible only there).
    pub raw_body: Option<bytes::Bytes>,
}

impl WriteOptions {
    pub fn as_user(user: UserInfo) -> Self {
        WriteOptions {
            user,
            dry_run: false,
            field_manager: String::new(),
            field_validation: FieldValidation::Warn,
            force: false,
            raw_body: None,
        }
    }

    pub(super) fn manager(&self) -> String {
        if self.field_manager.is_empty() {
            "unknown".to_string()
        } else {
            self.field_manager.clone()
        }
    }

    pub(super) fn options_object(&self, kind: &str) -> Value {
        let mut o = json!({"apiVersion": "meta.k8s.io/v1", "kind": kind});
        if self.dry_run {
            o["dryRun"] = json!(["All"]);
        }
        if !self.field_manager.is_empty() {
            o["fieldManager"] = json!(self.field_manager);
        }
        if kind == "PatchOptions" && self.force {
            o["force"] = json!(true);
        }
        o
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Orphan,
    Background,
    Foreground,
}

impl Propagation {
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        match s {
            "Orphan" => Ok(Propagation::Orphan),
            "Background" => Ok(Propagation::Background),
            "Foreground" => Ok(Propagation::Foreground),
            other => Err(ApiError::invalid(
                "",
                "DeleteOptions",
                "",
                vec![Cause::new(
                    "FieldValueNotSupported",
                    "propagationPolicy",
                    format!(
                        "Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                    ),
                )],
            )),
        }
    }

    pub(super) fn as_str(self) -> &'static str {
        match self {
            Propagation::Orphan => "Orphan",
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
        }
    }
}

pub const ORPHAN_FINALIZER: &str = "orphan";
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// `DeleteOptions`.
#[derive(Debug, Clone)]
pub struct DeleteOptions {
    pub write: WriteOptions,
    pub propagation: Option<Propagation>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    /// The deprecated `orphanDependents` as the client sent it: `Some(false)` is what makes
    /// kube-apiserver answer 202 Accepted to a delete that did not finish at once.
    pub orphan_dependents: Option<bool>,
    /// One object of a DELETE of a collection: admission reviews it with `request.name` empty
    /// and the object in `oldObject`, as kube-apiserver does (`AdmissionToValidateObjectDeleteFunc`
    /// keeps the collection request's attributes, name included).
    pub collection: bool,
}

impl DeleteOptions {
    pub fn new(user: UserInfo) -> Self {
        DeleteOptions {
            write: WriteOptions::as_user(user),
            propagation: None,
            precondition_uid: None,
            precondition_resource_version: None,
            orphan_dependents: None,
            collection: false,
        }
    }

    /// Reads a `DeleteOptions` body (kubectl and client-go send one), with query values
    /// (`?propagationPolicy=`) already applied taking precedence only where the body is silent.
    pub fn merge_body(&mut self, body: &Value) -> Result<(), ApiError> {
        let orphan = body["orphanDependents"].as_bool();
        if orphan.is_some() {
            self.orphan_dependents = orphan;
        }
        if let Some(p) = body["propagationPolicy"].as_str() {
            self.propagation = Some(Propagation::parse(p)?);
        } else if let Some(orphan) = orphan {
            // The deprecated field, as kube-apiserver still honours it.
            self.propagation = Some(if orphan {
                Propagation::Orphan
            } else {
                Propagation::Background
            });
        }
        if let Some(uid) = body["preconditions"]["uid"].as_str() {
            self.precondition_uid = Some(uid.to_string());
        }
        if let Some(rv) = body["preconditions"]["resourceVersion"].as_str() {
            self.precondition_resource_version = Some(rv.to_string());
        }
        if body["dryRun"].as_array().is_some_and(|d| !d.is_empty()) {
            self.write.dry_run = true;
        }
        Ok(())
    }

    pub(super) fn options_object(&self) -> Value {
        let mut o = self.write.options_object("DeleteOptions");
        if let Some(p) = self.propagation {
            o["propagationPolicy"] = json!(p.as_str());
        }
        if self.precondition_uid.is_some() || self.precondition_resource_version.is_some() {
            o["preconditions"] = json!({
                "uid": self.precondition_uid,
                "resourceVersion": self.precondition_resource_version,
            });
        }
        o
    }
}

/// The result of a successful write.
#[derive(Debug, Clone)]
pub struct Written {
    pub object: Value,
    pub warnings: Vec<String>,
    pub created: bool,
}

impl Written {
    /// A review's answer (access reviews, SelfSubjectReview), typed at the version asked for.
    pub(super) fn review(rt: &ResourceType, version: &str, mut review: Value) -> Written {
        review["apiVersion"] = json!(rt.api_version(version));
        review["kind"] = json!(rt.kind);
        Written {
            object: review,
            warnings: vec![],
            created: true,
        }
    }
}

#[derive(Debug, Clone)]
pub enum DeleteOutcome {
    /// The object is gone; here is its last state.
    Deleted(Value),
    /// The object is being deleted and waits for finalizers; here is its current state.
    Pending(Value),
}

/// A commit lost a race with a concurrent write.
pub(super) enum Commit<T> {
    Done(T),
    Raced,
}

pub(super) const MAX_RETRIES: usize = 16;

/// Whether a patch body names a resourceVersion (a JSON/merge patch can carry one as a
/// precondition).
pub(super) fn body_sets_resource_version(body: &[u8]) -> bool {
    std::str::from_utf8(body).is_ok_and(|s| s.contains("resourceVersion"))
}
