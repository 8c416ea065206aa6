//! The embedded backend: tasks in memory, timers in a [`hourglass::Wheel`],
//! every acknowledged change in a [`Store`] on this node's disk.
//!
//! # Implementation
//!
//! One lock guards the [`State`](state::State): every task by id, each queue's
//! due tasks (oldest due first), idempotency keys, leases, and one timing wheel
//! ticked in Unix milliseconds that holds both due times and lease expiries.
//! A dedicated timer thread sleeps on the [`WallClock`] until the wheel's next
//! expiration, to the microsecond (a runtime's millisecond timer would add up
//! to two milliseconds to every delivery); nothing polls.
//!
//! Two rules make a 2xx mean what it says:
//! - **A change reaches the store in the order it happened in memory.** Every
//!   change is handed to the writer while the lock that ordered it is held
//!   (see [`store`](crate::store)'s committer), whichever thread made it: a
//!   request, or the timer thread expiring a lease.
//! - **Nothing is visible before it is durable.** A change a client waits for
//!   (an enqueue and its key, a reschedule, a retry, a nack, an ack, a cancel)
//!   hides its task while it is written and takes effect only when the writer
//!   settles it ([`settle`]); requests for a pending task wait for that. So
//!   does a lease expiry, which nobody waits for. Claims alone are recorded
//!   without hiding anything: the consumer has the task at once, and losing
//!   the record of a claim in a crash only means the task is delivered again,
//!   which at-least-once allows.

mod check;
mod queue;
mod reads;
mod ready;
mod schedules;
mod settle;
mod slot;
mod state;
mod tasks;
mod timers;

use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hourglass::WallClock;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::store::StoreError;
use crate::store::{Committer, Fsync, Loaded, Mutation, Reply, Store};
use hourglass_queue::lateness::with_lateness;
use hourglass_queue::limits::{payload_inline, Limits, CLOCK_STEP_BACK_REBASE_MS, SCHEDULES_MAX, SCHEDULE_LIST_MAX};
use hourglass_queue::retry::next_run_ms;
use hourglass_queue::validate;
use hourglass_queue::QueueError;
use hourglass_queue::{Backend, Claim, ListRequest, Page, QueueAdmin, SchedulePage, Schedules, Stats, Tasks};
use hourglass_queue::{Claimed, Enqueued, Lease, Nack, NewTask, Pause, RunAt, Task, TaskInfo, TaskState};
use hourglass_queue::{NewSchedule, ScheduleInfo, Timetable};
use hourglass_queue::{QueueStats, StorageStats, Totals};
use reads::Reads;
use schedules::{Armed, Firing};
use settle::{EngineSettler, Settlement, Shared, Why};
use state::State;

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

/// The durable delay queue of one node: the embedded [`Backend`].
pub struct Engine {
    shared: Arc<Shared>,
    committer: Committer<Settlement>,
    /// Read directly for payloads kept apart; written only by the committer.
    store: Arc<dyn Store>,
    limits: Limits,
    clock: Arc<dyn WallClock>,
    closed: AtomicBool,
}

/// What a request does to a task it found settled: its answer, and a write
/// whose settlement the request waits for.
type Step<R> = Result<(R, Option<(Vec<Mutation>, Settlement)>), QueueError>;

/// Whether a request may write: only those wait for room at the writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    /// May send a change to the writer.
    Write,
}

/// What one try of a request under the lock came to.
enum Attempt<R> {
    /// Answered, with nothing to write.
    Done(Result<R, QueueError>),
    /// A write is on its way; this is the answer once it is settled.
    Sent(Reply, R),
    /// A task it needs has a change on its way: try again once settled.
    Wait,
}

impl Engine {
    /// Loads every stored task and starts the writer. Tasks that came due while
    /// the engine was down are due at once; leases do not survive a restart,
    /// so tasks that were leased are due again.
    ///
    /// # Errors
    /// [`StoreError`] if the store cannot be read; a corrupt record refuses the
    /// start with its id.
    pub fn open(store: Box<dyn Store>, options: Options, clock: Arc<dyn WallClock>) -> Result<Arc<Engine>, StoreError> {
        let store: Arc<dyn Store> = Arc::from(store);
        let now_ms = clock.now_ms();
        let mut state = State::new(now_ms);
        let mut too_many_queues = None;
        let next_id = store.load(&mut |task, payload| {
            let id = task.id;
            match state.queue_id(&task.queue) {
                Ok(queue) => {
                    // A store may hand over any payload inline: the engine's
                    // own rule decides what it keeps.
                    let (held, bytes) = match payload {
                        Loaded::Inline(payload) => {
                            let bytes = payload.len();
                            (payload_inline(bytes).then_some(payload), bytes)
                        }
                        Loaded::Apart(bytes) => (None, bytes),
                    };
                    state.insert(&task, held, bytes, queue);
                    state.reveal(id, now_ms);
                }
                Err(error) => too_many_queues = Some(error),
            }
        })?;
        if let Some(error) = too_many_queues {
            return Err(StoreError::Database(format!("the stored tasks use more queues than allowed: {error}")));
        }
        state.next_id = state.next_id.max(next_id);
        for (queue, until_ms) in store.load_paused()? {
            match state.queue_id(&queue) {
                Ok(queue_id) => {
                    let q = &mut state.queues[queue_id as usize];
                    q.paused = true;
                    q.paused_until_ms = until_ms;
                }
                Err(error) => {
                    return Err(StoreError::Database(format!("the paused queues are more than allowed: {error}")))
                }
            }
        }
        for schedule in store.load_schedules()? {
            match Timetable::of(&schedule.rule, schedule.since_ms) {
                Ok(timetable) => state.schedules.load(Armed { schedule, timetable }),
                // A time zone this machine's database lacks: the schedule stays
                // stored, and runs again once put again (or on a machine that has it).
                Err(error) => tracing::error!(
                    schedule = %schedule.name, %error, "a stored schedule cannot be read here: it does not run"
                ),
            }
        }
        state.debug_check();
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            settled: Notify::new(),
            timer_thread: std::sync::OnceLock::new(),
        });
        let settler = EngineSettler { shared: shared.clone(), clock: clock.clone() };
        let committer = Committer::start(store.clone(), options.fsync, settler)
            .map_err(|error| StoreError::Database(format!("cannot start the writer thread: {error}")))?;
        Ok(Arc::new(Engine { shared, committer, store, limits: options.limits, clock, closed: AtomicBool::new(false) }))
    }

    /// The engine's clock.
    pub fn clock(&self) -> &dyn WallClock {
        &*self.clock
    }

    /// Verifies every invariant of the engine's state; the error names the
    /// first one broken. For tests and the crash simulator.
    ///
    /// # Errors
    /// The broken invariant.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.shared.state.lock().check()
    }

    fn check_open(&self) -> Result<(), QueueError> {
        if self.is_closed() {
            Err(QueueError::ShuttingDown)
        } else {
            Ok(())
        }
    }

    /// The loop every request on tasks runs: wait for room at the writer
    /// (only a request that may write), then try under the lock; a try that
    /// finds a task it needs pending waits for the next settlement and tries
    /// again. A write sent under the lock is answered once the writer has
    /// settled it.
    async fn when_settled<R>(
        &self,
        access: Access,
        mut attempt: impl FnMut(&mut State) -> Attempt<R>,
    ) -> Result<R, QueueError> {
        loop {
            if access == Access::Write {
                self.committer.admit().await;
            }
            let settled = self.shared.settled.notified();
            let mut settled = pin!(settled);
            settled.as_mut().enable();
            let attempt = attempt(&mut self.shared.state.lock());
            match attempt {
                Attempt::Done(answer) => return answer,
                Attempt::Sent(reply, answer) => {
                    return match reply.await {
                        Ok(Ok(())) => Ok(answer),
                        Ok(Err(error)) => Err(crate::store::to_queue_error(&error)),
                        Err(_) => Err(QueueError::ShuttingDown),
                    };
                }
                Attempt::Wait => settled.await,
            }
        }
    }

    /// Runs `step` under the lock on the task `find` names, once no change of
    /// it is on its way to the store; hides the task and sends the write `step`
    /// asks for in the same critical section, and returns once it is settled.
    /// `Ok(None)` if `find` names no task.
    async fn settled<R>(
        &self,
        access: Access,
        find: impl Fn(&State) -> Option<u64>,
        mut step: impl FnMut(&mut State, u64) -> Step<R>,
    ) -> Result<Option<R>, QueueError> {
        self.when_settled(access, |state| {
            let Some(id) = find(state) else { return Attempt::Done(Ok(None)) };
            if state.pending(id) == Some(true) {
                return Attempt::Wait;
            }
            let (answer, write) = match step(state, id) {
                Ok(done) => done,
                Err(error) => return Attempt::Done(Err(error)),
            };
            let Some((mutations, settlement)) = write else {
                state.debug_check();
                return Attempt::Done(Ok(Some(answer)));
            };
            state.hide(id);
            state.debug_check();
            match self.committer.send(mutations, Some(settlement)) {
                Some(reply) => Attempt::Sent(reply, Some(answer)),
                None => {
                    state.reveal(id, self.clock.now_ms());
                    Attempt::Done(Err(QueueError::ShuttingDown))
                }
            }
        })
        .await
    }

    /// [`settled`](Engine::settled) on task `id`.
    async fn on_task<R>(
        &self,
        access: Access,
        id: u64,
        step: impl FnMut(&mut State, u64) -> Step<R>,
    ) -> Result<R, QueueError> {
        self.settled(access, |state| state.pending(id).map(|_| id), step).await?.ok_or(QueueError::NotFound(id))
    }

    /// A change of task `id` that the client waits for: `change` edits the
    /// task (or refuses); the answer is the task as it will be.
    async fn change(
        &self,
        id: u64,
        why: Why,
        change: impl Fn(&State, &mut Task) -> Result<(), QueueError>,
    ) -> Result<TaskInfo, QueueError> {
        let (info, reads) = self
            .on_task(Access::Write, id, |state, id| {
                let mut task = state.task(id);
                change(state, &mut task)?;
                let answer = self.answer(state, task.clone())?;
                Ok((answer, Some((vec![Mutation::Update(task.clone())], Settlement::Change { task, why }))))
            })
            .await?;
        read_one(info, reads)
    }

    /// Under the lock: the answer about a task, as `task` says it is, with its
    /// payload copied or noted to read after the lock.
    fn answer(&self, state: &State, task: Task) -> Result<(TaskInfo, Reads), QueueError> {
        let mut reads = Reads::new();
        let info = state.info(task, self.clock.now_ms(), &mut reads, 0);
        reads.snapshot(&*self.store)?;
        Ok((info, reads))
    }

    /// Moves the wheel to now: files tasks that came due, expires leases.
    /// Returns the next time (Unix ms) anything may happen, if any. The timer
    /// thread calls it; tests may call it to step time by hand.
    pub fn poll_timers(&self) -> Option<u64> {
        let now_ms = self.clock.now_ms();
        let mut state = self.shared.state.lock();
        let behind_ms = state.wheel.elapsed().saturating_sub(now_ms);
        if behind_ms >= CLOCK_STEP_BACK_REBASE_MS {
            let started = std::time::Instant::now();
            state.rebase_timers(now_ms);
            let timers = state.wheel.len();
            tracing::warn!(behind_ms, timers, took = ?started.elapsed(), "the wall clock stepped back: timers rebuilt");
        }
        // A smaller step back is waited out: the wheel's time never goes back,
        // and what it holds at or before its tick must not come out early.
        let waiting_out = state.wheel.elapsed() > now_ms;
        // Sent under the lock: a cancel that follows is written after these.
        // Nobody waits for the replies; the writer settles each change.
        let expired = if waiting_out { Vec::new() } else { state.expire(now_ms) };
        for (mutation, settlement) in expired {
            let Settlement::Change { task, why } = &settlement else { unreachable!("expiries are changes") };
            let id = task.id;
            match why {
                Why::Expired => tracing::debug!(task = id, queue = %task.queue, "not delivered by its expiry: dead"),
                _ => {
                    tracing::debug!(task = id, queue = %task.queue, attempt = task.attempt, dead = task.state == TaskState::Dead, "a lease expired")
                }
            }
            if self.committer.send(vec![mutation], Some(settlement)).is_none() {
                // The writer is gone: the store keeps the lease, and a restart
                // makes the task due.
                state.reveal(id, now_ms);
            }
        }
        for firing in state.fire_schedules(now_ms, &self.limits) {
            match firing {
                Firing::Write(mutations, settlement) => {
                    let Settlement::Fire { name, ids, skipped, .. } = &settlement else { unreachable!("firings fire") };
                    if *skipped > 0 {
                        tracing::info!(schedule = %name, skipped, enqueued = ids.len(), "occurrences missed");
                    }
                    let (name, ids) = (name.clone(), ids.clone());
                    if self.committer.send(mutations, Some(settlement)).is_none() {
                        // The writer is gone: the store keeps the schedule as
                        // it was, and a restart fires the occurrence.
                        for id in ids {
                            state.forget(id);
                        }
                        state.schedules.restore(&name, None);
                    }
                }
                Firing::Refused { name, error } => {
                    tracing::warn!(schedule = %name, %error, "a schedule's occurrence could not be enqueued; trying again");
                    state.retry_schedule(&name, now_ms);
                }
            }
        }
        state.debug_check();
        let schedule_ms = state.schedules.next_due();
        let wheel_ms = if waiting_out { Some(state.wheel.elapsed()) } else { state.wheel.next_expiration() };
        let next_ms = match (wheel_ms, schedule_ms) {
            (Some(wheel_ms), Some(schedule_ms)) => Some(wheel_ms.min(schedule_ms)),
            (wheel_ms, schedule_ms) => wheel_ms.or(schedule_ms),
        };
        // Set under the lock: a claim that adds a later deadline need not wake the thread.
        state.timers_wake_ms = next_ms.unwrap_or(u64::MAX);
        next_ms
    }

    /// Waits until every change sent to the store so far is settled: what the
    /// timer thread made (a schedule's occurrence, a lease expiry) is then
    /// visible. For tests, and for a shutdown that wants to see it through.
    pub async fn flushed(&self) {
        if let Some(reply) = self.committer.send(Vec::new(), Some(Settlement::Publish(Vec::new()))) {
            let _ = reply.await;
        }
    }

    /// Starts the timer thread: it sleeps on the engine's clock until the
    /// wheel's next expiration, or until an earlier one is added, and files
    /// what came due. It stops at [`close`](Backend::close).
    ///
    /// # Errors
    /// If the thread cannot be started.
    pub fn start_timers(self: &Arc<Self>) -> std::io::Result<std::thread::JoinHandle<()>> {
        timers::start(self.clone())
    }
}

#[async_trait]
impl Tasks for Engine {
    async fn enqueue_batch(&self, queue: &str, batch: Vec<NewTask>) -> Result<Vec<Enqueued>, QueueError> {
        validate::queue_name(queue)?;
        let now_ms = self.clock.now_ms();
        let mut checked = validate::batch(batch, self.limits.payload_bytes_max, now_ms)?;
        self.when_settled(Access::Write, |state| {
            if let Err(closed) = self.check_open() {
                return Attempt::Done(Err(closed));
            }
            // A key held by a task whose enqueue or change is still being
            // written: wait for it to settle, then look again.
            let waits = checked.iter().filter_map(|new| new.key.as_ref()).any(|key| {
                state.queue(queue).and_then(|q| q.keys.get(key)).is_some_and(|id| state.pending(*id) == Some(true))
            });
            if waits {
                return Attempt::Wait;
            }
            if state.tasks.len() + checked.len() > self.limits.tasks_max {
                return Attempt::Done(Err(QueueError::TooManyTasks { max: self.limits.tasks_max }));
            }
            let queue_id = match state.queue_id(queue) {
                Ok(queue_id) => queue_id,
                Err(error) => return Attempt::Done(Err(error)),
            };
            let name = state.queues[queue_id as usize].name.clone();
            let (memory_before, disk_before) = (state.memory_bytes, state.disk_bytes);
            let mut results = Vec::with_capacity(checked.len());
            let mut mutations = Vec::with_capacity(checked.len() + 1);
            let mut ids = Vec::with_capacity(checked.len());
            for new in &mut checked {
                let existing = new.key.as_ref().and_then(|key| state.queues[queue_id as usize].keys.get(key));
                if let Some(&id) = existing {
                    // A live task, or one earlier in this batch.
                    results.push(Enqueued { id, run_at_ms: state.tasks[&id].run_at_ms, created: false });
                    continue;
                }
                let task = Task {
                    id: state.next_id,
                    queue: name.clone(),
                    run_at_ms: new.run_at_ms,
                    attempt: 0,
                    max_attempts: new.max_attempts,
                    priority: new.priority,
                    lease_ms: new.lease_ms,
                    key: new.key.clone(),
                    every_ms: new.every_ms,
                    expires_at_ms: new.expires_at_ms,
                    expired: false,
                    last_error: None,
                    state: TaskState::Scheduled,
                    created_ms: now_ms,
                };
                results.push(Enqueued { id: task.id, run_at_ms: task.run_at_ms, created: true });
                ids.push(task.id);
                // Inserted once: a later try of this closure never gets here
                // again for this task, so the payload can move into its slot
                // (if small) and to the writer.
                let payload = std::mem::take(&mut new.payload);
                let bytes = payload.len();
                let held = payload_inline(bytes).then(|| payload.clone());
                state.insert(&task, held, bytes, queue_id);
                mutations.push(Mutation::Insert { task, payload });
            }
            if ids.is_empty() {
                return Attempt::Done(Ok(results));
            }
            if let Err(over) = state.within_budgets(&self.limits, memory_before, disk_before) {
                for id in ids {
                    state.forget(id);
                }
                return Attempt::Done(Err(over));
            }
            // Written with the tasks: ids stay retired across restarts even
            // when the newest tasks are gone by then.
            mutations.push(Mutation::NextId(state.next_id));
            state.debug_check();
            match self.committer.send(mutations, Some(Settlement::Publish(ids.clone()))) {
                Some(reply) => Attempt::Sent(reply, results),
                None => {
                    for id in ids {
                        state.forget(id);
                    }
                    Attempt::Done(Err(QueueError::ShuttingDown))
                }
            }
        })
        .await
    }

    async fn get(&self, id: u64) -> Result<TaskInfo, QueueError> {
        let (info, reads) =
            self.on_task(Access::Read, id, |state, id| Ok((self.answer(state, state.task(id))?, None))).await?;
        read_one(info, reads)
    }

    async fn find_by_key(&self, queue: &str, key: &str) -> Result<Option<TaskInfo>, QueueError> {
        validate::queue_name(queue)?;
        validate::key(key)?;
        let find = |state: &State| state.queue(queue).and_then(|q| q.keys.get(key).copied());
        let answer = |state: &mut State, id| Ok((self.answer(state, state.task(id))?, None));
        match self.settled(Access::Read, find, answer).await? {
            Some((info, reads)) => read_one(info, reads).map(Some),
            None => Ok(None),
        }
    }

    async fn cancel(&self, id: u64) -> Result<(), QueueError> {
        self.remove(id, true).await
    }

    async fn cancel_unleased(&self, id: u64) -> Result<(), QueueError> {
        self.remove(id, false).await
    }

    async fn reschedule(&self, id: u64, run_at: RunAt) -> Result<TaskInfo, QueueError> {
        let run_at_ms = validate::run_at(run_at, self.clock.now_ms())?;
        self.change(id, Why::Reschedule, |_, task| {
            match task.state {
                TaskState::Leased { .. } => {
                    return Err(QueueError::Conflict(format!("task {id} is leased: ack or nack it first")));
                }
                TaskState::Dead => task.attempt = 0,
                TaskState::Scheduled => {}
            }
            task.state = TaskState::Scheduled;
            task.run_at_ms = run_at_ms;
            Ok(())
        })
        .await
    }

    async fn retry(&self, id: u64) -> Result<TaskInfo, QueueError> {
        let now_ms = self.clock.now_ms();
        self.change(id, Why::Reschedule, |_, task| {
            if task.state != TaskState::Dead {
                return Err(QueueError::Conflict(format!("task {id} is not dead")));
            }
            // Retried by hand: it runs, however late.
            task.expires_at_ms = None;
            task.expired = false;
            task.attempt = 0;
            task.state = TaskState::Scheduled;
            task.run_at_ms = now_ms;
            Ok(())
        })
        .await
    }

    async fn claim_from(&self, claim: Claim<'_>) -> Result<Vec<Claimed>, QueueError> {
        self.claim_tasks(claim).await
    }

    async fn take(&self, id: u64, lease_ms: u64) -> Result<Claimed, QueueError> {
        validate::lease(lease_ms)?;
        let (mut claimed, reads, earlier) = self
            .on_task(Access::Write, id, |state, id| {
                if state.leases.contains_key(&id) {
                    return Err(QueueError::Conflict(format!("task {id} is leased")));
                }
                let (task, lease, until_ms) = state.lease(id, self.clock.now_ms(), lease_ms);
                // The timer thread sleeps to its next deadline: woken only for an earlier one.
                let earlier = until_ms < state.timers_wake_ms;
                let mut reads = Reads::new();
                let payload = reads.payload(&state.tasks[&id], id, 0);
                reads.snapshot(&*self.store)?;
                // Recorded without waiting, like any claim.
                self.committer.send(vec![Mutation::Update(task.clone())], None);
                let claimed = Claimed {
                    id,
                    queue: task.queue,
                    payload,
                    attempt: task.attempt,
                    lease,
                    lease_until_ms: until_ms,
                    run_at_ms: task.run_at_ms,
                };
                Ok(((claimed, reads, earlier), None))
            })
            .await?;
        if earlier {
            self.shared.wake_timers();
        }
        reads.read(|_, payload| claimed.payload = payload)?;
        Ok(claimed)
    }

    async fn ack(&self, id: u64, lease: Lease) -> Result<(), QueueError> {
        let now_ms = self.clock.now_ms();
        self.on_task(Access::Write, id, |state, id| {
            state.check_lease(id, lease)?;
            let write = match state.repeats.get(&id).copied() {
                Some(every_ms) => {
                    let mut task = state.task(id);
                    task.attempt = 0;
                    task.state = TaskState::Scheduled;
                    task.run_at_ms = next_run_ms(task.run_at_ms, every_ms, now_ms);
                    (vec![Mutation::Update(task.clone())], Settlement::Change { task, why: Why::Ack })
                }
                None => (vec![Mutation::Delete(id)], Settlement::Remove { id, why: Why::Ack }),
            };
            Ok(((), Some(write)))
        })
        .await
    }

    async fn nack(&self, id: u64, lease: Lease, nack: Nack) -> Result<TaskInfo, QueueError> {
        validate::delay(nack.delay_ms)?;
        validate::reason(nack.reason.as_deref())?;
        let now_ms = self.clock.now_ms();
        self.change(id, Why::Nack, |state, task| {
            state.check_lease(id, lease)?;
            if nack.dead {
                task.state = TaskState::Dead;
            } else {
                state::fail_attempt(task, now_ms, nack.delay_ms);
            }
            task.last_error = nack.reason.clone();
            task.priority = nack.priority.unwrap_or(task.priority);
            Ok(())
        })
        .await
    }

    async fn extend(&self, id: u64, lease: Lease, lease_ms: u64) -> Result<u64, QueueError> {
        validate::lease(lease_ms)?;
        self.on_task(Access::Read, id, |state, id| {
            state.check_lease(id, lease)?;
            let now_ms = self.clock.now_ms();
            let until_ms = now_ms + lease_ms;
            // Leases are not stored (a restart makes leased tasks due again),
            // so an extension has nothing to write.
            state.transition(id, now_ms, |task| task.state = TaskState::Leased { lease, until_ms });
            Ok((until_ms, None))
        })
        .await
    }

    async fn list(&self, queue: &str, request: ListRequest) -> Result<Page, QueueError> {
        validate::queue_name(queue)?;
        validate::list_limit(request.limit)?;
        let mut reads = Reads::new();
        let mut page = {
            let state = self.shared.state.lock();
            let Some(&queue_id) = state.queue_index.get(queue) else {
                return Ok(Page { tasks: Vec::new(), next: None });
            };
            let page = state.list(queue_id, request, self.clock.now_ms(), &mut reads);
            reads.snapshot(&*self.store)?;
            page
        };
        reads.read(|at, payload| page.tasks[at].payload = payload)?;
        Ok(page)
    }
}

#[async_trait]
impl Schedules for Engine {
    async fn put_schedule(&self, name: &str, new: NewSchedule) -> Result<(ScheduleInfo, bool), QueueError> {
        let now_ms = self.clock.now_ms();
        // Reading a cron rule and finding that it fires can take milliseconds
        // (an expression that never fires is searched to the year 5000): off
        // the runtime's threads.
        let (name_owned, payload_bytes_max) = (name.to_owned(), self.limits.payload_bytes_max);
        let checked = tokio::task::spawn_blocking(move || {
            hourglass_queue::check_schedule(&name_owned, new, payload_bytes_max, now_ms)
        })
        .await;
        let (schedule, timetable) = match checked {
            Ok(checked) => checked?,
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            Err(_) => return Err(QueueError::ShuttingDown),
        };
        let put = Armed { schedule, timetable };
        let (armed, created) = self
            .when_settled(Access::Write, |state| {
                if let Err(closed) = self.check_open() {
                    return Attempt::Done(Err(closed));
                }
                match state.schedules.pending(name) {
                    Some(true) => return Attempt::Wait,
                    None if state.schedules.len() >= SCHEDULES_MAX => {
                        return Attempt::Done(Err(QueueError::TooManySchedules { max: SCHEDULES_MAX }));
                    }
                    _ => {}
                }
                let old = state.schedules.get(name);
                let created = old.is_none();
                let mut armed = put.clone();
                // The overlap policy looks at the task of the latest occurrence,
                // whichever version made it; a paused schedule stays paused.
                armed.schedule.last = old.and_then(|old| old.schedule.last);
                armed.schedule.paused = old.is_some_and(|old| old.schedule.paused);
                // The new version counts from when the request came in; the
                // old one may have fired since (while this one was checked,
                // or waited for the writer). An occurrence it ran is not run
                // again: the new version's first is after it. (Its anchor,
                // `since_ms`, stays: a period counts from it.)
                if let Some((ran_ms, _)) = armed.schedule.last {
                    if armed.schedule.next_ms.is_some_and(|next_ms| next_ms <= ran_ms) {
                        armed.schedule.next_ms = armed.timetable.next_after(ran_ms);
                    }
                }
                let old_bytes = old.map_or(0, |old| schedules::bytes_of(&old.schedule));
                let held = state.memory_bytes + state.schedules.memory_bytes() - old_bytes;
                let adding = schedules::bytes_of(&armed.schedule);
                if held + adding > self.limits.memory_bytes_max {
                    let max = self.limits.memory_bytes_max;
                    return Attempt::Done(Err(QueueError::OverMemoryBudget { held, adding, max }));
                }
                state.schedules.hide(name);
                let mutation = Mutation::PutSchedule(armed.schedule.clone());
                match self.committer.send(vec![mutation], Some(Settlement::PutSchedule(armed.clone()))) {
                    Some(reply) => Attempt::Sent(reply, (armed, created)),
                    None => {
                        state.schedules.restore(name, None);
                        Attempt::Done(Err(QueueError::ShuttingDown))
                    }
                }
            })
            .await?;
        Ok((info_of(armed), created))
    }

    async fn pause_schedule(&self, name: &str, paused: bool) -> Result<ScheduleInfo, QueueError> {
        validate::schedule_name(name)?;
        let armed = self
            .when_settled(Access::Write, |state| {
                match state.schedules.pending(name) {
                    None => return Attempt::Done(Err(QueueError::ScheduleNotFound(name.to_owned()))),
                    Some(true) => return Attempt::Wait,
                    Some(false) => {}
                }
                let current = state.schedules.get(name).expect("a settled schedule is stored");
                if current.schedule.paused == paused {
                    return Attempt::Done(Ok(current.clone()));
                }
                let mut armed = current.clone();
                armed.schedule.paused = paused;
                state.schedules.hide(name);
                let mutation = Mutation::PutSchedule(armed.schedule.clone());
                match self.committer.send(vec![mutation], Some(Settlement::PutSchedule(armed.clone()))) {
                    Some(reply) => Attempt::Sent(reply, armed),
                    None => {
                        state.schedules.restore(name, None);
                        Attempt::Done(Err(QueueError::ShuttingDown))
                    }
                }
            })
            .await?;
        Ok(info_of(armed))
    }

    async fn schedule(&self, name: &str) -> Result<ScheduleInfo, QueueError> {
        validate::schedule_name(name)?;
        let armed = self.shared.state.lock().schedules.get(name).cloned();
        armed.map(info_of).ok_or_else(|| QueueError::ScheduleNotFound(name.to_owned()))
    }

    async fn schedules(&self, after: Option<&str>, limit: usize) -> Result<SchedulePage, QueueError> {
        validate::range("limit", limit as u64, 1, SCHEDULE_LIST_MAX as u64)?;
        let (page, more) = self.shared.state.lock().schedules.page(after, limit);
        let next = more.then(|| page.last().map(|armed| armed.schedule.name.clone())).flatten();
        // Occurrences are worked out after the lock: a page may hold a thousand.
        Ok(SchedulePage { schedules: page.into_iter().map(info_of).collect(), next })
    }

    async fn delete_schedule(&self, name: &str) -> Result<(), QueueError> {
        validate::schedule_name(name)?;
        self.when_settled(Access::Write, |state| {
            match state.schedules.pending(name) {
                None => return Attempt::Done(Err(QueueError::ScheduleNotFound(name.to_owned()))),
                Some(true) => return Attempt::Wait,
                Some(false) => {}
            }
            state.schedules.hide(name);
            let settlement = Settlement::DeleteSchedule(name.into());
            match self.committer.send(vec![Mutation::DeleteSchedule(name.into())], Some(settlement)) {
                Some(reply) => Attempt::Sent(reply, ()),
                None => {
                    state.schedules.restore(name, None);
                    Attempt::Done(Err(QueueError::ShuttingDown))
                }
            }
        })
        .await
    }
}

#[async_trait]
impl QueueAdmin for Engine {
    async fn pause_queue(&self, queue: &str, pause: Pause) -> Result<QueueStats, QueueError> {
        validate::queue_name(queue)?;
        let (paused, until_ms) = match pause {
            Pause::Resume => (false, None),
            Pause::Indefinitely => (true, None),
            Pause::Until(until_ms) => (true, Some(until_ms)),
        };
        let now_ms = self.clock.now_ms();
        let read = self
            .when_settled(Access::Write, |state| {
                if let Err(closed) = self.check_open() {
                    return Attempt::Done(Err(closed));
                }
                let queue_id = match state.queue_id(queue) {
                    Ok(queue_id) => queue_id,
                    Err(error) => return Attempt::Done(Err(error)),
                };
                let q = &mut state.queues[queue_id as usize];
                if q.pausing {
                    return Attempt::Wait;
                }
                let mut answer = q.stats(now_ms);
                if q.paused == paused && (!paused || q.paused_until_ms == until_ms) {
                    return Attempt::Done(Ok(answer));
                }
                q.pausing = true;
                answer.0.paused = hourglass_queue::paused_at(paused, until_ms, now_ms);
                answer.0.paused_until_ms = until_ms.filter(|_| answer.0.paused);
                let mutation = Mutation::PauseQueue { queue: queue.into(), paused, until_ms };
                let settlement = Settlement::PauseQueue { queue: queue_id, paused, until_ms };
                match self.committer.send(vec![mutation], Some(settlement)) {
                    Some(reply) => Attempt::Sent(reply, answer),
                    None => {
                        q.pausing = false;
                        Attempt::Done(Err(QueueError::ShuttingDown))
                    }
                }
            })
            .await?;
        Ok(with_lateness(vec![read]).remove(0))
    }

    async fn delete_dead(&self, queue: &str, max: usize) -> Result<Vec<u64>, QueueError> {
        validate::queue_name(queue)?;
        validate::list_limit(max)?;
        self.when_settled(Access::Write, |state| {
            if let Err(closed) = self.check_open() {
                return Attempt::Done(Err(closed));
            }
            // The dead set holds settled tasks only: a pending one is filed nowhere.
            let ids: Vec<u64> = match state.queue(queue) {
                Some(q) => q.dead.iter().take(max).copied().collect(),
                None => Vec::new(),
            };
            if ids.is_empty() {
                return Attempt::Done(Ok(ids));
            }
            for &id in &ids {
                state.hide(id);
            }
            state.debug_check();
            let mutations = ids.iter().map(|&id| Mutation::Delete(id)).collect();
            match self.committer.send(mutations, Some(Settlement::Purge(ids.clone()))) {
                Some(reply) => Attempt::Sent(reply, ids),
                None => {
                    let now_ms = self.clock.now_ms();
                    for &id in &ids {
                        state.reveal(id, now_ms);
                    }
                    Attempt::Done(Err(QueueError::ShuttingDown))
                }
            }
        })
        .await
    }
}

#[async_trait]
impl Stats for Engine {
    async fn queues(&self) -> Vec<QueueStats> {
        let now_ms = self.clock.now_ms();
        let state = self.shared.state.lock();
        let read: Vec<_> = state.queues.iter().map(|q| q.stats(now_ms)).collect();
        drop(state);
        let mut all = with_lateness(read);
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    async fn queue(&self, name: &str) -> Option<QueueStats> {
        let now_ms = self.clock.now_ms();
        let read = self.shared.state.lock().queue(name).map(|q| q.stats(now_ms));
        read.map(|read| with_lateness(vec![read]).remove(0))
    }

    async fn totals(&self) -> Totals {
        let state = self.shared.state.lock();
        Totals {
            tasks: state.held(),
            schedules: state.schedules.stored(),
            memory_bytes: state.memory_bytes + state.schedules.memory_bytes(),
            memory_bytes_max: Some(self.limits.memory_bytes_max),
            disk_bytes: state.disk_bytes,
            disk_bytes_max: self.limits.disk_bytes_max,
            ..state.totals
        }
    }

    async fn storage(&self) -> Option<StorageStats> {
        Some(self.committer.stats())
    }
}

impl Backend for Engine {
    fn as_schedules(&self) -> Option<&dyn Schedules> {
        Some(self)
    }

    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.shared.wake_timers();
        for queue in &self.shared.state.lock().queues {
            queue.notify.notify_waiters();
        }
    }
}

impl Engine {
    /// Removes task `id`, refusing a leased one unless `leased_too`.
    async fn remove(&self, id: u64, leased_too: bool) -> Result<(), QueueError> {
        self.on_task(Access::Write, id, |state, id| {
            if !leased_too && state.leases.contains_key(&id) {
                return Err(QueueError::Conflict(format!("task {id} is leased: only its holder may remove it")));
            }
            Ok(((), Some((vec![Mutation::Delete(id)], Settlement::Remove { id, why: Why::Cancel }))))
        })
        .await
    }

    /// Claims up to `max` due tasks from the one of `queues` whose next
    /// task comes first in claim order; waits up to `wait_ms` for one.
    async fn claim_tasks(&self, claim: Claim<'_>) -> Result<Vec<Claimed>, QueueError> {
        let (queues, max, lease_ms, wait_ms) = (claim.queues(), claim.max(), claim.lease_ms(), claim.wait_ms());
        let give_up = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
        loop {
            self.committer.admit().await;
            let notifies = {
                let mut state = self.shared.state.lock();
                if self.is_closed() {
                    return Ok(Vec::new());
                }
                // A claim that will not wait needs no state for a queue never used.
                if wait_ms == 0 && queues.iter().all(|queue| state.queue(queue).is_none()) {
                    return Ok(Vec::new());
                }
                let ids = queues.iter().map(|queue| state.queue_id(queue)).collect::<Result<Vec<u32>, _>>()?;
                let now_us = self.clock.now_us();
                let first =
                    ids.iter().filter_map(|&id| state.next_claimable(id, now_us / 1_000).map(|next| (next, id)));
                if let Some((_, queue_id)) = first.min() {
                    let mut reads = Reads::new();
                    let (mut claimed, updates) = state.claim(queue_id, max, now_us, lease_ms, &mut reads);
                    // The timer thread sleeps to its next deadline: woken only for an earlier one.
                    let earlier = claimed.iter().any(|claimed| claimed.lease_until_ms < state.timers_wake_ms);
                    // The leases and attempt counts are recorded without
                    // waiting: if a crash loses them, the tasks are simply
                    // delivered again. Sent under the lock, in order.
                    self.committer.send(updates, None);
                    state.debug_check();
                    // If the payloads cannot be read, the tasks stay leased
                    // and are delivered again when the lease runs out.
                    let snapshot = reads.snapshot(&*self.store);
                    drop(state);
                    if earlier {
                        self.shared.wake_timers();
                    }
                    snapshot?;
                    reads.read(|at, payload| claimed[at].payload = payload)?;
                    return Ok(claimed);
                }
                // A pause that ends by itself wakes nobody: the wait ends then.
                let now_ms = now_us / 1_000;
                let pause_ends = ids.iter().filter_map(|&id| {
                    let q = &state.queues[id as usize];
                    q.paused_until_ms.filter(|_| q.is_paused(now_ms)).map(|until_ms| until_ms - now_ms)
                });
                let resumes_in = pause_ends.min().map(Duration::from_millis);
                let notifies = ids.iter().map(|&id| state.queues[id as usize].notify.clone()).collect::<Vec<_>>();
                (notifies, resumes_in)
            };
            let (notifies, resumes_in) = notifies;
            let mut remaining = give_up.saturating_duration_since(tokio::time::Instant::now());
            let mut resuming = false;
            if let Some(resumes_in) = resumes_in.filter(|&resumes_in| resumes_in < remaining) {
                (remaining, resuming) = (resumes_in, true);
            }
            if remaining.is_zero() {
                return Ok(Vec::new());
            }
            // Enable the waits, then look again: a task filed in between is
            // seen by the second look, one filed after it wakes us.
            let mut woken: Vec<_> = notifies.iter().map(|notify| Box::pin(notify.notified())).collect();
            for wait in &mut woken {
                wait.as_mut().enable();
            }
            let claimable = {
                let state = self.shared.state.lock();
                let now_ms = self.clock.now_ms();
                queues
                    .iter()
                    .any(|queue| state.queue_id_of(queue).is_some_and(|id| state.next_claimable(id, now_ms).is_some()))
            };
            if claimable {
                continue;
            }
            if tokio::time::timeout(remaining, futures_util::future::select_all(woken)).await.is_err() && !resuming {
                return Ok(Vec::new());
            }
        }
    }

    /// Whether [`close`](Backend::close) was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

/// A schedule as a read shows it, with its next occurrences.
fn info_of(armed: Armed) -> ScheduleInfo {
    let upcoming_ms = armed.timetable.upcoming(armed.schedule.next_ms);
    ScheduleInfo { schedule: armed.schedule, upcoming_ms }
}

/// One task read under the lock, with its payload read from the store if it
/// is kept there.
fn read_one(mut info: TaskInfo, reads: Reads) -> Result<TaskInfo, QueueError> {
    reads.read(|_, payload| info.payload = payload)?;
    Ok(info)
}
