//! beanstalkd's text protocol, served beside the HTTP API on the same
//! [`Backend`]: a tube is a queue, a job is a task, its priority is the
//! task's, its time-to-run the task's own lease, `bury` and `kick` are dead
//! and retry, `pause-tube` is a queue pause. A `put` is answered once the
//! task is as durable as the engine's fsync mode promises.
//!
//! - `command`: a command line read into a `Command`;
//! - `counter`: the commands `stats` counts, an enum indexing atomics;
//! - `framer`: a connection's bytes cut into lines and bodies, bounded;
//! - `session`: one connection's state and its commands run on the backend;
//! - `reply`: replies, their YAML, and the replies to the engine's refusals;
//! - `stats`: the documents of `stats-job`, `stats-tube` and `stats`;
//! - this file: the listener, the limits on connections, and what all
//!   connections share (tubes in use, counters, drain mode).

mod command;
mod counter;
mod framer;
mod reply;
mod session;
mod stats;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use hourglass_queue::{Backend, SystemWallClock, WallClock};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Semaphore;

/// beanstalkd's default largest job body, and this front's unless the
/// server's payload limit is lower.
pub const JOB_BYTES_DEFAULT: usize = 65_535;
/// Connections served at once; one more is closed as soon as accepted.
pub const CONNECTIONS_MAX: usize = 10_000;
/// Jobs whose beanstalkd counts (releases, buries, kicks) the front keeps.
pub const JOB_COUNTS_MAX: usize = 1_000_000;
/// Tubes one connection may watch (beanstalkd has no limit; a claim waits on
/// every tube watched).
pub const WATCHED_MAX: usize = 1_000;

/// How the front is set up.
#[derive(Debug, Clone)]
pub struct Options {
    /// Largest job body; `put` of a larger one is answered `JOB_TOO_BIG`.
    pub job_bytes_max: usize,
    /// Connections served at once.
    pub connections_max: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options { job_bytes_max: JOB_BYTES_DEFAULT, connections_max: CONNECTIONS_MAX }
    }
}

/// What every connection of the front shares.
pub struct Front {
    backend: Arc<dyn Backend>,
    options: Options,
    draining: AtomicBool,
    slots: Arc<Semaphore>,
    started: Instant,
    /// Random, per start: `stats`' `id`.
    instance: String,
    total_connections: AtomicU64,
    producers: AtomicUsize,
    workers: AtomicUsize,
    /// Each counted command's count since start.
    counters: counter::Counters,
    /// Tubes that connections use, watch or wait on, and the counts
    /// beanstalkd keeps per tube. A tube no connection refers to and with no
    /// task leaves `list-tubes`.
    tubes: Mutex<HashMap<String, TubeRefs>>,
    /// What beanstalkd counts per job that the engine does not.
    jobs: Mutex<HashMap<u64, JobCounts>>,
}

#[derive(Debug, Default, Clone)]
struct TubeRefs {
    using: u32,
    watching: u32,
    waiting: u32,
    deletes: u64,
    pauses: u64,
    /// The last `pause-tube` here: its length in seconds, and when it ends (Unix ms).
    pause: Option<(u32, u64)>,
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
struct JobCounts {
    reserves: u32,
    releases: u32,
    buries: u32,
    kicks: u32,
    /// Reservations that ended because their connection closed.
    dropped: u32,
    /// The delay of its last put or release, seconds.
    delay_s: u32,
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
            counters: counter::Counters::default(),
            tubes: Mutex::new(HashMap::new()),
            jobs: Mutex::new(HashMap::new()),
        })
    }

    /// Drain mode (beanstalkd's SIGUSR1): `put` is answered `DRAINING`.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        tracing::info!("draining: new jobs are refused");
    }

    /// Serves one connection until it closes, or is refused for want of a
    /// slot. Errors of the connection's I/O end it; none reaches the caller.
    pub async fn serve<S: AsyncRead + AsyncWrite + Unpin + Send>(self: &Arc<Self>, stream: S) {
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            tracing::warn!(max = self.options.connections_max, "a beanstalk connection refused: too many open");
            return;
        };
        self.total_connections.fetch_add(1, Ordering::Relaxed);
        session::Session::new(self.clone()).run(stream).await;
        drop(slot);
    }

    fn connections(&self) -> usize {
        self.options.connections_max - self.slots.available_permits()
    }

    fn tube_ref(&self, tube: &str, change: impl FnOnce(&mut TubeRefs)) {
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
    fn job(&self, id: u64, change: impl FnOnce(&mut JobCounts)) {
        let mut jobs = self.jobs.lock();
        if let Some(counts) = jobs.get_mut(&id) {
            change(counts);
        } else if jobs.len() < JOB_COUNTS_MAX {
            change(jobs.entry(id).or_default());
        }
    }

    fn job_counts(&self, id: u64) -> JobCounts {
        self.jobs.lock().get(&id).copied().unwrap_or_default()
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

    fn forget_job(&self, id: u64) {
        self.jobs.lock().remove(&id);
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

/// Where the front listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A TCP address.
    Tcp(std::net::SocketAddr),
    /// A Unix socket's path.
    Unix(std::path::PathBuf),
}

impl std::str::FromStr for Listen {
    type Err = String;

    fn from_str(text: &str) -> Result<Listen, String> {
        match text.strip_prefix("unix:") {
            Some(path) if !path.is_empty() => Ok(Listen::Unix(path.into())),
            Some(_) => Err("unix: needs a path, as in unix:/run/hourglass.sock".into()),
            None => text
                .parse()
                .map(Listen::Tcp)
                .map_err(|error| format!("{text:?}: {error} (give HOST:PORT or unix:PATH)")),
        }
    }
}

/// Accepts connections on a bound TCP listener until `shutdown` resolves.
pub async fn serve_tcp(
    front: Arc<Front>,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let listener = &listener;
    let accept = move || async move {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        Ok(stream)
    };
    accept_until(front, accept, shutdown).await;
}

/// Accepts connections on a bound Unix listener until `shutdown` resolves.
#[cfg(unix)]
pub async fn serve_unix(
    front: Arc<Front>,
    listener: tokio::net::UnixListener,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let listener = &listener;
    accept_until(front, move || async move { Ok(listener.accept().await?.0) }, shutdown).await;
}

/// Serves each connection `accept` yields, on a task of its own, until `shutdown`.
async fn accept_until<S, A, F>(front: Arc<Front>, mut accept: A, shutdown: impl std::future::Future<Output = ()>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    A: FnMut() -> F,
    F: std::future::Future<Output = std::io::Result<S>>,
{
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            accepted = accept() => match accepted {
                Ok(stream) => {
                    let front = front.clone();
                    tokio::spawn(async move { front.serve(stream).await });
                }
                Err(error) => accept_failed(&error).await,
            },
        }
    }
}

/// An accept that failed (out of file descriptors, most often): logged, and
/// retried after a pause rather than in a hot loop.
async fn accept_failed(error: &std::io::Error) {
    tracing::warn!(%error, "accepting a beanstalk connection failed");
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
}
