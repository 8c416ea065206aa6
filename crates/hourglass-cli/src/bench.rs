//! `hourglass bench`: the same workload against a hourglass server and against
//! beanstalkd, so the two are compared in one run.
//!
//! The workloads, each with payloads of `--payload-bytes`:
//! - `enqueue`: producers send `--tasks` tasks as fast as they can (one per
//!   request, or `--batch` per request), due far in the future; reports tasks
//!   per second and request latency.
//! - `lateness`: producers send tasks at `--rate` per second for `--seconds`,
//!   each due `--delay` later; consumers wait for them and ack; reports how late
//!   each task reached a consumer, from its due time.
//! - `drain`: `--tasks` tasks due at once are enqueued first (not timed), then
//!   consumers claim and ack them as fast as they can; reports tasks per second.
//! - `burst`: `--tasks` tasks all due at one instant (enqueued before it, in
//!   batches of `--batch`) while consumers wait; reports how long after that
//!   instant the last one reached a consumer.
//!
//! `--also URL` adds nodes of the same service: producers and consumers are
//! spread over them all.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use crate::client::Client;
use crate::ServerArgs;

mod http1;

use http1::Http1;

/// Most concurrent producers or consumers.
const CLIENTS_MAX: usize = 1_024;
/// Largest payload the bench makes.
const PAYLOAD_BYTES_MAX: usize = 64 * 1024;
/// How far ahead `enqueue` tasks are due: they must not fire during the run.
const ENQUEUE_DELAY: Duration = Duration::from_secs(3_600);

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Which system to load.
    #[arg(long, value_enum, default_value = "hourglass")]
    target: Target,
    /// The workload.
    #[arg(long, value_enum, default_value = "enqueue")]
    workload: Workload,
    /// beanstalkd's address, for `--target beanstalkd`.
    #[arg(long, default_value = "127.0.0.1:11300")]
    beanstalkd: String,
    /// Concurrent producers (one connection each).
    #[arg(long, default_value_t = 64)]
    producers: usize,
    /// Concurrent consumers, for `lateness`.
    #[arg(long, default_value_t = 4)]
    consumers: usize,
    /// Tasks to send, for `enqueue`.
    #[arg(long, default_value_t = 20_000)]
    tasks: u64,
    /// Tasks per request (hourglass only: its batch endpoint).
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Tasks per second in all, for `lateness`.
    #[arg(long, default_value_t = 10_000)]
    rate: u64,
    /// How long to send, for `lateness`.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// How far ahead each `lateness` task is due (beanstalkd rounds to whole seconds).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    delay: Duration,
    /// Payload size in bytes.
    #[arg(long, default_value_t = 64)]
    payload_bytes: usize,
    /// Rounds of `churn`: each puts --tasks delayed jobs, then deletes them.
    #[arg(long, default_value_t = 10)]
    rounds: u32,
    /// In `churn`, every this many jobs one is kept (never deleted): the few
    /// long-lived jobs that pin a log's old files. 0 keeps none.
    #[arg(long, default_value_t = 0)]
    keep_every: u64,
    /// The server's data directory, whose size `churn` reports after each
    /// round (hourglass's --data, beanstalkd's -b).
    #[arg(long, value_name = "DIR")]
    disk: Option<std::path::PathBuf>,
    /// The producers' HTTP client: `lean` (one keep-alive connection, the
    /// request written whole, like the beanstalkd client) measures the server;
    /// `reqwest` is a general-purpose client, which costs about as much CPU
    /// as the server it loads. Consumers always use reqwest.
    #[arg(long, value_enum, default_value = "lean")]
    http_client: HttpClient,
    /// How hourglass consumers ack: `one` request a task, or `batch`, one
    /// request for each claim's tasks (`POST /v1/acks`).
    #[arg(long, value_enum, default_value = "one")]
    acks: Acks,
    /// More nodes of the same service (`hourglass serve --store ...`), by
    /// base URL: producers and consumers are spread over --server and these,
    /// one after the other.
    #[arg(long, value_name = "URL")]
    also: Vec<String>,
    #[command(flatten)]
    server: ServerArgs,
}

impl BenchArgs {
    /// The server the `at`-th producer or consumer talks to.
    fn server(&self, at: usize) -> ServerArgs {
        let mut server = self.server.clone();
        if let Some(url) = at.checked_rem(self.also.len() + 1).and_then(|i| i.checked_sub(1)) {
            server.server = self.also[url].clone();
        }
        server
    }
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Target {
    Hourglass,
    Beanstalkd,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Acks {
    One,
    Batch,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
enum HttpClient {
    Lean,
    Reqwest,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Workload {
    Enqueue,
    Lateness,
    Drain,
    /// `--tasks` tasks all due at one instant, enqueued in batches before it
    /// (untimed) while the consumers wait: how long after that instant the
    /// last is delivered.
    Burst,
    /// Through beanstalkd's protocol: rounds of delayed puts, all deleted,
    /// with the data directory's size after each.
    Churn,
}

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid bounds")
}

pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    if !(1..=CLIENTS_MAX).contains(&args.producers) || !(1..=CLIENTS_MAX).contains(&args.consumers) {
        bail!("--producers and --consumers must be within 1 ..= {CLIENTS_MAX}");
    }
    if args.payload_bytes > PAYLOAD_BYTES_MAX {
        bail!("--payload-bytes must be at most {PAYLOAD_BYTES_MAX}");
    }
    if args.batch == 0 || args.batch > hourglass_queue::limits::BATCH_MAX {
        bail!("--batch must be within 1 ..= {}", hourglass_queue::limits::BATCH_MAX);
    }
    if args.batch > 1 && args.target == Target::Beanstalkd {
        bail!("beanstalkd has no batch put; use --batch 1");
    }
    if args.rate == 0 || args.seconds == 0 || args.tasks == 0 {
        bail!("--rate, --seconds and --tasks must be positive");
    }
    let tube = format!("bench-{}", now_us());
    match args.workload {
        Workload::Enqueue => enqueue(&args, &tube).await,
        Workload::Lateness => lateness(&args, &tube).await,
        Workload::Drain => drain(&args, &tube).await,
        Workload::Burst => burst(&args, &tube).await,
        Workload::Churn => churn(&args, &tube).await,
    }
}

fn progress(total: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{bar:40}] {pos}/{len} {per_sec} eta {eta}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    bar.set_message(what.to_owned());
    bar
}

fn filler(bytes: usize) -> String {
    "x".repeat(bytes)
}

/// Sends `args.tasks` tasks from `args.producers` producers as fast as they go.
async fn enqueue(args: &BenchArgs, tube: &str) -> anyhow::Result<()> {
    let per_request = args.batch as u64;
    let requests = args.tasks.div_ceil(per_request);
    let next = Arc::new(AtomicU64::new(0));
    let latency = Arc::new(Mutex::new(histogram()));
    let bar = progress(requests * per_request, &format!("enqueue to {:?}", args.target));
    let started = Instant::now();
    let mut producers = Vec::new();
    for at in 0..args.producers {
        let mut sender = Sender::connect(args, tube, at).await?;
        let (next, latency, bar) = (next.clone(), latency.clone(), bar.clone());
        let filler = filler(args.payload_bytes);
        producers.push(tokio::spawn(async move {
            let mut local = histogram();
            while next.fetch_add(1, Ordering::Relaxed) < requests {
                let sent = Instant::now();
                sender.send(per_request as usize, ENQUEUE_DELAY, &filler).await?;
                local.saturating_record(sent.elapsed().as_micros() as u64);
                bar.inc(per_request);
            }
            latency.lock().await.add(&local).ok();
            anyhow::Ok(())
        }));
    }
    for producer in producers {
        producer.await??;
    }
    let elapsed = started.elapsed();
    bar.finish_and_clear();
    let latency = latency.lock().await;
    let tasks = requests * per_request;
    println!(
        "{:?} enqueue: {tasks} tasks from {} producers ({} per request) in {elapsed:.2?}: {:.0} tasks/s; request latency p50 {:.2} ms, p99 {:.2} ms",
        args.target,
        args.producers,
        per_request,
        tasks as f64 / elapsed.as_secs_f64(),
        latency.value_at_quantile(0.5) as f64 / 1e3,
        latency.value_at_quantile(0.99) as f64 / 1e3,
    );
    Ok(())
}

/// Sends at `args.rate` for `args.seconds`, each task due `args.delay` later,
/// while consumers wait and ack; measures due-to-receipt lateness.
async fn lateness(args: &BenchArgs, tube: &str) -> anyhow::Result<()> {
    let total = args.rate * args.seconds;
    let received = Arc::new(AtomicU64::new(0));
    let lateness = Arc::new(Mutex::new(histogram()));
    let bar = progress(total, &format!("lateness on {:?}", args.target));
    let deadline = Instant::now() + Duration::from_secs(args.seconds) + args.delay + Duration::from_secs(30);
    let consumers = consume(args, tube, total, deadline, &received, &lateness, &bar).await?;
    let producers = args.producers.min(args.rate as usize).max(1);
    let per_producer = total / producers as u64;
    let interval = Duration::from_secs_f64(producers as f64 / args.rate as f64);
    let started = Instant::now();
    let mut sends = Vec::new();
    for at in 0..producers {
        let mut sender = Sender::connect(args, tube, at).await?;
        let delay = args.delay;
        let filler = filler(args.payload_bytes);
        sends.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            for _ in 0..per_producer {
                tick.tick().await;
                sender.send_due(delay, &filler).await?;
            }
            anyhow::Ok(())
        }));
    }
    for send in sends {
        send.await??;
    }
    let sent = per_producer * producers as u64;
    let send_rate = sent as f64 / started.elapsed().as_secs_f64();
    for consumer in consumers {
        consumer.await??;
    }
    bar.finish_and_clear();
    let lateness = lateness.lock().await;
    let ms = |us: u64| us as f64 / 1e3;
    println!(
        "{:?} lateness: {} of {sent} tasks received (sent at {send_rate:.0}/s, due {:?} later, {} consumers): \
         p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms after due",
        args.target,
        lateness.len(),
        args.delay,
        args.consumers,
        ms(lateness.value_at_quantile(0.5)),
        ms(lateness.value_at_quantile(0.99)),
        ms(lateness.max()),
    );
    if lateness.len() < sent {
        bail!("{} tasks were never received", sent - lateness.len());
    }
    Ok(())
}

/// Starts `args.consumers` consumers that receive until `total` tasks are in
/// or `deadline` passes, recording lateness into `lateness`.
async fn consume(
    args: &BenchArgs,
    tube: &str,
    total: u64,
    deadline: Instant,
    received: &Arc<AtomicU64>,
    lateness: &Arc<Mutex<Histogram<u64>>>,
    bar: &ProgressBar,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<anyhow::Result<()>>>> {
    let mut consumers = Vec::new();
    for at in 0..args.consumers {
        let mut receiver = Receiver::connect(args, tube, at).await?;
        let (received, lateness, bar) = (received.clone(), lateness.clone(), bar.clone());
        consumers.push(tokio::spawn(async move {
            let mut local = histogram();
            while received.load(Ordering::Relaxed) < total && Instant::now() < deadline {
                for due_us in receiver.receive().await? {
                    local.saturating_record(now_us().saturating_sub(due_us).max(1));
                    received.fetch_add(1, Ordering::Relaxed);
                    bar.inc(1);
                }
            }
            lateness.lock().await.add(&local).ok();
            anyhow::Ok(())
        }));
    }
    Ok(consumers)
}

/// Enqueues `args.tasks` tasks due at once (untimed), then has the consumers
/// claim and ack them as fast as they go.
async fn drain(args: &BenchArgs, tube: &str) -> anyhow::Result<()> {
    let total = args.tasks;
    let mut sender = Sender::connect(args, tube, 0).await?;
    let filler = filler(args.payload_bytes);
    let fill = progress(total, "fill");
    let mut sent = 0;
    while sent < total {
        let count = (total - sent).min(args.batch as u64);
        sender.send(count as usize, Duration::ZERO, &filler).await?;
        sent += count;
        fill.inc(count);
    }
    fill.finish_and_clear();
    let received = Arc::new(AtomicU64::new(0));
    let lateness = Arc::new(Mutex::new(histogram()));
    let bar = progress(total, &format!("drain {:?}", args.target));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(600);
    for consumer in consume(args, tube, total, deadline, &received, &lateness, &bar).await? {
        consumer.await??;
    }
    let elapsed = started.elapsed();
    bar.finish_and_clear();
    let got = received.load(Ordering::Relaxed);
    println!(
        "{:?} drain: {got} tasks of {} B claimed and acked by {} consumers in {elapsed:.2?}: {:.0} tasks/s",
        args.target,
        args.payload_bytes,
        args.consumers,
        got as f64 / elapsed.as_secs_f64(),
    );
    if got < total {
        bail!("{} tasks were never received", total - got);
    }
    Ok(())
}

/// Enqueues `args.tasks` tasks due at one instant, in batches, while the
/// consumers wait; reports how long after that instant the last one reached
/// a consumer.
async fn burst(args: &BenchArgs, tube: &str) -> anyhow::Result<()> {
    if args.target != Target::Hourglass {
        bail!("burst uses hourglass's batch endpoint: --target hourglass");
    }
    let total = args.tasks;
    let received = Arc::new(AtomicU64::new(0));
    let lateness = Arc::new(Mutex::new(histogram()));
    // Far enough ahead to enqueue them all first (20,000 a second at least).
    let due_ms = now_us() / 1_000 + 2_000 + total / 20;
    let deadline = Instant::now() + Duration::from_secs(600);
    let bar = progress(total, "burst");
    let consumers = consume(args, tube, total, deadline, &received, &lateness, &bar).await?;
    let mut sender = Sender::connect(args, tube, 0).await?;
    let filler = filler(args.payload_bytes);
    let mut sent = 0;
    while sent < total {
        let count = (total - sent).min(args.batch as u64) as usize;
        sender.send_at(count, due_ms, &filler).await?;
        sent += count as u64;
    }
    let enqueued_ms = now_us() / 1_000;
    if enqueued_ms >= due_ms {
        bail!("enqueueing took past the due time by {} ms: fewer --tasks or a larger --batch", enqueued_ms - due_ms);
    }
    for consumer in consumers {
        consumer.await??;
    }
    let last_ms = now_us() as f64 / 1e3 - due_ms as f64;
    bar.finish_and_clear();
    let lateness = lateness.lock().await;
    println!(
        "{:?} burst: {} of {total} tasks due at once, delivered to {} consumers: the last {last_ms:.0} ms after the due time (p50 {:.2} ms)",
        args.target,
        lateness.len(),
        args.consumers,
        lateness.value_at_quantile(0.5) as f64 / 1e3,
    );
    if lateness.len() < total {
        bail!("{} tasks were never received", total - lateness.len());
    }
    Ok(())
}

/// Rounds of `args.tasks` jobs put an hour ahead by `args.producers`
/// connections, then all deleted by the same connections; after each round,
/// the bytes in `args.disk`. What a store that keeps a log, or one that
/// reuses the space of what was deleted, holds for the same live jobs.
async fn churn(args: &BenchArgs, tube: &str) -> anyhow::Result<()> {
    if args.target != Target::Beanstalkd {
        bail!("churn speaks beanstalkd's protocol: use --target beanstalkd (and point --beanstalkd at hourglass's front to measure it)");
    }
    let Some(disk) = args.disk.clone() else { bail!("churn needs --disk DIR: the server's data directory") };
    let filler = filler(args.payload_bytes);
    let per_producer = args.tasks.div_ceil(args.producers as u64);
    let mut connections = Vec::new();
    for _ in 0..args.producers {
        let mut conn = Beanstalk::connect(&args.beanstalkd).await?;
        conn.command(&format!("use {tube}"), "USING").await?;
        connections.push(conn);
    }
    println!(
        "churn: {} rounds of {} jobs of {} B, put 1 h ahead, then deleted",
        args.rounds,
        per_producer * args.producers as u64,
        args.payload_bytes
    );
    let keep_every = args.keep_every;
    if keep_every > 0 {
        println!("churn: one job in {keep_every} is kept, never deleted");
    }
    for round in 1..=args.rounds {
        let started = Instant::now();
        let mut producers = Vec::new();
        for mut conn in connections.drain(..) {
            let filler = filler.clone();
            producers.push(tokio::spawn(async move {
                let mut ids = Vec::with_capacity(per_producer as usize);
                for _ in 0..per_producer {
                    ids.push(conn.put(ENQUEUE_DELAY.as_secs(), filler.as_bytes()).await?);
                }
                for (n, id) in ids.into_iter().enumerate() {
                    if keep_every == 0 || !(n as u64 + 1).is_multiple_of(keep_every) {
                        conn.command(&format!("delete {id}"), "DELETED").await?;
                    }
                }
                anyhow::Ok(conn)
            }));
        }
        for producer in producers {
            connections.push(producer.await??);
        }
        println!(
            "round {round}: {} jobs put and deleted in {:.1?}; {} bytes in {}",
            per_producer * args.producers as u64,
            started.elapsed(),
            directory_bytes(&disk)?,
            disk.display()
        );
    }
    Ok(())
}

/// The bytes of the files under `dir`.
fn directory_bytes(dir: &std::path::Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() { directory_bytes(&entry.path())? } else { meta.len() };
    }
    Ok(total)
}

/// One producer connection.
enum Sender {
    Hourglass { client: Client, path: String },
    HourglassLean { conn: Http1, path: String },
    Beanstalkd(Beanstalk),
}

impl Sender {
    async fn connect(args: &BenchArgs, tube: &str, at: usize) -> anyhow::Result<Sender> {
        let path = format!("/v1/queues/{tube}/tasks");
        let server = args.server(at);
        Ok(match (args.target, args.http_client) {
            (Target::Hourglass, HttpClient::Reqwest) => Sender::Hourglass { client: Client::new(&server)?, path },
            (Target::Hourglass, HttpClient::Lean) => {
                let conn = Http1::connect(&server.server, server.token.as_deref()).await?;
                Sender::HourglassLean { conn, path }
            }
            (Target::Beanstalkd, _) => {
                let mut conn = Beanstalk::connect(&args.beanstalkd).await?;
                conn.command(&format!("use {tube}"), "USING").await?;
                Sender::Beanstalkd(conn)
            }
        })
    }

    /// Sends `count` tasks due after `delay` with `filler` in the payload.
    async fn send(&mut self, count: usize, delay: Duration, filler: &str) -> anyhow::Result<()> {
        let task = || json!({ "payload": { "f": filler }, "delay_ms": delay.as_millis() as u64 });
        let batch = || json!({ "tasks": vec![task(); count] });
        match self {
            Sender::Hourglass { client, path } if count == 1 => client.post(path, &task()).await.map(drop)?,
            Sender::Hourglass { client, path } => client.post(&format!("{path}/batch"), &batch()).await.map(drop)?,
            Sender::HourglassLean { conn, path } if count == 1 => {
                conn.post(path, &serde_json::to_vec(&task())?).await?;
            }
            Sender::HourglassLean { conn, path } => {
                conn.post(&format!("{path}/batch"), &serde_json::to_vec(&batch())?).await?;
            }
            Sender::Beanstalkd(conn) => {
                conn.put(delay.as_secs(), filler.as_bytes()).await?;
            }
        }
        Ok(())
    }

    /// Sends `count` tasks due at `due_ms` (Unix ms), carrying it and `filler`.
    async fn send_at(&mut self, count: usize, due_ms: u64, filler: &str) -> anyhow::Result<()> {
        let task = json!({ "payload": { "due_us": due_ms * 1_000, "f": filler }, "run_at_ms": due_ms });
        let batch = json!({ "tasks": vec![task; count] });
        match self {
            Sender::Hourglass { client, path } => client.post(&format!("{path}/batch"), &batch).await.map(drop)?,
            Sender::HourglassLean { conn, path } => {
                conn.post(&format!("{path}/batch"), &serde_json::to_vec(&batch)?).await?
            }
            Sender::Beanstalkd(_) => bail!("beanstalkd has no batch put"),
        }
        Ok(())
    }

    /// Sends one task due `delay` from now, carrying its due time and `filler`.
    async fn send_due(&mut self, delay: Duration, filler: &str) -> anyhow::Result<()> {
        let task = || {
            let due_us = now_us() + delay.as_micros() as u64;
            let run_at_ms = due_us.div_ceil(1_000);
            json!({ "payload": { "due_us": run_at_ms * 1_000, "f": filler }, "run_at_ms": run_at_ms })
        };
        match self {
            Sender::Hourglass { client, path } => client.post(path, &task()).await.map(drop)?,
            Sender::HourglassLean { conn, path } => conn.post(path, &serde_json::to_vec(&task())?).await?,
            Sender::Beanstalkd(conn) => {
                // beanstalkd counts delays in whole seconds from its receipt.
                let seconds = delay.as_secs_f64().round() as u64;
                let due_us = now_us() + seconds * 1_000_000;
                conn.put(seconds, format!("{due_us} {filler}").as_bytes()).await?;
            }
        }
        Ok(())
    }
}

/// Ack requests in flight per consumer at most: a consumer goes back to
/// waiting for tasks at once, as a real one would after handing them to
/// workers.
const ACKS_IN_FLIGHT_MAX: usize = 256;

/// One consumer connection.
enum Receiver {
    Hourglass { client: Client, claim: String, acks: Arc<tokio::sync::Semaphore>, batch: bool },
    Beanstalkd(Beanstalk),
}

impl Receiver {
    async fn connect(args: &BenchArgs, tube: &str, at: usize) -> anyhow::Result<Receiver> {
        Ok(match args.target {
            Target::Hourglass => Receiver::Hourglass {
                client: Client::new(&args.server(at))?,
                claim: format!("/v1/queues/{tube}/claim"),
                acks: Arc::new(tokio::sync::Semaphore::new(ACKS_IN_FLIGHT_MAX)),
                batch: args.acks == Acks::Batch,
            },
            Target::Beanstalkd => {
                let mut conn = Beanstalk::connect(&args.beanstalkd).await?;
                conn.command(&format!("watch {tube}"), "WATCHING").await?;
                conn.command("ignore default", "WATCHING").await?;
                Receiver::Beanstalkd(conn)
            }
        })
    }

    /// Waits up to a second for due tasks, acks them, returns their due times (µs).
    async fn receive(&mut self) -> anyhow::Result<Vec<u64>> {
        match self {
            Receiver::Hourglass { client, claim, acks: acks_in_flight, batch } => {
                let claimed = client.post(claim, &json!({ "max": 64, "wait_ms": 1000, "lease_ms": 30_000 })).await?;
                let at = now_us();
                let mut dues = Vec::new();
                let mut acks = Vec::new();
                for task in claimed["tasks"].as_array().into_iter().flatten() {
                    dues.push(task["payload"]["due_us"].as_u64().unwrap_or(at));
                    acks.push(json!({ "id": task["id"], "lease": task["lease"] }));
                }
                // Lateness is taken at receipt (the caller reads the clock as
                // soon as this returns); the acks run alongside: one request
                // for the claim's tasks, or one each.
                let requests: Vec<(String, Value)> = if *batch && !acks.is_empty() {
                    vec![("/v1/acks".to_owned(), json!({ "acks": acks }))]
                } else {
                    acks.into_iter()
                        .map(|ack| (format!("/v1/tasks/{}/ack", ack["id"]), json!({ "lease": ack["lease"] })))
                        .collect()
                };
                for (path, body) in requests {
                    let permit = acks_in_flight.clone().acquire_owned().await?;
                    let client = client.clone();
                    tokio::spawn(async move {
                        if let Err(error) = client.post(&path, &body).await {
                            eprintln!("bench: {path} failed: {error:#}");
                        }
                        drop(permit);
                    });
                }
                Ok(dues)
            }
            Receiver::Beanstalkd(conn) => match conn.reserve(1).await? {
                None => Ok(Vec::new()),
                Some((id, body)) => {
                    let due_us = std::str::from_utf8(&body)
                        .ok()
                        .and_then(|s| s.split(' ').next()?.parse().ok())
                        .unwrap_or_else(now_us);
                    conn.command(&format!("delete {id}"), "DELETED").await?;
                    Ok(vec![due_us])
                }
            },
        }
    }
}

/// A minimal client of beanstalkd's text protocol (beanstalkd's, or
/// hourglass's front): `put`, `reserve-with-timeout`, `delete`.
struct Beanstalk {
    reader: BufReader<TcpStream>,
}

impl Beanstalk {
    async fn connect(addr: &str) -> anyhow::Result<Beanstalk> {
        let stream = TcpStream::connect(addr).await.with_context(|| format!("cannot reach beanstalkd at {addr}"))?;
        stream.set_nodelay(true)?;
        Ok(Beanstalk { reader: BufReader::new(stream) })
    }

    async fn line(&mut self) -> anyhow::Result<String> {
        let mut line = String::new();
        if self.reader.read_line(&mut line).await? == 0 {
            bail!("beanstalkd closed the connection");
        }
        Ok(line.trim_end().to_owned())
    }

    async fn command(&mut self, command: &str, expect: &str) -> anyhow::Result<String> {
        self.reader.get_mut().write_all(format!("{command}\r\n").as_bytes()).await?;
        let reply = self.line().await?;
        if !reply.starts_with(expect) {
            bail!("beanstalkd answered {reply:?} to {command:?}");
        }
        Ok(reply)
    }

    /// Puts a job; its id.
    async fn put(&mut self, delay_s: u64, body: &[u8]) -> anyhow::Result<u64> {
        let mut request = format!("put 0 {delay_s} 60 {}\r\n", body.len()).into_bytes();
        request.extend_from_slice(body);
        request.extend_from_slice(b"\r\n");
        self.reader.get_mut().write_all(&request).await?;
        let reply = self.line().await?;
        match reply.strip_prefix("INSERTED ").map(str::parse) {
            Some(Ok(id)) => Ok(id),
            _ => bail!("beanstalkd answered {reply:?} to put"),
        }
    }

    async fn reserve(&mut self, timeout_s: u64) -> anyhow::Result<Option<(u64, Vec<u8>)>> {
        self.reader.get_mut().write_all(format!("reserve-with-timeout {timeout_s}\r\n").as_bytes()).await?;
        let reply = self.line().await?;
        if reply.starts_with("TIMED_OUT") || reply.starts_with("DEADLINE_SOON") {
            return Ok(None);
        }
        let mut parts = reply.split(' ');
        let (Some("RESERVED"), Some(id), Some(len)) = (parts.next(), parts.next(), parts.next()) else {
            bail!("beanstalkd answered {reply:?} to reserve");
        };
        let (id, len): (u64, usize) = (id.parse()?, len.parse()?);
        let mut body = vec![0; len + 2];
        self.reader.read_exact(&mut body).await?;
        body.truncate(len);
        Ok(Some((id, body)))
    }
}
