//! Push delivery through the real binary: a queue's push target receives
//! its due tasks, signed with the key given on the command line; a task
//! aimed at a loopback address the allow list does not open is refused at
//! enqueue, and never reaches anything.

use std::time::Duration;

use hourglass_client::wire::{HttpTarget, NewTask, PushTarget, QueueSettings};
use hourglass_client::Error;
use hourglass_push::SigningKeys;
use hourglass_queue::{SystemWallClock, WallClock};
use hourglass_test_support::receiver::Receiver;
use hourglass_test_support::within_async;

use crate::{client, serve, Seq};

const KEY: &str = "a-signing-key-of-the-test";
const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hourglass_serve_pushes_due_tasks_signed_and_refuses_loopback_targets_at_enqueue() {
    let receiver = Receiver::start().await;
    let data = tempfile::tempdir().unwrap();
    let server =
        serve().data(data.path()).args(["--push-allow", &receiver.host_port(), "--push-signing-key", KEY]).start();
    let client = client(&server, WAIT);

    let push = PushTarget { url: receiver.url("/ok"), method: None, headers: Default::default(), timeout_ms: None };
    let settings = QueueSettings { push: Some(push), ..QueueSettings::default() };
    client.put_settings("hooks", &settings).await.unwrap();
    let mut ids = Vec::new();
    for seq in 0..3 {
        ids.push(client.enqueue("hooks", &Seq::task(seq, 0)).await.unwrap().value.id);
    }
    // Port 9 on loopback: not the receiver's, so not opened by the allow list.
    let refused_target =
        HttpTarget { url: "http://127.0.0.1:9/never".into(), method: None, headers: Default::default() };
    let refused = NewTask { http: Some(refused_target), ..Seq::task(9, 0) };
    match client.enqueue("aimed", &refused).await {
        Err(Error::Api { status, code, message }) => {
            assert_eq!((status.as_u16(), code.as_str()), (400, "invalid"));
            assert_eq!(
                message,
                "target refused: 127.0.0.1 is a loopback address, and the host is not on the push allow list"
            );
        }
        other => panic!("a loopback target was not refused at enqueue: {other:?}"),
    }

    within_async(WAIT, "three pushes received", async || receiver.requests() >= 3).await;
    let keys = SigningKeys::parse_list(KEY).unwrap();
    let mut delivered = Vec::new();
    for got in receiver.got() {
        let header = |name| got.headers[name].to_str().unwrap().to_owned();
        let signature = header("hourglass-signature");
        assert_eq!(keys.verify(&signature, &got.body, SystemWallClock.now_ms(), 60_000), Ok(()), "{signature}");
        assert_eq!(header("hourglass-queue"), "hooks");
        assert_eq!(header("content-type"), "application/json");
        delivered.push(header("hourglass-task-id").parse::<u64>().unwrap());
    }
    delivered.sort();
    assert_eq!(delivered, ids, "each task once, and only the queue's");
    within_async(WAIT, "the pushed tasks acked", async || {
        let mut gone = true;
        for &id in &ids {
            gone &= client.get(id).await.is_err();
        }
        gone
    })
    .await;

    assert_eq!(receiver.requests(), 3, "nothing refused reached the receiver");

    // Counted before each settle; in flight until just after it.
    let lines = [
        "hourglass_push_deliveries_total{outcome=\"done\"} 3",
        "hourglass_push_deliveries_total{outcome=\"dead\"} 0",
        "hourglass_push_lateness_seconds_count 3",
        "hourglass_push_in_flight 0",
    ];
    within_async(WAIT, "the metrics show three pushes done", async || {
        let metrics = reqwest::get(format!("{}/metrics", server.url())).await.unwrap().text().await.unwrap();
        lines.iter().all(|line| metrics.lines().any(|l| l == *line))
    })
    .await;
}
