//! Group commit, in order: one writer thread turns every request that arrived
//! while the previous commit was on disk into one transaction and one fsync.
//!
//! **Order.** Requests are sent while the engine holds its state lock, over an
//! unbounded channel whose send never blocks, so the order in which changes
//! reach the store is the order in which they were made in memory, whichever
//! thread made them. A full writer is pushed back on *before* the lock is taken
//! ([`Committer::admit`]), never while it is held.
//!
//! **Visibility.** A request may carry a settlement: what the engine must do
//! once the write is as durable as the [`Fsync`] mode promises (make a new task
//! visible, say), or once it failed (forget it). The writer runs the
//! [`Settler`] with every settlement of a batch, then replies to the waiting
//! callers: a client hears "done" only after other requests can see it.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, Notify};

use super::commit_stats::CommitStats;
use super::error::StoreError;
use super::interface::{Mutation, Store};
use hourglass_queue::limits::{QUEUED_MUTATIONS_MAX, QUEUED_PAYLOAD_BYTES_MAX};
use hourglass_queue::StorageStats;

/// The most mutations one transaction gathers.
const BATCH_MUTATIONS_MAX: usize = 8_192;
/// The most payload bytes one transaction gathers (a request may take it past).
const BATCH_PAYLOAD_BYTES_MAX: usize = 16 << 20;
/// How long writes nobody waits for (the record of a claim: its attempt
/// count and lease) may wait for one that somebody does, to share its
/// commit. A commit costs about 50 us whatever it holds; a consumer that
/// claims and then acks made two of them a task (BENCHMARKS.md, 2b). Losing
/// such a record in a crash only delivers the task again, which
/// at-least-once allows; the wait widens that window by this much.
const UNAWAITED_DELAY_MAX: Duration = Duration::from_millis(2);
/// How long a committer being dropped waits for a writer that finishes
/// nothing: one stuck in a store that never returns. A writer that keeps
/// committing is waited for however long its queue takes.
const WRITER_STALL_MAX: Duration = Duration::from_secs(30);
/// The most commits between two asks whether the store is due a compaction
/// ([`Store::compact_if_due`]), while writes keep coming; it is also asked
/// whenever a commit leaves nothing queued. An ask costs a `stat`. While a
/// compaction is under way ([`Store::compacting`]) it is asked after every
/// commit, and every [`COMPACT_IDLE_ASK`] while no write comes, so that it
/// finishes soon after its work is done.
const COMPACT_CHECK_COMMITS: u32 = 64;
/// How often an idle writer asks a compaction under way whether it can
/// finish; and the least time between two asks made because a commit left
/// nothing queued. A consumer that waits for each ack leaves the writer idle
/// after nearly every commit, and an ask for each was a `stat` a task (1.3 %
/// of the server's time in a drain); an ask skipped so is owed, and made
/// this long after the last one if no commit makes it first (one owed as
/// the writer stops is left to the next run's first idle commit).
const COMPACT_IDLE_ASK: Duration = Duration::from_millis(10);

/// When acknowledged writes reach stable storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fsync {
    /// Before the reply: every 2xx is on disk. Concurrent requests share fsyncs.
    Always,
    /// Every this many milliseconds: writes are acknowledged once applied
    /// without fsync, and made durable at least this often. The redb store
    /// appends such a write to its log ([`RedbStore`](crate::RedbStore)), so
    /// that a crash of the process loses none; a power loss may lose the
    /// acknowledged writes of the last interval.
    EveryMs(u64),
}

/// What the engine does with the settlements of a batch, on the writer thread,
/// once the batch is as durable as promised (`Ok`) or has failed (`Err`).
pub(crate) trait Settler<S>: Send + 'static {
    fn settle(&mut self, settlements: Vec<S>, result: Result<(), &StoreError>);
}

/// The answer a waiting caller gets.
pub(crate) type Reply = oneshot::Receiver<Result<(), StoreError>>;

struct Request<S> {
    mutations: Vec<Mutation>,
    /// Payload bytes in `mutations`.
    bytes: usize,
    settlement: Option<S>,
    reply: Option<oneshot::Sender<Result<(), StoreError>>>,
}

impl<S> Request<S> {
    fn new(
        mutations: Vec<Mutation>,
        settlement: Option<S>,
        reply: Option<oneshot::Sender<Result<(), StoreError>>>,
    ) -> Self {
        let bytes = mutations.iter().map(Mutation::payload_bytes).sum();
        Request { mutations, bytes, settlement, reply }
    }
}

/// Mutations and payload bytes sent and not yet applied.
#[derive(Default)]
struct Queued {
    mutations: AtomicUsize,
    bytes: AtomicUsize,
    /// Batches the writer has finished (committed or failed), and its final
    /// sync: how a wait for it tells a slow writer from a stuck one.
    finished: AtomicU64,
}

impl Queued {
    fn full(&self) -> bool {
        self.mutations.load(Ordering::Acquire) > QUEUED_MUTATIONS_MAX
            || self.bytes.load(Ordering::Acquire) > QUEUED_PAYLOAD_BYTES_MAX
    }

    fn add(&self, mutations: usize, bytes: usize) {
        self.mutations.fetch_add(mutations, Ordering::AcqRel);
        self.bytes.fetch_add(bytes, Ordering::AcqRel);
    }

    fn sub(&self, mutations: usize, bytes: usize) {
        self.mutations.fetch_sub(mutations, Ordering::AcqRel);
        self.bytes.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// The handle to the writer thread.
pub(crate) struct Committer<S> {
    requests: Option<mpsc::Sender<Request<S>>>,
    /// What was sent and not yet applied.
    queued: Arc<Queued>,
    /// Notified after every batch.
    drained: Arc<Notify>,
    /// The writer's counts of its commits.
    stats: Arc<CommitStats>,
    writer: Option<thread::JoinHandle<()>>,
    /// Disconnected when the writer thread ends: a wait for it with a bound.
    /// (In a mutex only to make the committer `Sync`: read in `drop` alone.)
    stopped: parking_lot::Mutex<mpsc::Receiver<()>>,
    /// How long a drop waits for a writer that finishes nothing
    /// ([`WRITER_STALL_MAX`]; shorter in the test of a stuck writer).
    stall_max: Duration,
}

impl<S: Send + 'static> Committer<S> {
    /// Starts the writer thread over `store`.
    pub(crate) fn start(store: Arc<dyn Store>, fsync: Fsync, settler: impl Settler<S>) -> std::io::Result<Self> {
        let (requests, receiver) = mpsc::channel();
        let queued = Arc::new(Queued::default());
        let drained = Arc::new(Notify::new());
        let stats = Arc::new(CommitStats::default());
        let writer = Writer::<S, _> {
            _settlements: std::marker::PhantomData,
            store,
            fsync,
            settler,
            queued: queued.clone(),
            drained: drained.clone(),
            stats: stats.clone(),
            ids_durable: 0,
        };
        let (running, stopped) = mpsc::channel::<()>();
        let writer = thread::Builder::new().name("hourglass-writer".into()).spawn(move || {
            // Dropped as the thread ends, however it ends.
            let _running = running;
            writer.run(&receiver);
        })?;
        let stopped = parking_lot::Mutex::new(stopped);
        Ok(Committer {
            requests: Some(requests),
            queued,
            drained,
            stats,
            writer: Some(writer),
            stopped,
            stall_max: WRITER_STALL_MAX,
        })
    }

    /// The writer's commits so far: how many, how long, how large.
    pub(crate) fn stats(&self) -> StorageStats {
        self.stats.snapshot()
    }

    /// Waits while the writer is behind by more than [`QUEUED_MUTATIONS_MAX`]
    /// or [`QUEUED_PAYLOAD_BYTES_MAX`]. Call before taking the lock under
    /// which the request will be sent.
    pub(crate) async fn admit(&self) {
        while self.queued.full() {
            let drained = self.drained.notified();
            let mut drained = std::pin::pin!(drained);
            drained.as_mut().enable();
            if !self.queued.full() {
                break;
            }
            drained.await;
        }
    }

    /// Sends `mutations` to the writer, and `settlement` for the [`Settler`]
    /// to settle after the write; never blocks, so call it under the lock
    /// that ordered the change. The returned [`Reply`] resolves once the
    /// change is settled.
    ///
    /// # Errors
    /// The settlement, handed back unsettled, if the writer has stopped (the
    /// engine is closing): nothing was sent, and the caller undoes the change.
    pub(crate) fn send(&self, mutations: Vec<Mutation>, settlement: S) -> Result<Reply, S> {
        let (reply, replied) = oneshot::channel();
        match self.push(Request::new(mutations, Some(settlement), Some(reply))) {
            Ok(()) => Ok(replied),
            Err(request) => Err(request.settlement.expect("sent with one")),
        }
    }

    /// Sends `mutations` that nobody waits for and nothing settles (the
    /// record of a claim): like [`send`](Committer::send), in order, under
    /// the lock. Dropped if the writer has stopped, as a crash would lose
    /// them.
    pub(crate) fn record(&self, mutations: Vec<Mutation>) {
        if !mutations.is_empty() {
            let _ = self.push(Request::new(mutations, None, None));
        }
    }

    /// Queues `request` for the writer; hands it back if the writer has stopped.
    fn push(&self, request: Request<S>) -> Result<(), Request<S>> {
        let (count, bytes) = (request.mutations.len(), request.bytes);
        let Some(requests) = &self.requests else { return Err(request) };
        self.queued.add(count, bytes);
        requests.send(request).map_err(|unsent| {
            self.queued.sub(count, bytes);
            unsent.0
        })
    }
}

impl<S> Drop for Committer<S> {
    /// Finishes every queued write, syncs, and stops the writer: waits for
    /// it, since a clean shutdown counts on what was acknowledged being on
    /// disk. But not forever: once the writer has finished nothing for
    /// [`WRITER_STALL_MAX`] (a store that never returns), it is left to
    /// finish on its own. So a panic with a writer stuck (a test's held
    /// store, say) fails instead of hanging. `thread::panicking()` would not
    /// do: after a panic in an async test, the runtime drops its tasks, and
    /// with them the last handle to the engine, on a worker thread that is
    /// not panicking.
    fn drop(&mut self) {
        self.requests = None;
        let Some(writer) = self.writer.take() else { return };
        let stopped = self.stopped.get_mut();
        let mut finished = self.queued.finished.load(Ordering::Acquire);
        while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(self.stall_max) {
            let now = self.queued.finished.load(Ordering::Acquire);
            if now == finished {
                tracing::error!(
                    stalled = ?self.stall_max,
                    "the writer finished nothing for too long: left to finish on its own"
                );
                return;
            }
            finished = now;
        }
        let _ = writer.join();
    }
}

struct Writer<S, T> {
    _settlements: std::marker::PhantomData<fn(S)>,
    store: Arc<dyn Store>,
    fsync: Fsync,
    settler: T,
    queued: Arc<Queued>,
    drained: Arc<Notify>,
    stats: Arc<CommitStats>,
    /// The largest [`Mutation::NextId`] made durable.
    ids_durable: u64,
}

impl<S, T: Settler<S>> Writer<S, T> {
    fn run(mut self, requests: &mpsc::Receiver<Request<S>>) {
        let sync_every = match self.fsync {
            Fsync::Always => None,
            Fsync::EveryMs(ms) => Some(Duration::from_millis(ms.max(1))),
        };
        let durable = sync_every.is_none();
        let mut last_sync = Instant::now();
        let mut unsynced = false;
        // Requests received and not yet committed: only ever ones nobody
        // waits for (see UNAWAITED_DELAY_MAX), between two turns of the loop.
        let mut batch: Vec<Request<S>> = Vec::new();
        let mut deferred_since: Option<Instant> = None;
        let mut since_compact_check = 0u32;
        // When the writer last asked whether a compaction is due, and
        // whether an ask is owed (see COMPACT_IDLE_ASK).
        let mut last_ask = Instant::now();
        let mut ask_owed = false;
        loop {
            // Wake in time to commit what was deferred, and for the next
            // periodic sync, even if no request comes.
            let deferred_wait = deferred_since.map(|since| UNAWAITED_DELAY_MAX.saturating_sub(since.elapsed()));
            let sync_wait = sync_every.filter(|_| unsynced).map(|every| every.saturating_sub(last_sync.elapsed()));
            let compacting = self.store.compacting();
            let compact_wait = compacting.then_some(COMPACT_IDLE_ASK);
            // Made below only with no batch held back; while one is, its own
            // commit makes the ask (a wait of zero meanwhile would spin).
            let owed_wait = (ask_owed && batch.is_empty()).then(|| COMPACT_IDLE_ASK.saturating_sub(last_ask.elapsed()));
            let wait = [deferred_wait, sync_wait, compact_wait, owed_wait].into_iter().flatten().min();
            let first = match wait {
                Some(wait) => match requests.recv_timeout(wait) {
                    Ok(request) => Some(request),
                    Err(mpsc::RecvTimeoutError::Timeout) => None,
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                },
                None => match requests.recv() {
                    Ok(request) => Some(request),
                    Err(_) => break,
                },
            };
            let owed_now = ask_owed && last_ask.elapsed() >= COMPACT_IDLE_ASK;
            if first.is_none() && batch.is_empty() && (compacting || owed_now) {
                (last_ask, ask_owed) = (Instant::now(), false);
                self.compact_if_due();
            }
            batch.extend(first);
            let mut count = batch.iter().map(|r| r.mutations.len()).sum::<usize>();
            let mut bytes = batch.iter().map(|r| r.bytes).sum::<usize>();
            while count < BATCH_MUTATIONS_MAX && bytes < BATCH_PAYLOAD_BYTES_MAX {
                match requests.try_recv() {
                    Ok(request) => {
                        count += request.mutations.len();
                        bytes += request.bytes;
                        batch.push(request);
                    }
                    Err(_) => break,
                }
            }
            if !batch.is_empty() {
                let awaited = batch.iter().any(|request| request.settlement.is_some());
                let full = count >= BATCH_MUTATIONS_MAX || bytes >= BATCH_PAYLOAD_BYTES_MAX;
                let overdue = deferred_since.is_some_and(|since| since.elapsed() >= UNAWAITED_DELAY_MAX);
                if awaited || full || overdue {
                    let synced = self.commit(std::mem::take(&mut batch), (count, bytes), durable);
                    unsynced = !synced && (unsynced || !durable);
                    deferred_since = None;
                    since_compact_check += 1;
                    let idle = self.queued.mutations.load(Ordering::Acquire) == 0;
                    // `compacting` as this turn began: a stale `true` (the commit
                    // gave the compaction up) costs one ask.
                    let idle_ask = idle && last_ask.elapsed() >= COMPACT_IDLE_ASK;
                    if idle_ask || since_compact_check >= COMPACT_CHECK_COMMITS || compacting {
                        since_compact_check = 0;
                        (last_ask, ask_owed) = (Instant::now(), false);
                        // Not taken as a sync: a compaction's durable commits
                        // leave out what the store's log holds.
                        self.compact_if_due();
                    } else if idle {
                        ask_owed = true;
                    }
                } else if deferred_since.is_none() {
                    deferred_since = Some(Instant::now());
                }
            }
            if unsynced && sync_every.is_some_and(|every| last_sync.elapsed() >= every) {
                if let Err(error) = self.store.sync() {
                    tracing::error!(%error, "periodic sync failed: the last interval's writes may not survive a crash");
                }
                last_sync = Instant::now();
                unsynced = false;
            }
        }
        if !batch.is_empty() {
            let count = batch.iter().map(|r| r.mutations.len()).sum::<usize>();
            let bytes = batch.iter().map(|r| r.bytes).sum::<usize>();
            self.commit(batch, (count, bytes), durable);
        }
        if let Err(error) = self.store.sync() {
            tracing::error!(%error, "final sync failed");
        }
        self.queued.finished.fetch_add(1, Ordering::AcqRel);
    }

    /// Between commits: compacts the store if it is due.
    fn compact_if_due(&mut self) {
        let started = Instant::now();
        match self.store.compact_if_due() {
            Ok(None) => {}
            Ok(Some(done)) => {
                let took = started.elapsed();
                tracing::info!(
                    before_bytes = done.before_bytes,
                    after_bytes = done.after_bytes,
                    live_bytes = done.live_bytes,
                    finish_keys = done.finish_keys,
                    took_ms = took.as_secs_f64() * 1e3,
                    "compacted the store: the writer was held this long at its finish"
                );
            }
            Err(error) => tracing::error!(%error, "compacting the store failed"),
        }
    }

    /// Applies one batch, in the order its requests were sent, settles it and
    /// replies. Durably if `durable`, or if it raises the next id stored
    /// above the largest made durable: in the relaxed mode, ids are answered
    /// only below a next id that a crash cannot take back (the engine's
    /// `State::next_id_mutation`). Whether it made every commit so far
    /// durable.
    fn commit(&mut self, mut batch: Vec<Request<S>>, (count, bytes): (usize, usize), durable: bool) -> bool {
        let all: Vec<Mutation> = if batch.len() == 1 {
            std::mem::take(&mut batch[0].mutations)
        } else {
            batch.iter_mut().flat_map(|r| std::mem::take(&mut r.mutations)).collect()
        };
        let next_id = all.iter().filter_map(Mutation::next_id).max().unwrap_or(0);
        let durable = durable || next_id > self.ids_durable;
        let result = if all.is_empty() {
            Ok(())
        } else {
            let started = Instant::now();
            let result = self.store.apply(&all, durable);
            self.stats.record(all.len(), started.elapsed(), result.is_ok());
            result
        };
        let synced = durable && result.is_ok() && !all.is_empty();
        if synced {
            self.ids_durable = self.ids_durable.max(next_id);
        }
        if let Err(error) = &result {
            tracing::error!(%error, mutations = all.len(), "a write failed; its requests changed nothing");
        }
        let mut settlements = Vec::new();
        let mut replies = Vec::new();
        for request in batch {
            settlements.extend(request.settlement);
            replies.extend(request.reply);
        }
        if !settlements.is_empty() {
            self.settler.settle(settlements, result.as_ref().map(|_| ()));
        }
        self.queued.sub(count, bytes);
        self.queued.finished.fetch_add(1, Ordering::AcqRel);
        self.drained.notify_waiters();
        for reply in replies {
            let _ = reply.send(result.clone());
        }
        synced
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::interface::{Loaded, Snapshot};
    use hourglass_queue::{Schedule, Task};

    /// A store whose writes never return, as one held forever would.
    struct Stuck;

    impl Store for Stuck {
        fn load(&self, _: &mut dyn FnMut(Task, Loaded)) -> Result<u64, StoreError> {
            Ok(0)
        }
        fn load_schedules(&self) -> Result<Vec<Schedule>, StoreError> {
            Ok(Vec::new())
        }
        fn load_paused(&self) -> Result<Vec<crate::store::PausedQueue>, StoreError> {
            Ok(Vec::new())
        }
        fn load_settings(&self) -> Result<Vec<(Box<str>, hourglass_queue::QueueSettings)>, StoreError> {
            Ok(Vec::new())
        }
        fn apply(&self, _: &[Mutation], _: bool) -> Result<(), StoreError> {
            loop {
                thread::park();
            }
        }
        fn sync(&self) -> Result<(), StoreError> {
            Ok(())
        }
        fn snapshot(&self) -> Result<Box<dyn Snapshot>, StoreError> {
            unreachable!("no reads here")
        }
    }

    struct Counted(Arc<AtomicUsize>);

    impl Settler<()> for Counted {
        fn settle(&mut self, settlements: Vec<()>, _: Result<(), &StoreError>) {
            self.0.fetch_add(settlements.len(), Ordering::SeqCst);
        }
    }

    #[test]
    fn a_drop_waits_for_every_queued_write_of_a_writer_that_works() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(crate::store::RedbStore::open(dir.path()).unwrap());
        let settled = Arc::new(AtomicUsize::new(0));
        let committer = Committer::start(store, Fsync::Always, Counted(settled.clone())).unwrap();
        for id in 1..=100 {
            let _ = committer.send(vec![Mutation::NextId(id)], ());
        }
        drop(committer);
        assert_eq!(settled.load(Ordering::SeqCst), 100, "every write was settled before the drop returned");
    }

    /// A store that logs its writes and compactions, whose compactions do
    /// as told: done, failed, done.
    struct Compacting {
        log: parking_lot::Mutex<Vec<&'static str>>,
        compacted: mpsc::SyncSender<()>,
    }

    impl Store for Compacting {
        fn load(&self, _: &mut dyn FnMut(Task, Loaded)) -> Result<u64, StoreError> {
            Ok(0)
        }
        fn load_schedules(&self) -> Result<Vec<Schedule>, StoreError> {
            Ok(Vec::new())
        }
        fn load_paused(&self) -> Result<Vec<crate::store::PausedQueue>, StoreError> {
            Ok(Vec::new())
        }
        fn load_settings(&self) -> Result<Vec<(Box<str>, hourglass_queue::QueueSettings)>, StoreError> {
            Ok(Vec::new())
        }
        fn apply(&self, _: &[Mutation], _: bool) -> Result<(), StoreError> {
            self.log.lock().push("apply");
            Ok(())
        }
        fn sync(&self) -> Result<(), StoreError> {
            Ok(())
        }
        fn snapshot(&self) -> Result<Box<dyn Snapshot>, StoreError> {
            unreachable!("no reads here")
        }
        fn compact_if_due(&self) -> Result<Option<crate::store::Compacted>, StoreError> {
            let mut log = self.log.lock();
            let failed = log.iter().filter(|&&entry| entry == "compact").count() == 1;
            log.push("compact");
            drop(log);
            let _ = self.compacted.try_send(());
            if failed {
                Err(StoreError::Database(hourglass_queue::Failure::msg("injected compaction failure")))
            } else {
                Ok(Some(crate::store::Compacted { before_bytes: 2, after_bytes: 1, live_bytes: 0, finish_keys: 0 }))
            }
        }
    }

    /// The writer compacts between commits, once a commit leaves nothing
    /// queued; a compaction that fails stops nothing: the next write commits.
    #[test]
    fn the_writer_compacts_between_commits_and_goes_on_after_a_compaction_fails() {
        let (compacted, compactions) = mpsc::sync_channel(8);
        let store = Arc::new(Compacting { log: parking_lot::Mutex::new(Vec::new()), compacted });
        let settled = Arc::new(AtomicUsize::new(0));
        let committer = Committer::start(store.clone(), Fsync::Always, Counted(settled.clone())).unwrap();
        for id in 1..=3 {
            let reply = committer.send(vec![Mutation::NextId(id)], ()).ok().unwrap();
            assert_eq!(reply.blocking_recv().unwrap(), Ok(()), "write {id}");
            // The ask that follows a commit with nothing queued (a bound for
            // a broken writer, not a limit on a working one).
            compactions.recv_timeout(Duration::from_secs(60)).expect("asked to compact");
        }
        drop(committer);
        assert_eq!(*store.log.lock(), ["apply", "compact", "apply", "compact", "apply", "compact"]);
        assert_eq!(settled.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn a_drop_leaves_a_writer_stuck_in_its_store_instead_of_waiting_forever() {
        let stall_max = Duration::from_millis(200);
        let mut committer = Committer::start(Arc::new(Stuck), Fsync::Always, Counted(Arc::default())).unwrap();
        committer.stall_max = stall_max;
        let _reply = committer.send(vec![Mutation::NextId(1)], ());
        let started = Instant::now();
        drop(committer);
        let waited = started.elapsed();
        // Not forever: the bound is far above the stall, for a loaded machine.
        assert!(waited >= stall_max && waited < stall_max + Duration::from_secs(30), "waited {waited:?}");
    }
}
