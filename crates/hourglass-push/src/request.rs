//! The request a push sends for a task: pure, so what a receiver gets is
//! checked without a socket.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use reqwest::Method;
use url::Url;

use crate::signature::{SigningKeys, SIGNATURE_HEADER};
use crate::source::Delivery;

/// `Hourglass-Task-Id`: the task's id, for receivers to deduplicate (a push
/// is delivered at least once).
pub const TASK_ID_HEADER: HeaderName = HeaderName::from_static("hourglass-task-id");
/// `Hourglass-Queue`: the task's queue.
pub const QUEUE_HEADER: HeaderName = HeaderName::from_static("hourglass-queue");
/// `Hourglass-Attempt`: which delivery this is, from 1.
pub const ATTEMPT_HEADER: HeaderName = HeaderName::from_static("hourglass-attempt");
/// `Hourglass-Due-At`: when the task was due, Unix ms.
pub const DUE_AT_HEADER: HeaderName = HeaderName::from_static("hourglass-due-at");

/// One request, ready to send.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// The target's method.
    pub method: Method,
    /// The target's URL.
    pub url: Url,
    /// `Content-Type`, the `Hourglass-*` headers, then the user's.
    pub headers: HeaderMap,
    /// The payload's bytes.
    pub body: Vec<u8>,
    /// The timeout of the whole request, in milliseconds.
    pub timeout_ms: u64,
}

/// A stored target the HTTP client cannot send: the contract's checks at
/// enqueue make this a target that was stored before them, or a bug.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadTarget(pub String);

impl std::fmt::Display for BadTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "target cannot be sent: {}", self.0)
    }
}

impl std::error::Error for BadTarget {}

impl Outgoing {
    /// The request for `delivery`, signed with `keys` at `now_ms`: the body is
    /// the payload's bytes (`Content-Type: application/json` if they are
    /// JSON text, else `application/octet-stream`); the headers `Hourglass-Task-Id`,
    /// `Hourglass-Queue`, `Hourglass-Attempt`, `Hourglass-Due-At`,
    /// `Hourglass-Signature` with keys, then the target's own (a
    /// `Content-Type` of theirs replaces the JSON one).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hourglass_push::{Delivery, Outgoing, SigningKeys};
    /// use hourglass_queue::{HttpTarget, PushTarget};
    ///
    /// let delivery = Delivery {
    ///     task_id: 7,
    ///     queue: "orders".into(),
    ///     attempt: 1,
    ///     due_at_ms: 1_700_000_000_000,
    ///     payload: r#"{"order":42}"#.into(),
    ///     target: Arc::new(PushTarget::new(HttpTarget::post("https://hooks.example.com/"))),
    ///     ticket: (),
    /// };
    /// let request = Outgoing::build(&delivery, &SigningKeys::none(), 1_700_000_000_003).unwrap();
    /// assert_eq!(request.body, br#"{"order":42}"#);
    /// assert_eq!(request.headers["hourglass-task-id"], "7");
    /// assert_eq!(request.headers["hourglass-due-at"], "1700000000000");
    /// assert_eq!(request.headers["content-type"], "application/json");
    /// ```
    pub fn build<T>(delivery: &Delivery<T>, keys: &SigningKeys, now_ms: u64) -> Result<Outgoing, BadTarget> {
        let target = &delivery.target;
        let url = Url::parse(&target.http.url).map_err(|e| BadTarget(format!("url: {e}")))?;
        let method =
            Method::from_bytes(target.http.method.as_str().as_bytes()).expect("the contract's methods are HTTP's");
        let body = delivery.payload.as_bytes().to_vec();
        let mut headers = HeaderMap::with_capacity(6 + target.http.headers.len());
        let content_type =
            if hourglass_wire::payload::is_json(&body) { "application/json" } else { "application/octet-stream" };
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        headers.insert(TASK_ID_HEADER, delivery.task_id.into());
        headers.insert(QUEUE_HEADER, text_value(&delivery.queue));
        headers.insert(ATTEMPT_HEADER, delivery.attempt.into());
        headers.insert(DUE_AT_HEADER, delivery.due_at_ms.into());
        if let Some(signature) = keys.header_value(now_ms, &body) {
            headers.insert(SIGNATURE_HEADER, text_value(&signature));
        }
        for (name, value) in &target.http.headers {
            let name =
                HeaderName::from_bytes(name.as_bytes()).map_err(|_| BadTarget(format!("header name {name:?}")))?;
            let value = HeaderValue::from_str(value).map_err(|_| BadTarget(format!("header {name}'s value")))?;
            if name == CONTENT_TYPE {
                headers.insert(name, value);
            } else {
                headers.append(name, value);
            }
        }
        Ok(Outgoing { method, url, headers, body, timeout_ms: u64::from(target.timeout_ms) })
    }
}

/// Text the push itself makes (a queue name, a signature): visible ASCII,
/// which a header takes as it is; anything else is percent-encoded.
fn text_value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).unwrap_or_else(|_| {
        let encoded: String = url::form_urlencoded::byte_serialize(text.as_bytes()).collect();
        HeaderValue::from_str(&encoded).expect("percent-encoded text is a header value")
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use hourglass_queue::{HttpMethod, HttpTarget, PushTarget};

    use super::*;

    fn delivery(target: PushTarget) -> Delivery<()> {
        Delivery {
            task_id: 12,
            queue: "mail:eu".into(),
            attempt: 3,
            due_at_ms: 1_000,
            payload: r#"{"to":"ann"}"#.into(),
            target: Arc::new(target),
            ticket: (),
        }
    }

    #[test]
    fn the_request_carries_the_payload_and_the_tasks_headers_then_the_users() {
        let http = HttpTarget {
            url: "https://example.com/hook".into(),
            method: HttpMethod::Put,
            headers: vec![("Authorization".into(), "Bearer x".into())],
        };
        let target = PushTarget { http, timeout_ms: 500 };
        let request = Outgoing::build(&delivery(target), &SigningKeys::none(), 2_000).unwrap();
        assert_eq!(request.method, Method::PUT);
        assert_eq!(request.url.as_str(), "https://example.com/hook");
        assert_eq!(request.body, br#"{"to":"ann"}"#);
        assert_eq!(request.timeout_ms, 500);
        let names: Vec<&str> = request.headers.keys().map(|n| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "content-type",
                "hourglass-task-id",
                "hourglass-queue",
                "hourglass-attempt",
                "hourglass-due-at",
                "authorization"
            ]
        );
        assert_eq!(request.headers[QUEUE_HEADER], "mail:eu");
        assert_eq!(request.headers[ATTEMPT_HEADER], "3");
        assert_eq!(request.headers["authorization"], "Bearer x");
    }

    #[test]
    fn bytes_that_are_not_json_are_sent_as_they_are_as_octet_stream() {
        let target = PushTarget::new(HttpTarget::post("https://example.com/"));
        let bytes = Delivery { payload: vec![0xff, 0x00, b'{'].into(), ..delivery(target) };
        let request = Outgoing::build(&bytes, &SigningKeys::none(), 2_000).unwrap();
        assert_eq!(request.body, [0xff, 0x00, b'{']);
        assert_eq!(request.headers[CONTENT_TYPE], "application/octet-stream");
    }

    #[test]
    fn the_signature_covers_the_body_at_the_time_sent() {
        let keys = SigningKeys::parse_list("0123456789abcdef").unwrap();
        let target = PushTarget::new(HttpTarget::post("https://example.com/"));
        let request = Outgoing::build(&delivery(target), &keys, 2_000).unwrap();
        let header = request.headers[SIGNATURE_HEADER].to_str().unwrap();
        assert!(header.starts_with("t=2000,v1="), "{header}");
        assert_eq!(keys.verify(header, &request.body, 2_000, 0), Ok(()));
    }

    #[test]
    fn a_content_type_of_the_users_replaces_json() {
        let mut http = HttpTarget::post("https://example.com/");
        http.headers.push(("content-type".into(), "text/plain".into()));
        let request = Outgoing::build(&delivery(PushTarget::new(http)), &SigningKeys::none(), 0).unwrap();
        assert_eq!(request.headers.get_all(CONTENT_TYPE).iter().collect::<Vec<_>>(), ["text/plain"]);
    }

    #[test]
    fn a_target_the_client_cannot_send_says_why() {
        let bad = |http| Outgoing::build(&delivery(PushTarget::new(http)), &SigningKeys::none(), 0).unwrap_err();
        assert_eq!(
            bad(HttpTarget::post("not a url")).to_string(),
            "target cannot be sent: url: relative URL without a base"
        );
        let mut http = HttpTarget::post("https://example.com/");
        http.headers.push(("bad name".into(), "v".into()));
        assert_eq!(bad(http).0, "header name \"bad name\"");
    }

    #[test]
    fn text_that_is_no_header_value_is_percent_encoded() {
        assert_eq!(text_value("a b\n"), "a+b%0A");
        assert_eq!(text_value("q:1/2"), "q:1/2");
    }
}
