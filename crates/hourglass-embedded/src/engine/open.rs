//! Opening the engine: every stored setting, task, pause and schedule loaded into a
//! new state (recovery), then the writer started. What can go wrong here is
//! the setup's, [`OpenError`], kept apart from a request's
//! ([`QueueError`](hourglass_queue::QueueError)).

use std::sync::Arc;

use hourglass::WallClock;
use hourglass_queue::limits::QUEUES_MAX;
use hourglass_queue::{Closed, Timetable};

use super::error::OpenError;
use super::schedule_table::Armed;
use super::shared::{EngineSettler, Shared};
use super::state::State;
use super::{Engine, Options};
use crate::store::{Committer, Fsync, Store};

impl Engine {
    /// Loads every stored task and starts the writer. Tasks that came due while
    /// the engine was down are due at once; leases do not survive a restart,
    /// so tasks that were leased are due again.
    ///
    /// # Errors
    /// [`OpenError`]: the store cannot be read, a record is corrupt (named),
    /// it holds too many queues, or the writer cannot start.
    pub fn open(store: Box<dyn Store>, options: Options, clock: Arc<dyn WallClock>) -> Result<Arc<Engine>, OpenError> {
        let store: Arc<dyn Store> = Arc::from(store);
        let mut state = recover(&*store, clock.now_ms())?;
        if let Fsync::EveryMs(_) = options.fsync {
            state.reserve_ids_ahead();
        }
        let shared = Arc::new(Shared::new(state));
        let settler = EngineSettler { shared: shared.clone(), clock: clock.clone() };
        let committer = Committer::start(store.clone(), options.fsync, settler).map_err(OpenError::Writer)?;
        Ok(Arc::new(Engine { shared, committer, store, limits: options.limits, clock, closed: Closed::default() }))
    }
}

/// The state as the store holds it, read at `now_ms`.
fn recover(store: &dyn Store, now_ms: u64) -> Result<State, OpenError> {
    let mut state = State::new(now_ms);
    let mut too_many_queues = false;
    // Settings first: they say which claims the tasks filed next go to.
    for (queue, settings) in store.load_settings()? {
        state.load_settings(&queue, settings, now_ms).map_err(|_| OpenError::TooManyQueues { max: QUEUES_MAX })?;
    }
    let next_id = store.load(&mut |task, payload| {
        too_many_queues |= state.load_task(&task, payload, now_ms).is_err();
    })?;
    if too_many_queues {
        return Err(OpenError::TooManyQueues { max: QUEUES_MAX });
    }
    state.retire_ids_below(next_id);
    for (queue, until_ms) in store.load_paused()? {
        state.load_pause(&queue, until_ms).map_err(|_| OpenError::TooManyQueues { max: QUEUES_MAX })?;
    }
    for schedule in store.load_schedules()? {
        match Timetable::of(&schedule.rule, schedule.since_ms) {
            Ok(timetable) => state.load_schedule(Armed { schedule, timetable }),
            // A time zone this machine's database lacks: the schedule stays
            // stored, and runs again once put again (or on a machine that has it).
            Err(error) => tracing::error!(
                schedule = %schedule.name, %error, "a stored schedule cannot be read here: it does not run"
            ),
        }
    }
    state.debug_check();
    Ok(state)
}
