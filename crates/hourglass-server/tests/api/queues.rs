//! Queues: pause, resume, delete the dead; health and metrics.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::{json, Value};

use super::api;

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
async fn metrics_and_health() {
    let api = api();
    api.call(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload":1}"#)).await;
    let (status, health) = api.call(Method::GET, "/healthz", None).await;
    assert_eq!((status, health["status"].as_str()), (StatusCode::OK, Some("ok")));
    let (_, Value::String(text)) = api.call(Method::GET, "/metrics", None).await else { panic!("metrics is text") };
    assert!(text.contains("hourglass_tasks_enqueued_total 1"), "{text}");
    assert!(text.contains(r#"hourglass_tasks{queue="q",state="due"} 1"#), "{text}");
}

#[tokio::test]
async fn metrics_expose_lateness_histograms_per_queue_and_the_store_s_commits() {
    let api = api();
    api.call(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload": 1}"#)).await;
    api.advance(3).await;
    api.call(Method::POST, "/v1/queues/q/claim", Some(r#"{"max": 1}"#)).await;
    let request = Request::builder().uri("/metrics").body(Body::empty()).unwrap();
    let (_, bytes) = api.send(request).await;
    let text = String::from_utf8(bytes).unwrap();
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
