//! How a Redis backend is set up, and the constants that bound its work.

use hourglass_queue::limits::{Limits, CLAIM_MAX};

use crate::conn::{RedisCa, Target};
use crate::error::ConnectError;
use crate::keys::SHARDS_MAX;

/// Shards when the store has none yet.
pub const SHARDS_DEFAULT: u16 = 16;
/// A node's lease on its shards: a node whose heartbeat stops (dead, stopped
/// or cut off) has its shards taken over within this and a renewal period
/// (4 s in all). A node's heartbeat may come this less a renewal period
/// late (2 s) before the others take it for dead.
///
/// Three seconds and a heartbeat each second, rather than two and one each
/// half second: an idle node costs Redis two commands a second (its
/// heartbeat and the read of who is alive), not three, and tolerates a
/// longer stall; a dead node's shards wait a second longer.
pub const SHARD_LEASE_MS_DEFAULT: u64 = 3_000;
/// The shortest shard lease: a renewal every [`RENEWALS_PER_LEASE`]th of it
/// is a round trip to Redis each 133 ms.
pub const SHARD_LEASE_MS_MIN: u64 = 400;
/// The longest shard lease: a dead node's shards wait this long for another.
pub const SHARD_LEASE_MS_MAX: u64 = 60_000;
/// How long before a task's due time the owner of its shard hands it to a
/// claim waiting on the owner's node, by default: the fire script's round
/// trip (1.5 ms at the median and 3 to 4.5 ms at the 99th percentile under
/// `appendfsync always` with three nodes, `BENCHMARKS.md`) then happens
/// before the task is due, and the node answers the claim at its due time.
/// The task is leased from then on (its lease counts from its due time), as
/// one handed over at its due time is.
pub const FIRE_AHEAD_MS_DEFAULT: u64 = 5;
/// The most a task may be handed to a claim ahead of its due time.
pub const FIRE_AHEAD_MS_MAX: u64 = 1_000;
/// A node heartbeats (which renews its hold on all its shards) and reads who
/// is alive this many times a lease.
pub const RENEWALS_PER_LEASE: u64 = 3;
/// The owner of a shard reads its deadlines again at least this often, in
/// case a hint of an earlier one was lost. A safety net, not what delivers:
/// see [`RedisBackend::fired`](crate::RedisBackend::fired).
pub const SWEEP_MS: u64 = 1_000;
/// The sweep of the shards that held no deadline at all when last read: a
/// node looks at all of its idle shards together this often (one `EXISTS`
/// on one Redis), not at each every [`SWEEP_MS`]. A lost hint of a shard's
/// first task costs at most this.
pub const SWEEP_IDLE_MS: u64 = 5_000;
/// A waiting claim looks for due tasks at least this often, at the shards
/// marked as maybe having some, in case it missed a wake-up.
pub const CLAIM_RECHECK_MS: u64 = 1_000;
/// Most due tasks or expired leases of one queue one fire script moves; more
/// are moved by the next, at once.
pub const FIRE_BATCH_MAX: usize = 1_000;
/// Most queues one fire script looks at; the next takes the rest, at once.
pub const FIRE_QUEUES_MAX: usize = 64;
// FIRE_QUEUES_MAX is the fire script's heads_max: it reads the shard's
// earliest deadline from the first of the heads it returns (`lua/fire.lua`).
const _: () = assert!(FIRE_QUEUES_MAX >= 1, "a fire returns the shard's earliest head");
/// The first round of a claim of several tasks asks at least this many of
/// each shard it asks (it asks fewer shards rather than fewer tasks of each):
/// each shard asked is one script, and the acks of its tasks another. Later
/// rounds ask the rest, so the claim still gets every due task it has room
/// for. Measured on the drain of 50,000 tasks by claims of 64 on three nodes:
/// asking every shard (1 here) ran 3.4 times the scripts and drained at 0.88
/// times the rate (docs/DESIGN.md, "Claims from any node").
pub const CLAIM_SHARE_MIN: usize = 16;
/// The first round's least share of a queue after a claim whose first round
/// got all it asked of each of the queue's shards it asked, shares of
/// [`CLAIM_SHARE_MIN`] or more: the shards hold more, as in a burst
/// of due tasks, and each shard asked costs a claim script and an ack script
/// (about 15 µs of Redis's time each). A claim of 64 then asks one shard, not
/// four; the next whose first round comes back short asks as before, so a
/// claim among shards with few due tasks each takes no second round for it.
/// Measured on 100,000 due at once through three nodes, six alternating
/// pairs: the last delivered at 0.92 of the time (0.85 to 1.04). A least
/// share of 32 for every first round gave 0.88, but a claim among shards
/// with few due tasks each then took a second round more often, and the p99
/// of lateness at 1 k/s rose by a sixth (BENCHMARKS.md).
pub const CLAIM_SHARE_FILLED: usize = 64;

/// A node uses a queue's settings (and the set of queues that push) as it
/// read them this long ago, at most: a claim reads its queue's flow control
/// from them. A put on another node publishes them at once, and a node that
/// subscribes again forgets all it read (what it missed meanwhile is read
/// again): this bounds a message lost while subscribed (a Cluster's bus
/// link that broke). A second once, it was read again by every waiting
/// claim each second: 7 of an idle cluster's 23 commands a second.
pub(crate) const SETTINGS_FRESH_FOR: std::time::Duration = std::time::Duration::from_millis(5_000);

/// Due tasks a claim script looks at, at most, past those it hands out (dead
/// ones it meets past their expiry).
pub(crate) const CLAIM_SCAN_MAX: usize = 2 * CLAIM_MAX;

/// Values one Lua `unpack` may pass (Redis's `LUAI_MAXCSTACK`). A script
/// gathers its writes and sends each as one call (`writes` in the prelude),
/// two values a task at most: a claim's hand-out gathers every task it looks
/// at (up to [`CLAIM_SCAN_MAX`] and a window of [`CLAIM_MAX`] past it), a
/// fire a batch, an enqueue or a batch of acks its tasks.
const LUA_UNPACK_MAX: usize = 8_000;
const _: () = assert!(2 * (CLAIM_SCAN_MAX + CLAIM_MAX) <= LUA_UNPACK_MAX, "a claim's writes fit one unpack");
const _: () = assert!(2 * FIRE_BATCH_MAX <= LUA_UNPACK_MAX, "a fire's writes fit one unpack");
const _: () = assert!(2 * hourglass_queue::limits::BATCH_MAX <= LUA_UNPACK_MAX, "an enqueue's writes fit");
const _: () = assert!(2 * hourglass_queue::limits::ACK_BATCH_MAX <= LUA_UNPACK_MAX, "a batch of acks fits");
/// Ids whose queue a node remembers (for acks, nacks and the like, which name
/// only the id): past it the memory is cleared, and a miss costs one more
/// round trip.
pub(crate) const QUEUE_OF_MAX: usize = 100_000;
/// The totals' count of tasks is the sum of the queues' counts if those were
/// read this recently (the dashboard reads both each second), else each
/// shard's.
pub(crate) const COUNTED_FRESH_FOR: std::time::Duration = std::time::Duration::from_millis(900);

const _: () = assert!(FIRE_AHEAD_MS_DEFAULT <= FIRE_AHEAD_MS_MAX);
const _: () = assert!(SHARDS_DEFAULT >= 1 && SHARDS_DEFAULT <= SHARDS_MAX);
const _: () = assert!(SHARD_LEASE_MS_MIN <= SHARD_LEASE_MS_DEFAULT && SHARD_LEASE_MS_DEFAULT <= SHARD_LEASE_MS_MAX);
const _: () = assert!(SHARD_LEASE_MS_MIN / RENEWALS_PER_LEASE >= 100, "a renewal at most every 100 ms");
const _: () = assert!(CLAIM_SHARE_MIN <= CLAIM_SHARE_FILLED && CLAIM_SHARE_FILLED <= CLAIM_MAX);
const _: () = assert!(SWEEP_MS <= SWEEP_IDLE_MS);
const _: () = assert!(RENEWALS_PER_LEASE >= 2, "a heartbeat may be late by a renewal period and still renew");

/// How a Redis backend is set up.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// Which Redis.
    pub target: Target,
    /// Over TLS, the authorities its certificate is checked against; the
    /// system's if none.
    pub ca: Option<RedisCa>,
    /// Every key starts with it, so that services can share a Redis.
    pub prefix: String,
    /// Shards to create if the store has none; a store keeps its count.
    pub shards: u16,
    /// A node's lease on its shards.
    pub shard_lease_ms: u64,
    /// How long before its due time a task may be handed to a claim waiting
    /// on the node that fires it (0: at its due time); see
    /// [`FIRE_AHEAD_MS_DEFAULT`].
    pub fire_ahead_ms: u64,
    /// Bounds on requests; `tasks_max` is shared evenly by the shards.
    pub limits: Limits,
}

impl RedisOptions {
    /// The defaults, on `target`.
    pub fn new(target: Target) -> RedisOptions {
        RedisOptions {
            target,
            ca: None,
            prefix: "hg".into(),
            shards: SHARDS_DEFAULT,
            shard_lease_ms: SHARD_LEASE_MS_DEFAULT,
            fire_ahead_ms: FIRE_AHEAD_MS_DEFAULT,
            limits: Limits::default(),
        }
    }

    /// Every option within its bounds.
    pub(crate) fn check(&self) -> Result<(), ConnectError> {
        if !(1..=SHARDS_MAX).contains(&self.shards) {
            return Err(ConnectError::InvalidOption(format!(
                "a store has 1 ..= {SHARDS_MAX} shards, not {}",
                self.shards
            )));
        }
        if !(SHARD_LEASE_MS_MIN..=SHARD_LEASE_MS_MAX).contains(&self.shard_lease_ms) {
            return Err(ConnectError::InvalidOption(format!(
                "a shard lease is {SHARD_LEASE_MS_MIN} ..= {SHARD_LEASE_MS_MAX} ms, not {}",
                self.shard_lease_ms
            )));
        }
        if self.fire_ahead_ms > FIRE_AHEAD_MS_MAX {
            return Err(ConnectError::InvalidOption(format!(
                "a task is handed to a claim 0 ..= {FIRE_AHEAD_MS_MAX} ms ahead of its due time, not {}",
                self.fire_ahead_ms
            )));
        }
        if self.ca.is_some() && !self.target.is_tls() {
            return Err(ConnectError::InvalidOption(format!(
                "certificate authorities are for a Redis over TLS (rediss://, rediss+cluster://), not {}",
                self.target
            )));
        }
        if self.prefix.is_empty() || self.prefix.contains(['{', '}']) {
            return Err(ConnectError::InvalidOption(format!(
                "a key prefix is not empty and has no {{ or }}, unlike {:?}",
                self.prefix
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_out_of_range_are_refused_with_their_bounds() {
        let ok = RedisOptions::new(Target::One("redis://127.0.0.1:1".into()));
        assert!(ok.check().is_ok());
        let refused = |options: RedisOptions| options.check().unwrap_err().to_string();
        assert_eq!(refused(RedisOptions { shards: 0, ..ok.clone() }), "a store has 1 ..= 1024 shards, not 0");
        assert_eq!(
            refused(RedisOptions { shard_lease_ms: 399, ..ok.clone() }),
            "a shard lease is 400 ..= 60000 ms, not 399"
        );
        assert!(refused(RedisOptions { prefix: "{a}".into(), ..ok.clone() }).contains("no { or }"));
        assert_eq!(
            refused(RedisOptions { fire_ahead_ms: 1_001, ..ok.clone() }),
            "a task is handed to a claim 0 ..= 1000 ms ahead of its due time, not 1001"
        );
        let authority = hourglass_test_support::certs::Authority::new("test authority").pem();
        let ca = crate::RedisCa::from_pem(authority.into_bytes(), "ca.pem").unwrap();
        assert_eq!(
            refused(RedisOptions { ca: Some(ca.clone()), ..ok }),
            "certificate authorities are for a Redis over TLS (rediss://, rediss+cluster://), not redis://127.0.0.1:1"
        );
        let tls = RedisOptions { ca: Some(ca), ..RedisOptions::new("rediss://127.0.0.1:1".parse().unwrap()) };
        assert!(tls.check().is_ok());
    }
}
