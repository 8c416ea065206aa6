//! Where a task lives in Redis: its shard, the shard's keys, and the members
//! of the sorted sets that order it. The layout is described at the top of
//! `lua/prelude.lua`, which spells the members in Lua with the widths and
//! the queue's keys defined here (`scripts.rs` hands them over).

/// Most shards: a task's id keeps its shard in its low bits.
pub(crate) const SHARDS_MAX: u16 = 1 << SHARD_BITS;
/// Bits of an id (and of a lease) that name the shard.
pub(crate) const SHARD_BITS: u32 = 10;
/// Ids stay exact in a double (Lua's numbers, JSON in browsers): a shard's
/// sequence numbers have 53 - [`SHARD_BITS`] bits.
pub(crate) const SEQ_MAX: u64 = (1 << (53 - SHARD_BITS)) - 1;

/// Hex digits of a sequence number, in a member or a field: past [`SEQ_MAX`].
pub(crate) const SEQ_DIGITS: usize = 12;
/// Hex digits of a time (Unix ms) in a member: 44 bits, until the year 2527.
pub(crate) const MS_DIGITS: usize = 11;
/// Hex digits of a priority in a member of a due set: a `u32`'s.
pub(crate) const PRIORITY_DIGITS: usize = 8;
const _: () = assert!(SEQ_MAX < 1 << (4 * SEQ_DIGITS));
const _: () = assert!(u32::BITS as usize == 4 * PRIORITY_DIGITS);
const _: () = assert!(4 * MS_DIGITS + 4 * SEQ_DIGITS < 128);

/// A task's id from its shard and its sequence number in the shard.
pub(crate) fn id(shard: u16, seq: u64) -> u64 {
    debug_assert!(seq <= SEQ_MAX && shard < SHARDS_MAX);
    seq << SHARD_BITS | u64::from(shard)
}

/// The shard and sequence number of an id, if it could be one of `shards`.
pub(crate) fn split(id: u64, shards: u16) -> Option<(u16, u64)> {
    let shard = (id & (u64::from(SHARDS_MAX) - 1)) as u16;
    let seq = id >> SHARD_BITS;
    (shard < shards && seq > 0 && seq <= SEQ_MAX).then_some((shard, seq))
}

/// The names of every key, under a prefix (`hg` by default), so that several
/// services can share one Redis.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    prefix: String,
}

/// The sets, hashes and flag of one queue in one shard, in the order every
/// script takes them (`queue_keys`, which `scripts.rs` writes from this):
/// scheduled, due for pull claims, due oldest first, leased, dead, keys, due
/// for push claims, and the flag that the queue has a push target.
pub(crate) const QUEUE_KEYS: [&str; 8] = ["s", "r", "o", "l", "d", "k", "R", "P"];

impl Keys {
    pub(crate) fn new(prefix: &str) -> Keys {
        Keys { prefix: prefix.to_owned() }
    }

    /// A key of shard `shard`: under its own hash tag, so a Cluster spreads the
    /// shards over its masters and every script of a shard runs on one.
    pub(crate) fn shard(&self, shard: u16, name: &str) -> String {
        format!("{{{}:{shard}}}:{name}", self.prefix)
    }

    /// Key `name` of `queue` in `shard`.
    pub(crate) fn queue(&self, shard: u16, name: &str, queue: &str) -> String {
        format!("{{{}:{shard}}}:{name}:{queue}", self.prefix)
    }

    /// The keys of `queue` in `shard`.
    pub(crate) fn queue_keys(&self, shard: u16, queue: &str) -> [String; QUEUE_KEYS.len()] {
        QUEUE_KEYS.map(|name| self.queue(shard, name, queue))
    }

    /// A key of the whole service (not of a shard).
    pub(crate) fn global(&self, name: &str) -> String {
        format!("{{{}}}:{name}", self.prefix)
    }

    /// The pub/sub channel of wake-ups.
    pub(crate) fn channel(&self) -> String {
        format!("{}:events", self.prefix)
    }
}

/// `n` as `width` lower-case hex digits, as the scripts write it.
fn hex(n: u64, width: usize) -> String {
    format!("{n:0width$x}")
}

/// A member of a set ordered by a time: `TTTTTTTTTTT:SSSSSSSSSSSS`.
pub(crate) fn at_member(ms: u64, seq: u64) -> String {
    format!("{}:{}", hex(ms, MS_DIGITS), hex(seq, SEQ_DIGITS))
}

/// A member of a queue's due set, in claim order.
pub(crate) fn ready_member(priority: u32, ms: u64, seq: u64) -> String {
    format!("{}:{}", hex(u64::from(priority), PRIORITY_DIGITS), at_member(ms, seq))
}

/// A task's field in its shard's hashes of records and payloads, and its
/// member of a queue's dead set.
pub(crate) fn field(seq: u64) -> String {
    hex(seq, SEQ_DIGITS)
}

/// The shard of a task with an idempotency key: a stable hash of the queue
/// and the key, the same on every node and every version, so that the key is
/// unique with one script. A schedule's occurrence key
/// ([`occurrence_key`](hourglass_queue::occurrence_key)) is on its
/// schedule's shard, whatever the queue: the script that moves the schedule
/// on writes the occurrence's task, and finds the key there.
pub(crate) fn key_shard(queue: &str, key: &str, shards: u16) -> u16 {
    if let Some((schedule, _)) = hourglass_queue::occurrence_of(key) {
        return schedule_shard(schedule, shards);
    }
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(queue.as_bytes());
    hasher.update(&[0]);
    hasher.update(key.as_bytes());
    (hasher.finalize() % u32::from(shards)) as u16
}

/// The shard of schedule `name`: its record, its next occurrence among the
/// shard's deadlines, and the tasks of its occurrences. A stable hash of the
/// name alone, so that a schedule put again in another queue stays where it is.
pub(crate) fn schedule_shard(name: &str, shards: u16) -> u16 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(b"schedule\0");
    hasher.update(name.as_bytes());
    (hasher.finalize() % u32::from(shards)) as u16
}

/// The last sequence number of `shard` at or before id `after` in id order:
/// a listing that stopped at task `after` goes on in `shard` after it.
/// `None` if every task of the shard comes after.
pub(crate) fn seq_at_or_before(after: u64, shard: u16) -> Option<u64> {
    let seq = after >> SHARD_BITS;
    if id(shard, seq.min(SEQ_MAX)) <= after {
        Some(seq.min(SEQ_MAX))
    } else {
        seq.checked_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_keep_their_shard_and_sequence() {
        for (shard, seq) in [(0, 1), (3, 7), (SHARDS_MAX - 1, SEQ_MAX)] {
            assert_eq!(split(id(shard, seq), SHARDS_MAX), Some((shard, seq)));
        }
        assert_eq!(split(id(5, 1), 4), None, "a shard past the count");
        assert_eq!(split(5, 16), None, "sequence numbers start at 1");
        assert!(id(SHARDS_MAX - 1, SEQ_MAX) < 1 << 53, "exact in a double");
    }

    #[test]
    fn members_sort_as_their_order() {
        assert!(ready_member(0, 9_000, 9) < ready_member(1, 1, 1), "priority first");
        assert!(ready_member(5, 1_000, 9) < ready_member(5, 1_001, 1), "then due time");
        assert!(at_member(1_000, 9) < at_member(1_000, 10), "then sequence");
        assert_eq!(at_member(1, 1), "00000000001:000000000001");
    }

    #[test]
    fn a_listing_goes_on_after_its_cursor_in_every_shard() {
        let after = id(3, 10);
        assert_eq!(seq_at_or_before(after, 3), Some(10));
        assert_eq!(seq_at_or_before(after, 2), Some(10), "id(2, 10) < id(3, 10)");
        assert_eq!(seq_at_or_before(after, 4), Some(9), "id(4, 10) > id(3, 10)");
        assert_eq!(seq_at_or_before(0, 4), None);
    }

    #[test]
    fn a_key_s_shard_never_changes() {
        // Stored tasks are found by it: a change would lose their keys.
        // CRC-32 (IEEE) of "queue\0key", as zlib computes it.
        assert_eq!(key_shard("orders", "a", 16), 13);
        assert_eq!(key_shard("orders", "b", 16), 7);
        assert_eq!(key_shard("orders", "a", 1_024), 733);
        assert_eq!(schedule_shard("report", 16), schedule_shard("report", 16));
    }

    #[test]
    fn an_occurrence_s_task_is_on_its_schedule_s_shard_whatever_the_queue() {
        for name in ["report", "a:b", "tick-1"] {
            let key = hourglass_queue::occurrence_key(name, 1_764_547_200_000);
            for queue in ["orders", "reports", "x"] {
                assert_eq!(key_shard(queue, &key, 16), schedule_shard(name, 16), "{key} in {queue}");
            }
        }
        // Any other key is placed by the queue and the key.
        assert_eq!(key_shard("orders", "schedule:report", 16), key_shard("orders", "schedule:report", 16));
    }

    #[test]
    fn shard_keys_share_a_hash_tag() {
        let keys = Keys::new("hg");
        assert_eq!(keys.shard(7, "t"), "{hg:7}:t");
        assert_eq!(keys.queue(7, "s", "orders"), "{hg:7}:s:orders");
        assert_eq!(keys.global("queues"), "{hg}:queues");
    }
}
