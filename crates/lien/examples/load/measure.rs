//! What the examples that time a real `lien run` share (`rule_load`, `selector_load`):
//! percentiles, the process under `/usr/bin/time` and its memory, and the probe they time —
//! a dry-run DELETE.

use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject};

use super::Error;

/// The `p` quantile (0–1) of `sorted`, nearest rank; zero for none.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// `VmRSS` and `VmHWM` of a process, in KiB.
pub fn rss(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// The `lien` process under `/usr/bin/time`: its only child.
pub fn child_of(pid: u32) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

/// The HTTP status of a dry-run DELETE of `name`: 200 allowed, 409 refused (in use), 500 when
/// Lien could not confirm a label its index cannot explain (a client retries).
pub async fn dry_delete(objects: &Api<DynamicObject>, name: &str) -> Result<u16, Error> {
    match objects
        .delete(name, &DeleteParams::default().dry_run())
        .await
    {
        Ok(_) => Ok(200),
        Err(kube::Error::Api(e)) if e.code == 409 || e.code == 500 => Ok(e.code),
        Err(e) => Err(e.into()),
    }
}
