//! The cluster's last fifteen minutes, a second at a time, kept in Redis so
//! that every node's dashboard draws the same chart, however long it has run.
//!
//! Each heartbeat that carries counts (`figures.rs`) adds them to the second
//! it is sent in, by Redis's clock as the node estimates it:
//! `{prefix}:history:MINUTE` (Unix minutes) holds, for each second `S` of the
//! minute that had any work, the fields `S:e`, `S:d` and `S:a` (enqueued,
//! delivered, acked) and `S:lI`, the deliveries under the dashboard's lateness
//! bound `I` ([`LATENESS_BUCKETS_US`]). A minute's hash lives
//! [`MINUTE_KEPT_MS`]. A node's counts land in the second of the heartbeat
//! that carries them, a renewal period at most after they happened: the
//! chart is that exact. An idle cluster writes nothing.

use std::collections::HashMap;

use hourglass_queue::{QueueError, Second, HISTORY_SECONDS, LATENESS_BUCKETS_US};

use crate::counted::Counted;
use crate::error::storage;
use crate::histogram::cumulative;
use crate::RedisBackend;

const SECOND_MS: u64 = 1_000;
const MINUTE_MS: u64 = 60 * SECOND_MS;
/// How long a minute's hash lives: past the fifteen minutes shown, and the
/// minute under way.
pub(crate) const MINUTE_KEPT_MS: u64 = HISTORY_SECONDS * SECOND_MS + 2 * MINUTE_MS;

/// The key of the minute `at_ms` is in.
pub(crate) fn minute_key(backend: &RedisBackend, at_ms: u64) -> String {
    backend.keys.global(&format!("history:{}", at_ms / MINUTE_MS))
}

/// What a flush at `at_ms` adds to its minute's hash for `counted`.
pub(crate) fn fields(at_ms: u64, counted: &Counted) -> Vec<(String, u64)> {
    let second = at_ms % MINUTE_MS / SECOND_MS;
    let (mut enqueued, mut delivered, mut acked) = (0, 0, 0);
    let mut lateness = [0u64; LATENESS_BUCKETS_US.len()];
    for tally in counted.queues.values() {
        (enqueued, delivered, acked) = (enqueued + tally.enqueued, delivered + tally.delivered, acked + tally.acked);
        for (sum, count) in lateness.iter_mut().zip(tally.lateness.dashboard_counts()) {
            *sum += count;
        }
    }
    let named = [("e", enqueued), ("d", delivered), ("a", acked)].map(|(name, by)| (name.to_owned(), by));
    let bounds = lateness.iter().enumerate().map(|(at, &by)| (format!("l{at}"), by));
    named
        .into_iter()
        .chain(bounds)
        .filter(|&(_, by)| by > 0)
        .map(|(name, by)| (format!("{second}:{name}"), by))
        .collect()
}

impl RedisBackend {
    /// The last [`HISTORY_SECONDS`] complete seconds by Redis's clock, oldest
    /// first, a zero second where there was no work.
    pub(crate) async fn history(&self) -> Result<Vec<Second>, QueueError> {
        let last = self.redis_ms() / SECOND_MS - 1;
        let first = last + 1 - HISTORY_SECONDS;
        let minutes: Vec<u64> = (first * SECOND_MS / MINUTE_MS..=last * SECOND_MS / MINUTE_MS).collect();
        let mut pipe = redis::pipe();
        for &minute in &minutes {
            pipe.hgetall(minute_key(self, minute * MINUTE_MS));
        }
        let read: Vec<HashMap<String, u64>> = pipe.query_async(&mut self.conn()).await.map_err(storage)?;
        let mut seconds: Vec<Second> =
            (first..=last).map(|second| Second { at_ms: second * SECOND_MS, ..Second::default() }).collect();
        for (minute, fields) in minutes.iter().zip(read) {
            for (field, value) in fields {
                let Some((second, name)) = field.split_once(':') else { continue };
                let Ok(second) = second.parse::<u64>() else { continue };
                let Some(at) = (minute * 60 + second).checked_sub(first) else { continue };
                let Some(second) = seconds.get_mut(at as usize) else { continue };
                match name {
                    "e" => second.enqueued = value,
                    "d" => second.delivered = value,
                    "a" => second.acked = value,
                    bound => {
                        let under = bound.strip_prefix('l').and_then(|at| at.parse::<usize>().ok());
                        if let Some(under) = under.and_then(|at| second.lateness.get_mut(at)) {
                            *under = value;
                        }
                    }
                }
            }
        }
        for second in &mut seconds {
            second.lateness = cumulative(second.lateness);
        }
        Ok(seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counted::Tally;

    #[test]
    fn a_flush_adds_its_counts_to_its_second() {
        let mut counted = Counted::default();
        let mut tally = Tally { enqueued: 5, delivered: 2, ..Tally::default() };
        tally.lateness.record(700);
        tally.lateness.record(90_000);
        counted.queues.insert("a".into(), tally);
        counted.queues.insert("b".into(), Tally { enqueued: 1, acked: 3, ..Tally::default() });
        let mut fields = fields(61 * MINUTE_MS + 42_999, &counted);
        fields.sort();
        let expect = [("42:a", 3), ("42:d", 2), ("42:e", 6), ("42:l2", 0), ("42:l3", 1), ("42:l9", 1)];
        let expect: Vec<(String, u64)> =
            expect.into_iter().filter(|&(_, by)| by > 0).map(|(field, by)| (field.to_owned(), by)).collect();
        assert_eq!(fields, expect);
    }
}
