//! The registry of queues: one hash outside the shards, each queue's name
//! and pause, so that any node lists every queue and a claim on any node sees
//! a pause. Each shard keeps a copy of the pauses (`paused`), which its claim
//! script reads.

use std::collections::HashMap;
use std::sync::Arc;

use redis::AsyncCommands;

use hourglass_queue::limits::QUEUES_MAX;
use hourglass_queue::{Pause, QueueError};

use crate::error::storage;
use crate::scripts::SCRIPTS;
use crate::RedisBackend;

/// A queue's pause as the registry and the shards keep it (and the claim
/// script reads it): empty when running, `0` until resumed, else the Unix ms
/// it ends at.
pub(crate) fn stored_pause(pause: Pause) -> String {
    match pause {
        Pause::Resume => String::new(),
        Pause::Indefinitely => "0".into(),
        Pause::Until(ms) => ms.max(1).to_string(),
    }
}

/// A stored pause: paused, and until when.
pub(crate) fn read_pause(stored: &str) -> (bool, Option<u64>) {
    let until = stored.parse::<u64>().ok().filter(|&ms| ms != 0);
    (!stored.is_empty(), until)
}

impl RedisBackend {
    /// Adds `queue` to the registry (once per node), within [`QUEUES_MAX`];
    /// with `pause`, sets its pause.
    pub(crate) async fn register(&self, queue: &str, pause: Option<&str>) -> Result<(), QueueError> {
        if pause.is_none() && self.known_queues.lock().contains(queue) {
            return Ok(());
        }
        let mut invocation = SCRIPTS.queues.key(self.keys.global("queues"));
        invocation.arg(if pause.is_some() { "pause" } else { "use" }).arg(queue).arg(QUEUES_MAX);
        if let Some(pause) = pause {
            invocation.arg(pause);
        }
        let answer: String = invocation.invoke_async(&mut self.conn()).await.map_err(storage)?;
        if answer != "ok" {
            return Err(QueueError::Invalid(format!("at most {QUEUES_MAX} queues")));
        }
        self.known_queues.lock().insert(queue.into());
        Ok(())
    }

    /// The registry: every queue's name and pause.
    pub(crate) async fn registry(&self) -> Result<Vec<(Arc<str>, String)>, QueueError> {
        let all: HashMap<String, String> = self.conn().hgetall(self.keys.global("queues")).await.map_err(storage)?;
        let mut all: Vec<(Arc<str>, String)> = all.into_iter().map(|(name, pause)| (name.into(), pause)).collect();
        all.sort();
        Ok(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_reads_back_as_it_was_stored() {
        assert_eq!(read_pause(&stored_pause(Pause::Resume)), (false, None));
        assert_eq!(read_pause(&stored_pause(Pause::Indefinitely)), (true, None));
        assert_eq!(read_pause(&stored_pause(Pause::Until(1_234))), (true, Some(1_234)));
        assert_eq!(read_pause(&stored_pause(Pause::Until(0))), (true, Some(1)), "0 would read as indefinitely");
    }
}
