//! The commands people type, against the real server: `stats` as a table and
//! as JSON, `show`, `pause`, `resume`, `delete-dead`, and what an error says;
//! and a queue whose name holds a `/`.

use std::process::{Command, Output};
use std::time::Duration;

use hourglass_client::wire::{ClaimRequest, ClaimedTask, Enqueued, OverviewQueue};
use serde::Deserialize;

use crate::{client, serve};

fn hourglass(base: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hourglass"))
        .args(args)
        .env("HOURGLASS_SERVER", base)
        .env_remove("HOURGLASS_TOKEN")
        .output()
        .expect("run hourglass")
}

/// Runs a command that must succeed; its stdout.
fn ok(base: &str, args: &[&str]) -> String {
    let out = hourglass(base, args);
    assert!(out.status.success(), "hourglass {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// What `stats --json` prints, as far as the test reads it.
#[derive(Deserialize)]
struct Stats {
    queues: Vec<OverviewQueue>,
}

#[tokio::test]
async fn the_commands_people_type_print_for_people() {
    let data = tempfile::tempdir().unwrap();
    let mut server = serve().data(data.path()).start();
    let base = server.url();
    let client = client(&server, Duration::from_secs(10));

    ok(&base, &["add", "emails", "--in", "1h", "--payload", r#"{"to":"a@example.com"}"#, "--key", "signup-1"]);
    ok(&base, &["add", "payments", "--payload", r#"{"order":7}"#, "--max-attempts", "1"]);
    let claim = ClaimRequest { max: Some(1), ..ClaimRequest::default() };
    let task = client.claim("payments", &claim).await.unwrap().tasks.remove(0);
    client.nack(task.id, task.lease, None, Some("card declined".into())).await.unwrap();

    let table = ok(&base, &["stats"]);
    println!("hourglass stats:\n{table}");
    let mut lines = table.lines();
    assert!(lines.next().unwrap().starts_with("QUEUE"), "{table}");
    let emails = lines.next().unwrap();
    let payments = lines.next().unwrap();
    assert!(emails.starts_with("emails") && emails.contains("running"), "{emails}");
    assert_eq!(payments.split_whitespace().take(6).collect::<Vec<_>>(), ["payments", "running", "0", "0", "0", "1"]);
    assert!(table.contains("2 tasks, 0 schedules; since start: 2 enqueued, 1 delivered"), "{table}");
    let json: Stats = serde_json::from_str(&ok(&base, &["stats", "payments", "--json"])).unwrap();
    let payments = &json.queues[0].queue;
    assert_eq!((payments.name.as_str(), payments.dead), ("payments", 1));

    let shown = ok(&base, &["show", &task.id.to_string()]);
    println!("hourglass show:\n{shown}");
    for line in ["queue:       payments\n", "state:       dead\n", "last error:  card declined\n", "\"order\": 7"] {
        assert!(shown.contains(line), "{line:?} in\n{shown}");
    }

    assert!(ok(&base, &["pause", "emails"]).starts_with("paused emails"));
    assert!(ok(&base, &["stats", "emails"]).contains("paused"));
    ok(&base, &["resume", "emails"]);
    assert_eq!(ok(&base, &["delete-dead", "payments"]), "deleted 1 dead tasks of payments\n");

    // A queue's settings: each `set` changes what it names and keeps the rest.
    assert!(ok(&base, &["queue", "show", "hooks"]).contains("push:          none"));
    let set = ["queue", "set", "hooks", "--push-url", "https://example.com/h", "--push-header", "X-Key: k"];
    ok(&base, &set);
    let shown = ok(&base, &["queue", "set", "hooks", "--rate", "5", "--max-in-flight", "2"]);
    println!("hourglass queue set:\n{shown}");
    for line in [
        "push:          POST https://example.com/h\n",
        "X-Key: k",
        "timeout:     30.00s",
        "rate:          5/s",
        "max in flight: 2",
    ] {
        assert!(shown.contains(line), "{line:?} in\n{shown}");
    }
    let json = ok(&base, &["queue", "show", "hooks", "--json"]);
    assert!(json.contains("\"max_in_flight\": 2"), "{json}");
    let lifted = ok(&base, &["queue", "set", "hooks", "--no-push", "--no-rate"]);
    assert!(lifted.contains("push:          none") && lifted.contains("rate:          unlimited"), "{lifted}");
    ok(&base, &["add", "hooks", "--http", "https://example.com/one", "--http-header", "X-A: 1"]);
    let bad = hourglass(&base, &["queue", "set", "hooks", "--push-url", "ftp://example.com/"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("http or https"), "{}", String::from_utf8_lossy(&bad.stderr));

    // Errors say what went wrong and what to do.
    let missing = hourglass(&base, &["stats", "nope"]);
    assert!(!missing.status.success());
    let message = String::from_utf8_lossy(&missing.stderr);
    assert!(message.contains("no queue \"nope\"") && message.contains("hourglass stats"), "{message}");
    let unknown = hourglass(&base, &["show", "999999"]);
    let message = String::from_utf8_lossy(&unknown.stderr);
    assert!(message.starts_with("error: 404 not_found: "), "the server's code and message: {message}");
    server.kill();
    let gone = hourglass(&base, &["stats"]);
    let message = String::from_utf8_lossy(&gone.stderr);
    assert!(message.contains("is `hourglass serve` running there?"), "{message}");
}

#[tokio::test]
async fn a_queue_named_with_a_slash_is_one_queue() {
    let data = tempfile::tempdir().unwrap();
    let server = serve().data(data.path()).start();
    let base = server.url();

    let added: Enqueued = serde_json::from_str(&ok(&base, &["add", "a/b", "--payload", r#"{"n":1}"#])).unwrap();
    assert!(ok(&base, &["show", &added.id.to_string()]).contains("queue:    a/b\n"));
    let row = ok(&base, &["stats", "a/b"]);
    assert!(row.lines().nth(1).unwrap().starts_with("a/b "), "{row}");
    assert!(ok(&base, &["pause", "a/b"]).starts_with("paused a/b"));
    assert!(ok(&base, &["stats", "a/b"]).contains("paused"));
    ok(&base, &["resume", "a/b"]);
    let claimed: ClaimedTask = serde_json::from_str(&ok(&base, &["claim", "a/b", "--ack"])).unwrap();
    assert_eq!((claimed.id, claimed.queue.as_str()), (added.id, "a/b"));
    assert_eq!(ok(&base, &["delete-dead", "a/b"]), "deleted 0 dead tasks of a/b\n");
    // Not the queue `a` nor the queue `b`.
    let missing = hourglass(&base, &["stats", "a"]);
    assert!(!missing.status.success(), "{}", String::from_utf8_lossy(&missing.stdout));
}
