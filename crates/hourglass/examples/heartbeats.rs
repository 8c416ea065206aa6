//! The IoT case: one million connections, each with a liveness timeout that
//! every heartbeat pushes back. A few connections go silent; only theirs must
//! fire. Prints timeouts fired, resets per second, lateness, and memory per
//! pending timer.
//!
//! ```sh
//! cargo run --release --example heartbeats [-- CONNECTIONS]
//! ```
//!
//! Simulated time is shortened (1 s heartbeats, 3 s timeouts) so the run takes
//! about ten seconds; the population is not.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use hourglass::{Scheduler, TaskId};

const DEFAULT_CONNECTIONS: usize = 1_000_000;
const HEARTBEAT_EVERY: Duration = Duration::from_secs(1);
const TIMEOUT: Duration = Duration::from_secs(3);
/// One connection in this many goes silent.
const SILENT_ONE_IN: usize = 1_000;
/// Heartbeat rounds while every connection is alive, then rounds after the silent ones stopped.
const ROUNDS_ALL_ALIVE: u32 = 2;
const ROUNDS_AFTER_SILENCE: u32 = 5;
const HEARTBEAT_THREADS: usize = 2;

struct Connections {
    fired: AtomicU64,
    /// A timeout that fired on a connection that kept sending heartbeats.
    false_alarms: AtomicU64,
}

fn main() {
    let connections: usize = match std::env::args().nth(1) {
        None => DEFAULT_CONNECTIONS,
        Some(arg) => arg.parse().unwrap_or_else(|_| {
            eprintln!("usage: heartbeats [CONNECTIONS]  (a positive whole number, got {arg:?})");
            std::process::exit(2);
        }),
    };
    if connections == 0 {
        eprintln!("usage: heartbeats [CONNECTIONS]  (at least one connection)");
        std::process::exit(2);
    }
    let scheduler = Scheduler::builder().max_pending(connections + 1).build().expect("start the scheduler");
    let state = Arc::new(Connections { fired: AtomicU64::new(0), false_alarms: AtomicU64::new(0) });
    let silent = |c: usize| c.is_multiple_of(SILENT_ONE_IN);

    let rss_before = rss_bytes();
    let started = Instant::now();
    let ids: Vec<TaskId> = (0..connections)
        .map(|c| scheduler.schedule(TIMEOUT, on_timeout(&state, silent(c))).expect("schedule a timeout"))
        .collect();
    let arm_time = started.elapsed();
    let rss_after = rss_bytes();
    let bytes_per_timer = rss_after.saturating_sub(rss_before) as f64 / connections as f64;
    println!(
        "armed {connections} timeouts in {arm_time:.2?} ({:.1} M/s); memory per pending timer, job included: {bytes_per_timer:.0} B (RSS delta)",
        connections as f64 / arm_time.as_secs_f64() / 1e6,
    );

    let resets = AtomicU64::new(0);
    let mut reset_time = Duration::ZERO;
    for round in 1..=ROUNDS_ALL_ALIVE + ROUNDS_AFTER_SILENCE {
        let round_start = Instant::now();
        let silence = round > ROUNDS_ALL_ALIVE;
        thread::scope(|s| {
            for part in ids.chunks(connections.div_ceil(HEARTBEAT_THREADS)).enumerate() {
                let (scheduler, resets) = (&scheduler, &resets);
                s.spawn(move || {
                    let (part_index, part_ids) = part;
                    let first = part_index * connections.div_ceil(HEARTBEAT_THREADS);
                    let mut done = 0;
                    for (offset, &id) in part_ids.iter().enumerate() {
                        let c = first + offset;
                        if silence && silent(c) {
                            continue;
                        }
                        // `false` means the timeout already fired: the job counted it.
                        scheduler.reschedule(id, TIMEOUT).expect("a valid timeout");
                        done += 1;
                    }
                    resets.fetch_add(done, Ordering::Relaxed);
                });
            }
        });
        let sweep = round_start.elapsed();
        reset_time += sweep;
        let stats = scheduler.stats();
        println!(
            "t={:>4.1}s round {round}: {} heartbeats in {sweep:.2?}, {} pending, {} timeouts fired",
            started.elapsed().as_secs_f64(),
            if silence { "silent connections skipped" } else { "all connections sent" },
            stats.pending,
            state.fired.load(Ordering::Relaxed),
        );
        thread::sleep(HEARTBEAT_EVERY.saturating_sub(sweep));
    }

    let expected = (0..connections).filter(|&c| silent(c)).count() as u64;
    let stats = scheduler.stats();
    let resets = resets.load(Ordering::Relaxed);
    println!();
    println!(
        "timeouts fired:    {} (expected {expected}, false alarms {})",
        state.fired.load(Ordering::Relaxed),
        state.false_alarms.load(Ordering::Relaxed)
    );
    println!(
        "resets:            {resets} at {:.1} M/s from {HEARTBEAT_THREADS} threads",
        resets as f64 / reset_time.as_secs_f64() / 1e6
    );
    println!(
        "lateness:          p50 {:?}, p99 {:?}, max {:?} over {} timeouts (tick 1 ms)",
        stats.lateness.p50, stats.lateness.p99, stats.lateness.max, stats.lateness.samples
    );
    println!("memory per timer:  {bytes_per_timer:.0} B (RSS delta over {connections} timers, job included)");
    let report = scheduler.shutdown();
    println!("shutdown:          {} pending timeouts dropped, total {:.1?}", report.dropped.len(), started.elapsed());
    let fired = state.fired.load(Ordering::Relaxed);
    if fired != expected || state.false_alarms.load(Ordering::Relaxed) > 0 {
        eprintln!("FAILED: wrong timeouts fired");
        std::process::exit(1);
    }
}

fn on_timeout(state: &Arc<Connections>, silent: bool) -> impl FnOnce() + Send + 'static {
    let state = state.clone();
    move || {
        state.fired.fetch_add(1, Ordering::Relaxed);
        if !silent {
            state.false_alarms.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Resident set size of this process, from `/proc/self/statm` (0 elsewhere).
fn rss_bytes() -> usize {
    const PAGE_BYTES: usize = 4096;
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|statm| statm.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map_or(0, |pages| pages * PAGE_BYTES)
}
