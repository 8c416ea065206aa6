//! What a delivery's result means for its task.
//!
//! | the receiver                                   | the task                                     |
//! |------------------------------------------------|----------------------------------------------|
//! | answers 2xx                                    | done (acked)                                 |
//! | answers 410 Gone                               | dead now, `HTTP 410: <body>` the reason      |
//! | answers 429 or 503 with a `Retry-After`        | a failed attempt, due again after that time (at most [`PUSH_RETRY_AFTER_MS_MAX`](hourglass_queue::limits::PUSH_RETRY_AFTER_MS_MAX)) |
//! | answers anything else (3xx are not followed)   | a failed attempt: `HTTP 500: <first bytes of the body>` |
//! | does not answer within the timeout             | a failed attempt: `timeout after 500 ms`     |
//! | cannot be reached, or drops the connection     | a failed attempt: `connection refused by host:port`, ... |
//! | is refused by the outbound rules               | dead now, the refusal the reason             |
//!
//! A failed attempt follows the backend's backoff until the task's
//! `max_attempts`, then the task is dead. Every text is at most
//! [`LAST_ERROR_BYTES_MAX`] bytes.

use std::error::Error as _;

use hourglass_queue::Nack;

use crate::limits::{ERROR_BODY_BYTES_MAX, LAST_ERROR_BYTES_MAX};
use crate::outbound::Refusal;
use crate::retry_after::retry_after_ms;

/// What to do with a task after a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The receiver took it: ack the task.
    Done,
    /// The attempt failed: the task's `last_error` is `error`; it is due again
    /// after the backoff, or at `not_before_ms` (Unix ms) when the receiver
    /// said when, or dead if it has no attempt left.
    Failed {
        /// What happened, at most [`LAST_ERROR_BYTES_MAX`] bytes.
        error: Box<str>,
        /// The receiver's `Retry-After`, as a time.
        not_before_ms: Option<u64>,
    },
    /// The task is dead now, whatever attempts it has left.
    Dead {
        /// Why, at most [`LAST_ERROR_BYTES_MAX`] bytes.
        reason: Box<str>,
    },
}

/// The outcomes as metrics count them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutcomeKind {
    /// 2xx.
    Done,
    /// A failed attempt with no `Retry-After`.
    Failed,
    /// A failed attempt the receiver said when to retry.
    RetryAfter,
    /// 410, or refused by the outbound rules.
    Dead,
}

impl OutcomeKind {
    /// Every kind, in the order metrics list them.
    pub const ALL: [OutcomeKind; 4] =
        [OutcomeKind::Done, OutcomeKind::Failed, OutcomeKind::RetryAfter, OutcomeKind::Dead];

    /// The label metrics give it.
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeKind::Done => "done",
            OutcomeKind::Failed => "failed",
            OutcomeKind::RetryAfter => "retry_after",
            OutcomeKind::Dead => "dead",
        }
    }
}

impl Outcome {
    /// How metrics count it.
    pub fn kind(&self) -> OutcomeKind {
        match self {
            Outcome::Done => OutcomeKind::Done,
            Outcome::Failed { not_before_ms: None, .. } => OutcomeKind::Failed,
            Outcome::Failed { not_before_ms: Some(_), .. } => OutcomeKind::RetryAfter,
            Outcome::Dead { .. } => OutcomeKind::Dead,
        }
    }

    /// The outcome of an answer: its status, its `Retry-After` and
    /// `Location` headers, and the first bytes of its body, received at
    /// `now_ms`.
    ///
    /// ```
    /// use hourglass_push::{Answer, Outcome};
    ///
    /// let answer = |status| Answer { status, retry_after: None, location: None, body: b"boom" };
    /// assert_eq!(Outcome::of_answer(&answer(204), 0), Outcome::Done);
    /// assert_eq!(
    ///     Outcome::of_answer(&answer(500), 0),
    ///     Outcome::Failed { error: "HTTP 500: boom".into(), not_before_ms: None },
    /// );
    /// let later = Answer { retry_after: Some("30"), ..answer(429) };
    /// assert_eq!(Outcome::of_answer(&later, 1_000).kind(), hourglass_push::OutcomeKind::RetryAfter);
    /// ```
    pub fn of_answer(answer: &Answer<'_>, now_ms: u64) -> Outcome {
        let status = answer.status;
        if (200..300).contains(&status) {
            return Outcome::Done;
        }
        let mut error = format!("HTTP {status}");
        if (300..400).contains(&status) {
            error.push_str(": a redirect, not followed");
            if let Some(location) = answer.location {
                error.push_str(", to ");
                error.push_str(location);
            }
        } else {
            let body = printable(&answer.body[..answer.body.len().min(ERROR_BODY_BYTES_MAX)]);
            if !body.is_empty() {
                error.push_str(": ");
                error.push_str(&body);
            }
        }
        if status == 410 {
            return Outcome::dead(error);
        }
        let not_before_ms = match status {
            429 | 503 => answer.retry_after.and_then(|v| retry_after_ms(v, now_ms)).map(|wait| now_ms + wait),
            _ => None,
        };
        Outcome::Failed { error: bounded(error), not_before_ms }
    }

    /// The outcome of a request that got no answer: refused by the outbound
    /// rules (dead), timed out after `timeout_ms`, or failed to connect or
    /// was cut off (failed attempts).
    pub fn of_error(error: &reqwest::Error, timeout_ms: u64) -> Outcome {
        if let Some(refusal) = find_source::<Refusal>(error) {
            return Outcome::refused(refusal);
        }
        let text = if error.is_timeout() {
            format!("timeout after {timeout_ms} ms")
        } else {
            let place = error.url().map(host_port).unwrap_or_default();
            match find_source::<std::io::Error>(error).map(std::io::Error::kind) {
                Some(std::io::ErrorKind::ConnectionRefused) => format!("connection refused by {place}"),
                Some(std::io::ErrorKind::ConnectionReset) => format!("connection reset by {place}"),
                _ if error.is_connect() => format!("connection to {place} failed: {}", innermost(error)),
                _ => format!("request to {place} failed: {}", innermost(error)),
            }
        };
        Outcome::Failed { error: bounded(text), not_before_ms: None }
    }

    /// The outcome as the contract's calls under the delivery's lease: `None`
    /// is an ack; a failed attempt is a [`Nack`] with the error as the
    /// reason, after the backoff or, when the receiver said when, after the
    /// time left until then (from `now_ms`); a dead outcome is a `Nack` that
    /// makes the task dead at once, with the reason.
    ///
    /// ```
    /// use hourglass_push::Outcome;
    /// use hourglass_queue::Nack;
    ///
    /// assert_eq!(Outcome::Done.as_nack(0), None);
    /// let later = Outcome::Failed { error: "HTTP 429".into(), not_before_ms: Some(9_000) };
    /// assert_eq!(later.as_nack(2_000), Some(Nack::after(7_000).because("HTTP 429")));
    /// ```
    pub fn as_nack(&self, now_ms: u64) -> Option<Nack> {
        match self {
            Outcome::Done => None,
            Outcome::Failed { error, not_before_ms } => Some(Nack {
                delay_ms: not_before_ms.map(|at_ms| at_ms.saturating_sub(now_ms)),
                reason: Some(error.clone()),
                ..Nack::default()
            }),
            Outcome::Dead { reason } => Some(Nack { reason: Some(reason.clone()), dead: true, ..Nack::default() }),
        }
    }

    /// The outcome of a target refused before any connection.
    pub fn refused(refusal: &Refusal) -> Outcome {
        Outcome::dead(refusal.to_string())
    }

    /// Dead at once for `reason`, cut to [`LAST_ERROR_BYTES_MAX`].
    pub fn dead(reason: String) -> Outcome {
        Outcome::Dead { reason: bounded(reason) }
    }
}

/// An answer's parts that decide its outcome.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    /// The status code.
    pub status: u16,
    /// The `Retry-After` header, if any.
    pub retry_after: Option<&'a str>,
    /// The `Location` header, if any.
    pub location: Option<&'a str>,
    /// The body's first bytes (at most what was read).
    pub body: &'a [u8],
}

/// The first error of type `E` in `error`'s chain of sources.
fn find_source<E: std::error::Error + 'static>(error: &reqwest::Error) -> Option<&E> {
    let mut source = error.source();
    while let Some(e) = source {
        if let Some(found) = e.downcast_ref::<E>() {
            return Some(found);
        }
        source = e.source();
    }
    None
}

/// The deepest cause, which says what happened in the fewest words
/// (reqwest's own message repeats the whole URL).
fn innermost(error: &reqwest::Error) -> String {
    let mut deepest: &dyn std::error::Error = error;
    while let Some(source) = deepest.source() {
        deepest = source;
    }
    deepest.to_string()
}

/// `host:port` of a URL: enough to say where, without its path or query.
fn host_port(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or("");
    match url.port_or_known_default() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    }
}

/// Bytes as one line of text: invalid UTF-8 replaced, controls made spaces,
/// ends trimmed.
fn printable(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect::<String>().trim().to_owned()
}

/// `text` cut to [`LAST_ERROR_BYTES_MAX`] bytes on a character's boundary.
fn bounded(mut text: String) -> Box<str> {
    text.truncate(text.floor_char_boundary(LAST_ERROR_BYTES_MAX));
    text.into_boxed_str()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hourglass_queue::limits::PUSH_RETRY_AFTER_MS_MAX as RETRY_AFTER_MS_MAX;

    fn answer(status: u16, body: &[u8]) -> Answer<'_> {
        Answer { status, retry_after: None, location: None, body }
    }

    #[test]
    fn every_2xx_is_done() {
        for status in [200, 201, 202, 204, 299] {
            assert_eq!(Outcome::of_answer(&answer(status, b"ignored"), 0), Outcome::Done);
        }
    }

    #[test]
    fn gone_is_dead_with_the_body_as_reason() {
        assert_eq!(
            Outcome::of_answer(&answer(410, b"no such order\n"), 0),
            Outcome::Dead { reason: "HTTP 410: no such order".into() }
        );
    }

    #[test]
    fn retry_after_applies_to_429_and_503_only_and_is_bounded() {
        let with = |status, value| Answer { retry_after: Some(value), ..answer(status, b"") };
        let failed = |error: &str, not_before_ms| Outcome::Failed { error: error.into(), not_before_ms };
        assert_eq!(Outcome::of_answer(&with(429, "2"), 1_000), failed("HTTP 429", Some(3_000)));
        assert_eq!(
            Outcome::of_answer(&with(503, "Thu, 01 Jan 1970 00:00:05 GMT"), 1_000),
            failed("HTTP 503", Some(5_000))
        );
        assert_eq!(Outcome::of_answer(&with(503, "99999999"), 0), failed("HTTP 503", Some(RETRY_AFTER_MS_MAX)));
        assert_eq!(Outcome::of_answer(&with(500, "2"), 1_000), failed("HTTP 500", None));
        assert_eq!(Outcome::of_answer(&with(429, "later"), 1_000), failed("HTTP 429", None));
        assert_eq!(Outcome::of_answer(&answer(429, b""), 1_000).kind(), OutcomeKind::Failed);
    }

    #[test]
    fn other_statuses_fail_with_the_first_bytes_of_the_body_on_one_line() {
        let long = vec![b'x'; ERROR_BODY_BYTES_MAX * 2];
        let Outcome::Failed { error, .. } = Outcome::of_answer(&answer(500, &long), 0) else { panic!() };
        assert_eq!(error.len(), "HTTP 500: ".len() + ERROR_BODY_BYTES_MAX);
        let Outcome::Failed { error, .. } = Outcome::of_answer(&answer(400, b"bad\r\n\tfield \xff"), 0) else {
            panic!()
        };
        assert_eq!(&*error, "HTTP 400: bad   field \u{fffd}");
    }

    #[test]
    fn redirects_are_failures_that_say_where_they_led() {
        let moved = Answer { location: Some("https://elsewhere/"), ..answer(301, b"moved") };
        assert_eq!(
            Outcome::of_answer(&moved, 0),
            Outcome::Failed {
                error: "HTTP 301: a redirect, not followed, to https://elsewhere/".into(),
                not_before_ms: None
            }
        );
    }

    #[test]
    fn texts_are_bounded_on_a_character_boundary() {
        let text = "é".repeat(LAST_ERROR_BYTES_MAX);
        let cut = bounded(text);
        assert!(cut.len() <= LAST_ERROR_BYTES_MAX && cut.len() >= LAST_ERROR_BYTES_MAX - 1);
        assert!(cut.chars().all(|c| c == 'é'));
        assert_eq!(printable(b"  \x00ok\x7f "), "ok");
    }

    #[test]
    fn outcomes_are_acks_and_nacks_of_the_contract() {
        assert_eq!(Outcome::Done.as_nack(5), None);
        let failed = Outcome::Failed { error: "HTTP 500: boom".into(), not_before_ms: None };
        assert_eq!(failed.as_nack(5), Some(Nack::default().because("HTTP 500: boom")));
        let late = Outcome::Failed { error: "HTTP 503".into(), not_before_ms: Some(3) };
        assert_eq!(late.as_nack(5), Some(Nack::after(0).because("HTTP 503")), "a time past is due at once");
        let dead = Outcome::Dead { reason: "HTTP 410".into() };
        assert_eq!(dead.as_nack(5), Some(Nack { dead: true, ..Nack::default().because("HTTP 410") }));
    }

    #[test]
    fn kinds_have_labels() {
        let labels: Vec<_> = OutcomeKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(labels, ["done", "failed", "retry_after", "dead"]);
    }
}
