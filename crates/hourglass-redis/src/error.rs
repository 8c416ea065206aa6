//! The backend's errors: [`ConnectError`] when it is set up, and the
//! contract's [`QueueError::Storage`] when a request meets a Redis that fails.

use std::error::Error;
use std::fmt;

use redis::RedisError;

use hourglass_queue::{Failure, QueueError};

use crate::conn::Target;
use crate::health::is_unreachable;

/// Why [`RedisBackend::connect`](crate::RedisBackend::connect) failed: the
/// backend never started, and no request was made.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConnectError {
    /// An option is out of range; the message names it and its bounds.
    InvalidOption(String),
    /// No connection to Redis at `target`; the cause is the
    /// [`source`](Error::source).
    Unreachable {
        /// Where Redis was looked for.
        target: Target,
        /// Why it could not be reached.
        source: RedisError,
    },
    /// Redis was reached but refused the URL's user and password (a wrong
    /// password, an unknown or disabled user), or its TLS certificate was
    /// not trusted: trying again would not help. The cause is the
    /// [`source`](Error::source); it never shows the password.
    Refused {
        /// The store.
        target: Target,
        /// What Redis, or the TLS check, answered.
        source: RedisError,
    },
    /// Redis was reached but failed to read or set the store's shard count.
    Store {
        /// The store.
        target: Target,
        /// What Redis answered.
        source: RedisError,
    },
    /// The store has another shard count than the one asked for. A store
    /// keeps the count it was made with, and every node of a service must
    /// use it: a task's id names its shard.
    ShardsDiffer {
        /// The store.
        target: Target,
        /// The store's count.
        store: u16,
        /// The count asked for.
        asked: u16,
    },
    /// The thread that fires the shards' timers could not start.
    TimerThread(std::io::Error),
}

impl ConnectError {
    /// The error of a connection to `target` that could not be opened.
    pub(crate) fn opening(target: &Target, source: RedisError) -> ConnectError {
        let target = target.clone();
        if source.kind() == redis::ErrorKind::AuthenticationFailed || is_untrusted(&source) {
            ConnectError::Refused { target, source }
        } else {
            ConnectError::Unreachable { target, source }
        }
    }

    /// Whether Redis could not be reached (nothing listens, it is loading
    /// its data or its Cluster is forming, or it did not answer in time):
    /// trying again later may succeed.
    pub fn is_unreachable(&self) -> bool {
        match self {
            ConnectError::Unreachable { .. } => true,
            ConnectError::Store { source, .. } => is_unreachable(source) || source.is_timeout(),
            _ => false,
        }
    }

    /// Redis's error, if it is the cause.
    pub(crate) fn redis(&self) -> Option<&RedisError> {
        match self {
            ConnectError::Unreachable { source, .. }
            | ConnectError::Refused { source, .. }
            | ConnectError::Store { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::InvalidOption(message) => f.write_str(message),
            ConnectError::Unreachable { target, .. } => write!(f, "cannot reach redis at {target}"),
            ConnectError::Refused { target, source } if source.kind() == redis::ErrorKind::AuthenticationFailed => {
                write!(f, "redis at {target} refused the user and password of the URL")
            }
            ConnectError::Refused { target, .. } => {
                write!(f, "the TLS certificate of redis at {target} is not trusted")
            }
            ConnectError::Store { target, .. } => write!(f, "cannot read the shard count of the store at {target}"),
            ConnectError::ShardsDiffer { target, store, asked } => write!(
                f,
                "the store at {target} has {store} shards, not {asked}: every node of a service uses the store's \
                 count"
            ),
            ConnectError::TimerThread(_) => f.write_str("cannot start the thread of the shards' timers"),
        }
    }
}

impl Error for ConnectError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            ConnectError::TimerThread(source) => Some(source),
            _ => self.redis().map(|source| source as &(dyn Error + 'static)),
        }
    }
}

/// Whether `error` is a TLS certificate the client would not trust. redis-rs
/// keeps rustls's refusal as the text of an I/O error (its type is out of
/// reach through `source`), which starts with rustls's own words.
fn is_untrusted(error: &RedisError) -> bool {
    error.is_io_error() && error.to_string().contains("invalid peer certificate")
}

/// A request met a Redis that failed: the error is kept as the cause. A
/// script refused by Redis (an error reply) changed nothing: its checks come
/// before its first write. A reply that never came (a timeout, a connection
/// lost) leaves the change unknown, and the message says so: at least once, a
/// client tries again.
///
/// Redis out of reach (no connection, or loading its data) is
/// [`QueueError::StoreUnavailable`]: with a connection refused or a server
/// loading, the request never ran.
pub(crate) fn storage(error: RedisError) -> QueueError {
    if is_unreachable(&error) {
        let what = if error.is_connection_refusal() || !error.is_io_error() {
            "redis"
        } else {
            "redis did not answer, so the change may or may not have been made"
        };
        return QueueError::StoreUnavailable(Failure::new(what, error));
    }
    let what = if error.is_timeout() || error.is_connection_dropped() || error.is_io_error() {
        "redis did not answer, so the change may or may not have been made"
    } else {
        "redis"
    };
    QueueError::Storage(Failure::new(what, error))
}

/// An answer from Redis that makes no sense: a script's reply of the wrong
/// shape, a record that does not decode.
pub(crate) fn unexpected(what: impl Into<String>) -> QueueError {
    QueueError::Storage(Failure::msg(format!("redis: {}", what.into())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_storage_error_keeps_redis_s_error_as_its_cause() {
        let timed_out = RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
        let error = storage(timed_out);
        assert!(error.to_string().contains("may or may not have been made"), "{error}");
        assert!(error.source().is_some());
        let refused = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let error = storage(refused);
        assert!(matches!(error, QueueError::StoreUnavailable(_)), "{error:?}");
        assert!(error.to_string().starts_with("the store cannot be reached: redis: "), "{error}");
        let reset = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(storage(reset).to_string().contains("may or may not have been made"));
        let script = storage(RedisError::from((redis::ErrorKind::Client, "NOSCRIPT")));
        assert!(script.to_string().starts_with("storage failed: redis: "), "{script}");
        assert!(script.source().is_some());
    }
}
