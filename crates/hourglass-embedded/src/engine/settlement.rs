//! What becomes of a change once the writer has it on disk, or has failed to.
//!
//! A change that a client waits for is made in three steps: under the state
//! lock the task is hidden (or, new, inserted pending) and the change is sent
//! to the writer, in the order of the lock; the writer makes it durable; then,
//! on the writer thread and under the lock again, the change is *settled*: it
//! takes effect and becomes visible, or it is undone and leaves no trace. Only
//! then does the client hear back. Requests that touch a pending task wait for
//! its settlement, so nobody sees a change that is not durable, and no two
//! changes of one task are ever on their way at once.
//!
//! A change the writer never took (it is gone: the engine is closing) is
//! settled at once, as not durable, by whoever sent it, under the lock it was
//! sent under: one undo path, [`State::settle`](super::state::State::settle),
//! whichever way a change fails.

use super::schedule_table::Armed;
use hourglass_queue::{QueueSettings, Task};

/// Why a task changed, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Why {
    Reschedule,
    Nack,
    /// A lease ran out: the timer thread's change, which nobody waits for.
    Expire,
    /// A task was not delivered by its expiry: the timer thread's change too.
    Expired,
    /// A task's payload was found damaged as a claim handed it out: the
    /// claim's change, which nobody waits for either.
    Corrupt,
    Ack,
    Cancel,
}

/// A change waiting for the store.
#[derive(Debug)]
pub(crate) enum Settlement {
    /// New tasks: filed for delivery once durable, forgotten if not.
    Publish(Vec<u64>),
    /// A changed task: takes this form once durable, keeps its old one if not.
    Change { task: Task, why: Why },
    /// A removed task: gone once durable, back where it was if not.
    Remove { id: u64, why: Why },
    /// A schedule's occurrence: its new tasks published and the schedule moved
    /// to `next_ms` (having enqueued `last`) once durable; if not, the tasks
    /// forgotten and the schedule tried again later.
    Fire { name: Box<str>, next_ms: Option<u64>, last: Option<(u64, u64)>, ids: Vec<u64>, skipped: u64 },
    /// A schedule put: stored as `armed` once durable, as it was if not.
    PutSchedule(Armed),
    /// A schedule deleted: gone once durable, as it was if not.
    DeleteSchedule(Box<str>),
    /// Dead tasks deleted together: gone once durable, back if not.
    Purge(Vec<u64>),
    /// A queue paused or resumed: so once durable, as it was if not.
    PauseQueue { queue: u32, paused: bool, until_ms: Option<u64> },
    /// A queue's settings put: they hold once durable, the old ones if not.
    PutSettings { queue: u32, settings: QueueSettings },
}
