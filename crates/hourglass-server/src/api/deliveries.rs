//! Deliveries: claim due tasks (acking the previous batch on the way),
//! then ack (one or several), nack, extend, and retry a dead task.

use axum::extract::State;
use hourglass_queue::{limits, validate, Lease, Nack, QueueError};
use hourglass_wire as w;

use super::{ApiResult, QueuePath, TaskPath};
use crate::access::{Caller, Grant, Permission};
use crate::error::ApiError;
use crate::extract::{Json, Path};
use crate::wire;
use crate::AppState;

/// Claim due tasks, oldest first, each leased; wait up to `wait_ms` for one. The `acks` given are applied with it, first.
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/claim",
    tag = "deliveries",
    params(QueuePath),
    request_body = w::ClaimRequest,
    responses(
        (status = 200, description = "The deliveries, perhaps none; and the results of the acks carried.", body = w::Claimed),
    )
)]
pub(crate) async fn claim(
    State(app): State<AppState>,
    Caller(grant): Caller,
    Path(queue): Path<String>,
    Json(claim): Json<w::ClaimRequest>,
) -> ApiResult<Json<w::Claimed>> {
    let max = claim.max.unwrap_or(1);
    let lease_ms = claim.lease_ms.unwrap_or(limits::LEASE_MS_DEFAULT);
    let wait_ms = claim.wait_ms.unwrap_or(0);
    // The acks are checked first (a wrong one changes nothing), then sent to
    // the backend before the claim and alongside it: the tasks they ack are
    // leased to this consumer, so no claim could take them, and a store
    // that groups writes commits both at once. An empty list is no acks.
    let (acks, tasks) = match claim.acks {
        Some(acks) if !acks.is_empty() => {
            let acks = checked_acks(&acks)?;
            may_ack(&app, &grant, &acks).await?;
            let (results, tasks) =
                tokio::join!(app.backend.ack_batch(&acks), app.backend.claim(&queue, max, lease_ms, wait_ms));
            (Some(ack_results(&acks, results?)), tasks?)
        }
        acks => (acks.map(|_| Vec::new()), app.backend.claim(&queue, max, lease_ms, wait_ms).await?),
    };
    // Serialized directly, not through `serde_json::Value`: its keys in the
    // order the server always sent them, each payload the text enqueued.
    Ok(Json(w::Claimed { acks, tasks: tasks.into_iter().map(wire::claimed).collect() }))
}

/// Ack a delivery: the task is done.
#[utoipa::path(
    post,
    path = "/v1/tasks/{id}/ack",
    tag = "deliveries",
    params(TaskPath),
    request_body = w::LeaseRequest,
    responses(
        (status = 200, description = "Done: the task is removed (or, recurring, scheduled again).", body = w::Acked),
    )
)]
pub(crate) async fn ack(
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

/// Ack several deliveries, each as alone.
#[utoipa::path(
    post,
    path = "/v1/acks",
    tag = "deliveries",
    request_body = w::Acks,
    responses(
        (status = 200, description = "Each ack's result, in order.", body = w::AckResults),
    )
)]
pub(crate) async fn ack_batch(
    State(app): State<AppState>,
    Caller(grant): Caller,
    Json(body): Json<w::Acks>,
) -> ApiResult<Json<w::AckResults>> {
    let acks = checked_acks(&body.acks)?;
    may_ack(&app, &grant, &acks).await?;
    let results = app.backend.ack_batch(&acks).await?;
    Ok(Json(w::AckResults { results: ack_results(&acks, results) }))
}

/// Task lookups [`may_ack`] keeps in flight at once: one batch of acks on
/// Redis would otherwise wait for a round trip per task, one after another.
const ACK_LOOKUPS_AT_ONCE: usize = 32;

/// `Ok` if `grant` may consume in the queue of each task `acks` names
/// (read from the backend, each id once, unless it consumes everywhere). A
/// task not found is let through: its ack fails on its own, and no task
/// made later under its id could hold its lease.
async fn may_ack(app: &AppState, grant: &Grant, acks: &[(u64, Lease)]) -> ApiResult<()> {
    use futures_util::{StreamExt as _, TryStreamExt as _};
    if grant.everywhere(Permission::Consume) {
        return Ok(());
    }
    let ids: std::collections::BTreeSet<u64> = acks.iter().map(|&(id, _)| id).collect();
    futures_util::stream::iter(ids)
        .map(|id| async move {
            match app.backend.get(id).await {
                Ok(info) => grant.require_found(Permission::Consume, &info.task.queue),
                Err(QueueError::NotFound(_)) => Ok(()),
                Err(error) => Err(error.into()),
            }
        })
        .buffer_unordered(ACK_LOOKUPS_AT_ONCE)
        .try_collect::<()>()
        .await
}

/// `acks` as the backend takes them, if there are 1 to
/// [`ACK_BATCH_MAX`](limits::ACK_BATCH_MAX) and each lease reads.
fn checked_acks(acks: &[w::Ack]) -> ApiResult<Vec<(u64, Lease)>> {
    validate::ack_batch(acks.len())?;
    acks.iter().map(|ack| Ok((ack.id, wire::parse_lease(&ack.lease)?))).collect()
}

/// Each ack's result as the API shows it, in order.
fn ack_results(acks: &[(u64, Lease)], results: Vec<Result<(), QueueError>>) -> Vec<w::AckResult> {
    acks.iter()
        .zip(results)
        .map(|(&(id, _), result)| match result {
            Ok(()) => w::AckResult::Acked(w::Acked { acked: true, id }),
            Err(error) => w::AckResult::Failed { error: ApiError::from(error).detail(), id },
        })
        .collect()
}

/// Nack a delivery, with a reason (the task's `last_error`).
#[utoipa::path(
    post,
    path = "/v1/tasks/{id}/nack",
    tag = "deliveries",
    params(TaskPath),
    request_body = w::LeaseRequest,
    responses(
        (status = 200, description = "The task, due again later, or dead.", body = w::Task),
    )
)]
pub(crate) async fn nack(
    State(app): State<AppState>,
    Caller(grant): Caller,
    Path(id): Path<u64>,
    Json(body): Json<w::LeaseRequest>,
) -> ApiResult<Json<w::Task>> {
    if body.lease_ms.is_some() {
        return Err(ApiError::invalid("nack takes lease, delay_ms and reason"));
    }
    let lease = wire::parse_lease(&body.lease)?;
    let nack = Nack { delay_ms: body.delay_ms, reason: body.reason.map(Into::into), ..Nack::default() };
    Ok(Json(grant.task(wire::task(app.backend.nack(id, lease, nack).await?))))
}

/// Extend a delivery's lease to `lease_ms` from now.
#[utoipa::path(
    post,
    path = "/v1/tasks/{id}/extend",
    tag = "deliveries",
    params(TaskPath),
    request_body = w::LeaseRequest,
    responses(
        (status = 200, description = "The lease's new end.", body = w::Extended),
    )
)]
pub(crate) async fn extend(
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

/// Revive a dead task.
#[utoipa::path(
    post,
    path = "/v1/tasks/{id}/retry",
    tag = "deliveries",
    params(TaskPath),
    responses(
        (status = 200, description = "The task, due now with its attempts anew.", body = w::Task),
    )
)]
pub(crate) async fn retry(State(app): State<AppState>, Path(id): Path<u64>) -> ApiResult<Json<w::Task>> {
    Ok(Json(wire::task(app.backend.retry(id).await?)))
}
