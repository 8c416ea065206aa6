//! Claims: a look at the first due task of each shard that may have one,
//! then claims from those shards at once; a claim with nothing due waits for
//! a hint, in the contract's long-poll.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

use hourglass_queue::limits::ANSWER_PAYLOAD_BYTES_MAX;
use hourglass_queue::long_poll::{long_poll, Look};
use hourglass_queue::{Claim, Claimed, Pause, QueueError};

use crate::error::storage;
use crate::options::{CLAIM_RECHECK_MS, CLAIM_SCAN_MAX, CLAIM_SHARE_MIN};
use crate::reply::Reply;
use crate::scripts::SCRIPTS;
use crate::watch::QueueWatch;
use crate::{keys, record, RedisBackend};

impl RedisBackend {
    /// The first due task of `queue` in `shard`, in claim order, and how
    /// many are due there; `None` if none.
    async fn look(&self, shard: u16, queue: &str) -> Result<Option<(String, usize)>, QueueError> {
        let key = self.keys.queue(shard, "r", queue);
        let (first, due): (Vec<String>, usize) =
            redis::pipe().zrange(&key, 0, 0).zcard(&key).query_async(&mut self.conn()).await.map_err(storage)?;
        Ok(first.into_iter().next().map(|first| (first, due)))
    }

    /// One claim script on `queue` of `shard`; with the queue's pause, if
    /// it is paused.
    async fn claim_shard(
        &self,
        shard: u16,
        queue: &str,
        max: usize,
        lease_ms: u64,
    ) -> Result<(Vec<Claimed>, Option<Pause>), QueueError> {
        let mut invocation = SCRIPTS.claim.key(self.keys.shard(shard, "t"));
        invocation
            .key(self.keys.shard(shard, "p"))
            .key(self.keys.shard(shard, "h"))
            .key(self.keys.shard(shard, "lseq"))
            .key(self.keys.shard(shard, "paused"));
        for key in self.keys.queue_keys(shard, queue) {
            invocation.key(key);
        }
        invocation
            .arg(&self.channel)
            .arg(shard)
            .arg(queue)
            .arg(max)
            .arg(lease_ms)
            .arg(ANSWER_PAYLOAD_BYTES_MAX)
            .arg(CLAIM_SCAN_MAX);
        let mut reply = Reply::new(invocation.invoke_async(&mut self.conn()).await.map_err(storage)?)?;
        self.saw_time(reply.u64()?);
        let pause = match reply.int()? {
            -1 => None,
            0 => Some(Pause::Indefinitely),
            until => Some(Pause::Until(until as u64)),
        };
        let queue: Arc<str> = queue.into();
        let mut claimed = Vec::new();
        let now_us = self.redis_us();
        while !reply.is_empty() {
            let seq = reply.u64()?;
            let payload = reply.payload()?;
            let attempt = u32::try_from(reply.u64()?).unwrap_or(u32::MAX);
            let lease = record::lease(shard, reply.u64()?);
            let lease_until_ms = reply.u64()?;
            let run_at_ms = reply.u64()?;
            let id = keys::id(shard, seq);
            self.remember(id, &queue);
            let lateness_us = (now_us - run_at_ms as i64 * 1_000).max(0) as u64;
            self.count(&queue, |c| {
                c.delivered += 1;
                c.lateness.record(lateness_us);
            });
            claimed.push(Claimed {
                id,
                queue: queue.clone(),
                payload,
                attempt,
                lease,
                lease_until_ms,
                run_at_ms,
                target: None,
            });
        }
        self.totals.lock().delivered += claimed.len() as u64;
        Ok((claimed, pause))
    }

    /// Claims up to `max` due tasks of `queues` without waiting, from the
    /// shards that may have due tasks (hinted since they were last found
    /// without). With room for at least one task from each (or
    /// [`CLAIM_SHARE_MIN`] from some), they are asked for their shares of
    /// `max` at once, [`CLAIM_SHARE_MIN`] or more each, from as few shards
    /// as that takes. Otherwise (a claim of one task among
    /// several shards, as beanstalkd's `reserve`) each is looked at first (its
    /// first due task, and how many it has), and asked in claim order
    /// (priority, due time, id) for as many as it has until `max` are asked
    /// for: a claim of one task gets the most urgent of all. A claim of
    /// several gets each shard's most urgent, which across shards is claim
    /// order only roughly. Returns the tasks, and when the first timed pause
    /// met ends (Redis ms).
    async fn try_claim(
        &self,
        queues: &[(&str, Arc<QueueWatch>)],
        max: usize,
        lease_ms: u64,
    ) -> Result<(Vec<Claimed>, Option<u64>), QueueError> {
        let mut candidates = Vec::new();
        for (queue, watch) in queues {
            for (shard, hints) in watch.maybe_due() {
                candidates.push((*queue, shard, hints, watch.clone()));
            }
        }
        let mut asks = Vec::new();
        if max >= candidates.len() || max >= CLAIM_SHARE_MIN {
            // Room for a task from each: asked at once, without a look; at
            // least CLAIM_SHARE_MIN from each, from as few shards as that
            // takes, starting at a shard in turn so that claims spread.
            let asked = candidates.len().min(max.div_ceil(CLAIM_SHARE_MIN)).max(1);
            let start = self.next_shard.fetch_add(1, Ordering::Relaxed) as usize % candidates.len().max(1);
            candidates.rotate_left(start);
            candidates.truncate(asked);
            let share = max / asked;
            let mut extra = max % asked;
            for (queue, shard, hints, watch) in candidates {
                let ask = share + usize::from(extra > 0);
                extra = extra.saturating_sub(1);
                asks.push((queue, shard, hints, watch, ask));
            }
        } else {
            let looks = candidates.iter().map(|(queue, shard, ..)| self.look(*shard, queue));
            let looks = futures_util::future::join_all(looks).await;
            let mut found = Vec::new();
            for ((queue, shard, hints, watch), look) in candidates.into_iter().zip(looks) {
                match look? {
                    Some((first, due)) => found.push((first, shard, queue, hints, watch, due)),
                    None => watch.found_none(shard, hints),
                }
            }
            found.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
            let mut asked = 0;
            for (_, shard, queue, hints, watch, due) in found {
                if asked >= max {
                    break;
                }
                let ask = due.clamp(1, max - asked);
                asked += ask;
                asks.push((queue, shard, hints, watch, ask));
            }
        }
        let claims = asks.iter().map(|&(queue, shard, _, _, ask)| self.claim_shard(shard, queue, ask, lease_ms));
        let answers = futures_util::future::join_all(claims).await;
        let mut claimed = Vec::new();
        let mut pause_ends: Option<u64> = None;
        for ((_, shard, hints, watch, ask), answer) in asks.into_iter().zip(answers) {
            match answer? {
                (got, None) => {
                    if got.len() < ask {
                        // Drained: none left there until a hint says so.
                        watch.found_none(shard, hints);
                    }
                    claimed.extend(got);
                }
                (_, Some(Pause::Until(ms))) => pause_ends = Some(pause_ends.map_or(ms, |end| end.min(ms))),
                (_, Some(_)) => {}
            }
        }
        Ok((claimed, pause_ends))
    }

    /// A claim: [`try_claim`](Self::try_claim) in the contract's long-poll,
    /// woken by the hints of its queues (and their pauses' changes), and
    /// looking again every [`CLAIM_RECHECK_MS`] and when a timed pause ends.
    ///
    /// The long-poll looks twice in a row when the first look finds nothing:
    /// once more after arming the wake-ups, for a wake-up that came between.
    /// Here that second look asks Redis only if a queue was woken since the
    /// first began: the first look marked every shard it found without due
    /// tasks, and what it did not ask it would not ask now either. A claim
    /// that waits costs the round trips of one look per wake-up, as before.
    pub(crate) async fn claim_tasks(&self, claim: Claim<'_>) -> Result<Vec<Claimed>, QueueError> {
        let (max, lease_ms) = (claim.max(), claim.lease_ms());
        let watched: Vec<_> = claim.queues().iter().map(|&queue| (queue, self.watch.of(queue))).collect();
        let wake_on: Vec<Arc<Notify>> = watched.iter().map(|(_, watch)| watch.notify.clone()).collect();
        // After a look that found nothing: the queues' wake-ups counted when
        // it began, and the end of the first timed pause it met (Redis ms).
        let found_nothing: Mutex<Option<(u64, Option<u64>)>> = Mutex::new(None);
        let (backend, watched, wake_on, found_nothing) = (self, &watched, &wake_on, &found_nothing);
        long_poll(Duration::from_millis(claim.wait_ms()), move || async move {
            if backend.closed.is_closed() {
                return Ok(Look::Closed);
            }
            let woken = watched.iter().fold(0u64, |sum, (_, watch)| sum.wrapping_add(watch.woken()));
            let first = found_nothing.lock().take();
            let pause_ends = match first {
                Some((seen, pause_ends)) if seen == woken => pause_ends,
                _ => {
                    let (claimed, pause_ends) = backend.try_claim(watched, max, lease_ms).await?;
                    if !claimed.is_empty() {
                        return Ok(Look::Found(claimed));
                    }
                    if first.is_none() {
                        *found_nothing.lock() = Some((woken, pause_ends));
                    }
                    pause_ends
                }
            };
            let mut look_again_in = Duration::from_millis(CLAIM_RECHECK_MS);
            if let Some(end) = pause_ends {
                look_again_in = look_again_in.min(Duration::from_millis(end.saturating_sub(backend.redis_ms())));
            }
            Ok(Look::Nothing { wake_on: wake_on.clone(), look_again_in: Some(look_again_in) })
        })
        .await
    }
}
