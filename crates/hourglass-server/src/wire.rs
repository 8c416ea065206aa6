//! The HTTP API's wire format: how tasks, leases, states, counts and cursors
//! look in JSON. The engine knows none of this.
//!
//! - A lease is 16 hex digits, a string: 64-bit numbers lose precision in
//!   JavaScript.
//! - A state is `scheduled`, `due`, `leased` or `dead`.
//! - A cursor is opaque to clients: two hex numbers, `RUNAT.ID`.
//! - Payloads are JSON, checked on the way in and passed through as they are.

use hourglass_queue::{Claimed, Cursor, Enqueued, Lease, Page, QueueStats, Status, TaskInfo, TaskState, Totals};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::error::ApiError;

/// A stored payload as JSON. Payloads are checked to be JSON when they come
/// in, so this cannot fail for one; a damaged one is shown as `null` rather
/// than breaking a listing.
fn json(payload: Box<str>) -> Box<RawValue> {
    RawValue::from_string(payload.into())
        .unwrap_or_else(|_| RawValue::from_string("null".to_owned()).expect("null is JSON"))
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

pub(crate) fn cursor_text(cursor: Cursor) -> String {
    format!("{:x}.{:x}", cursor.run_at_ms, cursor.id)
}

pub(crate) fn parse_cursor(text: &str) -> Result<Cursor, ApiError> {
    let invalid = || ApiError::invalid("after must be the `next` cursor of a previous page");
    let (run_at, id) = text.split_once('.').ok_or_else(invalid)?;
    let number = |s: &str| u64::from_str_radix(s, 16).map_err(|_| invalid());
    Ok(Cursor { run_at_ms: number(run_at)?, id: number(id)? })
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
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<Box<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    every_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_until_ms: Option<u64>,
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
            key: task.key,
            every_ms: task.every_ms,
            lease_until_ms,
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
    cancelled: u64,
    tasks: usize,
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
            cancelled: t.cancelled,
            tasks: t.tasks,
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
        let cursor = Cursor { run_at_ms: 1_800_000_000_000, id: 42 };
        assert_eq!(parse_cursor(&cursor_text(cursor)).unwrap(), cursor);
        assert!(parse_cursor("12").is_err() && parse_cursor("x.1").is_err());
    }
}
