//! Connections that cannot be held hostage: thousands of half-finished
//! requests, on HTTP and on the beanstalkd front, while real clients are
//! served; the half-finished ones are dropped at their deadline (short here,
//! set by the test). Timings are printed, never asserted beyond generous
//! bounds.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::{client, serve, Seq};

/// Half-finished HTTP requests held open at once.
const HTTP_HALF_OPEN: usize = 2_000;
/// Half-finished beanstalkd commands held open at once.
const BEANSTALK_HALF_OPEN: usize = 200;
/// Real requests made while they are held.
const REAL_REQUESTS: u64 = 20;
/// The deadlines the test sets: past the time to open them all on a loaded
/// machine (6.5 s at load 10), so they are all held while real clients ask.
const DEADLINE: &str = "15s";
/// How long the server may take to drop them all, at most: far past the
/// deadline, on a loaded machine.
const DROPPED_WITHIN: Duration = Duration::from_secs(90);

/// Connects to `addr` and sends `bytes`: the first part of something never finished.
pub(crate) async fn half_send(addr: &str, bytes: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    stream.write_all(bytes).await.expect("send the first part");
    stream
}

/// Waits until the server closes `stream` (whatever it answers first),
/// failing the test past `deadline`.
pub(crate) async fn closed_by_server(mut stream: TcpStream, deadline: Instant) {
    let mut sink = Vec::new();
    let read = tokio::time::timeout_at(deadline.into(), stream.read_to_end(&mut sink)).await;
    assert!(read.is_ok(), "a half-finished connection still open after {DROPPED_WITHIN:?}");
}

/// Sends `command` on a new beanstalkd connection and reads the first line of the reply.
async fn beanstalk_line(addr: &str, command: &[u8]) -> String {
    let mut stream = half_send(addr, command).await;
    let mut reply = Vec::new();
    let mut byte = [0u8; 1];
    while !reply.ends_with(b"\r\n") {
        let read = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut byte)).await;
        match read {
            Ok(Ok(1)) => reply.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&reply).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_finished_requests_are_dropped_while_real_clients_are_served() {
    let data = tempfile::tempdir().unwrap();
    let server = serve()
        .data(data.path())
        .beanstalk()
        .args(["--header-timeout", DEADLINE, "--body-timeout", DEADLINE, "--idle-timeout", DEADLINE])
        .start();
    let addr = server.addr().to_owned();
    let beanstalk = format!("127.0.0.1:{}", server.beanstalk_port());

    let opening = Instant::now();
    let mut held = Vec::with_capacity(HTTP_HALF_OPEN + BEANSTALK_HALF_OPEN);
    for n in 0..HTTP_HALF_OPEN {
        // Half the headers, half a body, or nothing at all.
        let first: &[u8] = match n % 3 {
            0 => b"POST /v1/queues/slow/tasks HTTP/1.1\r\nhost: x\r\ncontent-le",
            1 => b"POST /v1/queues/slow/tasks HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{\"payl",
            _ => b"",
        };
        held.push(half_send(&addr, first).await);
    }
    for n in 0..BEANSTALK_HALF_OPEN {
        let first: &[u8] = if n % 2 == 0 { b"put 0 0 60 10\r\nhel" } else { b"put 0 0" };
        held.push(half_send(&beanstalk, first).await);
    }
    let opened_in = opening.elapsed();

    // Real clients meanwhile: each request answered as usual.
    let client = client(&server, Duration::from_secs(30));
    let mut latencies = Vec::new();
    for seq in 0..REAL_REQUESTS {
        let asked = Instant::now();
        client.enqueue("slow", &Seq::task(seq, 3_600_000)).await.expect("a real client is answered");
        latencies.push(asked.elapsed());
    }
    latencies.sort();
    let mut worker = beanstalk_line(&beanstalk, b"put 0 0 60 2\r\nhi\r\n").await;
    assert!(worker.starts_with("INSERTED"), "a real beanstalk client is answered: {worker}");

    let waiting = Instant::now();
    let deadline = waiting + DROPPED_WITHIN;
    for stream in held {
        closed_by_server(stream, deadline).await;
    }
    let dropped_after = waiting.elapsed();
    worker = beanstalk_line(&beanstalk, b"stats-tube default\r\n").await;
    assert!(worker.starts_with("OK"), "the front still answers: {worker}");
    client.enqueue("slow", &Seq::task(REAL_REQUESTS, 3_600_000)).await.expect("answered after the drop");
    println!(
        "{HTTP_HALF_OPEN} HTTP and {BEANSTALK_HALF_OPEN} beanstalk half-finished connections opened in {opened_in:?}; \
         {REAL_REQUESTS} real enqueues meanwhile: median {:?}, max {:?}; all dropped {dropped_after:?} later \
         (deadline {DEADLINE})",
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_connection_limit_new_connections_wait() {
    const LIMIT: usize = 20;
    let data = tempfile::tempdir().unwrap();
    let server = serve()
        .data(data.path())
        .args(["--max-connections", &LIMIT.to_string(), "--header-timeout", DEADLINE, "--idle-timeout", DEADLINE])
        .start();
    // The limit taken up by clients that never finish their headers (the
    // test support's readiness check has let its own connection go).
    let mut held = Vec::new();
    for _ in 0..LIMIT {
        held.push(half_send(server.addr(), b"GET /healthz HTTP/1.1\r\nhost").await);
    }
    // One more waits to be accepted, and is served once the deadline frees a slot.
    let asked = Instant::now();
    let client = client(&server, DROPPED_WITHIN);
    client.enqueue("limited", &Seq::task(0, 3_600_000)).await.expect("served once a slot is free");
    println!(
        "with {LIMIT} connections held, a new request was answered after {:?} (deadline {DEADLINE})",
        asked.elapsed()
    );
    let deadline = Instant::now() + DROPPED_WITHIN;
    for stream in held {
        closed_by_server(stream, deadline).await;
    }
}
