//! Jobs of any bytes through the beanstalkd front, as beanstalkd takes them:
//! put, peeked and reserved byte for byte, across a `kill -9` and restart of
//! the embedded store and on Redis, and shown over HTTP as `payload_base64`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use hourglass_test_support::hourglass::Hourglass;
use hourglass_test_support::redis::Server;

use crate::{client, serve};

/// Bodies no text field could hold: every byte value, NULs, a lone `\r\n`
/// inside, invalid UTF-8, and an empty one.
fn bodies() -> Vec<Vec<u8>> {
    vec![
        (0..=255).collect(),
        vec![0; 64],
        b"\r\nput 0 0 1 1\r\nx\r\n".to_vec(),
        vec![0xc3, 0x28, 0xa0, 0xa1, 0xe2, 0x28, 0xa1, 0xf0, 0x28, 0x8c, 0xbc],
        Vec::new(),
    ]
}

/// One connection to the front, reading replies as bytes.
struct Conn(BufReader<TcpStream>);

impl Conn {
    fn to(server: &Hourglass) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", server.beanstalk_port())).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Conn(BufReader::new(stream))
    }

    /// Sends `line` and `body` (if any), and reads the reply: its line and
    /// the body it carries, if it carries one.
    fn send(&mut self, line: &str, body: Option<&[u8]>) -> (String, Option<Vec<u8>>) {
        let mut out = format!("{line}\r\n").into_bytes();
        if let Some(body) = body {
            out.extend_from_slice(body);
            out.extend_from_slice(b"\r\n");
        }
        self.0.get_mut().write_all(&out).unwrap();
        let mut reply = String::new();
        self.0.read_line(&mut reply).unwrap();
        let words: Vec<&str> = reply.split_whitespace().collect();
        let carried = match words.as_slice() {
            ["RESERVED" | "FOUND", _, len] => Some(len.parse::<usize>().unwrap()),
            _ => None,
        };
        let body = carried.map(|len| {
            let mut body = vec![0; len + 2];
            self.0.read_exact(&mut body).unwrap();
            assert_eq!(&body[len..], b"\r\n", "a body ends with CRLF");
            body.truncate(len);
            body
        });
        (reply.trim_end().to_owned(), body)
    }

    fn put(&mut self, body: &[u8]) -> u64 {
        let (reply, _) = self.send(&format!("put 10 0 60 {}", body.len()), Some(body));
        reply.strip_prefix("INSERTED ").unwrap_or_else(|| panic!("put: {reply}")).parse().unwrap()
    }
}

/// Puts every body, then checks each by peek and over HTTP.
async fn put_and_peek(server: &Hourglass) -> Vec<(u64, Vec<u8>)> {
    let mut conn = Conn::to(server);
    let jobs: Vec<(u64, Vec<u8>)> = bodies().into_iter().map(|body| (conn.put(&body), body)).collect();
    peek_each(server, &jobs).await;
    jobs
}

async fn peek_each(server: &Hourglass, jobs: &[(u64, Vec<u8>)]) {
    let mut conn = Conn::to(server);
    let http = client(server, Duration::from_secs(10));
    for (id, body) in jobs {
        let (reply, peeked) = conn.send(&format!("peek {id}"), None);
        assert_eq!(reply, format!("FOUND {id} {}", body.len()));
        assert_eq!(peeked.as_deref(), Some(&body[..]), "job {id} peeked byte for byte");
        let shown = http.get(*id).await.unwrap();
        assert_eq!(shown.payload_bytes().unwrap(), *body, "job {id} over HTTP");
        assert!(shown.payload.is_none() && shown.payload_base64.is_some(), "job {id}: not JSON, so base64");
    }
}

/// Reserves every job: each body byte for byte, then deletes it.
fn reserve_each(server: &Hourglass, jobs: &[(u64, Vec<u8>)]) {
    let mut conn = Conn::to(server);
    for _ in jobs {
        let (reply, body) = conn.send("reserve-with-timeout 5", None);
        let id: u64 =
            reply.split_whitespace().nth(1).and_then(|id| id.parse().ok()).unwrap_or_else(|| panic!("{reply}"));
        let sent = &jobs.iter().find(|(job, _)| *job == id).expect("a job that was put").1;
        assert_eq!(body.as_ref(), Some(sent), "job {id} reserved byte for byte");
        assert_eq!(conn.send(&format!("delete {id}"), None).0, "DELETED");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_jobs_come_back_byte_for_byte_across_a_kill_9_and_restart() {
    let data = tempfile::tempdir().unwrap();
    let mut server = serve().data(data.path()).beanstalk().start();
    let jobs = put_and_peek(&server).await;
    server.kill();
    server.restart();
    peek_each(&server, &jobs).await;
    reserve_each(&server, &jobs);
    println!("{} binary jobs put, peeked and reserved byte for byte across a kill -9", jobs.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_jobs_come_back_byte_for_byte_on_redis() {
    let Some(redis) = Server::start() else { return };
    let server = serve().args(["--store", &redis.url()]).beanstalk().start();
    let jobs = put_and_peek(&server).await;
    reserve_each(&server, &jobs);
    println!("{} binary jobs put, peeked and reserved byte for byte on Redis", jobs.len());
}
