//! Flow control across every node (`lua/flow.lua`): a claim reserves slots
//! and tokens of its queue before its shard scripts and binds the slots to
//! the tasks it got after; a settled task releases its slot, an extended one
//! moves it. A slot lapses with the lease it stands for, so one whose
//! release was lost (a node died between two scripts) is freed when the
//! task could be delivered again anyway. `docs/DESIGN.md`, "Flow control
//! across nodes".

use hourglass_queue::{Claimed, QueueError};

use crate::error::storage;
use crate::reply::Reply;
use crate::scripts::SCRIPTS;
use crate::RedisBackend;

/// What a claim got of its queue's flow control.
pub(crate) struct Grant {
    /// Its name among the queue's reservations.
    claim: String,
    /// Slots and tokens reserved: the most it may hand out.
    pub(crate) granted: usize,
    /// When a token comes next, if tokens were short (ms from now).
    pub(crate) wait_ms: Option<u64>,
}

impl RedisBackend {
    fn flow_script(&self, queue: &str, op: &str) -> redis::ScriptInvocation<'static> {
        let mut invocation = SCRIPTS.flow.key(self.keys.global("settings"));
        invocation.key(self.keys.global(&format!("holds:{queue}"))).key(self.keys.global(&format!("bucket:{queue}")));
        invocation.arg(op).arg(queue).arg(&self.channel);
        invocation
    }

    /// Reserves up to `want` of `queue`'s slots and tokens for a claim whose
    /// leases last `lease_ms`.
    pub(crate) async fn flow_acquire(&self, queue: &str, want: usize, lease_ms: u64) -> Result<Grant, QueueError> {
        // Unique among the queue's claims under way, on every node.
        let claim = format!("{:016x}", rand::random::<u64>());
        let mut invocation = self.flow_script(queue, "acquire");
        // A reservation outlives the claim's scripts by far, and lapses by itself.
        invocation.arg(want).arg(&claim).arg(lease_ms);
        let mut reply = Reply::new(invocation.invoke_async(&mut self.conn()).await.map_err(storage)?)?;
        let granted = usize::try_from(reply.u64()?).unwrap_or(0);
        let wait = reply.int()?;
        Ok(Grant { claim, granted, wait_ms: u64::try_from(wait).ok() })
    }

    /// Binds `grant`'s reservations to the tasks `claimed`; the slots and
    /// tokens not used go back.
    pub(crate) async fn flow_bind(&self, queue: &str, grant: &Grant, claimed: &[Claimed]) -> Result<(), QueueError> {
        let mut invocation = self.flow_script(queue, "bind");
        invocation.arg(&grant.claim).arg(grant.granted).arg(grant.granted.saturating_sub(claimed.len()));
        for task in claimed {
            invocation.arg(task.id).arg(task.lease_until_ms);
        }
        invocation.invoke_async::<()>(&mut self.conn()).await.map_err(storage)
    }

    /// Tasks `ids` of `queue` were settled: their slots are freed, if the
    /// queue has a cap. A release that fails is logged: the slot lapses with
    /// the lease it stood for.
    pub(crate) async fn settled(&self, queue: &str, ids: &[u64]) {
        if ids.is_empty() || !self.capped(queue).await {
            return;
        }
        if let Err(error) = self.flow_release(queue, ids).await {
            tracing::debug!(%error, queue, "a settled task's slot is freed when its lease would have ended");
        }
    }

    /// Task `id` of `queue` had its lease extended to `until_ms`: so is its slot.
    pub(crate) async fn extended(&self, queue: &str, id: u64, until_ms: u64) {
        if self.capped(queue).await {
            if let Err(error) = self.flow_extend(queue, id, until_ms).await {
                tracing::debug!(%error, queue, "an extended task's slot is freed when its first lease ends");
            }
        }
    }

    async fn capped(&self, queue: &str) -> bool {
        self.settings_of(queue).await.is_ok_and(|settings| settings.flow.max_in_flight.is_some())
    }

    async fn flow_release(&self, queue: &str, ids: &[u64]) -> Result<(), QueueError> {
        let mut invocation = self.flow_script(queue, "release");
        for id in ids {
            invocation.arg(id);
        }
        invocation.invoke_async::<()>(&mut self.conn()).await.map_err(storage)
    }

    async fn flow_extend(&self, queue: &str, id: u64, until_ms: u64) -> Result<(), QueueError> {
        let mut invocation = self.flow_script(queue, "extend");
        invocation.arg(id).arg(until_ms);
        invocation.invoke_async::<()>(&mut self.conn()).await.map_err(storage)
    }
}
