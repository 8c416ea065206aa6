//! The token bucket of a queue's rate limit, on a clock the caller passes
//! (the engine's injected one); a backend that shares its queues between
//! nodes keeps the same arithmetic in its store (Redis's `flow.lua`).
//!
//! The bucket holds at most `burst` tokens and gains `rate_per_s` a second;
//! each task handed out takes one. Tokens are counted in fractions, so that
//! a rate below one a second still refills a little every millisecond.

/// A token bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenBucket {
    rate_per_ms: f64,
    burst: f64,
    tokens: f64,
    at_ms: u64,
}

impl TokenBucket {
    /// A full bucket at `now_ms`.
    pub fn new(rate_per_s: f64, burst: u32, now_ms: u64) -> TokenBucket {
        debug_assert!(rate_per_s > 0.0 && rate_per_s.is_finite(), "rate {rate_per_s}");
        let burst = f64::from(burst.max(1));
        TokenBucket { rate_per_ms: rate_per_s / 1_000.0, burst, tokens: burst, at_ms: now_ms }
    }

    /// The same bucket with a new rate and size, keeping the tokens it has
    /// (at most the new size).
    pub fn reset(&mut self, rate_per_s: f64, burst: u32, now_ms: u64) {
        self.refill(now_ms);
        self.rate_per_ms = rate_per_s / 1_000.0;
        self.burst = f64::from(burst.max(1));
        self.tokens = self.tokens.min(self.burst);
    }

    fn refill(&mut self, now_ms: u64) {
        self.tokens = self.tokens_at(now_ms);
        self.at_ms = self.at_ms.max(now_ms);
    }

    /// Tokens at `now_ms`, in fractions. A clock stepped back refills
    /// nothing until it passes the last reading again.
    fn tokens_at(&self, now_ms: u64) -> f64 {
        let gained = now_ms.saturating_sub(self.at_ms) as f64 * self.rate_per_ms;
        (self.tokens + gained).min(self.burst)
    }

    /// Whole tokens at `now_ms`.
    pub fn available(&self, now_ms: u64) -> usize {
        // A token refilled to within rounding of whole is whole.
        (self.tokens_at(now_ms) + 1e-9).floor() as usize
    }

    /// Takes `n` tokens, at most those [`available`](TokenBucket::available).
    pub fn take(&mut self, n: usize, now_ms: u64) {
        self.refill(now_ms);
        self.tokens = (self.tokens - n as f64).max(0.0);
    }

    /// Milliseconds from `now_ms` until a whole token is there (0 if one is).
    pub fn next_token_in_ms(&self, now_ms: u64) -> u64 {
        ((1.0 - self.tokens_at(now_ms) - 1e-9).max(0.0) / self.rate_per_ms).ceil() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_full_refills_at_the_rate_and_caps_at_the_burst() {
        let mut bucket = TokenBucket::new(10.0, 5, 1_000);
        assert_eq!(bucket.available(1_000), 5);
        bucket.take(5, 1_000);
        assert_eq!(bucket.available(1_000), 0);
        assert_eq!(bucket.next_token_in_ms(1_000), 100);
        assert_eq!(bucket.available(1_099), 0);
        assert_eq!(bucket.available(1_100), 1);
        assert_eq!(bucket.available(10_000), 5, "never more than the burst");
    }

    #[test]
    fn a_slow_rate_refills_in_fractions() {
        let mut bucket = TokenBucket::new(0.5, 1, 0);
        bucket.take(1, 0);
        assert_eq!(bucket.next_token_in_ms(0), 2_000);
        assert_eq!(bucket.available(1_999), 0);
        assert_eq!(bucket.available(2_000), 1);
    }

    #[test]
    fn a_clock_stepped_back_refills_nothing_and_a_reset_keeps_the_tokens() {
        let mut bucket = TokenBucket::new(1_000.0, 10, 5_000);
        bucket.take(10, 5_000);
        assert_eq!(bucket.available(4_000), 0);
        assert_eq!(bucket.available(5_003), 3);
        bucket.reset(1.0, 2, 5_003);
        assert_eq!(bucket.available(5_003), 2);
    }
}
