//! A node's share of the work: the membership, its hold on shards, each
//! owned shard's timer, and the channel of hints.
//!
//! Every node heartbeats into one sorted set every `lease /
//! RENEWALS_PER_LEASE`, reading the set with the same round trip, and counts
//! as alive while its heartbeat is younger than a lease. The live nodes,
//! sorted, each take the shards `s` with `s % nodes == rank`: a node acquires
//! those that are free or held by a node no longer alive, and lets go of
//! those no longer its own (a release hints the others, whose membership
//! ticks at once). The heartbeat is the only lease: a shard's holder has no
//! time to live, so an idle node renews nothing shard by shard. A node that
//! dies stops beating, and the others take its shards within a lease and a
//! renewal period. Each acquisition takes a new epoch from a counter never
//! deleted, and the holder (`node:epoch`) is what the fire script checks: a
//! node that was stopped (SIGSTOP, a long pause) past its lease is refused
//! when it resumes if another took the shard, and drops it; having missed its
//! own heartbeats, it reads each of its shards' holders and lets go of those
//! taken.
//!
//! With no time to live, a holder outlives its node's interest in it only by
//! a fault (a release whose reply was lost, Redis's data rolled back): a live
//! node named holder of a shard it does not hold. Nothing fires it while no
//! rule takes it; so the node whose turn it is takes it from a live holder
//! that kept it [`KEPT_LEASES`] leases past its turn (a node gives a shard
//! back within one: its next read of the membership). Fencing keeps that
//! safe should the holder hold it after all. A node refused by the fence
//! takes the shard back at once if it is still its turn, rather than at its
//! next tick.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::AsyncCommands;
use tokio::sync::Notify;

use hourglass_queue::{NodeStats, QueueError};

use crate::alarms::Ring;
use crate::conn::{client, redact, subscribe_urls};
use crate::error::{storage, unexpected};
use crate::health::is_unreachable;
use crate::keys;
use crate::options::{FIRE_BATCH_MAX, FIRE_QUEUES_MAX, RENEWALS_PER_LEASE, SWEEP_IDLE_MS, SWEEP_MS};
use crate::record;
use crate::reply::Reply;
use crate::scripts::SCRIPTS;
use crate::RedisBackend;

/// Leases past its turn a live node may keep a shard before the node whose
/// turn it is takes it: a node gives a shard back at its next read of the
/// membership, within a lease.
const KEPT_LEASES: u64 = 2;

/// A shard's heads (`h`): each queue's earliest due time or lease end, by
/// member (`s:QUEUE`, `l:QUEUE`), earliest first.
pub(super) type Heads = Vec<(String, u64)>;

/// One shard this node holds.
struct Held {
    /// `node:epoch`: what the fire script checks.
    holder: String,
    /// Wakes the shard's timer task.
    wake: Arc<Wake>,
    task: tokio::task::JoinHandle<()>,
}

/// What wakes a shard's timer task: its alarm, a hint of an earlier
/// deadline than the heads it knows (then it reads them again), or the
/// node's sweep of its idle shards ([`sweep_idle`]).
#[derive(Default)]
struct Wake {
    notify: Arc<Notify>,
    hinted: std::sync::atomic::AtomicBool,
    /// The shard's heads were empty when last read, and it waits with no
    /// alarm: the node's sweep of idle shards looks at it.
    idle: std::sync::atomic::AtomicBool,
}

impl Wake {
    fn hint(&self) {
        self.hinted.store(true, Ordering::SeqCst);
        self.notify.notify_one();
    }
}

/// The shards this node holds, and when its heartbeat last answered.
#[derive(Default)]
pub(crate) struct Owned {
    held: Mutex<HashMap<u16, Held>>,
    beat_at: Mutex<Option<Instant>>,
    /// The live nodes as last read, sorted by name.
    nodes: Mutex<Vec<String>>,
    /// One tick at a time (the membership's, [`RedisBackend::beat`], a
    /// shard taken back after a fence), and none once the node leaves.
    ticking: tokio::sync::Mutex<()>,
    /// Shards of this node's turn that a live node's holder keeps: the
    /// holder, and when this node first found it there.
    kept: Mutex<HashMap<u16, (String, Instant)>>,
    /// Wakes the membership for a tick now: a node gave a shard back (hint
    /// `g SHARD`), which may be this node's turn. One tick for any number.
    tick_soon: Arc<Notify>,
}

impl Owned {
    pub(crate) fn holders(&self) -> Vec<(u16, String)> {
        let mut held: Vec<(u16, String)> = self.held.lock().iter().map(|(&s, h)| (s, h.holder.clone())).collect();
        held.sort();
        held
    }

    pub(crate) fn abort_all(&self) {
        for (_, held) in self.held.lock().drain() {
            held.task.abort();
        }
    }

    fn holder(&self, shard: u16) -> Option<String> {
        self.held.lock().get(&shard).map(|held| held.holder.clone())
    }

    fn wake(&self, shard: u16) {
        if let Some(held) = self.held.lock().get(&shard) {
            held.wake.hint();
        }
    }

    /// The shards held here that wait with no deadline, and their wake-ups.
    fn idle(&self) -> Vec<(u16, Arc<Wake>)> {
        let held = self.held.lock();
        let idle = held.iter().filter(|(_, held)| held.wake.idle.load(Ordering::SeqCst));
        idle.map(|(&shard, held)| (shard, held.wake.clone())).collect()
    }

    fn wake_all(&self) {
        for held in self.held.lock().values() {
            held.wake.hint();
        }
    }

    /// Whether `holder`, found holding `shard` in this node's turn, has kept
    /// it longer than `limit` since this node first found it there.
    fn kept_past(&self, shard: u16, holder: &str, limit: Duration) -> bool {
        let mut kept = self.kept.lock();
        match kept.get(&shard) {
            Some((seen, since)) if seen == holder => since.elapsed() > limit,
            _ => {
                kept.insert(shard, (holder.to_owned(), Instant::now()));
                false
            }
        }
    }

    /// Lets go of `shard` if `holder` still holds it here: whether it did.
    fn drop_shard(&self, shard: u16, holder: &str) -> bool {
        let mut owned = self.held.lock();
        if owned.get(&shard).is_none_or(|held| held.holder != holder) {
            return false;
        }
        owned.remove(&shard).inspect(|held| held.task.abort()).is_some()
    }
}

/// Starts the membership, the channel's listener, and the expiry of
/// lingering push takers (`takers.rs`).
pub(crate) fn start(backend: &Arc<RedisBackend>) {
    let weak = Arc::downgrade(backend);
    let stop = backend.stop.subscribe();
    tokio::spawn(membership(weak.clone(), stop.clone()));
    tokio::spawn(RedisBackend::expire_lingering(weak.clone(), stop.clone()));
    tokio::spawn(sweep_idle(weak.clone(), stop.clone()));
    tokio::spawn(listen(weak, stop));
}

async fn membership(backend: Weak<RedisBackend>, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        let Some(node) = backend.upgrade() else { return };
        let every = Duration::from_millis(node.options.shard_lease_ms / RENEWALS_PER_LEASE);
        let soon = node.owned.tick_soon.clone();
        match node.tick().await {
            Ok(()) => node.health.answered(),
            Err(QueueError::StoreUnavailable(failure)) => match failure.source() {
                Some(redis) => node.health.unreachable(redis),
                None => node.health.unreachable(&failure),
            },
            Err(error) => tracing::warn!(%error, "cannot heartbeat, or take or give back shards"),
        }
        drop(node);
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = soon.notified() => {}
            _ = stop.wait_for(|&stop| stop) => break,
        }
    }
}

/// Hints from every node: `r SHARD US QUEUE` (due tasks), `e SHARD US QUEUE`
/// and `E SHARD US QUEUE` (a claim script left no due task for pull or push
/// claims), each with its script's Redis time in µs; `h SHARD MS` (an
/// earlier deadline for the shard's owner), `g SHARD` (a node gave the shard
/// back: the membership ticks at once), `p QUEUE` (a pause changed), `s
/// QUEUE` (its settings changed), `q QUEUE` (it may push now), `x SHARD SEQ`
/// (a leased task was cancelled: `revoked.rs`).
async fn listen(backend: Weak<RedisBackend>, mut stop: tokio::sync::watch::Receiver<bool>) {
    use futures_util::StreamExt;
    let Some(node) = backend.upgrade() else { return };
    let (urls, channel, ca) = (subscribe_urls(&node.options.target), node.channel.clone(), node.options.ca.clone());
    drop(node);
    let mut at = 0;
    loop {
        let url = &urls[at % urls.len()];
        at += 1;
        let subscribed = async {
            let mut pubsub = client(url, ca.as_ref())?.get_async_pubsub().await?;
            pubsub.subscribe(&channel).await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        match subscribed.await {
            Ok(pubsub) => {
                let Some(node) = backend.upgrade() else { return };
                // Hints may have been missed while no subscription stood.
                node.forget_settings();
                node.watch.wake_all(node.redis_us_since_epoch());
                node.owned.wake_all();
                node.listening.store(true, Ordering::SeqCst);
                drop(node);
                let mut messages = pubsub.into_on_message();
                loop {
                    tokio::select! {
                        message = messages.next() => {
                            let Some(message) = message else { break };
                            let Some(node) = backend.upgrade() else { return };
                            if let Ok(text) = message.get_payload::<String>() {
                                node.hinted(&text);
                            }
                        }
                        _ = stop.wait_for(|&stop| stop) => return,
                    }
                }
                if let Some(node) = backend.upgrade() {
                    node.listening.store(false, Ordering::SeqCst);
                }
                tracing::warn!(url = %redact(url), "the hint channel closed; subscribing again");
            }
            // An outage is the heartbeat's to log.
            Err(error) if is_unreachable(&error) => {
                tracing::debug!(url = %redact(url), %error, "cannot subscribe to hints")
            }
            Err(error) => tracing::warn!(url = %redact(url), %error, "cannot subscribe to hints"),
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = stop.wait_for(|&stop| stop) => return,
        }
    }
}

impl RedisBackend {
    fn hinted(&self, text: &str) {
        let mut words = text.splitn(3, ' ');
        match (words.next(), words.next(), words.next()) {
            // Due tasks, and a drain, each with its script's Redis time (µs).
            (Some(kind @ ("r" | "e" | "E")), Some(shard), Some(rest)) => {
                let Some((at_us, queue)) = rest.split_once(' ') else { return };
                let (Ok(shard), Ok(at_us)) = (shard.parse(), at_us.parse()) else { return };
                match kind {
                    "r" => self.watch.hint(queue, shard, at_us),
                    _ => self.watch.drained(queue, shard, at_us, kind == "E"),
                }
            }
            (Some("h"), Some(shard), Some(_)) => {
                if self.losing_head_hints.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(shard) = shard.parse() {
                    self.owned.wake(shard);
                }
            }
            (Some("x"), Some(shard), Some(seq)) => {
                if let (Ok(shard), Ok(seq)) = (shard.parse(), seq.parse()) {
                    self.revoked.revoke(keys::id(shard, seq), Instant::now());
                }
            }
            (Some("g"), Some(_), None) => self.owned.tick_soon.notify_one(),
            (Some("p"), Some(queue), None) => self.watch.wake(queue),
            (Some("s"), Some(queue), None) => self.settings_changed(queue),
            (Some("q"), Some(_), None) => self.pushing_changed(),
            _ => tracing::debug!(text, "an unknown hint"),
        }
    }

    /// Heartbeats, reads who is alive, and takes or gives back each shard
    /// accordingly. A node whose heartbeat went unanswered for most of a
    /// lease (three quarters: from the start of the last that answered to
    /// the answer of this one) may have been taken for dead, and its shards
    /// taken: it reads their holders and lets go of those no longer its own
    /// (what another holds is answered `held`, and taken at a later tick,
    /// once given back).
    pub(super) async fn tick(self: &Arc<Self>) -> Result<(), QueueError> {
        let _one = self.owned.ticking.lock().await;
        if *self.stop.borrow() {
            return Ok(());
        }
        let started = Instant::now();
        let mut nodes = self.heartbeat(self.redis_ms()).await?;
        // By name: the same order on every node, whatever their heartbeats.
        nodes.sort_unstable();
        *self.owned.nodes.lock() = nodes.clone();
        let previous = self.owned.beat_at.lock().replace(started);
        let stall = Duration::from_millis(self.options.shard_lease_ms * 3 / 4);
        if let Some(stalled) = previous.map(|at| at.elapsed()).filter(|&gap| gap > stall) {
            tracing::warn!(?stalled, "this node's heartbeats stalled; reading its shards' holders");
            self.let_go_of_taken().await;
        }
        let turn = Turn::of(&nodes, &self.node);
        let work = (0..self.shards).map(|shard| {
            let node = self.clone();
            async move {
                match (node.owned.holder(shard), turn.mine(shard)) {
                    (None, true) => node.take(shard).await?,
                    // Given back before it is let go of here: a release that
                    // fails leaves it held and fired here, and tried again.
                    (Some(holder), false) => {
                        node.release(shard, &holder).await?;
                        node.let_go(shard, &holder);
                    }
                    _ => {}
                }
                Ok::<_, QueueError>(())
            }
        });
        let done = futures_util::future::join_all(work).await;
        let held = self.owned.held.lock().keys().copied().collect::<Vec<_>>();
        self.owned.kept.lock().retain(|shard, _| turn.mine(*shard) && !held.contains(shard));
        done.into_iter().collect()
    }

    /// Takes `shard` if it is free, or held by a node no longer alive (or
    /// kept past its turn), and starts its timer.
    async fn take(self: &Arc<Self>, shard: u16) -> Result<(), QueueError> {
        if let Some(holder) = self.acquire(shard).await? {
            self.hold(shard, holder);
        }
        Ok(())
    }

    /// Takes `shard` back at once, if it is still this node's turn, after
    /// its holder here was refused by the fence (the node that took it may
    /// have given it back already).
    async fn take_back(self: Arc<Self>, shard: u16) {
        let _one = self.owned.ticking.lock().await;
        let turn = Turn::of(&self.owned.nodes.lock(), &self.node);
        if *self.stop.borrow() || !turn.mine(shard) || self.owned.holder(shard).is_some() {
            return;
        }
        if let Err(error) = self.take(shard).await {
            tracing::debug!(shard, %error, "cannot take a shard back; the next tick will");
        }
    }

    /// Reads the holder of every shard held here and lets go of those held
    /// by another now (or by none). One that cannot be read is kept: the
    /// fence refuses its fires if it was taken.
    async fn let_go_of_taken(&self) {
        let held = self.owned.holders();
        let read = futures_util::future::join_all(held.iter().map(|(shard, _)| {
            let mut conn = self.conn();
            let key = self.keys.shard(*shard, "owner");
            async move { conn.get::<_, Option<String>>(key).await }
        }))
        .await;
        for ((shard, holder), now) in held.into_iter().zip(read) {
            if let Ok(now) = now {
                if now.as_deref() != Some(holder.as_str()) {
                    tracing::info!(shard, holder, now, "a shard was taken while this node stalled");
                    self.let_go(shard, &holder);
                }
            }
        }
    }

    /// The live nodes, by name, with their heartbeats and the shards each
    /// holds (by their holders: a node that died holds its shards until
    /// another takes them).
    pub(crate) async fn nodes(&self) -> Result<Vec<NodeStats>, QueueError> {
        let mut conn = self.conn();
        let heartbeats: Vec<(String, u64)> =
            conn.zrange_withscores(self.keys.global("nodes"), 0, -1).await.map_err(storage)?;
        let owners = futures_util::future::join_all((0..self.shards).map(|shard| {
            let mut conn = self.conn();
            let key = self.keys.shard(shard, "owner");
            async move { conn.get::<_, Option<String>>(key).await }
        }))
        .await;
        let mut nodes: Vec<NodeStats> = heartbeats
            .into_iter()
            .map(|(name, heartbeat_ms)| NodeStats { this: name == self.node, name, heartbeat_ms, shards: Vec::new() })
            .collect();
        for (shard, owner) in (0..self.shards).zip(owners) {
            // `node:epoch`
            let Some(owner) = owner.map_err(storage)? else { continue };
            let node = owner.rsplit_once(':').map_or(owner.as_str(), |(node, _)| node);
            match nodes.iter_mut().find(|n| n.name == node) {
                Some(holder) => holder.shards.push(shard),
                // A node past its heartbeats whose shards are yet to be taken.
                None => {
                    nodes.push(NodeStats { name: node.to_owned(), this: false, heartbeat_ms: 0, shards: vec![shard] })
                }
            }
        }
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(nodes)
    }

    /// Takes `shard` if it is free, held by this node's name, by a node whose
    /// heartbeat is a lease old, or by a live node that kept it
    /// [`KEPT_LEASES`] leases past its turn: the new holder, or `None` if it
    /// is held. The heartbeat is read after the holder, and a node beats
    /// before it acquires: a node that joined since this one read the
    /// membership is seen alive, and keeps what it took. The script takes
    /// the shard only from the holder read.
    async fn acquire(&self, shard: u16) -> Result<Option<String>, QueueError> {
        let mut conn = self.conn();
        let current: Option<String> = conn.get(self.keys.shard(shard, "owner")).await.map_err(storage)?;
        if let Some((holder, node)) = current.as_deref().and_then(|h| Some((h, h.rsplit_once(':')?.0))) {
            if node != self.node {
                let beat: Option<u64> = conn.zscore(self.keys.global("nodes"), node).await.map_err(storage)?;
                let lease = self.options.shard_lease_ms;
                if beat.is_some_and(|at| alive(at, self.redis_ms(), lease)) {
                    if !self.owned.kept_past(shard, holder, Duration::from_millis(KEPT_LEASES * lease)) {
                        return Ok(None);
                    }
                    tracing::warn!(shard, holder, "a live node kept a shard past its turn; taking it");
                }
            }
        }
        let mut invocation = SCRIPTS.shard_lease.key(self.keys.shard(shard, "owner"));
        invocation.key(self.keys.shard(shard, "epoch")).arg("acquire").arg(&self.node);
        invocation.arg(current.as_deref().unwrap_or(""));
        let value: redis::Value = invocation.invoke_async(&mut conn).await.map_err(storage)?;
        let mut reply = Reply::new(value)?;
        Ok(match reply.text()?.as_str() {
            "ok" => Some(reply.text()?),
            _ => None,
        })
    }

    /// Gives `shard` back if `holder` still holds it.
    async fn release(&self, shard: u16, holder: &str) -> Result<(), QueueError> {
        let mut invocation = SCRIPTS.shard_lease.key(self.keys.shard(shard, "owner"));
        invocation.key(self.keys.shard(shard, "epoch")).arg("release").arg(&self.node).arg(holder);
        invocation.arg(&self.channel).arg(shard);
        let _: redis::Value = invocation.invoke_async(&mut self.conn()).await.map_err(storage)?;
        Ok(())
    }

    /// Lets go of `shard` if `holder` still holds it here, and of its timer.
    fn let_go(&self, shard: u16, holder: &str) {
        // A stale holder's alarm is a newer one's now: left set.
        if self.owned.drop_shard(shard, holder) {
            self.alarms.unset(shard);
        }
    }

    /// Starts the timer of a shard just acquired.
    fn hold(self: &Arc<Self>, shard: u16, holder: String) {
        // A take under way as the node crashed or closed: no timer starts.
        if *self.stop.borrow() {
            return;
        }
        tracing::debug!(shard, holder, "holding a shard");
        let wake = Arc::new(Wake::default());
        let task = tokio::spawn(fire_loop(Arc::downgrade(self), shard, holder.clone(), wake.clone()));
        let old = self.owned.held.lock().insert(shard, Held { holder, wake, task });
        if let Some(old) = old {
            old.task.abort();
        }
    }

    /// Leaves the membership, then lets go of every shard: each release hints
    /// the others (`g SHARD`), whose next tick, at once, reads a membership
    /// without this node and takes the shards, rather than once its
    /// heartbeat is a lease old.
    pub(super) async fn leave(&self) {
        // What this node counted goes into the figures first: a clean stop
        // loses none of it.
        for _ in 0..2 {
            if self.heartbeat(self.redis_ms()).await.is_err() || !self.figures.pending() {
                break;
            }
        }
        // No tick takes a shard once this one has: the node is closed.
        let _one = self.owned.ticking.lock().await;
        let _: Result<(), _> = self.conn().zrem(self.keys.global("nodes"), &self.node).await;
        for (shard, holder) in self.owned.holders() {
            let _ = self.release(shard, &holder).await;
            self.let_go(shard, &holder);
        }
    }

    /// One pass of a shard's timer: fires the queues whose deadline has come
    /// (by Redis's clock, as estimated); returns the next deadline (Redis ms),
    /// `None` if the shard has none, or an error; `Err(None)` if fenced.
    /// Given `ahead`, the shard's first head (Redis ms) within the node's
    /// [`fire_ahead_ms`](crate::RedisOptions::fire_ahead_ms) of now, it also
    /// hands the tasks due then to this node's waiting claims, which are
    /// answered at that time (`handover.rs`); with none waiting, it fires
    /// nothing before the head is due.
    pub(super) async fn fire_once(
        &self,
        shard: u16,
        holder: &str,
        by_sweep: bool,
        always: bool,
        heads: &mut Option<Heads>,
        ahead: Option<u64>,
    ) -> Result<Option<u64>, Option<QueueError>> {
        let known = match heads.take() {
            Some(known) => known,
            None => {
                let read: Vec<(String, f64)> = self
                    .conn()
                    .zrange_withscores(self.keys.shard(shard, "h"), 0, FIRE_QUEUES_MAX as isize - 1)
                    .await
                    .map_err(|e| Some(storage(e)))?;
                read.into_iter().map(|(name, at)| (name, at as u64)).collect()
            }
        };
        let now_ms = self.redis_ms();
        let first = known.first().map(|&(_, at)| at);
        // Within a millisecond of it, by this node's estimate of Redis's
        // clock: the script reads Redis's own, and moves nothing early.
        let due = first.is_some_and(|first| first <= now_ms + 1);
        let ahead = ahead.filter(|&at| {
            !due && first == Some(at) && at <= now_ms + self.options.fire_ahead_ms && !self.takers.is_empty()
        });
        if !always && !due && ahead.is_none() {
            *heads = Some(known);
            return Ok(first);
        }
        // Schedules whose occurrence came (never early: by Redis's clock as
        // estimated, which lags it) first: their tasks are due at once.
        let schedules: Vec<&str> = known
            .iter()
            .filter(|(_, at)| *at <= now_ms)
            .filter_map(|(name, _)| name.strip_prefix(crate::occurrences::HEAD_PREFIX))
            .collect();
        if !schedules.is_empty() {
            self.fire_schedules(shard, holder, &schedules).await?;
        }
        // The queues whose deadline came, and those whose tasks are due at
        // `ahead` (a lease's end is not handed ahead).
        let fired = |name: &str, at: u64| at <= now_ms + 1 || (ahead == Some(at) && name.starts_with("s:"));
        let mut queues: Vec<&str> = known
            .iter()
            .filter(|(name, at)| fired(name, *at) && !name.starts_with(crate::occurrences::HEAD_PREFIX))
            .filter_map(|(name, _)| name.get(2..))
            .collect();
        queues.sort_unstable();
        queues.dedup();
        // The claims waiting on this node that the fire may hand tasks to.
        let _firing = self.firing();
        let plan = self.plan(&queues, ahead.is_some()).await;
        if !due && !always && plan.is_empty() {
            // No claim to hand anything to ahead: the head fires when due.
            *heads = Some(known);
            return Ok(first);
        }
        let mut invocation = SCRIPTS.fire.key(self.keys.shard(shard, "owner"));
        for name in ["t", "h", "p", "lseq", "paused"] {
            invocation.key(self.keys.shard(shard, name));
        }
        for queue in &queues {
            for key in self.keys.queue_keys(shard, queue) {
                invocation.key(key);
            }
        }
        invocation.arg(&self.channel).arg(shard).arg(holder).arg(FIRE_BATCH_MAX).arg(FIRE_QUEUES_MAX);
        invocation.arg(record::lease_secret()).arg(ahead.unwrap_or(0));
        plan.args(&mut invocation, &queues);
        let value = match invocation.invoke_async::<redis::Value>(&mut self.conn()).await {
            Ok(value) => value,
            Err(error) => {
                // What the script did is unknown: leases it may have made
                // run out, and their tasks come due again.
                self.settle_plan(plan).await;
                return Err(Some(storage(error)));
            }
        };
        let replied = Instant::now();
        let mut reply = Reply::new(value).map_err(Some)?;
        if reply.text().map_err(Some)? != "ok" {
            self.settle_plan(plan).await;
            return Err(None);
        }
        let now_ms = reply.u64().map_err(Some)?;
        let past_us = reply.u64().map_err(Some)?;
        self.saw_time(now_ms);
        let (due, lease_expired) = (reply.u64().map_err(Some)?, reply.u64().map_err(Some)?);
        let (died, past_expiry) = (reply.u64().map_err(Some)?, reply.u64().map_err(Some)?);
        if lease_expired + died > 0 {
            self.figures.total(|t| {
                t.lease_expired += lease_expired;
                t.died += died;
                t.expired += past_expiry;
            });
        }
        let moved = due + lease_expired;
        let counter = if by_sweep { &self.by_sweep } else { &self.by_timer };
        counter.fetch_add(moved, Ordering::Relaxed);
        let mut known = Vec::new();
        for _ in 0..reply.u64().map_err(Some)? / 2 {
            let name = reply.text().map_err(Some)?;
            let at = reply.text().map_err(Some)?;
            let at = at.parse::<u64>().map_err(|_| Some(unexpected(format!("a head at {at}"))))?;
            known.push((name, at));
        }
        let script_us = now_ms * 1_000 + past_us;
        self.handed_over(shard, &queues, plan, &mut reply, (script_us, replied)).await.map_err(Some)?;
        let next = known.first().map(|&(_, at)| at);
        *heads = Some(known);
        Ok(next)
    }
}

/// A held shard's timer: sets the node's alarm for the shard's next
/// deadline (or a sweep, at the latest) and waits for it (or a hint of an
/// earlier one), fires, and again. Ends when the shard is let go, or its
/// holder is found fenced. A deadline is first rung
/// [`fire_ahead_ms`](crate::RedisOptions::fire_ahead_ms) before it comes,
/// for the fire that hands its tasks ahead (`fire_once`); if that leaves
/// it, it is rung again when it comes.
async fn fire_loop(backend: Weak<RedisBackend>, shard: u16, holder: String, wake: Arc<Wake>) {
    let mut by_sweep = false;
    // The shard's heads as the last fire script left them: read again after
    // a hint of an earlier one, or for a sweep.
    let mut heads: Option<Heads> = None;
    // The deadline the alarm rings ahead of, and the last one it did.
    let (mut ahead, mut rung_ahead) = (None, None);
    loop {
        // Woken by a hint of an earlier head, not by the sweep's alarm: what
        // it fires is the hint's doing (the sweep is the net for lost ones).
        // Either reads the heads again.
        let hinted = wake.hinted.swap(false, Ordering::SeqCst);
        if hinted || by_sweep {
            heads = None;
        }
        by_sweep &= !hinted;
        let Some(node) = backend.upgrade() else { return };
        // Rung ahead of `ahead`, unless woken before by a hint.
        let fire_ahead_ms = node.options.fire_ahead_ms;
        let ahead_now = ahead.take().filter(|&at| at <= node.redis_ms() + fire_ahead_ms);
        if ahead_now.is_some() {
            rung_ahead = ahead_now;
        }
        let next = match node.fire_once(shard, &holder, by_sweep, false, &mut heads, ahead_now).await {
            Ok(next) => next,
            Err(None) => {
                tracing::warn!(shard, holder, "fenced: another node holds the shard now");
                // Letting go ends this task (at its next wait, after the
                // return): the shard is taken back by a task of its own.
                node.let_go(shard, &holder);
                tokio::spawn(node.clone().take_back(shard));
                return;
            }
            Err(Some(error)) => {
                if let QueueError::StoreUnavailable(_) = error {
                    // An outage is the heartbeat's to log.
                    tracing::debug!(shard, %error, "cannot fire a shard's timers");
                } else {
                    tracing::warn!(shard, %error, "cannot fire a shard's timers");
                }
                heads = None;
                Some(node.redis_ms() + 100)
            }
        };
        let now_ms = node.redis_ms();
        if next.is_some_and(|next| next <= now_ms) {
            by_sweep = false;
            continue;
        }
        let woken = wake.notify.notified();
        match next {
            Some(next) => {
                let sweep = now_ms + SWEEP_MS;
                by_sweep = next > sweep;
                let ring = if by_sweep { Ring::Sweep } else { Ring::Deadline };
                let mut at = next.min(sweep);
                if !by_sweep && fire_ahead_ms > 0 && rung_ahead != Some(next) {
                    ahead = Some(next);
                    at = next.saturating_sub(fire_ahead_ms);
                }
                node.alarms.set(shard, node.local_ms(at), ring, wake.notify.clone());
            }
            // No deadline at all: no alarm of its own. What wakes it, but
            // for a hint, is the node's sweep of its idle shards.
            None => {
                by_sweep = true;
                node.alarms.unset(shard);
                wake.idle.store(true, Ordering::SeqCst);
            }
        }
        drop(node);
        woken.await;
        wake.idle.store(false, Ordering::SeqCst);
    }
}

/// The net for a lost hint of an idle shard's first task: every
/// [`SWEEP_IDLE_MS`], the shards this node holds with no deadline (their
/// heads were empty when last read) are looked at together, one `EXISTS` of
/// their heads' keys (a key Redis drops when its set empties), and all are
/// woken to read their heads if any has some. On one Redis that is one
/// command a node, where a sweep of each shard on its own was one a shard
/// (3.2 of an idle cluster's 15 commands a second, for 16 shards); on a
/// Cluster the client sends one a shard, each shard's keys being in a slot
/// of their own.
async fn sweep_idle(backend: Weak<RedisBackend>, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(SWEEP_IDLE_MS)) => {}
            _ = stop.wait_for(|&stop| stop) => return,
        }
        let Some(node) = backend.upgrade() else { return };
        let idle = node.owned.idle();
        if idle.is_empty() {
            continue;
        }
        let heads: Vec<String> = idle.iter().map(|&(shard, _)| node.keys.shard(shard, "h")).collect();
        match node.conn().exists::<_, u64>(heads).await {
            Ok(0) => {}
            Ok(_) => idle.iter().for_each(|(_, wake)| wake.notify.notify_one()),
            // Each looks for itself, as its own sweep did: on a Cluster one
            // master out of reach fails the whole `EXISTS`, and the shards
            // of the others are not to wait for it.
            Err(error) => {
                tracing::debug!(%error, "cannot sweep the idle shards together");
                idle.iter().for_each(|(_, wake)| wake.notify.notify_one());
            }
        }
    }
}

/// Whether a node whose last heartbeat was at `heartbeat_ms` is alive at
/// `now_ms`: the heartbeat is no older than a lease. The one rule, for the
/// membership a heartbeat reads (`figures.rs`, which also takes the dead out
/// of it by [`oldest_alive`]) and for a shard's holder.
pub(crate) fn alive(heartbeat_ms: u64, now_ms: u64, lease_ms: u64) -> bool {
    heartbeat_ms >= oldest_alive(now_ms, lease_ms)
}

/// The oldest heartbeat of a node still alive at `now_ms`.
pub(crate) fn oldest_alive(now_ms: u64, lease_ms: u64) -> u64 {
    now_ms.saturating_sub(lease_ms)
}

/// Whose turn each shard is, by the live nodes sorted by name: shard `s` is
/// the turn of the node ranked `s % nodes`.
#[derive(Clone, Copy)]
struct Turn {
    rank: usize,
    count: usize,
}

impl Turn {
    fn of(nodes: &[String], me: &str) -> Turn {
        Turn { rank: nodes.iter().position(|n| n == me).unwrap_or(0), count: nodes.len().max(1) }
    }

    fn mine(self, shard: u16) -> bool {
        usize::from(shard) % self.count == self.rank
    }
}
