//! hourglass's Redis backend: any number of nodes on one Redis or a Redis
//! Cluster, one service.
//!
//! # Implementation
//!
//! - **Shards.** Tasks are spread over a fixed number of shards (16 by
//!   default, at most 1,024), each shard's keys under its own hash tag, so a
//!   Cluster spreads one queue over all its masters. A task without a key goes
//!   to the next shard in turn; one with an idempotency key to the shard of
//!   its key's hash, so the key is unique with one script. A task's id is its
//!   shard's sequence number and the shard (`keys.rs`).
//! - **Scripts.** Every change is one Lua script on one shard (`lua/`), so it
//!   is atomic; each names all its keys and reads the time from Redis.
//! - **Firing from timers, not polling.** Each node holds a share of the
//!   shards (`shards.rs`) for as long as its heartbeat is live, rebalanced as
//!   nodes come and go, and sleeps to each owned shard's earliest deadline
//!   (due time or lease end) to the millisecond; then the fire script files
//!   what came due and gives back expired leases. A sweep every [`SWEEP_MS`]
//!   ([`SWEEP_IDLE_MS`] for a shard with no deadline) is a safety net for a
//!   lost hint, counted apart ([`RedisBackend::fired`]).
//! - **Fencing.** A shard's holder carries an epoch from a counter that is
//!   never deleted; the fire script runs only for the current holder, so a
//!   node that was stopped past its lease changes nothing when it resumes.
//! - **Claims from any node.** Changes that make a task due publish a hint
//!   (queue and shard) on one channel; every node's waiting claims wake on it
//!   and look only at the shards hinted (`watch.rs`), with a bounded fallback
//!   ([`CLAIM_RECHECK_MS`]).
//! - **Schedules** live in the shard of their name's hash, with the tasks of
//!   their occurrences, and are fired by the shard's owner from its wheel:
//!   an occurrence's task and the schedule's move to its next occurrence are
//!   one script, fenced by the shard lease (`schedules.rs`,
//!   `occurrences.rs`).
//! - **The owner hands over what it fires.** Where a claim waits on the
//!   owner's node, the fire script leases the tasks it made due for it in the
//!   same script, and the node hands them to the claim: no hint, no claim
//!   script (`handover.rs`, `takers.rs`).
//!
//! What a 2xx means depends on Redis's persistence: `docs/DESIGN.md`,
//! "Redis: what a 2xx means".

mod alarms;
mod claims;
mod conn;
mod contract;
mod counted;
mod counts;
mod enqueue_groups;
mod error;
mod figures;
mod flow;
mod handover;
mod health;
mod histogram;
mod history;
mod keys;
mod listing;
mod occurrences;
mod offset;
mod options;
mod push;
mod record;
mod registry;
mod reply;
mod revoked;
mod schedule_record;
mod schedules;
mod scripts;
mod shards;
mod takers;
mod tasks;
mod watch;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::AsyncCommands;

use hourglass_queue::{Backend, Closed, QueueError};

pub use conn::{RedisCa, Target, REPLY_TIMEOUT};
pub use error::ConnectError;
pub use health::{OUTAGE_LOG_INTERVAL_FIRST, OUTAGE_LOG_INTERVAL_MAX};
pub use options::{
    RedisOptions, CLAIM_RECHECK_MS, CLAIM_SHARE_FILLED, CLAIM_SHARE_MIN, FIRE_AHEAD_MS_DEFAULT, FIRE_AHEAD_MS_MAX,
    FIRE_BATCH_MAX, FIRE_QUEUES_MAX, RENEWALS_PER_LEASE, SHARDS_DEFAULT, SHARD_LEASE_MS_DEFAULT, SHARD_LEASE_MS_MAX,
    SHARD_LEASE_MS_MIN, SWEEP_IDLE_MS, SWEEP_MS,
};

use conn::Conn;
use health::Health;
use keys::Keys;
use offset::Offset;
use watch::Watch;

/// Tasks the owners' timers filed as due, or gave back when their lease ran
/// out: by a timer at the deadline, or by the sweep (a hint was lost); and
/// of those, the ones handed straight to a claim waiting on this node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fired {
    /// Moved by a timer set for their deadline.
    pub by_timer: u64,
    /// Moved by the periodic sweep.
    pub by_sweep: u64,
    /// Leased by the fire script for a claim waiting on this node.
    pub handed_over: u64,
    /// Of those, handed ahead of their due time, and answered at it.
    pub handed_ahead: u64,
    /// Of those, given back to their queue because the claim had ended
    /// before it took them.
    pub given_back: u64,
    /// Of those, dropped because their cancel was heard before a claim took
    /// them (`revoked.rs`).
    pub dropped_cancelled: u64,
}

/// While Redis cannot be reached, [`RedisBackend::connect_within`] tries
/// again this often.
pub const CONNECT_RETRY_INTERVAL: Duration = Duration::from_millis(250);

/// The Redis [`Backend`]: see the [module](self) documentation. Its requests
/// are the contract's traits (`contract.rs`).
pub struct RedisBackend {
    conn: Conn,
    keys: Keys,
    options: RedisOptions,
    /// Whether Redis answered the last heartbeat, and since when not.
    health: Health,
    shards: u16,
    channel: String,
    /// This node's name in the membership and in its shard leases.
    node: String,
    watch: Watch,
    owned: shards::Owned,
    /// Queues this node registered (`registry.rs`).
    known_queues: Mutex<HashSet<Arc<str>>>,
    /// The queue of tasks this node enqueued or handed out (`tasks.rs`).
    queue_of: Mutex<HashMap<u64, Arc<str>>>,
    /// What this node counted and the store's sums do not yet hold.
    figures: figures::Figures,
    /// Queues' settings as last read, and when (`push.rs`).
    settings: Mutex<HashMap<Arc<str>, (Instant, hourglass_queue::QueueSettings)>>,
    /// Each queue's lock while its settings are read again (`push.rs`).
    settings_reading: Mutex<HashMap<Arc<str>, Arc<tokio::sync::Mutex<()>>>>,
    /// Queues this node added to the set of those that may push (`push.rs`).
    pushing: Mutex<HashSet<Arc<str>>>,
    /// Every queue that may push, as last read, and when (`push.rs`).
    pushing_read: Mutex<Option<(Instant, Arc<[String]>)>>,
    /// When every queue was last counted, and the tasks they held.
    counted: Mutex<Option<(Instant, usize)>>,
    /// When the schedules were last counted, and how many there were.
    schedules_counted: Mutex<Option<(Instant, usize)>>,
    /// The schedules' timetables, read once for each rule (`schedules.rs`).
    timetables: schedules::Timetables,
    next_shard: AtomicU64,
    /// Enqueues waiting to go together (`enqueue_groups.rs`).
    enqueue_groups: enqueue_groups::EnqueueGroups,
    /// Enqueue scripts this node has sent.
    enqueue_scripts: AtomicU64,
    /// Redis's clock minus this node's: see [`Offset`].
    offset: Mutex<Offset>,
    /// The shards' timers; their thread stops when the backend is closed, or
    /// dropped unclosed.
    alarms: alarms::Alarms,
    by_timer: AtomicU64,
    by_sweep: AtomicU64,
    /// Hints of a shard's earlier deadline are dropped on arrival. For tests
    /// of the sweeps, which are the net for lost hints.
    losing_head_hints: AtomicBool,
    /// The hint channel stands, and what was missed before it did is looked
    /// at again (`shards.rs`, `listen`).
    listening: AtomicBool,
    /// This node's waiting claims, which its fires hand tasks to.
    takers: takers::Takers,
    handed: AtomicU64,
    handed_ahead: AtomicU64,
    /// This node's fires under way (`handover.rs`).
    firing: AtomicUsize,
    given_back: AtomicU64,
    /// Tasks cancelled while leased, as this node heard of them.
    revoked: revoked::Revoked,
    dropped_cancelled: AtomicU64,
    /// Itself, for the work a method leaves running when it returns (giving
    /// back tasks handed over to a claim that ended).
    me: Weak<RedisBackend>,
    closed: Closed,
    stop: tokio::sync::watch::Sender<bool>,
}

impl RedisBackend {
    /// Connects, checks (or sets) the store's shard count, and starts this
    /// node's share of the work: holding shards and firing their timers, and
    /// listening for hints. Needs a tokio runtime.
    ///
    /// # Errors
    /// A [`ConnectError`]: an option out of range, Redis unreachable or
    /// failing, a shard count that is not the store's, or no timer thread.
    pub async fn connect(options: RedisOptions) -> Result<Arc<RedisBackend>, ConnectError> {
        options.check()?;
        let target = &options.target;
        let mut conn =
            Conn::open(target, options.ca.as_ref()).await.map_err(|source| ConnectError::opening(target, source))?;
        let keys = Keys::new(&options.prefix);
        let meta = keys.global("meta");
        let store = |source| ConnectError::Store { target: target.clone(), source };
        let _: bool = conn.hset_nx(&meta, "shards", options.shards).await.map_err(store)?;
        let shards: u16 = conn.hget(&meta, "shards").await.map_err(store)?;
        if shards != options.shards {
            return Err(ConnectError::ShardsDiffer { target: target.clone(), store: shards, asked: options.shards });
        }
        let (stop, _) = tokio::sync::watch::channel(false);
        let alarms = alarms::Alarms::start().map_err(ConnectError::TimerThread)?;
        let health = Health::new(target.clone());
        let backend = Arc::new_cyclic(|me| RedisBackend {
            conn,
            health,
            channel: keys.channel(),
            keys,
            shards,
            node: format!("{:016x}", rand::random::<u64>()),
            watch: Watch::new(shards),
            owned: shards::Owned::default(),
            known_queues: Mutex::default(),
            queue_of: Mutex::default(),
            figures: figures::Figures::default(),
            settings: Mutex::default(),
            settings_reading: Mutex::default(),
            pushing: Mutex::default(),
            pushing_read: Mutex::default(),
            counted: Mutex::default(),
            schedules_counted: Mutex::default(),
            timetables: schedules::Timetables::default(),
            next_shard: AtomicU64::new(rand::random::<u64>() % u64::from(shards)),
            enqueue_groups: enqueue_groups::EnqueueGroups::new(tokio::runtime::Handle::current()),
            enqueue_scripts: AtomicU64::new(0),
            offset: Mutex::new(Offset::default()),
            alarms,
            by_timer: AtomicU64::new(0),
            by_sweep: AtomicU64::new(0),
            losing_head_hints: AtomicBool::new(false),
            listening: AtomicBool::new(false),
            takers: takers::Takers::default(),
            handed: AtomicU64::new(0),
            handed_ahead: AtomicU64::new(0),
            firing: AtomicUsize::new(0),
            given_back: AtomicU64::new(0),
            revoked: revoked::Revoked::default(),
            dropped_cancelled: AtomicU64::new(0),
            me: me.clone(),
            closed: Closed::default(),
            stop,
            options,
        });
        shards::start(&backend);
        Ok(backend)
    }

    /// [`connect`](Self::connect), tried again every
    /// [`CONNECT_RETRY_INTERVAL`] while Redis cannot be reached
    /// ([`ConnectError::is_unreachable`]), for up to `wait`. What it waits
    /// for (the address and the error) is logged at once, then at a slowing
    /// interval ([`OUTAGE_LOG_INTERVAL_FIRST`], doubling); `waiting` is
    /// told of each failed attempt.
    ///
    /// # Errors
    /// As [`connect`](Self::connect); once `wait` has passed, the last
    /// attempt's error.
    pub async fn connect_within(
        options: RedisOptions,
        wait: Duration,
        mut waiting: impl FnMut(&ConnectError),
    ) -> Result<Arc<RedisBackend>, ConnectError> {
        let started = Instant::now();
        let health = Health::new(options.target.clone());
        loop {
            match RedisBackend::connect(options.clone()).await {
                Ok(backend) => {
                    health.answered();
                    return Ok(backend);
                }
                Err(error) if error.is_unreachable() && started.elapsed() < wait => {
                    match error.redis() {
                        Some(cause) => health.unreachable(cause),
                        None => health.unreachable(&error),
                    }
                    waiting(&error);
                }
                Err(error) => return Err(error),
            }
            tokio::time::sleep(CONNECT_RETRY_INTERVAL.min(wait.saturating_sub(started.elapsed()))).await;
        }
    }

    /// This node's name, as the shard leases show it.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Heartbeats now, reads who is alive, and adds what this node counted
    /// to the cluster's figures, as its membership does every renewal period
    /// (a [`RENEWALS_PER_LEASE`]th of the shard lease).
    ///
    /// # Errors
    /// [`QueueError::StoreUnavailable`] if Redis does not answer.
    pub async fn beat(self: &Arc<Self>) -> Result<(), QueueError> {
        self.tick().await
    }

    /// The shards this node holds now.
    pub fn held_shards(&self) -> Vec<u16> {
        self.owned.holders().into_iter().map(|(shard, _)| shard).collect()
    }

    /// What this node's timers moved since it started, by timer or by sweep,
    /// and handed over to its waiting claims.
    pub fn fired(&self) -> Fired {
        Fired {
            by_timer: self.by_timer.load(Ordering::Relaxed),
            by_sweep: self.by_sweep.load(Ordering::Relaxed),
            handed_over: self.handed.load(Ordering::Relaxed),
            handed_ahead: self.handed_ahead.load(Ordering::Relaxed),
            given_back: self.given_back.load(Ordering::Relaxed),
            dropped_cancelled: self.dropped_cancelled.load(Ordering::Relaxed),
        }
    }

    /// The shard whose turn it is to take tasks that have no key.
    pub(crate) fn next_turn(&self) -> u16 {
        (self.next_shard.fetch_add(1, Ordering::Relaxed) % u64::from(self.shards)) as u16
    }

    /// Drops (or, with `false`, takes again) the hints of a shard's earlier
    /// deadline as they arrive, as if pub/sub had lost them. For tests of
    /// the sweeps.
    #[doc(hidden)]
    pub fn lose_head_hints(&self, lose: bool) {
        self.losing_head_hints.store(lose, Ordering::SeqCst);
    }

    /// Whether this node hears the hint channel. For tests of the hints,
    /// which a node that subscribes later would not hear.
    #[doc(hidden)]
    pub fn listening(&self) -> bool {
        self.listening.load(Ordering::SeqCst)
    }

    /// How many enqueue scripts this node has sent. For tests of grouping.
    #[doc(hidden)]
    pub fn enqueue_scripts(&self) -> u64 {
        self.enqueue_scripts.load(Ordering::Relaxed)
    }

    /// How many queues have an enqueue under way or waiting on this node.
    /// For tests of grouping.
    #[doc(hidden)]
    pub fn enqueues_under_way(&self) -> usize {
        self.enqueue_groups.queues_under_way()
    }

    /// How many claims wait on this node for a fire to hand them tasks,
    /// having found nothing due in Redis. For tests that need a claim to be
    /// waiting.
    #[doc(hidden)]
    pub fn waiting_claims(&self) -> usize {
        self.takers.waiting()
    }

    /// How many claims on this node are offered to its fires, whether they
    /// looked in Redis yet or not. For tests of claims offered from their
    /// first look.
    #[doc(hidden)]
    pub fn claims_offered_to_fires(&self) -> usize {
        self.takers.registered()
    }

    /// The shards this node's pull claims of `queue` would ask now: those
    /// hinted to have due tasks since a look found none, or since a claim
    /// drained them. For tests of the hints.
    #[doc(hidden)]
    pub fn shards_maybe_due(&self, queue: &str) -> Vec<u16> {
        self.watch.of(queue).maybe_due().into_iter().map(|(shard, _)| shard).collect()
    }

    /// The shard task `id` lives in. For tests of one shard.
    #[doc(hidden)]
    pub fn shard_of(&self, id: u64) -> Option<u16> {
        keys::split(id, self.shards).map(|(shard, _)| shard)
    }

    /// The shards this node holds, with their holders (`node:epoch`).
    #[doc(hidden)]
    pub fn holders(&self) -> Vec<(u16, String)> {
        self.owned.holders()
    }

    /// Runs the fire script of `shard` as `holder`: whether it was accepted
    /// (a stale holder is fenced out). For tests of fencing.
    #[doc(hidden)]
    pub async fn fire_as(&self, shard: u16, holder: &str) -> Result<bool, QueueError> {
        match self.fire_once(shard, holder, false, true, &mut None, None).await {
            Ok(_) => Ok(true),
            Err(None) => Ok(false),
            Err(Some(error)) => Err(error),
        }
    }

    /// Fires schedule `name` as `holder` of its shard, if its occurrence has
    /// come: whether the holder was accepted (a stale one is fenced). For
    /// tests of fencing.
    #[doc(hidden)]
    pub async fn fire_schedule_as(&self, name: &str, holder: &str) -> Result<bool, QueueError> {
        let shard = keys::schedule_shard(name, self.shards);
        match self.fire_schedules(shard, holder, &[name]).await {
            Ok(()) => Ok(true),
            Err(None) => Ok(false),
            Err(Some(error)) => Err(error),
        }
    }

    /// The shard schedule `name` lives in, and its holder here, if this node
    /// holds it. For tests of fencing.
    #[doc(hidden)]
    pub fn schedule_holder(&self, name: &str) -> (u16, Option<String>) {
        let shard = keys::schedule_shard(name, self.shards);
        (shard, self.owned.holders().into_iter().find(|(s, _)| *s == shard).map(|(_, holder)| holder))
    }

    /// Closes (as [`Backend::close`]), leaves the membership and lets go of
    /// this node's shards, whose releases hint the other nodes to read the
    /// membership and take them at once, rather than once this node's
    /// heartbeat is a lease old.
    pub async fn shutdown(&self) {
        self.close();
        self.leave().await;
        tracing::info!(fired = ?self.fired(), "what this node's timers moved, and handed straight to claims waiting here");
    }

    /// Stops at once, as `kill -9` would: lets go of nothing, leaves the
    /// membership without a word. For tests of failover.
    #[doc(hidden)]
    pub fn crash(&self) {
        // Closed first: no tick, and no shard taken back, starts after.
        self.close();
        self.owned.abort_all();
    }

    fn conn(&self) -> Conn {
        self.conn.clone()
    }

    fn split(&self, id: u64) -> Result<(u16, u64), QueueError> {
        keys::split(id, self.shards).ok_or(QueueError::NotFound(id))
    }
}
