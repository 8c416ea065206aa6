//! What a node knows of its queues between round trips to Redis: which shards
//! may have due tasks of a queue (so a claim looks only there), and the
//! wake-up of claims waiting on a queue. Both are fed by the shards' pub/sub
//! hints, which any node's change publishes. Pub/sub is at most once, but
//! Redis loses no message on a subscription that stands (a subscriber that
//! falls too far behind is dropped instead); after a subscription was down,
//! every shard is worth a look again ([`Watch::wake_all`]). A waiting claim
//! also looks again every [`CLAIM_RECHECK_MS`](crate::CLAIM_RECHECK_MS), at
//! the shards marked: a wake-up it missed costs it no more.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

use hourglass_queue::limits::QUEUES_MAX;

/// Queues a node keeps wake-ups for at most: past it, those nobody waits on
/// are dropped (and are looked for in every shard again when next claimed).
pub(crate) const WATCHED_QUEUES_MAX: usize = 2 * QUEUES_MAX;

/// How long after a new subscription, by this node's estimate of Redis's
/// clock, a drain is taken as published before it (its hints missed, not
/// drained): the estimate errs early by a few milliseconds, and a Cluster's
/// primaries' clocks may differ. A drain in that time costs the node's
/// claims a look that finds nothing.
pub(crate) const RESUBSCRIBED_FOR_US: u64 = 1_000_000;

/// One queue, as this node knows it.
pub(crate) struct QueueWatch {
    /// Woken by every hint of the queue and by a change of its pause.
    pub(crate) notify: Arc<Notify>,
    /// How many times `notify` was woken: a claim that found nothing asks
    /// Redis again right away only if it changed.
    woken: AtomicU64,
    /// Per shard: hints received, and the count when a look found nothing
    /// due. A shard may have due tasks while they differ.
    hints: Vec<AtomicU64>,
    seen: Vec<AtomicU64>,
    /// Per shard: the latest Redis time (µs) of a hint received, from the
    /// channel or (ahead of it) from a script through this node. A drain
    /// published before it takes it back; one published after, whichever
    /// arrives first, does not.
    hinted_us: Vec<AtomicU64>,
    /// Whether the last claim's first round found this queue's shards holding
    /// more: it got all it asked of each, shares of `CLAIM_SHARE_MIN` or more
    /// (`claims.rs`).
    filled: AtomicBool,
}

impl QueueWatch {
    fn new(shards: u16) -> QueueWatch {
        QueueWatch {
            notify: Arc::new(Notify::new()),
            woken: AtomicU64::new(0),
            hints: (0..shards).map(|_| AtomicU64::new(1)).collect(),
            seen: (0..shards).map(|_| AtomicU64::new(0)).collect(),
            hinted_us: (0..shards).map(|_| AtomicU64::new(0)).collect(),
            filled: AtomicBool::new(false),
        }
    }

    /// Whether the last claim's first round found the shards holding more.
    pub(crate) fn filled(&self) -> bool {
        self.filled.load(Ordering::Relaxed)
    }

    /// What a claim's first round found of this queue's shards: more than
    /// it asked (`filled`), or not.
    pub(crate) fn first_round_filled(&self, filled: bool) {
        self.filled.store(filled, Ordering::Relaxed);
    }

    /// The shards that may have due tasks, each with the hint count to hand
    /// back to [`found_none`](QueueWatch::found_none) if it has none.
    pub(crate) fn maybe_due(&self) -> Vec<(u16, u64)> {
        (0..self.hints.len())
            .filter_map(|shard| {
                let hints = self.hints[shard].load(Ordering::Acquire);
                (hints != self.seen[shard].load(Ordering::Acquire)).then_some((shard as u16, hints))
            })
            .collect()
    }

    /// How many times the queue's claims were woken.
    pub(crate) fn woken(&self) -> u64 {
        self.woken.load(Ordering::SeqCst)
    }

    /// Wakes the queue's waiting claims, after what woke them was recorded.
    fn wake(&self) {
        self.woken.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// `shard` had no due task when its hint count was `hints`: a later hint
    /// makes it worth a look again.
    pub(crate) fn found_none(&self, shard: u16, hints: u64) {
        self.seen[shard as usize].fetch_max(hints, Ordering::AcqRel);
    }

    /// A claim script at Redis time `at_us` left `shard` with no due task
    /// of the queue: every hint received of an earlier time was of tasks it
    /// took. A hint of the same time or later keeps the shard worth a look,
    /// though it arrived first: this node's own, hinted ahead of the
    /// channel, or one of another primary's, across a Cluster's failover.
    fn drained(&self, shard: u16, at_us: u64) {
        let Some((hints, hinted_us)) = self.shard(shard) else { return };
        let hints = hints.load(Ordering::Acquire);
        if hinted_us.load(Ordering::Acquire) < at_us {
            self.found_none(shard, hints);
        }
    }

    /// A hint of a script at Redis time `at_us`: `shard` has due tasks of
    /// the queue.
    fn hint(&self, shard: u16, at_us: u64) {
        let Some((hints, hinted_us)) = self.shard(shard) else { return };
        hinted_us.fetch_max(at_us, Ordering::AcqRel);
        hints.fetch_add(1, Ordering::AcqRel);
        self.wake();
    }

    /// A shard's hint count and latest hint time, if it is one.
    fn shard(&self, shard: u16) -> Option<(&AtomicU64, &AtomicU64)> {
        Some((self.hints.get(shard as usize)?, self.hinted_us.get(shard as usize)?))
    }

    /// Hints may have been lost before Redis time `at_us`: every shard is
    /// worth a look, and a drain of that time or earlier takes none back.
    fn hint_all(&self, at_us: u64) {
        for (hints, hinted_us) in self.hints.iter().zip(&self.hinted_us) {
            hinted_us.fetch_max(at_us, Ordering::AcqRel);
            hints.fetch_add(1, Ordering::AcqRel);
        }
        self.wake();
    }
}

/// Every queue's watch.
pub(crate) struct Watch {
    shards: u16,
    queues: Mutex<HashMap<Arc<str>, Arc<QueueWatch>>>,
}

impl Watch {
    pub(crate) fn new(shards: u16) -> Watch {
        Watch { shards, queues: Mutex::new(HashMap::new()) }
    }

    pub(crate) fn of(&self, queue: &str) -> Arc<QueueWatch> {
        let mut queues = self.queues.lock();
        if let Some(watch) = queues.get(queue) {
            return watch.clone();
        }
        if queues.len() >= WATCHED_QUEUES_MAX {
            queues.retain(|_, watch| Arc::strong_count(watch) > 1);
        }
        let watch = Arc::new(QueueWatch::new(self.shards));
        queues.insert(queue.into(), watch.clone());
        watch
    }

    /// Calls `f` with the watches of `queue` for pull and push claims that
    /// this node keeps.
    fn both(&self, queue: &str, f: impl Fn(&QueueWatch)) {
        let queues = self.queues.lock();
        for watch in [queues.get(queue), queues.get(&*push_name(queue))].into_iter().flatten() {
            f(watch);
        }
    }

    /// A hint from the channel, of a script at Redis time `at_us`; none is
    /// kept for a queue nobody here claimed.
    pub(crate) fn hint(&self, queue: &str, shard: u16, at_us: u64) {
        self.both(queue, |watch| watch.hint(shard, at_us));
    }

    /// A hint of a script through this node, at Redis time `at_ms`, that
    /// made a task of `queue` due in `shard`: its claims see it at once,
    /// before the script's own hint comes back through the channel. Its
    /// time is its millisecond's last microsecond, as it may be any of them.
    pub(crate) fn hint_local(&self, queue: &str, shard: u16, at_ms: u64) {
        let at_us = at_ms.saturating_mul(1_000).saturating_add(999);
        self.both(queue, |watch| watch.hint(shard, at_us));
    }

    /// A drain from the channel, of a claim script at Redis time `at_us`:
    /// `shard` had no due task of `queue` left for pull claims (or for push
    /// claims, if `push`).
    pub(crate) fn drained(&self, queue: &str, shard: u16, at_us: u64, push: bool) {
        let queues = self.queues.lock();
        let watch = if push { queues.get(&*push_name(queue)) } else { queues.get(queue) };
        if let Some(watch) = watch {
            watch.drained(shard, at_us);
        }
    }

    /// The watch of `queue` for push claims: its own, since a shard drained
    /// of tasks for pull claims may still hold some for push claims.
    pub(crate) fn of_push(&self, queue: &str) -> Arc<QueueWatch> {
        self.of(&push_name(queue))
    }

    /// The queue's pause changed: its waiting claims look again.
    pub(crate) fn wake(&self, queue: &str) {
        self.both(queue, QueueWatch::wake);
    }

    /// After the channel was down, or on closing: everything is looked at
    /// again. `redis_us` is Redis's time now as this node estimates it: a
    /// drain published before the channel came back may still arrive after
    /// (on a Cluster, from another primary), and one of up to
    /// [`RESUBSCRIBED_FOR_US`] after that estimate takes back nothing.
    pub(crate) fn wake_all(&self, redis_us: u64) {
        let at_us = redis_us.saturating_add(RESUBSCRIBED_FOR_US);
        for watch in self.queues.lock().values() {
            watch.hint_all(at_us);
        }
    }
}

/// The name a queue's push watch is kept under: no queue name starts with a
/// control character.
fn push_name(queue: &str) -> String {
    format!("\u{1}{queue}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watch of `shards` shards, and its queue "q" with every shard looked
    /// at and found without due tasks.
    fn nothing_due(shards: u16) -> (Watch, Arc<QueueWatch>) {
        let watch = Watch::new(shards);
        let q = watch.of("q");
        for (shard, hints) in q.maybe_due() {
            q.found_none(shard, hints);
        }
        (watch, q)
    }

    #[test]
    fn a_shard_is_looked_at_again_only_after_a_hint() {
        let watch = Watch::new(3);
        let q = watch.of("q");
        let first = q.maybe_due();
        assert_eq!(first.len(), 3, "at first every shard may have due tasks");
        for &(shard, hints) in &first {
            q.found_none(shard, hints);
        }
        assert!(q.maybe_due().is_empty());
        watch.hint("q", 1, 500);
        assert_eq!(q.maybe_due().iter().map(|&(s, _)| s).collect::<Vec<_>>(), [1]);
        // A hint that arrives while a look is under way is not lost.
        let (shard, hints) = q.maybe_due()[0];
        watch.hint("q", 1, 500);
        q.found_none(shard, hints);
        assert_eq!(q.maybe_due().len(), 1);
        let pushed = watch.of_push("q");
        for (shard, hints) in pushed.maybe_due() {
            pushed.found_none(shard, hints);
        }
        watch.hint("q", 2, 500);
        assert_eq!(pushed.maybe_due().iter().map(|&(s, _)| s).collect::<Vec<_>>(), [2], "a hint is for both");
        watch.wake_all(0);
        assert_eq!(q.maybe_due().len(), 3);
    }

    #[test]
    fn a_drained_shard_is_looked_at_again_only_after_a_later_hint() {
        let watch = Watch::new(3);
        let (q, pushed) = (watch.of("q"), watch.of_push("q"));
        for (shard, hints) in q.maybe_due().into_iter().chain(pushed.maybe_due()) {
            q.found_none(shard, hints);
            pushed.found_none(shard, hints);
        }
        watch.hint("q", 1, 500);
        let (shard, before) = q.maybe_due()[0];
        watch.hint("q", 1, 500);
        watch.hint("q", 2, 500);
        // A drain after both hints to shard 1; a look that began before the
        // second finds nothing after the drain, and hands back the older
        // count, which takes nothing back.
        watch.drained("q", 1, 1_000, false);
        q.found_none(shard, before);
        assert_eq!(q.maybe_due().iter().map(|&(s, _)| s).collect::<Vec<_>>(), [2]);
        assert_eq!(pushed.maybe_due().len(), 2, "drained for pull claims only");
        watch.drained("q", 2, 1_000, true);
        assert_eq!(pushed.maybe_due().iter().map(|&(s, _)| s).collect::<Vec<_>>(), [1]);
        watch.hint("q", 1, 1_500);
        assert_eq!(q.maybe_due().iter().map(|&(s, _)| s).collect::<Vec<_>>(), [1, 2], "a later hint counts");
        watch.drained("other", 0, 1_000, false);
        watch.drained("q", 99, 1_000, false);
    }

    #[test]
    fn a_drain_takes_back_no_hint_of_this_node_s_own_from_its_time_on() {
        let (watch, q) = nothing_due(2);
        // An enqueue through this node at 2 ms hints at once; a drain of an
        // earlier claim script, or of one in the same millisecond, arrives
        // after it through the channel and leaves the shard worth a look.
        watch.hint_local("q", 1, 2);
        for at_us in [1_999, 2_000, 2_999] {
            watch.drained("q", 1, at_us, false);
            assert_eq!(q.maybe_due().iter().map(|&(s, _)| s).collect::<Vec<_>>(), [1], "a drain at {at_us} µs");
        }
        watch.drained("q", 1, 3_000, false);
        assert!(q.maybe_due().is_empty(), "a later drain took the task");
    }

    #[test]
    fn a_drain_overtaken_by_a_later_hint_takes_it_back_not() {
        let (watch, q) = nothing_due(2);
        // Across a Cluster's failover two primaries publish for shard 1: a
        // hint of the new one's (at 5,000 µs) arrives before a drain of the
        // old one's (at 4,000 µs). The drain was of tasks hinted before it,
        // and the shard stays worth a look.
        watch.hint("q", 1, 5_000);
        watch.drained("q", 1, 4_000, false);
        assert_eq!(q.maybe_due().iter().map(|&(s, _)| s).collect::<Vec<_>>(), [1]);
        // In the channel's order, the hint first and a drain after it.
        watch.drained("q", 1, 5_001, false);
        assert!(q.maybe_due().is_empty());
        // A drain that arrives first, then a hint older than it: the hint
        // marks the shard (a look that finds nothing costs no more than it).
        watch.drained("q", 1, 7_000, false);
        watch.hint("q", 1, 6_000);
        assert_eq!(q.maybe_due().iter().map(|&(s, _)| s).collect::<Vec<_>>(), [1]);
    }

    #[test]
    fn a_drain_published_before_a_new_subscription_takes_back_nothing() {
        let (watch, q) = nothing_due(2);
        // The channel came back at 10,000 µs (as estimated): hints may have
        // been missed, and a drain published before it may arrive after.
        watch.wake_all(10_000);
        watch.drained("q", 1, 10_000 + RESUBSCRIBED_FOR_US, false);
        assert_eq!(q.maybe_due().len(), 2, "every shard is still worth a look");
        watch.drained("q", 1, 10_001 + RESUBSCRIBED_FOR_US, false);
        assert_eq!(q.maybe_due().iter().map(|&(s, _)| s).collect::<Vec<_>>(), [0], "a later drain counts");
    }

    #[test]
    fn every_wake_up_is_counted() {
        let watch = Watch::new(2);
        let q = watch.of("q");
        let before = q.woken();
        watch.hint("q", 0, 500);
        watch.wake("q");
        watch.wake_all(0);
        watch.hint("other", 0, 500);
        assert_eq!(q.woken() - before, 3, "a hint, a pause's change, and all");
    }
}
