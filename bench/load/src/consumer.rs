//! Consumers: one connection each, claiming from hourglass through the typed
//! client (and acking alongside, one request a task or one for a claim's
//! tasks), or reserving and deleting beanstalkd's jobs.

use std::sync::Arc;

use hourglass_client::wire::{Ack, AckResult, Acks, ClaimRequest, ClaimedTask, Lease};
use hourglass_client::Client;
use tokio::sync::Semaphore;

use crate::args::{self, LoadArgs, Target};
use crate::beanstalk::Beanstalk;
use crate::producer::due_us;
use crate::report::now_us;

/// Ack requests in flight per consumer at most: a consumer goes back to
/// waiting for tasks at once, as a real one would after handing them to
/// workers.
const ACKS_IN_FLIGHT_MAX: usize = 256;
/// Tasks a consumer claims at once, unless `--claim-max` says otherwise.
pub const CLAIM_MAX: usize = 64;
/// Each claim waits up to a second and leases for 30 s.
const CLAIM_WAIT_MS: u64 = 1_000;
const CLAIM_LEASE_MS: u64 = 30_000;
/// How long a reserve waits, in seconds.
const RESERVE_TIMEOUT_S: u64 = 1;

/// One consumer connection.
pub enum Receiver {
    /// hourglass, through the typed client.
    Hourglass {
        client: Client,
        queue: String,
        /// Ack requests in flight.
        acks: Arc<Semaphore>,
        mode: args::Acks,
        claim_max: usize,
        /// `--acks claim`: the last claim's acks, sent with the next.
        carried: Vec<Ack>,
    },
    /// beanstalkd's protocol, watching the tube alone.
    Beanstalkd(Beanstalk),
}

impl Receiver {
    /// The `at`-th consumer's connection, receiving from `tube`.
    pub async fn connect(args: &LoadArgs, tube: &str, at: usize) -> anyhow::Result<Receiver> {
        Ok(match args.target {
            Target::Hourglass => Receiver::Hourglass {
                client: args.client(at),
                queue: tube.to_owned(),
                acks: Arc::new(Semaphore::new(ACKS_IN_FLIGHT_MAX)),
                mode: args.acks,
                claim_max: args.claim_max,
                carried: Vec::new(),
            },
            Target::Beanstalkd => Receiver::Beanstalkd(Beanstalk::watching(&args.beanstalkd, tube).await?),
        })
    }

    /// Waits up to a second for due tasks, acks them, returns their due times (µs).
    pub async fn receive(&mut self) -> anyhow::Result<Vec<u64>> {
        match self {
            Receiver::Hourglass { client, queue, acks, mode, claim_max, carried } => {
                let claim = ClaimRequest {
                    max: Some(*claim_max),
                    wait_ms: Some(CLAIM_WAIT_MS),
                    lease_ms: Some(CLAIM_LEASE_MS),
                    acks: (!carried.is_empty()).then(|| std::mem::take(carried)),
                };
                let claimed = client.claim(queue, &claim).await?;
                if let Some(refused) = claimed.acks.iter().flatten().find(|ack| matches!(ack, AckResult::Failed { .. }))
                {
                    eprintln!("hourglass-load: an ack carried by a claim failed: {refused:?}");
                }
                let tasks = claimed.tasks;
                let at = now_us();
                let dues = tasks.iter().map(|task| task.payload.as_deref().and_then(due_us).unwrap_or(at)).collect();
                // Lateness is taken at receipt (the caller reads the clock as
                // soon as this returns); the acks run alongside, are awaited
                // (`wait`), or ride on the next claim.
                match mode {
                    args::Acks::Claim => carried.extend(tasks.iter().map(|task| Ack::new(task.id, task.lease))),
                    args::Acks::Wait => {
                        for task in &tasks {
                            client.ack(task.id, task.lease).await?;
                        }
                    }
                    args::Acks::One | args::Acks::Batch => ack(client, tasks, acks, *mode == args::Acks::Batch).await?,
                }
                Ok(dues)
            }
            Receiver::Beanstalkd(conn) => match conn.reserve(RESERVE_TIMEOUT_S).await? {
                None => Ok(Vec::new()),
                Some((id, body)) => {
                    let due_us = std::str::from_utf8(&body)
                        .ok()
                        .and_then(|s| s.split(' ').next()?.parse().ok())
                        .unwrap_or_else(now_us);
                    conn.delete(id).await?;
                    Ok(vec![due_us])
                }
            },
        }
    }
}

/// One ack request.
enum AckRequest {
    /// `POST /v1/tasks/{id}/ack`.
    One(u64, Lease),
    /// `POST /v1/acks`.
    Batch(Acks),
}

/// Acks `tasks` in the background, at most [`ACKS_IN_FLIGHT_MAX`] requests
/// at once: one request for them all (`batch`), or one each. A failed ack is
/// reported on stderr; the task comes back when its lease runs out.
async fn ack(client: &Client, tasks: Vec<ClaimedTask>, in_flight: &Arc<Semaphore>, batch: bool) -> anyhow::Result<()> {
    let requests: Vec<AckRequest> = if tasks.is_empty() {
        Vec::new()
    } else if batch {
        vec![AckRequest::Batch(Acks { acks: tasks.iter().map(|task| Ack::new(task.id, task.lease)).collect() })]
    } else {
        tasks.iter().map(|task| AckRequest::One(task.id, task.lease)).collect()
    };
    for request in requests {
        let permit = in_flight.clone().acquire_owned().await?;
        let client = client.clone();
        tokio::spawn(async move {
            let acked = match &request {
                AckRequest::One(id, lease) => client.ack(*id, *lease).await.map(drop),
                AckRequest::Batch(acks) => client.ack_batch(acks).await.map(drop),
            };
            if let Err(error) = acked {
                eprintln!("hourglass-load: an ack failed: {error}");
            }
            drop(permit);
        });
    }
    Ok(())
}
