//! Scoped tokens through the real binary: a malformed file refused at
//! start and kept out on reload, SIGHUP reloading the file under load with
//! no request failing, and the beanstalkd front under `--beanstalk-token`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hourglass_client::Client;
use hourglass_test_support::hourglass::Hourglass;

use crate::{serve, Seq};

/// How long a reload may take to show, at most, on a loaded machine.
const RELOADED_WITHIN: Duration = Duration::from_secs(30);
/// Reloads during the load test.
const RELOADS: usize = 20;
/// Clients enqueueing meanwhile, each on a connection it keeps.
const CLIENTS: usize = 4;

/// The token's SHA-256 as the README makes it: `printf %s "$TOKEN" | sha256sum`.
fn sha256(token: &str) -> String {
    let out = Command::new("sh").args(["-c", "printf %s \"$TOKEN\" | sha256sum"]).env("TOKEN", token).output().unwrap();
    String::from_utf8(out.stdout).unwrap().split_whitespace().next().unwrap().to_owned()
}

/// A `[[token]]` table.
fn token(name: &str, secret: &str, queues: &str, can: &str) -> String {
    format!("[[token]]\nname = \"{name}\"\nsha256 = \"{}\"\nqueues = {queues}\ncan = {can}\n\n", sha256(secret))
}

/// Writes `text` to `path` whole: a new file renamed over the old, as an
/// operator's editor or config tool would.
fn write_file(path: &Path, text: &str) {
    let new = path.with_extension("new");
    std::fs::write(&new, text).unwrap();
    std::fs::rename(&new, path).unwrap();
}

fn client(server: &Hourglass, token: &str) -> Client {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    Client::with_http(http, server.url(), Some(token.to_owned()))
}

/// Waits until `ready` holds, failing past [`RELOADED_WITHIN`].
async fn until(what: &str, mut ready: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + RELOADED_WITHIN;
    while !ready().await {
        assert!(Instant::now() < deadline, "{what}: not within {RELOADED_WITHIN:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `serve --tokens file` with `args` on a data directory in `dir`,
/// which must exit at once and fail: what it printed, and its stderr.
fn refused_start(dir: &Path, file: &Path, args: &[&str]) -> (std::process::Output, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hourglass"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(dir.join("refused-data"))
        .arg("--tokens")
        .arg(file)
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "it should have refused to start: {stderr}");
    (out, stderr)
}

#[test]
fn a_malformed_file_is_refused_at_start_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    let bad = "[[token]]\nname = \"bad\"\nsha256 = \"xyz\"\nqueues = [\"*\"]\ncan = [\"read\"]\n";
    std::fs::write(&file, token("ok", "a", "[\"*\"]", "[\"read\"]") + bad).unwrap();
    let (out, stderr) = refused_start(dir.path(), &file, &[]);
    assert!(
        stderr.contains("tokens.toml") && stderr.contains("line 9") && stderr.contains("64 hex digits"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("http "), "it never listened");
}

#[test]
fn an_empty_admin_token_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    std::fs::write(&file, token("ok", "a", "[\"*\"]", "[\"read\"]")).unwrap();
    let (out, stderr) = refused_start(dir.path(), &file, &["--token", ""]);
    assert!(stderr.contains("--token (or HOURGLASS_TOKEN) is empty"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("http "), "it never listened");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sighup_reloads_the_file_under_load_and_no_request_fails() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    let steady = token("steady", "steady-secret", "[\"load-*\"]", "[\"enqueue\", \"read\"]");
    write_file(&file, &(steady.clone() + &token("gen-0", "secret-0", "[\"*\"]", "[\"read\"]")));
    let server = serve().data(dir.path().join("data")).arg("--tokens").arg(&file).start();
    let stop = Arc::new(AtomicBool::new(false));
    let (done, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut clients = Vec::new();
    for c in 0..CLIENTS {
        let (api, stop, done, failed) = (client(&server, "steady-secret"), stop.clone(), done.clone(), failed.clone());
        clients.push(tokio::spawn(async move {
            let queue = format!("load-{c}");
            let mut seq = 0;
            while !stop.load(Ordering::Relaxed) {
                seq += 1;
                match api.enqueue(&queue, &Seq::task(seq, 60_000)).await {
                    Ok(_) => done.fetch_add(1, Ordering::Relaxed),
                    Err(error) => {
                        eprintln!("a request failed during reloads: {error}");
                        failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
            }
        }));
    }
    let started = Instant::now();
    for generation in 1..=RELOADS {
        // Every other reload, a malformed file first: refused, the tokens before it stay.
        if generation % 2 == 0 {
            write_file(&file, &(steady.clone() + "[[token]]\nname = \"broken\"\n"));
            server.signal("HUP");
            let refusals = generation / 2;
            until("the malformed file refused", async || {
                server.stderr().matches("token file refused on reload").count() >= refusals
            })
            .await;
            let before = client(&server, &format!("secret-{}", generation - 1));
            assert!(before.queues().await.is_ok(), "the tokens before the malformed file stay");
        }
        let old = format!("secret-{}", generation - 1);
        let new = format!("secret-{generation}");
        write_file(&file, &(steady.clone() + &token(&format!("gen-{generation}"), &new, "[\"*\"]", "[\"read\"]")));
        server.signal("HUP");
        let api = client(&server, &new);
        until("the new token known", async || api.queues().await.is_ok()).await;
        // Requests go on between reloads, not only around them.
        let so_far = done.load(Ordering::Relaxed);
        until("enqueues between reloads", async || done.load(Ordering::Relaxed) >= so_far + CLIENTS as u64).await;
        let gone = client(&server, &old).queues().await;
        assert_eq!(gone.err().and_then(|e| e.code().map(str::to_owned)).as_deref(), Some("unauthorized"));
    }
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    let (done, failed) = (done.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    println!(
        "{RELOADS} reloads ({} refused) in {:?}: {done} enqueues by {CLIENTS} clients, {failed} failed",
        RELOADS / 2,
        started.elapsed()
    );
    assert_eq!(failed, 0, "no request fails because of a reload");
    assert!(done > 0);
    assert!(!server.stderr().contains("steady-secret") && !server.stderr().contains("secret-1"), "no token logged");
}

/// A beanstalkd protocol client reading one reply line (and a body).
struct Bean(BufReader<TcpStream>);

impl Bean {
    fn connect(port: u16) -> Bean {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Bean(BufReader::new(stream))
    }

    fn send(&mut self, command: &str) -> String {
        self.send_body(command).0
    }

    /// The reply's line, and its body (empty if it has none).
    fn send_body(&mut self, command: &str) -> (String, String) {
        self.0.get_mut().write_all(command.as_bytes()).unwrap();
        let mut line = String::new();
        self.0.read_line(&mut line).unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        let mut body = Vec::new();
        if let ["RESERVED" | "FOUND", _, len] | ["OK", len] = words.as_slice() {
            body = vec![0; len.parse::<usize>().unwrap() + 2];
            self.0.read_exact(&mut body).unwrap();
        }
        (line.trim_end().to_owned(), String::from_utf8_lossy(&body).into_owned())
    }
}

/// A server whose beanstalkd front has the permissions of token `bean` of
/// `file`, its data in `dir`.
fn front_serving_bean(dir: &Path, file: &Path) -> Hourglass {
    serve().data(dir.join("data")).beanstalk().args(["--beanstalk-token", "bean"]).arg("--tokens").arg(file).start()
}

#[test]
fn the_beanstalkd_front_has_its_named_token_s_permissions() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    let admin = token("ops", "ops-secret", "[\"*\"]", "[\"admin\"]");
    let bean = |can: &str| token("bean", "unused", "[\"team-*\"]", can);
    write_file(&file, &(admin.clone() + &bean("[\"enqueue\", \"consume\", \"read\"]")));

    let (_, stderr) = refused_start(dir.path(), &file, &["--beanstalk", "127.0.0.1:0"]);
    assert!(stderr.contains("--beanstalk-token"), "{stderr}");
    let (_, stderr) = refused_start(dir.path(), &file, &["--beanstalk", "127.0.0.1:0", "--beanstalk-token", "nobody"]);
    assert!(stderr.contains("no token named \"nobody\""), "{stderr}");

    let server = front_serving_bean(dir.path(), &file);
    let mut b = Bean::connect(server.beanstalk_port());
    // HTTP puts a job in a tube the front may not touch.
    let ops = client(&server, "ops-secret");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let other = rt.block_on(ops.enqueue("other", &Seq::task(1, 0))).unwrap().value.id;

    assert_eq!(b.send("use other\r\n"), "USING other");
    assert_eq!(b.send("put 1 0 10 2\r\nhi\r\n"), "UNKNOWN_COMMAND", "no enqueue in other");
    assert_eq!(b.send("use team-a\r\n"), "USING team-a");
    assert!(b.send("put 1 0 10 2\r\nhi\r\n").starts_with("INSERTED"));
    assert_eq!(b.send("reserve-with-timeout 0\r\n"), "UNKNOWN_COMMAND", "it watches default: no consume there");
    assert_eq!(b.send("watch team-a\r\n"), "WATCHING 2");
    assert_eq!(b.send("ignore default\r\n"), "WATCHING 1");
    let reserved = b.send("reserve-with-timeout 0\r\n");
    assert!(reserved.starts_with("RESERVED"), "{reserved}");
    let id: u64 = reserved.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert_eq!(b.send(&format!("peek {other}\r\n")), "NOT_FOUND", "another team's job is not there");
    assert_eq!(b.send(&format!("delete {other}\r\n")), "NOT_FOUND");
    assert_eq!(b.send("pause-tube team-a 1\r\n"), "NOT_FOUND", "no manage");
    assert_eq!(b.send("kick 1\r\n"), "UNKNOWN_COMMAND", "no manage");
    assert_eq!(b.send("stats\r\n"), "UNKNOWN_COMMAND", "the server's figures need read on every queue");
    let tubes = b.send("list-tubes\r\n");
    assert!(tubes.starts_with("OK"), "{tubes}");
    assert_eq!(b.send(&format!("delete {id}\r\n")), "DELETED");
    assert!(rt.block_on(ops.get(other)).is_ok(), "the other team's job is still there");

    // The token gains manage: a reload, and the same connection may pause.
    write_file(&file, &(admin.clone() + &bean("[\"enqueue\", \"consume\", \"read\", \"manage\"]")));
    server.signal("HUP");
    let deadline = Instant::now() + RELOADED_WITHIN;
    while b.send("pause-tube team-a 1\r\n") != "PAUSED" {
        assert!(Instant::now() < deadline, "the reload did not reach the front");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A file without the front's token is refused on reload, as a malformed one is.
    write_file(&file, &admin);
    server.signal("HUP");
    while !server.stderr().contains("which the beanstalkd front's --beanstalk-token names") {
        assert!(Instant::now() < deadline + RELOADED_WITHIN, "the refusal was not logged");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(b.send("pause-tube team-a 1\r\n"), "PAUSED", "the tokens before it stay");
}

#[test]
fn the_beanstalkd_front_checks_every_job_and_tube_command_against_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    let admin = token("ops", "ops-secret", "[\"*\"]", "[\"admin\"]");
    let bean = |queues: &str, can: &str| token("bean", "unused", queues, can);
    let consumer = "[\"enqueue\", \"consume\", \"read\"]";
    write_file(&file, &(admin.clone() + &bean("[\"*\"]", consumer)));
    let server = front_serving_bean(dir.path(), &file);
    let ops = client(&server, "ops-secret");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let other_ready = rt.block_on(ops.enqueue("other", &Seq::task(1, 0))).unwrap().value.id;
    let other_delayed = rt.block_on(ops.enqueue("other", &Seq::task(2, 3_600_000))).unwrap().value.id;
    let mut b = Bean::connect(server.beanstalk_port());
    let put = |b: &mut Bean| -> u64 {
        let put = b.send("put 1 0 60 2\r\nhi\r\n");
        put.strip_prefix("INSERTED ").unwrap_or_else(|| panic!("{put}")).parse().unwrap()
    };
    assert_eq!(b.send("use team-a\r\n"), "USING team-a");
    let id = put(&mut b);
    // While the front may consume everywhere, it reserves a job of each tube.
    assert_eq!(b.send("watch other\r\n"), "WATCHING 2");
    assert_eq!(b.send("watch team-a\r\n"), "WATCHING 3");
    assert_eq!(b.send("ignore default\r\n"), "WATCHING 2");
    let mut reserved: Vec<u64> = (0..2)
        .map(|_| {
            let reply = b.send("reserve-with-timeout 0\r\n");
            reply.split_whitespace().nth(1).unwrap_or_else(|| panic!("{reply}")).parse().unwrap()
        })
        .collect();
    reserved.sort_unstable();
    assert_eq!(reserved, [other_ready, id]);

    // Then it is narrowed to team-*: the other tube's job, though reserved
    // here, is no longer its to touch, release or bury.
    write_file(&file, &(admin.clone() + &bean("[\"team-*\"]", consumer)));
    server.signal("HUP");
    let deadline = Instant::now() + RELOADED_WITHIN;
    while b.send("stats-tube other\r\n") != "NOT_FOUND" {
        assert!(Instant::now() < deadline, "the reload did not reach the front");
        std::thread::sleep(Duration::from_millis(20));
    }
    for command in ["touch {}", "release {} 1 0", "bury {} 1"] {
        let refused = command.replace("{}", &other_ready.to_string()) + "\r\n";
        assert_eq!(b.send(&refused), "NOT_FOUND", "{refused:?}");
    }
    assert_eq!(b.send(&format!("touch {id}\r\n")), "TOUCHED");
    assert_eq!(b.send(&format!("release {id} 1 0\r\n")), "RELEASED");
    assert_eq!(b.send("reserve-with-timeout 0\r\n"), "UNKNOWN_COMMAND", "it still watches other");
    assert_eq!(b.send("ignore other\r\n"), "WATCHING 1");
    assert!(b.send("reserve-with-timeout 0\r\n").starts_with(&format!("RESERVED {id} ")));
    assert_eq!(b.send(&format!("bury {id} 1\r\n")), "BURIED");

    // read: the used tube's peeks, a job's and a tube's stats.
    assert!(b.send("peek-buried\r\n").starts_with(&format!("FOUND {id} ")));
    assert!(b.send(&format!("stats-job {id}\r\n")).starts_with("OK "));
    assert_eq!(b.send(&format!("stats-job {other_delayed}\r\n")), "NOT_FOUND");
    assert_eq!(b.send(&format!("peek {other_delayed}\r\n")), "NOT_FOUND");
    assert!(b.send("stats-tube team-a\r\n").starts_with("OK "));
    let (reply, tubes) = b.send_body("list-tubes\r\n");
    assert!(reply.starts_with("OK ") && tubes.contains("team-a") && !tubes.contains("other"), "{tubes}");
    assert_eq!(b.send("use other\r\n"), "USING other");
    assert_eq!(b.send("peek-delayed\r\n"), "NOT_FOUND", "another team's tube has one");
    assert_eq!(b.send("peek-buried\r\n"), "NOT_FOUND");
    assert_eq!(b.send("use team-a\r\n"), "USING team-a");

    // manage: cancelling a job not reserved here, taking a buried or delayed
    // one out of turn, kicking, pausing.
    let unreserved = put(&mut b);
    assert_eq!(b.send(&format!("delete {unreserved}\r\n")), "NOT_FOUND", "a cancel needs manage");
    assert_eq!(b.send(&format!("reserve-job {id}\r\n")), "NOT_FOUND", "buried: out of turn");
    assert_eq!(b.send(&format!("kick-job {id}\r\n")), "NOT_FOUND");
    assert_eq!(b.send(&format!("kick-job {other_delayed}\r\n")), "NOT_FOUND");
    assert_eq!(b.send(&format!("reserve-job {other_delayed}\r\n")), "NOT_FOUND");
    assert_eq!(b.send("pause-tube team-a 1\r\n"), "NOT_FOUND");
    assert!(rt.block_on(ops.get(unreserved)).is_ok(), "not cancelled");
    let delayed = rt.block_on(ops.get(other_delayed)).unwrap();
    assert_eq!(delayed.state, hourglass_client::wire::State::Scheduled, "another team's job, untouched");

    write_file(&file, &(admin + &bean("[\"team-*\"]", "[\"enqueue\", \"consume\", \"read\", \"manage\"]")));
    server.signal("HUP");
    while b.send(&format!("kick-job {id}\r\n")) != "KICKED" {
        assert!(Instant::now() < deadline + RELOADED_WITHIN, "the second reload did not reach the front");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(b.send(&format!("delete {unreserved}\r\n")), "DELETED");
    assert_eq!(b.send(&format!("kick-job {other_delayed}\r\n")), "NOT_FOUND", "manage on its own tubes only");
    assert_eq!(b.send("pause-tube team-a 1\r\n"), "PAUSED");
}

/// The token file the README shows under "Scoped tokens".
fn readme_tokens() -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let after = &readme[readme.find("### Scoped tokens").expect("the README's section")..];
    let start = after.find("```toml\n").expect("a toml block") + "```toml\n".len();
    let end = after[start..].find("```").expect("the block ends");
    after[start..start + end].to_owned()
}

#[tokio::test]
async fn the_readme_s_token_file_works_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    write_file(&file, &readme_tokens());
    let server = serve().data(dir.path().join("data")).arg("--tokens").arg(&file).start();
    let producer = client(&server, "billing-producer-demo");
    assert!(producer.enqueue("billing-eu", &Seq::task(1, 0)).await.unwrap().created);
    let refused = producer.enqueue("mail", &Seq::task(2, 0)).await.unwrap_err();
    assert_eq!((refused.status().map(|s| s.as_u16()), refused.code()), (Some(403), Some("forbidden")));
    println!("the README's refusal: {refused}");
    assert!(refused.to_string().contains("this token may not enqueue in queue \"mail\""), "{refused}");
    let worker = client(&server, "billing-worker-demo");
    let claimed = worker.claim("billing-eu", &Default::default()).await.unwrap();
    assert_eq!(claimed.tasks.len(), 1);
    assert_eq!(worker.enqueue("billing-eu", &Seq::task(3, 0)).await.unwrap_err().code(), Some("forbidden"));
    let dashboard = client(&server, "dashboard-demo");
    let queues = dashboard.queues().await.unwrap();
    assert_eq!(queues.queues.len(), 1, "it reads every queue");
    assert_eq!(dashboard.pause_queue("billing-eu").await.unwrap_err().code(), Some("forbidden"));
}
