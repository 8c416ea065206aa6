//! Queue counts: each shard's, summed, with the cluster's counters
//! (`figures.rs`).

use std::sync::Arc;

use hourglass_queue::limits::PRIORITY_DEFAULT;
use hourglass_queue::paused_at;
use hourglass_queue::{QueueError, QueueStats};

use crate::error::storage;
use crate::registry::read_pause;
use crate::reply::Reply;
use crate::scripts::SCRIPTS;
use crate::RedisBackend;

impl RedisBackend {
    /// Counts of `names`, summed over the shards.
    pub(crate) async fn counts(&self, names: &[(Arc<str>, String)]) -> Result<Vec<QueueStats>, QueueError> {
        let mut stats: Vec<QueueStats> = names
            .iter()
            .map(|(name, pause)| {
                let (paused, until) = read_pause(pause);
                let paused = paused_at(paused, until, self.redis_ms());
                QueueStats {
                    name: name.clone(),
                    paused,
                    paused_until_ms: until.filter(|_| paused),
                    ..QueueStats::default()
                }
            })
            .collect();
        const QUEUES_PER_SCRIPT: usize = 100;
        // Every shard's count scripts at once.
        let chunks = names.chunks(QUEUES_PER_SCRIPT).enumerate();
        let scripts: Vec<_> =
            (0..self.shards).flat_map(|shard| chunks.clone().map(move |chunk| (shard, chunk))).collect();
        let replies = futures_util::future::join_all(scripts.iter().map(|&(shard, (_, names))| {
            let mut invocation = SCRIPTS.counts.prepare_invoke();
            for (name, _) in names {
                for key in self.keys.queue_keys(shard, name) {
                    invocation.key(key);
                }
            }
            invocation.arg(PRIORITY_DEFAULT);
            let mut conn = self.conn();
            async move { invocation.invoke_async::<redis::Value>(&mut conn).await.map_err(storage) }
        }))
        .await;
        for ((_, (chunk, names)), reply) in scripts.iter().zip(replies) {
            let mut reply = Reply::new(reply?)?;
            for stats in &mut stats[chunk * QUEUES_PER_SCRIPT..][..names.len()] {
                stats.scheduled += reply.u64()? as usize;
                stats.due += reply.u64()? as usize;
                stats.urgent += reply.u64()? as usize;
                stats.leased += reply.u64()? as usize;
                stats.dead += reply.u64()? as usize;
                let oldest = reply.int()?;
                if oldest >= 0 {
                    let oldest = oldest as u64;
                    stats.oldest_due_ms = Some(stats.oldest_due_ms.map_or(oldest, |o| o.min(oldest)));
                }
            }
        }
        // Each queue's push target and flow control, for the dashboard.
        let mut settings = self.all_settings().await?;
        for stats in &mut stats {
            stats.settings = settings.remove(&*stats.name).unwrap_or_default();
        }
        let names: Vec<Arc<str>> = stats.iter().map(|s| s.name.clone()).collect();
        let figures = self.figures(&names).await?;
        for (stats, tally) in stats.iter_mut().zip(figures.queues) {
            (stats.enqueued, stats.delivered, stats.acked) = (tally.enqueued, tally.delivered, tally.acked);
            stats.lateness = tally.lateness();
        }
        Ok(stats)
    }
}
