//! A de-duplicating delay queue with per-item exponential failure backoff, as client-go's
//! rate-limited work queue: `add` schedules at once, `retry` after `base * 2^failures` (capped),
//! `forget` resets an item's failures after a success.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;

use crate::error::ApiError;
use crate::store::Change;

/// What one sync of an item found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Synced {
    /// Finished: its failure count is reset.
    Done,
    /// Not finished, and no change will say when to look again: look after this delay.
    RequeueAfter(Duration),
    /// Not finished; a later change will enqueue it again.
    Waiting,
}

/// One of the sandbox's controllers, as driven by [`run`].
pub trait Reconciler {
    /// Its name in logs.
    const NAME: &'static str;

    /// Enqueues what a change from the store makes actionable.
    fn observe(&self, change: &Change, queue: &mut WorkQueue);

    /// Works on one due item.
    fn sync(
        &self,
        item: &str,
        queue: &mut WorkQueue,
    ) -> impl Future<Output = Result<Synced, ApiError>> + Send;
}

/// A controller's loop, as client-go's `processNextWorkItem` drives one: every change goes to
/// [`Reconciler::observe`], every due item to [`Reconciler::sync`], and a failed sync is retried
/// with the queue's backoff. Returns when the feed closes.
pub async fn run<R: Reconciler>(
    reconciler: R,
    mut queue: WorkQueue,
    mut feed: UnboundedReceiver<Arc<Change>>,
) {
    loop {
        let sleep = match queue.next_due() {
            Some(at) => tokio::time::sleep_until(at),
            None => tokio::time::sleep(Duration::from_secs(3600)),
        };
        tokio::select! {
            change = feed.recv() => match change {
                Some(change) => reconciler.observe(&change, &mut queue),
                None => return,
            },
            _ = sleep => {
                for item in queue.pop_due(Instant::now()) {
                    match reconciler.sync(&item, &mut queue).await {
                        Ok(Synced::Done) => queue.forget(&item),
                        Ok(Synced::RequeueAfter(delay)) => queue.add_after(&item, delay),
                        Ok(Synced::Waiting) => {}
                        Err(e) => {
                            let delay = queue.retry(&item);
                            tracing::debug!(controller = R::NAME, item, error = %e, ?delay, "will retry");
                        }
                    }
                }
            }
        }
    }
}

#[derive(Debug)]
pub struct WorkQueue {
    due: BTreeSet<(Instant, String)>,
    scheduled: HashMap<String, Instant>,
    failures: HashMap<String, u32>,
    base: Duration,
    max: Duration,
}

impl WorkQueue {
    pub fn new(base: Duration, max: Duration) -> Self {
        WorkQueue {
            due: BTreeSet::new(),
            scheduled: HashMap::new(),
            failures: HashMap::new(),
            base,
            max,
        }
    }

    /// Schedules `item` at `at`, unless it is already scheduled sooner.
    pub fn add_at(&mut self, item: &str, at: Instant) {
        if let Some(existing) = self.scheduled.get(item) {
            if *existing <= at {
                return;
            }
            self.due.remove(&(*existing, item.to_string()));
        }
        self.scheduled.insert(item.to_string(), at);
        self.due.insert((at, item.to_string()));
    }

    pub fn add(&mut self, item: &str) {
        self.add_at(item, Instant::now());
    }

    pub fn add_after(&mut self, item: &str, delay: Duration) {
        self.add_at(item, Instant::now() + delay);
    }

    /// Schedules a retry after the item's next backoff delay.
    pub fn retry(&mut self, item: &str) -> Duration {
        let failures = self.failures.entry(item.to_string()).or_insert(0);
        let exp = (*failures).min(40);
        *failures += 1;
        let delay = self
            .base
            .checked_mul(1u32 << exp.min(31))
            .unwrap_or(self.max)
            .min(self.max);
        self.add_after(item, delay);
        delay
    }

    pub fn forget(&mut self, item: &str) {
        self.failures.remove(item);
    }

    /// When the next item is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.due.first().map(|(at, _)| *at)
    }

    /// Takes every item due by `now`.
    pub fn pop_due(&mut self, now: Instant) -> Vec<String> {
        let mut out = Vec::new();
        while let Some((at, _)) = self.due.first() {
            if *at > now {
                break;
            }
            if let Some((_, item)) = self.due.pop_first() {
                self.scheduled.remove(&item);
                out.push(item);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let mut q = WorkQueue::new(Duration::from_millis(5), Duration::from_millis(30));
        let delays: Vec<_> = (0..5).map(|_| q.retry("a").as_millis()).collect();
        assert_eq!(delays, [5, 10, 20, 30, 30]);
        q.forget("a");
        assert_eq!(q.retry("a").as_millis(), 5);
    }

    #[test]
    fn items_are_deduplicated_to_the_soonest() {
        let mut q = WorkQueue::new(Duration::from_millis(5), Duration::from_secs(1));
        let now = Instant::now();
        q.add_at("a", now + Duration::from_secs(10));
        q.add_at("a", now);
        q.add_at("a", now + Duration::from_secs(5));
        assert_eq!(q.pop_due(now), ["a"]);
        assert!(q.pop_due(now + Duration::from_secs(20)).is_empty());
    }
}
