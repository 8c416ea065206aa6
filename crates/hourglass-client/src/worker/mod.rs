//! The consumer's loop, written once: [`Worker`] claims tasks from one or
//! more queues and runs an async handler on each, at most
//! [`concurrency`](WorkerOptions::concurrency) at once.
//!
//! - **Claims** ask for up to the free slots (a queue's share of them, with
//!   several queues), and long-poll when nothing is due.
//! - **Leases** of running handlers are extended every third of the lease,
//!   so a handler may take longer than the lease and keep its task.
//! - **Acks** of handlers that return `Ok` go in batches, on the next claim
//!   when one is about to go, else in `POST /v1/acks`.
//! - **Nacks**: a handler that returns `Err(reason)` or panics nacks its
//!   task with the reason's text or the panic's message (the task's
//!   `last_error`), cut to 1 KiB.
//! - **Failures that may pass** (the server unreachable, 5xx, 507, 429) are
//!   waited out with a backoff that doubles up to
//!   [`backoff_max`](WorkerOptions::backoff_max), with jitter; any other
//!   refusal of a claim stops the worker with its error.
//! - **Shutdown** (a future that completes, or SIGINT/SIGTERM): it stops
//!   claiming, waits up to [`shutdown_timeout`](WorkerOptions::shutdown_timeout)
//!   for the running handlers, sends their acks, and returns a
//!   [`WorkerReport`] of its counts.
//!
//! ```no_run
//! use hourglass_client::wire::ClaimedTask;
//! use hourglass_client::{Client, Worker};
//!
//! # async fn demo() -> Result<(), hourglass_client::WorkerError> {
//! let worker = Worker::new(Client::new("http://127.0.0.1:7463", None), ["orders"], |task: ClaimedTask| async move {
//!     let order: serde_json::Value = task.payload_json().map_err(|e| e.to_string())?; // Err(reason) nacks
//!     println!("order {order}");
//!     Ok::<_, String>(())
//! });
//! let report = worker.concurrency(16).run().await?; // until Ctrl-C or SIGTERM
//! println!("{report:?}");
//! # Ok(()) }
//! ```

mod acks;
mod backoff;
mod claims;
mod delivery;
mod options;
mod report;
mod run;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use hourglass_wire::ClaimedTask;
use tokio::sync::Semaphore;

pub use options::{
    OptionsError, WorkerOptions, ACKS_PER_REQUEST_MAX, CONCURRENCY_MAX, LEASE_MS_MIN, NACK_REASON_BYTES_MAX,
    WAIT_MS_MAX,
};
pub use report::WorkerReport;

use crate::client::Client;
use crate::error::Error;

/// A handler's future, its error as text.
type Handled = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;
/// The handler, as the worker holds it.
type HandlerFn = dyn Fn(ClaimedTask) -> Handled + Send + Sync;

/// Runs a handler on the tasks of one or more queues; see the
/// [module](self) for what it does.
pub struct Worker {
    client: Client,
    queues: Vec<String>,
    handler: Arc<HandlerFn>,
    options: WorkerOptions,
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker").field("queues", &self.queues).field("options", &self.options).finish()
    }
}

/// What a worker's tasks share.
pub(crate) struct Shared {
    client: Client,
    handler: Arc<HandlerFn>,
    options: WorkerOptions,
    slots: Arc<Semaphore>,
    acker: Arc<acks::Acker>,
    counts: Arc<report::Counts>,
}

impl Worker {
    /// A worker of `client`'s server that runs `handler` on the tasks of
    /// `queues`: `Ok` acks a task, `Err(reason)` (anything that displays)
    /// nacks it with that text, and so does a panic, with its message.
    pub fn new<Q, H, F, E>(client: Client, queues: Q, handler: H) -> Worker
    where
        Q: IntoIterator,
        Q::Item: Into<String>,
        H: Fn(ClaimedTask) -> F + Send + Sync + 'static,
        F: Future<Output = Result<(), E>> + Send + 'static,
        E: fmt::Display + 'static,
    {
        let handler = Arc::new(move |task| {
            let handled = handler(task);
            Box::pin(async move { handled.await.map_err(|error| error.to_string()) }) as Handled
        });
        Worker {
            client,
            queues: queues.into_iter().map(Into::into).collect(),
            handler,
            options: WorkerOptions::default(),
        }
    }

    /// With these options.
    pub fn options(self, options: WorkerOptions) -> Worker {
        Worker { options, ..self }
    }

    /// With at most `concurrency` handlers running at once.
    pub fn concurrency(mut self, concurrency: usize) -> Worker {
        self.options.concurrency = concurrency;
        self
    }

    /// Runs until SIGINT (Ctrl-C) or SIGTERM, then stops as
    /// [`run_until`](Worker::run_until) does.
    ///
    /// # Errors
    /// As [`run_until`](Worker::run_until).
    pub async fn run(self) -> Result<WorkerReport, WorkerError> {
        self.run_until(run::signal()).await
    }

    /// Runs until `shutdown` completes (a `CancellationToken`'s
    /// `cancelled()`, a channel's receive...), then stops claiming, waits up
    /// to the shutdown timeout for the running handlers, sends their acks,
    /// and reports what it did.
    ///
    /// # Errors
    /// [`WorkerError::Options`] before it starts; [`WorkerError::Refused`]
    /// when a claim is refused in a way that will not pass (a wrong token,
    /// a queue name the server refuses), after stopping as on shutdown.
    pub async fn run_until(self, shutdown: impl Future<Output = ()> + Send) -> Result<WorkerReport, WorkerError> {
        self.options.check().map_err(WorkerError::Options)?;
        if self.queues.is_empty() {
            return Err(WorkerError::Options(OptionsError::none_queued()));
        }
        run::run(self, shutdown).await
    }
}

/// Why a worker did not run, or stopped before it was asked to.
#[derive(Debug)]
#[non_exhaustive]
pub enum WorkerError {
    /// Options out of their bounds, or no queue.
    Options(OptionsError),
    /// A claim was refused in a way that will not pass; the worker stopped
    /// (after letting its running handlers finish), with this report.
    Refused {
        /// The queue the claim was for.
        queue: String,
        /// The server's answer.
        error: Error,
        /// What the worker did before it stopped.
        report: WorkerReport,
    },
}

impl fmt::Display for WorkerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkerError::Options(error) => write!(f, "the worker's options: {error}"),
            WorkerError::Refused { queue, error, .. } => write!(f, "claims from {queue} refused: {error}"),
        }
    }
}

impl std::error::Error for WorkerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WorkerError::Options(error) => Some(error),
            WorkerError::Refused { error, .. } => Some(error),
        }
    }
}
