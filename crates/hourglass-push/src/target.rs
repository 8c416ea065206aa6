//! A push target: where and how a task is sent, checked once when it is made.

use std::fmt;

use reqwest::header::{HeaderName, HeaderValue};
use reqwest::Method;
use url::Url;

use crate::limits::{HEADERS_MAX, HEADER_BYTES_MAX, TIMEOUT_MS_DEFAULT, TIMEOUT_MS_MAX, TIMEOUT_MS_MIN, URL_BYTES_MAX};

/// The methods a target may use.
pub const METHODS: [&str; 5] = ["POST", "PUT", "PATCH", "DELETE", "GET"];

/// Headers a target may not set: the ones the push writes itself
/// (`Hourglass-*`), and those that frame the request or the connection,
/// which the client writes.
const RESERVED_HEADERS: [&str; 9] =
    ["host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer", "expect"];

/// The prefix of the headers a push writes, which a target may not set.
pub const HEADER_PREFIX: &str = "hourglass-";

/// Where and how to send a task: a URL (`http` or `https`), a method, headers
/// of the user's, and a timeout for the whole request, response body
/// included.
///
/// ```
/// use hourglass_push::Target;
///
/// let target = Target::new("https://hooks.example.com/orders")?
///     .with_method("PUT")?
///     .with_header("Authorization", "Bearer abc")?
///     .with_timeout_ms(5_000)?;
/// assert_eq!(target.url().as_str(), "https://hooks.example.com/orders");
/// assert_eq!(target.timeout_ms(), 5_000);
/// assert!(Target::new("https://hooks.example.com/")?.with_header("Hourglass-Attempt", "9").is_err());
/// # Ok::<(), hourglass_push::TargetError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Target {
    url: Url,
    method: Method,
    headers: Vec<(HeaderName, HeaderValue)>,
    timeout_ms: u64,
}

/// Why a target was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TargetError {
    /// The URL is not an absolute `http` or `https` URL with a host, or is
    /// longer than [`URL_BYTES_MAX`]; the text says which.
    Url(String),
    /// The method is not one of [`METHODS`].
    Method(String),
    /// A header's name or value is malformed, or the name is reserved.
    Header {
        /// The header's name, as given (cut to 64 bytes).
        name: String,
        /// What is wrong.
        why: &'static str,
    },
    /// More than [`HEADERS_MAX`] headers, or more than [`HEADER_BYTES_MAX`]
    /// bytes of them.
    TooManyHeaders,
    /// The timeout is not within [`TIMEOUT_MS_MIN`]..=[`TIMEOUT_MS_MAX`].
    Timeout(u64),
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetError::Url(why) => write!(f, "target url: {why}"),
            TargetError::Method(m) => write!(f, "target method {m:?} is not one of {}", METHODS.join(", ")),
            TargetError::Header { name, why } => write!(f, "target header {name:?}: {why}"),
            TargetError::TooManyHeaders => {
                write!(f, "target headers: at most {HEADERS_MAX} headers and {HEADER_BYTES_MAX} bytes")
            }
            TargetError::Timeout(ms) => {
                write!(f, "target timeout_ms {ms} is not within {TIMEOUT_MS_MIN} to {TIMEOUT_MS_MAX}")
            }
        }
    }
}

impl std::error::Error for TargetError {}

impl Target {
    /// A `POST` to `url` with no headers of the user's and the default
    /// timeout ([`TIMEOUT_MS_DEFAULT`]).
    pub fn new(url: &str) -> Result<Target, TargetError> {
        if url.len() > URL_BYTES_MAX {
            return Err(TargetError::Url(format!("longer than {URL_BYTES_MAX} bytes")));
        }
        let url = Url::parse(url).map_err(|e| TargetError::Url(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(TargetError::Url(format!("scheme {:?} is not http or https", url.scheme())));
        }
        if url.host().is_none() {
            return Err(TargetError::Url("no host".into()));
        }
        // Credentials in a URL end up in logs and listings; a header keeps
        // them where the receiver expects them.
        if !url.username().is_empty() || url.password().is_some() {
            return Err(TargetError::Url("credentials in the URL: send them in a header".into()));
        }
        Ok(Target { url, method: Method::POST, headers: Vec::new(), timeout_ms: TIMEOUT_MS_DEFAULT })
    }

    /// The same target with `method`, one of [`METHODS`] (any case).
    pub fn with_method(mut self, method: &str) -> Result<Target, TargetError> {
        let upper = method.to_ascii_uppercase();
        if !METHODS.contains(&upper.as_str()) {
            return Err(TargetError::Method(method.chars().take(16).collect()));
        }
        self.method = Method::from_bytes(upper.as_bytes()).map_err(|_| TargetError::Method(upper))?;
        Ok(self)
    }

    /// The same target with one more header. A name may not start with
    /// [`HEADER_PREFIX`] nor frame the request (`Host`, `Content-Length`,
    /// `Transfer-Encoding`, `Connection`, ...). A `Content-Type` replaces
    /// the push's own `application/json`.
    pub fn with_header(mut self, name: &str, value: &str) -> Result<Target, TargetError> {
        let refused = |why| TargetError::Header { name: name.chars().take(64).collect(), why };
        let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| refused("not a header name"))?;
        if header.as_str().starts_with(HEADER_PREFIX) {
            return Err(refused("Hourglass- headers are the push's own"));
        }
        if RESERVED_HEADERS.contains(&header.as_str()) {
            return Err(refused("the HTTP client writes it"));
        }
        let value = HeaderValue::from_str(value).map_err(|_| refused("not a header value (visible ASCII)"))?;
        let bytes = self.headers.iter().map(|(n, v)| n.as_str().len() + v.len()).sum::<usize>();
        if self.headers.len() >= HEADERS_MAX || bytes + header.as_str().len() + value.len() > HEADER_BYTES_MAX {
            return Err(TargetError::TooManyHeaders);
        }
        self.headers.push((header, value));
        Ok(self)
    }

    /// The same target with a timeout of `timeout_ms`, within
    /// [`TIMEOUT_MS_MIN`]..=[`TIMEOUT_MS_MAX`].
    pub fn with_timeout_ms(mut self, timeout_ms: u64) -> Result<Target, TargetError> {
        if !(TIMEOUT_MS_MIN..=TIMEOUT_MS_MAX).contains(&timeout_ms) {
            return Err(TargetError::Timeout(timeout_ms));
        }
        self.timeout_ms = timeout_ms;
        Ok(self)
    }

    /// The URL.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The method.
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The user's headers, in the order given.
    pub fn headers(&self) -> &[(HeaderName, HeaderValue)] {
        &self.headers
    }

    /// The timeout of the whole request, in milliseconds.
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms
    }

    /// The lease a delivery to this target holds: its timeout plus
    /// `margin_ms` (the loop passes [`LEASE_MARGIN_MS`](crate::limits::LEASE_MARGIN_MS)).
    pub fn lease_ms(&self, margin_ms: u64) -> u64 {
        self.timeout_ms.saturating_add(margin_ms)
    }
}

/// Header values are left out: they often hold a receiver's credentials.
impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("url", &self.url.as_str())
            .field("method", &self.method)
            .field("headers", &self.headers.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>())
            .field("timeout_ms", &self.timeout_ms)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_target_posts_with_the_default_timeout() {
        let target = Target::new("http://example.com/hook?x=1").unwrap();
        assert_eq!(target.method(), Method::POST);
        assert_eq!(target.timeout_ms(), TIMEOUT_MS_DEFAULT);
        assert_eq!(target.lease_ms(5_000), TIMEOUT_MS_DEFAULT + 5_000);
        assert!(target.headers().is_empty());
    }

    #[test]
    fn urls_must_be_http_with_a_host_and_no_credentials() {
        for (url, why) in [
            ("ftp://example.com/", "scheme \"ftp\" is not http or https"),
            ("file:///etc/passwd", "scheme \"file\" is not http or https"),
            ("/relative", "relative URL without a base"),
            ("https://user:pw@example.com/", "credentials in the URL: send them in a header"),
        ] {
            assert_eq!(Target::new(url).unwrap_err(), TargetError::Url(why.into()), "{url}");
        }
        let long = format!("https://example.com/{}", "a".repeat(URL_BYTES_MAX));
        assert!(matches!(Target::new(&long), Err(TargetError::Url(_))));
    }

    #[test]
    fn methods_are_the_listed_ones_in_any_case() {
        let target = Target::new("https://example.com/").unwrap();
        assert_eq!(target.clone().with_method("patch").unwrap().method(), Method::PATCH);
        assert_eq!(target.clone().with_method("CONNECT").unwrap_err(), TargetError::Method("CONNECT".into()));
        assert!(target.with_method("TRACE").is_err());
    }

    #[test]
    fn headers_are_checked_and_bounded() {
        let target = Target::new("https://example.com/").unwrap();
        for (name, value, why) in [
            ("Hourglass-Task-Id", "1", "Hourglass- headers are the push's own"),
            ("Content-Length", "1", "the HTTP client writes it"),
            ("Host", "evil", "the HTTP client writes it"),
            ("bad name", "1", "not a header name"),
            ("X-Ok", "line\nbreak", "not a header value (visible ASCII)"),
        ] {
            assert_eq!(
                target.clone().with_header(name, value).unwrap_err(),
                TargetError::Header { name: name.into(), why },
                "{name}"
            );
        }
        let mut full = target.clone();
        for i in 0..HEADERS_MAX {
            full = full.with_header(&format!("x-h{i}"), "v").unwrap();
        }
        assert_eq!(full.with_header("x-more", "v").unwrap_err(), TargetError::TooManyHeaders);
        let big = "v".repeat(HEADER_BYTES_MAX);
        assert_eq!(target.clone().with_header("x-big", &big).unwrap_err(), TargetError::TooManyHeaders);
        let typed = target.with_header("Content-Type", "text/plain").unwrap();
        assert_eq!(typed.headers()[0].0, "content-type");
    }

    #[test]
    fn timeouts_are_bounded() {
        let target = Target::new("https://example.com/").unwrap();
        assert_eq!(target.clone().with_timeout_ms(TIMEOUT_MS_MAX).unwrap().timeout_ms(), TIMEOUT_MS_MAX);
        assert_eq!(
            target.clone().with_timeout_ms(TIMEOUT_MS_MAX + 1).unwrap_err(),
            TargetError::Timeout(TIMEOUT_MS_MAX + 1)
        );
        assert_eq!(target.with_timeout_ms(TIMEOUT_MS_MIN - 1).unwrap_err(), TargetError::Timeout(TIMEOUT_MS_MIN - 1));
    }

    #[test]
    fn debug_leaves_header_values_out() {
        let target =
            Target::new("https://example.com/").unwrap().with_header("Authorization", "Bearer secret").unwrap();
        let shown = format!("{target:?}");
        assert!(shown.contains("authorization") && !shown.contains("secret"), "{shown}");
    }
}
