//! Wall-clock time: due times are Unix milliseconds, kept across restarts.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of Unix time, injected so that tests control it.
pub trait WallClock: Send + Sync + 'static {
    /// Microseconds since the Unix epoch.
    fn now_us(&self) -> u64;

    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64 {
        self.now_us() / 1_000
    }
}

/// The system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemWallClock;

impl WallClock for SystemWallClock {
    fn now_us(&self) -> u64 {
        // A clock before 1970 is a broken machine; treat it as the epoch.
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
    }
}

/// A clock that moves only when told to.
#[derive(Debug, Default)]
pub struct ManualWallClock {
    now_us: AtomicU64,
}

impl ManualWallClock {
    /// A clock standing at `now_ms`.
    pub fn at_ms(now_ms: u64) -> Self {
        ManualWallClock { now_us: AtomicU64::new(now_ms * 1_000) }
    }

    /// Moves the clock forward by `ms`.
    pub fn advance_ms(&self, ms: u64) {
        self.now_us.fetch_add(ms * 1_000, Ordering::SeqCst);
    }
}

impl WallClock for ManualWallClock {
    fn now_us(&self) -> u64 {
        self.now_us.load(Ordering::SeqCst)
    }
}
