//! Enqueues of one queue that arrive together go to Redis together
//! (`enqueue_groups.rs`), and each is still answered for its own tasks, as
//! it would have been alone.

use std::collections::HashSet;
use std::future::Future;
use std::task::Poll;

use futures_util::future::join_all;
use hourglass_queue::limits::Limits;

use super::*;

/// Request `i`'s tasks: one, or three for every fifth, each payload naming
/// the request and the task.
fn request(i: usize) -> Vec<NewTask> {
    let len = if i.is_multiple_of(5) { 3 } else { 1 };
    (0..len).map(|j| NewTask::new(format!(r#"{{"r":{i},"t":{j}}}"#), RunAt::Delay(3_600_000))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueues_sent_together_share_scripts_and_each_gets_its_own_tasks() {
    let Some(server) = Server::start() else { return };
    let b = sole_node(&server.url()).await;
    let requests = 200;
    // The queue is known to the node first: its enqueues then reach the
    // groups in the order they are polled.
    let first = b.enqueue("together", NewTask::new("{}", RunAt::Delay(3_600_000))).await.unwrap();
    let scripts_before = b.enqueue_scripts();
    let answers = join_all((0..requests).map(|i| b.enqueue_batch("together", request(i)))).await;
    let scripts = b.enqueue_scripts() - scripts_before;
    println!("{requests} enqueues sent at once went in {scripts} scripts");
    assert!(scripts < requests as u64 / 4, "{scripts} scripts for {requests} enqueues");

    let mut ids = HashSet::new();
    for (i, answer) in answers.into_iter().enumerate() {
        let done = answer.unwrap_or_else(|error| panic!("request {i}: {error}"));
        assert_eq!(done.len(), request(i).len(), "request {i} is answered for each of its tasks");
        for (j, enqueued) in done.iter().enumerate() {
            assert!(enqueued.created && ids.insert(enqueued.id), "request {i}: a new id each task");
            let stored = b.get(enqueued.id).await.unwrap();
            assert_eq!(stored.payload[..], *format!(r#"{{"r":{i},"t":{j}}}"#).as_bytes(), "request {i}, task {j}");
            assert_eq!(stored.task.run_at_ms, enqueued.run_at_ms);
        }
    }
    assert!(!ids.contains(&first.id));
    assert_eq!(b.queue("together").await.unwrap().scheduled, ids.len() + 1);
    b.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_past_the_shards_cap_goes_again_one_enqueue_at_a_time() {
    let Some(server) = Server::start() else { return };
    let mut options = RedisOptions::new(server.url().parse().unwrap());
    // Sixteen shards of two tasks each.
    options.limits = Limits { tasks_max: 32, ..Limits::default() };
    let b = RedisBackend::connect(options).await.expect("connect to redis");
    let task = || NewTask::new("{}", RunAt::Delay(3_600_000));
    b.enqueue("capped", task()).await.unwrap();
    let answers = join_all((0..100).map(|_| b.enqueue("capped", task()))).await;
    let taken = answers.iter().filter(|answer| answer.is_ok()).count();
    for answer in &answers {
        assert!(matches!(answer, Ok(_) | Err(QueueError::TooManyTasks { max: 32 })), "{answer:?}");
    }
    // A group refused whole would have left most shards empty: each
    // enqueue, tried alone in turn, fills every shard.
    assert_eq!(taken, 31, "every shard filled");
    assert_eq!(b.queue("capped").await.unwrap().scheduled, 32);
    b.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueues_whose_callers_go_away_free_their_place_and_waiting_ones_are_not_sent() {
    let Some(server) = Server::start() else { return };
    let b = sole_node(&server.url()).await;
    b.enqueue("dropped", NewTask::new("{}", RunAt::Delay(3_600_000))).await.unwrap();
    let mut sent: Vec<_> = (0..40).map(|i| Some(b.enqueue_batch("dropped", request(i)))).collect();
    // Each is polled once: the first two go at once (IN_FLIGHT_MAX), the
    // rest wait.
    std::future::poll_fn(|cx| {
        for future in sent.iter_mut().flatten() {
            assert!(future.as_mut().poll(cx).is_pending(), "no reply before a round trip");
        }
        Poll::Ready(())
    })
    .await;
    // Every third caller goes away: the waiting ones, then the first, whose
    // script is under way and whose place passes to the rest.
    for future in sent.iter_mut().step_by(3).rev() {
        *future = None;
    }
    let kept: Vec<usize> = (0..sent.len()).filter(|i| !i.is_multiple_of(3)).collect();
    let answers = tokio::time::timeout(Duration::from_secs(30), join_all(sent.into_iter().flatten()))
        .await
        .expect("every enqueue still waited for is answered");
    let mut kept_tasks = 0;
    for (i, answer) in kept.iter().zip(answers) {
        let done = answer.unwrap_or_else(|error| panic!("request {i}: {error}"));
        for (j, enqueued) in done.iter().enumerate() {
            let stored = b.get(enqueued.id).await.unwrap();
            assert_eq!(stored.payload[..], *format!(r#"{{"r":{i},"t":{j}}}"#).as_bytes(), "request {i}, task {j}");
        }
        kept_tasks += done.len();
    }
    until("every place given up", Duration::from_secs(20), || b.enqueues_under_way() == 0).await;
    // One more goes alone.
    let scripts = b.enqueue_scripts();
    let one = NewTask::new("{}", RunAt::Delay(3_600_000));
    tokio::time::timeout(Duration::from_secs(20), b.enqueue("dropped", one)).await.expect("not stuck").unwrap();
    assert_eq!(b.enqueue_scripts(), scripts + 1);
    // Those that waited were not sent; the first, under way, may or may
    // not have been written.
    let held = b.queue("dropped").await.unwrap().scheduled;
    let at_least = 1 + kept_tasks + 1;
    assert!((at_least..=at_least + request(0).len()).contains(&held), "{held} held, {at_least} at least");
    b.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_whose_script_fails_answers_every_enqueue_and_the_queue_goes_on() {
    let Some(mut server) = Server::start() else { return };
    let b = sole_node(&server.url()).await;
    b.enqueue("failing", NewTask::new("{}", RunAt::Delay(3_600_000))).await.unwrap();
    server.kill();
    let scripts = b.enqueue_scripts();
    let answers = tokio::time::timeout(
        Duration::from_secs(60),
        join_all((0..40).map(|i| b.enqueue_batch("failing", request(i)))),
    )
    .await
    .expect("every enqueue is answered");
    for answer in &answers {
        assert!(answer.is_err(), "{answer:?}");
    }
    let scripts = b.enqueue_scripts() - scripts;
    assert!(scripts < 40, "the waiting enqueues went as groups: {scripts} scripts");
    until("every place given up", Duration::from_secs(20), || b.enqueues_under_way() == 0).await;
    server.restart();
    let took =
        until_ok(Duration::from_secs(30), || b.enqueue("failing", NewTask::new("{}", RunAt::Delay(3_600_000)))).await;
    println!("an enqueue went through {took:?} after Redis came back");
    b.close();
}

/// Retries `attempt` until it succeeds, within `timeout`; how long it took.
async fn until_ok<F, T>(timeout: Duration, mut attempt: impl FnMut() -> F) -> Duration
where
    F: Future<Output = Result<T, QueueError>>,
{
    let started = Instant::now();
    loop {
        match attempt().await {
            Ok(_) => return started.elapsed(),
            Err(error) => assert!(started.elapsed() < timeout, "not within {timeout:?}: {error}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
