//! Queues' settings under the lock: a put begun (and waited for by the
//! next), applied once durable or at a start, and read.
//!
//! Applying a push target moves the queue's due tasks without a target of
//! their own to the push claims' set (and removing it moves them back): work
//! in proportion to the queue's due tasks, once per change of settings.

use std::sync::Arc;

use super::State;
use hourglass_queue::{Delivery, QueueError, QueueSettings, TokenBucket};

/// What a put of a queue's settings comes to under the lock.
pub(crate) enum Setting {
    /// Another put of the queue's settings is on its way: wait for it.
    Wait,
    /// Marked as being set: send the change.
    Started,
}

impl State {
    /// Begins putting queue `queue`'s settings. Settled by
    /// [`Settlement::PutSettings`](crate::engine::settlement::Settlement::PutSettings).
    pub(crate) fn begin_settings(&mut self, queue: u32) -> Setting {
        let q = &mut self.queues[queue as usize];
        if q.setting {
            return Setting::Wait;
        }
        q.setting = true;
        Setting::Started
    }

    /// A put of queue `queue`'s settings is settled: they hold once durable,
    /// the old ones stay if not.
    pub(crate) fn settle_settings(&mut self, queue: u32, settings: QueueSettings, durable: bool, now_ms: u64) {
        self.queues[queue as usize].setting = false;
        if durable {
            self.apply_settings(queue, settings, now_ms);
        }
    }

    /// Queue `queue` takes `settings`: its due tasks move to the claims that
    /// now take them, its bucket follows the new rate, and every waiting
    /// claim looks again.
    fn apply_settings(&mut self, queue: u32, settings: QueueSettings, now_ms: u64) {
        let pushes = settings.push.is_some();
        let q = &mut self.queues[queue as usize];
        let pushed = q.settings.push.is_some();
        q.bucket = match (settings.flow.rate_per_s, q.bucket.take()) {
            (None, _) => None,
            (Some(rate), Some(mut bucket)) => {
                bucket.reset(rate, settings.flow.burst_or_default(), now_ms);
                Some(bucket)
            }
            (Some(rate), None) => Some(TokenBucket::new(rate, settings.flow.burst_or_default(), now_ms)),
        };
        q.settings = settings;
        let targets = &self.targets;
        match (pushed, pushes) {
            (false, true) => {
                q.ready.move_to(Delivery::Push, |_| true);
            }
            (true, false) => {
                q.ready.move_to(Delivery::Pull, |id| !targets.contains_key(&id));
            }
            _ => {}
        }
        q.notify.notify_waiters();
        self.push_notify.notify_waiters();
    }

    /// A queue's settings as loaded from the store at a start, before its
    /// tasks.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] if it would be one queue too many.
    pub(crate) fn load_settings(
        &mut self,
        queue: &str,
        settings: QueueSettings,
        now_ms: u64,
    ) -> Result<(), QueueError> {
        let queue = self.queue_id(queue)?;
        self.apply_settings(queue, settings, now_ms);
        Ok(())
    }

    /// The settings of the queue named `queue`: the defaults if it has no state.
    pub(crate) fn settings(&self, queue: &str) -> QueueSettings {
        self.queue_id_of(queue).map(|id| self.queues[id as usize].settings.clone()).unwrap_or_default()
    }

    /// The push target of queue `queue`, if it has one.
    pub(super) fn push_target(&self, queue: u32) -> Option<&Arc<hourglass_queue::PushTarget>> {
        self.queues[queue as usize].settings.push.as_ref()
    }
}
