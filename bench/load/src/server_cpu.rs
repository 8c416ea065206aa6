//! What a server process spent between two moments, read from Linux's
//! `/proc`: its on-CPU time and its voluntary context switches (sleeps),
//! summed over its threads. `drain --server-pid` reports them a job, for the
//! drain alone.

use std::path::Path;

/// A server's totals at one moment.
#[derive(Debug, Clone, Copy)]
pub struct Spent {
    /// On-CPU time, ns (`schedstat`'s first field).
    cpu_ns: u64,
    /// Voluntary context switches: times a thread went to sleep.
    sleeps: u64,
}

impl Spent {
    /// The totals of process `pid` now, over the threads it has now (a
    /// thread that ended since an earlier reading drops out of the sum).
    pub fn of(pid: u32) -> anyhow::Result<Spent> {
        let mut spent = Spent { cpu_ns: 0, sleeps: 0 };
        for thread in std::fs::read_dir(format!("/proc/{pid}/task"))? {
            let dir = thread?.path();
            // A thread may end between the listing and the reads.
            spent.cpu_ns += first_number(&dir.join("schedstat"), |text| text.split_whitespace().next());
            spent.sleeps += first_number(&dir.join("status"), |text| {
                text.lines().find_map(|line| line.strip_prefix("voluntary_ctxt_switches:"))
            });
        }
        Ok(spent)
    }

    /// The report for `jobs` done between `self` and `later` in `seconds`.
    pub fn report(self, later: Spent, jobs: u64, seconds: f64) -> String {
        let jobs = jobs.max(1) as f64;
        let cpu_ns = later.cpu_ns.saturating_sub(self.cpu_ns) as f64;
        let sleeps = later.sleeps.saturating_sub(self.sleeps) as f64;
        format!(
            "server, drain alone: {:.1} us of CPU a job, {:.2} sleeps a job, {:.2} of a core",
            cpu_ns / 1e3 / jobs,
            sleeps / jobs,
            cpu_ns / 1e9 / seconds.max(f64::MIN_POSITIVE),
        )
    }
}

/// The number `pick` finds in the file at `path`; 0 if the file or the
/// number is gone.
fn first_number(path: &Path, pick: impl for<'a> Fn(&'a str) -> Option<&'a str>) -> u64 {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    pick(&text).and_then(|number| number.trim().parse().ok()).unwrap_or(0)
}
