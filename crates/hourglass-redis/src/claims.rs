//! Claims: claim scripts on the shards that may have due tasks, at once, in
//! rounds until the claim is full or they are drained; a claim with nothing
//! due waits for a hint, in the contract's long-poll.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

use hourglass_queue::limits::ANSWER_PAYLOAD_BYTES_MAX;
use hourglass_queue::long_poll::{long_poll, Look};
use hourglass_queue::{Claim, Claimed, Pause, QueueError};

use crate::error::{storage, unexpected};
use crate::options::{CLAIM_RECHECK_MS, CLAIM_SCAN_MAX, CLAIM_SHARE_MIN};
use crate::reply::Reply;
use crate::scripts::{ClaimStop, SCRIPTS};
use crate::watch::QueueWatch;
use crate::{keys, record, RedisBackend};

/// A shard that may have due tasks of a queue a claim waits on.
struct Candidate<'a> {
    queue: &'a str,
    shard: u16,
    /// The queue's hint count of the shard when the claim began: handed back
    /// if the shard is found drained.
    hints: u64,
    watch: Arc<QueueWatch>,
}

/// `left` tasks asked from the first of `candidates` (taken from it), at
/// least `share_min` from each unless `left` is less, so from as few as that
/// takes.
fn shares<'a>(candidates: &mut Vec<Candidate<'a>>, left: usize, share_min: usize) -> Vec<(Candidate<'a>, usize)> {
    let asked = candidates.len().min(left.div_ceil(share_min));
    if asked == 0 {
        return Vec::new();
    }
    let share = left / asked;
    let mut extra = left % asked;
    candidates
        .drain(..asked)
        .map(|at| {
            let ask = share + usize::from(extra > 0);
            extra = extra.saturating_sub(1);
            (at, ask)
        })
        .collect()
}

impl RedisBackend {
    /// The first due task of `queue` in `shard`, in claim order, and how
    /// many are due there; `None` if none.
    async fn look(&self, shard: u16, queue: &str) -> Result<Option<(String, usize)>, QueueError> {
        let key = self.keys.queue(shard, "r", queue);
        let (first, due): (Vec<String>, usize) =
            redis::pipe().zrange(&key, 0, 0).zcard(&key).query_async(&mut self.conn()).await.map_err(storage)?;
        Ok(first.into_iter().next().map(|first| (first, due)))
    }

    /// One claim script on `queue` of `shard`, for at most `max` tasks and
    /// `bytes_max` bytes of payloads (at least one task, if one is due):
    /// the tasks, with the queue's pause if it is paused, or else why it
    /// handed out fewer than `max`.
    async fn claim_shard(
        &self,
        shard: u16,
        queue: &str,
        max: usize,
        lease_ms: u64,
        bytes_max: usize,
    ) -> Result<(Vec<Claimed>, Result<ClaimStop, Pause>), QueueError> {
        let mut invocation = SCRIPTS.claim.key(self.keys.shard(shard, "t"));
        invocation
            .key(self.keys.shard(shard, "p"))
            .key(self.keys.shard(shard, "h"))
            .key(self.keys.shard(shard, "lseq"))
            .key(self.keys.shard(shard, "paused"));
        for key in self.keys.queue_keys(shard, queue) {
            invocation.key(key);
        }
        invocation.arg(&self.channel).arg(shard).arg(queue).arg(max).arg(lease_ms).arg(bytes_max).arg(CLAIM_SCAN_MAX);
        let mut reply = Reply::new(invocation.invoke_async(&mut self.conn()).await.map_err(storage)?)?;
        self.saw_time(reply.u64()?);
        let stop = match reply.int()? {
            -1 => {
                let code = reply.u64()?;
                Ok(ClaimStop::from_reply(code).ok_or_else(|| unexpected(format!("claim stopped for {code}")))?)
            }
            0 => Err(Pause::Indefinitely),
            until => Err(Pause::Until(until as u64)),
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
        Ok((claimed, stop))
    }

    /// Claims up to `max` due tasks of `queues` without waiting, from the
    /// shards that may have due tasks (hinted since they were last found
    /// without), in rounds of claim scripts sent at once, until `max` are
    /// handed out or every such shard was found drained: a claim hands out
    /// every due task it can, wherever they are.
    ///
    /// The first round is planned by [`first_round`](Self::first_round).
    /// A shard that handed out all it was asked for may have more: the next
    /// round asks those for what is missing; once none is left, the shards
    /// not asked yet, one task or more each. Each round finds at least one
    /// shard drained or fills the claim, so there are at most one more
    /// rounds than shards asked. Payloads are bounded as the contract says
    /// ([`ANSWER_PAYLOAD_BYTES_MAX`]): each script of a round is given its
    /// share of what is left, and a script stopped by it ends the claim.
    /// Returns the tasks, and when the first timed pause met ends (Redis ms).
    async fn try_claim(
        &self,
        queues: &[(&str, Arc<QueueWatch>)],
        max: usize,
        lease_ms: u64,
    ) -> Result<(Vec<Claimed>, Option<u64>), QueueError> {
        let mut unasked = Vec::new();
        for (queue, watch) in queues {
            for (shard, hints) in watch.maybe_due() {
                unasked.push(Candidate { queue, shard, hints, watch: watch.clone() });
            }
        }
        let mut asks = self.first_round(&mut unasked, max).await?;
        let mut claimed = Vec::new();
        let mut pause_ends: Option<u64> = None;
        let mut bytes = 0;
        // Shards that handed out all they were asked for, not asked again yet.
        let mut more = Vec::new();
        while !asks.is_empty() {
            let bytes_max = (ANSWER_PAYLOAD_BYTES_MAX - bytes) / asks.len();
            let claims = asks.iter().map(|(at, ask)| self.claim_shard(at.shard, at.queue, *ask, lease_ms, bytes_max));
            let answers = futures_util::future::join_all(claims).await;
            let mut full = false;
            for ((at, ask), answer) in asks.into_iter().zip(answers) {
                let (got, stop) = answer?;
                bytes += got.iter().map(|task| task.payload.len()).sum::<usize>();
                match stop {
                    Ok(_) if got.len() == ask => more.push(at),
                    Ok(ClaimStop::Drained) => at.watch.found_none(at.shard, at.hints),
                    Ok(ClaimStop::Bytes) => full = true,
                    Ok(ClaimStop::Scanned) => more.push(at),
                    Err(Pause::Until(ms)) => pause_ends = Some(pause_ends.map_or(ms, |end| end.min(ms))),
                    Err(_) => {}
                }
                claimed.extend(got);
            }
            let left = max - claimed.len();
            if full || left == 0 || bytes >= ANSWER_PAYLOAD_BYTES_MAX {
                break;
            }
            let next = if more.is_empty() { &mut unasked } else { &mut more };
            asks = shares(next, left, 1);
        }
        Ok((claimed, pause_ends))
    }

    /// The first round of a claim of `max` from the shards `unasked`, taken
    /// from it. With room for at least one task from each (or
    /// [`CLAIM_SHARE_MIN`] from some), they are asked for their shares of
    /// `max` at once, [`CLAIM_SHARE_MIN`] or more each, from as few shards as
    /// that takes, starting at a shard in turn so that claims spread.
    /// Otherwise (a claim of one task among several shards, as beanstalkd's
    /// `reserve`) each is looked at first (its first due task, and how many
    /// it has), and asked in claim order (priority, due time, id) for as many
    /// as it has until `max` are asked for: a claim of one task gets the most
    /// urgent of all. A claim of several gets each shard's most urgent, which
    /// across shards is claim order only roughly.
    async fn first_round<'a>(
        &self,
        unasked: &mut Vec<Candidate<'a>>,
        max: usize,
    ) -> Result<Vec<(Candidate<'a>, usize)>, QueueError> {
        if max >= unasked.len() || max >= CLAIM_SHARE_MIN {
            let start = self.next_shard.fetch_add(1, Ordering::Relaxed) as usize % unasked.len().max(1);
            unasked.rotate_left(start);
            return Ok(shares(unasked, max, CLAIM_SHARE_MIN));
        }
        let looks = unasked.iter().map(|at| self.look(at.shard, at.queue));
        let looks = futures_util::future::join_all(looks).await;
        let mut found = Vec::new();
        for (at, look) in std::mem::take(unasked).into_iter().zip(looks) {
            match look? {
                Some((first, due)) => found.push((first, at, due)),
                None => at.watch.found_none(at.shard, at.hints),
            }
        }
        found.sort_by(|a, b| (&a.0, a.1.shard).cmp(&(&b.0, b.1.shard)));
        let mut asks = Vec::new();
        let mut asked = 0;
        for (_, at, due) in found {
            if asked < max {
                let ask = due.clamp(1, max - asked);
                asked += ask;
                asks.push((at, ask));
            } else {
                unasked.push(at);
            }
        }
        Ok(asks)
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
