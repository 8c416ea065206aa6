//! What a route needs, and the guard that checks it before the handler.

use axum::extract::{MatchedPath, RawPathParams, Request, State};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hourglass_queue::{Expect, QueueError};

use super::keys::bearer;
use super::{Caller, Grant, Permission};
use crate::error::ApiError;
use crate::{routes, AppState, UI_HEADER};

/// What a route needs of the request's token, and how the queue it touches
/// is found. Every route of [`routes`] has one, in its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// Nothing: served without a token (the dashboard's files, the API's
    /// description).
    Nothing,
    /// A known token, whatever it may do (`/healthz`, `/v1/whoami`).
    Token,
    /// The permission on the path's `{queue}`.
    Queue(Permission),
    /// The permission on the queue of the path's task `{id}`.
    Task(Permission),
    /// The permission on the queue of the path's schedule `{name}`; a put
    /// also needs it on the queue its body names, which its handler checks.
    Schedule(Permission),
    /// The permission on some queue; the handler shows only the queues it
    /// allows, and server-wide figures only to a token that holds it on
    /// every queue.
    Listing(Permission),
    /// The permission on some queue; the handler checks it on the queue of
    /// each task its body names (acks).
    Body(Permission),
    /// The permission on every queue, those to come included: figures that
    /// tell of every queue and are not split by queue (the nodes, whose
    /// shards hold them all).
    Everywhere(Permission),
}

impl Need {
    /// The permission it names, if any.
    pub(crate) fn permission(self) -> Option<Permission> {
        match self {
            Need::Nothing | Need::Token => None,
            Need::Queue(p)
            | Need::Task(p)
            | Need::Schedule(p)
            | Need::Listing(p)
            | Need::Body(p)
            | Need::Everywhere(p) => Some(p),
        }
    }
}

/// Before every handler: who the bearer token is (401 if nobody), then
/// `--read-only-ui`, the store's reach, and what the route needs (403 if
/// not allowed). The token's grant goes on to the handler as a [`Caller`].
/// A path that is no route needs a known token, so that nobody without one
/// learns even that.
pub(crate) async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().cloned();
    let need = route.as_ref().map_or(Need::Token, |path| routes::need(path.as_str(), request.method()));
    if need == Need::Nothing {
        return next.run(request).await;
    }
    let Some(grant) = state.keys.identify(bearer(request.headers())) else {
        return ApiError::unauthorized().into_response();
    };
    if state.read_only_ui && request.method() != Method::GET && request.headers().contains_key(UI_HEADER) {
        return ApiError::new(StatusCode::FORBIDDEN, "read_only_ui", "the dashboard is read-only (--read-only-ui)")
            .into_response();
    }
    // While the store is out of reach, the API's requests are not sent to it.
    if request.uri().path().starts_with("/v1/") && state.backend.store_unavailable().is_some() {
        return ApiError::store_unavailable().into_response();
    }
    let (mut parts, body) = request.into_parts();
    if let Err(refusal) = check(&state, &grant, need, &mut parts).await {
        if refusal.status() == StatusCode::FORBIDDEN {
            tracing::debug!(token = grant.name(), route = route.as_ref().map(MatchedPath::as_str), %refusal, "refused");
        }
        return refusal.into_response();
    }
    parts.extensions.insert(Caller(grant));
    next.run(Request::from_parts(parts, body)).await
}

/// Whether `grant` meets `need` for the request whose head is `parts`.
async fn check(state: &AppState, grant: &Grant, need: Need, parts: &mut Parts) -> Result<(), ApiError> {
    let Some(permission) = need.permission() else { return Ok(()) };
    if grant.everywhere(permission) {
        if let Need::Schedule(_) = need {
            parts.extensions.insert(Seen::Any);
        }
        return Ok(());
    }
    grant.require_somewhere(permission)?;
    match need {
        Need::Nothing | Need::Token | Need::Listing(_) | Need::Body(_) => Ok(()),
        Need::Everywhere(_) => Err(ApiError::forbidden_everywhere(permission)),
        Need::Queue(_) => grant.require(permission, &param(parts, "queue").await?),
        Need::Task(_) => {
            // An id that does not parse is the handler's to answer.
            let Ok(id) = param(parts, "id").await?.parse::<u64>() else { return Ok(()) };
            // A task not found is answered here (404, by `?`), not let
            // through: a task made meanwhile with that id could be another
            // queue's.
            let task = state.backend.get(id).await?;
            grant.require_found(permission, &task.task.queue)
        }
        Need::Schedule(_) => {
            let name = param(parts, "name").await?;
            // The handler's change is made only if the schedule is still the
            // one checked here (a name may be deleted and made again in
            // another queue meanwhile): what was seen goes on to it.
            let seen = match state.schedules()?.schedule(&name).await {
                Ok(info) => {
                    grant.require_found(permission, &info.schedule.queue)?;
                    Seen::InQueue(info.schedule.queue)
                }
                // A put makes it: its handler checks the queue it names.
                Err(QueueError::ScheduleNotFound(_)) if parts.method == Method::PUT => Seen::Absent,
                Err(error) => return Err(error.into()),
            };
            parts.extensions.insert(seen);
            Ok(())
        }
    }
}

/// The schedule of the path, as the guard found it when it checked the
/// token's rights on its queue.
#[derive(Debug, Clone)]
enum Seen {
    /// Not looked up: the token may act on every queue.
    Any,
    /// None of that name (a put, which makes it).
    Absent,
    /// One enqueueing into this queue.
    InQueue(Box<str>),
}

/// What a change of the path's schedule expects to find: the schedule the
/// guard checked the token's rights on, or any if the token may act on
/// every queue (the guard then looked nothing up).
#[derive(Debug, Clone)]
pub(crate) struct Checked(Seen);

impl Checked {
    /// As the backend takes it.
    pub(crate) fn expect(&self) -> Expect<'_> {
        match &self.0 {
            Seen::Any => Expect::Any,
            Seen::Absent => Expect::Absent,
            Seen::InQueue(queue) => Expect::InQueue(queue),
        }
    }
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Checked {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Checked, ApiError> {
        // The guard says what it checked for every schedule route; a
        // request without it is a router built wrong, and is refused.
        parts.extensions.get::<Seen>().cloned().map(Checked).ok_or_else(ApiError::unauthorized)
    }
}

/// The path parameter `name`, percent-decoded.
async fn param(parts: &mut Parts, name: &str) -> Result<String, ApiError> {
    let params = <RawPathParams as axum::extract::FromRequestParts<()>>::from_request_parts(parts, &())
        .await
        .map_err(|rejection| ApiError::new(StatusCode::BAD_REQUEST, "invalid_path", rejection.body_text()))?;
    let value = params.iter().find(|(key, _)| *key == name).map(|(_, value)| value.to_owned());
    Ok(value.expect("the route table names only parameters its paths have"))
}
