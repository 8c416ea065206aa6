//! The store's interface: the [`Store`] trait every place tasks survive in
//! implements, the [`Mutation`]s the writer applies through it, and what it
//! hands back ([`Loaded`] payloads, [`Snapshot`]s).

use super::error::StoreError;
use hourglass_queue::Payload;
use hourglass_queue::QueueSettings;
use hourglass_queue::Schedule;
use hourglass_queue::Task;

/// A paused queue as stored: its name, and when its pause ends (Unix ms;
/// `None`: when resumed).
pub type PausedQueue = (Box<str>, Option<u64>);

/// One change to the stored tasks.
#[derive(Debug, Clone, PartialEq)]
pub enum Mutation {
    /// A new task and its payload.
    Insert {
        /// The task.
        task: Task,
        /// Its payload, stored once: later changes never rewrite it.
        payload: Payload,
    },
    /// A changed task: its record only, the payload stays as stored.
    Update(Task),
    /// Remove the task with this id and its payload (absent is fine).
    Delete(u64),
    /// Ids below this have been handed out: never hand them out again. The
    /// store keeps the largest it was given. The writer commits a batch that
    /// raises it durably, whatever the mode.
    NextId(u64),
    /// A schedule, new or changed: stored whole under its name.
    PutSchedule(Schedule),
    /// Remove the schedule with this name (absent is fine).
    DeleteSchedule(Box<str>),
    /// Pause (`true`) or resume the queue with this name: a paused queue's
    /// due tasks wait, and stay waiting across restarts.
    PauseQueue {
        /// The queue's name.
        queue: Box<str>,
        /// Paused, or resumed.
        paused: bool,
        /// When a pause ends by itself, Unix ms; `None` for one that lasts
        /// until resumed.
        until_ms: Option<u64>,
    },
    /// A queue's settings, replaced whole: stored under its name, or removed
    /// when they are the defaults.
    PutSettings {
        /// The queue's name.
        queue: Box<str>,
        /// The settings.
        settings: QueueSettings,
    },
}

impl Mutation {
    /// The id a [`Mutation::NextId`] stores.
    pub fn next_id(&self) -> Option<u64> {
        match self {
            Mutation::NextId(next) => Some(*next),
            _ => None,
        }
    }

    /// Payload bytes the mutation carries.
    pub fn payload_bytes(&self) -> usize {
        match self {
            Mutation::Insert { payload, .. } => payload.len(),
            Mutation::PutSchedule(schedule) => schedule.payload.len(),
            Mutation::Update(_)
            | Mutation::Delete(_)
            | Mutation::NextId(_)
            | Mutation::DeleteSchedule(_)
            | Mutation::PauseQueue { .. }
            | Mutation::PutSettings { .. } => 0,
        }
    }
}

/// A stored task's payload as [`Store::load`] hands it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loaded {
    /// The payload itself, kept in memory if it is at most
    /// [`PAYLOAD_INLINE_MAX`](hourglass_queue::limits::PAYLOAD_INLINE_MAX) bytes (a
    /// larger one is dropped and read through a [`Snapshot`] when needed).
    Inline(Box<[u8]>),
    /// A larger payload, left in the store: only its size, in bytes. It is
    /// read through a [`Snapshot`] when a claim or a read hands it out.
    Apart(usize),
}

impl Loaded {
    /// What `load` hands over for `payload`: a copy of the bytes if small
    /// enough to keep in memory, else only the size.
    pub fn of(payload: &[u8]) -> Loaded {
        if hourglass_queue::limits::payload_inline(payload.len()) {
            Loaded::Inline(payload.into())
        } else {
            Loaded::Apart(payload.len())
        }
    }
}

/// A consistent view of everything applied to a [`Store`] when the snapshot
/// was taken, whatever is applied after: payloads are read through it.
pub trait Snapshot: Send {
    /// The payload of task `id`.
    ///
    /// # Errors
    /// [`StoreError::Database`] if it cannot be read, [`StoreError::Missing`]
    /// if the task is not in the snapshot, [`StoreError::Corrupt`] if its
    /// payload is damaged (does not decode, or is missing from its place).
    fn payload(&mut self, id: u64) -> Result<Payload, StoreError>;
}

/// A place tasks survive restarts in. Implementations apply a batch
/// atomically: after a crash, either all of a batch is there or none of it.
pub trait Store: Send + Sync + 'static {
    /// Calls `visit` with every stored task and its payload (the bytes of a
    /// small one, the size of a large one: see [`Loaded`]), in id order, and
    /// returns the largest [`Mutation::NextId`] stored (0 if none).
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] for a record that does not decode; the caller
    /// must refuse to start rather than guess.
    fn load(&self, visit: &mut dyn FnMut(Task, Loaded)) -> Result<u64, StoreError>;

    /// Every stored schedule, in name order.
    ///
    /// # Errors
    /// [`StoreError::CorruptSchedule`] for a record that does not decode.
    fn load_schedules(&self) -> Result<Vec<Schedule>, StoreError>;

    /// The paused queues, in name order: each name, and when its pause ends
    /// (`None`: when resumed).
    ///
    /// # Errors
    /// [`StoreError::Database`] if they cannot be read.
    fn load_paused(&self) -> Result<Vec<PausedQueue>, StoreError>;

    /// The settings of every queue that has other than the defaults, in
    /// name order.
    ///
    /// # Errors
    /// [`StoreError::CorruptSettings`] for a record that does not decode,
    /// [`StoreError::Database`].
    fn load_settings(&self) -> Result<Vec<(Box<str>, QueueSettings)>, StoreError>;

    /// Applies `batch` atomically, in order. With `durable`, it is on stable
    /// storage (fsync) when this returns; without, it may be lost by a crash
    /// or a power loss until the next durable apply or [`sync`](Store::sync).
    ///
    /// # Errors
    /// [`StoreError::Database`] if nothing could be written.
    fn apply(&self, batch: &[Mutation], durable: bool) -> Result<(), StoreError>;

    /// Makes everything applied so far durable.
    ///
    /// # Errors
    /// [`StoreError::Database`].
    fn sync(&self) -> Result<(), StoreError>;

    /// A snapshot of everything applied so far. Cheap: the engine takes one
    /// under its lock when it hands out payloads kept apart, and reads them
    /// after the lock is released.
    ///
    /// # Errors
    /// [`StoreError::Database`].
    fn snapshot(&self) -> Result<Box<dyn Snapshot>, StoreError>;

    /// Gives back the file's free space once it is mostly free: begins a
    /// compaction, or finishes one whose work is done, and says what a
    /// finished one did; `Ok(None)` while none is due or one is under way.
    /// The writer calls it between commits; what it holds the writer for is
    /// bounded by the store, whatever it holds. A compaction changes nothing
    /// stored, and one finished makes everything applied before it durable.
    /// By default a store never compacts.
    ///
    /// # Errors
    /// [`StoreError::Database`] if the compaction failed: what was stored is
    /// still there, and the store serves on.
    fn compact_if_due(&self) -> Result<Option<Compacted>, StoreError> {
        Ok(None)
    }

    /// Whether a compaction is under way: the writer then asks
    /// [`compact_if_due`](Store::compact_if_due) after every commit, and
    /// while idle, so that it finishes soon after its work is done.
    fn compacting(&self) -> bool {
        false
    }
}

/// What a compaction did ([`Store::compact_if_due`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compacted {
    /// The file's bytes before.
    pub before_bytes: u64,
    /// The file's bytes after.
    pub after_bytes: u64,
    /// The live data's bytes, as the store estimates them, when it began.
    pub live_bytes: u64,
    /// Keys the writer synced itself at the finish: at most
    /// [`FINISH_DIRTY_MAX`](crate::compaction::FINISH_DIRTY_MAX) for the redb store.
    pub finish_keys: usize,
}
