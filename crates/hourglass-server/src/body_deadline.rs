//! A deadline for a request's body: the whole body must arrive within a
//! time of its headers, however it trickles in (an inactivity timeout
//! would let a client send a byte just before each expiry).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::Router;
use tokio::time::Sleep;

/// `app`, with every request's body cut off `timeout` after its headers.
pub(crate) fn layer(app: Router, timeout: Duration) -> Router {
    app.layer(middleware::from_fn(move |request: Request, next: Next| {
        let request = request.map(|body| Body::new(Deadline { body, sleep: Box::pin(tokio::time::sleep(timeout)) }));
        next.run(request)
    }))
}

/// A body that fails once its deadline has passed and it is not done.
struct Deadline {
    body: Body,
    sleep: Pin<Box<Sleep>>,
}

/// The error of a body past its deadline.
#[derive(Debug)]
pub(crate) struct TooSlow;

impl std::fmt::Display for TooSlow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the request body did not arrive in time")
    }
}

impl std::error::Error for TooSlow {}

impl HttpBody for Deadline {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        match self.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(axum::Error::new(TooSlow)))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
