//! The `admission.k8s.io/v1` `AdmissionReview` as Lien reads and answers it.
//!
//! # Data model
//!
//! A review arrives as one JSON document of up to ~7 MiB, most of which is the object being
//! deleted or updated (twice, for an UPDATE). Lien decides from a handful of fields, so
//! [`Review`] is a set of **borrowed** serde structs that keep only those:
//!
//! - `request.uid`, `operation`, `kind` (group/version/kind), `resource`, `subResource`, `name`,
//!   `namespace`, `dryRun`, `userInfo.username`/`groups`, `options.propagationPolicy`;
//! - of `object` and `oldObject` only `metadata.uid`, `metadata.labels` and
//!   `metadata.annotations`.
//!
//! Every other field — `spec`, `status`, `managedFields`, the rest of `metadata` — is stepped
//! over by the structural scanner in [`crate::scan`], which finds where a value ends with SIMD
//! bracket counting instead of tokenising it: the bulk of a review is never decoded. The fields
//! Lien reads are decoded by serde_json from their spans, so they are fully validated. Strings
//! are `Cow<'a, str>`, borrowed from the body unless JSON escapes force a copy. The review lives
//! as long as the request body. As in Go's `encoding/json`, a repeated member's last value wins.
//!
//! The answer is always a whole `AdmissionReview` ([`Answer::to_review_json`]): allowed,
//! denied with a `status` (`code`, `reason`, `message`), plus `warnings`.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::scan::{self, ScanError};

/// The API version of the reviews Lien reads and writes.
pub const ADMISSION_API_VERSION: &str = "admission.k8s.io/v1";

/// Why a body is not an `AdmissionReview` Lien can answer.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// Not JSON, or JSON of the wrong shape.
    #[error("malformed AdmissionReview: {0}")]
    Json(#[from] serde_json::Error),
    /// Not JSON of an object's shape (unterminated, unbalanced, a member without a value…).
    #[error("malformed AdmissionReview: {0}")]
    Scan(#[from] ScanError),
    /// A field Lien reads has the wrong type or is not valid JSON.
    #[error("malformed AdmissionReview: {field}: {source}")]
    Field {
        /// The field's path, e.g. `request.userInfo`.
        field: &'static str,
        /// What serde_json found wrong.
        source: serde_json::Error,
    },
    /// A required field is missing.
    #[error("malformed AdmissionReview: {0} is required")]
    Missing(&'static str),
    /// Valid JSON without a `request`.
    #[error("malformed AdmissionReview: no request")]
    NoRequest,
}

/// An `AdmissionReview`, read for its `request` only.
#[derive(Debug)]
pub struct Review;

impl Review {
    /// Parses a review body, borrowing from it.
    pub fn parse(body: &[u8]) -> Result<Request<'_>, ReviewError> {
        let mut request = None;
        let end = scan::object(body, 0, |key, start| {
            if &*scan::name(key) != b"request" || is_null(body, start) {
                return Ok(None);
            }
            let (parsed, end) = Request::scan(body, start)?;
            request = Some(parsed);
            Ok::<_, ReviewError>(Some(end))
        })?;
        if let Some(at) = body[end..].iter().position(|b| !b.is_ascii_whitespace()) {
            return Err(ScanError::Unexpected {
                at: end + at,
                found: char::from(body[end + at]),
                expected: "the end of the review",
            }
            .into());
        }
        request.ok_or(ReviewError::NoRequest)
    }
}

/// Decodes the value that starts at `start` with serde_json (`null` is `None`), naming the field
/// when it is malformed; returns it with the index just past it.
fn decode<'a, T: Deserialize<'a>>(
    body: &'a [u8],
    start: usize,
    field: &'static str,
) -> Result<(Option<T>, usize), ReviewError> {
    let span = scan::value(body, start)?;
    let end = span.end;
    serde_json::from_slice(&body[span])
        .map(|v| (v, end))
        .map_err(|source| ReviewError::Field { field, source })
}

/// Stores a decoded value in its slot and says where the value ended: one line per field in
/// the walkers below.
fn set<T>(slot: &mut T, (value, end): (T, usize)) -> usize {
    *slot = value;
    end
}

/// A borrowed string field, `None` when absent or `null`.
type Text<'a> = Option<BorrowedStr<'a>>;

fn text(t: Text<'_>) -> Option<Cow<'_, str>> {
    t.map(|s| s.0)
}

/// Whether the value at `start` is `null`.
fn is_null(body: &[u8], start: usize) -> bool {
    body[start..].starts_with(b"null")
}

/// The admission operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    /// `CREATE`.
    Create,
    /// `UPDATE`.
    Update,
    /// `DELETE`.
    Delete,
    /// `CONNECT`.
    Connect,
    /// Anything a future API server might send.
    #[serde(other)]
    Unknown,
}

impl Operation {
    /// A bounded label for metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
            Self::Connect => "CONNECT",
            Self::Unknown => "unknown",
        }
    }
}

/// `request.kind`: the kind the webhook matched.
#[derive(Debug, Default, Deserialize)]
pub struct GroupVersionKind<'a> {
    /// API group, `""` for the core group.
    #[serde(borrow, default)]
    pub group: Cow<'a, str>,
    /// Version.
    #[serde(borrow, default)]
    pub version: Cow<'a, str>,
    /// Kind.
    #[serde(borrow, default)]
    pub kind: Cow<'a, str>,
}

/// `request.resource`.
#[derive(Debug, Default, Deserialize)]
pub struct GroupVersionResource<'a> {
    /// API group.
    #[serde(borrow, default)]
    pub group: Cow<'a, str>,
    /// Version.
    #[serde(borrow, default)]
    pub version: Cow<'a, str>,
    /// Plural resource name.
    #[serde(borrow, default)]
    pub resource: Cow<'a, str>,
}

/// `request.userInfo`, the fields Lien authorises on.
#[derive(Debug, Default, Deserialize)]
pub struct UserInfo<'a> {
    /// The user's name, e.g. `system:serviceaccount:lien-system:lien`.
    #[serde(borrow, default)]
    pub username: Cow<'a, str>,
    /// The user's groups.
    #[serde(borrow, default)]
    pub groups: Vec<Cow<'a, str>>,
    /// The user's UID, when the authenticator gives one.
    #[serde(borrow, default)]
    pub uid: Cow<'a, str>,
    /// The user's extra attributes (a service account token's pod and node, …).
    #[serde(default)]
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl UserInfo<'_> {
    /// Who asked, whole, as an authorizer reads it: a refused DELETE's replay is authorized
    /// again for this identity.
    pub fn requester(&self) -> lien_core::seams::Requester {
        lien_core::seams::Requester {
            username: self.username.clone().into_owned(),
            uid: self.uid.clone().into_owned(),
            groups: self.groups.iter().map(|g| g.clone().into_owned()).collect(),
            extra: self.extra.clone(),
        }
    }
}

/// `request.options`: for a DELETE, the `DeleteOptions`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Options<'a> {
    /// `Orphan`, `Background` or `Foreground`, when the client gave one.
    #[serde(borrow, default)]
    pub propagation_policy: Option<Cow<'a, str>>,
}

/// A string map (`labels`, `annotations`) kept as borrowed pairs in document order. Objects
/// carry a few dozen at most, so a linear scan beats hashing.
#[derive(Debug, Default)]
pub struct StrMap<'a>(pub Pairs<'a>);

/// Borrowed key/value pairs.
pub type Pairs<'a> = Vec<(Cow<'a, str>, Cow<'a, str>)>;

impl<'a> StrMap<'a> {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k.as_ref() == key)
            .map(|(_, v)| v.as_ref())
    }
}

/// A JSON object read as a sequence of pairs (serde's tuple-vec form does not accept a map).
mod pairs {
    use std::fmt;

    use serde::de::{Deserializer, MapAccess, Visitor};

    pub(super) struct PairsVisitor;

    impl<'de> Visitor<'de> for PairsVisitor {
        type Value = super::Pairs<'de>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a map of strings")
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(Vec::new())
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(map.size_hint().unwrap_or(8).min(64));
            while let Some((k, v)) =
                map.next_entry::<super::BorrowedStr<'de>, super::BorrowedStr<'de>>()?
            {
                out.push((k.0, v.0));
            }
            Ok(out)
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<super::Pairs<'de>, D::Error> {
        d.deserialize_any(PairsVisitor)
    }
}

/// A `Cow<str>` that borrows whenever the input allows (serde's own `Cow` impl always copies
/// unless the field carries `#[serde(borrow)]`, which tuple elements cannot).
struct BorrowedStr<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for BorrowedStr<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wrap<'a>(#[serde(borrow)] Cow<'a, str>);
        Wrap::deserialize(d).map(|w| BorrowedStr(w.0))
    }
}

/// `metadata` of `object` / `oldObject`: the fields Lien reads.
#[derive(Debug, Default)]
pub struct Metadata<'a> {
    /// The object's name.
    pub name: Option<Cow<'a, str>>,
    /// The object's UID.
    pub uid: Option<Cow<'a, str>>,
    /// The object's resourceVersion (tells one state of the object from the next).
    pub resource_version: Option<Cow<'a, str>>,
    /// Labels.
    pub labels: StrMap<'a>,
    /// Annotations.
    pub annotations: StrMap<'a>,
    /// Whether `deletionTimestamp` is set: the object is being deleted.
    pub deleting: bool,
    /// How many finalizers it carries (the tamper guard refuses removing the last one of an
    /// object in use that is being deleted: that would complete its deletion).
    pub finalizers: usize,
}

impl<'a> Metadata<'a> {
    /// Reads the metadata that starts at `start`; returns it and where it ends.
    fn scan(body: &'a [u8], start: usize) -> Result<(Self, usize), ReviewError> {
        let mut meta = Metadata::default();
        if is_null(body, start) {
            return Ok((meta, start + 4));
        }
        let (mut name, mut uid, mut resource_version): (Text<'a>, Text<'a>, Text<'a>) =
            (None, None, None);
        let end = scan::object(body, start, |key, at| {
            let end = match &*scan::name(key) {
                b"name" => set(&mut name, decode(body, at, "metadata.name")?),
                b"uid" => set(&mut uid, decode(body, at, "metadata.uid")?),
                b"resourceVersion" => set(
                    &mut resource_version,
                    decode(body, at, "metadata.resourceVersion")?,
                ),
                b"labels" => set(&mut meta.labels, string_map(body, at, "metadata.labels")?),
                b"annotations" => set(
                    &mut meta.annotations,
                    string_map(body, at, "metadata.annotations")?,
                ),
                b"deletionTimestamp" => {
                    let span = scan::value(body, at)?;
                    meta.deleting = &body[span.clone()] != b"null";
                    span.end
                }
                b"finalizers" => {
                    // Counted, not kept: no string is decoded.
                    let (list, end) =
                        decode::<Vec<serde::de::IgnoredAny>>(body, at, "metadata.finalizers")?;
                    meta.finalizers = list.map_or(0, |l| l.len());
                    end
                }
                _ => return Ok(None),
            };
            Ok::<_, ReviewError>(Some(end))
        })?;
        meta.name = text(name);
        meta.uid = text(uid);
        meta.resource_version = text(resource_version);
        Ok((meta, end))
    }
}

fn string_map<'a>(
    body: &'a [u8],
    start: usize,
    field: &'static str,
) -> Result<(StrMap<'a>, usize), ReviewError> {
    let span = scan::value(body, start)?;
    let end = span.end;
    let mut de = serde_json::Deserializer::from_slice(&body[span]);
    pairs::deserialize(&mut de)
        .map(|pairs| (StrMap(pairs), end))
        .map_err(|source| ReviewError::Field { field, source })
}

/// `object` / `oldObject`, reduced to its metadata. Everything else is skipped unread.
#[derive(Debug, Default)]
pub struct PartialObject<'a> {
    /// The object's metadata.
    pub metadata: Metadata<'a>,
}

impl<'a> PartialObject<'a> {
    /// Reads the object that starts at `start` (`None` for `null`); returns it and where it
    /// ends. Only `metadata` is descended into; `spec`, `status` and the rest are skipped.
    fn scan(body: &'a [u8], start: usize) -> Result<(Option<Self>, usize), ReviewError> {
        if is_null(body, start) {
            return Ok((None, start + 4));
        }
        let mut object = PartialObject::default();
        let end = scan::object(body, start, |key, start| {
            if &*scan::name(key) != b"metadata" {
                return Ok(None);
            }
            let (metadata, end) = Metadata::scan(body, start)?;
            object.metadata = metadata;
            Ok::<_, ReviewError>(Some(end))
        })?;
        Ok((Some(object), end))
    }
}

/// `request` of an `AdmissionReview`, reduced to what Lien decides from.
#[derive(Debug)]
pub struct Request<'a> {
    /// The request's UID, echoed in the response. Empty when missing (the answer still goes out).
    pub uid: Cow<'a, str>,
    /// The kind being admitted.
    pub kind: GroupVersionKind<'a>,
    /// The resource being admitted.
    pub resource: GroupVersionResource<'a>,
    /// The subresource, if any.
    pub sub_resource: Option<Cow<'a, str>>,
    /// The object's name (empty for a CREATE with `generateName`).
    pub name: Cow<'a, str>,
    /// The object's namespace; absent for cluster-scoped objects.
    pub namespace: Option<Cow<'a, str>>,
    /// The operation.
    pub operation: Operation,
    /// Who asked.
    pub user_info: UserInfo<'a>,
    /// The new object (CREATE, UPDATE); `null` for DELETE.
    pub object: Option<PartialObject<'a>>,
    /// The existing object (UPDATE, DELETE).
    pub old_object: Option<PartialObject<'a>>,
    /// Whether the request is a dry run: decide, but record nothing.
    pub dry_run: Option<bool>,
    /// The operation's options (`DeleteOptions` for a DELETE).
    pub options: Option<Options<'a>>,
}

impl<'a> Request<'a> {
    /// Reads the request that starts at `start`; returns it and where it ends.
    fn scan(body: &'a [u8], start: usize) -> Result<(Self, usize), ReviewError> {
        let (mut uid, mut sub_resource, mut name, mut namespace): (
            Text<'a>,
            Text<'a>,
            Text<'a>,
            Text<'a>,
        ) = (None, None, None, None);
        let mut kind: Option<GroupVersionKind<'a>> = None;
        let mut resource: Option<GroupVersionResource<'a>> = None;
        let mut operation: Option<Operation> = None;
        let mut user_info: Option<UserInfo<'a>> = None;
        let (mut object, mut old_object) = (None, None);
        let mut dry_run: Option<bool> = None;
        let mut options: Option<Options<'a>> = None;
        let end = scan::object(body, start, |key, at| {
            let end = match &*scan::name(key) {
                b"uid" => set(&mut uid, decode(body, at, "request.uid")?),
                b"kind" => set(&mut kind, decode(body, at, "request.kind")?),
                b"resource" => set(&mut resource, decode(body, at, "request.resource")?),
                b"subResource" => set(&mut sub_resource, decode(body, at, "request.subResource")?),
                b"name" => set(&mut name, decode(body, at, "request.name")?),
                b"namespace" => set(&mut namespace, decode(body, at, "request.namespace")?),
                b"operation" => set(&mut operation, decode(body, at, "request.operation")?),
                b"userInfo" => set(&mut user_info, decode(body, at, "request.userInfo")?),
                b"object" => set(&mut object, PartialObject::scan(body, at)?),
                b"oldObject" => set(&mut old_object, PartialObject::scan(body, at)?),
                b"dryRun" => set(&mut dry_run, decode(body, at, "request.dryRun")?),
                b"options" => set(&mut options, decode(body, at, "request.options")?),
                _ => return Ok(None),
            };
            Ok::<_, ReviewError>(Some(end))
        })?;
        let operation = operation.ok_or(ReviewError::Missing("request.operation"))?;
        let mut name = text(name).unwrap_or_default();
        if name.is_empty() && operation == Operation::Delete {
            // A DELETE of a collection (`DELETE .../configmaps`, what kube-controller-manager's
            // namespace controller sends to empty a namespace) is reviewed once per object, each
            // with `request.name` empty and the object in `oldObject`
            // (`AdmissionToValidateObjectDeleteFunc` keeps the collection's attributes): the
            // object's own name is the one deleted.
            if let Some(old) = old_object
                .as_ref()
                .and_then(|o: &PartialObject<'a>| o.metadata.name.clone())
            {
                name = old;
            }
        }
        let request = Request {
            uid: text(uid).unwrap_or_default(),
            kind: kind.unwrap_or_default(),
            resource: resource.unwrap_or_default(),
            sub_resource: text(sub_resource),
            name,
            namespace: text(namespace),
            operation,
            user_info: user_info.unwrap_or_default(),
            object,
            old_object,
            dry_run,
            options,
        };
        Ok((request, end))
    }
}

impl Request<'_> {
    /// Whether this is a dry run.
    pub fn is_dry_run(&self) -> bool {
        self.dry_run.unwrap_or(false)
    }

    /// The subresource written through (`status`, `binding`…), `None` for the object itself.
    pub fn subresource(&self) -> Option<&str> {
        self.sub_resource.as_deref().filter(|s| !s.is_empty())
    }

    /// What the request addresses, as authorization names it: `pods "p" in namespace "ns"`
    /// (`pods/binding` for a subresource). Unlike the object's key this never depends on
    /// `kind`, which for some subresources is not the object's (a Binding, a Scale).
    pub fn addressed(&self) -> String {
        let mut resource = self.resource.resource.to_string();
        if let Some(sub) = self.subresource() {
            resource = format!("{resource}/{sub}");
        }
        if !self.resource.group.is_empty() {
            resource = format!("{resource}.{}", self.resource.group);
        }
        match self.namespace.as_deref().filter(|ns| !ns.is_empty()) {
            Some(ns) if self.resource.resource != "namespaces" => {
                format!("{resource} {:?} in namespace {ns:?}", self.name)
            }
            _ => format!("{resource} {:?}", self.name),
        }
    }

    /// The metadata of `oldObject`, or empty metadata.
    pub fn old_metadata(&self) -> Option<&Metadata<'_>> {
        self.old_object.as_ref().map(|o| &o.metadata)
    }

    /// The metadata of `object`, or empty metadata.
    pub fn new_metadata(&self) -> Option<&Metadata<'_>> {
        self.object.as_ref().map(|o| &o.metadata)
    }

    /// `options.propagationPolicy`.
    pub fn propagation_policy(&self) -> Option<&str> {
        self.options
            .as_ref()
            .and_then(|o| o.propagation_policy.as_deref())
    }
}

/// Only the UID, to answer a review whose other fields are malformed with the right UID.
pub fn salvage_uid(body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct R {
        request: Option<U>,
    }
    #[derive(Deserialize)]
    struct U {
        uid: Option<String>,
    }
    serde_json::from_slice::<R>(body)
        .ok()
        .and_then(|r| r.request)
        .and_then(|u| u.uid)
        .unwrap_or_default()
}

/// `status` of a denied response, as kube-apiserver reads it into a `metav1.Status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Status {
    /// HTTP code the API server returns to the client (409 for "in use").
    pub code: u16,
    /// Machine-readable reason (`Conflict`, `Forbidden`, `Invalid`, `BadRequest`…).
    pub reason: &'static str,
    /// What a person reads after `admission webhook "…" denied the request: `.
    pub message: String,
}

/// The answer to one review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// Echo of `request.uid`.
    pub uid: String,
    /// Whether the request may proceed.
    pub allowed: bool,
    /// Why not, when denied.
    pub status: Option<Status>,
    /// Warnings shown by `kubectl` (allowed or denied).
    pub warnings: Vec<String>,
    /// A JSON Patch (RFC 6902) the API server applies to the object, from the mutating
    /// endpoint only; sent base64-encoded with `patchType: JSONPatch`.
    pub patch: Option<Vec<u8>>,
}

impl Answer {
    /// Allowed, no warnings.
    pub fn allow(uid: impl Into<String>) -> Self {
        Self {
            uid: uid.into(),
            allowed: true,
            status: None,
            warnings: Vec::new(),
            patch: None,
        }
    }

    /// Denied with a status.
    pub fn deny(
        uid: impl Into<String>,
        code: u16,
        reason: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            uid: uid.into(),
            allowed: false,
            status: Some(Status {
                code,
                reason,
                message: message.into(),
            }),
            warnings: Vec::new(),
            patch: None,
        }
    }

    /// With warnings added.
    pub fn with_warnings(mut self, warnings: impl IntoIterator<Item = String>) -> Self {
        self.warnings.extend(warnings);
        self
    }

    /// With a JSON Patch (the serialised RFC 6902 operations); only an allowed answer carries
    /// one.
    pub fn with_patch(mut self, patch: Vec<u8>) -> Self {
        if self.allowed {
            self.patch = Some(patch);
        }
        self
    }

    /// The whole `AdmissionReview` to send back.
    pub fn to_review_json(&self) -> Vec<u8> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Out<'a> {
            api_version: &'static str,
            kind: &'static str,
            response: Resp<'a>,
        }
        #[derive(Serialize)]
        struct Resp<'a> {
            uid: &'a str,
            allowed: bool,
            #[serde(skip_serializing_if = "Option::is_none")]
            status: Option<&'a Status>,
            #[serde(skip_serializing_if = "<[String]>::is_empty")]
            warnings: &'a [String],
            #[serde(rename = "patchType", skip_serializing_if = "Option::is_none")]
            patch_type: Option<&'static str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            patch: Option<String>,
        }
        let out = Out {
            api_version: ADMISSION_API_VERSION,
            kind: "AdmissionReview",
            response: Resp {
                uid: &self.uid,
                allowed: self.allowed,
                status: self.status.as_ref(),
                warnings: &self.warnings,
                patch_type: self.patch.as_ref().map(|_| "JSONPatch"),
                patch: self.patch.as_ref().map(|p| {
                    use base64::Engine;
                    base64::engine::general_purpose::STANDARD.encode(p)
                }),
            },
        };
        // Serialising plain strings, bools and integers cannot fail; the fallback is still a
        // valid (denying) review rather than a panic.
        serde_json::to_vec(&out).unwrap_or_else(|_| {
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"","allowed":false,"status":{"code":500,"message":"lien: could not encode the response"}}}"#.to_vec()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DELETE: &str = r#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1",
      "request":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind":{"group":"","version":"v1","kind":"ConfigMap"},
        "resource":{"group":"","version":"v1","resource":"configmaps"},
        "requestKind":{"group":"","version":"v1","kind":"ConfigMap"},
        "name":"cm","namespace":"team-a","operation":"DELETE",
        "userInfo":{"username":"alice","groups":["dev","system:authenticated"]},
        "object":null,
        "oldObject":{"apiVersion":"v1","kind":"ConfigMap","data":{"big":"xxxx"},
          "metadata":{"name":"cm","uid":"0f8fad5b-d9cb-469f-a165-70867728950e",
            "labels":{"lien.dev/in-use":"true","app":"web"},
            "annotations":{"note":"a \"quoted\" value"},
            "managedFields":[{"manager":"kubectl"}]}},
        "dryRun":false,
        "options":{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","propagationPolicy":"Foreground"}}}"#;

    /// kube-apiserver reviews each object of a DELETE of a collection with `request.name`
    /// empty (measured on v1.32.13: the namespace controller's deletions were refused "request.name
    /// is empty"): the name is the old object's.
    #[test]
    fn a_collection_delete_is_reviewed_under_the_old_objects_name() {
        // kube-apiserver omits the empty name (`omitempty`); an empty one reads the same.
        let collection = DELETE.replacen(r#""name":"cm","namespace""#, r#""namespace""#, 1);
        let r = Review::parse(collection.as_bytes()).expect("parses");
        assert_eq!(r.name, "cm");
        let empty = DELETE.replacen(r#""name":"cm","namespace""#, r#""name":"","namespace""#, 1);
        assert_eq!(Review::parse(empty.as_bytes()).expect("parses").name, "cm");
        let unnamed = collection.replacen(r#""metadata":{"name":"cm","#, r#""metadata":{"#, 1);
        assert_eq!(Review::parse(unnamed.as_bytes()).expect("parses").name, "");
        let update = collection.replacen(r#""operation":"DELETE""#, r#""operation":"UPDATE""#, 1);
        assert_eq!(Review::parse(update.as_bytes()).expect("parses").name, "");
    }

    #[test]
    fn parses_what_lien_reads_and_borrows() {
        let r = Review::parse(DELETE.as_bytes()).expect("parses");
        assert_eq!(r.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
        assert_eq!(r.operation, Operation::Delete);
        assert_eq!(
            (r.kind.group.as_ref(), r.kind.kind.as_ref()),
            ("", "ConfigMap")
        );
        assert_eq!(r.resource.resource, "configmaps");
        assert_eq!(r.namespace.as_deref(), Some("team-a"));
        assert_eq!(r.user_info.groups.len(), 2);
        assert_eq!(r.propagation_policy(), Some("Foreground"));
        assert!(!r.is_dry_run());
        assert!(r.object.is_none());
        let old = r.old_metadata().expect("old object");
        assert_eq!(
            old.uid.as_deref(),
            Some("0f8fad5b-d9cb-469f-a165-70867728950e")
        );
        assert_eq!(old.labels.get("lien.dev/in-use"), Some("true"));
        assert!(matches!(old.labels.0[0].0, Cow::Borrowed(_)));
        // An escaped string is copied, not rejected.
        assert_eq!(old.annotations.get("note"), Some("a \"quoted\" value"));
    }

    #[test]
    fn tolerates_nulls_and_missing_fields() {
        let r = Review::parse(
            br#"{"request":{"operation":"CONNECT","options":null,"object":{"metadata":{"labels":null}}}}"#,
        )
        .expect("parses");
        assert_eq!(r.uid, "");
        assert_eq!(r.operation, Operation::Connect);
        assert!(r.propagation_policy().is_none());
        let r = Review::parse(br#"{"request":{"operation":"PATCH"}}"#).expect("parses");
        assert_eq!(r.operation, Operation::Unknown);
    }

    #[test]
    fn rejects_what_is_not_a_review() {
        assert!(matches!(Review::parse(b"{}"), Err(ReviewError::NoRequest)));
        assert!(matches!(Review::parse(b"nope"), Err(ReviewError::Scan(_))));
        assert!(matches!(
            Review::parse(br#"{"request":{"uid":"u"}}"#),
            Err(ReviewError::Missing("request.operation"))
        ));
        assert!(matches!(
            Review::parse(br#"{"request":{"operation":"DELETE"}} trailing"#),
            Err(ReviewError::Scan(_))
        ));
        // A field Lien reads is validated, and the error names it.
        let err = Review::parse(br#"{"request":{"operation":"DELETE","userInfo":{"groups":"x"}}}"#)
            .expect_err("groups is a list");
        assert!(err.to_string().contains("request.userInfo"), "{err}");
        let err = Review::parse(
            br#"{"request":{"operation":"DELETE","oldObject":{"metadata":{"labels":{"a":1}}}}}"#,
        )
        .expect_err("label values are strings");
        assert!(err.to_string().contains("metadata.labels"), "{err}");
        assert_eq!(salvage_uid(br#"{"request":{"uid":"u"}}"#), "u");
        assert_eq!(salvage_uid(b"garbage"), "");
    }

    /// The scanner's reading of every committed review agrees with a full serde_json decode.
    #[test]
    fn agrees_with_a_full_decode_on_every_fixture() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).expect("fixtures") {
            let body = std::fs::read(entry.expect("entry").path()).expect("read");
            let full: serde_json::Value = serde_json::from_slice(&body).expect("json");
            let want = &full["request"];
            let got = Review::parse(&body).expect("parses");
            assert_eq!(got.uid, want["uid"].as_str().unwrap_or_default());
            assert_eq!(got.name, want["name"].as_str().unwrap_or_default());
            assert_eq!(got.namespace.as_deref(), want["namespace"].as_str());
            assert_eq!(
                got.kind.kind,
                want["kind"]["kind"].as_str().unwrap_or_default()
            );
            assert_eq!(
                got.operation.as_str(),
                want["operation"].as_str().unwrap_or_default()
            );
            assert_eq!(got.is_dry_run(), want["dryRun"].as_bool().unwrap_or(false));
            assert_eq!(
                got.propagation_policy(),
                want["options"]["propagationPolicy"].as_str()
            );
            assert_eq!(
                got.user_info.username,
                want["userInfo"]["username"].as_str().unwrap_or_default()
            );
            for (side, meta) in [
                ("object", got.new_metadata()),
                ("oldObject", got.old_metadata()),
            ] {
                let want = &want[side]["metadata"];
                let Some(meta) = meta else {
                    assert!(want.is_null(), "{side}");
                    continue;
                };
                assert_eq!(meta.uid.as_deref(), want["uid"].as_str(), "{side}");
                for (map, field) in [(&meta.labels, "labels"), (&meta.annotations, "annotations")] {
                    let want: Vec<(&str, &str)> = want[field]
                        .as_object()
                        .map(|m| {
                            m.iter()
                                .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or("?")))
                                .collect()
                        })
                        .unwrap_or_default();
                    let got: Vec<(&str, &str)> = map
                        .0
                        .iter()
                        .map(|(k, v)| (k.as_ref(), v.as_ref()))
                        .collect();
                    let mut want = want;
                    want.sort_unstable();
                    let mut got = got;
                    got.sort_unstable();
                    assert_eq!(got, want, "{side}.{field}");
                }
            }
            seen += 1;
        }
        assert!(seen >= 5, "only {seen} fixtures");
    }

    #[test]
    fn answers_are_whole_reviews() {
        let denied =
            Answer::deny("u1", 409, "Conflict", "in use").with_warnings(["careful".to_string()]);
        let v: serde_json::Value = serde_json::from_slice(&denied.to_review_json()).expect("json");
        assert_eq!(
            v,
            serde_json::json!({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",
                "response":{"uid":"u1","allowed":false,
                    "status":{"code":409,"reason":"Conflict","message":"in use"},
                    "warnings":["careful"]}})
        );
        let v: serde_json::Value =
            serde_json::from_slice(&Answer::allow("u2").to_review_json()).expect("json");
        assert_eq!(
            v["response"],
            serde_json::json!({"uid":"u2","allowed":true})
        );
        let patched = Answer::allow("u3").with_patch(br#"[{"op":"remove","path":"/a"}]"#.to_vec());
        let v: serde_json::Value = serde_json::from_slice(&patched.to_review_json()).expect("json");
        assert_eq!(
            v["response"],
            serde_json::json!({"uid":"u3","allowed":true,"patchType":"JSONPatch",
                "patch":"W3sib3AiOiJyZW1vdmUiLCJwYXRoIjoiL2EifV0="})
        );
        // A refusal never carries a patch.
        let refused = Answer::deny("u4", 403, "Forbidden", "no").with_patch(b"[]".to_vec());
        assert_eq!(refused.patch, None);
    }
}
