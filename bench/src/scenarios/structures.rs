//! Scenarios 1 to 5: the data structures alone, on one thread, time in ms.

use std::hint::black_box;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::alloc::bytes_retained;
use crate::queues::TimerQueue;
use crate::report::{median, Row};
use crate::Settings;

/// Heartbeat deadlines: 30 to 90 s ahead.
const HEARTBEAT_MS: std::ops::Range<u64> = 30_000..90_000;
/// Random reschedules: deadlines 2 to 12 minutes ahead.
const RESCHEDULE_MS: std::ops::Range<u64> = 120_000..720_000;
/// Churn advances the clock by 1 ms every this many operations.
const OPS_PER_MS: usize = 1_000;
/// Request timeouts: 5 s.
const REQUEST_TIMEOUT_MS: u64 = 5_000;
/// Requests in flight per batch of the request-timeout scenario.
const REQUEST_BATCH: usize = 1_000;
/// The expiry storm's spread.
const SPREAD_MS: u64 = 60_000;

fn fill<Q: TimerQueue>(queue: &mut Q, n: usize, rng: &mut StdRng) -> Vec<Q::Key> {
    (0..n).map(|_| queue.insert(rng.random_range(HEARTBEAT_MS))).collect()
}

/// Scenario 1, heartbeat churn: each connection has its own timeout of 30 to 90 s, and
/// each operation is a heartbeat of a random connection, which resets its
/// timer to `now + timeout`: always a later deadline, as the issue specifies.
pub fn churn<Q: TimerQueue>(settings: &Settings, n: usize) -> Row {
    // A connection's value is its timeout; its first deadline is the timeout from 0.
    let ns = churn_with::<Q>(
        settings,
        n,
        1,
        |rng| rng.random_range(HEARTBEAT_MS),
        |now_ms, timeout_ms| now_ms + *timeout_ms,
    );
    Row { ns_per_op: Some(ns), ..Row::new("churn", format!("reset_{}", label(n)), Q::NAME, n as u64) }
}

/// Scenario 1b, the other direction: each operation moves a random timer to an earlier
/// deadline (a connection asks for a shorter timeout), which forces a move in
/// a wheel that defers later resets.
pub fn churn_earlier<Q: TimerQueue>(settings: &Settings, n: usize) -> Row {
    // A timer's value is its deadline; each step moves it halfway to now + 30 s:
    // earlier, and never in the past.
    let first = |rng: &mut StdRng| rng.random_range(HEARTBEAT_MS) + 60_000;
    let ns = churn_with::<Q>(settings, n, 11, first, |now_ms, deadline_ms| {
        let floor_ms = now_ms + HEARTBEAT_MS.start;
        *deadline_ms = floor_ms + deadline_ms.saturating_sub(floor_ms) / 2;
        *deadline_ms
    });
    Row { ns_per_op: Some(ns), ..Row::new("churn", format!("reset_earlier_{}", label(n)), Q::NAME, n as u64) }
}

/// Scenario 1c, random reschedules: each operation moves a random timer to a
/// random deadline 2 to 12 minutes from now, earlier or later than the one it
/// had (a job queue whose jobs are postponed or brought forward). The offsets
/// are drawn before the clock starts.
pub fn churn_random<Q: TimerQueue>(settings: &Settings, n: usize) -> Row {
    let mut rng = StdRng::seed_from_u64(13);
    let offsets_ms: Vec<u64> = (0..settings.churn_ops).map(|_| rng.random_range(RESCHEDULE_MS)).collect();
    let mut offsets = offsets_ms.iter().cycle();
    let ns = churn_with::<Q>(
        settings,
        n,
        17,
        |rng| rng.random_range(RESCHEDULE_MS),
        |now_ms, _| now_ms + offsets.next().expect("cycles"),
    );
    Row { ns_per_op: Some(ns), ..Row::new("churn", format!("reschedule_random_{}", label(n)), Q::NAME, n as u64) }
}

/// The churn loop: `n` timers, each with a value from `first` (also its first
/// deadline), kept side by side with its key as a server's connection table
/// would, so an operation looks up one record. Each operation resets a random
/// timer to `next(now, &mut value)`; time moves 1 ms every [`OPS_PER_MS`]
/// operations. Returns the median ns per operation.
fn churn_with<Q: TimerQueue>(
    settings: &Settings,
    n: usize,
    seed: u64,
    first: impl Fn(&mut StdRng) -> u64,
    mut next: impl FnMut(u64, &mut u64) -> u64,
) -> f64 {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut queue = Q::with_capacity(n);
    let mut timers: Vec<(Q::Key, u64)> = (0..n)
        .map(|_| {
            let value = first(&mut rng);
            (queue.insert(value), value)
        })
        .collect();
    let picks: Vec<usize> = (0..settings.churn_ops).map(|_| rng.random_range(0..n)).collect();
    let mut now_ms = 0;
    measure(settings, &picks, |op, index| {
        if op % OPS_PER_MS == 0 {
            now_ms += 1;
            black_box(queue.advance(now_ms));
        }
        let (key, value) = &mut timers[index];
        *key = queue.reset(*key, next(now_ms, value));
    })
}

/// Runs `op(i, pick)` over the picks once per repetition; median ns per op.
fn measure(settings: &Settings, picks: &[usize], mut op: impl FnMut(usize, usize)) -> f64 {
    let samples = (0..settings.reps)
        .map(|_| {
            let start = Instant::now();
            for (i, &pick) in picks.iter().enumerate() {
                op(i, pick);
            }
            start.elapsed().as_nanos() as f64 / picks.len() as f64
        })
        .collect();
    median(samples)
}

/// Scenario 2, request timeouts: insert a batch, then cancel it, with `n` pending behind.
pub fn request_timeouts<Q: TimerQueue>(settings: &Settings, n: usize) -> [Row; 2] {
    let mut rng = StdRng::seed_from_u64(2);
    let mut queue = Q::with_capacity(n + REQUEST_BATCH);
    let _background = fill(&mut queue, n, &mut rng);
    let mut keys = Vec::with_capacity(REQUEST_BATCH);
    let (mut insert_samples, mut cancel_samples) = (Vec::new(), Vec::new());
    let mut now_ms = 0;
    for _ in 0..settings.reps {
        let (mut insert_ns, mut cancel_ns) = (0u128, 0u128);
        for _ in 0..settings.request_batches {
            now_ms += 1;
            black_box(queue.advance(now_ms));
            let start = Instant::now();
            keys.extend((0..REQUEST_BATCH).map(|_| queue.insert(now_ms + REQUEST_TIMEOUT_MS)));
            let inserted = Instant::now();
            for key in keys.drain(..) {
                black_box(queue.cancel(key));
            }
            insert_ns += (inserted - start).as_nanos();
            cancel_ns += inserted.elapsed().as_nanos();
        }
        let ops = (settings.request_batches * REQUEST_BATCH) as f64;
        insert_samples.push(insert_ns as f64 / ops);
        cancel_samples.push(cancel_ns as f64 / ops);
    }
    let case = |what: &str| format!("{what}_{}", label(n));
    [
        Row { ns_per_op: Some(median(insert_samples)), ..Row::new("timeouts", case("insert"), Q::NAME, n as u64) },
        Row { ns_per_op: Some(median(cancel_samples)), ..Row::new("timeouts", case("cancel"), Q::NAME, n as u64) },
    ]
}

/// Scenario 3: cancel every one of `n` pending timers in random order.
pub fn random_cancel<Q: TimerQueue>(settings: &Settings, n: usize) -> Row {
    let samples = (0..settings.reps)
        .map(|rep| {
            let mut rng = StdRng::seed_from_u64(3 + rep as u64);
            let mut queue = Q::with_capacity(n);
            let mut keys = fill(&mut queue, n, &mut rng);
            keys.shuffle(&mut rng);
            let start = Instant::now();
            for key in keys {
                black_box(queue.cancel(key));
            }
            start.elapsed().as_nanos() as f64 / n as f64
        })
        .collect();
    Row { ns_per_op: Some(median(samples)), ..Row::new("cancel", format!("random_{}", label(n)), Q::NAME, n as u64) }
}

/// Scenario 4, expiry storms: `n` timers due in one tick, or spread over 60 s and
/// expired one millisecond at a time. Figures are per fire.
pub fn expiry<Q: TimerQueue>(settings: &Settings, n: usize) -> [Row; 2] {
    let same_tick = (0..settings.reps)
        .map(|_| {
            let mut queue = Q::with_capacity(n);
            for _ in 0..n {
                queue.insert(1_000);
            }
            let start = Instant::now();
            let fired = queue.advance(1_000);
            let ns = start.elapsed().as_nanos() as f64;
            assert_eq!(fired, n, "{} fired {fired} of {n}", Q::NAME);
            ns / n as f64
        })
        .collect();
    let spread = (0..settings.reps)
        .map(|rep| {
            let mut rng = StdRng::seed_from_u64(4 + rep as u64);
            let mut queue = Q::with_capacity(n);
            for _ in 0..n {
                queue.insert(rng.random_range(1..=SPREAD_MS));
            }
            let start = Instant::now();
            let fired: usize = (1..=SPREAD_MS).map(|now_ms| queue.advance(now_ms)).sum();
            let ns = start.elapsed().as_nanos() as f64;
            assert_eq!(fired, n, "{} fired {fired} of {n}", Q::NAME);
            ns / n as f64
        })
        .collect();
    let row = |case: String, ns: f64| Row {
        ns_per_op: Some(ns),
        per_sec: Some(1e9 / ns),
        ..Row::new("expiry", case, Q::NAME, n as u64)
    };
    [row(format!("same_tick_{}", label(n)), median(same_tick)), row(format!("spread_60s_{}", label(n)), median(spread))]
}

/// Scenario 5: heap bytes held per pending timer (no payload), counted by the allocator.
pub fn memory<Q: TimerQueue>(n: usize) -> Row {
    let mut rng = StdRng::seed_from_u64(5);
    let deadlines: Vec<u64> = (0..n).map(|_| rng.random_range(HEARTBEAT_MS)).collect();
    let mut keys = Vec::with_capacity(n);
    let (queue, bytes) = bytes_retained(|| {
        let mut queue = Q::with_capacity(n);
        keys.extend(deadlines.iter().map(|&deadline| queue.insert(deadline)));
        queue
    });
    drop(queue);
    Row {
        bytes_per_timer: Some(bytes as f64 / n as f64),
        ..Row::new("memory", format!("pending_{}", label(n)), Q::NAME, n as u64)
    }
}

pub fn label(n: usize) -> String {
    match n {
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}m", n / 1_000_000),
        n if n >= 1_000 && n % 1_000 == 0 => format!("{}k", n / 1_000),
        n => n.to_string(),
    }
}
