//! Routes and handlers of the HTTP API (`/v1`): parse the request, call the
//! [`Backend`](hourglass_queue::Backend), render the answer (see [`wire`](crate::wire)).

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use hourglass_queue::{limits, ListRequest, Nack, NewSchedule, NewTask, Pause, Rule, RunAt, Status};
use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use crate::error::ApiError;
use crate::wire::{
    self, ClaimedBody, EnqueuedBody, PageBody, QueueBody, ScheduleBody, SchedulePageBody, TaskBody, TotalsBody,
};
use crate::AppState;

type Body<T> = Result<Json<T>, JsonRejection>;
type ApiResult = Result<Response, ApiError>;

/// Tasks a listing returns when the client does not say.
const LIST_DEFAULT: usize = 100;

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(crate::metrics::metrics))
        .route("/v1/queues", get(list_queues))
        .route("/v1/queues/{queue}", get(queue_stats))
        .route("/v1/overview", get(crate::overview::overview))
        .route("/v1/queues/{queue}/dead", get(dead).delete(delete_dead))
        .route("/v1/queues/{queue}/pause", post(pause_queue))
        .route("/v1/queues/{queue}/resume", post(resume_queue))
        .route("/v1/queues/{queue}/tasks", post(enqueue).get(list_tasks))
        .route("/v1/queues/{queue}/tasks/batch", post(enqueue_batch))
        .route("/v1/queues/{queue}/keys/{key}", get(find_by_key))
        .route("/v1/queues/{queue}/claim", post(claim))
        .route("/v1/tasks/{id}", get(show).delete(cancel).patch(reschedule))
        .route("/v1/tasks/{id}/ack", post(ack))
        .route("/v1/acks", post(ack_batch))
        .route("/v1/tasks/{id}/nack", post(nack))
        .route("/v1/tasks/{id}/extend", post(extend))
        .route("/v1/tasks/{id}/retry", post(retry))
        .route("/v1/schedules", get(list_schedules))
        .route("/v1/schedules/{name}", put(put_schedule).get(show_schedule).delete(delete_schedule))
        .route("/v1/schedules/{name}/pause", post(pause_schedule))
        .route("/v1/schedules/{name}/resume", post(resume_schedule))
}

/// A schedule as clients put it: `cron` (with an optional `time_zone`,
/// UTC if absent) or `every_ms`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScheduleRequest {
    queue: String,
    cron: Option<String>,
    time_zone: Option<String>,
    every_ms: Option<u64>,
    payload: Box<RawValue>,
    misfire: Option<String>,
    overlap: Option<String>,
    max_attempts: Option<u32>,
    expires_after_ms: Option<u64>,
}

impl ScheduleRequest {
    fn into_schedule(self) -> Result<NewSchedule, ApiError> {
        let rule = match (self.cron, self.every_ms, self.time_zone) {
            (Some(expression), None, time_zone) => Rule::Cron {
                expression: expression.into(),
                time_zone: time_zone.unwrap_or_else(|| "UTC".to_owned()).into(),
            },
            (None, Some(every_ms), None) => Rule::Every { every_ms },
            (None, Some(_), Some(_)) => return Err(ApiError::invalid("time_zone goes with cron, not every_ms")),
            (Some(_), Some(_), _) => return Err(ApiError::invalid("give cron or every_ms, not both")),
            (None, None, _) => return Err(ApiError::invalid("give cron (with time_zone) or every_ms")),
        };
        Ok(NewSchedule {
            queue: self.queue,
            rule,
            payload: self.payload.into(),
            misfire: self.misfire.as_deref().map(wire::parse_misfire).transpose()?.unwrap_or_default(),
            overlap: self.overlap.as_deref().map(wire::parse_overlap).transpose()?.unwrap_or_default(),
            max_attempts: self.max_attempts,
            expires_after_ms: self.expires_after_ms,
        })
    }
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
    priority: Option<u32>,
    lease_ms: Option<u64>,
    every_ms: Option<u64>,
    expires_at_ms: Option<u64>,
    expires_after_ms: Option<u64>,
}

fn run_at(delay_ms: Option<u64>, run_at_ms: Option<u64>) -> Result<RunAt, ApiError> {
    match (delay_ms, run_at_ms) {
        (Some(_), Some(_)) => Err(ApiError::invalid("give delay_ms or run_at_ms, not both")),
        (Some(delay_ms), None) => Ok(RunAt::Delay(delay_ms)),
        (None, Some(at_ms)) => Ok(RunAt::At(at_ms)),
        (None, None) => Ok(RunAt::Delay(0)),
    }
}

impl NewTaskBody {
    fn into_task(self) -> Result<NewTask, ApiError> {
        Ok(NewTask {
            // The JSON text as it came, checked by the parser, not copied.
            payload: self.payload.into(),
            run_at: run_at(self.delay_ms, self.run_at_ms)?,
            key: self.key,
            max_attempts: self.max_attempts,
            priority: self.priority,
            lease_ms: self.lease_ms,
            every_ms: self.every_ms,
            expires: match (self.expires_at_ms, self.expires_after_ms) {
                (Some(_), Some(_)) => {
                    return Err(ApiError::invalid("give expires_at_ms or expires_after_ms, not both"))
                }
                (Some(at_ms), None) => Some(RunAt::At(at_ms)),
                (None, Some(after_ms)) => Some(RunAt::Delay(after_ms)),
                (None, None) => None,
            },
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
    let done = app.backend.enqueue(&queue, body.into_task()?).await?;
    let status = if done.created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(EnqueuedBody::from(done))).into_response())
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
    let done = app.backend.enqueue_batch(&queue, tasks).await?;
    let created = done.iter().filter(|d| d.created).count();
    let status = if created > 0 { StatusCode::CREATED } else { StatusCode::OK };
    let tasks: Vec<EnqueuedBody> = done.into_iter().map(EnqueuedBody::from).collect();
    Ok((status, Json(json!({ "tasks": tasks, "created": created }))).into_response())
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
    let max = body.max.unwrap_or(1);
    let lease_ms = body.lease_ms.unwrap_or(limits::LEASE_MS_DEFAULT);
    let tasks = app.backend.claim(&queue, max, lease_ms, body.wait_ms.unwrap_or(0)).await?;
    let tasks: Vec<ClaimedBody> = tasks.into_iter().map(ClaimedBody::from).collect();
    Ok(Json(json!({ "tasks": tasks })).into_response())
}

async fn list_queues(State(app): State<AppState>) -> Json<serde_json::Value> {
    let queues: Vec<QueueBody> = app.backend.queues().await.into_iter().map(QueueBody::from).collect();
    Json(json!({ "queues": queues, "totals": TotalsBody::from(app.backend.totals().await) }))
}

async fn queue_stats(State(app): State<AppState>, queue: Result<Path<String>, PathRejection>) -> ApiResult {
    let Path(queue) = queue?;
    let stats = app
        .backend
        .queue(&queue)
        .await
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("no queue {queue:?}")))?;
    Ok(Json(QueueBody::from(stats)).into_response())
}

async fn pause_queue(State(app): State<AppState>, queue: Result<Path<String>, PathRejection>) -> ApiResult {
    let Path(queue) = queue?;
    Ok(Json(QueueBody::from(app.backend.pause_queue(&queue, Pause::Indefinitely).await?)).into_response())
}

async fn resume_queue(State(app): State<AppState>, queue: Result<Path<String>, PathRejection>) -> ApiResult {
    let Path(queue) = queue?;
    Ok(Json(QueueBody::from(app.backend.pause_queue(&queue, Pause::Resume).await?)).into_response())
}

/// `DELETE /v1/queues/{queue}/dead`: every dead task of the queue, in writes
/// of up to [`LIST_MAX`](limits::LIST_MAX). Those that die meanwhile may
/// stay: it stops once it has deleted as many as there were when it began.
async fn delete_dead(State(app): State<AppState>, queue: Result<Path<String>, PathRejection>) -> ApiResult {
    let Path(queue) = queue?;
    let there = app.backend.queue(&queue).await.map_or(0, |q| q.dead);
    let mut deleted = 0;
    while deleted < there {
        let ids = app.backend.delete_dead(&queue, limits::LIST_MAX.min(there - deleted)).await?;
        deleted += ids.len();
        if ids.is_empty() {
            break;
        }
    }
    Ok(Json(json!({ "queue": queue, "deleted": deleted })).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    state: Option<String>,
    after: Option<String>,
    limit: Option<usize>,
}

/// `GET /v1/queues/{queue}/tasks?state=due&after=CURSOR&limit=N`.
async fn list_tasks(
    State(app): State<AppState>,
    queue: Result<Path<String>, PathRejection>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> ApiResult {
    list(app, queue, query, None).await
}

/// `GET /v1/queues/{queue}/dead?after=CURSOR&limit=N`.
async fn dead(
    State(app): State<AppState>,
    queue: Result<Path<String>, PathRejection>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> ApiResult {
    list(app, queue, query, Some(Status::Dead)).await
}

/// A page of a queue's tasks; `only` fixes the state (the `/dead` listing).
async fn list(
    app: AppState,
    queue: Result<Path<String>, PathRejection>,
    query: Result<Query<ListQuery>, QueryRejection>,
    only: Option<Status>,
) -> ApiResult {
    let Path(queue) = queue?;
    let Query(query) = query?;
    let status = match (only, query.state.as_deref()) {
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid("this listing has one state; use /tasks?state= for others"))
        }
        (Some(only), None) => Some(only),
        (None, state) => state.map(wire::parse_status).transpose()?,
    };
    let after = query.after.as_deref().map(wire::parse_cursor).transpose()?;
    let request = ListRequest { status, after, limit: query.limit.unwrap_or(LIST_DEFAULT) };
    let page = app.backend.list(&queue, request).await?;
    Ok(Json(PageBody::from(page)).into_response())
}

async fn find_by_key(State(app): State<AppState>, path: Result<Path<(String, String)>, PathRejection>) -> ApiResult {
    let Path((queue, key)) = path?;
    let info =
        app.backend.find_by_key(&queue, &key).await?.ok_or_else(|| {
            ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("no live task with key {key:?}"))
        })?;
    Ok(Json(TaskBody::from(info)).into_response())
}

async fn show(State(app): State<AppState>, id: Result<Path<u64>, PathRejection>) -> ApiResult {
    let Path(id) = id?;
    Ok(Json(TaskBody::from(app.backend.get(id).await?)).into_response())
}

async fn cancel(State(app): State<AppState>, id: Result<Path<u64>, PathRejection>) -> ApiResult {
    let Path(id) = id?;
    app.backend.cancel(id).await?;
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
        return Err(ApiError::invalid("give delay_ms or run_at_ms"));
    }
    let info = app.backend.reschedule(id, run_at(body.delay_ms, body.run_at_ms)?).await?;
    Ok(Json(TaskBody::from(info)).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LeaseBody {
    lease: String,
    delay_ms: Option<u64>,
    lease_ms: Option<u64>,
    /// A nack's reason: what went wrong.
    reason: Option<String>,
}

async fn ack(State(app): State<AppState>, id: Result<Path<u64>, PathRejection>, body: Body<LeaseBody>) -> ApiResult {
    let Path(id) = id?;
    let Json(body) = body?;
    if body.delay_ms.is_some() || body.lease_ms.is_some() || body.reason.is_some() {
        return Err(ApiError::invalid("ack takes only lease"));
    }
    app.backend.ack(id, wire::parse_lease(&body.lease)?).await?;
    Ok(Json(json!({ "id": id, "acked": true })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AcksBody {
    acks: Vec<AckBody>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AckBody {
    id: u64,
    lease: String,
}

/// Acks of several deliveries, each answered on its own: `{"results": [{"id",
/// "acked": true} | {"id", "error": {"code", "message"}}]}`, in order.
async fn ack_batch(State(app): State<AppState>, body: Body<AcksBody>) -> ApiResult {
    let Json(body) = body?;
    let acks = body
        .acks
        .iter()
        .map(|ack| Ok((ack.id, wire::parse_lease(&ack.lease)?)))
        .collect::<Result<Vec<_>, ApiError>>()?;
    let results = app.backend.ack_batch(&acks).await?;
    let results: Vec<_> = acks
        .iter()
        .zip(results)
        .map(|(&(id, _), result)| match result {
            Ok(()) => json!({ "id": id, "acked": true }),
            Err(error) => json!({ "id": id, "error": { "code": error.code(), "message": error.to_string() } }),
        })
        .collect();
    Ok(Json(json!({ "results": results })).into_response())
}

async fn nack(State(app): State<AppState>, id: Result<Path<u64>, PathRejection>, body: Body<LeaseBody>) -> ApiResult {
    let Path(id) = id?;
    let Json(body) = body?;
    if body.lease_ms.is_some() {
        return Err(ApiError::invalid("nack takes lease, delay_ms and reason"));
    }
    let lease = wire::parse_lease(&body.lease)?;
    let info = app
        .backend
        .nack(id, lease, Nack { delay_ms: body.delay_ms, reason: body.reason.map(Into::into), ..Nack::default() })
        .await?;
    Ok(Json(TaskBody::from(info)).into_response())
}

async fn extend(State(app): State<AppState>, id: Result<Path<u64>, PathRejection>, body: Body<LeaseBody>) -> ApiResult {
    let Path(id) = id?;
    let Json(body) = body?;
    let (Some(lease_ms), None, None) = (body.lease_ms, body.delay_ms, &body.reason) else {
        return Err(ApiError::invalid("extend takes lease and lease_ms"));
    };
    let until_ms = app.backend.extend(id, wire::parse_lease(&body.lease)?, lease_ms).await?;
    Ok(Json(json!({ "id": id, "lease_until_ms": until_ms })).into_response())
}

async fn put_schedule(
    State(app): State<AppState>,
    name: Result<Path<String>, PathRejection>,
    body: Body<ScheduleRequest>,
) -> ApiResult {
    let Path(name) = name?;
    let Json(body) = body?;
    let (info, created) = app.schedules()?.put_schedule(&name, body.into_schedule()?).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(ScheduleBody::from(info))).into_response())
}

async fn show_schedule(State(app): State<AppState>, name: Result<Path<String>, PathRejection>) -> ApiResult {
    let Path(name) = name?;
    Ok(Json(ScheduleBody::from(app.schedules()?.schedule(&name).await?)).into_response())
}

async fn pause_schedule(State(app): State<AppState>, name: Result<Path<String>, PathRejection>) -> ApiResult {
    let Path(name) = name?;
    Ok(Json(ScheduleBody::from(app.schedules()?.pause_schedule(&name, true).await?)).into_response())
}

async fn resume_schedule(State(app): State<AppState>, name: Result<Path<String>, PathRejection>) -> ApiResult {
    let Path(name) = name?;
    Ok(Json(ScheduleBody::from(app.schedules()?.pause_schedule(&name, false).await?)).into_response())
}

async fn delete_schedule(State(app): State<AppState>, name: Result<Path<String>, PathRejection>) -> ApiResult {
    let Path(name) = name?;
    app.schedules()?.delete_schedule(&name).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SchedulesQuery {
    after: Option<String>,
    limit: Option<usize>,
}

/// `GET /v1/schedules?after=NAME&limit=N`.
async fn list_schedules(
    State(app): State<AppState>,
    query: Result<Query<SchedulesQuery>, QueryRejection>,
) -> ApiResult {
    let Query(query) = query?;
    let page = app.schedules()?.schedules(query.after.as_deref(), query.limit.unwrap_or(LIST_DEFAULT)).await?;
    Ok(Json(SchedulePageBody::from(page)).into_response())
}

async fn retry(State(app): State<AppState>, id: Result<Path<u64>, PathRejection>) -> ApiResult {
    let Path(id) = id?;
    Ok(Json(TaskBody::from(app.backend.retry(id).await?)).into_response())
}
