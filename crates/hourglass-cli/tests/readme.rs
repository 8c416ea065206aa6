//! The README's Rust consumer, run as written: it is the client crate's
//! example `consumer` (a test holds the README's block to that file), built
//! by `cargo test` with the examples, pointed at a server of the test's own
//! through `HOURGLASS_SERVER`, stopped with SIGTERM.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use hourglass_client::wire::{NewTask, NewTasks};
use hourglass_test_support::within_async;
use serde_json::value::to_raw_value;

use crate::{client, serve};

/// The words that introduce the example in the README.
const INTRODUCED_BY: &str = "A consumer in Rust";

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The first `rust` block after [`INTRODUCED_BY`] in README.md (marked
/// `ignore`: the core crate runs the README's other Rust blocks as its
/// doctests, and this one needs the client crate; this test runs it).
fn readme_example() -> String {
    let readme = std::fs::read_to_string(repository().join("README.md")).unwrap();
    let after = &readme[readme.find(INTRODUCED_BY).expect("the README introduces its Rust consumer")..];
    let start = after.find("```rust,ignore\n").expect("a rust block after it") + "```rust,ignore\n".len();
    let end = after[start..].find("\n```").expect("the block ends") + 1;
    after[start..start + end].to_owned()
}

#[test]
fn the_readme_shows_the_example_as_it_is() {
    let file = std::fs::read_to_string(repository().join("crates/hourglass-client/examples/consumer.rs")).unwrap();
    // The file as the README shows it: without its doc comment.
    let example: String = file
        .lines()
        .skip_while(|line| line.starts_with("//!") || line.is_empty())
        .map(|line| line.to_owned() + "\n")
        .collect();
    assert_eq!(readme_example(), example, "README.md's Rust consumer differs from examples/consumer.rs");
    assert!(example.lines().count() <= 14, "about ten lines");
}

/// The example's binary, which `cargo test` builds beside the tests.
fn consumer() -> PathBuf {
    let deps = std::env::current_exe().unwrap().parent().unwrap().to_owned();
    let binary = deps.parent().unwrap().join("examples/consumer");
    assert!(
        binary.exists(),
        "{} is not built: cargo test builds it with the workspace's examples (or: cargo build -p hourglass-client --example consumer)",
        binary.display()
    );
    binary
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_consumer_runs_as_written() {
    let data = tempfile::tempdir().unwrap();
    let server = serve().data(data.path()).start();
    let admin = client(&server, Duration::from_secs(5));
    let orders = (0..20).map(|n| NewTask::new(to_raw_value(&serde_json::json!({ "order": n })).unwrap()));
    admin.enqueue_batch("orders", &NewTasks { tasks: orders.collect() }).await.unwrap();
    let consumer = Command::new(consumer())
        .env("HOURGLASS_SERVER", server.url())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the consumer starts");
    within_async(Duration::from_secs(60), "the README's consumer acked the 20 orders", async || {
        admin.queue("orders").await.is_ok_and(|q| q.acked == 20)
    })
    .await;
    let pid = consumer.id().to_string();
    let signalled = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(signalled.success());
    let exited =
        tokio::time::timeout(Duration::from_secs(60), tokio::task::spawn_blocking(move || consumer.wait_with_output()));
    let Ok(output) = exited.await else {
        let _ = Command::new("kill").args(["-KILL", &pid]).status();
        panic!("the consumer did not stop within 60 s of SIGTERM");
    };
    let output = output.unwrap().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{:?}\n{text}", output.status);
    assert_eq!(text.matches(": closing it if unpaid").count(), 20, "{text}");
    assert!(text.contains(r#"{"order":7}: closing it if unpaid"#), "{text}");
    assert!(text.contains("acked: 20"), "the report: {text}");
}
