//! Every wait in a test has a deadline: a test that waits for something
//! that never comes fails with a message saying what, it never hangs. And
//! ordering comes from what a test awaits (a write held at the store's gate,
//! a task finished), never from counting yields.

use std::future::Future;
use std::time::{Duration, Instant};

/// How long one wait of a test may take: generous, for two busy cores
/// shared with other test runs.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// How long a request that must wait is given to answer wrongly: a check
/// that can only pass wrongly (if the machine is slower than this), never
/// fail wrongly.
pub const GRACE: Duration = Duration::from_millis(50);

/// Awaits `future`; the test fails, naming `what`, if it takes longer than
/// [`DEADLINE`].
pub async fn within<F: Future>(what: &str, future: F) -> F::Output {
    match tokio::time::timeout(DEADLINE, future).await {
        Ok(output) => output,
        Err(_) => panic!("{what}: not done within {DEADLINE:?}"),
    }
}

/// Waits until `condition` holds, looking every millisecond; the test fails,
/// naming `what`, past [`DEADLINE`].
pub async fn until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !condition() {
        assert!(Instant::now() < deadline, "{what}: not so within {DEADLINE:?}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Stops `thread` and waits for it; the test fails, naming `what`, if it is
/// still running after [`DEADLINE`].
pub fn stop(what: &str, thread: hourglass::TimerThread) {
    let (stopped, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = stopped.send(thread.stop());
    });
    match done.recv_timeout(DEADLINE) {
        Ok(stopped) => stopped.unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
        Err(_) => panic!("{what}: still running after {DEADLINE:?}"),
    }
}

/// The test fails, naming `what`, if `task` answers within [`GRACE`]: for a
/// request that must wait (behind a write held at the gate, say).
pub async fn still_waiting<T>(what: &str, task: &mut tokio::task::JoinHandle<T>) {
    let answered = tokio::time::timeout(GRACE, task).await.is_ok();
    assert!(!answered, "{what}: answered, and it must wait");
}

/// Runs `command` to its end; killed, and an error naming `what`, if it
/// runs past [`DEADLINE`]. Never panics: it may run in a `drop`.
pub fn run(what: &str, command: &mut std::process::Command) -> Result<std::process::ExitStatus, String> {
    let mut child = command.spawn().map_err(|error| format!("cannot run {what}: {error}"))?;
    let deadline = Instant::now() + DEADLINE;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{what}: still running after {DEADLINE:?}, killed"));
            }
            Err(error) => return Err(format!("{what}: {error}")),
        }
    }
}
