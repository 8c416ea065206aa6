//! Schedules: put, shown, listed, fired, paused and deleted; bad ones refused.

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

use super::{api, error_code, T0_MS};

#[tokio::test]
async fn schedules_are_put_shown_listed_fired_and_deleted() {
    let api = api();
    // T0 is Friday 2027-01-15 09:00 in Berlin: the next weekday 09:00 is Monday's.
    let report = r#"{"queue":"reports","cron":"0 9 * * MON-FRI","time_zone":"Europe/Berlin",
        "payload":{"report":"sales"},"misfire":"once","overlap":"forbid","max_attempts":3}"#;
    let (status, body) = api.call(Method::PUT, "/v1/schedules/sales-report", Some(report)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["misfire"], "once");
    assert_eq!(body["overlap"], "forbid");
    assert_eq!(body["payload"], json!({"report": "sales"}));
    let runs: Vec<&str> = body["next_runs"].as_array().unwrap().iter().map(|r| r["local"].as_str().unwrap()).collect();
    assert_eq!(
        runs,
        [
            "2027-01-18T09:00:00.000+01:00",
            "2027-01-19T09:00:00.000+01:00",
            "2027-01-20T09:00:00.000+01:00",
            "2027-01-21T09:00:00.000+01:00",
            "2027-01-22T09:00:00.000+01:00"
        ]
    );
    let (status, _) = api.call(Method::PUT, "/v1/schedules/sales-report", Some(report)).await;
    assert_eq!(status, StatusCode::OK, "a second put replaces");
    let (status, shown) = api.call(Method::GET, "/v1/schedules/sales-report", None).await;
    assert_eq!((status, &shown["cron"]), (StatusCode::OK, &json!("0 9 * * MON-FRI")));

    let tick = r#"{"queue":"ticks","every_ms":1000,"payload":{"tick":true}}"#;
    let (status, body) = api.call(Method::PUT, "/v1/schedules/tick", Some(tick)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        (&body["time_zone"], &body["misfire"], &body["overlap"]),
        (&json!("UTC"), &json!("skip"), &json!("allow"))
    );
    api.advance(1_000).await;
    api.engine.flushed().await;
    let (_, claimed) = api.call(Method::POST, "/v1/queues/ticks/claim", Some("{}")).await;
    assert_eq!(claimed["tasks"][0]["payload"], json!({"tick": true}));
    assert_eq!(claimed["tasks"][0]["run_at_ms"], T0_MS + 1_000);
    let (_, shown) = api.call(Method::GET, "/v1/schedules/tick", None).await;
    assert_eq!(shown["last_run"]["at_ms"], T0_MS + 1_000);
    let (_, Value::String(text)) = api.call(Method::GET, "/metrics", None).await else { panic!("metrics is text") };
    assert!(text.contains("hourglass_schedule_occurrences_total 1"), "{text}");
    assert_eq!(shown["last_run"]["task_id"], claimed["tasks"][0]["id"]);

    let (status, page) = api.call(Method::GET, "/v1/schedules?limit=1", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!((&page["schedules"][0]["name"], &page["next"]), (&json!("sales-report"), &json!("sales-report")));
    let (_, page) = api.call(Method::GET, "/v1/schedules?after=sales-report", None).await;
    assert_eq!(page["schedules"][0]["name"], "tick");
    assert!(page.get("next").is_none());

    let (status, paused) = api.call(Method::POST, "/v1/schedules/tick/pause", None).await;
    assert_eq!((status, &paused["paused"]), (StatusCode::OK, &json!(true)));
    api.advance(5_000).await;
    api.engine.flushed().await;
    let (_, claimed) = api.call(Method::POST, "/v1/queues/ticks/claim", Some("{}")).await;
    assert_eq!(claimed["tasks"], json!([]), "nothing while paused");
    let (status, resumed) = api.call(Method::POST, "/v1/schedules/tick/resume", None).await;
    assert_eq!((status, &resumed["paused"]), (StatusCode::OK, &json!(false)));
    let (status, _) = api.call(Method::DELETE, "/v1/schedules/tick", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = api.call(Method::GET, "/v1/schedules/tick", None).await;
    assert_eq!((status, error_code(&body)), (StatusCode::NOT_FOUND, "not_found"));
    let (status, body) = api.call(Method::DELETE, "/v1/schedules/tick", None).await;
    assert_eq!((status, error_code(&body)), (StatusCode::NOT_FOUND, "not_found"));
}

#[tokio::test]
async fn bad_schedules_get_a_clear_4xx() {
    let api = api();
    let cases = [
        (r#"{"queue":"q","cron":"* * * * *","time_zone":"Mars/Base","payload":1}"#, "unknown time zone"),
        (r#"{"queue":"q","cron":"every day","payload":1}"#, "invalid cron expression"),
        (r#"{"queue":"q","cron":"0 0 30 2 *","payload":1}"#, "never fires"),
        (r#"{"queue":"q","cron":"* * * * *","every_ms":1000,"payload":1}"#, "not both"),
        (r#"{"queue":"q","every_ms":1000,"time_zone":"UTC","payload":1}"#, "time_zone goes with cron"),
        (r#"{"queue":"q","payload":1}"#, "give cron"),
        (r#"{"queue":"q","every_ms":1000,"payload":1,"misfire":"later"}"#, "misfire must be"),
        (r#"{"queue":"q","every_ms":1000,"payload":1,"overlap":"never"}"#, "overlap must be"),
        (r#"{"queue":"q","every_ms":1000,"payload":1,"colour":"red"}"#, "unknown field"),
        (r#"{"queue":"q","every_ms":1000,"payload":{"#, ""),
    ];
    for (body, says) in cases {
        let (status, answer) = api.call(Method::PUT, "/v1/schedules/s", Some(body)).await;
        assert!(status.is_client_error(), "{body}: {status} {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{body}: {message}");
    }
    let (status, _) =
        api.call(Method::PUT, "/v1/schedules/bad%20name", Some(r#"{"queue":"q","every_ms":1000,"payload":1}"#)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = api.call(Method::GET, "/v1/schedules?limit=0", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (_, page) = api.call(Method::GET, "/v1/schedules", None).await;
    assert_eq!(page["schedules"], json!([]), "nothing refused was stored");
}
