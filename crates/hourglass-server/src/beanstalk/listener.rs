//! Where the front listens and how it accepts: each connection on a task of
//! its own, at most [`Options::connections_max`](super::Options) at once.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};

use super::front::Front;
use super::session;

/// Where the front listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A TCP address.
    Tcp(std::net::SocketAddr),
    /// A Unix socket's path.
    Unix(std::path::PathBuf),
}

impl std::str::FromStr for Listen {
    type Err = String;

    fn from_str(text: &str) -> Result<Listen, String> {
        match text.strip_prefix("unix:") {
            Some(path) if !path.is_empty() => Ok(Listen::Unix(path.into())),
            Some(_) => Err("unix: needs a path, as in unix:/run/hourglass.sock".into()),
            None => text
                .parse()
                .map(Listen::Tcp)
                .map_err(|error| format!("{text:?}: {error} (give HOST:PORT or unix:PATH)")),
        }
    }
}

impl Front {
    /// Serves one connection until it closes, or is refused for want of a
    /// slot. Errors of the connection's I/O end it; none reaches the caller.
    pub async fn serve<S: AsyncRead + AsyncWrite + Unpin + Send>(self: &Arc<Self>, stream: S) {
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            tracing::warn!(max = self.options.connections_max, "a beanstalk connection refused: too many open");
            return;
        };
        self.total_connections.fetch_add(1, Ordering::Relaxed);
        session::serve(self.clone(), stream).await;
        drop(slot);
    }
}

/// Accepts connections on a bound TCP listener until `shutdown` resolves.
pub async fn serve_tcp(
    front: Arc<Front>,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let listener = &listener;
    let accept = move || async move {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        Ok(stream)
    };
    accept_until(front, accept, shutdown).await;
}

/// Accepts connections on a bound Unix listener until `shutdown` resolves.
#[cfg(unix)]
pub async fn serve_unix(
    front: Arc<Front>,
    listener: tokio::net::UnixListener,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let listener = &listener;
    accept_until(front, move || async move { Ok(listener.accept().await?.0) }, shutdown).await;
}

/// Serves each connection `accept` yields, on a task of its own, until `shutdown`.
async fn accept_until<S, A, F>(front: Arc<Front>, mut accept: A, shutdown: impl std::future::Future<Output = ()>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    A: FnMut() -> F,
    F: std::future::Future<Output = std::io::Result<S>>,
{
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            accepted = accept() => match accepted {
                Ok(stream) => {
                    let front = front.clone();
                    tokio::spawn(async move { front.serve(stream).await });
                }
                Err(error) => accept_failed(&error).await,
            },
        }
    }
}

/// An accept that failed (out of file descriptors, most often): logged, and
/// retried after a pause rather than in a hot loop.
async fn accept_failed(error: &std::io::Error) {
    tracing::warn!(%error, "accepting a beanstalk connection failed");
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
}
