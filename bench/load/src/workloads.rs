//! The workloads, each against hourglass or beanstalkd, each ending with one
//! line of results in the words the scripts in `bench/` read.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use hdrhistogram::Histogram;
use hourglass_client::wire::{PushTarget, QueueSettings};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

use crate::args::{LoadArgs, Target};
use crate::beanstalk::Beanstalk;
use crate::consumer::Receiver;
use crate::producer::{Sender, ENQUEUE_DELAY};
use crate::report::{directory_bytes, histogram, ms, now_us, progress, Tally};
use crate::server_cpu::Spent;

/// How long consumers of `drain` and `burst` may take at most.
const DRAIN_WITHIN: Duration = Duration::from_secs(600);
/// How long after the last `lateness` task is due its consumers wait at most.
const LATENESS_GRACE: Duration = Duration::from_secs(30);
/// Tasks a second `burst` enqueues at least: they are due that far ahead.
/// As `bench/bullmq/bench.mjs`'s burst, which adds BullMQ's jobs no faster
/// here: on 2026-12-05's disk (an fsync of 50 to 140 µs at the median)
/// BullMQ added 100,000 in about 13 s, past a lead of 7 s, and its delivery
/// was timed while it was still adding.
const BURST_ENQUEUE_PER_S_MIN: u64 = 5_000;
/// And two seconds more.
const BURST_LEAD_MS: u64 = 2_000;

fn filler(bytes: usize) -> String {
    "x".repeat(bytes)
}

/// Sends `args.tasks` tasks from `args.producers` producers as fast as they go.
pub async fn enqueue(args: &LoadArgs, tube: &str) -> anyhow::Result<()> {
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
        ms(latency.value_at_quantile(0.5)),
        ms(latency.value_at_quantile(0.99)),
    );
    Ok(())
}

/// Sends at `args.rate` for `args.seconds`, each task due `args.delay` later,
/// while consumers wait and ack; measures due-to-receipt lateness.
pub async fn lateness(args: &LoadArgs, tube: &str) -> anyhow::Result<()> {
    let total = args.rate * args.seconds;
    let tally = Tally::new(progress(total, &format!("lateness on {:?}", args.target)));
    let deadline = Instant::now() + Duration::from_secs(args.seconds) + args.delay + LATENESS_GRACE;
    let consumers = consume(args, tube, total, deadline, &tally).await?;
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
    if pushed(args, sent) {
        return Ok(());
    }
    let lateness = tally.finish().await;
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

/// With `--push-to`, what a run pushed (the receiver reports the rest):
/// says so and returns true.
fn pushed(args: &LoadArgs, sent: u64) -> bool {
    let Some(url) = &args.push_to else { return false };
    println!("{:?} {:?}: {sent} tasks sent, pushed to {url}", args.target, args.workload);
    true
}

/// Starts `args.consumers` consumers that receive until `total` tasks are in
/// or `deadline` passes, recording each one's lateness in `tally`.
async fn consume(
    args: &LoadArgs,
    tube: &str,
    total: u64,
    deadline: Instant,
    tally: &Tally,
) -> anyhow::Result<Vec<JoinHandle<anyhow::Result<()>>>> {
    let mut consumers = Vec::new();
    if let Some(url) = &args.push_to {
        let push = PushTarget { url: url.clone(), method: None, headers: Default::default(), timeout_ms: None };
        let settings = QueueSettings { push: Some(push), ..QueueSettings::default() };
        args.client(0).put_settings(tube, &settings).await?;
        return Ok(consumers);
    }
    for at in 0..args.consumers {
        let mut receiver = Receiver::connect(args, tube, at).await?;
        let tally = tally.clone();
        consumers.push(tokio::spawn(async move {
            let mut local: Histogram<u64> = histogram();
            while tally.received() < total && Instant::now() < deadline {
                for due_us in receiver.receive().await? {
                    local.saturating_record(now_us().saturating_sub(due_us).max(1));
                    tally.count();
                }
            }
            tally.add(&local).await;
            anyhow::Ok(())
        }));
    }
    Ok(consumers)
}

/// Enqueues `args.tasks` tasks due at once, `args.batch` a request: the
/// untimed start of `drain` and `worker-drain`.
pub async fn fill(args: &LoadArgs, tube: &str) -> anyhow::Result<()> {
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
    Ok(())
}

/// Enqueues `args.tasks` tasks due at once (untimed), then has the consumers
/// claim and ack them as fast as they go.
pub async fn drain(args: &LoadArgs, tube: &str) -> anyhow::Result<()> {
    let total = args.tasks;
    fill(args, tube).await?;
    let spent_before = args.server_pid.map(Spent::of).transpose()?;
    let tally = Tally::new(progress(total, &format!("drain {:?}", args.target)));
    let started = Instant::now();
    for consumer in consume(args, tube, total, started + DRAIN_WITHIN, &tally).await? {
        consumer.await??;
    }
    let elapsed = tally.last_at().saturating_duration_since(started);
    tally.finish().await;
    let got = tally.received();
    if let (Some(before), Some(pid)) = (spent_before, args.server_pid) {
        println!("{}", before.report(Spent::of(pid)?, got, elapsed.as_secs_f64()));
    }
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
pub async fn burst(args: &LoadArgs, tube: &str) -> anyhow::Result<()> {
    if args.target != Target::Hourglass {
        bail!("burst uses hourglass's batch endpoint: --target hourglass");
    }
    let total = args.tasks;
    // Far enough ahead to enqueue them all first.
    let due_ms = now_us() / 1_000 + BURST_LEAD_MS + total * 1_000 / BURST_ENQUEUE_PER_S_MIN;
    let tally = Tally::new(progress(total, "burst"));
    let consumers = consume(args, tube, total, Instant::now() + DRAIN_WITHIN, &tally).await?;
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
    if pushed(args, total) {
        return Ok(());
    }
    // The last delivery, not the consumers' return: a consumer in a claim
    // that waits for a task returns up to a second after the last came (as
    // `drain` measures; BullMQ's bench stops its clock at the last job too).
    let since_last = tally.last_at().elapsed();
    let last_ms = now_us() as f64 / 1e3 - since_last.as_secs_f64() * 1e3 - due_ms as f64;
    let lateness = tally.finish().await;
    println!(
        "{:?} burst: {} of {total} tasks due at once, delivered to {} consumers: the last {last_ms:.0} ms after the due time (p50 {:.2} ms)",
        args.target,
        lateness.len(),
        args.consumers,
        ms(lateness.value_at_quantile(0.5)),
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
pub async fn churn(args: &LoadArgs, tube: &str) -> anyhow::Result<()> {
    if args.target != Target::Beanstalkd {
        bail!("churn speaks beanstalkd's protocol: use --target beanstalkd (and point --beanstalkd at hourglass's front to measure it)");
    }
    let Some(disk) = args.disk.clone() else { bail!("churn needs --disk DIR: the server's data directory") };
    let filler = filler(args.payload_bytes);
    let per_producer = args.tasks.div_ceil(args.producers as u64);
    let mut connections = Vec::new();
    for _ in 0..args.producers {
        connections.push(Beanstalk::using(&args.beanstalkd, tube).await?);
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
                // Each request's wait, to show the longest: a server that
                // stops to compact its disk is seen here.
                let (mut puts, mut deletes) = (histogram(), histogram());
                let mut ids = Vec::with_capacity(per_producer as usize);
                for _ in 0..per_producer {
                    let sent = Instant::now();
                    ids.push(conn.put(ENQUEUE_DELAY.as_secs(), filler.as_bytes()).await?);
                    puts.saturating_record(sent.elapsed().as_micros() as u64);
                }
                for (n, id) in ids.into_iter().enumerate() {
                    if keep_every == 0 || !(n as u64 + 1).is_multiple_of(keep_every) {
                        let sent = Instant::now();
                        conn.delete(id).await?;
                        deletes.saturating_record(sent.elapsed().as_micros() as u64);
                    }
                }
                anyhow::Ok((conn, puts, deletes))
            }));
        }
        let (mut puts, mut deletes) = (histogram(), histogram());
        for producer in producers {
            let (conn, p, d) = producer.await??;
            connections.push(conn);
            puts.add(&p)?;
            deletes.add(&d)?;
        }
        println!(
            "round {round}: {} jobs put and deleted in {:.1?}; {} bytes in {}; put p99 {:.1} ms, max {:.1} ms; \
             delete p99 {:.1} ms, max {:.1} ms",
            per_producer * args.producers as u64,
            started.elapsed(),
            directory_bytes(&disk)?,
            disk.display(),
            ms(puts.value_at_quantile(0.99)),
            ms(puts.max()),
            ms(deletes.value_at_quantile(0.99)),
            ms(deletes.max()),
        );
    }
    Ok(())
}
