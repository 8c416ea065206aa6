//! The crash simulator: seeded random operations from several concurrent
//! callers against the engine over a [`CrashStore`], a crash at a random point,
//! a restart, and a check of what survived against what clients were told.
//!
//! What is checked, for every seed:
//! - every enqueue answered with an id is there after the restart, unless a
//!   cancel or ack of it was sent (whose outcome may be either);
//! - nothing whose cancel or ack was answered with success comes back;
//! - everything a client saw (an id, a due time, an id returned for a
//!   repeated key) was durable at some point: nothing is visible before it is
//!   durable, and a failed write leaves no trace;
//! - nothing is delivered that no client enqueued, and nothing whose enqueue
//!   failed before the crash;
//! - ids are never reused across the restart;
//! - schedules: a put or delete answered with success holds after the
//!   restart (unless another was sent for the name); every schedule a client
//!   saw was durable; and no occurrence was ever stored as two tasks;
//! - queue pauses: a pause or resume answered with success holds after the
//!   restart (unless another was sent meanwhile); a claim of a queue whose
//!   pause was answered, with no resume sent since, hands out nothing; a
//!   pause a client saw was durable;
//! - dead tasks deleted together (in a queue of their own, [`GRAVEYARD`]):
//!   those answered deleted do not come back, and the deletes take nothing
//!   from the other queue;
//! - the engine's own invariants hold after the restart.
//!
//! The operations of a seed are fixed by the seed; their interleaving with the
//! engine's writer and timer threads is up to the OS, so a failing seed points
//! at a schedule of operations, not at one exact interleaving. `HOURGLASS_SIM_SEEDS=N`
//! runs N seeds (CI runs [`SEEDS_CI`]); `HOURGLASS_SIM_SEED=S` runs seed S alone.

mod store;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hourglass_embedded::{Engine, Fsync, Options};
use hourglass_queue::limits::PAYLOAD_INLINE_MAX;
use hourglass_queue::prelude::*;
use hourglass_queue::{
    Lease, Limits, ManualWallClock, Misfire, Nack, NewSchedule, NewTask, Overlap, Pause, QueueError, Rule, RunAt,
};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub use store::CrashStore;

/// Seeds CI runs.
const SEEDS_CI: u64 = 3_000;
/// Concurrent callers per seed.
const CALLERS: usize = 4;
/// Operations per caller, at most, before the crash stops them.
const OPS_PER_CALLER: usize = 60;
const T0_MS: u64 = 1_800_000_000_000;
const QUEUE: &str = "sim";
/// A queue whose tasks die at their first nack, and whose dead are deleted
/// together.
const GRAVEYARD: &str = "graveyard";

/// Occurrences schedules enqueued and skipped, over every seed: what the
/// simulator exercised, printed at the end.
static OCCURRENCES: AtomicU64 = AtomicU64::new(0);
static SKIPPED: AtomicU64 = AtomicU64::new(0);

/// What clients were told, shared by the callers of one seed.
#[derive(Default)]
struct Ledger {
    /// Payload number to the id its enqueue was answered with.
    enqueued: HashMap<u64, u64>,
    /// Payload numbers whose enqueue failed before the crash: never to be seen.
    failed: HashSet<u64>,
    /// Payload numbers ever sent.
    sent: HashSet<u64>,
    /// Ids whose cancel or ack (of a task that does not repeat) succeeded.
    ended: HashSet<u64>,
    /// Ids a cancel or ack was sent for, whatever the answer.
    touched: HashSet<u64>,
    /// (id, due time) pairs a client saw.
    seen_due: Vec<(u64, u64)>,
    /// Every id a client saw.
    seen_ids: HashSet<u64>,
    /// Leases held: id to token.
    leases: HashMap<u64, Lease>,
    /// The newest ids, raced against.
    newest: Vec<u64>,
    /// What clients were told of each schedule.
    schedules: HashMap<String, Told>,
    /// (name, next occurrence) pairs of schedules a client saw.
    seen_schedules: Vec<(String, Option<u64>)>,
    /// The pauses and resumes of [`QUEUE`]: `last` is whether it must be paused.
    pause: Told,
    /// Whether [`QUEUE`] was paused, each time a client saw it.
    seen_paused: Vec<bool>,
}

/// The puts and deletes of one schedule name.
#[derive(Default)]
struct Told {
    /// Sent so far.
    sent: u64,
    /// Sent and not yet answered.
    in_flight: u32,
    /// What the store must hold: `true` put, `false` deleted. `None` if the
    /// last answer did not say, came after the crash, or overlapped another
    /// put or delete of the name (their order is then unknown).
    last: Option<bool>,
}

/// A put or delete on its way: its number, and whether it was sent while
/// none other of its name was.
struct Sent {
    number: u64,
    alone: bool,
}

impl Told {
    fn sent(&mut self) -> Sent {
        self.sent += 1;
        self.last = None;
        self.in_flight += 1;
        Sent { number: self.sent, alone: self.in_flight == 1 }
    }

    /// Records the answer to `sent`; `Some(what)` if it succeeded before the crash.
    fn answered(&mut self, sent: Sent, succeeded: Option<bool>) {
        self.in_flight -= 1;
        if sent.alone && self.sent == sent.number {
            self.last = succeeded;
        }
    }
}

impl Ledger {
    fn schedule_sent(&mut self, name: &str) -> Sent {
        self.schedules.entry(name.to_owned()).or_default().sent()
    }

    fn schedule_answered(&mut self, name: &str, sent: Sent, succeeded: Option<bool>) {
        self.schedules.get_mut(name).expect("noted when sent").answered(sent, succeeded);
    }

    /// Whether [`QUEUE`] must be paused now: a pause was answered, and
    /// nothing was sent since. With the number of pauses and resumes sent.
    fn surely_paused(&self) -> (bool, u64) {
        (self.pause.in_flight == 0 && self.pause.last == Some(true), self.pause.sent)
    }
}

struct World {
    engine: Arc<Engine>,
    clock: Arc<ManualWallClock>,
    store: CrashStore,
    ledger: Mutex<Ledger>,
    next_payload: AtomicU64,
    crash_at: u64,
    torn: bool,
    ops: AtomicU64,
}

fn options() -> Options {
    Options { fsync: Fsync::Always, limits: Limits::default() }
}

/// Payload `n`: every third one too large to be kept in memory, so that
/// both homes of a payload are exercised.
fn payload(n: u64) -> Box<str> {
    let pad = if n.is_multiple_of(3) { "x".repeat(PAYLOAD_INLINE_MAX) } else { String::new() };
    format!("{{\"n\":{n},\"pad\":\"{pad}\"}}").into()
}

/// The number of a payload, which must be exactly as it was sent.
fn payload_number(raw: &str) -> u64 {
    let value: serde_json::Value = serde_json::from_str(raw).unwrap();
    let n = value["n"].as_u64().unwrap_or_else(|| panic!("a payload no client sent: {raw}"));
    assert_eq!(raw, &*payload(n), "payload {n} came back changed");
    n
}

impl World {
    fn crashed(&self) -> bool {
        self.store.crashed()
    }

    /// Counts an operation; the one numbered `crash_at` crashes the store.
    fn tick(&self) {
        if self.ops.fetch_add(1, Ordering::SeqCst) == self.crash_at {
            self.store.crash(self.torn);
        }
    }

    fn new_task(&self, rng: &mut StdRng) -> (u64, NewTask) {
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
        };
        (n, new)
    }

    /// Records an enqueue's answer. Errors before the crash are final.
    fn enqueued(&self, numbers: &[u64], result: &Result<Vec<(u64, u64, bool)>, QueueError>, crashed_before: bool) {
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

    fn any_id(&self, rng: &mut StdRng) -> Option<u64> {
        let ledger = self.ledger.lock();
        if ledger.seen_ids.is_empty() {
            return None;
        }
        let index = rng.random_range(0..ledger.seen_ids.len());
        ledger.seen_ids.iter().nth(index).copied()
    }

    fn any_lease(&self, rng: &mut StdRng) -> Option<(u64, Lease)> {
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
    async fn race(self: &Arc<Self>, rng: &mut StdRng) {
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
                world.ledger.lock().ended.insert(target);
            }
        });
        self.claim(rng).await;
        cancel.await.expect("the cancel panicked");
    }

    /// Puts, deletes or reads one of a few schedules that fire every few
    /// hundred milliseconds into the queue the callers claim from.
    async fn schedule(&self, rng: &mut StdRng) {
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
                let result = self.engine.put_schedule(&name, new).await;
                let settled = !before && !self.crashed();
                let mut ledger = self.ledger.lock();
                ledger.schedule_answered(&name, sent, (settled && result.is_ok()).then_some(true));
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
                if let Ok(info) = self.engine.pause_schedule(&name, rng.random_bool(0.5)).await {
                    self.ledger.lock().seen_schedules.push((name, info.schedule.next_ms));
                }
            }
            6 => {
                let sent = self.ledger.lock().schedule_sent(&name);
                let deleted = self.engine.delete_schedule(&name).await.is_ok();
                let settled = !before && !self.crashed();
                self.ledger.lock().schedule_answered(&name, sent, (settled && deleted).then_some(false));
            }
            _ => {
                if let Ok(info) = self.engine.schedule(&name).await {
                    self.ledger.lock().seen_schedules.push((name, info.schedule.next_ms));
                }
            }
        }
    }

    /// Pauses or resumes [`QUEUE`], or looks whether it is paused.
    async fn pause(&self, rng: &mut StdRng) {
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
        let settled = !before && !self.crashed();
        let mut ledger = self.ledger.lock();
        ledger.pause.answered(sent, (settled && result.is_ok()).then_some(paused));
        if let Ok(stats) = result {
            assert_eq!(stats.paused, paused, "a pause answered with the queue as asked");
            ledger.seen_paused.push(paused);
        }
    }

    /// Fills [`GRAVEYARD`] with dead tasks (enqueued, claimed, nacked with no
    /// attempt left), or deletes some of its dead.
    async fn graveyard(&self, rng: &mut StdRng) {
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
                        self.ledger.lock().ended.extend(ids);
                    }
                }
            }
        }
    }

    async fn claim(&self, rng: &mut StdRng) {
        let max = rng.random_range(1..4);
        let lease_ms = rng.random_range(100..1_500);
        let paused_before = self.ledger.lock().surely_paused();
        if let Ok(claimed) = self.engine.claim(QUEUE, max, lease_ms, 0).await {
            let mut ledger = self.ledger.lock();
            if paused_before.0 && ledger.surely_paused() == paused_before {
                assert!(claimed.is_empty(), "a claim of a paused queue handed out {} tasks", claimed.len());
            }
            for task in claimed {
                let n = payload_number(&task.payload);
                assert!(ledger.sent.contains(&n), "delivered payload {n}, which no client sent");
                assert!(!ledger.failed.contains(&n), "delivered payload {n}, whose enqueue failed");
                ledger.seen_ids.insert(task.id);
                ledger.leases.insert(task.id, task.lease);
            }
        }
    }

    async fn step(self: &Arc<Self>, rng: &mut StdRng) {
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
                        self.ledger.lock().ended.insert(id);
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
                        self.ledger.lock().ended.insert(id);
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
            _ => self.clock.advance_ms(rng.random_range(0..400)),
        }
        if let Err(broken) = self.engine.check_invariants() {
            panic!("engine invariant broken: {broken}");
        }
        self.tick();
        tokio::task::yield_now().await;
    }
}

/// One seed: callers until the crash, a restart, the checks.
fn run_seed(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let fail_probability = if rng.random_bool(0.5) { 0.02 } else { 0.0 };
    let store = CrashStore::new(seed, fail_probability);
    let clock = Arc::new(ManualWallClock::at_ms(T0_MS));
    let engine = Engine::open(Box::new(store.clone()), options(), clock.clone()).expect("open");
    let world = Arc::new(World {
        engine: engine.clone(),
        clock: clock.clone(),
        store: store.clone(),
        ledger: Mutex::new(Ledger::default()),
        next_payload: AtomicU64::new(1),
        crash_at: rng.random_range(10..(CALLERS * OPS_PER_CALLER) as u64),
        torn: rng.random_bool(0.3),
        ops: AtomicU64::new(0),
    });
    // The engine's own timer thread, asleep on the manual clock: each advance wakes it.
    let timers = engine.start_timers().expect("start the timer thread");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let callers: Vec<_> = (0..CALLERS)
            .map(|caller| {
                let world = world.clone();
                let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(31).wrapping_add(caller as u64));
                tokio::spawn(async move {
                    for _ in 0..OPS_PER_CALLER {
                        if world.crashed() {
                            break;
                        }
                        world.step(&mut rng).await;
                    }
                })
            })
            .collect();
        for caller in callers {
            caller.await.expect("a caller panicked");
        }
        let totals = engine.totals().await;
        OCCURRENCES.fetch_add(totals.occurrences_enqueued, Ordering::Relaxed);
        SKIPPED.fetch_add(totals.occurrences_skipped, Ordering::Relaxed);
    });
    store.crash(false);
    engine.close();
    timers.join().unwrap();
    drop(world.engine.clone());
    let world = Arc::try_unwrap(world).ok().expect("the only reference");
    drop(world.engine);
    drop(engine);

    // The machine comes back.
    store.restart();
    store.fail_with_probability(0.0);
    let ledger = world.ledger.into_inner();
    let engine = Engine::open(Box::new(store.clone()), options(), clock.clone()).expect("reopen");
    let durable = store.durable_ids();
    if let Some(disorder) = store.disorder().first() {
        panic!("seed {seed}: the store got a write out of order: {disorder}");
    }
    for (&n, &id) in &ledger.enqueued {
        if !ledger.touched.contains(&id) {
            assert!(durable.contains(&id), "seed {seed}: task {id} (payload {n}) was acknowledged and is gone");
        }
    }
    for id in &ledger.ended {
        assert!(!durable.contains(id), "seed {seed}: task {id} was cancelled or acked, and is back after the restart");
    }
    store.with_history(|history| {
        for id in &ledger.seen_ids {
            assert!(history.ids.contains(id), "seed {seed}: a client saw task {id}, which was never durable");
        }
        for (id, due) in &ledger.seen_due {
            assert!(
                history.due.contains(&(*id, *due)),
                "seed {seed}: a client saw task {id} due at +{} ms, which was never durable",
                due - T0_MS
            );
        }
        for (name, next_ms) in &ledger.seen_schedules {
            assert!(
                history.schedules.contains(&(name.as_str().into(), *next_ms)),
                "seed {seed}: a client saw schedule {name} next at {next_ms:?}, which was never durable"
            );
        }
        if let Some(twice) = history.twice.first() {
            panic!("seed {seed}: an occurrence was stored as two tasks: {twice}");
        }
        for &paused in &ledger.seen_paused {
            // Every queue starts durably resumed.
            assert!(
                !paused || history.paused.contains(&(QUEUE.into(), true)),
                "seed {seed}: a client saw the queue paused, which was never durable"
            );
        }
    });
    runtime.block_on(async {
        for (name, told) in &ledger.schedules {
            let stored = engine.schedule(name).await.is_ok();
            if let Some(put) = told.last {
                assert_eq!(
                    stored,
                    put,
                    "seed {seed}: schedule {name} was answered {}",
                    if put { "put" } else { "deleted" }
                );
            }
        }
    });
    runtime.block_on(async {
        let paused = engine.queue(QUEUE).await.is_some_and(|stats| stats.paused);
        if let Some(told) = ledger.pause.last {
            assert_eq!(paused, told, "seed {seed}: the queue was answered {}", if told { "paused" } else { "resumed" });
        }
        // Resumed, so that everything left is delivered below.
        engine.pause_queue(QUEUE, Pause::Resume).await.expect("resume after the restart");
        let highest = ledger.seen_ids.iter().copied().max().unwrap_or(0);
        let fresh = engine
            .enqueue("after", NewTask::new(payload(0), RunAt::Delay(0)))
            .await
            .expect("enqueue after the restart");
        assert!(fresh.id > highest, "seed {seed}: id {} reused (highest seen {highest})", fresh.id);
        clock.advance_ms(86_400_000);
        engine.poll_timers();
        loop {
            let claimed = engine.claim(QUEUE, 1_000, 1_000, 0).await.expect("claim after the restart");
            if claimed.is_empty() {
                break;
            }
            for task in claimed {
                let n = payload_number(&task.payload);
                assert!(ledger.sent.contains(&n), "seed {seed}: delivered payload {n}, which no client sent");
                assert!(!ledger.failed.contains(&n), "seed {seed}: delivered payload {n}, whose enqueue failed");
                engine.ack(task.id, task.lease).await.expect("ack after the restart");
            }
        }
    });
    runtime.block_on(engine.flushed());
    if let Some(twice) = store.with_history(|history| history.twice.first().cloned()) {
        panic!("seed {seed}: after the restart, an occurrence was stored as two tasks: {twice}");
    }
    engine.check_invariants().unwrap_or_else(|broken| panic!("seed {seed}: engine invariant broken: {broken}"));
    engine.close();
}

fn seeds() -> std::ops::Range<u64> {
    if let Some(seed) = std::env::var("HOURGLASS_SIM_SEED").ok().and_then(|s| s.parse().ok()) {
        return seed..seed + 1;
    }
    let count = std::env::var("HOURGLASS_SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(SEEDS_CI);
    0..count
}

/// The kind of a failure: its message without the seed and the numbers.
fn failure_kind(panic: &(dyn std::any::Any + Send)) -> String {
    let message = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    let message = message.split_once(": ").map_or(message.as_str(), |(_, rest)| rest);
    message.chars().map(|c| if c.is_ascii_digit() { 'N' } else { c }).collect::<String>().replace("NN", "N")
}

#[test]
fn crash_simulator() {
    let started = std::time::Instant::now();
    let seeds = seeds();
    let count = seeds.end - seeds.start;
    // With HOURGLASS_SIM_KEEP_GOING=1, every seed runs and the failures are
    // tallied by kind, with the first seed of each: to survey a broken engine.
    let keep_going = std::env::var_os("HOURGLASS_SIM_KEEP_GOING").is_some();
    let mut failures: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    if keep_going {
        std::panic::set_hook(Box::new(|_| {}));
    }
    for seed in seeds {
        if let Err(panic) = std::panic::catch_unwind(|| run_seed(seed)) {
            if keep_going {
                failures.entry(failure_kind(&*panic)).or_insert((seed, 0)).1 += 1;
                continue;
            }
            eprintln!("crash simulator: seed {seed} failed; rerun it with HOURGLASS_SIM_SEED={seed}");
            std::panic::resume_unwind(panic);
        }
    }
    for (kind, (first, times)) in &failures {
        println!("crash simulator: {times} seeds failed (first: seed {first}): {kind}");
    }
    assert!(failures.is_empty(), "{} kinds of failure in {count} seeds", failures.len());
    println!(
        "crash simulator: {count} seeds passed in {:.1?}; schedules enqueued {} occurrences and skipped {} before the crashes",
        started.elapsed(),
        OCCURRENCES.load(Ordering::Relaxed),
        SKIPPED.load(Ordering::Relaxed)
    );
}
