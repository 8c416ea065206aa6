//! Claims: claim scripts on the shards that may have due tasks, at once, in
//! rounds until the claim is full or they are drained; a claim with nothing
//! due waits for a hint, in the contract's long-poll.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::Notify;

use hourglass_queue::limits::ANSWER_PAYLOAD_BYTES_MAX;
use hourglass_queue::long_poll::{long_poll, Look};
use hourglass_queue::{Claim, Claimed, Delivery, Flow, Pause, PushTarget, QueueError};

use crate::error::{storage, unexpected};
use crate::handover::Waiting;
use crate::options::{CLAIM_RECHECK_MS, CLAIM_SCAN_MAX, CLAIM_SHARE_FILLED, CLAIM_SHARE_MIN};
use crate::reply::Reply;
use crate::scripts::{ClaimStop, SCRIPTS};
use crate::takers::{Taken, Taker};
use crate::watch::QueueWatch;
use crate::{keys, record, RedisBackend};

/// A queue a claim takes from: its watch (for the claim's delivery), the
/// lease of the tasks it hands out, its push target and its flow control.
struct Watched {
    queue: Arc<str>,
    watch: Arc<QueueWatch>,
    lease_ms: u64,
    push: Option<Arc<PushTarget>>,
    flow: Flow,
}

/// A shard that may have due tasks of a queue a claim waits on.
struct Candidate<'a> {
    of: &'a Watched,
    shard: u16,
    /// The queue's hint count of the shard when the claim began: handed back
    /// if the shard is found drained.
    hints: u64,
}

/// After a look that found nothing: the queues' wake-ups counted when it
/// began, when the first timed pause it met ends (Redis ms), and when the
/// first token it waited for comes (ms from then).
type FoundNothing = (u64, Option<u64>, Option<u64>);

/// The set of due tasks a delivery takes from.
fn due_set(delivery: Delivery) -> &'static str {
    match delivery {
        Delivery::Pull => "r",
        Delivery::Push => "R",
    }
}

/// `left` tasks asked from the first of `candidates` (taken from it), at
/// least `share_min` from each unless `left` is less, so from as few as that
/// takes.
fn shares<'a>(candidates: &mut Vec<Candidate<'a>>, left: usize, share_min: usize) -> Vec<(Candidate<'a>, usize)> {
    let asked = candidates.len().min(left.div_ceil(share_min));
    if asked == 0 {
        return Vec::new();
    }
    let share = left / asked;
    let mut extra = left % asked;
    candidates
        .drain(..asked)
        .map(|at| {
            let ask = share + usize::from(extra > 0);
            extra = extra.saturating_sub(1);
            (at, ask)
        })
        .collect()
}

impl RedisBackend {
    /// The first due task of `queue` in `shard`, in claim order, and how
    /// many are due there; `None` if none.
    async fn look(&self, shard: u16, queue: &str, delivery: Delivery) -> Result<Option<(String, usize)>, QueueError> {
        let key = self.keys.queue(shard, due_set(delivery), queue);
        let (first, due): (Vec<String>, usize) =
            redis::pipe().zrange(&key, 0, 0).zcard(&key).query_async(&mut self.conn()).await.map_err(storage)?;
        Ok(first.into_iter().next().map(|first| (first, due)))
    }

    /// One claim script on `queue` of `shard`, for at most `max` tasks and
    /// `bytes_max` bytes of payloads (at least one task, if one is due):
    /// the tasks, with the queue's pause if it is paused, or else why it
    /// handed out fewer than `max`.
    async fn claim_shard(
        &self,
        shard: u16,
        of: &Watched,
        max: usize,
        bytes_max: usize,
        delivery: Delivery,
    ) -> Result<(Vec<Claimed>, Result<ClaimStop, Pause>), QueueError> {
        let queue = &*of.queue;
        let mut invocation = SCRIPTS.claim.key(self.keys.shard(shard, "t"));
        invocation
            .key(self.keys.shard(shard, "p"))
            .key(self.keys.shard(shard, "h"))
            .key(self.keys.shard(shard, "lseq"))
            .key(self.keys.shard(shard, "paused"));
        for key in self.keys.queue_keys(shard, queue) {
            invocation.key(key);
        }
        invocation
            .arg(&self.channel)
            .arg(shard)
            .arg(queue)
            .arg(max)
            .arg(of.lease_ms)
            .arg(bytes_max)
            .arg(CLAIM_SCAN_MAX);
        invocation.arg(match delivery {
            Delivery::Pull => "pull",
            Delivery::Push => "push",
        });
        invocation.arg(record::lease_secret());
        let mut reply = Reply::new(invocation.invoke_async(&mut self.conn()).await.map_err(storage)?)?;
        self.saw_time(reply.u64()?);
        let stop = match reply.int()? {
            -1 => {
                let code = reply.u64()?;
                Ok(ClaimStop::from_reply(code).ok_or_else(|| unexpected(format!("claim stopped for {code}")))?)
            }
            0 => Err(Pause::Indefinitely),
            until => Err(Pause::Until(until as u64)),
        };
        let mut claimed = Vec::new();
        while !reply.is_empty() {
            claimed.push(self.read_claimed(&mut reply, shard, &of.queue, delivery, of.push.as_ref())?);
        }
        self.count_delivered(&claimed);
        Ok((claimed, stop))
    }

    /// One task as the prelude's `hand_out` writes it (seq, payload, attempt,
    /// lease token, lease end, due time, its own target), of `queue` in
    /// `shard`; a push task gets its own target or else the queue's `push`.
    pub(crate) fn read_claimed(
        &self,
        reply: &mut Reply,
        shard: u16,
        queue: &Arc<str>,
        delivery: Delivery,
        push: Option<&Arc<PushTarget>>,
    ) -> Result<Claimed, QueueError> {
        let seq = reply.u64()?;
        let payload = reply.payload()?;
        let attempt = u32::try_from(reply.u64()?).unwrap_or(u32::MAX);
        let lease = record::lease(&reply.bytes()?)?;
        let lease_until_ms = reply.u64()?;
        let run_at_ms = reply.u64()?;
        let own = reply.bytes()?;
        let target = match delivery {
            Delivery::Pull => None,
            Delivery::Push if own.is_empty() => push.cloned(),
            Delivery::Push => {
                let value = rmpv::decode::read_value(&mut &own[..]).map_err(|_| unexpected("a task's target"))?;
                PushTarget::resolve(Some(&Arc::new(crate::push::target_of(&value)?)), push)
            }
        };
        let id = keys::id(shard, seq);
        self.remember(id, queue);
        Ok(Claimed { id, queue: queue.clone(), payload, attempt, lease, lease_until_ms, run_at_ms, target })
    }

    /// Frees, in the background, the flow-control slots of `dropped` (their
    /// cancel may have freed them before this node's fire bound them), one
    /// release a queue.
    fn settle_dropped(&self, dropped: Vec<Claimed>) {
        if dropped.is_empty() {
            return;
        }
        let (Some(backend), Ok(runtime)) = (self.me.upgrade(), tokio::runtime::Handle::try_current()) else { return };
        let mut by_queue: Vec<(Arc<str>, Vec<u64>)> = Vec::new();
        for task in dropped {
            match by_queue.iter_mut().find(|(queue, _)| *queue == task.queue) {
                Some((_, ids)) => ids.push(task.id),
                None => by_queue.push((task.queue, vec![task.id])),
            }
        }
        runtime.spawn(async move {
            for (queue, ids) in by_queue {
                backend.settled(&queue, &ids).await;
            }
        });
    }

    /// What `taker` holds for its claim, less the tasks whose cancel this
    /// node heard (`revoked.rs`); if that leaves none, as if it held none.
    fn take_live(&self, taker: &Taker) -> Taken {
        loop {
            match taker.take() {
                Taken::Tasks(mut tasks) => {
                    let dropped = self.revoked.drop_cancelled(&mut tasks, Instant::now());
                    self.dropped_cancelled.fetch_add(dropped.len() as u64, Ordering::Relaxed);
                    self.settle_dropped(dropped);
                    if !tasks.is_empty() {
                        return Taken::Tasks(tasks);
                    }
                }
                other => return other,
            }
        }
    }

    /// Counts `claimed` as delivered now (by this node), with their lateness.
    pub(crate) fn count_delivered(&self, claimed: &[Claimed]) {
        let now_us = self.redis_us();
        for task in claimed {
            let lateness_us = (now_us - task.run_at_ms as i64 * 1_000).max(0) as u64;
            self.figures.count(&task.queue, |c, t| {
                c.delivered += 1;
                c.lateness.record(lateness_us);
                t.delivered += 1;
            });
        }
    }

    /// Claims up to `max` due tasks of `queues` without waiting, from the
    /// shards that may have due tasks (hinted since they were last found
    /// without), in rounds of claim scripts sent at once, until `max` are
    /// handed out or every such shard was found drained: a claim hands out
    /// every due task it can, wherever they are.
    ///
    /// The first round is planned by [`first_round`](Self::first_round).
    /// A shard that handed out all it was asked for may have more: the next
    /// round asks those for what is missing; once none is left, the shards
    /// not asked yet, one task or more each. Each round finds at least one
    /// shard drained or fills the claim, so there are at most one more
    /// rounds than shards asked. Payloads are bounded as the contract says
    /// ([`ANSWER_PAYLOAD_BYTES_MAX`]): each script of a round is given its
    /// share of what is left, and a script stopped by it ends the claim.
    /// Returns the tasks, and when the first timed pause met ends (Redis ms).
    async fn try_claim(
        &self,
        queues: &[&Watched],
        max: usize,
        delivery: Delivery,
    ) -> Result<(Vec<Claimed>, Option<u64>), QueueError> {
        let mut unasked = Vec::new();
        for &of in queues {
            for (shard, hints) in of.watch.maybe_due() {
                unasked.push(Candidate { of, shard, hints });
            }
        }
        let filled = queues.iter().all(|of| of.watch.filled());
        let share_min = if filled { CLAIM_SHARE_FILLED } else { CLAIM_SHARE_MIN };
        let (mut asks, shared) = self.first_round(&mut unasked, max, share_min, delivery).await?;
        // A first round of shares says, of each queue it asked, whether its
        // shards held more than shares of CLAIM_SHARE_MIN or more: a full
        // answer to a smaller ask says nothing, a short one says they did not.
        let mut first_round = shared;
        let mut held_more: Vec<(&Watched, bool)> = Vec::new();
        let mut claimed = Vec::new();
        let mut pause_ends: Option<u64> = None;
        let mut bytes = 0;
        // Shards that handed out all they were asked for, not asked again yet.
        let mut more = Vec::new();
        while !asks.is_empty() {
            let bytes_max = (ANSWER_PAYLOAD_BYTES_MAX - bytes) / asks.len();
            let claims = asks.iter().map(|(at, ask)| self.claim_shard(at.shard, at.of, *ask, bytes_max, delivery));
            let answers = futures_util::future::join_all(claims).await;
            let mut full = false;
            for ((at, ask), answer) in asks.into_iter().zip(answers) {
                let (got, stop) = answer?;
                if first_round && (got.len() < ask || ask >= CLAIM_SHARE_MIN) {
                    let answered_all = got.len() == ask;
                    match held_more.iter_mut().find(|(of, _)| std::ptr::eq(*of, at.of)) {
                        Some((_, more)) => *more &= answered_all,
                        None => held_more.push((at.of, answered_all)),
                    }
                }
                bytes += got.iter().map(|task| task.payload.len()).sum::<usize>();
                match stop {
                    Ok(_) if got.len() == ask => more.push(at),
                    Ok(ClaimStop::Drained) => at.of.watch.found_none(at.shard, at.hints),
                    Ok(ClaimStop::Bytes) => full = true,
                    Ok(ClaimStop::Scanned) => more.push(at),
                    Err(Pause::Until(ms)) => pause_ends = Some(pause_ends.map_or(ms, |end| end.min(ms))),
                    Err(_) => {}
                }
                claimed.extend(got);
            }
            if std::mem::take(&mut first_round) {
                for (of, more) in held_more.drain(..) {
                    of.watch.first_round_filled(more);
                }
            }
            let left = max - claimed.len();
            if full || left == 0 || bytes >= ANSWER_PAYLOAD_BYTES_MAX {
                break;
            }
            let next = if more.is_empty() { &mut unasked } else { &mut more };
            asks = shares(next, left, 1);
        }
        Ok((claimed, pause_ends))
    }

    /// The first round of a claim of `max` from the shards `unasked`, taken
    /// from it. With room for at least one task from each (or
    /// [`CLAIM_SHARE_MIN`] from some), they are asked for their shares of
    /// `max` at once, `share_min` or more each ([`CLAIM_SHARE_MIN`], or
    /// [`CLAIM_SHARE_FILLED`] after a claim whose first round got all it
    /// asked), from as few shards as that takes, starting at a shard in turn
    /// so that claims spread.
    /// Otherwise (a claim of one task among several shards, as beanstalkd's
    /// `reserve`) each is looked at first (its first due task, and how many
    /// it has), and asked in claim order (priority, due time, id) for as many
    /// as it has until `max` are asked for: a claim of one task gets the most
    /// urgent of all. A claim of several gets each shard's most urgent, which
    /// across shards is claim order only roughly. Returns the asks, and
    /// whether they are shares (not sized by what each shard has).
    async fn first_round<'a>(
        &self,
        unasked: &mut Vec<Candidate<'a>>,
        max: usize,
        share_min: usize,
        delivery: Delivery,
    ) -> Result<(Vec<(Candidate<'a>, usize)>, bool), QueueError> {
        if max >= unasked.len() || max >= CLAIM_SHARE_MIN {
            let start = self.next_shard.fetch_add(1, Ordering::Relaxed) as usize % unasked.len().max(1);
            unasked.rotate_left(start);
            return Ok((shares(unasked, max, share_min), true));
        }
        let looks = unasked.iter().map(|at| self.look(at.shard, &at.of.queue, delivery));
        let looks = futures_util::future::join_all(looks).await;
        let mut found = Vec::new();
        for (at, look) in std::mem::take(unasked).into_iter().zip(looks) {
            match look? {
                Some((first, due)) => found.push((first, at, due)),
                None => at.of.watch.found_none(at.shard, at.hints),
            }
        }
        found.sort_by(|a, b| (&a.0, a.1.shard).cmp(&(&b.0, b.1.shard)));
        let mut asks = Vec::new();
        let mut asked = 0;
        for (_, at, due) in found {
            if asked < max {
                let ask = due.clamp(1, max - asked);
                asked += ask;
                asks.push((at, ask));
            } else {
                unasked.push(at);
            }
        }
        Ok((asks, false))
    }

    /// The queues a claim takes from, as they are now: the claim's own for
    /// a pull claim, every queue that may push for a push claim; each with
    /// its settings as this node last read them.
    async fn watched(&self, claim: &Claim<'_>) -> Result<Vec<Watched>, QueueError> {
        let names: Vec<String> = match claim.delivery() {
            Delivery::Pull => claim.queues().iter().map(|&queue| queue.to_owned()).collect(),
            Delivery::Push => self.pushing_queues().await?.to_vec(),
        };
        let mut watched = Vec::with_capacity(names.len());
        for name in names {
            let settings = self.settings_of(&name).await?;
            let (watch, lease_ms) = match claim.delivery() {
                Delivery::Pull => (self.watch.of(&name), claim.lease_ms()),
                Delivery::Push => (self.watch.of_push(&name), crate::push::push_lease_ms(&settings)),
            };
            let push = settings.push.filter(|_| claim.delivery() == Delivery::Push);
            watched.push(Watched { queue: name.into(), watch, lease_ms, push, flow: settings.flow });
        }
        Ok(watched)
    }

    /// One look of a claim: the queues without flow control together
    /// ([`try_claim`](Self::try_claim)), then each with flow control on its
    /// own, for what its slots and tokens allow across every node
    /// (`flow.rs`). Returns the tasks, when the first timed pause met ends,
    /// and when the first queue held back by its rate gets a token (ms from now).
    async fn claim_once(
        &self,
        watched: &[Watched],
        max: usize,
        delivery: Delivery,
    ) -> Result<(Vec<Claimed>, Option<u64>, Option<u64>), QueueError> {
        let (limited, free): (Vec<&Watched>, Vec<&Watched>) = watched.iter().partition(|of| of.flow.is_limited());
        let (mut claimed, mut pause_ends) =
            if free.is_empty() { (Vec::new(), None) } else { self.try_claim(&free, max, delivery).await? };
        let mut token_in_ms: Option<u64> = None;
        for of in limited {
            let left = max - claimed.len();
            if left == 0 {
                break;
            }
            let grant = self.flow_acquire(&of.queue, left, of.lease_ms).await?;
            if let Some(wait_ms) = grant.wait_ms {
                token_in_ms = Some(token_in_ms.map_or(wait_ms, |first| first.min(wait_ms)));
            }
            if grant.granted == 0 {
                continue;
            }
            // On an error the slots lapse with their reservation, and the
            // tokens are spent.
            let (got, ends) = self.try_claim(&[of], grant.granted, delivery).await?;
            self.flow_bind(&of.queue, &grant, &got).await?;
            if let Some(end) = ends {
                pause_ends = Some(pause_ends.map_or(end, |first: u64| first.min(end)));
            }
            claimed.extend(got);
        }
        Ok((claimed, pause_ends, token_in_ms))
    }

    /// A claim: [`claim_once`](Self::claim_once) in the contract's
    /// long-poll, woken by the hints of its queues (and their pauses' and
    /// settings' changes, and slots freed under their caps), and looking
    /// again every [`CLAIM_RECHECK_MS`], when a timed pause ends and when a
    /// token comes.
    ///
    /// The long-poll looks twice in a row when the first look finds nothing:
    /// once more after arming the wake-ups, for a wake-up that came between.
    /// Here that second look asks Redis only if a queue was woken since the
    /// first began: the first look marked every shard it found without due
    /// tasks, and what it did not ask it would not ask now either. A claim
    /// that waits costs the round trips of one look per wake-up, as before.
    pub(crate) async fn claim_tasks(&self, claim: Claim<'_>) -> Result<Vec<Claimed>, QueueError> {
        let (max, delivery) = (claim.max(), claim.delivery());
        let found_nothing: Mutex<Option<FoundNothing>> = Mutex::new(None);
        // Registered at once if it may wait and its taker may linger, else
        // once a look found nothing: a fire on this node may hand tasks to
        // it; removed when the claim ends (`handover.rs`).
        let waiting: Mutex<Option<Waiting<'_>>> = Mutex::new(None);
        let (backend, claim, found_nothing, waiting) = (self, &claim, &found_nothing, &waiting);
        long_poll(Duration::from_millis(claim.wait_ms()), move || async move {
            if backend.closed.is_closed() {
                return Ok(Look::Closed);
            }
            let watched = backend.watched(claim).await?;
            let mut wake_on: Vec<Arc<Notify>> = watched.iter().map(|of| of.watch.notify.clone()).collect();
            if waiting.lock().is_none() {
                // What this node's fires handed the taker a claim that wanted
                // the same left lingering; or else, if it may wait and its
                // taker may linger, one of its own at once, offered to the
                // fires while this look asks Redis.
                let adopted = backend.adopt_hand_over(claim);
                *waiting.lock() = adopted.or_else(|| backend.wait_early_for_hand_over(claim));
            }
            let taker = waiting.lock().as_ref().map(|waiting| waiting.taker.clone());
            if let Some(taker) = &taker {
                wake_on.push(taker.notify());
                match backend.take_live(taker) {
                    Taken::Tasks(tasks) => {
                        backend.count_delivered(&tasks);
                        return Ok(Look::Found(tasks));
                    }
                    // Not racing the fire for its tasks: it wakes us when it answers.
                    Taken::Offered => {
                        let look_again_in = Some(Duration::from_millis(CLAIM_RECHECK_MS));
                        return Ok(Look::Nothing { wake_on, look_again_in });
                    }
                    Taken::Nothing => {}
                }
            }
            let woken = watched.iter().fold(0u64, |sum, of| sum.wrapping_add(of.watch.woken()));
            let first = found_nothing.lock().take();
            let (pause_ends, token_in_ms) = match first {
                Some((seen, pause_ends, token_in_ms)) if seen == woken => (pause_ends, token_in_ms),
                _ => {
                    let (claimed, pause_ends, token_in_ms) = backend.claim_once(&watched, max, delivery).await?;
                    if !claimed.is_empty() {
                        return Ok(Look::Found(claimed));
                    }
                    if first.is_none() {
                        *found_nothing.lock() = Some((woken, pause_ends, token_in_ms));
                    }
                    (pause_ends, token_in_ms)
                }
            };
            if let Some(taker) = &taker {
                taker.looked();
            } else {
                let registered = backend.wait_for_hand_over(claim);
                wake_on.push(registered.taker.notify());
                *waiting.lock() = Some(registered);
            }
            let mut look_again_in = Duration::from_millis(CLAIM_RECHECK_MS);
            if let Some(end) = pause_ends {
                look_again_in = look_again_in.min(Duration::from_millis(end.saturating_sub(backend.redis_ms())));
            }
            if let Some(token_in_ms) = token_in_ms {
                look_again_in = look_again_in.min(Duration::from_millis(token_in_ms.max(1)));
            }
            Ok(Look::Nothing { wake_on, look_again_in: Some(look_again_in) })
        })
        .await
    }
}
