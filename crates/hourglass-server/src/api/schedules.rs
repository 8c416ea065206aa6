//! Schedules: put, show, pause, resume, delete and list.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use hourglass_wire as w;

use super::{created_or_ok, ApiResult, SchedulePath, LIST_DEFAULT};
use crate::access::{Caller, Checked, Permission};
use crate::extract::{Json, Path, Query};
use crate::wire;
use crate::AppState;

/// Put a schedule: a task at every occurrence of a cron expression in a time zone, or of a period.
#[utoipa::path(
    put,
    path = "/v1/schedules/{name}",
    tag = "schedules",
    params(SchedulePath),
    request_body = w::NewSchedule,
    responses(
        (status = 201, description = "Created.", body = w::Schedule),
        (status = 200, description = "Replaced.", body = w::Schedule),
    )
)]
pub(crate) async fn put_schedule(
    State(app): State<AppState>,
    Caller(grant): Caller,
    checked: Checked,
    Path(name): Path<String>,
    Json(schedule): Json<w::NewSchedule>,
) -> ApiResult {
    grant.require(Permission::Manage, &schedule.queue)?;
    let new = wire::new_schedule(schedule)?;
    let (info, created) = app.schedules()?.put_schedule(&name, new, checked.expect()).await?;
    Ok((created_or_ok(created), Json(wire::schedule(info))).into_response())
}

/// A schedule, with its next five runs and its last.
#[utoipa::path(
    get,
    path = "/v1/schedules/{name}",
    tag = "schedules",
    params(SchedulePath),
    responses(
        (status = 200, description = "The schedule, with its next runs and its last.", body = w::Schedule),
    )
)]
pub(crate) async fn show_schedule(
    State(app): State<AppState>,
    Caller(grant): Caller,
    Path(name): Path<String>,
) -> ApiResult<Json<w::Schedule>> {
    let info = app.schedules()?.schedule(&name).await?;
    // Read again since the guard checked: it may have been made again in
    // another queue meanwhile.
    grant.require_found(Permission::Read, &info.schedule.queue)?;
    Ok(Json(wire::schedule(info)))
}

/// Pause a schedule: it enqueues nothing until resumed.
#[utoipa::path(
    post,
    path = "/v1/schedules/{name}/pause",
    tag = "schedules",
    params(SchedulePath),
    responses(
        (status = 200, description = "The schedule, paused.", body = w::Schedule),
    )
)]
pub(crate) async fn pause_schedule(
    State(app): State<AppState>,
    checked: Checked,
    Path(name): Path<String>,
) -> ApiResult<Json<w::Schedule>> {
    Ok(Json(wire::schedule(app.schedules()?.pause_schedule(&name, true, checked.expect()).await?)))
}

/// Resume a schedule; the occurrences missed meanwhile go to its misfire policy.
#[utoipa::path(
    post,
    path = "/v1/schedules/{name}/resume",
    tag = "schedules",
    params(SchedulePath),
    responses(
        (status = 200, description = "The schedule, resumed.", body = w::Schedule),
    )
)]
pub(crate) async fn resume_schedule(
    State(app): State<AppState>,
    checked: Checked,
    Path(name): Path<String>,
) -> ApiResult<Json<w::Schedule>> {
    Ok(Json(wire::schedule(app.schedules()?.pause_schedule(&name, false, checked.expect()).await?)))
}

/// Delete a schedule.
#[utoipa::path(
    delete,
    path = "/v1/schedules/{name}",
    tag = "schedules",
    params(SchedulePath),
    responses(
        (status = 204, description = "Deleted."),
    )
)]
pub(crate) async fn delete_schedule(
    State(app): State<AppState>,
    checked: Checked,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    app.schedules()?.delete_schedule(&name, checked.expect()).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The schedules, a page at a time, by name. A token sees the schedules
/// of the queues it reads, and a page's `next` is always one of those.
#[utoipa::path(
    get,
    path = "/v1/schedules",
    tag = "schedules",
    params(w::SchedulesQuery),
    responses(
        (status = 200, description = "A page of the schedules, by name.", body = w::SchedulePage),
    )
)]
pub(crate) async fn list_schedules(
    State(app): State<AppState>,
    Caller(grant): Caller,
    Query(query): Query<w::SchedulesQuery>,
) -> ApiResult<Json<w::SchedulePage>> {
    let (after, limit) = (query.after.as_deref(), query.limit.unwrap_or(LIST_DEFAULT));
    let shown = |queue: &str| grant.allows(Permission::Read, queue);
    Ok(Json(wire::schedule_page(app.schedules()?.schedules_where(after, limit, &shown).await?)))
}
