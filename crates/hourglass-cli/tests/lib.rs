//! Integration tests of the `hourglass` binary, compiled into one binary.
//! Servers are started and waited for by the test support's
//! [`Serve`](hourglass_test_support::hourglass::Serve).

mod beanstalk;
mod beanstalk_bytes;
mod crash;
mod figures_nodes;
mod never_early;
mod nodes;
mod people;
mod push;
mod push_bytes;
mod push_crash;
mod push_flow;
mod python_client;
mod readme;
mod redis_tls;
mod schedule_nodes;
mod schedules;
mod slow_clients;
mod store;
mod tls;
mod tokens;
mod worker;

use std::time::Duration;

use hourglass_client::wire::NewTask;
use hourglass_client::Client;
use hourglass_test_support::hourglass::{Hourglass, Serve};
use serde::{Deserialize, Serialize};
use serde_json::value::{to_raw_value, RawValue};

/// `hourglass serve`: this crate's binary.
fn serve() -> Serve {
    Serve::new(env!("CARGO_BIN_EXE_hourglass"))
}

/// `hourglass serve --listen 127.0.0.1:0` with `args`, run to its end (a
/// start that must fail, within `--store-wait` if it waits): its exit code
/// and what it wrote on stderr.
fn serve_to_end<S: AsRef<std::ffi::OsStr>>(args: impl IntoIterator<Item = S>) -> (Option<i32>, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_hourglass"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(std::process::Stdio::null())
        .output()
        .expect("hourglass runs");
    (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// A client of `server` whose requests give up after `timeout`: a server
/// that stops answering ends the request, never the test's patience.
fn client(server: &Hourglass, timeout: Duration) -> Client {
    let http = reqwest::Client::builder().timeout(timeout).build().expect("an HTTP client");
    Client::with_http(http, server.url(), None)
}

/// The payload: which enqueue this is.
#[derive(Serialize, Deserialize)]
struct Seq {
    seq: u64,
}

impl Seq {
    /// A task carrying `seq`, due after `delay_ms`.
    fn task(seq: u64, delay_ms: u64) -> NewTask {
        NewTask { delay_ms: Some(delay_ms), ..NewTask::new(to_raw_value(&Seq { seq }).expect("a payload")) }
    }

    /// The `seq` a delivered payload carries.
    fn of(payload: &RawValue) -> u64 {
        serde_json::from_str::<Seq>(payload.get()).expect("a payload with a seq").seq
    }
}
