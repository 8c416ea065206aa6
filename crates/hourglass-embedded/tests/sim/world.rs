//! One seed's world: the engine over a crash store, a manual clock, the
//! ledger of what clients were told, and the operations callers make.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hourglass_embedded::{Engine, Fsync, Options};
use hourglass_queue::limits::PAYLOAD_INLINE_MAX;
use hourglass_queue::prelude::*;
use hourglass_queue::Payload;
use hourglass_queue::{
    Lease, Limits, ManualWallClock, Misfire, Nack, NewSchedule, NewTask, Overlap, Pause, QueueError, Rule, RunAt,
};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::Rng;

use super::ledger::Ledger;
use super::store::CrashStore;

pub(super) const T0_MS: u64 = 1_800_000_000_000;
/// The queue the callers use.
pub(super) const QUEUE: &str = "sim";
/// A queue whose tasks die at their first nack, and whose dead are deleted
/// together.
pub(super) const GRAVEYARD: &str = "graveyard";

pub(super) struct World {
    pub(super) engine: Arc<Engine>,
    pub(super) clock: Arc<ManualWallClock>,
    pub(super) store: CrashStore,
    pub(super) ledger: Mutex<Ledger>,
    pub(super) next_payload: AtomicU64,
    pub(super) crash_at: u64,
    pub(super) torn: bool,
    pub(super) ops: AtomicU64,
}

pub(super) fn options(fsync: Fsync) -> Options {
    Options { fsync, limits: Limits::default() }
}

/// Payload `n`: every third one too large to be kept in memory, so that
/// both homes of a payload are exercised.
pub(super) fn payload(n: u64) -> Payload {
    let pad = if n.is_multiple_of(3) { "x".repeat(PAYLOAD_INLINE_MAX) } else { String::new() };
    format!("{{\"n\":{n},\"pad\":\"{pad}\"}}").into()
}

/// The number of a payload, which must be exactly as it was sent, and
/// never one the store found damaged.
pub(super) fn payload_number(raw: &Payload) -> u64 {
    let n = number(raw).unwrap_or_else(|| panic!("a payload no client sent: {raw:?}"));
    assert_eq!(*raw, payload(n), "payload {n} came back changed");
    assert!(!damaged(n), "payload {n}, which the store found damaged, was handed out");
    n
}

fn number(raw: &Payload) -> Option<u64> {
    serde_json::from_slice::<serde_json::Value>(raw).ok()?["n"].as_u64()
}

/// Whether payload `n` is one the store finds damaged when it is read
/// (one of every 21; each is kept apart, as only those are checked).
pub(super) fn damaged(n: u64) -> bool {
    n > 0 && n.is_multiple_of(21)
}

/// [`damaged`], of a payload as stored.
pub(super) fn damaged_payload(raw: &Payload) -> bool {
    number(raw).is_some_and(damaged)
}

impl World {
    pub(super) fn crashed(&self) -> bool {
        self.store.crashed()
    }

    /// Counts an operation; the one numbered `crash_at` crashes the store.
    pub(super) fn tick(&self) {
        if self.ops.fetch_add(1, Ordering::SeqCst) == self.crash_at {
            self.store.crash(self.torn);
        }
    }

    pub(super) fn new_task(&self, rng: &mut StdRng) -> (u64, NewTask) {
        let n = self.next_payload.fetch_add(1, Ordering::SeqCst);
        self.ledger.lock().sent.insert(n);
        let key = rng.random_bool(0.3).then(|| format!("k{}", rng.random_range(0..6)));
        let delay_ms = rng.random_range(0..1_500);
        // Some expire: dead if not delivered within a few hundred ms of being due.
        let expires = rng.random_bool(0.2).then(|| RunAt::Delay(delay_ms + rng.random_range(1..1_000)));
        let new = NewTask {
            payload: payload(n),
            run_at: RunAt::Delay(delay_ms),
            key,
            // Some of unlimited attempts (0), which come back at once.
            max_attempts: Some(rng.random_range(0..4)),
            // Priorities and own leases ride in the records across crashes.
            priority: rng.random_bool(0.3).then(|| rng.random_range(0..3) * 1_000),
            lease_ms: rng.random_bool(0.2).then(|| rng.random_range(100..2_000)),
            every_ms: None,
            expires,
            // Targets ride in the records across crashes.
            http: rng.random_bool(0.2).then(|| super::push::target_of(n)),
        };
        if new.http.is_some() {
            self.ledger.lock().aimed.insert(n);
        }
        (n, new)
    }

    /// Records an enqueue's answer. Errors before the crash are final.
    pub(super) fn enqueued(
        &self,
        numbers: &[u64],
        result: &Result<Vec<(u64, u64, bool)>, QueueError>,
        crashed_before: bool,
    ) {
        let mut ledger = self.ledger.lock();
        match result {
            Ok(done) => {
                for (&n, &(id, run_at_ms, created)) in numbers.iter().zip(done) {
                    ledger.seen_ids.insert(id);
                    ledger.seen_due.push((id, run_at_ms));
                    if created {
                        ledger.enqueued.insert(n, id);
                        ledger.newest.push(id);
                        if ledger.newest.len() > 8 {
                            ledger.newest.remove(0);
                        }
                    }
                }
            }
            Err(QueueError::Storage(_)) if !crashed_before && !self.crashed() => {
                ledger.failed.extend(numbers);
            }
            Err(_) => {}
        }
    }

    /// Records tasks whose cancel, ack or delete was just answered with
    /// success, before the crash.
    pub(super) fn ended(&self, ids: impl IntoIterator<Item = u64>) {
        self.ledger.lock().ended.extend(ids);
    }

    pub(super) fn any_id(&self, rng: &mut StdRng) -> Option<u64> {
        let ledger = self.ledger.lock();
        if ledger.seen_ids.is_empty() {
            return None;
        }
        let index = rng.random_range(0..ledger.seen_ids.len());
        ledger.seen_ids.iter().nth(index).copied()
    }

    pub(super) fn any_lease(&self, rng: &mut StdRng) -> Option<(u64, Lease)> {
        let mut ledger = self.ledger.lock();
        if ledger.leases.is_empty() {
            return None;
        }
        let index = rng.random_range(0..ledger.leases.len());
        let id = *ledger.leases.keys().nth(index)?;
        ledger.leases.remove_entry(&id)
    }

    /// A cancel of one of the newest tasks, sent from another thread of the
    /// runtime while this one claims: two changes of one task from two threads.
    pub(super) async fn race(self: &Arc<Self>, rng: &mut StdRng) {
        let target = {
            let ledger = self.ledger.lock();
            if ledger.newest.is_empty() {
                return;
            }
            ledger.newest[rng.random_range(0..ledger.newest.len())]
        };
        let before = self.crashed();
        let world = self.clone();
        let cancel = tokio::spawn(async move {
            world.ledger.lock().touched.insert(target);
            let cancelled = world.engine.cancel(target).await.is_ok();
            if cancelled && !before && !world.crashed() {
                world.ended([target]);
            }
        });
        self.claim(rng).await;
        cancel.await.expect("the cancel panicked");
    }

    /// Puts, deletes or reads one of a few schedules that fire every few
    /// hundred milliseconds into the queue the callers claim from.
    pub(super) async fn schedule(&self, rng: &mut StdRng) {
        let name = format!("s{}", rng.random_range(0..3));
        let before = self.crashed();
        match rng.random_range(0..10) {
            0..=4 => {
                let n = self.next_payload.fetch_add(1, Ordering::SeqCst);
                self.ledger.lock().sent.insert(n);
                let new = NewSchedule {
                    queue: QUEUE.into(),
                    rule: Rule::Every { every_ms: rng.random_range(50..400) },
                    payload: payload(n),
                    misfire: [Misfire::Skip, Misfire::Once, Misfire::All][rng.random_range(0..3)],
                    overlap: if rng.random_bool(0.5) { Overlap::Allow } else { Overlap::Forbid },
                    max_attempts: Some(rng.random_range(1..4)),
                    expires_after_ms: rng.random_bool(0.3).then(|| rng.random_range(1..500)),
                };
                let sent = self.ledger.lock().schedule_sent(&name);
                let result = self.engine.put_schedule(&name, new, Expect::Any).await;
                let (settled, at) = (!before && !self.crashed(), self.store.applied());
                let mut ledger = self.ledger.lock();
                ledger.schedule_answered(&name, sent, (settled && result.is_ok()).then_some(true), at);
                match result {
                    Ok((info, _)) => ledger.seen_schedules.push((name, info.schedule.next_ms)),
                    Err(QueueError::Storage(_)) if settled => {
                        ledger.failed.insert(n);
                    }
                    Err(_) => {}
                }
            }
            5 => {
                // Paused or resumed: the occurrences missed meanwhile go to the misfire policy.
                if let Ok(info) = self.engine.pause_schedule(&name, rng.random_bool(0.5), Expect::Any).await {
                    self.ledger.lock().seen_schedules.push((name, info.schedule.next_ms));
                }
            }
            6 => {
                let sent = self.ledger.lock().schedule_sent(&name);
                let deleted = self.engine.delete_schedule(&name, Expect::Any).await.is_ok();
                let (settled, at) = (!before && !self.crashed(), self.store.applied());
                self.ledger.lock().schedule_answered(&name, sent, (settled && deleted).then_some(false), at);
            }
            _ => {
                if let Ok(info) = self.engine.schedule(&name).await {
                    self.ledger.lock().seen_schedules.push((name, info.schedule.next_ms));
                }
            }
        }
    }

    /// Pauses or resumes [`QUEUE`], or looks whether it is paused.
    pub(super) async fn pause(&self, rng: &mut StdRng) {
        let before = self.crashed();
        if rng.random_bool(0.3) {
            if let Some(stats) = self.engine.queue(QUEUE).await {
                self.ledger.lock().seen_paused.push(stats.paused);
            }
            return;
        }
        let paused = rng.random_bool(0.5);
        let sent = self.ledger.lock().pause.sent();
        let result = self.engine.pause_queue(QUEUE, if paused { Pause::Indefinitely } else { Pause::Resume }).await;
        let (settled, at) = (!before && !self.crashed(), self.store.applied());
        let mut ledger = self.ledger.lock();
        ledger.pause.answered(sent, (settled && result.is_ok()).then_some(paused), at);
        if let Ok(stats) = result {
            assert_eq!(stats.paused, paused, "a pause answered with the queue as asked");
            ledger.seen_paused.push(paused);
        }
    }

    /// Fills [`GRAVEYARD`] with dead tasks (enqueued, claimed, nacked with no
    /// attempt left), or deletes some of its dead.
    pub(super) async fn graveyard(&self, rng: &mut StdRng) {
        let before = self.crashed();
        match rng.random_range(0..3) {
            0 => {
                let n = self.next_payload.fetch_add(1, Ordering::SeqCst);
                self.ledger.lock().sent.insert(n);
                let mut new = NewTask::new(payload(n), RunAt::Delay(0));
                new.max_attempts = Some(1);
                if let Ok(done) = self.engine.enqueue(GRAVEYARD, new).await {
                    let mut ledger = self.ledger.lock();
                    // Its tasks may be deleted by a delete whose answer a
                    // crash loses: they are exempt from surviving.
                    ledger.touched.insert(done.id);
                    ledger.seen_ids.insert(done.id);
                    ledger.seen_due.push((done.id, done.run_at_ms));
                }
            }
            1 => {
                let Ok(claimed) = self.engine.claim(GRAVEYARD, 2, 1_000, 0).await else { return };
                for task in claimed {
                    let n = payload_number(&task.payload);
                    assert!(self.ledger.lock().sent.contains(&n), "delivered payload {n}, which no client sent");
                    if let Ok(info) = self.engine.nack(task.id, task.lease, Nack::default()).await {
                        self.ledger.lock().seen_due.push((task.id, info.task.run_at_ms));
                    }
                }
            }
            _ => {
                if let Ok(ids) = self.engine.delete_dead(GRAVEYARD, rng.random_range(1..4)).await {
                    if !before && !self.crashed() {
                        self.ended(ids);
                    }
                }
            }
        }
    }

    pub(super) async fn claim(&self, rng: &mut StdRng) {
        let max = rng.random_range(1..4);
        let lease_ms = rng.random_range(100..1_500);
        let paused_before = self.ledger.lock().surely_paused();
        if let Ok(claimed) = self.engine.claim(QUEUE, max, lease_ms, 0).await {
            let mut ledger = self.ledger.lock();
            if paused_before.0 && ledger.surely_paused() == paused_before {
                assert!(claimed.is_empty(), "a claim of a paused queue handed out {} tasks", claimed.len());
            }
            for task in claimed {
                super::push::check_claimed(&ledger, &task, false);
                ledger.seen_ids.insert(task.id);
                ledger.leases.insert(task.id, task.lease);
            }
        }
    }

    pub(super) async fn step(self: &Arc<Self>, rng: &mut StdRng) {
        let before = self.crashed();
        match rng.random_range(0..100) {
            0..=24 => {
                let (n, new) = self.new_task(rng);
                let result = self.engine.enqueue(QUEUE, new).await.map(|e| vec![(e.id, e.run_at_ms, e.created)]);
                self.enqueued(&[n], &result, before);
            }
            25..=29 => {
                let (numbers, tasks): (Vec<u64>, Vec<NewTask>) =
                    (0..rng.random_range(1..5)).map(|_| self.new_task(rng)).unzip();
                let result = self
                    .engine
                    .enqueue_batch(QUEUE, tasks)
                    .await
                    .map(|done| done.iter().map(|e| (e.id, e.run_at_ms, e.created)).collect());
                self.enqueued(&numbers, &result, before);
            }
            30..=39 => self.claim(rng).await,
            40..=44 => self.race(rng).await,
            45..=59 => {
                if let Some((id, lease)) = self.any_lease(rng) {
                    self.ledger.lock().touched.insert(id);
                    if self.engine.ack(id, lease).await.is_ok() && !before && !self.crashed() {
                        self.ended([id]);
                    }
                }
            }
            60..=66 => {
                if let Some((id, lease)) = self.any_lease(rng) {
                    let delay = rng.random_bool(0.5).then(|| rng.random_range(0..1_000));
                    let reason = rng.random_bool(0.5).then(|| format!("failed at step {}", rng.random_range(0..100)));
                    if let Ok(info) = self
                        .engine
                        .nack(
                            id,
                            lease,
                            Nack { delay_ms: delay, reason: reason.clone().map(Into::into), ..Nack::default() },
                        )
                        .await
                    {
                        self.ledger.lock().seen_due.push((id, info.task.run_at_ms));
                    }
                }
            }
            67..=69 => {
                if let Some((id, lease)) = self.any_lease(rng) {
                    if self.engine.extend(id, lease, rng.random_range(100..1_500)).await.is_ok() {
                        self.ledger.lock().leases.insert(id, lease);
                    }
                }
            }
            70..=76 => {
                if let Some(id) = self.any_id(rng) {
                    self.ledger.lock().touched.insert(id);
                    if self.engine.cancel(id).await.is_ok() && !before && !self.crashed() {
                        self.ended([id]);
                    }
                }
            }
            77..=83 => {
                if let Some(id) = self.any_id(rng) {
                    let run_at = RunAt::Delay(rng.random_range(0..1_500));
                    if let Ok(info) = self.engine.reschedule(id, run_at).await {
                        self.ledger.lock().seen_due.push((id, info.task.run_at_ms));
                    }
                }
            }
            84..=86 => {
                if let Some(id) = self.any_id(rng) {
                    if let Ok(info) = self.engine.retry(id).await {
                        self.ledger.lock().seen_due.push((id, info.task.run_at_ms));
                    }
                }
            }
            87..=89 => self.schedule(rng).await,
            90..=91 => {
                if let Some(id) = self.any_id(rng) {
                    if let Ok(info) = self.engine.get(id).await {
                        self.ledger.lock().seen_due.push((id, info.task.run_at_ms));
                    }
                }
            }
            92..=93 => self.pause(rng).await,
            94 => self.graveyard(rng).await,
            95 => self.settings(rng).await,
            96 => self.push_claim(rng).await,
            _ => self.clock.advance_ms(rng.random_range(0..400)),
        }
        if let Err(broken) = self.engine.check_invariants() {
            panic!("engine invariant broken: {broken}");
        }
        self.tick();
        tokio::task::yield_now().await;
    }
}
