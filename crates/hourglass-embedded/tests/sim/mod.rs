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
//! - push and flow control: a put of the queue's settings answered with
//!   success holds after the restart (unless another was sent meanwhile);
//!   settings a client saw were durable; a task's own target comes back
//!   with it; pull claims never hand out a task of push, push claims only
//!   those, each with its own target or its queue's;
//! - dead tasks deleted together (in a queue of their own, [`GRAVEYARD`]):
//!   those answered deleted do not come back, and the deletes take nothing
//!   from the other queue;
//! - the engine's own invariants hold after the restart.
//!
//! One seed in [`RELAXED_ONE_IN`] runs the relaxed mode (`--fsync-every-ms`,
//! an interval of a few milliseconds of real time): commits without fsync,
//! made durable by the writer's periodic sync, of which a crash keeps any
//! prefix. There the promise is the relaxed one, and so are the checks:
//! what a client saw was committed (not yet durable, perhaps); an enqueue,
//! cancel or ack answered must hold if the crash kept the batch that stored
//! it, another answer if it kept the batches committed by the time of the
//! answer, and may be lost otherwise; and the store holds a prefix of
//! the order of changes (no write found out of order, whatever prefix was
//! kept; the engine's invariants hold on it). Ids are never reused, those of
//! tasks a crash lost included.
//!
//! The operations of a seed are fixed by the seed; their interleaving with the
//! engine's writer and timer threads is up to the OS, so a failing seed points
//! at a schedule of operations, not at one exact interleaving. `HOURGLASS_SIM_SEEDS=N`
//! runs N seeds (CI runs [`SEEDS_CI`]); `HOURGLASS_SIM_SEED=S` runs seed S alone.

mod compaction;
mod disk;
mod held;
mod ledger;
mod push;
mod relaxed_log;
mod store;
mod world;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hourglass_embedded::{Engine, Fsync, Store};
use hourglass_queue::prelude::*;
use hourglass_queue::{Claim, DeadReason, ManualWallClock, NewTask, Pause, QueueSettings, RunAt, TaskState};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::deadline;
use ledger::Ledger;
pub use store::CrashStore;
use world::{options, payload, World, QUEUE, T0_MS};

/// Seeds CI runs.
const SEEDS_CI: u64 = 3_000;
/// Concurrent callers per seed.
const CALLERS: usize = 4;
/// Operations per caller, at most, before the crash stops them.
const OPS_PER_CALLER: usize = 60;
/// One seed in this many runs the relaxed mode.
const RELAXED_ONE_IN: u32 = 4;
/// The relaxed seeds' periodic sync, at most this many milliseconds apart.
const RELAXED_SYNC_MS_MAX: u64 = 20;

/// Occurrences schedules enqueued and skipped, over every seed: what the
/// simulator exercised, printed at the end.
static OCCURRENCES: AtomicU64 = AtomicU64::new(0);
static SKIPPED: AtomicU64 = AtomicU64::new(0);
/// Compactions, and crashes in the middle of one, over every seed.
static COMPACTIONS: AtomicU64 = AtomicU64::new(0);
static CRASHED_COMPACTING: AtomicU64 = AtomicU64::new(0);
/// Relaxed seeds, and the acknowledged enqueues their crashes lost (allowed
/// there: their batches were past the prefix kept).
static RELAXED: AtomicU64 = AtomicU64::new(0);
static LOST_RELAXED: AtomicU64 = AtomicU64::new(0);
/// Tasks of damaged payloads ([`world::damaged`]) after the restart, and
/// those of them dead of it, over every seed.
static DEAD_CORRUPT: AtomicU64 = AtomicU64::new(0);
static DAMAGED: AtomicU64 = AtomicU64::new(0);

/// One seed: callers until the crash, a restart, the checks.
fn run_seed(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let fail_probability = if rng.random_bool(0.5) { 0.02 } else { 0.0 };
    let store = CrashStore::new(seed, fail_probability);
    let clock = Arc::new(ManualWallClock::at_ms(T0_MS));
    // Drawn apart, so that the other draws of a seed stay as they were.
    let mut mode = StdRng::seed_from_u64(seed ^ 0x00e1_a8ed);
    let relaxed = mode.random_ratio(1, RELAXED_ONE_IN);
    let fsync = if relaxed { Fsync::EveryMs(mode.random_range(1..=RELAXED_SYNC_MS_MAX)) } else { Fsync::Always };
    RELAXED.fetch_add(u64::from(relaxed), Ordering::Relaxed);
    let engine = Engine::open(Box::new(store.clone()), options(fsync), clock.clone()).expect("open");
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
    runtime.block_on(deadline::within(&format!("seed {seed}: the callers"), async {
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
    }));
    store.crash(false);
    let (compactions, crashed_compacting) = store.compactions();
    COMPACTIONS.fetch_add(compactions, Ordering::Relaxed);
    CRASHED_COMPACTING.fetch_add(u64::from(crashed_compacting), Ordering::Relaxed);
    engine.close();
    deadline::stop("the timer thread", timers);
    drop(world.engine.clone());
    let world = Arc::try_unwrap(world).ok().expect("the only reference");
    drop(world.engine);
    drop(engine);

    // The machine comes back.
    store.restart();
    store.fail_with_probability(0.0);
    let ledger = world.ledger.into_inner();
    // What the crash kept: every batch committed by then, unless relaxed.
    // Read before the engine commits again.
    let kept = store.kept();
    assert!(relaxed || kept == store.applied(), "seed {seed}: a commit was not durable, and the mode is not relaxed");
    let must_hold = |at: u64| at <= kept;
    let durable = store.durable_ids();
    let engine = Engine::open(Box::new(store.clone()), options(fsync), clock.clone()).expect("reopen");
    if let Some(disorder) = store.disorder().first() {
        panic!("seed {seed}: the store got a write out of order: {disorder}");
    }
    // Acknowledged tasks the crash lost, past the prefix it kept: their ids
    // may name other tasks after the restart.
    let mut lost = std::collections::HashSet::new();
    // Of an enqueue, a cancel or an ack answered: the batch that stored it
    // (the first, numbered from 0) was past the prefix kept.
    let past_kept = |batch: Option<u64>| batch.is_some_and(|batch| !must_hold(batch + 1));
    for (&n, &id) in &ledger.enqueued {
        if ledger.touched.contains(&id) || durable.contains(&id) {
            continue;
        }
        assert!(past_kept(store.inserted_in(id)), "seed {seed}: task {id} (payload {n}) was acknowledged and is gone");
        lost.insert(id);
    }
    LOST_RELAXED.fetch_add(lost.len() as u64, Ordering::Relaxed);
    for id in &ledger.ended {
        assert!(
            !durable.contains(id) || past_kept(store.deleted_in(*id)),
            "seed {seed}: task {id} was cancelled or acked, and is back after the restart"
        );
    }
    if let Some(twice) = store.with_history(|history| history.twice.first().cloned()) {
        panic!("seed {seed}: an occurrence was stored as two tasks: {twice}");
    }
    // Visible once durable; in the relaxed mode, once committed.
    let (never, history) = if relaxed {
        ("committed", store.with_committed(Clone::clone))
    } else {
        ("durable", store.with_history(Clone::clone))
    };
    for id in &ledger.seen_ids {
        assert!(history.ids.contains(id), "seed {seed}: a client saw task {id}, which was never {never}");
    }
    for (id, due) in &ledger.seen_due {
        assert!(
            history.due.contains(&(*id, *due)),
            "seed {seed}: a client saw task {id} due at +{} ms, which was never {never}",
            due - T0_MS
        );
    }
    for (name, next_ms) in &ledger.seen_schedules {
        assert!(
            history.schedules.contains(&(name.as_str().into(), *next_ms)),
            "seed {seed}: a client saw schedule {name} next at {next_ms:?}, which was never {never}"
        );
    }
    for seen in &ledger.seen_settings {
        assert!(
            *seen == QueueSettings::default() || history.settings.contains(&(QUEUE.into(), seen.clone())),
            "seed {seed}: a client saw settings {seen:?}, which were never {never}"
        );
    }
    for &paused in &ledger.seen_paused {
        // Every queue starts durably resumed.
        assert!(
            !paused || history.paused.contains(&(QUEUE.into(), true)),
            "seed {seed}: a client saw the queue paused, which was never {never}"
        );
    }
    runtime.block_on(deadline::within(&format!("seed {seed}: the schedules' check"), async {
        for (name, told) in &ledger.schedules {
            let stored = engine.schedule(name).await.is_ok();
            if let Some(put) = told.must_hold(kept) {
                assert_eq!(
                    stored,
                    put,
                    "seed {seed}: schedule {name} was answered {}",
                    if put { "put" } else { "deleted" }
                );
            }
        }
    }));
    runtime.block_on(deadline::within(&format!("seed {seed}: the delivery after the restart"), async {
        let paused = engine.queue(QUEUE).await.is_some_and(|stats| stats.paused);
        if let Some(told) = ledger.pause.must_hold(kept) {
            assert_eq!(paused, told, "seed {seed}: the queue was answered {}", if told { "paused" } else { "resumed" });
        }
        let settings = engine.settings(QUEUE).await.expect("settings after the restart");
        if ledger.settings.must_hold(kept) == Some(true) {
            assert_eq!(&settings, ledger.settings_sent.last().unwrap(), "seed {seed}: the last settings were answered");
        }
        // Resumed, so that everything left is delivered below.
        engine.pause_queue(QUEUE, Pause::Resume).await.expect("resume after the restart");
        // Every id seen, in the relaxed mode too: those of tasks a crash
        // lost among them.
        let highest = ledger.seen_ids.iter().copied().max().unwrap_or(0);
        let fresh = engine
            .enqueue("after", NewTask::new(payload(0), RunAt::Delay(0)))
            .await
            .expect("enqueue after the restart");
        assert!(fresh.id > highest, "seed {seed}: id {} reused (highest seen {highest})", fresh.id);
        // Twice: a lease stored before the crash runs out at the first pass's
        // tick, and its task is due again after a backoff, by the second.
        for _pass in 0..2 {
            clock.advance_ms(86_400_000);
            engine.poll_timers();
            for push in [false, true] {
                loop {
                    let claim = if push { Claim::push(1_000, 0) } else { Claim::new(&[QUEUE], 1_000, 1_000, 0) };
                    let claimed = engine.claim_from(claim.unwrap()).await.expect("claim after the restart");
                    if claimed.is_empty() {
                        break;
                    }
                    for task in claimed {
                        // The seed is named by the simulator when this panics.
                        push::check_claimed(&ledger, &task, push);
                        engine.ack(task.id, task.lease).await.expect("ack after the restart");
                    }
                }
            }
        }
    }));
    runtime.block_on(deadline::within("the writer's settlements", engine.flushed()));
    // A damaged payload is never handed out (check_claimed): its task ends
    // dead, as stored. Of it, `corrupt`, unless its expiry came first, or a
    // crash lost the change after the claim's lease was written (the lease
    // then ran out, counting the attempt the consumer never got). What the
    // engine committed since the restart is made durable to be read: the
    // relaxed mode's periodic sync may not have come yet.
    Store::sync(&store).expect("a sync after the restart");
    for (&n, &id) in &ledger.enqueued {
        if !world::damaged(n) || ledger.touched.contains(&id) || lost.contains(&id) {
            continue;
        }
        let task = store.durable_task(id).unwrap_or_else(|| panic!("seed {seed}: task {id} (payload {n}) is gone"));
        assert_eq!(
            task.state,
            TaskState::Dead,
            "seed {seed}: task {id} (payload {n}, damaged) did not end dead: {task:?}"
        );
        DEAD_CORRUPT.fetch_add(u64::from(task.dead_reason == DeadReason::Corrupt), Ordering::Relaxed);
        DAMAGED.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(twice) = store.with_history(|history| history.twice.first().cloned()) {
        panic!("seed {seed}: after the restart, an occurrence was stored as two tasks: {twice}");
    }
    engine.check_invariants().unwrap_or_else(|broken| panic!("seed {seed}: engine invariant broken: {broken}"));
    engine.close();
}

/// Runs `run` for one seed in `one_in` of the simulator's (or the seed
/// `HOURGLASS_SIM_SEED` names), naming the first that fails and how to run
/// it alone; returns how many ran. For the simulators of the store's own
/// files, which run a share of the engine's seeds.
fn run_share(name: &str, one_in: u64, run: fn(u64)) -> usize {
    let seeds: Vec<u64> = match std::env::var("HOURGLASS_SIM_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(seed) => vec![seed],
        None => seeds().filter(|seed| seed.is_multiple_of(one_in)).collect(),
    };
    for &seed in &seeds {
        if let Err(panic) = std::panic::catch_unwind(|| run(seed)) {
            eprintln!("{name}: seed {seed} failed; rerun it with HOURGLASS_SIM_SEED={seed}");
            std::panic::resume_unwind(panic);
        }
    }
    seeds.len()
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
        "crash simulator: {count} seeds passed in {:.1?}; schedules enqueued {} occurrences and skipped {} before the crashes; \
         {} compactions, {} crashes in the middle of one; {} tasks of damaged payloads, none handed out, all dead, {} of them `corrupt`; \
         {} seeds relaxed, whose crashes lost {} acknowledged enqueues past the prefix kept",
        started.elapsed(),
        OCCURRENCES.load(Ordering::Relaxed),
        SKIPPED.load(Ordering::Relaxed),
        COMPACTIONS.load(Ordering::Relaxed),
        CRASHED_COMPACTING.load(Ordering::Relaxed),
        DAMAGED.load(Ordering::Relaxed),
        DEAD_CORRUPT.load(Ordering::Relaxed),
        RELAXED.load(Ordering::Relaxed),
        LOST_RELAXED.load(Ordering::Relaxed),
    );
}
