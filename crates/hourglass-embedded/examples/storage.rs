//! Measures the storage targets of the durable queue, on the real engine and
//! store in a temporary directory:
//!
//! ```sh
//! cargo run --release -p hourglass-queue --example storage -- restart 5000000
//! cargo run --release -p hourglass-queue --example storage -- churn 1000000 10
//! cargo run --release -p hourglass-queue --example storage -- claim 100000 129
//! ```
//!
//! - `restart N`: enqueues N pending tasks (64-byte payloads), stops, and opens
//!   the directory again in a fresh process state; prints the time to serve
//!   again and resident memory per pending task beyond its payload.
//! - `churn N ROUNDS`: keeps N tasks live and replaces all of them ROUNDS
//!   times (cancel N, enqueue N); prints the data directory's size against the
//!   bytes the live tasks need.
//! - `claim N BYTES`: enqueues N tasks due now with payloads of BYTES, then
//!   claims them 100 at a time, without acks: what handing out payloads costs,
//!   without HTTP (payloads over 128 bytes are read from the store).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use hourglass_embedded::{Engine, Options, RedbStore};
use hourglass_queue::prelude::*;
use hourglass_queue::{NewTask, RunAt, SystemWallClock};

/// Tasks per batch enqueue.
const BATCH: usize = 1_000;
/// Cancels in flight at once (they share group commits).
const CANCELS_IN_FLIGHT: usize = 1_000;
/// Payload of every task: 64 bytes of JSON.
const PAYLOAD: &str = r#"{"order":"0000000000000000000000000000000000000000000000000000"}"#;
const _: () = assert!(PAYLOAD.len() == 64);

fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map_or(0, |pages| pages * 4096)
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map_or(0, |entries| entries.flatten().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum())
}

fn open(dir: &Path) -> Arc<Engine> {
    let store = RedbStore::open(dir).expect("open the store");
    Engine::open(Box::new(store), Options::default(), Arc::new(SystemWallClock)).expect("open the engine")
}

fn new_task() -> NewTask {
    NewTask::new(PAYLOAD, RunAt::Delay(3_600_000))
}

async fn fill(engine: &Engine, n: usize) -> Vec<u64> {
    fill_with(engine, n, new_task).await
}

async fn fill_with(engine: &Engine, n: usize, new_task: impl Fn() -> NewTask) -> Vec<u64> {
    let mut ids = Vec::with_capacity(n);
    let mut left = n;
    while left > 0 {
        let batch = left.min(BATCH);
        let done = engine.enqueue_batch("storage", (0..batch).map(|_| new_task()).collect()).await.expect("enqueue");
        ids.extend(done.iter().map(|d| d.id));
        left -= batch;
    }
    ids
}

/// Fills a directory, then measures the reopen in a fresh process: memory
/// the filling process freed would otherwise still count as resident.
async fn restart(n: usize) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    {
        let engine = open(dir.path());
        let started = Instant::now();
        fill(&engine, n).await;
        println!("restart: enqueued {n} tasks in {:.1?}", started.elapsed());
        engine.close();
    }
    let status = std::process::Command::new(std::env::current_exe().expect("this program"))
        .arg("reopen")
        .arg(dir.path())
        .status()
        .expect("run the reopen");
    assert!(status.success(), "the reopen failed");
}

/// The measured part of `restart`: open a filled directory, as after a restart.
async fn reopen(dir: &Path) {
    let on_disk = dir_bytes(dir);
    let rss_before = rss_bytes();
    let started = Instant::now();
    let engine = open(dir);
    let ready_in = started.elapsed();
    let rss_after = rss_bytes();
    let n = engine.totals().await.tasks;
    let per_task = rss_after.saturating_sub(rss_before) as f64 / n as f64;
    println!(
        "restart: {n} tasks loaded and serving again in {ready_in:.2?} (fresh process); memory {per_task:.0} B per \
         pending task ({:.0} B beyond its {}-byte payload); data dir {:.1} MB",
        per_task - PAYLOAD.len() as f64,
        PAYLOAD.len(),
        on_disk as f64 / 1e6,
    );
    engine.close();
    drop(engine);
    let stored = RedbStore::open(dir).and_then(|store| store.stored_bytes()).expect("the store's stats");
    println!(
        "restart: redb holds {:.1} MB of live data ({:.0} B a task); the file grows ahead of it in steps",
        stored as f64 / 1e6,
        stored as f64 / n as f64
    );
}

async fn churn(n: usize, rounds: usize) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let engine = open(dir.path());
    let mut ids = fill(&engine, n).await;
    let live_bytes = dir_bytes(dir.path());
    // What the live tasks need: their encoded bodies (see store/record.rs:
    // 22 fixed bytes, the queue name, the key and the payload with their
    // lengths, a CRC); these tasks never change, so they have no state records.
    let record_bytes = (n * (22 + 2 + "storage".len() + 2 + 4 + PAYLOAD.len() + 4)) as f64;
    println!(
        "churn: {n} live tasks: records {:.1} MB, data dir {:.1} MB ({:.2}x the records)",
        record_bytes / 1e6,
        live_bytes as f64 / 1e6,
        live_bytes as f64 / record_bytes
    );
    let started = Instant::now();
    for round in 1..=rounds {
        for chunk in ids.chunks(CANCELS_IN_FLIGHT) {
            let cancels = chunk.iter().map(|&id| engine.cancel(id));
            for result in futures_util::future::join_all(cancels).await {
                result.expect("cancel");
            }
        }
        ids = fill(&engine, n).await;
        println!(
            "churn: round {round}: replaced {n} tasks; data dir {:.1} MB ({:.2}x the live records)",
            dir_bytes(dir.path()) as f64 / 1e6,
            dir_bytes(dir.path()) as f64 / record_bytes
        );
    }
    println!("churn: {rounds} rounds in {:.1?}", started.elapsed());
}

/// Claims `n` tasks due now with payloads of `bytes`, 100 a claim.
async fn claim(n: usize, bytes: usize) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let engine = open(dir.path());
    let payload = format!("\"{}\"", "x".repeat(bytes.saturating_sub(2)));
    fill_with(&engine, n, || NewTask::new(payload.as_str(), RunAt::Delay(0))).await;
    let started = Instant::now();
    let mut claimed = 0;
    while claimed < n {
        let tasks = engine.claim("storage", 100, 600_000, 0).await.expect("claim");
        assert!(!tasks.is_empty() && tasks.iter().all(|task| task.payload == *payload), "claimed what was sent");
        claimed += tasks.len();
    }
    let elapsed = started.elapsed();
    println!(
        "claim: {n} tasks of {} B claimed, 100 a claim, in {elapsed:.2?}: {:.0} tasks/s, {:.0} ns a task",
        payload.len(),
        n as f64 / elapsed.as_secs_f64(),
        elapsed.as_nanos() as f64 / n as f64
    );
    engine.close();
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number =
        |i: usize, default: usize| args.get(i).map_or(Ok(default), |a| a.parse::<usize>()).unwrap_or_else(|_| usage());
    match args.first().map(String::as_str) {
        Some("restart") => restart(number(1, 1_000_000)).await,
        Some("reopen") => reopen(Path::new(args.get(1).map(String::as_str).unwrap_or_else(|| usage()))).await,
        Some("churn") => churn(number(1, 1_000_000), number(2, 10)).await,
        Some("claim") => claim(number(1, 100_000), number(2, 129)).await,
        _ => usage(),
    }
}

fn usage() -> ! {
    eprintln!("usage: storage restart [TASKS] | storage churn [TASKS] [ROUNDS] | storage claim [TASKS] [BYTES]");
    std::process::exit(2)
}
