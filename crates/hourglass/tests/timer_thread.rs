//! The timer thread on a manual wall clock: it turns only when its deadline
//! comes, when woken, or when closed. Nothing here sleeps, and every wait has
//! a bound: a test that would hang fails with a message instead.

use std::io;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use hourglass::{ManualWallClock, Next, TimerHandle, TimerThread, WallClock};
use parking_lot::Mutex;

/// How long a test waits for something that should take microseconds
/// before it fails: generous, so a loaded machine never fails it, yet a
/// hang is a failure with a message, never a stuck run.
const BOUND: Duration = Duration::from_secs(30);
const START_US: u64 = 1_000_000;

fn recv<T>(from: &Receiver<T>, what: &str) -> T {
    from.recv_timeout(BOUND).unwrap_or_else(|error| panic!("{what}: nothing within {BOUND:?} ({error})"))
}

/// Joins on a helper thread, so that a join that hangs fails the test.
fn stopped_within_bound(timer: TimerThread, close: bool) -> thread::Result<()> {
    let (done, joined) = mpsc::channel();
    thread::spawn(move || {
        let _ = done.send(if close { timer.stop() } else { timer.join() });
    });
    recv(&joined, "the timer thread did not end")
}

/// A timer on a manual wall clock whose turn reports the clock reading at
/// each look, then sleeps until the deadline in `next` (set under the lock
/// the turn looks under, as producers do).
struct Fixture {
    clock: ManualWallClock,
    next: Arc<Mutex<Option<u64>>>,
    handle: TimerHandle,
    looks: Receiver<u64>,
    timer: TimerThread,
}

fn fixture(next: Option<u64>) -> Fixture {
    let clock = ManualWallClock::at_ms(START_US / 1_000);
    let next = Arc::new(Mutex::new(next));
    let handle = TimerHandle::new();
    let (look, looks) = mpsc::channel();
    let turn = {
        let (clock, next) = (clock.clone(), next.clone());
        move |handle: &TimerHandle| {
            let next = next.lock();
            handle.will_sleep_until(*next);
            let _ = look.send(clock.now_us());
            Next::until(*next)
        }
    };
    // Shared as owners keep their clocks (the engine's is an `Arc<dyn WallClock>`).
    let shared: Arc<dyn WallClock> = Arc::new(clock.clone());
    let timer = TimerThread::spawn("test-timer", &handle, shared, turn).unwrap();
    Fixture { clock, next, handle, looks, timer }
}

#[test]
fn a_turn_s_deadline_is_slept_to_and_no_further() {
    let deadline = START_US + 5_000;
    let f = fixture(Some(deadline));
    assert_eq!(recv(&f.looks, "the first turn"), START_US);
    // Every advance wakes the parked thread; short of the deadline it
    // parks again without a turn.
    f.clock.advance_ms(1);
    f.clock.set_us(deadline - 1);
    f.clock.set_us(deadline);
    assert_eq!(recv(&f.looks, "a turn at the deadline"), deadline, "no turn before the deadline");
    *f.next.lock() = None;
    f.handle.wake();
    assert_eq!(recv(&f.looks, "the turn after the wake"), deadline);
    stopped_within_bound(f.timer, true).unwrap();
}

#[test]
fn wake_if_earlier_wakes_for_an_earlier_deadline_and_not_a_later_one() {
    let f = fixture(Some(START_US + 10_000));
    recv(&f.looks, "the first turn");
    assert!(!f.handle.wake_if_earlier(START_US + 20_000), "later");
    assert!(!f.handle.wake_if_earlier(START_US + 10_000), "the same");
    *f.next.lock() = Some(START_US + 5_000);
    assert!(f.handle.wake_if_earlier(START_US + 5_000), "earlier");
    assert_eq!(recv(&f.looks, "the turn the earlier deadline woke"), START_US);
    // The two that were not earlier caused no turn: only the one that was.
    assert_eq!(f.looks.try_recv(), Err(mpsc::TryRecvError::Empty));
    f.clock.set_us(START_US + 5_000);
    assert_eq!(recv(&f.looks, "the turn at the earlier deadline"), START_US + 5_000);
    stopped_within_bound(f.timer, true).unwrap();
}

#[test]
fn a_thread_with_no_deadline_wakes_for_any_and_the_clock_alone_does_not_turn_it() {
    let f = fixture(None);
    recv(&f.looks, "the first turn");
    f.clock.advance_ms(1_000_000);
    assert!(f.handle.wake_if_earlier(u64::MAX - 1));
    assert_eq!(recv(&f.looks, "the woken turn"), START_US + 1_000_000_000, "one turn, for the wake-up");
    assert_eq!(f.looks.try_recv(), Err(mpsc::TryRecvError::Empty));
    stopped_within_bound(f.timer, true).unwrap();
}

#[test]
fn a_wake_up_between_the_look_and_the_park_is_not_lost() {
    let far = START_US + 3_600_000_000;
    let clock = ManualWallClock::at_ms(START_US / 1_000);
    let next = Arc::new(Mutex::new(far));
    let handle = TimerHandle::new();
    let (look, looks) = mpsc::channel();
    let (go, gate) = mpsc::channel::<()>();
    let turn = {
        let next = next.clone();
        move |handle: &TimerHandle| {
            let deadline = {
                let next = next.lock();
                handle.will_sleep_until(Some(*next));
                *next
            };
            let _ = look.send(deadline);
            // Between the look and the park: the test inserts here.
            let _ = gate.recv_timeout(BOUND);
            Next::Until(deadline)
        }
    };
    let timer = TimerThread::spawn("test-timer", &handle, clock, turn).unwrap();
    assert_eq!(recv(&looks, "the first look"), far);
    *next.lock() = START_US;
    assert!(handle.wake_if_earlier(START_US), "earlier than what the look recorded");
    go.send(()).unwrap();
    assert_eq!(recv(&looks, "a second look: the wake-up was lost"), START_US);
    *next.lock() = far;
    drop(go); // the gate opens for good
    stopped_within_bound(timer, true).unwrap();
}

#[test]
fn close_stops_a_parked_thread_and_is_idempotent() {
    for next in [None, Some(START_US + 1_000)] {
        let f = fixture(next);
        recv(&f.looks, "the first turn");
        f.handle.close();
        f.handle.close();
        stopped_within_bound(f.timer, false).unwrap();
        assert!(f.handle.is_closed());
        assert_eq!(f.looks.recv_timeout(BOUND), Err(RecvTimeoutError::Disconnected), "no turn after close");
    }
}

#[test]
fn dropping_the_owner_closes_and_joins_the_thread() {
    let f = fixture(None);
    recv(&f.looks, "the first turn");
    let (dropped, done) = mpsc::channel();
    thread::spawn(move || {
        drop(f.timer);
        let _ = dropped.send(());
    });
    recv(&done, "the drop did not return");
    assert!(f.handle.is_closed());
    // The turn, and the sender it held, went with the thread.
    assert_eq!(f.looks.try_recv(), Err(mpsc::TryRecvError::Disconnected));
}

#[test]
fn a_turn_that_drops_its_owner_ends_the_thread_without_joining_itself() {
    let clock = ManualWallClock::at_ms(1);
    let handle = TimerHandle::new();
    let owner: Arc<Mutex<Option<TimerThread>>> = Arc::default();
    let (ended, end) = mpsc::channel::<()>();
    let turn = {
        let owner = owner.clone();
        move |_: &TimerHandle| {
            let _ended = &ended; // dropped with the turn, when the thread ends
            match owner.lock().take() {
                Some(timer) => drop(timer), // on the timer thread: closes, cannot join
                None => return Next::Again, // not stored yet
            }
            Next::Again
        }
    };
    let timer = TimerThread::spawn("test-timer", &handle, clock, turn).unwrap();
    *owner.lock() = Some(timer);
    assert_eq!(end.recv_timeout(BOUND), Err(RecvTimeoutError::Disconnected), "the thread ended");
    assert!(handle.is_closed());
}

#[test]
fn a_turn_that_returns_stop_ends_the_thread_and_join_waits_for_it() {
    let handle = TimerHandle::new();
    let mut turns = 0;
    let timer = TimerThread::spawn("test-timer", &handle, ManualWallClock::at_ms(1), move |_: &TimerHandle| {
        turns += 1;
        if turns < 3 {
            Next::Again
        } else {
            Next::Stop
        }
    })
    .unwrap();
    stopped_within_bound(timer, false).unwrap();
    assert!(handle.is_closed(), "a stopped thread reads as closed");
}

#[test]
fn a_panicking_turn_is_reported_by_the_join() {
    let handle = TimerHandle::new();
    let turn = |_: &TimerHandle| -> Next { panic!("a turn that fails") };
    let timer = TimerThread::spawn("test-timer", &handle, ManualWallClock::at_ms(1), turn).unwrap();
    assert!(stopped_within_bound(timer, false).is_err());
    assert!(handle.is_closed());
}

#[test]
fn a_handle_takes_one_thread() {
    let handle = TimerHandle::new();
    let clock = ManualWallClock::at_ms(1);
    let first = TimerThread::spawn("test-timer", &handle, clock.clone(), |_: &TimerHandle| Next::UntilWoken);
    let second = TimerThread::spawn("test-timer", &handle, clock, |_: &TimerHandle| Next::UntilWoken);
    assert_eq!(second.unwrap_err().kind(), io::ErrorKind::AlreadyExists);
    stopped_within_bound(first.unwrap(), true).unwrap();
}

#[test]
fn next_until_maps_no_deadline_to_until_woken() {
    assert_eq!(Next::until(Some(7)), Next::Until(7));
    assert_eq!(Next::until(None), Next::UntilWoken);
}
