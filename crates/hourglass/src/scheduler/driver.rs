//! The driver thread: sleeps until the next deadline, advances the wheel, and
//! hands due jobs to the pool.

use std::sync::atomic::Ordering;

use crossbeam_channel::Sender;

use super::task::Run;
use super::{Shared, Stop};

pub(super) fn run(shared: &Shared, queue: Sender<Run>) {
    reduce_timer_slack();
    let capacity = shared.config.queue_capacity;
    let mut batch = Vec::with_capacity(capacity);
    loop {
        let now_ns = shared.now_ns();
        let mut state = shared.state.lock();
        if matches!(state.stop, Some(Stop::Now)) {
            break;
        }
        let turn = shared.turns_begun.fetch_add(1, Ordering::SeqCst) + 1;
        state.wheel.advance(shared.time.tick_containing(now_ns));
        let room = capacity.saturating_sub(queue.len());
        shared.take_due(&mut state, now_ns, room, &mut batch);
        let backlog = state.wheel.expired_len();
        let next_tick = state.wheel.next_expiration();
        let done = match state.stop {
            Some(Stop::DrainUntil(until)) => backlog == 0 && next_tick.is_none_or(|tick| tick > until),
            _ => false,
        };
        shared.counters.dispatched.fetch_add(batch.len() as u64, Ordering::SeqCst);
        shared.counters.due_backlog.store(backlog, Ordering::SeqCst);
        shared.processed_ns.fetch_max(now_ns, Ordering::SeqCst);
        let wake_tick = if backlog > 0 { 0 } else { next_tick.unwrap_or(u64::MAX) };
        shared.wake_tick.store(wake_tick, Ordering::Relaxed);
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
            break;
        }
        if backlog > 0 {
            // A worker that takes a job after `wants_room` was set unparks us;
            // one that took it before has already made room, seen here.
            if queue.len() < capacity {
                continue;
            }
            std::thread::park();
        } else {
            let deadline = (wake_tick != u64::MAX).then(|| shared.time.instant_of_tick(wake_tick)).flatten();
            shared.clock.park_until(deadline);
        }
    }
}

/// Asks Linux to wake this thread within 1 µs of its deadline instead of the
/// default 50 µs, which would add to every job's lateness.
fn reduce_timer_slack() {
    #[cfg(target_os = "linux")]
    {
        const DRIVER_TIMER_SLACK_NS: std::ffi::c_ulong = 1_000;
        if let Err(error) = nix::sys::prctl::set_timerslack(DRIVER_TIMER_SLACK_NS) {
            eprintln!("hourglass: could not reduce the driver's timer slack: {error}");
        }
    }
}
