//! How HTTP connections are accepted and bounded, so that slow or idle
//! clients cannot hold the server hostage.
//!
//! - At most [`Connections::connections_max`] are served at once. The accept
//!   loop takes a slot before it accepts, so past the limit new connections
//!   wait in the kernel's backlog (and are refused by the kernel once it is
//!   full); the server never runs out of descriptors because of them.
//! - An HTTP/1 request's headers must arrive within
//!   [`Connections::header_timeout`] (hyper's header-read timeout). Hyper
//!   starts that clock as soon as a connection waits for its next request, so
//!   an HTTP/1 keep-alive connection idle between requests is closed at that
//!   deadline too.
//! - A request's body must arrive within [`Connections::body_timeout`] of its
//!   headers ([`body_deadline`](crate::body_deadline)).
//! - A connection with no request in flight and no byte read or written for
//!   [`Connections::idle_timeout`] is closed: this bounds a connection that
//!   never sends a byte (before hyper knows its protocol) and idle HTTP/2
//!   connections. A waiting claim is a request in flight: it is never cut.
//! - With [`Connections::tls`], a connection's TLS handshake must end within
//!   [`Connections::header_timeout`] of its accept, and it holds its slot
//!   meanwhile: a client that opens a connection and never finishes the
//!   handshake is one of the connections, and is dropped at that deadline.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tower::ServiceExt;

use crate::body_deadline::Deadline;
use crate::tls::Tls;

/// HTTP connections served at once, unless told.
pub const CONNECTIONS_MAX: usize = 10_000;
/// How long a request's headers may take to arrive, unless told.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request's body may take to arrive after its headers, unless told.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection may sit with nothing in flight, unless told.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// The smallest timeout accepted: below it, ordinary clients on a loaded
/// machine would be cut off.
pub const TIMEOUT_MIN: Duration = Duration::from_millis(10);

/// The bounds on HTTP connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connections {
    /// Connections served at once; past it, new ones wait to be accepted.
    pub connections_max: usize,
    /// A request's headers must arrive within it (HTTP/1).
    pub header_timeout: Duration,
    /// A request's body must arrive within it, counted from its headers.
    pub body_timeout: Duration,
    /// A connection with nothing in flight and no traffic for this long is closed.
    pub idle_timeout: Duration,
    /// HTTPS with this certificate, if set; plain HTTP otherwise.
    pub tls: Option<Tls>,
}

impl Default for Connections {
    fn default() -> Self {
        Connections {
            connections_max: CONNECTIONS_MAX,
            header_timeout: HEADER_TIMEOUT,
            body_timeout: BODY_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            tls: None,
        }
    }
}

/// Why [`Connections`] cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectionsError {
    /// A limit of zero connections would serve nobody.
    NoConnections,
    /// A timeout below [`TIMEOUT_MIN`]: which one, and its value.
    TimeoutTooShort(&'static str, Duration),
}

impl std::fmt::Display for ConnectionsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectionsError::NoConnections => write!(f, "the connection limit must be at least 1"),
            ConnectionsError::TimeoutTooShort(which, value) => {
                write!(f, "the {which} timeout is {value:?}, below the least allowed, {TIMEOUT_MIN:?}")
            }
        }
    }
}

impl std::error::Error for ConnectionsError {}

impl Connections {
    /// Checks the limits.
    ///
    /// # Errors
    /// A limit of zero connections, or a timeout below [`TIMEOUT_MIN`].
    pub fn check(&self) -> Result<(), ConnectionsError> {
        if self.connections_max == 0 {
            return Err(ConnectionsError::NoConnections);
        }
        for (which, value) in
            [("header", self.header_timeout), ("body", self.body_timeout), ("idle", self.idle_timeout)]
        {
            if value < TIMEOUT_MIN {
                return Err(ConnectionsError::TimeoutTooShort(which, value));
            }
        }
        Ok(())
    }
}

/// Serves `app` on `listener` within `limits` until `shutdown` completes;
/// then stops accepting and waits for the connections to finish their
/// requests (each is told to close once idle).
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Connections,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.connections_max));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    builder.http2().timer(TokioTimer::new());
    let builder = Arc::new(builder);
    let mut shutdown = std::pin::pin!(shutdown);
    let mut full_logged = false;
    loop {
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => {
                full_logged = false;
                slot
            }
            Err(_) => {
                if !full_logged {
                    tracing::warn!(max = limits.connections_max, "HTTP connections at their limit: new ones wait");
                    full_logged = true;
                }
                tokio::select! {
                    () = &mut shutdown => break,
                    slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
                }
            }
        };
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of descriptors, most often: retried after a pause
                    // rather than in a hot loop.
                    tracing::warn!(%error, "accepting an HTTP connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let connection = Connection {
            app: app.clone(),
            builder: builder.clone(),
            watcher: graceful.watcher(),
            idle_timeout: limits.idle_timeout,
            body_timeout: limits.body_timeout,
        };
        let (tls, handshake_timeout) = (limits.tls.clone(), limits.header_timeout);
        tokio::spawn(async move {
            let activity = Arc::new(Activity::new());
            let stream = Watched { inner: stream, activity: activity.clone() };
            match tls {
                None => connection.serve(stream, activity).await,
                Some(tls) => match tokio::time::timeout(handshake_timeout, tls.acceptor().accept(stream)).await {
                    Ok(Ok(stream)) => connection.serve(stream, activity).await,
                    Ok(Err(error)) => tracing::debug!(%error, "a TLS handshake failed"),
                    Err(_) => tracing::debug!("a TLS handshake did not end within the header timeout"),
                },
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// What serves one accepted connection.
struct Connection {
    app: Router,
    builder: Arc<Builder<TokioExecutor>>,
    watcher: hyper_util::server::graceful::Watcher,
    idle_timeout: Duration,
    body_timeout: Duration,
}

impl Connection {
    /// Serves `stream` until it closes, fails, idles past the idle timeout,
    /// or is told to close once idle (a graceful shutdown).
    async fn serve<S>(self, stream: S, activity: Arc<Activity>)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Connection { app, builder, watcher, idle_timeout, body_timeout } = self;
        let service = {
            let activity = activity.clone();
            hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let in_flight = InFlight::enter(activity.clone());
                let app = app.clone();
                async move {
                    let request = request.map(|body| axum::body::Body::new(Deadline::new(body, body_timeout)));
                    let response = app.oneshot(request).await;
                    drop(in_flight);
                    Ok::<_, Infallible>(response.unwrap_or_else(|never| match never {}))
                }
            })
        };
        let connection = watcher.watch(builder.serve_connection_with_upgrades(TokioIo::new(stream), service));
        tokio::select! {
            served = connection => if let Err(error) = served {
                tracing::debug!(%error, "an HTTP connection ended with an error");
            },
            () = activity.idle_for(idle_timeout) => tracing::debug!("an idle HTTP connection closed"),
        }
    }
}

/// What a connection's watchdog knows: when it last moved bytes, and how
/// many of its requests are in flight.
struct Activity {
    opened: Instant,
    /// Milliseconds from `opened` to the last byte read or written.
    last_ms: AtomicU64,
    in_flight: AtomicUsize,
}

impl Activity {
    fn new() -> Activity {
        Activity { opened: Instant::now(), last_ms: AtomicU64::new(0), in_flight: AtomicUsize::new(0) }
    }

    fn touch(&self) {
        let now_ms = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(now_ms, Ordering::Relaxed);
    }

    /// Completes once the connection has had nothing in flight and no
    /// traffic for `timeout`.
    async fn idle_for(&self, timeout: Duration) {
        loop {
            let last = self.opened + Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let deadline = last + timeout;
            if Instant::now() >= deadline && self.in_flight.load(Ordering::Relaxed) == 0 {
                return;
            }
            // A request in flight: look again a timeout later.
            let deadline = deadline.max(Instant::now() + timeout.min(Duration::from_secs(1)));
            tokio::time::sleep_until(deadline).await;
        }
    }
}

/// A request in flight, counted until dropped (its response is ready, or
/// the client went away).
struct InFlight(Arc<Activity>);

impl InFlight {
    fn enter(activity: Arc<Activity>) -> InFlight {
        activity.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A stream that records when it last moved bytes.
struct Watched<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_checked() {
        assert_eq!(Connections::default().check(), Ok(()));
        let none = Connections { connections_max: 0, ..Connections::default() };
        assert_eq!(none.check(), Err(ConnectionsError::NoConnections));
        let short = Connections { body_timeout: Duration::from_millis(1), ..Connections::default() };
        assert!(matches!(short.check(), Err(ConnectionsError::TimeoutTooShort("body", _))));
    }

    #[tokio::test(start_paused = true)]
    async fn idle_waits_for_requests_in_flight() {
        let activity = Arc::new(Activity::new());
        let in_flight = InFlight::enter(activity.clone());
        let idle = tokio::spawn({
            let activity = activity.clone();
            async move { activity.idle_for(Duration::from_secs(5)).await }
        });
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!idle.is_finished(), "a request in flight keeps the connection");
        drop(in_flight);
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert!(idle.is_finished(), "idle once the request is answered");
    }
}
