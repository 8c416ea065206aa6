//! A schedule on three `hourglass serve` nodes sharing one Redis (and a
//! three-master Cluster), fired every second in Europe/Berlin (cron with
//! seconds) under producers and consumers on every node: the node that
//! holds the schedule's shard is killed with `kill -9`, then the node that
//! took the shard over is stopped (SIGSTOP) past its shard lease and let go
//! on (SIGCONT). Every occurrence from the first to the last must then be
//! exactly one task (one id, whatever its deliveries), none missing; each
//! task's occurrence is read from its idempotency key.
//!
//! Real processes and real time: bounds are generous, waits poll for what
//! they wait for, and the figures are printed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hourglass_client::wire::ClaimRequest;
use hourglass_client::Client;
use hourglass_queue::{occurrence_of, SystemWallClock, WallClock};
use hourglass_test_support::hourglass::Hourglass;
use hourglass_test_support::redis::{Cluster, Server};
use hourglass_test_support::{holds_within_async, within};
use tokio::sync::Mutex;

use crate::{serve, Seq};

/// Short, so that the shard moves quickly.
const SHARD_LEASE_MS: u64 = 1_000;
/// Consumers' leases: a task held through a stopped node comes back after it.
const LEASE_MS: u64 = 3_000;
/// A request that takes longer has met a node that is stopped.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Generous bound on every wait: a loaded machine, a shard moving twice.
const WAIT: Duration = Duration::from_secs(60);
const SHARDS: u16 = 16;
const NAME: &str = "tick";
const TICKS: &str = "ticks";
const LOAD: &str = "load";

/// `redis-cli` on the store, following a Cluster's redirections.
type Cli<'a> = &'a (dyn Fn(&[&str]) -> String + Sync);

/// What the tick consumers saw: each occurrence's task ids, and problems.
#[derive(Default)]
struct Ticks {
    by_occurrence: BTreeMap<u64, BTreeSet<u64>>,
    deliveries: u64,
    /// When each occurrence was first handed out, this machine's ms.
    first_seen_ms: BTreeMap<u64, u64>,
    problems: Vec<String>,
}

/// A node's name in the shard leases, from its log line as it joins.
fn node_name(node: &Hourglass) -> String {
    let mut name = None;
    within(WAIT, "the node logs its name", || {
        let log = node.stderr();
        let after = log.split("node=").nth(1).map(|rest| rest.trim_start_matches('"'));
        name = after.map(|rest| rest.chars().take_while(char::is_ascii_hexdigit).collect());
        name.as_ref().is_some_and(|name: &String| name.len() == 16)
    });
    name.expect("a name")
}

/// The shard the schedule lives in.
fn schedule_shard(cli: Cli<'_>) -> u16 {
    let held = |shard: u16| cli(&["-c", "HEXISTS", &format!("{{hg:{shard}}}:sch"), NAME]).trim() == "1";
    (0..SHARDS).find(|&shard| held(shard)).expect("the schedule is stored in a shard")
}

/// The node that holds `shard` now, if any.
fn holder(cli: Cli<'_>, shard: u16) -> Option<String> {
    let owner = cli(&["-c", "GET", &format!("{{hg:{shard}}}:owner")]);
    owner.trim().split_once(':').map(|(node, _)| node.to_owned())
}

/// The `hourglass` command with `args`, run to its end: what it printed.
fn hourglass(args: &[&str]) -> String {
    let output =
        std::process::Command::new(env!("CARGO_BIN_EXE_hourglass")).args(args).output().expect("hourglass runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "hourglass {args:?}: {stderr}");
    stdout.into_owned()
}

fn client(node: &Hourglass) -> Client {
    crate::client(node, REQUEST_TIMEOUT)
}

/// Claims the schedule's tasks through `client` until `stop`: reads each
/// task's occurrence from its key, records its id, acks it.
async fn consume_ticks(client: Client, ticks: Arc<Mutex<Ticks>>, stop: Arc<AtomicBool>) {
    let claim = ClaimRequest { max: Some(16), wait_ms: Some(200), lease_ms: Some(LEASE_MS), acks: None };
    while !stop.load(Ordering::Relaxed) {
        let Ok(claimed) = client.claim(TICKS, &claim).await else {
            // A node killed or stopped: try again shortly.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        for task in claimed.tasks {
            let seen_ms = SystemWallClock.now_ms();
            let key = match client.get(task.id).await {
                Ok(shown) => shown.key,
                Err(_) => continue, // delivered again after its lease
            };
            let mut t = ticks.lock().await;
            t.deliveries += 1;
            match key.as_deref().and_then(occurrence_of) {
                Some((NAME, at)) if at == task.run_at_ms => {
                    t.by_occurrence.entry(at).or_default().insert(task.id);
                    t.first_seen_ms.entry(at).or_insert(seen_ms);
                }
                other => {
                    t.problems.push(format!("task {} due {} has key {key:?} ({other:?})", task.id, task.run_at_ms))
                }
            }
            drop(t);
            let _ = client.ack(task.id, task.lease).await;
        }
    }
}

/// Enqueues to and claims from the load queue through `client` until `stop`.
async fn load(client: Client, stop: Arc<AtomicBool>, done: Arc<AtomicU64>) {
    let claim = ClaimRequest { max: Some(32), wait_ms: Some(50), lease_ms: Some(LEASE_MS), acks: None };
    let mut seq = 0;
    while !stop.load(Ordering::Relaxed) {
        seq += 1;
        if client.enqueue(LOAD, &Seq::task(seq, seq % 200)).await.is_err() {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        if let Ok(claimed) = client.claim(LOAD, &claim).await {
            for task in claimed.tasks {
                if client.ack(task.id, task.lease).await.is_ok() {
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// One node's load and tick consumer, stopped together.
struct Work {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

fn start_work(node: &Hourglass, ticks: &Arc<Mutex<Ticks>>, acked: &Arc<AtomicU64>) -> Work {
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = vec![
        tokio::spawn(consume_ticks(client(node), ticks.clone(), stop.clone())),
        tokio::spawn(load(client(node), stop.clone(), acked.clone())),
    ];
    Work { stop, tasks }
}

/// Waits until an occurrence due after `after_ms` has been handed out.
async fn an_occurrence_after(ticks: &Mutex<Ticks>, after_ms: u64, what: &str) {
    let came =
        holds_within_async(WAIT, async || ticks.lock().await.by_occurrence.range(after_ms + 1..).next().is_some());
    assert!(came.await, "{what}: no occurrence after {after_ms} within {WAIT:?}");
}

/// Half a second past the latest occurrence handed out: a blow then leaves
/// the shard without an owner when the next one comes, so its next owner
/// must catch it up from the stored schedule.
async fn mid_period(ticks: &Mutex<Ticks>) {
    let latest = *ticks.lock().await.by_occurrence.keys().last().expect("an occurrence");
    let now = SystemWallClock.now_ms();
    tokio::time::sleep(Duration::from_millis((latest + 500).saturating_sub(now))).await;
}

/// The whole scenario on the store at `url`.
async fn a_schedule_survives_a_kill_and_a_stop(label: &str, url: &str, cli: Cli<'_>) {
    let mut nodes: Vec<Hourglass> = (0..3)
        .map(|_| serve().args(["--store", url, "--shard-lease-ms", &SHARD_LEASE_MS.to_string()]).start())
        .collect();
    let names: Vec<String> = tokio::task::block_in_place(|| nodes.iter().map(node_name).collect());
    // Put with the CLI through one node, read through another: one service.
    // The first occurrence is the first whole second after the put was
    // stored, somewhere between these two times; one may even be fired
    // before the read below, whose next run is then the second one.
    let put_ms = SystemWallClock.now_ms();
    let put = hourglass(&[
        "schedule",
        "put",
        NAME,
        "--queue",
        TICKS,
        "--cron",
        "* * * * * *",
        "--tz",
        "Europe/Berlin",
        "--misfire",
        "all",
        "--payload",
        r#"{"tick":true}"#,
        "--server",
        &nodes[1].url(),
    ]);
    assert!(put.contains(NAME), "{put}");
    let put_end_ms = SystemWallClock.now_ms();
    let shown = client(&nodes[0]).schedule(NAME).await.expect("read the schedule through another node");
    assert_eq!((shown.cron.as_deref(), &*shown.time_zone), (Some("* * * * * *"), "Europe/Berlin"));
    let first_ms = shown.next_runs[0].at_ms;
    let shard = tokio::task::block_in_place(|| schedule_shard(cli));

    let ticks = Arc::new(Mutex::new(Ticks::default()));
    let acked = Arc::new(AtomicU64::new(0));
    let mut work: Vec<Work> = nodes.iter().map(|node| start_work(node, &ticks, &acked)).collect();
    an_occurrence_after(&ticks, first_ms + 2_000, "the schedule runs").await;

    // kill -9 the node that holds the schedule's shard.
    let mut owner = None;
    tokio::task::block_in_place(|| {
        within(WAIT, "a node holds the schedule's shard", || {
            owner = holder(cli, shard).and_then(|node| names.iter().position(|name| *name == node));
            owner.is_some()
        })
    });
    let killed = owner.expect("an owner");
    mid_period(&ticks).await;
    work[killed].stop.store(true, Ordering::Relaxed);
    nodes[killed].kill();
    let killed_at = Instant::now();
    let killed_ms = SystemWallClock.now_ms();
    let mut second = None;
    tokio::task::block_in_place(|| {
        within(WAIT, "another node takes the schedule's shard", || {
            let node = holder(cli, shard);
            second = node.and_then(|node| names.iter().position(|name| *name == node)).filter(|&at| at != killed);
            second.is_some()
        })
    });
    let took_over = killed_at.elapsed();
    let second = second.expect("a new owner");
    an_occurrence_after(&ticks, killed_ms + 1_000, "the new owner fires").await;

    // SIGSTOP the new owner past its lease: the third takes the shard; then SIGCONT.
    mid_period(&ticks).await;
    nodes[second].signal("STOP");
    let stopped_at = Instant::now();
    let stopped_ms = SystemWallClock.now_ms();
    let third = (0..3).find(|&at| at != killed && at != second).expect("a third node");
    tokio::task::block_in_place(|| {
        within(WAIT, "the third node takes the shard of the stopped one", || {
            holder(cli, shard).as_deref() == Some(&names[third])
        })
    });
    let moved_again = stopped_at.elapsed();
    an_occurrence_after(&ticks, stopped_ms + 1_000, "the third node fires").await;
    // Stopped for three leases in all, then it goes on where it was: fenced.
    let stopped_for = Duration::from_millis(3 * SHARD_LEASE_MS);
    tokio::time::sleep(stopped_for.saturating_sub(stopped_at.elapsed())).await;
    nodes[second].signal("CONT");
    let resumed_ms = SystemWallClock.now_ms();
    an_occurrence_after(&ticks, resumed_ms + 3_000, "the schedule runs on after SIGCONT").await;

    // The CLI and the dashboard's totals see it through the node that was stopped.
    let listed = hourglass(&["schedule", "list", "--server", &nodes[second].url()]);
    assert!(listed.contains(NAME) && listed.contains("Europe/Berlin"), "{listed}");
    let overview = client(&nodes[second]).overview(true).await.expect("the dashboard's overview");
    assert_eq!(overview.totals.schedules, 1);
    // Pause through a live node: its answer names the last occurrence enqueued.
    let paused = client(&nodes[third]).pause_schedule(NAME).await.expect("pause the schedule");
    let last_ms = paused.last_run.expect("it ran").at_ms;
    // Every whole second after the put had returned is an occurrence; one in
    // the second the put took may be (it is not a stray).
    let after_second = |ms: u64| ms / 1_000 * 1_000 + 1_000;
    let (required_from, allowed_from) = (after_second(put_end_ms), after_second(put_ms));
    let drained = holds_within_async(WAIT, async || {
        let t = ticks.lock().await;
        (required_from..=last_ms).step_by(1_000).all(|at| t.by_occurrence.contains_key(&at))
    });
    let drained = drained.await;
    for w in &work {
        w.stop.store(true, Ordering::Relaxed);
    }
    for w in &mut work {
        for task in w.tasks.drain(..) {
            let _ = tokio::time::timeout(REQUEST_TIMEOUT * 2, task).await;
        }
    }
    let fenced =
        nodes[second].stderr().lines().filter(|l| l.contains("fenced") || l.contains("lost the lease")).count();
    for node in &mut nodes {
        node.kill();
    }

    let t = ticks.lock().await;
    let expected: Vec<u64> = (required_from..=last_ms).step_by(1_000).collect();
    let missing: Vec<u64> = expected.iter().copied().filter(|at| !t.by_occurrence.contains_key(at)).collect();
    let doubled: Vec<(&u64, &BTreeSet<u64>)> = t.by_occurrence.iter().filter(|(_, ids)| ids.len() > 1).collect();
    let stray: Vec<&u64> =
        t.by_occurrence.keys().filter(|&&at| at < allowed_from || at > last_ms || at % 1_000 != 0).collect();
    let late_ms = |range: std::ops::Range<u64>| {
        t.first_seen_ms.range(range).map(|(at, seen)| seen.saturating_sub(*at)).max().unwrap_or(0)
    };
    let (late_kill_ms, late_stop_ms) = (late_ms(killed_ms..killed_ms + 2_000), late_ms(stopped_ms..stopped_ms + 2_000));
    println!(
        "{label}: schedule every second in Europe/Berlin, occurrences {required_from}..={last_ms}: {} expected, {} with a \
         task, {} deliveries, {} load tasks acked; the shard moved {took_over:?} after kill -9 and {moved_again:?} \
         after SIGSTOP; the occurrence in each gap between owners handed out {late_kill_ms} ms and \
         {late_stop_ms} ms after its time; the stopped node logged {fenced} fencing lines after SIGCONT",
        expected.len(),
        t.by_occurrence.len(),
        t.deliveries,
        acked.load(Ordering::Relaxed),
    );
    assert!(t.problems.is_empty(), "{:?}", t.problems);
    assert!(missing.is_empty(), "occurrences without a task: {missing:?}");
    assert!(doubled.is_empty(), "occurrences enqueued more than once: {doubled:?}");
    assert!(stray.is_empty(), "tasks for occurrences off the schedule's run: {stray:?}");
    assert!(drained, "not every occurrence was handed out within {WAIT:?}");
    assert!(expected.len() >= 8, "the run was too short to mean anything");
    // Each blow came mid-period, so the next occurrence fell while the shard
    // had no live owner: fired late, from the stored schedule, by the next.
    assert!(late_kill_ms >= 100 && late_stop_ms >= 100, "no occurrence fell in a gap between owners");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_on_three_nodes_loses_and_doubles_no_occurrence_through_kill_9_and_sigstop() {
    let Some(redis) = Server::start() else { return };
    a_schedule_survives_a_kill_and_a_stop("one redis", &redis.url(), &|args| redis.cli(args)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_on_three_nodes_and_a_cluster_of_three_masters_loses_and_doubles_no_occurrence() {
    let Some(cluster) = Cluster::start() else { return };
    let cli = |args: &[&str]| cluster.masters[0].cli(args);
    a_schedule_survives_a_kill_and_a_stop("cluster of three masters", &cluster.url(), &cli).await;
}
