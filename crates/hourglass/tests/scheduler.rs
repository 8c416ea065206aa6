//! The scheduler on a manual clock: time moves only when a test moves it, and
//! `wait_until_idle` waits for what each move set off. Nothing here sleeps.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use hourglass::{Clock, ManualClock, MissedRuns, OverloadPolicy, ScheduleError, Scheduler, TaskId};
use parking_lot::Mutex;

const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
const MS: Duration = Duration::from_millis(1);

fn manual(workers: usize) -> (Scheduler, ManualClock) {
    let clock = ManualClock::new();
    let scheduler = Scheduler::builder().workers(workers).clock(clock.clone()).build().unwrap();
    (scheduler, clock)
}

/// Moves the clock and waits until everything due has run.
fn advance(scheduler: &Scheduler, clock: &ManualClock, by: Duration) {
    clock.advance(by);
    assert!(scheduler.wait_until_idle(IDLE_TIMEOUT), "the scheduler did not settle");
}

/// A log of which jobs ran, and at what clock time.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<(usize, Instant)>>>);

impl Log {
    fn job(&self, clock: &ManualClock, id: usize) -> impl FnOnce() + Send + 'static {
        let (log, clock) = (self.clone(), clock.clone());
        move || log.0.lock().push((id, clock.now()))
    }

    fn ids(&self) -> Vec<usize> {
        let mut ids: Vec<usize> = self.0.lock().iter().map(|&(id, _)| id).collect();
        ids.sort_unstable();
        ids
    }
}

#[test]
fn jobs_run_once_never_early() {
    let (scheduler, clock) = manual(2);
    let start = clock.now();
    let log = Log::default();
    let delays_ms = [0u64, 1, 5, 5, 63, 64, 65, 999, 1000, 4096, 70_000];
    for (id, &ms) in delays_ms.iter().enumerate() {
        scheduler.schedule(Duration::from_millis(ms), log.job(&clock, id)).unwrap();
    }
    let mut elapsed_ms = 0;
    for step_ms in [0u64, 1, 3, 1, 58, 1, 1, 900, 33, 1, 3096, 65_000, 4_904] {
        advance(&scheduler, &clock, Duration::from_millis(step_ms));
        elapsed_ms += step_ms;
        let expected: Vec<usize> = (0..delays_ms.len()).filter(|&i| delays_ms[i] <= elapsed_ms).collect();
        assert_eq!(log.ids(), expected, "at {elapsed_ms} ms");
    }
    for &(id, ran_at) in log.0.lock().iter() {
        assert!(ran_at >= start + Duration::from_millis(delays_ms[id]), "job {id} ran early");
    }
    let stats = scheduler.stats();
    assert_eq!(stats.fired, delays_ms.len() as u64);
    assert_eq!(stats.pending, 0);
    assert_eq!(stats.lateness.samples, delays_ms.len() as u64);
}

#[test]
fn schedule_at_a_past_instant_runs_at_once() {
    let (scheduler, clock) = manual(1);
    clock.advance(Duration::from_secs(10));
    let log = Log::default();
    scheduler.schedule_at(clock.now() - Duration::from_secs(5), log.job(&clock, 1)).unwrap();
    scheduler.schedule_at(clock.now() + MS, log.job(&clock, 2)).unwrap();
    assert!(scheduler.wait_until_idle(IDLE_TIMEOUT));
    assert_eq!(log.ids(), [1]);
    advance(&scheduler, &clock, MS);
    assert_eq!(log.ids(), [1, 2]);
}

#[test]
fn cancel_prevents_the_run_and_stale_ids_are_refused() {
    let (scheduler, clock) = manual(1);
    let log = Log::default();
    let a = scheduler.schedule(10 * MS, log.job(&clock, 1)).unwrap();
    let b = scheduler.schedule(10 * MS, log.job(&clock, 2)).unwrap();
    assert!(scheduler.cancel(a));
    assert!(!scheduler.cancel(a), "a second cancel finds nothing");
    advance(&scheduler, &clock, 10 * MS);
    assert_eq!(log.ids(), [2]);
    assert!(!scheduler.cancel(b), "it has run");
    assert_eq!(scheduler.reschedule(b, MS), Ok(false));
    let stats = scheduler.stats();
    assert_eq!((stats.cancelled, stats.fired, stats.pending), (1, 1, 0));
    // A new job reuses the storage of the old ones; their ids must not reach it.
    let c = scheduler.schedule(10 * MS, log.job(&clock, 3)).unwrap();
    assert!(!scheduler.cancel(a) && !scheduler.cancel(b));
    assert!(scheduler.cancel(c));
}

#[test]
fn reschedule_moves_a_job_earlier_or_later() {
    let (scheduler, clock) = manual(1);
    let log = Log::default();
    let early = scheduler.schedule(Duration::from_secs(60), log.job(&clock, 1)).unwrap();
    let late = scheduler.schedule(5 * MS, log.job(&clock, 2)).unwrap();
    assert_eq!(scheduler.reschedule(early, 2 * MS), Ok(true));
    assert_eq!(scheduler.reschedule(late, 100 * MS), Ok(true));
    advance(&scheduler, &clock, 2 * MS);
    assert_eq!(log.ids(), [1]);
    advance(&scheduler, &clock, 50 * MS);
    assert_eq!(log.ids(), [1]);
    advance(&scheduler, &clock, 50 * MS);
    assert_eq!(log.ids(), [1, 2]);
    assert_eq!(
        scheduler.reschedule(late, Scheduler::MAX_DELAY + MS),
        Err(ScheduleError::DelayTooLong { max: Scheduler::MAX_DELAY })
    );
}

#[test]
fn bad_input_gets_a_clear_error() {
    let (scheduler, _clock) = manual(1);
    let too_long = scheduler.schedule(Scheduler::MAX_DELAY + MS, || {});
    assert_eq!(too_long, Err(ScheduleError::DelayTooLong { max: Scheduler::MAX_DELAY }));
    let too_short = scheduler.schedule_every(Duration::from_micros(10), || {});
    assert_eq!(too_short, Err(ScheduleError::PeriodTooShort { min: MS }));
    assert!(too_short.unwrap_err().to_string().contains("shorter than one tick"));
    let bounded = Scheduler::builder().workers(1).max_pending(2).clock(ManualClock::new()).build().unwrap();
    bounded.schedule(MS, || {}).unwrap();
    bounded.schedule(MS, || {}).unwrap();
    assert_eq!(bounded.schedule(MS, || {}), Err(ScheduleError::Full { max_pending: 2 }));
}

#[test]
fn a_cancel_racing_the_deadline_either_prevents_the_run_or_returns_false() {
    const JOBS: usize = 20_000;
    let (scheduler, clock) = manual(2);
    let ran: Arc<Vec<AtomicUsize>> = Arc::new((0..JOBS).map(|_| AtomicUsize::new(0)).collect());
    let ids: Vec<TaskId> = (0..JOBS)
        .map(|i| {
            let ran = ran.clone();
            scheduler.schedule(MS, move || _ = ran[i].fetch_add(1, Ordering::SeqCst)).unwrap()
        })
        .collect();
    let go = Barrier::new(2);
    let cancelled: Vec<bool> = thread::scope(|s| {
        let canceller = s.spawn(|| {
            go.wait();
            ids.iter().rev().map(|&id| scheduler.cancel(id)).collect::<Vec<bool>>()
        });
        go.wait();
        clock.advance(MS);
        let mut cancelled = canceller.join().unwrap();
        cancelled.reverse();
        cancelled
    });
    assert!(scheduler.wait_until_idle(IDLE_TIMEOUT));
    for i in 0..JOBS {
        let runs = ran[i].load(Ordering::SeqCst);
        assert_eq!(runs + usize::from(cancelled[i]), 1, "job {i}: ran {runs} times, cancel said {}", cancelled[i]);
    }
    let stats = scheduler.stats();
    println!("race: {} cancelled in time, {} ran", stats.cancelled, stats.fired);
    assert_eq!(stats.cancelled + stats.fired, JOBS as u64);
}

#[test]
fn shutdown_waits_for_running_jobs_and_reports_dropped_ones() {
    let (scheduler, clock) = manual(1);
    let (started_tx, started) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let finished = Arc::new(AtomicUsize::new(0));
    {
        let finished = finished.clone();
        scheduler
            .schedule(Duration::ZERO, move || {
                started_tx.send(()).unwrap();
                released.recv().unwrap();
                finished.store(1, Ordering::SeqCst);
            })
            .unwrap();
    }
    let later = scheduler.schedule(Duration::from_secs(5), || panic!("must not run")).unwrap();
    started.recv().unwrap();
    let report = thread::scope(|s| {
        let shutdown = s.spawn(|| {
            let report = scheduler.shutdown();
            (report, finished.load(Ordering::SeqCst))
        });
        // Refusal comes first: the shutdown stops accepting before it waits.
        while !scheduler.is_shutdown() {
            thread::yield_now();
        }
        assert_eq!(scheduler.schedule(MS, || {}), Err(ScheduleError::Shutdown));
        release.send(()).unwrap();
        shutdown.join().unwrap()
    });
    let (report, finished_before_return) = report;
    assert_eq!(finished_before_return, 1, "shutdown returned before the running job finished");
    assert_eq!(report.dropped, vec![later]);
    assert!(!scheduler.cancel(later));
    clock.advance(Duration::from_secs(10));
    assert_eq!(scheduler.shutdown(), Default::default(), "a second shutdown has nothing to report");
}

#[test]
fn shutdown_drain_runs_what_is_due_by_the_deadline() {
    let (scheduler, clock) = manual(2);
    let log = Log::default();
    scheduler.schedule(3 * MS, log.job(&clock, 1)).unwrap();
    scheduler.schedule(5 * MS, log.job(&clock, 2)).unwrap();
    let dropped = scheduler.schedule(10 * MS, log.job(&clock, 3)).unwrap();
    let until = clock.now() + 5 * MS;
    let report = thread::scope(|s| {
        let drain = s.spawn(|| scheduler.shutdown_drain(until));
        while !scheduler.is_shutdown() {
            thread::yield_now();
        }
        clock.advance(5 * MS);
        drain.join().unwrap()
    });
    assert_eq!(log.ids(), [1, 2]);
    assert_eq!(report.dropped, vec![dropped]);
    assert_eq!(report.ran, 2);
}

#[test]
fn dropping_the_scheduler_shuts_it_down() {
    let (scheduler, _clock) = manual(1);
    let handle = scheduler.handle();
    let id = handle.schedule(Duration::from_secs(1), || {}).unwrap();
    drop(scheduler);
    assert!(handle.is_shutdown());
    assert_eq!(handle.schedule(MS, || {}), Err(ScheduleError::Shutdown));
    assert!(!handle.cancel(id));
}

#[test]
fn a_panicking_job_is_counted_and_the_worker_lives_on() {
    let (scheduler, clock) = manual(1);
    let log = Log::default();
    scheduler.schedule(MS, || panic!("job panics on purpose")).unwrap();
    scheduler.schedule(2 * MS, log.job(&clock, 1)).unwrap();
    advance(&scheduler, &clock, 2 * MS);
    assert_eq!(log.ids(), [1]);
    let stats = scheduler.stats();
    assert_eq!((stats.panicked, stats.fired), (1, 2));
}

#[test]
fn jobs_can_schedule_more_jobs_through_a_handle() {
    let (scheduler, clock) = manual(1);
    let log = Log::default();
    let handle = scheduler.handle();
    let second = log.job(&clock, 2);
    let first = log.job(&clock, 1);
    scheduler
        .schedule(MS, move || {
            first();
            handle.schedule(MS, second).unwrap();
        })
        .unwrap();
    advance(&scheduler, &clock, MS);
    assert_eq!(log.ids(), [1]);
    advance(&scheduler, &clock, MS);
    assert_eq!(log.ids(), [1, 2]);
}

#[test]
fn repeating_jobs_keep_a_fixed_rate_without_drift() {
    let (scheduler, clock) = manual(1);
    let start = clock.now();
    let runs = Arc::new(Mutex::new(Vec::new()));
    let id = {
        let (runs, clock) = (runs.clone(), clock.clone());
        scheduler.schedule_every(10 * MS, move || runs.lock().push(clock.now() - start)).unwrap()
    };
    for _ in 0..5 {
        // Uneven steps: 7 + 3 ms per period. The grid must not move.
        advance(&scheduler, &clock, 7 * MS);
        advance(&scheduler, &clock, 3 * MS);
    }
    let expected: Vec<Duration> = (1..=5).map(|n| n * 10 * MS).collect();
    assert_eq!(*runs.lock(), expected);
    assert!(scheduler.cancel(id));
    advance(&scheduler, &clock, 100 * MS);
    assert_eq!(runs.lock().len(), 5, "a cancelled repeating job stops");
}

#[test]
fn a_stall_skips_missed_runs_by_default() {
    let (scheduler, clock) = manual(1);
    let start = clock.now();
    let runs = Arc::new(Mutex::new(Vec::new()));
    {
        let (runs, clock) = (runs.clone(), clock.clone());
        scheduler.schedule_every(10 * MS, move || runs.lock().push(clock.now() - start)).unwrap();
    }
    advance(&scheduler, &clock, 35 * MS); // occurrences at 10, 20, 30: one run, two skipped
    advance(&scheduler, &clock, 5 * MS); // 40: back on the grid
    assert_eq!(*runs.lock(), [35 * MS, 40 * MS]);
    assert_eq!(scheduler.stats().skipped, 2);
}

#[test]
fn the_delay_policy_restarts_the_grid_after_a_stall() {
    let clock = ManualClock::new();
    let scheduler =
        Scheduler::builder().workers(1).clock(clock.clone()).missed_runs(MissedRuns::Delay).build().unwrap();
    let start = clock.now();
    let runs = Arc::new(Mutex::new(Vec::new()));
    {
        let (runs, clock) = (runs.clone(), clock.clone());
        scheduler.schedule_every(10 * MS, move || runs.lock().push(clock.now() - start)).unwrap();
    }
    advance(&scheduler, &clock, 35 * MS);
    advance(&scheduler, &clock, 5 * MS);
    advance(&scheduler, &clock, 5 * MS);
    assert_eq!(*runs.lock(), [35 * MS, 45 * MS]);
}

#[test]
fn a_repeating_job_never_overlaps_itself() {
    let (scheduler, clock) = manual(2);
    let (started_tx, started) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let released = Mutex::new(released);
    let active = Arc::new(AtomicUsize::new(0));
    let overlapped = Arc::new(AtomicUsize::new(0));
    {
        let (active, overlapped) = (active.clone(), overlapped.clone());
        scheduler
            .schedule_every(10 * MS, move || {
                if active.fetch_add(1, Ordering::SeqCst) > 0 {
                    overlapped.fetch_add(1, Ordering::SeqCst);
                }
                started_tx.send(()).unwrap();
                released.lock().recv().unwrap();
                active.fetch_sub(1, Ordering::SeqCst);
            })
            .unwrap();
    }
    clock.advance(10 * MS);
    started.recv().unwrap(); // the first run is in progress and blocked
    clock.advance(10 * MS); // the second occurrence comes due while it runs
    clock.advance(10 * MS); // and the third
                            // Wait until the driver has handled both occurrences (they are skipped).
    while scheduler.stats().skipped < 2 {
        thread::yield_now();
    }
    release.send(()).unwrap();
    assert!(scheduler.wait_until_idle(IDLE_TIMEOUT));
    clock.advance(10 * MS);
    started.recv().unwrap();
    release.send(()).unwrap();
    assert!(scheduler.wait_until_idle(IDLE_TIMEOUT));
    assert_eq!(overlapped.load(Ordering::SeqCst), 0);
    assert_eq!(scheduler.stats().fired, 2);
    assert_eq!(scheduler.stats().skipped, 2);
}

/// Blocks the only worker and fills its one-slot queue, so further due jobs
/// form a backlog in the wheel. Returns the gate that releases the worker.
fn saturate(scheduler: &Scheduler) -> mpsc::Sender<()> {
    let (started_tx, started) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    scheduler
        .schedule(Duration::ZERO, move || {
            started_tx.send(()).unwrap();
            released.recv().unwrap();
        })
        .unwrap();
    started.recv().unwrap();
    scheduler.schedule(Duration::ZERO, || {}).unwrap(); // fills the queue
    while scheduler.stats().in_flight < 2 {
        thread::yield_now();
    }
    release
}

#[test]
fn overload_queue_keeps_due_jobs_in_the_wheel_cancellable() {
    let clock = ManualClock::new();
    let scheduler = Scheduler::builder().workers(1).queue_capacity(1).clock(clock.clone()).build().unwrap();
    let release = saturate(&scheduler);
    let log = Log::default();
    let ids: Vec<TaskId> = (0..5).map(|i| scheduler.schedule(Duration::ZERO, log.job(&clock, i)).unwrap()).collect();
    assert_eq!(scheduler.stats().due_backlog, 5);
    assert!(scheduler.cancel(ids[2]), "a job waiting in the backlog can still be cancelled");
    release.send(()).unwrap();
    assert!(scheduler.wait_until_idle(IDLE_TIMEOUT));
    assert_eq!(log.ids(), [0, 1, 3, 4]);
}

#[test]
fn overload_reject_fails_fast_with_an_error() {
    let clock = ManualClock::new();
    let scheduler = Scheduler::builder()
        .workers(1)
        .queue_capacity(1)
        .overload(OverloadPolicy::Reject)
        .max_backlog(3)
        .clock(clock)
        .build()
        .unwrap();
    let release = saturate(&scheduler);
    for _ in 0..3 {
        scheduler.schedule(Duration::ZERO, || {}).unwrap();
    }
    assert_eq!(scheduler.schedule(Duration::ZERO, || {}), Err(ScheduleError::Overloaded { max_backlog: 3 }));
    release.send(()).unwrap();
    assert!(scheduler.wait_until_idle(IDLE_TIMEOUT));
    scheduler.schedule(Duration::ZERO, || {}).expect("accepted again once the backlog is gone");
}

#[test]
fn overload_caller_runs_makes_producers_help() {
    let clock = ManualClock::new();
    let scheduler = Scheduler::builder()
        .workers(1)
        .queue_capacity(1)
        .overload(OverloadPolicy::CallerRuns)
        .max_backlog(2)
        .clock(clock)
        .build()
        .unwrap();
    let release = saturate(&scheduler);
    let ran_on = Arc::new(Mutex::new(HashSet::new()));
    for _ in 0..6 {
        let ran_on = ran_on.clone();
        scheduler.schedule(Duration::ZERO, move || _ = ran_on.lock().insert(thread::current().id())).unwrap();
    }
    assert!(ran_on.lock().contains(&thread::current().id()), "the producer ran a due job itself");
    release.send(()).unwrap();
    assert!(scheduler.wait_until_idle(IDLE_TIMEOUT));
    assert_eq!(scheduler.stats().fired, 8);
}

#[test]
fn many_producers_at_once() {
    const PER_THREAD: usize = 5_000;
    let (scheduler, clock) = manual(2);
    let ran = Arc::new(AtomicUsize::new(0));
    thread::scope(|s| {
        for t in 0..4u64 {
            let (scheduler, ran) = (&scheduler, ran.clone());
            s.spawn(move || {
                for i in 0..PER_THREAD as u64 {
                    let ran = ran.clone();
                    let id = scheduler
                        .schedule(Duration::from_millis(1 + (i * 7 + t) % 500), move || {
                            ran.fetch_add(1, Ordering::Relaxed);
                        })
                        .unwrap();
                    if i % 10 == 0 {
                        assert!(scheduler.cancel(id));
                    }
                }
            });
        }
    });
    advance(&scheduler, &clock, Duration::from_secs(1));
    assert_eq!(ran.load(Ordering::Relaxed), 4 * (PER_THREAD - PER_THREAD / 10));
}

#[cfg(feature = "tokio")]
#[test]
fn async_jobs_run_on_the_given_runtime() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).thread_name("test-runtime").build().unwrap();
    let clock = ManualClock::new();
    let scheduler =
        Scheduler::builder().workers(1).clock(clock.clone()).tokio_handle(runtime.handle().clone()).build().unwrap();
    let (tx, rx) = mpsc::channel();
    let handle = scheduler.handle();
    handle
        .schedule_async(5 * MS, async move { tx.send(thread::current().name().map(str::to_owned)).unwrap() })
        .unwrap();
    handle.schedule_async(5 * MS, async { panic!("async job panics on purpose") }).unwrap();
    clock.advance(5 * MS);
    assert_eq!(rx.recv().unwrap().as_deref(), Some("test-runtime"));
    while scheduler.stats().panicked < 1 {
        thread::yield_now();
    }
    assert_eq!(scheduler.stats().fired, 2);
    let without = Scheduler::builder().workers(1).clock(ManualClock::new()).build().unwrap();
    assert_eq!(without.handle().schedule_async(MS, async {}), Err(ScheduleError::NoRuntime));
}

/// Never early at the edges of a millisecond: the clock stands at 1.7 ms, so
/// a job 20 ms ahead is due at 21.7 ms. A due time truncated to the
/// millisecond would run it at 21 ms; it runs at 22 ms, the first tick at or
/// after its due time, and its lateness is counted from 21.7 ms.
#[test]
fn a_clock_in_mid_millisecond_never_runs_a_job_early() {
    let (scheduler, clock) = manual(2);
    let start = clock.now();
    let log = Log::default();
    clock.advance(Duration::from_micros(1_700));
    let due = clock.now() + 20 * MS;
    scheduler.schedule(20 * MS, log.job(&clock, 0)).unwrap();
    scheduler.schedule_at(due, log.job(&clock, 1)).unwrap();
    let moved = scheduler.schedule(Duration::from_secs(60), log.job(&clock, 2)).unwrap();
    assert!(scheduler.reschedule(moved, 20 * MS).unwrap());
    let ran = Arc::new(AtomicUsize::new(0));
    let every = ran.clone();
    let repeating = scheduler
        .schedule_every(20 * MS, move || {
            every.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    advance(&scheduler, &clock, (start + 21 * MS) - clock.now());
    assert_eq!(log.ids(), [] as [usize; 0], "ran at 21 ms, before 21.7 ms");
    advance(&scheduler, &clock, (due - Duration::from_nanos(1)) - clock.now());
    assert_eq!(log.ids(), [] as [usize; 0], "ran a nanosecond early");
    assert_eq!(ran.load(Ordering::SeqCst), 0, "the repeating job ran early");
    advance(&scheduler, &clock, (start + 22 * MS) - clock.now());
    assert_eq!(log.ids(), [0, 1, 2]);
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert!(log.0.lock().iter().all(|&(_, at)| at >= due));
    let lateness = scheduler.stats().lateness;
    assert_eq!(lateness.samples, 4);
    // From the true due time (21.7 ms), not from the tick (0) or a truncated one (1 ms).
    let late = Duration::from_micros(300);
    assert!(lateness.max.abs_diff(late) < Duration::from_micros(1), "lateness {:?}, not {late:?}", lateness.max);
    assert!(lateness.p50.abs_diff(late) < Duration::from_micros(1), "lateness {:?}, not {late:?}", lateness.p50);
    // Its next run is due at 41.7 ms.
    advance(&scheduler, &clock, (start + 41 * MS) - clock.now());
    assert_eq!(ran.load(Ordering::SeqCst), 1, "the second run came early");
    advance(&scheduler, &clock, MS);
    assert_eq!(ran.load(Ordering::SeqCst), 2);
    assert!(scheduler.cancel(repeating));
}
