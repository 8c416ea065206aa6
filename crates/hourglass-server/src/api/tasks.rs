//! Tasks: enqueue (one and a batch), show, find by key, cancel,
//! reschedule, and list a queue's tasks a page at a time.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use hourglass_queue::{ListRequest, Status};
use hourglass_wire as w;

use super::{created_or_ok, ApiResult, KeyPath, QueuePath, TaskPath, LIST_DEFAULT};
use crate::access::{Caller, Grant};
use crate::error::ApiError;
use crate::extract::{Json, Path, Query};
use crate::wire;
use crate::AppState;

/// Enqueue a task: due now, after `delay_ms` or at `run_at_ms`.
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/tasks",
    tag = "tasks",
    params(QueuePath),
    request_body = w::NewTask,
    responses(
        (status = 201, description = "Enqueued.", body = w::Enqueued),
        (status = 200, description = "A live task with the same key was there: that one.", body = w::Enqueued),
    )
)]
pub(crate) async fn enqueue(
    State(app): State<AppState>,
    Path(queue): Path<String>,
    Json(task): Json<w::NewTask>,
) -> ApiResult {
    let task = wire::new_task(task)?;
    if let Some(http) = &task.http {
        app.check_target(&http.url)?;
    }
    let done = app.backend.enqueue(&queue, task).await?;
    Ok((created_or_ok(done.created), Json(wire::enqueued(done))).into_response())
}

/// Enqueue several tasks, all or nothing.
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/tasks/batch",
    tag = "tasks",
    params(QueuePath),
    request_body = w::NewTasks,
    responses(
        (status = 201, description = "Enqueued, all of them.", body = w::EnqueuedBatch),
        (status = 200, description = "Every task had a live twin by key: nothing new.", body = w::EnqueuedBatch),
    )
)]
pub(crate) async fn enqueue_batch(
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

/// A page of a queue's tasks, in one state or all, after a cursor.
#[utoipa::path(
    get,
    path = "/v1/queues/{queue}/tasks",
    tag = "tasks",
    params(QueuePath, w::ListQuery),
    responses(
        (status = 200, description = "A page of the queue's tasks.", body = w::TaskPage),
    )
)]
pub(crate) async fn list_tasks(
    State(app): State<AppState>,
    Caller(grant): Caller,
    Path(queue): Path<String>,
    Query(query): Query<w::ListQuery>,
) -> ApiResult<Json<w::TaskPage>> {
    list(app, &grant, queue, query, None).await
}

/// A page of a queue's dead tasks.
#[utoipa::path(
    get,
    path = "/v1/queues/{queue}/dead",
    tag = "tasks",
    params(QueuePath, w::ListQuery),
    responses(
        (status = 200, description = "A page of the queue's dead tasks.", body = w::TaskPage),
    )
)]
pub(crate) async fn dead(
    State(app): State<AppState>,
    Caller(grant): Caller,
    Path(queue): Path<String>,
    Query(query): Query<w::ListQuery>,
) -> ApiResult<Json<w::TaskPage>> {
    list(app, &grant, queue, query, Some(Status::Dead)).await
}

/// A page of a queue's tasks; `only` fixes the state (the `/dead` listing).
async fn list(
    app: AppState,
    grant: &Grant,
    queue: String,
    query: w::ListQuery,
    only: Option<Status>,
) -> ApiResult<Json<w::TaskPage>> {
    let status = match (only, query.state.as_deref()) {
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid("this listing has one state; use /tasks?state= for others"))
        }
        (Some(only), None) => Some(only),
        (None, state) => state.map(wire::parse_status).transpose()?,
    };
    let after = query.after.as_deref().map(wire::parse_cursor).transpose()?;
    let request = ListRequest { status, after, limit: query.limit.unwrap_or(LIST_DEFAULT) };
    Ok(Json(grant.page(wire::page(app.backend.list(&queue, request).await?))))
}

/// The live task with an idempotency key.
#[utoipa::path(
    get,
    path = "/v1/queues/{queue}/keys/{key}",
    tag = "tasks",
    params(KeyPath),
    responses(
        (status = 200, description = "The live task with that key.", body = w::Task),
    )
)]
pub(crate) async fn find_by_key(
    State(app): State<AppState>,
    Caller(grant): Caller,
    Path((queue, key)): Path<(String, String)>,
) -> ApiResult<Json<w::Task>> {
    let info =
        app.backend.find_by_key(&queue, &key).await?.ok_or_else(|| {
            ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("no live task with key {key:?}"))
        })?;
    Ok(Json(grant.task(wire::task(info))))
}

/// A task, with every field.
#[utoipa::path(
    get,
    path = "/v1/tasks/{id}",
    tag = "tasks",
    params(TaskPath),
    responses(
        (status = 200, description = "The task.", body = w::Task),
    )
)]
pub(crate) async fn show(
    State(app): State<AppState>,
    Caller(grant): Caller,
    Path(id): Path<u64>,
) -> ApiResult<Json<w::Task>> {
    Ok(Json(grant.task(wire::task(app.backend.get(id).await?))))
}

/// Cancel a task: it is removed.
#[utoipa::path(
    delete,
    path = "/v1/tasks/{id}",
    tag = "tasks",
    params(TaskPath),
    responses(
        (status = 204, description = "Cancelled."),
    )
)]
pub(crate) async fn cancel(State(app): State<AppState>, Path(id): Path<u64>) -> ApiResult<StatusCode> {
    app.backend.cancel(id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Reschedule a task: due after `delay_ms` or at `run_at_ms`.
#[utoipa::path(
    patch,
    path = "/v1/tasks/{id}",
    tag = "tasks",
    params(TaskPath),
    request_body = w::Reschedule,
    responses(
        (status = 200, description = "The task, due at its new time.", body = w::Task),
    )
)]
pub(crate) async fn reschedule(
    State(app): State<AppState>,
    Path(id): Path<u64>,
    Json(to): Json<w::Reschedule>,
) -> ApiResult<Json<w::Task>> {
    if to.delay_ms.is_none() && to.run_at_ms.is_none() {
        return Err(ApiError::invalid("give delay_ms or run_at_ms"));
    }
    Ok(Json(wire::task(app.backend.reschedule(id, wire::run_at(to.delay_ms, to.run_at_ms)?).await?)))
}
