//! Listing a queue's tasks a page at a time, with bounded work a page.

use super::ready::Place;
use super::slot::{Phase, Slot};
use super::State;
use crate::engine::reads::Reads;
use hourglass_queue::limits::{ANSWER_PAYLOAD_BYTES_MAX, LIST_SCAN_MAX};
use hourglass_queue::{Cursor, ListRequest, Page, Status, TaskInfo};

impl State {
    /// A page of the queue named `queue` (empty if it has no state). Due
    /// tasks are listed from the ready set in claim order, dead ones from the
    /// dead set by id; the others by walking ids upward, at most
    /// [`LIST_SCAN_MAX`] of them a page.
    pub(crate) fn list(&self, queue: &str, request: ListRequest, now_ms: u64, reads: &mut Reads) -> Page {
        match self.queue_id_of(queue) {
            Some(queue) => self.list_queue(queue, request, now_ms, reads),
            None => Page { tasks: Vec::new(), next: None },
        }
    }

    fn list_queue(&self, queue: u32, request: ListRequest, now_ms: u64, reads: &mut Reads) -> Page {
        let q = &self.queues[queue as usize];
        // A cursor comes from a client: whatever it says, nothing overflows.
        let after = request.after.unwrap_or_default();
        let first_id = after.id.saturating_add(1);
        let mut tasks = Vec::new();
        let mut bytes = 0;
        // Whether the page has room for task `id`, counting it in if so.
        let mut room = |id: u64, tasks: &Vec<TaskInfo>| {
            bytes += self.tasks[&id].payload_bytes as usize;
            tasks.len() < request.limit && (tasks.is_empty() || bytes <= ANSWER_PAYLOAD_BYTES_MAX)
        };
        // Takes tasks from `ids` until the page is full; whether any are left.
        let mut fill = |ids: &mut dyn Iterator<Item = u64>| {
            let mut ids = ids.peekable();
            while let Some(&id) = ids.peek() {
                if !room(id, &tasks) {
                    break;
                }
                let at = tasks.len();
                tasks.push(self.info(self.task(id), now_ms, reads, at));
                ids.next();
            }
            ids.peek().is_some()
        };
        let next = match request.status {
            Some(Status::Due) => {
                let from = Place { priority: after.priority, run_at_ms: after.run_at_ms, id: after.id };
                let more = fill(&mut q.ready.after(from).map(|place| place.id));
                let cursor =
                    |t: &TaskInfo| Cursor { priority: t.task.priority, run_at_ms: t.task.run_at_ms, id: t.task.id };
                more.then(|| tasks.last().map(cursor)).flatten()
            }
            Some(Status::Dead) => {
                let more = fill(&mut q.dead.range(first_id..).copied());
                more.then(|| tasks.last().map(|t| Cursor { id: t.task.id, ..Cursor::default() })).flatten()
            }
            // Leased tasks are few next to the others (deliveries in flight):
            // found through the lease table, not by walking a queue of a
            // million scheduled ones 100,000 ids a page.
            Some(Status::Leased) if self.leases.len() <= LIST_SCAN_MAX => {
                let mut ids: Vec<u64> = self
                    .leases
                    .keys()
                    .copied()
                    .filter(|&id| id >= first_id && self.tasks.get(&id).is_some_and(|s| s.queue == queue && !s.pending))
                    .collect();
                ids.sort_unstable();
                let more = fill(&mut ids.into_iter());
                more.then(|| tasks.last().map(|t| Cursor { id: t.task.id, ..Cursor::default() })).flatten()
            }
            status => {
                let end = first_id.saturating_add(LIST_SCAN_MAX as u64).min(self.next_id);
                let mut id = first_id;
                while id < end && tasks.len() < request.limit {
                    let listed = self.tasks.get(&id).is_some_and(|slot| {
                        !slot.pending
                            && slot.queue == queue
                            && status.is_none_or(|status| status == slot_status(slot, now_ms))
                    });
                    if listed {
                        if !room(id, &tasks) {
                            break;
                        }
                        let at = tasks.len();
                        tasks.push(self.info(self.task(id), now_ms, reads, at));
                    }
                    id += 1;
                }
                (id < self.next_id).then_some(Cursor { id: id - 1, ..Cursor::default() })
            }
        };
        Page { tasks, next }
    }
}

/// The status of a filed task's slot at `now_ms`, without putting the task
/// together: the contract's rule ([`Status::of`]) read off the slot.
fn slot_status(slot: &Slot, now_ms: u64) -> Status {
    match slot.phase {
        Phase::Scheduled => Status::of_scheduled(slot.run_at_ms, now_ms),
        Phase::Leased => Status::Leased,
        Phase::Dead => Status::Dead,
    }
}
