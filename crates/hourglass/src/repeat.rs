//! Fixed-rate repetition: where the next occurrence of a repeating job falls,
//! in whatever unit the caller counts time (the scheduler's nanoseconds, the
//! durable queue's Unix milliseconds).

/// What a repeating job does about occurrences it missed, because the process
/// stalled or because its previous run was still going.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum MissedRuns {
    /// Run once now, skip the missed occurrences, and keep the original grid:
    /// the next run is at the first `start + k * period` after now.
    #[default]
    Skip,
    /// Run once now and restart the grid from now: the next run is at
    /// `now + period`.
    Delay,
}

/// The due time after a run due at `due` that started at `now`, and how many
/// occurrences in between were skipped. Saturates rather than overflows.
///
/// # Panics
/// If `period` is zero.
///
/// # Example
/// ```
/// use hourglass::{next_occurrence, MissedRuns};
///
/// // Due at 100 every 50, started late at 260: the runs at 150, 200 and 250 are skipped.
/// assert_eq!(next_occurrence(100, 260, 50, MissedRuns::Skip), (300, 3));
/// assert_eq!(next_occurrence(100, 260, 50, MissedRuns::Delay), (310, 3));
/// ```
pub fn next_occurrence(due: u64, now: u64, period: u64, missed: MissedRuns) -> (u64, u64) {
    assert!(period > 0, "a repeat period is never zero");
    let next = due.saturating_add(period);
    if next > now {
        return (next, 0);
    }
    let behind = (now - due) / period;
    match missed {
        MissedRuns::Skip => (due.saturating_add((behind + 1).saturating_mul(period)), behind),
        MissedRuns::Delay => (now.saturating_add(period), behind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_grid_or_restarts_it() {
        assert_eq!(next_occurrence(100, 120, 50, MissedRuns::Skip), (150, 0));
        assert_eq!(next_occurrence(100, 260, 50, MissedRuns::Skip), (300, 3));
        assert_eq!(next_occurrence(100, 250, 50, MissedRuns::Skip), (300, 3));
        assert_eq!(next_occurrence(100, 260, 50, MissedRuns::Delay), (310, 3));
        assert_eq!(next_occurrence(1_000, 1_400, 100, MissedRuns::Skip), (1_500, 4));
        assert_eq!(next_occurrence(u64::MAX - 1, u64::MAX - 1, 50, MissedRuns::Skip).0, u64::MAX);
    }
}
