//! Refused targets never reach the receiver: an IP literal on loopback, the
//! same in its other spellings, `localhost`, and a name whose resolver
//! answers a loopback address; the allow list opens them.

use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use hourglass_push::outbound::Lookup;
use hourglass_push::{AllowList, Outcome, PushClient};

use crate::outcomes::{delivery, post};
use hourglass_test_support::receiver::Receiver;

/// A resolver that answers 127.0.0.1 for every name, as a rebinding DNS
/// server would once the check it hoped for had passed.
pub struct Loopback;

impl Lookup for Loopback {
    fn lookup(&self, _: &str) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>> {
        Box::pin(async { Ok(vec![IpAddr::from([127, 0, 0, 1])]) })
    }
}

fn client(allow: AllowList) -> PushClient {
    PushClient::builder().allow(allow).lookup(Arc::new(Loopback)).build().expect("a client")
}

fn dead_reason(outcome: Outcome) -> String {
    match outcome {
        Outcome::Dead { reason } => reason.into(),
        other => panic!("not dead: {other:?}"),
    }
}

#[tokio::test]
async fn a_target_on_loopback_never_reaches_the_receiver_without_the_allow_list() {
    let receiver = Receiver::start().await;
    let port = receiver.addr.port();
    let strict = client(AllowList::none());
    for url in [
        format!("http://127.0.0.1:{port}/ok"),
        format!("http://127.1:{port}/ok"),
        format!("http://2130706433:{port}/ok"),
        format!("http://[::ffff:127.0.0.1]:{port}/ok"),
    ] {
        let reason = dead_reason(strict.send(&delivery(post(&url))).await.outcome);
        assert!(
            reason.contains("is a loopback address, and the host is not on the push allow list"),
            "{url}: {reason}"
        );
    }
    let reason = dead_reason(strict.send(&delivery(post(&format!("http://localhost:{port}/ok")))).await.outcome);
    assert_eq!(
        reason,
        "target refused: localhost names a loopback address, and the host is not on the push allow list"
    );
    assert_eq!(receiver.requests(), 0, "nothing refused reached the receiver");
}

#[tokio::test]
async fn a_name_that_resolves_to_loopback_is_refused_at_the_connection() {
    let receiver = Receiver::start().await;
    let url = format!("http://rebind.test:{}/ok", receiver.addr.port());
    // No check before the request can know: the name is not an address.
    let strict = client(AllowList::none());
    assert_eq!(strict.outbound().check_url(&url.parse().unwrap()), Ok(()));
    let reason = dead_reason(strict.send(&delivery(post(&url))).await.outcome);
    assert_eq!(
        reason,
        "target refused: rebind.test resolves to 127.0.0.1, a loopback address, and the host is not on the push allow list"
    );
    assert_eq!(receiver.requests(), 0);
}

#[tokio::test]
async fn the_allow_list_opens_its_hosts_and_ports_only() {
    let receiver = Receiver::start().await;
    let port = receiver.addr.port();
    let allowed = client(AllowList::parse([format!("127.0.0.1:{port}"), format!("rebind.test:{port}")]).unwrap());
    for url in [format!("http://127.0.0.1:{port}/ok"), format!("http://rebind.test:{port}/ok")] {
        assert_eq!(allowed.send(&delivery(post(&url))).await.outcome, Outcome::Done, "{url}");
    }
    assert_eq!(receiver.requests(), 2);
    // The same hosts on another port are not opened.
    let other = format!("http://rebind.test:{}/ok", port.wrapping_add(1).max(1));
    assert!(dead_reason(allowed.send(&delivery(post(&other))).await.outcome).contains("refused"));
    let any = client(AllowList::any());
    assert_eq!(any.send(&delivery(post(&receiver.url("/ok")))).await.outcome, Outcome::Done);
    assert_eq!(receiver.requests(), 3);
}
