//! One interface over every single-threaded timer structure, so each scenario
//! is written once. Time is in milliseconds from the queue's creation.

use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use hierarchical_hash_wheel_timer::wheels::cancellable::QuadWheelWithOverflow;
use hierarchical_hash_wheel_timer::wheels::Skip;
use hierarchical_hash_wheel_timer::IdOnlyTimerEntry;
use tokio::time::{Instant, Sleep};
use tokio_util::time::{delay_queue, DelayQueue};

pub trait TimerQueue {
    type Key: Copy;
    const NAME: &'static str;
    fn with_capacity(capacity: usize) -> Self;
    fn insert(&mut self, deadline_ms: u64) -> Self::Key;
    fn cancel(&mut self, key: Self::Key) -> bool;
    /// Moves a live timer; returns its key, which may have changed.
    fn reset(&mut self, key: Self::Key, deadline_ms: u64) -> Self::Key;
    /// Moves time to `now_ms` and takes every expired timer; returns how many.
    fn advance(&mut self, now_ms: u64) -> usize;
}

pub struct Hourglass(hourglass::Wheel<()>);

impl TimerQueue for Hourglass {
    type Key = hourglass::Key;
    const NAME: &'static str = "hourglass";

    fn with_capacity(capacity: usize) -> Self {
        Hourglass(hourglass::Wheel::with_capacity(capacity))
    }
    #[inline]
    fn insert(&mut self, deadline_ms: u64) -> Self::Key {
        self.0.insert(deadline_ms, ()).expect("below the wheel's capacity")
    }
    #[inline]
    fn cancel(&mut self, key: Self::Key) -> bool {
        self.0.remove(key).is_some()
    }
    #[inline]
    fn reset(&mut self, key: Self::Key, deadline_ms: u64) -> Self::Key {
        self.0.reset(key, deadline_ms);
        key
    }
    fn advance(&mut self, now_ms: u64) -> usize {
        self.0.advance(now_ms);
        let mut fired = 0;
        while self.0.pop_expired().is_some() {
            fired += 1;
        }
        fired
    }
}

/// A paused tokio runtime entered for the life of the process: tokio's timers
/// need one in context, and paused time lets the benchmark move it.
fn paused_runtime() -> &'static tokio::runtime::Runtime {
    use std::sync::OnceLock;
    static RUNTIME: OnceLock<&'static tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
        Box::leak(Box::new(runtime))
    })
}

/// Moves a paused tokio clock forward, letting its driver process timers.
fn tokio_advance_to(base: Instant, now_ms: u64) {
    let target = base + Duration::from_millis(now_ms);
    let runtime = paused_runtime();
    let _guard = runtime.enter();
    let now = Instant::now();
    if target > now {
        runtime.block_on(tokio::time::advance(target - now));
    }
}

/// A `DelayQueue` with tokio-util's API, driven on the paused clock: the
/// same harness for tokio-util's and hourglass's, so they get the same calls.
macro_rules! delay_queue_harness {
    ($(#[$doc:meta])* $name:ident, $queue:ty, $key:ty, $label:literal) => {
        $(#[$doc])*
        pub struct $name {
            queue: $queue,
            base: Instant,
            _guard: tokio::runtime::EnterGuard<'static>,
        }

        impl TimerQueue for $name {
            type Key = $key;
            const NAME: &'static str = $label;

            fn with_capacity(capacity: usize) -> Self {
                let guard = paused_runtime().enter();
                $name { queue: <$queue>::with_capacity(capacity), base: Instant::now(), _guard: guard }
            }
            #[inline]
            fn insert(&mut self, deadline_ms: u64) -> Self::Key {
                self.queue.insert_at((), self.base + Duration::from_millis(deadline_ms))
            }
            #[inline]
            fn cancel(&mut self, key: Self::Key) -> bool {
                self.queue.try_remove(&key).is_some()
            }
            #[inline]
            fn reset(&mut self, key: Self::Key, deadline_ms: u64) -> Self::Key {
                self.queue.reset_at(&key, self.base + Duration::from_millis(deadline_ms));
                key
            }
            fn advance(&mut self, now_ms: u64) -> usize {
                tokio_advance_to(self.base, now_ms);
                let mut cx = Context::from_waker(Waker::noop());
                let mut fired = 0;
                while let Poll::Ready(Some(_)) = self.queue.poll_expired(&mut cx) {
                    fired += 1;
                }
                fired
            }
        }
    };
}

delay_queue_harness!(
    /// tokio-util's `DelayQueue`.
    TokioDelayQueue,
    DelayQueue<()>,
    delay_queue::Key,
    "tokio-delayqueue"
);
delay_queue_harness!(
    /// hourglass's drop-in for tokio-util's `DelayQueue`.
    HourglassDelayQueue,
    hourglass::DelayQueue<()>,
    hourglass::delay_queue::Key,
    "hourglass-delayqueue"
);

/// tokio's own timer: one registered `Sleep` per timer.
pub struct TokioSleep {
    sleeps: Vec<Option<Pin<Box<Sleep>>>>,
    free: Vec<usize>,
    base: Instant,
    _guard: tokio::runtime::EnterGuard<'static>,
}

impl TimerQueue for TokioSleep {
    type Key = usize;
    const NAME: &'static str = "tokio-sleep";

    fn with_capacity(capacity: usize) -> Self {
        let guard = paused_runtime().enter();
        TokioSleep { sleeps: Vec::with_capacity(capacity), free: Vec::new(), base: Instant::now(), _guard: guard }
    }
    #[inline]
    fn insert(&mut self, deadline_ms: u64) -> Self::Key {
        let mut sleep = Box::pin(tokio::time::sleep_until(self.base + Duration::from_millis(deadline_ms)));
        // A Sleep joins the timer wheel when first polled.
        let _ = sleep.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        match self.free.pop() {
            Some(index) => {
                self.sleeps[index] = Some(sleep);
                index
            }
            None => {
                self.sleeps.push(Some(sleep));
                self.sleeps.len() - 1
            }
        }
    }
    #[inline]
    fn cancel(&mut self, key: Self::Key) -> bool {
        let cancelled = self.sleeps[key].take().is_some();
        if cancelled {
            self.free.push(key);
        }
        cancelled
    }
    #[inline]
    fn reset(&mut self, key: Self::Key, deadline_ms: u64) -> Self::Key {
        if let Some(sleep) = &mut self.sleeps[key] {
            sleep.as_mut().reset(self.base + Duration::from_millis(deadline_ms));
        }
        key
    }
    fn advance(&mut self, now_ms: u64) -> usize {
        // tokio's driver fires expired sleeps itself; there is no batch to take,
        // and scanning every Sleep here would charge tokio for our bookkeeping.
        // So this only moves the clock, and the expiry scenario leaves tokio-sleep out.
        tokio_advance_to(self.base, now_ms);
        0
    }
}

use std::future::Future;

/// `hierarchical_hash_wheel_timer` (Kompact's): cancel by id through a hash map.
pub struct Hhwt {
    wheel: QuadWheelWithOverflow<IdOnlyTimerEntry<u64>>,
    now_ms: u64,
    next_id: u64,
}

impl Hhwt {
    fn schedule(&mut self, id: u64, deadline_ms: u64) {
        let delay = Duration::from_millis(deadline_ms.saturating_sub(self.now_ms));
        let entry = Rc::new(IdOnlyTimerEntry::new(id, delay));
        // A deadline already past is refused as expired: it would fire at once.
        let _ = self.wheel.insert_ref_with_delay(entry, delay);
    }
}

impl TimerQueue for Hhwt {
    type Key = u64;
    const NAME: &'static str = "hierarchical_hash_wheel_timer";

    fn with_capacity(_capacity: usize) -> Self {
        Hhwt { wheel: QuadWheelWithOverflow::new(), now_ms: 0, next_id: 0 }
    }
    #[inline]
    fn insert(&mut self, deadline_ms: u64) -> Self::Key {
        let id = self.next_id;
        self.next_id += 1;
        self.schedule(id, deadline_ms);
        id
    }
    #[inline]
    fn cancel(&mut self, key: Self::Key) -> bool {
        self.wheel.cancel(&key).is_ok()
    }
    #[inline]
    fn reset(&mut self, key: Self::Key, deadline_ms: u64) -> Self::Key {
        // No reset in its API: cancel, then insert again under the same id.
        let _ = self.wheel.cancel(&key);
        self.schedule(key, deadline_ms);
        key
    }
    fn advance(&mut self, now_ms: u64) -> usize {
        let mut fired = 0;
        while self.now_ms < now_ms {
            let remaining = u32::try_from(now_ms - self.now_ms).unwrap_or(u32::MAX);
            match self.wheel.can_skip() {
                Skip::Empty => {
                    self.wheel.skip(remaining);
                    self.now_ms += u64::from(remaining);
                }
                Skip::Millis(ms) => {
                    let ms = ms.min(remaining);
                    self.wheel.skip(ms);
                    self.now_ms += u64::from(ms);
                }
                Skip::None => {
                    fired += self.wheel.tick().len();
                    self.now_ms += 1;
                }
            }
        }
        fired
    }
}
