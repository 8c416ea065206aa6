//! Listings across queues, as a token sees them: only the queues it may
//! read, and server-wide figures only if it reads every queue.

use hourglass_queue::{QueueStats, Totals};

use super::{Grant, Permission};

impl Grant {
    /// Whether it reads every queue, and so the server's own figures
    /// (totals, history, storage): they tell of every queue.
    pub(crate) fn reads_everything(&self) -> bool {
        self.everywhere(Permission::Read)
    }

    /// The queues of `queues` it may read.
    pub(crate) fn readable<'a>(&'a self, queues: &'a [QueueStats]) -> impl Iterator<Item = &'a QueueStats> + 'a {
        let all = self.reads_everything();
        queues.iter().filter(move |q| all || self.allows(Permission::Read, &q.name))
    }

    /// The totals it may see: the server's if it reads every queue, else
    /// those that `queues`' own counts give, summed over the queues it reads
    /// (tasks held, enqueued, delivered, acked), the rest zero but for how
    /// fresh those counters are.
    pub(crate) fn totals(&self, totals: Totals, queues: &[QueueStats]) -> Totals {
        if self.reads_everything() {
            return totals;
        }
        let none = Totals { counters_as_of_ms: totals.counters_as_of_ms, ..Totals::default() };
        self.readable(queues).fold(none, |mut sum, q| {
            sum.tasks += q.scheduled + q.due + q.leased + q.dead;
            sum.enqueued += q.enqueued;
            sum.delivered += q.delivered;
            sum.acked += q.acked;
            sum
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Pattern;

    fn queue(name: &str, due: usize, enqueued: u64) -> QueueStats {
        QueueStats { name: name.into(), due, enqueued, ..QueueStats::default() }
    }

    #[test]
    fn a_scoped_reader_sees_its_queues_and_their_sums_only() {
        let queues = [queue("a-1", 2, 5), queue("b", 7, 9), queue("a-2", 1, 1)];
        let server = Totals {
            tasks: 10,
            enqueued: 15,
            nacked: 3,
            memory_bytes: 99,
            counters_as_of_ms: Some(7),
            ..Totals::default()
        };
        let scoped = Grant::new("t", vec![Pattern::new("a-*").unwrap()], &[Permission::Read]);
        let names: Vec<_> = scoped.readable(&queues).map(|q| &*q.name).collect();
        assert_eq!(names, ["a-1", "a-2"]);
        let sums = Totals { tasks: 3, enqueued: 6, counters_as_of_ms: Some(7), ..Totals::default() };
        assert_eq!(scoped.totals(server, &queues), sums, "its queues' counters are as fresh as the server's");
        let writer = Grant::new("w", vec![Pattern::new("*").unwrap()], &[Permission::Enqueue]);
        assert_eq!(writer.readable(&queues).count(), 0, "enqueue is not read");
        assert_eq!(Grant::admin("root").totals(server, &queues), server);
    }
}
