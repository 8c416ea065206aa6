//! Enqueues of one queue, grouped: while this node has [`IN_FLIGHT_MAX`]
//! enqueue scripts of a queue under way, the queue's next enqueues wait, and
//! go as one script when one of those ends (as many as [`BATCH_MAX`] tasks).
//!
//! Redis spends most of an enqueue script's cost on the script, not on its
//! tasks: the call, the reads of the shard's count and head, and the framing
//! of its writes in the append-only file. At 64 producers sending one task a
//! request, Redis spent 36 µs of CPU a task when each went alone, 19 µs when
//! they came five to a request (BENCHMARKS.md). An enqueue that finds fewer
//! scripts under way goes at once, alone: at low load nothing waits.
//!
//! What a reply means does not change. Each enqueue is answered after the
//! script that wrote its tasks, as durable as Redis's `appendfsync` makes it,
//! and nothing of it is visible before that script. A group that would pass
//! the shard's cap of tasks is sent again one enqueue at a time, so that each
//! is refused or taken as it would have been alone. Only enqueues without
//! keys are grouped: a key sends its task to the key's shard.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::oneshot;

use hourglass_queue::limits::BATCH_MAX;
use hourglass_queue::{Enqueued, QueueError};

use crate::tasks::Planned;
use crate::RedisBackend;

/// Enqueue scripts of one queue a node keeps under way before the queue's
/// next enqueues wait to go together.
pub(crate) const IN_FLIGHT_MAX: usize = 2;

/// Each task's place in its own batch, and what became of it.
type Answer = Result<Vec<(usize, Enqueued)>, QueueError>;

/// An enqueue waiting for its queue's next script.
struct Waiting {
    tasks: Vec<Planned>,
    answer: oneshot::Sender<Answer>,
}

/// When an enqueue goes: now, alone, or with the group it waits in.
enum Turn {
    Now(Vec<Planned>),
    Later(oneshot::Receiver<Answer>),
}

/// One queue's enqueue scripts under way, and the enqueues waiting to follow.
#[derive(Default)]
struct Queue {
    in_flight: usize,
    waiting: VecDeque<Waiting>,
}

/// Every queue with an enqueue under way on this node; a queue's entry goes
/// when its last script ends.
#[derive(Default)]
pub(crate) struct EnqueueGroups {
    queues: Mutex<HashMap<Arc<str>, Queue>>,
}

/// A script under way. Dropped, whether it ended or its caller went away, it
/// hands its place to the waiting enqueues, or gives it up.
struct InFlight<'a> {
    backend: &'a RedisBackend,
    queue: &'a Arc<str>,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.backend.script_ended(self.queue);
    }
}

impl RedisBackend {
    /// Enqueues `tasks` (none with a key) into `queue`, alone if fewer than
    /// [`IN_FLIGHT_MAX`] of the queue's scripts are under way, else with the
    /// enqueues that wait beside it.
    pub(crate) async fn enqueue_grouped(&self, queue: &Arc<str>, tasks: Vec<Planned>) -> Answer {
        debug_assert!(tasks.iter().all(|(_, task, ..)| task.key.is_none()), "a key decides its task's shard");
        let turn = {
            let mut queues = self.enqueue_groups.queues.lock();
            let state = queues.entry(queue.clone()).or_default();
            if state.in_flight < IN_FLIGHT_MAX && state.waiting.is_empty() {
                state.in_flight += 1;
                Turn::Now(tasks)
            } else {
                let (answer, answered) = oneshot::channel();
                state.waiting.push_back(Waiting { tasks, answer });
                Turn::Later(answered)
            }
        };
        match turn {
            Turn::Now(tasks) => {
                let _in_flight = InFlight { backend: self, queue };
                self.enqueue_shard(queue, self.next_turn(), &tasks).await
            }
            // The sender is dropped unanswered only when the backend is.
            Turn::Later(answered) => answered.await.unwrap_or(Err(QueueError::ShuttingDown)),
        }
    }

    /// A script of `queue` ended: the enqueues waiting first, up to
    /// [`BATCH_MAX`] tasks, go as the next, or the queue has one fewer under way.
    fn script_ended(&self, queue: &Arc<str>) {
        let group = {
            let mut queues = self.enqueue_groups.queues.lock();
            let Some(state) = queues.get_mut(queue) else { return };
            let mut group: Vec<Waiting> = Vec::new();
            let mut tasks = 0;
            while let Some(next) = state.waiting.front() {
                if !group.is_empty() && tasks + next.tasks.len() > BATCH_MAX {
                    break;
                }
                tasks += next.tasks.len();
                group.extend(state.waiting.pop_front());
            }
            if group.is_empty() {
                state.in_flight -= 1;
                if state.in_flight == 0 {
                    queues.remove(queue);
                }
                return;
            }
            group
        };
        // The place passes to the group, whose enqueues are answered from a
        // task of its own: none of their callers has to stay to send it.
        match (self.me.upgrade(), tokio::runtime::Handle::try_current()) {
            (Some(backend), Ok(runtime)) => {
                let queue = queue.clone();
                runtime.spawn(async move { backend.enqueue_group(&queue, group).await });
            }
            // The backend is going: the group's enqueues are answered that
            // it is shutting down, as their senders drop.
            _ => drop(group),
        }
    }

    /// Sends `group` as one script (or, past the shard's cap, one enqueue at
    /// a time) and answers each of its enqueues.
    async fn enqueue_group(&self, queue: &Arc<str>, group: Vec<Waiting>) {
        let _in_flight = InFlight { backend: self, queue };
        let mut lens = Vec::with_capacity(group.len());
        let mut answers = Vec::with_capacity(group.len());
        let mut tasks = Vec::with_capacity(group.iter().map(|waiting| waiting.tasks.len()).sum());
        for waiting in group {
            lens.push(waiting.tasks.len());
            answers.push(waiting.answer);
            tasks.extend(waiting.tasks);
        }
        match self.enqueue_shard(queue, self.next_turn(), &tasks).await {
            Ok(done) => {
                let mut done = done.into_iter();
                for (len, answer) in lens.into_iter().zip(answers) {
                    // An enqueue whose caller went away is still made: as alone.
                    let _ = answer.send(Ok(done.by_ref().take(len).collect()));
                }
            }
            Err(QueueError::TooManyTasks { .. }) if answers.len() > 1 => {
                let mut start = 0;
                for (len, answer) in lens.into_iter().zip(answers) {
                    let alone = self.enqueue_shard(queue, self.next_turn(), &tasks[start..start + len]).await;
                    let _ = answer.send(alone);
                    start += len;
                }
            }
            Err(error) => {
                for answer in answers {
                    let _ = answer.send(Err(error.clone()));
                }
            }
        }
    }
}
