//! What clients were told, across the callers of one seed: what the store
//! must hold after the restart, and what it must have held at some point.
//!
//! An enqueue, cancel or ack answered must hold after the crash if the batch
//! that stored it was kept (the store knows which batch that was). The other
//! answers that the store must keep carry the count of batches the store had
//! committed when they came ([`CrashStore::applied`]): with every commit
//! durable that is always kept; in the relaxed mode a crash may lose the
//! last batches, and the answer must hold only if the crash kept that many
//! ([`CrashStore::kept`]).
//!
//! [`CrashStore::applied`]: super::CrashStore::applied
//! [`CrashStore::kept`]: super::CrashStore::kept

use std::collections::{HashMap, HashSet};

use hourglass_queue::{Lease, QueueSettings};

/// What clients were told, shared by the callers of one seed.
#[derive(Default)]
pub(super) struct Ledger {
    /// Payload number to the id its enqueue was answered with.
    pub(super) enqueued: HashMap<u64, u64>,
    /// Payload numbers whose enqueue failed before the crash: never to be seen.
    pub(super) failed: HashSet<u64>,
    /// Payload numbers ever sent.
    pub(super) sent: HashSet<u64>,
    /// Ids whose cancel or ack (of a task that does not repeat) succeeded.
    pub(super) ended: HashSet<u64>,
    /// Ids a cancel or ack was sent for, whatever the answer.
    pub(super) touched: HashSet<u64>,
    /// (id, due time) pairs a client saw.
    pub(super) seen_due: Vec<(u64, u64)>,
    /// Every id a client saw.
    pub(super) seen_ids: HashSet<u64>,
    /// Leases held: id to token.
    pub(super) leases: HashMap<u64, Lease>,
    /// The newest ids, raced against.
    pub(super) newest: Vec<u64>,
    /// What clients were told of each schedule.
    pub(super) schedules: HashMap<String, Told>,
    /// (name, next occurrence) pairs of schedules a client saw.
    pub(super) seen_schedules: Vec<(String, Option<u64>)>,
    /// The pauses and resumes of [`QUEUE`]: `last` is whether it must be paused.
    pub(super) pause: Told,
    /// Whether [`QUEUE`] was paused, each time a client saw it.
    pub(super) seen_paused: Vec<bool>,
    /// Payload numbers sent with a target of their own.
    pub(super) aimed: HashSet<u64>,
    /// The puts of [`QUEUE`]'s settings: `last` is `Some(true)` when the
    /// last one sent must hold.
    pub(super) settings: Told,
    /// The settings of each put, in the order sent.
    pub(super) settings_sent: Vec<QueueSettings>,
    /// [`QUEUE`]'s settings, each time a client saw them.
    pub(super) seen_settings: Vec<QueueSettings>,
}

/// The puts and deletes of one schedule name.
#[derive(Default)]
pub(super) struct Told {
    /// Sent so far.
    pub(super) sent: u64,
    /// Sent and not yet answered.
    pub(super) in_flight: u32,
    /// What the store must hold: `true` put, `false` deleted. `None` if the
    /// last answer did not say, came after the crash, or overlapped another
    /// put or delete of the name (their order is then unknown).
    pub(super) last: Option<bool>,
    /// The batches committed when `last` was answered.
    pub(super) at: u64,
}

/// A put or delete on its way: its number, and whether it was sent while
/// none other of its name was.
pub(super) struct Sent {
    pub(super) number: u64,
    pub(super) alone: bool,
}

impl Told {
    pub(super) fn sent(&mut self) -> Sent {
        self.sent += 1;
        self.last = None;
        self.in_flight += 1;
        Sent { number: self.sent, alone: self.in_flight == 1 }
    }

    /// Records the answer to `sent`, given when the store had committed `at`
    /// batches; `Some(what)` if it succeeded before the crash.
    pub(super) fn answered(&mut self, sent: Sent, succeeded: Option<bool>, at: u64) {
        self.in_flight -= 1;
        if sent.alone && self.sent == sent.number {
            (self.last, self.at) = (succeeded, at);
        }
    }

    /// What the store must hold after a crash that kept `kept` batches.
    pub(super) fn must_hold(&self, kept: u64) -> Option<bool> {
        self.last.filter(|_| self.at <= kept)
    }
}

impl Ledger {
    pub(super) fn schedule_sent(&mut self, name: &str) -> Sent {
        self.schedules.entry(name.to_owned()).or_default().sent()
    }

    pub(super) fn schedule_answered(&mut self, name: &str, sent: Sent, succeeded: Option<bool>, at: u64) {
        self.schedules.get_mut(name).expect("noted when sent").answered(sent, succeeded, at);
    }

    /// Whether [`QUEUE`] must be paused now: a pause was answered, and
    /// nothing was sent since. With the number of pauses and resumes sent.
    pub(super) fn surely_paused(&self) -> (bool, u64) {
        (self.pause.in_flight == 0 && self.pause.last == Some(true), self.pause.sent)
    }
}
