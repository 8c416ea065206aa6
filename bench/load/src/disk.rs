//! `--workload fsync`: how long this machine's disk takes to make a small
//! append durable, measured where the servers keep their files. Every row
//! that answers only after an fsync (hourglass's durable mode, beanstalkd's
//! `-f 0`, Redis's `appendfsync always`) waits for it, and it moves from one
//! machine to the next, and within the hour, by more than most changes
//! measured beside it (`BENCHMARKS.md`): the bench scripts print it before
//! their rows.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::time::Instant;

use anyhow::Context;

use crate::args::LoadArgs;
use crate::report::{histogram, ms};

/// The bytes of one append: about one small record of a log.
const APPEND_BYTES: usize = 200;

/// Appends `APPEND_BYTES` to a new file in `--disk` and syncs its data
/// (`fdatasync`), `--tasks` times, then removes the file; prints the sync's
/// median, 99th percentile and maximum.
pub fn fsync(args: &LoadArgs) -> anyhow::Result<()> {
    let dir = args.disk.as_deref().context("--workload fsync measures the disk of --disk DIR")?;
    let path = dir.join(format!("hourglass-load-fsync-{}", std::process::id()));
    // A file of this run's own: one already there is not measured, nor removed.
    let mut file = create(&path)?;
    let measured = sync_times(&mut file, args.tasks);
    drop(file);
    let removed = std::fs::remove_file(&path);
    let latency = measured?;
    removed.with_context(|| format!("cannot remove {}", path.display()))?;
    println!(
        "Disk: {} appends of {APPEND_BYTES} B, each synced (fdatasync) in {}: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        latency.len(),
        dir.display(),
        ms(latency.value_at_quantile(0.5)),
        ms(latency.value_at_quantile(0.99)),
        ms(latency.max()),
    );
    Ok(())
}

/// A new file at `path` to append to; an error if one is there already.
fn create(path: &std::path::Path) -> anyhow::Result<File> {
    OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))
}

/// Appends to `file` and syncs it, `count` times: how long each sync took.
fn sync_times(file: &mut File, count: u64) -> anyhow::Result<hdrhistogram::Histogram<u64>> {
    let record = [b'x'; APPEND_BYTES];
    let mut latency = histogram();
    for _ in 0..count {
        file.write_all(&record)?;
        let started = Instant::now();
        file.sync_data()?;
        latency.record(started.elapsed().as_micros().max(1) as u64)?;
    }
    Ok(latency)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn args(extra: &[&str]) -> LoadArgs {
        LoadArgs::parse_from(["hourglass-load", "--workload", "fsync"].iter().chain(extra))
    }

    #[test]
    fn every_append_is_timed_and_the_file_is_removed() {
        let dir = std::env::temp_dir().join(format!("hourglass-load-disk-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut file = create(&dir.join("synced")).unwrap();
        let latency = sync_times(&mut file, 5).unwrap();
        drop(file);
        assert_eq!(latency.len(), 5);
        assert_eq!(std::fs::metadata(dir.join("synced")).unwrap().len(), 5 * APPEND_BYTES as u64);
        std::fs::remove_file(dir.join("synced")).unwrap();

        fsync(&args(&["--tasks", "3", "--disk", dir.to_str().unwrap()])).unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "the measured file is removed");
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn a_file_already_there_is_left_alone() {
        let dir = std::env::temp_dir().join(format!("hourglass-load-disk-there-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let there = dir.join(format!("hourglass-load-fsync-{}", std::process::id()));
        std::fs::write(&there, b"not ours").unwrap();
        let error = fsync(&args(&["--tasks", "3", "--disk", dir.to_str().unwrap()])).unwrap_err();
        assert!(error.to_string().contains("cannot create"), "{error}");
        assert_eq!(std::fs::read(&there).unwrap(), b"not ours");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_disk_is_required() {
        let error = fsync(&args(&["--tasks", "3"])).unwrap_err();
        assert!(error.to_string().contains("--disk"), "{error}");
    }
}
