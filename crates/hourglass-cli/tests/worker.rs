//! The Rust client's `Worker` against the real server: the server killed
//! and restarted under it, a handler slower than its lease, a panic, the
//! shutdown, a paused queue. Every wait is on what the test awaits, with a
//! deadline.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hourglass_client::wire::{ClaimedTask, NewTasks};
use hourglass_client::{Client, Worker, WorkerError, WorkerOptions, WorkerReport};
use hourglass_test_support::hourglass::Hourglass;
use hourglass_test_support::{free_port, within_async};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::{client, serve, Seq};

/// How long any one wait of these tests may take.
const PATIENCE: Duration = Duration::from_secs(60);

/// Options for a test: short waits, a quick backoff.
fn options() -> WorkerOptions {
    WorkerOptions {
        concurrency: 8,
        wait_ms: 500,
        shutdown_timeout: Duration::from_secs(20),
        backoff_max: Duration::from_millis(200),
        ..WorkerOptions::default()
    }
}

/// A worker running until its stop is sent.
struct Running {
    stop: oneshot::Sender<()>,
    run: JoinHandle<Result<WorkerReport, WorkerError>>,
}

impl Running {
    fn start(worker: Worker) -> Running {
        let (stop, stopped) = oneshot::channel::<()>();
        let run = tokio::spawn(worker.run_until(async move {
            let _ = stopped.await;
        }));
        Running { stop, run }
    }

    /// Asks it to stop; its report once it has.
    async fn stop(self) -> WorkerReport {
        let _ = self.stop.send(());
        let ended = tokio::time::timeout(PATIENCE, self.run).await.expect("the worker stops within its patience");
        ended.expect("the worker does not panic").expect("the worker ends without an error")
    }
}

/// Enqueues tasks `0..count` on `queue`.
async fn enqueue(client: &Client, queue: &str, count: u64) {
    let tasks = NewTasks { tasks: (0..count).map(|seq| Seq::task(seq, 0)).collect() };
    client.enqueue_batch(queue, &tasks).await.expect("enqueued");
}

/// Whether `queue` holds no live task and no dead one.
async fn drained(client: &Client, queue: &str) -> bool {
    client.queue(queue).await.is_ok_and(|q| q.scheduled + q.due + q.leased + q.dead == 0)
}

fn worker_client(server: &Hourglass) -> Client {
    client(server, Duration::from_secs(5))
}

/// A server on data of its own, with `args`.
fn started(args: &[&str]) -> (tempfile::TempDir, Hourglass) {
    let data = tempfile::tempdir().unwrap();
    let server = serve().data(data.path()).args(args).start();
    (data, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_killed_and_restarted_under_it_loses_nothing() {
    let data = tempfile::tempdir().unwrap();
    let address = format!("127.0.0.1:{}", free_port());
    let mut server = serve().listen(&address).data(data.path()).start();
    let admin = worker_client(&server);
    enqueue(&admin, "orders", 200).await;

    // The first 100 go through; the others wait at a gate, opened once the
    // server has been killed and started again.
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let (open, gate) = watch::channel(false);
    let handler_seen = Arc::clone(&seen);
    let worker = Worker::new(worker_client(&server), ["orders"], move |task: ClaimedTask| {
        let (seen, mut gate) = (Arc::clone(&handler_seen), gate.clone());
        async move {
            let seq = Seq::of(task.payload.as_deref().expect("a JSON payload"));
            if seq >= 100 {
                let _ = gate.wait_for(|open| *open).await;
            }
            seen.lock().unwrap().insert(seq);
            Ok::<_, String>(())
        }
    })
    .options(WorkerOptions { lease_ms: 2_000, ..options() });
    let running = Running::start(worker);
    within_async(PATIENCE, "the first 100 handled and acked", async || {
        admin.queue("orders").await.is_ok_and(|q| q.acked >= 100 && q.leased > 0)
    })
    .await;

    // Killed while eight handlers run; they end while it is down, so their
    // acks and the claims that follow find nobody; then it comes back.
    server.kill();
    let _ = open.send(true);
    within_async(PATIENCE, "the eight running handlers ended", async || seen.lock().unwrap().len() >= 108).await;
    server.restart();
    within_async(PATIENCE, "every task handled and the queue empty", async || {
        seen.lock().unwrap().len() == 200 && drained(&admin, "orders").await
    })
    .await;
    let report = running.stop().await;
    assert!(report.settled(), "{report:?}");
    assert!(report.acked >= 200 - 8, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_slower_than_its_lease_keeps_its_task() {
    let (_data, server) = started(&[]);
    let admin = worker_client(&server);
    enqueue(&admin, "slow", 1).await;
    let handled = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&handled);
    let (done, finished) = watch::channel(0u32);
    // Three leases long: it is extended every third of one. The lease is
    // long enough that an extension a second late on a loaded machine is
    // still in time (at 300 ms, one 200 ms late lost it, and the claim
    // loop took the task again).
    let worker = Worker::new(worker_client(&server), ["slow"], move |task: ClaimedTask| {
        let (seen, done) = (Arc::clone(&seen), done.clone());
        async move {
            seen.lock().unwrap().push((task.id, task.attempt));
            tokio::time::sleep(Duration::from_millis(4_500)).await;
            done.send_modify(|n| *n += 1);
            Ok::<_, String>(())
        }
    })
    .options(WorkerOptions { lease_ms: 1_500, ..options() });
    let running = Running::start(worker);
    let mut finished = finished;
    tokio::time::timeout(PATIENCE, finished.wait_for(|n| *n == 1)).await.expect("the handler ends").unwrap();
    within_async(PATIENCE, "the task acked", async || drained(&admin, "slow").await).await;
    let report = running.stop().await;
    assert_eq!(handled.lock().unwrap().len(), 1, "delivered once: {:?}", handled.lock().unwrap());
    let queue = admin.queue("slow").await.unwrap();
    assert_eq!((queue.delivered, queue.acked), (1, 1));
    assert_eq!((report.claimed, report.acked, report.lost_leases), (1, 1, 0), "{report:?}");
}

/// The tokio task each handler of `count` tasks on `queue` began in, in
/// the order they began; each handler first spends `compute` without
/// awaiting. All `count` are claimed at once (concurrency 8).
async fn tasks_begun_in(server: &Hourglass, queue: &str, count: u64, compute: Duration) -> Vec<tokio::task::Id> {
    let admin = worker_client(server);
    enqueue(&admin, queue, count).await;
    let begun = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&begun);
    let worker = Worker::new(worker_client(server), [queue], move |_task: ClaimedTask| {
        seen.lock().unwrap().push(tokio::task::id());
        std::thread::sleep(compute);
        async { Ok::<_, String>(()) }
    })
    .options(options());
    let running = Running::start(worker);
    within_async(PATIENCE, "every task acked", async || drained(&admin, queue).await).await;
    let report = running.stop().await;
    assert_eq!((report.claimed, report.acked), (count, count), "{report:?}");
    Arc::try_unwrap(begun).unwrap().into_inner().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_handlers_run_on_the_claim_loop_and_slow_starts_hand_the_rest_on() {
    let (_data, server) = started(&[]);
    // Handlers that end at once all run on the claim loop's task: no task
    // of their own, and their slots are free for the next claim. A thread
    // preempted past the loop's budget (500 us) while it runs them hands the
    // rest on, as it should: on a loaded machine a run may; one in three
    // must not.
    let mut runs = Vec::new();
    let one_task = loop {
        let quick = tasks_begun_in(&server, &format!("quick-{}", runs.len()), 8, Duration::ZERO).await;
        let one_task = quick.iter().all(|id| *id == quick[0]);
        runs.push(quick);
        if one_task || runs.len() == 3 {
            break one_task;
        }
    };
    assert!(one_task, "one task for the batch in one of three runs: {runs:?}");
    // A handler that computes past the claim loop's budget before it awaits
    // hands the rest of its batch to tasks of their own, side by side.
    let slow = tasks_begun_in(&server, "computing", 8, Duration::from_millis(2)).await;
    let others: HashSet<_> = slow[1..].iter().collect();
    assert_eq!(others.len(), 7, "each of the rest in a task of its own: {slow:?}");
    assert!(!others.contains(&slow[0]), "the first on the claim loop: {slow:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_nacks_with_its_message() {
    let (_data, server) = started(&[]);
    let admin = worker_client(&server);
    enqueue(&admin, "fragile", 1).await;
    let id = admin.list_tasks("fragile", &Default::default()).await.unwrap().tasks[0].id;
    let worker = Worker::new(worker_client(&server), ["fragile"], |task: ClaimedTask| async move {
        if Seq::of(task.payload.as_deref().expect("a JSON payload")) == 0 {
            panic!("no stock for order {}", task.id);
        }
        Ok::<_, String>(())
    })
    .options(WorkerOptions { nack_delay_ms: Some(600_000), ..options() });
    let running = Running::start(worker);
    let expected = format!("no stock for order {id}");
    within_async(PATIENCE, "the task nacked with the panic's message", async || {
        admin.get(id).await.is_ok_and(|task| task.last_error.as_deref() == Some(&expected))
    })
    .await;
    let report = running.stop().await;
    assert_eq!((report.failed, report.panicked, report.nacked, report.acked), (1, 1, 1, 0), "{report:?}");
    assert!(report.settled());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_nacks_with_its_text() {
    let (_data, server) = started(&[]);
    let admin = worker_client(&server);
    enqueue(&admin, "refused", 1).await;
    let id = admin.list_tasks("refused", &Default::default()).await.unwrap().tasks[0].id;
    let worker = Worker::new(worker_client(&server), ["refused"], |_task: ClaimedTask| async move {
        Err::<(), _>("upstream answered 503")
    })
    .options(WorkerOptions { nack_delay_ms: Some(600_000), ..options() });
    let running = Running::start(worker);
    within_async(PATIENCE, "the task nacked with the error's text", async || {
        admin.get(id).await.is_ok_and(|task| task.last_error.as_deref() == Some("upstream answered 503"))
    })
    .await;
    let report = running.stop().await;
    assert_eq!((report.failed, report.panicked, report.nacked), (1, 0, 1), "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_for_running_handlers() {
    let (_data, server) = started(&[]);
    let admin = worker_client(&server);
    enqueue(&admin, "busy", 3).await;
    let (started, mut running_now) = watch::channel(0u32);
    let (open, gate) = watch::channel(false);
    let worker = Worker::new(worker_client(&server), ["busy"], move |_task: ClaimedTask| {
        let (started, mut gate) = (started.clone(), gate.clone());
        async move {
            started.send_modify(|n| *n += 1);
            let _ = gate.wait_for(|open| *open).await;
            Ok::<_, String>(())
        }
    })
    .options(options());
    let running = Running::start(worker);
    tokio::time::timeout(PATIENCE, running_now.wait_for(|n| *n == 3)).await.expect("three handlers run").unwrap();
    // The stop is asked for while the three run; they end only after it.
    let _ = running.stop.send(());
    let _ = open.send(true);
    let report = tokio::time::timeout(PATIENCE, running.run).await.unwrap().unwrap().unwrap();
    assert_eq!((report.succeeded, report.acked, report.abandoned), (3, 3, 0), "{report:?}");
    assert!(drained(&admin, "busy").await, "their acks were sent before it returned");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_abandons_handlers_past_its_deadline() {
    let (_data, server) = started(&[]);
    let admin = worker_client(&server);
    enqueue(&admin, "stuck", 1).await;
    let (started, mut running_now) = watch::channel(false);
    let worker = Worker::new(worker_client(&server), ["stuck"], move |_task: ClaimedTask| {
        let started = started.clone();
        async move {
            let _ = started.send(true);
            std::future::pending::<()>().await;
            Ok::<_, String>(())
        }
    })
    .options(WorkerOptions { shutdown_timeout: Duration::from_millis(200), ..options() });
    let running = Running::start(worker);
    tokio::time::timeout(PATIENCE, running_now.wait_for(|s| *s)).await.expect("the handler runs").unwrap();
    let report = running.stop().await;
    assert_eq!((report.claimed, report.abandoned, report.acked), (1, 1, 0), "{report:?}");
    assert!(report.settled());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_queue_hands_it_nothing() {
    let (_data, server) = started(&[]);
    let admin = worker_client(&server);
    admin.pause_queue("held").await.unwrap();
    enqueue(&admin, "held", 5).await;
    let handled = Arc::new(Mutex::new(0));
    let count = Arc::clone(&handled);
    let worker = Worker::new(worker_client(&server), ["held"], move |_task: ClaimedTask| {
        *count.lock().unwrap() += 1;
        async { Ok::<_, String>(()) }
    })
    .options(WorkerOptions { wait_ms: 300, ..options() });
    let running = Running::start(worker);
    // Watched for three of its claims' waits: nothing comes.
    let came = hourglass_test_support::holds_within_async(Duration::from_millis(900), async || {
        *handled.lock().unwrap() > 0 || admin.queue("held").await.is_ok_and(|q| q.delivered > 0)
    })
    .await;
    assert!(!came, "a paused queue handed out a task");
    admin.resume_queue("held").await.unwrap();
    within_async(PATIENCE, "the five handled once resumed", async || drained(&admin, "held").await).await;
    let report = running.stop().await;
    assert_eq!((report.claimed, report.acked), (5, 5), "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_claim_stops_it_with_the_error() {
    let (_data, server) = started(&["--token", "s3cret"]);
    let worker = Worker::new(worker_client(&server), ["q"], |_task: ClaimedTask| async { Ok::<_, String>(()) });
    let ended = tokio::time::timeout(PATIENCE, worker.options(options()).run_until(std::future::pending())).await;
    match ended.expect("it stops by itself") {
        Err(WorkerError::Refused { queue, error, report }) => {
            assert_eq!((queue.as_str(), error.code()), ("q", Some("unauthorized")));
            assert_eq!(report, WorkerReport::default());
        }
        other => panic!("not refused: {other:?}"),
    }
    let bad = Worker::new(worker_client(&server), ["q"], |_task: ClaimedTask| async { Ok::<_, String>(()) });
    let refused = bad.concurrency(0).run_until(std::future::pending()).await.unwrap_err();
    assert!(refused.to_string().contains("concurrency must be 1 to"), "{refused}");
}
