//! `hourglass serve`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytesize::ByteSize;
use clap::{Args, ValueEnum};
use hourglass_embedded::{Engine, Fsync, Options, RedbStore, TimerThread};
use hourglass_queue::prelude::*;
use hourglass_queue::{Limits, SystemWallClock};
use hourglass_redis::{RedisBackend, RedisCa, RedisOptions, Target};
use hourglass_server::access::Keys;
use hourglass_server::beanstalk::{self, Front, Listen};
use hourglass_server::{AppState, Connections};

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on; port 0 lets the system pick one. The address
    /// bound is printed on stdout (`http HOST:PORT`, `https HOST:PORT` with
    /// --tls-cert).
    #[arg(long, default_value = crate::DEFAULT_LISTEN)]
    listen: SocketAddr,
    /// Also serve beanstalkd's protocol, on HOST:PORT or unix:PATH: its
    /// clients use the same tasks (a tube is a queue). The address bound is
    /// printed on stdout (`beanstalk HOST:PORT`). SIGUSR1 then refuses new
    /// jobs (beanstalkd's drain mode).
    #[arg(long, value_name = "HOST:PORT|unix:PATH")]
    beanstalk: Option<Listen>,
    /// Largest job body the beanstalkd front accepts (at most
    /// --max-payload-bytes).
    #[arg(long, default_value_t = hourglass_server::beanstalk::JOB_BYTES_DEFAULT)]
    beanstalk_max_job_bytes: usize,
    /// Directory for the task store.
    #[arg(long, default_value = "./hourglass-data")]
    data: PathBuf,
    /// Keep the tasks in Redis instead of --data: `redis://HOST:PORT[/DB]`
    /// (one Redis) or `redis+cluster://HOST:PORT[,HOST:PORT...]` (a Redis
    /// Cluster). A Redis that requires a password or an ACL user:
    /// `redis://[USER]:PASSWORD@HOST:PORT`, the same after
    /// `redis+cluster://` for every node; logs show the password as `***`.
    /// Over TLS: `rediss://...`, `rediss+cluster://...` (see --redis-ca).
    /// Every node started with the same store is one service. What
    /// a 2xx means then is Redis's persistence: see docs/DESIGN.md.
    #[arg(long, value_name = "URL", conflicts_with_all = ["data", "fsync_every_ms", "check_store", "max_disk", "max_memory"])]
    store: Option<Target>,
    /// With --store: shards to spread the tasks over, if the store has none
    /// yet (a store keeps its count; every node must name the same).
    #[arg(long, default_value_t = hourglass_redis::SHARDS_DEFAULT)]
    shards: u16,
    /// With --store: a node's lease on its shards; a node that dies has its
    /// shards taken over by the others within it.
    #[arg(long, value_name = "MS", default_value_t = hourglass_redis::SHARD_LEASE_MS_DEFAULT)]
    shard_lease_ms: u64,
    /// With --store: hand a task to a claim waiting on the node that fires
    /// it this long before its due time, and answer the claim at its due
    /// time, so that the round trip to Redis is not part of its lateness.
    /// The task is leased from then (its lease counts from its due time);
    /// 0 hands it over at its due time.
    #[arg(long, value_name = "MS", default_value_t = hourglass_redis::FIRE_AHEAD_MS_DEFAULT)]
    fire_ahead_ms: u64,
    /// With --store rediss:// or rediss+cluster://: check Redis's TLS
    /// certificate against the authorities in this PEM file instead of the
    /// system's.
    #[arg(long, value_name = "FILE", requires = "store")]
    redis_ca: Option<PathBuf>,
    /// With --store: every key starts with it, so that services can share a Redis.
    #[arg(long, default_value = "hg")]
    redis_prefix: String,
    /// With --store: how long to wait for the store at start-up. Meanwhile
    /// the node logs what it waits for, /healthz answers 503 with the reason
    /// and every request 503 `store_unavailable`; past it, the node exits
    /// with the error. (A store lost later is waited for without end.)
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = STORE_WAIT_DEFAULT)]
    store_wait: Duration,
    /// HTTP connections served at once; past it, new connections wait to be
    /// accepted (and the kernel refuses them once its backlog is full).
    #[arg(long, default_value_t = hourglass_server::CONNECTIONS_MAX)]
    max_connections: usize,
    /// A request's headers must arrive within it, or the connection is
    /// closed. An HTTP/1 connection waiting for its next request is closed
    /// at it too. The beanstalkd front gives a command line (or job body)
    /// begun the same time to arrive whole.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "10s")]
    header_timeout: Duration,
    /// A request's body must arrive within it of its headers.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "30s")]
    body_timeout: Duration,
    /// A connection with no request in flight and no traffic for this long
    /// is closed (a waiting claim is in flight). On the beanstalkd front: a
    /// connection that holds no reserved job and waits in no reserve.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "60s")]
    idle_timeout: Duration,
    /// Require `Authorization: Bearer TOKEN` on every request: this token
    /// may do everything (with --tokens, beside the file's).
    #[arg(long, env = "HOURGLASS_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Scoped tokens: a TOML file of `[[token]]` tables, each with a `name`,
    /// the `sha256` of the token, `queues` (patterns, `*` for any run of
    /// characters) and what it `can`: read, enqueue, consume, manage, admin.
    /// SIGHUP reads it again; a file that does not read is refused at start
    /// and, on reload, logged and kept out (the tokens before it stay).
    #[arg(long, value_name = "FILE")]
    tokens: Option<std::path::PathBuf>,
    /// The beanstalkd protocol has no authentication: with --tokens, its
    /// front has the permissions of the file's token of this name (and
    /// refuses to start without it).
    #[arg(long, value_name = "NAME", requires = "tokens", requires = "beanstalk")]
    beanstalk_token: Option<String>,
    /// Relaxed durability: reply once a write is appended to the data
    /// directory's relaxed.log, without waiting for fsync, and make writes
    /// durable every this many milliseconds. A crash of the process loses
    /// none; a power loss may lose the acknowledged writes of the last
    /// interval. Without it, every 2xx is on disk first.
    #[arg(long, value_name = "MS")]
    fsync_every_ms: Option<u64>,
    /// Largest payload accepted, in bytes.
    #[arg(long, default_value_t = Limits::DEFAULT_PAYLOAD_BYTES_MAX)]
    max_payload_bytes: usize,
    /// Most tasks held at once; past it, enqueues get 429.
    #[arg(long, default_value_t = Limits::DEFAULT_TASKS_MAX)]
    max_tasks: usize,
    /// Memory the tasks may take (their records, keys and payloads of up to
    /// 128 bytes; larger payloads stay on disk), e.g. `512MiB`; past it,
    /// enqueues get 507 `over_memory_budget`.
    #[arg(long, value_name = "BYTES", default_value_t = ByteSize::b(Limits::DEFAULT_MEMORY_BYTES_MAX))]
    max_memory: ByteSize,
    /// Disk the tasks may take in the data directory, e.g. `20GiB`; past it,
    /// enqueues get 507 `over_disk_budget`. Without it, a full disk is
    /// answered with 507 `disk_full`.
    #[arg(long, value_name = "BYTES")]
    max_disk: Option<ByteSize>,
    /// Verify every page of the data file before serving, payloads included
    /// (slower, in proportion to the file). Without it, a file that was not
    /// shut down cleanly is still verified, and every record is checked
    /// against its own checksum when read.
    #[arg(long)]
    check_store: bool,
    /// The dashboard (at `/`) shows no actions, and the server refuses the
    /// changes it asks for. The API is unchanged: use --token to guard it.
    #[arg(long)]
    read_only_ui: bool,
    /// How logs are written to stderr: `text` for people, `json` (one object
    /// a line) for log shippers. RUST_LOG filters them (default
    /// `hourglass=info,warn`; `tower_http=debug` adds a line per request,
    /// `hourglass=debug` one per expired lease).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(flatten)]
    push: crate::push::PushArgs,
    #[command(flatten)]
    tls: crate::tls::TlsArgs,
}

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Logs to stderr, filtered by `RUST_LOG`.
fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "hourglass=info,warn".into());
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(colour);
    match format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().flatten_event(true).init(),
    }
}

/// How long a node waits for its store at start-up, unless told.
const STORE_WAIT_DEFAULT: &str = "60s";
/// How long the answers given while waiting for the store may take to
/// finish once it is reached, before the API takes the socket over.
const UNREACHED_STOP_WITHIN: Duration = Duration::from_secs(5);

/// The largest payload limit allowed: the store records a payload's length
/// in 32 bits, and a request carries it whole.
const PAYLOAD_BYTES_CEILING: usize = 256 << 20;

pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    init_logs(args.log_format);
    if args.fsync_every_ms == Some(0) {
        anyhow::bail!("--fsync-every-ms must be at least 1 (leave it out to fsync before every reply)");
    }
    let started = Instant::now();
    // An empty token would be one nobody can send (HTTP trims a header's
    // trailing space), or worse, one a client sends by mistake.
    anyhow::ensure!(
        args.token.as_deref() != Some(""),
        "--token (or HOURGLASS_TOKEN) is empty: give a token, or neither"
    );
    // SIGHUP reloads the token file and the certificate: listened for
    // before either is first read, so that none sent meanwhile is lost.
    #[cfg(unix)]
    let token_hangups = args.tokens.is_some().then(crate::tls::hangups).transpose()?;
    #[cfg(unix)]
    let tls_hangups = args.tls.given().then(crate::tls::hangups).transpose()?;
    let mut keys = Keys::new(args.token.as_deref(), args.tokens.as_deref())?;
    if let (Some(_), Some(name)) = (&args.beanstalk, &args.beanstalk_token) {
        keys = keys.requiring(name)?;
    }
    let keys = Arc::new(keys);
    if let Some(path) = keys.file() {
        tracing::info!(file = %path.display(), tokens = keys.file_tokens(), "tokens read");
    }
    #[cfg(unix)]
    if let Some(hangups) = token_hangups {
        tokio::spawn(hourglass_server::access::reload_on_hangup(keys.clone(), hangups));
    }
    let beanstalk_access = beanstalk_access(&args, &keys)?;
    let push_client = crate::push::client(&args.push)?;
    let tls = args.tls.load()?;
    #[cfg(unix)]
    if let (Some(tls), Some(hangups)) = (&tls, tls_hangups) {
        crate::tls::reload_on_hangup(tls.clone(), hangups);
    }
    let scheme = if tls.is_some() { "https" } else { "http" };
    let connections = Connections {
        connections_max: args.max_connections,
        header_timeout: args.header_timeout,
        body_timeout: args.body_timeout,
        idle_timeout: args.idle_timeout,
        tls,
    };
    connections.check().context("--max-connections, --header-timeout, --body-timeout, --idle-timeout")?;
    if args.max_payload_bytes > PAYLOAD_BYTES_CEILING {
        anyhow::bail!("--max-payload-bytes must be at most {PAYLOAD_BYTES_CEILING}");
    }
    let limits = Limits {
        payload_bytes_max: args.max_payload_bytes,
        tasks_max: args.max_tasks,
        memory_bytes_max: args.max_memory.as_u64(),
        disk_bytes_max: args.max_disk.map(|max| max.as_u64()),
    };
    let (backend, durability, running, listener): (Arc<dyn Backend>, String, Running, _) = match &args.store {
        None => {
            let (engine, fsync, timers) = open_embedded(&args, limits)?;
            let listener = bind(args.listen, scheme)?;
            (engine.clone(), fsync, Running::Embedded { engine, timers }, listener)
        }
        Some(target) => {
            let ca = args.redis_ca.as_deref().map(RedisCa::read).transpose().context("--redis-ca")?;
            let options = RedisOptions {
                target: target.clone(),
                ca,
                prefix: args.redis_prefix.clone(),
                shards: args.shards,
                shard_lease_ms: args.shard_lease_ms,
                fire_ahead_ms: args.fire_ahead_ms,
                limits,
            };
            // Listening first: while the store is out of reach, /healthz says why.
            let listener = bind(args.listen, scheme)?;
            let Some(backend) =
                connect_redis(options, &listener, keys.clone(), connections.clone(), args.store_wait).await?
            else {
                return Ok(());
            };
            tracing::info!(store = %target, node = backend.node(), "joined the service on redis");
            let durability = "as redis persists it (its appendfsync)".to_owned();
            (backend.clone(), durability, Running::Redis(backend), listener)
        }
    };
    let outbound = push_client.outbound().clone();
    // On every backend: claims for push hand each due task to one node only.
    let (push, push_metrics) = crate::push::start(&args.push, push_client, backend.clone());
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let totals = backend.totals().await;
    let queues = backend.queues().await;
    let count = |of: fn(&hourglass_queue::QueueStats) -> usize| queues.iter().map(of).sum::<usize>();
    tracing::info!(
        tasks = totals.tasks,
        scheduled = count(|q| q.scheduled),
        due = count(|q| q.due),
        dead = count(|q| q.dead),
        queues = queues.len(),
        paused = queues.iter().filter(|q| q.paused).count(),
        schedules = totals.schedules,
        memory = %ByteSize::b(totals.memory_bytes).display().iec(),
        took = ?started.elapsed(),
        "ready"
    );
    let address = listener.local_addr()?;
    tracing::info!(%address, fsync = %durability, read_only_ui = args.read_only_ui, "serving {scheme}://{address}/ (dashboard at /)");
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let stopping = move || {
        let mut stopped = stopped.clone();
        async move {
            let _ = stopped.wait_for(|&stop| stop).await;
        }
    };
    let front = match args.beanstalk {
        Some(listen) => {
            let options = beanstalk::Options {
                job_bytes_max: args.beanstalk_max_job_bytes.min(args.max_payload_bytes),
                line_timeout: args.header_timeout,
                idle_timeout: args.idle_timeout,
                access: beanstalk_access,
                ..beanstalk::Options::default()
            };
            let front = Front::new(backend.clone(), options);
            start_beanstalk(front.clone(), &listen, stopping()).await?;
            Some(front)
        }
        None => None,
    };
    #[cfg(unix)]
    if let Some(front) = front.clone() {
        let mut usr1 = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())
            .context("cannot listen for SIGUSR1")?;
        tokio::spawn(async move {
            while usr1.recv().await.is_some() {
                front.drain();
            }
        });
    }
    let mut state = AppState::new(backend.clone(), None).keys(keys).outbound(outbound).push_metrics(push_metrics);
    if args.read_only_ui {
        state = state.read_only_ui();
    }
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop.send(true);
    });
    hourglass_server::serve(listener, state, args.max_payload_bytes, connections, stopping()).await?;
    let report = push.stop(crate::push::STOP_GRACE).await;
    tracing::info!(drained = report.drained, abandoned = report.abandoned, "push delivery stopped");
    drop(front);
    drop(backend);
    running.stop().await;
    tracing::info!("stopped cleanly");
    Ok(())
}

/// What the beanstalkd front may do: everything without --tokens (as
/// before them; --token guards HTTP only), else the permissions of the
/// token --beanstalk-token names (which the keys require of the file).
fn beanstalk_access(args: &ServeArgs, keys: &Arc<Keys>) -> anyhow::Result<Option<beanstalk::Access>> {
    if args.beanstalk.is_none() || args.tokens.is_none() {
        return Ok(None);
    }
    let Some(name) = &args.beanstalk_token else {
        anyhow::bail!(
            "--beanstalk with --tokens: beanstalkd's protocol has no authentication, so the front would let \
             anyone who reaches it do everything; give --beanstalk-token NAME to give it the permissions \
             of the file's token NAME"
        );
    };
    Ok(Some(beanstalk::Access { keys: keys.clone(), name: name.clone() }))
}

/// The backend this process serves, to be stopped as it needs.
enum Running {
    Embedded { engine: Arc<Engine>, timers: TimerThread },
    Redis(Arc<RedisBackend>),
}

impl Running {
    async fn stop(self) {
        match self {
            Running::Embedded { engine, timers } => {
                engine.close();
                let _ = timers.join();
                // The last reference: the writer drains and syncs before we exit.
                drop(engine);
            }
            // Lets go of its shards: the other nodes take them at their next
            // renewal, not when the leases run out.
            Running::Redis(backend) => backend.shutdown().await,
        }
    }
}

/// Listens on `listen`, and says where on stdout (`http HOST:PORT`, or
/// `https HOST:PORT`), for whoever started us with port 0.
fn bind(listen: SocketAddr, scheme: &str) -> anyhow::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(listen).with_context(|| format!("cannot listen on {listen}"))?;
    listener.set_nonblocking(true)?;
    println!("{scheme} {}", listener.local_addr()?);
    Ok(listener)
}

/// Connects to Redis, waiting up to `wait` while it cannot be reached;
/// meanwhile `listener` answers 503: `/healthz` with the reason, every other
/// request `store_unavailable`. `None` if a shutdown signal came first.
async fn connect_redis(
    options: RedisOptions,
    listener: &std::net::TcpListener,
    keys: Arc<Keys>,
    connections: Connections,
    wait: Duration,
) -> anyhow::Result<Option<Arc<RedisBackend>>> {
    let target = options.target.clone();
    let (why, why_now) = tokio::sync::watch::channel(format!("connecting to redis at {target}"));
    let (reached, is_reached) = tokio::sync::watch::channel(false);
    let unreached = tokio::net::TcpListener::from_std(listener.try_clone()?)?;
    let reached_future = async move {
        let mut is_reached = is_reached;
        let _ = is_reached.wait_for(|&reached| reached).await;
    };
    let answering =
        tokio::spawn(hourglass_server::serve_unreached(unreached, keys, connections, why_now, reached_future));
    let waiting = |error: &hourglass_redis::ConnectError| {
        let cause = std::error::Error::source(error).map(|cause| format!(": {cause}")).unwrap_or_default();
        let _ = why.send(format!("{error}{cause}"));
    };
    let connected = tokio::select! {
        connected = RedisBackend::connect_within(options, wait, waiting) => connected,
        () = shutdown_signal() => return Ok(None),
    };
    let _ = reached.send(true);
    if tokio::time::timeout(UNREACHED_STOP_WITHIN, answering).await.is_err() {
        tracing::warn!("the answers given while waiting for the store did not finish in time");
    }
    connected.map(Some).map_err(|error| {
        let gave_up = if error.is_unreachable() {
            format!(" (waited {} for it: --store-wait)", humantime::format_duration(wait))
        } else {
            String::new()
        };
        anyhow::Error::new(error).context(format!("cannot use the store {target}{gave_up}"))
    })
}

/// Opens the embedded store in --data and starts its timer thread; says how
/// durable a 2xx is.
fn open_embedded(args: &ServeArgs, limits: Limits) -> anyhow::Result<(Arc<Engine>, String, TimerThread)> {
    let started = Instant::now();
    let store = if args.check_store { RedbStore::open_checked(&args.data) } else { RedbStore::open(&args.data) }
        .with_context(|| format!("cannot open the store in {}", args.data.display()))?;
    let fsync = args.fsync_every_ms.map_or(Fsync::Always, Fsync::EveryMs);
    let engine = Engine::open(Box::new(store), Options { fsync, limits }, Arc::new(SystemWallClock))
        .with_context(|| format!("cannot load the tasks in {}", args.data.display()))?;
    let timers = engine.start_timers().context("cannot start the timer thread")?;
    tracing::info!(took = ?started.elapsed(), data = %args.data.display(), "recovered the store");
    let fsync = match fsync {
        Fsync::Always => "before every reply".to_owned(),
        Fsync::EveryMs(ms) => format!("every {ms} ms"),
    };
    Ok((engine, fsync, timers))
}

/// Binds the beanstalkd front and serves it until `stopping`.
async fn start_beanstalk(
    front: Arc<Front>,
    listen: &Listen,
    stopping: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    match listen {
        Listen::Tcp(address) => {
            let listener = tokio::net::TcpListener::bind(address)
                .await
                .with_context(|| format!("cannot listen for beanstalk clients on {address}"))?;
            let address = listener.local_addr()?;
            tracing::info!(%address, "serving beanstalkd's protocol");
            println!("beanstalk {address}");
            tokio::spawn(beanstalk::serve_tcp(front, listener, stopping));
        }
        #[cfg(unix)]
        Listen::Unix(path) => {
            // A socket file left by a server that is gone is replaced.
            if std::os::unix::net::UnixStream::connect(path).is_err() {
                let _ = std::fs::remove_file(path);
            }
            let listener = tokio::net::UnixListener::bind(path)
                .with_context(|| format!("cannot listen for beanstalk clients on {}", path.display()))?;
            tracing::info!(path = %path.display(), "serving beanstalkd's protocol");
            println!("beanstalk unix:{}", path.display());
            tokio::spawn(beanstalk::serve_unix(front, listener, stopping));
        }
        #[cfg(not(unix))]
        Listen::Unix(_) => anyhow::bail!("unix sockets need a Unix system"),
    }
    Ok(())
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let terminate = async {
        #[cfg(unix)]
        {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        }
        #[cfg(not(unix))]
        std::future::pending::<()>().await
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate => {}
    }
    tracing::info!("shutting down: finishing the requests in flight");
}
