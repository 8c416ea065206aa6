//! One delivery, from its claim to its ack or nack: the handler runs as a
//! task of its own (so that a panic is caught as the task's end, and the
//! lease is extended beside it), then the outcome goes to the acker, or a
//! nack with the error's text or the panic's message.

use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use hourglass_wire::{Ack, ClaimedTask};
use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinError;
use tokio::time::Instant;

use super::backoff::{retryable, Backoff};
use super::options::NACK_REASON_BYTES_MAX;
use super::report::Counts;
use super::Shared;

/// What ends a reason cut to fit.
const ELLIPSIS: &str = "…";

/// Aborts the handler's task when the delivery is dropped unfinished (the
/// shutdown deadline abandons it).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs the handler on `task`, keeping its lease, then acks or nacks it.
/// `slot` is freed when it returns. `leased_until` is when the lease ends
/// by this process's clock: the claim's send time plus the lease.
pub(crate) async fn deliver(shared: Arc<Shared>, task: ClaimedTask, slot: OwnedSemaphorePermit, leased_until: Instant) {
    let (id, lease) = (task.id, task.lease);
    let mut handler = tokio::spawn((shared.handler)(task));
    let _abort = AbortOnDrop(handler.abort_handle());
    let stale = AtomicBool::new(false);
    let mut leased_until = leased_until;
    let every = shared.options.extend_every();
    let ended = loop {
        tokio::select! {
            ended = &mut handler => break ended,
            () = tokio::time::sleep(every) => {
                if stale.load(Ordering::Relaxed) {
                    continue;
                }
                let sent = Instant::now();
                match shared.client.extend(id, lease, shared.options.lease_ms).await {
                    Ok(_) => leased_until = sent + std::time::Duration::from_millis(shared.options.lease_ms),
                    Err(error) if retryable(&error) => Counts::add(&shared.counts.retries, 1),
                    Err(error) => {
                        tracing::warn!("task {id}: its lease could not be extended ({error}); it will not be acked");
                        stale.store(true, Ordering::Relaxed);
                    }
                }
            }
        }
    };
    let counts = &shared.counts;
    let reason = match ended {
        Ok(Ok(())) => {
            Counts::add(&counts.succeeded, 1);
            if stale.load(Ordering::Relaxed) {
                Counts::add(&counts.lost_leases, 1);
            } else {
                shared.acker.add(Ack::new(id, lease));
            }
            return;
        }
        Ok(Err(reason)) => reason,
        Err(error) => {
            Counts::add(&counts.panicked, 1);
            panic_message(error)
        }
    };
    Counts::add(&counts.failed, 1);
    tracing::warn!("task {id} failed: {reason}");
    if stale.load(Ordering::Relaxed) {
        Counts::add(&counts.lost_leases, 1);
    } else {
        nack(&shared, id, lease, cut(&reason, NACK_REASON_BYTES_MAX), leased_until).await;
    }
    drop(slot);
}

/// Why the handler's task ended without an answer: its panic's message.
fn panic_message(error: JoinError) -> String {
    // The task is aborted only with the delivery, which then is not here.
    let Ok(panic) = error.try_into_panic() else { return "the handler was cancelled".to_owned() };
    panic_text(&*panic)
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
