//! The two questions the admission webhook asks the controller, as traits both implement
//! against: which kinds exist ([`KindResolver`]), and — when an object carries the in-use label
//! but the index knows no relation — what a live read says ([`LiveCheck`]). They live here, in
//! the crate both depend on, so neither depends on the other.
//!
//! `LiveCheck` returns a boxed future (std only: no async runtime is named here).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::decision::Decision;
use crate::key::ObjectKey;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Whether a kind's objects live in a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Namespaced.
    Namespaced,
    /// Cluster-scoped.
    Cluster,
}

/// Which kinds the API server serves. It must answer without I/O (from a discovery snapshot):
/// the webhook's validators are pure.
pub trait KindResolver: Send + Sync {
    /// The scope of `kind` in `apiVersion` (`v1`, `group/version`), or `None` if not served.
    fn scope(&self, api_version: &str, kind: &str) -> Option<Scope>;
}

/// Why a live check could not answer.
#[derive(Debug, thiserror::Error)]
pub enum LiveCheckError {
    /// The read failed (API server unreachable, forbidden…).
    #[error("live read failed: {0}")]
    Read(String),
    /// No answer in time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// No live check is configured.
    #[error("no live check is configured")]
    Unavailable,
}

/// Decides a DELETE of `object` (with `uid`) from live data, as
/// [`decide_delete`](crate::decide_delete) would from an up-to-date index.
pub trait LiveCheck: Send + Sync {
    /// The decision, or why there is none.
    fn check<'a>(
        &'a self,
        object: &'a ObjectKey,
        uid: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Decision, LiveCheckError>>;
}
