//! One task's scripts: enqueues, reads, and the changes of a task by id.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use redis::{AsyncCommands, Value};

use hourglass_queue::validate;
use hourglass_queue::{Enqueued, Lease, QueueError, RunAt, Status, TaskInfo};

use crate::error::{storage, unexpected};
use crate::options::QUEUE_OF_MAX;
use crate::record::{self, Record};
use crate::reply::Reply;
use crate::scripts::SCRIPTS;
use crate::{keys, RedisBackend};

/// What the task script answered: the task as it now is, with its payload
/// (empty once the task is gone).
pub(crate) struct TaskDone {
    pub(crate) record: Record,
    pub(crate) payload: hourglass_queue::Payload,
}

/// A task to enqueue: its place in its batch, the task, when it is due and
/// when it expires (as asked: a script resolves delays by Redis's clock).
pub(crate) type Planned = (usize, validate::Checked, RunAt, Option<RunAt>);

/// An ack in a group: its place in the batch, its task's sequence number and
/// its lease token.
type AckOf = (usize, u64, String);

impl RedisBackend {
    /// Remembers that task `id` is of `queue`: the task script names the
    /// queue's keys, and acks, nacks and the like name only the id. At most
    /// [`QUEUE_OF_MAX`] are remembered; a task forgotten costs one more
    /// round trip.
    pub(crate) fn remember(&self, id: u64, queue: &Arc<str>) {
        let mut queue_of = self.queue_of.lock();
        if queue_of.len() >= QUEUE_OF_MAX {
            queue_of.clear();
        }
        queue_of.insert(id, queue.clone());
    }

    /// Runs the task script: `op` on task `id`, with `args`.
    pub(crate) async fn task(&self, id: u64, op: &str, args: &[String]) -> Result<TaskDone, QueueError> {
        let (shard, seq) = self.split(id)?;
        let mut queue: Arc<str> = self.queue_of.lock().get(&id).cloned().unwrap_or_else(|| "".into());
        for _ in 0..2 {
            let mut invocation = SCRIPTS.task.key(self.keys.shard(shard, "t"));
            invocation
                .key(self.keys.shard(shard, "p"))
                .key(self.keys.shard(shard, "h"))
                .key(self.keys.shard(shard, "lseq"));
            for key in self.keys.queue_keys(shard, &queue) {
                invocation.key(key);
            }
            invocation.arg(&self.channel).arg(shard).arg(op).arg(seq).arg(&*queue);
            for arg in args {
                invocation.arg(arg);
            }
            let mut reply = Reply::new(invocation.invoke_async(&mut self.conn()).await.map_err(storage)?)?;
            let code = reply.text()?;
            let now_ms = reply.u64()?;
            self.saw_time(now_ms);
            match code.as_str() {
                "ok" => {
                    let record = record::decode(shard, seq, &reply.bytes()?, now_ms)?;
                    if record.status == Status::Due {
                        // As an enqueue due now: seen here at once.
                        self.watch.hint_local(&record.task.queue, shard, now_ms);
                    }
                    return Ok(TaskDone { record, payload: reply.payload()? });
                }
                "queue" => queue = reply.text()?.into(),
                "not_found" => return Err(QueueError::NotFound(id)),
                "stale" => return Err(QueueError::StaleLease(id)),
                "conflict" => {
                    let why = match op {
                        "retry" => "is not dead",
                        _ => "is leased",
                    };
                    return Err(QueueError::Conflict(format!("task {id} {why}")));
                }
                other => return Err(unexpected(format!("unexpected answer {other}"))),
            }
        }
        Err(unexpected(format!("task {id} changed queue")))
    }

    pub(crate) fn info(done: TaskDone) -> TaskInfo {
        TaskInfo { task: done.record.task, payload: done.payload, status: done.record.status }
    }

    /// Reads tasks `seqs` of `shard`.
    pub(crate) async fn read(&self, shard: u16, seqs: &[u64]) -> Result<Vec<TaskInfo>, QueueError> {
        let mut invocation = SCRIPTS.read.key(self.keys.shard(shard, "t"));
        invocation.key(self.keys.shard(shard, "p")).key(self.keys.shard(shard, "t")).arg("ids");
        for seq in seqs {
            invocation.arg(seq);
        }
        self.read_reply(shard, invocation.invoke_async(&mut self.conn()).await.map_err(storage)?)
    }

    pub(crate) fn read_reply(&self, shard: u16, value: Value) -> Result<Vec<TaskInfo>, QueueError> {
        let mut reply = Reply::new(value)?;
        let now_ms = reply.u64()?;
        let mut tasks = Vec::new();
        while !reply.is_empty() {
            let seq = reply.u64()?;
            let record = record::decode(shard, seq, &reply.bytes()?, now_ms)?;
            tasks.push(TaskInfo { task: record.task, payload: reply.payload()?, status: record.status });
        }
        Ok(tasks)
    }

    /// One enqueue script: `tasks` (with their positions in the batch) into
    /// `queue` of `shard`.
    pub(crate) async fn enqueue_shard(
        &self,
        queue: &str,
        shard: u16,
        tasks: &[Planned],
    ) -> Result<Vec<(usize, Enqueued)>, QueueError> {
        let mut invocation = SCRIPTS.enqueue.key(self.keys.shard(shard, "t"));
        invocation.key(self.keys.shard(shard, "p")).key(self.keys.shard(shard, "seq")).key(self.keys.shard(shard, "h"));
        for key in self.keys.queue_keys(shard, queue) {
            invocation.key(key);
        }
        let cap = self.options.limits.tasks_max.div_ceil(usize::from(self.shards));
        invocation.arg(&self.channel).arg(shard).arg(queue).arg(cap);
        for (_, task, run_at, expires) in tasks {
            let (run_kind, run) = match run_at {
                RunAt::Delay(ms) => ("d", *ms),
                RunAt::At(_) => ("a", task.run_at_ms),
            };
            let (expiry_kind, expiry) = match expires {
                None => ("", 0),
                Some(RunAt::Delay(ms)) => ("d", *ms),
                Some(RunAt::At(ms)) => ("a", *ms),
            };
            let optional = |value: Option<u64>| value.map(|v| v.to_string()).unwrap_or_default();
            invocation
                .arg(task.payload.as_bytes())
                .arg(run_kind)
                .arg(run)
                .arg(task.key.as_deref().unwrap_or(""))
                .arg(task.max_attempts)
                .arg(task.priority)
                .arg(optional(task.lease_ms.map(u64::from)))
                .arg(optional(task.every_ms))
                .arg(expiry_kind)
                .arg(expiry)
                .arg(task.http.as_deref().map(crate::push::pack_target).unwrap_or_default());
        }
        self.enqueue_scripts.fetch_add(1, Ordering::Relaxed);
        let mut reply = Reply::new(invocation.invoke_async(&mut self.conn()).await.map_err(storage)?)?;
        match reply.text()?.as_str() {
            "ok" => {}
            "too_many_tasks" => return Err(QueueError::TooManyTasks { max: self.options.limits.tasks_max }),
            other => return Err(unexpected(format!("unexpected answer {other}"))),
        }
        let now_ms = reply.u64()?;
        self.saw_time(now_ms);
        let mut done = Vec::with_capacity(tasks.len());
        for (at, ..) in tasks {
            let seq = reply.u64()?;
            let run_at_ms = reply.u64()?;
            let created = reply.int()? == 1;
            done.push((*at, Enqueued { id: keys::id(shard, seq), run_at_ms, created }));
        }
        // This node's claims see the tasks due now at once, before the
        // script's hint comes back through the channel: a claim right after
        // the enqueue that made them due finds them.
        if done.iter().any(|(_, enqueued)| enqueued.created && enqueued.run_at_ms <= now_ms) {
            self.watch.hint_local(queue, shard, now_ms);
        }
        Ok(done)
    }

    /// Acks, grouped by shard and queue: one script each group, all at once.
    /// The queues of tasks claimed through another node (this one does not
    /// remember them) are read first, one read a shard.
    pub(crate) async fn acks(&self, acks: &[(u64, Lease)]) -> Result<Vec<Result<(), QueueError>>, QueueError> {
        let mut answers: Vec<Option<Result<(), QueueError>>> = vec![None; acks.len()];
        let mut groups: HashMap<(u16, Arc<str>), Vec<AckOf>> = HashMap::new();
        let mut unknown: HashMap<u16, Vec<(usize, u64)>> = HashMap::new();
        for (at, &(id, lease)) in acks.iter().enumerate() {
            let Ok((shard, seq)) = self.split(id) else {
                answers[at] = Some(Err(QueueError::NotFound(id)));
                continue;
            };
            match self.queue_of.lock().get(&id).cloned() {
                Some(queue) => groups.entry((shard, queue)).or_default().push((at, seq, record::token(lease))),
                None => unknown.entry(shard).or_default().push((at, seq)),
            }
        }
        let reads = unknown.iter().map(|(&shard, tasks)| {
            let fields: Vec<String> = tasks.iter().map(|&(_, seq)| keys::field(seq)).collect();
            let (mut conn, key) = (self.conn(), self.keys.shard(shard, "t"));
            async move { conn.hmget::<_, _, Vec<Option<Vec<u8>>>>(key, fields).await.map_err(storage) }
        });
        let reads = futures_util::future::join_all(reads).await;
        for ((&shard, tasks), records) in unknown.iter().zip(reads) {
            for (&(at, seq), raw) in tasks.iter().zip(records?) {
                let (id, lease) = acks[at];
                match raw {
                    Some(raw) => {
                        let queue = record::decode(shard, seq, &raw, 0)?.task.queue;
                        groups.entry((shard, queue)).or_default().push((at, seq, record::token(lease)));
                    }
                    None => answers[at] = Some(Err(QueueError::NotFound(id))),
                }
            }
        }
        let scripts = groups.iter().map(|((shard, queue), group)| {
            let mut invocation = SCRIPTS.acks.key(self.keys.shard(*shard, "t"));
            invocation.key(self.keys.shard(*shard, "p")).key(self.keys.shard(*shard, "h"));
            for key in self.keys.queue_keys(*shard, queue) {
                invocation.key(key);
            }
            invocation.arg(&self.channel).arg(*shard).arg(&**queue);
            for (_, seq, token) in group {
                invocation.arg(keys::field(*seq)).arg(token);
            }
            let mut conn = self.conn();
            async move { invocation.invoke_async::<Vec<String>>(&mut conn).await.map_err(storage) }
        });
        let replies = futures_util::future::join_all(scripts).await;
        let mut settled: HashMap<Arc<str>, Vec<u64>> = HashMap::new();
        for (((_, queue), group), reply) in groups.iter().zip(replies) {
            for ((at, _, _), code) in group.iter().zip(reply?) {
                let id = acks[*at].0;
                answers[*at] = Some(match code.as_str() {
                    "ok" => {
                        settled.entry(queue.clone()).or_default().push(id);
                        self.figures.count(queue, |c, t| {
                            c.acked += 1;
                            t.acked += 1;
                        });
                        self.queue_of.lock().remove(&id);
                        Ok(())
                    }
                    "not_found" => Err(QueueError::NotFound(id)),
                    "stale" => Err(QueueError::StaleLease(id)),
                    // A task's queue never changes: its record says otherwise.
                    other => Err(unexpected(format!("task {id} answered {other} to its ack"))),
                });
            }
        }
        for (queue, ids) in settled {
            self.settled(&queue, &ids).await;
        }
        Ok(answers.into_iter().map(|answer| answer.expect("every ack is answered")).collect())
    }
}
