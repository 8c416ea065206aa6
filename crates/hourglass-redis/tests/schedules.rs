//! Schedules on Redis beyond the conformance kit: the firing of an occurrence
//! is fenced by the shard's lease.

use std::time::Duration;

use hourglass_queue::prelude::*;
use hourglass_queue::{Misfire, NewSchedule, Overlap, Rule};
use hourglass_test_support::redis::Server;

use crate::holding_every_shard;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_holder_fires_no_occurrence_and_the_holder_fires_each_once() {
    let Some(server) = Server::start() else { return };
    // A lease long enough to outlive the test's steps after the crash, however
    // slow the machine: the lease must still stand when its holder fires.
    let a = holding_every_shard(&server.url(), 10_000, Duration::from_secs(20)).await;
    let every_ms = 100;
    let new = NewSchedule {
        queue: "fenced".into(),
        rule: Rule::Every { every_ms },
        payload: "{}".into(),
        misfire: Misfire::All,
        overlap: Overlap::Allow,
        max_attempts: None,
        expires_after_ms: None,
    };
    a.put_schedule("tick", new, Expect::Any).await.unwrap();
    let (shard, holder) = a.schedule_holder("tick");
    let holder = holder.expect("a holds the schedule's shard");
    assert!(!a.claim("fenced", 10, 30_000, 20_000).await.unwrap().is_empty(), "it fires");
    // a stops as if killed: its timers stop, its lease stands until it runs out.
    a.crash();
    let before = a.schedule("tick").await.unwrap().schedule;
    tokio::time::sleep(Duration::from_millis(3 * every_ms)).await;
    let stale = format!("{}:0", a.node());
    assert!(!a.fire_schedule_as("tick", &stale).await.unwrap(), "a stale holder is fenced");
    let after = a.schedule("tick").await.unwrap().schedule;
    assert_eq!((after.next_ms, after.last), (before.next_ms, before.last), "and changes nothing");
    let owner = server.cli(&["GET", &format!("{{hg:{shard}}}:owner")]);
    assert_eq!(owner.trim(), holder, "the lease still stands");
    let caught_up = std::time::Instant::now();
    assert!(a.fire_schedule_as("tick", &holder).await.unwrap(), "its holder may fire");
    let fired = a.schedule("tick").await.unwrap().schedule;
    let (last_ms, _) = fired.last.expect("it ran");
    assert!(fired.next_ms > Some(last_ms) && last_ms > before.last.unwrap().0, "{before:?} then {fired:?}");
    // Fired again at once: nothing new has come, nothing is enqueued twice.
    a.fire_schedule_as("tick", &holder).await.unwrap();
    let again = a.schedule("tick").await.unwrap().schedule;
    // What came due between the two fires, and nothing else: at most one
    // occurrence for each period since the first began.
    let since = again.last.unwrap().0 - last_ms;
    let bound = every_ms + caught_up.elapsed().as_millis() as u64;
    assert!(since % every_ms == 0 && since <= bound, "{fired:?} then {again:?}: {since} ms, at most {bound}");
    println!(
        "a stale holder was fenced; the holder caught up {} occurrences after a crash, once each",
        (last_ms - before.last.unwrap().0) / every_ms
    );
}
