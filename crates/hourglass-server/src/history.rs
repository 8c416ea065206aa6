//! The dashboard's last 15 minutes, kept in the server: one [`Point`] a
//! second (throughput, and delivery lateness worked out from the lateness
//! histograms), in a ring of [`HISTORY_POINTS`], and each queue's rates over
//! the latest sample. No time-series database: a restart starts it empty.
//! A backend of several nodes keeps the seconds itself, so that every node
//! draws the same chart ([`Stats::history`](hourglass_queue::Stats::history)):
//! then the chart is drawn from those ([`point`]).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use hourglass_queue::{QueueStats, Second, HISTORY_SECONDS, LATENESS_BUCKETS_US};
pub(crate) use hourglass_wire::{Point, Rates};

/// How often the server samples its queues.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// Points kept: 15 minutes of one a second.
pub(crate) const HISTORY_POINTS: usize = 900;
const _: () = assert!(HISTORY_POINTS as u64 * SAMPLE_EVERY.as_secs() == HISTORY_SECONDS, "fifteen minutes");

/// The counters as last read: a queue's since-start counts and lateness
/// histogram, and the sum over queues.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    enqueued: u64,
    delivered: u64,
    acked: u64,
    lateness: [u64; LATENESS_BUCKETS_US.len()],
}

impl Counts {
    fn of(q: &QueueStats) -> Counts {
        Counts { enqueued: q.enqueued, delivered: q.delivered, acked: q.acked, lateness: q.lateness.buckets }
    }

    fn add(&mut self, other: &Counts) {
        self.enqueued += other.enqueued;
        self.delivered += other.delivered;
        self.acked += other.acked;
        for (sum, count) in self.lateness.iter_mut().zip(other.lateness) {
            *sum += count;
        }
    }

    /// Rates per second from `before` to `self`, `seconds` apart.
    fn rates_since(&self, before: &Counts, seconds: f64) -> Rates {
        let rate = |now: u64, then: u64| now.saturating_sub(then) as f64 / seconds;
        Rates {
            enqueued: rate(self.enqueued, before.enqueued),
            delivered: rate(self.delivered, before.delivered),
            acked: rate(self.acked, before.acked),
        }
    }
}

/// The ring of points and the latest rates.
#[derive(Debug, Default)]
pub(crate) struct History {
    points: VecDeque<Point>,
    /// When the last sample was taken, and what it read.
    last: Option<(u64, Counts, HashMap<Arc<str>, Counts>)>,
    rates: HashMap<Arc<str>, Rates>,
}

impl History {
    /// Takes a sample of every queue at `at_ms` (Unix ms).
    pub(crate) fn record(&mut self, at_ms: u64, queues: &[QueueStats]) {
        let mut total = Counts::default();
        let per_queue: HashMap<Arc<str>, Counts> = queues
            .iter()
            .map(|q| {
                let counts = Counts::of(q);
                total.add(&counts);
                (q.name.clone(), counts)
            })
            .collect();
        if let Some((then_ms, before, before_per_queue)) = &self.last {
            let seconds = at_ms.saturating_sub(*then_ms).max(1) as f64 / 1_000.0;
            let rates = total.rates_since(before, seconds);
            let mut delta = [0; LATENESS_BUCKETS_US.len()];
            for (d, (now, then)) in delta.iter_mut().zip(total.lateness.iter().zip(before.lateness)) {
                *d = now.saturating_sub(then);
            }
            if self.points.len() == HISTORY_POINTS {
                self.points.pop_front();
            }
            self.points.push_back(Point {
                at_ms,
                enqueued: rates.enqueued,
                delivered: rates.delivered,
                acked: rates.acked,
                lateness_p50_ms: quantile_ms(&delta, 0.5),
                lateness_p99_ms: quantile_ms(&delta, 0.99),
            });
            self.rates = per_queue
                .iter()
                .map(|(name, now)| {
                    let before = before_per_queue.get(name).copied().unwrap_or_default();
                    (name.clone(), now.rates_since(&before, seconds))
                })
                .collect();
        }
        self.last = Some((at_ms, total, per_queue));
    }

    /// The points, oldest first.
    pub(crate) fn points(&self) -> Vec<Point> {
        self.points.iter().copied().collect()
    }

    /// `queue`'s rates over the latest sample (zero before two samples).
    pub(crate) fn rates(&self, queue: &str) -> Rates {
        self.rates.get(queue).copied().unwrap_or_default()
    }
}

/// A second a backend kept (several nodes' work), as a point of the chart.
pub(crate) fn point(second: &Second) -> Point {
    Point {
        at_ms: second.at_ms,
        enqueued: second.enqueued as f64,
        delivered: second.delivered as f64,
        acked: second.acked as f64,
        lateness_p50_ms: quantile_ms(&second.lateness, 0.5),
        lateness_p99_ms: quantile_ms(&second.lateness, 0.99),
    }
}

/// The `q` quantile of the deliveries counted in `buckets` (cumulative
/// counts at [`LATENESS_BUCKETS_US`]), in milliseconds, as Prometheus's
/// `histogram_quantile` works it out: linearly within the bucket it falls
/// in. Past the last bound it is that bound. `None` if there are none.
pub(crate) fn quantile_ms(buckets: &[u64; LATENESS_BUCKETS_US.len()], q: f64) -> Option<f64> {
    let total = *buckets.last()?;
    // Deliveries later than the last bound are not in the last bucket's count:
    // a histogram that kept them would show them only in its sum.
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let at = buckets.iter().position(|&count| count as f64 >= rank)?;
    let (lower_us, below) = if at == 0 { (0, 0) } else { (LATENESS_BUCKETS_US[at - 1], buckets[at - 1]) };
    let upper_us = LATENESS_BUCKETS_US[at];
    let within = (buckets[at] - below) as f64;
    let fraction = if within > 0.0 { (rank - below as f64) / within } else { 1.0 };
    Some((lower_us as f64 + fraction * (upper_us - lower_us) as f64) / 1_000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hourglass_queue::LatenessMs;

    fn queue(name: &str, enqueued: u64, delivered: u64, acked: u64, buckets: [u64; 18]) -> QueueStats {
        QueueStats {
            name: name.into(),
            lateness: LatenessMs { buckets, ..LatenessMs::default() },
            enqueued,
            delivered,
            acked,
            ..QueueStats::default()
        }
    }

    /// Cumulative counts with `n` deliveries in the bucket ending at `bound_us`.
    fn with(bound_us: u64, n: u64) -> [u64; 18] {
        LATENESS_BUCKETS_US.map(|bound| if bound >= bound_us { n } else { 0 })
    }

    #[test]
    fn quantiles_interpolate_within_their_bucket() {
        // 100 deliveries between 0.5 ms and 1 ms: the median is halfway.
        let buckets = with(1_000, 100);
        assert_eq!(quantile_ms(&buckets, 0.5), Some(0.75));
        assert_eq!(quantile_ms(&buckets, 1.0), Some(1.0));
        assert_eq!(quantile_ms(&[0; 18], 0.5), None);
        // Half within 100 µs, half within 10 ms: p99 near the top of (5, 10] ms.
        let mut buckets = with(100, 50);
        for (b, more) in buckets.iter_mut().zip(with(10_000, 50)) {
            *b += more;
        }
        let p99 = quantile_ms(&buckets, 0.99).unwrap();
        assert!((9.0..=10.0).contains(&p99), "p99 {p99}");
        assert!(quantile_ms(&buckets, 0.5).unwrap() <= 0.1);
    }

    #[test]
    fn points_are_rates_over_the_interval_and_the_ring_is_bounded() {
        let mut history = History::default();
        history.record(1_000, &[queue("a", 0, 0, 0, [0; 18]), queue("b", 10, 0, 0, [0; 18])]);
        assert!(history.points().is_empty(), "one sample has no rate yet");
        history.record(3_000, &[queue("a", 40, 20, 10, with(1_000, 20)), queue("b", 10, 0, 0, [0; 18])]);
        let points = history.points();
        assert_eq!(points.len(), 1);
        let p = points[0];
        assert_eq!((p.at_ms, p.enqueued, p.delivered, p.acked), (3_000, 20.0, 10.0, 5.0));
        assert_eq!(p.lateness_p50_ms, Some(0.75));
        assert_eq!(history.rates("a"), Rates { enqueued: 20.0, delivered: 10.0, acked: 5.0 });
        assert_eq!(history.rates("b"), Rates::default());
        assert_eq!(history.rates("never"), Rates::default());
        // A queue new since the last sample counts from zero.
        history.record(4_000, &[queue("a", 40, 20, 10, with(1_000, 20)), queue("c", 3, 0, 0, [0; 18])]);
        assert_eq!(history.rates("c").enqueued, 3.0);
        assert_eq!(history.points()[1].lateness_p50_ms, None, "no deliveries in that second");
        for second in 5..2_000 {
            history.record(second * 1_000, &[]);
        }
        assert_eq!(history.points().len(), HISTORY_POINTS);
        assert_eq!(history.points().last().unwrap().at_ms, 1_999_000);
    }
}
