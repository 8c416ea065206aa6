//! One delivery, from its claim to its ack or nack.
//!
//! The claim loop [begins](begin) each delivery itself: it calls the
//! handler and polls its future once, a panic caught as it unwinds. A
//! handler that ends well there costs neither a task nor a timer: its ack
//! goes with the batch's. Only one that is still running, or failed, gets a
//! task of its own (its [`Rest`]): the lease is extended beside the handler
//! while it runs, then the outcome goes to the acker, or a nack with the
//! error's text or the panic's message. A spawn and a timer per delivery
//! were about a third of the worker's extra CPU beside raw claims, and
//! handing each delivery across threads kept the claim loop waiting for its
//! slots (BENCHMARKS.md).

use std::any::Any;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hourglass_wire::{Ack, ClaimedTask, Lease};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use super::backoff::{retryable, Backoff};
use super::options::NACK_REASON_BYTES_MAX;
use super::report::Counts;
use super::{Handled, Shared};

/// What ends a reason cut to fit.
const ELLIPSIS: &str = "…";

/// How a handler ended.
enum Ended {
    Ok,
    /// It returned `Err`, with this text.
    Failed(String),
    /// It panicked, with this message.
    Panicked(String),
}

/// The handler's future, a panic in it caught as its message.
struct Caught(Option<Handled>);

impl Future for Caught {
    type Output = Ended;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Ended> {
        // A future that ended, or panicked, is neither polled again nor kept.
        let Some(handled) = self.0.as_mut() else {
            return Poll::Ready(Ended::Failed("polled after its end".to_owned()));
        };
        let ended = match catch_unwind(AssertUnwindSafe(|| handled.as_mut().poll(cx))) {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(Ok(()))) => Ended::Ok,
            Ok(Poll::Ready(Err(reason))) => Ended::Failed(reason),
            Err(panic) => Ended::Panicked(panic_text(&*panic)),
        };
        self.0 = None;
        Poll::Ready(ended)
    }
}

/// A delivery whose handler was called and polled once, and did not end
/// well at once: it is still running, or it failed.
pub(crate) struct Rest {
    shared: Arc<Shared>,
    id: u64,
    lease: Lease,
    slot: OwnedSemaphorePermit,
    leased_until: Instant,
    handled: Caught,
    first: Poll<Ended>,
}

/// Calls the handler on `task` and polls its future once, in the caller's
/// task. A handler that ends well at once is done: its ack is returned (to
/// be sent with others) and `slot` is free. Otherwise the [`Rest`] is
/// returned, for a task of its own: it keeps the lease while the handler
/// runs, and nacks on failure. `leased_until` is when the lease ends by
/// this process's clock: the claim's send time plus the lease.
pub(crate) async fn begin(
    shared: &Arc<Shared>,
    task: ClaimedTask,
    slot: OwnedSemaphorePermit,
    leased_until: Instant,
) -> Result<Ack, Rest> {
    let (id, lease) = (task.id, task.lease);
    let handler = &shared.handler;
    // A panic in the handler's call (before its future) counts as one in it.
    let mut handled = Caught(None);
    let first = match catch_unwind(AssertUnwindSafe(|| handler(task))) {
        Ok(future) => {
            handled.0 = Some(future);
            std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut handled).poll(cx))).await
        }
        Err(panic) => Poll::Ready(Ended::Panicked(panic_text(&*panic))),
    };
    if let Poll::Ready(Ended::Ok) = first {
        Counts::add(&shared.counts.succeeded, 1);
        return Ok(Ack::new(id, lease));
    }
    Err(Rest { shared: Arc::clone(shared), id, lease, slot, leased_until, handled, first })
}

/// A whole delivery in a task of its own: [`begin`], then its [`Rest`].
pub(crate) async fn deliver(shared: Arc<Shared>, task: ClaimedTask, slot: OwnedSemaphorePermit, leased_until: Instant) {
    match begin(&shared, task, slot, leased_until).await {
        Ok(ack) => shared.acker.add(ack),
        Err(rest) => rest.run().await,
    }
}

impl Rest {
    /// Waits for the handler, keeping its lease, then acks or nacks it. The
    /// slot is freed when it returns.
    pub(crate) async fn run(self) {
        let Rest { shared, id, lease, slot, mut leased_until, mut handled, first } = self;
        let mut stale = false;
        let every = shared.options.extend_every();
        let ended = match first {
            Poll::Ready(ended) => ended,
            Poll::Pending => loop {
                tokio::select! {
                    biased;
                    ended = &mut handled => break ended,
                    () = tokio::time::sleep(every) => {
                        if stale {
                            continue;
                        }
                        let sent = Instant::now();
                        match shared.client.extend(id, lease, shared.options.lease_ms).await {
                            Ok(_) => leased_until = sent + std::time::Duration::from_millis(shared.options.lease_ms),
                            Err(error) if retryable(&error) => Counts::add(&shared.counts.retries, 1),
                            Err(error) => {
                                tracing::warn!("task {id}: its lease could not be extended ({error}); it will not be acked");
                                stale = true;
                            }
                        }
                    }
                }
            },
        };
        let counts = &shared.counts;
        let reason = match ended {
            Ended::Ok => {
                Counts::add(&counts.succeeded, 1);
                if stale {
                    Counts::add(&counts.lost_leases, 1);
                } else {
                    shared.acker.add(Ack::new(id, lease));
                }
                return;
            }
            Ended::Failed(reason) => reason,
            Ended::Panicked(message) => {
                Counts::add(&counts.panicked, 1);
                message
            }
        };
        Counts::add(&counts.failed, 1);
        tracing::warn!("task {id} failed: {reason}");
        if stale {
            Counts::add(&counts.lost_leases, 1);
        } else {
            nack(&shared, id, lease, cut(&reason, NACK_REASON_BYTES_MAX), leased_until).await;
        }
        drop(slot);
    }
}

/// A panic's payload as text: its message, as `panic!` formats it.
fn panic_text(panic: &(dyn Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(text), _) => (*text).to_owned(),
        (None, Some(text)) => text.clone(),
        (None, None) => "the handler panicked".to_owned(),
    }
}

/// Nacks the delivery `lease` of task `id`, trying again while the failure
/// may pass and the lease lasts.
async fn nack(shared: &Shared, id: u64, lease: Lease, reason: String, leased_until: Instant) {
    let mut backoff = Backoff::new(shared.options.backoff_max);
    loop {
        match shared.client.nack(id, lease, shared.options.nack_delay_ms, Some(reason.clone())).await {
            Ok(_) => return Counts::add(&shared.counts.nacked, 1),
            Err(error) if retryable(&error) && Instant::now() < leased_until => {
                Counts::add(&shared.counts.retries, 1);
                tokio::time::sleep(backoff.next()).await;
            }
            Err(error) => {
                tracing::warn!("task {id}: nack refused ({error}); the server delivers it again");
                return Counts::add(&shared.counts.lost_leases, 1);
            }
        }
    }
}

/// `text` cut to `limit_bytes` of UTF-8 on a character boundary, ending in
/// `…` when cut.
fn cut(text: &str, limit_bytes: usize) -> String {
    if text.len() <= limit_bytes {
        return text.to_owned();
    }
    let mut end = limit_bytes - ELLIPSIS.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{ELLIPSIS}", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_cut_on_a_character_boundary() {
        assert_eq!(cut("short", 1_024), "short");
        for text in ["a".repeat(2_000), "é".repeat(1_000), "€".repeat(700), "😀".repeat(500)] {
            let reason = cut(&text, NACK_REASON_BYTES_MAX);
            assert!(
                reason.len() <= NACK_REASON_BYTES_MAX && reason.len() > NACK_REASON_BYTES_MAX - 8,
                "{}",
                reason.len()
            );
            assert!(reason.ends_with(ELLIPSIS));
        }
    }

    #[test]
    fn a_panic_s_message_is_its_text() {
        assert_eq!(panic_text(&"static"), "static");
        assert_eq!(panic_text(&format!("formatted {}", 7)), "formatted 7");
        assert_eq!(panic_text(&42), "the handler panicked");
    }
}
