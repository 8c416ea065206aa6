//! The cluster's figures: what every node counted since the store's figures
//! began, summed in Redis, so that every node shows the same.
//!
//! A node counts what it does (enqueues, deliveries and their lateness,
//! acks, nacks, cancels, expired leases, occurrences) in memory
//! (`counted.rs`), and adds all of it to the store's sums with its next
//! heartbeat (`lua/node.lua`): one script for every [`FLUSH_QUEUES_MAX`](crate::counted::FLUSH_QUEUES_MAX)
//! queues, the heartbeat itself in the last. So a node's heartbeat in the
//! membership means that everything it counted before it is in the sums: a
//! reading holds every node's counts up to the oldest heartbeat of the live
//! nodes ([`Totals::counters_as_of_ms`]), up to a renewal period old while
//! they are well (as last read: it never goes back), and the reading node's
//! own up to now.
//!
//! - **Layout.** `{prefix}:figures` holds the totals' counters by name and
//!   the sums' `version`; `{prefix}:figures:q:QUEUE` a queue's (`counted.rs`).
//!   All under the service's hash tag, with the membership, so one script
//!   adds to them, and one transaction reads them, on a Cluster too.
//! - **Never counted twice.** Each script carries a sequence number, applied
//!   once (`{prefix}:figures:flushed:NODE`). Those Redis did not confirm are
//!   sent again as they were, first, at the next heartbeat; a reading adds
//!   them only if Redis has not applied them.
//! - **Heartbeats never wait for readings.** A reading copies what it needs
//!   under a short lock, reads Redis, and starts again if a heartbeat took
//!   counts meanwhile.
//! - **An idle cluster is read once.** Every applied script adds one to the
//!   `version`, which starts at a random number (so a Redis that lost its data
//!   does not repeat one): a reading asks for the version alone, and uses the
//!   sums it read last while it is the same. (The heartbeat brought the
//!   version back once: two commands a second a node, read or not.)
//! - **What is lost.** A node killed loses what it counted since its last
//!   heartbeat; a clean stop sends it first. The counts of tasks held
//!   (scheduled, due, leased, dead) are not counters: the shards are read for
//!   them each time.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;
use redis::AsyncCommands;

use hourglass_queue::{QueueError, Totals};

use crate::counted::{counters, Counted, Tally};
use crate::error::{storage, unexpected};
use crate::shards::{alive, oldest_alive};
use crate::RedisBackend;

/// How long Redis remembers a node's last flush, to apply it once: far
/// longer than a flush is sent again (a renewal period at a time).
const FLUSHED_KEPT_MS: u64 = 24 * 60 * 60 * 1_000;
/// How often a heartbeat that reads who is alive reads Redis's clock too
/// (`TIME`, in the heartbeat's script), at the least: a node that sends nothing else with a
/// time in its reply still scores its heartbeats, and judges others', by an
/// estimate of Redis's clock no older than this (rather than by its own
/// clock, which may be seconds off). Once in ten reads of the membership: a
/// tenth of a command a second a node.
const CLOCK_READ_EVERY: std::time::Duration = std::time::Duration::from_secs(10);
/// Times a reading starts again when heartbeats keep taking counts under
/// it; then it adds what it copied (a heartbeat every renewal period makes
/// a second try rare).
const READ_TRIES: usize = 3;

/// This node's counts and what its heartbeats saw, under one lock.
#[derive(Default)]
struct State {
    /// Counted since the last heartbeat took the counts.
    counted: Counted,
    /// Taken and sent, not yet confirmed, oldest first, with their sequence
    /// numbers.
    unconfirmed: VecDeque<(u64, Counted)>,
    /// The last sequence number given.
    seq: u64,
    /// What the latest heartbeat saw.
    seen: Seen,
    /// When a heartbeat last read Redis's clock.
    clock_read: Option<std::time::Instant>,
}

/// What a heartbeat saw.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    /// Every node's counts up to this are in the sums (of any version read
    /// after the heartbeat).
    as_of_ms: u64,
}

/// The sums as last read, their version, and how fresh they were.
struct Cache {
    version: u64,
    sums: Counted,
    as_of_ms: u64,
}

/// This node's counts not yet in the store's sums, and the sums as last read.
#[derive(Default)]
pub(crate) struct Figures {
    state: Mutex<State>,
    /// One heartbeat at a time: the membership's, and [`RedisBackend::beat`].
    beating: tokio::sync::Mutex<()>,
    cache: Mutex<Option<Cache>>,
}

/// The sums as read, with this node's counts added.
pub(crate) struct Read {
    pub(crate) totals: Totals,
    pub(crate) queues: Vec<Tally>,
}

impl Figures {
    /// Changes this node's counts of `queue` and of the totals, under one
    /// lock: what a request counts of a queue it counts in the totals too.
    /// The tallies of at most
    /// [`QUEUES_MAX`](hourglass_queue::limits::QUEUES_MAX) queues are kept
    /// between heartbeats; past them the totals alone are.
    pub(crate) fn count(&self, queue: &str, change: impl FnOnce(&mut Tally, &mut Totals)) {
        let counted = &mut self.state.lock().counted;
        let room = counted.queues.len() < hourglass_queue::limits::QUEUES_MAX;
        let mut untallied = Tally::default();
        let tally = match counted.queues.get_mut(queue) {
            Some(tally) => tally,
            None if room => counted.queues.entry(queue.into()).or_default(),
            None => &mut untallied,
        };
        change(tally, &mut counted.totals);
    }

    /// Changes this node's counts of the totals.
    pub(crate) fn total(&self, change: impl FnOnce(&mut Totals)) {
        change(&mut self.state.lock().counted.totals);
    }

    /// Whether this node holds counts that are not known to be in the sums.
    pub(crate) fn pending(&self) -> bool {
        let state = self.state.lock();
        !state.counted.is_empty() || !state.unconfirmed.is_empty()
    }
}

/// Every node's counts up to this time are in sums read with `nodes` (the
/// live nodes and their heartbeats), as far as `me` knows at `now_ms`: the
/// oldest heartbeat of the others, or now if it is alone.
fn as_of_ms(nodes: &[(String, u64)], me: &str, now_ms: u64) -> u64 {
    nodes.iter().filter(|(node, _)| node != me).map(|&(_, at)| at).min().unwrap_or(now_ms).min(now_ms)
}

impl RedisBackend {
    /// Heartbeats at `now_ms` (Redis's clock), first adding everything this
    /// node counted to the sums; returns the live nodes. With nothing to
    /// add, the heartbeat is a `ZADD` and a `ZRANGE` in one round trip, not
    /// the script (a command less: the script's call); the script reads
    /// Redis's clock when that is due.
    pub(crate) async fn heartbeat(&self, now_ms: u64) -> Result<Vec<String>, QueueError> {
        let _one = self.figures.beating.lock().await;
        let (parts, clock): (Vec<(u64, Counted)>, bool) = {
            let mut state = self.figures.state.lock();
            for part in state.counted.take_parts() {
                state.seq += 1;
                let seq = state.seq;
                state.unconfirmed.push_back((seq, part));
            }
            let clock = state.clock_read.is_none_or(|at| at.elapsed() >= CLOCK_READ_EVERY);
            (state.unconfirmed.iter().cloned().collect(), clock)
        };
        let key = self.keys.global("nodes");
        if parts.is_empty() && !clock {
            let mut pipe = redis::pipe();
            pipe.zadd(&key, &self.node, now_ms).ignore().zrange_withscores(&key, 0, -1);
            let (all,): (Vec<(String, u64)>,) = pipe.query_async(&mut self.conn()).await.map_err(storage)?;
            return self.beaten(all, now_ms).await;
        }
        let start = rand::random::<u32>();
        let calls = parts.len().max(1);
        for at in 0..calls {
            let beat = at + 1 == calls;
            let part = parts.get(at);
            let mut invocation = crate::scripts::SCRIPTS.node.key(&key);
            invocation.key(self.flushed_key()).arg(&self.node).arg(now_ms);
            invocation.arg(part.map_or(0, |&(seq, _)| seq)).arg(FLUSHED_KEPT_MS).arg(start).arg(u8::from(beat));
            invocation.arg(u8::from(beat && clock));
            let (keys, args) = match part {
                Some((_, counted)) => counted.script_input(self, now_ms),
                None => (Vec::new(), Vec::new()),
            };
            for key in keys {
                invocation.key(key);
            }
            for arg in args {
                invocation.arg(arg);
            }
            let (redis_ms, all): (u64, Vec<(String, u64)>) =
                invocation.invoke_async(&mut self.conn()).await.map_err(storage)?;
            if let Some(&(seq, _)) = part {
                self.figures.state.lock().unconfirmed.retain(|&(sent, _)| sent != seq);
            }
            if beat {
                if redis_ms > 0 {
                    self.saw_time(redis_ms);
                    self.figures.state.lock().clock_read = Some(std::time::Instant::now());
                }
                return self.beaten(all, now_ms.max(redis_ms)).await;
            }
        }
        unreachable!("the last call beats")
    }

    /// After a heartbeat at `now_ms` that read the membership (`all`, each
    /// node with its heartbeat): the live nodes, and what the figures are as
    /// fresh as. Those past their lease are taken out of it (by score: a
    /// node that beat meanwhile stays).
    async fn beaten(&self, all: Vec<(String, u64)>, now_ms: u64) -> Result<Vec<String>, QueueError> {
        let lease_ms = self.options.shard_lease_ms;
        let count = all.len();
        let live: Vec<(String, u64)> = all.into_iter().filter(|&(_, at)| alive(at, now_ms, lease_ms)).collect();
        if live.len() < count {
            let stale = format!("({}", oldest_alive(now_ms, lease_ms));
            let _: () = self.conn().zrembyscore(self.keys.global("nodes"), "-inf", stale).await.map_err(storage)?;
        }
        self.figures.state.lock().seen.as_of_ms = as_of_ms(&live, &self.node, now_ms);
        Ok(live.into_iter().map(|(node, _)| node).collect())
    }

    fn flushed_key(&self) -> String {
        self.keys.global(&format!("figures:flushed:{}", self.node))
    }

    /// The store's sums of the totals and of `queues`, with what this node
    /// counted that they do not hold, and how fresh they are.
    pub(crate) async fn figures(&self, queues: &[Arc<str>]) -> Result<Read, QueueError> {
        let mut tries = 0;
        let (mut sum, as_of_ms) = loop {
            tries += 1;
            let (seq, unconfirmed, seen) = {
                let state = self.figures.state.lock();
                (state.seq, state.unconfirmed.clone(), state.seen)
            };
            let cached = if unconfirmed.is_empty() { self.cached(queues).await? } else { None };
            let (mut sum, as_of_ms) = match cached {
                // The same sums are as fresh as the later of the heartbeat
                // seen since and the reading that cached them.
                Some((sums, cached_as_of_ms)) => (sums, seen.as_of_ms.max(cached_as_of_ms)),
                None => self.read_sums(queues, &unconfirmed).await?,
            };
            let state = self.figures.state.lock();
            // No heartbeat took counts meanwhile: those left are not in the sums.
            if state.seq == seq || tries == READ_TRIES {
                sum.add(&state.counted);
                break (sum, as_of_ms);
            }
        };
        let totals = Totals { counters_as_of_ms: Some(as_of_ms), ..sum.totals };
        let queues = queues.iter().map(|queue| sum.queues.remove(queue).unwrap_or_default()).collect();
        Ok(Read { totals, queues })
    }

    /// The sums of `queues` as last read, and how fresh they were then, if
    /// they hold every queue asked for and the sums' version in Redis is
    /// still the one read with them.
    async fn cached(&self, queues: &[Arc<str>]) -> Result<Option<(Counted, u64)>, QueueError> {
        let sums = |cache: &Cache| {
            let queues: Option<HashMap<Arc<str>, Tally>> =
                queues.iter().map(|q| cache.sums.queues.get(q).map(|tally| (q.clone(), tally.clone()))).collect();
            Some((cache.version, Counted { totals: cache.sums.totals, queues: queues? }, cache.as_of_ms))
        };
        let Some((version, sums, as_of_ms)) = self.figures.cache.lock().as_ref().and_then(sums) else {
            return Ok(None);
        };
        let now: Option<u64> = self.conn().hget(self.keys.global("figures"), "version").await.map_err(storage)?;
        Ok((now.unwrap_or(0) == version).then_some((sums, as_of_ms)))
    }

    /// The sums in Redis of the totals and of `queues`, read in one
    /// transaction, with the parts of `unconfirmed` that Redis has not
    /// applied; and how fresh they are. Kept as the cache when nothing is
    /// unconfirmed.
    async fn read_sums(
        &self,
        queues: &[Arc<str>],
        unconfirmed: &VecDeque<(u64, Counted)>,
    ) -> Result<(Counted, u64), QueueError> {
        let mut pipe = redis::pipe();
        pipe.atomic()
            .hgetall(self.keys.global("figures"))
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
        let as_of_ms = as_of_ms(&nodes, &self.node, self.redis_ms());
        if unconfirmed.is_empty() {
            let version = totals.get("version").copied().unwrap_or(0);
            *self.figures.cache.lock() = Some(Cache { version, sums: sum.clone(), as_of_ms });
        }
        for (seq, part) in unconfirmed {
            if *seq > flushed.unwrap_or(0) {
                sum.add(part);
            }
        }
        Ok((sum, as_of_ms))
    }
}

fn parse<T: redis::FromRedisValue>(value: redis::Value) -> Result<T, QueueError> {
    redis::from_redis_value(value).map_err(|error| unexpected(format!("figures: {error}")))
}
