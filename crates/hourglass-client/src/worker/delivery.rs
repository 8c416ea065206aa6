//! One delivery, from its claim to its ack or nack: the handler runs inside
//! the delivery's own task (a panic caught as it unwinds), the lease is
//! extended beside it while it runs, then the outcome goes to the acker, or
//! a nack with the error's text or the panic's message.
//!
//! The handler has no task of its own, and is polled once before the
//! lease's timer is armed: a handler that ends at once costs no timer. A
//! spawn and a timer per delivery were about a third of the worker's extra
//! CPU beside raw claims (BENCHMARKS.md).

use std::any::Any;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hourglass_wire::{Ack, ClaimedTask};
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

/// Runs the handler on `task`, keeping its lease, then acks or nacks it.
/// `slot` is freed when it returns. `leased_until` is when the lease ends
/// by this process's clock: the claim's send time plus the lease.
pub(crate) async fn deliver(shared: Arc<Shared>, task: ClaimedTask, slot: OwnedSemaphorePermit, leased_until: Instant) {
    let (id, lease) = (task.id, task.lease);
    let handler = Arc::clone(&shared.handler);
    // A panic in the handler's call (before its future) counts as one in it.
    let mut handled = Caught(None);
    let first = match catch_unwind(AssertUnwindSafe(move || handler(task))) {
        // Once without a timer: most handlers end here.
        Ok(future) => {
            handled.0 = Some(future);
            std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut handled).poll(cx))).await
        }
        Err(panic) => Poll::Ready(Ended::Panicked(panic_text(&*panic))),
    };
    let mut stale = false;
    let mut leased_until = leased_until;
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
async fn nack(shared: &Shared, id: u64, lease: hourglass_wire::Lease, reason: String, leased_until: Instant) {
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
