//! A token bucket for the SubjectAccessReviews the webhook asks on behalf of callers it cannot
//! authenticate.
//!
//! Where the API server presents no client certificate ([`ReviewAuth::AnswerOnly`]), anyone who
//! reaches the webhook's port can post a review that makes Lien ask the API server a
//! SubjectAccessReview (a deletion request on `/mutate`, a Usage or rule on `/validate`): one
//! forged request, one API call made with Lien's identity — measured at about 2,100 a second
//! from one client before this bound. The bucket caps those calls at a steady rate with a burst
//! above it; a review past it is refused (429, "retry shortly") without asking. Authenticated
//! callers (a client certificate) never wait on it, and with a client CA configured an
//! unauthenticated caller is refused before any question is asked.
//!
//! Pure: the time is an argument.
//!
//! [`ReviewAuth::AnswerOnly`]: crate::ReviewAuth::AnswerOnly

use std::time::{Duration, Instant};

/// Default steady rate of access checks for unauthenticated callers, per second: well above
/// what people asking for deletions and applying Usages produce, far below what a forging
/// client can ask.
pub const DEFAULT_UNAUTHENTICATED_CHECKS_PER_SECOND: u32 = 50;

/// A token bucket: `burst` tokens, refilled at `rate` a second.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// Full at `now`. A `rate` of 0 never refills: `burst` checks in all.
    pub fn new(rate: u32, burst: u32, now: Instant) -> Self {
        Self {
            rate: f64::from(rate),
            burst: f64::from(burst),
            tokens: f64::from(burst),
            last: now,
        }
    }

    /// Takes a token if there is one at `now`.
    pub fn try_take(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last);
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed.as_secs_f64() * self.rate).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// How long until the next token at `now` (zero if there is one).
    pub fn wait(&self, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        let tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        if tokens >= 1.0 || self.rate <= 0.0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64((1.0 - tokens) / self.rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_steady_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(10, 3, t0);
        assert!((0..3).all(|_| b.try_take(t0)), "the burst");
        assert!(!b.try_take(t0), "then none");
        assert_eq!(b.wait(t0), Duration::from_millis(100));
        assert!(!b.try_take(t0 + Duration::from_millis(50)));
        assert!(
            b.try_take(t0 + Duration::from_millis(100)),
            "one per 100 ms"
        );
        assert!(!b.try_take(t0 + Duration::from_millis(100)));
        // A long pause refills to the burst, never past it.
        let later = t0 + Duration::from_secs(60);
        assert_eq!((0..10).filter(|_| b.try_take(later)).count(), 3);
    }

    #[test]
    fn over_a_second_of_demand_at_most_burst_plus_rate_pass() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(50, 100, t0);
        // 2,100 asks spread over one second, as the forging client managed.
        let passed = (0..2_100u32)
            .filter(|i| b.try_take(t0 + Duration::from_micros(u64::from(*i) * 476)))
            .count();
        assert!((149..=150).contains(&passed), "{passed}");
    }

    #[test]
    fn time_going_backwards_takes_nothing_extra() {
        let t0 = Instant::now() + Duration::from_secs(1);
        let mut b = TokenBucket::new(1, 1, t0);
        assert!(b.try_take(t0));
        assert!(!b.try_take(t0 - Duration::from_millis(500)));
        assert!(!b.try_take(t0));
    }
}
