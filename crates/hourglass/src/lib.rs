//! hourglass: a hierarchical timing wheel and an in-process delayed-task scheduler.
//!
//! ```
//! use std::sync::mpsc;
//! use std::time::Duration;
//!
//! let scheduler = hourglass::Scheduler::new();
//! let (tx, rx) = mpsc::channel();
//! scheduler.schedule(Duration::from_millis(5), move || tx.send("hello, later").unwrap()).unwrap();
//! assert_eq!(rx.recv().unwrap(), "hello, later");
//! ```
//!
//! Two layers:
//! - [`Wheel`]: the data structure. Insert, cancel and move a deadline in O(1),
//!   expire everything due in one batch; no threads, no clock, time in ticks.
//! - [`Scheduler`]: the service. One driver thread sleeps until the next
//!   deadline and hands due jobs to a bounded pool of workers; time comes from
//!   a [`Clock`], which tests replace with a [`ManualClock`].
//!
//! Between them, [`TimerThread`]: a thread that sleeps on a clock until the
//! next deadline of a timetable it does not own, woken early only for an
//! earlier deadline. The scheduler's driver is one; so can be any service's
//! timer thread over its own wheel.
//!
//! For tokio programs, `DelayQueue` (feature `tokio`) is a drop-in for
//! tokio-util's `DelayQueue` on the same wheel.
//!
//! For calendar time, `Cron` (feature `cron`) reads a cron expression in an
//! IANA time zone, with a stated rule for daylight-saving transitions, and
//! `Scheduler::schedule_cron` runs a job at its occurrences.
//!
//! Deadlines that must outlive the process (the durable queue's) count in Unix
//! time from a [`WallClock`]; tests replace it with a [`ManualWallClock`].
//!
//! `docs/DESIGN.md` in the repository explains the choices.
#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![warn(rust_2018_idioms)]

#[cfg(feature = "cron")]
mod calendar;
mod clock;
#[cfg(feature = "tokio")]
pub mod delay_queue;
mod pages;
mod repeat;
mod scheduler;
mod timer_thread;
mod wall_clock;
mod wheel;

#[cfg(feature = "cron")]
pub use calendar::{Cron, CronError, CRON_EXPRESSION_BYTES_MAX, FIXED_TIMES_MAX};
pub use clock::{Clock, ManualClock, SystemClock};
#[cfg(feature = "tokio")]
pub use delay_queue::DelayQueue;
pub use pages::{Pages, PAGE_LEN};
pub use repeat::{next_occurrence, MissedRuns};
pub use scheduler::{
    BuildError, Builder, Handle, Lateness, OverloadPolicy, ScheduleError, Scheduler, ShutdownReport, Stats, TaskId,
};
pub use timer_thread::{Next, TimerClock, TimerHandle, TimerThread, TIMER_SLACK_NS};
pub use wall_clock::{ManualWallClock, SystemWallClock, WallClock};
pub use wheel::{CapacityError, Expired, Key, Wheel};

/// The README's examples, compiled and run as doctests so they cannot rot
/// (with the `tokio` and `cron` features, which two of them need).
#[cfg(all(doctest, feature = "tokio", feature = "cron"))]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
