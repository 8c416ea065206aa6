//! The server and its queues: health, metrics, the overview, the nodes,
//! each queue's counts, pausing, settings, and deleting the dead.

use hourglass_wire::{DeletedDead, Health, Nodes, Overview, OverviewQuery, Queue, QueueSettings, Queues};
use reqwest::Method;

use crate::client::Client;
use crate::error::Error;
use crate::path::segment;

impl Client {
    /// `GET /healthz`.
    pub async fn healthz(&self) -> Result<Health, Error> {
        self.get_json(Method::GET, "/healthz").await
    }

    /// `GET /metrics`: the Prometheus text exposition.
    pub async fn metrics(&self) -> Result<String, Error> {
        let (url, request) = self.request(Method::GET, "/metrics");
        let (_, body) = self.send(&url, request).await?;
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    /// `GET /v1/overview`: every queue with its rates, the totals and the
    /// last fifteen minutes; `fresh` reads the queues now rather than
    /// sharing a reading up to half a second old.
    pub async fn overview(&self, fresh: bool) -> Result<Overview, Error> {
        self.query("/v1/overview", &OverviewQuery { fresh: fresh.then_some(true) }).await
    }

    /// `GET /v1/nodes`: the nodes that share the store, with their shards
    /// and heartbeats; `nodes` is `None` for a server in one process (the
    /// embedded backend). Needs `read` on every queue.
    pub async fn nodes(&self) -> Result<Nodes, Error> {
        self.get_json(Method::GET, "/v1/nodes").await
    }

    /// `GET /v1/queues`: every queue's counts, and the totals.
    pub async fn queues(&self) -> Result<Queues, Error> {
        self.get_json(Method::GET, "/v1/queues").await
    }

    /// `GET /v1/queues/{queue}`.
    pub async fn queue(&self, queue: &str) -> Result<Queue, Error> {
        self.get_json(Method::GET, &format!("/v1/queues/{}", segment(queue))).await
    }

    /// `POST /v1/queues/{queue}/pause`: claims hand out nothing until it is resumed.
    pub async fn pause_queue(&self, queue: &str) -> Result<Queue, Error> {
        self.get_json(Method::POST, &format!("/v1/queues/{}/pause", segment(queue))).await
    }

    /// `POST /v1/queues/{queue}/resume`.
    pub async fn resume_queue(&self, queue: &str) -> Result<Queue, Error> {
        self.get_json(Method::POST, &format!("/v1/queues/{}/resume", segment(queue))).await
    }

    /// `GET /v1/queues/{queue}/settings`: its push target and flow control
    /// (the defaults for a queue never set).
    pub async fn settings(&self, queue: &str) -> Result<QueueSettings, Error> {
        self.get_json(Method::GET, &format!("/v1/queues/{}/settings", segment(queue))).await
    }

    /// `PUT /v1/queues/{queue}/settings`: replaces them whole; answers with
    /// them as they now hold (defaults filled in).
    pub async fn put_settings(&self, queue: &str, settings: &QueueSettings) -> Result<QueueSettings, Error> {
        Ok(self.post(Method::PUT, &format!("/v1/queues/{}/settings", segment(queue)), settings).await?.value)
    }

    /// `DELETE /v1/queues/{queue}/dead`: deletes the queue's dead tasks.
    pub async fn delete_dead(&self, queue: &str) -> Result<DeletedDead, Error> {
        self.get_json(Method::DELETE, &format!("/v1/queues/{}/dead", segment(queue))).await
    }
}
