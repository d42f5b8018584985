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
//! Every other field — `spec`, `status`, `managedFields`, the rest of `metadata` — is skipped
//! by serde's derive, which reads unknown fields into [`serde::de::IgnoredAny`]: the parser walks
//! over them without allocating. Strings are `Cow<'a, str>`, borrowed from the body unless JSON
//! escapes force a copy. The review lives as long as the request body.
//!
//! The answer is always a whole `AdmissionReview` ([`Answer::to_review_json`]): allowed,
//! denied with a `status` (`code`, `reason`, `message`), plus `warnings`.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// The API version of the reviews Lien reads and writes.
pub const ADMISSION_API_VERSION: &str = "admission.k8s.io/v1";

/// Why a body is not an `AdmissionReview` Lien can answer.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// Not JSON, or JSON of the wrong shape.
    #[error("malformed AdmissionReview: {0}")]
    Json(#[from] serde_json::Error),
    /// Valid JSON without a `request`.
    #[error("malformed AdmissionReview: no request")]
    NoRequest,
}

/// An `AdmissionReview` with only what Lien reads.
#[derive(Debug, Deserialize)]
pub struct Review<'a> {
    /// The request; absent in a malformed review.
    #[serde(borrow, default)]
    pub request: Option<Request<'a>>,
}

impl<'a> Review<'a> {
    /// Parses a review body, borrowing from it.
    pub fn parse(body: &'a [u8]) -> Result<Request<'a>, ReviewError> {
        let review: Review<'a> = serde_json::from_slice(body)?;
        review.request.ok_or(ReviewError::NoRequest)
    }
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
#[derive(Debug, Default, Deserialize)]
pub struct Metadata<'a> {
    /// The object's UID.
    #[serde(borrow, default)]
    pub uid: Option<Cow<'a, str>>,
    /// The object's resourceVersion (tells one state of the object from the next).
    #[serde(borrow, default, rename = "resourceVersion")]
    pub resource_version: Option<Cow<'a, str>>,
    /// Labels.
    #[serde(borrow, default, deserialize_with = "labels")]
    pub labels: StrMap<'a>,
    /// Annotations.
    #[serde(borrow, default, deserialize_with = "labels")]
    pub annotations: StrMap<'a>,
}

fn labels<'de, D: serde::Deserializer<'de>>(d: D) -> Result<StrMap<'de>, D::Error> {
    pairs::deserialize(d).map(StrMap)
}

/// `object` / `oldObject`, reduced to its metadata. Everything else is skipped unread.
#[derive(Debug, Default, Deserialize)]
pub struct PartialObject<'a> {
    /// The object's metadata.
    #[serde(borrow, default)]
    pub metadata: Metadata<'a>,
}

/// `request` of an `AdmissionReview`, reduced to what Lien decides from.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request<'a> {
    /// The request's UID, echoed in the response. Empty when missing (the answer still goes out).
    #[serde(borrow, default)]
    pub uid: Cow<'a, str>,
    /// The kind being admitted.
    #[serde(borrow, default)]
    pub kind: GroupVersionKind<'a>,
    /// The resource being admitted.
    #[serde(borrow, default)]
    pub resource: GroupVersionResource<'a>,
    /// The subresource, if any.
    #[serde(borrow, default)]
    pub sub_resource: Option<Cow<'a, str>>,
    /// The object's name (empty for a CREATE with `generateName`).
    #[serde(borrow, default)]
    pub name: Cow<'a, str>,
    /// The object's namespace; absent for cluster-scoped objects.
    #[serde(borrow, default)]
    pub namespace: Option<Cow<'a, str>>,
    /// The operation.
    pub operation: Operation,
    /// Who asked.
    #[serde(borrow, default)]
    pub user_info: UserInfo<'a>,
    /// The new object (CREATE, UPDATE); `null` for DELETE.
    #[serde(borrow, default)]
    pub object: Option<PartialObject<'a>>,
    /// The existing object (UPDATE, DELETE).
    #[serde(borrow, default)]
    pub old_object: Option<PartialObject<'a>>,
    /// Whether the request is a dry run: decide, but record nothing.
    #[serde(default)]
    pub dry_run: Option<bool>,
    /// The operation's options (`DeleteOptions` for a DELETE).
    #[serde(borrow, default)]
    pub options: Option<Options<'a>>,
}

impl Request<'_> {
    /// Whether this is a dry run.
    pub fn is_dry_run(&self) -> bool {
        self.dry_run.unwrap_or(false)
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
}

impl Answer {
    /// Allowed, no warnings.
    pub fn allow(uid: impl Into<String>) -> Self {
        Self {
            uid: uid.into(),
            allowed: true,
            status: None,
            warnings: Vec::new(),
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
        }
    }

    /// With warnings added.
    pub fn with_warnings(mut self, warnings: impl IntoIterator<Item = String>) -> Self {
        self.warnings.extend(warnings);
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
        }
        let out = Out {
            api_version: ADMISSION_API_VERSION,
            kind: "AdmissionReview",
            response: Resp {
                uid: &self.uid,
                allowed: self.allowed,
                status: self.status.as_ref(),
                warnings: &self.warnings,
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
        assert!(matches!(Review::parse(b"nope"), Err(ReviewError::Json(_))));
        assert!(matches!(
            Review::parse(br#"{"request":{"uid":"u"}}"#),
            Err(ReviewError::Json(_))
        ));
        assert_eq!(salvage_uid(br#"{"request":{"uid":"u"}}"#), "u");
        assert_eq!(salvage_uid(b"garbage"), "");
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
    }
}
