//! Handlers of the HTTP API (`/v1`), a file for each kind of thing: each
//! takes the request as [`hourglass_wire`] types, calls the
//! [`Backend`](hourglass_queue::Backend) through [`wire`](crate::wire)'s
//! conversions, and answers with wire types. Each carries its OpenAPI
//! description (`#[utoipa::path]`); [`routes`](crate::routes) puts them on
//! their paths.

pub(crate) mod deliveries;
pub(crate) mod nodes;
pub(crate) mod queues;
pub(crate) mod schedules;
pub(crate) mod tasks;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hourglass_wire as w;
use serde::Serialize;

use crate::access::Caller;
use crate::error::ApiError;
use crate::extract::Json;
use crate::AppState;

type ApiResult<T = Response> = Result<T, ApiError>;

/// Tasks a listing returns when the client does not say.
const LIST_DEFAULT: usize = 100;

/// The path of a queue's routes, for the OpenAPI document.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub(crate) struct QueuePath {
    /// The queue's name, percent-encoded (it may hold `/`).
    queue: String,
}

/// The path of a task's routes.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub(crate) struct TaskPath {
    /// The task's id.
    id: u64,
}

/// The path of a task found by its idempotency key.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub(crate) struct KeyPath {
    /// The queue's name, percent-encoded.
    queue: String,
    /// The key, percent-encoded.
    key: String,
}

/// The path of a schedule's routes.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub(crate) struct SchedulePath {
    /// The schedule's name, percent-encoded.
    name: String,
}

/// `body` rendered through `serde_json::Value`, as the queue listing always
/// was: every object's keys in alphabetical order. Kept so that the wire
/// format does not change.
pub(crate) fn through_value(body: &impl Serialize) -> Json<serde_json::Value> {
    Json(serde_json::to_value(body).expect("an answer is JSON with string keys"))
}

/// 201 if `created`, else 200 (a key, or a name, that was there already).
pub(crate) fn created_or_ok(created: bool) -> StatusCode {
    if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    }
}

/// Whether the server is up and reaches its store.
#[utoipa::path(get, path = "/healthz", tag = "service", responses(
    (status = 200, description = "Up: `ok`.", body = w::Health),
    (status = 503, description = "Up, but its store out of reach: `store_unavailable`, and why.", body = w::Health),
))]
pub(crate) async fn healthz(State(app): State<AppState>) -> Response {
    health(app.backend.store_unavailable())
}

/// `/healthz`'s answer: 200 `ok`, or 503 `store_unavailable` and why.
pub(crate) fn health(store_unavailable: Option<String>) -> Response {
    match store_unavailable {
        None => Json(w::Health::ok()).into_response(),
        Some(reason) => (StatusCode::SERVICE_UNAVAILABLE, Json(w::Health::store_unavailable(reason))).into_response(),
    }
}

/// Who the request's token is: its name, permissions and queue patterns.
#[utoipa::path(get, path = "/v1/whoami", tag = "service", responses(
    (status = 200, description = "The token's name, permissions and queues.", body = w::Whoami),
))]
pub(crate) async fn whoami(Caller(grant): Caller) -> Json<w::Whoami> {
    Json(w::Whoami {
        name: grant.name().to_owned(),
        can: grant.permissions().iter().map(|p| p.as_str().to_owned()).collect(),
        queues: grant.queues().iter().map(|q| q.as_str().to_owned()).collect(),
    })
}
