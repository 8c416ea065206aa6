//! A data directory written by an earlier build opens with this one and
//! holds what it held. The record decoder's unit tests check each old record
//! shape by itself; this opens what a user's server really left on disk: the
//! fixture `fixtures/store-b2087bb.redb.gz` was written by the engine of
//! commit b2087bb, the last build whose payloads were UTF-8 text, through its
//! public API on a manual clock, and shut down cleanly (`fixtures/README.md`
//! says how to write it again). Every id, time and payload below is the one
//! that program gave.
//!
//! Each test unpacks its own copy, so that what one changes no other sees.

use std::io::Read;
use std::sync::Arc;

use hourglass_queue::limits::{PAYLOAD_INLINE_MAX, PUSH_TIMEOUT_MS_DEFAULT};
use hourglass_queue::prelude::*;
use hourglass_queue::{
    occurrence_key, Claim, DeadReason, Flow, HttpMethod, HttpTarget, Limits, ListRequest, ManualWallClock, Misfire,
    NewTask, Overlap, Pause, Payload, PushTarget, QueueError, QueueSettings, Rule, RunAt, Schedule, ScheduleInfo,
    Status, Task, TaskInfo, TaskState, WallClock,
};

use crate::engine::Harness;

/// The store, its one file `tasks.redb` gzipped (77 KB of redb pages, mostly
/// empty, in 2 KB).
const FIXTURE_GZ: &[u8] = include_bytes!("fixtures/store-b2087bb.redb.gz");
/// When the old build started writing: 2027-01-15T08:00:00Z, a Friday.
const T0_MS: u64 = 1_800_000_000_000;
/// When it stopped, a second later; each test opens the store then.
const STOPPED_MS: u64 = T0_MS + 1_000;
const HOUR_MS: u64 = 3_600_000;
const DAY_MS: u64 = 24 * HOUR_MS;

/// The fixture unpacked into a new directory and opened at [`STOPPED_MS`].
fn unpack() -> Harness {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut store = Vec::new();
    flate2::read::GzDecoder::new(FIXTURE_GZ).read_to_end(&mut store).expect("the fixture unpacks");
    std::fs::write(dir.path().join("tasks.redb"), store).expect("write the store");
    Harness::open_in(dir, Arc::new(ManualWallClock::at_ms(STOPPED_MS)), Limits::default())
}

/// Task 4's payload, kept apart from its body (it is over
/// `PAYLOAD_INLINE_MAX`), text that is not ASCII.
fn large_payload() -> String {
    format!(r#"{{"report":"{}"}}"#, "ünïcödé ⏳ ".repeat(40))
}

/// A task as the fixture holds it: the old build's defaults (5 attempts,
/// the default priority), enqueued at `T0_MS`.
fn stored(id: u64, queue: &str, run_at_ms: u64) -> Task {
    Task { queue: queue.into(), created_ms: T0_MS, ..crate::stored_task(id, run_at_ms) }
}

fn info(task: Task, payload: impl Into<Payload>, status: Status) -> TaskInfo {
    TaskInfo { task, payload: payload.into(), status }
}

/// Every task the fixture holds, as a read at [`STOPPED_MS`] shows it.
fn written() -> Vec<TaskInfo> {
    use Status::{Dead, Due, Scheduled};
    let own_target = HttpTarget {
        url: "http://127.0.0.1:9/own".into(),
        method: HttpMethod::Put,
        headers: vec![("X-Tenant".into(), "acme".into())],
    };
    vec![
        info(
            Task { max_attempts: 3, priority: 7, lease_ms: Some(60_000), ..stored(1, "orders", T0_MS + HOUR_MS) },
            r#"{"order":1}"#,
            Scheduled,
        ),
        info(stored(2, "orders", T0_MS), r#"{"note":"héllo ⏳"}"#, Due),
        info(Task { key: Some("order-3".into()), ..stored(3, "orders", T0_MS + 600_000) }, r#"{"order":3}"#, Scheduled),
        info(stored(4, "orders", T0_MS + 2 * HOUR_MS), large_payload(), Scheduled),
        info(Task { every_ms: Some(HOUR_MS), ..stored(5, "orders", T0_MS + 900_000) }, r#""tick""#, Scheduled),
        // Leased when the old build stopped: a lease does not outlive its
        // server, so the task is due again, its attempt counted.
        info(Task { attempt: 1, ..stored(6, "work", T0_MS) }, r#"{"job":"leased"}"#, Due),
        info(
            Task {
                attempt: 2,
                max_attempts: 2,
                state: TaskState::Dead,
                last_error: Some("HTTP 500: boom".into()),
                ..stored(7, "work", T0_MS)
            },
            r#"{"job":"doomed"}"#,
            Dead,
        ),
        info(
            Task {
                expires_at_ms: Some(T0_MS + 1_000),
                state: TaskState::Dead,
                dead_reason: DeadReason::Expired,
                ..stored(8, "work", T0_MS + 500)
            },
            r#"{"job":"late"}"#,
            Dead,
        ),
        info(
            Task { http: Some(Arc::new(own_target)), ..stored(9, "work", T0_MS + HOUR_MS) },
            r#"{"job":"pushed"}"#,
            Scheduled,
        ),
        info(stored(10, "hooks", T0_MS + HOUR_MS), r#"{"hook":10}"#, Scheduled),
        info(stored(11, "held", T0_MS), r#"{"held":11}"#, Due),
        info(
            Task {
                key: Some(occurrence_key("heartbeat", T0_MS + 1_000).into()),
                created_ms: T0_MS + 1_000,
                ..stored(12, "reports", T0_MS + 1_000)
            },
            r#""beat""#,
            Due,
        ),
    ]
}

fn hooks_settings() -> QueueSettings {
    QueueSettings {
        push: Some(Arc::new(PushTarget {
            http: HttpTarget {
                url: "http://127.0.0.1:9/hook".into(),
                method: HttpMethod::Post,
                headers: vec![("Authorization".into(), "Bearer t0k3n".into())],
            },
            timeout_ms: 5_000,
        })),
        flow: Flow { rate_per_s: Some(2.5), burst: Some(5), max_in_flight: Some(3) },
    }
}

fn cron_schedule() -> ScheduleInfo {
    let schedule = Schedule {
        name: "weekday-report".into(),
        queue: "reports".into(),
        rule: Rule::Cron { expression: "30 9 * * 1-5".into(), time_zone: "Europe/Berlin".into() },
        payload: r#"{"report":"daily"}"#.into(),
        misfire: Misfire::Once,
        overlap: Overlap::Forbid,
        max_attempts: 4,
        expires_after_ms: Some(HOUR_MS),
        since_ms: T0_MS,
        next_ms: Some(T0_MS + 1_800_000),
        last: None,
        paused: false,
    };
    // 09:30 in Berlin is 08:30 UTC in winter: today (a Friday), then Monday
    // to Thursday of the next week.
    let first_ms = T0_MS + 1_800_000;
    let upcoming_ms =
        vec![first_ms, first_ms + 3 * DAY_MS, first_ms + 4 * DAY_MS, first_ms + 5 * DAY_MS, first_ms + 6 * DAY_MS];
    ScheduleInfo { schedule, upcoming_ms }
}

fn heartbeat_schedule() -> ScheduleInfo {
    let schedule = Schedule {
        name: "heartbeat".into(),
        queue: "reports".into(),
        rule: Rule::Every { every_ms: 1_000 },
        payload: r#""beat""#.into(),
        misfire: Misfire::Skip,
        overlap: Overlap::Allow,
        max_attempts: 5,
        expires_after_ms: None,
        since_ms: T0_MS,
        next_ms: Some(T0_MS + 2_000),
        last: Some((T0_MS + 1_000, 12)),
        paused: true,
    };
    ScheduleInfo { schedule, upcoming_ms: (2..7).map(|s| T0_MS + s * 1_000).collect() }
}

/// Checks that `h` holds exactly `tasks`, the two schedules, the two pauses
/// and the settings of queue `hooks`, as the old build wrote them.
async fn check_holds(h: &Harness, tasks: &[TaskInfo]) {
    for expected in tasks {
        let id = expected.task.id;
        assert_eq!(h.engine.get(id).await.as_ref(), Ok(expected), "task {id}");
    }
    let totals = h.engine.totals().await;
    assert_eq!((totals.tasks, totals.schedules), (tasks.len(), 2), "nothing more, nothing less");
    let mut queues: Vec<String> = h.engine.queues().await.iter().map(|q| q.name.to_string()).collect();
    queues.sort();
    assert_eq!(queues, ["held", "hooks", "orders", "reports", "resting", "work"]);

    assert_eq!(h.engine.schedule("weekday-report").await, Ok(cron_schedule()));
    assert_eq!(h.engine.schedule("heartbeat").await, Ok(heartbeat_schedule()));

    let held = h.engine.queue("held").await.expect("queue held");
    assert_eq!((held.paused, held.paused_until_ms), (true, None), "paused until resumed");
    let resting = h.engine.queue("resting").await.expect("queue resting");
    assert_eq!((resting.paused, resting.paused_until_ms), (true, Some(T0_MS + DAY_MS)), "paused for a day");
    assert!(!h.engine.queue("orders").await.expect("queue orders").paused);

    assert_eq!(h.engine.settings("hooks").await, Ok(hooks_settings()));
    assert_eq!(h.engine.settings("orders").await, Ok(QueueSettings::default()));
}

#[tokio::test]
async fn a_store_of_the_build_before_payloads_were_bytes_opens_and_holds_what_it_held() {
    let h = unpack();
    let tasks = written();
    assert!(tasks[3].payload.len() > PAYLOAD_INLINE_MAX, "task 4's payload is the one kept apart");
    check_holds(&h, &tasks).await;
    let dead = h.engine.list("work", ListRequest { status: Some(Status::Dead), after: None, limit: 10 }).await.unwrap();
    assert_eq!(dead.tasks.iter().map(|t| t.task.id).collect::<Vec<_>>(), [7, 8]);
    assert_eq!(h.engine.find_by_key("orders", "order-3").await.unwrap().map(|t| t.task.id), Some(3));
    // Opening it changed nothing on disk that a second opening would see.
    let h = h.restart();
    check_holds(&h, &tasks).await;
}

#[tokio::test]
async fn claims_and_acks_on_an_old_store_survive_restarts() {
    let h = unpack();
    let mut tasks = written();

    let claimed = h.engine.claim("orders", 10, 30_000, 0).await.unwrap();
    assert_eq!(claimed.len(), 1, "only task 2 of queue orders is due: {claimed:?}");
    assert_eq!((claimed[0].id, claimed[0].attempt, claimed[0].run_at_ms), (2, 1, T0_MS));
    assert_eq!(claimed[0].payload.as_bytes(), r#"{"note":"héllo ⏳"}"#.as_bytes());
    h.engine.ack(2, claimed[0].lease).await.unwrap();

    let claimed = h.engine.claim("work", 10, 30_000, 0).await.unwrap();
    let ids: Vec<(u64, u32)> = claimed.iter().map(|c| (c.id, c.attempt)).collect();
    assert_eq!(ids, [(6, 2)], "the task leased when the old build stopped, on its second attempt");
    assert!(h.engine.claim("held", 10, 30_000, 0).await.unwrap().is_empty(), "queue held is still paused");

    let h = h.restart();
    assert_eq!(h.engine.get(2).await, Err(QueueError::NotFound(2)), "the ack held");
    tasks.retain(|t| t.task.id != 2);
    // Task 6, leased again when this build stopped, is due again.
    tasks.iter_mut().find(|t| t.task.id == 6).expect("task 6").task.attempt = 2;
    check_holds(&h, &tasks).await;

    // Ids go on after the old build's, never reused.
    let new = h.engine.enqueue("orders", NewTask::new(vec![0xff, 0x00, 0xfe], RunAt::Delay(0))).await.unwrap();
    assert_eq!(new.id, 13);
    let claimed = h.engine.claim("work", 1, 30_000, 0).await.unwrap().remove(0);
    assert_eq!((claimed.id, claimed.attempt), (6, 3));
    h.engine.ack(6, claimed.lease).await.unwrap();

    let h = h.restart();
    assert_eq!(h.engine.get(6).await, Err(QueueError::NotFound(6)));
    tasks.retain(|t| t.task.id != 6);
    let thirteen = Task { created_ms: STOPPED_MS, ..stored(13, "orders", STOPPED_MS) };
    tasks.push(info(thirteen, vec![0xff, 0x00, 0xfe], Status::Due));
    check_holds(&h, &tasks).await;
}

#[tokio::test]
async fn the_old_stores_schedules_pauses_and_targets_still_act() {
    let h = unpack();

    // The cron schedule's first occurrence, 08:30 UTC, enqueues its task;
    // the paused heartbeat enqueues nothing.
    h.advance(T0_MS + 1_800_000 - STOPPED_MS).await;
    h.engine.flushed().await;
    let key = occurrence_key("weekday-report", T0_MS + 1_800_000);
    let report = h.engine.find_by_key("reports", &key).await.unwrap().expect("the occurrence's task");
    assert_eq!(report.payload.as_bytes(), br#"{"report":"daily"}"#);
    assert_eq!(
        (report.task.id, report.task.max_attempts, report.task.expires_at_ms),
        (13, 4, Some(T0_MS + 1_800_000 + HOUR_MS))
    );
    assert_eq!(h.engine.totals().await.tasks, 13, "nothing from the paused heartbeat");

    // A pause until resumed holds until resumed.
    assert!(h.engine.claim("held", 10, 30_000, 0).await.unwrap().is_empty());
    h.engine.pause_queue("held", Pause::Resume).await.unwrap();
    let claimed = h.engine.claim("held", 10, 30_000, 0).await.unwrap();
    assert_eq!(claimed.iter().map(|c| c.id).collect::<Vec<_>>(), [11]);

    // When due, the task with its own target and the task of the queue
    // with a push target go to push claims, each to its target.
    h.advance(T0_MS + HOUR_MS - h.clock.now_ms()).await;
    assert!(
        h.engine.claim("work", 10, 30_000, 0).await.unwrap().iter().all(|c| c.id != 9),
        "a task with a target of its own is not handed to pull claims"
    );
    let mut pushed = h.engine.claim_from(Claim::push(10, 0).unwrap()).await.unwrap();
    pushed.sort_by_key(|c| c.id);
    let targets: Vec<(u64, Option<PushTarget>)> = pushed.iter().map(|c| (c.id, c.target.as_deref().cloned())).collect();
    let own = PushTarget::new(written()[8].task.http.as_deref().expect("task 9's target").clone());
    assert_eq!(own.timeout_ms, PUSH_TIMEOUT_MS_DEFAULT, "its queue has no timeout to lend it");
    assert_eq!(targets, [(9, Some(own)), (10, hooks_settings().push.as_deref().cloned())]);

    // A pause until a time ends then.
    h.engine.enqueue("resting", NewTask::new("{}", RunAt::Delay(0))).await.unwrap();
    assert!(h.engine.claim("resting", 1, 30_000, 0).await.unwrap().is_empty());
    h.advance(T0_MS + DAY_MS - h.clock.now_ms()).await;
    assert_eq!(h.engine.claim("resting", 1, 30_000, 0).await.unwrap().len(), 1);
}
