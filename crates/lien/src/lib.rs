//! The `lien` binary's wiring: how the controller, the webhook and (for `lien sandbox`) the
//! embedded API server are put together in one process. The parts themselves live in their own
//! crates; this one only connects them.

pub mod manifests;
pub mod output;
pub mod plugin;
pub mod runtime;
pub mod webhook_ca;
