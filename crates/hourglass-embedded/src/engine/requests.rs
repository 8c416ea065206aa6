//! The plumbing every request on tasks runs: wait for room at the writer,
//! try under the lock, wait for a pending task's settlement and try again;
//! send a change under the lock that made it, and answer once it is settled.
//!
//! [`send`](Engine::send) is the one way a change that is settled reaches
//! the writer: whoever sends it (a request, or the timer thread), a change
//! the writer never took is settled at once as not durable, by
//! [`State::settle`], the same undo the writer runs for a failed write.

use std::pin::pin;

use super::reads::Reads;
use super::settlement::{Settlement, Why};
use super::state::State;
use super::Engine;
use crate::store::{Mutation, Reply};
use hourglass_queue::QueueError;
use hourglass_queue::{Task, TaskInfo};

/// What a request does to a task it found settled: its answer, and a write
/// whose settlement the request waits for.
pub(crate) type Step<R> = Result<(R, Option<(Vec<Mutation>, Settlement)>), QueueError>;

/// Whether a request may write: only those wait for room at the writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    /// May send a change to the writer.
    Write,
}

/// What one try of a request under the lock came to.
pub(crate) enum Attempt<R> {
    /// Answered, with nothing to write.
    Done(Result<R, QueueError>),
    /// A write is on its way; this is the answer once it is settled.
    Sent(Reply, R),
    /// A task it needs has a change on its way: try again once settled.
    Wait,
}

impl<R> Attempt<R> {
    /// A change [`send`](Engine::send) sent, answered `answer` once settled;
    /// or the refusal if the writer never took it.
    pub(crate) fn sent(sent: Result<Reply, QueueError>, answer: R) -> Attempt<R> {
        match sent {
            Ok(reply) => Attempt::Sent(reply, answer),
            Err(error) => Attempt::Done(Err(error)),
        }
    }
}

impl Engine {
    /// Sends a change to the writer, under the lock that made it (`state` is
    /// that lock's guard), to be settled by `settlement` once written.
    ///
    /// # Errors
    /// [`QueueError::ShuttingDown`] if the writer is gone: the change is
    /// settled at once as not durable (undone), and whoever waits for a
    /// settlement looks again.
    pub(crate) fn send(
        &self,
        state: &mut State,
        mutations: Vec<Mutation>,
        settlement: Settlement,
    ) -> Result<Reply, QueueError> {
        let unsent = match self.committer.send(mutations, settlement) {
            Ok(reply) => return Ok(reply),
            Err(unsent) => unsent,
        };
        state.settle(unsent, false, self.clock.now_ms());
        state.debug_check();
        self.shared.settled.notify_waiters();
        Err(QueueError::ShuttingDown)
    }

    /// The loop every request on tasks runs: wait for room at the writer
    /// (only a request that may write), then try under the lock; a try that
    /// finds a task it needs pending waits for the next settlement and tries
    /// again. A write sent under the lock is answered once the writer has
    /// settled it.
    pub(crate) async fn when_settled<R>(
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
            // Whatever the try sent, or recorded, is committed now if the
            // turn is free (the relaxed mode).
            self.committer.help();
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
    pub(crate) async fn settled<R>(
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
            Attempt::sent(self.send(state, mutations, settlement), Some(answer))
        })
        .await
    }

    /// [`settled`](Engine::settled) on task `id`.
    pub(crate) async fn on_task<R>(
        &self,
        access: Access,
        id: u64,
        step: impl FnMut(&mut State, u64) -> Step<R>,
    ) -> Result<R, QueueError> {
        self.settled(access, |state| state.pending(id).map(|_| id), step).await?.ok_or(QueueError::NotFound(id))
    }

    /// A change of task `id` that the client waits for: `change` edits the
    /// task (or refuses); the answer is the task as it will be.
    pub(crate) async fn change(
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
        // The change is made: a payload found damaged now does not make it
        // look failed; the answer shows it empty (the log says why).
        let mut info = info;
        let id = info.task.id;
        for damaged in reads.read_sound(|_, payload| info.payload = payload)? {
            tracing::error!(task = id, error = %damaged.error(), "a changed task's payload was found damaged: shown empty");
        }
        Ok(info)
    }

    /// Under the lock: the answer about a task, as `task` says it is, with its
    /// payload copied or noted to read after the lock.
    pub(crate) fn answer(&self, state: &State, task: Task) -> Result<(TaskInfo, Reads), QueueError> {
        let mut reads = Reads::new();
        let info = state.info(task, self.clock.now_ms(), &mut reads, 0);
        reads.snapshot(&*self.store)?;
        Ok((info, reads))
    }
}

/// One task read under the lock, with its payload read from the store if it
/// is kept there.
pub(crate) fn read_one(mut info: TaskInfo, reads: Reads) -> Result<TaskInfo, QueueError> {
    reads.read(|_, payload| info.payload = payload)?;
    Ok(info)
}
