//! The driver: a [`TimerThread`](crate::TimerThread) on the scheduler's clock
//! whose turn advances the wheel and hands due jobs to the pool.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crossbeam_channel::Sender;

use super::task::Run;
use super::{Shared, Stop};
use crate::timer_thread::{Next, TimerHandle};

/// The driver's turn, owning its end of the pool's queue: when the thread
/// ends and drops it, the workers finish what they were handed and exit.
pub(super) fn turns(shared: Arc<Shared>, queue: Sender<Run>) -> impl FnMut(&TimerHandle) -> Next + Send + 'static {
    let mut batch = Vec::with_capacity(shared.config.queue_capacity);
    move |timer| turn(&shared, &queue, &mut batch, timer)
}

fn turn(shared: &Shared, queue: &Sender<Run>, batch: &mut Vec<Run>, timer: &TimerHandle) -> Next {
    let capacity = shared.config.queue_capacity;
    let now_ns = shared.now_ns();
    let mut state = shared.state.lock();
    if matches!(state.stop, Some(Stop::Now)) {
        return Next::Stop;
    }
    let turn = shared.turns_begun.fetch_add(1, Ordering::SeqCst) + 1;
    state.wheel.advance(shared.time.tick_containing(now_ns));
    let room = capacity.saturating_sub(queue.len());
    shared.take_due(&mut state, now_ns, room, batch);
    let backlog = state.wheel.expired_len();
    let next_tick = state.wheel.next_expiration();
    let done = match state.stop {
        Some(Stop::DrainUntil(until)) => backlog == 0 && next_tick.is_none_or(|tick| tick > until),
        _ => false,
    };
    shared.counters.dispatched.fetch_add(batch.len() as u64, Ordering::SeqCst);
    shared.counters.due_backlog.store(backlog, Ordering::SeqCst);
    shared.processed_ns.fetch_max(now_ns, Ordering::SeqCst);
    // Under the lock producers insert under. With a backlog, the driver waits
    // for room, not time: no deadline is earlier, producers need not wake it.
    timer.will_sleep_until(if backlog > 0 { Some(0) } else { next_tick });
    if backlog > 0 {
        shared.wants_room.store(true, Ordering::SeqCst);
    }
    drop(state);

    for run in batch.drain(..) {
        // Only this thread sends, and `room` was measured under the lock,
        // so this never blocks; it fails only if every worker is gone.
        if queue.send(run).is_err() {
            shared.counters.dispatched.fetch_sub(1, Ordering::SeqCst);
        }
    }
    shared.turns_done.store(turn, Ordering::SeqCst);
    shared.idle.notify();
    if done {
        Next::Stop
    } else if backlog == 0 {
        Next::until(next_tick)
    } else if queue.len() < capacity {
        // A worker made room since the look: take more at once.
        Next::Again
    } else {
        // A worker that takes a job after `wants_room` was set wakes us; one
        // that took it before has already made room, seen just above.
        Next::UntilWoken
    }
}
