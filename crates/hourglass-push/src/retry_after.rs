//! `Retry-After` (RFC 9110, 10.2.3): a receiver's word on when to come back,
//! as seconds or as an HTTP date.

use std::time::{Duration, UNIX_EPOCH};

use hourglass_queue::limits::PUSH_RETRY_AFTER_MS_MAX as RETRY_AFTER_MS_MAX;

/// How long `value` asks to wait from `now_ms`, in milliseconds, at most
/// [`PUSH_RETRY_AFTER_MS_MAX`](hourglass_queue::limits::PUSH_RETRY_AFTER_MS_MAX)
/// (the longest backoff); a date past is no wait. `None` if it is neither
/// a number of seconds nor an HTTP date.
///
/// ```
/// use hourglass_push::retry_after_ms;
///
/// assert_eq!(retry_after_ms("120", 0), Some(120_000));
/// assert_eq!(retry_after_ms("Thu, 01 Jan 1970 00:00:10 GMT", 4_000), Some(6_000));
/// assert_eq!(retry_after_ms("soon", 0), None);
/// ```
pub fn retry_after_ms(value: &str, now_ms: u64) -> Option<u64> {
    let value = value.trim();
    let wait_ms = if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Too many digits for a u64 is still "a long time".
        value.parse::<u64>().map_or(u64::MAX, |s| s.saturating_mul(1_000))
    } else {
        let at = httpdate::parse_http_date(value).ok()?;
        let at_ms = at.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_millis();
        u64::try_from(at_ms).unwrap_or(u64::MAX).saturating_sub(now_ms)
    };
    Some(wait_ms.min(RETRY_AFTER_MS_MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_read_and_bounded() {
        assert_eq!(retry_after_ms("0", 5), Some(0));
        assert_eq!(retry_after_ms(" 3 ", 5), Some(3_000));
        assert_eq!(retry_after_ms("999999999999999999999999", 0), Some(RETRY_AFTER_MS_MAX));
        assert_eq!(retry_after_ms(&(RETRY_AFTER_MS_MAX / 1_000 + 1).to_string(), 0), Some(RETRY_AFTER_MS_MAX));
    }

    #[test]
    fn dates_in_every_form_rfc_9110_names_are_read() {
        let now_ms = 784_111_777_000 - 30_000;
        for date in ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"] {
            assert_eq!(retry_after_ms(date, now_ms), Some(30_000), "{date}");
        }
        assert_eq!(retry_after_ms("Sun, 06 Nov 1994 08:49:37 GMT", now_ms + 60_000), Some(0));
        assert_eq!(retry_after_ms("Fri, 01 Jan 9999 00:00:00 GMT", now_ms), Some(RETRY_AFTER_MS_MAX));
    }

    #[test]
    fn anything_else_is_no_retry_after() {
        for value in ["", "-1", "1.5", "tomorrow", "Sun, 06 Nov 1994"] {
            assert_eq!(retry_after_ms(value, 0), None, "{value:?}");
        }
    }
}
