//! A worker's settings, their defaults and their bounds.

use std::fmt;
use std::time::Duration;

/// Most handlers a worker runs at once: a claim's worth of tasks (the
/// server hands out at most 1,000 in one claim).
pub const CONCURRENCY_MAX: usize = 1_000;
/// Most acks one request carries: the server's ack batch limit.
pub const ACKS_PER_REQUEST_MAX: usize = 1_000;
/// The shortest lease a worker asks for: the server's shortest. The worker
/// extends a running handler's lease every third of it.
pub const LEASE_MS_MIN: u64 = 100;
/// The longest a claim waits for a task: the server's longest.
pub const WAIT_MS_MAX: u64 = 60_000;
/// Longest reason a nack gives, in bytes of UTF-8: the server's limit.
pub const NACK_REASON_BYTES_MAX: usize = 1_024;

/// How a [`Worker`](super::Worker) claims, holds and lets go of tasks.
///
/// ```
/// use std::time::Duration;
/// use hourglass_client::WorkerOptions;
///
/// let options = WorkerOptions { concurrency: 64, shutdown_timeout: Duration::from_secs(10), ..WorkerOptions::default() };
/// assert!(options.check().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerOptions {
    /// Handlers running at once, at most (16): claims ask for no more tasks
    /// than there are free slots.
    pub concurrency: usize,
    /// Each delivery's lease, in ms (30 s); extended every third of it while
    /// its handler runs.
    pub lease_ms: u64,
    /// How long a claim waits for a task when none is due, in ms (10 s).
    pub wait_ms: u64,
    /// On shutdown, how long running handlers get to finish (30 s); those
    /// still running then are abandoned (their tasks are delivered again when
    /// their leases run out).
    pub shutdown_timeout: Duration,
    /// A nack's delay before the task is due again, in ms (`None`: the
    /// server's retry backoff).
    pub nack_delay_ms: Option<u64>,
    /// The longest wait between tries while the server is unreachable, or
    /// answers 5xx, 507 or 429 (5 s); the waits double up to it, with jitter.
    pub backoff_max: Duration,
    /// Whether acks ride on the next claim when one is about to go (true),
    /// saving a request, or always go in `POST /v1/acks` of their own. On
    /// loopback, where a round trip costs little, acks apart let a claim and
    /// an ack request run at once, and drained faster (`BENCHMARKS.md`).
    pub acks_on_claims: bool,
}

impl Default for WorkerOptions {
    fn default() -> WorkerOptions {
        WorkerOptions {
            concurrency: 16,
            lease_ms: 30_000,
            wait_ms: 10_000,
            shutdown_timeout: Duration::from_secs(30),
            nack_delay_ms: None,
            backoff_max: Duration::from_secs(5),
            acks_on_claims: true,
        }
    }
}

impl WorkerOptions {
    /// Whether the options are within their bounds.
    ///
    /// # Errors
    /// The first one that is not, and its bounds.
    pub fn check(&self) -> Result<(), OptionsError> {
        let bad = |what: String| Err(OptionsError(what));
        if !(1..=CONCURRENCY_MAX).contains(&self.concurrency) {
            return bad(format!("concurrency must be 1 to {CONCURRENCY_MAX}, not {}", self.concurrency));
        }
        if self.lease_ms < LEASE_MS_MIN {
            return bad(format!("lease_ms must be at least {LEASE_MS_MIN}, not {}", self.lease_ms));
        }
        if self.wait_ms > WAIT_MS_MAX {
            return bad(format!("wait_ms must be at most {WAIT_MS_MAX}, not {}", self.wait_ms));
        }
        if self.backoff_max.is_zero() {
            return bad("backoff_max must be more than zero".to_owned());
        }
        Ok(())
    }

    /// How often a running handler's lease is extended.
    pub(crate) fn extend_every(&self) -> Duration {
        Duration::from_millis(self.lease_ms / 3)
    }
}

/// Options out of their bounds: which, and what they may be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionsError(String);

impl fmt::Display for OptionsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl OptionsError {
    pub(crate) fn none_queued() -> OptionsError {
        OptionsError("a worker needs at least one queue".to_owned())
    }
}

impl std::error::Error for OptionsError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_checked_and_named() {
        assert_eq!(WorkerOptions::default().check(), Ok(()));
        let zero = WorkerOptions { concurrency: 0, ..WorkerOptions::default() };
        assert_eq!(zero.check().unwrap_err().to_string(), "concurrency must be 1 to 1000, not 0");
        let short = WorkerOptions { lease_ms: 99, ..WorkerOptions::default() };
        assert!(short.check().unwrap_err().to_string().contains("lease_ms must be at least 100"));
        let long = WorkerOptions { wait_ms: 60_001, ..WorkerOptions::default() };
        assert!(long.check().is_err());
        assert_eq!(WorkerOptions::default().extend_every(), Duration::from_secs(10));
    }
}
