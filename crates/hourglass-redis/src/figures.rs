//! The cluster's figures: what every node counted since the store's figures
//! began, summed in Redis, so that every node shows the same.
//!
//! A node counts what it does (enqueues, deliveries and their lateness,
//! acks, nacks, cancels, occurrences) in memory, and adds it to the store's
//! sums with its next heartbeat, in the same script (`lua/node.lua`). So
//! every node's counts up to its latest heartbeat are in the sums: a reading
//! is as fresh as the oldest heartbeat of the live nodes
//! ([`Totals::counters_as_of_ms`]), a renewal period old at most while they
//! are well. The reading node adds what it counted since: its own work shows
//! at once.
//!
//! - **Layout.** `{prefix}:figures` holds the totals' counters, by name;
//!   `{prefix}:figures:q:QUEUE` a queue's (`e`nqueued, `d`elivered, `a`cked)
//!   and its lateness (`s`um and `m`ax in µs, and `bN`, deliveries in
//!   bucket `N` of [`histogram`](crate::histogram)). All under the service's
//!   hash tag, so one script adds to them on a Cluster.
//! - **Never counted twice.** Each flush carries a sequence number that the
//!   script applies once (`{prefix}:figures:flushed:NODE`). A flush Redis did
//!   not confirm is sent again as it was, and a reading adds it only if Redis
//!   has not applied it.
//! - **Bounded.** A heartbeat carries at most [`FLUSH_QUEUES_MAX`] queues; the
//!   rest go with the next ones, and are read from memory meanwhile.
//! - **What is lost.** A node that dies loses what it counted since its last
//!   heartbeat. The counts of tasks held (scheduled, due, leased, dead) are
//!   not counters: they are read from the shards each time.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use hourglass_queue::limits::QUEUES_MAX;
use hourglass_queue::{LatenessMs, QueueError, Totals};

use crate::error::{storage, unexpected};
use crate::histogram::Histogram;
use crate::history;
use crate::RedisBackend;

/// Queues whose counts one heartbeat carries, at most.
pub(crate) const FLUSH_QUEUES_MAX: usize = 64;
/// How long Redis remembers a node's last flush, to apply it once: far
/// longer than a flush is sent again (a renewal period at a time).
const FLUSHED_KEPT_MS: u64 = 24 * 60 * 60 * 1_000;

/// One queue's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) enqueued: u64,
    pub(crate) delivered: u64,
    pub(crate) acked: u64,
    pub(crate) lateness: Histogram,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.enqueued += other.enqueued;
        self.delivered += other.delivered;
        self.acked += other.acked;
        self.lateness.add(&other.lateness);
    }

    /// Its fields in Redis, with what to add to each (`m` is a maximum).
    fn fields(&self) -> Vec<(String, u64)> {
        let mut fields: Vec<(String, u64)> = [("e", self.enqueued), ("d", self.delivered), ("a", self.acked)]
            .into_iter()
            .chain(
                (!self.lateness.is_empty())
                    .then_some([("s", self.lateness.sum_us), ("m", self.lateness.max_us)])
                    .into_iter()
                    .flatten(),
            )
            .filter(|&(_, by)| by > 0)
            .map(|(field, by)| (field.to_owned(), by))
            .collect();
        fields.extend(self.lateness.counts.iter().map(|(at, &count)| (format!("b{at}"), count)));
        fields
    }

    /// From its fields as Redis holds them; those it does not know are
    /// left out.
    fn from_fields(fields: HashMap<String, u64>) -> Tally {
        let mut tally = Tally::default();
        for (field, value) in fields {
            match field.as_str() {
                "e" => tally.enqueued = value,
                "d" => tally.delivered = value,
                "a" => tally.acked = value,
                "s" => tally.lateness.sum_us = value,
                "m" => tally.lateness.max_us = value,
                bucket => {
                    if let Some(at) = bucket.strip_prefix('b').and_then(|at| at.parse().ok()) {
                        tally.lateness.counts.insert(at, value);
                    }
                }
            }
        }
        tally
    }

    /// The lateness percentiles and buckets.
    pub(crate) fn lateness(&self) -> LatenessMs {
        self.lateness.read()
    }
}

/// The counters of [`Totals`] the nodes sum, by their fields in Redis.
fn counters(totals: &mut Totals) -> [(&'static str, &mut u64); 10] {
    [
        ("enqueued", &mut totals.enqueued),
        ("delivered", &mut totals.delivered),
        ("acked", &mut totals.acked),
        ("nacked", &mut totals.nacked),
        ("lease_expired", &mut totals.lease_expired),
        ("died", &mut totals.died),
        ("expired", &mut totals.expired),
        ("cancelled", &mut totals.cancelled),
        ("occurrences_enqueued", &mut totals.occurrences_enqueued),
        ("occurrences_skipped", &mut totals.occurrences_skipped),
    ]
}

fn add_totals(sum: &mut Totals, mut other: Totals) {
    for ((_, sum), (_, other)) in counters(sum).into_iter().zip(counters(&mut other)) {
        *sum += *other;
    }
}

/// What a node counted: the totals' counters, and each queue's.
#[derive(Debug, Clone, Default)]
pub(crate) struct Counted {
    pub(crate) totals: Totals,
    pub(crate) queues: HashMap<Arc<str>, Tally>,
}

impl Counted {
    fn add(&mut self, other: &Counted) {
        add_totals(&mut self.totals, other.totals);
        for (queue, tally) in &other.queues {
            self.queues.entry(queue.clone()).or_default().add(tally);
        }
    }

    /// The keys and arguments of the heartbeat script past its own, for a
    /// flush at `at_ms`: for the totals, each queue, then the second's
    /// history (`history.rs`), how long the key lives (0: for ever), a
    /// count of fields, and the fields with what to add to each.
    fn script_input(&self, backend: &RedisBackend, at_ms: u64) -> (Vec<String>, Vec<String>) {
        let mut keys = Vec::new();
        let mut args = Vec::new();
        let mut push = |key: String, kept_ms: u64, fields: Vec<(String, u64)>| {
            keys.push(key);
            args.push(kept_ms.to_string());
            args.push(fields.len().to_string());
            for (field, by) in fields {
                args.push(field);
                args.push(by.to_string());
            }
        };
        let mut totals = self.totals;
        let fields =
            counters(&mut totals).into_iter().filter(|(_, by)| **by > 0).map(|(f, by)| (f.to_owned(), *by)).collect();
        push(backend.keys.global("figures"), 0, fields);
        for (queue, tally) in &self.queues {
            push(backend.keys.global(&format!("figures:q:{queue}")), 0, tally.fields());
        }
        push(history::minute_key(backend, at_ms), history::MINUTE_KEPT_MS, history::fields(at_ms, self));
        (keys, args)
    }
}

/// A flush Redis has not confirmed: sent again, as it is, until it is.
#[derive(Default)]
pub(crate) struct Unconfirmed {
    /// The last sequence number this node gave a flush.
    seq: u64,
    counted: Option<Counted>,
}

/// What this node's latest heartbeat saw.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Seen {
    /// The sums' version: how many flushes Redis has applied.
    version: u64,
    /// The oldest heartbeat of the other live nodes, or this one's if alone:
    /// every node's counts up to it are in the sums of that version.
    as_of_ms: u64,
}

/// The sums as last read, and their version.
struct Cache {
    version: u64,
    sums: Counted,
}

/// This node's counts not yet in the store's sums, and the sums as last read.
#[derive(Default)]
pub(crate) struct Figures {
    counted: Mutex<Counted>,
    seen: Mutex<Seen>,
    /// Read again once a heartbeat sees another version: an idle cluster's
    /// figures are read from Redis once.
    cache: Mutex<Option<Cache>>,
    /// Held while a heartbeat carries a flush, and while a reading adds
    /// this node's counts to the sums: so a reading never sees a flush
    /// half-way.
    unconfirmed: tokio::sync::Mutex<Unconfirmed>,
}

/// The sums as read, with this node's counts added.
pub(crate) struct Read {
    pub(crate) totals: Totals,
    pub(crate) queues: Vec<Tally>,
}

impl Figures {
    /// Changes this node's counts of `queue`; those of at most
    /// [`QUEUES_MAX`] queues are kept between heartbeats.
    pub(crate) fn count(&self, queue: &str, change: impl FnOnce(&mut Tally)) {
        let queues = &mut self.counted.lock().queues;
        if let Some(tally) = queues.get_mut(queue) {
            change(tally);
        } else if queues.len() < QUEUES_MAX {
            change(queues.entry(queue.into()).or_default());
        }
    }

    /// Changes this node's counts of the totals.
    pub(crate) fn total(&self, change: impl FnOnce(&mut Totals)) {
        change(&mut self.counted.lock().totals);
    }

    /// Whether this node counted anything not yet in the sums.
    pub(crate) fn counting(&self) -> bool {
        let counted = self.counted.lock();
        !counted.queues.is_empty() || counted.totals != Totals::default()
    }

    /// Takes the counts of up to [`FLUSH_QUEUES_MAX`] queues, and the
    /// totals', out of those not yet flushed.
    fn take(&self) -> Option<Counted> {
        if !self.counting() {
            return None;
        }
        let mut counted = self.counted.lock();
        let queues: Vec<Arc<str>> = counted.queues.keys().take(FLUSH_QUEUES_MAX).cloned().collect();
        let queues = queues.into_iter().filter_map(|q| counted.queues.remove_entry(&q)).collect();
        Some(Counted { totals: std::mem::take(&mut counted.totals), queues })
    }
}

impl RedisBackend {
    /// Heartbeats, with what this node counted since its last confirmed
    /// flush; returns the live nodes. `now_ms` is the heartbeat, on Redis's
    /// clock.
    pub(crate) async fn heartbeat(&self, now_ms: u64) -> Result<Vec<String>, QueueError> {
        let mut unconfirmed = self.figures.unconfirmed.lock().await;
        if unconfirmed.counted.is_none() {
            unconfirmed.counted = self.figures.take();
            if unconfirmed.counted.is_some() {
                unconfirmed.seq += 1;
            }
        }
        let (keys, args) = match &unconfirmed.counted {
            Some(counted) => counted.script_input(self, now_ms),
            // The totals' key alone: the script reads their version.
            None => (vec![self.keys.global("figures")], Vec::new()),
        };
        let seq = if unconfirmed.counted.is_some() { unconfirmed.seq } else { 0 };
        let mut invocation = crate::scripts::SCRIPTS.node.key(self.keys.global("nodes"));
        invocation.key(self.flushed_key()).arg(&self.node).arg(now_ms).arg(self.options.shard_lease_ms).arg(seq);
        invocation.arg(FLUSHED_KEPT_MS);
        for key in keys {
            invocation.key(key);
        }
        for arg in args {
            invocation.arg(arg);
        }
        let (version, nodes): (Option<u64>, Vec<(String, u64)>) =
            invocation.invoke_async(&mut self.conn()).await.map_err(storage)?;
        unconfirmed.counted = None;
        let others_ms = nodes.iter().filter(|(node, _)| *node != self.node).map(|&(_, at)| at).min();
        *self.figures.seen.lock() =
            Seen { version: version.unwrap_or(0), as_of_ms: others_ms.unwrap_or(now_ms).min(now_ms) };
        Ok(nodes.into_iter().map(|(node, _)| node).collect())
    }

    fn flushed_key(&self) -> String {
        self.keys.global(&format!("figures:flushed:{}", self.node))
    }

    /// The store's sums of the totals and of `queues`, with what this node
    /// counted since its last heartbeat, and how fresh they are.
    pub(crate) async fn figures(&self, queues: &[Arc<str>]) -> Result<Read, QueueError> {
        let unconfirmed = self.figures.unconfirmed.lock().await;
        let seen = *self.figures.seen.lock();
        // The sums as last read, if no flush was applied since (by the
        // version this node's latest heartbeat saw) and none of its own is
        // unconfirmed.
        let cached = self
            .figures
            .cache
            .lock()
            .as_ref()
            .filter(|cache| {
                cache.version == seen.version
                    && unconfirmed.counted.is_none()
                    && queues.iter().all(|queue| cache.sums.queues.contains_key(queue))
            })
            .map(|cache| Counted {
                totals: cache.sums.totals,
                queues: queues.iter().map(|q| (q.clone(), cache.sums.queues[q].clone())).collect(),
            });
        let (mut sum, as_of_ms) = match cached {
            Some(sums) => (sums, seen.as_of_ms),
            None => self.read_sums(queues, &unconfirmed).await?,
        };
        sum.add(&self.figures.counted.lock());
        drop(unconfirmed);
        let totals = Totals { counters_as_of_ms: Some(as_of_ms), ..sum.totals };
        let queues = queues.iter().map(|queue| sum.queues.remove(queue).unwrap_or_default()).collect();
        Ok(Read { totals, queues })
    }

    /// The sums in Redis of the totals and of `queues`, with a flush of this
    /// node's that Redis has not applied; and how fresh they are. Kept as
    /// the cache when no flush of this node's is unconfirmed.
    async fn read_sums(&self, queues: &[Arc<str>], unconfirmed: &Unconfirmed) -> Result<(Counted, u64), QueueError> {
        let mut pipe = redis::pipe();
        pipe.hgetall(self.keys.global("figures"))
            .zrange_withscores(self.keys.global("nodes"), 0, -1)
            .get(self.flushed_key());
        for queue in queues {
            pipe.hgetall(self.keys.global(&format!("figures:q:{queue}")));
        }
        let values: Vec<redis::Value> = pipe.query_async(&mut self.conn()).await.map_err(storage)?;
        let mut values = values.into_iter();
        let mut next = || values.next().unwrap_or(redis::Value::Nil);
        let totals: HashMap<String, u64> = parse(next())?;
        let nodes: Vec<(String, u64)> = parse(next())?;
        let flushed: Option<u64> = parse(next())?;
        let sums: Vec<HashMap<String, u64>> = (0..queues.len()).map(|_| parse(next())).collect::<Result<_, _>>()?;
        let mut sum = Counted::default();
        for (field, value) in counters(&mut sum.totals) {
            *value = totals.get(field).copied().unwrap_or(0);
        }
        for (queue, fields) in queues.iter().zip(sums) {
            sum.queues.insert(queue.clone(), Tally::from_fields(fields));
        }
        let now_ms = self.redis_ms();
        let as_of_ms =
            nodes.iter().filter(|(node, _)| *node != self.node).map(|&(_, at)| at).min().unwrap_or(now_ms).min(now_ms);
        match unconfirmed.counted.as_ref() {
            // This node's counts that are not in the sums.
            Some(sent) if flushed.unwrap_or(0) < unconfirmed.seq => sum.add(sent),
            Some(_) => {}
            None => {
                let version = totals.get("version").copied().unwrap_or(0);
                *self.figures.cache.lock() = Some(Cache { version, sums: sum.clone() });
            }
        }
        Ok((sum, as_of_ms))
    }
}

fn parse<T: redis::FromRedisValue>(value: redis::Value) -> Result<T, QueueError> {
    redis::from_redis_value(value).map_err(|error| unexpected(format!("figures: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_goes_to_redis_and_back() {
        let mut tally = Tally { enqueued: 3, delivered: 2, acked: 0, ..Tally::default() };
        tally.lateness.record(1_500);
        tally.lateness.record(40);
        let fields: HashMap<String, u64> = tally.fields().into_iter().collect();
        assert!(!fields.contains_key("a"), "no field is written for nothing");
        assert_eq!(Tally::from_fields(fields), tally);
    }

    #[test]
    fn counted_adds_up_and_is_taken_a_share_at_a_time() {
        let figures = Figures::default();
        for at in 0..FLUSH_QUEUES_MAX + 3 {
            figures.count(&format!("q{at}"), |t| t.enqueued += 1);
        }
        figures.total(|t| t.enqueued += 2);
        let first = figures.take().expect("something counted");
        assert_eq!((first.queues.len(), first.totals.enqueued), (FLUSH_QUEUES_MAX, 2));
        let second = figures.take().expect("the rest");
        assert_eq!((second.queues.len(), second.totals.enqueued), (3, 0));
        assert!(figures.take().is_none());
        let mut sum = first.clone();
        sum.add(&second);
        assert_eq!(sum.queues.values().map(|t| t.enqueued).sum::<u64>(), FLUSH_QUEUES_MAX as u64 + 3);
    }
}
