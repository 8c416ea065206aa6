//! Schedules: named rules that enqueue an ordinary task at every occurrence
//! of a cron expression in a time zone, or of a fixed period.
//!
//! Each occurrence becomes a task of the schedule's queue whose idempotency
//! key is made from the schedule's name and the occurrence's time
//! ([`occurrence_key`]); the task and the schedule's next occurrence are
//! written in one atomic batch, so a restart never enqueues one occurrence
//! twice, and a crash never loses one that was due.
//!
//! What happens to occurrences missed while the server was down, or while
//! the schedule was paused, is the schedule's [`Misfire`] policy; what happens to an occurrence while the
//! previous one's task is still waiting or running is its [`Overlap`] policy.

use hourglass::Cron;

use crate::error::QueueError;
use crate::limits::{DELAY_MS_MAX, MISFIRE_GRACE_MS, MISFIRE_RUNS_MAX};
use crate::validate;

/// When a schedule's occurrences fall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// A cron expression read in an IANA time zone (see [`hourglass::Cron`],
    /// which also states the daylight-saving rule).
    Cron {
        /// Five to seven fields, or a nickname such as `@daily`.
        expression: Box<str>,
        /// An IANA name, such as `Europe/Berlin`, or `UTC`.
        time_zone: Box<str>,
    },
    /// Every `every_ms` milliseconds, counted from when the schedule was put.
    Every {
        /// The period.
        every_ms: u64,
    },
}

/// What a schedule does about occurrences missed while the server was down
/// or the schedule paused (an occurrence is missed when it comes more than
/// [`MISFIRE_GRACE_MS`] late).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Misfire {
    /// Drop missed occurrences: the next one on time is the next run.
    #[default]
    Skip,
    /// One catch-up run for the latest missed occurrence, then resume.
    Once,
    /// Every missed occurrence runs, oldest first, up to the latest
    /// [`MISFIRE_RUNS_MAX`].
    All,
}

/// What a schedule does about an occurrence while the task of the previous
/// one is still scheduled, due or leased.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overlap {
    /// Enqueue it anyway.
    #[default]
    Allow,
    /// Skip it: at most one of the schedule's tasks is alive at a time.
    Forbid,
}

/// A schedule as a client puts it; checked by the backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSchedule {
    /// The queue its tasks go to.
    pub queue: String,
    /// When they go.
    pub rule: Rule,
    /// The payload of every task.
    pub payload: crate::Payload,
    /// Missed occurrences.
    pub misfire: Misfire,
    /// Overlapping occurrences.
    pub overlap: Overlap,
    /// Attempts of each task; the queue's default if `None`.
    pub max_attempts: Option<u32>,
    /// A deadline for each occurrence, as Kubernetes' `startingDeadlineSeconds`:
    /// its task expires this long after the occurrence (dead, reason
    /// `expired`, if not delivered by then), and an occurrence found already
    /// past it is skipped rather than enqueued.
    pub expires_after_ms: Option<u64>,
}

/// A stored schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Its name, unique.
    pub name: Box<str>,
    /// The queue its tasks go to.
    pub queue: Box<str>,
    /// When they go.
    pub rule: Rule,
    /// The payload of every task.
    pub payload: crate::Payload,
    /// Missed occurrences.
    pub misfire: Misfire,
    /// Overlapping occurrences.
    pub overlap: Overlap,
    /// Attempts of each task.
    pub max_attempts: u32,
    /// Each occurrence's deadline, after its time.
    pub expires_after_ms: Option<u64>,
    /// When this version was put, Unix ms: an [`Rule::Every`] counts from here.
    pub since_ms: u64,
    /// The next occurrence to enqueue, Unix ms; `None` when there are no more.
    pub next_ms: Option<u64>,
    /// The latest occurrence enqueued, and its task's id.
    pub last: Option<(u64, u64)>,
    /// Paused: nothing is enqueued. Its next occurrence stays where it was,
    /// so on resuming, those missed meanwhile go to the misfire policy.
    pub paused: bool,
}

/// A schedule as a read shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleInfo {
    /// The schedule.
    pub schedule: Schedule,
    /// Its next occurrences (at most [`UPCOMING`]), Unix ms.
    pub upcoming_ms: Vec<u64>,
}

/// Occurrences a read of a schedule shows.
pub const UPCOMING: usize = 5;

/// The idempotency key of the task for a schedule's occurrence: the same on
/// every node and after every restart.
pub fn occurrence_key(name: &str, occurrence_ms: u64) -> String {
    format!("schedule:{name}:{occurrence_ms}")
}

/// The schedule and occurrence (Unix ms) an idempotency key was made for by
/// [`occurrence_key`]; `None` for any other key. A backend that places a
/// task by its key places an occurrence's task with its schedule by it.
pub fn occurrence_of(key: &str) -> Option<(&str, u64)> {
    let (name, ms) = key.strip_prefix("schedule:")?.rsplit_once(':')?;
    let digits = !ms.is_empty() && ms.bytes().all(|b| b.is_ascii_digit());
    (digits && !name.is_empty()).then(|| ms.parse().ok().map(|ms| (name, ms))).flatten()
}

/// What a schedule whose occurrence has come does: see [`Timetable::due`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// The occurrences to enqueue, oldest first.
    pub runs: Vec<u64>,
    /// The occurrences skipped.
    pub skipped: u64,
    /// The next occurrence after now.
    pub next_ms: Option<u64>,
}

/// A [`Rule`], read: where its occurrences fall.
#[derive(Debug, Clone)]
pub enum Timetable {
    /// A cron expression in its time zone.
    Cron(Box<Cron>),
    /// A fixed period.
    Every {
        /// The period.
        every_ms: u64,
        /// Where the grid of occurrences starts (Unix ms).
        since_ms: u64,
    },
}

impl Timetable {
    /// The rule read, for a schedule put at `since_ms`.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] for an expression or time zone that does not
    /// read, or a period out of range.
    pub fn of(rule: &Rule, since_ms: u64) -> Result<Timetable, QueueError> {
        match rule {
            Rule::Cron { expression, time_zone } => Cron::new(expression, time_zone)
                .map(|cron| Timetable::Cron(Box::new(cron)))
                .map_err(|error| QueueError::Invalid(error.to_string())),
            &Rule::Every { every_ms } => {
                validate::range("every_ms", every_ms, crate::limits::EVERY_MS_MIN, crate::limits::DELAY_MS_MAX)?;
                Ok(Timetable::Every { every_ms, since_ms })
            }
        }
    }

    /// The first occurrence strictly after `after_ms`.
    pub fn next_after(&self, after_ms: u64) -> Option<u64> {
        match self {
            Timetable::Cron(cron) => cron.next_after_ms(after_ms),
            &Timetable::Every { every_ms, since_ms } => {
                let periods = after_ms.saturating_sub(since_ms) / every_ms + 1;
                since_ms.checked_add(periods.checked_mul(every_ms)?)
            }
        }
    }

    /// The last occurrence at or before `at_ms`, if any.
    pub fn latest_at_or_before(&self, at_ms: u64) -> Option<u64> {
        match self {
            Timetable::Cron(cron) => cron.latest_at_or_before_ms(at_ms),
            &Timetable::Every { every_ms, since_ms } => {
                let periods = at_ms.checked_sub(since_ms)? / every_ms;
                (periods > 0).then(|| since_ms + periods * every_ms)
            }
        }
    }

    /// Up to [`UPCOMING`] occurrences from `first_ms` (itself included).
    pub fn upcoming(&self, first_ms: Option<u64>) -> Vec<u64> {
        std::iter::successors(first_ms, |&at| self.next_after(at)).take(UPCOMING).collect()
    }

    /// What to do at `now_ms` about the occurrences from `first_ms` (which
    /// has come): those `misfire` says to enqueue, oldest first, how many it
    /// skips, and the next occurrence after now. Occurrences more than
    /// [`MISFIRE_GRACE_MS`] late are missed; the others are on time.
    pub fn due(&self, first_ms: u64, now_ms: u64, misfire: Misfire) -> Due {
        let after_first = self.next_after(first_ms);
        if after_first.is_none_or(|after| after > now_ms) {
            // Only the first has come: nearly always, and one reading of the rule.
            let on_time = now_ms.saturating_sub(first_ms) <= MISFIRE_GRACE_MS;
            let runs = if on_time || misfire != Misfire::Skip { vec![first_ms] } else { Vec::new() };
            let skipped = u64::from(runs.is_empty());
            return Due { runs, skipped, next_ms: after_first };
        }
        let next_ms = self.next_after(now_ms);
        let Some(latest) = self.latest_at_or_before(now_ms).filter(|&latest| latest >= first_ms) else {
            // Not reached: an occurrence after the first has come.
            return Due { runs: vec![first_ms], skipped: 0, next_ms };
        };
        // Walk back from the latest: at most MISFIRE_RUNS_MAX, and only as far as needed.
        let wanted = match misfire {
            Misfire::All => MISFIRE_RUNS_MAX,
            Misfire::Once => 1,
            Misfire::Skip => MISFIRE_RUNS_MAX,
        };
        let mut runs = vec![latest];
        while runs.len() < wanted {
            let before = runs[runs.len() - 1].checked_sub(1).and_then(|at| self.latest_at_or_before(at));
            match before {
                Some(at) if at >= first_ms => runs.push(at),
                _ => break,
            }
            if misfire == Misfire::Skip && now_ms - runs[runs.len() - 1] > MISFIRE_GRACE_MS {
                break;
            }
        }
        if misfire == Misfire::Skip {
            runs.retain(|&at| now_ms - at <= MISFIRE_GRACE_MS);
        }
        runs.reverse();
        let skipped = self.count_between(first_ms, runs.first().copied().unwrap_or(now_ms.saturating_add(1)));
        Due { runs, skipped, next_ms }
    }

    /// Occurrences from `from_ms` (included) to `until_ms` (excluded),
    /// counted up to [`MISFIRE_COUNT_MAX`].
    fn count_between(&self, from_ms: u64, until_ms: u64) -> u64 {
        /// Missed occurrences are counted one by one: at most this many.
        const MISFIRE_COUNT_MAX: usize = 1_000;
        std::iter::successors(Some(from_ms), |&at| self.next_after(at))
            .take_while(|&at| at < until_ms)
            .take(MISFIRE_COUNT_MAX)
            .count() as u64
    }
}

/// A schedule to put as `name` at `now_ms`: checked, read, and with its first
/// occurrence.
pub fn check(
    name: &str,
    new: NewSchedule,
    payload_bytes_max: usize,
    now_ms: u64,
) -> Result<(Schedule, Timetable), QueueError> {
    validate::schedule_name(name)?;
    validate::queue_name(&new.queue)?;
    if new.payload.len() > payload_bytes_max {
        return Err(QueueError::PayloadTooLarge { bytes: new.payload.len(), max: payload_bytes_max });
    }
    let max_attempts = validate::max_attempts(new.max_attempts)?;
    let expires_after_ms =
        new.expires_after_ms.map(|ms| validate::checked_range("expires_after_ms", ms, 1, DELAY_MS_MAX)).transpose()?;
    let timetable = Timetable::of(&new.rule, now_ms)?;
    let next_ms = timetable.next_after(now_ms);
    if next_ms.is_none() {
        return Err(QueueError::Invalid("the schedule never fires: its rule has no occurrence after now".into()));
    }
    let schedule = Schedule {
        name: name.into(),
        queue: new.queue.into(),
        rule: new.rule,
        payload: new.payload,
        misfire: new.misfire,
        overlap: new.overlap,
        max_attempts,
        expires_after_ms,
        since_ms: now_ms,
        next_ms,
        last: None,
        paused: false,
    };
    Ok((schedule, timetable))
}

/// [`check`], off the runtime's threads: reading a cron rule and finding
/// that it fires can take milliseconds (an expression that never fires is
/// searched to the year 5000). Needs a tokio runtime.
///
/// # Errors
/// As [`check`]; [`QueueError::ShuttingDown`] if the runtime is going away.
pub async fn check_off_runtime(
    name: &str,
    new: NewSchedule,
    payload_bytes_max: usize,
    now_ms: u64,
) -> Result<(Schedule, Timetable), QueueError> {
    let name = name.to_owned();
    match tokio::task::spawn_blocking(move || check(&name, new, payload_bytes_max, now_ms)).await {
        Ok(checked) => checked,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(_) => Err(QueueError::ShuttingDown),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: u64 = 60_000;

    #[test]
    fn an_occurrence_key_reads_back_as_its_schedule_and_time() {
        assert_eq!(occurrence_of(&occurrence_key("a:b.c", 1_700_000_000_123)), Some(("a:b.c", 1_700_000_000_123)));
        for other in [
            "schedule:",
            "schedule:a:",
            "schedule::12",
            "schedule:a:1x",
            "sched:a:1",
            "a:1",
            "schedule:a:99999999999999999999999",
        ] {
            assert_eq!(occurrence_of(other), None, "{other}");
        }
    }

    #[test]
    fn a_period_counts_from_when_the_schedule_was_put() {
        let every = Timetable::of(&Rule::Every { every_ms: 100 }, 1_000).unwrap();
        assert_eq!(every.next_after(1_000), Some(1_100));
        assert_eq!(every.next_after(1_099), Some(1_100));
        assert_eq!(every.next_after(1_100), Some(1_200));
        assert_eq!(every.latest_at_or_before(1_000), None);
        assert_eq!(every.latest_at_or_before(1_250), Some(1_200));
        assert_eq!(every.upcoming(Some(1_100)), [1_100, 1_200, 1_300, 1_400, 1_500]);
        assert!(Timetable::of(&Rule::Every { every_ms: 0 }, 0).is_err());
    }

    #[test]
    fn misfire_policies_pick_their_runs() {
        // Every minute from 0; the server was down from 0:30 to 10:30.
        let every = Timetable::of(&Rule::Every { every_ms: MINUTE }, 0).unwrap();
        let (first, now) = (MINUTE, 10 * MINUTE + 30_000);
        let due = |runs: Vec<u64>, skipped| Due { runs, skipped, next_ms: Some(11 * MINUTE) };
        assert_eq!(every.due(first, now, Misfire::Skip), due(vec![], 10));
        assert_eq!(every.due(first, now, Misfire::Once), due(vec![10 * MINUTE], 9));
        assert_eq!(every.due(first, now, Misfire::All), due((1..=10).map(|m| m * MINUTE).collect(), 0));
        // On time, every policy runs the one occurrence.
        for misfire in [Misfire::Skip, Misfire::Once, Misfire::All] {
            let on_time = Due { runs: vec![MINUTE], skipped: 0, next_ms: Some(2 * MINUTE) };
            assert_eq!(every.due(MINUTE, MINUTE + 3, misfire), on_time);
        }
        // Only one has come, but late: skipped, or run.
        let late = MINUTE + MISFIRE_GRACE_MS + 1;
        assert_eq!(every.due(MINUTE, late, Misfire::Skip), Due { runs: vec![], skipped: 1, next_ms: Some(2 * MINUTE) });
        assert_eq!(every.due(MINUTE, late, Misfire::Once).runs, [MINUTE]);
        // All keeps the latest MISFIRE_RUNS_MAX.
        let Due { runs, skipped, .. } = every.due(MINUTE, 1_000 * MINUTE, Misfire::All);
        assert_eq!(runs.len(), MISFIRE_RUNS_MAX);
        assert_eq!(runs[runs.len() - 1], 1_000 * MINUTE);
        assert_eq!(skipped, 1_000 - MISFIRE_RUNS_MAX as u64);
    }

    /// What [`Timetable::due`] must answer, worked out by walking every
    /// occurrence from the first to now.
    fn due_by_walking(timetable: &Timetable, first: u64, now: u64, misfire: Misfire) -> Due {
        let mut come = vec![first];
        while let Some(next) = timetable.next_after(*come.last().unwrap()).filter(|&next| next <= now) {
            come.push(next);
        }
        let on_time = |at: &u64| now - at <= MISFIRE_GRACE_MS;
        let runs: Vec<u64> = match misfire {
            Misfire::Skip => come.iter().copied().filter(on_time).collect(),
            Misfire::Once => vec![*come.last().unwrap()],
            Misfire::All => come[come.len().saturating_sub(MISFIRE_RUNS_MAX)..].to_vec(),
        };
        let skipped = (come.len() - runs.len()) as u64;
        Due { runs, skipped, next_ms: timetable.next_after(now) }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Every policy, on periods and on cron rules in zones with daylight
        /// saving, at any distance from the first occurrence, agrees with
        /// walking the occurrences one by one.
        #[test]
        fn due_agrees_with_walking_every_occurrence(
            rule in 0..6usize,
            every_ms in 1_000u64..120_000,
            start_ms in 1_700_000_000_000u64..1_900_000_000_000,
            occurrences_after in 0u64..150,
            extra_ms in 0u64..60_000,
            misfire in 0..3usize,
        ) {
            let cron = |expression: &str, time_zone: &str| Rule::Cron { expression: expression.into(), time_zone: time_zone.into() };
            let rule = match rule {
                0 => Rule::Every { every_ms },
                1 => cron("* * * * *", "UTC"),
                2 => cron("*/7 * * * * *", "Europe/Berlin"),
                3 => cron("30 2 * * *", "America/New_York"),
                4 => cron("0,30 1-3 * * *", "Australia/Lord_Howe"),
                _ => cron("0 9 * * MON-FRI", "Europe/Berlin"),
            };
            let misfire = [Misfire::Skip, Misfire::Once, Misfire::All][misfire];
            let timetable = Timetable::of(&rule, start_ms).unwrap();
            let first = timetable.next_after(start_ms).unwrap();
            let mut now = first;
            for _ in 0..occurrences_after {
                now = timetable.next_after(now).unwrap();
            }
            let now = now + extra_ms.min(timetable.next_after(now).unwrap() - now - 1);
            proptest::prop_assert_eq!(timetable.due(first, now, misfire), due_by_walking(&timetable, first, now, misfire));
        }
    }
}
