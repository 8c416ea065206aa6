//! Tasks: enqueue (one and a batch), claim, ack (one and several), nack,
//! extend, retry, reschedule and cancel.

use axum::http::{Method, StatusCode};
use hourglass_queue::prelude::*;
use serde_json::{json, Value};

use super::{api, error_code, T0_MS};

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
async fn a_payload_left_out_is_null_for_tasks_batches_and_schedules() {
    let api = api();
    let (status, created) = api.call(Method::POST, "/v1/queues/q/tasks", Some(r#"{"delay_ms":10}"#)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let (_, task) = api.call(Method::GET, &format!("/v1/tasks/{}", created["id"]), None).await;
    assert_eq!(task["payload"], serde_json::Value::Null, "{task}");
    let (status, batch) =
        api.call(Method::POST, "/v1/queues/q/tasks/batch", Some(r#"{"tasks":[{},{"delay_ms":5}]}"#)).await;
    assert_eq!(status, StatusCode::CREATED, "{batch}");
    let (status, schedule) =
        api.call(Method::PUT, "/v1/schedules/bare", Some(r#"{"queue":"q","every_ms":60000}"#)).await;
    assert_eq!((status, &schedule["payload"]), (StatusCode::CREATED, &serde_json::Value::Null), "{schedule}");
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
