//! The API through its router, without a socket, plus one test over real
//! TCP: one file a concept, sharing the harness below.

mod access;
mod claim_acks;
mod errors;
mod listings;
mod nodes;
mod openapi;
mod push;
mod queues;
mod schedules;
mod schemas;
mod tasks;
mod tcp;
mod token_views;
mod tokens;
mod wire;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use hourglass_embedded::{Engine, Fsync, Options, RedbStore};
use hourglass_queue::{Backend, Limits, ManualWallClock};
use hourglass_server::{router, AppState};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

/// The manual clock's start: Friday 2027-01-15, 09:00 in Berlin.
const T0_MS: u64 = 1_800_000_000_000;

/// How long any one step of a test may take before it fails: generous, for
/// a loaded machine.
const PATIENCE: Duration = Duration::from_secs(60);

/// `step`, or a failure naming `what` if it takes longer than [`PATIENCE`].
async fn within<T>(what: &str, step: impl Future<Output = T>) -> T {
    match tokio::time::timeout(PATIENCE, step).await {
        Ok(value) => value,
        Err(_) => panic!("{what} did not finish within {PATIENCE:?}"),
    }
}

/// A server over an embedded engine on a manual clock, driven through its
/// router.
struct Api {
    _dir: tempfile::TempDir,
    clock: Arc<ManualWallClock>,
    engine: Arc<Engine>,
    router: Router,
}

fn api_with(limits: Limits, token: Option<&str>) -> Api {
    api_built(limits, token, |state| state)
}

fn api_built(limits: Limits, token: Option<&str>, build: impl FnOnce(AppState) -> AppState) -> Api {
    api_over(limits, token, |engine| engine, build)
}

/// As [`api_built`], over the backend `wrap` makes of the engine.
fn api_over(
    limits: Limits,
    token: Option<&str>,
    wrap: impl FnOnce(Arc<Engine>) -> Arc<dyn Backend>,
    build: impl FnOnce(AppState) -> AppState,
) -> Api {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualWallClock::at_ms(T0_MS));
    let store = RedbStore::open(dir.path()).unwrap();
    let payload_bytes_max = limits.payload_bytes_max;
    let engine = Engine::open(Box::new(store), Options { fsync: Fsync::Always, limits }, clock.clone()).unwrap();
    let state = build(AppState::new(wrap(engine.clone()), token.map(Arc::from)));
    Api { _dir: dir, clock, engine, router: router(state, payload_bytes_max) }
}

fn api() -> Api {
    api_with(Limits::default(), None)
}

impl Api {
    async fn call(&self, method: Method, uri: &str, body: Option<&str>) -> (StatusCode, Value) {
        self.call_with(method, uri, body, None).await
    }

    async fn call_with(
        &self,
        method: Method,
        uri: &str,
        body: Option<&str>,
        token: Option<&str>,
    ) -> (StatusCode, Value) {
        let mut request = Request::builder().method(method).uri(uri);
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request.body(Body::from(body.unwrap_or("").to_owned())).unwrap();
        let (status, bytes) = self.send(request).await;
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
        };
        (status, value)
    }

    /// Sends `request` through the router: its status and body as sent.
    async fn send(&self, request: Request<Body>) -> (StatusCode, Vec<u8>) {
        let (method, uri) = (request.method().clone(), request.uri().to_string());
        let (status, body) = within("a request through the router", async {
            let response = self.router.clone().oneshot(request).await.unwrap();
            let status = response.status();
            (status, response.into_body().collect().await.unwrap().to_bytes().to_vec())
        })
        .await;
        schemas::check(&method, &uri, status, &body);
        (status, body)
    }

    async fn advance(&self, ms: u64) {
        self.clock.advance_ms(ms);
        self.engine.poll_timers();
    }
}

fn error_code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_else(|| panic!("not an error body: {body}"))
}
