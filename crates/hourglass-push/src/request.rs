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

impl Outgoing {
    /// The request for `delivery`, signed with `keys` at `now_ms`: the body is
    /// the payload (a JSON payload as its JSON text, `Content-Type:
    /// application/json`); the headers `Hourglass-Task-Id`,
    /// `Hourglass-Queue`, `Hourglass-Attempt`, `Hourglass-Due-At`,
    /// `Hourglass-Signature` with keys, then the target's own (a
    /// `Content-Type` of theirs replaces the JSON one).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hourglass_push::{Delivery, Outgoing, SigningKeys, Target};
    ///
    /// let delivery = Delivery {
    ///     task_id: 7,
    ///     queue: "orders".into(),
    ///     attempt: 1,
    ///     due_at_ms: 1_700_000_000_000,
    ///     payload: r#"{"order":42}"#.into(),
    ///     target: Arc::new(Target::new("https://hooks.example.com/")?),
    ///     ticket: (),
    /// };
    /// let request = Outgoing::build(&delivery, &SigningKeys::none(), 1_700_000_000_003);
    /// assert_eq!(request.body, br#"{"order":42}"#);
    /// assert_eq!(request.headers["hourglass-task-id"], "7");
    /// assert_eq!(request.headers["hourglass-due-at"], "1700000000000");
    /// assert_eq!(request.headers["content-type"], "application/json");
    /// # Ok::<(), hourglass_push::TargetError>(())
    /// ```
    pub fn build<T>(delivery: &Delivery<T>, keys: &SigningKeys, now_ms: u64) -> Outgoing {
        let body = delivery.payload.as_bytes().to_vec();
        let mut headers = HeaderMap::with_capacity(6 + delivery.target.headers().len());
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(TASK_ID_HEADER, delivery.task_id.into());
        headers.insert(QUEUE_HEADER, text_value(&delivery.queue));
        headers.insert(ATTEMPT_HEADER, delivery.attempt.into());
        headers.insert(DUE_AT_HEADER, delivery.due_at_ms.into());
        if let Some(signature) = keys.header_value(now_ms, &body) {
            headers.insert(SIGNATURE_HEADER, text_value(&signature));
        }
        for (name, value) in delivery.target.headers() {
            if name == CONTENT_TYPE {
                headers.insert(name.clone(), value.clone());
            } else {
                headers.append(name.clone(), value.clone());
            }
        }
        Outgoing {
            method: delivery.target.method().clone(),
            url: delivery.target.url().clone(),
            headers,
            body,
            timeout_ms: delivery.target.timeout_ms(),
        }
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

    use super::*;
    use crate::target::Target;

    fn delivery(target: Target) -> Delivery<()> {
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
        let target = Target::new("https://example.com/hook")
            .unwrap()
            .with_method("PUT")
            .unwrap()
            .with_header("Authorization", "Bearer x")
            .unwrap()
            .with_timeout_ms(500)
            .unwrap();
        let request = Outgoing::build(&delivery(target), &SigningKeys::none(), 2_000);
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
    fn the_signature_covers_the_body_at_the_time_sent() {
        let keys = SigningKeys::parse_list("0123456789abcdef").unwrap();
        let request = Outgoing::build(&delivery(Target::new("https://example.com/").unwrap()), &keys, 2_000);
        let header = request.headers[SIGNATURE_HEADER].to_str().unwrap();
        assert!(header.starts_with("t=2000,v1="), "{header}");
        assert_eq!(keys.verify(header, &request.body, 2_000, 0), Ok(()));
    }

    #[test]
    fn a_content_type_of_the_users_replaces_json() {
        let target = Target::new("https://example.com/").unwrap().with_header("content-type", "text/plain").unwrap();
        let request = Outgoing::build(&delivery(target), &SigningKeys::none(), 0);
        assert_eq!(request.headers.get_all(CONTENT_TYPE).iter().collect::<Vec<_>>(), ["text/plain"]);
    }

    #[test]
    fn text_that_is_no_header_value_is_percent_encoded() {
        assert_eq!(text_value("a b\n"), "a+b%0A");
        assert_eq!(text_value("q:1/2"), "q:1/2");
    }
}
