//! Claims: a look at the first due task of each shard that may have one,
//! then claims from the shards in claim order; a claim with nothing due waits
//! for a hint.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;

use super::reply::Reply;
use super::scripts::SCRIPTS;
use super::{keys, local_us, record, storage, RedisBackend, CLAIM_RECHECK_MS, CLAIM_SCAN_MAX};
use crate::error::QueueError;
use crate::limits::{ANSWER_PAYLOAD_BYTES_MAX, QUEUES_MAX};
use crate::model::{Claimed, Pause};
use crate::validate;

impl RedisBackend {
    /// The first due task of `queue` in `shard`, in claim order, if any.
    async fn peek(&self, shard: u16, queue: &str) -> Result<Option<String>, QueueError> {
        let first: Vec<String> = self.conn().zrange(self.keys.queue(shard, "r", queue), 0, 0).await.map_err(storage)?;
        Ok(first.into_iter().next())
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
        let now_us = local_us() as i64 + self.offset_ms.load(Ordering::Relaxed) * 1_000;
        while !reply.is_empty() {
            let seq = reply.u64()?;
            let payload = String::from_utf8(reply.bytes()?)
                .map_err(|_| QueueError::Storage("redis: a payload not UTF-8".into()))?;
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
                payload: payload.into(),
                attempt,
                lease,
                lease_until_ms,
                run_at_ms,
            });
        }
        self.totals.lock().delivered += claimed.len() as u64;
        Ok((claimed, pause))
    }

    /// Claims up to `max` due tasks of `queues` without waiting: looks at the
    /// first due task of every shard that may have one, then claims from
    /// the shards in claim order (priority, due time, id) until it has `max`.
    /// Returns them, and when the first timed pause met ends (Redis ms).
    async fn try_claim(
        &self,
        queues: &[&str],
        max: usize,
        lease_ms: u64,
    ) -> Result<(Vec<Claimed>, Option<u64>), QueueError> {
        let mut looks = Vec::new();
        for &queue in queues {
            let watch = self.watch.of(queue);
            for (shard, hints) in watch.maybe_due() {
                looks.push((queue, shard, hints, watch.clone()));
            }
        }
        let firsts =
            futures_util::future::join_all(looks.iter().map(|(queue, shard, ..)| self.peek(*shard, queue))).await;
        let mut candidates = Vec::new();
        for ((queue, shard, hints, watch), first) in looks.into_iter().zip(firsts) {
            match first? {
                Some(member) => candidates.push((member, shard, queue, hints, watch)),
                None => watch.found_none(shard, hints),
            }
        }
        candidates.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        let mut claimed = Vec::new();
        let mut pause_ends: Option<u64> = None;
        for (_, shard, queue, hints, watch) in candidates {
            if claimed.len() >= max {
                break;
            }
            let asked = max - claimed.len();
            match self.claim_shard(shard, queue, asked, lease_ms).await? {
                (got, None) if got.len() < asked => {
                    // Drained: none left there until a hint says so.
                    watch.found_none(shard, hints);
                    claimed.extend(got);
                }
                (got, None) => claimed.extend(got),
                (_, Some(Pause::Until(ms))) => pause_ends = Some(pause_ends.map_or(ms, |end| end.min(ms))),
                (_, Some(_)) => {}
            }
        }
        Ok((claimed, pause_ends))
    }

    pub(crate) async fn claim_from(
        &self,
        queues: &[&str],
        max: usize,
        lease_ms: u64,
        wait_ms: u64,
    ) -> Result<Vec<Claimed>, QueueError> {
        validate::claim(max, lease_ms, wait_ms)?;
        if queues.is_empty() || queues.len() > QUEUES_MAX {
            return Err(QueueError::Invalid(format!("a claim names 1 to {QUEUES_MAX} queues")));
        }
        for queue in queues {
            validate::queue_name(queue)?;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
        let watches: Vec<_> = queues.iter().map(|queue| self.watch.of(queue)).collect();
        loop {
            if self.closed.load(Ordering::SeqCst) {
                return Ok(Vec::new());
            }
            let mut woken: Vec<_> = watches.iter().map(|watch| Box::pin(watch.notify.notified())).collect();
            for notified in &mut woken {
                notified.as_mut().enable();
            }
            let (claimed, pause_ends) = self.try_claim(queues, max, lease_ms).await?;
            let now = tokio::time::Instant::now();
            if !claimed.is_empty() || now >= deadline {
                return Ok(claimed);
            }
            let mut wake = deadline.min(now + Duration::from_millis(CLAIM_RECHECK_MS));
            if let Some(end) = pause_ends {
                wake = wake.min(now + Duration::from_millis(end.saturating_sub(self.redis_ms())));
            }
            tokio::select! {
                _ = futures_util::future::select_all(woken) => {}
                _ = tokio::time::sleep_until(wake) => {}
            }
        }
    }
}
