//! One test for each tokio issue the drop-in exists to fix, and for ours.

use std::time::Duration;

use futures_util::StreamExt;
use hourglass::delay_queue::{DelayQueue, Key};
use tokio::time::{self, sleep, sleep_until, Instant};
use tokio_test::{assert_pending, assert_ready, task};

use super::ms;

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

// ---- wake-ups for nothing (hourglass issue 26) -------------------------

/// The same when the value was reset before the consumer began to wait: the
/// queue sleeps until the earliest deadline there is, not the one the value
/// had when it was filed.
#[tokio::test(start_paused = true)]
async fn a_value_reset_later_before_the_wait_does_not_wake_at_its_old_deadline() {
    let mut queue = task::spawn(DelayQueue::new());
    let now = Instant::now();
    let foo = queue.insert_at("foo", now + ms(100));
    queue.insert_at("bar", now + ms(110)); // the same 64 ms slot as foo
    let far = queue.insert_at("far", now + ms(5_000));
    queue.reset_at(&foo, now + ms(6_000));
    queue.reset_at(&far, now + ms(7_000));
    assert_pending!(poll!(queue));
    sleep_until(now + ms(109)).await;
    assert!(!queue.is_woken(), "woken at foo's old deadline with nothing due");
    sleep(ms(1)).await;
    assert!(queue.is_woken());
    assert_eq!(assert_ready_some!(poll!(queue)).into_inner(), "bar");
    assert_pending!(poll!(queue));
    sleep_until(now + ms(5_999)).await;
    assert!(!queue.is_woken(), "woken at far's old deadline with nothing due");
    sleep(ms(1)).await;
    assert_eq!(assert_ready_some!(poll!(queue)).into_inner(), "foo");
}

/// Removing the value the consumer waits for moves its wake-up to the next
/// deadline; values due at the same tick keep it.
#[tokio::test(start_paused = true)]
async fn removing_the_value_waited_for_moves_the_wake_up() {
    let mut queue = task::spawn(DelayQueue::new());
    let now = Instant::now();
    let first = queue.insert_at("first", now + ms(100));
    let twin = queue.insert_at("twin", now + ms(100));
    queue.insert_at("later", now + ms(300));
    assert_pending!(poll!(queue));
    queue.remove(&first);
    queue.reset_at(&twin, now + ms(200));
    assert!(!queue.is_woken());
    sleep_until(now + ms(199)).await;
    assert!(!queue.is_woken(), "woken with nothing due");
    sleep(ms(1)).await;
    assert!(queue.is_woken());
    assert_eq!(assert_ready_some!(poll!(queue)).into_inner(), "twin");
}

// ---- never early (hourglass issue 26) -----------------------------------

/// The clock stands at 1.7 ms: a value 20 ms ahead is due at 21.7 ms. A time
/// truncated to the millisecond would hand it out at 21 ms; it comes out at
/// 22 ms, the first millisecond at or after its deadline, inserted, inserted
/// at an instant, or reset.
#[tokio::test(start_paused = true)]
async fn a_clock_in_mid_millisecond_never_hands_a_value_out_early() {
    let mut queue = task::spawn(DelayQueue::new());
    let start = Instant::now();
    time::advance(Duration::from_micros(1_700)).await;
    let due = Instant::now() + ms(20);
    queue.insert("inserted", ms(20));
    queue.insert_at("inserted at", due);
    let moved = queue.insert("reset", ms(60_000));
    queue.reset(&moved, ms(20));
    assert_pending!(poll!(queue));
    // `advance` stands the clock exactly where asked (a sleep would round up
    // to tokio's next millisecond).
    time::advance(start + ms(21) - Instant::now()).await;
    assert!(!queue.is_woken());
    assert_pending!(poll!(queue), "due at 21.7 ms, handed out at 21 ms");
    time::advance(due - Duration::from_nanos(1) - Instant::now()).await;
    assert!(!queue.is_woken());
    assert_pending!(poll!(queue), "handed out a nanosecond early");
    time::advance(start + ms(22) - Instant::now()).await;
    assert!(queue.is_woken());
    let mut out = Vec::new();
    while let std::task::Poll::Ready(Some(expired)) = poll!(queue) {
        assert!(expired.deadline() >= due, "its deadline reads {:?} before {due:?}", expired.deadline());
        out.push(expired.into_inner());
    }
    assert_eq!(out, ["inserted", "inserted at", "reset"]);
}
