//! hourglass and its peers, side by side, in one process run.
//!
//! ```sh
//! cargo run --release -p hourglass-bench -- --quick          # about a minute on 2 cores
//! cargo run --release -p hourglass-bench                     # the full run for BENCHMARKS.md
//! cargo run --release -p hourglass-bench -- --json --only churn
//! ```

mod alloc;
mod baselines;
mod queues;
mod report;
mod scenarios;

use std::time::Instant;

use clap::Parser;

use baselines::{BTree, LazyHeap, SortedVec};
use queues::{Hhwt, Hourglass, HourglassDelayQueue, TimerQueue, TokioDelayQueue, TokioSleep};
use report::Row;
use scenarios::{contention, e2e, idle, structures};

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

#[derive(Parser, Debug)]
#[command(about = "Benchmarks hourglass against its peers, side by side, and prints medians and ratios")]
struct Args {
    /// Smaller sizes and fewer repetitions: under two minutes on 2 cores.
    #[arg(long)]
    quick: bool,
    /// One JSON object per line instead of the table.
    #[arg(long)]
    json: bool,
    /// Run only the scenarios whose name starts with one of these (churn,
    /// timeouts, cancel, expiry, memory, e2e, idle, contention).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Run only the implementations whose name starts with one of these.
    #[arg(long, value_delimiter = ',')]
    impls: Vec<String>,
}

/// Sizes and repetitions of a run.
pub struct Settings {
    pub reps: usize,
    pub churn_sizes: Vec<usize>,
    pub churn_ops: usize,
    pub request_batches: usize,
    pub big_n: usize,
    pub memory_sizes: Vec<usize>,
    pub burst_n: usize,
    pub burst_n_delay_timer: usize,
    pub lateness_secs: f64,
    pub idle_secs: f64,
    pub contention_pairs: usize,
}

impl Settings {
    fn new(quick: bool) -> Settings {
        if quick {
            Settings {
                reps: 3,
                churn_sizes: vec![1_000_000],
                churn_ops: 300_000,
                request_batches: 20,
                big_n: 1_000_000,
                memory_sizes: vec![1_000_000],
                burst_n: 100_000,
                burst_n_delay_timer: 20_000,
                lateness_secs: 2.0,
                idle_secs: 1.0,
                contention_pairs: 200_000,
            }
        } else {
            Settings {
                reps: 5,
                churn_sizes: vec![1_000_000, 10_000_000],
                churn_ops: 2_000_000,
                request_batches: 100,
                big_n: 1_000_000,
                memory_sizes: vec![1_000_000, 10_000_000],
                burst_n: 1_000_000,
                burst_n_delay_timer: 100_000,
                lateness_secs: 5.0,
                idle_secs: 3.0,
                contention_pairs: 1_000_000,
            }
        }
    }
}

/// Pending timers behind the request-timeout scenario.
const REQUEST_PENDING: usize = 100_000;
/// The fire rate of the lateness scenario.
const LATENESS_RATE_PER_SEC: u64 = 100_000;

struct Run {
    args: Args,
    settings: Settings,
    rows: Vec<Row>,
}

impl Run {
    fn wants(&self, scenario: &str) -> bool {
        self.args.only.is_empty() || self.args.only.iter().any(|only| scenario.starts_with(only.as_str()))
    }

    fn wants_impl(&self, imp: &str) -> bool {
        self.args.impls.is_empty() || self.args.impls.iter().any(|only| imp.starts_with(only.as_str()))
    }

    fn add(&mut self, rows: impl IntoIterator<Item = Row>) {
        for row in rows {
            eprintln!("  {:<52} done", row.name());
            if self.args.json {
                println!("{}", row.json());
            }
            self.rows.push(row);
        }
    }

    /// Scenario 2 with a million pending, for the two DelayQueues: insert and
    /// remove at the size the other DelayQueue rows use.
    fn timeouts_at_big_n<Q: TimerQueue>(&mut self) {
        if self.wants("timeouts") && self.wants_impl(Q::NAME) {
            self.add(structures::request_timeouts::<Q>(&self.settings, self.settings.big_n));
        }
    }

    /// Scenarios 1 to 5 for one data structure.
    fn structure<Q: TimerQueue>(&mut self, small_n_only: bool) {
        if !self.wants_impl(Q::NAME) {
            return;
        }
        let s = &self.settings;
        if !small_n_only {
            if self.wants("churn") {
                let mut rows: Vec<Row> = s.churn_sizes.iter().map(|&n| structures::churn::<Q>(s, n)).collect();
                rows.push(structures::churn_earlier::<Q>(s, s.big_n));
                rows.push(structures::churn_random::<Q>(s, s.big_n));
                self.add(rows);
            }
            if self.wants("cancel") {
                self.add([structures::random_cancel::<Q>(&self.settings, self.settings.big_n)]);
            }
            if self.wants("expiry") {
                self.add(structures::expiry::<Q>(&self.settings, self.settings.big_n));
            }
            if self.wants("memory") {
                let rows: Vec<Row> = self.settings.memory_sizes.iter().map(|&n| structures::memory::<Q>(n)).collect();
                self.add(rows);
            }
        }
        if self.wants("timeouts") {
            self.add(structures::request_timeouts::<Q>(&self.settings, REQUEST_PENDING));
        }
    }
}

fn main() {
    let args = Args::parse();
    let settings = Settings::new(args.quick);
    let started = Instant::now();
    let mut run = Run { args, settings, rows: Vec::new() };
    eprintln!("hourglass-bench: {} mode", if run.args.quick { "quick" } else { "full" });

    run.structure::<Hourglass>(false);
    run.structure::<HourglassDelayQueue>(false);
    run.structure::<TokioDelayQueue>(false);
    run.timeouts_at_big_n::<HourglassDelayQueue>();
    run.timeouts_at_big_n::<TokioDelayQueue>();
    run.structure::<LazyHeap>(false);
    run.structure::<BTree>(false);
    run.structure::<Hhwt>(false);
    run.structure::<SortedVec>(true);
    // tokio's Sleep has no batch expiry: only churn, cancel, memory and timeouts.
    let tokio_sleep = run.wants_impl(TokioSleep::NAME);
    if tokio_sleep && run.wants("churn") {
        let mut rows: Vec<Row> =
            run.settings.churn_sizes.iter().map(|&n| structures::churn::<TokioSleep>(&run.settings, n)).collect();
        rows.push(structures::churn_earlier::<TokioSleep>(&run.settings, run.settings.big_n));
        rows.push(structures::churn_random::<TokioSleep>(&run.settings, run.settings.big_n));
        run.add(rows);
    }
    if tokio_sleep && run.wants("cancel") {
        run.add([structures::random_cancel::<TokioSleep>(&run.settings, run.settings.big_n)]);
    }
    if tokio_sleep && run.wants("memory") {
        let rows: Vec<Row> = run.settings.memory_sizes.iter().map(|&n| structures::memory::<TokioSleep>(n)).collect();
        run.add(rows);
    }
    if tokio_sleep && run.wants("timeouts") {
        run.add(structures::request_timeouts::<TokioSleep>(&run.settings, REQUEST_PENDING));
    }

    if run.wants("e2e") {
        let s = &run.settings;
        let (hourglass, tokio, delay_timer) =
            (run.wants_impl("hourglass"), run.wants_impl("tokio"), run.wants_impl("delay_timer"));
        let mut rows = Vec::new();
        if hourglass {
            rows.extend(e2e::burst_hourglass(s, s.burst_n));
            rows.push(e2e::lateness_hourglass(s, s.big_n, LATENESS_RATE_PER_SEC));
        }
        if tokio {
            rows.extend(e2e::burst_tokio(s, s.burst_n));
            rows.push(e2e::lateness_tokio(s, s.big_n, LATENESS_RATE_PER_SEC));
        }
        if delay_timer {
            rows.extend(e2e::burst_delay_timer(s, s.burst_n_delay_timer));
        }
        run.add(rows);
    }
    if run.wants("idle") {
        let mut rows = Vec::new();
        if run.wants_impl("hourglass") {
            rows.push(idle::idle_hourglass(&run.settings, run.settings.big_n));
        }
        if run.wants_impl("tokio") {
            rows.push(idle::idle_tokio(&run.settings, run.settings.big_n));
        }
        run.add(rows);
    }
    if run.wants("contention") {
        let mut rows = Vec::new();
        for threads in [1, 2, 4] {
            if run.wants_impl("hourglass") {
                rows.push(contention::hourglass_scheduler(&run.settings, threads));
                rows.push(contention::mutex_wheel(&run.settings, threads));
                rows.push(contention::parking_lot_wheel(&run.settings, threads));
            }
            if run.wants_impl("binaryheap") {
                rows.push(contention::mutex_heap(&run.settings, threads));
            }
        }
        run.add(rows);
    }

    if !run.args.json {
        report::print_table(&run.rows);
    }
    eprintln!("hourglass-bench: {} rows in {:.1?}", run.rows.len(), started.elapsed());
}
