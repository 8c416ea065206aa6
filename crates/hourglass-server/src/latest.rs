//! A reading of the backend that requests share for a while: however many
//! dashboards poll, the backend is read at most once a
//! [`FRESH_FOR`](crate::overview::FRESH_FOR) for them.

use std::future::Future;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// The latest reading of something, and when it was taken.
pub(crate) struct Latest<T>(Mutex<Option<(Instant, T)>>);

impl<T> Default for Latest<T> {
    fn default() -> Latest<T> {
        Latest(Mutex::new(None))
    }
}

impl<T: Clone> Latest<T> {
    /// The latest reading if it is at most `fresh_for` old, else a new one
    /// from `read`, which becomes the latest. Two requests that find it
    /// stale at once both read: neither waits for the other.
    pub(crate) async fn get<F: Future<Output = T>>(&self, fresh_for: Duration, read: impl FnOnce() -> F) -> T {
        if let Some((_, value)) = self.0.lock().as_ref().filter(|(at, _)| at.elapsed() <= fresh_for) {
            return value.clone();
        }
        let value = read().await;
        *self.0.lock() = Some((Instant::now(), value.clone()));
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_reading_is_shared_while_fresh_and_taken_again_when_not() {
        let latest = Latest::default();
        assert_eq!(latest.get(Duration::from_secs(60), || async { 1 }).await, 1);
        assert_eq!(latest.get(Duration::from_secs(60), || async { 2 }).await, 1, "shared");
        assert_eq!(latest.get(Duration::ZERO, || async { 3 }).await, 3, "too old for this caller");
        assert_eq!(latest.get(Duration::from_secs(60), || async { 4 }).await, 3, "the new one is the latest");
    }
}
