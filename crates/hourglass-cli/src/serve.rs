//! `hourglass serve`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use bytesize::ByteSize;
use clap::Args;
use hourglass_queue::{Backend, Engine, Fsync, Limits, Options, RedbStore, SystemWallClock};
use hourglass_server::AppState;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = crate::DEFAULT_LISTEN)]
    listen: SocketAddr,
    /// Directory for the task store.
    #[arg(long, default_value = "./hourglass-data")]
    data: PathBuf,
    /// Require `Authorization: Bearer TOKEN` on every request.
    #[arg(long, env = "HOURGLASS_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Relaxed durability: reply without waiting for fsync, and make writes
    /// durable every this many milliseconds. A crash or power loss may lose the
    /// acknowledged writes of the last interval. Without it, every 2xx is on
    /// disk first.
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
}

/// The largest payload limit allowed: the store records a payload's length
/// in 32 bits, and a request carries it whole.
const PAYLOAD_BYTES_CEILING: usize = 256 << 20;

pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "hourglass=info,warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    if args.fsync_every_ms == Some(0) {
        anyhow::bail!("--fsync-every-ms must be at least 1 (leave it out to fsync before every reply)");
    }
    let started = Instant::now();
    let store = if args.check_store { RedbStore::open_checked(&args.data) } else { RedbStore::open(&args.data) }
        .with_context(|| format!("cannot open the store in {}", args.data.display()))?;
    let fsync = args.fsync_every_ms.map_or(Fsync::Always, Fsync::EveryMs);
    if args.max_payload_bytes > PAYLOAD_BYTES_CEILING {
        anyhow::bail!("--max-payload-bytes must be at most {PAYLOAD_BYTES_CEILING}");
    }
    let limits = Limits {
        payload_bytes_max: args.max_payload_bytes,
        tasks_max: args.max_tasks,
        memory_bytes_max: args.max_memory.as_u64(),
        disk_bytes_max: args.max_disk.map(|max| max.as_u64()),
    };
    let engine = Engine::open(Box::new(store), Options { fsync, limits }, Arc::new(SystemWallClock))
        .with_context(|| format!("cannot load the tasks in {}", args.data.display()))?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let timers = engine.start_timers().context("cannot start the timer thread")?;
    let totals = engine.totals().await;
    eprintln!(
        "hourglass: serving http://{} with {} tasks and {} schedules ({} in memory) from {} (ready in {:.0?}, fsync {})",
        listener.local_addr()?,
        totals.tasks,
        totals.schedules,
        ByteSize::b(totals.memory_bytes).display().iec(),
        args.data.display(),
        started.elapsed(),
        match fsync {
            Fsync::Always => "before every reply".to_owned(),
            Fsync::EveryMs(ms) => format!("every {ms} ms"),
        }
    );
    let state = AppState { backend: engine.clone(), token: args.token.map(Arc::from) };
    hourglass_server::serve(listener, state, args.max_payload_bytes, shutdown_signal()).await?;
    engine.close();
    let _ = timers.join();
    // The last reference: the writer drains and syncs before we exit.
    drop(engine);
    eprintln!("hourglass: stopped cleanly");
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
    eprintln!("hourglass: shutting down");
}
