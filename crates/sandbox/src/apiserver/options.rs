//! What a write is asked and what it answers: the options of create, update, patch and delete
//! (`?fieldValidation=`, `?dryRun=`, `propagationPolicy`, preconditions), their outcomes, and
//! the optimistic-concurrency retry every write verb shares.

use serde_json::{Value, json};

use crate::auth::UserInfo;
use crate::error::{ApiError, Cause};
use crate::registry::ResourceType;
use crate::schema::field::{self, go_quote};

/// `?fieldValidation=`: what to do with fields the schema does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    Ignore,
    #[default]
    Warn,
    Strict,
}

impl FieldValidation {
    /// A value [`validate_field_validation`] accepted.
    pub fn parse(s: &str) -> Self {
        match s {
            "Ignore" => FieldValidation::Ignore,
            "Strict" => FieldValidation::Strict,
            _ => FieldValidation::Warn,
        }
    }
}

/// The group kube-apiserver names option kinds by in a 422 (`CreateOptions.meta.k8s.io "" is
/// invalid: …`).
pub const META_GROUP: &str = "meta.k8s.io";

/// A request's options refused as kube's handlers refuse them: `errors.NewInvalid` of the options
/// kind (`CreateOptions`, `UpdateOptions`, `PatchOptions`, `DeleteOptions`, `ListOptions`) with
/// no name.
pub fn invalid_options(kind: &str, causes: Vec<Cause>) -> Result<(), ApiError> {
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(META_GROUP, kind, "", causes))
    }
}

/// apimachinery's `ValidateDryRun`: every value `All`; the list printed as Go's `%#v` prints a
/// `[]string`.
pub fn validate_dry_run(values: &[String]) -> Vec<Cause> {
    if values.iter().all(|v| v == "All") {
        return Vec::new();
    }
    let quoted: Vec<String> = values.iter().map(|v| go_quote(v)).collect();
    vec![Cause::new(
        field::NOT_SUPPORTED,
        "dryRun",
        format!(
            "Unsupported value: []string{{{}}}: supported values: \"All\"",
            quoted.join(", ")
        ),
    )]
}

/// apimachinery's `ValidateFieldValidation`.
pub fn validate_field_validation(value: &str) -> Vec<Cause> {
    if matches!(value, "" | "Ignore" | "Strict" | "Warn") {
        return Vec::new();
    }
    vec![field::not_supported(
        "fieldValidation",
        &json!(value),
        &["", "Ignore", "Strict", "Warn"].map(String::from),
    )]
}

/// apimachinery's `FieldManagerMaxLength`.
const FIELD_MANAGER_MAX_LENGTH: usize = 128;

/// apimachinery's `ValidateFieldManager`: at most 128 bytes, every character printable.
pub fn validate_field_manager(manager: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if manager.len() > FIELD_MANAGER_MAX_LENGTH {
        causes.push(field::too_long(
            "fieldManager",
            FIELD_MANAGER_MAX_LENGTH as i64,
        ));
    }
    for (i, c) in manager.char_indices() {
        if c.is_control() {
            causes.push(field::invalid(
                "fieldManager",
                &json!(manager),
                &format!("invalid character U+{:04X} (at position {i})", c as u32),
            ));
        }
    }
    causes
}

/// apimachinery's `ValidateCreateOptions`, `ValidateUpdateOptions` and `ValidatePatchOptions`
/// (`patch`: `Some(is_apply)` for a PATCH), in their order. `explicit_manager` is the
/// `?fieldManager=` the client sent, before the server derives one from its user agent.
pub fn validate_write_options(
    explicit_manager: Option<&str>,
    dry_run: &[String],
    field_validation: &str,
    patch: Option<(bool, bool)>,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some((apply, force_given)) = patch {
        if !apply && force_given {
            causes.push(field::forbidden(
                "force",
                "may not be specified for non-apply patch",
            ));
        } else if apply && explicit_manager.unwrap_or_default().is_empty() {
            causes.push(field::required(
                "fieldManager",
                "is required for apply patch",
            ));
        }
    }
    causes.extend(validate_field_manager(explicit_manager.unwrap_or_default()));
    causes.extend(validate_dry_run(dry_run));
    causes.extend(validate_field_validation(field_validation));
    causes
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
    /// `?fieldManager=` and `?fieldValidation=` as the client sent them (before the server
    /// derives a manager from the user agent): what an admission review's options carry.
    pub sent: SentWriteOptions,
}

/// The options of a write a client set itself.
#[derive(Debug, Clone, Default)]
pub struct SentWriteOptions {
    pub field_manager: Option<String>,
    pub field_validation: Option<String>,
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
            sent: SentWriteOptions::default(),
        }
    }

    pub(super) fn manager(&self) -> String {
        if self.field_manager.is_empty() {
            "unknown".to_string()
        } else {
            self.field_manager.clone()
        }
    }

    /// The options an admission review carries, as kube's handlers pass them to admission:
    /// what the client sent (no manager derived from its user agent); a patch is admitted with
    /// the `UpdateOptions` `patchToUpdateOptions` makes of its `PatchOptions` (`dryRun`,
    /// `fieldManager`, `fieldValidation`: no `force`); a `DeleteOptions` has neither a manager
    /// nor a field validation.
    pub(super) fn options_object(&self, kind: &str) -> Value {
        let kind = if kind == "PatchOptions" {
            "UpdateOptions"
        } else {
            kind
        };
        let mut o = json!({"apiVersion": "meta.k8s.io/v1", "kind": kind});
        if self.dry_run {
            o["dryRun"] = json!(["All"]);
        }
        if kind != "DeleteOptions" {
            if let Some(manager) = self.sent.field_manager.as_ref().filter(|m| !m.is_empty()) {
                o["fieldManager"] = json!(manager);
            }
            if let Some(v) = self
                .sent
                .field_validation
                .as_ref()
                .filter(|v| !v.is_empty())
            {
                o["fieldValidation"] = json!(v);
            }
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
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "Orphan" => Some(Propagation::Orphan),
            "Background" => Some(Propagation::Background),
            "Foreground" => Some(Propagation::Foreground),
            _ => None,
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

    /// Takes the options a client sent, validated as `ValidateDeleteOptions` validates them
    /// (kube-apiserver's 422 `DeleteOptions.meta.k8s.io "" is invalid`).
    pub fn apply(&mut self, sent: SentDeleteOptions) -> Result<(), ApiError> {
        let mut causes = Vec::new();
        if let (Some(_), Some(p)) = (sent.orphan_dependents, &sent.propagation) {
            causes.push(field::invalid(
                "propagationPolicy",
                &json!(p),
                "orphanDependents and deletionPropagation cannot be both set",
            ));
        }
        let propagation = match sent.propagation.as_deref() {
            None => None,
            Some(p) => match Propagation::parse(p) {
                Some(p) => Some(p),
                None => {
                    causes.push(field::not_supported(
                        "propagationPolicy",
                        &json!(p),
                        &["Foreground", "Background", "Orphan", "nil"].map(String::from),
                    ));
                    None
                }
            },
        };
        causes.extend(validate_dry_run(&sent.dry_run));
        invalid_options("DeleteOptions", causes)?;
        self.orphan_dependents = sent.orphan_dependents;
        self.propagation = propagation.or(match sent.orphan_dependents {
            // The deprecated field, as kube-apiserver still honours it.
            Some(true) => Some(Propagation::Orphan),
            Some(false) => Some(Propagation::Background),
            None => None,
        });
        self.precondition_uid = sent.precondition_uid;
        self.precondition_resource_version = sent.precondition_resource_version;
        self.write.dry_run = !sent.dry_run.is_empty();
        Ok(())
    }

    /// Reads a `DeleteOptions` object (an Eviction's `deleteOptions`).
    pub fn merge_body(&mut self, body: &Value) -> Result<(), ApiError> {
        self.apply(SentDeleteOptions::from_body(body))
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

/// Go's `strconv.ParseUint(s, 10, 64)` error, as kube-apiserver prints a resourceVersion that is
/// not one.
pub fn parse_uint_error(s: &str) -> Option<String> {
    match s.parse::<u64>() {
        Ok(_) => None,
        Err(_) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => Some(format!(
            "strconv.ParseUint: parsing {}: value out of range",
            go_quote(s)
        )),
        Err(_) => Some(format!(
            "strconv.ParseUint: parsing {}: invalid syntax",
            go_quote(s)
        )),
    }
}

/// The list and watch options `ValidateListOptions` judges (apimachinery's
/// `internalversion/validation`), as the request sent them.
#[derive(Debug, Default)]
pub struct SentListOptions<'a> {
    pub watch: bool,
    pub resource_version: &'a str,
    pub resource_version_match: &'a str,
    pub continue_token: &'a str,
    pub send_initial_events: Option<bool>,
}

/// `ValidateListOptions` with the `WatchList` feature on (as it is in kube 1.32): what a list
/// or a watch may combine; kube-apiserver's 422 `ListOptions.meta.k8s.io "" is invalid`.
pub fn validate_list_options(o: &SentListOptions<'_>) -> Result<(), ApiError> {
    const MATCH: &str = "resourceVersionMatch";
    let mut causes = Vec::new();
    if o.watch {
        if o.send_initial_events.is_some() && o.resource_version_match != "NotOlderThan" {
            causes.push(field::forbidden(
                MATCH,
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if !o.resource_version_match.is_empty() {
            if o.send_initial_events.is_none() {
                causes.push(field::forbidden(
                    MATCH,
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if o.resource_version_match != "NotOlderThan" {
                causes.push(field::not_supported(
                    MATCH,
                    &json!(o.resource_version_match),
                    &["NotOlderThan".to_string()],
                ));
            }
            if !o.continue_token.is_empty() {
                causes.push(field::forbidden(
                    MATCH,
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
    } else {
        if !o.resource_version_match.is_empty() {
            if o.resource_version.is_empty() {
                causes.push(field::forbidden(
                    MATCH,
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if !o.continue_token.is_empty() {
                causes.push(field::forbidden(
                    MATCH,
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if !matches!(o.resource_version_match, "Exact" | "NotOlderThan") {
                causes.push(field::not_supported(
                    MATCH,
                    &json!(o.resource_version_match),
                    &["Exact", "NotOlderThan", ""].map(String::from),
                ));
            }
            if o.resource_version_match == "Exact" && o.resource_version == "0" {
                causes.push(field::forbidden(
                    MATCH,
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        if o.send_initial_events.is_some() {
            causes.push(field::forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            ));
        }
    }
    invalid_options("ListOptions", causes)
}

/// The fields of a `DeleteOptions` as a client sent them: its body's, or, when a DELETE has no
/// body, its query's (kube's delete handler reads one or the other, never both).
#[derive(Debug, Default)]
pub struct SentDeleteOptions {
    pub orphan_dependents: Option<bool>,
    pub propagation: Option<String>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub dry_run: Vec<String>,
}

impl SentDeleteOptions {
    pub fn from_body(body: &Value) -> Self {
        let string = |v: &Value| v.as_str().map(str::to_string);
        SentDeleteOptions {
            orphan_dependents: body["orphanDependents"].as_bool(),
            propagation: string(&body["propagationPolicy"]),
            precondition_uid: string(&body["preconditions"]["uid"]),
            precondition_resource_version: string(&body["preconditions"]["resourceVersion"]),
            dry_run: body["dryRun"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(string)
                .collect(),
        }
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
