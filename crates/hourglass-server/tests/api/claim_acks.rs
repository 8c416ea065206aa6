//! A claim that also acks the consumer's previous batch.

use axum::http::{Method, StatusCode};
use hourglass_queue::limits::ACK_BATCH_MAX;
use hourglass_queue::prelude::*;
use serde_json::{json, Value};

use super::{api, error_code, Api};

/// Enqueues `count` tasks on `q` and claims them: their `{"id", "lease"}`.
async fn claimed(api: &Api, count: usize) -> Vec<Value> {
    let tasks: Vec<Value> = (0..count).map(|i| json!({ "payload": i })).collect();
    let body = json!({ "tasks": tasks }).to_string();
    let (status, _) = api.call(Method::POST, "/v1/queues/q/tasks/batch", Some(&body)).await;
    assert_eq!(status, StatusCode::CREATED);
    let body = json!({ "max": count }).to_string();
    let (_, claimed) = api.call(Method::POST, "/v1/queues/q/claim", Some(&body)).await;
    claimed["tasks"].as_array().unwrap().iter().map(|t| json!({ "id": t["id"], "lease": t["lease"] })).collect()
}

#[tokio::test]
async fn a_claim_acks_first_and_answers_each_ack_beside_its_tasks() {
    let api = api();
    let mut acks = claimed(&api, 3).await;
    acks[1]["lease"] = json!("0000000000000000");
    let (status, _) = api.call(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload":"next"}"#)).await;
    assert_eq!(status, StatusCode::CREATED);
    let body = json!({ "max": 10, "acks": acks }).to_string();
    let (status, answer) = api.call(Method::POST, "/v1/queues/q/claim", Some(&body)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let results = answer["acks"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!((results[0]["acked"].as_bool(), results[2]["acked"].as_bool()), (Some(true), Some(true)));
    assert_eq!((&results[1]["id"], &results[1]["error"]["code"]), (&acks[1]["id"], &json!("stale_lease")));
    let tasks = answer["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1, "the stale one is still leased, not due: {answer}");
    assert_eq!(tasks[0]["payload"], "next");
    let queue = api.engine.queue("q").await.unwrap();
    assert_eq!((queue.leased, queue.acked), (2, 2));

    // Without acks the answer has none; with an empty list, an empty list.
    let (_, answer) = api.call(Method::POST, "/v1/queues/q/claim", Some("{}")).await;
    assert!(answer.get("acks").is_none(), "{answer}");
    let (status, answer) = api.call(Method::POST, "/v1/queues/q/claim", Some(r#"{"acks":[]}"#)).await;
    assert_eq!((status, &answer["acks"]), (StatusCode::OK, &json!([])));
}

#[tokio::test]
async fn a_claim_with_too_many_or_unreadable_acks_changes_nothing() {
    let api = api();
    let acks = claimed(&api, 2).await;
    let mut too_many = vec![acks[0].clone(); ACK_BATCH_MAX];
    too_many.push(acks[1].clone());
    let body = json!({ "acks": too_many }).to_string();
    let (status, answer) = api.call(Method::POST, "/v1/queues/q/claim", Some(&body)).await;
    assert_eq!((status, error_code(&answer)), (StatusCode::BAD_REQUEST, "invalid"));
    assert!(answer["error"]["message"].as_str().unwrap().contains(&ACK_BATCH_MAX.to_string()), "{answer}");
    let bad = json!({ "acks": [acks[0], { "id": 2, "lease": "zz" }] }).to_string();
    let (status, answer) = api.call(Method::POST, "/v1/queues/q/claim", Some(&bad)).await;
    assert_eq!((status, error_code(&answer)), (StatusCode::BAD_REQUEST, "invalid"));
    let queue = api.engine.queue("q").await.unwrap();
    assert_eq!((queue.leased, queue.acked), (2, 0), "neither request acked anything");
}
