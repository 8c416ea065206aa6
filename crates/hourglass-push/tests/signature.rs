//! The signature a receiver gets, checked by another implementation of
//! HMAC-SHA256: Python's `hmac` module, under each of two keys.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;

use hourglass_push::{AllowList, Outcome, PushClient, SigningKeys};
use hourglass_queue::ManualWallClock;

use crate::outcomes::{delivery, post, NOW_MS};
use hourglass_test_support::receiver::Receiver;

const OLD_KEY: &str = "old-signing-key-0123456789";
const NEW_KEY: &str = "new-signing-key-abcdefghij";

/// Reads the body on stdin and prints, one a line, the hex HMAC-SHA256 of
/// `<t>.` and the body under each key given after `t`.
const PYTHON: &str = r#"
import hashlib, hmac, sys
body = sys.stdin.buffer.read()
t = sys.argv[1]
for key in sys.argv[2:]:
    print(hmac.new(key.encode(), t.encode() + b"." + body, hashlib.sha256).hexdigest())
"#;

fn python_signatures(t: &str, body: &[u8], keys: &[&str]) -> Vec<String> {
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(PYTHON)
        .arg(t)
        .args(keys)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child.stdin.take().expect("stdin").write_all(body).expect("write the body");
    let out = child.wait_with_output().expect("python3 ends");
    assert!(out.status.success(), "python3 failed: {out:?}");
    String::from_utf8(out.stdout).expect("hex").lines().map(str::to_owned).collect()
}

#[tokio::test]
async fn pythons_hmac_verifies_both_keys_signatures() {
    if !hourglass_test_support::required("python3", &["--version"]) {
        return;
    }
    let receiver = Receiver::start().await;
    let client = PushClient::builder()
        .allow(AllowList::parse([receiver.host_port()]).unwrap())
        .keys(SigningKeys::parse_list(&format!("{OLD_KEY},{NEW_KEY}")).unwrap())
        .clock(Arc::new(ManualWallClock::at_ms(NOW_MS)))
        .build()
        .unwrap();
    let outcome = client.send(&delivery(post(&receiver.url("/ok")))).await.outcome;
    assert_eq!(outcome, Outcome::Done);

    let got = receiver.got().pop().expect("a request");
    let header = got.headers["hourglass-signature"].to_str().unwrap().to_owned();
    let mut parts = header.split(',');
    let t = parts.next().and_then(|p| p.strip_prefix("t=")).expect("t= first");
    assert_eq!(t, NOW_MS.to_string());
    let v1: Vec<&str> = parts.map(|p| p.strip_prefix("v1=").expect("then v1=")).collect();
    assert_eq!(v1, python_signatures(t, &got.body, &[OLD_KEY, NEW_KEY]));
    // A receiver holding only one of the keys finds its own among them.
    assert!(v1.contains(&python_signatures(t, &got.body, &[NEW_KEY])[0].as_str()));
    assert!(!v1.contains(&python_signatures(t, &got.body, &["some-other-key-0123456789"])[0].as_str()));
}
