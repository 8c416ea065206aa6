//! `hourglass-load`: the same workload against a hourglass server and
//! against beanstalkd, so that the two are compared in one run; the client
//! of `bench/engine-before-after.sh` and the other scripts in `bench/`.
//!
//! ```text
//! cargo run --release -p hourglass-load -- --workload enqueue --producers 64 --tasks 40000
//! cargo run --release -p hourglass-load -- --target beanstalkd --workload lateness --rate 2000
//! ```
//!
//! The workloads, each with payloads of `--payload-bytes`:
//! - `enqueue`: producers send `--tasks` tasks as fast as they can (one per
//!   request, or `--batch` per request), due far in the future; reports tasks
//!   per second and request latency.
//! - `lateness`: producers send tasks at `--rate` per second for `--seconds`,
//!   each due `--delay` later; consumers wait for them and ack; reports how late
//!   each task reached a consumer, from its due time.
//! - `drain`: `--tasks` tasks due at once are enqueued first (not timed), then
//!   consumers claim and ack them as fast as they can; reports tasks per second
//!   and, with `--server-pid`, the server's CPU and sleeps a job in the drain.
//! - `worker-drain`: `drain` with `hourglass-client`'s `Worker` as each
//!   consumer (a handler that does nothing), to weigh the worker against the
//!   raw claims and batch acks of `drain --acks batch`.
//! - `burst`: `--tasks` tasks all due at one instant (enqueued before it, in
//!   batches of `--batch`) while consumers wait; reports how long after that
//!   instant the last one reached a consumer.
//! - `churn`: through beanstalkd's protocol, rounds of delayed puts, all
//!   deleted, with the data directory's size after each.
//! - `fsync`: no server; `--tasks` small appends to a file in `--disk`, each
//!   synced: the disk's sync latency, which every durable row waits for.
//!
//! `--also URL` adds nodes of the same service: producers and consumers are
//! spread over them all.
//!
//! # Clients
//! Consumers, and producers with `--http-client reqwest`, use
//! `hourglass-client`, the typed client the `hourglass` command uses. The
//! default producers (`lean`) write each request whole on one keep-alive
//! connection, to measure the server rather than the client; their bodies
//! are the wire crate's types all the same. The beanstalkd protocol has a
//! client of its own here ([`beanstalk`]).

mod args;
mod beanstalk;
mod consumer;
mod disk;
mod lean;
mod producer;
mod receive;
mod report;
mod server_cpu;
mod worker;
mod workloads;

use clap::Parser;

use args::{LoadArgs, Workload};

fn main() -> std::process::ExitCode {
    let args = LoadArgs::parse();
    let result = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)
        .and_then(|runtime| runtime.block_on(run(args)));
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: LoadArgs) -> anyhow::Result<()> {
    args.check()?;
    // A queue (a tube) of this run's own.
    let tube = format!("bench-{}", report::now_us());
    match args.workload {
        Workload::Enqueue => workloads::enqueue(&args, &tube).await,
        Workload::Lateness => workloads::lateness(&args, &tube).await,
        Workload::Drain => workloads::drain(&args, &tube).await,
        Workload::WorkerDrain => worker::worker_drain(&args, &tube).await,
        Workload::Burst => workloads::burst(&args, &tube).await,
        Workload::Churn => workloads::churn(&args, &tube).await,
        Workload::Receive => receive::receive(&args).await,
        Workload::Fsync => disk::fsync(&args),
    }
}
