//! `hourglass::DelayQueue` against the behaviour of tokio-util's `DelayQueue`:
//! the cases of tokio-util's own test suite (tests/time_delay_queue.rs, MIT),
//! written again here, then one test for each tokio issue the drop-in exists
//! to fix. Time is tokio's paused clock: nothing here sleeps for real.

use std::time::Duration;

use futures_util::StreamExt;
use hourglass::delay_queue::{DelayQueue, Key};
use tokio::time::{self, sleep, sleep_until, Instant};
use tokio_test::{assert_pending, assert_ready, task};

macro_rules! poll {
    ($queue:ident) => {
        $queue.enter(|cx, mut queue| queue.poll_expired(cx))
    };
}

macro_rules! assert_ready_some {
    ($e:expr) => {{
        match assert_ready!($e) {
            Some(v) => v,
            None => panic!("expected a value, the queue said it is empty"),
        }
    }};
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

// ---- tokio-util's cases -------------------------------------------------

#[tokio::test(start_paused = true)]
async fn single_immediate_delay() {
    let mut queue = task::spawn(DelayQueue::new());
    queue.insert_at("foo", Instant::now());
    sleep(ms(1)).await;
    assert_eq!(*assert_ready_some!(poll!(queue)).get_ref(), "foo");
    assert!(assert_ready!(poll!(queue)).is_none());
}

#[tokio::test(start_paused = true)]
async fn multi_immediate_delays_come_out_in_insertion_order() {
    let mut queue = task::spawn(DelayQueue::new());
    for value in ["1", "2", "3"] {
        queue.insert_at(value, Instant::now());
    }
    sleep(ms(1)).await;
    let got: Vec<_> = (0..3).map(|_| assert_ready_some!(poll!(queue)).into_inner()).collect();
    assert_eq!(got, ["1", "2", "3"]);
    assert!(assert_ready!(poll!(queue)).is_none());
}

#[tokio::test(start_paused = true)]
async fn single_short_delay() {
    let mut queue = task::spawn(DelayQueue::new());
    queue.insert_at("foo", Instant::now() + ms(5));
    assert_pending!(poll!(queue));
    sleep(ms(1)).await;
    assert!(!queue.is_woken());
    sleep(ms(5)).await;
    assert!(queue.is_woken());
    assert_eq!(*assert_ready_some!(poll!(queue)).get_ref(), "foo");
    assert!(assert_ready!(poll!(queue)).is_none());
}

/// tokio-util's version allows wake-ups at cascade points (192 and 960 ms);
/// this queue sleeps until the exact next deadline, so it is woken only when
/// a value is due.
#[tokio::test(start_paused = true)]
async fn multi_delay_at_start_wakes_only_when_something_is_due() {
    let long = 262_144 + 9 * 4096;
    let delays = [1000, 2, 234, long, 60, 10];
    let mut queue = task::spawn(DelayQueue::new());
    for &delay in &delays {
        queue.insert_at(delay, Instant::now() + ms(delay));
    }
    assert_pending!(poll!(queue));
    let start = Instant::now();
    let mut woken_at = Vec::new();
    for elapsed in 1..1200 {
        sleep_until(start + ms(elapsed)).await;
        if queue.is_woken() {
            woken_at.push(elapsed);
            assert_eq!(assert_ready_some!(poll!(queue)).into_inner(), elapsed);
            assert_pending!(poll!(queue));
        }
    }
    assert_eq!(woken_at, [2, 10, 60, 234, 1000]);
}

#[tokio::test(start_paused = true)]
async fn insert_in_past_fires_immediately() {
    let mut queue = task::spawn(DelayQueue::new());
    let now = Instant::now();
    sleep(ms(10)).await;
    queue.insert_at("foo", now);
    assert_ready_some!(poll!(queue));
}

#[tokio::test(start_paused = true)]
async fn remove_entry() {
    let mut queue = task::spawn(DelayQueue::new());
    let key = queue.insert_at("foo", Instant::now() + ms(5));
    assert_pending!(poll!(queue));
    assert_eq!(queue.remove(&key).into_inner(), "foo");
    sleep(ms(10)).await;
    assert!(assert_ready!(poll!(queue)).is_none());
}

#[tokio::test(start_paused = true)]
async fn reset_entry() {
    let mut queue = task::spawn(DelayQueue::new());
    let now = Instant::now();
    let key = queue.insert_at("foo", now + ms(5));
    assert_pending!(poll!(queue));
    sleep(ms(1)).await;
    queue.reset_at(&key, now + ms(10));
    assert_pending!(poll!(queue));
    sleep(ms(7)).await;
    assert_pending!(poll!(queue));
    sleep(ms(3)).await;
    assert!(queue.is_woken());
    assert_eq!(*assert_ready_some!(poll!(queue)).get_ref(), "foo");
    assert!(assert_ready!(poll!(queue)).is_none());
}

/// tokio#849: resets while the consumer sleeps, once (from 200 ms to 10) or
/// twice (to 50 ms, then 40 after 20 ms more).
#[tokio::test(start_paused = true)]
async fn resets_while_waiting_wake_the_consumer_in_time() {
    for resets in [&[10][..], &[50, 40]] {
        let mut queue = task::spawn(DelayQueue::new());
        let now = Instant::now();
        sleep(ms(1)).await;
        let key = queue.insert_at("foo", now + ms(200));
        assert_pending!(poll!(queue));
        sleep(ms(3)).await;
        for &to in resets {
            queue.reset_at(&key, now + ms(to));
            sleep(ms(20)).await;
        }
        assert!(queue.is_woken(), "after resets to {resets:?}");
        assert_ready_some!(poll!(queue));
    }
}

#[tokio::test(start_paused = true)]
async fn repeatedly_reset_entry_inserted_as_expired() {
    sleep(ms(1000)).await;
    let mut queue = task::spawn(DelayQueue::new());
    let now = Instant::now();
    let key = queue.insert_at("foo", now - ms(100));
    queue.reset_at(&key, now + ms(100));
    queue.reset_at(&key, now + ms(50));
    assert_pending!(poll!(queue));
    sleep_until(now + ms(60)).await;
    assert!(queue.is_woken());
    assert_eq!(assert_ready_some!(poll!(queue)).into_inner(), "foo");
    assert!(assert_ready!(poll!(queue)).is_none());
}

#[tokio::test(start_paused = true)]
async fn remove_expired_item() {
    let mut queue = DelayQueue::new();
    let now = Instant::now();
    sleep(ms(10)).await;
    let key = queue.insert_at("foo", now);
    assert_eq!(queue.remove(&key).into_inner(), "foo");
}

#[tokio::test(start_paused = true)]
async fn remove_at_timer_wheel_threshold() {
    let mut queue = task::spawn(DelayQueue::new());
    let now = Instant::now();
    let foo = queue.insert_at("foo", now + ms(64));
    let bar = queue.insert_at("bar", now + ms(64));
    sleep(ms(80)).await;
    let first = assert_ready_some!(poll!(queue));
    assert_eq!((first.key(), first.into_inner()), (foo, "foo"), "ties come out in insertion order");
    assert_eq!(queue.remove(&bar).into_inner(), "bar");
}

#[tokio::test(start_paused = true)]
async fn expires_before_last_insert() {
    let mut queue = task::spawn(DelayQueue::new());
    let now = Instant::now();
    queue.insert_at("foo", now + ms(10_000));
    assert_pending!(poll!(queue));
    queue.insert_at("bar", now + ms(600));
    assert_pending!(poll!(queue));
    sleep(ms(600)).await;
    assert!(queue.is_woken());
    assert_eq!(assert_ready_some!(poll!(queue)).into_inner(), "bar");
}

#[tokio::test(start_paused = true)]
async fn multi_reset() {
    let mut queue = task::spawn(DelayQueue::new());
    let now = Instant::now();
    let one = queue.insert_at("one", now + ms(200));
    let two = queue.insert_at("two", now + ms(250));
    assert_pending!(poll!(queue));
    queue.reset_at(&one, now + ms(300));
    queue.reset_at(&two, now + ms(350));
    queue.reset_at(&one, now + ms(400));
    sleep(ms(310)).await;
    assert_pending!(poll!(queue));
    sleep(ms(50)).await;
    assert_eq!(*assert_ready_some!(poll!(queue)).get_ref(), "two");
    assert_pending!(poll!(queue));
    sleep(ms(50)).await;
    assert_eq!(*assert_ready_some!(poll!(queue)).get_ref(), "one");
    assert!(assert_ready!(poll!(queue)).is_none());
}

#[tokio::test(start_paused = true)]
async fn reset_to_expire_earlier_comes_out_first() {
    for which in 0..2 {
        let mut queue = task::spawn(DelayQueue::new());
        let now = Instant::now();
        let keys = [queue.insert_at("one", now + ms(200)), queue.insert_at("two", now + ms(250))];
        assert_pending!(poll!(queue));
        queue.reset_at(&keys[which], now + ms(100));
        sleep(ms(100)).await;
        assert!(queue.is_woken());
        assert_eq!(assert_ready_some!(poll!(queue)).key(), keys[which]);
    }
}

#[tokio::test(start_paused = true)]
async fn reset_first_expiring_item_to_expire_later() {
    let mut queue = task::spawn(DelayQueue::new());
    let now = Instant::now();
    let one = queue.insert_at("one", now + ms(200));
    queue.insert_at("two", now + ms(250));
    assert_pending!(poll!(queue));
    queue.reset_at(&one, now + ms(300));
    sleep(ms(250)).await;
    assert!(queue.is_woken());
    assert_eq!(assert_ready_some!(poll!(queue)).into_inner(), "two");
}

#[tokio::test(start_paused = true)]
async fn insert_before_first_after_poll() {
    let mut queue = task::spawn(DelayQueue::new());
    let now = Instant::now();
    queue.insert_at("one", now + ms(200));
    assert_pending!(poll!(queue));
    queue.insert_at("two", now + ms(100));
    sleep(ms(99)).await;
    assert_pending!(poll!(queue));
    sleep(ms(1)).await;
    assert!(queue.is_woken());
    assert_eq!(assert_ready_some!(poll!(queue)).into_inner(), "two");
}

#[tokio::test(start_paused = true)]
async fn insert_after_ready_poll() {
    let mut queue = task::spawn(DelayQueue::new());
    let now = Instant::now();
    for value in ["1", "2", "3"] {
        queue.insert_at(value, now + ms(100));
    }
    assert_pending!(poll!(queue));
    sleep(ms(100)).await;
    assert!(queue.is_woken());
    let mut got = vec![];
    while got.len() < 3 {
        got.push(assert_ready_some!(poll!(queue)).into_inner());
        queue.insert_at("later", now + ms(500));
    }
    assert_eq!(got, ["1", "2", "3"]);
}

/// tokio-util must wake at once here because its wheel cannot tell when in a
/// 64 ms slot the value is; this queue moves its sleep to the new deadline, so
/// the consumer is woken once, at 120 ms, when the value is due: not at the
/// old deadline (100 ms) with nothing due, which tokio-util does not do either.
#[tokio::test(start_paused = true)]
async fn reset_later_after_slot_starts() {
    let mut queue = task::spawn(DelayQueue::new());
    let now = Instant::now();
    let foo = queue.insert_at("foo", now + ms(100));
    assert_pending!(poll!(queue));
    sleep_until(now + ms(80)).await;
    assert!(!queue.is_woken());
    queue.reset_at(&foo, now + ms(120));
    assert!(!queue.is_woken(), "a later deadline needs no wake-up");
    sleep_until(now + ms(119)).await;
    assert!(!queue.is_woken(), "woken at the old deadline with nothing due");
    sleep(ms(1)).await;
    assert!(queue.is_woken());
    assert_eq!(assert_ready_some!(poll!(queue)).into_inner(), "foo");
}

#[tokio::test(start_paused = true)]
async fn reset_earlier_after_slot_starts() {
    let mut queue = task::spawn(DelayQueue::new());
    let now = Instant::now();
    let foo = queue.insert_at("foo", now + ms(200));
    assert_pending!(poll!(queue));
    sleep_until(now + ms(80)).await;
    assert!(!queue.is_woken());
    queue.reset_at(&foo, now + ms(120));
    assert!(queue.is_woken(), "an earlier deadline wakes the consumer to sleep less");
    assert_pending!(poll!(queue));
    sleep_until(now + ms(119)).await;
    assert!(!queue.is_woken());
    sleep(ms(1)).await;
    assert!(queue.is_woken());
    assert_eq!(assert_ready_some!(poll!(queue)).into_inner(), "foo");
}

/// tokio#2473.
#[tokio::test(start_paused = true)]
async fn reset_inserted_expired() {
    sleep(ms(1000)).await;
    let mut queue = task::spawn(DelayQueue::new());
    let now = Instant::now();
    let key = queue.insert_at("foo", now - ms(100));
    queue.reset_at(&key, now + ms(100));
    assert_eq!(queue.len(), 1);
    sleep(ms(200)).await;
    assert_eq!(assert_ready_some!(poll!(queue)).into_inner(), "foo");
    assert_eq!(queue.len(), 0);
}

#[tokio::test(start_paused = true)]
async fn insert_in_past_after_poll_fires_immediately() {
    let mut queue = task::spawn(DelayQueue::new());
    let now = Instant::now();
    queue.insert_at("foo", now + ms(200));
    assert_pending!(poll!(queue));
    sleep(ms(80)).await;
    assert!(!queue.is_woken());
    queue.insert_at("bar", now + ms(40));
    assert!(queue.is_woken());
    assert_eq!(assert_ready_some!(poll!(queue)).into_inner(), "bar");
}

#[tokio::test(start_paused = true)]
async fn poll_expired_when_empty_is_none() {
    let mut queue = task::spawn(DelayQueue::new());
    let key = queue.insert(0, Duration::from_secs(10));
    assert_pending!(poll!(queue));
    queue.remove(&key);
    assert!(assert_ready!(poll!(queue)).is_none());
}

#[tokio::test(start_paused = true)]
async fn compact_of_an_empty_queue_frees_everything() {
    let mut queue = task::spawn(DelayQueue::new());
    let now = Instant::now();
    queue.insert_at("foo1", now + ms(10));
    queue.insert_at("foo2", now + ms(10));
    sleep(ms(10)).await;
    assert_ready_some!(poll!(queue));
    assert_ready_some!(poll!(queue));
    queue.compact();
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.capacity(), 0);
}

#[tokio::test(start_paused = true)]
async fn compact_keeps_keys_and_deadlines() {
    let mut queue = task::spawn(DelayQueue::new());
    let now = Instant::now();
    let keys: Vec<Key> = (0..6u64).map(|i| queue.insert_at(i, now + ms(10 * (i + 1)))).collect();
    for key in &keys[..3] {
        queue.remove(key);
    }
    queue.compact();
    for (i, key) in keys.iter().enumerate().skip(3) {
        assert_eq!(queue.deadline(key), now + ms(10 * (i as u64 + 1)));
    }
    queue.reset_at(&keys[5], now + ms(5));
    sleep(ms(60)).await;
    let got: Vec<u64> = (0..3).map(|_| assert_ready_some!(poll!(queue)).into_inner()).collect();
    assert_eq!(got, [5, 3, 4]);
    assert!(assert_ready!(poll!(queue)).is_none());
}

/// tokio-util panicked once the queue had lived 2^36 ms.
#[tokio::test(start_paused = true)]
async fn an_old_queue_takes_new_values() {
    let mut queue = DelayQueue::new();
    for _ in 0..2 {
        time::advance(ms(1 << 35)).await;
        queue.insert(0, ms(0));
        queue.next().await;
    }
    queue.insert(1, ms(1));
    time::advance(ms(1)).await;
    assert_eq!(queue.next().await.unwrap().into_inner(), 1);
}

#[tokio::test(start_paused = true)]
async fn remove_after_compact_refuses_the_stale_key() {
    let now = Instant::now();
    let mut queue = DelayQueue::new();
    let foo = queue.insert_at("foo", now + ms(10));
    queue.insert_at("bar", now + ms(20));
    queue.remove(&foo);
    queue.compact();
    assert!(queue.try_remove(&foo).is_none());
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| queue.remove(&foo)));
    assert!(panic.is_err(), "remove keeps tokio-util's panic on a stale key");
}

#[tokio::test(start_paused = true)]
async fn peek_names_what_comes_out_next() {
    let mut queue = task::spawn(DelayQueue::new());
    let now = Instant::now();
    let foo = queue.insert_at("foo", now + ms(5));
    let bar = queue.insert_at("bar", now);
    let baz = queue.insert_at("baz", now + ms(10));
    assert_eq!(queue.peek(), Some(bar));
    sleep(ms(6)).await;
    assert_eq!(queue.peek(), Some(bar));
    assert_eq!(assert_ready_some!(poll!(queue)).key(), bar);
    assert_eq!(queue.peek(), Some(foo));
    assert_eq!(assert_ready_some!(poll!(queue)).key(), foo);
    assert_eq!(queue.peek(), Some(baz));
    assert_pending!(poll!(queue));
    sleep(ms(5)).await;
    assert_eq!(queue.peek(), Some(baz));
    assert_eq!(assert_ready_some!(poll!(queue)).key(), baz);
    assert!(queue.peek().is_none());
}

// The tokio issues the queue exists to fix, and ours: `issues.rs`.
mod issues;
