//! The beanstalkd front against the real thing: the same command sequences go
//! to beanstalkd 1.12 and to `hourglass serve --beanstalk`, both fresh, and
//! every reply is compared. Then real clients from PyPI, and a `kill -9`
//! under `put`s.
//!
//! Where the replies may legitimately differ, [`differs_legitimately`] says
//! which field and why. Under `CI=true`, a missing `beanstalkd` or Python
//! client fails the test; elsewhere the test says so and passes.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hourglass_test_support::beanstalkd::Beanstalkd;
use hourglass_test_support::hourglass::Hourglass;
use hourglass_test_support::{required, within};

use crate::serve;

/// A reply that takes longer has met a server that is gone.
const REPLY_WITHIN: Duration = Duration::from_secs(10);
/// How long producers put before a kill at most: they stop at the kill.
const PUTTING_FOR_MAX: Duration = Duration::from_secs(60);

/// `hourglass serve --beanstalk 127.0.0.1:0` on `data`.
fn start_hourglass(data: &Path) -> Hourglass {
    serve().data(data).beanstalk().start()
}

/// A protocol client that reads whole replies.
struct Client {
    stream: BufReader<TcpStream>,
}

impl Client {
    /// Connects to a server that is up (started and waited for).
    fn connect(port: u16) -> Client {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("connect to port {port}: {e}"));
        stream.set_read_timeout(Some(REPLY_WITHIN)).unwrap();
        Client { stream: BufReader::new(stream) }
    }

    /// Sends `bytes`, then reads one reply: its line, and its body if it has one.
    fn send(&mut self, bytes: &[u8]) -> String {
        self.stream.get_mut().write_all(bytes).unwrap();
        self.reply()
    }

    fn reply(&mut self) -> String {
        let mut line = String::new();
        match self.stream.read_line(&mut line) {
            Ok(0) => return "<closed>".into(),
            Ok(_) => {}
            // No reply within REPLY_WITHIN: a server that stalls, not one that closed.
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return "<no reply>".into()
            }
            Err(_) => return "<closed>".into(),
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let body_len = match words.as_slice() {
            ["RESERVED" | "FOUND", _, len] | ["OK", len] => len.parse::<usize>().ok(),
            _ => None,
        };
        if let Some(len) = body_len {
            let mut body = vec![0; len + 2];
            self.stream.read_exact(&mut body).unwrap();
            line.push_str(&String::from_utf8_lossy(&body));
        }
        line
    }
}

/// Fields of the YAML replies that differ between two servers for reasons
/// that are not the protocol's: which process, which host, how long it ran,
/// and beanstalkd's binlog, which hourglass does not have (its store is not
/// a log). Times in whole seconds may fall on either side of a second.
fn differs_legitimately(key: &str) -> Option<&'static str> {
    match key {
        "pid" | "id" | "hostname" | "os" | "version" => Some("the process and machine"),
        "rusage-utime" | "rusage-stime" | "uptime" => Some("CPU and wall time of the process"),
        k if k.starts_with("binlog-") => Some("beanstalkd's binlog; hourglass's store is no log"),
        "file" => Some("the binlog file holding the job"),
        "age" | "time-left" | "pause-time-left" => Some("whole seconds, read at slightly different moments"),
        _ => None,
    }
}

/// A reply with the legitimately different values replaced, and the
/// length of a YAML document dropped (it follows from the values).
fn normalize(reply: &str) -> String {
    if !reply.starts_with("OK ") {
        return reply.to_owned();
    }
    let mut out = String::from("OK\n");
    for line in reply.lines().skip(1) {
        match line.split_once(": ") {
            Some((key, _)) if differs_legitimately(key).is_some() => out.push_str(&format!("{key}: *\n")),
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// One step of a scenario: on connection `conn`, send `bytes`.
type Step = (usize, Vec<u8>);

fn step(conn: usize, text: &str) -> Step {
    (conn, text.as_bytes().to_vec())
}

fn scenarios() -> Vec<(&'static str, Vec<Step>)> {
    let long_tube = "t".repeat(201);
    let too_long_line = format!("{}\r\n", "x".repeat(230));
    vec![
        (
            "jobs through their lives",
            vec![
                step(0, "put 100 0 60 5\r\nhello\r\n"),
                step(0, "peek 1\r\n"),
                step(0, "stats-job 1\r\n"),
                step(0, "reserve-with-timeout 0\r\n"),
                step(0, "stats-job 1\r\n"),
                step(0, "touch 1\r\n"),
                step(0, "release 1 7 0\r\n"),
                step(0, "peek-ready\r\n"),
                step(0, "reserve\r\n"),
                step(0, "bury 1 9\r\n"),
                step(0, "peek-buried\r\n"),
                step(0, "stats-job 1\r\n"),
                step(0, "kick 5\r\n"),
                step(0, "stats-tube default\r\n"),
                step(0, "reserve-job 1\r\n"),
                step(0, "delete 1\r\n"),
                step(0, "stats-job 1\r\n"),
                step(0, "stats-tube default\r\n"),
            ],
        ),
        (
            "priorities and tubes",
            vec![
                step(0, "use jobs\r\n"),
                step(0, "put 5 0 60 1\r\na\r\n"),
                step(0, "put 1 0 60 1\r\nb\r\n"),
                step(0, "put 3 0 60 1\r\nc\r\n"),
                step(0, "put 1 0 60 1\r\nd\r\n"),
                step(0, "list-tube-used\r\n"),
                step(0, "list-tubes\r\n"),
                step(1, "watch jobs\r\n"),
                step(1, "watch other\r\n"),
                step(1, "ignore default\r\n"),
                step(1, "list-tubes-watched\r\n"),
                step(1, "reserve-with-timeout 0\r\n"),
                step(1, "reserve-with-timeout 0\r\n"),
                step(1, "reserve-with-timeout 0\r\n"),
                step(1, "reserve-with-timeout 0\r\n"),
                step(1, "reserve-with-timeout 0\r\n"),
                step(0, "stats-tube jobs\r\n"),
                step(1, "delete 3\r\n"),
                step(1, "delete 4\r\n"),
                step(0, "delete 2\r\n"),
                step(1, "ignore jobs\r\n"),
                step(1, "ignore other\r\n"),
                step(0, "stats-tube jobs\r\n"),
                step(0, "pause-tube jobs 1\r\n"),
                step(0, "pause-tube nope 1\r\n"),
                step(0, "stats-tube other\r\n"),
            ],
        ),
        (
            "delays, kicks and the deadline",
            vec![
                step(0, "use later\r\n"),
                step(0, "put 0 30 60 2\r\nzz\r\n"),
                step(0, "put 1 20 60 2\r\nyy\r\n"),
                step(0, "peek-delayed\r\n"),
                step(0, "stats-job 7\r\n"),
                step(0, "kick-job 7\r\n"),
                step(0, "kick 10\r\n"),
                step(0, "peek-delayed\r\n"),
                step(0, "kick-job 7\r\n"),
                step(0, "watch later\r\n"),
                step(0, "put 0 0 1 1\r\nx\r\n"),
                step(0, "reserve-job 8\r\n"),
                step(0, "reserve-job 8\r\n"),
                step(0, "reserve-with-timeout 5\r\n"),
                step(0, "release 8 0 0\r\n"),
                step(0, "stats-tube later\r\n"),
            ],
        ),
        (
            "bad input",
            vec![
                step(0, "bogus\r\n"),
                step(0, "reserve \r\n"),
                step(0, "stats now\r\n"),
                step(0, "delete +3\r\n"),
                step(0, "delete 3 \r\n"),
                step(0, "delete 99\r\n"),
                step(0, "put 4294967296 0 1 1\r\n"),
                step(0, "put 1 0 1\r\n"),
                step(0, "use -x\r\n"),
                step(0, &format!("use {long_tube}\r\n")),
                step(0, "watch a b\r\n"),
                step(0, "use a\0b\r\n"),
                step(0, &too_long_line),
                step(0, "list-tube-used\r\n"),
                step(0, "release 99 1 1\r\n"),
                step(0, "bury 99 1\r\n"),
                step(0, "touch 99\r\n"),
                step(0, "kick-job 99\r\n"),
                step(0, "reserve-job 99\r\n"),
                step(0, "peek 99\r\n"),
                step(0, "stats-tube nope\r\n"),
                step(0, "ignore default\r\n"),
                (0, [b"put 1 0 1 65536\r\n".as_slice(), &[b'x'; 65_536], b"\r\n"].concat()),
                step(0, "list-tube-used\r\n"),
                // Last: beanstalkd spends an id on a body without its CRLF, hourglass does not.
                step(0, "put 1 0 1 3\r\nabcd\r\n"),
            ],
        ),
    ]
}

/// Replays every scenario on two fresh servers; the differences.
fn replay(hourglass: u16, beanstalkd: u16) -> (usize, Vec<String>) {
    let mut compared = 0;
    let mut differences = Vec::new();
    for (name, steps) in scenarios() {
        let mut ours: HashMap<usize, Client> = HashMap::new();
        let mut theirs: HashMap<usize, Client> = HashMap::new();
        for (conn, bytes) in steps {
            let mine = ours.entry(conn).or_insert_with(|| Client::connect(hourglass)).send(&bytes);
            let real = theirs.entry(conn).or_insert_with(|| Client::connect(beanstalkd)).send(&bytes);
            compared += 1;
            if normalize(&mine) != normalize(&real) {
                let sent = String::from_utf8_lossy(&bytes[..bytes.len().min(60)]).into_owned();
                differences.push(format!("{name}: {sent:?}\n  beanstalkd: {real:?}\n  hourglass:  {mine:?}"));
            }
        }
    }
    (compared, differences)
}

#[test]
fn every_reply_matches_beanstalkd_1_12() {
    let Some(beanstalkd) = Beanstalkd::start() else { return };
    let data = tempfile::tempdir().unwrap();
    let hourglass = start_hourglass(data.path());
    let (ours, theirs) = (hourglass.beanstalk_port(), beanstalkd.port);
    let (compared, differences) = replay(ours, theirs);
    // `stats` last, once both have seen the same commands.
    let stats = (Client::connect(ours).send(b"stats\r\n"), Client::connect(theirs).send(b"stats\r\n"));
    println!("{compared} replies compared with beanstalkd's, {} differ", differences.len());
    let keys =
        |reply: &str| reply.lines().filter_map(|l| l.split_once(": ").map(|(k, _)| k.to_owned())).collect::<Vec<_>>();
    assert_eq!(keys(&stats.0), keys(&stats.1), "stats has beanstalkd's keys, in its order");
    assert!(differences.is_empty(), "replies differ:\n{}", differences.join("\n"));
}

#[test]
fn python_clients_from_pypi_run_their_scenario() {
    if !required("python3", &["-c", "import greenstalk, pystalk"]) {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let server = start_hourglass(data.path());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/beanstalk_clients.py");
    let output =
        Command::new("python3").arg(script).arg(server.beanstalk_port().to_string()).output().expect("run python3");
    drop(server);
    println!("{}", String::from_utf8_lossy(&output.stdout));
    assert!(output.status.success(), "the clients' scenario failed:\n{}", String::from_utf8_lossy(&output.stderr));
}

/// Waits until `tube` has `count` reserves waiting, asked through `client`.
fn until_waiting(client: &mut Client, tube: &str, count: usize) {
    within(REPLY_WITHIN, &format!("{count} reserves waiting on {tube}"), || {
        client.send(format!("stats-tube {tube}\r\n").as_bytes()).contains(&format!("current-waiting: {count}\n"))
    });
}

#[test]
fn commands_pipelined_behind_a_waiting_reserve_are_answered_after_it_or_past_a_bound_closed() {
    /// Under the bytes a connection may hold while its reserve waits
    /// (`WAITING_HELD_MAX`, 16 KiB), and far past them.
    const UNDER: usize = 500;
    const PAST: usize = 3_000;
    let data = tempfile::tempdir().unwrap();
    let server = start_hourglass(data.path());
    let port = server.beanstalk_port();
    let mut producer = Client::connect(port);
    let pipeline = |commands| [b"reserve\r\n".to_vec(), b"list-tube-used\r\n".repeat(commands)].concat();

    // Under the bound: answered after the reserve, every one, in order.
    let mut waiter = Client::connect(port);
    waiter.stream.get_mut().write_all(&pipeline(UNDER)).unwrap();
    until_waiting(&mut producer, "default", 1);
    assert_eq!(producer.send(b"put 0 0 60 2\r\nhi\r\n"), "INSERTED 1\r\n");
    assert_eq!(waiter.reply(), "RESERVED 1 2\r\nhi\r\n");
    for n in 0..UNDER {
        assert_eq!(waiter.reply(), "USING default\r\n", "reply {n} of the pipeline");
    }

    // A hang-up during the wait ends it.
    let mut leaver = Client::connect(port);
    leaver.stream.get_mut().write_all(b"reserve\r\n").unwrap();
    until_waiting(&mut producer, "default", 1);
    drop(leaver);
    until_waiting(&mut producer, "default", 0);

    // Far past it: the connection is closed, its reserve given up, and a
    // job put afterwards is left for others.
    let mut flooder = Client::connect(port);
    let flood = pipeline(PAST);
    // The server may close before it has taken every byte: a write cut short is the close seen early.
    let _ = flooder.stream.get_mut().write_all(&flood);
    assert_eq!(flooder.reply(), "<closed>", "{} bytes behind a waiting reserve", flood.len());
    until_waiting(&mut producer, "default", 0);
    assert_eq!(producer.send(b"put 0 0 60 2\r\nho\r\n"), "INSERTED 2\r\n");
    assert!(producer.send(b"stats-tube default\r\n").contains("current-jobs-ready: 1\n"));
    assert_eq!(waiter.send(b"delete 1\r\n"), "DELETED\r\n");
    println!("{UNDER} commands behind a waiting reserve answered after it; {} bytes behind one: closed", flood.len());
}

/// Jobs put before a kill, with the bodies they were put with.
type Inserted = Vec<(u64, String)>;

/// Four producers putting on `port` until the server is gone; their jobs
/// answered INSERTED, and how many puts they sent. `answered` counts the
/// INSERTED replies as they come.
fn put_until_gone(
    port: u16,
    round: usize,
    answered: &Arc<AtomicUsize>,
) -> Vec<std::thread::JoinHandle<(Inserted, usize)>> {
    (0..4)
        .map(|producer| {
            let answered = answered.clone();
            std::thread::spawn(move || {
                let mut client = Client::connect(port);
                let (mut done, mut n) = (Vec::new(), 0);
                let stop = Instant::now() + PUTTING_FOR_MAX;
                while Instant::now() < stop {
                    let body = format!("round {round} producer {producer} job {n}");
                    n += 1;
                    let reply = client.send(format!("put 10 0 60 {}\r\n{body}\r\n", body.len()).as_bytes());
                    match reply.trim_end().strip_prefix("INSERTED ") {
                        Some(id) => done.push((id.parse::<u64>().unwrap(), body)),
                        None => break,
                    }
                    answered.fetch_add(1, Ordering::Relaxed);
                }
                (done, n)
            })
        })
        .collect()
}

#[test]
fn every_put_answered_inserted_survives_kill_9() {
    /// Puts answered in a round before its kill: the kill comes mid-stream.
    const ANSWERED_BEFORE_KILL: usize = 200;
    let data = tempfile::tempdir().unwrap();
    let mut server = start_hourglass(data.path());
    let mut inserted: Inserted = Vec::new();
    let mut puts = 0;
    for round in 0..3 {
        let answered = Arc::new(AtomicUsize::new(0));
        let producers = put_until_gone(server.beanstalk_port(), round, &answered);
        let what = format!("{ANSWERED_BEFORE_KILL} puts answered in round {round}");
        within(REPLY_WITHIN, &what, || answered.load(Ordering::Relaxed) >= ANSWERED_BEFORE_KILL);
        // Killed while the producers are still putting.
        server.kill();
        for producer in producers {
            let (done, sent) = producer.join().unwrap();
            puts += sent;
            inserted.extend(done);
        }
        server.restart();
    }
    let mut client = Client::connect(server.beanstalk_port());
    let lost: Vec<u64> = inserted
        .iter()
        .filter(|(id, body)| {
            client.send(format!("peek {id}\r\n").as_bytes()) != format!("FOUND {id} {}\r\n{body}\r\n", body.len())
        })
        .map(|(id, _)| *id)
        .collect();
    drop(server);
    println!("{puts} puts sent across three kill -9s, {} answered INSERTED, {} lost", inserted.len(), lost.len());
    assert!(!inserted.is_empty(), "some puts were answered before the kills");
    assert!(lost.is_empty(), "jobs answered INSERTED are gone after kill -9: {lost:?}");
}
