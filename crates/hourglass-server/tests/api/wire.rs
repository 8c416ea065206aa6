//! The wire format, byte for byte: every route's answer to fixed requests,
//! statuses, content types and bodies as sent, compared with `wire.golden`.
//! That file was recorded from the server before its JSON types moved to
//! `hourglass-wire`; it changes only when the wire format is meant to.
//!
//! Leases are random: the transcript shows `<lease of ID>` in their place,
//! and requests name them so. `now_ms` of the overview is the server's own
//! clock: shown as `<now>`.

use std::collections::HashMap;
use std::fmt::Write;

use axum::body::Body;
use axum::http::{header, Method, Request};
use hourglass_queue::Limits;
use hourglass_server::AppState;
use serde_json::Value;
use tower::ServiceExt;

use super::{api, api_built, Api, T0_MS};

const GOLDEN: &str = include_str!("wire.golden");

/// Requests sent, and answers as the server sent them, masked.
struct Transcript {
    api: Api,
    text: String,
    /// Each claimed task's lease, by task id.
    leases: HashMap<u64, String>,
}

impl Transcript {
    fn new(api: Api, title: &str) -> Transcript {
        Transcript { api, text: format!("## {title}\n"), leases: HashMap::new() }
    }

    /// Sends `body` as JSON; `<lease of ID>` in it stands for that task's lease.
    async fn send(&mut self, method: Method, uri: &str, body: Option<&str>) -> Value {
        let content_type = body.map(|_| "application/json");
        self.send_as(method, uri, body, content_type, &[]).await
    }

    async fn send_as(
        &mut self,
        method: Method,
        uri: &str,
        body: Option<&str>,
        content_type: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Value {
        let _ = writeln!(self.text, "\n>>> {method} {uri}");
        let (sent_method, sent_uri) = (method.clone(), self.unmask(uri));
        let mut request = Request::builder().method(method).uri(self.unmask(uri));
        if let Some(content_type) = content_type {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
        for &(name, value) in headers {
            let _ = writeln!(self.text, "{name}: {value}");
            request = request.header(name, value);
        }
        if let Some(body) = body {
            let shown = if body.len() > 200 { format!("({} bytes)", body.len()) } else { body.to_owned() };
            let _ = writeln!(self.text, "{shown}");
        }
        let request = request.body(Body::from(self.unmask(body.unwrap_or("")))).unwrap();
        let response =
            super::within("a request through the router", self.api.router.clone().oneshot(request)).await.unwrap();
        let status = response.status();
        let content_type =
            response.headers().get(header::CONTENT_TYPE).map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
        let bytes = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
        super::schemas::check(&sent_method, &sent_uri, status, &bytes);
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        for task in value["tasks"].as_array().into_iter().flatten() {
            if let (Some(id), Some(lease)) = (task["id"].as_u64(), task["lease"].as_str()) {
                self.leases.insert(id, lease.to_owned());
            }
        }
        let _ = writeln!(self.text, "<<< {} {content_type}\n{}", status.as_u16(), self.mask(&text));
        value
    }

    fn unmask(&self, text: &str) -> String {
        self.leases.iter().fold(text.to_owned(), |text, (id, lease)| text.replace(&format!("<lease of {id}>"), lease))
    }

    fn mask(&self, text: &str) -> String {
        let text = self
            .leases
            .iter()
            .fold(text.to_owned(), |text, (id, lease)| text.replace(lease, &format!("<lease of {id}>")));
        match text.find("\"now_ms\":") {
            Some(at) => {
                let from = at + "\"now_ms\":".len();
                let to = from + text[from..].find(|c: char| !c.is_ascii_digit()).unwrap_or(0);
                format!("{}<now>{}", &text[..from], &text[to..])
            }
            None => text,
        }
    }
}

/// Every route with what it answers, the errors included.
async fn transcript() -> String {
    let mut t = Transcript::new(api(), "a server on a manual clock at T0 = 1800000000000");
    t.send(Method::GET, "/healthz", None).await;
    // Tasks: a payload that is not in its canonical form, every field of a
    // task, a repeated key, a run_at_ms, an expiry, a period, a batch.
    let first = r#"{"payload":{"b":1,"a":[1.50,2e3,"é\u00e9"]},"delay_ms":1000,"key":"order-1","max_attempts":1,"priority":3,"lease_ms":5000}"#;
    t.send(Method::POST, "/v1/queues/orders/tasks", Some(first)).await;
    t.send(Method::POST, "/v1/queues/orders/tasks", Some(first)).await;
    let at = format!(r#"{{"payload":"text","run_at_ms":{},"expires_after_ms":60000}}"#, T0_MS + 500);
    t.send(Method::POST, "/v1/queues/orders/tasks", Some(&at)).await;
    t.send(Method::POST, "/v1/queues/orders/tasks", Some(r#"{"payload":null,"every_ms":60000}"#)).await;
    t.send(
        Method::POST,
        "/v1/queues/orders/tasks/batch",
        Some(r#"{"tasks":[{"payload":1},{"payload":[2],"delay_ms":10}]}"#),
    )
    .await;
    for id in 1..=3 {
        t.send(Method::GET, &format!("/v1/tasks/{id}"), None).await;
    }
    t.send(Method::GET, "/v1/queues/orders/keys/order-1", None).await;
    let page = t.send(Method::GET, "/v1/queues/orders/tasks?limit=2", None).await;
    let next = page["next"].as_str().unwrap().to_owned();
    t.send(Method::GET, &format!("/v1/queues/orders/tasks?limit=2&after={next}"), None).await;
    t.send(Method::GET, "/v1/queues/orders/tasks?state=due", None).await;
    t.send(Method::POST, "/v1/queues/orders/claim", Some("{}")).await;
    t.api.advance(1_000).await;
    // Claims, acks, nacks, extensions, retries.
    t.send(Method::POST, "/v1/queues/orders/claim", Some(r#"{"max":10,"lease_ms":30000,"wait_ms":0}"#)).await;
    t.send(Method::GET, "/v1/tasks/1", None).await;
    t.send(Method::POST, "/v1/tasks/1/extend", Some(r#"{"lease":"<lease of 1>","lease_ms":60000}"#)).await;
    t.send(Method::POST, "/v1/tasks/1/nack", Some(r#"{"lease":"<lease of 1>","reason":"upstream 503"}"#)).await;
    t.send(Method::POST, "/v1/tasks/2/ack", Some(r#"{"lease":"<lease of 2>"}"#)).await;
    let acks = r#"{"acks":[{"id":4,"lease":"<lease of 4>"},{"id":5,"lease":"0000000000000000"}]}"#;
    t.send(Method::POST, "/v1/acks", Some(acks)).await;
    t.send(Method::POST, "/v1/tasks/3/nack", Some(r#"{"lease":"<lease of 3>","delay_ms":500}"#)).await;
    t.send(Method::GET, "/v1/queues/orders/dead", None).await;
    t.send(Method::POST, "/v1/tasks/1/retry", None).await;
    t.send(Method::PATCH, "/v1/tasks/1", Some(r#"{"delay_ms":500}"#)).await;
    t.send(Method::PATCH, "/v1/tasks/5", Some(r#"{"run_at_ms":1800000009000}"#)).await;
    // Queues.
    t.send(Method::GET, "/v1/queues/orders", None).await;
    t.send(Method::GET, "/v1/queues", None).await;
    t.send(Method::POST, "/v1/queues/orders/pause", Some("{}")).await;
    t.send(Method::POST, "/v1/queues/orders/resume", None).await;
    t.send(Method::POST, "/v1/queues/a%2Fb/tasks", Some(r#"{"payload":"slash","expires_after_ms":10}"#)).await;
    t.api.advance(10).await;
    t.api.engine.flushed().await;
    t.send(Method::GET, "/v1/tasks/6", None).await;
    t.send(Method::GET, "/v1/queues/a%2Fb/dead", None).await;
    t.send(Method::DELETE, "/v1/queues/a%2Fb/dead", None).await;
    t.send(Method::DELETE, "/v1/tasks/3", None).await;
    // Schedules.
    let report = r#"{"queue":"reports","cron":"0 9 * * MON-FRI","time_zone":"Europe/Berlin","payload":{"report":"sales"},"misfire":"once","overlap":"forbid","max_attempts":3,"expires_after_ms":3600000}"#;
    t.send(Method::PUT, "/v1/schedules/sales-report", Some(report)).await;
    t.send(Method::PUT, "/v1/schedules/sales-report", Some(report)).await;
    t.send(
        Method::PUT,
        "/v1/schedules/tick",
        Some(r#"{"queue":"ticks","every_ms":1000,"payload":{"tick":true},"misfire":"all","overlap":"allow"}"#),
    )
    .await;
    t.api.advance(1_000).await;
    t.api.engine.flushed().await;
    t.send(Method::GET, "/v1/schedules/tick", None).await;
    t.send(Method::GET, "/v1/schedules?limit=1", None).await;
    t.send(Method::GET, "/v1/schedules?after=sales-report", None).await;
    t.send(Method::POST, "/v1/schedules/tick/pause", None).await;
    t.send(Method::POST, "/v1/schedules/tick/resume", None).await;
    t.send(Method::DELETE, "/v1/schedules/tick", None).await;
    t.send(Method::GET, "/v1/overview?fresh=true", None).await;
    t.send(Method::GET, "/v1/overview", None).await;
    t.send(Method::GET, "/v1/nodes", None).await;
    // Errors.
    t.send(Method::POST, "/v1/queues/q/tasks", Some("{not json")).await;
    t.send(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload":1,"surprise":true}"#)).await;
    t.send(Method::POST, "/v1/queues/q/tasks", Some(r#"{"delay_ms":5}"#)).await;
    t.send(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload":1,"delay_ms":-1}"#)).await;
    t.send(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload":1,"delay_ms":1,"run_at_ms":1}"#)).await;
    t.send(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload":1,"expires_at_ms":1,"expires_after_ms":1}"#)).await;
    t.send(Method::POST, "/v1/queues/bad%20name/tasks", Some(r#"{"payload":1}"#)).await;
    t.send_as(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload":1}"#), None, &[]).await;
    t.send_as(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload":1}"#), Some("text/plain"), &[]).await;
    let huge = format!(r#"{{"payload":"{}"}}"#, "x".repeat(2 << 20));
    t.send(Method::POST, "/v1/queues/q/tasks", Some(&huge)).await;
    let big = format!(r#"{{"payload":"{}"}}"#, "x".repeat(Limits::DEFAULT_PAYLOAD_BYTES_MAX));
    t.send(Method::POST, "/v1/queues/q/tasks", Some(&big)).await;
    t.send(Method::POST, "/v1/queues/q/tasks/batch", Some(r#"{"tasks":[{"payload":1}],"more":1}"#)).await;
    t.send(Method::POST, "/v1/queues/q/claim", Some(r#"{"max":100000}"#)).await;
    t.send(Method::POST, "/v1/queues/q/claim", Some(r#"{"max":1,"other":1}"#)).await;
    t.send(Method::GET, "/v1/tasks/not-a-number", None).await;
    t.send(Method::GET, "/v1/tasks/99", None).await;
    t.send(Method::DELETE, "/v1/tasks/99", None).await;
    t.send(Method::POST, "/v1/tasks/99/retry", None).await;
    t.send(Method::GET, "/v1/queues/nope", None).await;
    t.send(Method::GET, "/v1/queues/orders/keys/nope", None).await;
    t.send(Method::GET, "/v1/queues/orders/tasks?state=done", None).await;
    t.send(Method::GET, "/v1/queues/orders/tasks?after=zz", None).await;
    t.send(Method::GET, "/v1/queues/orders/tasks?after=1.2.3.4", None).await;
    t.send(Method::GET, "/v1/queues/orders/tasks?limit=0", None).await;
    t.send(Method::GET, "/v1/queues/orders/tasks?limit=x", None).await;
    t.send(Method::GET, "/v1/queues/orders/tasks?colour=red", None).await;
    t.send(Method::GET, "/v1/queues/orders/dead?state=due", None).await;
    t.send(Method::POST, "/v1/tasks/5/ack", Some(r#"{"lease":"0000000000000000"}"#)).await;
    t.send(Method::POST, "/v1/tasks/5/ack", Some(r#"{"lease":"zz"}"#)).await;
    t.send(Method::POST, "/v1/tasks/5/ack", Some(r#"{"lease":"0000000000000000","delay_ms":1}"#)).await;
    t.send(Method::POST, "/v1/tasks/5/ack", Some(r#"{}"#)).await;
    t.send(Method::POST, "/v1/tasks/5/extend", Some(r#"{"lease":"0000000000000000"}"#)).await;
    t.send(Method::POST, "/v1/tasks/5/nack", Some(r#"{"lease":"0000000000000000","lease_ms":5}"#)).await;
    t.send(Method::PATCH, "/v1/tasks/5", Some("{}")).await;
    t.send(Method::POST, "/v1/acks", Some(r#"{"acks":[]}"#)).await;
    t.send(Method::POST, "/v1/acks", Some(r#"{"acks":[{"id":1,"lease":"zz"}]}"#)).await;
    t.send(Method::POST, "/v1/acks", Some(r#"{"acks":[{"id":1}]}"#)).await;
    t.send(Method::PUT, "/v1/schedules/s", Some(r#"{"queue":"q","cron":"* * * * *","every_ms":1000,"payload":1}"#))
        .await;
    t.send(Method::PUT, "/v1/schedules/s", Some(r#"{"queue":"q","every_ms":1000,"time_zone":"UTC","payload":1}"#))
        .await;
    t.send(Method::PUT, "/v1/schedules/s", Some(r#"{"queue":"q","payload":1}"#)).await;
    t.send(Method::PUT, "/v1/schedules/s", Some(r#"{"queue":"q","every_ms":1000,"payload":1,"misfire":"later"}"#))
        .await;
    t.send(Method::PUT, "/v1/schedules/s", Some(r#"{"queue":"q","every_ms":1000,"payload":1,"overlap":"never"}"#))
        .await;
    t.send(Method::PUT, "/v1/schedules/s", Some(r#"{"queue":"q","cron":"every day","payload":1}"#)).await;
    t.send(Method::PUT, "/v1/schedules/s", Some(r#"{"queue":"q","every_ms":1000,"payload":1,"colour":"red"}"#)).await;
    t.send(Method::GET, "/v1/schedules/nope", None).await;
    t.send(Method::GET, "/v1/schedules?limit=0", None).await;
    t.send(Method::GET, "/v1/schedules?limit=x", None).await;
    t.send(Method::GET, "/v1/overview?stale=1", None).await;
    t.send(Method::GET, "/v1/nowhere", None).await;
    let mut text = t.text;

    let limits = Limits { tasks_max: 1, ..Limits::default() };
    let guarded = api_built(limits, Some("s3cret"), AppState::read_only_ui);
    let mut t = Transcript::new(guarded, "a server with a token, a read-only dashboard and room for one task");
    let token = ("authorization", "Bearer s3cret");
    t.send(Method::GET, "/v1/queues", None).await;
    t.send_as(Method::GET, "/v1/queues", None, None, &[("authorization", "Bearer wrong")]).await;
    t.send_as(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload":1}"#), Some("application/json"), &[token]).await;
    t.send_as(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload":2}"#), Some("application/json"), &[token]).await;
    t.send_as(Method::POST, "/v1/queues/q/pause", None, None, &[token, (hourglass_server::UI_HEADER, "1")]).await;
    text.push('\n');
    text.push_str(&t.text);
    text
}

#[tokio::test]
async fn every_answer_is_as_it_was_byte_for_byte() {
    let text = transcript().await;
    if text != GOLDEN {
        let actual = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/wire.actual");
        std::fs::write(&actual, &text).unwrap();
        let (n, (want, got)) =
            GOLDEN.lines().zip(text.lines()).enumerate().find(|(_, (want, got))| want != got).unwrap_or_else(|| {
                let n = GOLDEN.lines().count().min(text.lines().count());
                (n, ("(the end)", "(more)"))
            });
        panic!(
            "the wire format changed at line {} of wire.golden:\n  was: {want}\n  now: {got}\n(the whole answer: {})",
            n + 1,
            actual.display()
        );
    }
}
