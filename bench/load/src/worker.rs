//! `worker-drain`: `drain` with `hourglass-client`'s `Worker` as the
//! consumers, to measure what the worker costs beside the raw claims and
//! acks of `drain --acks batch`: as many workers as `--consumers`, each
//! running at most [`CLAIM_MAX`] handlers (what a raw consumer claims at
//! once), each handler doing nothing but count; their acks ride on claims
//! (`--acks claim`) or go apart in `POST /v1/acks` (`--acks batch`). The
//! time runs, as `drain`'s does, from the first claim to the last delivery;
//! the run fails unless every task was acked by the workers' return.

use std::time::{Duration, Instant};

use anyhow::bail;
use hourglass_client::wire::ClaimedTask;
use hourglass_client::{Worker, WorkerOptions};
use tokio::sync::watch;

use crate::args::{Acks, LoadArgs, Target};
use crate::consumer::CLAIM_MAX;
use crate::report::{progress, Tally};
use crate::workloads::fill;

pub async fn worker_drain(args: &LoadArgs, tube: &str) -> anyhow::Result<()> {
    if args.target != Target::Hourglass {
        bail!("worker-drain runs hourglass's Worker: --target hourglass");
    }
    let acks_on_claims = match args.acks {
        Acks::Claim => true,
        Acks::Batch => false,
        Acks::One | Acks::Wait => bail!("worker-drain acks in batches: --acks claim or --acks batch"),
    };
    let total = args.tasks;
    fill(args, tube).await?;
    let tally = Tally::new(progress(total, "worker-drain"));
    let (done, finished) = watch::channel(false);
    let options = WorkerOptions { concurrency: CLAIM_MAX, wait_ms: 1_000, acks_on_claims, ..WorkerOptions::default() };
    let started = Instant::now();
    let mut workers = Vec::new();
    for at in 0..args.consumers {
        let (tally, done, mut finished) = (tally.clone(), done.clone(), finished.clone());
        let worker = Worker::new(args.client(at), [tube], move |_task: ClaimedTask| {
            tally.count();
            if tally.received() >= total {
                let _ = done.send(true);
            }
            async { Ok::<_, String>(()) }
        })
        .options(options.clone());
        workers.push(tokio::spawn(worker.run_until(async move {
            let _ = tokio::time::timeout(Duration::from_secs(600), finished.wait_for(|done| *done)).await;
        })));
    }
    drop(finished);
    let mut acked = 0;
    for worker in workers {
        acked += worker.await??.acked;
    }
    // As `drain` measures: to the last delivery (the acks go on alongside).
    let elapsed = tally.last_at().saturating_duration_since(started);
    tally.finish().await;
    let got = tally.received();
    println!(
        "{:?} worker-drain (acks {:?}): {got} tasks of {} B claimed and acked by {} workers in {elapsed:.2?}: {:.0} tasks/s",
        args.target,
        args.acks,
        args.payload_bytes,
        args.consumers,
        got as f64 / elapsed.as_secs_f64(),
    );
    if acked < total {
        bail!("{} tasks were not acked", total - acked);
    }
    Ok(())
}
