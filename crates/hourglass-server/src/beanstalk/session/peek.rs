//! Looking at jobs without reserving them (`peek`, `peek-ready`,
//! `peek-delayed`, `peek-buried`) and kicking them back to ready (`kick`,
//! `kick-job`). Except for `peek` and `kick-job`, which name a job, they
//! act on the used tube.

use hourglass_queue::limits::LIST_MAX;
use hourglass_queue::{Cursor, ListRequest, QueueError, RunAt, Status, SystemWallClock, TaskInfo, WallClock};

use super::state::Session;
use crate::beanstalk::reply;

impl Session {
    /// `peek`: job `id`, whatever its tube and state.
    pub(super) async fn peek(&self, id: u64, out: &mut Vec<u8>) {
        match self.front.backend.get(id).await {
            Ok(info) => reply::job(out, "FOUND", id, info.payload.as_bytes()),
            Err(error) => reply::line(out, reply::refusal(&error)),
        }
    }

    /// `peek-ready`: the next job of the used tube to be reserved.
    pub(super) async fn peek_ready(&self, out: &mut Vec<u8>) {
        found(self.first(Status::Due).await, out);
    }

    /// `peek-delayed`: the delayed job of the used tube due soonest.
    pub(super) async fn peek_delayed(&self, out: &mut Vec<u8>) {
        let soonest = match self.soonest_delayed(1).await.map(|mut soonest| soonest.pop()) {
            Ok(Some(id)) => self.front.backend.get(id).await.map(Some),
            Ok(None) => Ok(None),
            Err(error) => Err(error),
        };
        found(soonest, out);
    }

    /// `peek-buried`: the buried job of the used tube with the lowest id.
    pub(super) async fn peek_buried(&self, out: &mut Vec<u8>) {
        found(self.first(Status::Dead).await, out);
    }

    /// `kick`: up to `bound` jobs of the used tube back to ready.
    pub(super) async fn kick(&self, bound: u32, out: &mut Vec<u8>) {
        match self.kick_up_to(u64::from(bound)).await {
            Ok(kicked) => reply::line(out, &format!("KICKED {kicked}")),
            Err(error) => reply::line(out, reply::refusal(&error)),
        }
    }

    /// `kick-job`: job `id` back to ready, if it is buried or delayed.
    pub(super) async fn kick_job(&self, id: u64, out: &mut Vec<u8>) {
        let kicked = match self.front.backend.get(id).await {
            Ok(info) => self.kick_one(&info).await,
            Err(error) => Err(error),
        };
        match kicked {
            Ok(true) => reply::line(out, "KICKED"),
            Ok(false) => reply::line(out, "NOT_FOUND"),
            Err(error) => reply::line(out, reply::refusal(&error)),
        }
    }

    /// The first task of the used tube in `status`, in listing order: the
    /// next to claim for due ones, the lowest id for dead ones.
    async fn first(&self, status: Status) -> Result<Option<TaskInfo>, QueueError> {
        let request = ListRequest { status: Some(status), after: None, limit: 1 };
        Ok(self.front.backend.list(&self.used, request).await?.tasks.pop())
    }

    /// Up to `n` delayed tasks of the used tube, the soonest due first,
    /// found by paging through the tube (the engine keeps delayed tasks in
    /// its wheel, not in order per queue).
    async fn soonest_delayed(&self, n: u64) -> Result<Vec<u64>, QueueError> {
        let mut soonest = std::collections::BinaryHeap::new();
        let mut after: Option<Cursor> = None;
        loop {
            let request = ListRequest { status: Some(Status::Scheduled), after, limit: LIST_MAX };
            let page = self.front.backend.list(&self.used, request).await?;
            for task in &page.tasks {
                soonest.push((task.task.run_at_ms, task.task.id));
                if soonest.len() as u64 > n {
                    soonest.pop();
                }
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        // Popped in reverse order of the heap (latest first): reversed, the soonest comes last.
        let mut ids: Vec<u64> = soonest.into_sorted_vec().into_iter().map(|(_, id)| id).collect();
        ids.reverse();
        Ok(ids)
    }

    /// Up to `bound` buried jobs back to ready, or if there are none, up to
    /// `bound` delayed jobs, the soonest first.
    async fn kick_up_to(&self, bound: u64) -> Result<u64, QueueError> {
        let backend = &self.front.backend;
        let mut kicked = 0;
        while kicked < bound {
            let limit = (bound - kicked).min(LIST_MAX as u64) as usize;
            let dead = backend.list(&self.used, ListRequest { status: Some(Status::Dead), after: None, limit }).await?;
            if dead.tasks.is_empty() {
                break;
            }
            for task in &dead.tasks {
                if self.kick_one(task).await? {
                    kicked += 1;
                }
            }
        }
        if kicked > 0 || bound == 0 {
            return Ok(kicked);
        }
        let mut delayed = self.soonest_delayed(bound).await?;
        while let Some(id) = delayed.pop() {
            if let Ok(info) = backend.get(id).await {
                if self.kick_one(&info).await? {
                    kicked += 1;
                }
            }
        }
        Ok(kicked)
    }

    /// A buried job is retried, a delayed one made ready; `false` for any other.
    async fn kick_one(&self, info: &TaskInfo) -> Result<bool, QueueError> {
        let backend = &self.front.backend;
        let id = info.task.id;
        let kicked = match info.status {
            Status::Dead => backend.retry(id).await,
            Status::Scheduled => backend.reschedule(id, RunAt::At(SystemWallClock.now_ms())).await,
            Status::Due | Status::Leased => return Ok(false),
        };
        match kicked {
            Ok(_) => {
                self.front.job(id, |job| job.kicks += 1);
                Ok(true)
            }
            Err(QueueError::NotFound(_) | QueueError::Conflict(_)) => Ok(false),
            Err(error) => Err(error),
        }
    }
}

/// A peek's reply: the job found, or `NOT_FOUND`.
fn found(found: Result<Option<TaskInfo>, QueueError>, out: &mut Vec<u8>) {
    match found {
        Ok(Some(info)) => reply::job(out, "FOUND", info.task.id, info.payload.as_bytes()),
        Ok(None) => reply::line(out, "NOT_FOUND"),
        Err(error) => reply::line(out, reply::refusal(&error)),
    }
}
