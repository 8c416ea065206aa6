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
//!   settles it ([`settlement`]); requests for a pending task wait for that. So
//!   does a lease expiry, which nobody waits for. Claims alone are recorded
//!   without hiding anything: the consumer has the task at once, and losing
//!   the record of a claim in a crash only means the task is delivered again,
//!   which at-least-once allows.
//!
//! # Layout
//!
//! This file holds the [`Engine`] and the dispatch of the contract's traits;
//! each request's body is in the file of its concern:
//!
//! | file | what |
//! |------|------|
//! | `open.rs` | opening and recovery ([`OpenError`]) |
//! | `requests.rs` | the plumbing: try under the lock, wait for a settlement, send a change |
//! | `tasks.rs` | enqueue, read, list, and the changes a client waits for |
//! | `claims.rs` | claims (through the contract's long-poll) and takes |
//! | `timers.rs` | the timer thread and what it does under the lock |
//! | `schedules.rs` | schedule requests |
//! | `queues.rs` | pause, delete the dead, counts |
//! | `shared.rs` | what the engine, the writer and the timer thread share |
//! | `settlement.rs` | a change waiting for the store |
//! | `state/` | the state under the lock, behind its verbs, its invariants in `check.rs` |
//! | `schedule_table.rs` | the schedules by name and their timeline |
//! | `reads.rs` | payloads read from the store after the lock |

mod claims;
mod error;
mod open;
mod queues;
mod reads;
mod requests;
mod schedule_table;
mod schedules;
mod settlement;
mod shared;
mod state;
mod tasks;
mod timers;

use std::sync::Arc;

use async_trait::async_trait;
use hourglass::{TimerThread, WallClock};

use crate::store::{Committer, Fsync, Store};
use hourglass_queue::Limits;
use hourglass_queue::QueueError;
use hourglass_queue::{Backend, Claim, ListRequest, Page, QueueAdmin, SchedulePage, Schedules, Stats, Tasks};
use hourglass_queue::{Claimed, Closed, Enqueued, Lease, Nack, NewTask, Pause, RunAt, TaskInfo};
use hourglass_queue::{Expect, NewSchedule, ScheduleInfo};
use hourglass_queue::{QueueSettings, QueueStats, StorageStats, Totals};
use settlement::Settlement;
use shared::Shared;

pub use error::OpenError;

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
    closed: Closed,
}

impl Engine {
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

    /// Moves the wheel to now: files tasks that came due, expires leases.
    /// Returns the next time (Unix ms) anything may happen, if any. The timer
    /// thread calls it; tests may call it to step time by hand.
    pub fn poll_timers(&self) -> Option<u64> {
        self.poll(None)
    }

    /// Waits until every change sent to the store so far is settled: what the
    /// timer thread made (a schedule's occurrence, a lease expiry) is then
    /// visible. For tests, and for a shutdown that wants to see it through.
    pub async fn flushed(&self) {
        if let Ok(reply) = self.committer.send(Vec::new(), Settlement::Publish(Vec::new())) {
            self.committer.help();
            let _ = reply.await;
        }
    }

    /// Starts the timer thread: it sleeps on the engine's clock until the
    /// wheel's next expiration, or until an earlier one is added, and files
    /// what came due. It stops at [`close`](Backend::close), or when the
    /// returned [`TimerThread`] is stopped or dropped (which waits for it).
    ///
    /// # Errors
    /// If the thread cannot be started, or was started already.
    pub fn start_timers(self: &Arc<Self>) -> std::io::Result<TimerThread> {
        self.spawn_timer_thread()
    }
}

#[async_trait]
impl Tasks for Engine {
    async fn enqueue_batch(&self, queue: &str, batch: Vec<NewTask>) -> Result<Vec<Enqueued>, QueueError> {
        self.enqueue_tasks(queue, batch).await
    }

    async fn get(&self, id: u64) -> Result<TaskInfo, QueueError> {
        self.read_task(id).await
    }

    async fn find_by_key(&self, queue: &str, key: &str) -> Result<Option<TaskInfo>, QueueError> {
        self.find_task(queue, key).await
    }

    async fn cancel(&self, id: u64) -> Result<(), QueueError> {
        self.remove_task(id, true).await
    }

    async fn cancel_unleased(&self, id: u64) -> Result<(), QueueError> {
        self.remove_task(id, false).await
    }

    async fn reschedule(&self, id: u64, run_at: RunAt) -> Result<TaskInfo, QueueError> {
        self.reschedule_task(id, run_at).await
    }

    async fn retry(&self, id: u64) -> Result<TaskInfo, QueueError> {
        self.retry_task(id).await
    }

    async fn claim_from(&self, claim: Claim<'_>) -> Result<Vec<Claimed>, QueueError> {
        self.claim_tasks(claim).await
    }

    async fn take(&self, id: u64, lease_ms: u64) -> Result<Claimed, QueueError> {
        self.take_task(id, lease_ms).await
    }

    async fn ack(&self, id: u64, lease: Lease) -> Result<(), QueueError> {
        self.ack_task(id, lease).await
    }

    async fn nack(&self, id: u64, lease: Lease, nack: Nack) -> Result<TaskInfo, QueueError> {
        self.nack_task(id, lease, nack).await
    }

    async fn extend(&self, id: u64, lease: Lease, lease_ms: u64) -> Result<u64, QueueError> {
        self.extend_lease(id, lease, lease_ms).await
    }

    async fn list(&self, queue: &str, request: ListRequest) -> Result<Page, QueueError> {
        self.list_tasks(queue, request).await
    }
}

#[async_trait]
impl Schedules for Engine {
    async fn put_schedule(
        &self,
        name: &str,
        new: NewSchedule,
        expect: Expect<'_>,
    ) -> Result<(ScheduleInfo, bool), QueueError> {
        self.put(name, new, expect).await
    }

    async fn pause_schedule(&self, name: &str, paused: bool, expect: Expect<'_>) -> Result<ScheduleInfo, QueueError> {
        self.pause(name, paused, expect).await
    }

    async fn schedule(&self, name: &str) -> Result<ScheduleInfo, QueueError> {
        self.read_schedule(name)
    }

    async fn schedules_where(
        &self,
        after: Option<&str>,
        limit: usize,
        shown: &(dyn for<'q> Fn(&'q str) -> bool + Sync),
    ) -> Result<SchedulePage, QueueError> {
        self.list_schedules(after, limit, shown)
    }

    async fn delete_schedule(&self, name: &str, expect: Expect<'_>) -> Result<(), QueueError> {
        self.delete(name, expect).await
    }
}

#[async_trait]
impl QueueAdmin for Engine {
    async fn pause_queue(&self, queue: &str, pause: Pause) -> Result<QueueStats, QueueError> {
        self.pause_or_resume(queue, pause).await
    }

    async fn delete_dead(&self, queue: &str, max: usize) -> Result<Vec<u64>, QueueError> {
        self.delete_dead_tasks(queue, max).await
    }

    async fn settings(&self, queue: &str) -> Result<QueueSettings, QueueError> {
        self.queue_settings(queue)
    }

    async fn put_settings(&self, queue: &str, settings: QueueSettings) -> Result<QueueSettings, QueueError> {
        self.put_queue_settings(queue, settings).await
    }
}

#[async_trait]
impl Stats for Engine {
    async fn queues(&self) -> Vec<QueueStats> {
        self.all_queues()
    }

    async fn queue(&self, name: &str) -> Option<QueueStats> {
        self.one_queue(name)
    }

    async fn totals(&self) -> Totals {
        self.all_totals()
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
        self.closed.close();
        self.shared.timers.close();
        self.shared.state.lock().wake_all_claims();
    }
}
