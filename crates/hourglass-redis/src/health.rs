//! Whether Redis answers, as this node last found it. An outage is logged
//! when it begins (the store's address and the error), again at a slowing
//! interval while it lasts, and when it ends; meanwhile
//! [`RedisBackend::store_unavailable`](hourglass_queue::Backend::store_unavailable)
//! says why, so that the server answers for it. The membership's heartbeat
//! ([`RENEWALS_PER_LEASE`](crate::RENEWALS_PER_LEASE) times a shard lease)
//! is what finds an outage begun or ended; requests in between that meet it
//! fail with [`QueueError::StoreUnavailable`](hourglass_queue::QueueError).

use std::fmt;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::{ErrorKind, RedisError, ServerErrorKind};

use crate::conn::Target;

/// An outage is logged again this long after it was first, then after twice
/// as long each time, up to [`OUTAGE_LOG_INTERVAL_MAX`].
pub const OUTAGE_LOG_INTERVAL_FIRST: Duration = Duration::from_secs(1);
/// The longest an outage goes without a line in the log.
pub const OUTAGE_LOG_INTERVAL_MAX: Duration = Duration::from_secs(60);
const _: () = assert!(OUTAGE_LOG_INTERVAL_FIRST.as_millis() <= OUTAGE_LOG_INTERVAL_MAX.as_millis());

/// Whether `error` says that Redis cannot be reached (no connection, or a
/// server that is not serving yet), rather than that it failed or was slow.
pub(crate) fn is_unreachable(error: &RedisError) -> bool {
    (error.is_io_error() && !error.is_timeout())
        || matches!(
            error.kind(),
            ErrorKind::Server(
                ServerErrorKind::BusyLoading | ServerErrorKind::ClusterDown | ServerErrorKind::MasterDown
            )
        )
}

/// Whether the store at one address answers.
pub(crate) struct Health {
    target: Target,
    outage: Mutex<Option<Outage>>,
}

struct Outage {
    since: Instant,
    error: String,
    /// When it is logged again, and the interval after that.
    next_log: Instant,
    interval: Duration,
}

impl Health {
    pub(crate) fn new(target: Target) -> Health {
        Health { target, outage: Mutex::new(None) }
    }

    /// Redis could not be reached: `error`. Logged at once if the outage
    /// begins here, else if its interval has passed.
    pub(crate) fn unreachable(&self, error: &dyn fmt::Display) {
        let now = Instant::now();
        let error = error.to_string();
        let mut outage = self.outage.lock();
        match &mut *outage {
            None => {
                tracing::warn!(store = %self.target, %error, "cannot reach the store; waiting for it");
                let interval = OUTAGE_LOG_INTERVAL_FIRST;
                *outage = Some(Outage { since: now, error, next_log: now + interval, interval });
            }
            Some(outage) => {
                if now >= outage.next_log {
                    let waited = now - outage.since;
                    tracing::warn!(store = %self.target, %error, waited = ?Secs(waited), "still cannot reach the store");
                    outage.interval = (outage.interval * 2).min(OUTAGE_LOG_INTERVAL_MAX);
                    outage.next_log = now + outage.interval;
                }
                outage.error = error;
            }
        }
    }

    /// Redis answered: an outage, if there was one, is over.
    pub(crate) fn answered(&self) {
        if let Some(outage) = self.outage.lock().take() {
            tracing::info!(store = %self.target, after = ?Secs(outage.since.elapsed()), "the store answers again");
        }
    }

    /// Why the store cannot be reached, if it cannot.
    pub(crate) fn why(&self) -> Option<String> {
        let outage = self.outage.lock();
        let outage = outage.as_ref()?;
        Some(format!(
            "cannot reach redis at {} (for {:?}): {}",
            self.target,
            Secs(outage.since.elapsed()),
            outage.error
        ))
    }
}

/// A duration in whole seconds, for people.
struct Secs(Duration);

impl fmt::Debug for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} s", self.0.as_secs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_told_until_redis_answers() {
        let health = Health::new(Target::One("redis://127.0.0.1:1".into()));
        assert_eq!(health.why(), None);
        health.unreachable(&"Connection refused (os error 111)");
        let why = health.why().expect("an outage");
        assert!(why.starts_with("cannot reach redis at redis://127.0.0.1:1 (for 0 s): Connection refused"), "{why}");
        health.answered();
        assert_eq!(health.why(), None);
    }

    #[test]
    fn unreachable_is_no_connection_not_a_slow_or_failing_redis() {
        let refused = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let timed_out = RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
        let script = RedisError::from((ErrorKind::Client, "NOSCRIPT"));
        assert!(is_unreachable(&refused));
        assert!(!is_unreachable(&timed_out));
        assert!(!is_unreachable(&script));
    }
}
