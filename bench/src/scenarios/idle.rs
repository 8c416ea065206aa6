//! Scenario 7: how often the scheduler's threads wake while 1 M jobs wait far
//! in the future. Counted from the kernel's context-switch counters of the
//! implementation's own threads (found by name), so it applies to any peer.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::{Duration, Instant};

use hourglass::Scheduler;

use crate::report::Row;
use crate::scenarios::structures::label;
use crate::Settings;

const FAR_AHEAD: Duration = Duration::from_secs(3_600);
/// Lets the threads finish starting up before counting.
const SETTLE: Duration = Duration::from_millis(300);

/// Context switches, voluntary and not, of the threads whose name starts with
/// `prefix` (the implementation under test), by thread id: threads left by
/// earlier scenarios must not count, and threads may exit during the window,
/// so counts are compared per thread, never as one sum.
fn switches_by_thread(prefix: &str) -> BTreeMap<OsString, u64> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return BTreeMap::new() };
    tasks
        .flatten()
        .filter(|task| std::fs::read_to_string(task.path().join("comm")).is_ok_and(|name| name.starts_with(prefix)))
        .filter_map(|task| {
            let status = std::fs::read_to_string(task.path().join("status")).ok()?;
            let switches = status
                .lines()
                .filter(|line| line.contains("ctxt_switches"))
                .filter_map(|line| line.split_whitespace().last()?.parse::<u64>().ok())
                .sum();
            Some((task.file_name(), switches))
        })
        .collect()
}

fn wakeups_per_sec(settings: &Settings, prefix: &str) -> f64 {
    std::thread::sleep(SETTLE);
    let before = switches_by_thread(prefix);
    assert!(!before.is_empty(), "no thread named {prefix}*");
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(settings.idle_secs));
    let after = switches_by_thread(prefix);
    let elapsed = start.elapsed().as_secs_f64();
    let woke: u64 =
        after.iter().map(|(thread, &count)| count.saturating_sub(before.get(thread).copied().unwrap_or(0))).sum();
    woke as f64 / elapsed
}

pub fn idle_hourglass(settings: &Settings, n: usize) -> Row {
    let scheduler = Scheduler::builder().max_pending(n + 1).thread_name("idle-hourglass").build().unwrap();
    for _ in 0..n {
        scheduler.schedule(FAR_AHEAD, || {}).unwrap();
    }
    let wakeups = wakeups_per_sec(settings, "idle-hourglass");
    Row { wakeups_per_sec: Some(wakeups), ..Row::new("idle", format!("far_{}", label(n)), "hourglass", n as u64) }
}

pub fn idle_tokio(settings: &Settings, n: usize) -> Row {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("idle-tokio")
        .enable_time()
        .build()
        .unwrap();
    for _ in 0..n {
        runtime.spawn(async { tokio::time::sleep(FAR_AHEAD).await });
    }
    let wakeups = wakeups_per_sec(settings, "idle-tokio");
    runtime.shutdown_background();
    Row {
        wakeups_per_sec: Some(wakeups),
        ..Row::new("idle", format!("far_{}", label(n)), "tokio-spawn-sleep", n as u64)
    }
}
