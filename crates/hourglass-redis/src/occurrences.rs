//! Firing a schedule: the owner of its shard, woken by its wheel at the
//! schedule's next occurrence (one of the shard's deadlines, the head
//! `c:NAME` in `h`), reads the schedule, works out in Rust what its misfire
//! policy enqueues and its next occurrence after now (the contract's
//! [`Timetable::due`](hourglass_queue::Timetable::due), in its time zone),
//! and sends that to one script (`lua/schedule.lua fire`). The script, under
//! the shard's lease (a stale holder changes nothing) and only if the
//! schedule is still the revision read (a put, a pause or another firing
//! came between: read again), applies the overlap policy on the previous
//! task's state and each occurrence's deadline on Redis's clock, writes the
//! occurrences' tasks and moves the schedule to its next occurrence, all at
//! once.
//!
//! **Exactly once per occurrence.** The schedule's next occurrence moves in
//! the script that writes the tasks of those before it, so a node that dies
//! before the script leaves the schedule where it was, and one that dies
//! after leaves both written: the shard's next owner reads the stored next
//! occurrence and fires from it, with the misfire policy deciding about
//! what it finds late. An occurrence's task has the occurrence's idempotency
//! key, on the schedule's shard: a task of the same key already there
//! stands for the occurrence, as on the embedded store.

use hourglass_queue::limits::{PRIORITY_DEFAULT, SCHEDULE_RETRY_MS};
use hourglass_queue::QueueError;

use crate::error::{storage, unexpected};
use crate::RedisBackend;

/// A firing that finds the schedule changed since it read it reads again,
/// at most this many times in one pass of the shard's timer; the next pass
/// goes on.
const FIRE_TRIES: usize = 4;

/// A schedule's head among its shard's deadlines (`h`).
pub(crate) const HEAD_PREFIX: &str = "c:";

impl RedisBackend {
    /// Fires schedules `names` of `shard`, whose heads came due, as `holder`.
    /// `Err(None)` if fenced: another node holds the shard now.
    pub(crate) async fn fire_schedules(
        &self,
        shard: u16,
        holder: &str,
        names: &[&str],
    ) -> Result<(), Option<QueueError>> {
        for name in names {
            match self.fire_schedule(shard, holder, name).await {
                Ok(()) => {}
                Err(None) => return Err(None),
                // Redis out of reach: the shard's fire fails as well.
                Err(Some(error @ QueueError::StoreUnavailable(_))) => return Err(Some(error)),
                // This schedule only (a record this node cannot read, a
                // time zone it does not know): the shard's queues and its
                // other schedules fire on, and it is tried again later.
                Err(Some(error)) => {
                    tracing::warn!(schedule = name, %error, "a schedule cannot be fired; trying again in {SCHEDULE_RETRY_MS} ms");
                    self.defer_schedule(shard, holder, name).await?;
                }
            }
        }
        Ok(())
    }

    /// Moves the head of schedule `name` to [`SCHEDULE_RETRY_MS`] from now.
    async fn defer_schedule(&self, shard: u16, holder: &str, name: &str) -> Result<(), Option<QueueError>> {
        let value: redis::Value = self
            .schedule_script(shard, "defer", name)
            .arg(holder)
            .arg(self.redis_ms() + SCHEDULE_RETRY_MS)
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| Some(storage(e)))?;
        match crate::reply::Reply::new(value).map_err(Some)?.text().map_err(Some)?.as_str() {
            "ok" => Ok(()),
            "fenced" => Err(None),
            other => Err(Some(unexpected(format!("unexpected answer {other}")))),
        }
    }

    async fn fire_schedule(&self, shard: u16, holder: &str, name: &str) -> Result<(), Option<QueueError>> {
        for _ in 0..FIRE_TRIES {
            let stored = self.stored_schedule(shard, name).await.map_err(Some)?;
            let now_ms = self.redis_ms();
            let running = stored.as_ref().filter(|stored| !stored.schedule.paused);
            let Some((stored, first)) =
                running.and_then(|s| s.schedule.next_ms.filter(|&n| n <= now_ms).map(|n| (s, n)))
            else {
                // The head is out of step with the record (not yet due by
                // this node's reading of Redis's clock, or gone): set it
                // from the record.
                let _: redis::Value = self
                    .schedule_script(shard, "arm", name)
                    .invoke_async(&mut self.conn())
                    .await
                    .map_err(|e| Some(storage(e)))?;
                return Ok(());
            };
            let schedule = &stored.schedule;
            let timetable = self.timetables.of(schedule).map_err(Some)?;
            let due = timetable.due(first, now_ms, schedule.misfire);
            let mut invocation = self.schedule_script(shard, "fire", name);
            for key in self.keys.queue_keys(shard, &schedule.queue) {
                invocation.key(key);
            }
            let cap = self.options.limits.tasks_max.div_ceil(usize::from(self.shards));
            invocation
                .arg(holder)
                .arg(stored.rev)
                .arg(first)
                .arg(due.next_ms.map(|ms| ms.to_string()).unwrap_or_default())
                .arg(due.skipped)
                .arg(now_ms + SCHEDULE_RETRY_MS)
                .arg(cap)
                .arg(PRIORITY_DEFAULT);
            for run in &due.runs {
                invocation.arg(run);
            }
            let value: redis::Value = invocation.invoke_async(&mut self.conn()).await.map_err(|e| Some(storage(e)))?;
            let mut reply = crate::reply::Reply::new(value).map_err(Some)?;
            match reply.text().map_err(Some)?.as_str() {
                "ok" => {
                    self.saw_time(reply.u64().map_err(Some)?);
                    let skipped = reply.u64().map_err(Some)?;
                    let mut enqueued = Vec::new();
                    while !reply.is_empty() {
                        let seq = reply.u64().map_err(Some)?;
                        let occurrence_ms = reply.u64().map_err(Some)?;
                        enqueued.push((crate::keys::id(shard, seq), occurrence_ms));
                    }
                    self.fired_schedule(name, &schedule.queue, &enqueued, skipped);
                    return Ok(());
                }
                "fenced" => return Err(None),
                "changed" => continue,
                "early" => return Ok(()),
                "too_many_tasks" => {
                    let error = QueueError::TooManyTasks { max: self.options.limits.tasks_max };
                    tracing::warn!(schedule = name, %error, "a schedule's occurrence could not be enqueued; trying again");
                    return Ok(());
                }
                other => return Err(Some(unexpected(format!("unexpected answer {other}")))),
            }
        }
        Ok(())
    }

    /// Counts what a firing of schedule `name` enqueued and skipped.
    fn fired_schedule(&self, name: &str, queue: &str, enqueued: &[(u64, u64)], skipped: u64) {
        let created = enqueued.len() as u64;
        if skipped > 0 {
            tracing::info!(schedule = name, skipped, enqueued = created, "occurrences missed");
        }
        self.figures.count(queue, |c, totals| {
            c.enqueued += created;
            totals.enqueued += created;
            totals.occurrences_enqueued += created;
            totals.occurrences_skipped += skipped;
        });
        if created > 0 {
            let queue: std::sync::Arc<str> = queue.into();
            for &(id, _) in enqueued {
                self.remember(id, &queue);
            }
        }
    }
}
