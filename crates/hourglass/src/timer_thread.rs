//! A timer thread: a dedicated thread that sleeps on a clock until the next
//! deadline of a timetable it does not own, can be woken early for an earlier
//! one, and stops when closed.
//!
//! The timetable (a [`Wheel`](crate::Wheel), a heap, a store's index) and the
//! lock around it belong to the owner; this module owns only the sleeping, the
//! waking and the stopping, which every such thread needs and gets subtly
//! wrong in the same places: a wake-up lost between a look and a park, a
//! producer waking the thread for every deadline, a thread left running when
//! its owner is dropped, a thread that joins itself.
//!
//! # Example
//! ```
//! use std::collections::BTreeSet;
//! use std::sync::{Arc, Mutex};
//! use hourglass::{ManualWallClock, Next, TimerHandle, TimerThread, WallClock};
//!
//! let clock = ManualWallClock::at_ms(1_000);
//! let deadlines = Arc::new(Mutex::new(BTreeSet::<u64>::new()));
//! let (fired, fires) = std::sync::mpsc::channel();
//! let handle = TimerHandle::new();
//! let timer = {
//!     let (clock, deadlines) = (clock.clone(), deadlines.clone());
//!     TimerThread::spawn("example-timer", &handle, clock.clone(), move |handle| {
//!         let mut deadlines = deadlines.lock().unwrap();
//!         while let Some(&first) = deadlines.first().filter(|&&at| at <= clock.now_us()) {
//!             deadlines.remove(&first);
//!             fired.send(first).unwrap();
//!         }
//!         let next = deadlines.first().copied();
//!         handle.will_sleep_until(next); // under the lock the look was made under
//!         Next::until(next)
//!     })
//!     .unwrap()
//! };
//! deadlines.lock().unwrap().insert(1_500_000); // Unix µs: a WallClock's unit
//! handle.wake_if_earlier(1_500_000);
//! clock.advance_ms(500);
//! assert_eq!(fires.recv().unwrap(), 1_500_000);
//! timer.stop().unwrap();
//! ```
//!
//! # Implementation
//!
//! The thread runs the owner's turn in a loop. A turn takes the owner's lock,
//! does what came due, computes the next deadline, and records it with
//! [`TimerHandle::will_sleep_until`] **before releasing that lock**; then the
//! thread parks until the clock reads the deadline. A producer inserts a
//! deadline under the same lock, releases it, and calls
//! [`TimerHandle::wake_if_earlier`]. The lock orders the two: either the insert
//! came first and the turn saw it, or the record came first and the producer
//! compares against it, waking the thread if its deadline is earlier.
//!
//! A wake-up is a flag, then an unpark. The flag is cleared when a turn
//! begins and looked at before every park, so a wake-up that arrives between
//! the look and the park is never lost, even when the unpark itself was taken
//! by a park inside the turn (a channel's wait uses the same token). And parks
//! return early for reasons of their own (a manual clock wakes every sleeper
//! when it moves; the OS may wake spuriously): the thread turns again only when
//! the flag is set, it was closed, or its deadline has come, otherwise it parks
//! again, so a turn's cost is paid once per deadline.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{self, JoinHandle, Thread};

use crate::wall_clock::WallClock;

/// The timer slack asked of every timer thread on Linux: how late past its
/// deadline the kernel may wake it, to batch wake-ups. The default is 50 µs,
/// which would add to every deadline's lateness.
pub const TIMER_SLACK_NS: u32 = 1_000;

/// What [`TimerHandle::will_sleep_until`] stores for "no deadline": every
/// deadline is earlier.
const NO_DEADLINE: u64 = u64::MAX;

/// A clock a [`TimerThread`] sleeps on, in ticks of its own unit: Unix
/// microseconds for every [`WallClock`], ticks of its wheel for the
/// [`Scheduler`](crate::Scheduler)'s monotonic clock.
///
/// Deadlines given to the thread ([`Next::Until`],
/// [`TimerHandle::will_sleep_until`], [`TimerHandle::wake_if_earlier`]) are in
/// the same unit. The methods are named apart from [`Clock`](crate::Clock)'s
/// and [`WallClock`]'s so that a clock that is all three (a
/// [`ManualClock`](crate::ManualClock)) calls unambiguously.
///
/// # Example
/// ```
/// use hourglass::{ManualWallClock, TimerClock};
///
/// let clock = ManualWallClock::at_ms(2);
/// assert_eq!(clock.now_ticks(), 2_000, "a wall clock counts in microseconds");
/// clock.park_until_tick(1_999); // past: returns at once
/// ```
pub trait TimerClock {
    /// The current time in ticks.
    fn now_ticks(&self) -> u64;

    /// Parks the calling thread until [`now_ticks`](TimerClock::now_ticks)
    /// reaches `deadline`, or until the thread is unparked, whichever comes
    /// first; at once for a deadline that has passed. May return early,
    /// spuriously: the timer thread checks again.
    fn park_until_tick(&self, deadline: u64);
}

impl<W: WallClock + ?Sized> TimerClock for W {
    #[inline]
    fn now_ticks(&self) -> u64 {
        self.now_us()
    }

    #[inline]
    fn park_until_tick(&self, deadline: u64) {
        self.park_until_us(Some(deadline));
    }
}

/// A shared clock, as owners keep theirs (`Arc<dyn WallClock>`).
impl<C: TimerClock + ?Sized> TimerClock for Arc<C> {
    #[inline]
    fn now_ticks(&self) -> u64 {
        (**self).now_ticks()
    }

    #[inline]
    fn park_until_tick(&self, deadline: u64) {
        (**self).park_until_tick(deadline);
    }
}

/// What a timer thread does after a turn: the turn's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Park until the clock reaches this deadline, or until woken.
    Until(u64),
    /// Park until woken ([`wake`](TimerHandle::wake),
    /// [`wake_if_earlier`](TimerHandle::wake_if_earlier) or
    /// [`close`](TimerHandle::close)): nothing is due, or the turn waits for
    /// something other than time.
    UntilWoken,
    /// Turn again at once.
    Again,
    /// End the thread.
    Stop,
}

impl Next {
    /// [`Until`](Next::Until) the deadline, or [`UntilWoken`](Next::UntilWoken)
    /// for none: what a timetable's `next_expiration()` maps to.
    #[inline]
    pub fn until(deadline: Option<u64>) -> Next {
        deadline.map_or(Next::UntilWoken, Next::Until)
    }
}

/// The shared side of a [`TimerThread`]: how producers wake it and how its
/// turn says what it sleeps until. Cheap to clone, `Send + Sync`; it does not
/// keep the thread running (its [`TimerThread`] does).
///
/// Made before the thread ([`TimerHandle::new`]) because the owner's shared
/// state holds it and the thread's turn holds that state. Wake-ups sent before
/// the thread starts are not needed: its first turn sees everything inserted
/// before it.
///
/// # Example
/// ```
/// use hourglass::TimerHandle;
///
/// let handle = TimerHandle::new();
/// // No thread yet: its first turn will look at everything, so nothing wakes.
/// assert!(!handle.wake_if_earlier(42));
/// handle.will_sleep_until(Some(100));
/// assert!(!handle.wake_if_earlier(100), "not earlier");
/// assert!(handle.wake_if_earlier(99));
/// ```
#[derive(Clone, Default)]
pub struct TimerHandle {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The deadline the thread sleeps until, as recorded by its last turn
    /// under the owner's lock ([`NO_DEADLINE`]: none). 0 until the first turn:
    /// a turn is coming, which will see everything, so nothing needs waking.
    /// Relaxed: the owner's lock orders the store before any producer's load
    /// that has to see it (see the module's Implementation).
    sleeps_until: AtomicU64,
    /// Set by a wake-up, cleared when a turn begins: tells a wake-up from a
    /// spurious return of a park.
    woken: AtomicBool,
    /// Told to stop, or stopped.
    closed: AtomicBool,
    /// Registered by the thread itself before its first turn.
    thread: OnceLock<Thread>,
    /// One thread per handle: a second would steal the first one's wake-ups.
    spawned: AtomicBool,
}

impl TimerHandle {
    /// A handle for a timer thread yet to be spawned with
    /// [`TimerThread::spawn`].
    pub fn new() -> TimerHandle {
        TimerHandle::default()
    }

    /// Records that the thread, at the end of this turn, sleeps until
    /// `deadline` (`None`: until woken); producers with an earlier deadline
    /// will wake it. Call it from the turn **while still holding the lock under
    /// which the deadline was computed**, the lock producers insert under:
    /// that is what makes [`wake_if_earlier`](TimerHandle::wake_if_earlier)
    /// race-free.
    ///
    /// `Some(0)` means no deadline can be earlier: for a turn that waits for
    /// something other than time, as the scheduler's driver waits for room in
    /// its pool (whoever makes that room calls [`wake`](TimerHandle::wake)).
    #[inline]
    pub fn will_sleep_until(&self, deadline: Option<u64>) {
        self.inner.sleeps_until.store(deadline.unwrap_or(NO_DEADLINE), Ordering::Relaxed);
    }

    /// Wakes the thread if `deadline` is earlier than the one it sleeps until;
    /// returns whether it did. Call it after inserting `deadline` under the
    /// owner's lock (under it or after releasing it; after is cheaper, as the
    /// unpark is then outside the lock).
    #[inline]
    pub fn wake_if_earlier(&self, deadline: u64) -> bool {
        let earlier = deadline < self.inner.sleeps_until.load(Ordering::Relaxed);
        if earlier {
            self.wake();
        }
        earlier
    }

    /// Wakes the thread for a turn now, whatever it sleeps until. A wake-up
    /// sent while a turn runs makes the thread turn again after it.
    pub fn wake(&self) {
        self.inner.woken.store(true, Ordering::SeqCst);
        self.unpark();
    }

    /// Tells the thread to stop: it stops before its next turn, or at once if
    /// it is parked; a turn under way finishes first. Idempotent; does not
    /// wait (see [`TimerThread::stop`] for that).
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.unpark();
    }

    /// Whether the thread was told to stop, or has stopped (its turn returned
    /// [`Next::Stop`] or panicked).
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    fn unpark(&self) {
        if let Some(thread) = self.inner.thread.get() {
            thread.unpark();
        }
    }

    /// Whether the thread should stop parking and look: woken or closed.
    #[inline]
    fn should_look(&self) -> bool {
        self.inner.woken.load(Ordering::SeqCst) || self.is_closed()
    }
}

impl std::fmt::Debug for TimerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sleeps_until = self.inner.sleeps_until.load(Ordering::Relaxed);
        f.debug_struct("TimerHandle")
            .field("sleeps_until", &(sleeps_until != NO_DEADLINE).then_some(sleeps_until))
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// The owner of a timer thread: dropping it closes the thread and waits for it
/// to end (except on the timer thread itself, which is only closed: a thread
/// cannot join itself).
///
/// The turn must not own its `TimerThread`, directly or through an `Arc`
/// cycle, or nothing ever drops it: let the owner and the turn share the
/// timetable (an `Arc` of it, or a `Weak` of the owner), never the other way
/// round. And do not drop or [`stop`](TimerThread::stop) it while holding a
/// lock the turn takes: the turn under way could not finish.
#[derive(Debug)]
pub struct TimerThread {
    handle: TimerHandle,
    thread: Option<JoinHandle<()>>,
}

impl TimerThread {
    /// Spawns a thread named `name` that runs `turn` until it returns
    /// [`Next::Stop`] or `handle` is closed, sleeping on `clock` between turns
    /// as each turn's [`Next`] says. On Linux its timer slack is
    /// [`TIMER_SLACK_NS`].
    ///
    /// A turn that returns [`Next::Until`] must have recorded that deadline
    /// (or a later one) with [`TimerHandle::will_sleep_until`] under the
    /// owner's lock; debug builds check it.
    ///
    /// # Errors
    /// The operating system's, if the thread cannot be spawned; an error of
    /// kind [`AlreadyExists`](io::ErrorKind::AlreadyExists) if `handle`
    /// already has a thread.
    pub fn spawn<C, F>(name: impl Into<String>, handle: &TimerHandle, clock: C, turn: F) -> io::Result<TimerThread>
    where
        C: TimerClock + Send + 'static,
        F: FnMut(&TimerHandle) -> Next + Send + 'static,
    {
        if handle.inner.spawned.swap(true, Ordering::SeqCst) {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, "this timer handle already has a thread"));
        }
        let thread_handle = handle.clone();
        let spawned = thread::Builder::new().name(name.into()).spawn(move || run(&thread_handle, &clock, turn));
        match spawned {
            Ok(thread) => Ok(TimerThread { handle: handle.clone(), thread: Some(thread) }),
            Err(error) => {
                handle.inner.spawned.store(false, Ordering::SeqCst);
                Err(error)
            }
        }
    }

    /// The thread's handle.
    pub fn handle(&self) -> &TimerHandle {
        &self.handle
    }

    /// Waits for the thread to end by itself (a turn returns [`Next::Stop`]),
    /// without closing it; `Err` with the panic if a turn panicked. On the
    /// timer thread itself, returns at once.
    ///
    /// # Errors
    /// The panic of a turn, as [`JoinHandle::join`] gives it.
    pub fn join(mut self) -> thread::Result<()> {
        self.join_unless_self()
    }

    /// Closes the thread and waits for it to end: [`close`](TimerHandle::close)
    /// and [`join`](TimerThread::join).
    ///
    /// # Errors
    /// As [`join`](TimerThread::join).
    pub fn stop(self) -> thread::Result<()> {
        self.handle.close();
        self.join()
    }

    fn join_unless_self(&mut self) -> thread::Result<()> {
        match self.thread.take() {
            Some(thread) if thread.thread().id() != thread::current().id() => thread.join(),
            _ => Ok(()),
        }
    }
}

impl Drop for TimerThread {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.handle.close();
            // A turn's panic was the turn's to report; the thread is gone either way.
            let _ = self.join_unless_self();
        }
    }
}

/// The timer thread's body.
fn run<C: TimerClock>(handle: &TimerHandle, clock: &C, mut turn: impl FnMut(&TimerHandle) -> Next) {
    /// Marks the handle closed when the thread ends, by a return or a panic,
    /// so that the owner can tell and wake-ups stop.
    struct ClosedOnExit<'a>(&'a TimerHandle);
    impl Drop for ClosedOnExit<'_> {
        fn drop(&mut self) {
            self.0.inner.closed.store(true, Ordering::SeqCst);
        }
    }
    let _closed_on_exit = ClosedOnExit(handle);
    reduce_timer_slack();
    // Registered before the first turn: a producer that saw that turn's record
    // finds the thread to unpark.
    let _ = handle.inner.thread.set(thread::current());
    while !handle.is_closed() {
        // Before the turn looks: a wake-up sent from here on makes it look again.
        handle.inner.woken.store(false, Ordering::SeqCst);
        match turn(handle) {
            Next::Stop => break,
            Next::Again => {}
            Next::UntilWoken => {
                while !handle.should_look() {
                    thread::park(); // returns early at times: hence the loop
                }
            }
            Next::Until(deadline) => {
                let recorded = handle.inner.sleeps_until.load(Ordering::Relaxed);
                debug_assert!(
                    recorded >= deadline,
                    "a turn sleeps until {deadline} but recorded {recorded}: producers with a deadline in between \
                     would not wake it (call will_sleep_until under the lock)"
                );
                // Looked at before parking, not only after: a wake-up's unpark
                // may have been taken by a park inside the turn (a channel's
                // wait), and only the flag is left of it.
                while !handle.should_look() {
                    clock.park_until_tick(deadline);
                    if clock.now_ticks() >= deadline {
                        break;
                    }
                }
            }
        }
    }
}

/// Asks Linux to wake this thread within [`TIMER_SLACK_NS`] of its deadlines.
fn reduce_timer_slack() {
    #[cfg(target_os = "linux")]
    {
        // A u32 fits the kernel's unsigned long on every target.
        if let Err(error) = nix::sys::prctl::set_timerslack(std::ffi::c_ulong::from(TIMER_SLACK_NS)) {
            eprintln!("hourglass: could not reduce a timer thread's timer slack: {error}");
        }
    }
}
