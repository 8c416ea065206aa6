//! `hourglass`: serve the durable delay queue, talk to it, put load on it.
//!
//! Glue only: the engine lives in `hourglass-queue`, the HTTP API in
//! `hourglass-server`.

mod bench;
mod client;
mod render;
mod serve;
mod tail;

use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use serde_json::{json, Value};

/// jemalloc instead of glibc's malloc: under many small requests the server
/// spent about 14 % of its samples in glibc's malloc and free. Measured side
/// by side (BENCHMARKS.md): 1.3 to 1.5x the enqueue rate for 5 to 7 % more
/// resident memory at a million tasks; mimalloc was slower here and held
/// 25 to 33 % more.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use client::Client;

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
    Serve(serve::ServeArgs),
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
        #[command(flatten)]
        server: ServerArgs,
    },
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
    /// Put load on a server (and, to compare, on beanstalkd) and report
    /// throughput and lateness.
    Bench(bench::BenchArgs),
}

#[derive(Subcommand, Debug)]
enum ScheduleCommand {
    /// Create or replace a schedule.
    Put {
        /// The schedule's name.
        name: String,
        /// The queue its tasks go to.
        #[arg(long)]
        queue: String,
        /// A cron expression: 5 fields, 6 with seconds first, or @daily and the like.
        #[arg(long, conflicts_with = "every", required_unless_present = "every")]
        cron: Option<String>,
        /// The time zone the cron expression is read in (IANA name).
        #[arg(long = "tz", default_value = "UTC", requires = "cron")]
        time_zone: String,
        /// A fixed period instead of a cron expression.
        #[arg(long, value_parser = humantime::parse_duration)]
        every: Option<Duration>,
        /// The payload of every task, as JSON.
        #[arg(long, default_value = "null")]
        payload: String,
        /// Occurrences missed while the server was down: skip, once or all.
        #[arg(long, default_value = "skip")]
        misfire: String,
        /// An occurrence while the previous task is alive: allow or forbid.
        #[arg(long, default_value = "allow")]
        overlap: String,
        /// Deliveries allowed for each task.
        #[arg(long)]
        max_attempts: Option<u32>,
        /// A deadline for each run: not started within this long of its
        /// time, it is skipped (or its task dies, reason `expired`).
        #[arg(long, value_parser = humantime::parse_duration)]
        expires_in: Option<Duration>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List the schedules with their next runs.
    List {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Show a schedule and its next five runs.
    Show {
        /// The schedule's name.
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Pause a schedule: it enqueues nothing until resumed.
    Pause {
        /// The schedule's name.
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Resume a paused schedule; what it missed goes to its misfire policy.
    Resume {
        /// The schedule's name.
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Delete a schedule (tasks it enqueued stay).
    Delete {
        /// The schedule's name.
        name: String,
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
    u64::try_from(jiff::Timestamp::now().as_millisecond()).unwrap_or(0)
}

fn print(value: &Value) {
    println!("{}", serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string()));
}

/// A JSON argument, or an error that names it.
fn json_arg(text: &str) -> anyhow::Result<Value> {
    serde_json::from_str(text).map_err(|e| anyhow::anyhow!("--payload is not JSON: {e}"))
}

async fn schedule(command: ScheduleCommand) -> anyhow::Result<()> {
    match command {
        ScheduleCommand::Put {
            name,
            queue,
            cron,
            time_zone,
            every,
            payload,
            misfire,
            overlap,
            max_attempts,
            expires_in,
            server,
        } => {
            let mut body =
                json!({ "queue": queue, "payload": json_arg(&payload)?, "misfire": misfire, "overlap": overlap });
            match (cron, every) {
                (Some(cron), _) => {
                    body["cron"] = json!(cron);
                    body["time_zone"] = json!(time_zone);
                }
                (None, Some(every)) => body["every_ms"] = json!(millis(every)),
                (None, None) => unreachable!("clap requires --cron or --every"),
            }
            if let Some(max_attempts) = max_attempts {
                body["max_attempts"] = json!(max_attempts);
            }
            if let Some(expires_in) = expires_in {
                body["expires_after_ms"] = json!(millis(expires_in));
            }
            print(&Client::new(&server)?.put(&format!("/v1/schedules/{name}"), &body).await?);
        }
        ScheduleCommand::List { server } => print(&Client::new(&server)?.get("/v1/schedules").await?),
        ScheduleCommand::Show { name, server } => {
            print(&Client::new(&server)?.get(&format!("/v1/schedules/{name}")).await?);
        }
        ScheduleCommand::Pause { name, server } => {
            print(&Client::new(&server)?.post(&format!("/v1/schedules/{name}/pause"), &json!({})).await?);
        }
        ScheduleCommand::Resume { name, server } => {
            print(&Client::new(&server)?.post(&format!("/v1/schedules/{name}/resume"), &json!({})).await?);
        }
        ScheduleCommand::Delete { name, server } => {
            Client::new(&server)?.delete(&format!("/v1/schedules/{name}")).await?;
            println!("deleted schedule {name}");
        }
    }
    Ok(())
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
            // The chain of causes, without a backtrace: this is for people.
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve(args) => serve::serve(args).await,
        Command::Add { queue, delay, payload, key, max_attempts, every, expires_in, server } => {
            let payload = json_arg(&payload)?;
            let mut body = json!({ "payload": payload, "delay_ms": millis(delay) });
            if let Some(key) = key {
                body["key"] = json!(key);
            }
            if let Some(max_attempts) = max_attempts {
                body["max_attempts"] = json!(max_attempts);
            }
            if let Some(every) = every {
                body["every_ms"] = json!(millis(every));
            }
            if let Some(expires_in) = expires_in {
                body["expires_after_ms"] = json!(millis(delay + expires_in));
            }
            print(&Client::new(&server)?.post(&format!("/v1/queues/{queue}/tasks"), &body).await?);
            Ok(())
        }
        Command::Schedule(command) => schedule(command).await,
        Command::Cancel { id, server } => {
            Client::new(&server)?.delete(&format!("/v1/tasks/{id}")).await?;
            println!("cancelled {id}");
            Ok(())
        }
        Command::Show { id, json, server } => {
            let task = Client::new(&server)?.get(&format!("/v1/tasks/{id}")).await?;
            if json {
                print(&task);
            } else {
                print!("{}", render::task(&task, now_ms()));
            }
            Ok(())
        }
        Command::Stats { queue, json, server } => {
            let mut overview = Client::new(&server)?.get("/v1/overview?fresh=true").await?;
            if let Some(queue) = &queue {
                let queues = overview["queues"].as_array_mut().map(std::mem::take).unwrap_or_default();
                let one: Vec<Value> = queues.into_iter().filter(|q| q["name"] == json!(queue)).collect();
                if one.is_empty() {
                    anyhow::bail!("no queue {queue:?} on this server: `hourglass stats` lists them");
                }
                overview["queues"] = json!(one);
            }
            if json {
                print(&json!({ "queues": overview["queues"], "totals": overview["totals"] }));
            } else {
                print!("{}", render::queues(&overview));
            }
            Ok(())
        }
        Command::Tail { queue, every, server } => tail::follow(&Client::new(&server)?, &queue, every).await,
        Command::Pause { queue, server } => {
            Client::new(&server)?.post(&format!("/v1/queues/{queue}/pause"), &json!({})).await?;
            println!("paused {queue}: claims hand out nothing until `hourglass resume {queue}`");
            Ok(())
        }
        Command::Resume { queue, server } => {
            Client::new(&server)?.post(&format!("/v1/queues/{queue}/resume"), &json!({})).await?;
            println!("resumed {queue}");
            Ok(())
        }
        Command::DeleteDead { queue, server } => {
            let done = Client::new(&server)?.delete(&format!("/v1/queues/{queue}/dead")).await?;
            println!("deleted {} dead tasks of {queue}", render::count(&done["deleted"]));
            Ok(())
        }
        Command::Claim { queue, max, lease, wait, ack, server } => {
            let client = Client::new(&server)?;
            let body = json!({ "max": max, "lease_ms": millis(lease), "wait_ms": millis(wait) });
            let claimed = client.post(&format!("/v1/queues/{queue}/claim"), &body).await?;
            for task in claimed["tasks"].as_array().into_iter().flatten() {
                print(task);
                if ack {
                    let id = task["id"].as_u64().unwrap_or_default();
                    client.post(&format!("/v1/tasks/{id}/ack"), &json!({ "lease": task["lease"] })).await?;
                }
            }
            Ok(())
        }
        Command::Bench(args) => bench::run(args).await,
    }
}
