//! Requests on tasks, claims apart (`claims.rs`): enqueue, read, list, and
//! the changes a client waits for (reschedule, retry, ack, nack, extend,
//! cancel), each through the request plumbing of `requests.rs`.

use hourglass_queue::retry::next_run_ms;
use hourglass_queue::validate;
use hourglass_queue::DeadReason;
use hourglass_queue::{Arrival, QueueError};
use hourglass_queue::{Enqueued, Lease, ListRequest, Nack, NewTask, Page, RunAt, TaskInfo, TaskState};

use super::reads::Reads;
use super::requests::{read_one, Access, Attempt};
use super::settlement::{Settlement, Why};
use super::state::enqueue::Admission;
use super::state::{fail_attempt, State};
use super::Engine;
use crate::store::Mutation;

impl Engine {
    /// Adds `batch` to `queue`, every task or none, in one durable write.
    pub(crate) async fn enqueue_tasks(&self, queue: &str, batch: Vec<NewTask>) -> Result<Vec<Enqueued>, QueueError> {
        validate::queue_name(queue)?;
        let arrival = Arrival::now(&*self.clock);
        let mut checked = validate::batch(batch, self.limits.payload_bytes_max, arrival)?;
        let now_ms = arrival.ms();
        self.when_settled(Access::Write, |state| {
            if let Err(closed) = self.closed.check() {
                return Attempt::Done(Err(closed));
            }
            match state.admit(queue, &mut checked, now_ms, &self.limits) {
                Err(refused) => Attempt::Done(Err(refused)),
                Ok(Admission::Wait) => Attempt::Wait,
                Ok(Admission::Existing(answer)) => Attempt::Done(Ok(answer)),
                Ok(Admission::New { answer, mutations, ids }) => {
                    state.debug_check();
                    Attempt::sent(self.send(state, mutations, Settlement::Publish(ids)), answer)
                }
            }
        })
        .await
    }

    /// Task `id` with its payload.
    pub(crate) async fn read_task(&self, id: u64) -> Result<TaskInfo, QueueError> {
        let (info, reads) =
            self.on_task(Access::Read, id, |state, id| Ok((self.answer(state, state.task(id))?, None))).await?;
        read_one(info, reads)
    }

    /// The live task of `queue` with key `key`, if any.
    pub(crate) async fn find_task(&self, queue: &str, key: &str) -> Result<Option<TaskInfo>, QueueError> {
        validate::queue_name(queue)?;
        validate::key(key)?;
        let find = |state: &State| state.key_holder(queue, key);
        let answer = |state: &mut State, id| Ok((self.answer(state, state.task(id))?, None));
        match self.settled(Access::Read, find, answer).await? {
            Some((info, reads)) => read_one(info, reads).map(Some),
            None => Ok(None),
        }
    }

    /// A page of `queue`'s tasks.
    pub(crate) async fn list_tasks(&self, queue: &str, request: ListRequest) -> Result<Page, QueueError> {
        validate::queue_name(queue)?;
        validate::list_limit(request.limit)?;
        let mut reads = Reads::new();
        let mut page = {
            let state = self.shared.state.lock();
            let page = state.list(queue, request, self.clock.now_ms(), &mut reads);
            reads.snapshot(&*self.store)?;
            page
        };
        reads.read(|at, payload| page.tasks[at].payload = payload)?;
        Ok(page)
    }

    /// Removes task `id`, refusing a leased one unless `leased_too`.
    pub(crate) async fn remove_task(&self, id: u64, leased_too: bool) -> Result<(), QueueError> {
        self.on_task(Access::Write, id, |state, id| {
            if !leased_too && state.is_leased(id) {
                return Err(QueueError::Conflict(format!("task {id} is leased: only its holder may remove it")));
            }
            Ok(((), Some((vec![Mutation::Delete(id)], Settlement::Remove { id, why: Why::Cancel }))))
        })
        .await
    }

    /// Moves a scheduled or dead task to `run_at`.
    pub(crate) async fn reschedule_task(&self, id: u64, run_at: RunAt) -> Result<TaskInfo, QueueError> {
        let run_at_ms = validate::run_at(run_at, Arrival::now(&*self.clock))?;
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

    /// Revives a dead task: due now, with its attempts reset.
    pub(crate) async fn retry_task(&self, id: u64) -> Result<TaskInfo, QueueError> {
        let now_ms = self.clock.now_ms();
        self.change(id, Why::Reschedule, |_, task| {
            if task.state != TaskState::Dead {
                return Err(QueueError::Conflict(format!("task {id} is not dead")));
            }
            // Retried by hand: it runs, however late.
            task.expires_at_ms = None;
            task.dead_reason = DeadReason::Attempts;
            task.attempt = 0;
            task.state = TaskState::Scheduled;
            task.run_at_ms = now_ms;
            Ok(())
        })
        .await
    }

    /// Finishes a delivery: the task is gone, or due at its next period if
    /// it repeats.
    pub(crate) async fn ack_task(&self, id: u64, lease: Lease) -> Result<(), QueueError> {
        let now_ms = self.clock.now_ms();
        self.on_task(Access::Write, id, |state, id| {
            state.check_lease(id, lease)?;
            let write = match state.every_ms(id) {
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

    /// Fails a delivery: due again after a delay or a backoff, or dead.
    pub(crate) async fn nack_task(&self, id: u64, lease: Lease, nack: Nack) -> Result<TaskInfo, QueueError> {
        validate::delay(nack.delay_ms)?;
        validate::reason(nack.reason.as_deref())?;
        let arrival = Arrival::now(&*self.clock);
        self.change(id, Why::Nack, |state, task| {
            state.check_lease(id, lease)?;
            if nack.dead {
                task.state = TaskState::Dead;
            } else {
                fail_attempt(task, arrival, nack.delay_ms);
            }
            task.last_error = nack.reason.clone();
            task.priority = nack.priority.unwrap_or(task.priority);
            Ok(())
        })
        .await
    }

    /// Extends a lease to `lease_ms` from now; returns its new end.
    pub(crate) async fn extend_lease(&self, id: u64, lease: Lease, lease_ms: u64) -> Result<u64, QueueError> {
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
}
