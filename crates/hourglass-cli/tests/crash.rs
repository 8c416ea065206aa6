//! The real server, killed with SIGKILL at random moments under load, then
//! restarted, over and over. Afterwards:
//! - every enqueue that got a 2xx was delivered (before a kill, or after);
//! - nothing was delivered that was never enqueued;
//! - nothing was delivered again after its ack got a 2xx.
//!
//! Real processes and real time: rounds are few, bounds generous, and the
//! figures are printed.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hourglass_client::wire::ClaimRequest;
use hourglass_client::Client;
use hourglass_test_support::holds_within_async;
use rand::Rng;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use crate::{client, serve, Seq};

const ROUNDS: usize = 6;
const PRODUCERS: usize = 4;
const CONSUMERS: usize = 2;
/// A request that takes longer has met a server that is gone.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the last server may take to hand out what it holds.
const DRAIN_WITHIN: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Ledger {
    /// Sequence numbers whose enqueue was attempted.
    sent: HashSet<u64>,
    /// ... and answered with a 2xx: these must never be lost.
    enqueued: HashSet<u64>,
    delivered: HashSet<u64>,
    deliveries: u64,
    /// Acks answered with a 2xx: these must never come back.
    acked: HashSet<u64>,
    violations: Vec<String>,
}

async fn produce(client: Client, ledger: Arc<Mutex<Ledger>>, first: u64, stop: Instant) {
    let mut seq = first;
    while Instant::now() < stop {
        ledger.lock().await.sent.insert(seq);
        let delay_ms = rand::rng().random_range(0..50);
        if client.enqueue("crash", &Seq::task(seq, delay_ms)).await.is_err() {
            return; // the server is gone: this round is over
        }
        ledger.lock().await.enqueued.insert(seq);
        seq += PRODUCERS as u64;
    }
}

/// Claims and acks until `stop`, or until the server is gone; returns whether
/// the last claim came back empty.
async fn consume(client: &Client, ledger: &Mutex<Ledger>, stop: Instant) -> bool {
    let mut empty = false;
    let claim = ClaimRequest { max: Some(16), wait_ms: Some(50), lease_ms: Some(60_000), acks: None };
    while Instant::now() < stop {
        let Ok(claimed) = client.claim("crash", &claim).await else { return empty };
        empty = claimed.tasks.is_empty();
        for task in claimed.tasks {
            let seq = Seq::of(task.payload.as_deref().expect("a JSON payload"));
            {
                let mut ledger = ledger.lock().await;
                ledger.deliveries += 1;
                if !ledger.sent.contains(&seq) {
                    ledger.violations.push(format!("delivered {seq}, which was never sent"));
                }
                if ledger.acked.contains(&seq) {
                    ledger.violations.push(format!("delivered {seq} again after its ack was acknowledged"));
                }
                ledger.delivered.insert(seq);
            }
            if client.ack(task.id, task.lease).await.is_err() {
                return false;
            }
            ledger.lock().await.acked.insert(seq);
        }
    }
    empty
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_load_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = serve().data(dir.path()).start();
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut next_seq = 0;
    for round in 0..ROUNDS {
        if round > 0 {
            server.restart();
        }
        let client = client(&server, REQUEST_TIMEOUT);
        // The kill comes at a random moment: that is the test.
        let run_for = Duration::from_millis(rand::rng().random_range(100..600));
        let stop = Instant::now() + run_for + Duration::from_secs(5);
        let mut load = Vec::new();
        for p in 0..PRODUCERS {
            load.push(tokio::spawn(produce(client.clone(), ledger.clone(), next_seq + p as u64, stop)));
        }
        for _ in 0..CONSUMERS {
            let (client, ledger) = (client.clone(), ledger.clone());
            load.push(tokio::spawn(async move {
                consume(&client, &ledger, stop).await;
            }));
        }
        tokio::time::sleep(run_for).await;
        server.kill();
        for task in load {
            task.await.unwrap();
        }
        next_seq += 1_000_000;
        let l = ledger.lock().await;
        println!(
            "crash: round {round} killed after {run_for:?}: {} enqueued, {} delivered so far",
            l.enqueued.len(),
            l.delivered.len()
        );
    }

    // One last start: everything acknowledged and not yet acked must come out.
    let restarted = Instant::now();
    server.restart();
    let ready_in = restarted.elapsed();
    let client = client(&server, REQUEST_TIMEOUT);
    let drained = holds_within_async(DRAIN_WITHIN, async || {
        consume(&client, &ledger, Instant::now() + Duration::from_millis(500)).await
    })
    .await;
    server.kill();

    let ledger = ledger.lock().await;
    let lost: Vec<_> = ledger.enqueued.difference(&ledger.delivered).take(10).collect();
    println!(
        "crash: {ROUNDS} kills; {} sent, {} acknowledged, {} delivered ({} deliveries), {} acked; last restart ready in {ready_in:?}",
        ledger.sent.len(),
        ledger.enqueued.len(),
        ledger.delivered.len(),
        ledger.deliveries,
        ledger.acked.len()
    );
    assert!(ledger.violations.is_empty(), "{:?}", &ledger.violations[..ledger.violations.len().min(10)]);
    assert!(lost.is_empty(), "acknowledged enqueues never delivered: {lost:?}");
    assert!(drained, "the last server still handed out tasks after {DRAIN_WITHIN:?}");
    assert!(ledger.enqueued.len() > 100, "the load was too light to mean anything");
}

/// A claim that waits 30 s for a task, known to be in the server's hands
/// when this returns: sent with `Expect: 100-continue`, whose `100 Continue`
/// the server sends only once the claim's handler reads the body.
async fn claim_in_flight(addr: &str, queue: &str) -> BufReader<TcpStream> {
    let body = serde_json::to_vec(&ClaimRequest { wait_ms: Some(30_000), ..ClaimRequest::default() }).unwrap();
    let mut stream = BufReader::new(TcpStream::connect(addr).await.expect("connect"));
    let head = format!(
        "POST /v1/queues/{queue}/claim HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nExpect: 100-continue\r\n\r\n",
        body.len()
    );
    stream.get_mut().write_all(head.as_bytes()).await.unwrap();
    let reply = status_line(&mut stream).await;
    assert!(reply.starts_with("HTTP/1.1 100 "), "the server asks for the claim's body: {reply:?}");
    stream.get_mut().write_all(&body).await.unwrap();
    stream
}

/// The next reply's status line (and the rest of its head, skipped).
async fn status_line(stream: &mut BufReader<TcpStream>) -> String {
    let read = async {
        let mut status = String::new();
        stream.read_line(&mut status).await.unwrap();
        let mut line = String::new();
        while stream.read_line(&mut line).await.unwrap() > 2 {
            line.clear();
        }
        status.trim_end().to_owned()
    };
    tokio::time::timeout(REQUEST_TIMEOUT, read).await.expect("a reply within the request timeout")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_cleanly_with_exit_0_and_keeps_acknowledged_writes() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = serve().data(dir.path()).start();
    let client = client(&server, REQUEST_TIMEOUT);
    let mut ids = Vec::new();
    for seq in 0..20 {
        ids.push(client.enqueue("term", &Seq::task(seq, 3_600_000)).await.unwrap().value.id);
    }
    // A consumer is waiting when the signal comes: it must get its answer, not a reset.
    let mut waiting = claim_in_flight(server.addr(), "empty").await;
    let signalled = Instant::now();
    server.signal("TERM");
    let answer = status_line(&mut waiting).await;
    assert!(answer.starts_with("HTTP/1.1 200 "), "the waiting claim was answered: {answer:?}");
    let exit = tokio::task::block_in_place(|| server.exited());
    println!("sigterm: exited {exit:?} {:?} after the signal", signalled.elapsed());
    assert!(exit.success(), "exit status {exit:?}");

    server.restart();
    let client = crate::client(&server, REQUEST_TIMEOUT);
    for id in ids {
        assert!(client.get(id).await.is_ok(), "task {id} lost after a clean stop");
    }
}
