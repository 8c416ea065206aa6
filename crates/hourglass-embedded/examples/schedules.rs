//! Many schedules on the real engine, store and clock: how late their
//! occurrences reach a waiting consumer, and what firing them costs.
//!
//! ```sh
//! cargo run --release -p hourglass-queue --example schedules -- 10000 10
//! ```
//!
//! Puts N schedules that fire every second (`* * * * * *` in Europe/Berlin),
//! then for SECONDS seconds two consumers long-poll claims of 1,000 and ack
//! them in batches; prints the occurrences delivered against those due, the
//! lateness from occurrence to claim (p50, p99, max), and the process's CPU
//! time per occurrence (firing, writing, claiming and acking together).

use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use hourglass_embedded::{Engine, Options, RedbStore};
use hourglass_queue::prelude::*;
use hourglass_queue::{Misfire, NewSchedule, Overlap, Rule, SystemWallClock, WallClock};
use parking_lot::Mutex;

const QUEUE: &str = "ticks";
const CONSUMERS: usize = 2;

fn now_us() -> u64 {
    SystemWallClock.now_us()
}

/// User and system CPU time of this process so far.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields 14 and 15 (utime, stime) in clock ticks, after the command's closing parenthesis.
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    let ticks = field(11) + field(12);
    Duration::from_millis(ticks * 10) // USER_HZ is 100 on Linux
}

#[tokio::main]
async fn main() {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().expect("numbers")).collect();
    let (schedules, seconds) = (args.first().copied().unwrap_or(10_000), args.get(1).copied().unwrap_or(10));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = RedbStore::open(dir.path()).expect("open the store");
    let engine = Engine::open(Box::new(store), Options::default(), Arc::new(SystemWallClock)).expect("open");
    let _timers = engine.start_timers().expect("start the timer thread");
    let started = Instant::now();
    for n in 0..schedules {
        let new = NewSchedule {
            queue: QUEUE.into(),
            rule: Rule::Cron { expression: "* * * * * *".into(), time_zone: "Europe/Berlin".into() },
            payload: format!("{{\"schedule\":{n}}}").into(),
            misfire: Misfire::Skip,
            overlap: Overlap::Allow,
            max_attempts: None,
            expires_after_ms: None,
        };
        engine.put_schedule(&format!("s{n}"), new, Expect::Any).await.expect("put");
    }
    println!("schedules: put {schedules} in {:.1?}", started.elapsed());
    // Start measuring at the next whole second.
    let begin_us = (now_us() / 1_000_000 + 1) * 1_000_000;
    let end_us = begin_us + seconds as u64 * 1_000_000;
    let lateness = Arc::new(Mutex::new(Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds")));
    let cpu_before = cpu_time();
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let (engine, lateness) = (engine.clone(), lateness.clone());
            tokio::spawn(async move {
                let mut delivered = 0u64;
                while now_us() < end_us + 2_000_000 {
                    let tasks = engine.claim(QUEUE, 1_000, 60_000, 200).await.expect("claim");
                    let received_us = now_us();
                    {
                        let mut late = lateness.lock();
                        for task in &tasks {
                            let due_us = task.run_at_ms * 1_000;
                            if (begin_us..end_us).contains(&due_us) {
                                late.saturating_record(received_us.saturating_sub(due_us).max(1));
                                delivered += 1;
                            }
                        }
                    }
                    let acks = tasks.iter().map(|task| engine.ack(task.id, task.lease));
                    for result in futures_util::future::join_all(acks).await {
                        result.expect("ack");
                    }
                }
                delivered
            })
        })
        .collect();
    let mut delivered = 0;
    for consumer in consumers {
        delivered += consumer.await.expect("a consumer");
    }
    let cpu = cpu_time() - cpu_before;
    let due = schedules as u64 * seconds as u64;
    let (p50, p99, max) = {
        let late = lateness.lock();
        (late.value_at_quantile(0.5), late.value_at_quantile(0.99), late.max())
    };
    let ms = |us: u64| us as f64 / 1_000.0;
    println!(
        "schedules: {schedules} every second for {seconds} s: {delivered} of {due} occurrences delivered; \
         occurrence to claim p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; CPU {:.1} µs an occurrence ({:.1?} in all)",
        ms(p50),
        ms(p99),
        ms(max),
        cpu.as_secs_f64() * 1e6 / delivered.max(1) as f64,
        cpu
    );
    let totals = engine.totals().await;
    println!(
        "schedules: totals: {} occurrences enqueued, {} skipped",
        totals.occurrences_enqueued, totals.occurrences_skipped
    );
    engine.close();
}
