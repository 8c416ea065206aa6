//! Never early, through the real binary on the real clock: a task enqueued
//! with a delay, claimed by a consumer already waiting, reaches it no sooner
//! than the delay after the client *sent* the enqueue (the server counts
//! from its arrival, which comes later). The same for a beanstalkd `put`
//! with a delay. A hard property, not a timing: a failure is a bug, never
//! a slow machine. It prints how close the closest came.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use hourglass_client::wire::ClaimRequest;
use hourglass_queue::{SystemWallClock, WallClock};

use crate::{client, serve, Seq};

/// Tasks sent one after another, each claimed before the next is sent.
const TASKS: u64 = 200;
/// Each one's delay: as the issue measured it.
const DELAY_MS: u64 = 20;

#[tokio::test]
async fn a_task_reaches_a_waiting_consumer_no_sooner_than_its_delay_after_it_was_sent() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve().data(dir.path()).start();
    let producer = client(&server, Duration::from_secs(30));
    let consumer = client(&server, Duration::from_secs(30));
    let claim = ClaimRequest { max: Some(1), wait_ms: Some(5_000), ..ClaimRequest::default() };
    let mut margins_us = Vec::new();
    for seq in 0..TASKS {
        let waiting = tokio::spawn({
            let (consumer, claim) = (consumer.clone(), claim.clone());
            async move { consumer.claim("early", &claim).await }
        });
        // Let the claim reach the server first, most of the time: the
        // property holds either way.
        tokio::task::yield_now().await;
        let sent_us = SystemWallClock.now_us();
        producer.enqueue("early", &Seq::task(seq, DELAY_MS)).await.unwrap();
        let claimed = waiting.await.unwrap().unwrap();
        let got_us = SystemWallClock.now_us();
        assert_eq!(claimed.tasks.len(), 1, "task {seq} not handed out");
        let waited_us = got_us - sent_us;
        assert!(
            waited_us >= DELAY_MS * 1_000,
            "task {seq} came {waited_us} µs after it was sent, before {DELAY_MS} ms"
        );
        margins_us.push(waited_us - DELAY_MS * 1_000);
        consumer.ack(claimed.tasks[0].id, claimed.tasks[0].lease).await.unwrap();
    }
    margins_us.sort_unstable();
    let at = |q: f64| margins_us[((margins_us.len() - 1) as f64 * q) as usize];
    println!(
        "{TASKS} tasks with delay {DELAY_MS} ms: none early; after the delay by min {} µs, p50 {} µs, max {} µs",
        at(0.0),
        at(0.5),
        at(1.0)
    );
}

#[test]
fn a_beanstalkd_put_with_a_delay_is_reserved_no_sooner_than_its_delay_after_it_was_sent() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve().data(dir.path()).beanstalk().start();
    let stream = TcpStream::connect(("127.0.0.1", server.beanstalk_port())).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let mut line = String::new();
    let mut margins_us = Vec::new();
    for _ in 0..3 {
        let sent_us = SystemWallClock.now_us();
        writer.write_all(b"put 0 1 10 2\r\nhi\r\nreserve-with-timeout 5\r\n").unwrap();
        line.clear();
        reader.read_line(&mut line).unwrap();
        assert!(line.starts_with("INSERTED "), "{line}");
        let id = line.trim_end().strip_prefix("INSERTED ").unwrap().to_owned();
        line.clear();
        reader.read_line(&mut line).unwrap();
        let got_us = SystemWallClock.now_us();
        assert!(line.starts_with(&format!("RESERVED {id} ")), "{line}");
        line.clear();
        reader.read_line(&mut line).unwrap(); // the body
        let waited_us = got_us - sent_us;
        assert!(waited_us >= 1_000_000, "reserved {waited_us} µs after the put was sent, before its 1 s delay");
        margins_us.push(waited_us - 1_000_000);
        writer.write_all(format!("delete {id}\r\n").as_bytes()).unwrap();
        line.clear();
        reader.read_line(&mut line).unwrap();
        assert_eq!(line, "DELETED\r\n");
    }
    println!("3 puts with delay 1 s: none early; reserved after the delay by {margins_us:?} µs");
}
