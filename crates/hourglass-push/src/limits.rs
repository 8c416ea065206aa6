//! Every bound of push delivery's machinery, in one place. Going past one is
//! a clear error where the value comes from a user (a key, an allow list),
//! and a cut where it comes from a receiver (a body). A target's own bounds
//! (URL, headers, timeout, the lease margin, `Retry-After`) are the
//! contract's, in `hourglass_queue::limits` (`PUSH_*`).

use hourglass_queue::limits::{ACK_BATCH_MAX, CLAIM_MAX, NACK_REASON_BYTES_MAX, WAIT_MS_MAX};

/// Bytes of a response body read, at most. A body that ends within it leaves
/// its connection reusable; a longer one is cut and its connection closed.
pub const RESPONSE_BODY_BYTES_MAX: usize = 64 * 1_024;
/// Bytes of a failed response's body quoted in `last_error`.
pub const ERROR_BODY_BYTES_MAX: usize = 256;
/// Bytes of a `last_error` or a dead task's reason: what a nack's reason may
/// hold, so that the backend stores it as it stores a consumer's.
pub const LAST_ERROR_BYTES_MAX: usize = NACK_REASON_BYTES_MAX;

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
/// Outcomes one settle applies, at most: a batch of acks' own bound
/// ([`ACK_BATCH_MAX`]).
pub const SETTLE_BATCH_MAX: usize = ACK_BATCH_MAX;
/// How long a push claim of [`TasksSource`](crate::TasksSource) waits for a
/// task to come due before it answers empty.
pub const CLAIM_WAIT_MS: u64 = 5_000;
/// How long the loop waits before claiming again after a claim failed.
pub const CLAIM_RETRY_MS: u64 = 1_000;
/// How long an idle connection stays in the pool.
pub const POOL_IDLE_MS: u64 = 90_000;

const _: () = {
    assert!(CLAIM_WAIT_MS <= WAIT_MS_MAX, "a claim's wait is a claim's");
    assert!(ERROR_BODY_BYTES_MAX + 64 <= LAST_ERROR_BYTES_MAX, "the quoted body fits in last_error with its prefix");
    assert!(ERROR_BODY_BYTES_MAX <= RESPONSE_BODY_BYTES_MAX);
    assert!(SIGNING_KEY_BYTES_MIN <= SIGNING_KEY_BYTES_MAX);
};
