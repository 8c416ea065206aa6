//! The owner hands over what it fires: tasks that come due while a claim
//! waits on the owner's node reach it from the fire script, with no claim
//! script and no look at the shards, for pull and push claims, on one Redis
//! and on a Cluster; a paused queue is not handed over; flow control and an
//! answer's byte budget hold, what they leave waiting in claim order; and
//! tasks handed to a claim that went away are given back, not lost.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use hourglass_queue::limits::ANSWER_PAYLOAD_BYTES_MAX;
use hourglass_queue::prelude::*;
use hourglass_queue::{
    Claim, Claimed, Flow, HttpTarget, Limits, NewTask, Pause, PushTarget, QueueError, QueueSettings, RunAt,
};
use hourglass_redis::{Fired, RedisBackend};
use hourglass_test_support::redis::{Cluster, Server};

use crate::{claim_scripts, node, reset_stats, sole_node, until};

const LEASE_MS: u64 = 60_000;
const WAIT_MS: u64 = 30_000;
/// Long enough after an enqueue that the claim is waiting when it fires.
const DUE_IN_MS: u64 = 300;
const WITHIN: Duration = Duration::from_secs(20);

/// Calls of `command` on `masters` since their stats were reset.
fn calls(masters: &[&Server], command: &str) -> u64 {
    masters.iter().map(|master| crate::calls(master, command)).sum()
}

/// Waits until `count` claims wait on `backend`, driving `claims` meanwhile.
async fn waiting<F: std::future::Future + Unpin>(backend: &RedisBackend, count: usize, claims: &mut F) {
    tokio::select! {
        _ = claims => panic!("a claim returned before anything was due"),
        _ = until("the claims wait", WITHIN, || backend.waiting_claims() == count) => {}
    }
}

/// `n` tasks of `queue` due in [`DUE_IN_MS`], one enqueue each (spread over
/// the shards), or as one batch (one shard).
async fn due_soon(backend: &RedisBackend, queue: &str, n: usize, spread: bool) -> Vec<u64> {
    let task = || NewTask::new("{}", RunAt::Delay(DUE_IN_MS));
    if spread {
        let mut ids = Vec::new();
        for _ in 0..n {
            ids.push(backend.enqueue(queue, task()).await.unwrap().id);
        }
        return ids;
    }
    backend.enqueue_batch(queue, (0..n).map(|_| task()).collect()).await.unwrap().into_iter().map(|e| e.id).collect()
}

/// How far ahead [`due_together`] makes its tasks due: past a fire ahead of
/// them ([`hourglass_redis::FIRE_AHEAD_MS_MAX`] before), even when the
/// enqueue's hint reaches the node late (a batch of large payloads written
/// and synced to the append-only file first).
const DUE_TOGETHER_IN_MS: u64 = 1_500;

/// Tasks of `queue` due in [`DUE_TOGETHER_IN_MS`] with `priorities`, each
/// with `payload`, as one batch (one shard, so one fire reads them all):
/// their ids, in the order given.
async fn due_together(backend: &RedisBackend, queue: &str, priorities: &[u32], payload: &[u8]) -> Vec<u64> {
    let tasks = priorities.iter().map(|&priority| {
        let mut task = NewTask::new(payload, RunAt::Delay(DUE_TOGETHER_IN_MS));
        task.priority = Some(priority);
        task
    });
    backend.enqueue_batch(queue, tasks.collect()).await.unwrap().into_iter().map(|e| e.id).collect()
}

/// Asserts that `backend`'s fires handed `n` tasks over since `before`, and
/// all of them ahead of their due time if it hands ahead at all: the test
/// took the path it names.
fn assert_handed(backend: &RedisBackend, before: &Fired, fire_ahead_ms: u64, n: usize) {
    let fired = backend.fired();
    let ahead = if fire_ahead_ms > 0 { n } else { 0 };
    let got = (fired.handed_over - before.handed_over, fired.handed_ahead - before.handed_ahead);
    assert_eq!(got, (n as u64, ahead as u64), "handed over and of those ahead, {fire_ahead_ms} ms ahead");
}

/// The ids of `n` tasks of `queue` that new claims get, in the order they get them.
async fn claim_more(backend: &RedisBackend, queue: &str, n: usize) -> Vec<u64> {
    let mut got = Vec::new();
    while got.len() < n {
        let claimed = tokio::time::timeout(WITHIN, backend.claim(queue, 10, LEASE_MS, WAIT_MS)).await;
        got.extend(claimed.expect("the rest are due").unwrap().iter().map(|task| task.id));
    }
    got
}

/// A claim waiting when `n` tasks come due gets them from the fire: every
/// one handed over, no look at the shards (`ZCARD`) and no claim script,
/// attempts counted, leases that ack.
async fn handed_over_whole(backend: Arc<RedisBackend>, masters: &[&Server], push: bool) {
    let queue = if push { "handed-push" } else { "handed-pull" };
    if push {
        let target = Arc::new(PushTarget::new(HttpTarget::post("https://example.com/hook")));
        backend.put_settings(queue, QueueSettings { push: Some(target), flow: Flow::default() }).await.unwrap();
    }
    let before = backend.fired();
    let queues = [queue];
    let claim =
        if push { Claim::push(5, WAIT_MS).unwrap() } else { Claim::new(&queues, 5, LEASE_MS, WAIT_MS).unwrap() };
    let mut claimed = Box::pin(backend.claim_from(claim));
    waiting(&backend, 1, &mut claimed).await;
    reset_stats(masters);
    let mut ids = due_soon(&backend, queue, 5, false).await;
    let got = tokio::time::timeout(WITHIN, claimed).await.expect("the tasks are handed over").unwrap();
    let mut got_ids: Vec<u64> = got.iter().map(|task| task.id).collect();
    got_ids.sort();
    ids.sort();
    assert_eq!(got_ids, ids);
    let after = backend.fired();
    assert_eq!(after.handed_over - before.handed_over, 5, "{after:?}");
    let (looks, claims) = (calls(masters, "zcard"), claim_scripts(masters));
    println!(
        "push {push}: 5 tasks handed over by the fire; scripts run {}, claim scripts {claims}, looks {looks}, publish {}",
        calls(masters, "evalsha"),
        calls(masters, "publish")
    );
    assert_eq!((looks, claims), (0, 0), "no look at the shards, no claim script");
    for task in &got {
        assert_eq!(task.attempt, 1);
        assert_eq!(task.target.is_some(), push);
        backend.ack(task.id, task.lease).await.unwrap();
    }
    assert_eq!(backend.waiting_claims(), 0, "the claim no longer waits");
    // The count sees a claim script when one runs: a task due at once, with
    // no claim waiting, is claimed by one.
    backend.enqueue(queue, NewTask::new("{}", RunAt::Delay(0))).await.unwrap();
    let now_due = backend.claim_from(claim).await.unwrap();
    assert!(now_due.len() == 1 && claim_scripts(masters) >= 1);
    backend.ack(now_due[0].id, now_due[0].lease).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fired_tasks_are_handed_to_a_waiting_claim_on_one_redis() {
    let Some(server) = Server::start() else { return };
    let backend = sole_node(&server.url()).await;
    handed_over_whole(backend.clone(), &[&server], false).await;
    handed_over_whole(backend.clone(), &[&server], true).await;
    backend.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fired_tasks_are_handed_to_a_waiting_claim_on_a_cluster() {
    let Some(cluster) = Cluster::start() else { return };
    let backend = sole_node(&cluster.url()).await;
    let masters: Vec<&Server> = cluster.masters.iter().collect();
    handed_over_whole(backend.clone(), &masters, false).await;
    handed_over_whole(backend.clone(), &masters, true).await;
    backend.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_queue_is_not_handed_over() {
    let Some(server) = Server::start() else { return };
    let backend = sole_node(&server.url()).await;
    backend.pause_queue("held", Pause::Indefinitely).await.unwrap();
    let mut claimed = Box::pin(backend.claim("held", 5, LEASE_MS, WAIT_MS));
    waiting(&backend, 1, &mut claimed).await;
    let before = backend.fired();
    due_soon(&backend, "held", 5, false).await;
    tokio::select! {
        _ = &mut claimed => panic!("a paused queue hands nothing out"),
        _ = until("the tasks are filed as due", WITHIN, || backend.fired().by_timer - before.by_timer >= 5) => {}
    }
    assert_eq!(backend.fired().handed_over, before.handed_over, "nothing handed over");
    assert_eq!(backend.queue("held").await.unwrap().due, 5);
    backend.pause_queue("held", Pause::Resume).await.unwrap();
    let got = tokio::time::timeout(WITHIN, claimed).await.expect("resumed").unwrap();
    assert_eq!(got.len(), 5, "claimed once resumed");
    backend.close();
}

/// Claims waiting on one node, every shard's fire handing over: the cap and
/// the rate hold for what the fires hand out, as for what claims take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cap_and_a_rate_hold_for_tasks_handed_over() {
    let Some(server) = Server::start() else { return };
    let backend = sole_node(&server.url()).await;
    for (queue, flow, push, allowed) in [
        ("capped-pull", Flow { max_in_flight: Some(3), ..Flow::default() }, false, 3),
        ("rated-push", Flow { rate_per_s: Some(0.01), burst: Some(4), max_in_flight: None }, true, 4),
    ] {
        let target = push.then(|| Arc::new(PushTarget::new(HttpTarget::post("https://example.com/hook"))));
        backend.put_settings(queue, QueueSettings { push: target, flow }).await.unwrap();
        let claim = || {
            if push {
                Claim::push(10, WAIT_MS).unwrap()
            } else {
                Claim::new(std::slice::from_ref(&queue), 10, LEASE_MS, WAIT_MS).unwrap()
            }
        };
        let before = backend.fired();
        // Two claimers, each claiming again as soon as it got tasks, and
        // counting what it got.
        let counted = std::sync::atomic::AtomicUsize::new(0);
        let claimer = || async {
            loop {
                let got = backend.claim_from(claim()).await.unwrap();
                counted.fetch_add(got.len(), std::sync::atomic::Ordering::SeqCst);
            }
        };
        let mut claimers = Box::pin(futures_util::future::join(claimer(), claimer()));
        waiting(&backend, 2, &mut claimers).await;
        due_soon(&backend, queue, 10, true).await;
        let got = || counted.load(std::sync::atomic::Ordering::SeqCst);
        tokio::select! {
            _ = &mut claimers => unreachable!("the claimers claim until dropped"),
            _ = async {
                until("every task fired", WITHIN, || backend.fired().by_timer - before.by_timer >= 10).await;
                until("the claimers got what is allowed", WITHIN, || got() >= allowed).await;
            } => {}
        }
        let handed = backend.fired().handed_over - before.handed_over;
        let stats = backend.queue(queue).await.unwrap();
        println!("{queue}: {handed} handed over, {} claimed, {} leased, {} due", got(), stats.leased, stats.due);
        assert!(handed > 0, "the fires handed tasks over");
        assert_eq!((got(), stats.leased, stats.due), (allowed, allowed, 10 - allowed), "no more than allowed");
        drop(claimers);
    }
    backend.close();
}

/// A claim that goes away after the fire handed it tasks, before it took
/// them: they are given back at once (not left to their leases), the
/// attempt not counted, and another node delivers them.
#[tokio::test]
async fn tasks_handed_to_a_claim_that_went_away_are_given_back() {
    let Some(server) = Server::start() else { return };
    let a = sole_node(&server.url()).await;
    let b = node(&server.url(), 2_000).await;
    // Shared out, and staying so: a task enqueued on a's shard is fired by a.
    until("the shards are shared out", WITHIN, || a.held_shards().len() == 8 && b.held_shards().len() == 8).await;
    for push in [false, true] {
        let queue = if push { "gone-push" } else { "gone-pull" };
        if push {
            let target = Arc::new(PushTarget::new(HttpTarget::post("https://example.com/hook")));
            a.put_settings(queue, QueueSettings { push: Some(target), flow: Flow::default() }).await.unwrap();
        }
        let queues = [queue];
        let claim = || {
            if push {
                Claim::push(5, WAIT_MS).unwrap()
            } else {
                Claim::new(&queues, 5, LEASE_MS, WAIT_MS).unwrap()
            }
        };
        let before = a.fired();
        let mut claimed = Box::pin(a.claim_from(claim()));
        waiting(&a, 1, &mut claimed).await;
        // b's shards (it may hold some by now) would not hand over to a's claim.
        let mut ids = Vec::new();
        while ids.len() < 5 {
            let id = a.enqueue(queue, NewTask::new("{}", RunAt::Delay(DUE_IN_MS))).await.unwrap().id;
            if a.held_shards().contains(&((id % 1_024) as u16)) {
                ids.push(id);
            } else {
                a.cancel(id).await.unwrap();
            }
        }
        // The claim is not polled while a fire hands it tasks (the first of
        // the five shards' fires; the others file theirs as due, for any
        // claim): on this one-thread runtime, it has not taken them when it
        // is dropped.
        until("a's fires fire every task", WITHIN, || a.fired().by_timer - before.by_timer >= 5).await;
        let handed = a.fired().handed_over - before.handed_over;
        assert!(handed >= 1, "a fire handed tasks to the waiting claim");
        drop(claimed);
        until("they are given back", WITHIN, || a.fired().given_back - before.given_back == handed).await;
        println!("push {push}: {handed} tasks handed to a claim that went away, given back");
        let mut got: Vec<Claimed> = Vec::new();
        while got.len() < 5 {
            let more = b.claim_from(claim()).await.unwrap();
            assert!(!more.is_empty(), "every task is delivered");
            got.extend(more);
        }
        let mut got_ids: Vec<u64> = got.iter().map(|task| task.id).collect();
        got_ids.sort();
        ids.sort();
        assert_eq!(got_ids, ids, "delivered by the other node, none lost");
        assert!(got.iter().all(|task| task.attempt == 1), "the attempt given back is not counted");
        for task in got {
            b.ack(task.id, task.lease).await.unwrap();
        }
    }
    a.close();
    b.close();
}

/// The only node of a service on `url`, handing tasks to its waiting claims
/// up to `fire_ahead_ms` before they are due.
async fn handing_ahead(url: &str, fire_ahead_ms: u64) -> Arc<RedisBackend> {
    handing_ahead_with(url, fire_ahead_ms, Limits::default()).await
}

/// [`handing_ahead`], with `limits`.
async fn handing_ahead_with(url: &str, fire_ahead_ms: u64, limits: Limits) -> Arc<RedisBackend> {
    let mut options = hourglass_redis::RedisOptions::new(url.parse().unwrap());
    options.fire_ahead_ms = fire_ahead_ms;
    options.limits = limits;
    let backend = RedisBackend::connect(options).await.expect("connect to redis");
    until("the node holds every shard", WITHIN, || backend.held_shards().len() == 16).await;
    backend
}

/// Redis's time now, in ms.
fn redis_ms(server: &Server) -> u64 {
    let time = server.cli(&["TIME"]);
    let mut parts = time.lines().map(|line| line.trim().parse::<u64>().expect("TIME's seconds, then µs"));
    let (seconds, micros) = (parts.next().unwrap(), parts.next().unwrap());
    seconds * 1_000 + micros / 1_000
}

/// A claim of `queues` waiting `wait_ms` on `backend`, and a task of the
/// first queue due 1.5 s after it waits, handed to it ahead (leased, while
/// the claim waits for the due time): the claim, still under way, with the
/// task's id and due time.
async fn claim_handed_ahead<'a>(
    backend: &'a RedisBackend,
    queues: &'a [&'a str],
    wait_ms: u64,
) -> (Pin<Box<impl Future<Output = Result<Vec<Claimed>, QueueError>> + 'a>>, u64, u64) {
    let claim = Claim::new(queues, 5, LEASE_MS, wait_ms).unwrap();
    let mut claimed = Box::pin(backend.claim_from(claim));
    waiting(backend, 1, &mut claimed).await;
    let id = backend.enqueue(queues[0], NewTask::new("{}", RunAt::Delay(1_500))).await.unwrap().id;
    let due_ms = backend.get(id).await.unwrap().task.run_at_ms;
    tokio::select! {
        _ = &mut claimed => panic!("answered before the task was handed ahead"),
        _ = until("the task is handed ahead", WITHIN, || backend.fired().handed_ahead == 1) => {}
    }
    (claimed, id, due_ms)
}

/// While a claim of at most `max` tasks waits, tasks with `priorities`, each
/// with `payload`, come due together in one shard; handed ahead of their due
/// time and at it: the claim gets those at `handed`, in that order, all from
/// the fire, and new claims then get those at `rest`, in that order.
async fn handed_then_rest(
    limits: Limits,
    max: usize,
    priorities: &[u32],
    payload: &[u8],
    handed: &[usize],
    rest: &[usize],
) {
    for fire_ahead_ms in [0, 1_000] {
        let Some(server) = Server::start() else { return };
        let backend = handing_ahead_with(&server.url(), fire_ahead_ms, limits.clone()).await;
        let before = backend.fired();
        let mut claimed = Box::pin(backend.claim("ordered", max, LEASE_MS, WAIT_MS));
        waiting(&backend, 1, &mut claimed).await;
        let ids = due_together(&backend, "ordered", priorities, payload).await;
        let at = |places: &[usize]| places.iter().map(|&k| ids[k]).collect::<Vec<u64>>();
        let got = tokio::time::timeout(WITHIN, claimed).await.expect("the tasks are handed over").unwrap();
        assert!(got.iter().all(|task| task.payload.as_bytes() == payload), "whole payloads");
        let got: Vec<u64> = got.iter().map(|task| task.id).collect();
        assert_eq!(got, at(handed), "handed over, {fire_ahead_ms} ms ahead");
        assert_handed(&backend, &before, fire_ahead_ms, handed.len());
        let more = claim_more(&backend, "ordered", rest.len()).await;
        assert_eq!(more, at(rest), "left for the next claim, {fire_ahead_ms} ms ahead");
        backend.close();
    }
}

/// Tasks that come due at once while a claim waits reach it in claim order,
/// whether the fire hands them over ahead of their due time or at it: the
/// most urgent priority first, then the first enqueued. Those the claim has
/// no room for stay due, in the same order, for the next claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_handed_over_come_in_claim_order() {
    handed_then_rest(Limits::default(), 3, &[5, 1, 3, 1, 0], b"{}", &[4, 1, 3], &[2, 0]).await;
}

/// A fire stops handing tasks to a waiting claim before the one whose
/// payload would take the answer past [`ANSWER_PAYLOAD_BYTES_MAX`], handed
/// ahead or when due: the claim gets those before it, in claim order, and
/// the rest wait for the next claim, in the same order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_byte_budget_stops_a_hand_out_part_way_and_the_rest_wait_in_order() {
    const PAYLOAD_BYTES: usize = 5 << 20;
    // Three fit in one answer; a fourth would pass it.
    const { assert!(3 * PAYLOAD_BYTES <= ANSWER_PAYLOAD_BYTES_MAX && 4 * PAYLOAD_BYTES > ANSWER_PAYLOAD_BYTES_MAX) };
    let limits = Limits { payload_bytes_max: PAYLOAD_BYTES, ..Limits::default() };
    // Room for all five: the byte budget, not the room, stops the hand-out.
    handed_then_rest(limits, 64, &[4, 0, 2, 1, 3], &vec![b'x'; PAYLOAD_BYTES], &[1, 3, 2], &[4, 0]).await;
}

/// A cap below a waiting claim's room, with tasks due at once in one
/// shard: the fire hands the claim only what the cap allows, the first in
/// claim order, and the rest wait (due, or scheduled until their due time
/// if handed ahead), then come in the same order as acks make room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cap_below_a_claim_s_room_hands_out_the_first_in_claim_order() {
    for fire_ahead_ms in [0, 1_000] {
        let Some(server) = Server::start() else { return };
        let backend = handing_ahead(&server.url(), fire_ahead_ms).await;
        let flow = Flow { max_in_flight: Some(2), ..Flow::default() };
        backend.put_settings("capped", QueueSettings { push: None, flow }).await.unwrap();
        let before = backend.fired();
        let mut claimed = Box::pin(backend.claim("capped", 10, LEASE_MS, WAIT_MS));
        waiting(&backend, 1, &mut claimed).await;
        let ids = due_together(&backend, "capped", &[3, 0, 4, 1, 2], b"{}").await;
        let first = tokio::time::timeout(WITHIN, claimed).await.expect("the tasks are handed over").unwrap();
        let first_ids: Vec<u64> = first.iter().map(|task| task.id).collect();
        assert_eq!(first_ids, [ids[1], ids[3]], "handed over up to the cap, {fire_ahead_ms} ms ahead");
        assert_handed(&backend, &before, fire_ahead_ms, 2);
        let stats = backend.queue("capped").await.unwrap();
        // Due, or still scheduled if they were left for the fire at their due time.
        assert_eq!((stats.leased, stats.due + stats.scheduled), (2, 3), "the rest wait, {fire_ahead_ms} ms ahead");
        // Each ack makes room for one more, taken in claim order.
        let mut rest = Vec::new();
        let mut leased = first;
        while rest.len() < 3 {
            let done = leased.remove(0);
            backend.ack(done.id, done.lease).await.unwrap();
            let more = tokio::time::timeout(WITHIN, backend.claim("capped", 10, LEASE_MS, WAIT_MS)).await;
            let more = more.expect("a task is due").unwrap();
            assert_eq!(more.len(), 1, "one for each room, {fire_ahead_ms} ms ahead");
            rest.push(more[0].id);
            leased.extend(more);
        }
        assert_eq!(rest, [ids[4], ids[0], ids[2]], "the rest in claim order, {fire_ahead_ms} ms ahead");
        backend.close();
    }
}

/// A lease that runs out in the same fire as new tasks come due, while a
/// claim waits, is given back and handed out with them, in claim order
/// (priority, due time, sequence), all from the fire. Its task has no limit
/// of attempts, so it is due again at once (with a limit it would wait out a
/// backoff), at the fire's time: the same place in the order the embedded
/// engine gives it, due at the tick that found its lease over. The
/// priorities differ, so the order does not depend on whether the fire ran
/// in the very millisecond the lease ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_given_back_in_the_fire_of_new_due_tasks_takes_its_place_in_claim_order() {
    let Some(server) = Server::start() else { return };
    let backend = handing_ahead(&server.url(), 0).await;
    let queue = "given-back";
    // One batch, so one shard and one fire: the task to lease, due now,
    // and three due an hour ahead, brought to its lease's end below.
    let priorities = [1, 2, 0, 3];
    let tasks = priorities.iter().enumerate().map(|(k, &priority)| {
        let mut task = NewTask::new("{}", RunAt::Delay(if k == 0 { 0 } else { 3_600_000 }));
        task.priority = Some(priority);
        task.max_attempts = Some(hourglass_queue::limits::ATTEMPTS_UNLIMITED);
        task
    });
    let ids: Vec<u64> =
        backend.enqueue_batch(queue, tasks.collect()).await.unwrap().into_iter().map(|e| e.id).collect();
    // Long enough to bring the others to its end and start the claim first.
    let leased = backend.claim(queue, 1, DUE_TOGETHER_IN_MS, WAIT_MS).await.unwrap();
    assert_eq!(leased.iter().map(|task| task.id).collect::<Vec<_>>(), [ids[0]]);
    let lease_until_ms = leased[0].lease_until_ms;
    for &id in &ids[1..] {
        backend.reschedule(id, RunAt::At(lease_until_ms)).await.unwrap();
    }
    let before = backend.fired();
    let mut claimed = Box::pin(backend.claim(queue, 10, LEASE_MS, WAIT_MS));
    waiting(&backend, 1, &mut claimed).await;
    assert!(redis_ms(&server) < lease_until_ms, "the claim waits before the lease ends");
    let got = tokio::time::timeout(WITHIN, claimed).await.expect("the tasks are handed over").unwrap();
    let got: Vec<(u64, u32)> = got.iter().map(|task| (task.id, task.attempt)).collect();
    assert_eq!(
        got,
        [(ids[2], 1), (ids[0], 2), (ids[1], 1), (ids[3], 1)],
        "in claim order, the given back delivered again"
    );
    assert_handed(&backend, &before, 0, 4);
    backend.close();
}

/// Pull and push tasks of one queue that come due at once, while a pull
/// and a push claim wait, each reach their own claim in claim order, handed
/// ahead or when due: a task with its own target is pushed, the others
/// pulled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_and_push_tasks_due_together_reach_their_own_claims_in_order() {
    for fire_ahead_ms in [0, 1_000] {
        let Some(server) = Server::start() else { return };
        let backend = handing_ahead(&server.url(), fire_ahead_ms).await;
        let pull = tokio::spawn({
            let backend = backend.clone();
            async move { backend.claim("mixed", 5, LEASE_MS, WAIT_MS).await }
        });
        let push = tokio::spawn({
            let backend = backend.clone();
            async move { backend.claim_from(Claim::push(5, WAIT_MS).unwrap()).await }
        });
        until("both claims wait", WITHIN, || backend.waiting_claims() == 2).await;
        // (priority, pushed) of each task, in the order enqueued.
        let tasks = [(2, false), (1, true), (0, false), (0, true), (1, false)].map(|(priority, pushed)| {
            let mut task = NewTask::new("{}", RunAt::Delay(DUE_IN_MS));
            task.priority = Some(priority);
            task.http = pushed.then(|| HttpTarget::post("https://example.com/hook"));
            task
        });
        let ids: Vec<u64> =
            backend.enqueue_batch("mixed", tasks.to_vec()).await.unwrap().into_iter().map(|e| e.id).collect();
        let ids_of = |claimed: Vec<Claimed>| claimed.iter().map(|task| task.id).collect::<Vec<u64>>();
        let pulled = tokio::time::timeout(WITHIN, pull).await.expect("the pull claim is answered").unwrap().unwrap();
        let pushed = tokio::time::timeout(WITHIN, push).await.expect("the push claim is answered").unwrap().unwrap();
        assert_eq!(ids_of(pulled), [ids[2], ids[4], ids[0]], "pulled, {fire_ahead_ms} ms ahead");
        assert_eq!(ids_of(pushed), [ids[3], ids[1]], "pushed, {fire_ahead_ms} ms ahead");
        backend.close();
    }
}

/// A task that comes due within `fire_ahead_ms` of a fire while a claim
/// waits is leased to the claim then, and the claim is answered at its due
/// time: not before, with a lease that counts from then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_handed_ahead_is_answered_at_its_due_time_and_leased_from_then() {
    let Some(server) = Server::start() else { return };
    let backend = handing_ahead(&server.url(), 1_000).await;
    let (claimed, id, due_ms) = claim_handed_ahead(&backend, &["ahead"], WAIT_MS).await;
    let handed_at = redis_ms(&server);
    assert!(handed_at < due_ms, "handed over at {handed_at}, ahead of {due_ms}");
    let got = tokio::time::timeout(WITHIN, claimed).await.expect("answered at its due time").unwrap();
    let answered_at = redis_ms(&server);
    println!(
        "due at {due_ms}: handed ahead by {} ms, answered {} ms after due",
        due_ms - handed_at,
        answered_at - due_ms
    );
    assert_eq!(got.len(), 1);
    let task = &got[0];
    assert_eq!((task.id, task.attempt, task.run_at_ms), (id, 1, due_ms));
    assert!(answered_at >= due_ms, "answered at {answered_at}, before its due time {due_ms}");
    assert_eq!(task.lease_until_ms, due_ms + LEASE_MS, "the lease counts from the due time");
    backend.ack(task.id, task.lease).await.unwrap();
    backend.close();
}

/// A task cancelled while it is handed ahead (leased to a waiting claim,
/// held until its due time) is not answered: the cancel publishes its
/// revocation, and the node drops the task before its claim takes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_cancelled_while_handed_ahead_is_not_answered() {
    let Some(server) = Server::start() else { return };
    let backend = handing_ahead(&server.url(), 1_000).await;
    // It waits past the task's due time: what it gets, it gets at that time.
    let (claimed, id, due_ms) = claim_handed_ahead(&backend, &["revoked"], 3_000).await;
    let cancelled_at = redis_ms(&server);
    backend.cancel(id).await.unwrap();
    let got = tokio::time::timeout(WITHIN, claimed).await.expect("the claim ends").unwrap();
    println!("due at {due_ms}: cancelled {} ms before, while handed ahead", due_ms.saturating_sub(cancelled_at));
    assert!(cancelled_at < due_ms, "cancelled at {cancelled_at}, ahead of its due time {due_ms}");
    assert!(got.is_empty(), "a cancelled task is not answered: {got:?}");
    assert_eq!(backend.fired().dropped_cancelled, 1, "dropped on the node");
    assert!(matches!(backend.get(id).await, Err(QueueError::NotFound(_))), "cancelled for good");
    backend.close();
}

/// A task handed ahead to a claim that ends before the task is due waits
/// for the next claim that wants the same, and is answered at its due time;
/// with no such claim, it is given back, due again in its place, its
/// attempt not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_handed_ahead_outlives_its_claim_not_its_due_time() {
    let Some(server) = Server::start() else { return };
    let backend = handing_ahead(&server.url(), 1_000).await;
    let queues = ["outlived"];
    let short = Claim::new(&queues, 5, LEASE_MS, 300).unwrap();
    for next_claim in [true, false] {
        let before = backend.fired();
        let mut claimed = Box::pin(backend.claim_from(short));
        waiting(&backend, 1, &mut claimed).await;
        let id = backend.enqueue("outlived", NewTask::new("{}", RunAt::Delay(800))).await.unwrap().id;
        let due_ms = backend.get(id).await.unwrap().task.run_at_ms;
        assert!(claimed.await.unwrap().is_empty(), "the claim ends before the task is due");
        assert_eq!(backend.fired().handed_ahead - before.handed_ahead, 1, "handed ahead to it");
        if next_claim {
            let next = Claim::new(&queues, 5, LEASE_MS, WAIT_MS).unwrap();
            let got = tokio::time::timeout(WITHIN, backend.claim_from(next)).await.expect("answered").unwrap();
            let answered_at = redis_ms(&server);
            assert_eq!(got.iter().map(|task| (task.id, task.attempt)).collect::<Vec<_>>(), [(id, 1)]);
            assert!(answered_at >= due_ms, "answered at {answered_at}, before its due time {due_ms}");
            assert_eq!(backend.fired().given_back, before.given_back, "adopted, not given back");
            backend.ack(id, got[0].lease).await.unwrap();
        } else {
            until("given back", WITHIN, || backend.fired().given_back > before.given_back).await;
            let given_back_at = redis_ms(&server);
            let task = backend.get(id).await.unwrap();
            assert!(given_back_at >= due_ms, "given back at {given_back_at}, before its due time {due_ms}");
            assert_eq!(task.task.attempt, 0, "the attempt is not counted");
            let got = backend.claim_from(Claim::new(&queues, 5, LEASE_MS, WAIT_MS).unwrap()).await.unwrap();
            assert_eq!(got.iter().map(|task| (task.id, task.attempt)).collect::<Vec<_>>(), [(id, 1)]);
            backend.ack(id, got[0].lease).await.unwrap();
        }
    }
    backend.close();
}

/// A claim whose taker may linger is offered to its node's fires from the
/// moment it arrives, while its first look is still in Redis, so that a
/// consumer that claims again at once is served by the fires rather than by
/// claim scripts racing every node's for the hinted shards (`BENCHMARKS.md`,
/// "Claims offered to the fires from their first look"). Here Redis holds
/// every write while the task comes due: the claim's first look waits in
/// it, and so does the fire, which hands the task to the claim all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_is_handed_tasks_while_its_first_look_is_in_redis() {
    let Some(server) = Server::start() else { return };
    let backend = sole_node(&server.url()).await;
    let queue = "first-look";
    let before = backend.fired();
    let id = backend.enqueue(queue, NewTask::new("{}", RunAt::Delay(DUE_IN_MS))).await.unwrap().id;
    // Held for less than the node's heartbeat may go unanswered.
    server.cli(&["CLIENT", "PAUSE", "800", "WRITE"]);
    let queues = [queue];
    // A claim of 16 asks a shard with a claim script, a write (one of
    // fewer looks with reads, which Redis does not hold).
    let mut claimed = Box::pin(backend.claim_from(Claim::new(&queues, 16, LEASE_MS, WAIT_MS).unwrap()));
    tokio::select! {
        _ = &mut claimed => panic!("the claim returned while its look was held"),
        _ = until("the claim is offered to the fires", WITHIN, || backend.claims_offered_to_fires() == 1) => {}
    }
    assert_eq!(backend.waiting_claims(), 0, "its look has not found nothing yet");
    let got = tokio::time::timeout(WITHIN, claimed).await.expect("the task is handed over").unwrap();
    assert_eq!(got.iter().map(|task| task.id).collect::<Vec<_>>(), [id]);
    let after = backend.fired();
    assert_eq!(after.handed_over - before.handed_over, 1, "handed over by the fire: {after:?}");
    backend.ack(id, got[0].lease).await.unwrap();
    backend.close();
}
