//! Each answer type, from a fixed value, is the JSON the server sent before
//! the wire crate (the texts below are lines of the server's
//! `tests/api/wire.golden`), and that JSON reads back to the same value.

use hourglass_wire::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;

/// `value` serializes as `json`, and `json` reads back to what serializes the same.
fn exact<T: Serialize + DeserializeOwned>(value: &T, json: &str) {
    assert_eq!(serde_json::to_string(value).unwrap(), json);
    let back: T = serde_json::from_str(json).unwrap();
    assert_eq!(serde_json::to_string(&back).unwrap(), json, "read back");
}

/// The same for the answers the server renders through `serde_json::Value`:
/// every object's keys in alphabetical order, payloads re-rendered.
fn through_value<T: Serialize + DeserializeOwned>(value: &T, json: &str) {
    assert_eq!(serde_json::to_value(value).unwrap().to_string(), json);
    let back: T = serde_json::from_str(json).unwrap();
    assert_eq!(serde_json::to_value(&back).unwrap().to_string(), json, "read back");
}

fn raw(json: &str) -> Box<RawValue> {
    RawValue::from_string(json.to_owned()).unwrap()
}

const T0_MS: u64 = 1_800_000_000_000;

fn task() -> Task {
    Task {
        id: 1,
        queue: "orders".into(),
        state: State::Dead,
        payload: Some(raw(r#"{"b":1,"a":[1.50,2e3,"é\u00e9"]}"#)),
        payload_base64: None,
        run_at_ms: T0_MS + 1_000,
        attempt: 1,
        max_attempts: 1,
        priority: 3,
        lease_ms: Some(5_000),
        key: Some("order-1".into()),
        every_ms: None,
        lease_until_ms: None,
        expires_at_ms: None,
        dead_reason: Some(DeadReason::Attempts),
        last_error: Some("upstream 503".into()),
        http: None,
        created_ms: T0_MS,
    }
}

#[test]
fn a_task_shows_its_own_target() {
    let target = hourglass_wire::HttpTarget {
        url: "https://example.com/h".into(),
        method: Some("POST".into()),
        headers: [("X-A".to_owned(), "1".to_owned())].into(),
    };
    let text = serde_json::to_string(&Task { http: Some(target.clone()), ..task() }).unwrap();
    assert!(
        text.ends_with(r#""last_error":"upstream 503","http":{"url":"https://example.com/h","method":"POST","headers":{"X-A":"1"}},"created_ms":1800000000000}"#),
        "{text}"
    );
    let back: Task = serde_json::from_str(&text).unwrap();
    assert_eq!(back.http, Some(target));
}

const TASK: &str = r#"{"id":1,"queue":"orders","state":"dead","payload":{"b":1,"a":[1.50,2e3,"é\u00e9"]},"run_at_ms":1800000001000,"attempt":1,"max_attempts":1,"priority":3,"lease_ms":5000,"key":"order-1","dead_reason":"attempts","last_error":"upstream 503","created_ms":1800000000000}"#;

#[test]
fn tasks() {
    exact(&task(), TASK);
    let leased = Task {
        state: State::Leased,
        lease_until_ms: Some(T0_MS + 6_000),
        dead_reason: None,
        last_error: None,
        attempt: 1,
        ..task()
    };
    exact(
        &leased,
        r#"{"id":1,"queue":"orders","state":"leased","payload":{"b":1,"a":[1.50,2e3,"é\u00e9"]},"run_at_ms":1800000001000,"attempt":1,"max_attempts":1,"priority":3,"lease_ms":5000,"key":"order-1","lease_until_ms":1800000006000,"created_ms":1800000000000}"#,
    );
    let every = Task {
        id: 3,
        state: State::Scheduled,
        payload: Some(raw("null")),
        payload_base64: None,
        lease_ms: None,
        key: None,
        every_ms: Some(60_000),
        expires_at_ms: Some(T0_MS + 9),
        dead_reason: None,
        last_error: None,
        ..task()
    };
    exact(
        &every,
        r#"{"id":3,"queue":"orders","state":"scheduled","payload":null,"run_at_ms":1800000001000,"attempt":1,"max_attempts":1,"priority":3,"every_ms":60000,"expires_at_ms":1800000000009,"created_ms":1800000000000}"#,
    );
    let page = TaskPage { tasks: vec![task()], next: Some(Cursor { priority: 0, run_at_ms: 0, id: 2 }) };
    exact(&page, &format!(r#"{{"tasks":[{TASK}],"next":"0.2"}}"#));
    exact(&TaskPage { tasks: vec![], next: None }, r#"{"tasks":[]}"#);
    exact(&Enqueued { id: 1, run_at_ms: T0_MS + 1_000 }, r#"{"id":1,"run_at_ms":1800000001000}"#);
    let batch = EnqueuedBatch {
        created: 2,
        tasks: vec![Enqueued { id: 4, run_at_ms: T0_MS }, Enqueued { id: 5, run_at_ms: T0_MS + 10 }],
    };
    exact(&batch, r#"{"created":2,"tasks":[{"id":4,"run_at_ms":1800000000000},{"id":5,"run_at_ms":1800000000010}]}"#);
}

#[test]
fn claims_and_what_follows() {
    let claimed = Claimed {
        tasks: vec![ClaimedTask {
            id: 1,
            queue: "orders".into(),
            payload: Some(raw(r#"{"b":1,"a":[1.50,2e3,"é\u00e9"]}"#)),
            payload_base64: None,
            attempt: 1,
            lease: Lease(0x0123_4567_89ab_cdef),
            lease_until_ms: T0_MS + 6_000,
            run_at_ms: T0_MS + 1_000,
        }],
        acks: None,
    };
    through_value(
        &claimed,
        r#"{"tasks":[{"attempt":1,"id":1,"lease":"0123456789abcdef","lease_until_ms":1800000006000,"payload":{"a":[1.5,2000.0,"éé"],"b":1},"queue":"orders","run_at_ms":1800000001000}]}"#,
    );
    exact(&Acked { acked: true, id: 2 }, r#"{"acked":true,"id":2}"#);
    exact(&Extended { id: 1, lease_until_ms: T0_MS + 61_000 }, r#"{"id":1,"lease_until_ms":1800000061000}"#);
    let results = AckResults {
        results: vec![
            AckResult::Acked(Acked { acked: true, id: 4 }),
            AckResult::Failed {
                error: ErrorDetail { code: "stale_lease".into(), message: "the lease on task 5 is not current".into() },
                id: 5,
            },
        ],
    };
    exact(
        &results,
        r#"{"results":[{"acked":true,"id":4},{"error":{"code":"stale_lease","message":"the lease on task 5 is not current"},"id":5}]}"#,
    );
    let back: AckResults = serde_json::from_str(&serde_json::to_string(&results).unwrap()).unwrap();
    assert_eq!(back, results);
    let acked_with_claim = Claimed { tasks: Vec::new(), acks: Some(results.results.clone()) };
    through_value(
        &acked_with_claim,
        r#"{"acks":[{"acked":true,"id":4},{"error":{"code":"stale_lease","message":"the lease on task 5 is not current"},"id":5}],"tasks":[]}"#,
    );
    assert_eq!(back.results.iter().map(AckResult::id).collect::<Vec<_>>(), [4, 5]);
}

fn queue() -> Queue {
    Queue {
        name: "orders".into(),
        scheduled: 2,
        due: 0,
        leased: 0,
        dead: 0,
        oldest_due_ms: None,
        lateness: Lateness { samples: 4, p50: 0.001, p99: 991.231, max: 991.231 },
        paused: false,
        enqueued: 4,
        delivered: 4,
        acked: 2,
        settings: None,
    }
}

const QUEUE: &str = r#"{"name":"orders","scheduled":2,"due":0,"leased":0,"dead":0,"oldest_due_ms":null,"lateness":{"samples":4,"p50":0.001,"p99":991.231,"max":991.231},"paused":false,"enqueued":4,"delivered":4,"acked":2}"#;

fn totals() -> Totals {
    Totals {
        enqueued: 4,
        delivered: 4,
        acked: 2,
        nacked: 2,
        died: 1,
        disk_bytes: 303,
        memory_bytes: 528,
        memory_bytes_max: Some(4_294_967_296),
        tasks: 2,
        ..Totals::default()
    }
}

#[test]
fn queues_and_the_overview() {
    exact(&queue(), QUEUE);
    through_value(
        &Queues { queues: vec![queue()], totals: totals() },
        r#"{"queues":[{"acked":2,"dead":0,"delivered":4,"due":0,"enqueued":4,"lateness":{"max":991.231,"p50":0.001,"p99":991.231,"samples":4},"leased":0,"name":"orders","oldest_due_ms":null,"paused":false,"scheduled":2}],"totals":{"acked":2,"cancelled":0,"delivered":4,"died":1,"disk_bytes":303,"disk_bytes_max":null,"enqueued":4,"expired":0,"lease_expired":0,"memory_bytes":528,"memory_bytes_max":4294967296,"nacked":2,"occurrences_enqueued":0,"occurrences_skipped":0,"schedules":0,"tasks":2}}"#,
    );
    exact(&DeletedDead { deleted: 1, queue: "a/b".into() }, r#"{"deleted":1,"queue":"a/b"}"#);
    exact(&Health::ok(), r#"{"status":"ok"}"#);
    exact(&Health::store_unavailable("why"), r#"{"status":"store_unavailable","reason":"why"}"#);
    let overview = Overview {
        now_ms: T0_MS,
        read_only_ui: false,
        queues: vec![OverviewQueue {
            queue: Queue { oldest_due_ms: Some(T0_MS + 1_500), ..queue() },
            rates: Rates::default(),
            can: vec!["read".into(), "manage".into()],
        }],
        totals: totals(),
        server_wide: true,
        history: vec![Point {
            at_ms: T0_MS,
            enqueued: 20.0,
            delivered: 10.0,
            acked: 5.0,
            lateness_p50_ms: Some(0.75),
            lateness_p99_ms: None,
        }],
        sample_every_s: 1,
        nodes: None,
    };
    exact(
        &overview,
        r#"{"now_ms":1800000000000,"read_only_ui":false,"queues":[{"name":"orders","scheduled":2,"due":0,"leased":0,"dead":0,"oldest_due_ms":1800000001500,"lateness":{"samples":4,"p50":0.001,"p99":991.231,"max":991.231},"paused":false,"enqueued":4,"delivered":4,"acked":2,"rates":{"enqueued":0.0,"delivered":0.0,"acked":0.0},"can":["read","manage"]}],"totals":{"enqueued":4,"delivered":4,"acked":2,"nacked":2,"lease_expired":0,"died":1,"expired":0,"cancelled":0,"occurrences_enqueued":0,"occurrences_skipped":0,"tasks":2,"schedules":0,"memory_bytes":528,"memory_bytes_max":4294967296,"disk_bytes":303,"disk_bytes_max":null},"server_wide":true,"history":[{"at_ms":1800000000000,"enqueued":20.0,"delivered":10.0,"acked":5.0,"lateness_p50_ms":0.75,"lateness_p99_ms":null}],"sample_every_s":1}"#,
    );
}

fn node(name: &str, this: bool, shards: Vec<u16>) -> Node {
    Node { name: name.into(), this, heartbeat_ms: T0_MS - 400, heartbeat_age_ms: 400, shards }
}

#[test]
fn nodes_and_the_counters_freshness() {
    // One process: `nodes` is null, said rather than left out.
    exact(&Nodes { now_ms: T0_MS, nodes: None }, r#"{"now_ms":1800000000000,"nodes":null}"#);
    let two = Nodes { now_ms: T0_MS, nodes: Some(vec![node("a", true, vec![0, 2]), node("b", false, vec![])]) };
    exact(
        &two,
        r#"{"now_ms":1800000000000,"nodes":[{"name":"a","this":true,"heartbeat_ms":1799999999600,"heartbeat_age_ms":400,"shards":[0,2]},{"name":"b","this":false,"heartbeat_ms":1799999999600,"heartbeat_age_ms":400,"shards":[]}]}"#,
    );
    // Counters several nodes count say how fresh they are, after the rest.
    let fresh = Totals { counters_as_of_ms: Some(T0_MS - 250), ..totals() };
    let text = serde_json::to_string(&fresh).unwrap();
    assert!(text.ends_with(r#""disk_bytes_max":null,"counters_as_of_ms":1799999999750}"#), "{text}");
    assert_eq!(serde_json::from_str::<Totals>(&text).unwrap(), fresh);
    // An overview carries the nodes when there are some; an older one reads
    // as having none.
    let overview = Overview {
        now_ms: T0_MS,
        read_only_ui: false,
        queues: vec![],
        totals: fresh,
        server_wide: true,
        history: vec![],
        sample_every_s: 1,
        nodes: two.nodes.clone(),
    };
    let text = serde_json::to_string(&overview).unwrap();
    assert!(text.ends_with(r#""sample_every_s":1,"nodes":[{"name":"a","this":true,"heartbeat_ms":1799999999600,"heartbeat_age_ms":400,"shards":[0,2]},{"name":"b","this":false,"heartbeat_ms":1799999999600,"heartbeat_age_ms":400,"shards":[]}]}"#), "{text}");
    assert_eq!(serde_json::from_str::<Overview>(&text).unwrap(), overview);
    let old = text.replace(&text[text.find(r#","nodes""#).unwrap()..], "}");
    assert_eq!(serde_json::from_str::<Overview>(&old).unwrap().nodes, None);
}

#[test]
fn schedules() {
    let run = |at_ms: u64, local: &str, task_id| Run { at_ms, local: local.into(), task_id };
    let tick = Schedule {
        name: "tick".into(),
        queue: "ticks".into(),
        cron: None,
        every_ms: Some(1_000),
        time_zone: "UTC".into(),
        payload: Some(raw(r#"{"tick":true}"#)),
        payload_base64: None,
        misfire: Misfire::All,
        overlap: Overlap::Allow,
        max_attempts: 5,
        expires_after_ms: None,
        since_ms: 1_800_000_001_010,
        paused: true,
        next_runs: vec![run(1_800_000_003_010, "2027-01-15T08:00:03.010+00:00", None)],
        last_run: Some(run(1_800_000_002_010, "2027-01-15T08:00:02.010+00:00", Some(6))),
    };
    const TICK: &str = r#"{"name":"tick","queue":"ticks","every_ms":1000,"time_zone":"UTC","payload":{"tick":true},"misfire":"all","overlap":"allow","max_attempts":5,"since_ms":1800000001010,"paused":true,"next_runs":[{"at_ms":1800000003010,"local":"2027-01-15T08:00:03.010+00:00"}],"last_run":{"at_ms":1800000002010,"local":"2027-01-15T08:00:02.010+00:00","task_id":6}}"#;
    exact(&tick, TICK);
    let report = Schedule {
        name: "sales-report".into(),
        queue: "reports".into(),
        cron: Some("0 9 * * MON-FRI".into()),
        every_ms: None,
        time_zone: "Europe/Berlin".into(),
        payload: Some(raw(r#"{"report":"sales"}"#)),
        payload_base64: None,
        misfire: Misfire::Once,
        overlap: Overlap::Forbid,
        max_attempts: 3,
        expires_after_ms: Some(3_600_000),
        paused: false,
        next_runs: vec![run(1_800_259_200_000, "2027-01-18T09:00:00.000+01:00", None)],
        last_run: None,
        ..tick.clone()
    };
    let page = SchedulePage { schedules: vec![report], next: Some("sales-report".into()) };
    exact(
        &page,
        r#"{"schedules":[{"name":"sales-report","queue":"reports","cron":"0 9 * * MON-FRI","time_zone":"Europe/Berlin","payload":{"report":"sales"},"misfire":"once","overlap":"forbid","max_attempts":3,"expires_after_ms":3600000,"since_ms":1800000001010,"paused":false,"next_runs":[{"at_ms":1800259200000,"local":"2027-01-18T09:00:00.000+01:00"}]}],"next":"sales-report"}"#,
    );
    exact(&SchedulePage { schedules: vec![tick], next: None }, &format!(r#"{{"schedules":[{TICK}]}}"#));
}

#[test]
fn errors() {
    exact(
        &ErrorBody::new("invalid_path", "Invalid URL: Cannot parse `not-a-number` to a `u64`"),
        r#"{"error":{"code":"invalid_path","message":"Invalid URL: Cannot parse `not-a-number` to a `u64`"}}"#,
    );
    exact(
        &ErrorBody::new("not_found", r#"no queue "nope""#),
        r#"{"error":{"code":"not_found","message":"no queue \"nope\""}}"#,
    );
}
