//! What a worker does with a job it reserved: `delete` it (any job not
//! reserved elsewhere may be deleted too), `release` it, `bury` it, or
//! `touch` it for more time.

use hourglass_queue::{Nack, QueueError, SystemWallClock, TaskInfo, WallClock};

use super::state::Session;
use crate::beanstalk::reply;

impl Session {
    /// `delete`: a job reserved here is acked; one not reserved at all is cancelled.
    pub(super) async fn delete(&mut self, id: u64, out: &mut Vec<u8>) {
        let backend = &self.front.backend;
        let deleted = match self.reserved.holding(id, SystemWallClock.now_ms()) {
            Some(held) => backend.ack(id, held.lease).await.map(|()| held.tube),
            None => Err(QueueError::StaleLease(id)),
        };
        let deleted = match deleted {
            Ok(tube) => Ok(tube),
            // Not reserved here (or no longer): any job not reserved may be deleted.
            Err(QueueError::StaleLease(_)) => match backend.get(id).await {
                Ok(info) => backend.cancel_unleased(id).await.map(|()| info.task.queue),
                Err(error) => Err(error),
            },
            Err(error) => Err(error),
        };
        self.reserved.remove(id);
        match deleted {
            Ok(tube) => {
                self.front.forget_job(id);
                self.front.tube_ref(&tube, |refs| refs.deletes += 1);
                reply::line(out, "DELETED");
            }
            Err(error) => reply::line(out, reply::refusal(&error)),
        }
    }

    /// `release`: a job reserved here is ready again, or delayed.
    pub(super) async fn release(&mut self, id: u64, priority: u32, delay_s: u32, out: &mut Vec<u8>) {
        let nack = Nack { delay_ms: Some(u64::from(delay_s) * 1_000), priority: Some(priority), ..Nack::default() };
        match self.give_back(id, nack).await {
            Ok(_) => {
                self.front.job(id, |job| {
                    job.releases += 1;
                    job.delay_s = delay_s;
                });
                reply::line(out, "RELEASED");
            }
            Err(error) => reply::line(out, reply::refusal(&error)),
        }
    }

    /// `bury`: a job reserved here is dead, until kicked.
    pub(super) async fn bury(&mut self, id: u64, priority: u32, out: &mut Vec<u8>) {
        match self.give_back(id, Nack { dead: true, priority: Some(priority), ..Nack::default() }).await {
            Ok(_) => {
                self.front.job(id, |job| job.buries += 1);
                reply::line(out, "BURIED");
            }
            Err(error) => reply::line(out, reply::refusal(&error)),
        }
    }

    /// `touch`: a job reserved here gets its whole time-to-run again.
    pub(super) async fn touch(&mut self, id: u64, out: &mut Vec<u8>) {
        let touched = match self.reserved.holding(id, SystemWallClock.now_ms()) {
            Some(held) => self.front.backend.extend(id, held.lease, held.ttr_ms).await,
            None => Err(QueueError::NotFound(id)),
        };
        match touched {
            Ok(until_ms) => {
                self.reserved.touched(id, until_ms);
                reply::line(out, "TOUCHED");
            }
            Err(error) => {
                self.reserved.remove(id);
                reply::line(out, reply::refusal(&error));
            }
        }
    }

    /// A job reserved here goes back to the engine as `nack` says, and is
    /// no longer held.
    async fn give_back(&mut self, id: u64, nack: Nack) -> Result<TaskInfo, QueueError> {
        let held = self.reserved.holding(id, SystemWallClock.now_ms()).ok_or(QueueError::NotFound(id))?;
        self.reserved.remove(id);
        self.front.backend.nack(id, held.lease, nack).await
    }
}
