//! Consuming: claim due tasks, then ack (one or several), nack, extend, and
//! retry a dead task.

use hourglass_wire::{AckResults, Acked, Acks, ClaimRequest, Claimed, Extended, Lease, LeaseRequest, Task};
use reqwest::Method;

use crate::client::Client;
use crate::error::Error;
use crate::path::segment;

impl Client {
    /// `POST /v1/queues/{queue}/claim`: due tasks, each leased; perhaps none
    /// after waiting up to the request's `wait_ms`. A request that carries
    /// `acks` has them applied first, each answered in the answer's `acks`
    /// as [`ack_batch`](Client::ack_batch) would.
    pub async fn claim(&self, queue: &str, claim: &ClaimRequest) -> Result<Claimed, Error> {
        Ok(self.post(Method::POST, &format!("/v1/queues/{}/claim", segment(queue)), claim).await?.value)
    }

    /// `POST /v1/tasks/{id}/ack`: the delivery `lease` is done.
    pub async fn ack(&self, id: u64, lease: Lease) -> Result<Acked, Error> {
        Ok(self.post(Method::POST, &format!("/v1/tasks/{id}/ack"), &LeaseRequest::ack(lease)).await?.value)
    }

    /// `POST /v1/acks`: several acks, each answered on its own.
    pub async fn ack_batch(&self, acks: &Acks) -> Result<AckResults, Error> {
        Ok(self.post(Method::POST, "/v1/acks", acks).await?.value)
    }

    /// `POST /v1/tasks/{id}/nack`: the delivery `lease` failed, for
    /// `reason`; delivered again after `delay_ms` (the retry backoff if
    /// `None`), or dead if out of attempts.
    pub async fn nack(
        &self,
        id: u64,
        lease: Lease,
        delay_ms: Option<u64>,
        reason: Option<String>,
    ) -> Result<Task, Error> {
        let body = LeaseRequest::nack(lease, delay_ms, reason);
        Ok(self.post(Method::POST, &format!("/v1/tasks/{id}/nack"), &body).await?.value)
    }

    /// `POST /v1/tasks/{id}/extend`: the delivery `lease` runs `lease_ms` from now.
    pub async fn extend(&self, id: u64, lease: Lease, lease_ms: u64) -> Result<Extended, Error> {
        let body = LeaseRequest::extend(lease, lease_ms);
        Ok(self.post(Method::POST, &format!("/v1/tasks/{id}/extend"), &body).await?.value)
    }

    /// `POST /v1/tasks/{id}/retry`: a dead task due again, its attempts anew.
    pub async fn retry(&self, id: u64) -> Result<Task, Error> {
        self.get_json(Method::POST, &format!("/v1/tasks/{id}/retry")).await
    }
}
