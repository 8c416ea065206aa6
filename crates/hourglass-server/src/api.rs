//! Routes and handlers of the HTTP API (`/v1`): each takes the request as
//! [`hourglass_wire`] types, calls the [`Backend`](hourglass_queue::Backend)
//! through [`wire`](crate::wire)'s conversions, and answers with wire types.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::Router;
use hourglass_queue::{limits, ListRequest, Nack, Pause, Status};
use hourglass_wire as w;
use serde::Serialize;

use crate::error::ApiError;
use crate::extract::{Json, Path, Query};
use crate::wire;
use crate::{push, AppState};

type ApiResult<T = Response> = Result<T, ApiError>;

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
        .route("/v1/queues/{queue}/settings", put(put_settings).get(settings))
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

/// `body` rendered through `serde_json::Value`, as the claim's answer and the
/// queue listing always were: every object's keys in alphabetical order, and
/// payloads re-rendered. Kept so that the wire format does not change.
fn through_value(body: &impl Serialize) -> Json<serde_json::Value> {
    Json(serde_json::to_value(body).expect("an answer is JSON with string keys"))
}

/// 201 if `created`, else 200 (a key, or a name, that was there already).
fn created_or_ok(created: bool) -> StatusCode {
    if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    }
}

async fn healthz(State(app): State<AppState>) -> Response {
    health(app.backend.store_unavailable())
}

/// `/healthz`'s answer: 200 `ok`, or 503 `store_unavailable` and why.
pub(crate) fn health(store_unavailable: Option<String>) -> Response {
    match store_unavailable {
        None => Json(w::Health::ok()).into_response(),
        Some(reason) => (StatusCode::SERVICE_UNAVAILABLE, Json(w::Health::store_unavailable(reason))).into_response(),
    }
}

async fn enqueue(State(app): State<AppState>, Path(queue): Path<String>, Json(task): Json<w::NewTask>) -> ApiResult {
    let task = wire::new_task(task)?;
    if let Some(http) = &task.http {
        app.check_target(&http.url)?;
    }
    let done = app.backend.enqueue(&queue, task).await?;
    Ok((created_or_ok(done.created), Json(wire::enqueued(done))).into_response())
}

async fn enqueue_batch(
    State(app): State<AppState>,
    Path(queue): Path<String>,
    Json(batch): Json<w::NewTasks>,
) -> ApiResult {
    let tasks = batch.tasks.into_iter().map(wire::new_task).collect::<Result<Vec<_>, _>>()?;
    for http in tasks.iter().filter_map(|task| task.http.as_ref()) {
        app.check_target(&http.url)?;
    }
    let done = app.backend.enqueue_batch(&queue, tasks).await?;
    let created = done.iter().filter(|d| d.created).count();
    let tasks = done.into_iter().map(wire::enqueued).collect();
    Ok((created_or_ok(created > 0), Json(w::EnqueuedBatch { created: created as u64, tasks })).into_response())
}

async fn claim(
    State(app): State<AppState>,
    Path(queue): Path<String>,
    Json(claim): Json<w::ClaimRequest>,
) -> ApiResult<Json<serde_json::Value>> {
    let max = claim.max.unwrap_or(1);
    let lease_ms = claim.lease_ms.unwrap_or(limits::LEASE_MS_DEFAULT);
    let tasks = app.backend.claim(&queue, max, lease_ms, claim.wait_ms.unwrap_or(0)).await?;
    Ok(through_value(&w::Claimed { tasks: tasks.into_iter().map(wire::claimed).collect() }))
}

async fn list_queues(State(app): State<AppState>) -> Json<serde_json::Value> {
    let queues = app.backend.queues().await.into_iter().map(wire::queue).collect();
    through_value(&w::Queues { queues, totals: wire::totals(app.backend.totals().await) })
}

async fn queue_stats(State(app): State<AppState>, Path(queue): Path<String>) -> ApiResult<Json<w::Queue>> {
    let stats = app
        .backend
        .queue(&queue)
        .await
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("no queue {queue:?}")))?;
    Ok(Json(wire::queue(stats)))
}

async fn pause_queue(State(app): State<AppState>, Path(queue): Path<String>) -> ApiResult<Json<w::Queue>> {
    Ok(Json(wire::queue(app.backend.pause_queue(&queue, Pause::Indefinitely).await?)))
}

async fn resume_queue(State(app): State<AppState>, Path(queue): Path<String>) -> ApiResult<Json<w::Queue>> {
    Ok(Json(wire::queue(app.backend.pause_queue(&queue, Pause::Resume).await?)))
}

/// `GET /v1/queues/{queue}/settings`: the defaults for a queue never set.
async fn settings(State(app): State<AppState>, Path(queue): Path<String>) -> ApiResult<Json<w::QueueSettings>> {
    Ok(Json(push::wire_settings(&app.backend.settings(&queue).await?)))
}

/// `PUT /v1/queues/{queue}/settings`: replaced whole, durably; answered with
/// them as they now hold.
async fn put_settings(
    State(app): State<AppState>,
    Path(queue): Path<String>,
    Json(settings): Json<w::QueueSettings>,
) -> ApiResult<Json<w::QueueSettings>> {
    let settings = push::settings(settings)?;
    if let Some(push) = &settings.push {
        app.check_target(&push.http.url)?;
    }
    let settings = app.backend.put_settings(&queue, settings).await?;
    Ok(Json(push::wire_settings(&settings)))
}

/// `DELETE /v1/queues/{queue}/dead`: every dead task of the queue, in writes
/// of up to [`LIST_MAX`](limits::LIST_MAX). Those that die meanwhile may
/// stay: it stops once it has deleted as many as there were when it began.
async fn delete_dead(State(app): State<AppState>, Path(queue): Path<String>) -> ApiResult<Json<w::DeletedDead>> {
    let there = app.backend.queue(&queue).await.map_or(0, |q| q.dead);
    let mut deleted = 0;
    while deleted < there {
        let ids = app.backend.delete_dead(&queue, limits::LIST_MAX.min(there - deleted)).await?;
        deleted += ids.len();
        if ids.is_empty() {
            break;
        }
    }
    Ok(Json(w::DeletedDead { deleted: deleted as u64, queue }))
}

/// `GET /v1/queues/{queue}/tasks?state=due&after=CURSOR&limit=N`.
async fn list_tasks(
    State(app): State<AppState>,
    Path(queue): Path<String>,
    Query(query): Query<w::ListQuery>,
) -> ApiResult<Json<w::TaskPage>> {
    list(app, queue, query, None).await
}

/// `GET /v1/queues/{queue}/dead?after=CURSOR&limit=N`.
async fn dead(
    State(app): State<AppState>,
    Path(queue): Path<String>,
    Query(query): Query<w::ListQuery>,
) -> ApiResult<Json<w::TaskPage>> {
    list(app, queue, query, Some(Status::Dead)).await
}

/// A page of a queue's tasks; `only` fixes the state (the `/dead` listing).
async fn list(app: AppState, queue: String, query: w::ListQuery, only: Option<Status>) -> ApiResult<Json<w::TaskPage>> {
    let status = match (only, query.state.as_deref()) {
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid("this listing has one state; use /tasks?state= for others"))
        }
        (Some(only), None) => Some(only),
        (None, state) => state.map(wire::parse_status).transpose()?,
    };
    let after = query.after.as_deref().map(wire::parse_cursor).transpose()?;
    let request = ListRequest { status, after, limit: query.limit.unwrap_or(LIST_DEFAULT) };
    Ok(Json(wire::page(app.backend.list(&queue, request).await?)))
}

async fn find_by_key(
    State(app): State<AppState>,
    Path((queue, key)): Path<(String, String)>,
) -> ApiResult<Json<w::Task>> {
    let info =
        app.backend.find_by_key(&queue, &key).await?.ok_or_else(|| {
            ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("no live task with key {key:?}"))
        })?;
    Ok(Json(wire::task(info)))
}

async fn show(State(app): State<AppState>, Path(id): Path<u64>) -> ApiResult<Json<w::Task>> {
    Ok(Json(wire::task(app.backend.get(id).await?)))
}

async fn cancel(State(app): State<AppState>, Path(id): Path<u64>) -> ApiResult<StatusCode> {
    app.backend.cancel(id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn reschedule(
    State(app): State<AppState>,
    Path(id): Path<u64>,
    Json(to): Json<w::Reschedule>,
) -> ApiResult<Json<w::Task>> {
    if to.delay_ms.is_none() && to.run_at_ms.is_none() {
        return Err(ApiError::invalid("give delay_ms or run_at_ms"));
    }
    Ok(Json(wire::task(app.backend.reschedule(id, wire::run_at(to.delay_ms, to.run_at_ms)?).await?)))
}

async fn ack(
    State(app): State<AppState>,
    Path(id): Path<u64>,
    Json(body): Json<w::LeaseRequest>,
) -> ApiResult<Json<w::Acked>> {
    if body.delay_ms.is_some() || body.lease_ms.is_some() || body.reason.is_some() {
        return Err(ApiError::invalid("ack takes only lease"));
    }
    app.backend.ack(id, wire::parse_lease(&body.lease)?).await?;
    Ok(Json(w::Acked { acked: true, id }))
}

/// Acks of several deliveries, each answered on its own, in order.
async fn ack_batch(State(app): State<AppState>, Json(body): Json<w::Acks>) -> ApiResult<Json<w::AckResults>> {
    let acks = body
        .acks
        .iter()
        .map(|ack| Ok((ack.id, wire::parse_lease(&ack.lease)?)))
        .collect::<Result<Vec<_>, ApiError>>()?;
    let results = app.backend.ack_batch(&acks).await?;
    let results = acks
        .iter()
        .zip(results)
        .map(|(&(id, _), result)| match result {
            Ok(()) => w::AckResult::Acked(w::Acked { acked: true, id }),
            Err(error) => w::AckResult::Failed { error: ApiError::from(error).detail(), id },
        })
        .collect();
    Ok(Json(w::AckResults { results }))
}

async fn nack(
    State(app): State<AppState>,
    Path(id): Path<u64>,
    Json(body): Json<w::LeaseRequest>,
) -> ApiResult<Json<w::Task>> {
    if body.lease_ms.is_some() {
        return Err(ApiError::invalid("nack takes lease, delay_ms and reason"));
    }
    let lease = wire::parse_lease(&body.lease)?;
    let nack = Nack { delay_ms: body.delay_ms, reason: body.reason.map(Into::into), ..Nack::default() };
    Ok(Json(wire::task(app.backend.nack(id, lease, nack).await?)))
}

async fn extend(
    State(app): State<AppState>,
    Path(id): Path<u64>,
    Json(body): Json<w::LeaseRequest>,
) -> ApiResult<Json<w::Extended>> {
    let (Some(lease_ms), None, None) = (body.lease_ms, body.delay_ms, &body.reason) else {
        return Err(ApiError::invalid("extend takes lease and lease_ms"));
    };
    let lease_until_ms = app.backend.extend(id, wire::parse_lease(&body.lease)?, lease_ms).await?;
    Ok(Json(w::Extended { id, lease_until_ms }))
}

async fn retry(State(app): State<AppState>, Path(id): Path<u64>) -> ApiResult<Json<w::Task>> {
    Ok(Json(wire::task(app.backend.retry(id).await?)))
}

async fn put_schedule(
    State(app): State<AppState>,
    Path(name): Path<String>,
    Json(schedule): Json<w::NewSchedule>,
) -> ApiResult {
    let (info, created) = app.schedules()?.put_schedule(&name, wire::new_schedule(schedule)?).await?;
    Ok((created_or_ok(created), Json(wire::schedule(info))).into_response())
}

async fn show_schedule(State(app): State<AppState>, Path(name): Path<String>) -> ApiResult<Json<w::Schedule>> {
    Ok(Json(wire::schedule(app.schedules()?.schedule(&name).await?)))
}

async fn pause_schedule(State(app): State<AppState>, Path(name): Path<String>) -> ApiResult<Json<w::Schedule>> {
    Ok(Json(wire::schedule(app.schedules()?.pause_schedule(&name, true).await?)))
}

async fn resume_schedule(State(app): State<AppState>, Path(name): Path<String>) -> ApiResult<Json<w::Schedule>> {
    Ok(Json(wire::schedule(app.schedules()?.pause_schedule(&name, false).await?)))
}

async fn delete_schedule(State(app): State<AppState>, Path(name): Path<String>) -> ApiResult<StatusCode> {
    app.schedules()?.delete_schedule(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /v1/schedules?after=NAME&limit=N`.
async fn list_schedules(
    State(app): State<AppState>,
    Query(query): Query<w::SchedulesQuery>,
) -> ApiResult<Json<w::SchedulePage>> {
    let page = app.schedules()?.schedules(query.after.as_deref(), query.limit.unwrap_or(LIST_DEFAULT)).await?;
    Ok(Json(wire::schedule_page(page)))
}
