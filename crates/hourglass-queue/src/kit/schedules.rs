//! The kit's schedules: every backend that runs them ([`Backend::as_schedules`])
//! puts, replaces, reads, lists, pauses, resumes and deletes them with the
//! same answers and errors, and fires them on the real clock: one task an
//! occurrence, with the occurrence's key and due time, in a time zone with
//! seconds, with the overlap policy, and through a pause with the misfire
//! policy. Each check has schedules and queues of its own (named from the
//! prefix), so the checks can share a backend with others.

use std::collections::BTreeMap;

use crate::limits::{Limits, SCHEDULE_LIST_MAX};
use crate::{
    occurrence_of, Backend, Expect, Misfire, NewSchedule, Overlap, QueueError, Rule, Schedules, SystemWallClock,
    WallClock,
};

use super::{LEASE_MS, WAIT_MS};

/// A period short enough that a check sees several occurrences quickly,
/// long enough that a loaded machine keeps up.
const EVERY_MS: u64 = 200;

/// How far a store's clock (Redis's, as a node estimates it) may be from
/// this machine's, for the checks that compare them.
const CLOCKS_MS: u64 = 50;

/// Claims and acks the tasks of `queue` until `for_ms` has passed: what came.
async fn drain_for(b: &dyn Backend, queue: &str, for_ms: u64) -> Vec<crate::Claimed> {
    let until = SystemWallClock.now_ms() + for_ms;
    let mut came = Vec::new();
    while let Some(wait_ms) = until.checked_sub(SystemWallClock.now_ms()).filter(|&ms| ms > 0) {
        for task in b.claim(queue, 64, LEASE_MS, wait_ms).await.unwrap() {
            b.ack(task.id, task.lease).await.unwrap();
            came.push(task);
        }
    }
    came
}

fn every(queue: &str, every_ms: u64) -> NewSchedule {
    NewSchedule {
        queue: queue.into(),
        rule: Rule::Every { every_ms },
        payload: r#"{"tick":true}"#.into(),
        misfire: Misfire::Skip,
        overlap: Overlap::Allow,
        max_attempts: None,
        expires_after_ms: None,
    }
}

fn cron(queue: &str, expression: &str, time_zone: &str) -> NewSchedule {
    NewSchedule { rule: Rule::Cron { expression: expression.into(), time_zone: time_zone.into() }, ..every(queue, 1) }
}

/// Every check of schedules, against `backend`; names start with `prefix`.
/// Panics if the backend does not run schedules.
pub async fn run(backend: &dyn Backend, prefix: &str) {
    let s = backend.as_schedules().expect("the backend runs schedules");
    let n = |check: &str| format!("{prefix}-sched-{check}");
    put_get_replace(s, &n("put")).await;
    expectations(s, &n("expect")).await;
    pages(s, &n("page")).await;
    pause_and_delete(s, &n("pause")).await;
    bad_schedules(s, &n("bad")).await;
    occurrences(backend, s, &n("fire")).await;
    cron_in_a_zone(backend, s, &n("cron")).await;
    overlap_forbid(backend, s, &n("overlap")).await;
    deadline(backend, s, &n("deadline")).await;
    replaced_while_firing(backend, s, &n("replace")).await;
    for misfire in [Misfire::Once, Misfire::All] {
        misfire_on_resume(backend, s, &n(&format!("misfire-{misfire:?}").to_lowercase()), misfire).await;
    }
}

async fn put_get_replace(s: &dyn Schedules, name: &str) {
    let hourly = cron(name, "0 * * * *", "Europe/Berlin");
    let before = SystemWallClock.now_ms();
    let (info, created) = s.put_schedule(name, hourly.clone(), Expect::Any).await.unwrap();
    assert!(created);
    let schedule = &info.schedule;
    assert_eq!((&*schedule.name, &*schedule.queue, &schedule.rule), (name, name, &hourly.rule));
    assert_eq!(
        (schedule.misfire, schedule.overlap, schedule.paused, schedule.last),
        (Misfire::Skip, Overlap::Allow, false, None)
    );
    assert_eq!(schedule.payload.as_text(), Some(r#"{"tick":true}"#));
    // On a store shared by nodes, on its clock as the node estimates it.
    assert!(schedule.since_ms + CLOCKS_MS >= before, "since {} before the request {before}", schedule.since_ms);
    assert_eq!(info.upcoming_ms.len(), crate::UPCOMING);
    assert!(info.upcoming_ms.windows(2).all(|w| w[1] - w[0] == 3_600_000), "{:?}", info.upcoming_ms);
    assert_eq!(s.schedule(name).await.unwrap(), info, "a read shows what the put answered");
    // Replaced: not created, the new definition.
    let bytes = NewSchedule {
        payload: vec![0u8, 255, 7].into(),
        misfire: Misfire::All,
        overlap: Overlap::Forbid,
        max_attempts: Some(3),
        expires_after_ms: Some(60_000),
        ..every(name, 3_600_000)
    };
    let (info, created) = s.put_schedule(name, bytes, Expect::InQueue(name)).await.unwrap();
    assert!(!created);
    let schedule = &info.schedule;
    assert_eq!(schedule.rule, Rule::Every { every_ms: 3_600_000 });
    assert_eq!((schedule.misfire, schedule.overlap, schedule.max_attempts), (Misfire::All, Overlap::Forbid, 3));
    assert_eq!((schedule.expires_after_ms, &schedule.payload[..]), (Some(60_000), &[0u8, 255, 7][..]));
    assert_eq!(schedule.next_ms, Some(schedule.since_ms + 3_600_000));
    assert_eq!(s.schedule(name).await.unwrap(), info);
    s.delete_schedule(name, Expect::Any).await.unwrap();
}

async fn expectations(s: &dyn Schedules, name: &str) {
    let changed = |result: Result<(), QueueError>| matches!(result, Err(QueueError::Conflict(_)));
    let (a, b) = (format!("{name}-a"), format!("{name}-b"));
    s.put_schedule(name, every(&a, 3_600_000), Expect::Absent).await.unwrap();
    assert!(changed(s.put_schedule(name, every(&a, 3_600_000), Expect::Absent).await.map(drop)), "not made over");
    s.delete_schedule(name, Expect::InQueue(&a)).await.unwrap();
    s.put_schedule(name, every(&b, 3_600_000), Expect::Absent).await.unwrap();
    // Made again in b: a change checked against a's is refused, and changes nothing.
    assert!(changed(s.put_schedule(name, every(&a, 60_000), Expect::InQueue(&a)).await.map(drop)));
    assert!(changed(s.pause_schedule(name, true, Expect::InQueue(&a)).await.map(drop)));
    assert!(changed(s.delete_schedule(name, Expect::InQueue(&a)).await));
    let info = s.schedule(name).await.unwrap();
    assert_eq!((&*info.schedule.queue, info.schedule.paused), (&*b, false), "nothing of b's changed");
    assert_eq!(info.schedule.rule, Rule::Every { every_ms: 3_600_000 });
    // What it expects, it changes.
    assert!(s.pause_schedule(name, true, Expect::InQueue(&b)).await.unwrap().schedule.paused);
    let (moved, created) = s.put_schedule(name, every(&a, 60_000), Expect::InQueue(&b)).await.unwrap();
    assert_eq!((&*moved.schedule.queue, created, moved.schedule.paused), (&*a, false, true), "stays paused");
    s.delete_schedule(name, Expect::InQueue(&a)).await.unwrap();
    let gone = Err(QueueError::ScheduleNotFound(name.to_owned()));
    assert_eq!(s.delete_schedule(name, Expect::InQueue(&a)).await, gone);
    assert_eq!(s.put_schedule(name, every(&a, 60_000), Expect::InQueue(&a)).await.map(drop), gone);
    assert_eq!(s.pause_schedule(name, false, Expect::Any).await.map(drop), gone);
    assert_eq!(s.schedule(name).await.map(drop), gone);
}

async fn pages(s: &dyn Schedules, name: &str) {
    // Seven schedules in two queues, put out of order; names sort as numbered.
    let (mine, other) = (format!("{name}-q"), format!("{name}-other"));
    let names: Vec<String> = (0..7).map(|i| format!("{name}-{i}")).collect();
    for (i, at) in [3, 0, 6, 1, 5, 2, 4].into_iter().enumerate() {
        let queue = if at % 3 == 2 { &other } else { &mine };
        s.put_schedule(&names[at], every(queue, 3_600_000 + i as u64), Expect::Any).await.unwrap();
    }
    let in_check = |queue: &str| queue == mine || queue == other;
    // Pages of two, from before the first of them: every one, in order, once.
    let mut listed = Vec::new();
    let mut after = Some(format!("{name}-"));
    let mut pages = 0;
    while let Some(cursor) = after.take() {
        let page = s.schedules_where(Some(&cursor), 2, &in_check).await.unwrap();
        assert!(page.schedules.len() <= 2);
        listed.extend(page.schedules.iter().map(|info| info.schedule.name.to_string()));
        assert_eq!(page.next.is_some(), listed.len() < names.len(), "a cursor while more follow, after {listed:?}");
        after = page.next.map(String::from);
        pages += 1;
        assert!(pages <= names.len(), "the pages end");
    }
    assert_eq!(listed, names);
    // Filtered where they are kept: only mine, in pages of one.
    let only_mine = |queue: &str| queue == mine;
    let first = s.schedules_where(None, 1, &only_mine).await.unwrap();
    assert_eq!(first.schedules.len(), 1);
    assert_eq!((&*first.schedules[0].schedule.name, first.next.as_deref()), (&*names[0], Some(&*names[0])));
    let mut shown = vec![names[0].clone()];
    let mut after = first.next.map(String::from);
    while let Some(cursor) = after.take() {
        let page = s.schedules_where(Some(&cursor), 1, &only_mine).await.unwrap();
        shown.extend(page.schedules.iter().map(|info| info.schedule.name.to_string()));
        after = page.next.map(String::from);
    }
    let expected: Vec<String> =
        names.iter().enumerate().filter(|(at, _)| at % 3 != 2).map(|(_, n)| n.clone()).collect();
    assert_eq!(shown, expected);
    // The whole page, payloads and all.
    let all = s.schedules_where(None, SCHEDULE_LIST_MAX, &in_check).await.unwrap();
    assert_eq!((all.schedules.len(), all.next), (names.len(), None));
    assert!(all.schedules.iter().all(|info| info.schedule.payload.as_text() == Some(r#"{"tick":true}"#)));
    assert!(all.schedules.iter().all(|info| info.upcoming_ms.len() == crate::UPCOMING));
    for limit in [0, SCHEDULE_LIST_MAX + 1] {
        assert!(matches!(s.schedules(None, limit).await, Err(QueueError::Invalid(_))), "a page of {limit}");
    }
    for name in &names {
        s.delete_schedule(name, Expect::Any).await.unwrap();
    }
    assert!(s.schedules_where(None, 10, &in_check).await.unwrap().schedules.is_empty());
}

async fn pause_and_delete(s: &dyn Schedules, name: &str) {
    let (put, _) = s.put_schedule(name, every(name, 3_600_000), Expect::Any).await.unwrap();
    let paused = s.pause_schedule(name, true, Expect::Any).await.unwrap();
    assert!(paused.schedule.paused);
    assert_eq!(paused.schedule.next_ms, put.schedule.next_ms, "its next occurrence stays where it was");
    assert_eq!(s.pause_schedule(name, true, Expect::Any).await.unwrap(), paused, "pausing again changes nothing");
    assert!(s.schedule(name).await.unwrap().schedule.paused);
    let resumed = s.pause_schedule(name, false, Expect::Any).await.unwrap();
    assert!(!resumed.schedule.paused);
    assert_eq!(resumed.schedule.next_ms, put.schedule.next_ms);
    s.delete_schedule(name, Expect::Any).await.unwrap();
    assert_eq!(s.delete_schedule(name, Expect::Any).await, Err(QueueError::ScheduleNotFound(name.to_owned())));
}

async fn bad_schedules(s: &dyn Schedules, name: &str) {
    let refused = |result: Result<_, QueueError>| match result {
        Err(QueueError::Invalid(message)) => message,
        other => panic!("expected a refusal, got {other:?}"),
    };
    let message = refused(s.put_schedule(name, cron(name, "* * * * *", "Europe/Atlantis"), Expect::Any).await);
    assert!(message.contains("unknown time zone \"Europe/Atlantis\""), "{message}");
    let message = refused(s.put_schedule(name, cron(name, "61 * * * *", "UTC"), Expect::Any).await);
    assert!(message.contains("invalid cron expression"), "{message}");
    let message = refused(s.put_schedule(name, cron(name, "0 0 30 2 *", "UTC"), Expect::Any).await);
    assert!(message.contains("never fires"), "{message}");
    let message = refused(s.put_schedule(name, every(name, 1), Expect::Any).await);
    assert!(message.contains("every_ms"), "{message}");
    let deadline = NewSchedule { expires_after_ms: Some(0), ..every(name, 60_000) };
    assert!(refused(s.put_schedule(name, deadline, Expect::Any).await).contains("expires_after_ms"));
    assert!(refused(s.put_schedule("bad name", every(name, 60_000), Expect::Any).await).contains("schedule name"));
    assert!(refused(s.put_schedule(name, every("", 60_000), Expect::Any).await).contains("queue name"));
    let big = NewSchedule { payload: "x".repeat(Limits::DEFAULT_PAYLOAD_BYTES_MAX + 1).into(), ..every(name, 60_000) };
    assert!(matches!(s.put_schedule(name, big, Expect::Any).await, Err(QueueError::PayloadTooLarge { .. })));
    assert!(matches!(s.schedule("bad name").await, Err(QueueError::Invalid(_))));
    assert_eq!(s.schedule(name).await.map(drop), Err(QueueError::ScheduleNotFound(name.to_owned())), "nothing stored");
}

/// Claims the tasks of `queue` (acking them) until one is due after
/// `until_ms`: each task's occurrence (from its key) and id.
async fn collect(b: &dyn Backend, name: &str, queue: &str, until_ms: u64) -> BTreeMap<u64, u64> {
    collect_with_deadline(b, name, queue, until_ms, None).await
}

/// [`collect`], checking that each task expires `deadline_ms` after its
/// occurrence (never, for `None`).
async fn collect_with_deadline(
    b: &dyn Backend,
    name: &str,
    queue: &str,
    until_ms: u64,
    deadline_ms: Option<u64>,
) -> BTreeMap<u64, u64> {
    let mut seen = BTreeMap::new();
    while seen.last_key_value().is_none_or(|(&at, _)| at <= until_ms) {
        let claimed = b.claim(queue, 64, LEASE_MS, WAIT_MS).await.unwrap();
        assert!(!claimed.is_empty(), "schedule {name}: no occurrence within {WAIT_MS} ms; seen {seen:?}");
        for task in claimed {
            let info = b.get(task.id).await.unwrap();
            let key = info.task.key.as_deref().expect("an occurrence's task has its key");
            let (of, at) = occurrence_of(key).expect("an occurrence key");
            assert_eq!((of, at), (name, task.run_at_ms), "task {} is the occurrence its key names", task.id);
            assert_eq!(task.payload.as_text(), Some(r#"{"tick":true}"#));
            let expires = deadline_ms.map(|ms| at + ms);
            assert_eq!(info.task.expires_at_ms, expires, "task {} expires at its occurrence's deadline", task.id);
            if let Some(other) = seen.insert(at, task.id) {
                panic!("schedule {name}: occurrence {at} enqueued as tasks {other} and {}", task.id);
            }
            b.ack(task.id, task.lease).await.unwrap();
        }
    }
    seen
}

/// Fires every period: one task an occurrence, on the period's grid, none
/// missed; deleted, it fires no more.
async fn occurrences(b: &dyn Backend, s: &dyn Schedules, name: &str) {
    let (info, _) = s.put_schedule(name, every(name, EVERY_MS), Expect::Any).await.unwrap();
    let first = info.schedule.next_ms.unwrap();
    let seen = collect(b, name, name, first + 4 * EVERY_MS).await;
    let expected: Vec<u64> = (0..seen.len() as u64).map(|k| first + k * EVERY_MS).collect();
    assert_eq!(seen.keys().copied().collect::<Vec<_>>(), expected, "every occurrence from the first, once");
    println!("schedule {name}: every {EVERY_MS} ms, {} occurrences in a row, one task each", seen.len());
    let last = s.schedule(name).await.unwrap().schedule.last.expect("it ran");
    assert!(last.0 >= *seen.keys().last().unwrap());
    s.delete_schedule(name, Expect::Any).await.unwrap();
    let deleted_ms = SystemWallClock.now_ms();
    // What fired before the delete came back may still be there; nothing after.
    let late = drain_for(b, name, 3 * EVERY_MS).await;
    assert!(late.iter().all(|task| task.run_at_ms <= deleted_ms), "fired after its delete: {late:?}");
}

/// Cron with seconds, in a zone with daylight saving: every second, on the second.
async fn cron_in_a_zone(b: &dyn Backend, s: &dyn Schedules, name: &str) {
    let (info, _) = s.put_schedule(name, cron(name, "* * * * * *", "Europe/Berlin"), Expect::Any).await.unwrap();
    let first = info.schedule.next_ms.unwrap();
    assert_eq!(first % 1_000, 0);
    let seen = collect(b, name, name, first + 1_000).await;
    let expected: Vec<u64> = (0..seen.len() as u64).map(|k| first + k * 1_000).collect();
    assert_eq!(seen.keys().copied().collect::<Vec<_>>(), expected);
    println!("schedule {name}: `* * * * * *` in Europe/Berlin, {} seconds in a row, one task each", seen.len());
    s.delete_schedule(name, Expect::Any).await.unwrap();
}

/// `forbid`: no new task while the previous one is leased; the next comes
/// once it is acked, and the occurrences between are counted as skipped.
async fn overlap_forbid(b: &dyn Backend, s: &dyn Schedules, name: &str) {
    let skipped_before = b.totals().await.occurrences_skipped;
    let forbid = NewSchedule { overlap: Overlap::Forbid, ..every(name, EVERY_MS) };
    s.put_schedule(name, forbid, Expect::Any).await.unwrap();
    let held = b.claim(name, 1, LEASE_MS, WAIT_MS).await.unwrap().remove(0);
    // Several periods pass with its task leased: nothing new is due.
    let meanwhile = b.claim(name, 64, LEASE_MS, 5 * EVERY_MS).await.unwrap();
    assert!(meanwhile.is_empty(), "enqueued while the previous task was leased: {meanwhile:?}");
    b.ack(held.id, held.lease).await.unwrap();
    let next = b.claim(name, 64, LEASE_MS, WAIT_MS).await.unwrap();
    assert_eq!(next.len(), 1, "one task once the previous is done: {next:?}");
    assert!(next[0].run_at_ms >= held.run_at_ms + 5 * EVERY_MS);
    b.ack(next[0].id, next[0].lease).await.unwrap();
    s.delete_schedule(name, Expect::Any).await.unwrap();
    let skipped = b.totals().await.occurrences_skipped - skipped_before;
    println!("schedule {name}: overlap forbidden, {skipped} occurrences skipped while its task was leased");
    assert!(skipped >= 4, "the occurrences while leased are skipped: {skipped}");
}

/// Paused for several periods, then resumed: `once` enqueues one catch-up
/// task for the latest it missed, `all` every one; both go on on the grid.
async fn misfire_on_resume(b: &dyn Backend, s: &dyn Schedules, name: &str, misfire: Misfire) {
    let (info, _) = s.put_schedule(name, NewSchedule { misfire, ..every(name, EVERY_MS) }, Expect::Any).await.unwrap();
    let first = info.schedule.next_ms.unwrap();
    collect(b, name, name, first).await;
    let paused = s.pause_schedule(name, true, Expect::Any).await.unwrap();
    let paused_ms = SystemWallClock.now_ms();
    // Six periods paused, waiting on a claim: nothing comes but what fired
    // before the pause answered.
    let meanwhile = drain_for(b, name, 6 * EVERY_MS).await;
    assert!(meanwhile.iter().all(|task| task.run_at_ms <= paused_ms), "fired while paused: {meanwhile:?}");
    let resumed_from = SystemWallClock.now_ms();
    let resumed = s.pause_schedule(name, false, Expect::Any).await.unwrap();
    assert!(!resumed.schedule.paused);
    let next = paused.schedule.next_ms.unwrap();
    let after = collect(b, name, name, resumed_from + 2 * EVERY_MS).await;
    s.delete_schedule(name, Expect::Any).await.unwrap();
    // The occurrences that came while paused, a period clear of the resume.
    let missed: Vec<u64> = after.keys().copied().filter(|&at| at >= next && at < resumed_from - EVERY_MS).collect();
    println!(
        "schedule {name}: misfire {misfire:?}, paused from {paused_ms} to {resumed_from}: {} tasks for the \
         occurrences from {next} to {} after resuming",
        missed.len(),
        resumed_from - EVERY_MS
    );
    match misfire {
        Misfire::All => {
            let expected: Vec<u64> = (next..resumed_from - EVERY_MS).step_by(EVERY_MS as usize).collect();
            assert_eq!(missed, expected, "all: every occurrence missed while paused");
            assert!(expected.len() >= 3, "paused for several periods: {expected:?}");
        }
        _ => assert!(missed.is_empty(), "once: only the latest occurrence missed, not {missed:?}"),
    }
    // After it, the grid goes on, once each.
    let on_grid = after.keys().all(|at| (at - first) % EVERY_MS == 0);
    assert!(on_grid, "{misfire:?}: {after:?}");
}

/// `expires_after_ms`: each task expires that long after its occurrence, and
/// an occurrence found already past it (here: missed while paused, under
/// `all`) is skipped, not enqueued to die.
async fn deadline(b: &dyn Backend, s: &dyn Schedules, name: &str) {
    let deadline_ms = 2 * EVERY_MS;
    let new = NewSchedule { misfire: Misfire::All, expires_after_ms: Some(deadline_ms), ..every(name, EVERY_MS) };
    let (info, _) = s.put_schedule(name, new, Expect::Any).await.unwrap();
    let first = info.schedule.next_ms.unwrap();
    collect_with_deadline(b, name, name, first, Some(deadline_ms)).await;
    let skipped_before = b.totals().await.occurrences_skipped;
    let paused = s.pause_schedule(name, true, Expect::Any).await.unwrap();
    drain_for(b, name, 8 * EVERY_MS).await;
    let resumed_from = SystemWallClock.now_ms();
    s.pause_schedule(name, false, Expect::Any).await.unwrap();
    let after = collect_with_deadline(b, name, name, resumed_from + 2 * EVERY_MS, Some(deadline_ms)).await;
    s.delete_schedule(name, Expect::Any).await.unwrap();
    let next = paused.schedule.next_ms.unwrap();
    // Past their deadline when resumed (with a period's margin): skipped.
    let too_late: Vec<u64> =
        after.keys().copied().filter(|&at| at >= next && at + deadline_ms + EVERY_MS < resumed_from).collect();
    let skipped = b.totals().await.occurrences_skipped - skipped_before;
    println!("schedule {name}: deadline {deadline_ms} ms, {skipped} occurrences missed while paused skipped for it");
    assert!(too_late.is_empty(), "enqueued past their deadline: {too_late:?} (resumed at {resumed_from})");
    assert!(skipped >= 4, "the occurrences past their deadline are counted as skipped: {skipped}");
}

/// Put again and again while it fires every few milliseconds: each version
/// starts from its put, and none runs again an occurrence a version before
/// it ran (the put and the firing race on the store).
async fn replaced_while_firing(b: &dyn Backend, s: &dyn Schedules, name: &str) {
    const EVERY_MS: u64 = 20;
    const PUTS: usize = 40;
    let mut occurrences: Vec<u64> = Vec::new();
    let mut take = async |wait_ms: u64| {
        let tasks = b.claim(name, 64, LEASE_MS, wait_ms).await.unwrap();
        for task in &tasks {
            occurrences.push(task.run_at_ms);
            b.ack(task.id, task.lease).await.unwrap();
        }
        tasks.len()
    };
    // PUTS versions at least; more while too few fired to mean anything (a
    // loaded machine's timer may wake past a version's occurrence), up to a
    // bound of puts and of time.
    let started = std::time::Instant::now();
    let mut puts = 0;
    let mut fired = 0;
    while puts < PUTS
        || (fired < PUTS / 4 && puts < 10 * PUTS && started.elapsed() < std::time::Duration::from_secs(60))
    {
        s.put_schedule(name, every(name, EVERY_MS), Expect::Any).await.unwrap();
        puts += 1;
        // Until an occurrence of this version comes, or the next's time: the
        // next put then meets a firing on its way, or one just done.
        fired += take(EVERY_MS + EVERY_MS / 2).await;
    }
    let last = s.schedule(name).await.unwrap().schedule.last;
    s.delete_schedule(name, Expect::Any).await.unwrap();
    take(3 * EVERY_MS).await;
    occurrences.sort_unstable();
    let enqueued = occurrences.len();
    occurrences.dedup();
    println!(
        "schedule {name}: put {puts} times while firing every {EVERY_MS} ms: {enqueued} occurrences, the last {last:?}"
    );
    assert_eq!(occurrences.len(), enqueued, "an occurrence enqueued twice across versions");
    assert!(enqueued >= PUTS / 4, "the versions fired too little to mean anything: {enqueued}");
}
