//! A queue's settings: its push target and its flow control, durable, read
//! and set through [`QueueAdmin`](crate::QueueAdmin).

use std::sync::Arc;

use crate::target::PushTarget;

/// What an operator sets on a queue. Every field is optional; the default
/// (all `None`) is a pull queue without flow control. A put replaces the
/// settings whole.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueSettings {
    /// Every task of the queue without a target of its own is delivered to
    /// this one, by push.
    pub push: Option<Arc<PushTarget>>,
    /// Flow control: a token bucket that refills at `rate_per_s` tasks a
    /// second, and a cap on tasks leased at once.
    pub flow: Flow,
}

/// How fast and how many of a queue's tasks are handed out: to pull claims
/// and push deliveries alike, across every node.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Flow {
    /// Tasks handed out a second, at most, on average: a token bucket's rate
    /// (fractions allowed: 0.5 is one every two seconds). `None`: no limit.
    pub rate_per_s: Option<f64>,
    /// How many tokens the bucket holds: the most handed out at once after a
    /// quiet spell. Only with a rate; `None` there means
    /// [`Flow::burst_or_default`].
    pub burst: Option<u32>,
    /// Tasks leased at once, at most, by pull claims and push deliveries
    /// together. `None`: no cap.
    pub max_in_flight: Option<u32>,
}

impl Flow {
    /// The bucket's size: the one set, or a second's worth of the rate (at
    /// least one).
    pub fn burst_or_default(&self) -> u32 {
        self.burst
            .unwrap_or_else(|| self.rate_per_s.map_or(1, |rate| rate.ceil().clamp(1.0, f64::from(u32::MAX)) as u32))
    }

    /// Whether it limits anything.
    pub fn is_limited(&self) -> bool {
        self.rate_per_s.is_some() || self.max_in_flight.is_some()
    }

    /// How many more tasks may be leased, given `leased` now: `usize::MAX`
    /// without a cap.
    pub fn room(&self, leased: usize) -> usize {
        self.max_in_flight.map_or(usize::MAX, |max| (max as usize).saturating_sub(leased))
    }
}
