//! The shape of a strategy: the [`Strategy`] trait and the facts it answers with. Every
//! kind's file implements it; `mod.rs` registers them.

use serde_json::Value;

use crate::error::Cause;
use crate::registry::ResourceType;

/// How `metadata.name` is checked (the `nameFn` a kind's `ValidateObjectMeta` is given).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// `ValidateNamespaceName`: a DNS-1123 label.
    Dns1123Label,
    /// `ValidateServiceName`: a DNS-1035 label (it starts with a letter).
    Dns1035Label,
    /// `ValidateRBACName`: a path segment (`system:discovery`).
    PathSegment,
    /// `NameIsDNSSubdomain`: everything else.
    Dns1123Subdomain,
}

/// How a version refuses a field label it does not know: each conversion function has its
/// own words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `field label not supported: foo`
    Plain,
    /// `field label "foo" not supported for "ConfigMap"`
    ForKind,
    /// apps/v1 ReplicaSet's own wording.
    ReplicaSet,
    /// `runtime.DefaultMetaV1FieldSelectorConversion`, for kinds without a conversion function.
    Default,
}

/// The field labels a resource's list and watch accept beyond `metadata.name` and
/// `metadata.namespace` (its registered field label conversion function), and how it refuses
/// others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldLabels {
    pub extra: &'static [&'static str],
    pub refusal: Refusal,
}

impl FieldLabels {
    /// A kind without a conversion function of its own.
    pub const DEFAULT: FieldLabels = FieldLabels {
        extra: &[],
        refusal: Refusal::Default,
    };
}

/// A built-in `scale` subresource: `.spec.replicas`, `.status.replicas` and how the selector
/// is read (custom resources declare theirs in the CRD).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltinScale {
    /// `spec.selector` is a `LabelSelector` (apps/v1 kinds).
    LabelSelector,
    /// `spec.selector` is a plain map (ReplicationController).
    Map,
}

/// What the server does after a committed write of this resource (the `AfterCreate`,
/// `AfterUpdate` and `AfterDelete` hooks a registry's store sets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterWrite {
    /// A CustomResourceDefinition changed what is served.
    ServeDefinition,
}

/// What a write through the `status` subresource keeps of the metadata it writes: the status
/// strategy's `PrepareForUpdate` (kube-apiserver v1.32, `pkg/registry/<group>/<resource>/
/// strategy.go`; custom resources: `apiextensions-apiserver/pkg/registry/customresource/
/// status_strategy.go`). Spec (every field but metadata and status) is always the stored
/// object's; `BeforeUpdate`'s rules for system fields (uid, creation and deletion timestamps,
/// generation) apply after, as on any update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusMetadata {
    /// Kept as written, except these `metadata` fields, reset to the stored object's. Most
    /// built-ins reset only spec (`newX.Spec = oldX.Spec`): labels, annotations, finalizers and
    /// owner references written through their status are stored.
    KeptExcept(&'static [&'static str]),
    /// All reset to the stored object's, except `managedFields` (which tracks the write):
    /// custom resources (the whole object but status), FlowSchemas and
    /// PriorityLevelConfigurations (`newX.ObjectMeta = oldX.ObjectMeta`).
    Reset,
}

impl StatusMetadata {
    /// Spec only: metadata kept.
    pub const KEPT: StatusMetadata = StatusMetadata::KeptExcept(&[]);
    /// `metav1.ResetObjectMetaForStatus`.
    pub const RESET_FOR_STATUS: StatusMetadata = StatusMetadata::KeptExcept(&[
        "deletionTimestamp",
        "generation",
        "selfLink",
        "labels",
        "annotations",
        "finalizers",
        "ownerReferences",
    ]);
}

/// What a resource's storage does beyond keeping objects: the REST wrappers some registries put
/// around the generic store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// Objects are stored as written.
    Plain,
    /// A Namespace (`pkg/registry/core/namespace/storage`): its own requests are addressed in
    /// itself; a DELETE turns it `Terminating` until its `spec.finalizers` are done, and the
    /// namespaces every cluster relies on cannot be deleted.
    Namespace,
    /// A Service (`pkg/registry/core/service/storage`): cluster IPs are allocated on create and
    /// kept on update.
    ClusterIps,
    /// An access review (`pkg/registry/authorization/*`): answered, never stored.
    AccessReview,
    /// A SelfSubjectReview (`pkg/registry/authentication/selfsubjectreview`): answered with
    /// the requester, never stored.
    SelfReview,
}

/// One resource's strategy. Every method has kube's generic behaviour as its default, so a
/// kind states only where it differs.
pub trait Strategy: Sync {
    /// The defaulting functions kube-apiserver runs whenever it decodes the object (create,
    /// update, and after each mutating webhook): `SetDefaults_<Kind>`.
    fn defaults(&self, _object: &mut Value) {}

    /// `PrepareForCreate`: what the strategy sets on create beyond defaulting (status, system
    /// labels and finalizers).
    fn prepare_for_create(&self, _rt: &ResourceType, _object: &mut Value) {}

    /// `Validate`: the kind's own rules on create, reported before the rules derived for the
    /// built-in types it embeds.
    fn validate(&self, _rt: &ResourceType, _version: &str, _object: &Value) -> Vec<Cause> {
        Vec::new()
    }

    /// `ValidateUpdate`: the kind's rules on update, given the stored object; by default the
    /// create rules.
    fn validate_update(
        &self,
        rt: &ResourceType,
        version: &str,
        object: &Value,
        _old: &Value,
    ) -> Vec<Cause> {
        self.validate(rt, version, object)
    }

    /// Whether the strategy sets `metadata.generation` and bumps it when the spec changes.
    fn tracks_generation(&self) -> bool {
        false
    }

    /// How `metadata.name` is checked.
    fn name_rule(&self) -> NameRule {
        NameRule::Dns1123Subdomain
    }

    /// Whether a DELETE that removed the object answers with the object rather than a
    /// `Status` (the store's `ReturnDeletedObject`).
    fn returns_deleted_object(&self) -> bool {
        false
    }

    /// The field selectors its lists take.
    fn field_labels(&self) -> FieldLabels {
        FieldLabels::DEFAULT
    }

    /// Its built-in `scale` subresource, if it has one.
    fn scale(&self) -> Option<BuiltinScale> {
        None
    }

    /// What follows a committed write.
    fn after_write(&self) -> Option<AfterWrite> {
        None
    }

    /// What its storage does beyond keeping objects.
    fn storage(&self) -> Storage {
        Storage::Plain
    }

    /// What a write through its `status` subresource keeps of the metadata written (for a kind
    /// with one). Kube's most common status strategy, spec reset only, is the default; every
    /// built-in with a status subresource is held to its own in `strategy::tests`.
    fn status_metadata(&self) -> StatusMetadata {
        StatusMetadata::KEPT
    }
}
