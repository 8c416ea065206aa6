//! The commands `stats` counts (its `cmd-<name>` keys), as an enum: a
//! counter is an index into a fixed array of atomics, so counting is one
//! `fetch_add`, and a command that is not counted cannot be named.

use std::sync::atomic::{AtomicU64, Ordering};

use super::command::Command;

/// A counted command. The variants are in the order `stats` prints them,
/// and each one's discriminant is its index in [`Counter::ALL`] (checked
/// below, at compile time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Counter {
    Put,
    Peek,
    PeekReady,
    PeekDelayed,
    PeekBuried,
    Reserve,
    ReserveWithTimeout,
    Delete,
    Release,
    Use,
    Watch,
    Ignore,
    Bury,
    Kick,
    Touch,
    Stats,
    StatsJob,
    StatsTube,
    ListTubes,
    ListTubeUsed,
    ListTubesWatched,
    PauseTube,
}

impl Counter {
    /// Every counter, in `stats`' order.
    pub(super) const ALL: [Counter; 22] = [
        Counter::Put,
        Counter::Peek,
        Counter::PeekReady,
        Counter::PeekDelayed,
        Counter::PeekBuried,
        Counter::Reserve,
        Counter::ReserveWithTimeout,
        Counter::Delete,
        Counter::Release,
        Counter::Use,
        Counter::Watch,
        Counter::Ignore,
        Counter::Bury,
        Counter::Kick,
        Counter::Touch,
        Counter::Stats,
        Counter::StatsJob,
        Counter::StatsTube,
        Counter::ListTubes,
        Counter::ListTubeUsed,
        Counter::ListTubesWatched,
        Counter::PauseTube,
    ];

    /// The key of its count in `stats`: `cmd-` and the command's name in
    /// beanstalkd's protocol.
    pub(super) fn key(self) -> &'static str {
        match self {
            Counter::Put => "cmd-put",
            Counter::Peek => "cmd-peek",
            Counter::PeekReady => "cmd-peek-ready",
            Counter::PeekDelayed => "cmd-peek-delayed",
            Counter::PeekBuried => "cmd-peek-buried",
            Counter::Reserve => "cmd-reserve",
            Counter::ReserveWithTimeout => "cmd-reserve-with-timeout",
            Counter::Delete => "cmd-delete",
            Counter::Release => "cmd-release",
            Counter::Use => "cmd-use",
            Counter::Watch => "cmd-watch",
            Counter::Ignore => "cmd-ignore",
            Counter::Bury => "cmd-bury",
            Counter::Kick => "cmd-kick",
            Counter::Touch => "cmd-touch",
            Counter::Stats => "cmd-stats",
            Counter::StatsJob => "cmd-stats-job",
            Counter::StatsTube => "cmd-stats-tube",
            Counter::ListTubes => "cmd-list-tubes",
            Counter::ListTubeUsed => "cmd-list-tube-used",
            Counter::ListTubesWatched => "cmd-list-tubes-watched",
            Counter::PauseTube => "cmd-pause-tube",
        }
    }

    /// What `command` counts as, if anything: beanstalkd 1.12's `stats`
    /// shows no count for `reserve-job`, `kick-job` or `quit`, and a `put`
    /// too big is still a `put`.
    pub(super) fn of(command: &Command) -> Option<Counter> {
        Some(match command {
            Command::Put { .. } | Command::PutTooBig { .. } => Counter::Put,
            Command::Peek(_) => Counter::Peek,
            Command::PeekReady => Counter::PeekReady,
            Command::PeekDelayed => Counter::PeekDelayed,
            Command::PeekBuried => Counter::PeekBuried,
            Command::Reserve => Counter::Reserve,
            Command::ReserveWithTimeout(_) => Counter::ReserveWithTimeout,
            Command::Delete(_) => Counter::Delete,
            Command::Release { .. } => Counter::Release,
            Command::Use(_) => Counter::Use,
            Command::Watch(_) => Counter::Watch,
            Command::Ignore(_) => Counter::Ignore,
            Command::Bury { .. } => Counter::Bury,
            Command::Kick(_) => Counter::Kick,
            Command::Touch(_) => Counter::Touch,
            Command::Stats => Counter::Stats,
            Command::StatsJob(_) => Counter::StatsJob,
            Command::StatsTube(_) => Counter::StatsTube,
            Command::ListTubes => Counter::ListTubes,
            Command::ListTubeUsed => Counter::ListTubeUsed,
            Command::ListTubesWatched => Counter::ListTubesWatched,
            Command::PauseTube { .. } => Counter::PauseTube,
            Command::ReserveJob(_) | Command::KickJob(_) | Command::Quit => return None,
        })
    }
}

// A variant's discriminant is its place in `ALL`: `Counters` indexes by it.
const _: () = {
    let mut at = 0;
    while at < Counter::ALL.len() {
        assert!(Counter::ALL[at] as usize == at, "Counter::ALL is in declaration order");
        at += 1;
    }
};

/// Each counted command's count since start, shared by every connection.
#[derive(Debug)]
pub(super) struct Counters([AtomicU64; Counter::ALL.len()]);

impl Default for Counters {
    fn default() -> Self {
        Counters(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl Counters {
    /// One more `counter`.
    pub(super) fn add(&self, counter: Counter) {
        // A count read by `stats` orders nothing else: relaxed is enough.
        self.0[counter as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Every counter and its count, in `stats`' order.
    pub(super) fn read(&self) -> impl Iterator<Item = (Counter, u64)> + '_ {
        Counter::ALL.into_iter().map(|counter| (counter, self.0[counter as usize].load(Ordering::Relaxed)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_named_and_ordered_as_beanstalkd_s_stats_prints_them() {
        let keys: Vec<&str> = Counter::ALL.iter().map(|counter| counter.key()).collect();
        let names: Vec<&str> = keys.iter().filter_map(|key| key.strip_prefix("cmd-")).collect();
        assert_eq!(names.len(), keys.len());
        assert_eq!(
            names,
            [
                "put",
                "peek",
                "peek-ready",
                "peek-delayed",
                "peek-buried",
                "reserve",
                "reserve-with-timeout",
                "delete",
                "release",
                "use",
                "watch",
                "ignore",
                "bury",
                "kick",
                "touch",
                "stats",
                "stats-job",
                "stats-tube",
                "list-tubes",
                "list-tube-used",
                "list-tubes-watched",
                "pause-tube",
            ]
        );
    }

    #[test]
    fn each_counter_counts_only_its_own_command() {
        let counters = Counters::default();
        counters.add(Counter::PauseTube);
        counters.add(Counter::Put);
        counters.add(Counter::Put);
        let counts: Vec<(Counter, u64)> = counters.read().filter(|&(_, count)| count > 0).collect();
        assert_eq!(counts, [(Counter::Put, 2), (Counter::PauseTube, 1)]);
        assert_eq!(Counter::of(&Command::PutTooBig { bytes: 1 }), Some(Counter::Put));
        assert_eq!(Counter::of(&Command::KickJob(1)), None);
    }
}
