//! Checks on push targets and queue settings. Whether a target's address
//! may be reached (the outbound rules) is the delivery's business, not this
//! one's: these are the checks that hold whatever the server allows.

use super::range;
use crate::error::QueueError;
use crate::limits::*;
use crate::settings::QueueSettings;
use crate::target::{HttpTarget, PushTarget};

/// A task's or a queue's HTTP target: an absolute `http` or `https` URL of
/// at most [`PUSH_URL_BYTES_MAX`] bytes with a host and no user name or
/// password, and at most [`PUSH_HEADERS_MAX`] headers within their bounds,
/// none of them hop-by-hop ([`PUSH_FORBIDDEN_HEADERS`]) or hourglass's own
/// ([`PUSH_RESERVED_HEADER_PREFIX`]).
pub fn http_target(target: &HttpTarget) -> Result<(), QueueError> {
    let invalid = |message: String| Err(QueueError::Invalid(message));
    if target.url.len() > PUSH_URL_BYTES_MAX {
        return invalid(format!("http.url is at most {PUSH_URL_BYTES_MAX} bytes, not {}", target.url.len()));
    }
    let url = match url::Url::parse(&target.url) {
        Ok(url) => url,
        Err(error) => return invalid(format!("http.url {:?} is not a URL: {error}", target.url)),
    };
    if !matches!(url.scheme(), "http" | "https") {
        return invalid(format!("http.url must be http or https, not {:?}", url.scheme()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return invalid(format!("http.url {:?} has no host", target.url));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return invalid("http.url may not hold a user name or password: send them in a header".into());
    }
    if target.headers.len() > PUSH_HEADERS_MAX {
        return invalid(format!("http.headers holds at most {PUSH_HEADERS_MAX}, not {}", target.headers.len()));
    }
    let mut total = 0;
    for (name, value) in &target.headers {
        header(name, value)?;
        total += name.len() + value.len();
    }
    if total > PUSH_HEADERS_BYTES_MAX {
        return invalid(format!("http.headers hold at most {PUSH_HEADERS_BYTES_MAX} bytes, not {total}"));
    }
    Ok(())
}

/// One header: a token of 1 to [`PUSH_HEADER_NAME_BYTES_MAX`] bytes that is
/// not forbidden, and a value of visible ASCII, spaces and tabs of at most
/// [`PUSH_HEADER_VALUE_BYTES_MAX`] bytes.
fn header(name: &str, value: &str) -> Result<(), QueueError> {
    // RFC 9110's tchar.
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || name.len() > PUSH_HEADER_NAME_BYTES_MAX || !name.bytes().all(tchar) {
        return Err(QueueError::Invalid(format!(
            "a header name is 1 to {PUSH_HEADER_NAME_BYTES_MAX} characters of A-Z, a-z, 0-9 and !#$%&'*+-.^_`|~, not {name:?}"
        )));
    }
    let lower = name.to_ascii_lowercase();
    if PUSH_FORBIDDEN_HEADERS.contains(&lower.as_str()) || lower.starts_with(PUSH_RESERVED_HEADER_PREFIX) {
        return Err(QueueError::Invalid(format!(
            "header {name:?} may not be set: hop-by-hop headers, Host, Content-Length and Hourglass-* are the server's"
        )));
    }
    if value.len() > PUSH_HEADER_VALUE_BYTES_MAX {
        return Err(QueueError::Invalid(format!(
            "header {name:?}: a value is at most {PUSH_HEADER_VALUE_BYTES_MAX} bytes, not {}",
            value.len()
        )));
    }
    if !value.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b)) {
        return Err(QueueError::Invalid(format!("header {name:?}: a value is visible ASCII, spaces and tabs")));
    }
    Ok(())
}

/// A queue's push target: its request, and a timeout within
/// [`PUSH_TIMEOUT_MS_MIN`] to [`PUSH_TIMEOUT_MS_MAX`].
pub fn push_target(target: &PushTarget) -> Result<(), QueueError> {
    http_target(&target.http)?;
    range(
        "push.timeout_ms",
        u64::from(target.timeout_ms),
        u64::from(PUSH_TIMEOUT_MS_MIN),
        u64::from(PUSH_TIMEOUT_MS_MAX),
    )
}

/// A queue's settings: its push target, a rate within [`RATE_PER_S_MIN`] to
/// [`RATE_PER_S_MAX`], a burst of 1 to [`BURST_MAX`] (only with a rate), a
/// cap of 1 to [`MAX_IN_FLIGHT_MAX`].
pub fn settings(settings: &QueueSettings) -> Result<(), QueueError> {
    if let Some(push) = &settings.push {
        push_target(push)?;
    }
    let flow = &settings.flow;
    if let Some(rate) = flow.rate_per_s {
        if !(RATE_PER_S_MIN..=RATE_PER_S_MAX).contains(&rate) {
            return Err(QueueError::Invalid(format!(
                "rate_per_s must be within {RATE_PER_S_MIN} ..= {RATE_PER_S_MAX}, not {rate}"
            )));
        }
    }
    if let Some(burst) = flow.burst {
        if flow.rate_per_s.is_none() {
            return Err(QueueError::Invalid("burst is the size of a rate's bucket: it needs rate_per_s".into()));
        }
        range("burst", u64::from(burst), 1, u64::from(BURST_MAX))?;
    }
    if let Some(max) = flow.max_in_flight {
        range("max_in_flight", u64::from(max), 1, u64::from(MAX_IN_FLIGHT_MAX))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Flow;
    use std::sync::Arc;

    fn with_header(name: &str, value: &str) -> HttpTarget {
        HttpTarget { headers: vec![(name.into(), value.into())], ..HttpTarget::post("https://example.com/hook") }
    }

    #[test]
    fn targets() {
        assert!(http_target(&HttpTarget::post("https://example.com/hook?a=1")).is_ok());
        assert!(http_target(&HttpTarget::post("http://10.0.0.1:8080/")).is_ok(), "outbound rules are not checked here");
        for bad in ["ftp://example.com/", "example.com/hook", "https://", "https://u:p@example.com/", "http://a b/"] {
            assert!(http_target(&HttpTarget::post(bad)).is_err(), "{bad}");
        }
        let long = format!("https://example.com/{}", "a".repeat(PUSH_URL_BYTES_MAX));
        assert!(http_target(&HttpTarget::post(long)).unwrap_err().to_string().contains("at most"));
        assert!(http_target(&with_header("Authorization", "Bearer x")).is_ok());
        for name in ["Connection", "transfer-encoding", "Host", "Hourglass-Task-Id", "HOURGLASS-X", "bad name", ""] {
            assert!(http_target(&with_header(name, "v")).is_err(), "{name}");
        }
        assert!(http_target(&with_header("X-A", "line\r\nInjected: 1")).is_err());
        assert!(http_target(&with_header("X-A", &"v".repeat(PUSH_HEADER_VALUE_BYTES_MAX + 1))).is_err());
        let many = HttpTarget {
            headers: (0..=PUSH_HEADERS_MAX).map(|i| (format!("X-{i}").into(), "v".into())).collect(),
            ..HttpTarget::post("https://example.com/")
        };
        assert!(http_target(&many).is_err());
        let heavy = HttpTarget {
            headers: (0..5).map(|i| (format!("X-{i}").into(), "v".repeat(4_000).into())).collect(),
            ..HttpTarget::post("https://example.com/")
        };
        assert!(http_target(&heavy).unwrap_err().to_string().contains("bytes"));
    }

    #[test]
    fn queue_settings() {
        let push = |timeout_ms| QueueSettings {
            push: Some(Arc::new(PushTarget { timeout_ms, ..PushTarget::new(HttpTarget::post("https://e.com/")) })),
            ..QueueSettings::default()
        };
        assert!(settings(&push(PUSH_TIMEOUT_MS_DEFAULT)).is_ok());
        assert!(settings(&push(PUSH_TIMEOUT_MS_MAX + 1)).is_err());
        assert!(settings(&push(PUSH_TIMEOUT_MS_MIN - 1)).is_err());
        let flow = |rate_per_s, burst, max_in_flight| QueueSettings {
            flow: Flow { rate_per_s, burst, max_in_flight },
            ..QueueSettings::default()
        };
        assert!(settings(&flow(Some(0.5), None, Some(10))).is_ok());
        assert!(settings(&flow(Some(0.0), None, None)).is_err());
        assert!(settings(&flow(Some(f64::NAN), None, None)).is_err());
        assert!(settings(&flow(Some(f64::INFINITY), None, None)).is_err());
        assert!(settings(&flow(None, Some(5), None)).unwrap_err().to_string().contains("needs rate_per_s"));
        assert!(settings(&flow(Some(5.0), Some(0), None)).is_err());
        assert!(settings(&flow(None, None, Some(0))).is_err());
        assert_eq!(Flow { rate_per_s: Some(2.5), ..Flow::default() }.burst_or_default(), 3);
        assert_eq!(Flow { rate_per_s: Some(0.1), ..Flow::default() }.burst_or_default(), 1);
    }
}
