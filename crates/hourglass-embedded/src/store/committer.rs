//! Group commit, in order: one writer thread turns every request that arrived
//! while the previous commit was on disk into one transaction and one fsync.
//!
//! **Order.** Requests are queued while the engine holds its state lock, in
//! an inbox whose push never blocks, so the order in which changes reach the
//! store is the order in which they were made in memory, whichever thread
//! made them. Whoever commits takes the turn first ([`Hub::turn`]), then
//! what is queued, from the front: batches are committed in the order they
//! were taken. A full writer is pushed back on *before* the lock is taken
//! ([`Committer::admit`]), never while it is held.
//!
//! **Visibility.** A request may carry a settlement: what the engine must do
//! once the write is as durable as the [`Fsync`] mode promises (make a new task
//! visible, say), or once it failed (forget it). The committer runs the
//! [`Settler`] with every settlement of a batch, then replies to the waiting
//! callers: a client hears "done" only after other requests can see it.
//!
//! **Who commits.** With fsync before every reply, the writer thread: a
//! request wakes it, and concurrent requests share its fsync. In the relaxed
//! mode a write is an append to the store's log, and a request's own task
//! commits what is queued once the engine's lock is released, if the turn is
//! free ([`Committer::help`]): the writer thread is then not woken, and
//! neither is the task, where the hand-off cost two wake-ups a request, most
//! of what was left between a relaxed consumer and beanstalkd (BENCHMARKS.md).
//! If the turn is taken, the request wakes the writer, which commits it after
//! whoever holds the turn. Every caller of [`Committer::send`] and
//! [`Committer::record`] calls [`Committer::help`] once its lock is released.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
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
/// commit, when the writer thread commits them. A commit costs about 50 us
/// whatever it holds; a consumer that claims and then acks made two of them
/// a task (BENCHMARKS.md, 2b). Losing such a record in a crash only
/// delivers the task again, which at-least-once allows; the wait widens that
/// window by this much.
const UNAWAITED_DELAY_MAX: Duration = Duration::from_millis(2);
/// The most batches a request commits on its own thread ([`Committer::help`]).
const HELP_BATCHES_MAX: usize = 2;
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

/// What the engine does with the settlements of a batch, under the turn,
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
    /// The largest [`Mutation::NextId`] among them; 0 if none.
    next_id: u64,
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
        let next_id = mutations.iter().filter_map(Mutation::next_id).max().unwrap_or(0);
        Request { mutations, bytes, next_id, settlement, reply }
    }
}

/// Mutations and payload bytes sent and not yet applied.
#[derive(Default)]
struct Queued {
    mutations: AtomicUsize,
    bytes: AtomicUsize,
    /// Batches finished (committed or failed), and the writer's final sync:
    /// how a wait for it tells a slow writer from a stuck one.
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

/// Requests taken together for one transaction, with their mutations and
/// payload bytes.
type Batch<S> = (Vec<Request<S>>, (usize, usize));

/// The requests queued, in order, and whether the committer is closing.
struct Inbox<S> {
    requests: VecDeque<Request<S>>,
    closed: bool,
}

/// What commits: its settler, and what it knows of the ids made durable.
struct Turn<S> {
    settler: Box<dyn Settler<S>>,
    /// The largest [`Mutation::NextId`] made durable.
    ids_durable: u64,
}

/// What the writer thread and the requests that commit share.
struct Hub<S> {
    store: Arc<dyn Store>,
    inbox: Mutex<Inbox<S>>,
    /// Wakes the writer thread: a request (with fsync before every reply),
    /// a request that found the turn taken, a first commit to sync, a close.
    wake: Condvar,
    /// The turn to commit: whoever holds it takes what is queued.
    turn: Mutex<Turn<S>>,
    /// Whether requests commit their own changes (the relaxed mode).
    helps: bool,
    queued: Queued,
    /// Notified after every batch.
    drained: Notify,
    stats: CommitStats,
    /// A commit without fsync since the writer's last sync. Set under the
    /// inbox's lock, with the writer woken, so that a writer about to sleep
    /// without a deadline sees it or is woken.
    unsynced: AtomicBool,
    /// Commits (by anyone) since the writer last counted them: what its
    /// compaction asks go by.
    commits: AtomicU32,
    /// Whether a compaction is under way, as the writer last saw it (under
    /// the turn): read while the inbox is locked, where asking the store
    /// could wait for a commit.
    compacting: AtomicBool,
}

impl<S> Hub<S> {
    /// The requests at the front of the inbox, up to a transaction's bounds
    /// (at least one), with their mutations and bytes; `None` if it is empty.
    /// A request's thread (`helper`, with the largest next id made durable)
    /// stops before a request that raises the next id above it, and wakes
    /// the writer: that commit is durable, an fsync, and the writer's to
    /// make, not a tokio worker's.
    fn take_batch(&self, helper: Option<u64>) -> Option<Batch<S>> {
        let mut inbox = self.inbox.lock();
        let (mut count, mut bytes) = (0, 0);
        let mut batch = Vec::new();
        while count < BATCH_MUTATIONS_MAX && bytes < BATCH_PAYLOAD_BYTES_MAX {
            let Some(front) = inbox.requests.front() else { break };
            if helper.is_some_and(|ids_durable| front.next_id > ids_durable) {
                self.wake.notify_one();
                break;
            }
            let Some(request) = inbox.requests.pop_front() else { break };
            count += request.mutations.len();
            bytes += request.bytes;
            batch.push(request);
        }
        (!batch.is_empty()).then_some((batch, (count, bytes)))
    }
}

/// The handle to the writer thread and the inbox.
pub(crate) struct Committer<S> {
    hub: Arc<Hub<S>>,
    writer: Option<thread::JoinHandle<()>>,
    /// Disconnected when the writer thread ends: a wait for it with a bound.
    /// (In a mutex only to make the committer `Sync`: read in `drop` alone.)
    stopped: Mutex<mpsc::Receiver<()>>,
    /// How long a drop waits for a writer that finishes nothing
    /// ([`WRITER_STALL_MAX`]; shorter in the test of a stuck writer).
    stall_max: Duration,
}

impl<S: Send + 'static> Committer<S> {
    /// Starts the writer thread over `store`.
    pub(crate) fn start(store: Arc<dyn Store>, fsync: Fsync, settler: impl Settler<S>) -> std::io::Result<Self> {
        let hub = Arc::new(Hub {
            store,
            inbox: Mutex::new(Inbox { requests: VecDeque::new(), closed: false }),
            wake: Condvar::new(),
            turn: Mutex::new(Turn { settler: Box::new(settler), ids_durable: 0 }),
            helps: matches!(fsync, Fsync::EveryMs(_)),
            queued: Queued::default(),
            drained: Notify::new(),
            stats: CommitStats::default(),
            unsynced: AtomicBool::new(false),
            commits: AtomicU32::new(0),
            compacting: AtomicBool::new(false),
        });
        let (running, stopped) = mpsc::channel::<()>();
        let writer = thread::Builder::new().name("hourglass-writer".into()).spawn({
            let hub = hub.clone();
            move || {
                // Dropped as the thread ends, however it ends.
                let _running = running;
                Writer::new(hub, fsync).run();
            }
        })?;
        Ok(Committer { hub, writer: Some(writer), stopped: Mutex::new(stopped), stall_max: WRITER_STALL_MAX })
    }

    /// The commits so far: how many, how long, how large.
    pub(crate) fn stats(&self) -> StorageStats {
        self.hub.stats.snapshot()
    }

    /// Waits while the committer is behind by more than [`QUEUED_MUTATIONS_MAX`]
    /// or [`QUEUED_PAYLOAD_BYTES_MAX`]. Call before taking the lock under
    /// which the request will be sent.
    pub(crate) async fn admit(&self) {
        while self.hub.queued.full() {
            let drained = self.hub.drained.notified();
            let mut drained = std::pin::pin!(drained);
            drained.as_mut().enable();
            if !self.hub.queued.full() {
                break;
            }
            drained.await;
        }
    }

    /// Queues `mutations`, and `settlement` for the [`Settler`] to settle
    /// after the write; never blocks, so call it under the lock that ordered
    /// the change, and [`help`](Committer::help) once it is released. The
    /// returned [`Reply`] resolves once the change is settled.
    ///
    /// # Errors
    /// The settlement, handed back unsettled, if the committer is closing:
    /// nothing was queued, and the caller undoes the change.
    pub(crate) fn send(&self, mutations: Vec<Mutation>, settlement: S) -> Result<Reply, S> {
        let (reply, replied) = oneshot::channel();
        match self.push(Request::new(mutations, Some(settlement), Some(reply))) {
            Ok(()) => Ok(replied),
            Err(request) => Err(request.settlement.expect("sent with one")),
        }
    }

    /// Queues `mutations` that nobody waits for and nothing settles (the
    /// record of a claim): like [`send`](Committer::send), in order, under
    /// the lock, and followed by [`help`](Committer::help). Dropped if the
    /// committer is closing, as a crash would lose them.
    pub(crate) fn record(&self, mutations: Vec<Mutation>) {
        if !mutations.is_empty() {
            let _ = self.push(Request::new(mutations, None, None));
        }
    }

    /// In the relaxed mode, commits what is queued on the caller's thread if
    /// the turn is free, and wakes the writer to commit it otherwise; with
    /// fsync before every reply, nothing (the request woke the writer).
    /// Never call it under the engine's lock: a commit settles under it.
    pub(crate) fn help(&self) {
        let hub = &*self.hub;
        if !hub.helps {
            return;
        }
        if let Some(mut turn) = hub.turn.try_lock() {
            // A batch or two, which hold what this request queued unless a
            // backlog is ahead of it: the rest is the writer's, so that no
            // caller commits others' changes for long.
            for _ in 0..HELP_BATCHES_MAX {
                let Some((batch, sizes)) = hub.take_batch(Some(turn.ids_durable)) else { return };
                turn.commit(hub, batch, sizes, false);
            }
        }
        // The turn was taken, and whoever holds it may have taken the inbox
        // before this request came; or a backlog is left: the writer takes
        // it after them.
        if !hub.inbox.lock().requests.is_empty() {
            hub.wake.notify_one();
        }
    }

    /// Queues `request`; hands it back if the committer is closing.
    fn push(&self, request: Request<S>) -> Result<(), Request<S>> {
        let hub = &*self.hub;
        let mut inbox = hub.inbox.lock();
        if inbox.closed {
            return Err(request);
        }
        hub.queued.add(request.mutations.len(), request.bytes);
        inbox.requests.push_back(request);
        drop(inbox);
        if !hub.helps {
            hub.wake.notify_one();
        }
        Ok(())
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
        self.hub.inbox.lock().closed = true;
        self.hub.wake.notify_all();
        let Some(writer) = self.writer.take() else { return };
        let stopped = self.stopped.get_mut();
        let mut finished = self.hub.queued.finished.load(Ordering::Acquire);
        while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(self.stall_max) {
            let now = self.hub.queued.finished.load(Ordering::Acquire);
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

/// The writer thread: commits what nobody else does, syncs periodically,
/// and asks the store whether a compaction is due between commits.
struct Writer<S> {
    hub: Arc<Hub<S>>,
    sync_every: Option<Duration>,
    durable: bool,
    last_sync: Instant,
    /// Since when requests nobody waits for have waited in the inbox.
    deferred_since: Option<Instant>,
    since_compact_check: u32,
    /// When the writer last asked whether a compaction is due, and whether
    /// an ask is owed (see COMPACT_IDLE_ASK).
    last_ask: Instant,
    ask_owed: bool,
}

impl<S: Send + 'static> Writer<S> {
    fn new(hub: Arc<Hub<S>>, fsync: Fsync) -> Writer<S> {
        let sync_every = match fsync {
            Fsync::Always => None,
            Fsync::EveryMs(ms) => Some(Duration::from_millis(ms.max(1))),
        };
        Writer {
            hub,
            sync_every,
            durable: sync_every.is_none(),
            last_sync: Instant::now(),
            deferred_since: None,
            since_compact_check: 0,
            last_ask: Instant::now(),
            ask_owed: false,
        }
    }

    fn run(mut self) {
        loop {
            let (commit, closed) = self.wait();
            let hub = self.hub.clone();
            let mut turn = hub.turn.lock();
            let compacting = hub.store.compacting();
            if commit {
                // What a helper left, if anything: it may have taken it all.
                if let Some((batch, sizes)) = hub.take_batch(None) {
                    turn.commit(&hub, batch, sizes, self.durable);
                    self.deferred_since = None;
                }
            }
            // Every commit counts, the requests' own as the writer's.
            self.since_compact_check += hub.commits.swap(0, Ordering::AcqRel);
            let idle = hub.queued.mutations.load(Ordering::Acquire) == 0;
            let owed = self.since_compact_check > 0 || self.ask_owed;
            // `compacting` as this turn began: a stale `true` (a commit gave
            // the compaction up) costs one ask.
            let idle_ask = owed && idle && self.last_ask.elapsed() >= COMPACT_IDLE_ASK;
            if idle_ask || self.since_compact_check >= COMPACT_CHECK_COMMITS || compacting {
                self.ask_compaction();
            } else if self.since_compact_check > 0 && idle {
                self.ask_owed = true;
            }
            hub.compacting.store(hub.store.compacting(), Ordering::Release);
            if hub.unsynced.load(Ordering::Acquire)
                && self.sync_every.is_some_and(|every| self.last_sync.elapsed() >= every)
            {
                if let Err(error) = hub.store.sync() {
                    tracing::error!(%error, "periodic sync failed: the last interval's writes may not survive a crash");
                }
                self.last_sync = Instant::now();
                // Under the turn: no commit came since the sync began.
                hub.unsynced.store(false, Ordering::Release);
            }
            if closed && hub.inbox.lock().requests.is_empty() {
                break;
            }
        }
        if let Err(error) = self.hub.store.sync() {
            tracing::error!(%error, "final sync failed");
        }
        self.hub.queued.finished.fetch_add(1, Ordering::AcqRel);
    }

    /// Waits until there is a batch to commit (a request somebody waits
    /// for, a full batch, writes nobody waits for that waited long enough,
    /// a close) or a timer of its own (a sync, a compaction's ask); whether
    /// to commit, and whether the committer is closing.
    fn wait(&mut self) -> (bool, bool) {
        let hub = &*self.hub;
        let mut inbox = hub.inbox.lock();
        loop {
            if inbox.requests.is_empty() {
                self.deferred_since = None;
            } else if self.deferred_since.is_none() {
                self.deferred_since = Some(Instant::now());
            }
            let awaited = inbox.requests.iter().any(|request| request.settlement.is_some());
            let count: usize = inbox.requests.iter().map(|request| request.mutations.len()).sum();
            let bytes: usize = inbox.requests.iter().map(|request| request.bytes).sum();
            let full = count >= BATCH_MUTATIONS_MAX || bytes >= BATCH_PAYLOAD_BYTES_MAX;
            let overdue = self.deferred_since.is_some_and(|since| since.elapsed() >= UNAWAITED_DELAY_MAX);
            if inbox.closed || awaited || full || overdue {
                return (true, inbox.closed);
            }
            // Wake in time to commit what was deferred, and for the next
            // periodic sync, even if no request comes.
            let deferred_wait = self.deferred_since.map(|since| UNAWAITED_DELAY_MAX.saturating_sub(since.elapsed()));
            let unsynced = hub.unsynced.load(Ordering::Acquire);
            let sync_wait =
                self.sync_every.filter(|_| unsynced).map(|every| every.saturating_sub(self.last_sync.elapsed()));
            let compact_wait = hub.compacting.load(Ordering::Acquire).then_some(COMPACT_IDLE_ASK);
            // Made only with nothing held back; while something is, its own
            // commit makes the ask (a wait of zero meanwhile would spin).
            let owed_wait = (self.ask_owed && inbox.requests.is_empty())
                .then(|| COMPACT_IDLE_ASK.saturating_sub(self.last_ask.elapsed()));
            let wait = [deferred_wait, sync_wait, compact_wait, owed_wait].into_iter().flatten().min();
            match wait {
                Some(wait) if wait.is_zero() => return (false, false),
                Some(wait) => {
                    if hub.wake.wait_for(&mut inbox, wait).timed_out() {
                        return (
                            !inbox.requests.is_empty()
                                && self.deferred_since.is_some_and(|since| since.elapsed() >= UNAWAITED_DELAY_MAX),
                            inbox.closed,
                        );
                    }
                }
                None => hub.wake.wait(&mut inbox),
            }
        }
    }

    /// Between commits: compacts the store if it is due.
    fn ask_compaction(&mut self) {
        self.since_compact_check = 0;
        (self.last_ask, self.ask_owed) = (Instant::now(), false);
        let started = Instant::now();
        match self.hub.store.compact_if_due() {
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
                // Not taken as a sync: the store's contract promises none
                // (the redb store's finish makes its log durable, but a
                // compaction given up before it does not).
            }
            Err(error) => tracing::error!(%error, "compacting the store failed"),
        }
    }
}

impl<S: Send + 'static> Turn<S> {
    /// Applies one batch, in the order its requests were sent, settles it and
    /// replies. Durably if `durable`, or if it raises the next id stored
    /// above the largest made durable: in the relaxed mode, ids are answered
    /// only below a next id that a crash cannot take back (the engine's
    /// `State::next_id_mutation`). A commit left unsynced tells the writer,
    /// which syncs it in time.
    fn commit(&mut self, hub: &Hub<S>, mut batch: Vec<Request<S>>, (count, bytes): (usize, usize), durable: bool) {
        let next_id = batch.iter().map(|request| request.next_id).max().unwrap_or(0);
        let all: Vec<Mutation> = if batch.len() == 1 {
            std::mem::take(&mut batch[0].mutations)
        } else {
            batch.iter_mut().flat_map(|r| std::mem::take(&mut r.mutations)).collect()
        };
        let durable = durable || next_id > self.ids_durable;
        let result = if all.is_empty() {
            Ok(())
        } else {
            let started = Instant::now();
            let result = hub.store.apply(&all, durable);
            hub.stats.record(all.len(), started.elapsed(), result.is_ok());
            result
        };
        if result.is_ok() && !all.is_empty() {
            hub.commits.fetch_add(1, Ordering::AcqRel);
        }
        if durable && result.is_ok() && !all.is_empty() {
            self.ids_durable = self.ids_durable.max(next_id);
        } else if result.is_ok() && !all.is_empty() && !hub.unsynced.load(Ordering::Acquire) {
            // The first commit since the writer's sync: it may sleep without
            // a deadline until told. Under the inbox's lock, so that a writer
            // between reading the flag and sleeping cannot miss it.
            let _inbox = hub.inbox.lock();
            hub.unsynced.store(true, Ordering::Release);
            hub.wake.notify_one();
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
        hub.queued.sub(count, bytes);
        hub.queued.finished.fetch_add(1, Ordering::AcqRel);
        hub.drained.notify_waiters();
        for reply in replies {
            let _ = reply.send(result.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::interface::{Loaded, Snapshot};
    use hourglass_queue::{Schedule, Task};

    /// The read side of a test store here: it holds nothing, and is never
    /// read after its load.
    macro_rules! holds_nothing {
        () => {
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
            fn snapshot(&self) -> Result<Box<dyn Snapshot>, StoreError> {
                unreachable!("no reads here")
            }
        };
    }

    /// A store whose writes never return, as one held forever would.
    struct Stuck;

    impl Store for Stuck {
        holds_nothing!();
        fn apply(&self, _: &[Mutation], _: bool) -> Result<(), StoreError> {
            loop {
                thread::park();
            }
        }
        fn sync(&self) -> Result<(), StoreError> {
            Ok(())
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
        holds_nothing!();
        fn apply(&self, _: &[Mutation], _: bool) -> Result<(), StoreError> {
            self.log.lock().push("apply");
            Ok(())
        }
        fn sync(&self) -> Result<(), StoreError> {
            Ok(())
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

    /// Settles on whichever thread commits, and says which.
    struct Threads(Arc<parking_lot::Mutex<Vec<thread::ThreadId>>>);

    impl Settler<()> for Threads {
        fn settle(&mut self, settlements: Vec<()>, _: Result<(), &StoreError>) {
            self.0.lock().extend(settlements.iter().map(|()| thread::current().id()));
        }
    }

    /// In the relaxed mode a request's own thread commits what is queued
    /// when the turn is free, and the writer commits it when the turn is
    /// taken. (The writer may take a request first if it is awake: of ten,
    /// most are committed by the caller.)
    #[test]
    fn a_request_commits_its_own_change_when_the_turn_is_free() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(crate::store::RedbStore::open(dir.path()).unwrap());
        let threads = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let committer = Committer::start(store, Fsync::EveryMs(60_000), Threads(threads.clone())).unwrap();
        let caller = thread::current().id();
        for id in 1..=10 {
            let reply = committer.send(vec![Mutation::Delete(id)], ()).ok().unwrap();
            committer.help();
            assert_eq!(reply.blocking_recv().unwrap(), Ok(()));
        }
        let by_caller = threads.lock().iter().filter(|&&id| id == caller).count();
        assert!(by_caller >= 5, "{by_caller} of 10 committed by the caller's thread");
        let held = committer.hub.turn.lock();
        let reply = committer.send(vec![Mutation::Delete(11)], ()).ok().unwrap();
        committer.help();
        drop(held);
        assert_eq!(reply.blocking_recv().unwrap(), Ok(()), "committed by the writer once the turn was free");
        assert_ne!(threads.lock().last(), Some(&caller), "not by the caller");
        drop(committer);
        assert_eq!(threads.lock().len(), 11);
    }

    /// A store that records which thread made each commit, and whether durably.
    struct ByThread(Arc<parking_lot::Mutex<Vec<(thread::ThreadId, bool)>>>);

    impl Store for ByThread {
        holds_nothing!();
        fn apply(&self, _: &[Mutation], durable: bool) -> Result<(), StoreError> {
            self.0.lock().push((thread::current().id(), durable));
            Ok(())
        }
        fn sync(&self) -> Result<(), StoreError> {
            Ok(())
        }
    }

    /// A commit that raises the next id stored is durable, an fsync: the
    /// writer's to make, never a request's thread's, which commits the
    /// changes around it.
    #[test]
    fn a_request_leaves_a_durable_commit_to_the_writer() {
        let commits = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let store = Arc::new(ByThread(commits.clone()));
        let committer = Committer::start(store, Fsync::EveryMs(60_000), Counted(Arc::default())).unwrap();
        let caller = thread::current().id();
        for (id, raises) in [(1, false), (2, true), (3, false), (4, true), (5, false)] {
            let mut mutations = vec![Mutation::Delete(id)];
            if raises {
                mutations.push(Mutation::NextId(id * 65_536));
            }
            let reply = committer.send(mutations, ()).ok().unwrap();
            committer.help();
            assert_eq!(reply.blocking_recv().unwrap(), Ok(()));
        }
        let commits = commits.lock().clone();
        assert_eq!(commits.iter().filter(|(_, durable)| *durable).count(), 2, "{commits:?}");
        for (thread, durable) in &commits {
            assert!(!durable || *thread != caller, "a durable commit on the caller's thread: {commits:?}");
        }
        drop(committer);
    }

    /// A store that says when it is synced and asked to compact.
    struct Watched {
        said: parking_lot::Mutex<mpsc::Sender<&'static str>>,
    }

    impl Store for Watched {
        holds_nothing!();
        fn apply(&self, _: &[Mutation], _: bool) -> Result<(), StoreError> {
            Ok(())
        }
        fn sync(&self) -> Result<(), StoreError> {
            let _ = self.said.lock().send("sync");
            Ok(())
        }
        fn compact_if_due(&self) -> Result<Option<crate::store::Compacted>, StoreError> {
            let _ = self.said.lock().send("compact");
            Ok(None)
        }
    }

    /// When only requests commit (the relaxed mode), the writer still syncs
    /// within the interval and asks whether a compaction is due, with no
    /// request after them to wake it.
    #[test]
    fn the_writer_syncs_and_asks_to_compact_after_requests_commit_their_own() {
        let (said, heard) = mpsc::channel();
        let store = Arc::new(Watched { said: parking_lot::Mutex::new(said) });
        let committer = Committer::start(store, Fsync::EveryMs(10), Counted(Arc::default())).unwrap();
        for id in 1..=3 {
            let reply = committer.send(vec![Mutation::Delete(id)], ()).ok().unwrap();
            committer.help();
            assert_eq!(reply.blocking_recv().unwrap(), Ok(()));
        }
        // Bounds for a broken writer, not limits on a working one.
        let mut seen = Vec::new();
        while !(seen.contains(&"sync") && seen.contains(&"compact")) {
            seen.push(heard.recv_timeout(Duration::from_secs(60)).expect("the writer syncs and asks"));
        }
        drop(committer);
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
