//! Requests on queues as a whole: pause and resume, delete the dead, and the
//! counts.

use hourglass_queue::lateness::with_lateness;
use hourglass_queue::validate;
use hourglass_queue::QueueError;
use hourglass_queue::{Pause, QueueSettings, QueueStats, Totals};

use super::requests::{Access, Attempt};
use super::settlement::Settlement;
use super::state::queues::Pausing;
use super::state::settings::Setting;
use super::Engine;
use crate::store::Mutation;

impl Engine {
    /// Pauses or resumes `queue`; its counts as they now read.
    pub(crate) async fn pause_or_resume(&self, queue: &str, pause: Pause) -> Result<QueueStats, QueueError> {
        validate::queue_name(queue)?;
        let (paused, until_ms) = match pause {
            Pause::Resume => (false, None),
            Pause::Indefinitely => (true, None),
            Pause::Until(until_ms) => (true, Some(until_ms)),
        };
        let now_ms = self.clock.now_ms();
        let read = self
            .when_settled(Access::Write, |state| {
                if let Err(closed) = self.closed.check() {
                    return Attempt::Done(Err(closed));
                }
                let queue_id = match state.queue_id(queue) {
                    Ok(queue_id) => queue_id,
                    Err(error) => return Attempt::Done(Err(error)),
                };
                match state.begin_pause(queue_id, paused, until_ms, now_ms) {
                    Pausing::Wait => Attempt::Wait,
                    Pausing::Unchanged(answer) => Attempt::Done(Ok(answer)),
                    Pausing::Started(answer) => {
                        let mutation = Mutation::PauseQueue { queue: queue.into(), paused, until_ms };
                        let settlement = Settlement::PauseQueue { queue: queue_id, paused, until_ms };
                        Attempt::sent(self.send(state, vec![mutation], settlement), answer)
                    }
                }
            })
            .await?;
        Ok(with_lateness(vec![read]).remove(0))
    }

    /// `queue`'s settings: the defaults for a queue never set.
    pub(crate) fn queue_settings(&self, queue: &str) -> Result<QueueSettings, QueueError> {
        validate::queue_name(queue)?;
        Ok(self.shared.state.lock().settings(queue))
    }

    /// Replaces `queue`'s settings once durable; them as they now hold.
    pub(crate) async fn put_queue_settings(
        &self,
        queue: &str,
        settings: QueueSettings,
    ) -> Result<QueueSettings, QueueError> {
        validate::queue_name(queue)?;
        validate::settings(&settings)?;
        self.when_settled(Access::Write, |state| {
            if let Err(closed) = self.closed.check() {
                return Attempt::Done(Err(closed));
            }
            let queue_id = match state.queue_id(queue) {
                Ok(queue_id) => queue_id,
                Err(error) => return Attempt::Done(Err(error)),
            };
            match state.begin_settings(queue_id) {
                Setting::Wait => Attempt::Wait,
                Setting::Started => {
                    let mutation = Mutation::PutSettings { queue: queue.into(), settings: settings.clone() };
                    let settlement = Settlement::PutSettings { queue: queue_id, settings: settings.clone() };
                    Attempt::sent(self.send(state, vec![mutation], settlement), settings.clone())
                }
            }
        })
        .await
    }

    /// Deletes up to `max` dead tasks of `queue` in one write; their ids.
    pub(crate) async fn delete_dead_tasks(&self, queue: &str, max: usize) -> Result<Vec<u64>, QueueError> {
        validate::queue_name(queue)?;
        validate::list_limit(max)?;
        self.when_settled(Access::Write, |state| {
            if let Err(closed) = self.closed.check() {
                return Attempt::Done(Err(closed));
            }
            let ids = state.dead(queue, max);
            if ids.is_empty() {
                return Attempt::Done(Ok(ids));
            }
            for &id in &ids {
                state.hide(id);
            }
            state.debug_check();
            let mutations = ids.iter().map(|&id| Mutation::Delete(id)).collect();
            Attempt::sent(self.send(state, mutations, Settlement::Purge(ids.clone())), ids)
        })
        .await
    }

    /// Every queue's counts, by name.
    pub(crate) fn all_queues(&self) -> Vec<QueueStats> {
        let now_ms = self.clock.now_ms();
        let read = self.shared.state.lock().all_queue_stats(now_ms);
        let mut all = with_lateness(read);
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// The counts of the queue named `name`, if it has state.
    pub(crate) fn one_queue(&self, name: &str) -> Option<QueueStats> {
        let now_ms = self.clock.now_ms();
        let read = self.shared.state.lock().queue_stats(name, now_ms);
        read.map(|read| with_lateness(vec![read]).remove(0))
    }

    /// The engine's totals.
    pub(crate) fn all_totals(&self) -> Totals {
        self.shared.state.lock().totals(&self.limits)
    }
}
