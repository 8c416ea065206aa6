//! Tasks: enqueue (one, or a batch), look up, list, move and cancel.

use hourglass_wire::{Enqueued, EnqueuedBatch, ListQuery, NewTask, NewTasks, Reschedule, Task, TaskPage};
use reqwest::Method;

use crate::client::{Client, Stored};
use crate::error::Error;
use crate::path::segment;

impl Client {
    /// `POST /v1/queues/{queue}/tasks`: enqueues `task`. Not
    /// [`created`](Stored::created) when its key named a live task: then
    /// that task's id.
    pub async fn enqueue(&self, queue: &str, task: &NewTask) -> Result<Stored<Enqueued>, Error> {
        self.post(Method::POST, &format!("/v1/queues/{}/tasks", segment(queue)), task).await
    }

    /// `POST /v1/queues/{queue}/tasks/batch`: enqueues `tasks`, all or none.
    pub async fn enqueue_batch(&self, queue: &str, tasks: &NewTasks) -> Result<EnqueuedBatch, Error> {
        let path = format!("/v1/queues/{}/tasks/batch", segment(queue));
        Ok(self.post(Method::POST, &path, tasks).await?.value)
    }

    /// `GET /v1/tasks/{id}`.
    pub async fn get(&self, id: u64) -> Result<Task, Error> {
        self.get_json(Method::GET, &format!("/v1/tasks/{id}")).await
    }

    /// `DELETE /v1/tasks/{id}`: cancels a task that is not leased.
    pub async fn cancel(&self, id: u64) -> Result<(), Error> {
        self.no_content(Method::DELETE, &format!("/v1/tasks/{id}")).await
    }

    /// `PATCH /v1/tasks/{id}`: a new due time for a task that is not leased.
    pub async fn reschedule(&self, id: u64, to: &Reschedule) -> Result<Task, Error> {
        Ok(self.post(Method::PATCH, &format!("/v1/tasks/{id}"), to).await?.value)
    }

    /// `GET /v1/queues/{queue}/keys/{key}`: the live task with `key`.
    pub async fn find_by_key(&self, queue: &str, key: &str) -> Result<Task, Error> {
        self.get_json(Method::GET, &format!("/v1/queues/{}/keys/{}", segment(queue), segment(key))).await
    }

    /// `GET /v1/queues/{queue}/tasks`: a page of the queue's tasks. Pass the
    /// page's `next` as the next query's `after` ([`ListQuery::page`]).
    pub async fn list_tasks(&self, queue: &str, query: &ListQuery) -> Result<TaskPage, Error> {
        self.query(&format!("/v1/queues/{}/tasks", segment(queue)), query).await
    }

    /// `GET /v1/queues/{queue}/dead`: a page of the queue's dead tasks (the
    /// query has no `state`).
    pub async fn list_dead(&self, queue: &str, query: &ListQuery) -> Result<TaskPage, Error> {
        self.query(&format!("/v1/queues/{}/dead", segment(queue)), query).await
    }
}
