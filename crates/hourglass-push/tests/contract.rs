//! The loop over the embedded backend through [`TasksSource`]: a queue's push
//! target and tasks' own targets, delivered to a real receiver, and each
//! outcome applied to the task as the contract keeps it (acked and gone;
//! dead with the reason; due again after `Retry-After`; refused and dead).
//! The engine, the source and the client share a manual clock, so times are
//! exact.

use std::sync::Arc;
use std::time::Duration;

use hourglass_embedded::{Engine, Options, RedbStore};
use hourglass_push::{AllowList, Deliverer, HttpTarget, OutcomeKind, PushClient, PushTarget, TasksSource};
use hourglass_queue::prelude::*;
use hourglass_queue::{ManualWallClock, NewTask, QueueError, QueueSettings, RunAt, Status, WallClock};
use hourglass_test_support::within_async;

use crate::outcomes::NOW_MS;
use hourglass_test_support::receiver::Receiver;

const WAIT: Duration = Duration::from_secs(30);

/// Due now, with one attempt.
fn due(payload: &str, http: Option<HttpTarget>) -> NewTask {
    NewTask { http, max_attempts: Some(1), ..NewTask::new(payload, RunAt::Delay(0)) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_backend_delivers_by_push_and_keeps_each_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualWallClock::at_ms(NOW_MS));
    let engine =
        Engine::open(Box::new(RedbStore::open(dir.path()).unwrap()), Options::default(), clock.clone()).unwrap();
    let timers = engine.start_timers().unwrap();
    let receiver = Receiver::start().await;

    let queue_target = PushTarget::new(HttpTarget::post(receiver.url("/ok")));
    let settings = QueueSettings { push: Some(Arc::new(queue_target)), ..QueueSettings::default() };
    engine.put_settings("hooks", settings).await.unwrap();
    let mut acked = Vec::new();
    for n in 0..5 {
        acked.push(engine.enqueue("hooks", due(&format!("{{\"n\":{n}}}"), None)).await.unwrap().id);
    }
    let own = |path: &str| Some(HttpTarget::post(receiver.url(path)));
    let failed = engine.enqueue("mixed", due("{}", own("/fail"))).await.unwrap().id;
    let gone = engine.enqueue("mixed", due("{}", own("/gone"))).await.unwrap().id;
    let later =
        engine.enqueue("mixed", NewTask { max_attempts: Some(3), ..due("{}", own("/slow-down")) }).await.unwrap().id;
    let refused_url = HttpTarget::post("http://127.0.0.1:9/never");
    let refused = engine.enqueue("mixed", due("{}", Some(refused_url))).await.unwrap().id;

    let wall: Arc<dyn WallClock> = clock.clone();
    let client = PushClient::builder()
        .allow(AllowList::parse([receiver.host_port()]).unwrap())
        .clock(wall.clone())
        .build()
        .unwrap();
    let source = TasksSource::new(engine.clone()).with_clock(wall);
    let deliverer = Deliverer::new(Arc::new(source), client).concurrency(4);
    let metrics = deliverer.metrics();
    let running = deliverer.start();
    within_async(WAIT, "nine deliveries settled", async || {
        let counts = metrics.read();
        OutcomeKind::ALL.iter().map(|&k| counts.deliveries(k)).sum::<u64>() == 9 && counts.in_flight == 0
    })
    .await;
    running.stop(WAIT).await;

    for id in acked {
        assert!(matches!(engine.get(id).await, Err(QueueError::NotFound(_))), "task {id} acked and gone");
    }
    let ids: Vec<String> = receiver
        .got()
        .iter()
        .filter_map(|g| g.headers.get("hourglass-task-id"))
        .map(|v| v.to_str().unwrap().into())
        .collect();
    assert_eq!(ids.len(), 8, "every task but the refused one reached the receiver");
    let last_error = async |id| {
        let info = engine.get(id).await.unwrap();
        (info.status, info.task.last_error.as_deref().map(str::to_owned), info.task.run_at_ms)
    };
    assert_eq!(last_error(failed).await.0, Status::Dead, "one attempt, failed");
    assert_eq!(last_error(failed).await.1.as_deref(), Some("HTTP 500: database is down retry later"));
    assert_eq!(last_error(gone).await.0, Status::Dead);
    assert_eq!(last_error(gone).await.1.as_deref(), Some("HTTP 410: no such order"));
    assert_eq!(last_error(refused).await.0, Status::Dead);
    assert_eq!(
        last_error(refused).await.1.as_deref(),
        Some("target refused: 127.0.0.1 is a loopback address, and the host is not on the push allow list")
    );
    // Retry-After: 7, on a clock that has not moved: due again 7 s later,
    // with two attempts left.
    let (status, error, run_at_ms) = last_error(later).await;
    assert_eq!(error.as_deref(), Some("HTTP 429"));
    assert_eq!((status, run_at_ms), (Status::Scheduled, NOW_MS + 7_000), "{status:?}");

    engine.close();
    drop(timers);
}
