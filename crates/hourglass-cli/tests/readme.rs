//! The README's Rust consumer, run as written: it is the client crate's
//! example `consumer` (a test holds the README's block to that file), built
//! by `cargo test` with the examples, pointed at a server of the test's own
//! through `HOURGLASS_SERVER`, stopped with SIGTERM. And the README's TLS
//! recipe, run line by line in a shell (on a free port).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use hourglass_client::wire::{NewTask, NewTasks};
use hourglass_test_support::{free_port, required, within_async};
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
    readme_block(INTRODUCED_BY, "```rust,ignore\n")
}

/// The first block opened by `fence` after `introduced_by` in README.md.
fn readme_block(introduced_by: &str, fence: &str) -> String {
    let readme = std::fs::read_to_string(repository().join("README.md")).unwrap();
    let after = &readme[readme.find(introduced_by).unwrap_or_else(|| panic!("README.md has {introduced_by:?}"))..];
    let start = after.find(fence).expect("a block after it") + fence.len();
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

/// The port the README's TLS recipe listens on, replaced by a free one.
const README_TLS_PORT: &str = "7443";

#[test]
fn the_readme_tls_recipe_runs_as_written() {
    if !required("openssl", &["version"]) || !required("curl", &["--version"]) {
        return;
    }
    let block = readme_block("### TLS", "```sh\n").replace(README_TLS_PORT, &free_port().to_string());
    let dir = tempfile::tempdir().unwrap();
    let binaries = PathBuf::from(env!("CARGO_BIN_EXE_hourglass")).parent().unwrap().to_owned();
    let path = format!("{}:{}", binaries.display(), std::env::var("PATH").unwrap_or_default());
    let shell = |command: &str| {
        let mut shell = Command::new("bash");
        shell.args(["-c", command]).current_dir(dir.path()).env("PATH", &path);
        shell
    };
    let mut server = None;
    let mut printed = String::new();
    for command in block.replace("\\\n", " ").lines() {
        if let Some(expected) = command.strip_prefix("# ") {
            assert_eq!(printed.trim(), expected, "the README's comment shows what the command before prints");
        } else if let Some(background) = command.strip_suffix(" &") {
            let mut child =
                shell(&format!("exec {background}")).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
            // It prints the address it bound once it listens.
            let mut first = String::new();
            BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
            assert!(first.starts_with("https 127.0.0.1:"), "{command}: printed {first:?}");
            server = Some(child);
        } else {
            let output = shell(command).output().unwrap();
            printed = String::from_utf8_lossy(&output.stdout).into_owned();
            assert!(output.status.success(), "{command}: {}", String::from_utf8_lossy(&output.stderr));
        }
    }
    let mut server = server.expect("the recipe starts a server");
    let _ = server.kill();
    let _ = server.wait();
    assert!(printed.contains(r#""status":"ok""#), "the recipe ends with curl's answer: {printed}");
}
