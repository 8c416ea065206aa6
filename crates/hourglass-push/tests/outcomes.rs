//! Each answer a receiver can give, sent over real TCP, and the outcome it
//! makes: done, dead, due again at the receiver's time, or a failed attempt
//! with its `last_error`.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use hourglass_push::{AllowList, Delivery, HttpTarget, Outcome, OutcomeKind, PushClient, PushTarget};
use hourglass_queue::ManualWallClock;

use hourglass_test_support::receiver::{closer, Receiver};
use hourglass_test_support::within_async;

/// A whole second, so that an HTTP date (seconds) names it exactly.
pub const NOW_MS: u64 = 1_800_000_000_000;

/// A `POST` to `url`, with the default timeout.
pub fn post(url: &str) -> PushTarget {
    PushTarget::new(HttpTarget::post(url))
}

/// The same target with one more header.
fn with_header(mut target: PushTarget, name: &str, value: &str) -> PushTarget {
    target.http.headers.push((name.into(), value.into()));
    target
}

pub fn delivery(target: PushTarget) -> Delivery<()> {
    Delivery {
        task_id: 42,
        queue: "orders".into(),
        attempt: 2,
        due_at_ms: NOW_MS - 5,
        payload: r#"{"order":42,"note":"héllo"}"#.into(),
        target: Arc::new(target),
        ticket: (),
    }
}

/// A client that may reach the receiver, on a clock at [`NOW_MS`].
pub fn client_for(receiver_host_port: &str) -> PushClient {
    PushClient::builder()
        .allow(AllowList::parse([receiver_host_port]).unwrap())
        .clock(Arc::new(ManualWallClock::at_ms(NOW_MS)))
        .build()
        .expect("a client")
}

async fn outcome_of(receiver: &Receiver, target: PushTarget) -> Outcome {
    client_for(&receiver.host_port()).send(&delivery(target)).await.outcome
}

#[tokio::test]
async fn a_2xx_is_done() {
    let receiver = Receiver::start().await;
    assert_eq!(outcome_of(&receiver, post(&receiver.url("/ok"))).await, Outcome::Done);
    assert_eq!(receiver.requests(), 1);
}

#[tokio::test]
async fn a_500_is_a_failed_attempt_with_the_first_bytes_of_the_body() {
    let receiver = Receiver::start().await;
    assert_eq!(
        outcome_of(&receiver, post(&receiver.url("/fail"))).await,
        Outcome::Failed { error: "HTTP 500: database is down retry later".into(), not_before_ms: None }
    );
}

#[tokio::test]
async fn a_410_is_dead_at_once() {
    let receiver = Receiver::start().await;
    assert_eq!(
        outcome_of(&receiver, post(&receiver.url("/gone"))).await,
        Outcome::Dead { reason: "HTTP 410: no such order".into() }
    );
}

#[tokio::test]
async fn a_429_with_retry_after_in_seconds_is_due_again_then() {
    let receiver = Receiver::start().await;
    let outcome = outcome_of(&receiver, post(&receiver.url("/slow-down"))).await;
    assert_eq!(outcome, Outcome::Failed { error: "HTTP 429".into(), not_before_ms: Some(NOW_MS + 7_000) });
    assert_eq!(outcome.kind(), OutcomeKind::RetryAfter);
}

#[tokio::test]
async fn a_503_with_retry_after_as_a_date_is_due_again_then() {
    let receiver = Receiver::start().await;
    let date = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_millis(NOW_MS + 60_000));
    let target = with_header(post(&receiver.url("/unavailable")), "X-Retry-After", &date);
    assert_eq!(
        outcome_of(&receiver, target).await,
        Outcome::Failed { error: "HTTP 503".into(), not_before_ms: Some(NOW_MS + 60_000) }
    );
}

#[tokio::test]
async fn a_receiver_that_hangs_past_the_timeout_is_a_failed_attempt() {
    let receiver = Receiver::start().await;
    // Long enough for a loaded machine's receiver to have read the request
    // by the time the attempt gives up on its answer.
    let target = PushTarget { timeout_ms: 2_000, ..post(&receiver.url("/hang")) };
    assert_eq!(
        outcome_of(&receiver, target).await,
        Outcome::Failed { error: "timeout after 2000 ms".into(), not_before_ms: None }
    );
    within_async(Duration::from_secs(30), "the receiver got the request", async || receiver.requests() == 1).await;
    assert_eq!(receiver.requests(), 1, "one attempt, not retried");
}

#[tokio::test]
async fn a_receiver_that_closes_the_connection_is_a_failed_attempt() {
    let (addr, taken) = closer().await;
    let client = client_for(&addr.to_string());
    let outcome = client.send(&delivery(post(&format!("http://{addr}/")))).await.outcome;
    let Outcome::Failed { error, not_before_ms: None } = outcome else { panic!("{outcome:?}") };
    assert!(error.starts_with(&format!("request to {addr} failed: ")), "{error}");
    assert!(error.contains("closed"), "{error}");
    assert!(taken.load(std::sync::atomic::Ordering::SeqCst) >= 1);
}

#[tokio::test]
async fn nobody_listening_is_a_refused_connection() {
    let port = hourglass_test_support::free_port();
    let client = client_for(&format!("127.0.0.1:{port}"));
    let outcome = client.send(&delivery(post(&format!("http://127.0.0.1:{port}/")))).await.outcome;
    assert_eq!(
        outcome,
        Outcome::Failed { error: format!("connection refused by 127.0.0.1:{port}").into(), not_before_ms: None }
    );
}

#[tokio::test]
async fn the_receiver_gets_the_payload_and_the_tasks_headers() {
    let receiver = Receiver::start().await;
    let target = with_header(post(&receiver.url("/ok")), "Authorization", "Bearer t0k3n");
    let sent = client_for(&receiver.host_port()).send(&delivery(target)).await;
    assert_eq!(sent.sent_at_us, Some(NOW_MS * 1_000));
    let got = receiver.got().pop().expect("a request");
    assert_eq!(got.path, "/ok");
    assert_eq!(&got.body[..], r#"{"order":42,"note":"héllo"}"#.as_bytes());
    let header = |name: &str| got.headers.get(name).map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(header("content-type").as_deref(), Some("application/json"));
    assert_eq!(header("hourglass-task-id").as_deref(), Some("42"));
    assert_eq!(header("hourglass-queue").as_deref(), Some("orders"));
    assert_eq!(header("hourglass-attempt").as_deref(), Some("2"));
    assert_eq!(header("hourglass-due-at"), Some((NOW_MS - 5).to_string()));
    assert_eq!(header("authorization").as_deref(), Some("Bearer t0k3n"));
    assert_eq!(header("hourglass-signature"), None, "no keys, no signature");
    assert!(header("user-agent").unwrap().starts_with("hourglass/"));
}

#[tokio::test]
async fn connections_are_kept_alive_and_reused() {
    let receiver = Receiver::start().await;
    let client = client_for(&receiver.host_port());
    for _ in 0..5 {
        assert_eq!(client.send(&delivery(post(&receiver.url("/ok")))).await.outcome, Outcome::Done);
    }
    assert_eq!(receiver.requests(), 5);
    assert_eq!(receiver.connections(), 1, "five requests in a row over one connection");
}
