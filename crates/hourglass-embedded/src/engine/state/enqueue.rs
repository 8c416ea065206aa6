//! Admitting new tasks under the lock: each made pending (filed nowhere, its
//! key taken) until its enqueue is durable, within the budgets, or none.

use super::State;
use crate::store::Mutation;
use hourglass_queue::limits::{payload_inline, Limits};
use hourglass_queue::validate::Checked;
use hourglass_queue::DeadReason;
use hourglass_queue::QueueError;
use hourglass_queue::{Enqueued, Task, TaskState};

/// What an enqueue of a batch comes to under the lock.
pub(crate) enum Admission {
    /// A key of the batch is held by a task whose enqueue or change is still
    /// being written: wait for it to settle, then look again.
    Wait,
    /// Every task is there already (each key held by a live task): the
    /// answer, with nothing to write.
    Existing(Vec<Enqueued>),
    /// New tasks, inserted pending: the answer once they are durable, the
    /// write to send, and their ids to publish.
    New { answer: Vec<Enqueued>, mutations: Vec<Mutation>, ids: Vec<u64> },
}

impl State {
    /// Admits `batch` into `queue` at `now_ms`, every task or none. A task
    /// whose key a live task of the queue holds (or one earlier in the batch)
    /// is answered with that task. The payloads of the new tasks move out of
    /// `batch`: only the first admission of a batch may insert anything.
    ///
    /// # Errors
    /// [`QueueError::TooManyTasks`], a budget's error, or
    /// [`QueueError::Invalid`] for one queue too many; nothing is changed.
    pub(crate) fn admit(
        &mut self,
        queue: &str,
        batch: &mut [Checked],
        now_ms: u64,
        limits: &Limits,
    ) -> Result<Admission, QueueError> {
        let waits = batch
            .iter()
            .filter_map(|new| new.key.as_deref())
            .any(|key| self.key_holder(queue, key).is_some_and(|id| self.pending(id) == Some(true)));
        if waits {
            return Ok(Admission::Wait);
        }
        if self.tasks.len() + batch.len() > limits.tasks_max {
            return Err(QueueError::TooManyTasks { max: limits.tasks_max });
        }
        let queue_id = self.queue_id(queue)?;
        let name = self.queues[queue_id as usize].name.clone();
        let (memory_before, disk_before) = (self.memory_bytes, self.disk_bytes);
        let mut answer = Vec::with_capacity(batch.len());
        let mut mutations = Vec::with_capacity(batch.len() + 1);
        let mut ids = Vec::with_capacity(batch.len());
        for new in batch {
            let existing = new.key.as_ref().and_then(|key| self.queues[queue_id as usize].keys.get(key));
            if let Some(&id) = existing {
                // A live task, or one earlier in this batch.
                answer.push(Enqueued { id, run_at_ms: self.tasks[&id].run_at_ms, created: false });
                continue;
            }
            let task = Task {
                id: self.next_id,
                queue: name.clone(),
                run_at_ms: new.run_at_ms,
                attempt: 0,
                max_attempts: new.max_attempts,
                priority: new.priority,
                lease_ms: new.lease_ms,
                key: new.key.clone(),
                every_ms: new.every_ms,
                expires_at_ms: new.expires_at_ms,
                dead_reason: DeadReason::Attempts,
                last_error: None,
                http: new.http.clone(),
                state: TaskState::Scheduled,
                created_ms: now_ms,
            };
            answer.push(Enqueued { id: task.id, run_at_ms: task.run_at_ms, created: true });
            ids.push(task.id);
            // Inserted once: a later admission of this batch never gets here
            // again for this task, so the payload can move into its slot
            // (if small) and to the writer.
            let payload = std::mem::take(&mut new.payload);
            let bytes = payload.len();
            let held = payload_inline(bytes).then(|| payload.as_bytes().into());
            self.insert(&task, held, bytes, queue_id);
            mutations.push(Mutation::Insert { task, payload });
        }
        if ids.is_empty() {
            return Ok(Admission::Existing(answer));
        }
        if let Err(over) = self.within_budgets(limits, memory_before, disk_before) {
            for id in ids {
                self.forget(id);
            }
            return Err(over);
        }
        // Written with the tasks: ids stay retired across restarts even
        // when the newest tasks are gone by then.
        mutations.push(self.next_id_mutation());
        Ok(Admission::New { answer, mutations, ids })
    }
}
