//! Calendar jobs on a manual clock across real daylight-saving transitions:
//! every run in a 48-hour window around each one, printed and checked.
//! [`ManualClock`] is both the monotonic and the wall clock here, so time
//! moves only when the test moves it; nothing sleeps.

use std::sync::Arc;
use std::time::Duration;

use hourglass::{Cron, ManualClock, ManualWallClock, ScheduleError, Scheduler, WallClock};
use parking_lot::Mutex;

const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
const MINUTE_MS: u64 = 60_000;
const HOUR_MS: u64 = 60 * MINUTE_MS;

fn unix_ms(utc: &str) -> u64 {
    utc.parse::<jiff::Timestamp>().unwrap().as_millisecond() as u64
}

/// Runs each expression in `zone` on a manual clock for the 48 hours from
/// `start_utc`, a minute at a time; returns each one's runs as local times
/// (with their offsets), after printing them.
fn runs(zone: &str, start_utc: &str, expressions: &[&str]) -> Vec<Vec<String>> {
    let start = unix_ms(start_utc);
    let clock = ManualClock::at_unix_ms(start);
    let scheduler = Scheduler::builder().workers(1).clock(clock.clone()).wall_clock(clock.clone()).build().unwrap();
    let logs: Vec<Arc<Mutex<Vec<u64>>>> = expressions.iter().map(|_| Arc::default()).collect();
    for (expression, log) in expressions.iter().zip(&logs) {
        let (log, clock) = (log.clone(), clock.clone());
        let cron = Cron::new(expression, zone).unwrap();
        scheduler.schedule_cron(cron, move || log.lock().push(clock.now_ms())).unwrap();
    }
    for _ in 0..48 * 60 {
        clock.advance(Duration::from_millis(MINUTE_MS));
        assert!(scheduler.wait_until_idle(IDLE_TIMEOUT), "the scheduler did not settle");
    }
    let stats = scheduler.stats();
    assert_eq!(stats.skipped, 0, "no occurrence is missed when the clock moves a minute at a time");
    expressions
        .iter()
        .zip(&logs)
        .map(|(expression, log)| {
            let cron = Cron::new(expression, zone).unwrap();
            let local: Vec<String> = log.lock().iter().map(|&at| cron.local(at)).collect();
            println!("{zone} `{expression}`, 48 h from {start_utc}: {} runs\n  {}", local.len(), local.join("\n  "));
            local
        })
        .collect()
}

/// The runs from local time `from` to local time `to`, both prefixes of a
/// local time (`2026-03-08T04` takes in the whole hour).
fn between(runs: &[String], from: &str, to: &str) -> Vec<String> {
    runs.iter().filter(|at| at.as_str() >= from && at[..to.len()] <= *to).cloned().collect()
}

/// Every gap between consecutive runs, in real minutes.
fn gaps_minutes(runs: &[String]) -> Vec<u64> {
    let instants: Vec<u64> =
        runs.iter().map(|local| local.parse::<jiff::Timestamp>().unwrap().as_millisecond() as u64).collect();
    instants.windows(2).map(|pair| (pair[1] - pair[0]) / MINUTE_MS).collect()
}

#[test]
fn new_york_spring_forward() {
    // 2026-03-08 02:00 EST becomes 03:00 EDT.
    let all = runs("America/New_York", "2026-03-07T05:00:00Z", &["30 2 * * *", "0 * * * *", "*/30 * * * *"]);
    // Fixed time in the gap: once, right after it.
    assert_eq!(all[0], ["2026-03-07T02:30:00-05:00", "2026-03-08T03:00:00-04:00"]);
    // Hourly keeps the real-time rhythm: 01:00 EST, then 03:00 EDT an hour later.
    assert_eq!(
        between(&all[1], "2026-03-08T00", "2026-03-08T04"),
        [
            "2026-03-08T00:00:00-05:00",
            "2026-03-08T01:00:00-05:00",
            "2026-03-08T03:00:00-04:00",
            "2026-03-08T04:00:00-04:00"
        ]
    );
    assert_eq!(all[1].len(), 48);
    assert!(gaps_minutes(&all[1]).iter().all(|&gap| gap == 60));
    assert!(gaps_minutes(&all[2]).iter().all(|&gap| gap == 30));
}

#[test]
fn new_york_fall_back() {
    // 2026-11-01 02:00 EDT becomes 01:00 EST: 01:00 to 02:00 happens twice.
    let all = runs("America/New_York", "2026-10-31T05:00:00Z", &["30 1 * * *", "0 * * * *", "*/30 * * * *"]);
    // Fixed time in the overlap: once, at the first instant.
    assert_eq!(all[0], ["2026-10-31T01:30:00-04:00", "2026-11-01T01:30:00-04:00"]);
    // Hourly runs in both copies of the repeated hour.
    assert_eq!(
        between(&all[1], "2026-11-01T00", "2026-11-01T03"),
        [
            "2026-11-01T00:00:00-04:00",
            "2026-11-01T01:00:00-04:00",
            "2026-11-01T01:00:00-05:00",
            "2026-11-01T02:00:00-05:00",
            "2026-11-01T03:00:00-05:00"
        ]
    );
    assert_eq!(all[1].len(), 48);
    assert!(gaps_minutes(&all[1]).iter().all(|&gap| gap == 60));
    assert!(gaps_minutes(&all[2]).iter().all(|&gap| gap == 30));
}

#[test]
fn berlin_spring_forward() {
    // 2026-03-29 02:00 CET becomes 03:00 CEST.
    let all = runs("Europe/Berlin", "2026-03-28T00:00:00Z", &["30 2 * * *", "0 9 * * *", "0 * * * *"]);
    assert_eq!(all[0], ["2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00"]);
    // A fixed time outside the gap keeps its local time across the change.
    assert_eq!(all[1], ["2026-03-28T09:00:00+01:00", "2026-03-29T09:00:00+02:00"]);
    assert_eq!(all[2].len(), 48);
    assert!(gaps_minutes(&all[2]).iter().all(|&gap| gap == 60));
}

#[test]
fn berlin_fall_back() {
    // 2026-10-25 03:00 CEST becomes 02:00 CET: 02:00 to 03:00 happens twice.
    let all = runs("Europe/Berlin", "2026-10-24T00:00:00Z", &["30 2 * * *", "0 9 * * *", "0 * * * *"]);
    assert_eq!(all[0], ["2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+02:00"]);
    assert_eq!(all[1], ["2026-10-24T09:00:00+02:00", "2026-10-25T09:00:00+01:00"]);
    assert_eq!(
        between(&all[2], "2026-10-25T01", "2026-10-25T03"),
        [
            "2026-10-25T01:00:00+02:00",
            "2026-10-25T02:00:00+02:00",
            "2026-10-25T02:00:00+01:00",
            "2026-10-25T03:00:00+01:00"
        ]
    );
    assert_eq!(all[2].len(), 48);
}

#[test]
fn lord_howe_half_hour_shifts() {
    // Lord Howe Island moves its clocks by 30 minutes: 2026-10-04 02:00 +10:30
    // becomes 02:30 +11:00, and 2026-04-05 02:00 +11:00 becomes 01:30 +10:30.
    let spring = runs("Australia/Lord_Howe", "2026-10-03T03:00:00Z", &["15 2 * * *", "0 * * * *", "*/30 * * * *"]);
    assert_eq!(spring[0], ["2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"]);
    // The local 02:00 does not exist: the hourly job runs at 01:00 and 03:00,
    // 90 real minutes apart, and the half-hourly one keeps 30 real minutes.
    assert_eq!(
        between(&spring[1], "2026-10-04T00", "2026-10-04T04"),
        [
            "2026-10-04T00:00:00+10:30",
            "2026-10-04T01:00:00+10:30",
            "2026-10-04T03:00:00+11:00",
            "2026-10-04T04:00:00+11:00"
        ]
    );
    assert!(gaps_minutes(&spring[2]).iter().all(|&gap| gap == 30));

    let fall = runs("Australia/Lord_Howe", "2026-04-04T03:00:00Z", &["45 1 * * *", "0 * * * *", "*/30 * * * *"]);
    // 01:45 happens twice; it runs once, at the first.
    assert_eq!(fall[0], ["2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"]);
    // The hourly job: 01:00 +11:00, then 02:00 +10:30, 90 real minutes later.
    assert_eq!(
        between(&fall[1], "2026-04-05T01", "2026-04-05T03"),
        ["2026-04-05T01:00:00+11:00", "2026-04-05T02:00:00+10:30", "2026-04-05T03:00:00+10:30"]
    );
    // 01:30 happens twice; the half-hourly job runs at both, 30 real minutes apart.
    assert_eq!(
        between(&fall[2], "2026-04-05T01", "2026-04-05T02:30"),
        [
            "2026-04-05T01:00:00+11:00",
            "2026-04-05T01:30:00+11:00",
            "2026-04-05T01:30:00+10:30",
            "2026-04-05T02:00:00+10:30",
            "2026-04-05T02:30:00+10:30"
        ]
    );
    assert!(gaps_minutes(&fall[2]).iter().all(|&gap| gap == 30));
}

#[test]
fn an_expression_that_never_fires_is_refused() {
    let scheduler = Scheduler::builder()
        .workers(1)
        .clock(ManualClock::at_unix_ms(unix_ms("2026-06-01T00:00:00Z")))
        .build()
        .unwrap();
    let never = Cron::new("0 0 30 2 *", "UTC").unwrap();
    assert_eq!(scheduler.schedule_cron(never, || {}).unwrap_err(), ScheduleError::NeverFires);
}

#[test]
fn a_stepped_wall_clock_never_runs_a_job_early_and_loses_none() {
    // The monotonic clock moves steadily; the wall clock is stepped apart from it.
    let monotonic = ManualClock::new();
    let wall = ManualWallClock::at_ms(unix_ms("2026-06-01T11:59:00Z"));
    let scheduler = Scheduler::builder().workers(1).clock(monotonic.clone()).wall_clock(wall.clone()).build().unwrap();
    let log: Arc<Mutex<Vec<u64>>> = Arc::default();
    let job = {
        let (log, wall) = (log.clone(), wall.clone());
        move || log.lock().push(wall.now_ms())
    };
    scheduler.schedule_cron(Cron::new("0 12 * * *", "UTC").unwrap(), job).unwrap();
    let step = |monotonic_ms: u64, wall_step_ms: i64| {
        let now = wall.now_us() as i64;
        wall.set_us((now + wall_step_ms * 1_000 + monotonic_ms as i64 * 1_000) as u64);
        monotonic.advance(Duration::from_millis(monotonic_ms));
        assert!(scheduler.wait_until_idle(IDLE_TIMEOUT));
    };
    // The wall clock is stepped back 10 minutes just before noon: at the
    // monotonic deadline the wall clock reads 11:50, and nothing runs.
    step(30_000, -10 * 60_000);
    step(30_000, 0);
    assert!(log.lock().is_empty(), "ran early: {:?}", log.lock());
    // It runs when the wall clock reaches noon.
    for _ in 0..10 {
        step(MINUTE_MS, 0);
    }
    assert_eq!(*log.lock(), [unix_ms("2026-06-01T12:00:00Z")]);
    // Stepped forward past the next noon, it runs within the recheck period.
    step(1_000, 24 * HOUR_MS as i64);
    step(Scheduler::CALENDAR_RECHECK.as_millis() as u64, 0);
    assert_eq!(log.lock().len(), 2, "the occurrence the step jumped over runs");
    assert!(log.lock()[1] >= unix_ms("2026-06-02T12:00:00Z"));
}

/// Never early, never needlessly late, at the edges of a millisecond: the wall
/// clock stands 0.7 ms past a whole second, so the next occurrence of a job
/// every second is 999.3 ms away. It runs at the occurrence, not before, and
/// its lateness is counted from the occurrence.
#[test]
fn a_wall_clock_in_mid_millisecond_runs_a_calendar_job_at_its_occurrence() {
    let second = unix_ms("2026-06-01T12:00:00Z");
    let clock = ManualClock::at_unix_ms(second);
    let scheduler = Scheduler::builder().workers(1).clock(clock.clone()).wall_clock(clock.clone()).build().unwrap();
    clock.advance(Duration::from_micros(700));
    let log: Arc<Mutex<Vec<u64>>> = Arc::default();
    let (runs, at) = (log.clone(), clock.clone());
    scheduler.schedule_cron(Cron::new("* * * * * *", "UTC").unwrap(), move || runs.lock().push(at.now_us())).unwrap();
    let occurrence_us = (second + 1_000) * 1_000;
    clock.advance(Duration::from_micros(occurrence_us - 1 - clock.now_us()));
    assert!(scheduler.wait_until_idle(IDLE_TIMEOUT));
    assert!(log.lock().is_empty(), "ran before its occurrence");
    clock.advance(Duration::from_micros(1));
    assert!(scheduler.wait_until_idle(IDLE_TIMEOUT));
    assert_eq!(*log.lock(), [occurrence_us], "ran at its occurrence");
    let lateness = scheduler.stats().lateness;
    assert!(lateness.max < Duration::from_micros(1), "lateness {:?} from the occurrence", lateness.max);
}
