//! Schedules on Redis: the contract's [`Schedules`], with the embedded
//! store's semantics (`hourglass_queue::schedule` holds them: the rules, the
//! timetables, misfire, the checks).
//!
//! Each schedule lives in one shard, by a hash of its name
//! ([`keys::schedule_shard`]), with every task of its occurrences (their
//! idempotency keys are placed there too), and is fired by that shard's
//! owner from its wheel (`occurrences.rs`): its next occurrence is one of
//! the shard's deadlines. Every change is one script on the shard
//! (`lua/schedule.lua`), so it is atomic and as durable as Redis's
//! persistence before any client hears of it. A put reads the schedule,
//! works out the new version in Rust (time zones and cron are Rust's), and
//! writes it only if the revision it read is still there, else reads again:
//! a put never undoes a firing that came between.
//!
//! Listing merges the shards' names in order, each shard read in pages by
//! name ([`LIST_BATCH_MAX`]), filtered before a page is cut.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use parking_lot::Mutex;
use redis::AsyncCommands;

use hourglass_queue::limits::{SCHEDULES_MAX, SCHEDULE_LIST_MAX};
use hourglass_queue::validate;
use hourglass_queue::{Expect, NewSchedule, QueueError, Rule, Schedule, ScheduleInfo, SchedulePage, Schedules};
use hourglass_queue::{Failure, Timetable};

use crate::error::{storage, unexpected};
use crate::keys;
use crate::reply::Reply;
use crate::schedule_record::{self, Stored};
use crate::scripts::SCRIPTS;
use crate::RedisBackend;

/// A put works out the new version from a read; if the schedule changed
/// before it was written (it fired, or another put came first), it reads
/// again, at most this many times, then answers `conflict`.
const PUT_TRIES: usize = 8;
/// Schedules a listing reads from one shard at a time, at most.
const LIST_BATCH_MAX: usize = 128;
/// The count of schedules in the totals is read again after this long.
const SCHEDULES_COUNTED_FRESH_FOR: std::time::Duration = std::time::Duration::from_secs(5);

const _: () = assert!(SCHEDULE_LIST_MAX >= 1 && LIST_BATCH_MAX >= 2);

/// The timetables of the schedules this node read, by name, with the rule
/// and anchor they were read from: reading a cron rule can take
/// milliseconds, and a schedule is read at every occurrence.
#[derive(Default)]
pub(crate) struct Timetables(Mutex<HashMap<Box<str>, ReadRule>>);

/// A rule and the anchor it was read from, and its timetable.
type ReadRule = (Rule, u64, Arc<Timetable>);

impl Timetables {
    /// The timetable of `schedule`, read once for its rule and anchor.
    pub(crate) fn of(&self, schedule: &Schedule) -> Result<Arc<Timetable>, QueueError> {
        if let Some((rule, since_ms, timetable)) = self.0.lock().get(&schedule.name) {
            if *rule == schedule.rule && *since_ms == schedule.since_ms {
                return Ok(timetable.clone());
            }
        }
        let timetable = Arc::new(Timetable::of(&schedule.rule, schedule.since_ms).map_err(|error| {
            QueueError::Storage(Failure::msg(format!("schedule {:?} in Redis does not read: {error}", schedule.name)))
        })?);
        self.keep(schedule, timetable.clone());
        Ok(timetable)
    }

    fn keep(&self, schedule: &Schedule, timetable: Arc<Timetable>) {
        let mut all = self.0.lock();
        if all.len() >= SCHEDULES_MAX {
            all.clear();
        }
        all.insert(schedule.name.clone(), (schedule.rule.clone(), schedule.since_ms, timetable));
    }
}

/// `expect` as the script takes it: a kind and a queue.
fn expect_args(expect: Expect<'_>) -> (&'static str, &str) {
    match expect {
        Expect::Any => ("any", ""),
        Expect::Absent => ("absent", ""),
        Expect::InQueue(queue) => ("queue", queue),
    }
}

/// One shard's side of a listing: the schedules read past its cursor and
/// not yet placed on the page.
struct ShardList {
    shard: u16,
    after: String,
    read: VecDeque<Stored>,
    done: bool,
}

impl RedisBackend {
    /// The schedule script `op` on schedule `name` of `shard`, with its
    /// shard's keys; the caller adds the op's own arguments.
    pub(crate) fn schedule_script(&self, shard: u16, op: &str, name: &str) -> redis::ScriptInvocation<'static> {
        let mut invocation = SCRIPTS.schedule.key(self.keys.shard(shard, "sch"));
        for key in ["schp", "sn", "h", "srev", "owner", "t", "p", "seq"] {
            invocation.key(self.keys.shard(shard, key));
        }
        invocation.arg(op).arg(&self.channel).arg(shard).arg(name);
        invocation
    }

    async fn run_schedule_script(&self, invocation: redis::ScriptInvocation<'_>) -> Result<Reply, QueueError> {
        Reply::new(invocation.invoke_async(&mut self.conn()).await.map_err(storage)?)
    }

    /// Schedule `name` of `shard` as stored, with its payload.
    pub(crate) async fn stored_schedule(&self, shard: u16, name: &str) -> Result<Option<Stored>, QueueError> {
        let mut reply = self.run_schedule_script(self.schedule_script(shard, "get", name)).await?;
        match reply.text()?.as_str() {
            "ok" => Ok(Some(schedule_record::decode(shard, name, &reply.bytes()?, reply.bytes()?)?)),
            "none" => Ok(None),
            other => Err(unexpected(format!("unexpected answer {other}"))),
        }
    }

    /// A schedule as a read shows it, with its next occurrences.
    fn schedule_info(&self, schedule: Schedule) -> Result<ScheduleInfo, QueueError> {
        let upcoming_ms = self.timetables.of(&schedule)?.upcoming(schedule.next_ms);
        Ok(ScheduleInfo { schedule, upcoming_ms })
    }

    /// The answer of a script that changes a schedule: the record and payload
    /// it sent back, read.
    fn changed_schedule(&self, shard: u16, name: &str, reply: &mut Reply) -> Result<ScheduleInfo, QueueError> {
        let stored = schedule_record::decode(shard, name, &reply.bytes()?, reply.bytes()?)?;
        self.schedule_info(stored.schedule)
    }

    /// A change that found another schedule than `expect` names (the script
    /// answered `expect` and the queue it found): the error it is.
    fn not_expected(name: &str, expect: Expect<'_>, reply: &mut Reply) -> QueueError {
        let found = match reply.text() {
            Ok(found) => found,
            Err(error) => return error,
        };
        let found = (!found.is_empty()).then_some(found.as_str());
        match expect.check(name, found) {
            Err(error) => error,
            Ok(()) => unexpected(format!("schedule {name:?} refused a change it expects")),
        }
    }

    /// Schedules stored, across the shards (read again at most every
    /// [`SCHEDULES_COUNTED_FRESH_FOR`] for the totals; at once for a put).
    pub(crate) async fn schedule_count(&self, fresh: bool) -> Result<usize, QueueError> {
        if !fresh {
            if let Some((at, count)) = *self.schedules_counted.lock() {
                if at.elapsed() < SCHEDULES_COUNTED_FRESH_FOR {
                    return Ok(count);
                }
            }
        }
        let lengths = (0..self.shards).map(|shard| {
            let (mut conn, key) = (self.conn(), self.keys.shard(shard, "sch"));
            async move { conn.hlen::<_, usize>(key).await.map_err(storage) }
        });
        let mut count = 0;
        for length in futures_util::future::join_all(lengths).await {
            count += length?;
        }
        *self.schedules_counted.lock() = Some((Instant::now(), count));
        Ok(count)
    }

    /// Reads up to `batch` more schedules of `list`'s shard past its cursor,
    /// keeping those of the queues `shown` accepts.
    async fn list_more(
        &self,
        list: &mut ShardList,
        batch: usize,
        shown: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<(), QueueError> {
        let mut invocation = self.schedule_script(list.shard, "list", &list.after);
        invocation.arg(batch);
        let mut reply = self.run_schedule_script(invocation).await?;
        let mut read = 0;
        while !reply.is_empty() {
            let name = reply.text()?;
            let stored = schedule_record::decode(list.shard, &name, &reply.bytes()?, Vec::new())?;
            if shown(&stored.schedule.queue) {
                list.read.push_back(stored);
            }
            list.after = name;
            read += 1;
        }
        list.done = read < batch;
        Ok(())
    }
}

#[async_trait]
impl Schedules for RedisBackend {
    async fn put_schedule(
        &self,
        name: &str,
        new: NewSchedule,
        expect: Expect<'_>,
    ) -> Result<(ScheduleInfo, bool), QueueError> {
        self.closed.check()?;
        // A period counts from the arrival rounded up: never early.
        let arrival = self.redis_arrival();
        let now_ms = arrival.after_ms(1) - 1;
        let (put, timetable) =
            hourglass_queue::check_schedule_off_runtime(name, new, self.options.limits.payload_bytes_max, now_ms)
                .await?;
        let timetable = Arc::new(timetable);
        self.register(&put.queue, None).await?;
        let shard = keys::schedule_shard(name, self.shards);
        for _ in 0..PUT_TRIES {
            let old = self.stored_schedule(shard, name).await?;
            expect.check(name, old.as_ref().map(|old| &*old.schedule.queue))?;
            if old.is_none() && self.schedule_count(true).await? >= SCHEDULES_MAX {
                return Err(QueueError::TooManySchedules { max: SCHEDULES_MAX });
            }
            let mut schedule = put.clone();
            if let Some(old) = &old {
                // As on the embedded store: the overlap policy looks at the
                // task of the latest occurrence, whichever version made it; a
                // paused schedule stays paused; an occurrence the old version
                // ran is not run again.
                schedule.last = old.schedule.last;
                schedule.paused = old.schedule.paused;
                if let Some((ran_ms, _)) = schedule.last {
                    if schedule.next_ms.is_some_and(|next_ms| next_ms <= ran_ms) {
                        schedule.next_ms = timetable.next_after(ran_ms);
                    }
                }
            }
            let mut invocation = self.schedule_script(shard, "put", name);
            invocation
                .arg(old.as_ref().map_or(0, |old| old.rev))
                .arg(schedule_record::encode(&schedule))
                .arg(schedule.payload.as_bytes());
            let mut reply = self.run_schedule_script(invocation).await?;
            match reply.text()?.as_str() {
                "ok" => {
                    let created = reply.int()? == 1;
                    let stored =
                        schedule_record::decode(shard, name, &reply.bytes()?, schedule.payload.as_bytes().to_vec())?;
                    self.timetables.keep(&stored.schedule, timetable);
                    if created {
                        *self.schedules_counted.lock() = None;
                    }
                    return Ok((self.schedule_info(stored.schedule)?, created));
                }
                "changed" => continue,
                other => return Err(unexpected(format!("unexpected answer {other}"))),
            }
        }
        Err(QueueError::Conflict(format!(
            "schedule {name:?} kept changing while the request was checked: send it again"
        )))
    }

    async fn pause_schedule(&self, name: &str, paused: bool, expect: Expect<'_>) -> Result<ScheduleInfo, QueueError> {
        self.closed.check()?;
        validate::schedule_name(name)?;
        let shard = keys::schedule_shard(name, self.shards);
        let (kind, queue) = expect_args(expect);
        let mut invocation = self.schedule_script(shard, "pause", name);
        invocation.arg(if paused { "1" } else { "0" }).arg(kind).arg(queue);
        let mut reply = self.run_schedule_script(invocation).await?;
        match reply.text()?.as_str() {
            "ok" => self.changed_schedule(shard, name, &mut reply),
            "none" => Err(QueueError::ScheduleNotFound(name.to_owned())),
            "expect" => Err(Self::not_expected(name, expect, &mut reply)),
            other => Err(unexpected(format!("unexpected answer {other}"))),
        }
    }

    async fn schedule(&self, name: &str) -> Result<ScheduleInfo, QueueError> {
        validate::schedule_name(name)?;
        let shard = keys::schedule_shard(name, self.shards);
        match self.stored_schedule(shard, name).await? {
            Some(stored) => self.schedule_info(stored.schedule),
            None => Err(QueueError::ScheduleNotFound(name.to_owned())),
        }
    }

    async fn schedules_where(
        &self,
        after: Option<&str>,
        limit: usize,
        shown: &(dyn for<'q> Fn(&'q str) -> bool + Sync),
    ) -> Result<SchedulePage, QueueError> {
        validate::schedule_list_limit(limit)?;
        let batch = (limit + 1).min(LIST_BATCH_MAX);
        let after = after.unwrap_or("");
        let mut lists: Vec<ShardList> = (0..self.shards)
            .map(|shard| ShardList { shard, after: after.to_owned(), read: VecDeque::new(), done: false })
            .collect();
        let mut page: Vec<(u16, Schedule)> = Vec::new();
        while page.len() <= limit {
            // Every shard that may hold a name before the others' next is
            // read on until it has one shown or has no more.
            loop {
                let empty: Vec<&mut ShardList> = lists.iter_mut().filter(|l| l.read.is_empty() && !l.done).collect();
                if empty.is_empty() {
                    break;
                }
                let reads = empty.into_iter().map(|list| self.list_more(list, batch, shown));
                for read in futures_util::future::join_all(reads).await {
                    read?;
                }
            }
            let first = lists
                .iter_mut()
                .filter(|list| !list.read.is_empty())
                .min_by(|a, b| a.read[0].schedule.name.cmp(&b.read[0].schedule.name));
            let Some(list) = first else { break };
            let stored = list.read.pop_front().expect("not empty");
            page.push((list.shard, stored.schedule));
        }
        let more = page.len() > limit;
        page.truncate(limit);
        // The payloads of the page, one read a shard.
        let mut by_shard: HashMap<u16, Vec<usize>> = HashMap::new();
        for (at, (shard, _)) in page.iter().enumerate() {
            by_shard.entry(*shard).or_default().push(at);
        }
        let reads = by_shard.iter().map(|(&shard, ats)| {
            let names: Vec<&str> = ats.iter().map(|&at| &*page[at].1.name).collect();
            let (mut conn, key) = (self.conn(), self.keys.shard(shard, "schp"));
            async move { conn.hmget::<_, _, Vec<Option<Vec<u8>>>>(key, names).await.map_err(storage) }
        });
        let payloads = futures_util::future::join_all(reads).await;
        for ((_, ats), payloads) in by_shard.iter().zip(payloads) {
            for (&at, payload) in ats.iter().zip(payloads?) {
                page[at].1.payload = payload.unwrap_or_default().into();
            }
        }
        let next = more.then(|| page.last().map(|(_, schedule)| schedule.name.clone())).flatten();
        let schedules = page.into_iter().map(|(_, schedule)| self.schedule_info(schedule)).collect::<Result<_, _>>()?;
        Ok(SchedulePage { schedules, next })
    }

    async fn delete_schedule(&self, name: &str, expect: Expect<'_>) -> Result<(), QueueError> {
        self.closed.check()?;
        validate::schedule_name(name)?;
        let shard = keys::schedule_shard(name, self.shards);
        let (kind, queue) = expect_args(expect);
        let mut invocation = self.schedule_script(shard, "delete", name);
        invocation.arg(kind).arg(queue);
        let mut reply = self.run_schedule_script(invocation).await?;
        match reply.text()?.as_str() {
            "ok" => {
                *self.schedules_counted.lock() = None;
                Ok(())
            }
            "none" => Err(QueueError::ScheduleNotFound(name.to_owned())),
            "expect" => Err(Self::not_expected(name, expect, &mut reply)),
            other => Err(unexpected(format!("unexpected answer {other}"))),
        }
    }
}
