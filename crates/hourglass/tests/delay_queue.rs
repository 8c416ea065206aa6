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
/// 64 ms slot the value is; this queue sleeps until the old deadline, finds
/// nothing due, and sleeps again until the new one: never early, never late.
#[tokio::test(start_paused = true)]
async fn reset_later_after_slot_starts() {
    let mut queue = task::spawn(DelayQueue::new());
    let now = Instant::now();
    let foo = queue.insert_at("foo", now + ms(100));
    assert_pending!(poll!(queue));
    sleep_until(now + ms(80)).await;
    assert!(!queue.is_woken());
    queue.reset_at(&foo, now + ms(120));
    sleep_until(now + ms(119)).await;
    assert_pending!(poll!(queue));
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

// ---- one test per tokio issue -------------------------------------------

/// tokio#3558: a key is a bare slab index in tokio-util, so once its value is
/// gone the key names whatever reuses the slot.
#[tokio::test(start_paused = true)]
async fn a_stale_key_never_names_a_newer_value() {
    let mut queue = DelayQueue::new();
    let old = queue.insert("old", ms(100));
    queue.remove(&old);
    let new = queue.insert("new", ms(100));
    assert_ne!(old, new);
    assert!(!queue.contains(&old));
    assert!(queue.try_remove(&old).is_none());
    assert!(!queue.try_reset(&old, ms(1)));
    assert!(queue.get(&old).is_none());
    assert_eq!(queue.get(&new), Some(&"new"));
    assert_eq!(queue.deadline(&new), queue.deadline(&new));
    // The same after the value came out by expiring.
    time::advance(ms(100)).await;
    assert_eq!(queue.next().await.unwrap().key(), new);
    let newer = queue.insert("newer", ms(1));
    assert!(queue.try_remove(&new).is_none());
    assert!(queue.contains(&newer));
    let stale_reset = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| queue.reset(&new, ms(5))));
    assert!(stale_reset.is_err(), "reset keeps tokio-util's signature, and refuses loudly");
    assert_eq!(queue.len(), 1);
}

/// kube-rs#1772 and others: tokio-util panics with "invalid deadline" about
/// 2.2 years ahead.
#[tokio::test(start_paused = true)]
async fn deadlines_of_any_length_are_accepted() {
    let mut queue = task::spawn(DelayQueue::new());
    let now = Instant::now();
    let three_years = queue.insert("three years", Duration::from_secs(3 * 365 * 86_400));
    let forever = queue.insert("never", Duration::MAX);
    let far = queue.insert_at("far", now + Duration::from_secs(1 << 40));
    queue.insert("soon", ms(1));
    assert_eq!(queue.deadline(&three_years), now + Duration::from_secs(3 * 365 * 86_400));
    assert!(queue.deadline(&forever) > queue.deadline(&far));
    sleep(ms(1)).await;
    assert_eq!(assert_ready_some!(poll!(queue)).into_inner(), "soon");
    assert_pending!(poll!(queue));
    // Three years pass in steps of a few months: the consumer sleeps in
    // bounded steps, and the value comes out once due, not before.
    let month = Duration::from_secs(30 * 86_400);
    while Instant::now() + month < now + Duration::from_secs(3 * 365 * 86_400) {
        time::advance(month).await;
        assert_pending!(poll!(queue));
    }
    sleep_until(now + Duration::from_secs(3 * 365 * 86_400)).await;
    assert_eq!(assert_ready_some!(poll!(queue)).key(), three_years);
    assert_pending!(poll!(queue));
    assert_eq!(queue.len(), 2);
}

/// tokio#6751: removing the last value left the consumer asleep.
#[tokio::test(start_paused = true)]
async fn removing_the_last_value_wakes_the_consumer() {
    let mut queue = task::spawn(DelayQueue::new());
    let key = queue.insert("foo", ms(1000));
    assert_pending!(poll!(queue));
    queue.remove(&key);
    assert!(queue.is_woken());
    assert!(assert_ready!(poll!(queue)).is_none());
}

/// tokio#8274: a reset to the past did not wake the consumer.
#[tokio::test(start_paused = true)]
async fn a_reset_to_the_past_wakes_the_consumer() {
    let mut queue = task::spawn(DelayQueue::new());
    sleep(ms(500)).await;
    let key = queue.insert("foo", ms(10_000));
    assert_pending!(poll!(queue));
    assert!(!queue.is_woken());
    queue.reset_at(&key, Instant::now() - ms(100));
    assert!(queue.is_woken());
    assert_eq!(assert_ready_some!(poll!(queue)).into_inner(), "foo");
    assert!(assert_ready!(poll!(queue)).is_none());
}

/// tokio#8320: `clear` left the consumer asleep.
#[tokio::test(start_paused = true)]
async fn clear_wakes_the_consumer() {
    let mut queue = task::spawn(DelayQueue::new());
    queue.insert("foo", ms(1000));
    assert_pending!(poll!(queue));
    assert!(!queue.is_woken());
    queue.clear();
    assert!(queue.is_woken());
    assert!(assert_ready!(poll!(queue)).is_none());
}

/// tokio#8402: `peek` named the head of a wheel slot, not its earliest value.
#[tokio::test(start_paused = true)]
async fn peek_is_right_when_values_share_a_slot() {
    let mut queue = task::spawn(DelayQueue::new());
    let now = Instant::now();
    // 64..=127 ms share one level-1 slot; the later deadline goes in last.
    let early = queue.insert_at("early", now + ms(100));
    let late = queue.insert_at("late", now + ms(120));
    assert_eq!(queue.peek(), Some(early));
    // And the other way round, and after a reset within the slot.
    let earlier = queue.insert_at("earlier", now + ms(90));
    assert_eq!(queue.peek(), Some(earlier));
    queue.reset_at(&late, now + ms(70));
    assert_eq!(queue.peek(), Some(late));
    sleep(ms(125)).await;
    for expected in [late, earlier, early] {
        assert_eq!(queue.peek(), Some(expected));
        assert_eq!(assert_ready_some!(poll!(queue)).key(), expected);
    }
    assert!(queue.peek().is_none());
}

/// tokio-util's memory never shrinks by itself, and its `compact` is O(n).
/// Here the storage empties from the top as values come and go, and is given
/// back without a call.
#[tokio::test(start_paused = true)]
async fn memory_is_given_back_as_the_queue_shrinks() {
    let mut queue = DelayQueue::new();
    let keys: Vec<Key> = (0..200_000u32).map(|i| queue.insert(i, ms(60_000))).collect();
    let full = queue.allocated_bytes();
    // A long-lived tenth stays; the rest leave.
    for (i, key) in keys.iter().enumerate() {
        if i % 10 != 0 {
            queue.remove(key);
        }
    }
    let scattered = queue.allocated_bytes();
    // Turnover: the long-lived values leave one by one while new ones come in;
    // new values fill the lowest free storage, so the top empties.
    let mut live: Vec<Key> = keys.iter().step_by(10).copied().collect();
    for key in &mut live {
        queue.remove(key);
        *key = queue.insert(u32::MAX, ms(60_000));
    }
    let turned_over = queue.allocated_bytes();
    println!(
        "200k values: {full} B; a tenth left, scattered: {scattered} B; after turnover: {turned_over} B ({} B per value)",
        turned_over / queue.len()
    );
    assert_eq!(queue.len(), 20_000);
    assert!(turned_over * 5 < full, "{turned_over} B held for 20k values, {full} B for 200k");
    for key in &live {
        assert!(queue.contains(key));
    }
}

/// The Stream: `None` while empty, values again after an insert, never early.
#[tokio::test(start_paused = true)]
async fn the_stream_resumes_after_none() {
    let mut queue = DelayQueue::new();
    assert!(queue.next().await.is_none());
    let start = Instant::now();
    queue.insert("a", ms(5));
    let got = queue.next().await.unwrap();
    assert_eq!(got.deadline(), start + ms(5));
    assert!(Instant::now() >= got.deadline());
    assert_eq!(got.into_inner(), "a");
    assert!(queue.next().await.is_none());
}
