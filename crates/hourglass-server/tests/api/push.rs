//! Push delivery's data over HTTP: a task's own target, a queue's settings,
//! and what pull claims get of a queue that pushes (nothing).

use axum::http::{Method, StatusCode};
use hourglass_push::{AllowList, Outbound};
use hourglass_queue::Limits;
use serde_json::json;

use super::{api, api_built, error_code};

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

#[tokio::test]
async fn targets_the_outbound_rules_refuse_are_refused_at_enqueue() {
    let allow = AllowList::parse(["127.0.0.1:8080"]).unwrap();
    let api = api_built(Limits::default(), None, |state| state.outbound(Outbound::new(allow)));
    let refused = [
        ("/v1/queues/q/tasks", Method::POST, json!({ "payload": 1, "http": { "url": "http://169.254.169.254/x" } })),
        (
            "/v1/queues/q/tasks/batch",
            Method::POST,
            json!({ "tasks": [{ "payload": 1 }, { "payload": 2, "http": { "url": "http://localhost:9/" } }] }),
        ),
        ("/v1/queues/q/settings", Method::PUT, json!({ "push": { "url": "http://[::1]:8080/" } })),
        ("/v1/queues/q/tasks", Method::POST, json!({ "payload": 1, "http": { "url": "http://127.0.0.1:8081/" } })),
    ];
    for (uri, method, body) in refused {
        let (status, answer) = api.call(method, uri, Some(&body.to_string())).await;
        assert_eq!((status, error_code(&answer)), (StatusCode::BAD_REQUEST, "invalid"), "{body}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("target refused: ") && message.ends_with("not on the push allow list"),
            "{message}"
        );
    }
    let (_, stats) = api.call(Method::GET, "/v1/queues", None).await;
    assert_eq!(stats["totals"]["tasks"], json!(0), "nothing refused was enqueued: {stats}");
    // Opened by the allow list, or a name only delivery can judge.
    for url in ["http://127.0.0.1:8080/hook", "https://hooks.example.com/"] {
        let task = json!({ "payload": 1, "http": { "url": url } });
        let (status, answer) = api.call(Method::POST, "/v1/queues/q/tasks", Some(&task.to_string())).await;
        assert_eq!(status, StatusCode::CREATED, "{url}: {answer}");
    }
}
