//! A real HTTP receiver on 127.0.0.1, on a port of its own, for tests of
//! push delivery: it answers by path, keeps what it was sent, and counts
//! requests, and requests at once.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// One request as the receiver got it.
#[derive(Debug, Clone)]
pub struct Got {
    /// The connection it came over.
    pub peer: SocketAddr,
    /// The request's path.
    pub path: String,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body.
    pub body: Bytes,
    /// When it arrived (its headers read).
    pub at: Instant,
}

/// How long a `/busy` request is held before its 200.
pub const BUSY: Duration = Duration::from_millis(50);

#[derive(Default)]
struct Counts {
    requests: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    got: Mutex<Vec<Got>>,
}

/// Paths: `/ok` 200, `/fail` 500 with a body, `/gone` 410, `/slow-down` 429
/// with `Retry-After: 7`, `/unavailable` 503 with the request's
/// `X-Retry-After` as its `Retry-After`, `/hang` never answers, `/hold` answers 200 once
/// [`Receiver::release`] is called, `/busy` answers 200 after [`BUSY`] (so that
/// requests overlap, for counts of those at once).
pub struct Receiver {
    /// Where it listens.
    pub addr: SocketAddr,
    counts: Arc<Counts>,
    release: watch::Sender<bool>,
}

#[derive(Clone)]
struct App {
    counts: Arc<Counts>,
    released: watch::Receiver<bool>,
}

struct InFlight(Arc<Counts>);

impl InFlight {
    fn new(counts: &Arc<Counts>) -> InFlight {
        let now = counts.in_flight.fetch_add(1, SeqCst) + 1;
        counts.max_in_flight.fetch_max(now, SeqCst);
        InFlight(counts.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, SeqCst);
    }
}

async fn answer(
    State(app): State<App>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let at = Instant::now();
    app.counts.requests.fetch_add(1, SeqCst);
    let _flying = InFlight::new(&app.counts);
    let retry_date = headers.get("x-retry-after").cloned();
    app.counts.got.lock().unwrap().push(Got { peer, path: uri.path().to_owned(), headers, body, at });
    match uri.path() {
        "/ok" => StatusCode::OK.into_response(),
        "/fail" => (StatusCode::INTERNAL_SERVER_ERROR, "database is down\nretry later").into_response(),
        "/gone" => (StatusCode::GONE, "no such order").into_response(),
        "/slow-down" => (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "7")], "").into_response(),
        "/unavailable" => {
            let date = retry_date.and_then(|d| d.to_str().ok().map(str::to_owned)).unwrap_or_default();
            (StatusCode::SERVICE_UNAVAILABLE, [("retry-after", date)], "").into_response()
        }
        "/hang" => std::future::pending().await,
        "/busy" => {
            tokio::time::sleep(BUSY).await;
            StatusCode::OK.into_response()
        }
        "/hold" => {
            let mut released = app.released.clone();
            let _ = released.wait_for(|r| *r).await;
            StatusCode::OK.into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

impl Receiver {
    /// Starts one on the current runtime.
    pub async fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the receiver");
        let addr = listener.local_addr().expect("the receiver's address");
        let counts = Arc::new(Counts::default());
        let (release, released) = watch::channel(false);
        let app = axum::Router::new().fallback(answer).with_state(App { counts: counts.clone(), released });
        let app = app.into_make_service_with_connect_info::<SocketAddr>();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver { addr, counts, release }
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// `127.0.0.1:PORT`, an allow-list entry for it.
    pub fn host_port(&self) -> String {
        self.addr.to_string()
    }

    /// Requests received so far.
    pub fn requests(&self) -> usize {
        self.counts.requests.load(SeqCst)
    }

    /// Requests not yet answered.
    pub fn in_flight(&self) -> usize {
        self.counts.in_flight.load(SeqCst)
    }

    /// The most requests it held unanswered at once.
    pub fn max_in_flight(&self) -> usize {
        self.counts.max_in_flight.load(SeqCst)
    }

    /// Connections the requests came over.
    pub fn connections(&self) -> usize {
        let peers: std::collections::HashSet<SocketAddr> = self.got().iter().map(|g| g.peer).collect();
        peers.len()
    }

    /// The tasks (their `Hourglass-Task-Id`) received so far, each once.
    pub fn task_ids(&self) -> std::collections::HashSet<u64> {
        let id = |g: &Got| g.headers.get("hourglass-task-id")?.to_str().ok()?.parse().ok();
        self.counts.got.lock().unwrap().iter().filter_map(id).collect()
    }

    /// Every request received, in order.
    pub fn got(&self) -> Vec<Got> {
        self.counts.got.lock().unwrap().clone()
    }

    /// Lets every `/hold` request, now and later, answer.
    pub fn release(&self) {
        self.release.send_replace(true);
    }
}

/// A server that reads a request and closes the connection without an
/// answer. Returns its address and a count of connections it took.
pub async fn closer() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the closer");
    let addr = listener.local_addr().expect("the closer's address");
    let taken = Arc::new(AtomicUsize::new(0));
    let count = taken.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            count.fetch_add(1, SeqCst);
            let mut buf = [0u8; 4096];
            let _ = socket.read(&mut buf).await;
            drop(socket);
        }
    });
    (addr, taken)
}
