//! The nodes that share the store (`GET /v1/nodes`, and in the overview),
//! and how fresh the counters they count are: over a backend with several
//! nodes, over the embedded one (one process: none), and to a token that
//! does not read every queue (refused, and shown none).

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use hourglass_queue::{Limits, SystemWallClock, WallClock};
use serde_json::{json, Value};

use super::tokens::scoped_keys;
use super::{api, api_over, error_code, Api, PATIENCE};
use crate::several_nodes::{node, SeveralNodes};

/// A server over three nodes: `a` answering, `b` a second behind, `c`
/// holding nothing with a heartbeat an hour ahead of this machine's clock.
/// Its counters are in as of two seconds ago.
fn three_nodes(
    build: impl FnOnce(hourglass_server::AppState) -> hourglass_server::AppState,
) -> (Api, Arc<SeveralNodes>, u64) {
    let now = SystemWallClock.now_ms();
    let mut backend = None;
    let api = api_over(
        Limits::default(),
        None,
        |engine| {
            let nodes = vec![
                node("a", true, now, &[0, 3, 6, 9, 12, 15]),
                node("b", false, now - 1_000, &[1, 2, 4, 5, 7, 8, 10, 11, 13, 14]),
                node("c", false, now + 3_600_000, &[]),
            ];
            let several = SeveralNodes::new(engine, nodes, now - 2_000);
            backend = Some(several.clone());
            several
        },
        build,
    );
    (api, backend.unwrap(), now)
}

/// `age` (ms) is at least `at_least`, and more by no longer than the test
/// could have taken.
fn aged(age: &Value, at_least: u64) {
    let age = age.as_u64().unwrap_or_else(|| panic!("an age in ms: {age}"));
    assert!(age >= at_least && age < at_least + PATIENCE.as_millis() as u64, "{age} ms, {at_least} expected");
}

#[tokio::test]
async fn each_node_is_shown_with_its_shards_and_its_heartbeat_s_age() {
    let (api, backend, now) = three_nodes(|state| state);
    let (status, answer) = api.call(Method::GET, "/v1/nodes", None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let now_ms = answer["now_ms"].as_u64().unwrap();
    assert!(now_ms >= now, "the server's clock");
    let nodes = answer["nodes"].as_array().unwrap();
    let names: Vec<_> = nodes.iter().map(|n| (n["name"].as_str().unwrap(), n["this"].as_bool().unwrap())).collect();
    assert_eq!(names, [("a", true), ("b", false), ("c", false)], "as the backend gives them");
    assert_eq!(nodes[0]["shards"], json!([0, 3, 6, 9, 12, 15]));
    assert_eq!(nodes[2]["shards"], json!([]));
    assert_eq!(nodes[1]["heartbeat_ms"], now - 1_000, "by the store's clock, as it was");
    for n in nodes {
        let age = now_ms.saturating_sub(n["heartbeat_ms"].as_u64().unwrap());
        assert_eq!(n["heartbeat_age_ms"], age, "against now_ms: {n}");
    }
    aged(&nodes[1]["heartbeat_age_ms"], 1_000);
    assert_eq!(nodes[2]["heartbeat_age_ms"], 0, "a store's clock ahead of ours is no age, not a wrap");
    assert_eq!(backend.readings(), 1);
}

#[tokio::test]
async fn the_overview_carries_the_nodes_and_how_fresh_the_counters_are() {
    let (api, backend, now) = three_nodes(|state| state);
    let (status, _) = api.call(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload":1}"#)).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, overview) = api.call(Method::GET, "/v1/overview?fresh=true", None).await;
    assert_eq!(status, StatusCode::OK, "{overview}");
    assert_eq!(overview["totals"]["counters_as_of_ms"], now - 2_000);
    assert_eq!(overview["totals"]["enqueued"], 1);
    let nodes = overview["nodes"].as_array().expect("the nodes, in the same request");
    assert_eq!(nodes.len(), 3);
    assert_eq!((&nodes[0]["name"], &nodes[0]["this"]), (&json!("a"), &json!(true)));
    let now_ms = overview["now_ms"].as_u64().unwrap();
    assert_eq!(nodes[1]["heartbeat_age_ms"], now_ms - (now - 1_000), "against the overview's now_ms");
    // `fresh` reads the nodes again too; `/v1/queues` has the freshness.
    let before = backend.readings();
    api.call(Method::GET, "/v1/overview?fresh=true", None).await;
    assert_eq!(backend.readings(), before + 1, "read now, not shared");
    let (_, queues) = api.call(Method::GET, "/v1/queues", None).await;
    assert_eq!(queues["totals"]["counters_as_of_ms"], now - 2_000);
}

#[tokio::test]
async fn a_token_that_does_not_read_every_queue_is_refused_the_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let keys = scoped_keys(dir.path());
    let (api, backend, now) = three_nodes(|state| state.keys(keys));
    let (status, answer) = api.call_with(Method::GET, "/v1/nodes", None, Some("t-read")).await;
    assert_eq!((status, error_code(&answer)), (StatusCode::FORBIDDEN, "forbidden"), "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("read") && message.contains("every queue"), "{message}");
    // Its overview shows none, and reads none; its queues' counters still
    // say how fresh they are.
    let (status, overview) = api.call_with(Method::GET, "/v1/overview?fresh=true", None, Some("t-read")).await;
    assert_eq!(status, StatusCode::OK, "{overview}");
    assert!(overview.get("nodes").is_none(), "{overview}");
    assert_eq!(overview["totals"]["counters_as_of_ms"], now - 2_000);
    assert_eq!(backend.readings(), 0, "nothing read for it");
    // The admin token is shown them.
    let (status, answer) = api.call_with(Method::GET, "/v1/nodes", None, Some("root")).await;
    assert_eq!((status, answer["nodes"].as_array().map(Vec::len)), (StatusCode::OK, Some(3)), "{answer}");
}

#[tokio::test]
async fn one_process_has_no_nodes_and_exact_counters() {
    let api = api();
    let (status, answer) = api.call(Method::GET, "/v1/nodes", None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["nodes"], Value::Null, "said: {answer}");
    assert!(answer.as_object().unwrap().contains_key("nodes"), "null, not left out: {answer}");
    let (_, overview) = api.call(Method::GET, "/v1/overview", None).await;
    assert!(overview.get("nodes").is_none(), "{overview}");
    assert!(overview["totals"].get("counters_as_of_ms").is_none(), "exact: {overview}");
}
