//! Waiting out a server that is away: which failures may pass, and waits
//! that double up to a cap, with jitter so that workers do not come back
//! all at once.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use reqwest::StatusCode;

use crate::error::Error;

/// The first wait.
const FIRST: Duration = Duration::from_millis(50);

/// Whether a request that failed so may succeed if tried again: the server
/// unreachable, failing (5xx), out of room (507) or busy (429).
pub(crate) fn retryable(error: &Error) -> bool {
    match error {
        Error::Unreachable { .. } => true,
        Error::Api { status, .. } | Error::Decode { status, .. } => {
            status.is_server_error() || *status == StatusCode::TOO_MANY_REQUESTS
        }
        // Made before any request: trying again makes it the same.
        Error::Build { .. } => false,
    }
}

/// Waits after consecutive failures: `FIRST`, doubling, up to `max`; each
/// wait is drawn between half of it and all of it.
#[derive(Debug)]
pub(crate) struct Backoff {
    max: Duration,
    failures: u32,
}

impl Backoff {
    pub(crate) fn new(max: Duration) -> Backoff {
        Backoff { max, failures: 0 }
    }

    /// Failures since the last success.
    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }

    /// A success: the next failure waits `FIRST` again.
    pub(crate) fn reset(&mut self) {
        self.failures = 0;
    }

    /// Another failure: how long to wait before the next try.
    pub(crate) fn next(&mut self) -> Duration {
        let bound = FIRST.saturating_mul(1 << self.failures.min(20)).min(self.max);
        self.failures = self.failures.saturating_add(1);
        let half = bound / 2;
        half + half.mul_f64(unit_random())
    }
}

/// A number in [0, 1), from the standard library's per-process random keys.
fn unit_random() -> f64 {
    let bits = RandomState::new().build_hasher().finish();
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_to_their_cap_with_jitter() {
        let mut backoff = Backoff::new(Duration::from_secs(1));
        let waits: Vec<Duration> = (0..10).map(|_| backoff.next()).collect();
        for (n, wait) in waits.iter().enumerate() {
            let bound = FIRST.saturating_mul(1 << n).min(Duration::from_secs(1));
            assert!(*wait >= bound / 2 && *wait <= bound, "wait {n}: {wait:?} not within {bound:?}");
        }
        assert_eq!(backoff.failures(), 10);
        backoff.reset();
        assert!(backoff.next() <= FIRST);
    }

    #[test]
    fn what_may_pass() {
        let api = |status: u16| Error::Api {
            status: StatusCode::from_u16(status).unwrap(),
            code: "x".into(),
            message: String::new(),
        };
        assert!(retryable(&api(500)) && retryable(&api(503)) && retryable(&api(507)) && retryable(&api(429)));
        assert!(!retryable(&api(400)) && !retryable(&api(401)) && !retryable(&api(404)) && !retryable(&api(409)));
    }
}
