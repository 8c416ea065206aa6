//! The contract's capability traits: each method checks its arguments (and
//! that the backend is open), then runs its scripts (`tasks.rs`, `claims.rs`,
//! `listing.rs`, `counts.rs`) and keeps this node's counters. Its
//! [`Schedules`](hourglass_queue::Schedules) are in `schedules.rs`.

use std::sync::Arc;

use async_trait::async_trait;
use redis::AsyncCommands;

use hourglass_queue::limits::LIST_MAX;
use hourglass_queue::validate;
use hourglass_queue::{Backend, Claim, ListRequest, Page, QueueAdmin, Stats, Tasks};
use hourglass_queue::{Claimed, Enqueued, Lease, Nack, NewTask, Pause, RunAt, Status, TaskInfo, TaskState};
use hourglass_queue::{NodeStats, QueueError, QueueSettings, QueueStats, Second, StorageStats, Totals};

use crate::error::{storage, unexpected};
use crate::options::COUNTED_FRESH_FOR;
use crate::scripts::SCRIPTS;
use crate::tasks::Planned;
use crate::{keys, record, registry, RedisBackend};

#[async_trait]
impl Tasks for RedisBackend {
    async fn enqueue_batch(&self, queue: &str, batch: Vec<NewTask>) -> Result<Vec<Enqueued>, QueueError> {
        self.closed.check()?;
        validate::queue_name(queue)?;
        let times: Vec<(RunAt, Option<RunAt>)> = batch.iter().map(|new| (new.run_at, new.expires)).collect();
        let checked = validate::batch(batch, self.options.limits.payload_bytes_max, self.redis_arrival())?;
        self.register(queue, None).await?;
        if checked.iter().any(|task| task.http.is_some()) {
            self.may_push(queue).await?;
        }
        let planned: Vec<Planned> = checked
            .into_iter()
            .zip(times)
            .enumerate()
            .map(|(at, (task, (run_at, expires)))| (at, task, run_at, expires))
            .collect();
        let name: Arc<str> = queue.into();
        // Tasks with a key go to their key's shard, the others with the
        // first of those: one shard, one atomic script, unless keys send a
        // batch to several. Without keys, to the next shard in turn, with
        // any of the queue's enqueues that wait beside them.
        let done = match planned.iter().find_map(|(_, task, ..)| task.key.as_deref()) {
            None => self.enqueue_grouped(&name, planned).await?,
            Some(key) => {
                let home = keys::key_shard(queue, key, self.shards);
                let mut by_shard: Vec<(u16, Vec<Planned>)> = Vec::new();
                for task in planned {
                    let shard = task.1.key.as_deref().map_or(home, |key| keys::key_shard(queue, key, self.shards));
                    match by_shard.iter_mut().find(|(s, _)| *s == shard) {
                        Some((_, tasks)) => tasks.push(task),
                        None => by_shard.push((shard, vec![task])),
                    }
                }
                let mut done = Vec::new();
                for (shard, tasks) in &by_shard {
                    done.extend(self.enqueue_shard(queue, *shard, tasks).await?);
                }
                done.sort_by_key(|(at, _)| *at);
                done
            }
        };
        let created = done.iter().filter(|(_, e)| e.created).count() as u64;
        if created > 0 {
            self.figures.count(queue, |c, t| {
                c.enqueued += created;
                t.enqueued += created;
            });
        }
        for (_, enqueued) in &done {
            self.remember(enqueued.id, &name);
        }
        Ok(done.into_iter().map(|(_, enqueued)| enqueued).collect())
    }

    async fn get(&self, id: u64) -> Result<TaskInfo, QueueError> {
        let (shard, seq) = self.split(id)?;
        self.read(shard, &[seq]).await?.pop().ok_or(QueueError::NotFound(id))
    }

    async fn find_by_key(&self, queue: &str, key: &str) -> Result<Option<TaskInfo>, QueueError> {
        validate::queue_name(queue)?;
        validate::key(key)?;
        let shard = keys::key_shard(queue, key, self.shards);
        let seq: Option<u64> = self.conn().hget(self.keys.queue(shard, "k", queue), key).await.map_err(storage)?;
        match seq {
            Some(seq) => Ok(self.read(shard, &[seq]).await?.pop()),
            None => Ok(None),
        }
    }

    async fn cancel(&self, id: u64) -> Result<(), QueueError> {
        self.closed.check()?;
        let done = self.task(id, "cancel", &[]).await?;
        self.settled(&done.record.task.queue, &[id]).await;
        self.figures.total(|t| t.cancelled += 1);
        Ok(())
    }

    async fn cancel_unleased(&self, id: u64) -> Result<(), QueueError> {
        self.closed.check()?;
        self.task(id, "cancel_unleased", &[]).await?;
        self.figures.total(|t| t.cancelled += 1);
        Ok(())
    }

    async fn reschedule(&self, id: u64, run_at: RunAt) -> Result<TaskInfo, QueueError> {
        self.closed.check()?;
        let at_ms = validate::run_at(run_at, self.redis_arrival())?;
        let (kind, ms) = match run_at {
            RunAt::Delay(ms) => ("d", ms),
            RunAt::At(_) => ("a", at_ms),
        };
        Ok(Self::info(self.task(id, "reschedule", &[kind.into(), ms.to_string()]).await?))
    }

    async fn retry(&self, id: u64) -> Result<TaskInfo, QueueError> {
        self.closed.check()?;
        Ok(Self::info(self.task(id, "retry", &[]).await?))
    }

    async fn claim_from(&self, claim: Claim<'_>) -> Result<Vec<Claimed>, QueueError> {
        self.claim_tasks(claim).await
    }

    async fn take(&self, id: u64, lease_ms: u64) -> Result<Claimed, QueueError> {
        self.closed.check()?;
        validate::lease(lease_ms)?;
        let info = Self::info(self.task(id, "take", &[lease_ms.to_string(), record::lease_secret()]).await?);
        let TaskState::Leased { lease, until_ms } = info.task.state else {
            return Err(unexpected("a task taken but not leased"));
        };
        self.figures.count(&info.task.queue, |c, t| {
            c.delivered += 1;
            t.delivered += 1;
        });
        Ok(Claimed {
            id,
            queue: info.task.queue,
            payload: info.payload,
            attempt: info.task.attempt,
            lease,
            lease_until_ms: until_ms,
            run_at_ms: info.task.run_at_ms,
            target: None,
        })
    }

    async fn ack(&self, id: u64, lease: Lease) -> Result<(), QueueError> {
        self.closed.check()?;
        let done = self.task(id, "ack", &[record::token(lease)]).await?;
        self.settled(&done.record.task.queue, &[id]).await;
        self.figures.count(&done.record.task.queue, |c, t| {
            c.acked += 1;
            t.acked += 1;
        });
        self.queue_of.lock().remove(&id);
        Ok(())
    }

    async fn ack_each(&self, acks: &[(u64, Lease)]) -> Result<Vec<Result<(), QueueError>>, QueueError> {
        self.closed.check()?;
        self.acks(acks).await
    }

    async fn nack(&self, id: u64, lease: Lease, nack: Nack) -> Result<TaskInfo, QueueError> {
        self.closed.check()?;
        validate::delay(nack.delay_ms)?;
        validate::reason(nack.reason.as_deref())?;
        let optional = |value: Option<u64>| value.map(|v| v.to_string()).unwrap_or_default();
        let args = [
            record::token(lease),
            optional(nack.delay_ms),
            nack.reason.as_deref().unwrap_or("").to_owned(),
            optional(nack.priority.map(u64::from)),
            if nack.dead { "1" } else { "0" }.to_owned(),
        ];
        let info = Self::info(self.task(id, "nack", &args).await?);
        self.settled(&info.task.queue, &[id]).await;
        self.figures.total(|totals| {
            totals.nacked += 1;
            if info.status == Status::Dead {
                totals.died += 1;
            }
        });
        Ok(info)
    }

    async fn extend(&self, id: u64, lease: Lease, lease_ms: u64) -> Result<u64, QueueError> {
        self.closed.check()?;
        validate::lease(lease_ms)?;
        let info = Self::info(self.task(id, "extend", &[record::token(lease), lease_ms.to_string()]).await?);
        match info.task.state {
            TaskState::Leased { until_ms, .. } => {
                self.extended(&info.task.queue, id, until_ms).await;
                Ok(until_ms)
            }
            _ => Err(unexpected("a task extended but not leased")),
        }
    }

    async fn list(&self, queue: &str, request: ListRequest) -> Result<Page, QueueError> {
        validate::queue_name(queue)?;
        validate::list_limit(request.limit)?;
        if let Some(status) = request.status {
            return self.list_status(queue, status, request.after, request.limit).await;
        }
        self.list_all(queue, request.after, request.limit).await
    }
}

#[async_trait]
impl QueueAdmin for RedisBackend {
    async fn pause_queue(&self, queue: &str, pause: Pause) -> Result<QueueStats, QueueError> {
        self.closed.check()?;
        validate::queue_name(queue)?;
        let value = registry::stored_pause(pause);
        self.register(queue, Some(&value)).await?;
        let writes = (0..self.shards).map(|shard| {
            let mut conn = self.conn();
            let key = self.keys.shard(shard, "paused");
            let value = value.clone();
            async move {
                if value.is_empty() {
                    conn.hdel::<_, _, ()>(key, queue).await
                } else {
                    conn.hset::<_, _, _, ()>(key, queue, value).await
                }
            }
        });
        for write in futures_util::future::join_all(writes).await {
            write.map_err(storage)?;
        }
        let _: () = self.conn().publish(&self.channel, format!("p {queue}")).await.map_err(storage)?;
        self.watch.wake(queue);
        Ok(self.counts(&[(queue.into(), value)]).await?.remove(0))
    }

    async fn settings(&self, queue: &str) -> Result<QueueSettings, QueueError> {
        self.stored_settings(queue).await
    }

    async fn put_settings(&self, queue: &str, settings: QueueSettings) -> Result<QueueSettings, QueueError> {
        self.store_settings(queue, settings).await
    }

    async fn delete_dead(&self, queue: &str, max: usize) -> Result<Vec<u64>, QueueError> {
        self.closed.check()?;
        validate::queue_name(queue)?;
        validate::range("max", max as u64, 1, LIST_MAX as u64)?;
        let mut deleted = Vec::new();
        for shard in 0..self.shards {
            if deleted.len() >= max {
                break;
            }
            let mut invocation = SCRIPTS.dead.key(self.keys.shard(shard, "t"));
            invocation.key(self.keys.shard(shard, "p"));
            for key in self.keys.queue_keys(shard, queue) {
                invocation.key(key);
            }
            invocation.arg(max - deleted.len());
            let seqs: Vec<u64> = invocation.invoke_async(&mut self.conn()).await.map_err(storage)?;
            deleted.extend(seqs.into_iter().map(|seq| keys::id(shard, seq)));
        }
        self.figures.total(|t| t.cancelled += deleted.len() as u64);
        Ok(deleted)
    }
}

#[async_trait]
impl Stats for RedisBackend {
    async fn queues(&self) -> Vec<QueueStats> {
        let counted = match self.registry().await {
            Ok(names) => self.counts(&names).await,
            Err(error) => Err(error),
        };
        match counted {
            Ok(all) => {
                let tasks = all.iter().map(|q| q.scheduled + q.due + q.leased + q.dead).sum();
                *self.counted.lock() = Some((std::time::Instant::now(), tasks));
                all
            }
            // An outage is the heartbeat's to log.
            Err(error @ QueueError::StoreUnavailable(_)) => {
                tracing::debug!(%error, "cannot count the queues");
                Vec::new()
            }
            Err(error) => {
                tracing::warn!(%error, "cannot count the queues");
                Vec::new()
            }
        }
    }

    async fn queue(&self, name: &str) -> Option<QueueStats> {
        let pause: Option<String> = self.conn().hget(self.keys.global("queues"), name).await.ok()?;
        self.counts(&[(name.into(), pause?)]).await.ok()?.pop()
    }

    async fn totals(&self) -> Totals {
        let schedules = match self.schedule_count(false).await {
            Ok(count) => count,
            Err(error) => {
                tracing::debug!(%error, "cannot count the schedules");
                0
            }
        };
        let counters = match self.figures(&[]).await {
            Ok(figures) => figures.totals,
            Err(error) => {
                tracing::debug!(%error, "cannot read the counters");
                // Nothing is known of them: as of no time at all.
                Totals { counters_as_of_ms: Some(0), ..Totals::default() }
            }
        };
        let totals = Totals { schedules, ..counters };
        // The dashboard reads the queues, then the totals, every second: the
        // tasks held are those the queues' counts just summed.
        let counted = self.counted.lock().filter(|(at, _)| at.elapsed() < COUNTED_FRESH_FOR);
        if let Some((_, tasks)) = counted {
            return Totals { tasks, memory_bytes_max: None, ..totals };
        }
        let lengths = (0..self.shards).map(|shard| {
            let mut conn = self.conn();
            let key = self.keys.shard(shard, "t");
            async move { conn.hlen::<_, usize>(key).await }
        });
        let tasks = futures_util::future::join_all(lengths).await.into_iter().map(|n| n.unwrap_or(0)).sum();
        Totals { tasks, memory_bytes_max: None, ..totals }
    }

    async fn storage(&self) -> Option<StorageStats> {
        None
    }

    async fn history(&self) -> Option<Vec<Second>> {
        // Unread, the server draws its own.
        RedisBackend::history(self).await.inspect_err(|error| tracing::debug!(%error, "cannot read the history")).ok()
    }

    fn keeps_history(&self) -> bool {
        true
    }

    async fn nodes(&self) -> Option<Vec<NodeStats>> {
        // Unread: none known (an outage is the heartbeat's to log).
        Some(
            RedisBackend::nodes(self)
                .await
                .inspect_err(|error| tracing::debug!(%error, "cannot read the nodes"))
                .unwrap_or_default(),
        )
    }
}

impl Backend for RedisBackend {
    fn as_schedules(&self) -> Option<&dyn hourglass_queue::Schedules> {
        Some(self)
    }

    fn store_unavailable(&self) -> Option<String> {
        self.health.why()
    }

    fn close(&self) {
        self.closed.close();
        self.alarms.close();
        let _ = self.stop.send(true);
        self.watch.wake_all(self.redis_us_since_epoch());
        // Tasks handed over that no claim will take now.
        self.give_back(self.takers.close_all());
    }
}
