//! Between the contract's model ([`hourglass_queue`]) and the API's JSON
//! ([`hourglass_wire`]): what a request asks for, as the backend takes it,
//! and what the backend answers, as the API shows it. Neither crate knows the
//! other: the backends know nothing of JSON or text forms, the wire crate
//! nothing of backends. Both sides' types are foreign here, so these are
//! functions rather than `From` impls.
//!
//! - A payload is bytes: JSON text as it came (`payload`, checked to be JSON)
//!   or any bytes (`payload_base64`), shown by [`wire::payload::show`]'s rule
//!   (JSON text as `payload`, any other bytes as `payload_base64`).
//! - A schedule's runs are shown in Unix ms and as local times with their
//!   offsets in its time zone (RFC 3339).

use hourglass_queue::{
    Claimed, Cursor, DeadReason, Enqueued, Lease, Misfire, NewSchedule, NewTask, NodeStats, Overlap, Page, Payload,
    QueueSettings, QueueStats, Rule, RunAt, ScheduleInfo, SchedulePage, Status, TaskInfo, TaskState, Totals,
};
use hourglass_wire as wire;
use serde_json::value::RawValue;

use crate::error::ApiError;

/// What a request's `payload` and `payload_base64` stand for, as the
/// backend keeps it ([`wire::payload::sent`]).
fn sent(payload: Box<RawValue>, base64: Option<&str>) -> Result<Payload, ApiError> {
    wire::payload::sent(payload, base64).map(Payload::from).map_err(ApiError::invalid)
}

pub(crate) fn state(status: Status) -> wire::State {
    match status {
        Status::Scheduled => wire::State::Scheduled,
        Status::Due => wire::State::Due,
        Status::Leased => wire::State::Leased,
        Status::Dead => wire::State::Dead,
    }
}

/// The status named `text`.
pub(crate) fn parse_status(text: &str) -> Result<Status, ApiError> {
    Ok(match text.parse::<wire::State>()? {
        wire::State::Scheduled => Status::Scheduled,
        wire::State::Due => Status::Due,
        wire::State::Leased => Status::Leased,
        wire::State::Dead => Status::Dead,
    })
}

/// The lease written `text`.
pub(crate) fn parse_lease(text: &str) -> Result<Lease, ApiError> {
    Ok(Lease(text.parse::<wire::Lease>()?.0))
}

fn cursor(cursor: Cursor) -> wire::Cursor {
    wire::Cursor { priority: cursor.priority, run_at_ms: cursor.run_at_ms, id: cursor.id }
}

/// The cursor written `text`.
pub(crate) fn parse_cursor(text: &str) -> Result<Cursor, ApiError> {
    let wire::Cursor { priority, run_at_ms, id } = text.parse()?;
    Ok(Cursor { priority, run_at_ms, id })
}

fn misfire(misfire: Misfire) -> wire::Misfire {
    match misfire {
        Misfire::Skip => wire::Misfire::Skip,
        Misfire::Once => wire::Misfire::Once,
        Misfire::All => wire::Misfire::All,
    }
}

fn parse_misfire(text: &str) -> Result<Misfire, ApiError> {
    Ok(match text.parse::<wire::Misfire>()? {
        wire::Misfire::Skip => Misfire::Skip,
        wire::Misfire::Once => Misfire::Once,
        wire::Misfire::All => Misfire::All,
    })
}

fn overlap(overlap: Overlap) -> wire::Overlap {
    match overlap {
        Overlap::Allow => wire::Overlap::Allow,
        Overlap::Forbid => wire::Overlap::Forbid,
    }
}

fn parse_overlap(text: &str) -> Result<Overlap, ApiError> {
    Ok(match text.parse::<wire::Overlap>()? {
        wire::Overlap::Allow => Overlap::Allow,
        wire::Overlap::Forbid => Overlap::Forbid,
    })
}

/// When a task asked to be due now, after a delay or at a time is due.
pub(crate) fn run_at(delay_ms: Option<u64>, run_at_ms: Option<u64>) -> Result<RunAt, ApiError> {
    match (delay_ms, run_at_ms) {
        (Some(_), Some(_)) => Err(ApiError::invalid("give delay_ms or run_at_ms, not both")),
        (Some(delay_ms), None) => Ok(RunAt::Delay(delay_ms)),
        (None, Some(at_ms)) => Ok(RunAt::At(at_ms)),
        (None, None) => Ok(RunAt::Delay(0)),
    }
}

/// A task to enqueue, as the backend takes it.
pub(crate) fn new_task(task: wire::NewTask) -> Result<NewTask, ApiError> {
    Ok(NewTask {
        payload: sent(task.payload, task.payload_base64.as_deref())?,
        run_at: run_at(task.delay_ms, task.run_at_ms)?,
        key: task.key,
        max_attempts: task.max_attempts,
        priority: task.priority,
        lease_ms: task.lease_ms,
        every_ms: task.every_ms,
        expires: match (task.expires_at_ms, task.expires_after_ms) {
            (Some(_), Some(_)) => return Err(ApiError::invalid("give expires_at_ms or expires_after_ms, not both")),
            (Some(at_ms), None) => Some(RunAt::At(at_ms)),
            (None, Some(after_ms)) => Some(RunAt::Delay(after_ms)),
            (None, None) => None,
        },
        http: task.http.map(crate::push::task_target).transpose()?,
    })
}

/// A schedule to put, as the backend takes it: `cron` (in `time_zone`, UTC
/// if absent) or `every_ms`.
pub(crate) fn new_schedule(schedule: wire::NewSchedule) -> Result<NewSchedule, ApiError> {
    let rule = match (schedule.cron, schedule.every_ms, schedule.time_zone) {
        (Some(expression), None, time_zone) => Rule::Cron {
            expression: expression.into(),
            time_zone: time_zone.unwrap_or_else(|| "UTC".to_owned()).into(),
        },
        (None, Some(every_ms), None) => Rule::Every { every_ms },
        (None, Some(_), Some(_)) => return Err(ApiError::invalid("time_zone goes with cron, not every_ms")),
        (Some(_), Some(_), _) => return Err(ApiError::invalid("give cron or every_ms, not both")),
        (None, None, _) => return Err(ApiError::invalid("give cron (with time_zone) or every_ms")),
    };
    Ok(NewSchedule {
        queue: schedule.queue,
        rule,
        payload: sent(schedule.payload, schedule.payload_base64.as_deref())?,
        misfire: schedule.misfire.as_deref().map(parse_misfire).transpose()?.unwrap_or_default(),
        overlap: schedule.overlap.as_deref().map(parse_overlap).transpose()?.unwrap_or_default(),
        max_attempts: schedule.max_attempts,
        expires_after_ms: schedule.expires_after_ms,
    })
}

pub(crate) fn task(info: TaskInfo) -> wire::Task {
    let task = info.task;
    let (payload, payload_base64) = wire::payload::show(&info.payload);
    wire::Task {
        id: task.id,
        queue: task.queue.to_string(),
        state: state(info.status),
        payload,
        payload_base64,
        run_at_ms: task.run_at_ms,
        attempt: task.attempt,
        max_attempts: task.max_attempts,
        priority: task.priority,
        lease_ms: task.lease_ms,
        key: task.key.map(String::from),
        every_ms: task.every_ms,
        lease_until_ms: match task.state {
            TaskState::Leased { until_ms, .. } => Some(until_ms),
            TaskState::Scheduled | TaskState::Dead => None,
        },
        expires_at_ms: task.expires_at_ms,
        dead_reason: match task.state {
            TaskState::Dead => Some(match task.dead_reason {
                DeadReason::Attempts => wire::DeadReason::Attempts,
                DeadReason::Expired => wire::DeadReason::Expired,
                DeadReason::Corrupt => wire::DeadReason::Corrupt,
            }),
            TaskState::Scheduled | TaskState::Leased { .. } => None,
        },
        last_error: task.last_error.map(String::from),
        http: task.http.as_deref().map(crate::push::wire_target),
        created_ms: task.created_ms,
    }
}

pub(crate) fn claimed(claimed: Claimed) -> wire::ClaimedTask {
    let (payload, payload_base64) = wire::payload::show(&claimed.payload);
    wire::ClaimedTask {
        id: claimed.id,
        queue: claimed.queue.to_string(),
        payload,
        payload_base64,
        attempt: claimed.attempt,
        lease: wire::Lease(claimed.lease.0),
        lease_until_ms: claimed.lease_until_ms,
        run_at_ms: claimed.run_at_ms,
    }
}

pub(crate) fn enqueued(done: Enqueued) -> wire::Enqueued {
    wire::Enqueued { id: done.id, run_at_ms: done.run_at_ms }
}

pub(crate) fn page(page: Page) -> wire::TaskPage {
    wire::TaskPage { tasks: page.tasks.into_iter().map(task).collect(), next: page.next.map(cursor) }
}

pub(crate) fn queue(q: QueueStats) -> wire::Queue {
    let l = q.lateness;
    wire::Queue {
        name: q.name.to_string(),
        scheduled: q.scheduled as u64,
        due: q.due as u64,
        leased: q.leased as u64,
        dead: q.dead as u64,
        oldest_due_ms: q.oldest_due_ms,
        lateness: wire::Lateness { samples: l.samples, p50: l.p50, p99: l.p99, max: l.max },
        paused: q.paused,
        enqueued: q.enqueued,
        delivered: q.delivered,
        acked: q.acked,
        settings: (q.settings != QueueSettings::default()).then(|| crate::push::wire_settings(&q.settings)),
    }
}

pub(crate) fn totals(t: Totals) -> wire::Totals {
    wire::Totals {
        enqueued: t.enqueued,
        delivered: t.delivered,
        acked: t.acked,
        nacked: t.nacked,
        lease_expired: t.lease_expired,
        died: t.died,
        expired: t.expired,
        cancelled: t.cancelled,
        occurrences_enqueued: t.occurrences_enqueued,
        occurrences_skipped: t.occurrences_skipped,
        tasks: t.tasks as u64,
        schedules: t.schedules as u64,
        memory_bytes: t.memory_bytes,
        memory_bytes_max: t.memory_bytes_max,
        disk_bytes: t.disk_bytes,
        disk_bytes_max: t.disk_bytes_max,
        counters_as_of_ms: t.counters_as_of_ms,
    }
}

/// The nodes as the API shows them: each heartbeat's age against `now_ms`,
/// this server's clock.
pub(crate) fn nodes(nodes: &[NodeStats], now_ms: u64) -> Vec<wire::Node> {
    nodes
        .iter()
        .map(|n| wire::Node {
            name: n.name.clone(),
            this: n.this,
            heartbeat_ms: n.heartbeat_ms,
            heartbeat_age_ms: now_ms.saturating_sub(n.heartbeat_ms),
            shards: n.shards.clone(),
        })
        .collect()
}

/// The zone named `time_zone` (UTC if unknown), to show local times in.
fn zone(time_zone: &str) -> jiff::tz::TimeZone {
    jiff::tz::TimeZone::get(time_zone).unwrap_or(jiff::tz::TimeZone::UTC)
}

/// `at_ms` as a local time with its offset in `zone`.
fn local_time(at_ms: u64, zone: &jiff::tz::TimeZone) -> String {
    match jiff::Timestamp::from_millisecond(at_ms as i64) {
        Ok(at) => at.to_zoned(zone.clone()).strftime("%Y-%m-%dT%H:%M:%S%.3f%:z").to_string(),
        Err(_) => String::new(),
    }
}

pub(crate) fn schedule(info: ScheduleInfo) -> wire::Schedule {
    let schedule = info.schedule;
    let (cron, every_ms, time_zone) = match schedule.rule {
        Rule::Cron { expression, time_zone } => (Some(expression.into()), None, time_zone),
        Rule::Every { every_ms } => (None, Some(every_ms), "UTC".into()),
    };
    let zone = zone(&time_zone);
    let run = |at_ms: u64, task_id: Option<u64>| wire::Run { at_ms, local: local_time(at_ms, &zone), task_id };
    let (payload, payload_base64) = wire::payload::show(&schedule.payload);
    wire::Schedule {
        name: schedule.name.into(),
        queue: schedule.queue.into(),
        next_runs: info.upcoming_ms.iter().map(|&at_ms| run(at_ms, None)).collect(),
        last_run: schedule.last.map(|(at_ms, task_id)| run(at_ms, Some(task_id))),
        cron,
        every_ms,
        payload,
        payload_base64,
        misfire: misfire(schedule.misfire),
        overlap: overlap(schedule.overlap),
        max_attempts: schedule.max_attempts,
        expires_after_ms: schedule.expires_after_ms,
        since_ms: schedule.since_ms,
        paused: schedule.paused,
        time_zone: time_zone.into(),
    }
}

pub(crate) fn schedule_page(page: SchedulePage) -> wire::SchedulePage {
    wire::SchedulePage {
        schedules: page.schedules.into_iter().map(schedule).collect(),
        next: page.next.map(String::from),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_s_values_and_the_wire_s_agree() {
        for status in Status::ALL {
            assert_eq!(parse_status(state(status).name()).unwrap(), status);
        }
        for value in [Misfire::Skip, Misfire::Once, Misfire::All] {
            assert_eq!(parse_misfire(misfire(value).name()).unwrap(), value);
        }
        for value in [Overlap::Allow, Overlap::Forbid] {
            assert_eq!(parse_overlap(overlap(value).name()).unwrap(), value);
        }
        let c = Cursor { priority: 1_024, run_at_ms: 1_800_000_000_000, id: 42 };
        assert_eq!(parse_cursor(&cursor(c).to_string()).unwrap(), c);
        assert_eq!(parse_lease(&wire::Lease(255).to_string()).unwrap(), Lease(255));
        assert_eq!(parse_lease("ff").unwrap_err().code(), "invalid");
        assert_eq!(local_time(1_774_746_000_000, &zone("Europe/Berlin")), "2026-03-29T03:00:00.000+02:00");
    }
}
