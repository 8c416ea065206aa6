//! The HTTP API's wire format: how tasks, leases, states, counts and cursors
//! look in JSON. The engine knows none of this.
//!
//! - A lease is 16 hex digits, a string: 64-bit numbers lose precision in
//!   JavaScript.
//! - A state is `scheduled`, `due`, `leased` or `dead`.
//! - A cursor is opaque to clients: two hex numbers, `RUNAT.ID`.
//! - Payloads are JSON, checked on the way in and passed through as they are.
//! - A schedule's misfire policy is `skip`, `once` or `all`; its overlap
//!   policy `allow` or `forbid`. Its next runs are shown in Unix ms and as
//!   local times with their offsets in its time zone (RFC 3339).

use hourglass_queue::{
    Claimed, Cursor, Enqueued, Lease, Misfire, Overlap, Page, QueueStats, Rule, ScheduleInfo, SchedulePage, Status,
    TaskInfo, TaskState, Totals,
};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::error::ApiError;

/// A stored payload as JSON. Payloads that come in over HTTP are checked to
/// be JSON and are shown as they came; a body put through the beanstalkd
/// front may be any text, and is shown as a JSON string of it.
fn json(payload: Box<str>) -> Box<RawValue> {
    // Read once: a payload that is JSON is copied as it is, not parsed again.
    match serde_json::from_str::<&RawValue>(&payload) {
        Ok(raw) => raw.to_owned(),
        Err(_) => {
            let text = serde_json::to_string(&*payload).expect("a string is JSON");
            RawValue::from_string(text).expect("a JSON string")
        }
    }
}

pub(crate) fn lease_text(lease: Lease) -> String {
    format!("{:016x}", lease.0)
}

pub(crate) fn parse_lease(text: &str) -> Result<Lease, ApiError> {
    let invalid = || ApiError::invalid("lease must be the 16-hex-digit token a claim returned");
    if text.len() != 16 {
        return Err(invalid());
    }
    u64::from_str_radix(text, 16).map(Lease).map_err(|_| invalid())
}

pub(crate) fn status_name(status: Status) -> &'static str {
    match status {
        Status::Scheduled => "scheduled",
        Status::Due => "due",
        Status::Leased => "leased",
        Status::Dead => "dead",
    }
}

pub(crate) fn parse_status(name: &str) -> Result<Status, ApiError> {
    Status::ALL
        .into_iter()
        .find(|&status| status_name(status) == name)
        .ok_or_else(|| ApiError::invalid(format!("state must be scheduled, due, leased or dead, not {name:?}")))
}

/// A cursor as text: `priority.due.id` in hex (the priority only for a
/// listing in claim order, where it is not 0).
pub(crate) fn cursor_text(cursor: Cursor) -> String {
    match cursor.priority {
        0 => format!("{:x}.{:x}", cursor.run_at_ms, cursor.id),
        priority => format!("{priority:x}.{:x}.{:x}", cursor.run_at_ms, cursor.id),
    }
}

pub(crate) fn parse_cursor(text: &str) -> Result<Cursor, ApiError> {
    let invalid = || ApiError::invalid("after must be the `next` cursor of a previous page");
    let number = |s: &str| u64::from_str_radix(s, 16).map_err(|_| invalid());
    let parts: Vec<&str> = text.split('.').collect();
    let (priority, run_at, id) = match parts[..] {
        [run_at, id] => (0, run_at, id),
        [priority, run_at, id] => (u32::from_str_radix(priority, 16).map_err(|_| invalid())?, run_at, id),
        _ => return Err(invalid()),
    };
    Ok(Cursor { priority, run_at_ms: number(run_at)?, id: number(id)? })
}

const MISFIRES: [(Misfire, &str); 3] = [(Misfire::Skip, "skip"), (Misfire::Once, "once"), (Misfire::All, "all")];
const OVERLAPS: [(Overlap, &str); 2] = [(Overlap::Allow, "allow"), (Overlap::Forbid, "forbid")];

/// The name of `value` in `names`.
fn name_of<T: PartialEq + Copy>(names: &[(T, &'static str)], value: T) -> &'static str {
    names.iter().find(|(v, _)| *v == value).map(|(_, name)| *name).expect("every value is named")
}

/// The value named `name` in `names`, or an error that lists the names.
fn parse_name<T: Copy>(field: &str, names: &[(T, &'static str)], name: &str) -> Result<T, ApiError> {
    names.iter().find(|(_, n)| *n == name).map(|(value, _)| *value).ok_or_else(|| {
        let known: Vec<&str> = names.iter().map(|(_, n)| *n).collect();
        ApiError::invalid(format!("{field} must be {}, not {name:?}", known.join(" or ")))
    })
}

pub(crate) fn parse_misfire(name: &str) -> Result<Misfire, ApiError> {
    parse_name("misfire", &MISFIRES, name)
}

pub(crate) fn parse_overlap(name: &str) -> Result<Overlap, ApiError> {
    parse_name("overlap", &OVERLAPS, name)
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

/// One run of a schedule.
#[derive(Debug, Serialize)]
pub(crate) struct RunBody {
    at_ms: u64,
    local: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    task_id: Option<u64>,
}

/// A schedule as `GET /v1/schedules/{name}` shows it.
#[derive(Debug, Serialize)]
pub(crate) struct ScheduleBody {
    name: String,
    queue: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    cron: Option<Box<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    every_ms: Option<u64>,
    time_zone: Box<str>,
    payload: Box<RawValue>,
    misfire: &'static str,
    overlap: &'static str,
    max_attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_after_ms: Option<u64>,
    since_ms: u64,
    /// Paused: nothing is enqueued until it is resumed.
    paused: bool,
    /// The next runs, at most five; empty when the rule has no more.
    next_runs: Vec<RunBody>,
    /// The latest occurrence enqueued, and its task.
    #[serde(skip_serializing_if = "Option::is_none")]
    last_run: Option<RunBody>,
}

impl From<ScheduleInfo> for ScheduleBody {
    fn from(info: ScheduleInfo) -> ScheduleBody {
        let schedule = info.schedule;
        let (cron, every_ms, time_zone) = match schedule.rule {
            Rule::Cron { expression, time_zone } => (Some(expression), None, time_zone),
            Rule::Every { every_ms } => (None, Some(every_ms), "UTC".into()),
        };
        let zone = zone(&time_zone);
        let run = |at_ms: u64, task_id: Option<u64>| RunBody { at_ms, local: local_time(at_ms, &zone), task_id };
        ScheduleBody {
            name: schedule.name.into(),
            queue: schedule.queue.into(),
            next_runs: info.upcoming_ms.iter().map(|&at_ms| run(at_ms, None)).collect(),
            last_run: schedule.last.map(|(at_ms, task_id)| run(at_ms, Some(task_id))),
            cron,
            every_ms,
            payload: json(schedule.payload),
            misfire: name_of(&MISFIRES, schedule.misfire),
            overlap: name_of(&OVERLAPS, schedule.overlap),
            max_attempts: schedule.max_attempts,
            expires_after_ms: schedule.expires_after_ms,
            since_ms: schedule.since_ms,
            paused: schedule.paused,
            time_zone,
        }
    }
}

/// One page of the schedules.
#[derive(Debug, Serialize)]
pub(crate) struct SchedulePageBody {
    schedules: Vec<ScheduleBody>,
    /// Pass as `after` for the next page; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<Box<str>>,
}

impl From<SchedulePage> for SchedulePageBody {
    fn from(page: SchedulePage) -> SchedulePageBody {
        SchedulePageBody { schedules: page.schedules.into_iter().map(ScheduleBody::from).collect(), next: page.next }
    }
}

/// A task as `GET /v1/tasks/{id}` and listings show it.
#[derive(Debug, Serialize)]
pub(crate) struct TaskBody {
    id: u64,
    queue: String,
    state: &'static str,
    payload: Box<RawValue>,
    run_at_ms: u64,
    attempt: u32,
    max_attempts: u32,
    priority: u32,
    /// The task's own lease, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_ms: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<Box<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    every_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_until_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at_ms: Option<u64>,
    /// For a dead task: `attempts` (it ran out of them) or `expired`.
    #[serde(skip_serializing_if = "Option::is_none")]
    dead_reason: Option<&'static str>,
    /// Why its latest delivery failed: a nack's reason, or `lease expired`.
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<Box<str>>,
    created_ms: u64,
}

impl From<TaskInfo> for TaskBody {
    fn from(info: TaskInfo) -> TaskBody {
        let task = info.task;
        let lease_until_ms = match task.state {
            TaskState::Leased { until_ms, .. } => Some(until_ms),
            TaskState::Scheduled | TaskState::Dead => None,
        };
        TaskBody {
            id: task.id,
            queue: task.queue.to_string(),
            state: status_name(info.status),
            payload: json(info.payload),
            run_at_ms: task.run_at_ms,
            attempt: task.attempt,
            max_attempts: task.max_attempts,
            priority: task.priority,
            lease_ms: task.lease_ms,
            key: task.key,
            every_ms: task.every_ms,
            lease_until_ms,
            expires_at_ms: task.expires_at_ms,
            dead_reason: match task.state {
                TaskState::Dead if task.expired => Some("expired"),
                TaskState::Dead => Some("attempts"),
                TaskState::Scheduled | TaskState::Leased { .. } => None,
            },
            last_error: task.last_error,
            created_ms: task.created_ms,
        }
    }
}

/// A task handed out by a claim.
#[derive(Debug, Serialize)]
pub(crate) struct ClaimedBody {
    id: u64,
    queue: String,
    payload: Box<RawValue>,
    attempt: u32,
    lease: String,
    lease_until_ms: u64,
    run_at_ms: u64,
}

impl From<Claimed> for ClaimedBody {
    fn from(claimed: Claimed) -> ClaimedBody {
        ClaimedBody {
            id: claimed.id,
            queue: claimed.queue.to_string(),
            payload: json(claimed.payload),
            attempt: claimed.attempt,
            lease: lease_text(claimed.lease),
            lease_until_ms: claimed.lease_until_ms,
            run_at_ms: claimed.run_at_ms,
        }
    }
}

/// The answer to an enqueue.
#[derive(Debug, Serialize)]
pub(crate) struct EnqueuedBody {
    id: u64,
    run_at_ms: u64,
}

impl From<Enqueued> for EnqueuedBody {
    fn from(done: Enqueued) -> EnqueuedBody {
        EnqueuedBody { id: done.id, run_at_ms: done.run_at_ms }
    }
}

/// One page of a listing.
#[derive(Debug, Serialize)]
pub(crate) struct PageBody {
    tasks: Vec<TaskBody>,
    /// Pass as `after` for the next page; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<String>,
}

impl From<Page> for PageBody {
    fn from(page: Page) -> PageBody {
        PageBody { tasks: page.tasks.into_iter().map(TaskBody::from).collect(), next: page.next.map(cursor_text) }
    }
}

/// Lateness percentiles, in fractional milliseconds.
#[derive(Debug, Serialize)]
pub(crate) struct LatenessBody {
    samples: u64,
    p50: f64,
    p99: f64,
    max: f64,
}

/// One queue's counts.
#[derive(Debug, Serialize)]
pub(crate) struct QueueBody {
    name: String,
    scheduled: usize,
    due: usize,
    leased: usize,
    dead: usize,
    oldest_due_ms: Option<u64>,
    lateness: LatenessBody,
    paused: bool,
    /// Since the server started.
    enqueued: u64,
    delivered: u64,
    acked: u64,
}

impl From<QueueStats> for QueueBody {
    fn from(q: QueueStats) -> QueueBody {
        let l = q.lateness;
        QueueBody {
            name: q.name.to_string(),
            scheduled: q.scheduled,
            due: q.due,
            leased: q.leased,
            dead: q.dead,
            oldest_due_ms: q.oldest_due_ms,
            lateness: LatenessBody { samples: l.samples, p50: l.p50, p99: l.p99, max: l.max },
            paused: q.paused,
            enqueued: q.enqueued,
            delivered: q.delivered,
            acked: q.acked,
        }
    }
}

/// Counters since start.
#[derive(Debug, Serialize)]
pub(crate) struct TotalsBody {
    enqueued: u64,
    delivered: u64,
    acked: u64,
    nacked: u64,
    lease_expired: u64,
    died: u64,
    expired: u64,
    cancelled: u64,
    occurrences_enqueued: u64,
    occurrences_skipped: u64,
    tasks: usize,
    schedules: usize,
    memory_bytes: u64,
    memory_bytes_max: Option<u64>,
    disk_bytes: u64,
    disk_bytes_max: Option<u64>,
}

impl From<Totals> for TotalsBody {
    fn from(t: Totals) -> TotalsBody {
        TotalsBody {
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
            tasks: t.tasks,
            schedules: t.schedules,
            memory_bytes: t.memory_bytes,
            memory_bytes_max: t.memory_bytes_max,
            disk_bytes: t.disk_bytes,
            disk_bytes_max: t.disk_bytes_max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_states_and_cursors_round_trip() {
        assert_eq!(parse_lease(&lease_text(Lease(255))).unwrap(), Lease(255));
        assert_eq!(lease_text(Lease(255)), "00000000000000ff");
        assert!(parse_lease("ff").is_err());
        assert!(parse_lease("zzzzzzzzzzzzzzzz").is_err());
        for status in Status::ALL {
            assert_eq!(parse_status(status_name(status)).unwrap(), status);
        }
        assert!(parse_status("done").is_err());
        let cursor = Cursor { priority: 0, run_at_ms: 1_800_000_000_000, id: 42 };
        assert_eq!(parse_cursor(&cursor_text(cursor)).unwrap(), cursor);
        let cursor = Cursor { priority: 1_024, ..cursor };
        assert_eq!(parse_cursor(&cursor_text(cursor)).unwrap(), cursor);
        assert!(parse_cursor("1.2.3.4").is_err());
        assert_eq!(&*json("hello\n".into()).to_string(), r#""hello\n""#, "a text payload shows as a string");
        assert_eq!(&*json(r#"{"a":1}"#.into()).to_string(), r#"{"a":1}"#);
        assert!(parse_cursor("12").is_err() && parse_cursor("x.1").is_err());
        for (misfire, name) in MISFIRES {
            assert_eq!(parse_misfire(name).unwrap(), misfire);
        }
        for (overlap, name) in OVERLAPS {
            assert_eq!(parse_overlap(name).unwrap(), overlap);
        }
        assert!(format!("{:?}", parse_misfire("later").unwrap_err()).contains("skip or once or all"));
        assert_eq!(local_time(1_774_746_000_000, &zone("Europe/Berlin")), "2026-03-29T03:00:00.000+02:00");
    }
}
