//! Queues: their counts, pause and resume, and deleting the dead.

use axum::extract::State;
use axum::http::StatusCode;
use hourglass_queue::{limits, Pause};
use hourglass_wire as w;

use super::{through_value, ApiResult, QueuePath};
use crate::access::Caller;
use crate::error::ApiError;
use crate::extract::{Json, Path};
use crate::wire;
use crate::AppState;

/// Every queue with its counts, and the totals. A token that does not read
/// every queue sees those it reads, and their sums.
#[utoipa::path(
    get,
    path = "/v1/queues",
    tag = "queues",
    responses(
        (status = 200, description = "Every queue, and the totals.", body = w::Queues),
    )
)]
pub(crate) async fn list_queues(State(app): State<AppState>, Caller(grant): Caller) -> Json<serde_json::Value> {
    let all = app.backend.queues().await;
    let totals = wire::totals(grant.totals(app.backend.totals().await, &all));
    let queues = grant.readable(&all).map(|q| grant.queue(wire::queue(q.clone()))).collect();
    through_value(&w::Queues { queues, totals })
}

/// A queue's counts, lateness and counters.
#[utoipa::path(
    get,
    path = "/v1/queues/{queue}",
    tag = "queues",
    params(QueuePath),
    responses(
        (status = 200, description = "The queue.", body = w::Queue),
    )
)]
pub(crate) async fn queue_stats(
    State(app): State<AppState>,
    Caller(grant): Caller,
    Path(queue): Path<String>,
) -> ApiResult<Json<w::Queue>> {
    let stats = app
        .backend
        .queue(&queue)
        .await
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("no queue {queue:?}")))?;
    Ok(Json(grant.queue(wire::queue(stats))))
}

/// Pause a queue: its claims hand out nothing until resumed.
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/pause",
    tag = "queues",
    params(QueuePath),
    responses(
        (status = 200, description = "The queue, paused.", body = w::Queue),
    )
)]
pub(crate) async fn pause_queue(State(app): State<AppState>, Path(queue): Path<String>) -> ApiResult<Json<w::Queue>> {
    Ok(Json(wire::queue(app.backend.pause_queue(&queue, Pause::Indefinitely).await?)))
}

/// Resume a paused queue.
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/resume",
    tag = "queues",
    params(QueuePath),
    responses(
        (status = 200, description = "The queue, resumed.", body = w::Queue),
    )
)]
pub(crate) async fn resume_queue(State(app): State<AppState>, Path(queue): Path<String>) -> ApiResult<Json<w::Queue>> {
    Ok(Json(wire::queue(app.backend.pause_queue(&queue, Pause::Resume).await?)))
}

/// A queue's settings: its push target and flow control (the defaults for a
/// queue never set).
#[utoipa::path(
    get,
    path = "/v1/queues/{queue}/settings",
    tag = "queues",
    params(QueuePath),
    responses(
        (status = 200, description = "The queue's settings.", body = w::QueueSettings),
    )
)]
pub(crate) async fn settings(
    State(app): State<AppState>,
    Caller(grant): Caller,
    Path(queue): Path<String>,
) -> ApiResult<Json<w::QueueSettings>> {
    let settings = crate::push::wire_settings(&app.backend.settings(&queue).await?);
    Ok(Json(grant.settings(&queue, settings)))
}

/// Replace a queue's settings whole, durably: a push target (or `null`), a
/// rate and burst, a cap on tasks in flight. Answered with them as they now
/// hold.
#[utoipa::path(
    put,
    path = "/v1/queues/{queue}/settings",
    tag = "queues",
    params(QueuePath),
    request_body = w::QueueSettings,
    responses(
        (status = 200, description = "The queue's settings, as stored.", body = w::QueueSettings),
    )
)]
pub(crate) async fn put_settings(
    State(app): State<AppState>,
    Path(queue): Path<String>,
    Json(settings): Json<w::QueueSettings>,
) -> ApiResult<Json<w::QueueSettings>> {
    let settings = crate::push::settings(settings)?;
    if let Some(push) = &settings.push {
        app.check_target(&push.http.url)?;
    }
    let settings = app.backend.put_settings(&queue, settings).await?;
    Ok(Json(crate::push::wire_settings(&settings)))
}

/// Delete every dead task of a queue, in durable writes of up to
/// [`LIST_MAX`](limits::LIST_MAX). Those that die meanwhile may stay: it
/// stops once it has deleted as many as there were when it began.
#[utoipa::path(
    delete,
    path = "/v1/queues/{queue}/dead",
    tag = "queues",
    params(QueuePath),
    responses(
        (status = 200, description = "How many were deleted.", body = w::DeletedDead),
    )
)]
pub(crate) async fn delete_dead(
    State(app): State<AppState>,
    Path(queue): Path<String>,
) -> ApiResult<Json<w::DeletedDead>> {
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
