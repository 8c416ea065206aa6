//! Listings: each shard's page of a queue's set, merged in the set's order.

use redis::Value;

use hourglass_queue::limits::ANSWER_PAYLOAD_BYTES_MAX;
use hourglass_queue::{Cursor, Page, QueueError};
use hourglass_queue::{Status, TaskInfo, TaskState};

use crate::error::storage;
use crate::scripts::SCRIPTS;
use crate::{keys, RedisBackend};

/// How a status's tasks are ordered: the key a page is merged by, which is
/// also its cursor (priority, time, id).
type Order = fn(&TaskInfo) -> (u64, u64, u64);

impl RedisBackend {
    /// A page of one status of `queue`, merged over the shards.
    pub(crate) async fn list_status(
        &self,
        queue: &str,
        status: Status,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Page, QueueError> {
        let (names, order): (&[&str], Order) = match status {
            Status::Scheduled => (&["s"], |t| (0, t.task.run_at_ms, t.task.id)),
            // Due for pull claims and for push claims: two sets, one order.
            Status::Due => (&["r", "R"], |t| (u64::from(t.task.priority), t.task.run_at_ms, t.task.id)),
            Status::Leased => (&["l"], |t| match t.task.state {
                TaskState::Leased { until_ms, .. } => (0, until_ms, t.task.id),
                _ => (0, 0, t.task.id),
            }),
            Status::Dead => (&["d"], |t| (0, 0, t.task.id)),
        };
        let start = |shard: u16| -> String {
            let Some(after) = after else { return "-".into() };
            let seq = keys::seq_at_or_before(after.id, shard);
            let prefix = |member: String| member[..member.len() - keys::SEQ_DIGITS].to_owned();
            match (status, seq) {
                (Status::Dead, Some(seq)) => format!("({}", keys::field(seq)),
                (Status::Dead, None) => "-".into(),
                (Status::Due, Some(seq)) => format!("({}", keys::ready_member(after.priority, after.run_at_ms, seq)),
                (Status::Due, None) => format!("({}", prefix(keys::ready_member(after.priority, after.run_at_ms, 0))),
                (_, Some(seq)) => format!("({}", keys::at_member(after.run_at_ms, seq)),
                (_, None) => format!("({}", prefix(keys::at_member(after.run_at_ms, 0))),
            }
        };
        let sets = (0..self.shards).flat_map(|shard| names.iter().map(move |&name| (shard, name)));
        let reads = sets.map(|(shard, name)| {
            let mut invocation = SCRIPTS.read.key(self.keys.shard(shard, "t"));
            invocation
                .key(self.keys.shard(shard, "p"))
                .key(self.keys.queue(shard, name, queue))
                .arg("range")
                .arg(start(shard))
                .arg(limit);
            let mut conn = self.conn();
            async move {
                let value: Value = invocation.invoke_async(&mut conn).await.map_err(storage)?;
                self.read_reply(shard, value)
            }
        });
        let mut more = false;
        let mut tasks = Vec::new();
        for read in futures_util::future::join_all(reads).await {
            let read = read?;
            more |= read.len() >= limit;
            tasks.extend(read);
        }
        tasks.sort_by_key(order);
        more |= tasks.len() > limit;
        tasks.truncate(limit);
        let mut bytes = 0;
        if let Some(cut) = tasks.iter().position(|t| {
            bytes += t.payload.len();
            bytes > ANSWER_PAYLOAD_BYTES_MAX
        }) {
            tasks.truncate(cut.max(1));
            more = true;
        }
        for task in &mut tasks {
            // As filed: one not yet moved to due by its owner is still scheduled.
            task.status = status;
        }
        let next = more
            .then(|| {
                tasks.last().map(|t| {
                    let (priority, run_at_ms, id) = order(t);
                    Cursor { priority: priority as u32, run_at_ms, id }
                })
            })
            .flatten();
        Ok(Page { tasks, next })
    }

    /// A page of every status of `queue`, one status after the other; the
    /// cursor's top bits of `run_at_ms` say which status it is in (a cursor
    /// of time and id 0 starts a status from its first task).
    pub(crate) async fn list_all(
        &self,
        queue: &str,
        after_cursor: Option<Cursor>,
        limit: usize,
    ) -> Result<Page, QueueError> {
        // Every status, one after the other; the cursor's top bits of
        // `run_at_ms` say which status it is in.
        const PHASE_SHIFT: u32 = 60;
        let after = after_cursor.unwrap_or_default();
        let mut phase = (after.run_at_ms >> PHASE_SHIFT) as usize;
        let mut within = after_cursor.map(|c| Cursor { run_at_ms: c.run_at_ms & ((1 << PHASE_SHIFT) - 1), ..c });
        let mut tasks = Vec::new();
        while phase < Status::ALL.len() && tasks.len() < limit {
            let page = self.list_status(queue, Status::ALL[phase], within, limit - tasks.len()).await?;
            tasks.extend(page.tasks);
            if let Some(next) = page.next {
                let run_at_ms = next.run_at_ms | (phase as u64) << PHASE_SHIFT;
                return Ok(Page { tasks, next: Some(Cursor { run_at_ms, ..next }) });
            }
            phase += 1;
            within = None;
        }
        let next = (phase < Status::ALL.len()).then_some(Cursor {
            priority: 0,
            run_at_ms: (phase as u64) << PHASE_SHIFT,
            id: 0,
        });
        Ok(Page { tasks, next })
    }
}
