//! What a scoped token is shown: a listing of schedules whose pages and
//! cursors name only its own; push headers' values only where it may
//! change them; what the dashboard may offer it, queue by queue.

use axum::http::{Method, StatusCode};
use hourglass_server::access::HIDDEN;
use serde_json::{json, Value};

use super::tokens::{scoped_api, target};
use super::Api;

async fn put_schedule(api: &Api, name: &str, queue: &str) {
    let body = format!(r#"{{"queue":"{queue}","every_ms":60000,"payload":1}}"#);
    let (status, answer) =
        api.call_with(Method::PUT, &format!("/v1/schedules/{name}"), Some(&body), Some("root")).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
}

#[tokio::test]
async fn a_scoped_listing_of_schedules_names_only_its_own_even_in_its_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let api = scoped_api(dir.path());
    // Names interleave: every page of every schedule ends on another team's.
    let mut own = Vec::new();
    for n in 0..12 {
        put_schedule(&api, &format!("s{n:02}a"), "team-a").await;
        put_schedule(&api, &format!("s{n:02}b"), "other-b").await;
        put_schedule(&api, &format!("s{n:02}c"), "other-c").await;
        own.push(format!("s{n:02}a"));
    }
    for limit in [1, 2, 5, 12, 13, 1000] {
        let (mut seen, mut after, mut pages) = (Vec::new(), None::<String>, 0);
        loop {
            let query = after.as_ref().map_or(String::new(), |a| format!("&after={a}"));
            let uri = format!("/v1/schedules?limit={limit}{query}");
            let (status, page) = api.call_with(Method::GET, &uri, None, Some("t-read")).await;
            assert_eq!(status, StatusCode::OK, "{page}");
            pages += 1;
            let names: Vec<String> =
                page["schedules"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap().into()).collect();
            assert!(names.len() <= limit, "limit {limit}: {names:?}");
            seen.extend(names);
            match page["next"].as_str() {
                Some(next) => {
                    assert!(next.ends_with('a'), "limit {limit}: the cursor {next:?} is another team's");
                    assert_eq!(seen.last().map(String::as_str), Some(next), "the cursor is the page's last");
                    after = Some(next.to_owned());
                }
                None => break,
            }
        }
        assert_eq!(seen, own, "limit {limit}: every own schedule once, in order, and no other");
        assert_eq!(pages, own.len().div_ceil(limit), "limit {limit}: no empty last page");
    }
    let (_, all) = api.call_with(Method::GET, "/v1/schedules?limit=1", None, Some("root")).await;
    assert_eq!(all["next"], "s00a", "an admin's pages are the store's");
    let (status, answer) = api.call_with(Method::GET, "/v1/schedules?limit=1001", None, Some("t-read")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "the limit holds for a scoped token too: {answer}");
}

#[tokio::test]
async fn push_headers_values_are_shown_only_to_a_token_that_may_change_them() {
    let dir = tempfile::tempdir().unwrap();
    let api = scoped_api(dir.path());
    let settings =
        r#"{"push":{"url":"https://example.com/hook","headers":{"Authorization":"Bearer receiver-secret"}}}"#;
    let (status, answer) =
        api.call_with(Method::PUT, "/v1/queues/team-h/settings", Some(settings), Some("t-manage")).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["push"]["headers"]["Authorization"], "Bearer receiver-secret", "its own put, whole");
    let task =
        r#"{"payload":1,"key":"k","http":{"url":"https://example.com/t","headers":{"X-Api-Key":"task-secret"}}}"#;
    let (status, created) = api.call_with(Method::POST, "/v1/queues/team-h/tasks", Some(task), Some("root")).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_u64().unwrap();

    let reads = [
        ("/v1/queues/team-h/settings".to_owned(), "/push/headers/Authorization"),
        ("/v1/queues/team-h".to_owned(), "/settings/push/headers/Authorization"),
        ("/v1/queues".to_owned(), "/queues/0/settings/push/headers/Authorization"),
        ("/v1/overview".to_owned(), "/queues/0/settings/push/headers/Authorization"),
        (format!("/v1/tasks/{id}"), "/http/headers/X-Api-Key"),
        ("/v1/queues/team-h/keys/k".to_owned(), "/http/headers/X-Api-Key"),
        ("/v1/queues/team-h/tasks".to_owned(), "/tasks/0/http/headers/X-Api-Key"),
    ];
    for (uri, pointer) in &reads {
        let (status, answer) = api.call_with(Method::GET, uri, None, Some("t-manage")).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "manage without read reads nothing: {uri}: {answer}");
        for (token, shown) in [("t-read", false), ("t-admin", true), ("root", true)] {
            let (status, answer) = api.call_with(Method::GET, uri, None, Some(token)).await;
            assert_eq!(status, StatusCode::OK, "{uri} by {token}: {answer}");
            let value = answer.pointer(pointer).and_then(Value::as_str).unwrap_or_else(|| panic!("{uri}: {answer}"));
            let secret = value.contains("secret");
            assert_eq!(secret, shown, "{uri} by {token}: {value}");
            if !shown {
                assert_eq!(value, HIDDEN, "the header's name stays, its value is hidden");
            }
            // The URL's path (where webhooks keep their secrets) likewise.
            let url_pointer = pointer.split("/headers/").next().unwrap().to_owned() + "/url";
            let url = answer.pointer(&url_pointer).and_then(Value::as_str).unwrap();
            assert_eq!(url.ends_with("/(hidden)"), !shown, "{uri} by {token}: {url}");
            assert!(url.starts_with("https://example.com/"), "{url}");
        }
    }
}

#[tokio::test]
async fn the_overview_says_what_the_token_may_do_in_each_queue_and_whether_its_figures_are_the_server_s() {
    let dir = tempfile::tempdir().unwrap();
    let api = scoped_api(dir.path());
    target(&api, "team-a").await;
    target(&api, "other-b").await;
    let (_, overview) = api.call_with(Method::GET, "/v1/overview", None, Some("t-read")).await;
    assert_eq!(overview["queues"].as_array().unwrap().len(), 1, "team-a only: {overview}");
    assert_eq!((&overview["queues"][0]["name"], &overview["queues"][0]["can"]), (&json!("team-a"), &json!(["read"])));
    assert_eq!(overview["server_wide"], false, "a scoped reader gets its queues' sums");
    let (_, overview) = api.call_with(Method::GET, "/v1/overview", None, Some("t-admin")).await;
    assert_eq!(overview["queues"][0]["can"], json!(["read", "enqueue", "consume", "manage"]));
    assert_eq!(overview["server_wide"], false, "admin on team-* only");
    let (_, overview) = api.call_with(Method::GET, "/v1/overview", None, Some("root")).await;
    let can: Vec<&Value> = overview["queues"].as_array().unwrap().iter().map(|q| &q["can"]).collect();
    assert_eq!(can, [&json!(["read", "enqueue", "consume", "manage"]); 2]);
    assert_eq!(overview["server_wide"], true);
}
