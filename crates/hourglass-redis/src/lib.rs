//! hourglass's Redis backend: any number of nodes on one Redis or a Redis
//! Cluster, one service.
//!
//! # Implementation
//!
//! - **Shards.** Tasks are spread over a fixed number of shards (16 by
//!   default, at most 1,024), each shard's keys under its own hash tag, so a
//!   Cluster spreads one queue over all its masters. A task without a key goes
//!   to the next shard in turn; one with an idempotency key to the shard of
//!   its key's hash, so the key is unique with one script. A task's id is its
//!   shard's sequence number and the shard (`keys.rs`).
//! - **Scripts.** Every change is one Lua script on one shard (`lua/`), so it
//!   is atomic; each names all its keys and reads the time from Redis.
//! - **Firing from timers, not polling.** Each node holds leases on a share of
//!   the shards (`shards.rs`), rebalanced as nodes come and go, and sleeps to
//!   each owned shard's earliest deadline (due time or lease end) to the
//!   millisecond; then the fire script files what came due and gives back
//!   expired leases. A sweep every [`SWEEP_MS`] is a safety net for a lost
//!   hint, counted apart ([`RedisBackend::fired`]).
//! - **Fencing.** A shard lease carries an epoch from a counter that is never
//!   deleted; the fire script runs only for the current holder, so a node that
//!   was stopped past its lease changes nothing when it resumes.
//! - **Claims from any node.** Changes that make a task due publish a hint
//!   (queue and shard) on one channel; every node's waiting claims wake on it
//!   and look only at the shards hinted (`watch.rs`), with a bounded fallback
//!   ([`CLAIM_RECHECK_MS`]).
//!
//! What a 2xx means depends on Redis's persistence: `docs/DESIGN.md`,
//! "Redis: what a 2xx means".

mod alarms;
mod claims;
mod conn;
mod counts;
mod keys;
mod listing;
mod record;
mod reply;
mod scripts;
mod shards;
mod tasks;
mod watch;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use hourglass::{SystemWallClock, WallClock};
use parking_lot::Mutex;
use redis::{AsyncCommands, RedisError};

use conn::Conn;
pub use conn::{Target, REPLY_TIMEOUT};
use keys::Keys;
use scripts::SCRIPTS;
use watch::Watch;

use hourglass_queue::lateness::Lateness;
use hourglass_queue::limits::{Limits, LIST_MAX, QUEUES_MAX};
use hourglass_queue::validate;
use hourglass_queue::{Backend, Claim, ListRequest, Page, QueueAdmin, Stats, Tasks};
use hourglass_queue::{Claimed, Enqueued, Lease, Nack, NewTask, Pause, RunAt, Status, TaskInfo};
use hourglass_queue::{Failure, QueueError};
use hourglass_queue::{QueueStats, StorageStats, Totals};

/// Shards when the store has none yet.
pub const SHARDS_DEFAULT: u16 = 16;
/// A node's lease on a shard: a node that stops renewing (dead, stopped or cut
/// off) has its shards taken over within this, plus one renewal period.
pub const SHARD_LEASE_MS_DEFAULT: u64 = 2_000;
/// A node renews its shard leases and looks at who is alive this many times a
/// lease.
pub const RENEWALS_PER_LEASE: u64 = 4;
/// The owner of a shard reads its deadlines again at least this often, in
/// case a hint of an earlier one was lost. A safety net, not what delivers:
/// see [`RedisBackend::fired`].
pub const SWEEP_MS: u64 = 1_000;
/// A waiting claim looks for due tasks at least this often, in case a hint
/// was lost.
pub const CLAIM_RECHECK_MS: u64 = 1_000;
/// Most due tasks or expired leases of one queue one fire script moves; more
/// are moved by the next, at once.
pub const FIRE_BATCH_MAX: usize = 1_000;
/// Most queues one fire script looks at; the next takes the rest, at once.
pub const FIRE_QUEUES_MAX: usize = 64;
/// Due tasks a claim script looks at, at most, past those it hands out (dead
/// ones it meets past their expiry).
const CLAIM_SCAN_MAX: usize = 2 * hourglass_queue::limits::CLAIM_MAX;
/// Ids whose queue a node remembers (for acks, nacks and the like, which name
/// only the id): past it the memory is cleared, and a miss costs one more
/// round trip.
const QUEUE_OF_MAX: usize = 100_000;

/// A claim of several tasks asks at least this many of each shard it asks
/// (it asks fewer shards rather than fewer tasks of each): each shard asked
/// is one script, and the acks of its tasks another.
pub const CLAIM_SHARE_MIN: usize = 16;

/// The totals' count of tasks is the sum of the queues' counts if those were
/// read this recently (the dashboard reads both each second), else each
/// shard's.
const COUNTED_FRESH_FOR: std::time::Duration = std::time::Duration::from_millis(900);

/// How a Redis backend is set up.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// Which Redis.
    pub target: Target,
    /// Every key starts with it, so that services can share a Redis.
    pub prefix: String,
    /// Shards to create if the store has none; a store keeps its count.
    pub shards: u16,
    /// A node's lease on its shards.
    pub shard_lease_ms: u64,
    /// Bounds on requests; `tasks_max` is shared evenly by the shards.
    pub limits: Limits,
}

impl RedisOptions {
    /// The defaults, on `target`.
    pub fn new(target: Target) -> RedisOptions {
        RedisOptions {
            target,
            prefix: "hg".into(),
            shards: SHARDS_DEFAULT,
            shard_lease_ms: SHARD_LEASE_MS_DEFAULT,
            limits: Limits::default(),
        }
    }
}

/// This node's counters of one queue, since it started.
#[derive(Default)]
struct Counters {
    enqueued: u64,
    delivered: u64,
    acked: u64,
    lateness: Lateness,
}

/// Tasks the owners' timers filed as due, or gave back when their lease ran
/// out: by a timer at the deadline, or by the sweep (a hint was lost).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fired {
    /// Moved by a timer set for their deadline.
    pub by_timer: u64,
    /// Moved by the periodic sweep.
    pub by_sweep: u64,
}

/// The Redis [`Backend`]: see the [module](self) documentation.
pub struct RedisBackend {
    conn: Conn,
    keys: Keys,
    options: RedisOptions,
    shards: u16,
    channel: String,
    /// This node's name in the membership and in its shard leases.
    node: String,
    watch: Watch,
    owned: shards::Owned,
    known_queues: Mutex<std::collections::HashSet<Arc<str>>>,
    queue_of: Mutex<HashMap<u64, Arc<str>>>,
    counters: Mutex<HashMap<Arc<str>, Counters>>,
    /// When every queue was last counted, and the tasks they held.
    counted: Mutex<Option<(std::time::Instant, usize)>>,
    totals: Mutex<Totals>,
    next_shard: AtomicU64,
    /// Redis's clock minus this node's: see [`Offset`].
    offset: Mutex<Offset>,
    alarms: Arc<alarms::Alarms>,
    by_timer: AtomicU64,
    by_sweep: AtomicU64,
    closed: AtomicBool,
    stop: tokio::sync::watch::Sender<bool>,
}

/// A Redis error: the store failed. A script refused by Redis (an error
/// reply) changed nothing: its checks come before its first write. A reply
/// that never came (a timeout, a connection lost) leaves the change unknown,
/// and the message says so: at least once, a client tries again.
fn storage(error: RedisError) -> QueueError {
    if error.is_timeout() || error.is_connection_dropped() || error.is_io_error() {
        QueueError::Storage(Failure::msg(format!(
            "redis did not answer ({error}): the change may or may not have been made"
        )))
    } else {
        QueueError::Storage(Failure::msg(format!("redis: {error}")))
    }
}

/// Redis's clock minus this node's. A reply's time was read on Redis before
/// this node reads its own, and both are whole milliseconds, so each sample
/// is at most the true offset; the estimate is the largest sample of the
/// last two windows of [`OFFSET_WINDOW`], which follows the clocks if they
/// drift apart.
#[derive(Default)]
struct Offset {
    since: Option<std::time::Instant>,
    current: Option<i64>,
    previous: Option<i64>,
}

/// How long a sample of the clocks' offset counts, at least.
const OFFSET_WINDOW: std::time::Duration = std::time::Duration::from_secs(5);

impl Offset {
    fn saw(&mut self, sample: i64) {
        let now = std::time::Instant::now();
        if self.since.is_none_or(|since| now - since > OFFSET_WINDOW) {
            self.previous = self.current;
            self.current = Some(sample);
            self.since = Some(now);
        } else {
            self.current = Some(self.current.map_or(sample, |c| c.max(sample)));
        }
    }

    fn estimate(&self) -> i64 {
        self.current.max(self.previous).unwrap_or(0)
    }
}

/// A stable hash of a key, the same on every node and every version: the
/// shard of a task with an idempotency key.
fn key_shard(queue: &str, key: &str, shards: u16) -> u16 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(queue.as_bytes());
    hasher.update(&[0]);
    hasher.update(key.as_bytes());
    (hasher.finalize() % u32::from(shards)) as u16
}

impl RedisBackend {
    /// Connects, checks (or sets) the store's shard count, and starts this
    /// node's share of the work: holding shards and firing their timers, and
    /// listening for hints. Needs a tokio runtime.
    ///
    /// # Errors
    /// [`QueueError::Storage`] if Redis cannot be reached or answers wrongly;
    /// [`QueueError::Invalid`] for options out of range or a shard count that
    /// is not the store's.
    pub async fn connect(options: RedisOptions) -> Result<Arc<RedisBackend>, QueueError> {
        if options.shards == 0 || options.shards > keys::SHARDS_MAX {
            return Err(QueueError::Invalid(format!("shards must be within 1 ..= {}", keys::SHARDS_MAX)));
        }
        validate::range("shard_lease_ms", options.shard_lease_ms, 400, 60_000)?;
        if options.prefix.is_empty() || options.prefix.contains(['{', '}']) {
            return Err(QueueError::Invalid("a key prefix is not empty and has no { or }".into()));
        }
        let mut conn = Conn::open(&options.target)
            .await
            .map_err(|e| QueueError::Storage(Failure::msg(format!("cannot reach redis at {}: {e}", options.target))))?;
        let keys = Keys::new(&options.prefix);
        let meta = keys.global("meta");
        let _: bool = conn.hset_nx(&meta, "shards", options.shards).await.map_err(storage)?;
        let shards: u16 = conn.hget(&meta, "shards").await.map_err(storage)?;
        if shards != options.shards {
            return Err(QueueError::Invalid(format!(
                "the store at {} has {shards} shards, not {}: start every node with --shards {shards}",
                options.target, options.shards
            )));
        }
        let (stop, _) = tokio::sync::watch::channel(false);
        let alarms = Arc::new(alarms::Alarms::default());
        alarms.start().map_err(|e| QueueError::Storage(Failure::msg(format!("cannot start the timer thread: {e}"))))?;
        let backend = Arc::new(RedisBackend {
            conn,
            channel: keys.channel(),
            keys,
            shards,
            node: format!("{:016x}", rand::random::<u64>()),
            watch: Watch::new(shards),
            owned: shards::Owned::default(),
            known_queues: Mutex::default(),
            queue_of: Mutex::default(),
            counters: Mutex::default(),
            counted: Mutex::default(),
            totals: Mutex::default(),
            next_shard: AtomicU64::new(rand::random::<u64>() % u64::from(shards)),
            offset: Mutex::new(Offset::default()),
            alarms,
            by_timer: AtomicU64::new(0),
            by_sweep: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            stop,
            options,
        });
        shards::start(&backend);
        Ok(backend)
    }

    /// This node's name, as the shard leases show it.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The shards this node holds now.
    pub fn held_shards(&self) -> Vec<u16> {
        self.owned.holders().into_iter().map(|(shard, _)| shard).collect()
    }

    /// What this node's timers moved since it started, by timer or by sweep.
    pub fn fired(&self) -> Fired {
        Fired { by_timer: self.by_timer.load(Ordering::Relaxed), by_sweep: self.by_sweep.load(Ordering::Relaxed) }
    }

    /// The shards this node holds, with their holders (`node:epoch`).
    #[doc(hidden)]
    pub fn holders(&self) -> Vec<(u16, String)> {
        self.owned.holders()
    }

    /// Runs the fire script of `shard` as `holder`: whether it was accepted
    /// (a stale holder is fenced out). For tests of fencing.
    #[doc(hidden)]
    pub async fn fire_as(&self, shard: u16, holder: &str) -> Result<bool, QueueError> {
        match self.fire_once(shard, holder, false, true, &mut None).await {
            Ok(_) => Ok(true),
            Err(None) => Ok(false),
            Err(Some(error)) => Err(error),
        }
    }

    /// Closes (as [`Backend::close`]) and lets go of this node's shards and
    /// its place in the membership, so that the other nodes take the shards
    /// at their next renewal (a quarter of a lease) rather than when the
    /// leases run out.
    pub async fn shutdown(&self) {
        self.close();
        self.leave().await;
    }

    /// Stops at once, as `kill -9` would: lets go of nothing, leaves the
    /// membership without a word. For tests of failover.
    #[doc(hidden)]
    pub fn crash(&self) {
        self.owned.abort_all();
        self.close();
    }

    fn conn(&self) -> Conn {
        self.conn.clone()
    }

    /// Notes Redis's time, read in a reply.
    fn saw_time(&self, redis_ms: u64) {
        self.offset.lock().saw(redis_ms as i64 - SystemWallClock.now_ms() as i64);
    }

    /// Redis's clock minus this node's, in ms, as estimated.
    fn offset_ms(&self) -> i64 {
        self.offset.lock().estimate()
    }

    /// Redis's time now, as this node estimates it.
    fn redis_ms(&self) -> u64 {
        (SystemWallClock.now_ms() as i64 + self.offset_ms()).max(0) as u64
    }

    fn check_open(&self) -> Result<(), QueueError> {
        if self.closed.load(Ordering::SeqCst) {
            Err(QueueError::ShuttingDown)
        } else {
            Ok(())
        }
    }

    fn split(&self, id: u64) -> Result<(u16, u64), QueueError> {
        keys::split(id, self.shards).ok_or(QueueError::NotFound(id))
    }

    fn remember(&self, id: u64, queue: &Arc<str>) {
        let mut queue_of = self.queue_of.lock();
        if queue_of.len() >= QUEUE_OF_MAX {
            queue_of.clear();
        }
        queue_of.insert(id, queue.clone());
    }

    fn count(&self, queue: &str, change: impl FnOnce(&mut Counters)) {
        let mut counters = self.counters.lock();
        if let Some(counters) = counters.get_mut(queue) {
            change(counters);
        } else if counters.len() < QUEUES_MAX {
            change(counters.entry(queue.into()).or_default());
        }
    }

    /// Adds `queue` to the registry (once per node), within [`QUEUES_MAX`].
    async fn register(&self, queue: &str, pause: Option<&str>) -> Result<(), QueueError> {
        if pause.is_none() && self.known_queues.lock().contains(queue) {
            return Ok(());
        }
        let mut invocation = SCRIPTS.queues.key(self.keys.global("queues"));
        invocation.arg(if pause.is_some() { "pause" } else { "use" }).arg(queue).arg(QUEUES_MAX);
        if let Some(pause) = pause {
            invocation.arg(pause);
        }
        let answer: String = invocation.invoke_async(&mut self.conn()).await.map_err(storage)?;
        if answer != "ok" {
            return Err(QueueError::Invalid(format!("at most {QUEUES_MAX} queues")));
        }
        self.known_queues.lock().insert(queue.into());
        Ok(())
    }
}

impl Drop for RedisBackend {
    /// The timer thread holds only the alarms: it stops with the backend even
    /// if nobody closed it.
    fn drop(&mut self) {
        self.alarms.close();
    }
}

#[async_trait]
impl Tasks for RedisBackend {
    async fn enqueue_batch(&self, queue: &str, batch: Vec<NewTask>) -> Result<Vec<Enqueued>, QueueError> {
        self.check_open()?;
        validate::queue_name(queue)?;
        let times: Vec<(RunAt, Option<RunAt>)> = batch.iter().map(|new| (new.run_at, new.expires)).collect();
        let checked = validate::batch(batch, self.options.limits.payload_bytes_max, self.redis_ms())?;
        self.register(queue, None).await?;
        // Tasks with a key go to their key's shard; the others with the
        // first of those, or to the next shard in turn: one shard, one
        // atomic script, unless keys send a batch to several.
        let turn = (self.next_shard.fetch_add(1, Ordering::Relaxed) % u64::from(self.shards)) as u16;
        let home = checked.iter().find_map(|t| t.key.as_deref()).map_or(turn, |key| key_shard(queue, key, self.shards));
        let mut by_shard: Vec<(u16, Vec<_>)> = Vec::new();
        for (at, (task, (run_at, expires))) in checked.into_iter().zip(times).enumerate() {
            let shard = task.key.as_deref().map_or(home, |key| key_shard(queue, key, self.shards));
            match by_shard.iter_mut().find(|(s, _)| *s == shard) {
                Some((_, tasks)) => tasks.push((at, task, run_at, expires)),
                None => by_shard.push((shard, vec![(at, task, run_at, expires)])),
            }
        }
        let mut done = Vec::new();
        for (shard, tasks) in &by_shard {
            done.extend(self.enqueue_shard(queue, *shard, tasks).await?);
        }
        done.sort_by_key(|(at, _)| *at);
        let created = done.iter().filter(|(_, e)| e.created).count() as u64;
        self.totals.lock().enqueued += created;
        self.count(queue, |c| c.enqueued += created);
        let name: Arc<str> = queue.into();
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
        let shard = key_shard(queue, key, self.shards);
        let seq: Option<u64> = self.conn().hget(self.keys.queue(shard, "k", queue), key).await.map_err(storage)?;
        match seq {
            Some(seq) => Ok(self.read(shard, &[seq]).await?.pop()),
            None => Ok(None),
        }
    }

    async fn cancel(&self, id: u64) -> Result<(), QueueError> {
        self.check_open()?;
        self.task(id, "cancel", &[]).await?;
        self.totals.lock().cancelled += 1;
        Ok(())
    }

    async fn cancel_unleased(&self, id: u64) -> Result<(), QueueError> {
        self.check_open()?;
        self.task(id, "cancel_unleased", &[]).await?;
        self.totals.lock().cancelled += 1;
        Ok(())
    }

    async fn reschedule(&self, id: u64, run_at: RunAt) -> Result<TaskInfo, QueueError> {
        self.check_open()?;
        let at_ms = validate::run_at(run_at, self.redis_ms())?;
        let (kind, ms) = match run_at {
            RunAt::Delay(ms) => ("d", ms),
            RunAt::At(_) => ("a", at_ms),
        };
        Ok(Self::info(self.task(id, "reschedule", &[kind.into(), ms.to_string()]).await?))
    }

    async fn retry(&self, id: u64) -> Result<TaskInfo, QueueError> {
        self.check_open()?;
        Ok(Self::info(self.task(id, "retry", &[]).await?))
    }

    async fn claim_from(&self, claim: Claim<'_>) -> Result<Vec<Claimed>, QueueError> {
        self.claim_tasks(claim).await
    }

    async fn take(&self, id: u64, lease_ms: u64) -> Result<Claimed, QueueError> {
        self.check_open()?;
        validate::lease(lease_ms)?;
        let info = Self::info(self.task(id, "take", &[lease_ms.to_string()]).await?);
        let hourglass_queue::TaskState::Leased { lease, until_ms } = info.task.state else {
            return Err(QueueError::Storage(Failure::msg("redis: a task taken but not leased")));
        };
        self.totals.lock().delivered += 1;
        self.count(&info.task.queue, |c| c.delivered += 1);
        Ok(Claimed {
            id,
            queue: info.task.queue,
            payload: info.payload,
            attempt: info.task.attempt,
            lease,
            lease_until_ms: until_ms,
            run_at_ms: info.task.run_at_ms,
        })
    }

    async fn ack(&self, id: u64, lease: Lease) -> Result<(), QueueError> {
        self.check_open()?;
        let (shard, _) = self.split(id)?;
        let done = self.task(id, "ack", &[record::token(lease, shard)]).await?;
        self.totals.lock().acked += 1;
        self.count(&done.record.task.queue, |c| c.acked += 1);
        self.queue_of.lock().remove(&id);
        Ok(())
    }

    async fn ack_each(&self, acks: &[(u64, Lease)]) -> Result<Vec<Result<(), QueueError>>, QueueError> {
        self.check_open()?;
        self.acks(acks).await
    }

    async fn nack(&self, id: u64, lease: Lease, nack: Nack) -> Result<TaskInfo, QueueError> {
        self.check_open()?;
        validate::delay(nack.delay_ms)?;
        validate::reason(nack.reason.as_deref())?;
        let (shard, _) = self.split(id)?;
        let optional = |value: Option<u64>| value.map(|v| v.to_string()).unwrap_or_default();
        let args = [
            record::token(lease, shard),
            optional(nack.delay_ms),
            nack.reason.as_deref().unwrap_or("").to_owned(),
            optional(nack.priority.map(u64::from)),
            if nack.dead { "1" } else { "0" }.to_owned(),
        ];
        let info = Self::info(self.task(id, "nack", &args).await?);
        let mut totals = self.totals.lock();
        totals.nacked += 1;
        if info.status == Status::Dead {
            totals.died += 1;
        }
        Ok(info)
    }

    async fn extend(&self, id: u64, lease: Lease, lease_ms: u64) -> Result<u64, QueueError> {
        self.check_open()?;
        validate::lease(lease_ms)?;
        let (shard, _) = self.split(id)?;
        let info = Self::info(self.task(id, "extend", &[record::token(lease, shard), lease_ms.to_string()]).await?);
        match info.task.state {
            hourglass_queue::TaskState::Leased { until_ms, .. } => Ok(until_ms),
            _ => Err(QueueError::Storage(Failure::msg("redis: a task extended but not leased"))),
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
        self.check_open()?;
        validate::queue_name(queue)?;
        let value = counts::stored_pause(pause);
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

    async fn delete_dead(&self, queue: &str, max: usize) -> Result<Vec<u64>, QueueError> {
        self.check_open()?;
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
        self.totals.lock().cancelled += deleted.len() as u64;
        Ok(deleted)
    }
}

#[async_trait]
impl Stats for RedisBackend {
    async fn queues(&self) -> Vec<QueueStats> {
        match self.registry().await {
            Ok(names) => match self.counts(&names).await {
                Ok(all) => {
                    let tasks = all.iter().map(|q| q.scheduled + q.due + q.leased + q.dead).sum();
                    *self.counted.lock() = Some((std::time::Instant::now(), tasks));
                    all
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot count the queues");
                    Vec::new()
                }
            },
            Err(error) => {
                tracing::warn!(%error, "cannot read the queues");
                Vec::new()
            }
        }
    }

    async fn queue(&self, name: &str) -> Option<QueueStats> {
        let pause: Option<String> = self.conn().hget(self.keys.global("queues"), name).await.ok()?;
        self.counts(&[(name.into(), pause?)]).await.ok()?.pop()
    }

    async fn totals(&self) -> Totals {
        let totals = *self.totals.lock();
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
}

impl Backend for RedisBackend {
    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.alarms.close();
        let _ = self.stop.send(true);
        self.watch.wake_all();
    }
}
