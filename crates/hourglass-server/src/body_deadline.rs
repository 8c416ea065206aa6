//! A deadline for a request's body: the whole body must arrive within a
//! time of its headers, however it trickles in (an inactivity timeout
//! would let a client send a byte just before each expiry).
//!
//! The body is wrapped where the request is handed to the router, and its
//! timer is made only if the body is not all there when it is read: most
//! requests arrive with their body. A middleware that made a timer for every
//! request cost about 4,000 of an HTTP enqueue's 61,000 instructions
//! (`BENCHMARKS.md`, "What the connection deadlines cost, found and fixed").

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Bytes, HttpBody};
use axum::BoxError;
use tokio::time::{Instant, Sleep};

/// A body that fails once its deadline has passed and it is not done.
pub(crate) struct Deadline<B> {
    body: B,
    /// When the whole body must be in: its headers' arrival plus the timeout.
    due: Instant,
    /// The timer, made the first time the body keeps the reader waiting.
    sleep: Option<Pin<Box<Sleep>>>,
}

impl<B> Deadline<B> {
    /// `body`, cut off `timeout` from now (its headers have just arrived).
    pub(crate) fn new(body: B, timeout: Duration) -> Deadline<B> {
        Deadline { body, due: Instant::now() + timeout, sleep: None }
    }
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

impl<B> HttpBody for Deadline<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(axum::Error::new)));
        }
        let due = self.due;
        let sleep = self.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
        match sleep.as_mut().poll(cx) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// A body of the frames it is given, `None` standing for a wait (it
    /// answers Pending once, and wakes its reader at once).
    struct Scripted(VecDeque<Option<&'static str>>);

    impl HttpBody for Scripted {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
            match self.0.pop_front() {
                None => Poll::Ready(None),
                Some(Some(text)) => Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from_static(text.as_bytes()))))),
                Some(None) => {
                    self.0.push_front(Some(""));
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
            }
        }
    }

    /// A body that never sends a byte.
    struct Silent;

    impl HttpBody for Silent {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
            Poll::Pending
        }
    }

    async fn next<B: HttpBody<Data = Bytes, Error = axum::Error> + Unpin>(
        body: &mut B,
    ) -> Option<Result<Bytes, axum::Error>> {
        std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx))
            .await
            .map(|frame| frame.map(|frame| frame.into_data().unwrap_or_default()))
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_there_at_once_makes_no_timer() {
        let mut body = Deadline::new(Scripted(VecDeque::from([Some("{}")])), Duration::from_secs(30));
        assert_eq!(next(&mut body).await.expect("a frame").expect("no error"), "{}");
        assert!(next(&mut body).await.is_none(), "the end");
        assert!(body.sleep.is_none(), "a body read without waiting sets no timer");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_waits_gets_its_timer_counted_from_the_headers() {
        let headers = Instant::now();
        let mut body = Deadline::new(Scripted(VecDeque::from([Some("a"), None, Some("b")])), Duration::from_secs(30));
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert_eq!(next(&mut body).await.expect("a frame").expect("no error"), "a");
        assert!(body.sleep.is_none());
        assert_eq!(next(&mut body).await.expect("a frame").expect("no error"), "", "the wait, then its frame");
        let sleep = body.sleep.as_ref().expect("a wait makes the timer");
        assert_eq!(sleep.deadline(), headers + Duration::from_secs(30), "due from the headers, not from the wait");
        assert_eq!(next(&mut body).await.expect("a frame").expect("no error"), "b");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_past_its_deadline_fails() {
        let start = Instant::now();
        let mut body = Deadline::new(Silent, Duration::from_secs(30));
        let error = next(&mut body).await.expect("an answer").expect_err("past the deadline");
        assert_eq!(error.to_string(), "the request body did not arrive in time");
        assert_eq!(Instant::now() - start, Duration::from_secs(30), "at the deadline, on the paused clock");
    }
}
