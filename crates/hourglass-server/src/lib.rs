//! The HTTP API of `hourglass serve`, over any [`Backend`] of [`hourglass_queue`],
//! and the dashboard that uses it.
//!
//! [`router`] builds the whole service as an axum [`Router`], so tests drive it
//! without a socket; [`serve`] runs it on a listener until a shutdown signal.
#![deny(missing_docs)]

pub mod access;
mod api;
pub mod beanstalk;
mod body_deadline;
mod connections;
mod error;
mod extract;
mod history;
mod latest;
mod metrics;
mod openapi;
mod overview;
mod push;
mod routes;
mod tls;
mod ui;
mod wire;

use std::future::Future;
use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Request};
use axum::middleware::{self, Next};
use axum::response::IntoResponse;
use axum::Router;
use hourglass_queue::{limits, Backend, QueueError, Schedules};
use tower_http::trace::{DefaultMakeSpan, DefaultOnResponse, TraceLayer};
use tracing::Level;

pub use connections::{
    Connections, ConnectionsError, BODY_TIMEOUT, CONNECTIONS_MAX, HEADER_TIMEOUT, IDLE_TIMEOUT, TIMEOUT_MIN,
};
pub use error::ApiError;
pub use openapi::{document_text as openapi_text, document_value as openapi};
pub use routes::{permission as route_permission, ROUTES};
pub use tls::{Tls, TlsError};

/// Room for a batch request: the batch limit times a small task, plus one
/// payload of the configured maximum, as base64 ([`base64_bytes`]). Bodies
/// over it get 413.
const BODY_BYTES_OVERHEAD: usize = limits::BATCH_MAX * 512;

/// The length of `bytes` bytes in padded base64: what a payload of the
/// configured maximum takes as `payload_base64`.
const fn base64_bytes(bytes: usize) -> usize {
    bytes.div_ceil(3).saturating_mul(4)
}

const _: () = assert!(base64_bytes(0) == 0 && base64_bytes(1) == 4 && base64_bytes(3) == 4 && base64_bytes(4) == 8);

/// The header the dashboard sends with every request, so that
/// `--read-only-ui` can refuse its changes.
pub const UI_HEADER: &str = "x-hourglass-ui";

/// What every handler shares. Cloned for every request (by the guard, the
/// router and each handler's extractor), so it is one shared count to bump:
/// with a count per field, four clones a request cost 32 atomic operations
/// on lines that both cores write (BENCHMARKS.md, "What the connection
/// deadlines cost, found and fixed").
#[derive(Clone)]
pub struct AppState(Arc<shared::Shared>);

impl std::ops::Deref for AppState {
    type Target = shared::Shared;

    fn deref(&self) -> &shared::Shared {
        &self.0
    }
}

/// The fields of [`AppState`], behind its one count.
mod shared {
    use super::*;

    /// What every handler shares, once.
    #[derive(Clone)]
    pub struct Shared {
        /// The queue's operations.
        pub backend: Arc<dyn Backend>,
        /// The tokens requests may carry, and what each may do.
        pub(crate) keys: Arc<access::Keys>,
        /// The dashboard shows no actions, and the server refuses every change
        /// it asks for.
        pub(crate) read_only_ui: bool,
        /// The dashboard's last fifteen minutes and latest readings.
        pub(crate) dashboard: Arc<overview::Dashboard>,
        /// The push delivery's outbound rules, for the targets a request names.
        pub(crate) outbound: Option<Arc<hourglass_push::Outbound>>,
        /// The push delivery's counters, for `/metrics`.
        pub(crate) push_metrics: Option<Arc<hourglass_push::PushMetrics>>,
    }
}

impl AppState {
    /// The state of a server over `backend`, open to every request unless
    /// `token` is set (then admin on every queue: [`AppState::keys`] adds
    /// scoped tokens).
    pub fn new(backend: Arc<dyn Backend>, token: Option<Arc<str>>) -> AppState {
        let keys = access::Keys::new(token.as_deref(), None).expect("no file to read");
        AppState(Arc::new(shared::Shared {
            backend,
            keys: Arc::new(keys),
            read_only_ui: false,
            dashboard: Arc::default(),
            outbound: None,
            push_metrics: None,
        }))
    }

    /// Requests are checked against `keys`: `--token` and the `--tokens`
    /// file (replacing the token given to [`AppState::new`]).
    pub fn keys(mut self, keys: Arc<access::Keys>) -> AppState {
        Arc::make_mut(&mut self.0).keys = keys;
        self
    }

    /// The backend's schedules, or the API's answer to a backend without
    /// them: 501 `unsupported`.
    pub(crate) fn schedules(&self) -> Result<&dyn Schedules, ApiError> {
        self.backend.as_schedules().ok_or_else(|| {
            ApiError::from(QueueError::Unsupported(
                "this backend does not run schedules (the embedded backend does)".into(),
            ))
        })
    }

    /// The dashboard shows no actions, and the server refuses the changes
    /// it would ask for (requests carrying [`UI_HEADER`] other than reads).
    /// The API itself is unchanged: a token guards it.
    pub fn read_only_ui(mut self) -> AppState {
        Arc::make_mut(&mut self.0).read_only_ui = true;
        self
    }

    /// Refuses (400 `invalid`) a task or a queue whose target these rules
    /// would refuse and that can be judged before delivery: an IP address in
    /// a forbidden range, or `localhost`, unless the allow list opens it.
    /// Without it, such a target is accepted and its tasks die at delivery
    /// with the reason.
    pub fn outbound(mut self, outbound: hourglass_push::Outbound) -> AppState {
        Arc::make_mut(&mut self.0).outbound = Some(Arc::new(outbound));
        self
    }

    /// `/metrics` shows these push deliveries: by outcome, in flight, the
    /// claims and settles that failed, and lateness from due time to
    /// request sent.
    pub fn push_metrics(mut self, metrics: Arc<hourglass_push::PushMetrics>) -> AppState {
        Arc::make_mut(&mut self.0).push_metrics = Some(metrics);
        self
    }

    /// Whether the outbound rules, if any, would refuse `url` at once.
    pub(crate) fn check_target(&self, url: &str) -> Result<(), ApiError> {
        let (Some(outbound), Ok(url)) = (&self.outbound, url.parse()) else { return Ok(()) };
        outbound.check_url(&url).map_err(|refusal| ApiError::invalid(refusal.to_string()))
    }
}

/// The whole API and the dashboard. `payload_bytes_max` sizes the request
/// body limit. With `tower_http=debug` logging on when the router is built
/// (`RUST_LOG`), each request is logged: method, path, status and time taken.
/// Otherwise the layer is left out: idle, it still cost 4 % of durable
/// enqueues over HTTP (`BENCHMARKS.md`, "The dashboard").
pub fn router(state: AppState, payload_bytes_max: usize) -> Router {
    let app = routes::routes()
        .fallback(|| async { ApiError::no_route() })
        .layer(DefaultBodyLimit::max(base64_bytes(payload_bytes_max).saturating_add(BODY_BYTES_OVERHEAD)))
        .layer(middleware::from_fn_with_state(state.clone(), access::guard));
    let app = if tracing::enabled!(target: "tower_http::trace", Level::DEBUG) {
        app.layer(
            TraceLayer::new_for_http()
                .make_span_with(DefaultMakeSpan::new().level(Level::DEBUG))
                // One line a request, when it is answered.
                .on_request(())
                .on_response(DefaultOnResponse::new().level(Level::DEBUG)),
        )
    } else {
        app
    };
    app.with_state(state)
}

/// Serves `router` on `listener`, within the bounds of `connections`, until
/// `shutdown` completes, then stops accepting, lets in-flight requests finish
/// (waiting claims return at once), and returns. The caller drops the backend afterwards, which syncs the store.
///
/// # Errors
/// An I/O error of the listener.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    payload_bytes_max: usize,
    connections: Connections,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let backend = state.backend.clone();
    let sampler = tokio::spawn(overview::sample(state.backend.clone(), state.dashboard.clone()));
    let app = router(state, payload_bytes_max);
    let shutdown = async move {
        shutdown.await;
        backend.close();
    };
    let served = connections::serve(listener, app, connections, shutdown).await;
    sampler.abort();
    served
}

/// Serves `listener` while the store cannot be reached yet, until
/// `reached` completes: `/healthz` answers 503 `store_unavailable` with the
/// latest of `why`, every other request 503 `store_unavailable` (401 first
/// without a known token, if one is required), within the bounds of
/// `connections`. The caller then serves the API on the same socket.
///
/// # Errors
/// An I/O error of the listener.
pub async fn serve_unreached(
    listener: tokio::net::TcpListener,
    keys: Arc<access::Keys>,
    connections: Connections,
    why: tokio::sync::watch::Receiver<String>,
    reached: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/healthz", axum::routing::get(move || async move { api::health(Some(why.borrow().clone())) }))
        .fallback(|| async { ApiError::store_unavailable() })
        .layer(middleware::from_fn(move |request: Request, next: Next| {
            let keys = keys.clone();
            async move {
                if keys.identify(access::bearer(request.headers())).is_none() {
                    return ApiError::unauthorized().into_response();
                }
                next.run(request).await
            }
        }));
    connections::serve(listener, app, connections, reached).await
}
