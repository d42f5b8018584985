//! Repeated refusals of one DELETE, coalesced.
//!
//! A client that retries a refused DELETE in a loop (a controller's reconcile, a CI job, a
//! `while ! kubectl delete …`) would otherwise have Lien write, for every refusal, the replay
//! record on the object and a `DeletionRefused` Event on it and on each Usage or rule that
//! refused it: three or more writes through the API server per refused request. At 200 refusals
//! a second that saturates kube-apiserver (docs/benchmarks.md, "Issue 28 and 29 measurements").
//! Kubernetes' own event recorders do the same for the same reason: client-go's correlator
//! aggregates and rate-limits repeats of one event, the events.k8s.io broadcaster counts a
//! series locally and writes it out rarely.
//!
//! What is coalesced, and for how long, is decided here with the time passed in:
//! - **Events**: one refusal of an object's incarnation (its UID) by one user with one message
//!   (who holds it, what happens next) is published at most once per [`EVENT_WINDOW`]; repeats
//!   inside the window are counted (`lien_controller_refusals_coalesced_total`), and the first
//!   repeat after it is published as an Event of its own. A change of who holds the object, of
//!   the user or of the incarnation is a new key and is published at once.
//! - **The record**: rewritten only when it would say something new — see
//!   [`crate::replay::DeletionAttempt::repeats`] — or the one on the object is older than
//!   [`RECORD_REFRESH`], so its time stays within a minute of the last refusal and it never
//!   expires while the refusals go on. The caller decides this from the object's record as
//!   cached, so another writer's record (another user's refusal, a `--when-free` request) is
//!   never kept in place of a new refusal's.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use lien_core::ObjectKey;

/// How long repeats of one refusal's events are held back.
pub const EVENT_WINDOW: Duration = Duration::from_secs(60);

/// How old a record saying the same may be before a repeated refusal writes it again.
pub const RECORD_REFRESH: Duration = Duration::from_secs(60);

/// The most refusals remembered at once. Past it, entries older than the window go; if all
/// are younger, a new refusal is published without being remembered: a flood of distinct
/// refusals costs writes, never memory, and never loses an event.
pub const MAX_REMEMBERED: usize = 65_536;

/// What makes two refusals' events the same: the object's incarnation, who asked, and the
/// refusal's text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RefusalKey {
    /// The object.
    pub object: ObjectKey,
    /// Its UID, when the review carried it.
    pub uid: Option<String>,
    /// Who asked.
    pub user: String,
    /// The refusal on one line (the Event's note).
    pub message: String,
}

/// Whether to publish a refusal's events now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Publish; `held_back` repeats were coalesced since the last publication of this key.
    Publish {
        /// Repeats not published since the last publication.
        held_back: u64,
    },
    /// A repeat inside the window: count it, publish nothing.
    HoldBack,
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    published: Instant,
    held_back: u64,
}

/// Refusals seen recently, by key.
#[derive(Debug)]
pub struct Coalescer<K = RefusalKey> {
    window: Duration,
    cap: usize,
    seen: HashMap<K, Seen>,
}

impl Default for Coalescer<RefusalKey> {
    fn default() -> Self {
        Self::new(EVENT_WINDOW, MAX_REMEMBERED)
    }
}

impl<K: Hash + Eq> Coalescer<K> {
    /// Coalesces repeats within `window`, remembering at most `cap` keys.
    pub fn new(window: Duration, cap: usize) -> Self {
        Self {
            window,
            cap,
            seen: HashMap::new(),
        }
    }

    /// A refusal with `key` at `now`: publish it, or hold it back as a repeat.
    pub fn admit(&mut self, key: K, now: Instant) -> Verdict {
        if let Some(seen) = self.seen.get_mut(&key) {
            if now.saturating_duration_since(seen.published) < self.window {
                seen.held_back += 1;
                return Verdict::HoldBack;
            }
            let held_back = seen.held_back;
            *seen = Seen {
                published: now,
                held_back: 0,
            };
            return Verdict::Publish { held_back };
        }
        if self.seen.len() >= self.cap {
            let window = self.window;
            self.seen
                .retain(|_, s| now.saturating_duration_since(s.published) < window);
        }
        if self.seen.len() < self.cap {
            self.seen.insert(
                key,
                Seen {
                    published: now,
                    held_back: 0,
                },
            );
        }
        Verdict::Publish { held_back: 0 }
    }

    /// How many keys are remembered.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Duration = Duration::from_secs(60);

    #[test]
    fn a_repeat_inside_the_window_is_held_back_and_counted_then_published_after_it() {
        let mut c = Coalescer::new(W, 16);
        let t0 = Instant::now();
        assert_eq!(c.admit("a", t0), Verdict::Publish { held_back: 0 });
        for s in 1..=5 {
            assert_eq!(c.admit("a", t0 + Duration::from_secs(s)), Verdict::HoldBack);
        }
        assert_eq!(
            c.admit("a", t0 + W),
            Verdict::Publish { held_back: 5 },
            "the window is over: published, with the repeats it held back"
        );
        assert_eq!(
            c.admit("a", t0 + W + Duration::from_secs(1)),
            Verdict::HoldBack
        );
    }

    #[test]
    fn another_key_is_published_at_once() {
        let mut c = Coalescer::new(W, 16);
        let t0 = Instant::now();
        assert_eq!(c.admit("a", t0), Verdict::Publish { held_back: 0 });
        assert_eq!(c.admit("b", t0), Verdict::Publish { held_back: 0 });
        assert_eq!(c.admit("a", t0), Verdict::HoldBack);
    }

    #[test]
    fn at_the_cap_old_keys_go_and_new_ones_are_never_held_back() {
        let mut c = Coalescer::new(W, 2);
        let t0 = Instant::now();
        c.admit(1, t0);
        c.admit(2, t0);
        // Full of young keys: a third is published, not remembered, so its repeat is too.
        assert_eq!(c.admit(3, t0), Verdict::Publish { held_back: 0 });
        assert_eq!(c.admit(3, t0), Verdict::Publish { held_back: 0 });
        assert_eq!(c.len(), 2);
        // Once they are old they make room.
        let later = t0 + W;
        assert_eq!(c.admit(4, later), Verdict::Publish { held_back: 0 });
        assert_eq!(c.len(), 1);
        assert_eq!(c.admit(4, later), Verdict::HoldBack);
    }

    #[test]
    fn a_clock_that_goes_back_holds_back_rather_than_panicking() {
        let mut c = Coalescer::new(W, 4);
        let t0 = Instant::now() + Duration::from_secs(10);
        c.admit("a", t0);
        assert_eq!(c.admit("a", t0 - Duration::from_secs(5)), Verdict::HoldBack);
    }
}
