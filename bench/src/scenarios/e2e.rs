//! Scenario 6: the whole scheduler, jobs scheduled from 2 threads and run on
//! its pool, against tokio's runtime timer and `delay_timer`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use hourglass::Scheduler;

use crate::report::{median, Row};
use crate::scenarios::structures::label;
use crate::Settings;

const PRODUCERS: usize = 2;
/// How far ahead the burst is due: producers finish scheduling well before.
const BURST_AHEAD: Duration = Duration::from_secs(2);
/// Background jobs for the lateness run are due this far ahead, never fire.
const FAR_AHEAD: Duration = Duration::from_secs(3_600);
/// The histogram's range: a minute of lateness is a failure, not a figure.
const LATENESS_NS_MAX: u64 = 60_000_000_000;

/// Counts runs of a burst and remembers the first start and the last finish.
struct Burst {
    base: Instant,
    n: usize,
    done: AtomicUsize,
    first_start_ns: AtomicU64,
    last_end_ns: AtomicU64,
    finished: Mutex<Option<mpsc::Sender<()>>>,
}

impl Burst {
    fn new(n: usize) -> (Arc<Burst>, mpsc::Receiver<()>) {
        let (tx, rx) = mpsc::channel();
        let burst = Burst {
            base: Instant::now(),
            n,
            done: AtomicUsize::new(0),
            first_start_ns: AtomicU64::new(u64::MAX),
            last_end_ns: AtomicU64::new(0),
            finished: Mutex::new(Some(tx)),
        };
        (Arc::new(burst), rx)
    }

    fn run(&self) {
        self.first_start_ns.fetch_min(self.base.elapsed().as_nanos() as u64, Relaxed);
        self.last_end_ns.fetch_max(self.base.elapsed().as_nanos() as u64, Relaxed);
        if self.done.fetch_add(1, Relaxed) + 1 == self.n {
            if let Some(tx) = self.finished.lock().unwrap().take() {
                let _ = tx.send(());
            }
        }
    }

    /// Runs per second from the first start to the last finish.
    fn rate(&self, finished: &mpsc::Receiver<()>) -> f64 {
        finished.recv_timeout(Duration::from_secs(600)).expect("the burst finished");
        let span_ns = self.last_end_ns.load(Relaxed).saturating_sub(self.first_start_ns.load(Relaxed)).max(1);
        self.n as f64 * 1e9 / span_ns as f64
    }
}

/// Splits `n` jobs over the producers, runs `schedule(job)` for each, and
/// returns the wall time per scheduled job.
fn produce(n: usize, schedule: impl Fn(usize) + Sync) -> f64 {
    let start = Instant::now();
    thread::scope(|s| {
        for p in 0..PRODUCERS {
            let schedule = &schedule;
            s.spawn(move || (p..n).step_by(PRODUCERS).for_each(schedule));
        }
    });
    start.elapsed().as_nanos() as f64 / n as f64
}

/// Runs `burst` (which returns schedule ns per job and runs per second) once
/// per repetition; rows of the medians.
fn burst_rows(
    settings: &Settings,
    imp: &'static str,
    n: usize,
    note: Option<&str>,
    burst: impl Fn(usize) -> (f64, f64),
) -> [Row; 2] {
    let (schedule, rate): (Vec<f64>, Vec<f64>) = (0..settings.reps).map(|_| burst(n)).unzip();
    let note = note.map(str::to_owned);
    [
        Row {
            ns_per_op: Some(median(schedule)),
            note: note.clone(),
            ..Row::new("e2e", "schedule_2threads", imp, n as u64)
        },
        Row { per_sec: Some(median(rate)), note, ..Row::new("e2e", format!("burst_{}", label(n)), imp, n as u64) },
    ]
}

pub fn burst_hourglass(settings: &Settings, n: usize) -> [Row; 2] {
    burst_rows(settings, "hourglass", n, None, burst_hourglass_once)
}

pub fn burst_tokio(settings: &Settings, n: usize) -> [Row; 2] {
    burst_rows(settings, "tokio-spawn-sleep", n, None, burst_tokio_once)
}

pub fn burst_delay_timer(settings: &Settings, n: usize) -> [Row; 2] {
    burst_rows(settings, "delay_timer", n, Some("1 s resolution"), burst_delay_timer_once)
}

/// `n` jobs all due at one instant: schedule cost from 2 threads, and jobs per
/// second from the first run's start to the last run's end.
fn burst_hourglass_once(n: usize) -> (f64, f64) {
    let scheduler = Scheduler::builder().max_pending(n + 1).build().unwrap();
    let (burst, finished) = Burst::new(n);
    let due = Instant::now() + BURST_AHEAD;
    let schedule_ns = produce(n, |_| {
        let burst = burst.clone();
        scheduler.schedule_at(due, move || burst.run()).unwrap();
    });
    (schedule_ns, burst.rate(&finished))
}

fn burst_tokio_once(n: usize) -> (f64, f64) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    let (burst, finished) = Burst::new(n);
    let due = tokio::time::Instant::now() + BURST_AHEAD;
    let schedule_ns = produce(n, |_| {
        let burst = burst.clone();
        runtime.spawn(async move {
            tokio::time::sleep_until(due).await;
            burst.run();
        });
    });
    (schedule_ns, burst.rate(&finished))
}

fn burst_delay_timer_once(n: usize) -> (f64, f64) {
    use delay_timer::prelude::{DelayTimerBuilder, TaskBuilder};
    let timer = DelayTimerBuilder::default().build();
    let (burst, finished) = Burst::new(n);
    let seconds = BURST_AHEAD.as_secs();
    let schedule_ns = produce(n, |i| {
        let burst = burst.clone();
        let task = TaskBuilder::default()
            .set_task_id(i as u64)
            .set_frequency_once_by_seconds(seconds)
            .set_maximum_parallel_runnable_num(1)
            .spawn_routine(move || burst.run())
            .unwrap();
        timer.add_task(task).unwrap();
    });
    let rate = burst.rate(&finished);
    let _ = timer.stop_delay_timer();
    (schedule_ns, rate)
}

/// Lateness of jobs arriving at `rate_per_sec` (due 10 ms to 1 s ahead) from 2
/// threads, with `pending` other jobs waiting far in the future.
pub fn lateness_hourglass(settings: &Settings, pending: usize, rate_per_sec: u64) -> Row {
    let scheduler = Scheduler::builder().max_pending(pending * 2 + 1_000_000).build().unwrap();
    for _ in 0..pending {
        scheduler.schedule(FAR_AHEAD, || {}).unwrap();
    }
    let recorder = Recorder::new();
    let sent = paced(settings, rate_per_sec, |due| {
        let recorder = recorder.clone();
        scheduler.schedule_at(due, move || recorder.record(due)).unwrap();
    });
    recorder.row("hourglass", pending, sent)
}

pub fn lateness_tokio(settings: &Settings, pending: usize, rate_per_sec: u64) -> Row {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    for _ in 0..pending {
        runtime.spawn(async { tokio::time::sleep(FAR_AHEAD).await });
    }
    let recorder = Recorder::new();
    let sent = paced(settings, rate_per_sec, |due| {
        let recorder = recorder.clone();
        runtime.spawn(async move {
            tokio::time::sleep_until(due.into()).await;
            recorder.record(due);
        });
    });
    let row = recorder.row("tokio-spawn-sleep", pending, sent);
    runtime.shutdown_background();
    row
}

#[derive(Clone)]
struct Recorder(Arc<(Mutex<Histogram<u64>>, AtomicUsize)>);

impl Recorder {
    fn new() -> Recorder {
        // Bounds must be explicit: `saturating_record` clamps into the range.
        let histogram = Histogram::new_with_bounds(1, LATENESS_NS_MAX, 3).unwrap();
        Recorder(Arc::new((Mutex::new(histogram), AtomicUsize::new(0))))
    }

    fn record(&self, due: Instant) {
        let lateness_ns = Instant::now().saturating_duration_since(due).as_nanos() as u64;
        self.0 .0.lock().unwrap().saturating_record(lateness_ns.max(1));
        self.0 .1.fetch_add(1, Relaxed);
    }

    fn row(&self, imp: &'static str, pending: usize, sent: (usize, f64)) -> Row {
        let (jobs, secs) = sent;
        // Wait for the last jobs (due at most 1 s after the last was sent).
        let give_up = Instant::now() + Duration::from_secs(60);
        while self.0 .1.load(Relaxed) < jobs && Instant::now() < give_up {
            thread::sleep(Duration::from_millis(50));
        }
        let histogram = self.0 .0.lock().unwrap();
        let at = |q: f64| Duration::from_nanos(histogram.value_at_quantile(q));
        Row {
            per_sec: Some(jobs as f64 / secs),
            lateness: Some([at(0.5), at(0.99), Duration::from_nanos(histogram.max())]),
            note: Some(format!("{} of {jobs} ran, {} pending far ahead", histogram.len(), label(pending))),
            ..Row::new("e2e", "lateness_100k_per_s", imp, jobs as u64)
        }
    }
}

/// Calls `schedule(due)` at `rate_per_sec` in all, from 2 threads, for the
/// configured seconds; returns (jobs sent, seconds taken).
fn paced(settings: &Settings, rate_per_sec: u64, schedule: impl Fn(Instant) + Sync) -> (usize, f64) {
    let per_thread = rate_per_sec / PRODUCERS as u64;
    let jobs_per_thread = (per_thread as f64 * settings.lateness_secs) as usize;
    let interval = Duration::from_nanos(1_000_000_000 / per_thread);
    let start = Instant::now();
    thread::scope(|s| {
        for p in 0..PRODUCERS {
            let schedule = &schedule;
            s.spawn(move || {
                let ahead_ms = |i: usize| 10 + ((i * 7919 + p * 104_729) % 990) as u64;
                for i in 0..jobs_per_thread {
                    let at = start + interval * i as u32;
                    let now = Instant::now();
                    if at > now + Duration::from_micros(500) {
                        thread::sleep(at - now);
                    }
                    schedule(Instant::now() + Duration::from_millis(ahead_ms(i)));
                }
            });
        }
    });
    (jobs_per_thread * PRODUCERS, start.elapsed().as_secs_f64())
}
