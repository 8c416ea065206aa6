//! The timer thread: sleeps on the engine's [`WallClock`](hourglass::WallClock)
//! until the wheel's next expiration, to the microsecond, or until woken by an
//! earlier deadline; then files what came due and expires leases.

use std::sync::Arc;

use super::Engine;

pub(super) fn start(engine: Arc<Engine>) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name("hourglass-timers".into()).spawn(move || {
        // Registered before the first look at the wheel, so no wake-up is lost.
        let _ = engine.shared.timer_thread.set(std::thread::current());
        while !engine.is_closed() {
            let next_ms = engine.poll_timers();
            engine.clock.park_until_us(next_ms.map(|ms| ms.saturating_mul(1_000)));
        }
    })
}
