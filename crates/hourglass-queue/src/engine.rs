//! The engine: tasks in memory, timers in a [`hourglass::Wheel`], every
//! acknowledged change in the [`Store`].
//!
//! # Implementation
//!
//! One lock guards the in-memory state: every task by id, each queue's due
//! tasks (oldest due first), idempotency keys, and one timing wheel ticked in
//! Unix milliseconds that holds both due times and lease expiries. The timer
//! task sleeps until the wheel's next expiration; nothing polls.
//!
//! A write is made durable through the [`Committer`] *outside* the lock, and
//! the client hears back only after it is. A new task is filed for delivery
//! only once its enqueue is durable, so a crash can never deliver a task whose
//! enqueue was not acknowledged. Claims and lease expiries are recorded without
//! waiting: losing one in a crash only means the task is delivered again,
//! which at-least-once allows.
//!
//! A dedicated timer thread sleeps until the wheel's next expiration, to the
//! microsecond: a runtime's millisecond timer would add up to two
//! milliseconds to every delivery.

use std::collections::{BTreeSet, HashMap};
use std::num::NonZeroU64;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use hourglass::{Key, Wheel};
use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::Notify;

use crate::clock::WallClock;
use crate::error::{QueueError, StoreError};
use crate::limits::*;
use crate::model::{raw_json, NewTask, RunAt, Task, TaskState, TaskView};
use crate::store::{Committer, Fsync, Mutation, Store, Wait};
use crate::tasks::Tasks;

/// How the engine is set up.
#[derive(Debug, Clone)]
pub struct Options {
    /// When acknowledged writes reach the disk.
    pub fsync: Fsync,
    /// Bounds on requests.
    pub limits: Limits,
}

impl Default for Options {
    fn default() -> Self {
        Options { fsync: Fsync::Always, limits: Limits::default() }
    }
}

/// The durable delay queue.
pub struct Engine {
    state: Mutex<State>,
    committer: Committer,
    limits: Limits,
    clock: Arc<dyn WallClock>,
    /// The timer thread, woken when a deadline earlier than its sleep appears.
    timer_thread: std::sync::OnceLock<std::thread::Thread>,
    closed: AtomicBool,
}

/// A task handed to a consumer by a claim.
#[derive(Debug, Clone, Serialize)]
pub struct Claimed {
    /// The task's id.
    pub id: u64,
    /// The task's queue.
    pub queue: String,
    /// The payload.
    pub payload: Box<serde_json::value::RawValue>,
    /// Which delivery this is, from 1.
    pub attempt: u32,
    /// The lease token to ack, nack or extend with (a string: 64-bit numbers
    /// lose precision in JavaScript).
    pub lease: String,
    /// When the lease ends and the task is delivered again, Unix ms.
    pub lease_until_ms: u64,
    /// When the task was due, Unix ms.
    pub run_at_ms: u64,
}

/// The result of an enqueue.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct Enqueued {
    /// The task's id.
    pub id: u64,
    /// When it is due, Unix ms.
    pub run_at_ms: u64,
    /// `false` when the idempotency key matched a live task, which is returned instead.
    #[serde(skip)]
    pub created: bool,
}

/// Counts and lateness of one queue.
#[derive(Debug, Clone, Serialize)]
pub struct QueueStats {
    /// The queue's name.
    pub name: String,
    /// Scheduled and not yet due.
    pub scheduled: usize,
    /// Due and waiting for a claim.
    pub due: usize,
    /// Handed out under a lease.
    pub leased: usize,
    /// Out of attempts.
    pub dead: usize,
    /// The due time of the oldest due task, Unix ms.
    pub oldest_due_ms: Option<u64>,
    /// From due time to delivery, over this queue's claims.
    pub lateness: LatenessMs,
}

/// Lateness percentiles in milliseconds (fractional).
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct LatenessMs {
    /// Deliveries measured.
    pub samples: u64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Latest.
    pub max: f64,
}

/// Counters since the engine started.
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct Totals {
    /// Tasks enqueued.
    pub enqueued: u64,
    /// Deliveries by claims.
    pub delivered: u64,
    /// Acks.
    pub acked: u64,
    /// Nacks.
    pub nacked: u64,
    /// Leases that expired.
    pub lease_expired: u64,
    /// Tasks that ran out of attempts.
    pub died: u64,
    /// Tasks cancelled.
    pub cancelled: u64,
    /// Tasks held now.
    pub tasks: usize,
}

/// A task as the engine keeps it in memory: 56 bytes. The queue is an index,
/// the counters are small, and the rarer parts (a lease, an idempotency key, a
/// repeat period) live in side tables; [`State::task`] puts a whole [`Task`]
/// back together.
struct Slot {
    run_at_ms: u64,
    created_ms: u64,
    /// The raw wheel key of the due time or lease expiry; [`NO_TIMER`] if none.
    timer: u64,
    /// A plain box: an `Arc` would add 16 bytes of counts to every task.
    payload: Box<str>,
    queue: u32,
    attempt: u16,
    max_attempts: u16,
    phase: Phase,
    /// Filed for delivery: false until its enqueue is durable.
    published: bool,
    keyed: bool,
}

const _: () = assert!(std::mem::size_of::<Slot>() <= 56);
const _: () = assert!(std::mem::size_of::<Option<Slot>>() == std::mem::size_of::<Slot>());

/// No wheel entry: an index no wheel ever hands out.
const NO_TIMER: u64 = u64::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Scheduled,
    Leased,
    Dead,
}

#[derive(Debug, Clone, Copy)]
struct Lease {
    token: u64,
    until_ms: u64,
}

struct QueueState {
    name: Arc<str>,
    /// Due tasks, by (due time, id): claims take the oldest due first.
    ready: BTreeSet<(u64, u64)>,
    keys: HashMap<Box<str>, u64>,
    dead: BTreeSet<u64>,
    scheduled: usize,
    leased: usize,
    notify: Arc<Notify>,
    /// Allocated on the first claim.
    lateness_us: Option<Box<Histogram<u32>>>,
}

struct State {
    tasks: Tasks<Slot>,
    /// The period of each repeating task.
    repeats: HashMap<u64, u64>,
    queues: Vec<QueueState>,
    queue_index: HashMap<Arc<str>, u32>,
    leases: HashMap<u64, Lease>,
    /// The key of each task that has one.
    keys: HashMap<u64, Box<str>>,
    wheel: Wheel<NonZeroU64>,
    /// Never reused: persisted with every enqueue, so acked ids stay retired
    /// across restarts.
    next_id: u64,
    totals: Totals,
}

/// Longest lateness the per-queue histograms record exactly: a day.
const LATENESS_US_MAX: u64 = 86_400_000_000;

fn lateness_histogram() -> Box<Histogram<u32>> {
    Box::new(Histogram::new_with_bounds(1, LATENESS_US_MAX, 2).expect("valid histogram bounds"))
}

impl Engine {
    /// Loads every stored task and starts the writer. Tasks that came due while
    /// the engine was down are due at once.
    ///
    /// # Errors
    /// [`StoreError`] if the store cannot be read; a corrupt record refuses the
    /// start with its id.
    pub fn open(store: Box<dyn Store>, options: Options, clock: Arc<dyn WallClock>) -> Result<Arc<Engine>, StoreError> {
        let now_ms = clock.now_ms();
        let mut wheel = Wheel::new();
        wheel.advance(now_ms);
        let mut state = State {
            tasks: Tasks::new(),
            repeats: HashMap::new(),
            queues: Vec::new(),
            queue_index: HashMap::new(),
            leases: HashMap::new(),
            keys: HashMap::new(),
            wheel,
            next_id: 1,
            totals: Totals::default(),
        };
        let mut too_many_queues = None;
        let next_id = store.load(&mut |task| {
            let id = task.id;
            state.next_id = state.next_id.max(id + 1);
            match state.queue_id(&task.queue) {
                Ok(queue) => {
                    state.insert(task, queue);
                    state.publish(id, now_ms);
                }
                Err(error) => too_many_queues = Some(error),
            }
        })?;
        if let Some(error) = too_many_queues {
            return Err(StoreError::Database(format!("the stored tasks use more queues than allowed: {error}")));
        }
        state.next_id = state.next_id.max(next_id);
        let committer =
            Committer::start(store, options.fsync).map_err(|error| StoreError::Database(error.to_string()))?;
        Ok(Arc::new(Engine {
            state: Mutex::new(state),
            committer,
            limits: options.limits,
            clock,
            timer_thread: std::sync::OnceLock::new(),
            closed: AtomicBool::new(false),
        }))
    }

    /// The engine's clock.
    pub fn clock(&self) -> &dyn WallClock {
        &*self.clock
    }

    /// Adds a task to `queue`. Returns once it is durable; a key that matches a
    /// live task of the queue returns that task instead (`created: false`).
    ///
    /// # Errors
    /// [`QueueError::Invalid`], [`QueueError::PayloadTooLarge`],
    /// [`QueueError::TooManyTasks`], [`QueueError::Storage`].
    pub async fn enqueue(&self, queue: &str, new: NewTask) -> Result<Enqueued, QueueError> {
        let mut done = self.enqueue_batch(queue, vec![new]).await?;
        Ok(done.pop().expect("one task in, one out"))
    }

    /// Adds every task or none: one durable write for the batch.
    ///
    /// # Errors
    /// As [`enqueue`](Engine::enqueue); the first invalid task fails the batch.
    pub async fn enqueue_batch(&self, queue: &str, batch: Vec<NewTask>) -> Result<Vec<Enqueued>, QueueError> {
        if batch.is_empty() || batch.len() > BATCH_MAX {
            return Err(QueueError::Invalid(format!("a batch holds 1 to {BATCH_MAX} tasks, not {}", batch.len())));
        }
        check_queue_name(queue)?;
        let now_ms = self.clock.now_ms();
        let tasks: Vec<Task> = batch
            .into_iter()
            .enumerate()
            .map(|(i, new)| {
                self.check_new(new, now_ms).map_err(|error| match error {
                    QueueError::Invalid(message) if i > 0 => QueueError::Invalid(format!("task {i}: {message}")),
                    other => other,
                })
            })
            .collect::<Result<_, _>>()?;
        let (results, puts) = {
            let mut state = self.state.lock();
            self.check_open()?;
            let new_tasks = tasks.len();
            if state.tasks.len() + new_tasks > self.limits.tasks_max {
                return Err(QueueError::TooManyTasks { max: self.limits.tasks_max });
            }
            let queue_id = state.queue_id(queue)?;
            let name = state.queues[queue_id as usize].name.clone();
            let mut results = Vec::with_capacity(new_tasks);
            let mut puts = Vec::with_capacity(new_tasks + 1);
            for mut task in tasks {
                let existing = task.key.as_ref().and_then(|key| state.queues[queue_id as usize].keys.get(key).copied());
                if let Some(id) = existing {
                    let run_at_ms = state.tasks[&id].run_at_ms;
                    results.push(Enqueued { id, run_at_ms, created: false });
                    continue;
                }
                let id = state.next_id;
                state.next_id += 1;
                task.id = id;
                task.queue = name.clone();
                results.push(Enqueued { id, run_at_ms: task.run_at_ms, created: true });
                puts.push(Mutation::Put(task.clone()));
                state.insert(task, queue_id);
            }
            // Written with the tasks: ids stay retired across restarts even
            // when the newest tasks are gone by then.
            puts.push(Mutation::NextId(state.next_id));
            (results, puts)
        };
        let ids: Vec<u64> =
            puts.iter().filter_map(|m| if let Mutation::Put(t) = m { Some(t.id) } else { None }).collect();
        let committed = self.committer.commit(puts, Wait::Durable).await;
        let mut state = self.state.lock();
        let now_ms = self.clock.now_ms();
        let mut earliest = u64::MAX;
        for &id in &ids {
            match committed {
                Ok(()) => {
                    if let Some(slot) = state.tasks.get(&id) {
                        earliest = earliest.min(slot.run_at_ms);
                        state.totals.enqueued += 1;
                        state.publish(id, now_ms);
                    }
                }
                Err(_) => {
                    state.forget(id);
                }
            }
        }
        drop(state);
        committed?;
        self.timer_added(earliest);
        Ok(results)
    }

    /// The task, as the API shows it.
    ///
    /// # Errors
    /// [`QueueError::NotFound`].
    pub fn get(&self, id: u64) -> Result<TaskView, QueueError> {
        let state = self.state.lock();
        state.tasks.get(&id).ok_or(QueueError::NotFound(id))?;
        Ok(state.task(id).view(self.clock.now_ms()))
    }

    /// Cancels (deletes) the task, whatever its state.
    ///
    /// # Errors
    /// [`QueueError::NotFound`], [`QueueError::Storage`].
    pub async fn cancel(&self, id: u64) -> Result<(), QueueError> {
        {
            let mut state = self.state.lock();
            state.forget(id).ok_or(QueueError::NotFound(id))?;
            state.totals.cancelled += 1;
        }
        self.committer.commit(vec![Mutation::Delete(id)], Wait::Durable).await
    }

    /// Moves a scheduled (or dead, which revives it) task to a new due time.
    ///
    /// # Errors
    /// [`QueueError::NotFound`], [`QueueError::Conflict`] for a leased task,
    /// [`QueueError::Invalid`], [`QueueError::Storage`].
    pub async fn reschedule(&self, id: u64, run_at: RunAt) -> Result<TaskView, QueueError> {
        let now_ms = self.clock.now_ms();
        let run_at_ms = resolve_run_at(run_at, now_ms)?;
        let (task, view) = {
            let mut state = self.state.lock();
            let slot = state.tasks.get(&id).filter(|s| s.published).ok_or(QueueError::NotFound(id))?;
            if slot.phase == Phase::Leased {
                return Err(QueueError::Conflict(format!("task {id} is leased: ack or nack it first")));
            }
            state.transition(id, now_ms, |task| {
                if task.state == TaskState::Dead {
                    task.attempt = 0;
                }
                task.state = TaskState::Scheduled;
                task.run_at_ms = run_at_ms;
            });
            let task = state.task(id);
            let view = task.view(now_ms);
            (task, view)
        };
        self.timer_added(run_at_ms);
        self.committer.commit(vec![Mutation::Put(task)], Wait::Durable).await?;
        Ok(view)
    }

    /// Moves a dead task back to scheduled, due now, with its attempts reset.
    ///
    /// # Errors
    /// [`QueueError::NotFound`], [`QueueError::Conflict`] if it is not dead,
    /// [`QueueError::Storage`].
    pub async fn retry(&self, id: u64) -> Result<TaskView, QueueError> {
        {
            let state = self.state.lock();
            let slot = state.tasks.get(&id).filter(|s| s.published).ok_or(QueueError::NotFound(id))?;
            if slot.phase != Phase::Dead {
                return Err(QueueError::Conflict(format!("task {id} is not dead")));
            }
        }
        self.reschedule(id, RunAt::Delay(0)).await
    }

    /// Hands out up to `max` due tasks of `queue`, oldest due first, each under
    /// a lease of `lease_ms`. With none due, waits up to `wait_ms` and returns
    /// as soon as one comes due.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] for arguments out of range.
    pub async fn claim(
        &self,
        queue: &str,
        max: usize,
        lease_ms: u64,
        wait_ms: u64,
    ) -> Result<Vec<Claimed>, QueueError> {
        check_queue_name(queue)?;
        check_range("max", max as u64, 1, CLAIM_MAX as u64)?;
        check_range("lease_ms", lease_ms, LEASE_MS_MIN, LEASE_MS_MAX)?;
        check_range("wait_ms", wait_ms, 0, WAIT_MS_MAX)?;
        let give_up = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
        loop {
            let notify;
            let (claimed, puts) = {
                let mut state = self.state.lock();
                if self.closed.load(Ordering::SeqCst) {
                    return Ok(Vec::new());
                }
                let now_us = self.clock.now_us();
                // A claim that will not wait needs no state for a queue never used.
                if wait_ms == 0 && state.queue(queue).is_none() {
                    return Ok(Vec::new());
                }
                let queue_id = state.queue_id(queue)?;
                let (claimed, puts) = state.claim(queue_id, max, now_us, lease_ms);
                notify = state.queues[queue_id as usize].notify.clone();
                (claimed, puts)
            };
            if !claimed.is_empty() {
                self.timer_added(claimed.iter().map(|c| c.lease_until_ms).min().unwrap_or(u64::MAX));
                // The lease and attempt count are recorded without waiting: if
                // they are lost in a crash, the task is simply delivered again.
                // On a runtime thread: the async form waits off the runtime if
                // the writer's queue is full.
                self.committer.commit(puts, Wait::No).await?;
                return Ok(claimed);
            }
            let remaining = give_up.saturating_duration_since(tokio::time::Instant::now());
            if remaining.is_zero() {
                return Ok(Vec::new());
            }
            // Enable the wait, then look again: a task filed in between is seen
            // by the second look, one filed after it wakes us.
            let mut woken = pin!(notify.notified());
            woken.as_mut().enable();
            if self.state.lock().queue(queue).is_some_and(|q| !q.ready.is_empty()) {
                continue;
            }
            if tokio::time::timeout(remaining, woken).await.is_err() {
                return Ok(Vec::new());
            }
        }
    }

    /// Finishes a delivery: the task is removed (a repeating one is scheduled
    /// at its next occurrence). Durable when it returns.
    ///
    /// # Errors
    /// [`QueueError::NotFound`], [`QueueError::StaleLease`] (nothing changed),
    /// [`QueueError::Storage`].
    pub async fn ack(&self, id: u64, lease: &str) -> Result<(), QueueError> {
        let token = parse_lease(lease)?;
        let now_ms = self.clock.now_ms();
        let (mutation, next) = {
            let mut state = self.state.lock();
            state.check_lease(id, token)?;
            state.totals.acked += 1;
            match state.repeats.get(&id).copied() {
                Some(every_ms) => {
                    state.transition(id, now_ms, |task| {
                        task.attempt = 0;
                        task.state = TaskState::Scheduled;
                        task.run_at_ms = next_occurrence(task.run_at_ms, every_ms, now_ms);
                    });
                    let task = state.task(id);
                    let next = task.run_at_ms;
                    (Mutation::Put(task), next)
                }
                None => {
                    state.forget(id);
                    (Mutation::Delete(id), u64::MAX)
                }
            }
        };
        self.timer_added(next);
        self.committer.commit(vec![mutation], Wait::Durable).await
    }

    /// Gives a delivery back: the task is due again after `delay_ms` (or a
    /// backoff that doubles with each attempt), or dead if out of attempts.
    ///
    /// # Errors
    /// [`QueueError::NotFound`], [`QueueError::StaleLease`], [`QueueError::Invalid`],
    /// [`QueueError::Storage`].
    pub async fn nack(&self, id: u64, lease: &str, delay_ms: Option<u64>) -> Result<TaskView, QueueError> {
        let token = parse_lease(lease)?;
        if let Some(delay_ms) = delay_ms {
            check_range("delay_ms", delay_ms, 0, DELAY_MS_MAX)?;
        }
        let now_ms = self.clock.now_ms();
        let (task, view) = {
            let mut state = self.state.lock();
            state.check_lease(id, token)?;
            state.totals.nacked += 1;
            state.fail_attempt(id, now_ms, delay_ms);
            let task = state.task(id);
            let view = task.view(now_ms);
            (task, view)
        };
        self.timer_added(task.run_at_ms);
        self.committer.commit(vec![Mutation::Put(task)], Wait::Durable).await?;
        Ok(view)
    }

    /// Extends a lease to `lease_ms` from now; returns the new end.
    ///
    /// # Errors
    /// [`QueueError::NotFound`], [`QueueError::StaleLease`], [`QueueError::Invalid`].
    pub fn extend(&self, id: u64, lease: &str, lease_ms: u64) -> Result<u64, QueueError> {
        let token = parse_lease(lease)?;
        check_range("lease_ms", lease_ms, LEASE_MS_MIN, LEASE_MS_MAX)?;
        let until_ms = self.clock.now_ms() + lease_ms;
        let mut state = self.state.lock();
        state.check_lease(id, token)?;
        let now_ms = self.clock.now_ms();
        state.transition(id, now_ms, |task| task.state = TaskState::Leased { token, until_ms });
        Ok(until_ms)
    }

    /// Dead tasks of `queue`, oldest id first, at most `limit`.
    pub fn dead(&self, queue: &str, limit: usize) -> Vec<TaskView> {
        let state = self.state.lock();
        let now_ms = self.clock.now_ms();
        let Some(q) = state.queue(queue) else { return Vec::new() };
        q.dead.iter().take(limit.min(LIST_MAX)).map(|&id| state.task(id).view(now_ms)).collect()
    }

    /// Every queue's counts.
    pub fn queues(&self) -> Vec<QueueStats> {
        let state = self.state.lock();
        let mut all: Vec<QueueStats> = state.queues.iter().map(QueueState::stats).collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// One queue's counts; `None` if it was never used.
    pub fn queue(&self, name: &str) -> Option<QueueStats> {
        let state = self.state.lock();
        state.queue(name).map(QueueState::stats)
    }

    /// Counters since start.
    pub fn totals(&self) -> Totals {
        let state = self.state.lock();
        Totals { tasks: state.tasks.len(), ..state.totals }
    }

    /// Moves the wheel to now: files tasks that came due, expires leases.
    /// Returns the next time (Unix ms) anything may happen, if any.
    pub fn poll_timers(&self) -> Option<u64> {
        let now_ms = self.clock.now_ms();
        let (puts, next) = {
            let mut state = self.state.lock();
            let puts = state.expire(now_ms);
            (puts, state.wheel.next_expiration())
        };
        // Like claims, lease expiries need not wait for the disk.
        let _ = self.committer.submit(puts);
        next
    }

    /// Starts the timer thread: it sleeps until the wheel's next expiration
    /// (to the microsecond, not to a runtime's millisecond tick), or until an
    /// earlier one is added, and files what came due. It stops at
    /// [`close`](Engine::close).
    ///
    /// # Errors
    /// If the thread cannot be started.
    pub fn start_timers(self: &Arc<Self>) -> std::io::Result<std::thread::JoinHandle<()>> {
        let engine = self.clone();
        let thread = std::thread::Builder::new().name("hourglass-timers".into()).spawn(move || {
            // Registered before the first look at the wheel, so no wake-up is lost.
            let _ = engine.timer_thread.set(std::thread::current());
            while !engine.closed.load(Ordering::SeqCst) {
                match engine.poll_timers() {
                    Some(next_ms) => {
                        let wait_us = (next_ms * 1_000).saturating_sub(engine.clock.now_us());
                        if wait_us > 0 {
                            std::thread::park_timeout(Duration::from_micros(wait_us));
                        }
                    }
                    None => std::thread::park(),
                }
            }
        })?;
        Ok(thread)
    }

    /// Stops handing out tasks and accepting writes, and wakes every waiting
    /// claim. Writes already accepted still reach the disk before the engine is
    /// dropped.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.wake_timers();
        for queue in &self.state.lock().queues {
            queue.notify.notify_waiters();
        }
    }

    fn check_open(&self) -> Result<(), QueueError> {
        if self.closed.load(Ordering::SeqCst) {
            Err(QueueError::ShuttingDown)
        } else {
            Ok(())
        }
    }

    /// Wakes the timer thread if `deadline_ms` may be earlier than its sleep.
    fn timer_added(&self, deadline_ms: u64) {
        if deadline_ms != u64::MAX {
            self.wake_timers();
        }
    }

    fn wake_timers(&self) {
        if let Some(thread) = self.timer_thread.get() {
            thread.unpark();
        }
    }

    fn check_new(&self, new: NewTask, now_ms: u64) -> Result<Task, QueueError> {
        let payload = new.payload.get();
        if payload.len() > self.limits.payload_bytes_max {
            return Err(QueueError::PayloadTooLarge { bytes: payload.len(), max: self.limits.payload_bytes_max });
        }
        let run_at_ms = resolve_run_at(new.run_at, now_ms)?;
        if let Some(key) = &new.key {
            if key.is_empty() || key.len() > KEY_BYTES_MAX {
                return Err(QueueError::Invalid(format!("key must be 1 to {KEY_BYTES_MAX} bytes")));
            }
        }
        let max_attempts = new.max_attempts.unwrap_or(MAX_ATTEMPTS_DEFAULT);
        check_range("max_attempts", u64::from(max_attempts), 1, u64::from(MAX_ATTEMPTS_MAX))?;
        if let Some(every_ms) = new.every_ms {
            check_range("every_ms", every_ms, EVERY_MS_MIN, DELAY_MS_MAX)?;
        }
        Ok(Task {
            id: 0,
            queue: Arc::from(""),
            payload: Arc::from(payload),
            run_at_ms,
            attempt: 0,
            max_attempts,
            key: new.key.map(String::into_boxed_str),
            every_ms: new.every_ms,
            state: TaskState::Scheduled,
            created_ms: now_ms,
        })
    }
}

impl State {
    /// The index of `queue`, creating its state if new.
    fn queue_id(&mut self, queue: &str) -> Result<u32, QueueError> {
        if let Some(&id) = self.queue_index.get(queue) {
            return Ok(id);
        }
        if self.queues.len() >= QUEUES_MAX {
            return Err(QueueError::Invalid(format!("there are already {QUEUES_MAX} queues")));
        }
        let name: Arc<str> = Arc::from(queue);
        let id = self.queues.len() as u32;
        self.queues.push(QueueState {
            name: name.clone(),
            ready: BTreeSet::new(),
            keys: HashMap::new(),
            dead: BTreeSet::new(),
            scheduled: 0,
            leased: 0,
            notify: Arc::new(Notify::new()),
            lateness_us: None,
        });
        self.queue_index.insert(name, id);
        Ok(id)
    }

    fn queue(&self, name: &str) -> Option<&QueueState> {
        self.queue_index.get(name).map(|&id| &self.queues[id as usize])
    }

    /// The whole task, put back together from its slot and the side tables.
    /// Copies the payload: for what is shown or stored.
    fn task(&self, id: u64) -> Task {
        Task { payload: Arc::from(&*self.tasks[&id].payload), ..self.shell(id) }
    }

    /// The task without its payload (an empty string in its place): for
    /// changes, which never touch the payload, so that they do not copy it.
    fn shell(&self, id: u64) -> Task {
        static NO_PAYLOAD: std::sync::OnceLock<Arc<str>> = std::sync::OnceLock::new();
        let slot = &self.tasks[&id];
        let state = match slot.phase {
            Phase::Scheduled => TaskState::Scheduled,
            Phase::Leased => {
                let lease = self.leases[&id];
                TaskState::Leased { token: lease.token, until_ms: lease.until_ms }
            }
            Phase::Dead => TaskState::Dead,
        };
        Task {
            id,
            queue: self.queues[slot.queue as usize].name.clone(),
            payload: NO_PAYLOAD.get_or_init(|| Arc::from("")).clone(),
            run_at_ms: slot.run_at_ms,
            attempt: u32::from(slot.attempt),
            max_attempts: u32::from(slot.max_attempts),
            key: if slot.keyed { self.keys.get(&id).cloned() } else { None },
            every_ms: self.repeats.get(&id).copied(),
            state,
            created_ms: slot.created_ms,
        }
    }

    /// Stores a new, unpublished task.
    fn insert(&mut self, task: Task, queue: u32) {
        let id = task.id;
        let keyed = task.key.is_some();
        if let Some(key) = task.key.clone() {
            self.queues[queue as usize].keys.insert(key.clone(), id);
            self.keys.insert(id, key);
        }
        let slot = Slot {
            run_at_ms: 0,
            created_ms: task.created_ms,
            timer: NO_TIMER,
            payload: Box::from(&*task.payload),
            queue,
            attempt: 0,
            max_attempts: 0,
            phase: Phase::Scheduled,
            published: false,
            keyed,
        };
        self.tasks.insert(id, slot);
        self.write_back(&task);
    }

    /// Copies what may change about a task into its slot and side tables.
    fn write_back(&mut self, task: &Task) {
        match task.every_ms {
            Some(every_ms) => self.repeats.insert(task.id, every_ms),
            None => self.repeats.remove(&task.id),
        };
        let slot = self.tasks.get_mut(&task.id).expect("a known task");
        slot.run_at_ms = task.run_at_ms;
        // Attempts are bounded by MAX_ATTEMPTS_MAX, far below u16::MAX.
        slot.attempt = u16::try_from(task.attempt).unwrap_or(u16::MAX);
        slot.max_attempts = u16::try_from(task.max_attempts).unwrap_or(u16::MAX);
        slot.phase = match task.state {
            TaskState::Scheduled => Phase::Scheduled,
            TaskState::Leased { .. } => Phase::Leased,
            TaskState::Dead => Phase::Dead,
        };
        match task.state {
            TaskState::Leased { token, until_ms } => {
                self.leases.insert(task.id, Lease { token, until_ms });
            }
            TaskState::Scheduled | TaskState::Dead => {
                self.leases.remove(&task.id);
            }
        }
    }

    /// Files a task for delivery and counts it.
    fn publish(&mut self, id: u64, now_ms: u64) {
        self.tasks.get_mut(&id).expect("publishing a known task").published = true;
        self.file(id, now_ms);
    }

    /// Removes the task from everything; `None` if there was no such task.
    fn forget(&mut self, id: u64) -> Option<()> {
        if self.tasks.get(&id)?.published {
            self.unfile(id);
        }
        let slot = self.tasks.remove(&id).expect("a known task");
        self.leases.remove(&id);
        self.repeats.remove(&id);
        if let Some(key) = self.keys.remove(&id) {
            self.queues[slot.queue as usize].keys.remove(&key);
        }
        Some(())
    }

    /// Changes a published task in place, keeping counts and timers right.
    fn transition(&mut self, id: u64, now_ms: u64, change: impl FnOnce(&mut Task)) {
        self.unfile(id);
        let mut task = self.shell(id);
        change(&mut task);
        self.write_back(&task);
        self.file(id, now_ms);
    }

    /// Puts the task where its state says: the ready set, the wheel, or the dead set.
    fn file(&mut self, id: u64, now_ms: u64) {
        let lease_until_ms = self.leases.get(&id).map(|lease| lease.until_ms);
        let slot = self.tasks.get_mut(&id).expect("filing a known task");
        let (queue, run_at_ms, phase) = (slot.queue, slot.run_at_ms, slot.phase);
        let timer_at = match phase {
            Phase::Scheduled if run_at_ms > now_ms => Some(run_at_ms),
            Phase::Leased => lease_until_ms,
            Phase::Scheduled | Phase::Dead => None,
        };
        let wheel_id = NonZeroU64::new(id).expect("ids start at 1");
        slot.timer = timer_at
            .map_or(NO_TIMER, |at| self.wheel.insert(at, wheel_id).expect("below the wheel's capacity").into_raw());
        let q = &mut self.queues[queue as usize];
        match phase {
            Phase::Scheduled => {
                q.scheduled += 1;
                if timer_at.is_none() {
                    q.ready.insert((run_at_ms, id));
                    q.notify.notify_waiters();
                }
            }
            Phase::Leased => q.leased += 1,
            Phase::Dead => {
                q.dead.insert(id);
            }
        }
    }

    /// Undoes [`file`](State::file).
    fn unfile(&mut self, id: u64) {
        let slot = self.tasks.get_mut(&id).expect("unfiling a known task");
        if slot.timer != NO_TIMER {
            self.wheel.remove(Key::from_raw(slot.timer));
            slot.timer = NO_TIMER;
        }
        let q = &mut self.queues[slot.queue as usize];
        match slot.phase {
            Phase::Scheduled => {
                q.scheduled -= 1;
                q.ready.remove(&(slot.run_at_ms, id));
            }
            Phase::Leased => q.leased -= 1,
            Phase::Dead => {
                q.dead.remove(&id);
            }
        }
    }

    fn claim(&mut self, queue: u32, max: usize, now_us: u64, lease_ms: u64) -> (Vec<Claimed>, Vec<Mutation>) {
        let now_ms = now_us / 1_000;
        let until_ms = now_ms + lease_ms;
        let mut claimed = Vec::new();
        let mut puts = Vec::new();
        while claimed.len() < max {
            let Some((run_at_ms, id)) = self.queues[queue as usize].ready.first().copied() else { break };
            let token: u64 = rand::random();
            self.transition(id, now_ms, |task| {
                task.attempt += 1;
                task.state = TaskState::Leased { token, until_ms };
            });
            let q = &mut self.queues[queue as usize];
            let lateness_us = now_us.saturating_sub(run_at_ms * 1_000).clamp(1, LATENESS_US_MAX);
            q.lateness_us.get_or_insert_with(lateness_histogram).saturating_record(lateness_us);
            let task = self.task(id);
            claimed.push(Claimed {
                id,
                queue: task.queue.to_string(),
                payload: raw_json(&task.payload),
                attempt: task.attempt,
                lease: format!("{token:016x}"),
                lease_until_ms: until_ms,
                run_at_ms,
            });
            puts.push(Mutation::Put(task));
        }
        self.totals.delivered += claimed.len() as u64;
        (claimed, puts)
    }

    fn check_lease(&self, id: u64, token: u64) -> Result<(), QueueError> {
        self.tasks.get(&id).filter(|s| s.published).ok_or(QueueError::NotFound(id))?;
        match self.leases.get(&id) {
            Some(lease) if lease.token == token => Ok(()),
            _ => Err(QueueError::StaleLease(id)),
        }
    }

    /// A delivery failed: due again after a backoff, or dead if out of attempts.
    fn fail_attempt(&mut self, id: u64, now_ms: u64, delay_ms: Option<u64>) {
        let slot = &self.tasks[&id];
        let dead = slot.attempt >= slot.max_attempts;
        let backoff_ms = delay_ms.unwrap_or_else(|| backoff_ms(u32::from(slot.attempt)));
        if dead {
            self.totals.died += 1;
        }
        self.transition(id, now_ms, |task| {
            if dead {
                task.state = TaskState::Dead;
            } else {
                task.state = TaskState::Scheduled;
                task.run_at_ms = now_ms + backoff_ms;
            }
        });
    }

    /// Advances the wheel; returns what must be recorded.
    fn expire(&mut self, now_ms: u64) -> Vec<Mutation> {
        self.wheel.advance(now_ms);
        let mut puts = Vec::new();
        while let Some(expired) = self.wheel.pop_expired() {
            let id = expired.value.get();
            let Some(slot) = self.tasks.get_mut(&id) else { continue };
            slot.timer = NO_TIMER;
            match slot.phase {
                Phase::Scheduled => {
                    let (queue, run_at_ms) = (slot.queue, slot.run_at_ms);
                    let q = &mut self.queues[queue as usize];
                    q.ready.insert((run_at_ms, id));
                    q.notify.notify_waiters();
                }
                Phase::Leased => {
                    self.totals.lease_expired += 1;
                    // The wheel has consumed the timer; unfile sees none.
                    self.fail_attempt(id, now_ms, None);
                    puts.push(Mutation::Put(self.task(id)));
                }
                Phase::Dead => {}
            }
        }
        puts
    }
}

impl QueueState {
    fn stats(&self) -> QueueStats {
        let lateness = self.lateness_us.as_ref().filter(|h| !h.is_empty()).map_or(LatenessMs::default(), |h| {
            let ms = |us: u64| us as f64 / 1_000.0;
            LatenessMs {
                samples: h.len(),
                p50: ms(h.value_at_quantile(0.5)),
                p99: ms(h.value_at_quantile(0.99)),
                max: ms(h.max()),
            }
        });
        QueueStats {
            name: self.name.to_string(),
            scheduled: self.scheduled - self.ready.len(),
            due: self.ready.len(),
            leased: self.leased,
            dead: self.dead.len(),
            oldest_due_ms: self.ready.first().map(|&(run_at_ms, _)| run_at_ms),
            lateness,
        }
    }
}

/// The most queues at once.
pub const QUEUES_MAX: usize = 1_000;

fn check_queue_name(queue: &str) -> Result<(), QueueError> {
    let valid = !queue.is_empty()
        && queue.len() <= QUEUE_NAME_BYTES_MAX
        && queue.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
    if valid {
        Ok(())
    } else {
        Err(QueueError::Invalid(format!(
            "a queue name is 1 to {QUEUE_NAME_BYTES_MAX} characters of A-Z, a-z, 0-9, _ - . :"
        )))
    }
}

fn check_range(field: &str, value: u64, min: u64, max: u64) -> Result<(), QueueError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(QueueError::Invalid(format!("{field} must be within {min} ..= {max}, not {value}")))
    }
}

fn resolve_run_at(run_at: RunAt, now_ms: u64) -> Result<u64, QueueError> {
    match run_at {
        RunAt::Delay(delay_ms) => {
            check_range("delay_ms", delay_ms, 0, DELAY_MS_MAX)?;
            Ok(now_ms + delay_ms)
        }
        RunAt::At(at_ms) => {
            check_range("run_at_ms", at_ms, 0, now_ms + DELAY_MS_MAX)?;
            Ok(at_ms)
        }
    }
}

fn parse_lease(lease: &str) -> Result<u64, QueueError> {
    if lease.len() != 16 {
        return Err(QueueError::Invalid("lease must be the 16-digit token a claim returned".into()));
    }
    u64::from_str_radix(lease, 16).map_err(|_| QueueError::Invalid("lease must be the token a claim returned".into()))
}

/// Retry delay after failed attempt `attempt` (from 1): doubles, capped.
fn backoff_ms(attempt: u32) -> u64 {
    let doublings = attempt.saturating_sub(1).min(32);
    BACKOFF_BASE_MS.saturating_mul(1 << doublings).min(BACKOFF_MAX_MS)
}

/// The first occurrence of a fixed-rate task after `now_ms`: missed ones are skipped.
fn next_occurrence(run_at_ms: u64, every_ms: u64, now_ms: u64) -> u64 {
    let next = run_at_ms + every_ms;
    if next > now_ms {
        next
    } else {
        run_at_ms + ((now_ms - run_at_ms) / every_ms + 1) * every_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff_ms(1), 1_000);
        assert_eq!(backoff_ms(2), 2_000);
        assert_eq!(backoff_ms(5), 16_000);
        assert_eq!(backoff_ms(40), BACKOFF_MAX_MS);
    }

    #[test]
    fn repeats_skip_missed_occurrences() {
        assert_eq!(next_occurrence(1_000, 100, 1_050), 1_100);
        assert_eq!(next_occurrence(1_000, 100, 1_350), 1_400);
        assert_eq!(next_occurrence(1_000, 100, 1_400), 1_500);
    }

    #[test]
    fn names_and_leases_are_checked() {
        assert!(check_queue_name("emails.v2:eu-west_1").is_ok());
        assert!(check_queue_name("").is_err());
        assert!(check_queue_name("has space").is_err());
        assert!(check_queue_name(&"q".repeat(QUEUE_NAME_BYTES_MAX + 1)).is_err());
        assert_eq!(parse_lease("00000000000000ff"), Ok(255));
        assert!(parse_lease("ff").is_err());
        assert!(parse_lease("zzzzzzzzzzzzzzzz").is_err());
    }
}
