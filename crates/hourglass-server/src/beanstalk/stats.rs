//! The YAML documents of `stats-job`, `stats-tube` and `stats`, with
//! beanstalkd's keys in its order: what the engine knows, what the front
//! counted, and what the process and the machine say.

use std::sync::atomic::Ordering;

use hourglass_queue::limits::LEASE_MS_DEFAULT;
use hourglass_queue::{Status, SystemWallClock, TaskInfo, TaskState, WallClock};

use super::front::{Front, JobCounts};
use super::reply;

/// `stats-job`'s document.
pub(super) fn job(front: &Front, info: &TaskInfo) -> String {
    let task = &info.task;
    let now = SystemWallClock.now_ms();
    let counts = front.job_counts(task.id);
    let (time_left_ms, delay_s) = match (info.status, task.state) {
        (_, TaskState::Leased { until_ms, .. }) => (until_ms.saturating_sub(now), counts.delay_s),
        (Status::Scheduled, _) => {
            let delay_s = if counts.releases > 0 {
                counts.delay_s
            } else {
                (task.run_at_ms.saturating_sub(task.created_ms) / 1_000) as u32
            };
            (task.run_at_ms.saturating_sub(now), delay_s)
        }
        _ => (0, counts.delay_s),
    };
    let reserved_now = u32::from(matches!(task.state, TaskState::Leased { .. }));
    let timeouts = timeouts(&counts, reserved_now);
    let ttr_ms = task.lease_ms.map_or(LEASE_MS_DEFAULT, u64::from);
    reply::mapping(&[
        ("id", task.id.to_string()),
        ("tube", task.queue.to_string()),
        ("state", state_name(info.status).into()),
        ("pri", task.priority.to_string()),
        ("age", (now.saturating_sub(task.created_ms) / 1_000).to_string()),
        ("delay", delay_s.to_string()),
        ("ttr", (ttr_ms / 1_000).to_string()),
        ("time-left", (time_left_ms / 1_000).to_string()),
        ("file", "0".into()),
        ("reserves", counts.reserves.max(task.attempt).to_string()),
        ("timeouts", timeouts.to_string()),
        ("releases", counts.releases.to_string()),
        ("buries", counts.buries.to_string()),
        ("kicks", counts.kicks.to_string()),
    ])
}

/// `stats-tube`'s document, if the tube exists.
pub(super) async fn tube(front: &Front, tube: &str) -> Option<String> {
    if !front.tubes().await.iter().any(|t| t == tube) {
        return None;
    }
    let stats = front.backend.queue(tube).await;
    let refs = front.tubes.lock().get(tube).cloned().unwrap_or_default();
    // The pause's end is the engine's, which a restart keeps; its length
    // is known to the front that was asked for it.
    let left_s = stats
        .as_ref()
        .and_then(|q| q.paused_until_ms)
        .map_or(0, |until_ms| until_ms.saturating_sub(SystemWallClock.now_ms()) / 1_000);
    let pause_s = refs.pause.map_or(0, |(pause_s, _)| pause_s).max(left_s as u32);
    let count = |read: fn(&hourglass_queue::QueueStats) -> u64| stats.as_ref().map_or(0, read);
    Some(reply::mapping(&[
        ("name", tube.to_owned()),
        ("current-jobs-urgent", count(|q| q.urgent as u64).to_string()),
        ("current-jobs-ready", count(|q| q.due as u64).to_string()),
        ("current-jobs-reserved", count(|q| q.leased as u64).to_string()),
        ("current-jobs-delayed", count(|q| q.scheduled as u64).to_string()),
        ("current-jobs-buried", count(|q| q.dead as u64).to_string()),
        ("total-jobs", count(|q| q.enqueued).to_string()),
        ("current-using", refs.using.to_string()),
        ("current-watching", refs.watching.to_string()),
        ("current-waiting", refs.waiting.to_string()),
        ("cmd-delete", refs.deletes.to_string()),
        ("cmd-pause-tube", refs.pauses.to_string()),
        ("pause", pause_s.to_string()),
        ("pause-time-left", left_s.to_string()),
    ]))
}

/// `stats`' document.
pub(super) async fn server(front: &Front) -> String {
    let queues = front.backend.queues().await;
    let totals = front.backend.totals().await;
    let sum = |read: fn(&hourglass_queue::QueueStats) -> usize| queues.iter().map(read).sum::<usize>().to_string();
    let mut pairs: Vec<(&str, String)> = vec![
        ("current-jobs-urgent", sum(|q| q.urgent)),
        ("current-jobs-ready", sum(|q| q.due)),
        ("current-jobs-reserved", sum(|q| q.leased)),
        ("current-jobs-delayed", sum(|q| q.scheduled)),
        ("current-jobs-buried", sum(|q| q.dead)),
    ];
    pairs.extend(front.counters.read().map(|(counter, count)| (counter.key(), count.to_string())));
    let waiting: u32 = front.tubes.lock().values().map(|refs| refs.waiting).sum();
    let (user, system) = cpu_seconds();
    pairs.extend([
        ("job-timeouts", totals.lease_expired.to_string()),
        ("total-jobs", totals.enqueued.to_string()),
        ("max-job-size", front.options.job_bytes_max.to_string()),
        ("current-tubes", front.tubes().await.len().to_string()),
        ("current-connections", front.connections().to_string()),
        ("current-producers", front.producers.load(Ordering::Relaxed).to_string()),
        ("current-workers", front.workers.load(Ordering::Relaxed).to_string()),
        ("current-waiting", waiting.to_string()),
        ("total-connections", front.total_connections.load(Ordering::Relaxed).to_string()),
        ("pid", std::process::id().to_string()),
        ("version", format!("\"hourglass {}\"", env!("CARGO_PKG_VERSION"))),
        ("rusage-utime", user),
        ("rusage-stime", system),
        ("uptime", front.started.elapsed().as_secs().to_string()),
        // No binlog: the engine's store is not a log, and is compacted as it goes.
        ("binlog-oldest-index", "0".into()),
        ("binlog-current-index", "0".into()),
        ("binlog-records-migrated", "0".into()),
        ("binlog-records-written", "0".into()),
        ("binlog-max-size", "0".into()),
        ("draining", front.draining.load(Ordering::SeqCst).to_string()),
        ("id", front.instance.clone()),
        ("hostname", read_proc("/proc/sys/kernel/hostname")),
        ("os", read_proc("/proc/sys/kernel/version")),
        ("platform", std::env::consts::ARCH.into()),
    ]);
    reply::mapping(&pairs)
}

/// A job's state, in beanstalkd's words.
fn state_name(status: Status) -> &'static str {
    match status {
        Status::Scheduled => "delayed",
        Status::Due => "ready",
        Status::Leased => "reserved",
        Status::Dead => "buried",
    }
}

/// Reservations that ended by running out of time: every reservation ends
/// in a release, a bury, a delete (and the job is gone), a closed
/// connection, or a timeout.
fn timeouts(counts: &JobCounts, reserved_now: u32) -> u32 {
    counts.reserves.saturating_sub(counts.releases + counts.buries + counts.dropped + reserved_now)
}

/// User and system CPU seconds of this process, as `stats` prints them
/// (`0.000000` where `/proc` does not say).
fn cpu_seconds() -> (String, String) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
    let ticks = |at: usize| fields.get(at).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // Linux's USER_HZ is 100 on every architecture it runs on.
    let seconds = |ticks: u64| format!("{}.{:06}", ticks / 100, (ticks % 100) * 10_000);
    (seconds(ticks(11)), seconds(ticks(12)))
}

fn read_proc(path: &str) -> String {
    std::fs::read_to_string(path).map_or_else(|_| "unknown".into(), |text| text.trim().to_owned())
}
