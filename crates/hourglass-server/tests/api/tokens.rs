//! Scoped tokens: every route, table-driven, allowed to the tokens that
//! hold its permission on the queue it touches and refused (403
//! `forbidden`, naming the permission) to the others; listings showing
//! only the queues a token reads.

use std::path::Path;
use std::sync::Arc;

use axum::http::{Method, StatusCode};
use hourglass_queue::Limits;
use hourglass_server::access::{Keys, Permission};
use hourglass_server::{route_permission, ROUTES};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{api_built, error_code, Api};

/// The tokens of the test file: each holds one permission on `team-*`.
const TOKENS: [(&str, &[&str]); 6] = [
    ("t-read", &["read"]),
    ("t-enqueue", &["enqueue"]),
    ("t-consume", &["consume"]),
    ("t-manage", &["manage"]),
    ("t-admin", &["admin"]),
    ("t-none", &["read"]),
];

/// Routes across queues: answered to any token holding the permission,
/// showing only its queues.
const LISTINGS: [&str; 4] = ["/metrics", "/v1/overview", "/v1/queues", "/v1/schedules"];

/// Routes of figures that tell of every queue: answered only to a token
/// that holds the permission on every queue, which none of the file's does.
const EVERYWHERE: [&str; 1] = ["/v1/nodes"];

fn write_tokens(path: &Path) {
    let mut text = String::new();
    for (token, can) in TOKENS {
        // t-none reads a queue no test touches: it is known, and may do nothing here.
        let queues = if token == "t-none" { "[\"elsewhere\"]" } else { "[\"team-*\"]" };
        let can: Vec<String> = can.iter().map(|c| format!("\"{c}\"")).collect();
        text += &format!(
            "[[token]]\nname = \"{token}\"\nsha256 = \"{}\"\nqueues = {queues}\ncan = [{}]\n",
            hex::encode(Sha256::digest(token.as_bytes())),
            can.join(", ")
        );
    }
    std::fs::write(path, text).unwrap();
}

pub(super) fn scoped_api(dir: &Path) -> Api {
    let keys = scoped_keys(dir);
    api_built(Limits::default(), None, |state| state.keys(keys))
}

/// `root`, admin on every queue, and the test file's tokens (written in `dir`).
pub(super) fn scoped_keys(dir: &Path) -> Arc<Keys> {
    let file = dir.join("tokens.toml");
    write_tokens(&file);
    Arc::new(Keys::new(Some("root"), Some(&file)).unwrap())
}

/// What a case works on: a fresh queue with one leased task and a schedule.
pub(super) struct Target {
    queue: String,
    id: u64,
    lease: String,
    schedule: String,
}

pub(super) async fn target(api: &Api, queue: &str) -> Target {
    let root = Some("root");
    let (status, _) = api
        .call_with(Method::POST, &format!("/v1/queues/{queue}/tasks"), Some(r#"{"payload":1,"key":"k"}"#), root)
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, claimed) = api.call_with(Method::POST, &format!("/v1/queues/{queue}/claim"), Some("{}"), root).await;
    let task = &claimed["tasks"][0];
    let schedule = format!("s-{queue}");
    let body = format!(r#"{{"queue":"{queue}","every_ms":60000,"payload":1}}"#);
    let (status, _) = api.call_with(Method::PUT, &format!("/v1/schedules/{schedule}"), Some(&body), root).await;
    assert_eq!(status, StatusCode::CREATED);
    Target {
        queue: queue.into(),
        id: task["id"].as_u64().unwrap(),
        lease: task["lease"].as_str().unwrap().into(),
        schedule,
    }
}

/// The request a case sends on `path` by `method` to `target`.
fn request(path: &str, method: &str, t: &Target) -> (Method, String, Option<String>) {
    let uri = path
        .replace("{queue}", &t.queue)
        .replace("{id}", &t.id.to_string())
        .replace("{name}", &t.schedule)
        .replace("{key}", "k");
    let lease = &t.lease;
    let body = match (path, method) {
        ("/v1/queues/{queue}/tasks", "post") => Some(r#"{"payload":2}"#.to_owned()),
        ("/v1/queues/{queue}/tasks/batch", "post") => Some(r#"{"tasks":[{"payload":3}]}"#.to_owned()),
        ("/v1/queues/{queue}/settings", "put") => Some("{}".to_owned()),
        ("/v1/queues/{queue}/claim", "post") => Some("{}".to_owned()),
        ("/v1/tasks/{id}", "patch") => Some(r#"{"delay_ms":1000}"#.to_owned()),
        ("/v1/tasks/{id}/ack" | "/v1/tasks/{id}/nack", "post") => Some(format!(r#"{{"lease":"{lease}"}}"#)),
        ("/v1/tasks/{id}/extend", "post") => Some(format!(r#"{{"lease":"{lease}","lease_ms":5000}}"#)),
        ("/v1/acks", "post") => Some(format!(r#"{{"acks":[{{"id":{},"lease":"{lease}"}}]}}"#, t.id)),
        ("/v1/schedules/{name}", "put") => Some(format!(r#"{{"queue":"{}","every_ms":120000,"payload":1}}"#, t.queue)),
        _ => None,
    };
    (method.to_uppercase().parse().unwrap(), uri, body)
}

fn holds(can: &[&str], permission: Permission) -> bool {
    can.contains(&permission.as_str()) || can.contains(&"admin")
}

#[tokio::test]
async fn every_route_is_allowed_to_its_permission_and_refused_to_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let api = scoped_api(dir.path());
    let (mut allowed, mut refused, mut case) = (0, 0, 0);
    for (path, methods) in ROUTES {
        // HEAD is answered by the GET handler: it must need what GET needs.
        let head = methods.contains(&"get").then_some("head");
        for method in methods.iter().copied().chain(head) {
            let get = if method == "head" { "get" } else { method };
            let Some(permission) = route_permission(path, get) else { continue };
            for (token, can) in TOKENS {
                for queue in ["team", "other"] {
                    case += 1;
                    let t = target(&api, &format!("{queue}-{case}")).await;
                    let (m, uri, body) = request(path, method, &t);
                    let (status, answer) = api.call_with(m, &uri, body.as_deref(), Some(token)).await;
                    let listing = LISTINGS.contains(path);
                    let expect_allowed = holds(can, permission)
                        && (queue == "team" || listing)
                        && (token != "t-none" || listing)
                        && !EVERYWHERE.contains(path);
                    let what = format!("{method} {uri} by {token}: {status} {answer}");
                    if expect_allowed {
                        assert!(status != StatusCode::FORBIDDEN && status != StatusCode::UNAUTHORIZED, "{what}");
                        assert!(status.is_success() || status == StatusCode::CONFLICT, "{what}");
                        allowed += 1;
                    } else if method == "head" {
                        // A HEAD answer has no body to name the permission in.
                        assert_eq!(status, StatusCode::FORBIDDEN, "{what}");
                        refused += 1;
                    } else {
                        assert_eq!((status, error_code(&answer)), (StatusCode::FORBIDDEN, "forbidden"), "{what}");
                        let message = answer["error"]["message"].as_str().unwrap();
                        assert!(message.contains(permission.as_str()), "{what}");
                        assert!(!message.contains("t-"), "a refusal names no token: {what}");
                        refused += 1;
                    }
                }
            }
        }
    }
    println!("{case} cases: {allowed} allowed, {refused} refused");
    assert!(allowed > 50 && refused > 100);
}

#[tokio::test]
async fn an_unknown_token_is_401_and_routes_for_any_token_answer_any_known_one() {
    let dir = tempfile::tempdir().unwrap();
    let api = scoped_api(dir.path());
    let (status, body) = api.call_with(Method::GET, "/v1/queues", None, Some("nobody")).await;
    assert_eq!((status, error_code(&body)), (StatusCode::UNAUTHORIZED, "unauthorized"));
    let (status, body) = api.call_with(Method::GET, "/v1/nowhere", None, Some("nobody")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "no route is told to an unknown token: {body}");
    for token in ["t-none", "t-enqueue", "root"] {
        let (status, _) = api.call_with(Method::GET, "/healthz", None, Some(token)).await;
        assert_eq!(status, StatusCode::OK, "{token}");
    }
    let (status, me) = api.call_with(Method::GET, "/v1/whoami", None, Some("t-enqueue")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(me, serde_json::json!({"name": "t-enqueue", "can": ["enqueue"], "queues": ["team-*"]}));
    let (_, me) = api.call_with(Method::GET, "/v1/whoami", None, Some("root")).await;
    assert_eq!((me["name"].as_str(), me["can"].clone()), (Some("--token"), serde_json::json!(["admin"])));
}

#[tokio::test]
async fn listings_show_a_token_only_the_queues_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let api = scoped_api(dir.path());
    target(&api, "team-a").await;
    target(&api, "other-b").await;
    let names = |body: &Value, field: &str| -> Vec<String> {
        body[field].as_array().unwrap().iter().map(|q| q["name"].as_str().unwrap().to_owned()).collect()
    };
    let (_, queues) = api.call_with(Method::GET, "/v1/queues", None, Some("t-read")).await;
    assert_eq!(names(&queues, "queues"), ["team-a"]);
    assert_eq!(queues["totals"]["tasks"], 1, "the sums of its queues: {queues}");
    let (_, all) = api.call_with(Method::GET, "/v1/queues", None, Some("root")).await;
    assert_eq!(names(&all, "queues"), ["other-b", "team-a"]);
    let (_, overview) = api.call_with(Method::GET, "/v1/overview", None, Some("t-read")).await;
    assert_eq!(names(&overview, "queues"), ["team-a"]);
    let (_, schedules) = api.call_with(Method::GET, "/v1/schedules", None, Some("t-read")).await;
    assert_eq!(names(&schedules, "schedules"), ["s-team-a"]);
    let (_, metrics) = api.call_with(Method::GET, "/metrics", None, Some("t-read")).await;
    let metrics = metrics.as_str().unwrap();
    assert!(metrics.contains("queue=\"team-a\"") && !metrics.contains("other-b"), "{metrics}");
    assert!(!metrics.contains("hourglass_tasks_enqueued_total"), "no server-wide series: {metrics}");
    let (_, metrics) = api.call_with(Method::GET, "/metrics", None, Some("root")).await;
    assert!(metrics.as_str().unwrap().contains("hourglass_tasks_enqueued_total"));
}

#[tokio::test]
async fn a_claim_s_acks_and_a_schedule_s_queue_are_checked_too() {
    let dir = tempfile::tempdir().unwrap();
    let api = scoped_api(dir.path());
    let other = target(&api, "other-x").await;
    target(&api, "team-x").await;
    let body = format!(r#"{{"acks":[{{"id":{},"lease":"{}"}}]}}"#, other.id, other.lease);
    let (status, answer) = api.call_with(Method::POST, "/v1/queues/team-x/claim", Some(&body), Some("t-consume")).await;
    assert_eq!((status, error_code(&answer)), (StatusCode::FORBIDDEN, "forbidden"), "{answer}");
    let (status, _) = api.call_with(Method::GET, &format!("/v1/tasks/{}", other.id), None, Some("root")).await;
    assert_eq!(status, StatusCode::OK, "the other queue's task was not acked");
    // A schedule of team-x moved to another queue: manage is needed there too.
    let (status, answer) = api
        .call_with(
            Method::PUT,
            "/v1/schedules/s-team-x",
            Some(r#"{"queue":"other-x","every_ms":1000,"payload":1}"#),
            Some("t-manage"),
        )
        .await;
    assert_eq!((status, error_code(&answer)), (StatusCode::FORBIDDEN, "forbidden"), "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("manage"));
}
