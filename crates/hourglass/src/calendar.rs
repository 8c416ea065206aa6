//! Calendar time: a cron expression read in an IANA time zone, and where its
//! next occurrence falls, in Unix milliseconds.
//!
//! Parsing and the calendar walk are [croner]'s, on [jiff]'s time zone
//! database; this module decides what a daylight-saving transition does to a
//! job, once, for the in-process [`Scheduler`](crate::Scheduler) and for the
//! durable queue alike.
//!
//! # Daylight-saving time
//!
//! The rule is Vixie cron's (and Debian's), which most operators expect:
//!
//! | job | spring forward (a gap) | fall back (an overlap) |
//! |---|---|---|
//! | fixed time (`30 2 * * *`) | runs once, at the first instant after the gap | runs once, at the first of the two instants |
//! | wildcard or step in the second, minute or hour field (`*/15 * * * *`, `0 * * * *`) | keeps its real-time rhythm: the local times that do not exist are skipped | keeps its real-time rhythm: runs in both copies of the repeated hour |
//!
//! A job is *fixed time* when its second, minute and hour fields name values
//! without `*` or a step. croner treats only single values so; a list or a
//! range (`0 2,14 * * *`, `0 1-3 * * *`) is read here as that many fixed-time
//! jobs (up to [`FIXED_TIMES_MAX`]), so that its 02:00 run is not lost in a
//! gap either. Two of them that the same gap moves to the same instant run
//! once.
//!
//! [croner]: https://docs.rs/croner
//! [jiff]: https://docs.rs/jiff

use std::fmt;
use std::str::FromStr;

use croner::parser::{CronParser, Seconds};
use croner::JobType;
use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};

/// The most fixed times a list or range in the time fields is expanded into
/// (see the module's docs); a larger one is treated as an interval job.
pub const FIXED_TIMES_MAX: usize = 64;

/// The longest cron expression accepted, in bytes.
pub const CRON_EXPRESSION_BYTES_MAX: usize = 256;

/// A cron expression in a time zone.
///
/// Five fields (minute to day of week), six (seconds first) or seven (a year
/// last); `@yearly`, `@monthly`, `@weekly`, `@daily` and `@hourly`; `L`, `W`
/// and `#` in the day fields, as [croner](https://docs.rs/croner) reads them.
///
/// # Example
/// ```
/// use hourglass::Cron;
///
/// // Weekdays at 09:00 in Berlin.
/// let cron = Cron::new("0 9 * * MON-FRI", "Europe/Berlin").unwrap();
/// // 2026-03-27 is a Friday; 09:00 CET is 08:00 UTC.
/// let friday_noon_utc = 1_774_612_800_000; // 2026-03-27T12:00:00Z
/// let monday = cron.next_after_ms(friday_noon_utc).unwrap();
/// // Monday 2026-03-30, 09:00 CEST (Berlin moved its clocks on the Sunday): 07:00 UTC.
/// assert_eq!(monday, 1_774_854_000_000);
/// ```
#[derive(Clone)]
pub struct Cron {
    expression: Box<str>,
    time_zone_name: Box<str>,
    time_zone: TimeZone,
    /// The expression as croner reads it.
    whole: croner::Cron,
    /// What is evaluated: the expression itself, or one fixed-time expression
    /// per time its list or range names.
    parts: Vec<croner::Cron>,
}

/// Why a cron expression or time zone was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CronError {
    /// The expression does not parse; the message says where.
    Expression(String),
    /// The time zone is not in the time zone database.
    TimeZone(String),
}

impl fmt::Display for CronError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CronError::Expression(message) => write!(f, "invalid cron expression: {message}"),
            CronError::TimeZone(name) => {
                write!(f, "unknown time zone {name:?}: use an IANA name such as \"Europe/Berlin\" or \"UTC\"")
            }
        }
    }
}

impl std::error::Error for CronError {}

impl Cron {
    /// Parses `expression` and looks up `time_zone` (an IANA name such as
    /// `"America/New_York"`, or `"UTC"`).
    ///
    /// An expression that parses may still never fire (`0 0 30 2 *`): a
    /// [`next_after_ms`](Cron::next_after_ms) of `None` says so.
    ///
    /// # Errors
    /// [`CronError::Expression`], [`CronError::TimeZone`].
    pub fn new(expression: &str, time_zone: &str) -> Result<Cron, CronError> {
        if expression.len() > CRON_EXPRESSION_BYTES_MAX {
            return Err(CronError::Expression(format!("longer than {CRON_EXPRESSION_BYTES_MAX} bytes")));
        }
        let zone = TimeZone::get(time_zone).map_err(|_| CronError::TimeZone(time_zone.to_owned()))?;
        let parser = CronParser::builder().seconds(Seconds::Optional).build();
        let parse = |text: &str| parser.parse(text).map_err(|error| CronError::Expression(format!("{error}")));
        let whole = parse(expression)?;
        let parts = match fixed_times(&whole, expression) {
            Some(expressions) => expressions.iter().map(|text| parse(text)).collect::<Result<_, _>>()?,
            None => vec![whole.clone()],
        };
        Ok(Cron { expression: expression.into(), time_zone_name: time_zone.into(), time_zone: zone, whole, parts })
    }

    /// The first occurrence strictly after `after_ms` (Unix milliseconds), in
    /// Unix milliseconds; `None` if there is none (before the year 5000).
    pub fn next_after_ms(&self, after_ms: u64) -> Option<u64> {
        let after = self.zoned(after_ms)?;
        // The parts' times fall on the whole's dates: if the whole has no
        // next date, none of them has, and asking each would search to the
        // year 5000 as many times (seconds, for a list of 60 minutes).
        if self.parts.len() > 1 && self.whole.find_next_occurrence(&after, false).is_err() {
            return None;
        }
        self.parts.iter().filter_map(|part| unix_ms(part.find_next_occurrence(&after, false))).min()
    }

    /// The last occurrence at or before `at_ms`; `None` if there is none
    /// (after the year 1).
    pub fn latest_at_or_before_ms(&self, at_ms: u64) -> Option<u64> {
        let at = self.zoned(at_ms)?;
        let latest = self.parts.iter().filter_map(|part| unix_ms(part.find_previous_occurrence(&at, true))).max();
        latest.filter(|&ms| ms <= at_ms)
    }

    /// `at_ms` in the schedule's zone; `None` past what jiff represents.
    fn zoned(&self, at_ms: u64) -> Option<Zoned> {
        let at = Timestamp::from_millisecond(i64::try_from(at_ms).ok()?).ok()?;
        Some(Zoned::new(at, self.time_zone.clone()))
    }

    /// The occurrences after `after_ms`, in order.
    pub fn occurrences_after_ms(&self, after_ms: u64) -> impl Iterator<Item = u64> + '_ {
        std::iter::successors(self.next_after_ms(after_ms), |&at| self.next_after_ms(at))
    }

    /// The expression as given.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The time zone's name as given.
    pub fn time_zone(&self) -> &str {
        &self.time_zone_name
    }

    /// `at_ms` as a local date and time in the schedule's zone, with its
    /// offset (`2026-03-08T03:00:00-04:00`): for logs, tests and listings.
    pub fn local(&self, at_ms: u64) -> String {
        let Ok(at) = Timestamp::from_millisecond(at_ms as i64) else { return format!("{at_ms} ms") };
        at.to_zoned(self.time_zone.clone()).strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
    }
}

impl fmt::Debug for Cron {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cron").field("expression", &self.expression).field("time_zone", &self.time_zone_name).finish()
    }
}

impl PartialEq for Cron {
    fn eq(&self, other: &Cron) -> bool {
        self.expression == other.expression && self.time_zone_name == other.time_zone_name
    }
}

impl Eq for Cron {}

impl FromStr for Cron {
    type Err = CronError;

    /// An expression in UTC.
    fn from_str(expression: &str) -> Result<Cron, CronError> {
        Cron::new(expression, "UTC")
    }
}

/// An occurrence croner found, in Unix milliseconds; `None` for none (or one
/// before 1970).
fn unix_ms(found: Result<Zoned, croner::errors::CronError>) -> Option<u64> {
    u64::try_from(found.ok()?.timestamp().as_millisecond()).ok()
}

/// For an interval job whose time fields are lists or ranges without `*` or
/// a step, one fixed-time expression per (second, minute, hour) it names, if
/// there are at most [`FIXED_TIMES_MAX`]. `None` if the job is fixed time
/// already, or truly an interval job.
fn fixed_times(cron: &croner::Cron, expression: &str) -> Option<Vec<String>> {
    // A nickname is fixed time, or has `*` in its hour field (`@hourly`).
    if cron.determine_job_type() == JobType::FixedTime {
        return None;
    }
    let pattern = &cron.pattern;
    let fields = [&pattern.seconds, &pattern.minutes, &pattern.hours];
    if fields.iter().any(|field| field.from_wildcard || field.step != 1) {
        return None;
    }
    let words: Vec<&str> = expression.split_whitespace().collect();
    // Five fields have no seconds; six and seven start with them.
    let rest = words.get(if words.len() == 5 { 2 } else { 3 }..)?.join(" ");
    let (seconds, minutes, hours) = (pattern.seconds.values(), pattern.minutes.values(), pattern.hours.values());
    if seconds.len() * minutes.len() * hours.len() > FIXED_TIMES_MAX {
        return None;
    }
    let mut out = Vec::new();
    for hour in &hours {
        for minute in &minutes {
            for second in &seconds {
                out.push(format!("{second} {minute} {hour} {rest}"));
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: u64 = 60_000;

    fn ms(text: &str) -> u64 {
        text.parse::<Timestamp>().unwrap().as_millisecond() as u64
    }

    #[test]
    fn refuses_what_it_cannot_read_and_names_it() {
        assert!(matches!(Cron::new("61 * * * *", "UTC"), Err(CronError::Expression(_))));
        assert!(matches!(Cron::new("* * *", "UTC"), Err(CronError::Expression(_))));
        assert!(matches!(Cron::new(&"1 ".repeat(200), "UTC"), Err(CronError::Expression(_))));
        let error = Cron::new("* * * * *", "Mars/Olympus_Mons").unwrap_err();
        assert!(error.to_string().contains("Mars/Olympus_Mons"), "{error}");
    }

    #[test]
    fn reads_five_six_and_seven_fields_and_nicknames() {
        let at = ms("2026-06-10T10:00:30Z");
        assert_eq!(Cron::new("* * * * *", "UTC").unwrap().next_after_ms(at), Some(ms("2026-06-10T10:01:00Z")));
        assert_eq!(Cron::new("*/10 * * * * *", "UTC").unwrap().next_after_ms(at), Some(ms("2026-06-10T10:00:40Z")));
        assert_eq!(Cron::new("0 0 12 * * * 2027", "UTC").unwrap().next_after_ms(at), Some(ms("2027-01-01T12:00:00Z")));
        assert_eq!(Cron::new("@hourly", "UTC").unwrap().next_after_ms(at), Some(ms("2026-06-10T11:00:00Z")));
        assert_eq!(Cron::new("@daily", "UTC").unwrap().next_after_ms(at), Some(ms("2026-06-11T00:00:00Z")));
        // L, W and #: the last day, the weekday nearest the 15th, the second Friday.
        assert_eq!(Cron::new("0 0 L * *", "UTC").unwrap().next_after_ms(at), Some(ms("2026-06-30T00:00:00Z")));
        assert_eq!(Cron::new("0 0 15W * *", "UTC").unwrap().next_after_ms(at), Some(ms("2026-06-15T00:00:00Z")));
        assert_eq!(Cron::new("0 0 * * FRI#2", "UTC").unwrap().next_after_ms(at), Some(ms("2026-06-12T00:00:00Z")));
    }

    #[test]
    fn strictly_after() {
        let cron = Cron::new("* * * * *", "UTC").unwrap();
        let minute = ms("2026-06-10T10:01:00Z");
        assert_eq!(cron.next_after_ms(minute - 1), Some(minute));
        assert_eq!(cron.next_after_ms(minute), Some(minute + MINUTE));
        let five: Vec<u64> = cron.occurrences_after_ms(minute).take(3).collect();
        assert_eq!(five, [minute + MINUTE, minute + 2 * MINUTE, minute + 3 * MINUTE]);
        assert_eq!(cron.latest_at_or_before_ms(minute), Some(minute));
        assert_eq!(cron.latest_at_or_before_ms(minute + 59_999), Some(minute));
        assert_eq!(cron.latest_at_or_before_ms(minute - 1), Some(minute - MINUTE));
        let gap = Cron::new("0 2,14 * * *", "America/New_York").unwrap();
        assert_eq!(gap.latest_at_or_before_ms(ms("2026-03-08T08:00:00Z")), Some(ms("2026-03-08T07:00:00Z")));
    }

    #[test]
    fn an_expression_that_never_fires_has_no_next() {
        let at = ms("2026-06-10T10:00:00Z");
        assert_eq!(Cron::new("0 0 30 2 *", "UTC").unwrap().next_after_ms(at), None);
        assert_eq!(Cron::new("0 0 0 1 1 * 2020", "UTC").unwrap().next_after_ms(at), None);
        // A list of times on a date that never comes: read as many fixed
        // times, still answered with one search, not one per time.
        let minutes: Vec<String> = (0..60).map(|m| m.to_string()).collect();
        let many = Cron::new(&format!("{} 0 30 2 *", minutes.join(",")), "Europe/Berlin").unwrap();
        assert_eq!(many.next_after_ms(at), None);
    }

    #[test]
    fn lists_of_fixed_times_keep_their_runs_in_a_gap() {
        // New York springs forward at 02:00 on 2026-03-08: 02:00 runs at 03:00.
        let cron = Cron::new("0 2,14 * * *", "America/New_York").unwrap();
        let runs: Vec<String> =
            cron.occurrences_after_ms(ms("2026-03-07T12:00:00Z")).take(4).map(|at| cron.local(at)).collect();
        assert_eq!(
            runs,
            [
                "2026-03-07T14:00:00-05:00",
                "2026-03-08T03:00:00-04:00",
                "2026-03-08T14:00:00-04:00",
                "2026-03-09T02:00:00-04:00"
            ]
        );
        // Two times moved by one gap to one instant run once.
        let both = Cron::new("0 0,30 2 * * *", "America/New_York").unwrap();
        let runs: Vec<String> =
            both.occurrences_after_ms(ms("2026-03-08T05:00:00Z")).take(2).map(|at| both.local(at)).collect();
        assert_eq!(runs, ["2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00"]);
    }
}
