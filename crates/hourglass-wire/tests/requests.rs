//! The request types read what clients send, refuse unknown fields with the
//! server's messages of before (they list the fields in the same order), and
//! send what they read.

use hourglass_wire::*;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// `json` reads as a `T` that sends `json` again.
fn round_trip<T: Serialize + DeserializeOwned>(json: &str) -> T {
    let value: T = serde_json::from_str(json).unwrap();
    assert_eq!(serde_json::to_string(&value).unwrap(), json);
    value
}

/// What reading `json` as a `T` says, as the server's `invalid_json` shows it.
fn refusal<T: DeserializeOwned + std::fmt::Debug>(json: &str) -> String {
    serde_json::from_str::<T>(json).unwrap_err().to_string()
}

#[test]
fn tasks() {
    let task: NewTask = round_trip(
        r#"{"payload":{"b":1,"a":[1.50,2e3]},"delay_ms":1000,"key":"order-1","max_attempts":1,"priority":3,"lease_ms":5000}"#,
    );
    assert_eq!(task.payload.get(), r#"{"b":1,"a":[1.50,2e3]}"#, "a payload is the text sent");
    round_trip::<NewTask>(r#"{"payload":null,"run_at_ms":5,"every_ms":60000,"expires_at_ms":9,"expires_after_ms":1}"#);
    round_trip::<NewTask>(r#"{"payload":null,"payload_base64":"/wA=","delay_ms":5}"#);
    assert_eq!(
        refusal::<NewTask>(r#"{"payload":1,"surprise":true}"#),
        "unknown field `surprise`, expected one of `payload`, `payload_base64`, `delay_ms`, `run_at_ms`, `key`, `max_attempts`, `priority`, `lease_ms`, `every_ms`, `expires_at_ms`, `expires_after_ms`, `http` at line 1 column 23"
    );
    let aimed: NewTask =
        round_trip(r#"{"payload":1,"http":{"url":"https://e.com/h","method":"PUT","headers":{"X-A":"1"}}}"#);
    assert_eq!(aimed.http.unwrap().headers["X-A"], "1");
    assert!(refusal::<NewTask>(r#"{"payload":1,"http":{"uri":"x"}}"#).contains("unknown field `uri`"));
    round_trip::<QueueSettings>(
        r#"{"push":{"url":"https://e.com/h","timeout_ms":500},"rate_per_s":2.5,"burst":3,"max_in_flight":4}"#,
    );
    round_trip::<QueueSettings>(r#"{"push":null}"#);
    let bare: NewTask = serde_json::from_str(r#"{"delay_ms":5}"#).unwrap();
    assert_eq!((bare.payload.get(), bare.delay_ms), ("null", Some(5)), "a payload left out is null");
    let bare: NewSchedule = serde_json::from_str(r#"{"queue":"q","every_ms":60000}"#).unwrap();
    assert_eq!(bare.payload.get(), "null");
    round_trip::<NewTasks>(r#"{"tasks":[{"payload":1},{"payload":[2],"delay_ms":10}]}"#);
    assert!(refusal::<NewTasks>(r#"{"tasks":[],"more":1}"#).contains("expected `tasks`"));
    round_trip::<Reschedule>(r#"{"delay_ms":500}"#);
    round_trip::<Reschedule>("{}");
}

#[test]
fn claims_and_deliveries() {
    round_trip::<ClaimRequest>(r#"{"max":10,"lease_ms":30000,"wait_ms":0}"#);
    assert_eq!(round_trip::<ClaimRequest>("{}"), ClaimRequest::default());
    round_trip::<ClaimRequest>(r#"{"max":10,"acks":[{"id":7,"lease":"00000000000000ff"}]}"#);
    assert!(refusal::<ClaimRequest>(r#"{"max":1,"other":1}"#)
        .contains("expected one of `max`, `lease_ms`, `wait_ms`, `acks`"));
    let lease = Lease(0xff);
    assert_eq!(round_trip::<LeaseRequest>(r#"{"lease":"00000000000000ff"}"#), LeaseRequest::ack(lease));
    assert_eq!(
        round_trip::<LeaseRequest>(r#"{"lease":"00000000000000ff","delay_ms":500,"reason":"upstream 503"}"#),
        LeaseRequest::nack(lease, Some(500), Some("upstream 503".into()))
    );
    assert_eq!(
        round_trip::<LeaseRequest>(r#"{"lease":"00000000000000ff","lease_ms":60000}"#),
        LeaseRequest::extend(lease, 60_000)
    );
    assert_eq!(
        round_trip::<Acks>(r#"{"acks":[{"id":4,"lease":"00000000000000ff"}]}"#),
        Acks { acks: vec![Ack::new(4, lease)] }
    );
    assert!(refusal::<Acks>(r#"{"acks":[{"id":1}]}"#).contains("missing field `lease`"));
}

#[test]
fn listings_schedules_and_the_overview() {
    assert_eq!(
        round_trip::<ListQuery>(r#"{"state":"due","after":"400.ff.2","limit":2}"#),
        ListQuery::page(Some(State::Due), Some(Cursor { priority: 1_024, run_at_ms: 255, id: 2 }), Some(2))
    );
    round_trip::<SchedulesQuery>(r#"{"after":"a","limit":1}"#);
    round_trip::<OverviewQuery>(r#"{"fresh":true}"#);
    let put = r#"{"queue":"reports","cron":"0 9 * * MON-FRI","time_zone":"Europe/Berlin","payload":{"report":"sales"},"misfire":"once","overlap":"forbid","max_attempts":3,"expires_after_ms":3600000}"#;
    let schedule: NewSchedule = round_trip(put);
    assert_eq!(schedule.misfire.as_deref(), Some("once"));
    let every =
        NewSchedule::every("ticks", 1_000, serde_json::value::to_raw_value(&1).unwrap()).overlap(Overlap::Forbid);
    assert_eq!(
        serde_json::to_string(&every).unwrap(),
        r#"{"queue":"ticks","every_ms":1000,"payload":1,"overlap":"forbid"}"#
    );
    assert!(refusal::<NewSchedule>(r#"{"queue":"q","every_ms":1000,"payload":1,"colour":"red"}"#).contains(
        "expected one of `queue`, `cron`, `time_zone`, `every_ms`, `payload`, `payload_base64`, `misfire`, `overlap`, `max_attempts`, `expires_after_ms`"
    ));
}
