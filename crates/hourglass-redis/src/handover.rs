//! The hand-over: the owner of a shard that fires it leases due tasks for
//! this node's waiting claims in the same fire script (`lua/fire.lua`), and
//! puts them in the claims' takers (`takers.rs`). A task that comes due
//! while a claim waits on the owner's node then costs one script and one
//! fsync from its timer to its claim, where it cost a fire, a hint through
//! pub/sub that woke the waiting claims of every node, and a claim script
//! of each, racing for it, with an fsync of its own (`BENCHMARKS.md`, "The
//! owner hands over what it fires").
//!
//! What a claim script enforces holds for the tasks handed over: both lease
//! through the prelude's `hand_out` (claim order, attempts, expiry, lease
//! tokens, payload bytes), the script hands nothing of a paused queue over,
//! and a queue with flow control is handed at most what `flow.lua acquire`
//! granted just before the fire, each task then bound to its slot as a
//! claim's are. What is handed over is counted as delivered when the claim
//! takes it, as a claim counts what its scripts hand out.
//!
//! **Ahead of the due time.** A fire given a time to come (the shard's
//! first due time, within [`fire_ahead_ms`](crate::RedisOptions::fire_ahead_ms))
//! hands the tasks due then to the takers it was offered, leased from that
//! time, so that the script's round trip happens before the tasks are due;
//! the node puts them in the takers when they are due
//! ([`RedisBackend::answer_at_due`]), never before, and their claims wait for
//! that fire meanwhile.
//!
//! **Never lost, never twice at once.** A task handed to a claim that ended
//! meanwhile (it found tasks elsewhere, timed out, or its caller went away:
//! a delivery loop stopping, a node shutting down) is given back (once its
//! taker lingered [`LINGER_MS`] unadopted, or at once if it does not linger
//! or the node is closing) under its lease token (`task.lua return`): due
//! again in its place (or scheduled, if handed ahead and not yet due), the
//! attempt not counted, its slot freed. Not left to its lease, which would
//! make it late by a whole lease (a push target's timeout and a margin) for
//! a delivery never tried. If the give-back fails (Redis out of reach, the
//! runtime gone), the lease runs out and the owner's fire makes it due again,
//! as for any lease: at least once. A lease token is the task's only while
//! no other node holds it, so a give-back that comes late changes nothing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hourglass_queue::limits::ANSWER_PAYLOAD_BYTES_MAX;
use hourglass_queue::{Claim, Claimed, Delivery, PushTarget, QueueError, SystemWallClock, WallClock};

use crate::flow::Grant;
use crate::options::CLAIM_SCAN_MAX;
use crate::reply::Reply;
use crate::takers::{Offer, Taker, Wants, LINGER_MS};
use crate::{record, RedisBackend};

/// A fire that begins shares its takers with the fires of the shards whose
/// timers ring within this long: about a fire's round trip, which was 2 to
/// 4 ms at the median under `appendfsync always` with three nodes at 5 k
/// tasks/s (`BENCHMARKS.md`, "A claim offered to several fires at once").
pub(crate) const FIRE_OVERLAP_MS: u64 = 5;

/// No flow control on a queue: the script may hand over as many as a taker takes.
const UNLIMITED: i64 = -1;

/// One side (pull or push) of a queue in a fire: its taker, as the script
/// numbers them (from 1; 0 for none), the lease of what it is handed, and
/// the most the queue's flow control allows.
#[derive(Debug, Clone, Copy)]
struct Side {
    taker: usize,
    lease_ms: u64,
    allowed: i64,
}

const NO_SIDE: Side = Side { taker: 0, lease_ms: 0, allowed: 0 };

/// What a fire offers its script, and what it must do with the answer.
pub(crate) struct Plan {
    offer: Offer,
    /// Per queue fired, in order: its pull and push sides, and its push
    /// target (for the tasks without one of their own).
    sides: Vec<(Side, Side, Option<Arc<PushTarget>>)>,
    /// Flow control reserved before the fire: the queue's place and name,
    /// the side, and the grant, bound to what the script hands over.
    grants: Vec<(usize, String, Delivery, Grant)>,
}

/// A fire of this node under way, from its plan to its end.
pub(crate) struct Firing<'a>(&'a AtomicUsize);

impl Drop for Firing<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A claim's taker while the claim waits: removed when the claim ends, and
/// what it left there given back.
pub(crate) struct Waiting<'a> {
    backend: &'a RedisBackend,
    pub(crate) taker: Arc<Taker>,
}

/// A plan dropped before it was settled (the fire failed to read its reply,
/// or its task was aborted as the shard was let go): its takers are
/// answered without tasks, so that their claims look in Redis again. Its
/// reservations lapse; tasks the script may have leased come due again
/// when their leases end.
impl Drop for Plan {
    fn drop(&mut self) {
        for (taker, room) in std::mem::take(&mut self.offer.takers) {
            taker.fill(room, Vec::new());
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let left = self.backend.takers.release(&self.taker, self.backend.closed.is_closed(), self.backend.redis_ms());
        self.backend.give_back(left);
    }
}

impl Plan {
    /// A plan that offers `queues` nothing.
    fn none(queues: usize) -> Plan {
        Plan { offer: Offer::default(), sides: vec![(NO_SIDE, NO_SIDE, None); queues], grants: Vec::new() }
    }

    /// Whether it offers no taker: a fire has no one to hand tasks to.
    pub(crate) fn is_empty(&self) -> bool {
        self.offer.is_empty()
    }

    /// The script's arguments past its fixed ones: the takers and their
    /// most, then each queue's name and sides.
    pub(crate) fn args(&self, invocation: &mut redis::ScriptInvocation<'_>, queues: &[&str]) {
        invocation.arg(ANSWER_PAYLOAD_BYTES_MAX).arg(CLAIM_SCAN_MAX).arg(self.offer.takers.len());
        for (_, room) in &self.offer.takers {
            invocation.arg(room);
        }
        for (queue, (pull, push, _)) in queues.iter().zip(&self.sides) {
            invocation.arg(*queue);
            for side in [pull, push] {
                invocation.arg(side.taker).arg(side.lease_ms).arg(side.allowed);
            }
        }
    }
}

/// What `claim` takes, as its taker serves it.
fn wants(claim: &Claim<'_>) -> Wants {
    match claim.delivery() {
        Delivery::Pull => {
            Wants::Pull { queues: claim.queues().iter().map(|&q| q.into()).collect(), lease_ms: claim.lease_ms() }
        }
        Delivery::Push => Wants::Push,
    }
}

impl RedisBackend {
    /// A claim takes over a taker that a claim wanting the same left
    /// lingering, with what the fires put in it since.
    pub(crate) fn adopt_hand_over(&self, claim: &Claim<'_>) -> Option<Waiting<'_>> {
        let taker = self.takers.adopt(&wants(claim), claim.max())?;
        Some(Waiting { backend: self, taker })
    }

    /// Registers `claim` as waiting, so that this node's fires hand it tasks.
    pub(crate) fn wait_for_hand_over(&self, claim: &Claim<'_>) -> Waiting<'_> {
        Waiting { backend: self, taker: self.takers.register(wants(claim), claim.max()) }
    }

    /// As [`wait_for_hand_over`](Self::wait_for_hand_over), for a claim
    /// that has not looked yet: only if it may wait and its taker may linger
    /// (`takers.rs`, "When a claim registers").
    pub(crate) fn wait_early_for_hand_over(&self, claim: &Claim<'_>) -> Option<Waiting<'_>> {
        let wants = wants(claim);
        let early = claim.wait_ms() > 0 && wants.lingers();
        early.then(|| Waiting { backend: self, taker: self.takers.register_early(wants, claim.max()) })
    }

    /// What a fire of `queues` offers: the waiting claims that want them,
    /// each queue's leases, and its flow control reserved. A plan that
    /// cannot be made (a read failed) offers nothing: the fire files and
    /// hints as without waiting claims.
    pub(crate) async fn plan(&self, queues: &[&str], ahead: bool) -> Plan {
        let mut plan = Plan::none(queues.len());
        if self.takers.is_empty() {
            return plan;
        }
        let pushing = match self.pushing_queues().await {
            Ok(pushing) => pushing,
            Err(error) => {
                tracing::debug!(%error, "no hand-over: cannot read the queues that push");
                return plan;
            }
        };
        let pushes = |queue: &str| pushing.iter().any(|name| name == queue);
        plan.offer = self.takers.offer_to(queues, pushes, self.fires_together(), Instant::now(), ahead);
        if plan.offer.is_empty() {
            return plan;
        }
        if let Err(error) = self.plan_sides(queues, &mut plan).await {
            tracing::debug!(%error, "no hand-over: cannot read a queue's settings or flow control");
            self.settle_plan(plan).await;
            return Plan::none(queues.len());
        }
        plan
    }

    /// The fires that may be under way with one that begins now, which
    /// share the room of the takers they are offered (`takers.rs`): this
    /// node's fires under way (counted by [`Firing`], itself among them)
    /// and the shards whose timers ring for a deadline within
    /// [`FIRE_OVERLAP_MS`]. A shard that only looks at its heads (its sweep,
    /// or a deadline not yet come) is not a fire: counted, it made a lone
    /// fire hand a claim a share of its room (a flaky test, 2 of 5 tasks).
    fn fires_together(&self) -> usize {
        let soon = self.alarms.deadlines_by(SystemWallClock.now_ms() + FIRE_OVERLAP_MS);
        (self.firing.load(Ordering::SeqCst) + soon).max(1)
    }

    /// Counts a fire as under way until the guard is dropped.
    pub(crate) fn firing(&self) -> Firing<'_> {
        self.firing.fetch_add(1, Ordering::SeqCst);
        Firing(&self.firing)
    }

    /// Each queue's sides: the leases of its takers, and what its flow
    /// control grants them (reserved now, as a claim reserves before its
    /// scripts).
    async fn plan_sides(&self, queues: &[&str], plan: &mut Plan) -> Result<(), QueueError> {
        for (at, &queue) in queues.iter().enumerate() {
            let (pull, push) = plan.offer.by_queue[at];
            if pull.is_none() && push.is_none() {
                continue;
            }
            let settings = self.settings_of(queue).await?;
            for (taker, delivery) in [(pull, Delivery::Pull), (push, Delivery::Push)] {
                let Some(taker) = taker else { continue };
                let (of, room) = &plan.offer.takers[taker];
                let lease_ms = match of.wants() {
                    Wants::Pull { lease_ms, .. } => *lease_ms,
                    Wants::Push => crate::push::push_lease_ms(&settings),
                };
                let mut side = Side { taker: taker + 1, lease_ms, allowed: UNLIMITED };
                if settings.flow.is_limited() {
                    let grant = self.flow_acquire(queue, *room, lease_ms).await?;
                    side.allowed = grant.granted as i64;
                    plan.grants.push((at, queue.to_owned(), delivery, grant));
                }
                match delivery {
                    Delivery::Pull => plan.sides[at].0 = side,
                    Delivery::Push => plan.sides[at].1 = side,
                }
            }
            plan.sides[at].2 = settings.push.clone();
        }
        Ok(())
    }

    /// Reads the hand-overs that end a fire script's reply: per hand-over
    /// its taker, queue and tasks, then binds the flow control reserved and
    /// puts the tasks in the takers, those handed ahead of their due time
    /// once it comes. The script read Redis's clock at `script_us` (µs), and
    /// its reply came back at `replied`.
    pub(crate) async fn handed_over(
        &self,
        shard: u16,
        queues: &[&str],
        plan: Plan,
        reply: &mut Reply,
        (script_us, replied): (u64, Instant),
    ) -> Result<(), QueueError> {
        let mut handed: Vec<(usize, usize, Claimed)> = Vec::new();
        let read = (|| {
            while !reply.is_empty() {
                let taker = reply.u64()? as usize;
                let at = reply.u64()? as usize;
                let count = reply.u64()?;
                let (Some((of, _)), Some(&queue)) =
                    (plan.offer.takers.get(taker.wrapping_sub(1)), queues.get(at.wrapping_sub(1)))
                else {
                    return Err(crate::error::unexpected(format!("a hand-over to taker {taker} of queue {at}")));
                };
                let delivery = of.wants().delivery();
                let push = plan.sides[at - 1].2.as_ref().filter(|_| delivery == Delivery::Push);
                let queue: Arc<str> = queue.into();
                for _ in 0..count {
                    handed.push((taker - 1, at - 1, self.read_claimed(reply, shard, &queue, delivery, push)?));
                }
            }
            Ok(())
        })();
        self.handed.fetch_add(handed.len() as u64, Ordering::Relaxed);
        let ahead = handed.iter().filter(|(_, _, task)| task.run_at_ms * 1_000 > script_us).count();
        self.handed_ahead.fetch_add(ahead as u64, Ordering::Relaxed);
        self.settle(plan, handed, (script_us, replied)).await;
        read
    }

    /// Answers a plan's takers with no tasks: the fire handed none over.
    pub(crate) async fn settle_plan(&self, plan: Plan) {
        self.settle(plan, Vec::new(), (0, Instant::now())).await;
    }

    /// Binds the plan's flow control to the tasks `handed` (taker, queue,
    /// task), giving back what it did not use, then puts the tasks in their
    /// takers: every taker offered is answered, with tasks or without, and
    /// tasks whose claim ended meanwhile are given back. A taker handed
    /// tasks due after `script_us` (Redis's µs when the script ran; its
    /// reply came back at the instant with it) is answered when the latest
    /// of them is due ([`Self::answer_at_due`]).
    async fn settle(&self, mut plan: Plan, handed: Vec<(usize, usize, Claimed)>, script: (u64, Instant)) {
        let (script_us, replied) = script;
        for (at, queue, delivery, grant) in &plan.grants {
            let bound: Vec<Claimed> = handed
                .iter()
                .filter(|(taker, of, _)| of == at && plan.offer.takers[*taker].0.wants().delivery() == *delivery)
                .map(|(_, _, task)| task.clone())
                .collect();
            if let Err(error) = self.flow_bind(queue, grant, &bound).await {
                // As a claim's: the slots lapse with their reservation.
                tracing::debug!(%error, queue, "a hand-over's slots are freed when its reservation lapses");
            }
        }
        let takers = std::mem::take(&mut plan.offer.takers);
        let mut by_taker: Vec<Vec<Claimed>> = vec![Vec::new(); takers.len()];
        for (taker, _, task) in handed {
            by_taker[taker].push(task);
        }
        for ((taker, room), tasks) in takers.into_iter().zip(by_taker) {
            let due_us = tasks.iter().map(|task| task.run_at_ms * 1_000).max().unwrap_or(0);
            if due_us > script_us {
                let until = replied + Duration::from_micros(due_us - script_us);
                self.answer_at_due(taker, room, tasks, until);
            } else {
                self.give_back(taker.fill_at(room, tasks, self.redis_ms()));
            }
        }
    }

    /// Puts `tasks`, handed ahead, in `taker` at `until`, once the latest
    /// of them is due, never before: the script that handed them read
    /// Redis's clock before its reply came back, so Redis's clock reads the
    /// due time by then at the latest, as long as it runs no slower than
    /// this node's over those few milliseconds. The bound is this reply's
    /// alone, on the monotonic clock: not a bound kept from earlier replies,
    /// which another primary of a Cluster, a failover or a clock stepped
    /// since could make too early. Until then the taker stays offered, so
    /// its claim waits for them (one that may linger takes what other fires
    /// hand it meanwhile). The node's timer thread ends the hold to the
    /// microsecond on the wall clock, and a hold that this machine's wall
    /// clock, stepped forward, ended early is set again for what is left. If
    /// the node stops first, the tasks are given back, scheduled as they
    /// were.
    fn answer_at_due(&self, taker: Arc<Taker>, room: usize, tasks: Vec<Claimed>, until: Instant) {
        let (Some(backend), Ok(runtime)) = (self.me.upgrade(), tokio::runtime::Handle::try_current()) else {
            taker.fill(room, Vec::new());
            self.give_back(tasks);
            return;
        };
        let mut stop = self.stop.subscribe();
        runtime.spawn(async move {
            let due = Arc::new(tokio::sync::Notify::new());
            let stopped = loop {
                let now = Instant::now();
                if now >= until {
                    break false;
                }
                let left = until - now;
                backend.alarms.hold(SystemWallClock.now_us() + left.as_micros() as u64, due.clone());
                tokio::select! {
                    () = due.notified() => {}
                    _ = stop.wait_for(|&stop| stop) => break true,
                }
            };
            if stopped {
                taker.fill(room, Vec::new());
                backend.give_back(tasks);
            } else {
                backend.give_back(taker.fill_at(room, tasks, backend.redis_ms()));
            }
        });
    }

    /// Gives back, every [`LINGER_MS`] / 2, what the takers that lingered
    /// [`LINGER_MS`] hold, until the node closes.
    pub(crate) async fn expire_lingering(
        backend: std::sync::Weak<RedisBackend>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let every = Duration::from_millis(LINGER_MS / 2);
        loop {
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                _ = stop.wait_for(|&stop| stop) => return,
            }
            let Some(node) = backend.upgrade() else { return };
            node.give_back(node.takers.expire(Instant::now()));
        }
    }

    /// Gives `tasks` back to their queues, at once, in the background (see
    /// the [module](self) documentation).
    pub(crate) fn give_back(&self, tasks: Vec<Claimed>) {
        if tasks.is_empty() {
            return;
        }
        let (Some(backend), Ok(runtime)) = (self.me.upgrade(), tokio::runtime::Handle::try_current()) else {
            tracing::debug!(tasks = tasks.len(), "tasks handed over to no claim come back when their leases end");
            return;
        };
        runtime.spawn(async move {
            for task in tasks {
                match backend.task(task.id, "return", &[record::token(task.lease)]).await {
                    Ok(_) => {
                        backend.given_back.fetch_add(1, Ordering::Relaxed);
                        backend.settled(&task.queue, &[task.id]).await;
                    }
                    Err(error) => {
                        tracing::debug!(%error, task = task.id, "a task handed over to no claim comes back when its lease ends")
                    }
                }
            }
        });
    }
}
