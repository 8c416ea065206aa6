//! What happens after a failed delivery, and when a repeating task runs next.

use hourglass::{next_occurrence, MissedRuns};

use crate::limits::{BACKOFF_BASE_MS, BACKOFF_MAX_MS};

/// Retry delay after failed attempt `attempt` (from 1): doubles, capped.
pub fn backoff_ms(attempt: u32) -> u64 {
    let doublings = attempt.saturating_sub(1).min(32);
    BACKOFF_BASE_MS.saturating_mul(1 << doublings).min(BACKOFF_MAX_MS)
}

/// The first occurrence of a fixed-rate task after `now_ms`: missed ones are
/// skipped, the grid is kept.
pub fn next_run_ms(run_at_ms: u64, every_ms: u64, now_ms: u64) -> u64 {
    next_occurrence(run_at_ms, now_ms, every_ms, MissedRuns::Skip).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff_ms(1), 1_000);
        assert_eq!(backoff_ms(2), 2_000);
        assert_eq!(backoff_ms(5), 16_000);
        assert_eq!(backoff_ms(40), BACKOFF_MAX_MS);
    }

    #[test]
    fn repeats_skip_missed_occurrences() {
        assert_eq!(next_run_ms(1_000, 100, 1_050), 1_100);
        assert_eq!(next_run_ms(1_000, 100, 1_350), 1_400);
        assert_eq!(next_run_ms(1_000, 100, 1_400), 1_500);
    }
}
