//! Lien end to end: a sandbox API server with Lien running inside it per test; with
//! `LIEN_E2E_TARGET=real`, a real control plane per test with Lien as `lien run` processes
//! (`support/real.rs`); or the cluster `LIEN_E2E_KUBECONFIG` names, Lien installed there. The
//! scenarios of the Usage issue and after.

#[path = "e2e/access.rs"]
mod access;
#[path = "e2e/cascade.rs"]
mod cascade;
#[path = "e2e/cascade_rbac.rs"]
mod cascade_rbac;
#[path = "e2e/composition.rs"]
mod composition;
#[path = "e2e/deletion_paths.rs"]
mod deletion_paths;
#[path = "e2e/events.rs"]
mod events;
#[path = "e2e/faults.rs"]
mod faults;
#[path = "e2e/forgery.rs"]
mod forgery;
#[path = "e2e/harness.rs"]
mod harness;
#[path = "e2e/hints.rs"]
mod hints;
#[path = "e2e/latency.rs"]
mod latency;
#[path = "e2e/namespace_deletion.rs"]
mod namespace_deletion;
#[path = "e2e/ordering.rs"]
mod ordering;
#[path = "e2e/packs.rs"]
mod packs;
#[path = "e2e/plan_apply.rs"]
mod plan_apply;
#[path = "e2e/plugin.rs"]
mod plugin;
#[path = "e2e/protection.rs"]
mod protection;
#[path = "support/real.rs"]
mod real;
#[path = "e2e/rules.rs"]
mod rules;
#[path = "e2e/rules_admission.rs"]
mod rules_admission;
#[path = "e2e/status_columns.rs"]
mod status_columns;
#[path = "e2e/stress.rs"]
mod stress;
#[path = "e2e/subresources.rs"]
mod subresources;
#[path = "e2e/tampering.rs"]
mod tampering;
#[path = "e2e/terminating_cycles.rs"]
mod terminating_cycles;
#[path = "e2e/validation.rs"]
mod validation;
#[path = "e2e/warn_mode.rs"]
mod warn_mode;
#[path = "e2e/when_free.rs"]
mod when_free;
