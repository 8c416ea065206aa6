//! Routes and handlers of the HTTP API (`/v1`).

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use hourglass_queue::{limits, NewTask, RunAt};
use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use crate::error::ApiError;
use crate::AppState;

type Body<T> = Result<Json<T>, JsonRejection>;
type ApiResult = Result<Response, ApiError>;

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(crate::metrics::metrics))
        .route("/v1/queues", get(list_queues))
        .route("/v1/queues/{queue}", get(queue_stats))
        .route("/v1/queues/{queue}/dead", get(dead))
        .route("/v1/queues/{queue}/tasks", post(enqueue))
        .route("/v1/queues/{queue}/tasks/batch", post(enqueue_batch))
        .route("/v1/queues/{queue}/claim", post(claim))
        .route("/v1/tasks/{id}", get(show).delete(cancel).patch(reschedule))
        .route("/v1/tasks/{id}/ack", post(ack))
        .route("/v1/tasks/{id}/nack", post(nack))
        .route("/v1/tasks/{id}/extend", post(extend))
        .route("/v1/tasks/{id}/retry", post(retry))
}

/// A new task as clients send it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewTaskBody {
    payload: Box<RawValue>,
    delay_ms: Option<u64>,
    run_at_ms: Option<u64>,
    key: Option<String>,
    max_attempts: Option<u32>,
    every_ms: Option<u64>,
}

fn run_at(delay_ms: Option<u64>, run_at_ms: Option<u64>) -> Result<RunAt, ApiError> {
    match (delay_ms, run_at_ms) {
        (Some(_), Some(_)) => {
            Err(ApiError::new(StatusCode::BAD_REQUEST, "invalid", "give delay_ms or run_at_ms, not both"))
        }
        (Some(delay_ms), None) => Ok(RunAt::Delay(delay_ms)),
        (None, Some(at_ms)) => Ok(RunAt::At(at_ms)),
        (None, None) => Ok(RunAt::Delay(0)),
    }
}

impl NewTaskBody {
    fn into_task(self) -> Result<NewTask, ApiError> {
        Ok(NewTask {
            payload: self.payload,
            run_at: run_at(self.delay_ms, self.run_at_ms)?,
            key: self.key,
            max_attempts: self.max_attempts,
            every_ms: self.every_ms,
        })
    }
}

async fn healthz() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

async fn enqueue(
    State(app): State<AppState>,
    queue: Result<Path<String>, PathRejection>,
    body: Body<NewTaskBody>,
) -> ApiResult {
    let Path(queue) = queue?;
    let Json(body) = body?;
    let done = app.engine.enqueue(&queue, body.into_task()?).await?;
    let status = if done.created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(done)).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchBody {
    tasks: Vec<NewTaskBody>,
}

async fn enqueue_batch(
    State(app): State<AppState>,
    queue: Result<Path<String>, PathRejection>,
    body: Body<BatchBody>,
) -> ApiResult {
    let Path(queue) = queue?;
    let Json(body) = body?;
    let tasks = body.tasks.into_iter().map(NewTaskBody::into_task).collect::<Result<Vec<_>, _>>()?;
    let done = app.engine.enqueue_batch(&queue, tasks).await?;
    let created = done.iter().filter(|d| d.created).count();
    let status = if created > 0 { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(json!({ "tasks": done, "created": created }))).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaimBody {
    max: Option<usize>,
    lease_ms: Option<u64>,
    wait_ms: Option<u64>,
}

async fn claim(
    State(app): State<AppState>,
    queue: Result<Path<String>, PathRejection>,
    body: Body<ClaimBody>,
) -> ApiResult {
    let Path(queue) = queue?;
    let Json(body) = body?;
    let tasks = app
        .engine
        .claim(
            &queue,
            body.max.unwrap_or(1),
            body.lease_ms.unwrap_or(limits::LEASE_MS_DEFAULT),
            body.wait_ms.unwrap_or(0),
        )
        .await?;
    Ok(Json(json!({ "tasks": tasks })).into_response())
}

async fn list_queues(State(app): State<AppState>) -> Json<serde_json::Value> {
    Json(json!({ "queues": app.engine.queues(), "totals": app.engine.totals() }))
}

async fn queue_stats(State(app): State<AppState>, queue: Result<Path<String>, PathRejection>) -> ApiResult {
    let Path(queue) = queue?;
    let stats = app
        .engine
        .queue(&queue)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("no queue {queue:?}")))?;
    Ok(Json(stats).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    limit: Option<usize>,
}

async fn dead(
    State(app): State<AppState>,
    queue: Result<Path<String>, PathRejection>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> ApiResult {
    let Path(queue) = queue?;
    let Query(query) = query?;
    let limit = query.limit.unwrap_or(100).min(limits::LIST_MAX);
    Ok(Json(json!({ "tasks": app.engine.dead(&queue, limit) })).into_response())
}

async fn show(State(app): State<AppState>, id: Result<Path<u64>, PathRejection>) -> ApiResult {
    let Path(id) = id?;
    Ok(Json(app.engine.get(id)?).into_response())
}

async fn cancel(State(app): State<AppState>, id: Result<Path<u64>, PathRejection>) -> ApiResult {
    let Path(id) = id?;
    app.engine.cancel(id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RescheduleBody {
    delay_ms: Option<u64>,
    run_at_ms: Option<u64>,
}

async fn reschedule(
    State(app): State<AppState>,
    id: Result<Path<u64>, PathRejection>,
    body: Body<RescheduleBody>,
) -> ApiResult {
    let Path(id) = id?;
    let Json(body) = body?;
    if body.delay_ms.is_none() && body.run_at_ms.is_none() {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "invalid", "give delay_ms or run_at_ms"));
    }
    let view = app.engine.reschedule(id, run_at(body.delay_ms, body.run_at_ms)?).await?;
    Ok(Json(view).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LeaseBody {
    lease: String,
    delay_ms: Option<u64>,
    lease_ms: Option<u64>,
}

async fn ack(State(app): State<AppState>, id: Result<Path<u64>, PathRejection>, body: Body<LeaseBody>) -> ApiResult {
    let Path(id) = id?;
    let Json(body) = body?;
    no_extra(&body, "ack")?;
    app.engine.ack(id, &body.lease).await?;
    Ok(Json(json!({ "id": id, "acked": true })).into_response())
}

async fn nack(State(app): State<AppState>, id: Result<Path<u64>, PathRejection>, body: Body<LeaseBody>) -> ApiResult {
    let Path(id) = id?;
    let Json(body) = body?;
    if body.lease_ms.is_some() {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "invalid", "nack takes lease and delay_ms"));
    }
    Ok(Json(app.engine.nack(id, &body.lease, body.delay_ms).await?).into_response())
}

async fn extend(State(app): State<AppState>, id: Result<Path<u64>, PathRejection>, body: Body<LeaseBody>) -> ApiResult {
    let Path(id) = id?;
    let Json(body) = body?;
    let (Some(lease_ms), None) = (body.lease_ms, body.delay_ms) else {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "invalid", "extend takes lease and lease_ms"));
    };
    let until_ms = app.engine.extend(id, &body.lease, lease_ms)?;
    Ok(Json(json!({ "id": id, "lease_until_ms": until_ms })).into_response())
}

async fn retry(State(app): State<AppState>, id: Result<Path<u64>, PathRejection>) -> ApiResult {
    let Path(id) = id?;
    Ok(Json(app.engine.retry(id).await?).into_response())
}

fn no_extra(body: &LeaseBody, what: &str) -> Result<(), ApiError> {
    if body.delay_ms.is_some() || body.lease_ms.is_some() {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "invalid", format!("{what} takes only lease")));
    }
    Ok(())
}
