//! The commands people type, against the real server: `stats` as a table and
//! as JSON, `show`, `pause`, `resume`, `delete-dead`, and what an error says.

use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::crash::{free_port, start, wait_ready};

fn hourglass(base: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hourglass"))
        .args(args)
        .env("HOURGLASS_SERVER", base)
        .output()
        .expect("run hourglass")
}

/// Runs a command that must succeed; its stdout.
fn ok(base: &str, args: &[&str]) -> String {
    let out = hourglass(base, args);
    assert!(out.status.success(), "hourglass {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn the_commands_people_type_print_for_people() {
    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut server = start(data.path(), port);
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    wait_ready(&http, &base).await;

    ok(&base, &["add", "emails", "--in", "1h", "--payload", r#"{"to":"a@example.com"}"#, "--key", "signup-1"]);
    ok(&base, &["add", "payments", "--payload", r#"{"order":7}"#, "--max-attempts", "1"]);
    let claimed: Value = http
        .post(format!("{base}/v1/queues/payments/claim"))
        .json(&json!({ "max": 1 }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let task = &claimed["tasks"][0];
    let nack = json!({ "lease": task["lease"], "reason": "card declined" });
    http.post(format!("{base}/v1/tasks/{}/nack", task["id"])).json(&nack).send().await.unwrap();

    let table = ok(&base, &["stats"]);
    println!("hourglass stats:\n{table}");
    let mut lines = table.lines();
    assert!(lines.next().unwrap().starts_with("QUEUE"), "{table}");
    let emails = lines.next().unwrap();
    let payments = lines.next().unwrap();
    assert!(emails.starts_with("emails") && emails.contains("running"), "{emails}");
    assert_eq!(payments.split_whitespace().take(6).collect::<Vec<_>>(), ["payments", "running", "0", "0", "0", "1"]);
    assert!(table.contains("2 tasks, 0 schedules; since start: 2 enqueued, 1 delivered"), "{table}");
    let json: Value = serde_json::from_str(&ok(&base, &["stats", "payments", "--json"])).unwrap();
    assert_eq!((json["queues"][0]["name"].as_str(), json["queues"][0]["dead"].as_u64()), (Some("payments"), Some(1)));

    let shown = ok(&base, &["show", &task["id"].to_string()]);
    println!("hourglass show:\n{shown}");
    for line in ["queue:       payments\n", "state:       dead\n", "last error:  card declined\n", "\"order\": 7"] {
        assert!(shown.contains(line), "{line:?} in\n{shown}");
    }

    assert!(ok(&base, &["pause", "emails"]).starts_with("paused emails"));
    assert!(ok(&base, &["stats", "emails"]).contains("paused"));
    ok(&base, &["resume", "emails"]);
    assert_eq!(ok(&base, &["delete-dead", "payments"]), "deleted 1 dead tasks of payments\n");

    // Errors say what went wrong and what to do.
    let missing = hourglass(&base, &["stats", "nope"]);
    assert!(!missing.status.success());
    let message = String::from_utf8_lossy(&missing.stderr);
    assert!(message.contains("no queue \"nope\"") && message.contains("hourglass stats"), "{message}");
    let _ = server.kill();
    let _ = server.wait();
    let gone = hourglass(&base, &["stats"]);
    let message = String::from_utf8_lossy(&gone.stderr);
    assert!(message.contains("is `hourglass serve` running there?"), "{message}");
}
