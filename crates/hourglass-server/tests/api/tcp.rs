//! Over real TCP: a waiting consumer gets a delayed task, and a body that
//! misses its deadline is answered 408.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hourglass_embedded::{Engine, Options, RedbStore, TimerThread};
use hourglass_queue::Limits;
use hourglass_server::{AppState, Connections};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::within;

/// A server over an embedded engine on real time, on a port of its own.
struct Served {
    _dir: tempfile::TempDir,
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    server: JoinHandle<std::io::Result<()>>,
    timers: TimerThread,
}

async fn start(connections: Connections) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    let engine = Engine::open(Box::new(store), Options::default(), Arc::new(hourglass_queue::SystemWallClock)).unwrap();
    let timers = engine.start_timers().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let state = AppState::new(engine, None);
    let server =
        tokio::spawn(hourglass_server::serve(listener, state, Limits::DEFAULT_PAYLOAD_BYTES_MAX, connections, async {
            let _ = stopped.await;
        }));
    Served { _dir: dir, addr, stop, server, timers }
}

impl Served {
    async fn stop(self) {
        self.stop.send(()).unwrap();
        within("the server's shutdown", self.server).await.unwrap().unwrap();
        let timers = self.timers;
        within("the timer thread's end", tokio::task::spawn_blocking(move || timers.join())).await.unwrap().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_to_end_over_tcp_with_a_waiting_consumer() {
    let served = start(Connections::default()).await;
    let addr = served.addr;

    let http = |method: &'static str, path: String, body: String| async move {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!(
            "{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        (head.split(' ').nth(1).unwrap().parse::<u16>().unwrap(), body.to_owned())
    };
    // A consumer waits; a task due in 300 ms must reach it soon after.
    let consumer = tokio::spawn(http("POST", "/v1/queues/e2e/claim".into(), r#"{"wait_ms":10000}"#.into()));
    let sent = std::time::Instant::now();
    let enqueue = http("POST", "/v1/queues/e2e/tasks".into(), r#"{"payload":"hi","delay_ms":300}"#.into());
    let (status, _) = within("the enqueue", enqueue).await;
    assert_eq!(status, 201);
    let (status, body) = within("the waiting claim", consumer).await.unwrap();
    let waited = sent.elapsed();
    println!("e2e: the waiting consumer got the task {waited:?} after it was sent with a 300 ms delay");
    assert_eq!(status, 200);
    assert!(body.contains(r#""payload":"hi""#), "{body}");
    assert!(waited >= std::time::Duration::from_millis(300), "delivered early: {waited:?}");
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_misses_its_deadline_is_answered_408() {
    let body_timeout = Duration::from_millis(300);
    let served = start(Connections { body_timeout, ..Connections::default() }).await;
    let mut stream = tokio::net::TcpStream::connect(served.addr).await.unwrap();
    let head = "POST /v1/queues/slow/tasks HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n";
    // Before the head is sent: the server's deadline starts once it has read
    // the head, so no preemption of this thread can make it look early.
    let sent = Instant::now();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(br#"{"payl"#).await.unwrap();
    let mut response = String::new();
    within("the answer to a body that stopped", stream.read_to_string(&mut response)).await.unwrap();
    println!("a body that stopped was answered after {:?} (body timeout {body_timeout:?})", sent.elapsed());
    assert!(response.starts_with("HTTP/1.1 408 "), "{response}");
    assert!(response.contains(r#""code":"request_timeout""#), "{response}");
    assert!(sent.elapsed() >= body_timeout, "answered before the deadline");
    served.stop().await;
}
