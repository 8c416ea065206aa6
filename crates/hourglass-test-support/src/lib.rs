//! What every test of hourglass shares, in one place (as ripgrep's
//! `tests/util.rs`): free ports, programs a test needs, servers of the tests'
//! own (an HTTP receiver of push deliveries among them), and waits that end
//! at a deadline, so that a failing test fails
//! quickly and never hangs.

pub mod beanstalkd;
pub mod certs;
pub mod hourglass;
pub mod receiver;
pub mod redis;
mod wait;

pub use wait::{holds_within, holds_within_async, within, within_async};

use std::net::TcpListener;
use std::process::{Command, Stdio};

/// A port on 127.0.0.1 that nothing listened on a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind a free port").local_addr().expect("a local address").port()
}

/// Whether `program` runs (with `probe` as its arguments); if not, panics
/// under `CI=true` (the tests need it there: `.ci/run` installs it) and says
/// the test is skipped otherwise.
pub fn required(program: &str, probe: &[&str]) -> bool {
    let found = Command::new(program)
        .args(probe)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{program} is required under CI=true: .ci/run installs it"
        );
        eprintln!("SKIPPED: {program} is not installed (Debian: see .ci/run)");
    }
    found
}
