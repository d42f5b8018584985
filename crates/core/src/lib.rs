//! Lien's pure core: who uses what, and may this object be deleted?
//!
//! # Data model
//!
//! - An [`ObjectKey`] identifies an object by group, kind, namespace and name — never by
//!   version, so a CRD's storage version does not matter.
//! - A [`Relation`] says "`of` is used by `by`" (or "`of` is protected for `reason`" when there
//!   is no `by`). It comes from a [`Source`] (a `Usage`, a `ClusterUsage` or a `DependencyRule`)
//!   and carries the UIDs it observed and whether a blocked DELETE is replayed.
//! - The [`RelationIndex`] holds every relation, replaced per source (`apply` / `delete` /
//!   `reset`) or changed per relation (`apply_delta`), and answers "what blocks X" and "what
//!   does Y use" in time independent of its size.
//! - A [`RuleJoin`] derives one `DependencyRule`'s relations from its objects' evaluated keys,
//!   per object. It lives in the index (whose keys, UIDs and strings its objects are) and,
//!   once attached, changes the rule's relations there directly.
//! - [`decide_delete`] turns the index into a [`Decision`] for one DELETE, and
//!   [`render_refusal`] into the message a person reads ([`render_denial`]: on one line).
//! - [`find_cycles`] and [`deletion_order`] look at the whole `by → of` graph.
//!
//! Nothing here does I/O, spawns tasks or knows about the Kubernetes client: the controller and
//! webhook feed this crate data and act on its answers.

mod arena;
mod decision;
mod graph;
mod holds;
mod index;
mod intern;
mod key;
mod relation;
mod rule;
pub mod seams;
mod uid;

pub use decision::{
    Blocker, Decision, USAGE_FINALIZER, decide_delete, finalizer_removal_command, render_denial,
    render_refusal, render_refusal_and_denial, render_warning, render_when_free,
};
pub use graph::{
    Cycle, cycles_in_namespace, deletion_order, find_cycles, sources_within,
    unbreakable_cycles_in_namespace,
};
pub use holds::{HoldLine, namespace_holds};
pub use index::{
    Chain, FullError, Garbage, IndexError, LIEN_GROUP, RELEASED_CAPACITY, RelationIndex,
    RelationRef,
};
pub use key::{GroupKind, KeyError, KeyRef, KubectlArg, ObjectKey};
pub use relation::{Relation, Source, SourceKubectlArg, SourceRef};
pub use rule::{
    AttachStep, JoinChange, JoinError, JoinId, JoinMut, JoinRef, RuleConfig, RuleJoin, RuleScope,
};
pub use seams::{
    AccessCheck, AccessCheckError, AccessDecision, AccessRequest, BreakGlassAction, BreakGlassUse,
    DELETE_WHEN_FREE_ANNOTATION, DELETION_ATTEMPT_ANNOTATION, DeletionRequest, Denial,
    KindResolver, LiveCheck, LiveCheckError, RecordSealer, Requester, Scope,
};
