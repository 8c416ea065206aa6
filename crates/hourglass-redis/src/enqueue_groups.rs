//! Enqueues of one queue, grouped: while this node has [`IN_FLIGHT_MAX`]
//! enqueue scripts of a queue under way, the queue's next enqueues wait, and
//! go as one script when one of those ends (up to [`BATCH_MAX`] tasks and
//! [`GROUP_BYTES_MAX`] bytes of payload).
//!
//! Redis spends most of an enqueue script's cost on the script, not on its
//! tasks: the call, the reads of the shard's count and head, and the framing
//! of its writes in the append-only file. At 64 producers sending one task a
//! request, Redis spent 35 µs of CPU a task when each went alone
//! (BENCHMARKS.md). An enqueue that finds fewer scripts under way goes at
//! once, alone: at low load nothing waits.
//!
//! What a reply means does not change. Each enqueue is answered after the
//! script that wrote its tasks, as durable as Redis's `appendfsync` makes it,
//! and nothing of it is visible before that script. An enqueue whose caller
//! went away before its group was sent is left out, as it would not have
//! been sent alone. A group that would pass the shard's cap of tasks is sent
//! again one enqueue a script, all at once, so that each is refused or taken
//! as it would have been alone. Only enqueues without keys are grouped: a key
//! sends its task to the key's shard.
//!
//! A caller that goes away while its own script is under way gives its place
//! to the next group at once, so for a moment a queue may have more than
//! [`IN_FLIGHT_MAX`] scripts under way.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Weak};

use futures_util::future::join_all;
use parking_lot::Mutex;
use tokio::runtime::Handle;
use tokio::sync::oneshot;

use hourglass_queue::limits::BATCH_MAX;
use hourglass_queue::{Enqueued, QueueError};

use crate::tasks::Planned;
use crate::RedisBackend;

/// Enqueue scripts of one queue a node keeps under way before the queue's
/// next enqueues wait to go together.
pub(crate) const IN_FLIGHT_MAX: usize = 2;

/// Bytes of payload a group holds at most (unless its first enqueue alone
/// holds more): a script's arguments are held whole by Redis as it reads them.
pub(crate) const GROUP_BYTES_MAX: usize = 4 << 20;

/// Each task's place in its own batch, and what became of it.
type Answer = Result<Vec<(usize, Enqueued)>, QueueError>;

/// An enqueue waiting for its queue's next script.
struct Waiting {
    tasks: Vec<Planned>,
    bytes: usize,
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
pub(crate) struct EnqueueGroups {
    queues: Mutex<HashMap<Arc<str>, Queue>>,
    /// The runtime the backend was connected on, which sends the groups.
    runtime: Handle,
}

impl EnqueueGroups {
    pub(crate) fn new(runtime: Handle) -> EnqueueGroups {
        EnqueueGroups { queues: Mutex::default(), runtime }
    }

    /// Queues with an enqueue under way or waiting.
    pub(crate) fn queues_under_way(&self) -> usize {
        self.queues.lock().len()
    }
}

/// A script's place among its queue's [`IN_FLIGHT_MAX`]. Dropped, whether
/// its script ended or its caller went away, it passes to the waiting
/// enqueues, or is given up.
struct Place {
    backend: Weak<RedisBackend>,
    queue: Arc<str>,
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Some(backend) = self.backend.upgrade() {
            backend.script_ended(&self.queue);
        }
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
                let bytes = tasks.iter().map(|(_, task, ..)| task.payload.len()).sum();
                state.waiting.push_back(Waiting { tasks, bytes, answer });
                Turn::Later(answered)
            }
        };
        match turn {
            Turn::Now(tasks) => {
                let _place = Place { backend: self.me.clone(), queue: queue.clone() };
                self.enqueue_shard(queue, self.next_turn(), &tasks).await
            }
            // A group's sender answers every enqueue in it; it is dropped
            // unanswered only when the runtime shuts down.
            Turn::Later(answered) => answered.await.unwrap_or(Err(QueueError::ShuttingDown)),
        }
    }

    /// A script of `queue` ended: the enqueues waiting first go as the next,
    /// or the queue has one fewer under way.
    fn script_ended(&self, queue: &Arc<str>) {
        let group = {
            let mut queues = self.enqueue_groups.queues.lock();
            let Some(state) = queues.get_mut(queue) else { return };
            let (mut group, mut tasks, mut bytes) = (Vec::new(), 0, 0);
            while let Some(next) = state.waiting.front() {
                if next.answer.is_closed() {
                    state.waiting.pop_front(); // Its caller went away: not sent.
                    continue;
                }
                let fits = tasks + next.tasks.len() <= BATCH_MAX && bytes + next.bytes <= GROUP_BYTES_MAX;
                if !group.is_empty() && !fits {
                    break;
                }
                tasks += next.tasks.len();
                bytes += next.bytes;
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
        // The place passes to the group, which a task of its own sends and
        // answers: none of its callers has to stay for it. Should the task
        // be dropped unrun, its place is dropped with it, and passes on.
        let place = Place { backend: self.me.clone(), queue: queue.clone() };
        if let Some(backend) = self.me.upgrade() {
            self.enqueue_groups.runtime.spawn(async move {
                backend.enqueue_group(&place.queue, group).await;
                drop(place);
            });
        }
    }

    /// Sends `group` as one script (or, past the shard's cap, one enqueue a
    /// script) and answers each of its enqueues.
    async fn enqueue_group(&self, queue: &Arc<str>, group: Vec<Waiting>) {
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
                    // Its caller may have gone away since: its tasks were
                    // sent, as they would have been alone.
                    let _ = answer.send(Ok(done.by_ref().take(len).collect()));
                }
            }
            Err(QueueError::TooManyTasks { .. }) if answers.len() > 1 => {
                let mut start = 0;
                let alone = lens.iter().map(|&len| {
                    let tasks = &tasks[start..start + len];
                    start += len;
                    self.enqueue_shard(queue, self.next_turn(), tasks)
                });
                for (answer, done) in answers.into_iter().zip(join_all(alone).await) {
                    let _ = answer.send(done);
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
