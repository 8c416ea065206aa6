//! A node and its Redis out of reach: started before its Redis, it says what
//! it waits for (its log, and `/healthz` with 503 and the reason), answers
//! requests 503 `store_unavailable`, and joins once Redis is up; past
//! `--store-wait` it exits with the error; Redis killed under it and started
//! again, it says so meanwhile and comes back by itself. Redis is started
//! here on a free port.

use std::process::{Command, Stdio};
use std::time::Duration;

use hourglass_client::wire::{ClaimRequest, Health};
use hourglass_client::Client;
use hourglass_test_support::hourglass::Hourglass;
use hourglass_test_support::redis::Server;
use hourglass_test_support::{free_port, within, within_async};

use crate::{client, serve, Seq};

/// Generous: a node finds Redis gone, or back, at its next heartbeat (a
/// third of a shard lease) or request.
const NOTICED_WITHIN: Duration = Duration::from_secs(30);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// `GET /healthz`: its status and answer.
async fn health(node: &Hourglass) -> (u16, Health) {
    try_health(node).await.unwrap_or_else(|error| panic!("no answer from /healthz: {error}"))
}

async fn try_health(node: &Hourglass) -> Result<(u16, Health), reqwest::Error> {
    let http = reqwest::Client::builder().timeout(REQUEST_TIMEOUT).build().unwrap();
    let answer = http.get(format!("{}/healthz", node.url())).send().await?;
    let status = answer.status().as_u16();
    let body = answer.text().await?;
    Ok((status, serde_json::from_str(&body).unwrap_or_else(|error| panic!("{body}: {error}"))))
}

/// A claim's error code, or `ok`.
async fn claim_code(client: &Client) -> String {
    let claim = ClaimRequest { max: Some(10), wait_ms: Some(0), ..ClaimRequest::default() };
    match client.claim("outage", &claim).await {
        Ok(_) => "ok".to_owned(),
        Err(error) => error.code().unwrap_or("no code").to_owned(),
    }
}

/// Waits until `/healthz` answers `status`.
pub(crate) async fn until_health(node: &Hourglass, status: u16) {
    within_async(NOTICED_WITHIN, &format!("/healthz answers {status}"), async || match try_health(node).await {
        Ok((now, _)) => now == status,
        Err(error) => {
            println!("no answer from /healthz: {error}");
            false
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_started_before_its_redis_says_what_it_waits_for_then_joins() {
    let Some(mut redis) = Server::not_started() else { return };
    let node = serve().args(["--store", &redis.url()]).start();
    let (status, answer) = health(&node).await;
    assert_eq!(status, 503, "{answer:?}");
    assert_eq!(answer.status, "store_unavailable");
    let reason = answer.reason.expect("a reason");
    assert!(reason.contains(&redis.url()), "the address: {reason}");
    let client = client(&node, REQUEST_TIMEOUT);
    assert_eq!(claim_code(&client).await, "store_unavailable");
    within(NOTICED_WITHIN, "the log says what the node waits for", || {
        node.stderr().lines().any(|line| line.contains("cannot reach the store") && line.contains(&redis.url()))
    });
    let (_, answer) = health(&node).await;
    assert!(answer.reason.as_deref().is_some_and(|reason| reason.contains("refused")), "the error: {answer:?}");
    println!("waiting for redis: {}", answer.reason.unwrap());

    redis.restart();
    until_health(&node, 200).await;
    let id = client.enqueue("outage", &Seq::task(1, 0)).await.expect("an enqueue once joined").value.id;
    let request = ClaimRequest { max: Some(10), wait_ms: Some(10_000), ..ClaimRequest::default() };
    let claimed = client.claim("outage", &request);
    assert_eq!(claimed.await.unwrap().tasks.iter().map(|task| task.id).collect::<Vec<_>>(), [id]);
}

#[test]
fn a_node_whose_redis_never_comes_exits_after_store_wait_with_the_error() {
    let nowhere = format!("redis://127.0.0.1:{}", free_port());
    let mut node = Command::new(env!("CARGO_BIN_EXE_hourglass"))
        .args(["serve", "--listen", "127.0.0.1:0", "--store", &nowhere, "--store-wait", "1s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start hourglass");
    let mut status = None;
    within(NOTICED_WITHIN, "the node gives up", || {
        status = node.try_wait().expect("its status");
        status.is_some()
    });
    let status = status.unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut node.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "{status}");
    assert!(stderr.contains("cannot reach the store"), "the log line: {stderr}");
    let error = stderr.lines().find(|line| line.starts_with("error: ")).unwrap_or_else(|| panic!("{stderr}"));
    let gave_up = format!("error: cannot use the store {nowhere} (waited 1s for it: --store-wait): cannot reach redis");
    assert!(error.starts_with(&gave_up), "{error}");
    assert_eq!(error.matches("refused").count(), 1, "the cause, once: {error}");
    println!("{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_and_started_again_under_a_running_node() {
    let Some(mut redis) = Server::start() else { return };
    let node = serve().args(["--store", &redis.url()]).start();
    until_health(&node, 200).await;
    let client = client(&node, REQUEST_TIMEOUT);
    let id = client.enqueue("outage", &Seq::task(1, 0)).await.unwrap().value.id;

    redis.kill();
    until_health(&node, 503).await;
    let (_, answer) = health(&node).await;
    assert!(answer.reason.as_deref().is_some_and(|reason| reason.contains(&redis.url())), "{answer:?}");
    assert_eq!(claim_code(&client).await, "store_unavailable");
    let error = client.enqueue("outage", &Seq::task(2, 0)).await.expect_err("no enqueue without redis");
    assert_eq!(error.code(), Some("store_unavailable"), "{error}");

    redis.restart();
    until_health(&node, 200).await;
    let claim = ClaimRequest { max: Some(10), wait_ms: Some(10_000), ..ClaimRequest::default() };
    let claimed = client.claim("outage", &claim).await.expect("a claim once redis is back");
    assert_eq!(claimed.tasks.iter().map(|task| task.id).collect::<Vec<_>>(), [id], "kept by its append-only file");
    let log = node.stderr();
    assert!(log.contains("cannot reach the store") && log.contains("the store answers again"), "{log}");
}

/// A Redis that requires a password, then one whose only user is an ACL
/// user: the node joins with the URL's credentials, serves a round trip, and
/// never writes the password in its logs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_with_a_password_and_with_an_acl_user() {
    const PASSWORD: &str = "pw-that-must-not-be-logged";
    let servers = [Server::with_password(PASSWORD), Server::with_acl_user("hourglass", PASSWORD)];
    for redis in servers.into_iter().flatten() {
        assert!(redis.url().contains(PASSWORD), "the URL carries the password");
        let node = serve().args(["--store", &redis.url()]).start();
        until_health(&node, 200).await;
        let client = client(&node, REQUEST_TIMEOUT);
        let id =
            client.enqueue("auth", &Seq::task(7, 0)).await.expect("enqueued on a Redis that requires auth").value.id;
        let claim = ClaimRequest { max: Some(1), wait_ms: Some(10_000), ..ClaimRequest::default() };
        let claimed = client.claim("auth", &claim).await.expect("claimed");
        assert_eq!(claimed.tasks.iter().map(|task| task.id).collect::<Vec<_>>(), [id], "the task enqueued is claimed");
        let logs = node.stderr();
        assert!(!logs.contains(PASSWORD), "the password is in the logs:\n{logs}");
        println!("{}: served; logs without the password ({} bytes)", redis.url().replace(PASSWORD, "***"), logs.len());
    }
}

/// A wrong password, and an unknown user, are refused at start with a clear
/// error, at once rather than after `--store-wait`, and the password given
/// is not shown.
#[test]
fn a_wrong_password_is_refused_at_start_without_showing_it() {
    const WRONG: &str = "wrong-pw-that-must-not-be-shown";
    let Some(redis) = Server::with_password("the-right-one") else { return };
    let port = redis.port;
    for url in [format!("redis://:{WRONG}@127.0.0.1:{port}"), format!("redis://nobody:{WRONG}@127.0.0.1:{port}")] {
        let (code, stderr) = crate::serve_to_end(["--store", &url, "--store-wait", "10m"]);
        assert_eq!(code, Some(1), "{stderr}");
        assert!(stderr.contains("refused the user and password of the URL"), "{stderr}");
        assert!(!stderr.contains(WRONG), "the password is shown:\n{stderr}");
        println!("{}", stderr.trim());
    }
}
