//! Seed 000's scenario at scale, on the real clock: 100,000 jobs with random
//! delays up to 2 s, scheduled from several threads, every seventh cancelled and
//! every eleventh rescheduled. Exactly the right ones must run, none early.
//! Timing bounds are generous (the machine is shared); the lateness measured
//! is printed.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use hourglass::Scheduler;
use rand::{Rng, SeedableRng};

const JOBS: usize = 100_000;
const PRODUCERS: usize = 4;
const MAX_DELAY_MS: u64 = 2_000;
/// Far beyond any lateness a healthy run shows, even with the two cores
/// shared by other builds and tests; only a hang trips it.
const GENEROUS_LATENESS: Duration = Duration::from_secs(20);

struct Record {
    runs: Vec<AtomicU8>,
    /// When each job ran, in ns since `base`.
    ran_at_ns: Vec<AtomicU64>,
    base: Instant,
}

#[test]
fn hundred_thousand_jobs_from_several_threads() {
    let scheduler = Scheduler::new();
    let record = Arc::new(Record {
        runs: (0..JOBS).map(|_| AtomicU8::new(0)).collect(),
        ran_at_ns: (0..JOBS).map(|_| AtomicU64::new(0)).collect(),
        base: Instant::now(),
    });
    let started = Instant::now();
    // Per producer: (job, due instant, cancelled) for the jobs it owns.
    let outcomes: Vec<Vec<(usize, Instant, bool)>> = thread::scope(|s| {
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let (scheduler, record) = (&scheduler, record.clone());
                s.spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(p as u64);
                    let mut outcomes = Vec::new();
                    for job in (p..JOBS).step_by(PRODUCERS) {
                        let delay = Duration::from_millis(rng.random_range(0..=MAX_DELAY_MS));
                        let record = record.clone();
                        let mut due = Instant::now() + delay;
                        let id = scheduler
                            .schedule(delay, move || {
                                let ran_at = record.base.elapsed().as_nanos() as u64;
                                record.ran_at_ns[job].store(ran_at, Ordering::SeqCst);
                                record.runs[job].fetch_add(1, Ordering::SeqCst);
                            })
                            .unwrap();
                        let mut cancelled = false;
                        if job % 7 == 0 {
                            cancelled = scheduler.cancel(id);
                        } else if job % 11 == 0 {
                            let delay = Duration::from_millis(rng.random_range(0..=MAX_DELAY_MS));
                            let new_due = Instant::now() + delay;
                            if scheduler.reschedule(id, delay).unwrap() {
                                due = new_due;
                            }
                        }
                        outcomes.push((job, due, cancelled));
                    }
                    outcomes
                })
            })
            .collect();
        producers.into_iter().map(|p| p.join().unwrap()).collect()
    });
    let scheduled_in = started.elapsed();
    // Everything is due within MAX_DELAY_MS of now: a sentinel due just after
    // tells when the clock got there, then the workers are let finish.
    let (done, finished) = std::sync::mpsc::channel();
    scheduler.schedule(Duration::from_millis(MAX_DELAY_MS + 1), move || done.send(()).unwrap()).unwrap();
    finished.recv_timeout(Duration::from_secs(60)).expect("the sentinel job never ran");
    assert!(scheduler.wait_until_idle(Duration::from_secs(30)));

    let (mut ran, mut cancelled, mut early) = (0, 0, 0);
    let mut worst_ms = 0.0f64;
    for (job, due, was_cancelled) in outcomes.into_iter().flatten() {
        let runs = record.runs[job].load(Ordering::SeqCst);
        if was_cancelled {
            assert_eq!(runs, 0, "cancelled job {job} ran");
            cancelled += 1;
            continue;
        }
        assert_eq!(runs, 1, "job {job} ran {runs} times");
        ran += 1;
        let ran_at = record.base + Duration::from_nanos(record.ran_at_ns[job].load(Ordering::SeqCst));
        if ran_at < due {
            early += 1;
        }
        worst_ms = worst_ms.max(ran_at.saturating_duration_since(due).as_secs_f64() * 1e3);
    }
    let stats = scheduler.stats();
    println!(
        "realtime: {JOBS} jobs scheduled from {PRODUCERS} threads in {scheduled_in:?}; ran {ran}, cancelled {cancelled}, \
         early {early}; lateness p50 {:?} p99 {:?} max {:?} (test-side max {worst_ms:.3} ms)",
        stats.lateness.p50, stats.lateness.p99, stats.lateness.max
    );
    assert_eq!(early, 0, "jobs ran before their due time");
    assert_eq!(ran + cancelled, JOBS);
    assert_eq!(stats.fired, ran as u64 + 1, "every job and the sentinel");
    assert_eq!(stats.cancelled, cancelled as u64);
    assert_eq!(stats.pending, 0);
    assert!(stats.lateness.max < GENEROUS_LATENESS, "lateness max {:?}", stats.lateness.max);
}

/// `DelayQueue` on a real tokio runtime, real time: 20,000 values with random
/// delays up to 500 ms, inserted while the consumer already waits, every
/// seventh removed and every eleventh reset. Exactly the right values come
/// out, in deadline order, none before its deadline; lateness is printed.
#[cfg(feature = "tokio")]
#[test]
fn delay_queue_on_the_real_clock() {
    use futures_util::StreamExt;
    use hourglass::DelayQueue;
    use tokio::time::Instant as TokioInstant;

    const VALUES: usize = 20_000;
    const DELAY_MS_MAX: u64 = 500;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    let (expected, got, mut lateness_us) = runtime.block_on(async {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let mut queue = DelayQueue::with_capacity(VALUES);
        let mut expected: Vec<(TokioInstant, usize)> = Vec::new();
        let mut keys = Vec::new();
        for value in 0..VALUES {
            let due = TokioInstant::now() + Duration::from_millis(rng.random_range(1..=DELAY_MS_MAX));
            keys.push((queue.insert_at(value, due), due));
        }
        for (value, &(key, due)) in keys.iter().enumerate() {
            if value % 7 == 0 {
                assert_eq!(queue.remove(&key).into_inner(), value);
            } else if value % 11 == 0 {
                let moved = due + Duration::from_millis(100);
                queue.reset_at(&key, moved);
                expected.push((moved, value));
            } else {
                expected.push((due, value));
            }
        }
        let mut got = Vec::new();
        let mut lateness_us = Vec::new();
        let mut last_deadline = None;
        while let Some(expired) = queue.next().await {
            let now = TokioInstant::now();
            assert!(now >= expired.deadline(), "value {} came out early", expired.get_ref());
            assert!(last_deadline <= Some(expired.deadline()), "out of deadline order");
            last_deadline = Some(expired.deadline());
            lateness_us.push((now - expired.deadline()).as_micros() as u64);
            got.push(expired.into_inner());
        }
        (expected, got, lateness_us)
    });
    let mut expected_values: Vec<usize> = expected.iter().map(|&(_, value)| value).collect();
    let mut got_sorted = got.clone();
    expected_values.sort_unstable();
    got_sorted.sort_unstable();
    assert_eq!(got_sorted, expected_values, "exactly the values not removed came out");
    lateness_us.sort_unstable();
    let at = |q: f64| lateness_us[((lateness_us.len() - 1) as f64 * q) as usize];
    println!(
        "DelayQueue, real clock: {} values, lateness from the rounded-up deadline p50 {} us, p99 {} us, max {} us",
        got.len(),
        at(0.5),
        at(0.99),
        at(1.0)
    );
    assert!(Duration::from_micros(at(1.0)) < GENEROUS_LATENESS, "a value was {} us late", at(1.0));
}
