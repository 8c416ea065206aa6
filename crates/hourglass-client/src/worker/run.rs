//! One run of a worker: its claim loops and acker started, the shutdown
//! awaited, then the stop: no more claims, the running handlers waited for
//! up to the deadline (then abandoned), their acks sent, the report made.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::acks::Acker;
use super::claims::claim_loop;
use super::report::{Counts, WorkerReport};
use super::{Shared, Worker, WorkerError};
use crate::error::Error;

/// Time the acks of finished handlers get to go out after the shutdown
/// deadline, when the handlers used it all.
const ACK_GRACE: Duration = Duration::from_secs(2);

/// SIGINT (Ctrl-C) or, on Unix, SIGTERM.
pub(super) async fn signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut terminate) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// The end of one claim loop: its queue, its deliveries, and its error if a
/// claim was refused.
type Ended = (String, JoinSet<()>, Result<(), Error>);

pub(super) async fn run(
    worker: Worker,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<WorkerReport, WorkerError> {
    let Worker { client, queues, handler, options } = worker;
    let counts = Arc::new(Counts::default());
    let acker = Arc::new(Acker::new(client.clone(), Arc::clone(&counts), options.backoff_max));
    let share = options.concurrency.div_ceil(queues.len());
    let shared = Arc::new(Shared {
        client,
        handler,
        slots: Arc::new(Semaphore::new(options.concurrency)),
        acker: Arc::clone(&acker),
        counts: Arc::clone(&counts),
        options,
    });
    let (stop, stopping) = watch::channel(false);
    // The acker stops apart: once the deliveries have ended, with their acks.
    let (acks_done, acks_stopping) = watch::channel(false);
    let mut acking = tokio::spawn(Arc::clone(&acker).run(acks_stopping));
    let mut loops: JoinSet<Ended> = JoinSet::new();
    for queue in queues {
        let (shared, stopping) = (Arc::clone(&shared), stopping.clone());
        loops.spawn(async move {
            let mut deliveries = JoinSet::new();
            let ended = claim_loop(shared, queue.clone(), share, stopping, &mut deliveries).await;
            (queue, deliveries, ended)
        });
    }

    // Until the shutdown, or a claim loop that ends by itself (refused).
    let mut ended: Vec<Ended> = Vec::new();
    tokio::select! {
        () = shutdown => {}
        Some(first) = loops.join_next() => ended.push(first.expect("a claim loop does not panic")),
    }
    let _ = stop.send(true);
    while let Some(next) = loops.join_next().await {
        ended.push(next.expect("a claim loop does not panic"));
    }

    // The running handlers, up to the deadline.
    let deadline = Instant::now() + shared.options.shutdown_timeout;
    let running: usize = ended.iter().map(|(_, deliveries, _)| deliveries.len()).sum();
    if running > 0 {
        tracing::info!("waiting up to {:?} for {running} running handlers", shared.options.shutdown_timeout);
    }
    let mut refused = None;
    for (queue, mut deliveries, result) in ended {
        while let Ok(Some(_)) = tokio::time::timeout_at(deadline, deliveries.join_next()).await {}
        if !deliveries.is_empty() {
            tracing::warn!(
                "abandoning {} handlers still running; their tasks are delivered again when their leases run out",
                deliveries.len()
            );
            deliveries.abort_all();
            while let Some(end) = deliveries.join_next().await {
                if end.is_err_and(|error| error.is_cancelled()) {
                    Counts::add(&counts.abandoned, 1);
                }
            }
        }
        if let Err(error) = result {
            refused.get_or_insert((queue, error));
        }
    }

    // Their acks, then the report.
    let _ = acks_done.send(true);
    let acks_until = deadline.max(Instant::now() + ACK_GRACE);
    if tokio::time::timeout_at(acks_until, &mut acking).await.is_err() {
        acking.abort();
        let _ = acking.await;
        acker.abandon();
    }
    let report = counts.report();
    match refused {
        None => Ok(report),
        Some((queue, error)) => Err(WorkerError::Refused { queue, error, report }),
    }
}
