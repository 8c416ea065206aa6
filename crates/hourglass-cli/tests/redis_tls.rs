//! Redis over TLS (`rediss://`, `rediss+cluster://`) with `--redis-ca`:
//! Debian's `redis-server` 7.0 is built with TLS, so one Redis (with a
//! password too) and a Cluster of three, TLS only on clients and the bus,
//! serve a round trip; a certificate not trusted and an authority given for
//! a Redis in clear are refused at start.

use std::path::PathBuf;

use hourglass_client::wire::ClaimRequest;
use hourglass_test_support::certs::Authority;
use hourglass_test_support::hourglass::Hourglass;
use hourglass_test_support::redis::{Cluster, Server};

use crate::store::until_health;
use crate::{client, serve, serve_to_end, Seq};

const PASSWORD: &str = "tls-pw-that-must-not-be-logged";
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// The authority that signs the Redis's certificates, in a file.
fn authority() -> (tempfile::TempDir, Authority, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new("redis test authority");
    let ca = authority.write(dir.path(), "ca.pem");
    (dir, authority, ca)
}

/// Once `node` has joined its store, a task enqueued on it is claimed back.
async fn round_trip(node: &Hourglass, queue: &str) {
    until_health(node, 200).await;
    let client = client(node, PATIENCE);
    let id = client.enqueue(queue, &Seq::task(1, 0)).await.expect("enqueued over TLS").value.id;
    let claim = ClaimRequest { max: Some(1), wait_ms: Some(10_000), ..ClaimRequest::default() };
    let claimed = client.claim(queue, &claim).await.expect("claimed over TLS");
    assert_eq!(claimed.tasks.iter().map(|task| task.id).collect::<Vec<_>>(), [id]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_redis_over_tls_with_a_password_serves_a_round_trip() {
    let (_dir, authority, ca) = authority();
    let Some(redis) = Server::with_tls(&authority, Some(PASSWORD)) else { return };
    assert!(redis.url().starts_with("rediss://:"), "{}", redis.url());
    let node = serve().args(["--store", &redis.url(), "--redis-ca"]).arg(&ca).start();
    round_trip(&node, "tls-one").await;
    let logs = node.stderr();
    assert!(!logs.contains(PASSWORD), "the password is in the logs:\n{logs}");
    assert!(logs.contains("rediss://:***@127.0.0.1:"), "the store, its password masked:\n{logs}");
    println!("{}: served over TLS; logs without the password", redis.url().replace(PASSWORD, "***"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_over_tls_serves_a_round_trip() {
    let (_dir, authority, ca) = authority();
    let Some(cluster) = Cluster::with_tls(&authority) else { return };
    assert!(cluster.url().starts_with("rediss+cluster://"), "{}", cluster.url());
    let node = serve().args(["--store", &cluster.url(), "--redis-ca"]).arg(&ca).start();
    round_trip(&node, "tls-cluster").await;
    println!("{}: served over TLS", cluster.url());
}

#[test]
fn a_certificate_not_trusted_and_an_authority_for_a_redis_in_clear_are_refused_at_start() {
    let (_dir, authority, ca) = authority();
    let Some(redis) = Server::with_tls(&authority, Some(PASSWORD)) else { return };
    // Without --redis-ca, the system's authorities do not know this one; at
    // once, not after --store-wait.
    let (code, stderr) = serve_to_end(["--store", &redis.url(), "--store-wait", "10m"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("is not trusted: invalid peer certificate"), "{stderr}");
    assert!(!stderr.contains(PASSWORD), "{stderr}");

    let Some(plain) = Server::start() else { return };
    let (code, stderr) = serve_to_end(["--store", &plain.url(), "--redis-ca", ca.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("certificate authorities are for a Redis over TLS"), "{stderr}");
    let (code, stderr) = serve_to_end(["--store", &redis.url(), "--redis-ca", "/nonexistent/ca.pem"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("--redis-ca: cannot read /nonexistent/ca.pem"), "{stderr}");
}
