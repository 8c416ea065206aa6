//! Push delivery's data over HTTP: a task's own target, a queue's settings,
//! and what pull claims get of a queue that pushes (nothing).

use axum::http::{Method, StatusCode};
use serde_json::json;

use super::{api, error_code};

const CLAIM: &str = r#"{"max": 10, "lease_ms": 30000}"#;

#[tokio::test]
async fn settings_are_put_whole_read_back_and_checked() {
    let api = api();
    let (status, body) = api.call(Method::GET, "/v1/queues/q/settings", None).await;
    assert_eq!((status, body), (StatusCode::OK, json!({ "push": null })), "a queue never set");
    let put = json!({
        "push": { "url": "https://example.com/hook", "method": "PUT", "headers": { "Authorization": "Bearer t" } },
        "rate_per_s": 2.5,
        "max_in_flight": 4,
    });
    let (status, answer) = api.call(Method::PUT, "/v1/queues/q/settings", Some(&put.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let expected = json!({
        "push": {
            "url": "https://example.com/hook",
            "method": "PUT",
            "headers": { "Authorization": "Bearer t" },
            "timeout_ms": 30000,
        },
        "rate_per_s": 2.5,
        "max_in_flight": 4,
    });
    assert_eq!(answer, expected, "the defaults filled in");
    let (_, read) = api.call(Method::GET, "/v1/queues/q/settings", None).await;
    assert_eq!(read, expected);
    for (bad, says) in [
        (json!({ "push": { "url": "ftp://example.com/" } }), "http or https"),
        (json!({ "push": { "url": "https://e.com/", "timeout_ms": 1_800_001 } }), "push.timeout_ms"),
        (json!({ "push": { "url": "https://e.com/", "method": "TRACE" } }), "method must be"),
        (json!({ "push": { "url": "https://e.com/", "headers": { "Connection": "close" } } }), "may not be set"),
        (json!({ "burst": 3 }), "needs rate_per_s"),
        (json!({ "max_in_flight": 0 }), "max_in_flight"),
    ] {
        let (status, body) = api.call(Method::PUT, "/v1/queues/q/settings", Some(&bad.to_string())).await;
        assert_eq!((status, error_code(&body)), (StatusCode::BAD_REQUEST, "invalid"), "{bad}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().contains(says), "{bad}: {body}");
    }
    let (status, body) = api.call(Method::PUT, "/v1/queues/q/settings", Some(r#"{"rate": 3}"#)).await;
    assert_eq!((status, error_code(&body)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_json"), "a misspelt name");
    let (_, read) = api.call(Method::GET, "/v1/queues/q/settings", None).await;
    assert_eq!(read, expected, "a refused put changes nothing");
    let (status, body) = api.call(Method::PUT, "/v1/queues/q/settings", Some(r#"{"push": null}"#)).await;
    assert_eq!((status, body), (StatusCode::OK, json!({ "push": null })), "a put replaces them whole");
}

#[tokio::test]
async fn a_task_carries_its_own_target_and_pull_claims_never_get_it() {
    let api = api();
    let task = json!({ "payload": { "n": 1 }, "http": { "url": "https://example.com/a", "headers": { "X-A": "1" } } });
    let (status, done) = api.call(Method::POST, "/v1/queues/q/tasks", Some(&task.to_string())).await;
    assert_eq!(status, StatusCode::CREATED, "{done}");
    let (_, shown) = api.call(Method::GET, &format!("/v1/tasks/{}", done["id"]), None).await;
    assert_eq!(shown["http"], json!({ "url": "https://example.com/a", "method": "POST", "headers": { "X-A": "1" } }));
    let (_, claimed) = api.call(Method::POST, "/v1/queues/q/claim", Some(CLAIM)).await;
    assert_eq!(claimed["tasks"], json!([]), "a pull claim does not get a task of push");
    let batch = json!({ "tasks": [{ "payload": 1 }, { "payload": 2, "http": { "url": "https://x/", "headers": { "Hourglass-Attempt": "9" } } }] });
    let (status, body) = api.call(Method::POST, "/v1/queues/q/tasks/batch", Some(&batch.to_string())).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().starts_with("task 1: header"), "{body}");
    let batch = json!({ "tasks": [{ "payload": 1 }, { "payload": 2, "http": { "url": "http://example.com/b", "method": "PATCH" } }] });
    let (status, body) = api.call(Method::POST, "/v1/queues/q/tasks/batch", Some(&batch.to_string())).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (_, claimed) = api.call(Method::POST, "/v1/queues/q/claim", Some(CLAIM)).await;
    assert_eq!(claimed["tasks"].as_array().unwrap().len(), 1, "only the task without a target: {claimed}");
}

#[tokio::test]
async fn a_queue_that_pushes_answers_pull_claims_with_nothing_and_a_cap_holds_them_back() {
    let api = api();
    for n in 0..3 {
        api.call(Method::POST, "/v1/queues/q/tasks", Some(&json!({ "payload": n }).to_string())).await;
    }
    let push = json!({ "push": { "url": "https://example.com/hook" } }).to_string();
    api.call(Method::PUT, "/v1/queues/q/settings", Some(&push)).await;
    let (status, claimed) = api.call(Method::POST, "/v1/queues/q/claim", Some(CLAIM)).await;
    assert_eq!((status, &claimed["tasks"]), (StatusCode::OK, &json!([])), "its tasks are delivered by push");
    let (_, stats) = api.call(Method::GET, "/v1/queues/q", None).await;
    assert_eq!(stats["due"], json!(3), "still due, for the delivery loop");
    api.call(Method::PUT, "/v1/queues/q/settings", Some(r#"{"max_in_flight": 2}"#)).await;
    let (_, claimed) = api.call(Method::POST, "/v1/queues/q/claim", Some(CLAIM)).await;
    assert_eq!(claimed["tasks"].as_array().unwrap().len(), 2, "no more than the cap: {claimed}");
}
