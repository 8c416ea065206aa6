//! Listings by state with a cursor, lookups by key, and expiry.

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

use super::{api, error_code, T0_MS};

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
