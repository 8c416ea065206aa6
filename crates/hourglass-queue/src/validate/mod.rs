//! Checks on what clients send, in one place: every bound is one of
//! [`limits`](crate::limits), and every refusal names the field and the range.

mod target;

use std::sync::Arc;

use crate::arrival::Arrival;
use crate::error::QueueError;
use crate::limits::*;
use crate::model::{NewTask, RunAt};
use crate::target::HttpTarget;
pub use target::{http_target, push_target, settings};

/// A new task that passed every check, with its due time resolved.
#[derive(Debug)]
pub struct Checked {
    /// The payload, as sent.
    pub payload: crate::Payload,
    /// When it is due, Unix ms.
    pub run_at_ms: u64,
    /// Its idempotency key, if any.
    pub key: Option<Box<str>>,
    /// Deliveries allowed ([`ATTEMPTS_UNLIMITED`] for no limit).
    pub max_attempts: u32,
    /// Its priority (the default if none was asked for).
    pub priority: u32,
    /// Its own lease, if any.
    pub lease_ms: Option<u32>,
    /// Its repeat period, if any.
    pub every_ms: Option<u64>,
    /// When it expires, Unix ms, if it does.
    pub expires_at_ms: Option<u64>,
    /// Its own push target, if any.
    pub http: Option<Arc<HttpTarget>>,
}

/// A nack's reason: at most [`NACK_REASON_BYTES_MAX`] bytes.
pub fn reason(reason: Option<&str>) -> Result<(), QueueError> {
    match reason {
        Some(reason) if reason.len() > NACK_REASON_BYTES_MAX => Err(QueueError::Invalid(format!(
            "a nack's reason is at most {NACK_REASON_BYTES_MAX} bytes, not {}",
            reason.len()
        ))),
        _ => Ok(()),
    }
}

/// A queue name: 1 to [`QUEUE_NAME_BYTES_MAX`] bytes of letters, digits and
/// `_ - . :`, and of the rest of what beanstalkd allows in a tube's name, `+ /
/// ; $ ( )`, so that every tube is a queue.
pub fn queue_name(queue: &str) -> Result<(), QueueError> {
    name("queue", queue, QUEUE_NAME_BYTES_MAX, QUEUE_NAME_PUNCTUATION)
}

/// The characters a queue name may hold besides letters and digits.
pub const QUEUE_NAME_PUNCTUATION: &str = "_-.:+/;$()";

/// Whether `byte` may stand in a queue name: what a pattern of queue names
/// is checked against.
pub fn queue_name_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || QUEUE_NAME_PUNCTUATION.as_bytes().contains(&byte)
}

/// A schedule name: 1 to [`SCHEDULE_NAME_BYTES_MAX`] bytes of letters,
/// digits and `_ - . :`.
pub fn schedule_name(schedule: &str) -> Result<(), QueueError> {
    name("schedule", schedule, SCHEDULE_NAME_BYTES_MAX, "_-.:")
}

/// A name of a `kind` of thing: 1 to `max` bytes of letters, digits and `also`.
fn name(kind: &str, name: &str, max: usize, also: &str) -> Result<(), QueueError> {
    let valid = !name.is_empty()
        && name.len() <= max
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || also.as_bytes().contains(&b));
    if valid {
        Ok(())
    } else {
        let also: Vec<String> = also.chars().map(String::from).collect();
        Err(QueueError::Invalid(format!("a {kind} name is 1 to {max} characters of A-Z, a-z, 0-9, {}", also.join(" "))))
    }
}

/// An idempotency key: 1 to [`KEY_BYTES_MAX`] bytes.
pub fn key(key: &str) -> Result<(), QueueError> {
    if key.is_empty() || key.len() > KEY_BYTES_MAX {
        return Err(QueueError::Invalid(format!("key must be 1 to {KEY_BYTES_MAX} bytes")));
    }
    Ok(())
}

/// `value` of `field` within `min ..= max`.
pub fn range(field: &str, value: u64, min: u64, max: u64) -> Result<(), QueueError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(QueueError::Invalid(format!("{field} must be within {min} ..= {max}, not {value}")))
    }
}

/// When a task asked to run at `run_at` by a request that arrived at
/// `arrival` is due: within [`DELAY_MS_MAX`] of it, and never before its
/// delay has passed ([`Arrival::after_ms`]).
pub fn run_at(run_at: RunAt, arrival: Arrival) -> Result<u64, QueueError> {
    match run_at {
        RunAt::Delay(delay_ms) => {
            range("delay_ms", delay_ms, 0, DELAY_MS_MAX)?;
            Ok(arrival.after_ms(delay_ms))
        }
        RunAt::At(at_ms) => {
            range("run_at_ms", at_ms, 0, arrival.ms() + DELAY_MS_MAX)?;
            Ok(at_ms)
        }
    }
}

/// A claim of `queues` (1 to [`QUEUES_MAX`], each a queue name): its
/// arguments.
pub fn claim(queues: &[&str], max: usize, lease_ms: u64, wait_ms: u64) -> Result<(), QueueError> {
    for queue in queues {
        queue_name(queue)?;
    }
    range("queues", queues.len() as u64, 1, QUEUES_MAX as u64)?;
    range("max", max as u64, 1, CLAIM_MAX as u64)?;
    lease(lease_ms)?;
    range("wait_ms", wait_ms, 0, WAIT_MS_MAX)
}

/// A push claim's arguments: `max` of 1 to [`CLAIM_MAX`], `wait_ms` at
/// most [`WAIT_MS_MAX`].
pub fn push_claim(max: usize, wait_ms: u64) -> Result<(), QueueError> {
    range("max", max as u64, 1, CLAIM_MAX as u64)?;
    range("wait_ms", wait_ms, 0, WAIT_MS_MAX)
}

/// A lease: [`LEASE_MS_MIN`] to [`LEASE_MS_MAX`].
pub fn lease(lease_ms: u64) -> Result<(), QueueError> {
    range("lease_ms", lease_ms, LEASE_MS_MIN, LEASE_MS_MAX)
}

/// A delay, if given: at most [`DELAY_MS_MAX`].
pub fn delay(delay_ms: Option<u64>) -> Result<(), QueueError> {
    delay_ms.map_or(Ok(()), |delay_ms| range("delay_ms", delay_ms, 0, DELAY_MS_MAX))
}

/// A page's size: 1 to [`LIST_MAX`].
pub fn list_limit(limit: usize) -> Result<(), QueueError> {
    range("limit", limit as u64, 1, LIST_MAX as u64)
}

/// A page of schedules' size: 1 to [`SCHEDULE_LIST_MAX`].
pub fn schedule_list_limit(limit: usize) -> Result<(), QueueError> {
    range("limit", limit as u64, 1, SCHEDULE_LIST_MAX as u64)
}

/// A batch of acks: 1 to [`ACK_BATCH_MAX`].
pub fn ack_batch(len: usize) -> Result<(), QueueError> {
    if len == 0 || len > ACK_BATCH_MAX {
        return Err(QueueError::Invalid(format!("a batch of acks holds 1 to {ACK_BATCH_MAX}, not {len}")));
    }
    Ok(())
}

/// A batch: its size, then every task; the first refusal fails it, naming the
/// task by its position.
pub fn batch(batch: Vec<NewTask>, payload_bytes_max: usize, arrival: Arrival) -> Result<Vec<Checked>, QueueError> {
    if batch.is_empty() || batch.len() > BATCH_MAX {
        return Err(QueueError::Invalid(format!("a batch holds 1 to {BATCH_MAX} tasks, not {}", batch.len())));
    }
    let single = batch.len() == 1;
    batch
        .into_iter()
        .enumerate()
        .map(|(i, new)| {
            new_task(new, payload_bytes_max, arrival).map_err(|error| match error {
                QueueError::Invalid(message) if !single => QueueError::Invalid(format!("task {i}: {message}")),
                other => other,
            })
        })
        .collect()
}

fn new_task(new: NewTask, payload_bytes_max: usize, arrival: Arrival) -> Result<Checked, QueueError> {
    if new.payload.len() > payload_bytes_max {
        return Err(QueueError::PayloadTooLarge { bytes: new.payload.len(), max: payload_bytes_max });
    }
    let run_at_ms = run_at(new.run_at, arrival)?;
    if let Some(k) = &new.key {
        key(k)?;
    }
    let max_attempts = max_attempts(new.max_attempts)?;
    // Within LEASE_MS_MAX, which fits a u32 (asserted there).
    let lease_ms = new.lease_ms.map(|ms| lease(ms).map(|()| ms as u32)).transpose()?;
    if let Some(every_ms) = new.every_ms {
        range("every_ms", every_ms, EVERY_MS_MIN, DELAY_MS_MAX)?;
    }
    let expires_at_ms = match new.expires {
        None => None,
        Some(_) if new.every_ms.is_some() => {
            return Err(QueueError::Invalid("an expiry is for one-off tasks, not with every_ms".into()));
        }
        Some(RunAt::Delay(after_ms)) => {
            Some(arrival.after_ms(checked_range("expires_after_ms", after_ms, 1, DELAY_MS_MAX)?))
        }
        Some(RunAt::At(at_ms)) => Some(checked_range("expires_at_ms", at_ms, 0, arrival.ms() + DELAY_MS_MAX)?),
    };
    if let Some(http) = &new.http {
        http_target(http)?;
    }
    if let Some(expires_at_ms) = expires_at_ms.filter(|&at| at <= run_at_ms) {
        return Err(QueueError::Invalid(format!(
            "the task would expire (at {expires_at_ms}) before it is due (at {run_at_ms}): it could never run"
        )));
    }
    Ok(Checked {
        payload: new.payload,
        run_at_ms,
        key: new.key.map(String::into_boxed_str),
        max_attempts,
        priority: new.priority.unwrap_or(PRIORITY_DEFAULT),
        lease_ms,
        every_ms: new.every_ms,
        expires_at_ms,
        http: new.http.map(Arc::new),
    })
}

/// Attempts asked for, or the default; within range, or unlimited.
pub fn max_attempts(asked: Option<u32>) -> Result<u32, QueueError> {
    let max_attempts = asked.unwrap_or(MAX_ATTEMPTS_DEFAULT);
    // ATTEMPTS_UNLIMITED is 0, the bottom of the range.
    checked_range("max_attempts", u64::from(max_attempts), u64::from(ATTEMPTS_UNLIMITED), u64::from(MAX_ATTEMPTS_MAX))
        .map(|_| max_attempts)
}

/// [`range`], returning the value.
pub fn checked_range(field: &str, value: u64, min: u64, max: u64) -> Result<u64, QueueError> {
    range(field, value, min, max).map(|()| value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keys_and_ranges() {
        assert!(queue_name("emails.v2:eu-west_1").is_ok());
        assert!(queue_name("").is_err());
        assert!(queue_name("has space").is_err());
        assert!(queue_name("a tube/of;beanstalk$(+)").is_err(), "no space");
        assert!(queue_name("tube/of;beanstalk$(+)").is_ok(), "every tube name is a queue name");
        assert!(schedule_name("a/b").is_err());
        assert!(queue_name(&"q".repeat(QUEUE_NAME_BYTES_MAX + 1)).is_err());
        assert!(key("").is_err());
        assert!(key(&"k".repeat(KEY_BYTES_MAX + 1)).is_err());
        let q = &["q"][..];
        assert!(claim(q, 1, LEASE_MS_DEFAULT, 0).is_ok());
        assert!(claim(q, 0, LEASE_MS_DEFAULT, 0).is_err());
        assert!(claim(q, CLAIM_MAX + 1, LEASE_MS_DEFAULT, 0).is_err());
        assert!(claim(q, 1, LEASE_MS_MIN - 1, 0).is_err());
        assert!(claim(q, 1, LEASE_MS_DEFAULT, WAIT_MS_MAX + 1).is_err());
        assert!(claim(&[], 1, LEASE_MS_DEFAULT, 0).is_err(), "no queue");
        assert!(claim(&["q", "bad name"], 1, LEASE_MS_DEFAULT, 0).is_err());
        assert!(claim(&vec!["q"; QUEUES_MAX + 1], 1, LEASE_MS_DEFAULT, 0).is_err());
        assert!(list_limit(0).is_err() && list_limit(LIST_MAX + 1).is_err() && list_limit(LIST_MAX).is_ok());
        assert_eq!(run_at(RunAt::Delay(5), Arrival::at_us(100_000)), Ok(105));
        assert!(run_at(RunAt::At(100 + DELAY_MS_MAX + 1), Arrival::at_us(100_000)).is_err());
    }

    #[test]
    fn a_batch_names_the_task_at_fault() {
        let ok = NewTask::new("1", RunAt::Delay(0));
        let bad = NewTask { max_attempts: Some(MAX_ATTEMPTS_MAX + 1), ..ok.clone() };
        let error = batch(vec![ok.clone(), bad.clone()], 10, Arrival::at_us(0)).unwrap_err();
        assert!(error.to_string().starts_with("task 1: max_attempts"), "{error}");
        assert!(batch(vec![bad], 10, Arrival::at_us(0)).unwrap_err().to_string().starts_with("max_attempts"));
        let aimed = NewTask { http: Some(HttpTarget::post("gopher://x/")), ..ok.clone() };
        assert!(batch(vec![ok.clone(), aimed], 10, Arrival::at_us(0))
            .unwrap_err()
            .to_string()
            .starts_with("task 1: http.url"));
        assert!(batch(vec![], 10, Arrival::at_us(0)).is_err());
        let expiring = |run_at, expires| NewTask { expires: Some(expires), ..NewTask::new("1", run_at) };
        assert_eq!(
            batch(vec![expiring(RunAt::Delay(5), RunAt::Delay(6))], 10, Arrival::at_us(100_000)).unwrap()[0]
                .expires_at_ms,
            Some(106)
        );
        assert!(
            batch(vec![expiring(RunAt::Delay(5), RunAt::At(105))], 10, Arrival::at_us(100_000)).is_err(),
            "expires as it comes due"
        );
        assert!(batch(vec![expiring(RunAt::Delay(0), RunAt::Delay(0))], 10, Arrival::at_us(100_000)).is_err());
        let repeating = NewTask { every_ms: Some(1_000), ..expiring(RunAt::Delay(0), RunAt::Delay(10)) };
        assert!(batch(vec![repeating], 10, Arrival::at_us(100_000)).unwrap_err().to_string().contains("one-off"));
        assert!(matches!(
            batch(vec![NewTask::new("12345", RunAt::Delay(0))], 4, Arrival::at_us(0)),
            Err(QueueError::PayloadTooLarge { bytes: 5, max: 4 })
        ));
    }
}
