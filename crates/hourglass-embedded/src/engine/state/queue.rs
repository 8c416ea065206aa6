//! One queue's indexes: its due tasks in claim order, its keys, its dead
//! tasks, its counts, whether it is paused, and the wake-up of claims
//! waiting on it.

use std::collections::{BTreeSet, HashMap};

use std::sync::Arc;

use tokio::sync::Notify;

use super::ready::Ready;
use hourglass_queue::lateness::Lateness;
use hourglass_queue::paused_at;
use hourglass_queue::{LatenessMs, QueueSettings, QueueStats, TokenBucket};

pub(super) struct QueueState {
    pub(super) name: Arc<str>,
    /// Due tasks, in claim order.
    pub(super) ready: Ready,
    /// Idempotency key to the live task that has it.
    pub(super) keys: HashMap<Box<str>, u64>,
    pub(super) dead: BTreeSet<u64>,
    /// Filed scheduled tasks, due ones included.
    pub(super) scheduled: usize,
    pub(super) leased: usize,
    pub(super) notify: Arc<Notify>,
    /// Paused, durably: claims hand out nothing, and due tasks wait.
    pub(super) paused: bool,
    /// When the pause ends by itself, Unix ms (beanstalkd's `pause-tube`):
    /// from then on the queue is not paused, whatever `paused` says.
    pub(super) paused_until_ms: Option<u64>,
    /// A pause or resume of the queue is on its way to the store: another
    /// waits for it to settle.
    pub(super) pausing: bool,
    /// Its push target and flow control, durable.
    pub(super) settings: QueueSettings,
    /// The rate limit's bucket, on the engine's clock (not durable: a
    /// restart starts it full); `None` without a rate.
    pub(super) bucket: Option<TokenBucket>,
    /// A put of its settings is on its way to the store: another waits for it.
    pub(super) setting: bool,
    /// Since start: tasks enqueued (made durable), delivered by claims, acked.
    pub(super) enqueued: u64,
    pub(super) delivered: u64,
    pub(super) acked: u64,
    lateness_us: Lateness,
}

impl QueueState {
    pub(super) fn new(name: Arc<str>) -> QueueState {
        QueueState {
            name,
            ready: Ready::default(),
            keys: HashMap::new(),
            dead: BTreeSet::new(),
            scheduled: 0,
            leased: 0,
            notify: Arc::new(Notify::new()),
            paused: false,
            paused_until_ms: None,
            pausing: false,
            settings: QueueSettings::default(),
            bucket: None,
            setting: false,
            enqueued: 0,
            delivered: 0,
            acked: 0,
            lateness_us: Lateness::default(),
        }
    }

    /// Records one delivery's lateness.
    pub(super) fn delivered(&mut self, lateness_us: u64) {
        self.delivered += 1;
        self.lateness_us.record(lateness_us);
    }

    /// Whether claims at `now_ms` hand out nothing.
    pub(super) fn is_paused(&self, now_ms: u64) -> bool {
        paused_at(self.paused, self.paused_until_ms, now_ms)
    }

    /// How many tasks its flow control lets a claim take at `now_ms`: the
    /// room under its cap on tasks in flight, and the whole tokens in its
    /// bucket.
    pub(super) fn allowance(&self, now_ms: u64) -> usize {
        let room = self.settings.flow.room(self.leased);
        self.bucket.as_ref().map_or(room, |bucket| room.min(bucket.available(now_ms)))
    }

    /// How long from `now_ms` until its bucket has a token again, if an
    /// empty bucket is what holds its claims back (a full cap wakes them
    /// when a task is settled instead).
    pub(super) fn next_token_in_ms(&self, now_ms: u64) -> Option<u64> {
        let held_by_rate = self.settings.flow.room(self.leased) > 0;
        self.bucket.as_ref().filter(|_| held_by_rate).map(|bucket| bucket.next_token_in_ms(now_ms)).filter(|&ms| ms > 0)
    }

    /// The queue's counts at `now_ms`, read under the engine's lock, with its
    /// lateness still to [`read`](Lateness::read) once the lock is released.
    pub(super) fn stats(&self, now_ms: u64) -> (QueueStats, Lateness) {
        let paused = self.is_paused(now_ms);
        let stats = QueueStats {
            name: self.name.clone(),
            scheduled: self.scheduled - self.ready.len(),
            due: self.ready.len(),
            leased: self.leased,
            dead: self.dead.len(),
            urgent: self.ready.urgent(),
            oldest_due_ms: self.ready.oldest_due_ms(),
            lateness: LatenessMs::default(),
            paused,
            paused_until_ms: self.paused_until_ms.filter(|_| paused),
            enqueued: self.enqueued,
            delivered: self.delivered,
            acked: self.acked,
            settings: self.settings.clone(),
        };
        (stats, self.lateness_us.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hourglass_queue::lateness::with_lateness;
    use hourglass_queue::LATENESS_BUCKETS_US;

    #[test]
    fn lateness_buckets_are_cumulative_counts_at_their_bounds() {
        let mut q = QueueState::new("q".into());
        for us in [50, 100, 900, 3_000, 3_000, 70_000_000] {
            q.delivered(us);
        }
        let at = |bound| LATENESS_BUCKETS_US.iter().position(|&b| b == bound).unwrap();
        let stats = || with_lateness(vec![q.stats(0)]).remove(0);
        let buckets = stats().lateness.buckets;
        assert_eq!(buckets[at(100)], 2, "50 and 100 us are within 100 us");
        assert_eq!(buckets[at(1_000)], 3);
        assert_eq!(buckets[at(2_500)], 3);
        assert_eq!(buckets[at(5_000)], 5);
        assert_eq!(buckets[at(60_000_000)], 5, "70 s is past the last bound: counted by no bucket");
        assert_eq!((stats().lateness.samples, stats().delivered), (6, 6));
    }
}
