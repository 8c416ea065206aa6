//! The long-poll every backend's claim runs: look for due tasks; with none,
//! arm the wake-ups and look once more; with still none, wait for a wake-up,
//! a time to look again, or the end of the wait, whichever comes first.
//!
//! Arming before the second look is what makes a wake-up impossible to lose:
//! a task filed between the first look and the arming is seen by the second
//! look, and one filed after the arming wakes the waiter. The first look is
//! made unarmed because it usually finds something, and arming (registering
//! a waiter with each [`Notify`]) would be wasted on it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::futures::OwnedNotified;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::QueueError;

/// What one look at the queues found.
pub enum Look<T> {
    /// Tasks handed out (at least one): the claim returns them.
    Found(Vec<T>),
    /// Nothing to hand out now.
    Nothing {
        /// Notified when a task of one of the queues may have come due.
        wake_on: Vec<Arc<Notify>>,
        /// Look again after this long even if nobody wakes us: a pause that
        /// ends by itself (which notifies nobody), or a backend's bound on a
        /// lost wake-up.
        look_again_in: Option<Duration>,
    },
    /// The backend is closed: the claim returns empty.
    Closed,
}

/// Runs `look` until it finds tasks, the backend closes, or `wait` has passed
/// (then the answer is empty). `look` is called at least once, and with a
/// `wait` of zero exactly once.
///
/// # Errors
/// The first error of `look`.
pub async fn long_poll<T, F, Fut>(wait: Duration, mut look: F) -> Result<Vec<T>, QueueError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Look<T>, QueueError>>,
{
    let deadline = Instant::now() + wait;
    let mut armed: Option<Vec<Pin<Box<OwnedNotified>>>> = None;
    loop {
        let (wake_on, look_again_in) = match look().await? {
            Look::Found(found) => {
                debug_assert!(!found.is_empty(), "a look that found nothing says Nothing");
                return Ok(found);
            }
            Look::Closed => return Ok(Vec::new()),
            Look::Nothing { wake_on, look_again_in } => (wake_on, look_again_in),
        };
        let now = Instant::now();
        if now >= deadline {
            return Ok(Vec::new());
        }
        let Some(woken) = armed.take() else {
            let mut woken: Vec<_> = wake_on.into_iter().map(|notify| Box::pin(notify.notified_owned())).collect();
            for notified in &mut woken {
                notified.as_mut().enable();
            }
            armed = Some(woken);
            continue;
        };
        let until = look_again_in.map_or(deadline, |after| deadline.min(now + after));
        if woken.is_empty() {
            tokio::time::sleep_until(until).await;
        } else {
            tokio::select! {
                _ = futures_util::future::select_all(woken) => {}
                () = tokio::time::sleep_until(until) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_wait_of_zero_looks_once() {
        let mut looks = 0;
        let found: Vec<u8> = long_poll(Duration::ZERO, || {
            looks += 1;
            async { Ok(Look::Nothing { wake_on: vec![Arc::new(Notify::new())], look_again_in: None }) }
        })
        .await
        .unwrap();
        assert_eq!((found.len(), looks), (0, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_wake_up_between_the_looks_is_not_lost() {
        let notify = Arc::new(Notify::new());
        let mut looks = 0;
        let found = long_poll(Duration::from_secs(60), || {
            looks += 1;
            let look = looks;
            let notify = notify.clone();
            async move {
                match look {
                    // Armed after this look: notified before the second.
                    1 => Ok(Look::Nothing { wake_on: vec![notify], look_again_in: None }),
                    2 => {
                        notify.notify_waiters();
                        Ok(Look::Nothing { wake_on: vec![notify], look_again_in: None })
                    }
                    _ => Ok(Look::Found(vec![look])),
                }
            }
        })
        .await
        .unwrap();
        assert_eq!(found, vec![3], "woken by the notification sent while armed, not by the deadline");
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_found_returns_empty_at_the_deadline_and_looks_again_when_asked() {
        let started = Instant::now();
        let mut looks = 0;
        let found: Vec<u8> = long_poll(Duration::from_millis(1_000), || {
            looks += 1;
            async { Ok(Look::Nothing { wake_on: Vec::new(), look_again_in: Some(Duration::from_millis(300)) }) }
        })
        .await
        .unwrap();
        assert!(found.is_empty());
        assert_eq!(started.elapsed(), Duration::from_millis(1_000));
        // 0 ms unarmed and armed; at 300, 600 and 900 ms the same pair (a
        // wake-up usually finds a task, so the look after one is unarmed);
        // and one at the deadline.
        assert_eq!(looks, 9);
    }

    #[tokio::test]
    async fn closed_and_errors_end_the_poll() {
        let closed: Vec<u8> = long_poll(Duration::from_secs(60), || async { Ok(Look::Closed) }).await.unwrap();
        assert!(closed.is_empty());
        let failed = long_poll::<u8, _, _>(Duration::from_secs(60), || async { Err(QueueError::ShuttingDown) }).await;
        assert_eq!(failed, Err(QueueError::ShuttingDown));
    }
}
