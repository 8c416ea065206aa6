//! What a run measures and how it shows it: latency histograms in µs, a
//! progress bar on the terminal (cleared before the result), deliveries
//! tallied across consumers, and the size of a data directory. The result
//! lines themselves are printed by each workload, in words the scripts in
//! `bench/` read (`N tasks/s`, `p50 X ms`...).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;
use hourglass_queue::{SystemWallClock, WallClock};
use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::Mutex;

/// The longest latency recorded, µs: ten minutes.
const LATENCY_US_MAX: u64 = 600_000_000;

/// This machine's clock, Unix µs: due times travel in payloads in it.
pub fn now_us() -> u64 {
    SystemWallClock.now_us()
}

/// Microseconds as milliseconds, for the result lines.
pub fn ms(us: u64) -> f64 {
    us as f64 / 1e3
}

/// A histogram of latencies in µs, 1 µs to ten minutes, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_US_MAX, 3).expect("valid bounds")
}

/// A progress bar of `total` steps named `what`.
pub fn progress(total: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{bar:40}] {pos}/{len} {per_sec} eta {eta}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    bar.set_message(what.to_owned());
    bar
}

/// Deliveries counted and their lateness, shared by the consumers of a run.
#[derive(Clone)]
pub struct Tally {
    received: Arc<AtomicU64>,
    /// When the tally began, and the last delivery since then, in ns.
    began: Instant,
    last_ns: Arc<AtomicU64>,
    lateness: Arc<Mutex<Histogram<u64>>>,
    bar: ProgressBar,
}

impl Tally {
    /// A tally shown on `bar`.
    pub fn new(bar: ProgressBar) -> Tally {
        Tally {
            received: Arc::new(AtomicU64::new(0)),
            began: Instant::now(),
            last_ns: Arc::new(AtomicU64::new(0)),
            lateness: Arc::new(Mutex::new(histogram())),
            bar,
        }
    }

    /// Deliveries so far.
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// One delivery more.
    pub fn count(&self) {
        self.received.fetch_add(1, Ordering::Relaxed);
        self.last_ns.fetch_max(self.began.elapsed().as_nanos() as u64, Ordering::Relaxed);
        self.bar.inc(1);
    }

    /// When the last delivery was counted: the end of a drain's time, not
    /// the consumers' return (a consumer in a claim that waits for a task
    /// returns up to a second later).
    pub fn last_at(&self) -> Instant {
        self.began + Duration::from_nanos(self.last_ns.load(Ordering::Relaxed))
    }

    /// Adds a consumer's lateness histogram.
    pub async fn add(&self, local: &Histogram<u64>) {
        self.lateness.lock().await.add(local).ok();
    }

    /// Clears the bar; the lateness of every delivery.
    pub async fn finish(&self) -> Histogram<u64> {
        self.bar.finish_and_clear();
        self.lateness.lock().await.clone()
    }
}

/// The bytes of the files under `dir`.
pub fn directory_bytes(dir: &std::path::Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() { directory_bytes(&entry.path())? } else { meta.len() };
    }
    Ok(total)
}
