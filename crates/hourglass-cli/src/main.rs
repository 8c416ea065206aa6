//! `hourglass`: serve the durable delay queue, and talk to it.
//!
//! Glue only: the engine lives in `hourglass-embedded` (or Redis, in
//! `hourglass-redis`), the HTTP API in `hourglass-server`, and the commands
//! talk to it through `hourglass-client`. The load generator is a binary of
//! its own, `hourglass-load` (`bench/load`).

mod client;
mod push;
mod queue;
mod render;
mod schedule;
mod serve;
mod tail;
mod tls;

use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use hourglass_client::wire::{ClaimRequest, HttpTarget, NewTask, Node, OverviewQueue, Totals};
use hourglass_queue::{SystemWallClock, WallClock};
use serde::Serialize;
use serde_json::value::RawValue;

use client::{connect, Explain};
use queue::QueueCommand;
use schedule::ScheduleCommand;

/// jemalloc instead of glibc's malloc: under many small requests the server
/// spent about 14 % of its samples in glibc's malloc and free. Measured side
/// by side (BENCHMARKS.md): 1.3 to 1.5x the enqueue rate for 5 to 7 % more
/// resident memory at a million tasks; mimalloc was slower here and held
/// 25 to 33 % more.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The address `serve` listens on by default: loopback, and a port no common
/// service uses.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7463";

#[derive(Parser, Debug)]
#[command(name = "hourglass", version, about = "A durable delay queue: deliver this payload to queue Q in 30 minutes")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the server: HTTP API on --listen, tasks stored in --data.
    Serve(Box<serve::ServeArgs>),
    /// Enqueue a task.
    Add {
        /// The queue.
        queue: String,
        /// Due after this long (30s, 5m, 1h30m, 250ms).
        #[arg(long = "in", value_parser = humantime::parse_duration, default_value = "0s")]
        delay: Duration,
        /// The payload, as JSON.
        #[arg(long, default_value = "null")]
        payload: String,
        /// Idempotency key: a live task with the same key is returned instead.
        #[arg(long)]
        key: Option<String>,
        /// Deliveries allowed before the task is dead.
        #[arg(long)]
        max_attempts: Option<u32>,
        /// Repeat at this period.
        #[arg(long, value_parser = humantime::parse_duration)]
        every: Option<Duration>,
        /// Not delivered within this long of coming due, the task is dead
        /// (reason `expired`) instead of running late.
        #[arg(long, value_parser = humantime::parse_duration)]
        expires_in: Option<Duration>,
        /// Deliver it by an HTTP request to this URL (its payload the body)
        /// instead of to a claim.
        #[arg(long)]
        http: Option<String>,
        /// The request's method (GET, POST, PUT, PATCH, DELETE).
        #[arg(long, requires = "http")]
        http_method: Option<String>,
        /// A header of the request, `Name: value` (repeatable).
        #[arg(long = "http-header", requires = "http", value_parser = queue::header)]
        http_headers: Vec<(String, String)>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Show or change a queue's settings: its push target, its rate and its
    /// cap on tasks in flight.
    #[command(subcommand)]
    Queue(QueueCommand),
    /// Put, list, show or delete schedules: a task at every occurrence of a
    /// cron expression in a time zone, or of a period.
    #[command(subcommand)]
    Schedule(ScheduleCommand),
    /// Cancel a task.
    Cancel {
        /// The task's id.
        id: u64,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Show a task: every field, and its payload.
    Show {
        /// The task's id.
        id: u64,
        /// Print the server's JSON answer instead.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Show every queue's counts, lateness and rates, or one queue's.
    Stats {
        /// One queue.
        queue: Option<String>,
        /// Print the server's JSON answer instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Follow a queue live: a line whenever its tasks are enqueued,
    /// delivered, acked or die, with its counts. Ctrl-C stops.
    Tail {
        /// The queue.
        queue: String,
        /// How often to look.
        #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
        every: Duration,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Pause a queue: claims hand out nothing and due tasks wait, until
    /// resumed (a pause survives restarts).
    Pause {
        /// The queue.
        queue: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Resume a paused queue.
    Resume {
        /// The queue.
        queue: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Delete every dead task of a queue.
    DeleteDead {
        /// The queue.
        queue: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Claim due tasks of a queue and print them.
    Claim {
        /// The queue.
        queue: String,
        /// Most tasks to take.
        #[arg(long, default_value_t = 1)]
        max: usize,
        /// How long the lease lasts.
        #[arg(long, value_parser = humantime::parse_duration, default_value = "30s")]
        lease: Duration,
        /// How long to wait for a task to come due.
        #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
        wait: Duration,
        /// Ack each task after printing it.
        #[arg(long)]
        ack: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
}

/// Where the server is.
#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    /// The server's base URL.
    #[arg(long, env = "HOURGLASS_SERVER", default_value = concat!("http://", "127.0.0.1:7463"))]
    server: String,
    /// Bearer token, if the server requires one.
    #[arg(long, env = "HOURGLASS_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// This machine's clock, Unix ms: for times shown relative to now.
fn now_ms() -> u64 {
    SystemWallClock.now_ms()
}

/// Prints `value` as indented JSON.
fn print(value: &impl Serialize) -> anyhow::Result<()> {
    println!("{}", render::pretty(value)?);
    Ok(())
}

/// A payload given on the command line: JSON, sent as it was typed.
fn payload(text: &str) -> anyhow::Result<Box<RawValue>> {
    serde_json::from_str(text).map_err(|e| anyhow::anyhow!("--payload is not JSON: {e}"))
}

/// What `stats --json` prints: the overview's queues (or the one asked for)
/// and the totals; and the nodes, where several share the store.
#[derive(Serialize)]
struct Stats {
    queues: Vec<OverviewQueue>,
    totals: Totals,
    #[serde(skip_serializing_if = "Option::is_none")]
    nodes: Option<Vec<Node>>,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)
        .and_then(|runtime| runtime.block_on(run(cli.command)));
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            // The chain of causes, without a backtrace: this is for people. A
            // cause that its error repeats (redis's, of its I/O error) is
            // said once.
            let mut message = error.to_string();
            for cause in error.chain().skip(1) {
                let cause = cause.to_string();
                if !message.ends_with(&cause) {
                    message = format!("{message}: {cause}");
                }
            }
            eprintln!("error: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve(args) => serve::serve(*args).await,
        Command::Add {
            queue,
            delay,
            payload: text,
            key,
            max_attempts,
            every,
            expires_in,
            http,
            http_method,
            http_headers,
            server,
        } => {
            let http =
                http.map(|url| HttpTarget { url, method: http_method, headers: http_headers.into_iter().collect() });
            let task = NewTask {
                http,
                delay_ms: Some(millis(delay)),
                key,
                max_attempts,
                every_ms: every.map(millis),
                expires_after_ms: expires_in.map(|expires_in| millis(delay + expires_in)),
                ..NewTask::new(payload(&text)?)
            };
            let client = connect(&server);
            print(&client.enqueue(&queue, &task).await.explain(&client)?.value)
        }
        Command::Schedule(command) => schedule::run(command).await,
        Command::Queue(command) => queue::run(command).await,
        Command::Cancel { id, server } => {
            let client = connect(&server);
            client.cancel(id).await.explain(&client)?;
            println!("cancelled {id}");
            Ok(())
        }
        Command::Show { id, json, server } => {
            let client = connect(&server);
            let task = client.get(id).await.explain(&client)?;
            if json {
                print(&task)
            } else {
                print!("{}", render::task(&task, now_ms())?);
                Ok(())
            }
        }
        Command::Stats { queue, json, server } => {
            let client = connect(&server);
            let mut overview = client.overview(true).await.explain(&client)?;
            if let Some(queue) = &queue {
                overview.queues.retain(|q| q.queue.name == *queue);
                if overview.queues.is_empty() {
                    anyhow::bail!("no queue {queue:?} on this server: `hourglass stats` lists them");
                }
            }
            if json {
                print(&Stats { queues: overview.queues, totals: overview.totals, nodes: overview.nodes })
            } else {
                print!("{}", render::queues(&overview));
                Ok(())
            }
        }
        Command::Tail { queue, every, server } => tail::follow(&connect(&server), &queue, every).await,
        Command::Pause { queue, server } => {
            let client = connect(&server);
            client.pause_queue(&queue).await.explain(&client)?;
            println!("paused {queue}: claims hand out nothing until `hourglass resume {queue}`");
            Ok(())
        }
        Command::Resume { queue, server } => {
            let client = connect(&server);
            client.resume_queue(&queue).await.explain(&client)?;
            println!("resumed {queue}");
            Ok(())
        }
        Command::DeleteDead { queue, server } => {
            let client = connect(&server);
            let done = client.delete_dead(&queue).await.explain(&client)?;
            println!("deleted {} dead tasks of {queue}", render::count(done.deleted));
            Ok(())
        }
        Command::Claim { queue, max, lease, wait, ack, server } => {
            let client = connect(&server);
            let claim =
                ClaimRequest { max: Some(max), lease_ms: Some(millis(lease)), wait_ms: Some(millis(wait)), acks: None };
            for task in client.claim(&queue, &claim).await.explain(&client)?.tasks {
                print(&task)?;
                if ack {
                    client.ack(task.id, task.lease).await.explain(&client)?;
                }
            }
            Ok(())
        }
    }
}
