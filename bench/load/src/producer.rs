//! Producers: one connection each, sending tasks to hourglass (through the
//! typed client on reqwest, or the lean transport) or jobs to beanstalkd.
//! The tasks are the wire crate's [`NewTask`]s with a [`Payload`] of the
//! load's own.

use std::time::Duration;

use anyhow::bail;
use hourglass_client::wire::{NewTask, NewTasks};
use hourglass_client::Client;
use serde::{Deserialize, Serialize};
use serde_json::value::{to_raw_value, RawValue};

use crate::args::{HttpClient, LoadArgs, Target};
use crate::beanstalk::Beanstalk;
use crate::lean::Http1;
use crate::report::now_us;

/// How far ahead `enqueue` tasks are due: they must not fire during the run.
pub const ENQUEUE_DELAY: Duration = Duration::from_secs(3_600);

/// What every task carries: its due time (µs) where lateness is measured,
/// and filler to the payload size asked for. `{"due_us":...,"f":"xxx"}`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Payload<F> {
    /// When the task is due, Unix µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_us: Option<u64>,
    /// Filler.
    #[serde(default)]
    pub f: F,
}

impl Payload<&str> {
    fn raw(due_us: Option<u64>, filler: &str) -> anyhow::Result<Box<RawValue>> {
        Ok(to_raw_value(&Payload { due_us, f: filler })?)
    }
}

/// The due time a delivered payload carries, if it carries one.
pub fn due_us(payload: &RawValue) -> Option<u64> {
    // The filler is skipped, not copied.
    serde_json::from_str::<Payload<serde::de::IgnoredAny>>(payload.get()).ok()?.due_us
}

/// One producer connection.
pub enum Sender {
    /// hourglass, over HTTP.
    Hourglass(Http),
    /// beanstalkd's protocol, `use`ing the tube.
    Beanstalkd(Beanstalk),
}

/// A producer's HTTP connection to hourglass.
pub enum Http {
    /// The typed client, on reqwest.
    Reqwest { client: Client, queue: String },
    /// The lean transport; `path` is the queue's tasks.
    Lean { conn: Http1, path: String },
}

impl Sender {
    /// The `at`-th producer's connection, sending to `tube`.
    pub async fn connect(args: &LoadArgs, tube: &str, at: usize) -> anyhow::Result<Sender> {
        Ok(match (args.target, args.http_client) {
            (Target::Hourglass, HttpClient::Reqwest) => {
                Sender::Hourglass(Http::Reqwest { client: args.client(at), queue: tube.to_owned() })
            }
            (Target::Hourglass, HttpClient::Lean) => {
                let conn = Http1::connect(args.server(at), args.token.as_deref()).await?;
                // The tube is the load's own name (`bench-` and digits): nothing to encode.
                Sender::Hourglass(Http::Lean { conn, path: format!("/v1/queues/{tube}/tasks") })
            }
            (Target::Beanstalkd, _) => Sender::Beanstalkd(Beanstalk::using(&args.beanstalkd, tube).await?),
        })
    }

    /// Sends `count` tasks due after `delay` with `filler` in the payload.
    pub async fn send(&mut self, count: usize, delay: Duration, filler: &str) -> anyhow::Result<()> {
        match self {
            Sender::Hourglass(http) => {
                let payload = Payload::raw(None, filler)?;
                http.enqueue(NewTask { delay_ms: Some(delay.as_millis() as u64), ..NewTask::new(payload) }, count).await
            }
            Sender::Beanstalkd(conn) => conn.put(delay.as_secs(), filler.as_bytes()).await.map(drop),
        }
    }

    /// Sends `count` tasks due at `due_ms` (Unix ms), carrying it and `filler`.
    pub async fn send_at(&mut self, count: usize, due_ms: u64, filler: &str) -> anyhow::Result<()> {
        let Sender::Hourglass(http) = self else { bail!("beanstalkd has no batch put") };
        let payload = Payload::raw(Some(due_ms * 1_000), filler)?;
        http.enqueue(NewTask { run_at_ms: Some(due_ms), ..NewTask::new(payload) }, count).await
    }

    /// Sends one task due `delay` from now, carrying its due time and `filler`.
    pub async fn send_due(&mut self, delay: Duration, filler: &str) -> anyhow::Result<()> {
        match self {
            Sender::Hourglass(http) => {
                let run_at_ms = (now_us() + delay.as_micros() as u64).div_ceil(1_000);
                let payload = Payload::raw(Some(run_at_ms * 1_000), filler)?;
                http.enqueue(NewTask { run_at_ms: Some(run_at_ms), ..NewTask::new(payload) }, 1).await
            }
            Sender::Beanstalkd(conn) => {
                // beanstalkd counts delays in whole seconds from its receipt.
                let seconds = delay.as_secs_f64().round() as u64;
                let due_us = now_us() + seconds * 1_000_000;
                conn.put(seconds, format!("{due_us} {filler}").as_bytes()).await.map(drop)
            }
        }
    }
}

impl Http {
    /// Enqueues `count` copies of `task`: one request, to the batch endpoint
    /// if more than one.
    async fn enqueue(&mut self, task: NewTask, count: usize) -> anyhow::Result<()> {
        match self {
            Http::Reqwest { client, queue } if count == 1 => client.enqueue(queue, &task).await.map(drop)?,
            Http::Reqwest { client, queue } => {
                client.enqueue_batch(queue, &NewTasks { tasks: vec![task; count] }).await.map(drop)?
            }
            Http::Lean { conn, path } if count == 1 => conn.post(path, &task).await?,
            Http::Lean { conn, path } => {
                conn.post(&format!("{path}/batch"), &NewTasks { tasks: vec![task; count] }).await?
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_is_its_due_time_and_filler_and_reads_back() {
        let raw = Payload::raw(Some(1_500_000), "xx").unwrap();
        assert_eq!(raw.get(), r#"{"due_us":1500000,"f":"xx"}"#);
        assert_eq!(due_us(&raw), Some(1_500_000));
        let filler_only = Payload::raw(None, "xxxx").unwrap();
        assert_eq!(filler_only.get(), r#"{"f":"xxxx"}"#, "8 bytes more than the filler");
        assert_eq!(due_us(&filler_only), None);
    }
}
