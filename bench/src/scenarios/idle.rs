//! Scenario 7: how often the scheduler's threads wake while 1 M jobs wait far
//! in the future. Counted from the kernel's context-switch counters of every
//! thread of the process but the measuring one, so it applies to any peer.

use std::time::{Duration, Instant};

use hourglass::Scheduler;

use crate::report::Row;
use crate::scenarios::structures::label;
use crate::Settings;

const FAR_AHEAD: Duration = Duration::from_secs(3_600);
/// Lets the threads finish starting up before counting.
const SETTLE: Duration = Duration::from_millis(300);

/// Context switches, voluntary and not, of every thread but the caller.
fn other_threads_switches() -> u64 {
    let me = std::fs::read_link("/proc/thread-self").ok().and_then(|p| p.file_name().map(|n| n.to_owned()));
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    tasks
        .flatten()
        .filter(|task| Some(task.file_name()) != me)
        .filter_map(|task| std::fs::read_to_string(task.path().join("status")).ok())
        .flat_map(|status| {
            status
                .lines()
                .filter(|line| line.contains("ctxt_switches"))
                .filter_map(|line| line.split_whitespace().last()?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

fn wakeups_per_sec(settings: &Settings) -> f64 {
    std::thread::sleep(SETTLE);
    let before = other_threads_switches();
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(settings.idle_secs));
    (other_threads_switches() - before) as f64 / start.elapsed().as_secs_f64()
}

pub fn idle_hourglass(settings: &Settings, n: usize) -> Row {
    let scheduler = Scheduler::builder().max_pending(n + 1).build().unwrap();
    for _ in 0..n {
        scheduler.schedule(FAR_AHEAD, || {}).unwrap();
    }
    let wakeups = wakeups_per_sec(settings);
    Row { wakeups_per_sec: Some(wakeups), ..Row::new("idle", format!("far_{}", label(n)), "hourglass", n as u64) }
}

pub fn idle_tokio(settings: &Settings, n: usize) -> Row {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    for _ in 0..n {
        runtime.spawn(async { tokio::time::sleep(FAR_AHEAD).await });
    }
    let wakeups = wakeups_per_sec(settings);
    runtime.shutdown_background();
    Row {
        wakeups_per_sec: Some(wakeups),
        ..Row::new("idle", format!("far_{}", label(n)), "tokio-spawn-sleep", n as u64)
    }
}
