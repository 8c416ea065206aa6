//! Flow control across nodes: a cap on tasks in flight and a rate hold for
//! every node's claims together, and a slot freed on one node wakes a claim
//! waiting on another.

use std::sync::Arc;

use hourglass_queue::prelude::*;
use hourglass_queue::{Claim, Flow, HttpTarget, NewTask, PushTarget, QueueSettings, RunAt};
use hourglass_test_support::redis::Server;

use super::node;

const LEASE_MS: u64 = 60_000;
const WAIT_MS: u64 = 20_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cap_holds_across_nodes_and_a_freed_slot_wakes_another_node_s_claim() {
    let Some(server) = Server::start() else { return };
    let (a, b) = (node(&server.url(), 2_000).await, node(&server.url(), 2_000).await);
    let flow = Flow { max_in_flight: Some(3), ..Flow::default() };
    a.put_settings("capped", QueueSettings { push: None, flow }).await.unwrap();
    assert_eq!(b.settings("capped").await.unwrap().flow, flow, "the other node reads them");
    for _ in 0..6 {
        a.enqueue("capped", NewTask::new("{}", RunAt::Delay(0))).await.unwrap();
    }
    let on_a = a.claim("capped", 2, LEASE_MS, WAIT_MS).await.unwrap();
    let on_b = b.claim("capped", 10, LEASE_MS, WAIT_MS).await.unwrap();
    assert_eq!((on_a.len(), on_b.len()), (2, 1), "three in flight over both nodes");
    assert!(a.claim("capped", 10, LEASE_MS, 0).await.unwrap().is_empty());
    assert!(b.claim("capped", 10, LEASE_MS, 0).await.unwrap().is_empty());
    let free = async {
        a.ack(on_a[0].id, on_a[0].lease).await.unwrap();
    };
    let (woken, ()) = tokio::join!(b.claim("capped", 10, LEASE_MS, WAIT_MS), free);
    assert_eq!(woken.unwrap().len(), 1, "the slot freed on one node is taken on the other");
    // Push deliveries share the cap with pulls.
    let push = Arc::new(PushTarget::new(HttpTarget::post("https://example.com/h")));
    a.enqueue(
        "capped",
        NewTask { http: Some(HttpTarget::post("https://example.com/own")), ..NewTask::new("{}", RunAt::Delay(0)) },
    )
    .await
    .unwrap();
    assert!(b.claim_from(Claim::push(10, 0).unwrap()).await.unwrap().is_empty(), "the cap is full");
    a.ack(on_a[1].id, on_a[1].lease).await.unwrap();
    let pushed = b.claim_from(Claim::push(10, WAIT_MS).unwrap()).await.unwrap();
    assert_eq!(pushed.len(), 1);
    assert_eq!(pushed[0].target.as_ref().unwrap().http.url.as_ref(), "https://example.com/own");
    a.put_settings("capped", QueueSettings { push: Some(push), flow: Flow::default() }).await.unwrap();
    assert!(a.claim("capped", 10, LEASE_MS, 0).await.unwrap().is_empty(), "a queue that pushes is not pulled");
    let rest = b.claim_from(Claim::push(10, WAIT_MS).unwrap()).await.unwrap();
    assert!(!rest.is_empty() && rest.iter().all(|task| task.target.is_some()));
    a.close();
    b.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_is_one_bucket_for_every_node() {
    let Some(server) = Server::start() else { return };
    let (a, b) = (node(&server.url(), 2_000).await, node(&server.url(), 2_000).await);
    let flow = Flow { rate_per_s: Some(0.01), burst: Some(4), max_in_flight: None };
    a.put_settings("slow", QueueSettings { push: None, flow }).await.unwrap();
    for _ in 0..10 {
        a.enqueue("slow", NewTask::new("{}", RunAt::Delay(0))).await.unwrap();
    }
    let on_a = a.claim("slow", 3, LEASE_MS, WAIT_MS).await.unwrap().len();
    let on_b = b.claim("slow", 10, LEASE_MS, WAIT_MS).await.unwrap().len();
    assert_eq!((on_a, on_b), (3, 1), "the burst of four, shared");
    assert_eq!(
        a.claim("slow", 10, LEASE_MS, 0).await.unwrap().len() + b.claim("slow", 10, LEASE_MS, 0).await.unwrap().len(),
        0
    );
    a.close();
    b.close();
}
