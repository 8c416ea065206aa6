//! A server of the tests' own: the real router on a free port, over an
//! embedded engine on a manual clock, and a client of it. Every request has
//! a deadline, so a test fails rather than hangs.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hourglass_client::Client;
use hourglass_embedded::{Engine, Options, RedbStore};
use hourglass_queue::{Limits, ManualWallClock};
use hourglass_server::AppState;
use hourglass_test_support::free_port;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The manual clock's start: Friday 2027-01-15, 09:00 in Berlin.
pub const T0_MS: u64 = 1_800_000_000_000;

/// How long any request or step may take: generous, for a loaded machine.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// `step`, or a failure naming `what` after [`PATIENCE`].
pub async fn within<T>(what: &str, step: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, step).await.unwrap_or_else(|_| panic!("{what} did not finish within {PATIENCE:?}"))
}

pub struct Server {
    _dir: tempfile::TempDir,
    pub clock: Arc<ManualWallClock>,
    pub engine: Arc<Engine>,
    pub url: String,
    stop: Option<oneshot::Sender<()>>,
    served: Option<JoinHandle<std::io::Result<()>>>,
}

impl Server {
    /// A server that asks for `token` when given.
    pub async fn start(token: Option<&str>) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualWallClock::at_ms(T0_MS));
        let store = RedbStore::open(dir.path()).unwrap();
        let engine = Engine::open(Box::new(store), Options::default(), clock.clone()).unwrap();
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", free_port())).await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = AppState::new(engine.clone(), token.map(Arc::from));
        let (stop, stopped) = oneshot::channel::<()>();
        let served = tokio::spawn(hourglass_server::serve(
            listener,
            state,
            Limits::DEFAULT_PAYLOAD_BYTES_MAX,
            Default::default(),
            async {
                let _ = stopped.await;
            },
        ));
        Server { _dir: dir, clock, engine, url, stop: Some(stop), served: Some(served) }
    }

    /// A client of it, with `token`, whose every request has a deadline.
    pub fn client(&self, token: Option<&str>) -> Client {
        let http = reqwest::Client::builder().timeout(PATIENCE).build().unwrap();
        Client::with_http(http, &self.url, token.map(str::to_owned))
    }

    /// Moves the clock on by `ms` and fires what came due.
    pub async fn advance(&self, ms: u64) {
        self.clock.advance_ms(ms);
        self.engine.poll_timers();
        within("the engine's writes", self.engine.flushed()).await;
    }

    /// Stops serving, and waits until it has.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        within("the server's shutdown", self.served.take().unwrap()).await.unwrap().unwrap();
    }
}
