//! The HTTP API of `hourglass serve`, over any [`Backend`] of [`hourglass_queue`].
//!
//! [`router`] builds the whole service as an axum [`Router`], so tests drive it
//! without a socket; [`serve`] runs it on a listener until a shutdown signal.
#![deny(missing_docs)]

mod api;
mod error;
mod metrics;
mod wire;

use std::future::Future;
use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use hourglass_queue::{limits, Backend};

pub use error::ApiError;

/// Room for a batch request: the batch limit times a small task, plus one
/// payload of the configured maximum. Bodies over it get 413.
const BODY_BYTES_OVERHEAD: usize = limits::BATCH_MAX * 512;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The queue's operations.
    pub backend: Arc<dyn Backend>,
    /// When set, every request must carry `Authorization: Bearer <token>`.
    pub token: Option<Arc<str>>,
}

/// The whole API. `payload_bytes_max` sizes the request body limit.
pub fn router(state: AppState, payload_bytes_max: usize) -> Router {
    api::routes()
        .fallback(|| async { ApiError::no_route() })
        .layer(DefaultBodyLimit::max(payload_bytes_max.saturating_add(BODY_BYTES_OVERHEAD)))
        .layer(middleware::from_fn_with_state(state.clone(), require_token))
        .with_state(state)
}

async fn require_token(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if let Some(token) = &state.token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        if !given.is_some_and(|given| constant_time_eq(given.as_bytes(), token.as_bytes())) {
            return ApiError::unauthorized().into_response();
        }
    }
    next.run(request).await
}

/// Compares without an early exit, so the time taken does not tell how much
/// of a guessed token was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Serves `router` on `listener` until `shutdown` completes, then stops
/// accepting, lets in-flight requests finish (waiting claims return at once),
/// and returns. The caller drops the backend afterwards, which syncs the store.
///
/// # Errors
/// An I/O error of the listener.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    payload_bytes_max: usize,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let backend = state.backend.clone();
    let app = router(state, payload_bytes_max);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            backend.close();
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
    }
}
