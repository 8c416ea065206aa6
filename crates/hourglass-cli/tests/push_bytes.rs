//! Payloads of any bytes pushed through the real binary to a real receiver,
//! on the embedded store and on Redis: each request's body is the payload's
//! bytes exactly, its `Content-Type` says `application/json` for JSON text
//! and `application/octet-stream` for anything else (decided by the bytes,
//! however they were enqueued), and its signature is over those bytes.
//! The request itself is unit-tested in `hourglass-push` (and the signature
//! checked there against Python's `hmac`); this is the way there from an
//! HTTP enqueue, through each store.

use std::collections::HashMap;
use std::time::Duration;

use hourglass_client::wire::{HttpTarget, NewTask, PushTarget, QueueSettings};
use hourglass_push::{SigningKeys, VerifyError};
use hourglass_test_support::hourglass::Hourglass;
use hourglass_test_support::receiver::Receiver;
use hourglass_test_support::redis::Server;
use hourglass_test_support::within_async;
use serde_json::value::RawValue;

use crate::{client, serve};

const KEY: &str = "a-signing-key-of-the-test";
const WAIT: Duration = Duration::from_secs(30);
const JSON: &str = "application/json";
const BYTES: &str = "application/octet-stream";

/// Every byte value, then invalid UTF-8 of each kind: a lone continuation
/// byte, a truncated sequence, an overlong encoding, a surrogate, a byte no
/// UTF-8 holds.
fn every_byte() -> Vec<u8> {
    let mut bytes: Vec<u8> = (0..=255).collect();
    bytes.extend_from_slice(&[0x80, 0xe2, 0x82, 0xc0, 0xaf, 0xed, 0xa0, 0x80, 0xff]);
    assert!(std::str::from_utf8(&bytes).is_err());
    bytes
}

/// A task to enqueue, and what its push must carry.
struct Case {
    queue: &'static str,
    what: &'static str,
    task: NewTask,
    body: Vec<u8>,
    content_type: &'static str,
}

fn cases(receiver: &Receiver) -> Vec<Case> {
    let json = r#"{"order": 42, "note": "héllo ⏳", "items": [1, 2.5, null]}"#;
    let own_target = HttpTarget { url: receiver.url("/ok"), method: None, headers: Default::default() };
    vec![
        Case {
            queue: "hooks",
            what: "every byte, as payload_base64",
            task: NewTask::bytes(&every_byte()),
            body: every_byte(),
            content_type: BYTES,
        },
        Case {
            queue: "hooks",
            what: "JSON, as payload (its spaces kept)",
            task: NewTask::new(RawValue::from_string(json.into()).unwrap()),
            body: json.into(),
            content_type: JSON,
        },
        Case {
            queue: "hooks",
            what: "UTF-8 text that is not JSON, as payload_base64",
            task: NewTask::bytes("héllo, not JSON".as_bytes()),
            body: "héllo, not JSON".into(),
            content_type: BYTES,
        },
        Case {
            queue: "hooks",
            what: "JSON text, as payload_base64",
            task: NewTask::bytes(br#"{"via":"base64"}"#),
            body: br#"{"via":"base64"}"#.to_vec(),
            content_type: JSON,
        },
        Case {
            queue: "own",
            what: "every byte, to a target of its own",
            task: NewTask { http: Some(own_target), ..NewTask::bytes(&every_byte()) },
            body: every_byte(),
            content_type: BYTES,
        },
    ]
}

/// Enqueues every case over HTTP on `server` (queue `hooks` pushing to the
/// receiver, queue `own` by each task's own target) and checks what the
/// receiver got: each task once, its body, type and signature.
async fn pushes_arrive_byte_for_byte(server: &Hourglass, receiver: &Receiver) {
    let client = client(server, WAIT);
    let push = PushTarget { url: receiver.url("/ok"), method: None, headers: Default::default(), timeout_ms: None };
    client.put_settings("hooks", &QueueSettings { push: Some(push), ..QueueSettings::default() }).await.unwrap();
    let mut sent = HashMap::new();
    for case in cases(receiver) {
        let id = client.enqueue(case.queue, &case.task).await.unwrap().value.id;
        sent.insert(id, case);
    }

    within_async(WAIT, "every task pushed and acked", async || {
        let mut gone = true;
        for &id in sent.keys() {
            gone &= client.get(id).await.is_err();
        }
        gone
    })
    .await;
    let keys = SigningKeys::parse_list(KEY).unwrap();
    let got = receiver.got();
    assert_eq!(got.len(), sent.len(), "each task once");
    for got in got {
        let header = |name| got.headers[name].to_str().unwrap().to_owned();
        let id: u64 = header("hourglass-task-id").parse().unwrap();
        let case = &sent[&id];
        assert_eq!(got.body.as_ref(), case.body.as_slice(), "{}: the body is the payload's bytes", case.what);
        assert_eq!(header("content-type"), case.content_type, "{}", case.what);
        // The signature's own time stands for now: what is checked here is
        // what it covers, not how fresh it is.
        let signature = header("hourglass-signature");
        let t_ms: u64 = signature.strip_prefix("t=").and_then(|s| s.split(',').next()).unwrap().parse().unwrap();
        assert_eq!(keys.verify(&signature, &got.body, t_ms, 0), Ok(()), "{}: {signature}", case.what);
        let mut changed = got.body.to_vec();
        changed[case.body.len() / 2] ^= 1;
        assert_eq!(keys.verify(&signature, &changed, t_ms, 0), Err(VerifyError::NoMatch), "{}", case.what);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_are_pushed_as_sent_on_the_embedded_store() {
    let receiver = Receiver::start().await;
    let data = tempfile::tempdir().unwrap();
    let server =
        serve().data(data.path()).args(["--push-allow", &receiver.host_port(), "--push-signing-key", KEY]).start();
    pushes_arrive_byte_for_byte(&server, &receiver).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_are_pushed_as_sent_on_redis() {
    let Some(redis) = Server::start() else { return };
    let receiver = Receiver::start().await;
    let server = serve()
        .args(["--store", &redis.url(), "--push-allow", &receiver.host_port(), "--push-signing-key", KEY])
        .start();
    // As push_flow's nodes on Redis: an error while the server hands its
    // socket from its waiting answers to the API's is a "not yet".
    within_async(WAIT, "the server reached its Redis", async || client(&server, WAIT).healthz().await.is_ok()).await;
    pushes_arrive_byte_for_byte(&server, &receiver).await;
}
