//! The command line: which system, which workload, how much of it.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use clap::{Parser, ValueEnum};
use hourglass_client::Client;
use hourglass_queue::limits::BATCH_MAX;

/// Most concurrent producers or consumers.
const CLIENTS_MAX: usize = 1_024;
/// Largest payload filler the load makes.
const PAYLOAD_BYTES_MAX: usize = 64 * 1024;

/// Put load on a hourglass server (and, to compare, on beanstalkd) and
/// report throughput and lateness.
#[derive(Parser, Debug)]
#[command(name = "hourglass-load", version)]
pub struct LoadArgs {
    /// Which system to load.
    #[arg(long, value_enum, default_value = "hourglass")]
    pub target: Target,
    /// The workload.
    #[arg(long, value_enum, default_value = "enqueue")]
    pub workload: Workload,
    /// beanstalkd's address, for `--target beanstalkd`.
    #[arg(long, default_value = "127.0.0.1:11300")]
    pub beanstalkd: String,
    /// Concurrent producers (one connection each).
    #[arg(long, default_value_t = 64)]
    pub producers: usize,
    /// Concurrent consumers, for `lateness`.
    #[arg(long, default_value_t = 4)]
    pub consumers: usize,
    /// Tasks to send, for `enqueue`.
    #[arg(long, default_value_t = 20_000)]
    pub tasks: u64,
    /// Tasks per request (hourglass only: its batch endpoint).
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Tasks per second in all, for `lateness`.
    #[arg(long, default_value_t = 10_000)]
    pub rate: u64,
    /// How long to send, for `lateness`.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// How far ahead each `lateness` task is due (beanstalkd rounds to whole seconds).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    pub delay: Duration,
    /// Payload size in bytes.
    #[arg(long, default_value_t = 64)]
    pub payload_bytes: usize,
    /// Rounds of `churn`: each puts --tasks delayed jobs, then deletes them.
    #[arg(long, default_value_t = 10)]
    pub rounds: u32,
    /// In `churn`, every this many jobs one is kept (never deleted): the few
    /// long-lived jobs that pin a log's old files. 0 keeps none.
    #[arg(long, default_value_t = 0)]
    pub keep_every: u64,
    /// The server's data directory, whose size `churn` reports after each
    /// round (hourglass's --data, beanstalkd's -b); the directory whose
    /// disk `fsync` measures.
    #[arg(long, value_name = "DIR")]
    pub disk: Option<PathBuf>,
    /// For `drain`: the server's process id, to report its CPU time and
    /// voluntary context switches a job over the drain alone (read from
    /// `/proc` as the fill ends and as the drain ends, summed over its
    /// threads), where a sampler over the whole run would count the fill.
    #[arg(long, value_name = "PID")]
    pub server_pid: Option<u32>,
    /// The producers' HTTP client: `lean` (one keep-alive connection, the
    /// request written whole, like the beanstalkd client) measures the server;
    /// `reqwest` is a general-purpose client, which costs about as much CPU
    /// as the server it loads. Consumers always use reqwest.
    #[arg(long, value_enum, default_value = "lean")]
    pub http_client: HttpClient,
    /// How hourglass consumers ack: `one` request a task, or `batch`, one
    /// request for each claim's tasks (`POST /v1/acks`).
    #[arg(long, value_enum, default_value = "one")]
    pub acks: Acks,
    /// Tasks a raw hourglass consumer claims at once (`drain`, `lateness`,
    /// `burst`): 1 is the cycle of beanstalkd's reserve.
    #[arg(long, default_value_t = crate::consumer::CLAIM_MAX)]
    pub claim_max: usize,
    /// More nodes of the same service (`hourglass serve --store ...`), by
    /// base URL: producers and consumers are spread over --server and these,
    /// one after the other.
    #[arg(long, value_name = "URL")]
    pub also: Vec<String>,
    /// For `lateness` and `burst` on hourglass: no consumers; the queue's
    /// settings push its tasks to URL (a `receive` run reports them).
    #[arg(long, value_name = "URL")]
    pub push_to: Option<String>,
    /// Where `receive` listens.
    #[arg(long, default_value = "127.0.0.1:7600")]
    pub listen: String,
    /// The server's base URL.
    #[arg(long, env = "HOURGLASS_SERVER", default_value = "http://127.0.0.1:7463")]
    pub server: String,
    /// Bearer token, if the server requires one.
    #[arg(long, env = "HOURGLASS_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

impl LoadArgs {
    /// The checks the flags must pass together.
    pub fn check(&self) -> anyhow::Result<()> {
        if !(1..=CLIENTS_MAX).contains(&self.producers) || !(1..=CLIENTS_MAX).contains(&self.consumers) {
            bail!("--producers and --consumers must be within 1 ..= {CLIENTS_MAX}");
        }
        // The server's own limit on a claim.
        if !(1..=hourglass_queue::limits::CLAIM_MAX).contains(&self.claim_max) {
            bail!("--claim-max must be within 1 ..= {}", hourglass_queue::limits::CLAIM_MAX);
        }
        if self.payload_bytes > PAYLOAD_BYTES_MAX {
            bail!("--payload-bytes must be at most {PAYLOAD_BYTES_MAX}");
        }
        if self.batch == 0 || self.batch > BATCH_MAX {
            bail!("--batch must be within 1 ..= {BATCH_MAX}");
        }
        if self.batch > 1 && self.target == Target::Beanstalkd {
            bail!("beanstalkd has no batch put; use --batch 1");
        }
        if self.rate == 0 || self.seconds == 0 || self.tasks == 0 {
            bail!("--rate, --seconds and --tasks must be positive");
        }
        Ok(())
    }

    /// The base URL of the server the `at`-th producer or consumer talks to.
    pub fn server(&self, at: usize) -> &str {
        match at.checked_rem(self.also.len() + 1).and_then(|i| i.checked_sub(1)) {
            Some(also) => &self.also[also],
            None => &self.server,
        }
    }

    /// A client of the server the `at`-th producer or consumer talks to.
    pub fn client(&self, at: usize) -> Client {
        Client::new(self.server(at), self.token.clone())
    }
}

/// The system loaded.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Target {
    /// hourglass, over HTTP.
    Hourglass,
    /// beanstalkd's protocol: beanstalkd, or hourglass's front.
    Beanstalkd,
}

/// How hourglass consumers ack.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Acks {
    /// One request a task, alongside the next claims.
    One,
    /// One request a task, each answered before the consumer claims again:
    /// the cycle of beanstalkd's reserve and delete.
    Wait,
    /// One request for each claim's tasks (`worker-drain`: the worker's
    /// acks apart from its claims, in `POST /v1/acks`).
    Batch,
    /// The acks ride on the consumer's next claim (`worker-drain`: the
    /// worker's): one request a cycle.
    Claim,
}

/// The producers' HTTP client.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum HttpClient {
    /// One keep-alive connection, each request written whole.
    Lean,
    /// `hourglass_client` on reqwest.
    Reqwest,
}

/// What load to put.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Workload {
    /// Producers send `--tasks` tasks as fast as they can, due far ahead.
    Enqueue,
    /// Producers send at `--rate` for `--seconds`, each due `--delay` later,
    /// while consumers wait and ack.
    Lateness,
    /// `--tasks` tasks due at once are enqueued first, then claimed and acked
    /// as fast as the consumers go.
    Drain,
    /// `drain` with the client's `Worker` as each consumer.
    WorkerDrain,
    /// `--tasks` tasks all due at one instant, enqueued in batches before it
    /// (untimed) while the consumers wait: how long after that instant the
    /// last is delivered.
    Burst,
    /// Through beanstalkd's protocol: rounds of delayed puts, all deleted,
    /// with the data directory's size after each.
    Churn,
    /// No load: an HTTP receiver on `--listen` for push deliveries (or any
    /// POST with `Hourglass-Due-At`), until `--tasks` requests have come:
    /// lateness from due time to arrival, and requests a second.
    Receive,
    /// No server: `--tasks` small appends to a file in `--disk`, each synced:
    /// the disk's fsync latency, which every durable row waits for.
    Fsync,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn producers_and_consumers_are_spread_over_the_nodes_in_turn() {
        let args = LoadArgs::parse_from([
            "hourglass-load",
            "--server",
            "http://a",
            "--also",
            "http://b",
            "--also",
            "http://c",
        ]);
        let servers: Vec<&str> = (0..4).map(|at| args.server(at)).collect();
        assert_eq!(servers, ["http://a", "http://b", "http://c", "http://a"]);
        assert!(args.check().is_ok());
        let beanstalkd_batch = LoadArgs::parse_from(["hourglass-load", "--target", "beanstalkd", "--batch", "2"]);
        assert!(beanstalkd_batch.check().unwrap_err().to_string().contains("no batch put"));
    }
}
