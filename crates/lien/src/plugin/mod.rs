//! `kubectl lien`: why an object is held, the use graph as a picture, a safe deletion order,
//! and deleting an object once it is free — read and written through the user's kubeconfig
//! (the plugin acts as the user, with the user's rights), derived with the controller's own
//! code.
//!
//! That code is `lien_decide` (resolution, rule programs and joins, replay records), the pure
//! crate the controller is built on: nothing under `plugin/` names `lien_controller`, so the
//! plugin's logic links no watches, no leader election and no writer.
//!
//! The pure layers (`snapshot` → `graph` / `why` / `plan`) take what was read and return text;
//! `read` and `apply` are the only parts that talk to the API server.

pub mod apply;
pub mod delete;
pub mod graph;
pub mod layout;
pub mod plan;
pub mod read;
pub mod snapshot;
pub mod status;
pub mod status_read;
pub mod tree;
pub mod why;

pub use graph::{Selection, View, select};
pub use plan::{Plan, PlanCycle, plan};
pub use snapshot::{Attempt, Graph, KindObjects, NodeInfo, Snapshot, derive};
pub use why::why;
