//! Waits that end: every wait in a test has a deadline, and when it passes
//! the test fails with what it waited for, rather than hanging.

use std::time::{Duration, Instant};

/// How often a condition is tried again.
const POLL_EVERY: Duration = Duration::from_millis(10);

/// Tries `condition` until it holds; panics with `what` if it does not
/// within `deadline`.
///
/// ```
/// use std::time::{Duration, Instant};
/// use hourglass_test_support::within;
///
/// let start = Instant::now();
/// within(Duration::from_secs(5), "20 ms pass", || start.elapsed() >= Duration::from_millis(20));
/// ```
#[track_caller]
pub fn within(deadline: Duration, what: &str, condition: impl FnMut() -> bool) {
    assert!(holds_within(deadline, condition), "{what}: not within {deadline:?}");
}

/// Tries `condition` until it holds (true) or `deadline` passes (false),
/// for a caller that fails in its own words.
pub fn holds_within(deadline: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    loop {
        if condition() {
            return true;
        }
        if started.elapsed() >= deadline {
            return false;
        }
        std::thread::sleep(POLL_EVERY);
    }
}

/// [`within`] for a condition that awaits (a request, say); the runtime is
/// free between tries.
///
/// ```
/// use std::time::Duration;
/// use hourglass_test_support::within_async;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let mut tries = 0;
/// within_async(Duration::from_secs(5), "the third try", async || {
///     tries += 1;
///     tries == 3
/// })
/// .await;
/// # }
/// ```
pub async fn within_async(deadline: Duration, what: &str, condition: impl AsyncFnMut() -> bool) {
    assert!(holds_within_async(deadline, condition).await, "{what}: not within {deadline:?}");
}

/// [`holds_within`] for a condition that awaits.
pub async fn holds_within_async(deadline: Duration, mut condition: impl AsyncFnMut() -> bool) -> bool {
    let started = Instant::now();
    loop {
        if condition().await {
            return true;
        }
        if started.elapsed() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_that_holds_returns_at_once() {
        let mut tries = 0;
        within(Duration::from_secs(1), "the first try", || {
            tries += 1;
            true
        });
        assert_eq!(tries, 1);
    }

    #[test]
    fn holds_within_says_whether_it_held() {
        assert!(!holds_within(Duration::from_millis(30), || false));
        let mut tries = 0;
        assert!(holds_within(Duration::from_secs(1), || {
            tries += 1;
            tries == 3
        }));
    }

    #[test]
    #[should_panic(expected = "the sky falls: not within 50ms")]
    fn a_condition_that_never_holds_fails_with_what_it_waited_for() {
        within(Duration::from_millis(50), "the sky falls", || false);
    }

    #[tokio::test]
    #[should_panic(expected = "an answer: not within 50ms")]
    async fn an_async_condition_that_never_holds_fails_too() {
        within_async(Duration::from_millis(50), "an answer", async || false).await;
    }
}
