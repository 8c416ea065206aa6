//! Every bound of push delivery, in one place. Going past one is a clear
//! error where the value comes from a user (a target, a key, an allow list),
//! and a cut where it comes from a receiver (a body, a `Retry-After`).

use hourglass_queue::limits::{BACKOFF_MAX_MS, CLAIM_MAX, NACK_REASON_BYTES_MAX};

/// A target's timeout when it names none: 30 s (Cloud Tasks' default is 10
/// min; a receiver that needs longer says so).
pub const TIMEOUT_MS_DEFAULT: u64 = 30_000;
/// The shortest timeout a target may ask for.
pub const TIMEOUT_MS_MIN: u64 = 10;
/// The longest timeout a target may ask for: 30 min.
pub const TIMEOUT_MS_MAX: u64 = 30 * 60 * 1_000;
/// What a delivery's lease holds beyond its timeout: the time to settle the
/// outcome once the request has ended, so that the lease never runs out
/// while a node is still settling a delivery it is entitled to.
pub const LEASE_MARGIN_MS: u64 = 5_000;

/// Bytes of a target's URL.
pub const URL_BYTES_MAX: usize = 2_048;
/// Headers a target may add.
pub const HEADERS_MAX: usize = 32;
/// Bytes of a target's headers, names and values together.
pub const HEADER_BYTES_MAX: usize = 8_192;

/// Bytes of a response body read, at most. A body that ends within it leaves
/// its connection reusable; a longer one is cut and its connection closed.
pub const RESPONSE_BODY_BYTES_MAX: usize = 64 * 1_024;
/// Bytes of a failed response's body quoted in `last_error`.
pub const ERROR_BODY_BYTES_MAX: usize = 256;
/// Bytes of a `last_error` or a dead task's reason: what a nack's reason may
/// hold, so that the backend stores it as it stores a consumer's.
pub const LAST_ERROR_BYTES_MAX: usize = NACK_REASON_BYTES_MAX;
/// The longest a `Retry-After` holds a task off: the longest backoff, so a
/// receiver asking for more gets what a failing receiver would.
pub const RETRY_AFTER_MS_MAX: u64 = BACKOFF_MAX_MS;

/// Signing keys at once (two are enough to rotate; a few more leave room
/// for a slow rollout).
pub const SIGNING_KEYS_MAX: usize = 8;
/// The shortest signing key, in bytes: shorter is guessable.
pub const SIGNING_KEY_BYTES_MIN: usize = 16;
/// The longest signing key, in bytes (HMAC hashes longer keys anyway).
pub const SIGNING_KEY_BYTES_MAX: usize = 256;

/// Entries of an allow list.
pub const ALLOW_ENTRIES_MAX: usize = 256;
/// Bytes of one allow-list entry: a DNS name (253) with a port.
pub const ALLOW_ENTRY_BYTES_MAX: usize = 260;

/// Deliveries in flight on one node when the caller names no bound.
pub const CONCURRENCY_DEFAULT: usize = 64;
/// Deliveries in flight on one node, at most.
pub const CONCURRENCY_MAX: usize = 10_000;
/// Tasks one claim asks for, at most: a claim's own bound.
pub const CLAIM_BATCH_MAX: usize = CLAIM_MAX;
/// How long the loop waits before claiming again after a claim failed.
pub const CLAIM_RETRY_MS: u64 = 1_000;
/// How long an idle connection stays in the pool.
pub const POOL_IDLE_MS: u64 = 90_000;

const _: () = {
    assert!(TIMEOUT_MS_MIN <= TIMEOUT_MS_DEFAULT && TIMEOUT_MS_DEFAULT <= TIMEOUT_MS_MAX);
    assert!(TIMEOUT_MS_MAX + LEASE_MARGIN_MS <= hourglass_queue::limits::LEASE_MS_MAX, "a delivery's lease is a lease");
    assert!(ERROR_BODY_BYTES_MAX + 64 <= LAST_ERROR_BYTES_MAX, "the quoted body fits in last_error with its prefix");
    assert!(ERROR_BODY_BYTES_MAX <= RESPONSE_BODY_BYTES_MAX);
    assert!(SIGNING_KEY_BYTES_MIN <= SIGNING_KEY_BYTES_MAX);
};
