//! The API through its router, without a socket, plus one test over real TCP.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use hourglass_embedded::{Engine, Fsync, Options, RedbStore};
use hourglass_queue::prelude::*;
use hourglass_queue::{Limits, ManualWallClock};
use hourglass_server::{router, AppState};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

const T0_MS: u64 = 1_800_000_000_000;

struct Api {
    _dir: tempfile::TempDir,
    clock: Arc<ManualWallClock>,
    engine: Arc<Engine>,
    router: Router,
}

fn api_with(limits: Limits, token: Option<&str>) -> Api {
    api_built(limits, token, |state| state)
}

fn api_built(limits: Limits, token: Option<&str>, build: impl FnOnce(AppState) -> AppState) -> Api {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualWallClock::at_ms(T0_MS));
    let store = RedbStore::open(dir.path()).unwrap();
    let payload_bytes_max = limits.payload_bytes_max;
    let engine = Engine::open(Box::new(store), Options { fsync: Fsync::Always, limits }, clock.clone()).unwrap();
    let state = build(AppState::new(engine.clone(), token.map(Arc::from)));
    Api { _dir: dir, clock, engine, router: router(state, payload_bytes_max) }
}

fn api() -> Api {
    api_with(Limits::default(), None)
}

impl Api {
    async fn call(&self, method: Method, uri: &str, body: Option<&str>) -> (StatusCode, Value) {
        self.call_with(method, uri, body, None).await
    }

    async fn call_with(
        &self,
        method: Method,
        uri: &str,
        body: Option<&str>,
        token: Option<&str>,
    ) -> (StatusCode, Value) {
        let mut request = Request::builder().method(method).uri(uri);
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request.body(Body::from(body.unwrap_or("").to_owned())).unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
        };
        (status, value)
    }

    async fn advance(&self, ms: u64) {
        self.clock.advance_ms(ms);
        self.engine.poll_timers();
    }
}

fn error_code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_else(|| panic!("not an error body: {body}"))
}

#[tokio::test]
async fn enqueue_claim_ack() {
    let api = api();
    let (status, created) =
        api.call(Method::POST, "/v1/queues/orders/tasks", Some(r#"{"payload":{"order":42},"delay_ms":1000}"#)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_u64().unwrap();
    assert_eq!(created["run_at_ms"], T0_MS + 1_000);
    let (_, task) = api.call(Method::GET, &format!("/v1/tasks/{id}"), None).await;
    assert_eq!(task["state"], "scheduled");
    assert_eq!(task["payload"], json!({"order": 42}));

    let (_, none) = api.call(Method::POST, "/v1/queues/orders/claim", Some(r#"{"max":5}"#)).await;
    assert_eq!(none["tasks"], json!([]));
    api.advance(1_000).await;
    let (status, claimed) =
        api.call(Method::POST, "/v1/queues/orders/claim", Some(r#"{"max":5,"lease_ms":5000}"#)).await;
    assert_eq!(status, StatusCode::OK);
    let task = &claimed["tasks"][0];
    assert_eq!((task["id"].as_u64(), task["attempt"].as_u64()), (Some(id), Some(1)));
    let lease = task["lease"].as_str().unwrap().to_owned();

    let (status, body) =
        api.call(Method::POST, &format!("/v1/tasks/{id}/ack"), Some(r#"{"lease":"0000000000000000"}"#)).await;
    assert_eq!((status, error_code(&body)), (StatusCode::CONFLICT, "stale_lease"));
    let ack = format!(r#"{{"lease":"{lease}"}}"#);
    let (status, _) = api.call(Method::POST, &format!("/v1/tasks/{id}/ack"), Some(&ack)).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = api.call(Method::GET, &format!("/v1/tasks/{id}"), None).await;
    assert_eq!((status, error_code(&body)), (StatusCode::NOT_FOUND, "not_found"));
}

#[tokio::test]
async fn a_repeated_key_returns_the_existing_task() {
    let api = api();
    let body = r#"{"payload":1,"delay_ms":5000,"key":"k-1"}"#;
    let (first_status, first) = api.call(Method::POST, "/v1/queues/q/tasks", Some(body)).await;
    let (again_status, again) = api.call(Method::POST, "/v1/queues/q/tasks", Some(body)).await;
    assert_eq!((first_status, again_status), (StatusCode::CREATED, StatusCode::OK));
    assert_eq!(first["id"], again["id"]);
}

#[tokio::test]
async fn nack_extend_reschedule_cancel_and_dead_tasks() {
    let api = api();
    let (_, created) = api.call(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload":null,"max_attempts":1}"#)).await;
    let id = created["id"].as_u64().unwrap();
    let (_, claimed) = api.call(Method::POST, "/v1/queues/q/claim", Some("{}")).await;
    let lease = claimed["tasks"][0]["lease"].as_str().unwrap().to_owned();
    let (status, extended) = api
        .call(
            Method::POST,
            &format!("/v1/tasks/{id}/extend"),
            Some(&format!(r#"{{"lease":"{lease}","lease_ms":60000}}"#)),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{extended}");
    assert_eq!(extended["lease_until_ms"], T0_MS + 60_000);
    let (status, nacked) =
        api.call(Method::POST, &format!("/v1/tasks/{id}/nack"), Some(&format!(r#"{{"lease":"{lease}"}}"#))).await;
    assert_eq!((status, nacked["state"].as_str()), (StatusCode::OK, Some("dead")));
    let (_, dead) = api.call(Method::GET, "/v1/queues/q/dead?limit=10", None).await;
    assert_eq!(dead["tasks"][0]["id"].as_u64(), Some(id));
    let (status, revived) = api.call(Method::POST, &format!("/v1/tasks/{id}/retry"), None).await;
    assert_eq!((status, revived["state"].as_str()), (StatusCode::OK, Some("due")));
    let (status, moved) = api.call(Method::PATCH, &format!("/v1/tasks/{id}"), Some(r#"{"delay_ms":500}"#)).await;
    assert_eq!((status, moved["run_at_ms"].as_u64()), (StatusCode::OK, Some(T0_MS + 500)));
    let (_, stats) = api.call(Method::GET, "/v1/queues/q", None).await;
    assert_eq!((stats["scheduled"].as_u64(), stats["due"].as_u64()), (Some(1), Some(0)));
    let (status, _) = api.call(Method::DELETE, &format!("/v1/tasks/{id}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = api.call(Method::DELETE, &format!("/v1/tasks/{id}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_batch_endpoint_is_all_or_nothing() {
    let api = api();
    let bad = r#"{"tasks":[{"payload":1},{"payload":2,"delay_ms":-5}]}"#;
    let (status, body) = api.call(Method::POST, "/v1/queues/q/tasks/batch", Some(bad)).await;
    assert_eq!((status, error_code(&body)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_json"));
    let out_of_range = r#"{"tasks":[{"payload":1},{"payload":2,"max_attempts":1001}]}"#;
    let (status, _) = api.call(Method::POST, "/v1/queues/q/tasks/batch", Some(out_of_range)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(api.engine.totals().await.tasks, 0);
    let good = r#"{"tasks":[{"payload":1},{"payload":2,"delay_ms":10}]}"#;
    let (status, body) = api.call(Method::POST, "/v1/queues/q/tasks/batch", Some(good)).await;
    assert_eq!((status, body["created"].as_u64()), (StatusCode::CREATED, Some(2)));
}

#[tokio::test]
async fn bad_input_gets_a_clear_4xx_and_changes_nothing() {
    let api = api_with(Limits { payload_bytes_max: 100, tasks_max: 2, ..Limits::default() }, None);
    let cases: &[(&str, &str, StatusCode, &str)] = &[
        ("/v1/queues/q/tasks", "{not json", StatusCode::BAD_REQUEST, "invalid_json"),
        ("/v1/queues/q/tasks", r#"{"payload":1,"surprise":true}"#, StatusCode::UNPROCESSABLE_ENTITY, "invalid_json"),
        ("/v1/queues/q/tasks", r#"{"delay_ms":5}"#, StatusCode::UNPROCESSABLE_ENTITY, "invalid_json"),
        ("/v1/queues/q/tasks", r#"{"payload":1,"delay_ms":-1}"#, StatusCode::UNPROCESSABLE_ENTITY, "invalid_json"),
        ("/v1/queues/q/tasks", r#"{"payload":1,"delay_ms":99999999999999999}"#, StatusCode::BAD_REQUEST, "invalid"),
        ("/v1/queues/q/tasks", r#"{"payload":1,"delay_ms":1,"run_at_ms":1}"#, StatusCode::BAD_REQUEST, "invalid"),
        ("/v1/queues/bad%20name/tasks", r#"{"payload":1}"#, StatusCode::BAD_REQUEST, "invalid"),
        ("/v1/queues/q/claim", r#"{"max":100000}"#, StatusCode::BAD_REQUEST, "invalid"),
    ];
    for &(uri, body, status, code) in cases {
        let (got, response) = api.call(Method::POST, uri, Some(body)).await;
        assert_eq!((got, error_code(&response)), (status, code), "POST {uri} {body}: {response}");
        assert!(response["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    let long_queue = format!("/v1/queues/{}/tasks", "q".repeat(201));
    let (status, _) = api.call(Method::POST, &long_queue, Some(r#"{"payload":1}"#)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let big = format!(r#"{{"payload":"{}"}}"#, "x".repeat(200));
    let (status, body) = api.call(Method::POST, "/v1/queues/q/tasks", Some(&big)).await;
    assert_eq!((status, error_code(&body)), (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"));
    let (status, body) = api.call(Method::GET, "/v1/tasks/not-a-number", None).await;
    assert_eq!((status, error_code(&body)), (StatusCode::BAD_REQUEST, "invalid_path"));
    let (status, body) = api.call(Method::GET, "/v1/nowhere", None).await;
    assert_eq!((status, error_code(&body)), (StatusCode::NOT_FOUND, "no_route"));
    assert_eq!(api.engine.totals().await.tasks, 0, "no bad request changed anything");
    for _ in 0..2 {
        api.call(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload":1}"#)).await;
    }
    let (status, body) = api.call(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload":1}"#)).await;
    assert_eq!((status, error_code(&body)), (StatusCode::TOO_MANY_REQUESTS, "too_many_tasks"));
}

#[tokio::test]
async fn a_token_guards_every_route() {
    let api = api_with(Limits::default(), Some("s3cret"));
    for uri in ["/healthz", "/metrics", "/v1/queues"] {
        let (status, body) = api.call(Method::GET, uri, None).await;
        assert_eq!((status, error_code(&body)), (StatusCode::UNAUTHORIZED, "unauthorized"), "{uri}");
        let (status, _) = api.call_with(Method::GET, uri, None, Some("wrong")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        let (status, _) = api.call_with(Method::GET, uri, None, Some("s3cret")).await;
        assert_eq!(status, StatusCode::OK, "{uri}");
    }
}

#[tokio::test]
async fn metrics_and_health() {
    let api = api();
    api.call(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload":1}"#)).await;
    let (status, health) = api.call(Method::GET, "/healthz", None).await;
    assert_eq!((status, health["status"].as_str()), (StatusCode::OK, Some("ok")));
    let (_, Value::String(text)) = api.call(Method::GET, "/metrics", None).await else { panic!("metrics is text") };
    assert!(text.contains("hourglass_tasks_enqueued_total 1"), "{text}");
    assert!(text.contains(r#"hourglass_tasks{queue="q",state="due"} 1"#), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_to_end_over_tcp_with_a_waiting_consumer() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    let engine = Engine::open(Box::new(store), Options::default(), Arc::new(hourglass_queue::SystemWallClock)).unwrap();
    let timers = engine.start_timers().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let state = AppState::new(engine, None);
    let server = tokio::spawn(hourglass_server::serve(listener, state, Limits::DEFAULT_PAYLOAD_BYTES_MAX, async {
        let _ = stopped.await;
    }));

    let http = |method: &'static str, path: String, body: String| async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!(
            "{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        (head.split(' ').nth(1).unwrap().parse::<u16>().unwrap(), body.to_owned())
    };
    // A consumer waits; a task due in 300 ms must reach it soon after.
    let consumer = tokio::spawn(http("POST", "/v1/queues/e2e/claim".into(), r#"{"wait_ms":10000}"#.into()));
    let sent = std::time::Instant::now();
    let (status, _) = http("POST", "/v1/queues/e2e/tasks".into(), r#"{"payload":"hi","delay_ms":300}"#.into()).await;
    assert_eq!(status, 201);
    let (status, body) = consumer.await.unwrap();
    let waited = sent.elapsed();
    println!("e2e: the waiting consumer got the task {waited:?} after it was sent with a 300 ms delay");
    assert_eq!(status, 200);
    assert!(body.contains(r#""payload":"hi""#), "{body}");
    assert!(waited >= std::time::Duration::from_millis(300), "delivered early: {waited:?}");
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
    timers.join().unwrap();
}

#[tokio::test]
async fn listings_page_with_a_cursor_and_tasks_are_found_by_key() {
    let api = api();
    for i in 0..3 {
        let body = format!(r#"{{"payload":{{"n":{i}}},"key":"k{i}"}}"#);
        assert_eq!(api.call(Method::POST, "/v1/queues/q/tasks", Some(&body)).await.0, StatusCode::CREATED);
    }
    let (status, first) = api.call(Method::GET, "/v1/queues/q/tasks?state=due&limit=2", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(first["tasks"].as_array().unwrap().len(), 2);
    assert_eq!(first["tasks"][0]["state"], "due");
    let next = first["next"].as_str().expect("a next cursor");
    let (_, second) = api.call(Method::GET, &format!("/v1/queues/q/tasks?state=due&limit=2&after={next}"), None).await;
    assert_eq!(second["tasks"].as_array().unwrap().len(), 1);
    assert!(second.get("next").is_none(), "the last page: {second}");
    assert_eq!(second["tasks"][0]["payload"], json!({"n": 2}));

    let (status, found) = api.call(Method::GET, "/v1/queues/q/keys/k1", None).await;
    assert_eq!((status, found["payload"].clone()), (StatusCode::OK, json!({"n": 1})));
    let (status, body) = api.call(Method::GET, "/v1/queues/q/keys/nope", None).await;
    assert_eq!((status, error_code(&body)), (StatusCode::NOT_FOUND, "not_found"));

    for bad in [
        "/v1/queues/q/tasks?state=done",
        "/v1/queues/q/tasks?after=zz",
        "/v1/queues/q/tasks?limit=0",
        "/v1/queues/q/tasks?limit=1001",
    ] {
        let (status, body) = api.call(Method::GET, bad, None).await;
        assert_eq!((status, error_code(&body)), (StatusCode::BAD_REQUEST, "invalid"), "{bad}");
    }
    let (status, body) = api.call(Method::GET, "/v1/queues/q/dead?state=due", None).await;
    assert_eq!((status, error_code(&body)), (StatusCode::BAD_REQUEST, "invalid"));
    let (status, dead) = api.call(Method::GET, "/v1/queues/q/dead", None).await;
    assert_eq!((status, dead["tasks"].as_array().unwrap().len()), (StatusCode::OK, 0));
}

#[tokio::test]
async fn past_a_budget_an_enqueue_gets_507_and_the_totals_show_the_budgets() {
    let one_task = hourglass_queue::limits::task_memory_bytes(1, None);
    let limits = Limits { memory_bytes_max: 2 * one_task, disk_bytes_max: Some(1 << 20), ..Limits::default() };
    let api = api_with(limits, None);
    for _ in 0..2 {
        let (status, _) = api.call(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload":1}"#)).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let (status, body) = api.call(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload":1}"#)).await;
    assert_eq!((status, error_code(&body)), (StatusCode::INSUFFICIENT_STORAGE, "over_memory_budget"), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("--max-memory"), "{body}");
    let (_, queues) = api.call(Method::GET, "/v1/queues", None).await;
    let totals = &queues["totals"];
    assert_eq!(totals["tasks"], 2);
    assert_eq!(totals["memory_bytes"].as_u64(), Some(2 * one_task));
    assert_eq!(totals["memory_bytes_max"].as_u64(), Some(2 * one_task));
    assert!(totals["disk_bytes"].as_u64().is_some_and(|bytes| bytes > 0), "{totals}");
    assert_eq!(totals["disk_bytes_max"].as_u64(), Some(1 << 20));
    let (_, metrics) = api.call(Method::GET, "/metrics", None).await;
    let metrics = metrics.as_str().unwrap_or_default().to_owned();
    assert!(metrics.contains(&format!("hourglass_memory_budget_bytes {}", 2 * one_task)), "{metrics}");
}

#[tokio::test]
async fn schedules_are_put_shown_listed_fired_and_deleted() {
    let api = api();
    // T0 is Friday 2027-01-15 09:00 in Berlin: the next weekday 09:00 is Monday's.
    let report = r#"{"queue":"reports","cron":"0 9 * * MON-FRI","time_zone":"Europe/Berlin",
        "payload":{"report":"sales"},"misfire":"once","overlap":"forbid","max_attempts":3}"#;
    let (status, body) = api.call(Method::PUT, "/v1/schedules/sales-report", Some(report)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["misfire"], "once");
    assert_eq!(body["overlap"], "forbid");
    assert_eq!(body["payload"], json!({"report": "sales"}));
    let runs: Vec<&str> = body["next_runs"].as_array().unwrap().iter().map(|r| r["local"].as_str().unwrap()).collect();
    assert_eq!(
        runs,
        [
            "2027-01-18T09:00:00.000+01:00",
            "2027-01-19T09:00:00.000+01:00",
            "2027-01-20T09:00:00.000+01:00",
            "2027-01-21T09:00:00.000+01:00",
            "2027-01-22T09:00:00.000+01:00"
        ]
    );
    let (status, _) = api.call(Method::PUT, "/v1/schedules/sales-report", Some(report)).await;
    assert_eq!(status, StatusCode::OK, "a second put replaces");
    let (status, shown) = api.call(Method::GET, "/v1/schedules/sales-report", None).await;
    assert_eq!((status, &shown["cron"]), (StatusCode::OK, &json!("0 9 * * MON-FRI")));

    let tick = r#"{"queue":"ticks","every_ms":1000,"payload":{"tick":true}}"#;
    let (status, body) = api.call(Method::PUT, "/v1/schedules/tick", Some(tick)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        (&body["time_zone"], &body["misfire"], &body["overlap"]),
        (&json!("UTC"), &json!("skip"), &json!("allow"))
    );
    api.advance(1_000).await;
    api.engine.flushed().await;
    let (_, claimed) = api.call(Method::POST, "/v1/queues/ticks/claim", Some("{}")).await;
    assert_eq!(claimed["tasks"][0]["payload"], json!({"tick": true}));
    assert_eq!(claimed["tasks"][0]["run_at_ms"], T0_MS + 1_000);
    let (_, shown) = api.call(Method::GET, "/v1/schedules/tick", None).await;
    assert_eq!(shown["last_run"]["at_ms"], T0_MS + 1_000);
    let (_, Value::String(text)) = api.call(Method::GET, "/metrics", None).await else { panic!("metrics is text") };
    assert!(text.contains("hourglass_schedule_occurrences_total 1"), "{text}");
    assert_eq!(shown["last_run"]["task_id"], claimed["tasks"][0]["id"]);

    let (status, page) = api.call(Method::GET, "/v1/schedules?limit=1", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!((&page["schedules"][0]["name"], &page["next"]), (&json!("sales-report"), &json!("sales-report")));
    let (_, page) = api.call(Method::GET, "/v1/schedules?after=sales-report", None).await;
    assert_eq!(page["schedules"][0]["name"], "tick");
    assert!(page.get("next").is_none());

    let (status, paused) = api.call(Method::POST, "/v1/schedules/tick/pause", None).await;
    assert_eq!((status, &paused["paused"]), (StatusCode::OK, &json!(true)));
    api.advance(5_000).await;
    api.engine.flushed().await;
    let (_, claimed) = api.call(Method::POST, "/v1/queues/ticks/claim", Some("{}")).await;
    assert_eq!(claimed["tasks"], json!([]), "nothing while paused");
    let (status, resumed) = api.call(Method::POST, "/v1/schedules/tick/resume", None).await;
    assert_eq!((status, &resumed["paused"]), (StatusCode::OK, &json!(false)));
    let (status, _) = api.call(Method::DELETE, "/v1/schedules/tick", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = api.call(Method::GET, "/v1/schedules/tick", None).await;
    assert_eq!((status, error_code(&body)), (StatusCode::NOT_FOUND, "not_found"));
    let (status, body) = api.call(Method::DELETE, "/v1/schedules/tick", None).await;
    assert_eq!((status, error_code(&body)), (StatusCode::NOT_FOUND, "not_found"));
}

#[tokio::test]
async fn bad_schedules_get_a_clear_4xx() {
    let api = api();
    let cases = [
        (r#"{"queue":"q","cron":"* * * * *","time_zone":"Mars/Base","payload":1}"#, "unknown time zone"),
        (r#"{"queue":"q","cron":"every day","payload":1}"#, "invalid cron expression"),
        (r#"{"queue":"q","cron":"0 0 30 2 *","payload":1}"#, "never fires"),
        (r#"{"queue":"q","cron":"* * * * *","every_ms":1000,"payload":1}"#, "not both"),
        (r#"{"queue":"q","every_ms":1000,"time_zone":"UTC","payload":1}"#, "time_zone goes with cron"),
        (r#"{"queue":"q","payload":1}"#, "give cron"),
        (r#"{"queue":"q","every_ms":1000,"payload":1,"misfire":"later"}"#, "misfire must be"),
        (r#"{"queue":"q","every_ms":1000,"payload":1,"overlap":"never"}"#, "overlap must be"),
        (r#"{"queue":"q","every_ms":1000,"payload":1,"colour":"red"}"#, "unknown field"),
        (r#"{"queue":"q","every_ms":1000,"payload":{"#, ""),
    ];
    for (body, says) in cases {
        let (status, answer) = api.call(Method::PUT, "/v1/schedules/s", Some(body)).await;
        assert!(status.is_client_error(), "{body}: {status} {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{body}: {message}");
    }
    let (status, _) =
        api.call(Method::PUT, "/v1/schedules/bad%20name", Some(r#"{"queue":"q","every_ms":1000,"payload":1}"#)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = api.call(Method::GET, "/v1/schedules?limit=0", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (_, page) = api.call(Method::GET, "/v1/schedules", None).await;
    assert_eq!(page["schedules"], json!([]), "nothing refused was stored");
}

#[tokio::test]
async fn a_task_that_expires_goes_dead_with_the_reason_expired() {
    let api = api();
    let (status, body) =
        api.call(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload":{"n":1},"expires_after_ms":500}"#)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["id"].as_u64().unwrap();
    let (_, task) = api.call(Method::GET, &format!("/v1/tasks/{id}"), None).await;
    assert_eq!(task["expires_at_ms"], T0_MS + 500);
    api.advance(500).await;
    let (_, task) = api.call(Method::GET, &format!("/v1/tasks/{id}"), None).await;
    assert_eq!((&task["state"], &task["dead_reason"]), (&json!("dead"), &json!("expired")));
    let (_, queues) = api.call(Method::GET, "/v1/queues", None).await;
    assert_eq!(queues["totals"]["expired"], 1);
    let (_, Value::String(text)) = api.call(Method::GET, "/metrics", None).await else { panic!("metrics is text") };
    assert!(text.contains("hourglass_tasks_expired_total 1"), "{text}");
    let both = r#"{"payload":1,"expires_after_ms":5,"expires_at_ms":5}"#;
    let (status, body) = api.call(Method::POST, "/v1/queues/q/tasks", Some(both)).await;
    assert_eq!((status, error_code(&body)), (StatusCode::BAD_REQUEST, "invalid"));
    let late = format!(r#"{{"payload":1,"delay_ms":1000,"expires_at_ms":{}}}"#, T0_MS + 1_000);
    let (status, body) = api.call(Method::POST, "/v1/queues/q/tasks", Some(&late)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[tokio::test]
async fn a_queue_pauses_and_resumes_and_its_dead_are_deleted_over_http() {
    let api = api();
    for n in 0..3 {
        let body = json!({ "payload": n, "max_attempts": 1 }).to_string();
        api.call(Method::POST, "/v1/queues/q/tasks", Some(&body)).await;
    }
    let (status, body) = api.call(Method::POST, "/v1/queues/q/pause", Some("{}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!((body["paused"].as_bool(), body["due"].as_u64()), (Some(true), Some(3)));
    let claim = r#"{"max": 10, "lease_ms": 1000}"#;
    let (_, claimed) = api.call(Method::POST, "/v1/queues/q/claim", Some(claim)).await;
    assert_eq!(claimed["tasks"].as_array().unwrap().len(), 0, "a paused queue hands out nothing");
    let (_, body) = api.call(Method::POST, "/v1/queues/q/resume", Some("{}")).await;
    assert_eq!(body["paused"], json!(false));
    let (_, claimed) = api.call(Method::POST, "/v1/queues/q/claim", Some(claim)).await;
    for task in claimed["tasks"].as_array().unwrap() {
        let uri = format!("/v1/tasks/{}/nack", task["id"]);
        let body = json!({ "lease": task["lease"], "reason": "upstream 503" }).to_string();
        let (status, body) = api.call(Method::POST, &uri, Some(&body)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!((body["state"].as_str(), body["last_error"].as_str()), (Some("dead"), Some("upstream 503")));
    }
    let (_, stats) = api.call(Method::GET, "/v1/queues/q", None).await;
    assert_eq!(stats["dead"], json!(3));
    let (status, body) = api.call(Method::DELETE, "/v1/queues/q/dead", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["deleted"], json!(3));
    let (_, stats) = api.call(Method::GET, "/v1/queues/q", None).await;
    assert_eq!(
        (stats["dead"].as_u64(), stats["enqueued"].as_u64(), stats["delivered"].as_u64()),
        (Some(0), Some(3), Some(3))
    );
    let (status, body) = api.call(Method::POST, "/v1/queues/bad%20name/pause", Some("{}")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (_, body) = api.call(Method::DELETE, "/v1/queues/never/dead", None).await;
    assert_eq!(body["deleted"], json!(0), "a queue never used has no dead");
}

#[tokio::test]
async fn the_dashboard_s_files_need_no_token_and_its_data_does() {
    let api = api_with(Limits::default(), Some("s3cret"));
    let (status, page) = api.call(Method::GET, "/", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.as_str().unwrap().contains("<script src=\"/ui/app.js\""), "the page: {page}");
    for file in ["/ui/app.js", "/ui/app.css"] {
        let (status, _) = api.call(Method::GET, file, None).await;
        assert_eq!(status, StatusCode::OK, "{file}");
    }
    let request = Request::builder().uri("/").body(Body::empty()).unwrap();
    let response = api.router.clone().oneshot(request).await.unwrap();
    let policy = response.headers()[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
    assert!(policy.contains("default-src 'none'") && policy.contains("connect-src 'self'"), "{policy}");
    let (status, body) = api.call(Method::GET, "/v1/overview", None).await;
    assert_eq!((status, error_code(&body)), (StatusCode::UNAUTHORIZED, "unauthorized"));
    let (status, _) = api.call_with(Method::GET, "/v1/overview", None, Some("wrong")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, body) = api.call(Method::GET, "/ui/other.js", None).await;
    assert_eq!(
        (status, error_code(&body)),
        (StatusCode::UNAUTHORIZED, "unauthorized"),
        "only the three files are open"
    );
    api.call_with(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload": 1}"#), Some("s3cret")).await;
    let (status, body) = api.call_with(Method::GET, "/v1/overview", None, Some("s3cret")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["queues"][0]["name"], json!("q"));
    assert_eq!(body["queues"][0]["due"], json!(1));
    assert_eq!(body["queues"][0]["rates"]["enqueued"], json!(0.0), "no sample yet: no rate");
    assert_eq!(body["read_only_ui"], json!(false));
    assert!(body["history"].as_array().unwrap().is_empty());
    // A reading is shared for a moment; ?fresh=true reads again.
    api.call_with(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload": 2}"#), Some("s3cret")).await;
    let (_, fresh) = api.call_with(Method::GET, "/v1/overview?fresh=true", None, Some("s3cret")).await;
    assert_eq!(fresh["queues"][0]["due"], json!(2));
    let (status, body) = api.call_with(Method::GET, "/v1/overview?stale=1", None, Some("s3cret")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[tokio::test]
async fn a_read_only_ui_refuses_the_dashboard_s_changes_and_not_the_api_s() {
    let api = api_built(Limits::default(), None, AppState::read_only_ui);
    let (_, body) = api.call(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload": 1}"#)).await;
    let id = body["id"].as_u64().unwrap();
    let (_, overview) = api.call(Method::GET, "/v1/overview", None).await;
    assert_eq!(overview["read_only_ui"], json!(true));
    let from_ui = |method: Method, uri: String| {
        Request::builder().method(method).uri(uri).header(hourglass_server::UI_HEADER, "1").body(Body::empty()).unwrap()
    };
    for (method, uri) in [(Method::DELETE, format!("/v1/tasks/{id}")), (Method::POST, "/v1/queues/q/pause".into())] {
        let response = api.router.clone().oneshot(from_ui(method, uri.clone())).await.unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{uri}");
    }
    let response = api.router.clone().oneshot(from_ui(Method::GET, format!("/v1/tasks/{id}"))).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "reads are fine");
    assert_eq!(api.engine.get(id).await.unwrap().task.id, id, "nothing was cancelled");
    let (status, _) = api.call(Method::DELETE, &format!("/v1/tasks/{id}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "the API itself is unchanged");
}

#[tokio::test]
async fn metrics_expose_lateness_histograms_per_queue_and_the_store_s_commits() {
    let api = api();
    api.call(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload": 1}"#)).await;
    api.advance(3).await;
    api.call(Method::POST, "/v1/queues/q/claim", Some(r#"{"max": 1}"#)).await;
    let request = Request::builder().uri("/metrics").body(Body::empty()).unwrap();
    let response = api.router.clone().oneshot(request).await.unwrap();
    let text = String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
    let line = |prefix: &str| {
        text.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix} in:\n{text}")).to_owned()
    };
    assert!(text.contains("# TYPE hourglass_delivery_lateness_seconds histogram"));
    // Claimed 3 ms late: not within 2.5 ms, within 5 ms.
    assert!(line(r#"hourglass_delivery_lateness_seconds_bucket{queue="q",le="0.0025"}"#).ends_with(" 0"));
    assert!(line(r#"hourglass_delivery_lateness_seconds_bucket{queue="q",le="0.005"}"#).ends_with(" 1"));
    assert!(line(r#"hourglass_delivery_lateness_seconds_bucket{queue="q",le="+Inf"}"#).ends_with(" 1"));
    assert!(line(r#"hourglass_delivery_lateness_seconds_count{queue="q"}"#).ends_with(" 1"));
    assert!(line(r#"hourglass_tasks{queue="q",state="leased"}"#).ends_with(" 1"));
    assert!(line(r#"hourglass_queue_paused{queue="q"}"#).ends_with(" 0"));
    let commits = line("hourglass_storage_commit_seconds_count ");
    assert!(commits.split(' ').nth(1).unwrap().parse::<u64>().unwrap() >= 1, "{commits}");
    assert!(text.contains(r#"hourglass_storage_commit_changes_bucket{le="+Inf"}"#));
    assert!(line("hourglass_storage_commits_failed_total ").ends_with(" 0"));
}

#[tokio::test]
async fn without_the_token_a_read_only_ui_says_nothing_but_unauthorized() {
    let api = api_built(Limits::default(), Some("s3cret"), AppState::read_only_ui);
    let from_ui = |token: Option<&str>| {
        let mut request = Request::builder().method(Method::POST).uri("/v1/queues/q/pause");
        request = request.header(hourglass_server::UI_HEADER, "1");
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        request.body(Body::empty()).unwrap()
    };
    let response = api.router.clone().oneshot(from_ui(None)).await.unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    let response = api.router.clone().oneshot(from_ui(Some("s3cret"))).await.unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(api.engine.queue("q").await.is_none(), "nothing was paused");
}

#[tokio::test]
async fn acks_in_one_request_are_answered_one_by_one() {
    let api = api();
    let batch = r#"{"tasks":[{"payload":1},{"payload":2},{"payload":3}]}"#;
    let (status, _) = api.call(Method::POST, "/v1/queues/q/tasks/batch", Some(batch)).await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, claimed) = api.call(Method::POST, "/v1/queues/q/claim", Some(r#"{"max":3}"#)).await;
    let tasks = claimed["tasks"].as_array().unwrap();
    let mut acks: Vec<Value> = tasks.iter().map(|t| json!({ "id": t["id"], "lease": t["lease"] })).collect();
    acks[1]["lease"] = json!("0000000000000000");
    let body = json!({ "acks": acks }).to_string();
    let (status, answer) = api.call(Method::POST, "/v1/acks", Some(&body)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let results = answer["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!((results[0]["acked"].as_bool(), results[2]["acked"].as_bool()), (Some(true), Some(true)));
    assert_eq!(results[1]["error"]["code"], "stale_lease", "a stale lease fails only its own ack");
    assert_eq!(api.engine.queue("q").await.unwrap().leased, 1);
    let (status, body) = api.call(Method::POST, "/v1/acks", Some(r#"{"acks":[]}"#)).await;
    assert_eq!((status, error_code(&body)), (StatusCode::BAD_REQUEST, "invalid"));
    let (status, body) = api.call(Method::POST, "/v1/acks", Some(r#"{"acks":[{"id":1,"lease":"zz"}]}"#)).await;
    assert_eq!((status, error_code(&body)), (StatusCode::BAD_REQUEST, "invalid"));
}
