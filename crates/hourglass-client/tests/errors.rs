//! Errors are typed: the server's code, an unreachable server, an answer
//! that is not the API's; each keeps its cause.

use std::error::Error as _;

use hourglass_client::wire::{Lease, NewTask};
use hourglass_client::{Client, Error, StatusCode};
use hourglass_test_support::free_port;
use serde_json::value::RawValue;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::server::{within, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_s_errors_carry_its_codes() {
    let server = Server::start(Some("s3cret")).await;
    let client = server.client(Some("s3cret"));
    within("the test", async {
        let error = client.get(99).await.unwrap_err();
        assert!(matches!(&error, Error::Api { status: StatusCode::NOT_FOUND, code, message } if code == "not_found" && message == "no task 99"), "{error:?}");
        assert_eq!(error.to_string(), "404 not_found: no task 99");

        let id = client.enqueue("q", &NewTask::new(RawValue::from_string("1".into()).unwrap())).await.unwrap().value.id;
        let error = client.ack(id, Lease(0)).await.unwrap_err();
        assert_eq!((error.status(), error.code()), (Some(StatusCode::CONFLICT), Some("stale_lease")));

        let bad = NewTask { delay_ms: Some(1), run_at_ms: Some(1), ..NewTask::new(RawValue::from_string("1".into()).unwrap()) };
        let error = client.enqueue("q", &bad).await.unwrap_err();
        assert_eq!((error.status(), error.code()), (Some(StatusCode::BAD_REQUEST), Some("invalid")));
        assert!(error.to_string().contains("give delay_ms or run_at_ms, not both"), "{error}");

        let error = client.enqueue("bad name", &bad).await.unwrap_err();
        assert_eq!(error.code(), Some("invalid"), "{error}");

        let stranger = server.client(None);
        assert_eq!(stranger.queues().await.unwrap_err().code(), Some("unauthorized"));
        assert!(!stranger.has_token() && client.has_token());
    })
    .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_listening_is_unreachable_with_its_cause() {
    let url = format!("http://127.0.0.1:{}", free_port());
    let client = Client::new(&url, None);
    let error = within("a refused connection", client.healthz()).await.unwrap_err();
    assert!(matches!(&error, Error::Unreachable { url: at, .. } if at == &format!("{url}/healthz")), "{error:?}");
    assert!(error.source().is_some(), "the transport's error is kept");
    assert_eq!((error.code(), error.status()), (None, None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_is_not_the_api_s_is_a_decode_error() {
    // A server that answers everything with a page of HTML.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", free_port())).await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let served = tokio::spawn(async move {
        for _ in 0..2 {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request).await.unwrap();
            let body = "<html>a proxy</html>";
            let answer = format!(
                "HTTP/1.1 502 Bad Gateway\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(answer.as_bytes()).await.unwrap();
        }
    });
    let client = Client::new(&url, None);
    let error = within("the answer", client.healthz()).await.unwrap_err();
    match &error {
        Error::Decode { status, body, .. } => {
            assert_eq!((*status, body.as_str()), (StatusCode::BAD_GATEWAY, "<html>a proxy</html>"))
        }
        other => panic!("{other:?}"),
    }
    assert!(error.source().is_some_and(|source| source.is::<serde_json::Error>()));
    assert_eq!(error.status(), Some(StatusCode::BAD_GATEWAY));
    let error = within("the second answer", client.queues()).await.unwrap_err();
    assert!(matches!(error, Error::Decode { .. }), "{error:?}");
    within("the fake server's end", served).await.unwrap();
}
