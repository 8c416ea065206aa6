//! Group commit: one writer thread turns every request that arrived while the
//! previous commit was on disk into a single transaction and a single fsync, so
//! throughput does not pay one fsync per request.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::{Mutation, Store};
use crate::error::QueueError;

/// The most mutations one transaction gathers.
const BATCH_MUTATIONS_MAX: usize = 8_192;
/// Requests that may wait for the writer; past it, callers wait for room.
const QUEUE_REQUESTS_MAX: usize = 65_536;

/// When acknowledged writes reach stable storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fsync {
    /// Before the reply: every 2xx is on disk. Concurrent requests share fsyncs.
    Always,
    /// Every this many milliseconds: writes are acknowledged once committed
    /// without fsync, and made durable at least this often. A crash or a power
    /// loss may lose the acknowledged writes of the last interval: a commit
    /// without fsync exists only in memory until the next durable one.
    EveryMs(u64),
}

/// Whether a caller waits for its write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Until it is as durable as the [`Fsync`] mode promises.
    Durable,
    /// Not at all: for bookkeeping whose loss on a crash only means a redelivery.
    No,
}

struct Request {
    mutations: Vec<Mutation>,
    reply: Option<oneshot::Sender<Result<(), QueueError>>>,
}

/// The handle to the writer thread.
pub struct Committer {
    requests: mpsc::SyncSender<Request>,
    writer: Option<thread::JoinHandle<()>>,
}

impl Committer {
    /// Starts the writer thread over `store`.
    ///
    /// # Errors
    /// If the thread cannot be started.
    pub fn start(store: Box<dyn Store>, fsync: Fsync) -> std::io::Result<Committer> {
        let (requests, receiver) = mpsc::sync_channel(QUEUE_REQUESTS_MAX);
        let writer =
            thread::Builder::new().name("hourglass-writer".into()).spawn(move || write(&*store, fsync, &receiver))?;
        Ok(Committer { requests, writer: Some(writer) })
    }

    /// Writes `mutations` in the next group commit. With [`Wait::Durable`] it
    /// returns when they are as durable as the [`Fsync`] mode promises: on disk
    /// for [`Fsync::Always`], committed (and synced within the interval) for
    /// [`Fsync::EveryMs`], so a storage failure still reaches the caller.
    ///
    /// # Errors
    /// [`QueueError::Storage`] if the store failed (nothing was written), or
    /// [`QueueError::ShuttingDown`].
    pub async fn commit(&self, mutations: Vec<Mutation>, wait: Wait) -> Result<(), QueueError> {
        if mutations.is_empty() {
            return Ok(());
        }
        let (reply, replied) = match wait {
            Wait::Durable => {
                let (tx, rx) = oneshot::channel();
                (Some(tx), Some(rx))
            }
            Wait::No => (None, None),
        };
        let request = Request { mutations, reply };
        // A full queue means the disk is behind: wait for room off the runtime.
        let sender = self.requests.clone();
        match sender.try_send(request) {
            Ok(()) => {}
            Err(mpsc::TrySendError::Full(request)) => {
                tokio::task::spawn_blocking(move || sender.send(request))
                    .await
                    .map_err(|_| QueueError::ShuttingDown)?
                    .map_err(|_| QueueError::ShuttingDown)?;
            }
            Err(mpsc::TrySendError::Disconnected(_)) => return Err(QueueError::ShuttingDown),
        }
        match replied {
            Some(replied) => replied.await.map_err(|_| QueueError::ShuttingDown)?,
            None => Ok(()),
        }
    }

    /// Queues `mutations` for the next group commit without waiting for it:
    /// for bookkeeping whose loss in a crash only means a redelivery. Blocks
    /// while the writer's queue is full, so it is for threads of our own (the
    /// timer thread); async code uses [`commit`](Committer::commit) with [`Wait::No`].
    ///
    /// # Errors
    /// [`QueueError::ShuttingDown`].
    pub fn submit(&self, mutations: Vec<Mutation>) -> Result<(), QueueError> {
        if mutations.is_empty() {
            return Ok(());
        }
        self.requests.send(Request { mutations, reply: None }).map_err(|_| QueueError::ShuttingDown)
    }

    /// Finishes every queued write, syncs, and stops the writer.
    pub fn close(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        // Dropping our sender lets the writer drain the queue and exit.
        let (dummy, _) = mpsc::sync_channel(1);
        drop(std::mem::replace(&mut self.requests, dummy));
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn write(store: &dyn Store, fsync: Fsync, requests: &mpsc::Receiver<Request>) {
    let sync_every = match fsync {
        Fsync::Always => None,
        Fsync::EveryMs(ms) => Some(Duration::from_millis(ms.max(1))),
    };
    let mut last_sync = Instant::now();
    let mut unsynced = false;
    loop {
        let first = match sync_every {
            // Wake in time for the next periodic sync even if no request comes.
            Some(every) if unsynced => match requests.recv_timeout(every.saturating_sub(last_sync.elapsed())) {
                Ok(request) => Some(request),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            },
            _ => match requests.recv() {
                Ok(request) => Some(request),
                Err(_) => break,
            },
        };
        let mut batch: Vec<Request> = first.into_iter().collect();
        let mut mutations = batch.iter().map(|r| r.mutations.len()).sum::<usize>();
        while mutations < BATCH_MUTATIONS_MAX {
            match requests.try_recv() {
                Ok(request) => {
                    mutations += request.mutations.len();
                    batch.push(request);
                }
                Err(_) => break,
            }
        }
        let durable = sync_every.is_none();
        let result = if batch.is_empty() {
            Ok(())
        } else {
            let all: Vec<Mutation> = batch.iter_mut().flat_map(|r| std::mem::take(&mut r.mutations)).collect();
            store.apply(&all, durable).map_err(|error| QueueError::Storage(error.to_string()))
        };
        if !durable {
            unsynced |= !batch.is_empty();
            if unsynced && sync_every.is_some_and(|every| last_sync.elapsed() >= every) {
                if let Err(error) = store.sync() {
                    eprintln!("hourglass: periodic sync failed: {error}");
                }
                last_sync = Instant::now();
                unsynced = false;
            }
        }
        for request in batch {
            if let Some(reply) = request.reply {
                let _ = reply.send(result.clone());
            }
        }
    }
    if let Err(error) = store.sync() {
        eprintln!("hourglass: final sync failed: {error}");
    }
}
