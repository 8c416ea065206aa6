//! Schedules on the embedded engine, on a manual wall clock and a real store:
//! occurrences become ordinary tasks, exactly once each, across restarts;
//! the misfire and overlap policies; bad input. Nothing here sleeps.

use std::path::Path;
use std::sync::Arc;

use hourglass_embedded::{Engine, Fsync, Options, RedbStore};
use hourglass_queue::prelude::*;
use hourglass_queue::DeadReason;
use hourglass_queue::{occurrence_key, Limits, ManualWallClock, Misfire, NewSchedule, Overlap, QueueError, Rule};

use crate::deadline;

/// A minute boundary (UTC): 2027-01-15T08:00:00Z.
const T0_MS: u64 = 1_800_000_000_000;
const MINUTE: u64 = 60_000;

struct Node {
    dir: tempfile::TempDir,
    clock: Arc<ManualWallClock>,
    engine: Arc<Engine>,
}

fn open(dir: &Path, clock: &Arc<ManualWallClock>) -> Arc<Engine> {
    let store = RedbStore::open(dir).expect("open the store");
    let options = Options { fsync: Fsync::Always, limits: Limits::default() };
    Engine::open(Box::new(store), options, clock.clone()).expect("open the engine")
}

impl Node {
    fn new() -> Node {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualWallClock::at_ms(T0_MS));
        let engine = open(dir.path(), &clock);
        Node { dir, clock, engine }
    }

    /// Moves the clock, fires what came due, and waits until it is settled.
    async fn advance(&self, ms: u64) {
        self.clock.advance_ms(ms);
        self.engine.poll_timers();
        deadline::within("the writer's settlements", self.engine.flushed()).await;
    }

    /// The server stops, `down_ms` pass, and it starts again.
    async fn restart_after(self, down_ms: u64) -> Node {
        let Node { dir, clock, engine } = self;
        engine.close();
        drop(engine);
        clock.advance_ms(down_ms);
        let engine = open(dir.path(), &clock);
        let node = Node { dir, clock, engine };
        node.advance(0).await;
        node
    }

    /// A schedule `tick` firing every minute into `q`, whose first
    /// occurrence has run and been acked: only the schedule remembers it.
    async fn ran_once(misfire: Misfire) -> Node {
        let node = Node::new();
        node.engine.put_schedule("tick", every_minute("q", misfire, Overlap::Allow), Expect::Any).await.unwrap();
        node.advance(MINUTE).await;
        let task = node.engine.claim("q", 1, 30_000, 0).await.unwrap().remove(0);
        node.engine.ack(task.id, task.lease).await.unwrap();
        node
    }

    /// The due times of the tasks of `queue`, in order.
    async fn due_times(&self, queue: &str) -> Vec<u64> {
        let page = self.engine.list(queue, hourglass_queue::ListRequest { status: None, after: None, limit: 1_000 });
        let mut due: Vec<u64> = page.await.unwrap().tasks.iter().map(|info| info.task.run_at_ms).collect();
        due.sort_unstable();
        due
    }
}

fn every_minute(queue: &str, misfire: Misfire, overlap: Overlap) -> NewSchedule {
    NewSchedule {
        queue: queue.into(),
        rule: Rule::Cron { expression: "* * * * *".into(), time_zone: "UTC".into() },
        payload: r#"{"job":"tick"}"#.into(),
        misfire,
        overlap,
        max_attempts: None,
        expires_after_ms: None,
    }
}

#[tokio::test]
async fn each_occurrence_is_one_task_with_its_key_due_at_its_time() {
    let node = Node::new();
    let (info, created) =
        node.engine.put_schedule("tick", every_minute("q", Misfire::Skip, Overlap::Allow), Expect::Any).await.unwrap();
    assert!(created);
    assert_eq!(info.upcoming_ms, (1..=5).map(|m| T0_MS + m * MINUTE).collect::<Vec<_>>());
    node.advance(MINUTE - 1).await;
    assert!(node.due_times("q").await.is_empty(), "nothing before the occurrence");
    node.advance(1).await;
    assert_eq!(node.due_times("q").await, [T0_MS + MINUTE]);
    let task = node.engine.find_by_key("q", &occurrence_key("tick", T0_MS + MINUTE)).await.unwrap().unwrap();
    assert_eq!(task.payload, r#"{"job":"tick"}"#);
    let claimed = node.engine.claim("q", 10, 30_000, 0).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(node.engine.schedule("tick").await.unwrap().schedule.next_ms, Some(T0_MS + 2 * MINUTE));
    let totals = node.engine.totals().await;
    assert_eq!((totals.occurrences_enqueued, totals.occurrences_skipped), (1, 0));
}

#[tokio::test]
async fn a_schedule_of_bytes_keeps_them_across_a_restart_and_its_tasks_carry_them() {
    let node = Node::new();
    let bytes: Vec<u8> = (0..=255).rev().collect();
    let new = NewSchedule { payload: bytes.clone().into(), ..every_minute("q", Misfire::Skip, Overlap::Allow) };
    node.engine.put_schedule("bytes", new, Expect::Any).await.unwrap();
    let node = node.restart_after(0).await;
    assert_eq!(node.engine.schedule("bytes").await.unwrap().schedule.payload, bytes[..], "kept across the restart");
    node.advance(MINUTE).await;
    let claimed = node.engine.claim("q", 10, 30_000, 0).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].payload, bytes[..], "the occurrence's task carries the bytes");
}

#[tokio::test]
async fn a_restart_never_enqueues_an_occurrence_twice() {
    let node = Node::ran_once(Misfire::All).await;
    let node = node.restart_after(0).await;
    assert!(node.due_times("q").await.is_empty(), "the acked occurrence is not enqueued again");
    node.advance(MINUTE).await;
    assert_eq!(node.due_times("q").await, [T0_MS + 2 * MINUTE]);
    let node = node.restart_after(0).await;
    assert_eq!(node.due_times("q").await, [T0_MS + 2 * MINUTE], "nor the one still waiting");
}

/// Stopped 30 s after the first occurrence for ten minutes: the occurrences
/// at 2..=11 minutes are missed, the latest of them 30 s late.
async fn after_ten_minutes_down(misfire: Misfire) -> Node {
    let node = Node::new();
    node.engine.put_schedule("tick", every_minute("q", misfire, Overlap::Allow), Expect::Any).await.unwrap();
    node.advance(MINUTE).await;
    node.advance(30_000).await;
    assert_eq!(node.due_times("q").await, [T0_MS + MINUTE]);
    node.restart_after(10 * MINUTE).await
}

#[tokio::test]
async fn misfire_skip_runs_the_next_occurrence_only() {
    let node = after_ten_minutes_down(Misfire::Skip).await;
    assert_eq!(node.due_times("q").await, [T0_MS + MINUTE], "no run for the ten missed");
    assert_eq!(node.engine.totals().await.occurrences_skipped, 10);
    node.advance(30_000).await;
    assert_eq!(node.due_times("q").await, [T0_MS + MINUTE, T0_MS + 12 * MINUTE]);
}

#[tokio::test]
async fn misfire_once_runs_one_catch_up_then_resumes() {
    let node = after_ten_minutes_down(Misfire::Once).await;
    assert_eq!(node.due_times("q").await, [T0_MS + MINUTE, T0_MS + 11 * MINUTE], "one run, for the latest missed");
    assert_eq!(node.engine.totals().await.occurrences_skipped, 9);
    node.advance(30_000).await;
    assert_eq!(node.due_times("q").await, [T0_MS + MINUTE, T0_MS + 11 * MINUTE, T0_MS + 12 * MINUTE]);
    // The catch-up run is late, and the stats say by how much.
    for task in node.engine.claim("q", 10, 30_000, 0).await.unwrap() {
        node.engine.ack(task.id, task.lease).await.unwrap();
    }
    let stats = node.engine.queue("q").await.unwrap();
    assert_eq!(stats.lateness.samples, 3);
    assert!(stats.lateness.max >= 10.0 * MINUTE as f64, "lateness after the restart: {:?}", stats.lateness);
}

#[tokio::test]
async fn misfire_all_runs_every_missed_occurrence_in_order() {
    let node = after_ten_minutes_down(Misfire::All).await;
    let expected: Vec<u64> = (1..=11).map(|m| T0_MS + m * MINUTE).collect();
    assert_eq!(node.due_times("q").await, expected);
    assert_eq!(node.engine.totals().await.occurrences_skipped, 0);
    let order: Vec<u64> = node.engine.claim("q", 100, 30_000, 0).await.unwrap().iter().map(|t| t.run_at_ms).collect();
    assert_eq!(order, expected, "oldest first");
}

#[tokio::test]
async fn overlap_forbid_skips_while_the_previous_run_is_alive() {
    let node = Node::new();
    node.engine.put_schedule("tick", every_minute("q", Misfire::Skip, Overlap::Forbid), Expect::Any).await.unwrap();
    node.advance(MINUTE).await;
    node.advance(MINUTE).await; // the first is still due: skipped
    assert_eq!(node.due_times("q").await, [T0_MS + MINUTE]);
    let task = node.engine.claim("q", 1, 5 * MINUTE, 0).await.unwrap().remove(0);
    node.advance(MINUTE).await; // leased: skipped
    assert_eq!(node.engine.totals().await.occurrences_skipped, 2);
    node.engine.ack(task.id, task.lease).await.unwrap();
    node.advance(MINUTE).await;
    assert_eq!(node.due_times("q").await, [T0_MS + 4 * MINUTE]);
    // With overlap allowed, the same sequence enqueues every occurrence.
    let node = Node::new();
    node.engine.put_schedule("tick", every_minute("q", Misfire::Skip, Overlap::Allow), Expect::Any).await.unwrap();
    node.advance(MINUTE).await;
    node.advance(MINUTE).await;
    assert_eq!(node.due_times("q").await, [T0_MS + MINUTE, T0_MS + 2 * MINUTE]);
}

#[tokio::test]
async fn a_change_made_for_one_schedule_is_refused_on_another_of_the_same_name() {
    let node = Node::new();
    let changed = |result: Result<(), QueueError>| matches!(result, Err(QueueError::Conflict(_)));
    let put = |queue: &'static str, expect| {
        node.engine.put_schedule("s", every_minute(queue, Misfire::Skip, Overlap::Allow), expect)
    };
    put("a", Expect::Absent).await.unwrap();
    assert!(changed(put("a", Expect::Absent).await.map(drop)), "made meanwhile: not created over");
    // Deleted and made again in queue b: a change checked against a's is refused.
    node.engine.delete_schedule("s", Expect::InQueue("a")).await.unwrap();
    put("b", Expect::Absent).await.unwrap();
    assert!(changed(put("a", Expect::InQueue("a")).await.map(drop)));
    assert!(changed(node.engine.pause_schedule("s", true, Expect::InQueue("a")).await.map(drop)));
    assert!(changed(node.engine.delete_schedule("s", Expect::InQueue("a")).await));
    let info = node.engine.schedule("s").await.unwrap();
    assert_eq!((&*info.schedule.queue, info.schedule.paused), ("b", false), "nothing of b's changed");
    // What it expects, it changes.
    assert!(node.engine.pause_schedule("s", true, Expect::InQueue("b")).await.unwrap().schedule.paused);
    let (moved, created) = put("a", Expect::InQueue("b")).await.unwrap();
    assert_eq!((&*moved.schedule.queue, created), ("a", false));
    node.engine.delete_schedule("s", Expect::InQueue("a")).await.unwrap();
    assert_eq!(
        node.engine.delete_schedule("s", Expect::InQueue("a")).await,
        Err(QueueError::ScheduleNotFound("s".into()))
    );
}

#[tokio::test]
async fn schedules_survive_restarts_and_can_be_replaced_and_deleted() {
    let node = Node::new();
    let every =
        NewSchedule { rule: Rule::Every { every_ms: 90_000 }, ..every_minute("q", Misfire::Once, Overlap::Forbid) };
    node.engine.put_schedule("a", every.clone(), Expect::Any).await.unwrap();
    node.engine.put_schedule("b", every_minute("r", Misfire::All, Overlap::Allow), Expect::Any).await.unwrap();
    let node = node.restart_after(0).await;
    let page = node.engine.schedules(None, 10).await.unwrap();
    let names: Vec<&str> = page.schedules.iter().map(|info| &*info.schedule.name).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(node.engine.totals().await.schedules, 2);
    let a = &page.schedules[0].schedule;
    assert_eq!(
        (a.rule.clone(), a.misfire, a.overlap),
        (Rule::Every { every_ms: 90_000 }, Misfire::Once, Overlap::Forbid)
    );
    assert_eq!(a.next_ms, Some(T0_MS + 90_000));
    // Pages of one.
    let first = node.engine.schedules(None, 1).await.unwrap();
    assert_eq!(first.next.as_deref(), Some("a"));
    let second = node.engine.schedules(first.next.as_deref(), 1).await.unwrap();
    assert_eq!((second.schedules[0].schedule.name.as_ref(), second.next), ("b", None));
    // Replaced: starts again from now.
    node.advance(10_000).await;
    let (info, created) = node.engine.put_schedule("a", every, Expect::Any).await.unwrap();
    assert!(!created);
    assert_eq!(info.schedule.next_ms, Some(T0_MS + 100_000));
    node.engine.delete_schedule("b", Expect::Any).await.unwrap();
    assert_eq!(node.engine.delete_schedule("b", Expect::Any).await, Err(QueueError::ScheduleNotFound("b".into())));
    let node = node.restart_after(0).await;
    assert_eq!(node.engine.schedules(None, 10).await.unwrap().schedules.len(), 1);
    assert!(matches!(node.engine.schedule("b").await, Err(QueueError::ScheduleNotFound(_))));
}

#[tokio::test]
async fn bad_schedules_are_refused_with_what_is_wrong() {
    let node = Node::new();
    let base = every_minute("q", Misfire::Skip, Overlap::Allow);
    let cron = |expression: &str, time_zone: &str| NewSchedule {
        rule: Rule::Cron { expression: expression.into(), time_zone: time_zone.into() },
        ..base.clone()
    };
    let refused = |result: Result<_, QueueError>| match result {
        Err(QueueError::Invalid(message)) => message,
        other => panic!("expected a refusal, got {other:?}"),
    };
    let message = refused(node.engine.put_schedule("s", cron("* * * * *", "Europe/Atlantis"), Expect::Any).await);
    assert!(message.contains("unknown time zone \"Europe/Atlantis\""), "{message}");
    let message = refused(node.engine.put_schedule("s", cron("61 * * * *", "UTC"), Expect::Any).await);
    assert!(message.contains("invalid cron expression"), "{message}");
    let message = refused(node.engine.put_schedule("s", cron("0 0 30 2 *", "UTC"), Expect::Any).await);
    assert!(message.contains("never fires"), "{message}");
    let message = refused(
        node.engine
            .put_schedule("s", NewSchedule { rule: Rule::Every { every_ms: 1 }, ..base.clone() }, Expect::Any)
            .await,
    );
    assert!(message.contains("every_ms"), "{message}");
    let message = refused(
        node.engine.put_schedule("s", NewSchedule { expires_after_ms: Some(0), ..base.clone() }, Expect::Any).await,
    );
    assert!(message.contains("expires_after_ms"), "{message}");
    let message = refused(node.engine.put_schedule("bad name", base.clone(), Expect::Any).await);
    assert!(message.contains("schedule name"), "{message}");
    let message =
        refused(node.engine.put_schedule("s", NewSchedule { queue: "".into(), ..base.clone() }, Expect::Any).await);
    assert!(message.contains("queue name"), "{message}");
    let big = NewSchedule { payload: "x".repeat(Limits::DEFAULT_PAYLOAD_BYTES_MAX + 1).into(), ..base.clone() };
    assert!(matches!(node.engine.put_schedule("s", big, Expect::Any).await, Err(QueueError::PayloadTooLarge { .. })));
    assert!(node.engine.schedules(None, 0).await.is_err());
    assert!(node.engine.schedules(None, 10).await.unwrap().schedules.is_empty(), "nothing refused was stored");
}

/// The local times, in `zone`, of every task a schedule put in `queue`
/// while the clock went from `start_utc` through the next 48 hours, a
/// minute at a time, as the timer thread would.
async fn occurrences_over_two_days(zone: &str, expression: &str, start_utc: &str) -> Vec<String> {
    let start: u64 = start_utc.parse::<jiff::Timestamp>().unwrap().as_millisecond() as u64;
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualWallClock::at_ms(start));
    let node = Node { engine: open(dir.path(), &clock), dir, clock };
    let rule = Rule::Cron { expression: expression.into(), time_zone: zone.into() };
    node.engine
        .put_schedule("dst", NewSchedule { rule, ..every_minute("q", Misfire::Skip, Overlap::Allow) }, Expect::Any)
        .await
        .unwrap();
    for _ in 0..48 * 60 {
        node.advance(MINUTE).await;
    }
    let tz = jiff::tz::TimeZone::get(zone).unwrap();
    let local = |ms: u64| {
        let at = jiff::Timestamp::from_millisecond(ms as i64).unwrap().to_zoned(tz.clone());
        at.strftime("%Y-%m-%dT%H:%M%:z").to_string()
    };
    let runs: Vec<String> = node.due_times("q").await.into_iter().map(local).collect();
    println!("{zone} `{expression}` as a durable schedule, 48 h from {start_utc}: {runs:?}");
    runs
}

#[tokio::test]
async fn a_durable_schedule_keeps_the_dst_rule() {
    // Berlin springs forward on 2026-03-29: 02:30 does not exist, and runs once at 03:00.
    let spring = occurrences_over_two_days("Europe/Berlin", "30 2 * * *", "2026-03-28T00:00:00Z").await;
    assert_eq!(spring, ["2026-03-28T02:30+01:00", "2026-03-29T03:00+02:00"]);
    // New York falls back on 2026-11-01: 01:30 happens twice, and runs once.
    let fall = occurrences_over_two_days("America/New_York", "30 1 * * *", "2026-10-31T04:00:00Z").await;
    assert_eq!(fall, ["2026-10-31T01:30-04:00", "2026-11-01T01:30-04:00"]);
}

/// Paused 30 s after the first occurrence for ten minutes, then resumed.
async fn after_ten_minutes_paused(misfire: Misfire) -> Node {
    let node = Node::new();
    node.engine.put_schedule("tick", every_minute("q", misfire, Overlap::Allow), Expect::Any).await.unwrap();
    node.advance(MINUTE).await;
    node.advance(30_000).await;
    let info = node.engine.pause_schedule("tick", true, Expect::Any).await.unwrap();
    assert!(info.schedule.paused);
    for _ in 0..10 {
        node.advance(MINUTE).await;
    }
    assert_eq!(node.due_times("q").await, [T0_MS + MINUTE], "nothing while paused");
    node.engine.pause_schedule("tick", false, Expect::Any).await.unwrap();
    node.advance(0).await;
    node
}

#[tokio::test]
async fn resuming_a_paused_schedule_applies_its_misfire_policy() {
    let skip = after_ten_minutes_paused(Misfire::Skip).await;
    assert_eq!(skip.due_times("q").await, [T0_MS + MINUTE]);
    assert_eq!(skip.engine.totals().await.occurrences_skipped, 10);
    let once = after_ten_minutes_paused(Misfire::Once).await;
    assert_eq!(once.due_times("q").await, [T0_MS + MINUTE, T0_MS + 11 * MINUTE], "one catch-up run");
    let all = after_ten_minutes_paused(Misfire::All).await;
    let expected: Vec<u64> = (1..=11).map(|m| T0_MS + m * MINUTE).collect();
    assert_eq!(all.due_times("q").await, expected, "every missed occurrence");
    // A definition put while paused stays paused (and starts again from now).
    all.engine.pause_schedule("tick", true, Expect::Any).await.unwrap();
    let (info, _) =
        all.engine.put_schedule("tick", every_minute("q", Misfire::All, Overlap::Allow), Expect::Any).await.unwrap();
    assert!(info.schedule.paused);
    all.advance(5 * MINUTE).await;
    assert_eq!(all.due_times("q").await.len(), 11);
    assert!(matches!(all.engine.pause_schedule("none", true, Expect::Any).await, Err(QueueError::ScheduleNotFound(_))));
}

#[tokio::test]
async fn a_deadline_skips_occurrences_too_late_to_start_and_expires_those_not_delivered() {
    let node = Node::new();
    let deadline =
        NewSchedule { expires_after_ms: Some(3 * MINUTE), ..every_minute("q", Misfire::All, Overlap::Allow) };
    node.engine.put_schedule("tick", deadline, Expect::Any).await.unwrap();
    node.advance(MINUTE).await;
    node.advance(30_000).await;
    let node = node.restart_after(10 * MINUTE).await;
    // Down until 11:30: of the ten missed, only those within 3 minutes of their time are enqueued.
    let expected: Vec<u64> = [1, 9, 10, 11].iter().map(|m| T0_MS + m * MINUTE).collect();
    assert_eq!(node.due_times("q").await, expected);
    assert_eq!(node.engine.totals().await.occurrences_skipped, 7);
    // Nobody claims: each dies at its deadline, reason expired.
    node.advance(3 * MINUTE).await;
    let dead = node.engine.list(
        "q",
        hourglass_queue::ListRequest { status: Some(hourglass_queue::Status::Dead), after: None, limit: 100 },
    );
    let dead = dead.await.unwrap().tasks;
    assert!(dead.len() >= 3 && dead.iter().all(|info| info.task.dead_reason == DeadReason::Expired), "{dead:?}");
}

/// A put counts from when its request came in, and the version it replaces
/// may have run an occurrence after that (while the put was checked, or
/// waited for the writer): that occurrence is not run again. The crash
/// simulator found it as one occurrence stored as two tasks (seed 11108 of
/// 30,000). Here the request's "now" comes before the run by stepping the
/// clock back 30 s, which the engine waits out.
#[tokio::test]
async fn a_replaced_schedule_does_not_run_again_what_the_old_version_ran() {
    let node = Node::ran_once(Misfire::Skip).await;
    node.clock.set_us((T0_MS + MINUTE - 30_000) * 1_000);
    let (info, created) =
        node.engine.put_schedule("tick", every_minute("q", Misfire::Skip, Overlap::Allow), Expect::Any).await.unwrap();
    assert!(!created);
    assert_eq!(info.schedule.next_ms, Some(T0_MS + 2 * MINUTE), "not the minute the old version ran");
    node.advance(30_000).await;
    assert!(node.due_times("q").await.is_empty(), "the occurrence it ran is not enqueued again");
    node.advance(MINUTE).await;
    assert_eq!(node.due_times("q").await, [T0_MS + 2 * MINUTE]);
}
