//! What a node counts between heartbeats, and how Redis holds it: each
//! queue's [`Tally`] and the totals' counters, as the fields of the hashes
//! the heartbeat script adds to (`figures.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use hourglass_queue::{LatenessMs, Totals};

use crate::histogram::Histogram;
use crate::history;
use crate::RedisBackend;

/// Queues whose counts one heartbeat script carries, at most: a heartbeat
/// sends as many scripts as it needs.
pub(crate) const FLUSH_QUEUES_MAX: usize = 64;

/// One queue's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) enqueued: u64,
    pub(crate) delivered: u64,
    pub(crate) acked: u64,
    pub(crate) lateness: Histogram,
}

impl Tally {
    pub(crate) fn add(&mut self, other: &Tally) {
        self.enqueued += other.enqueued;
        self.delivered += other.delivered;
        self.acked += other.acked;
        self.lateness.add(&other.lateness);
    }

    /// Its fields in Redis, with what to add to each (`m` is a maximum).
    pub(crate) fn fields(&self) -> Vec<(String, u64)> {
        let mut fields: Vec<(String, u64)> = [("e", self.enqueued), ("d", self.delivered), ("a", self.acked)]
            .into_iter()
            .chain(
                (!self.lateness.is_empty())
                    .then_some([("s", self.lateness.sum_us), ("m", self.lateness.max_us)])
                    .into_iter()
                    .flatten(),
            )
            .filter(|&(_, by)| by > 0)
            .map(|(field, by)| (field.to_owned(), by))
            .collect();
        fields.extend(self.lateness.counts.iter().map(|(at, &count)| (format!("b{at}"), count)));
        fields
    }

    /// From its fields as Redis holds them; those it does not know are
    /// left out.
    pub(crate) fn from_fields(fields: HashMap<String, u64>) -> Tally {
        let mut tally = Tally::default();
        for (field, value) in fields {
            match field.as_str() {
                "e" => tally.enqueued = value,
                "d" => tally.delivered = value,
                "a" => tally.acked = value,
                "s" => tally.lateness.sum_us = value,
                "m" => tally.lateness.max_us = value,
                bucket => {
                    if let Some(at) = bucket.strip_prefix('b').and_then(|at| at.parse().ok()) {
                        tally.lateness.counts.insert(at, value);
                    }
                }
            }
        }
        tally
    }

    /// The lateness percentiles and buckets.
    pub(crate) fn lateness(&self) -> LatenessMs {
        self.lateness.read()
    }
}

/// The counters of [`Totals`] the nodes sum, by their fields in Redis.
pub(crate) fn counters(totals: &mut Totals) -> [(&'static str, &mut u64); 10] {
    [
        ("enqueued", &mut totals.enqueued),
        ("delivered", &mut totals.delivered),
        ("acked", &mut totals.acked),
        ("nacked", &mut totals.nacked),
        ("lease_expired", &mut totals.lease_expired),
        ("died", &mut totals.died),
        ("expired", &mut totals.expired),
        ("cancelled", &mut totals.cancelled),
        ("occurrences_enqueued", &mut totals.occurrences_enqueued),
        ("occurrences_skipped", &mut totals.occurrences_skipped),
    ]
}

fn add_totals(sum: &mut Totals, mut other: Totals) {
    for ((_, sum), (_, other)) in counters(sum).into_iter().zip(counters(&mut other)) {
        *sum += *other;
    }
}

/// What a node counted: the totals' counters, and each queue's.
#[derive(Debug, Clone, Default)]
pub(crate) struct Counted {
    pub(crate) totals: Totals,
    pub(crate) queues: HashMap<Arc<str>, Tally>,
}

impl Counted {
    pub(crate) fn is_empty(&self) -> bool {
        self.queues.is_empty() && self.totals == Totals::default()
    }

    /// Everything, in parts of at most [`FLUSH_QUEUES_MAX`] queues (the
    /// totals with the first), leaving nothing: what one heartbeat sends.
    pub(crate) fn take_parts(&mut self) -> Vec<Counted> {
        let mut parts = Vec::new();
        let mut queues = std::mem::take(&mut self.queues).into_iter().filter(|(_, tally)| *tally != Tally::default());
        let mut totals = std::mem::take(&mut self.totals);
        loop {
            let part = Counted { totals, queues: queues.by_ref().take(FLUSH_QUEUES_MAX).collect() };
            if part.is_empty() {
                return parts;
            }
            parts.push(part);
            totals = Totals::default();
        }
    }

    pub(crate) fn add(&mut self, other: &Counted) {
        add_totals(&mut self.totals, other.totals);
        for (queue, tally) in &other.queues {
            self.queues.entry(queue.clone()).or_default().add(tally);
        }
    }

    /// The keys and arguments of the heartbeat script past its own, for a
    /// flush at `at_ms`: for the totals, each queue, then the second's
    /// history (`history.rs`), how long the key lives (0: for ever), a
    /// count of fields, and the fields with what to add to each.
    pub(crate) fn script_input(&self, backend: &RedisBackend, at_ms: u64) -> (Vec<String>, Vec<String>) {
        let mut keys = Vec::new();
        let mut args = Vec::new();
        let mut push = |key: String, kept_ms: u64, fields: Vec<(String, u64)>| {
            keys.push(key);
            args.push(kept_ms.to_string());
            args.push(fields.len().to_string());
            for (field, by) in fields {
                args.push(field);
                args.push(by.to_string());
            }
        };
        let mut totals = self.totals;
        let fields =
            counters(&mut totals).into_iter().filter(|(_, by)| **by > 0).map(|(f, by)| (f.to_owned(), *by)).collect();
        push(backend.keys.global("figures"), 0, fields);
        for (queue, tally) in &self.queues {
            push(backend.keys.global(&format!("figures:q:{queue}")), 0, tally.fields());
        }
        push(history::minute_key(backend, at_ms), history::MINUTE_KEPT_MS, history::fields(at_ms, self));
        (keys, args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_goes_to_redis_and_back() {
        let mut tally = Tally { enqueued: 3, delivered: 2, acked: 0, ..Tally::default() };
        tally.lateness.record(1_500);
        tally.lateness.record(40);
        let fields: HashMap<String, u64> = tally.fields().into_iter().collect();
        assert!(!fields.contains_key("a"), "no field is written for nothing");
        assert_eq!(Tally::from_fields(fields), tally);
    }

    #[test]
    fn everything_counted_is_taken_in_parts() {
        let mut counted = Counted::default();
        for at in 0..FLUSH_QUEUES_MAX + 3 {
            counted.queues.insert(format!("q{at}").into(), Tally { enqueued: 1, ..Tally::default() });
        }
        counted.queues.insert("nothing".into(), Tally::default());
        counted.totals.enqueued = 2;
        let parts = counted.take_parts();
        assert!(counted.is_empty());
        assert_eq!(parts.iter().map(|p| p.queues.len()).collect::<Vec<_>>(), [FLUSH_QUEUES_MAX, 3]);
        assert_eq!((parts[0].totals.enqueued, parts[1].totals.enqueued), (2, 0));
        let mut sum = Counted::default();
        for part in &parts {
            sum.add(part);
        }
        assert_eq!(sum.queues.values().map(|t| t.enqueued).sum::<u64>(), FLUSH_QUEUES_MAX as u64 + 3);
        assert!(!sum.queues.contains_key("nothing"), "an empty tally is not sent");
        assert!(Counted::default().take_parts().is_empty());
    }
}
