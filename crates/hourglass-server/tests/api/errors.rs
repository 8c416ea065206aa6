//! Bad input gets a clear 4xx and changes nothing; a budget gets 507.

use axum::http::{Method, StatusCode};
use hourglass_queue::prelude::*;
use hourglass_queue::Limits;

use super::{api_with, error_code};

#[tokio::test]
async fn bad_input_gets_a_clear_4xx_and_changes_nothing() {
    let api = api_with(Limits { payload_bytes_max: 100, tasks_max: 2, ..Limits::default() }, None);
    let cases: &[(&str, &str, StatusCode, &str)] = &[
        ("/v1/queues/q/tasks", "{not json", StatusCode::BAD_REQUEST, "invalid_json"),
        ("/v1/queues/q/tasks", r#"{"payload":1,"surprise":true}"#, StatusCode::UNPROCESSABLE_ENTITY, "invalid_json"),
        ("/v1/queues/q/tasks", r#"{"delay_ms":"5"}"#, StatusCode::UNPROCESSABLE_ENTITY, "invalid_json"),
        ("/v1/queues/q/tasks", r#"{"payload":1,"delay_ms":-1}"#, StatusCode::UNPROCESSABLE_ENTITY, "invalid_json"),
        ("/v1/queues/q/tasks", r#"{"payload":1,"delay_ms":99999999999999999}"#, StatusCode::BAD_REQUEST, "invalid"),
        ("/v1/queues/q/tasks", r#"{"payload":1,"delay_ms":1,"run_at_ms":1}"#, StatusCode::BAD_REQUEST, "invalid"),
        ("/v1/queues/bad%20name/tasks", r#"{"payload":1}"#, StatusCode::BAD_REQUEST, "invalid"),
        ("/v1/queues/q/claim", r#"{"max":100000}"#, StatusCode::BAD_REQUEST, "invalid"),
        ("/v1/queues/q/tasks", r#"{"payload":1,"payload_base64":"AA=="}"#, StatusCode::BAD_REQUEST, "invalid"),
        ("/v1/queues/q/tasks", r#"{"payload_base64":"not base64"}"#, StatusCode::BAD_REQUEST, "invalid"),
        ("/v1/queues/q/tasks", r#"{"payload_base64":5}"#, StatusCode::UNPROCESSABLE_ENTITY, "invalid_json"),
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
    // The limit counts bytes: 101 of them are too many as base64 too, though
    // a body of the limit's base64 gets through to be counted.
    let big = format!(r#"{{"payload_base64":"{}"}}"#, "A".repeat(136));
    let (status, body) = api.call(Method::POST, "/v1/queues/q/tasks", Some(&big)).await;
    assert_eq!((status, error_code(&body)), (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("payload is 102 bytes"), "{body}");
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
    assert!(body["error"]["message"].as_str().unwrap().contains("memory budget of"), "{body}");
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
