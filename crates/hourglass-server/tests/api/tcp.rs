//! One test over real TCP: a waiting consumer gets a delayed task.

use std::sync::Arc;

use hourglass_embedded::{Engine, Options, RedbStore};
use hourglass_queue::Limits;
use hourglass_server::AppState;

use super::within;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_to_end_over_tcp_with_a_waiting_consumer() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    let engine = Engine::open(Box::new(store), Options::default(), Arc::new(hourglass_queue::SystemWallClock)).unwrap();
    let timers = engine.start_timers().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let state = AppState::new(engine, None);
    let server = tokio::spawn(hourglass_server::serve(
        listener,
        state,
        Limits::DEFAULT_PAYLOAD_BYTES_MAX,
        Default::default(),
        async {
            let _ = stopped.await;
        },
    ));

    let http = |method: &'static str, path: String, body: String| async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
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
    stop.send(()).unwrap();
    within("the server's shutdown", server).await.unwrap().unwrap();
    within("the timer thread's end", tokio::task::spawn_blocking(move || timers.join())).await.unwrap().unwrap();
}
