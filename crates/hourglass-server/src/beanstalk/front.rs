//! What every connection of the front shares: the backend, the limits, the
//! tubes connections refer to, the counts beanstalkd keeps that the engine
//! does not, and drain mode.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hourglass_queue::{Backend, SystemWallClock, WallClock};
use parking_lot::Mutex;
use tokio::sync::Semaphore;

use super::counter::Counters;
use crate::access::{Grant, Keys, Permission};

/// beanstalkd's default largest job body, and this front's unless the
/// server's payload limit is lower.
pub const JOB_BYTES_DEFAULT: usize = 65_535;
/// Connections served at once; one more is closed as soon as accepted.
pub const CONNECTIONS_MAX: usize = 10_000;
/// Jobs whose beanstalkd counts (releases, buries, kicks) the front keeps.
pub const JOB_COUNTS_MAX: usize = 1_000_000;
/// How long a command line or job body begun may take to arrive whole,
/// unless told.
pub const LINE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection that holds no job may send nothing, unless told.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Tubes one connection may watch (beanstalkd has no limit; a claim waits on
/// every tube watched).
pub const WATCHED_MAX: usize = 1_000;

/// Under `--tokens`: the front has the permissions of one named token of
/// the file, as the file holds it now (a token removed by a reload leaves
/// the front refusing everything).
#[derive(Debug, Clone)]
pub struct Access {
    /// The server's tokens.
    pub keys: Arc<Keys>,
    /// The name of the front's token in the file.
    pub name: String,
}

/// How the front is set up.
#[derive(Debug, Clone)]
pub struct Options {
    /// Largest job body; `put` of a larger one is answered `JOB_TOO_BIG`.
    pub job_bytes_max: usize,
    /// Connections served at once.
    pub connections_max: usize,
    /// A command line or job body begun must arrive whole within it, or the
    /// connection is closed.
    pub line_timeout: Duration,
    /// A connection that holds no reserved job, waits in no reserve and
    /// sends nothing for this long is closed.
    pub idle_timeout: Duration,
    /// Whose permissions the front has; `None`, every permission.
    pub access: Option<Access>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            job_bytes_max: JOB_BYTES_DEFAULT,
            connections_max: CONNECTIONS_MAX,
            line_timeout: LINE_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            access: None,
        }
    }
}

/// What every connection of the front shares.
pub struct Front {
    pub(super) backend: Arc<dyn Backend>,
    pub(super) options: Options,
    pub(super) draining: AtomicBool,
    /// One permit a connection served: [`CONNECTIONS_MAX`] by default.
    pub(super) slots: Arc<Semaphore>,
    pub(super) started: Instant,
    /// Random, per start: `stats`' `id`.
    pub(super) instance: String,
    pub(super) total_connections: AtomicU64,
    pub(super) producers: AtomicUsize,
    pub(super) workers: AtomicUsize,
    /// Each counted command's count since start.
    pub(super) counters: Counters,
    /// Tubes that connections use, watch or wait on, and the counts
    /// beanstalkd keeps per tube. A tube no connection refers to and with no
    /// task leaves `list-tubes`.
    pub(super) tubes: Mutex<HashMap<String, TubeRefs>>,
    /// What beanstalkd counts per job that the engine does not.
    jobs: Mutex<HashMap<u64, JobCounts>>,
}

/// What the front knows of one tube beyond the engine's queue.
#[derive(Debug, Default, Clone)]
pub(super) struct TubeRefs {
    pub(super) using: u32,
    pub(super) watching: u32,
    pub(super) waiting: u32,
    pub(super) deletes: u64,
    pub(super) pauses: u64,
    /// The last `pause-tube` here: its length in seconds, and when it ends (Unix ms).
    pub(super) pause: Option<(u32, u64)>,
}

impl TubeRefs {
    fn referred(&self) -> bool {
        self.using + self.watching + self.waiting > 0
            || self.pause.is_some_and(|(_, until_ms)| until_ms > SystemWallClock.now_ms())
    }
}

/// A job's counts beyond the engine's attempts, kept while the front knows
/// the job (from its first reserve, release, bury or kick here to its delete).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct JobCounts {
    pub(super) reserves: u32,
    pub(super) releases: u32,
    pub(super) buries: u32,
    pub(super) kicks: u32,
    /// Reservations that ended because their connection closed.
    pub(super) dropped: u32,
    /// The delay of its last put or release, seconds.
    pub(super) delay_s: u32,
}

impl Front {
    /// A front on `backend`.
    pub fn new(backend: Arc<dyn Backend>, options: Options) -> Arc<Front> {
        let slots = Arc::new(Semaphore::new(options.connections_max));
        Arc::new(Front {
            backend,
            options,
            draining: AtomicBool::new(false),
            slots,
            started: Instant::now(),
            instance: format!("{:016x}", rand_u64()),
            total_connections: AtomicU64::new(0),
            producers: AtomicUsize::new(0),
            workers: AtomicUsize::new(0),
            counters: Counters::default(),
            tubes: Mutex::new(HashMap::new()),
            jobs: Mutex::new(HashMap::new()),
        })
    }

    /// Drain mode (beanstalkd's SIGUSR1): `put` is answered `DRAINING`.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        tracing::info!("draining: new jobs are refused");
    }

    /// The front's grant now: `None` if it may do everything.
    pub(super) fn grant(&self) -> Option<Arc<Grant>> {
        let access = self.options.access.as_ref()?;
        Some(access.keys.named(&access.name).unwrap_or_else(|| Arc::new(Grant::new(&access.name, Vec::new(), &[]))))
    }

    /// Whether the front may do `permission` in `tube`.
    pub(super) fn may(&self, permission: Permission, tube: &str) -> bool {
        self.grant().is_none_or(|grant| grant.allows(permission, tube))
    }

    pub(super) fn connections(&self) -> usize {
        self.options.connections_max - self.slots.available_permits()
    }

    /// Changes what the front knows of `tube`, and forgets the tube once
    /// nothing refers to it and it has nothing counted.
    pub(super) fn tube_ref(&self, tube: &str, change: impl FnOnce(&mut TubeRefs)) {
        let mut tubes = self.tubes.lock();
        let refs = tubes.entry(tube.to_owned()).or_default();
        change(refs);
        if !refs.referred() && refs.deletes == 0 && refs.pauses == 0 {
            tubes.remove(tube);
        }
    }

    /// Counts a job's event. A job removed other than through the front
    /// (over HTTP, say) leaves its counts behind until `stats-job` finds it
    /// gone, so they are bounded: past [`JOB_COUNTS_MAX`] jobs, a new one is
    /// not counted (its `stats-job` shows the engine's attempts as reserves,
    /// and zeros).
    pub(super) fn job(&self, id: u64, change: impl FnOnce(&mut JobCounts)) {
        let mut jobs = self.jobs.lock();
        if let Some(counts) = jobs.get_mut(&id) {
            change(counts);
        } else if jobs.len() < JOB_COUNTS_MAX {
            change(jobs.entry(id).or_default());
        }
    }

    pub(super) fn job_counts(&self, id: u64) -> JobCounts {
        self.jobs.lock().get(&id).copied().unwrap_or_default()
    }

    pub(super) fn forget_job(&self, id: u64) {
        self.jobs.lock().remove(&id);
    }

    /// Tubes with tasks, or that a connection refers to, and `default`.
    pub(super) async fn tubes(&self) -> Vec<String> {
        let mut tubes: Vec<String> = self
            .backend
            .queues()
            .await
            .into_iter()
            .filter(|q| q.scheduled + q.due + q.leased + q.dead > 0)
            .map(|q| q.name.to_string())
            .collect();
        tubes.extend(self.tubes.lock().iter().filter(|(_, refs)| refs.referred()).map(|(name, _)| name.clone()));
        tubes.push("default".into());
        tubes.sort();
        tubes.dedup();
        tubes
    }
}

/// A random u64 from the standard library's randomly seeded hasher (fed
/// the time, so two hashers seeded alike still differ): the instance id
/// needs no more.
fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(SystemWallClock.now_us());
    hasher.finish()
}
