//! [`DelayQueue`]: tokio-util's `DelayQueue` API on hourglass's wheel.

mod expired;
mod ticks;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::time::{sleep_until, Instant, Sleep};

pub use self::expired::Expired;
use self::ticks::{TimeBase, SLEEP_MAX};
pub use crate::Key;
use crate::Wheel;

/// A queue of values that each come out once their deadline has passed: the
/// API of tokio-util's `DelayQueue`, on hourglass's [`Wheel`].
///
/// Switching is a change of `use`:
///
/// ```
/// use hourglass::DelayQueue; // was: use tokio_util::time::DelayQueue;
/// use futures_util::StreamExt;
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let mut timeouts = DelayQueue::new();
/// let slow = timeouts.insert("request 7", Duration::from_secs(30));
/// timeouts.insert("request 8", Duration::from_secs(5));
/// timeouts.reset(&slow, Duration::from_secs(1)); // it answered partly; wait less
///
/// assert_eq!(timeouts.next().await.unwrap().into_inner(), "request 7");
/// assert_eq!(timeouts.next().await.unwrap().into_inner(), "request 8");
/// assert!(timeouts.next().await.is_none()); // empty
/// # }
/// ```
///
/// Values come out in deadline order (ties in the order they were inserted or
/// last reset) through [`poll_expired`](DelayQueue::poll_expired) or the
/// [`Stream`](futures_core::Stream) implementation, which returns `None` while
/// the queue is empty. Like tokio-util's, the queue counts in whole
/// milliseconds: a deadline is rounded up to the next millisecond, so nothing
/// comes out early. It needs a tokio runtime with time enabled when polled.
///
/// # Where it differs from tokio-util's
///
/// Only where tokio-util's fails:
/// - **Keys are never reused.** A [`Key`] carries a generation, so a key whose
///   value has come out or been removed is stale forever: it is refused and
///   never names a newer value (tokio-util's is a bare slab index, tokio#3558).
///   [`try_remove`](DelayQueue::try_remove) and
///   [`try_reset`](DelayQueue::try_reset) refuse it with `None` or `false`;
///   [`remove`](DelayQueue::remove), [`reset`](DelayQueue::reset) and
///   [`deadline`](DelayQueue::deadline) keep tokio-util's signatures and panic
///   on it, naming the `try_` method.
/// - **Any deadline is accepted**, however far: the wheel covers every `u64`
///   millisecond and a timeout too long for an `Instant` never comes
///   (tokio-util panics about 2.2 years ahead).
/// - **No missed wake-ups.** A task waiting in `poll_expired` is woken by every
///   change that makes a deadline earlier than the one it sleeps until
///   (insert, reset, even to the past) or that empties the queue (the last
///   remove, `clear`), so it sees `None` at once (tokio#6751, #8274, #8320).
///   And it is not woken for nothing: it sleeps until the exact next deadline,
///   not a cascade point of the wheel, and a reset to a later deadline or a
///   remove of the value it waits for moves its sleep instead of waking it.
/// - **[`peek`](DelayQueue::peek) is exact**: it names what `poll_expired`
///   returns next, also when values share a slot of the wheel (tokio#8402).
/// - **Memory is given back by itself**: new values fill the lowest free
///   storage, so as values come and go the top pages empty and are freed (one
///   spare page is kept). [`shrink_to_fit`](DelayQueue::shrink_to_fit) also
///   gives back what [`with_capacity`](DelayQueue::with_capacity) or
///   [`reserve`](DelayQueue::reserve) reserved. Values never move, so
///   [`compact`](DelayQueue::compact) is the same as `shrink_to_fit` and
///   keys stay valid.
/// - [`capacity`](DelayQueue::capacity) counts whole pages of 4096 values.
///
/// # Cost
///
/// Insert, remove and reset are O(1); a reset to a later deadline touches only
/// the value's own entry. Each value costs a 32-byte entry plus the value
/// itself. `peek` walks the first occupied slot of the wheel.
pub struct DelayQueue<T> {
    wheel: Wheel<T>,
    time: TimeBase,
    /// Wakes the consumer at `armed` when it waits for the next deadline.
    sleep: Option<Pin<Box<Sleep>>>,
    /// The tick the sleep is armed for, while it is.
    armed: Option<u64>,
    /// The task that last polled.
    waker: Option<Waker>,
}

// A value is never pinned: the queue moves values freely.
impl<T> Unpin for DelayQueue<T> {}

impl<T> Default for DelayQueue<T> {
    fn default() -> Self {
        DelayQueue::new()
    }
}

impl<T> fmt::Debug for DelayQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelayQueue").field("len", &self.len()).field("armed_ms", &self.armed).finish_non_exhaustive()
    }
}

impl<T> DelayQueue<T> {
    /// The most values a queue holds at once (about 4.3 billion); an insert
    /// past it panics.
    pub const MAX_ENTRIES: usize = Wheel::<T>::MAX_ENTRIES;

    /// An empty queue. It allocates the wheel's lists (52 KiB) and no entry
    /// storage until a value is inserted.
    pub fn new() -> DelayQueue<T> {
        DelayQueue::with_capacity(0)
    }

    /// An empty queue with room for at least `capacity` values, kept until
    /// [`shrink_to_fit`](DelayQueue::shrink_to_fit).
    pub fn with_capacity(capacity: usize) -> DelayQueue<T> {
        DelayQueue {
            wheel: Wheel::with_capacity(capacity),
            time: TimeBase::starting_now(),
            sleep: None,
            armed: None,
            waker: None,
        }
    }

    /// Inserts `value`, due at `when`; returns its key. A deadline in the past
    /// is due at once.
    ///
    /// # Panics
    /// If the queue holds [`MAX_ENTRIES`](DelayQueue::MAX_ENTRIES) values.
    #[track_caller]
    pub fn insert_at(&mut self, value: T, when: Instant) -> Key {
        let tick = self.time.deadline_tick(when);
        self.insert_tick(value, tick)
    }

    /// Inserts `value`, due `timeout` from now; returns its key. A timeout of
    /// any length is accepted: one too long for an `Instant` never comes.
    ///
    /// # Panics
    /// If the queue holds [`MAX_ENTRIES`](DelayQueue::MAX_ENTRIES) values.
    #[track_caller]
    pub fn insert(&mut self, value: T, timeout: Duration) -> Key {
        let tick = self.time.tick_after(Instant::now(), timeout);
        self.insert_tick(value, tick)
    }

    #[track_caller]
    fn insert_tick(&mut self, value: T, tick: u64) -> Key {
        let key = match self.wheel.insert(tick, value) {
            Ok(key) => key,
            Err(full) => panic!("{full}"),
        };
        self.wake_if_sooner(tick);
        key
    }

    /// Takes the next value whose deadline has passed: `Ready(Some)` with it,
    /// `Ready(None)` if the queue is empty, or `Pending` until the earliest
    /// deadline, after which the task is woken. Any change that brings a
    /// deadline before the one the task waits for, or empties the queue,
    /// wakes it too.
    pub fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        if !self.waker.as_ref().is_some_and(|waker| waker.will_wake(cx.waker())) {
            self.waker = Some(cx.waker().clone());
        }
        loop {
            if let Some(expired) = self.wheel.pop_expired() {
                return Poll::Ready(Some(self.expired(expired)));
            }
            if self.wheel.is_empty() {
                self.armed = None;
                return Poll::Ready(None);
            }
            let now = Instant::now();
            if self.wheel.advance(self.time.elapsed_tick(now)) > 0 {
                continue;
            }
            let next = self.wheel.next_deadline().expect("a wheel with entries has a next deadline");
            debug_assert!(next > self.wheel.elapsed(), "nothing is due, yet the next deadline is {next}");
            if self.armed != Some(next) {
                self.arm(next, now);
            }
            let sleep = self.sleep.as_mut().expect("armed just now");
            match sleep.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                // Due, or a step of a very long wait: look again.
                Poll::Ready(()) => self.armed = None,
            }
        }
    }

    /// Removes the value and returns it; a value already due comes out too.
    ///
    /// # Panics
    /// If the key is stale (its value came out or was removed):
    /// [`try_remove`](DelayQueue::try_remove) returns `None` instead.
    #[track_caller]
    #[inline]
    pub fn remove(&mut self, key: &Key) -> Expired<T> {
        match self.try_remove(key) {
            Some(expired) => expired,
            None => stale(key, Checked::Remove),
        }
    }

    /// Removes the value and returns it; `None` if the key is stale.
    #[inline]
    pub fn try_remove(&mut self, key: &Key) -> Option<Expired<T>> {
        let removed = self.wheel.remove_entry(*key)?;
        if self.wheel.is_empty() {
            self.wake();
        } else if self.armed == Some(removed.deadline) {
            self.rearm();
        }
        Some(self.expired(removed))
    }

    /// Moves the value's deadline to `when`, earlier or later (a value already
    /// due but not yet taken included).
    ///
    /// # Panics
    /// If the key is stale: [`try_reset_at`](DelayQueue::try_reset_at) returns
    /// `false` instead.
    #[track_caller]
    #[inline]
    pub fn reset_at(&mut self, key: &Key, when: Instant) {
        if !self.try_reset_at(key, when) {
            stale(key, Checked::ResetAt);
        }
    }

    /// Moves the value's deadline to `timeout` from now.
    ///
    /// # Panics
    /// If the key is stale: [`try_reset`](DelayQueue::try_reset) returns
    /// `false` instead.
    #[track_caller]
    #[inline]
    pub fn reset(&mut self, key: &Key, timeout: Duration) {
        if !self.try_reset(key, timeout) {
            stale(key, Checked::Reset);
        }
    }

    /// As [`reset_at`](DelayQueue::reset_at); `false` if the key is stale.
    #[inline]
    pub fn try_reset_at(&mut self, key: &Key, when: Instant) -> bool {
        let tick = self.time.deadline_tick(when);
        self.reset_tick(key, tick)
    }

    /// As [`reset`](DelayQueue::reset); `false` if the key is stale.
    #[inline]
    pub fn try_reset(&mut self, key: &Key, timeout: Duration) -> bool {
        let tick = self.time.tick_after(Instant::now(), timeout);
        self.reset_tick(key, tick)
    }

    #[inline]
    fn reset_tick(&mut self, key: &Key, tick: u64) -> bool {
        let Some(old) = self.wheel.reset_from(*key, tick) else {
            return false;
        };
        if tick > old && self.armed == Some(old) {
            self.rearm();
        } else {
            self.wake_if_sooner(tick);
        }
        true
    }

    /// The value's deadline, rounded up to the queue's millisecond.
    ///
    /// # Panics
    /// If the key is stale: [`contains`](DelayQueue::contains) tells first.
    #[track_caller]
    pub fn deadline(&self, key: &Key) -> Instant {
        match self.wheel.deadline(*key) {
            Some(tick) => self.time.instant(tick),
            None => panic!("DelayQueue::deadline: {key:?} is stale (its value came out or was removed)"),
        }
    }

    /// Whether the key names a value in the queue.
    pub fn contains(&self, key: &Key) -> bool {
        self.wheel.contains(*key)
    }

    /// The value, if the key is not stale.
    pub fn get(&self, key: &Key) -> Option<&T> {
        self.wheel.get(*key)
    }

    /// The value, mutably, if the key is not stale.
    pub fn get_mut(&mut self, key: &Key) -> Option<&mut T> {
        self.wheel.get_mut(*key)
    }

    /// The key of the value that [`poll_expired`](DelayQueue::poll_expired)
    /// returns next (once it is due), or `None` if the queue is empty.
    pub fn peek(&self) -> Option<Key> {
        self.wheel.peek()
    }

    /// Removes every value; a waiting task is woken and sees `None`. Reserved
    /// capacity stays.
    pub fn clear(&mut self) {
        self.wheel.drain().for_each(drop);
        self.wake();
    }

    /// Values the queue holds before it allocates again.
    pub fn capacity(&self) -> usize {
        self.wheel.capacity()
    }

    /// Values in the queue, due or not.
    pub fn len(&self) -> usize {
        self.wheel.len()
    }

    /// Whether the queue holds no value.
    pub fn is_empty(&self) -> bool {
        self.wheel.is_empty()
    }

    /// Makes room for at least `additional` more values, kept until
    /// [`shrink_to_fit`](DelayQueue::shrink_to_fit).
    pub fn reserve(&mut self, additional: usize) {
        self.wheel.reserve(additional);
    }

    /// Gives back the memory of the empty top of the storage, reserved room
    /// included. Values never move, so a value far up holds its page.
    pub fn shrink_to_fit(&mut self) {
        self.wheel.shrink_to_fit();
    }

    /// The same as [`shrink_to_fit`](DelayQueue::shrink_to_fit): values never
    /// move, so there is nothing to compact, and keys stay valid.
    pub fn compact(&mut self) {
        self.shrink_to_fit();
    }

    /// Bytes allocated for the values and the wheel's lists, values included
    /// as far as they are stored inline.
    pub fn allocated_bytes(&self) -> usize {
        self.wheel.allocated_bytes()
    }

    fn expired(&self, entry: crate::Expired<T>) -> Expired<T> {
        Expired { data: entry.value, deadline: self.time.instant(entry.deadline), key: entry.key }
    }

    /// Arms the sleep for `tick` (at most [`SLEEP_MAX`] after `now`).
    fn arm(&mut self, tick: u64, now: Instant) {
        let wake_at = self.time.instant(tick).min(now + SLEEP_MAX);
        match &mut self.sleep {
            Some(sleep) => sleep.as_mut().reset(wake_at),
            None => self.sleep = Some(Box::pin(sleep_until(wake_at))),
        }
        self.armed = Some(tick);
    }

    /// A value due at the tick the sleep is armed for was reset later or
    /// removed: the sleep moves to the earliest deadline there is now, so a
    /// waiting task is not woken at the old one with nothing due. tokio's
    /// timer keeps the task's waker across the move.
    #[cold]
    fn rearm(&mut self) {
        match self.wheel.next_deadline() {
            Some(next) if self.armed != Some(next) => self.arm(next, Instant::now()),
            _ => {}
        }
    }

    /// Wakes a waiting task if `tick` comes before the deadline it sleeps until.
    #[inline]
    fn wake_if_sooner(&mut self, tick: u64) {
        if self.armed.is_none_or(|armed| tick < armed) {
            self.wake();
        }
    }

    #[inline]
    fn wake(&mut self) {
        if let Some(waker) = self.waker.take() {
            waker.wake();
        }
    }
}

/// A method that panics when given a stale key.
#[derive(Debug, Clone, Copy)]
enum Checked {
    ResetAt,
    Reset,
    Remove,
}

/// The panic of a method given a stale key, out of line and with one small
/// argument besides the key: the hot calls it guards stay small enough to
/// inline and keep no more registers in a caller's loop, and consecutive calls
/// then overlap their cache misses (measured: the random-reschedule row of
/// BENCHMARKS.md, issue 27, where passing the messages as two `&str` lost the
/// gain).
#[cold]
#[track_caller]
fn stale(key: &Key, method: Checked) -> ! {
    let (name, instead) = match method {
        Checked::ResetAt => ("reset_at", "try_reset_at returns false"),
        Checked::Reset => ("reset", "try_reset returns false"),
        Checked::Remove => ("remove", "try_remove returns None"),
    };
    panic!("DelayQueue::{name}: {key:?} is stale (its value came out or was removed); {instead} instead")
}

impl<T> futures_core::Stream for DelayQueue<T> {
    type Item = Expired<T>;

    /// [`poll_expired`](DelayQueue::poll_expired): `None` while the queue is
    /// empty, and values again once some are inserted.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().poll_expired(cx)
    }
}
