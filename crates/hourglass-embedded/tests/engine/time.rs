//! Time: a task not delivered by its expiry is dead, not late; a wall clock
//! that steps back fires nothing early, one that steps forward loses nothing.

use hourglass_queue::prelude::*;
use hourglass_queue::DeadReason;
use hourglass_queue::{Nack, NewTask, RunAt, Status};

use super::{task, Harness, T0_MS};
use crate::deadline;

fn expiring(delay_ms: u64, expires_after_ms: u64) -> NewTask {
    NewTask { expires: Some(RunAt::Delay(expires_after_ms)), ..task("{}", RunAt::Delay(delay_ms)) }
}

#[tokio::test]
async fn a_task_not_delivered_by_its_expiry_is_dead_not_late() {
    let h = Harness::new();
    let id = h.engine.enqueue("q", expiring(100, 1_000)).await.unwrap().id;
    h.advance(100).await;
    assert_eq!(h.engine.get(id).await.unwrap().status, Status::Due);
    // Past the expiry, before the timer thread has looked: a claim still gets nothing.
    h.clock.advance_ms(900);
    assert!(h.engine.claim("q", 10, 1_000, 0).await.unwrap().is_empty(), "delivered after its expiry");
    h.engine.poll_timers();
    let info = h.engine.get(id).await.unwrap();
    assert_eq!((info.status, (info.task.dead_reason == DeadReason::Expired)), (Status::Dead, true));
    let totals = h.engine.totals().await;
    assert_eq!((totals.expired, totals.died, totals.delivered), (1, 1, 0));
    // A retry lifts the expiry: it runs, late, and the lift survives a restart.
    h.engine.retry(id).await.unwrap();
    let h = h.restart();
    let info = h.engine.get(id).await.unwrap();
    assert_eq!(
        (info.status, info.task.expires_at_ms, (info.task.dead_reason == DeadReason::Expired)),
        (Status::Due, None, false)
    );
    assert_eq!(h.engine.claim("q", 1, 1_000, 0).await.unwrap()[0].id, id);
}

#[tokio::test]
async fn an_expiry_survives_a_restart_and_ends_a_lease_that_outlives_it() {
    let h = Harness::new();
    let kept = h.engine.enqueue("q", expiring(0, 500)).await.unwrap().id;
    let h = h.restart();
    let claimed = h.engine.claim("q", 1, 2_000, 0).await.unwrap();
    assert_eq!(claimed[0].id, kept, "claimed before its expiry");
    // The consumer never acks; the lease ends after the expiry: dead, not retried.
    h.advance(2_000).await;
    let info = h.engine.get(kept).await.unwrap();
    assert_eq!((info.status, (info.task.dead_reason == DeadReason::Expired)), (Status::Dead, true));
    let h = h.restart();
    let info = h.engine.get(kept).await.unwrap();
    assert_eq!(
        (info.status, (info.task.dead_reason == DeadReason::Expired), info.task.expires_at_ms),
        (Status::Dead, true, Some(T0_MS + 500))
    );
    // Refused: an expiry that comes before the task is due.
    let error = h.engine.enqueue("q", expiring(1_000, 1_000)).await.unwrap_err();
    assert!(error.to_string().contains("could never run"), "{error}");
}

/// Claims what is due; asserts that nothing handed out is early by the clock.
async fn claim_due(h: &Harness) -> Vec<u64> {
    let now_ms = hourglass_queue::WallClock::now_ms(&*h.clock);
    let claimed = h.engine.claim("q", 100, 60_000, 0).await.unwrap();
    for task in &claimed {
        assert!(task.run_at_ms <= now_ms, "task {} due at {} handed out at {now_ms}", task.id, task.run_at_ms);
    }
    claimed.iter().map(|task| task.id).collect()
}

#[tokio::test]
async fn a_wall_clock_stepped_back_an_hour_fires_nothing_early_and_loses_nothing() {
    let h = Harness::new();
    let before = h.engine.enqueue("q", task("a", RunAt::Delay(10_000))).await.unwrap().id;
    // The clock is set back an hour: `before` is now due in 1 h 10 s.
    h.clock.set_us((T0_MS - 3_600_000) * 1_000);
    let after = h.engine.enqueue("q", task("b", RunAt::Delay(5_000))).await.unwrap().id;
    h.advance(4_999).await;
    assert!(claim_due(&h).await.is_empty());
    h.advance(1).await;
    assert_eq!(claim_due(&h).await, [after], "due 5 s after the step, by the clock as it reads");
    h.advance(3_600_000 + 10_000 - 5_001).await;
    assert!(claim_due(&h).await.is_empty(), "not before its time on the clock");
    h.advance(1).await;
    assert_eq!(claim_due(&h).await, [before]);
}

#[tokio::test]
async fn a_small_step_back_is_waited_out_and_a_step_forward_fires_what_it_passed() {
    let h = Harness::new();
    h.advance(1_000).await; // the wheel stands at T0 + 1 s
    h.clock.set_us((T0_MS + 700) * 1_000); // back 300 ms
    let id = h.engine.enqueue("q", task("c", RunAt::Delay(100))).await.unwrap().id;
    h.advance(100).await;
    assert!(claim_due(&h).await.is_empty(), "late by at most the step, never early");
    h.advance(200).await;
    assert_eq!(claim_due(&h).await, [id]);
    // Forward a day: what came due in between is due at once; nothing is lost.
    let tomorrow = h.engine.enqueue("q", task("d", RunAt::Delay(86_400_000 - 1))).await.unwrap().id;
    assert!(claim_due(&h).await.is_empty());
    h.clock.set_us((T0_MS + 1_000 + 86_400_000) * 1_000);
    h.engine.poll_timers();
    assert_eq!(claim_due(&h).await, [tomorrow]);
}

/// No poll by hand: the timer thread, asleep until a task due in a minute,
/// is woken by a claim whose lease ends earlier, and expires it on time.
#[tokio::test]
async fn the_timer_thread_is_woken_for_a_lease_that_ends_before_its_sleep() {
    let h = Harness::new();
    h.engine.enqueue("q", task("later", RunAt::Delay(60_000))).await.unwrap();
    let id = h.engine.enqueue("q", task("now", RunAt::Delay(0))).await.unwrap().id;
    assert_eq!(h.engine.claim("q", 1, 1_000, 0).await.unwrap()[0].id, id);
    h.clock.advance_ms(1_000);
    let expired = async {
        while h.engine.get(id).await.unwrap().status == Status::Leased {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    };
    deadline::within("the lease's expiry by the timer thread", expired).await;
    assert_eq!(h.engine.totals().await.lease_expired, 1);
}

/// A lease that runs out in the same turn of the timers as new tasks come
/// due takes its place among them in claim order (priority, due time, id):
/// with no limit of attempts it is due again at once, at the tick that found
/// it over, and visible once its write is settled. The Redis fire hands
/// the same four out in the same order, in the one script that gives the
/// lease back (hourglass-redis, `handover.rs`).
#[tokio::test]
async fn a_lease_that_runs_out_with_new_tasks_due_takes_its_place_in_claim_order() {
    let h = Harness::new();
    let priorities = [1, 2, 0, 3];
    let tasks = priorities.iter().enumerate().map(|(k, &priority)| NewTask {
        priority: Some(priority),
        max_attempts: Some(hourglass_queue::limits::ATTEMPTS_UNLIMITED),
        ..task("{}", RunAt::Delay(if k == 0 { 0 } else { 3_600_000 }))
    });
    let ids: Vec<u64> = h.engine.enqueue_batch("q", tasks.collect()).await.unwrap().iter().map(|e| e.id).collect();
    let leased = h.engine.claim("q", 1, 1_500, 0).await.unwrap();
    assert_eq!(leased.iter().map(|task| task.id).collect::<Vec<_>>(), [ids[0]]);
    for &id in &ids[1..] {
        h.engine.reschedule(id, RunAt::At(leased[0].lease_until_ms)).await.unwrap();
    }
    h.advance(1_500).await;
    // Its return to the queue is a write: visible once settled, which a
    // read of it waits for (a claim before then gets the other three).
    assert_eq!(h.engine.get(ids[0]).await.unwrap().status, Status::Due);
    let got = h.engine.claim("q", 10, 1_000, 0).await.unwrap();
    let got: Vec<(u64, u32)> = got.iter().map(|task| (task.id, task.attempt)).collect();
    assert_eq!(got, [(ids[2], 1), (ids[0], 2), (ids[1], 1), (ids[3], 1)]);
}

/// Claims of queue `q` that hand out task `id` only once the clock reads
/// `due_us`: nothing at one microsecond before, the task at `due_us`.
async fn handed_out_at(h: &Harness, id: u64, due_us: u64) {
    h.clock.set_us(due_us - 1);
    h.engine.poll_timers();
    assert!(claim_due(h).await.is_empty(), "task {id} handed out a microsecond before {due_us} µs");
    h.clock.set_us(due_us);
    h.engine.poll_timers();
    assert_eq!(claim_due(h).await, [id], "task {id} at {due_us} µs");
}

#[tokio::test]
async fn a_delay_counts_from_the_arrival_rounded_up_never_early() {
    let h = Harness::new();
    let at_us = |ms: u64, us: u64| ms * 1_000 + us;
    // The clock stands 0.7 ms into a millisecond: a delay counted from the
    // millisecond rounded down would be due 0.7 ms before it has passed.
    h.clock.set_us(at_us(T0_MS, 700));
    let enqueued = h.engine.enqueue("q", task("{}", RunAt::Delay(10))).await.unwrap();
    assert_eq!(enqueued.run_at_ms, T0_MS + 11, "the arrival rounded up, plus the delay");
    let id = enqueued.id;
    h.clock.set_us(at_us(T0_MS + 11, 0) - 1);
    h.engine.poll_timers();
    assert!(h.engine.claim("q", 1, 60_000, 0).await.unwrap().is_empty(), "10.299 ms after it came: early");
    h.clock.set_us(at_us(T0_MS + 11, 0));
    h.engine.poll_timers();
    let lease = h.engine.claim("q", 1, 60_000, 0).await.unwrap()[0].lease;

    // A nack's delay counts the same way.
    h.clock.set_us(at_us(T0_MS + 11, 300));
    let nacked = h.engine.nack(id, lease, Nack { delay_ms: Some(5), ..Nack::default() }).await.unwrap();
    assert_eq!(nacked.task.run_at_ms, T0_MS + 17);
    handed_out_at(&h, id, at_us(T0_MS + 17, 0)).await;

    // And a reschedule's.
    let other = h.engine.enqueue("q", task("{}", RunAt::Delay(60_000))).await.unwrap().id;
    h.clock.set_us(at_us(T0_MS + 20, 1));
    assert_eq!(h.engine.reschedule(other, RunAt::Delay(3)).await.unwrap().task.run_at_ms, T0_MS + 24);
    handed_out_at(&h, other, at_us(T0_MS + 24, 0)).await;
    // On the millisecond itself there is nothing to round.
    h.clock.set_us(at_us(T0_MS + 30, 0));
    assert_eq!(h.engine.enqueue("q", task("{}", RunAt::Delay(2))).await.unwrap().run_at_ms, T0_MS + 32);
}
