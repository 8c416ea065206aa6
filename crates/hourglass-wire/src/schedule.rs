//! Schedules: a cron expression in a time zone, or a period, that enqueues
//! an ordinary task at each occurrence.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::text::{Misfire, Overlap};

/// `PUT /v1/schedules/{name}`: a schedule, made or replaced. Give `cron`
/// (with an optional `time_zone`, UTC if left out) or `every_ms`.
///
/// `misfire` and `overlap` are the names of a [`Misfire`] and an
/// [`Overlap`]: the server reads them, so that a wrong one is a 400
/// `invalid` that lists the right ones.
///
/// ```
/// use hourglass_wire::{Misfire, NewSchedule};
/// use serde_json::value::to_raw_value;
///
/// let payload = to_raw_value(&"report").unwrap();
/// let schedule = NewSchedule::cron("reports", "0 9 * * MON-FRI", Some("Europe/Berlin"), payload).misfire(Misfire::Once);
/// assert_eq!(
///     serde_json::to_string(&schedule).unwrap(),
///     r#"{"queue":"reports","cron":"0 9 * * MON-FRI","time_zone":"Europe/Berlin","payload":"report","misfire":"once"}"#
/// );
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewSchedule {
    /// The queue its tasks go to.
    pub queue: String,
    /// A cron expression (five to seven fields).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// The IANA time zone the cron expression is read in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// A period, from when the schedule is put.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<u64>,
    /// Each task's payload; `null` if left out.
    #[serde(default = "crate::task::null")]
    #[cfg_attr(feature = "openapi", schema(value_type = Value))]
    pub payload: Box<RawValue>,
    /// The payload as bytes, standard base64 with padding, in place of
    /// `payload`: for a payload that is not JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_base64: Option<String>,
    /// What to do with missed occurrences (`skip` if left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub misfire: Option<String>,
    /// What to do while the last task is live (`allow` if left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overlap: Option<String>,
    /// Each task's deliveries before it dies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Each task dies if not delivered within this long of its occurrence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_after_ms: Option<u64>,
}

impl NewSchedule {
    /// A schedule on the cron `expression`, read in `time_zone` (UTC if `None`).
    pub fn cron(queue: &str, expression: &str, time_zone: Option<&str>, payload: Box<RawValue>) -> NewSchedule {
        NewSchedule {
            cron: Some(expression.to_owned()),
            time_zone: time_zone.map(str::to_owned),
            ..NewSchedule::bare(queue, payload)
        }
    }

    /// A schedule every `every_ms`.
    pub fn every(queue: &str, every_ms: u64, payload: Box<RawValue>) -> NewSchedule {
        NewSchedule { every_ms: Some(every_ms), ..NewSchedule::bare(queue, payload) }
    }

    fn bare(queue: &str, payload: Box<RawValue>) -> NewSchedule {
        NewSchedule {
            queue: queue.to_owned(),
            cron: None,
            time_zone: None,
            every_ms: None,
            payload,
            payload_base64: None,
            misfire: None,
            overlap: None,
            max_attempts: None,
            expires_after_ms: None,
        }
    }

    /// With the misfire policy `misfire`.
    pub fn misfire(self, misfire: Misfire) -> NewSchedule {
        NewSchedule { misfire: Some(misfire.name().to_owned()), ..self }
    }

    /// With the overlap policy `overlap`.
    pub fn overlap(self, overlap: Overlap) -> NewSchedule {
        NewSchedule { overlap: Some(overlap.name().to_owned()), ..self }
    }
}

/// The query of `GET /v1/schedules`: `?after=NAME&limit=N`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema, utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub struct SchedulesQuery {
    /// The page after this name: the previous page's `next`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// Schedules at most (100 if left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// A schedule as the API shows it. Fields that do not apply are left out.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Schedule {
    /// Its name.
    pub name: String,
    /// The queue its tasks go to.
    pub queue: String,
    /// Its cron expression.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// Its period.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<u64>,
    /// The time zone its runs are shown in (and its cron read in): UTC for a period.
    pub time_zone: String,
    /// Each task's payload, if its bytes are JSON text (then exactly as sent); absent
    /// otherwise, and `payload_base64` given.
    #[serde(default, deserialize_with = "crate::payload::shown", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Value>))]
    pub payload: Option<Box<RawValue>>,
    /// The payload's bytes in standard base64, if they are not JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_base64: Option<String>,
    /// What it does with missed occurrences.
    pub misfire: Misfire,
    /// What it does while its last task is live.
    pub overlap: Overlap,
    /// Each task's deliveries before it dies.
    pub max_attempts: u32,
    /// Each task dies if not delivered within this long of its occurrence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_after_ms: Option<u64>,
    /// When it was put, Unix ms.
    pub since_ms: u64,
    /// Paused: nothing is enqueued until it is resumed.
    pub paused: bool,
    /// The next runs, at most five; empty when the rule has no more.
    pub next_runs: Vec<Run>,
    /// The latest occurrence enqueued, and its task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_run: Option<Run>,
}

/// One run of a schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Run {
    /// When, Unix ms.
    pub at_ms: u64,
    /// When, as a local time with its offset in the schedule's time zone (RFC 3339).
    pub local: String,
    /// The task it enqueued, for a run that happened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<u64>,
}

/// One page of the schedules, by name.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SchedulePage {
    /// The schedules.
    pub schedules: Vec<Schedule>,
    /// Pass as `after` for the next page; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}
