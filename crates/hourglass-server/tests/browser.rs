//! The dashboard in a real browser: Chromium (and Firefox where it is
//! installed), driven through WebDriver by fantoccini, against a server on a
//! free port with a token.
//!
//! It checks that a wrong token gets nothing, opens the overview and sees a
//! queue made through the API with the right counts, opens a dead task (its
//! last error, its payload) and retries it, sees the counts change without a
//! reload, pauses and resumes the queue, searches by key and by id, opens a
//! task whose payload is bytes that are not JSON (its size and a hex dump),
//! and looks at a phone-sized window. Its backend says several nodes share
//! the store: the page shows them, and how fresh the counters are. Screenshots go to `target/screenshots/`.
//!
//! Chromium and chromedriver come from Debian's `chromium` and
//! `chromium-driver` (`.ci/run` installs them). Where they are missing the
//! test says so and passes, except in CI (`CI=true`), where it fails. Firefox
//! runs where `firefox-esr` and `geckodriver` are on the PATH.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use fantoccini::{Client, ClientBuilder, Locator};
use hourglass_embedded::{Engine, Options, RedbStore};
use hourglass_queue::prelude::*;
use hourglass_queue::{Nack, NewTask, RunAt, SystemWallClock, WallClock};
use hourglass_server::AppState;
use hourglass_test_support::free_port;
use http_body_util::BodyExt;
use serde_json::json;
use tower::ServiceExt;

use crate::several_nodes::{node, SeveralNodes};

const TOKEN: &str = "browser-test-token";
/// A scoped token that reads the `orders` queue only.
const VIEWER_TOKEN: &str = "browser-test-viewer";
/// How long the page may take to show what a step waits for: generous, for
/// a loaded machine; the page itself refreshes every second.
const PATIENCE: Duration = Duration::from_secs(30);
/// How long a whole run in one browser may take, WebDriver's own calls
/// included: past it the test fails rather than hangs.
const DEADLINE: Duration = Duration::from_secs(300);

fn binary(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|dir| PathBuf::from(dir).join(name)).find(|path| path.is_file())
}

/// Kills chromedriver (and its browser) when the test ends, however it ends.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn screenshots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn shoot(browser: &Client, name: &str) {
    let path = screenshots().join(name);
    std::fs::write(&path, browser.screenshot().await.unwrap()).unwrap();
    println!("browser: screenshot {}", path.display());
}

/// Looks until `check` answers `Some`, or fails after [`PATIENCE`] with `what`.
async fn until<T, F: std::future::Future<Output = Option<T>>>(what: &str, mut check: impl FnMut() -> F) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "the page never showed {what} within {PATIENCE:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The text of the first element `css` selects, if any.
async fn text(browser: &Client, css: &str) -> Option<String> {
    browser.find(Locator::Css(css)).await.ok()?.text().await.ok()
}

async fn click(browser: &Client, css: &str) {
    // The page redraws itself every second: an element found just before a
    // redraw is stale by the click, which then did nothing. Find it again.
    until(css, || async { browser.find(Locator::Css(css)).await.ok()?.click().await.ok() }).await;
}

/// Waits until the element `css` selects reads `expected`.
async fn shows(browser: &Client, css: &str, expected: &str) {
    until(&format!("{css} = {expected:?}"), || async {
        (text(browser, css).await.as_deref() == Some(expected)).then_some(())
    })
    .await;
}

async fn sign_in(browser: &Client, token: &str) {
    let input = until("the token dialog", || async {
        let input = browser.find(Locator::Css("[data-test=token-input]")).await.ok()?;
        input.is_displayed().await.ok()?.then_some(input)
    })
    .await;
    input.send_keys(token).await.unwrap();
    click(browser, "[data-test=token-submit]").await;
}

/// `bytes` in standard base64 with padding (RFC 4648 §4), as the API takes
/// a payload that is not JSON.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut text = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let bits = chunk.iter().enumerate().fold(0u32, |bits, (i, &byte)| bits | (u32::from(byte) << (16 - 8 * i)));
        for i in 0..4 {
            let sextet = (bits >> (18 - 6 * i)) & 63;
            text.push(if i <= chunk.len() { char::from(ALPHABET[sextet as usize]) } else { '=' });
        }
    }
    text
}

/// Enqueues `bytes` into `queue` through the API, as `payload_base64`, due
/// in an hour: the new task's id.
async fn enqueue_bytes(app: &axum::Router, queue: &str, bytes: &[u8]) -> u64 {
    let body = json!({ "payload_base64": base64(bytes), "delay_ms": 3_600_000 }).to_string();
    let request = Request::post(format!("/v1/queues/{queue}/tasks"))
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .body(Body::from(body))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let answer = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(status, StatusCode::CREATED, "enqueue as base64: {}", String::from_utf8_lossy(&answer));
    serde_json::from_slice::<serde_json::Value>(&answer).unwrap()["id"].as_u64().unwrap()
}

/// Searches for `query` and waits for the task `id` it finds.
async fn search_for(browser: &Client, query: &str, id: u64) {
    let input = browser.find(Locator::Css("[data-test=search-text]")).await.unwrap();
    input.clear().await.unwrap();
    input.send_keys(query).await.unwrap();
    click(browser, "#search button").await;
    shows(browser, "[data-field=id]", &id.to_string()).await;
}

/// Opens the task `id` by searching for its id.
async fn search(browser: &Client, id: u64) {
    search_for(browser, &id.to_string(), id).await;
}

/// A browser and the WebDriver server that drives it.
struct Kind {
    name: &'static str,
    driver: PathBuf,
    /// Arguments of the driver, given a free port.
    driver_args: fn(u16) -> Vec<String>,
    capabilities: serde_json::Value,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_chromium() {
    let in_ci = std::env::var("CI").is_ok_and(|ci| ci == "true");
    let (Some(chromium), Some(chromedriver)) = (binary("chromium"), binary("chromedriver")) else {
        assert!(
            !in_ci,
            "CI=true and chromium or chromedriver is missing: .ci/run installs chromium and chromium-driver"
        );
        println!(
            "browser: SKIPPED, chromium or chromedriver is not installed (apt-get install chromium chromium-driver)"
        );
        return;
    };
    let capabilities = json!({
        "goog:chromeOptions": {
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"]
        }
    });
    let driver_args = |port: u16| vec![format!("--port={port}")];
    the_dashboard_in(Kind { name: "chromium", driver: chromedriver, driver_args, capabilities }).await;
}

/// The same in Firefox, where `firefox-esr` (Debian) and `geckodriver`
/// (`cargo install geckodriver`) are on the PATH; CI does not install them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_firefox() {
    let (Some(firefox), Some(geckodriver)) = (binary("firefox-esr").or(binary("firefox")), binary("geckodriver"))
    else {
        println!("browser: Firefox not run: firefox-esr or geckodriver is not on the PATH");
        return;
    };
    let capabilities = json!({
        "moz:firefoxOptions": { "binary": firefox, "args": ["-headless", "-width=1280", "-height=900"] }
    });
    let driver_args = |port: u16| vec!["--port".to_owned(), port.to_string()];
    the_dashboard_in(Kind { name: "firefox", driver: geckodriver, driver_args, capabilities }).await;
}

/// [`run_in`] within [`DEADLINE`].
async fn the_dashboard_in(kind: Kind) {
    let name = kind.name;
    if tokio::time::timeout(DEADLINE, run_in(kind)).await.is_err() {
        panic!("browser: the run in {name} did not finish within {DEADLINE:?}");
    }
}

async fn run_in(kind: Kind) {
    // The server: a real engine, the real router, on a free port, with a token.
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    let engine = Engine::open(Box::new(store), Options::default(), Arc::new(SystemWallClock)).unwrap();
    let timers = engine.start_timers().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    // And a scoped token: read on `orders` only.
    let tokens = dir.path().join("tokens.toml");
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(VIEWER_TOKEN.as_bytes()));
    let file =
        format!("[[token]]\nname = \"viewer\"\nsha256 = \"{digest}\"\nqueues = [\"orders\"]\ncan = [\"read\"]\n");
    std::fs::write(&tokens, file).unwrap();
    let keys = hourglass_server::access::Keys::new(Some(TOKEN), Some(&tokens)).unwrap();
    // Several nodes share its store, as on Redis: the dashboard shows them.
    let now = SystemWallClock.now_ms();
    let nodes = vec![
        node("node-a", true, now, &[0, 3, 6, 9, 12, 15]),
        node("node-b", false, now - 1_500, &[1, 2, 4, 5, 7, 8, 10, 11, 13, 14]),
    ];
    let backend = SeveralNodes::new(engine.clone(), nodes, now - 400);
    let state = AppState::new(backend, None).keys(Arc::new(keys));
    let app = hourglass_server::router(state.clone(), 1 << 20);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(hourglass_server::serve(listener, state, 1 << 20, Default::default(), async {
        let _ = stopped.await;
    }));

    // A queue made through the API: two tasks due in an hour, one dead.
    let mut keyed = 0;
    for n in 0..2 {
        let new = NewTask {
            key: Some(format!("order-{n}")),
            ..NewTask::new(json!({ "order": n }).to_string(), RunAt::Delay(3_600_000))
        };
        keyed = engine.enqueue("orders", new).await.unwrap().id;
    }
    let doomed = NewTask {
        max_attempts: Some(1),
        ..NewTask::new(json!({ "order": 99, "card": "declined" }).to_string(), RunAt::Delay(0))
    };
    let dead_id = engine.enqueue("orders", doomed).await.unwrap().id;
    let claimed = engine.claim("orders", 1, 30_000, 0).await.unwrap().remove(0);
    engine
        .nack(claimed.id, claimed.lease, Nack::default().because("card declined by the bank (code 51)"))
        .await
        .unwrap();

    // A queue that pushes, with a cap on tasks in flight.
    let push = hourglass_queue::PushTarget::new(hourglass_queue::HttpTarget::post("https://example.com/hook"));
    let flow = hourglass_queue::Flow { max_in_flight: Some(3), rate_per_s: Some(20.0), burst: None };
    engine.put_settings("hooks", hourglass_queue::QueueSettings { push: Some(Arc::new(push)), flow }).await.unwrap();
    let hook = NewTask::new(json!({ "order": 7 }).to_string(), RunAt::Delay(3_600_000));
    let hook_id = engine.enqueue("hooks", hook).await.unwrap().id;

    // Payloads of bytes that are not JSON, enqueued through the API as
    // base64: a PNG's signature, every byte value and some letters (312
    // bytes); and 5,000 bytes, more than the page dumps.
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.extend(0..=255u8);
    bytes.extend((0..48u8).map(|n| b'a' + n % 26));
    let bytes_id = enqueue_bytes(&app, "blobs", &bytes).await;
    let long: Vec<u8> = (0..5_000u32).map(|n| (n % 251) as u8 | 0x80).collect();
    let long_id = enqueue_bytes(&app, "blobs", &long).await;

    // The browser.
    let port = free_port();
    let _driver = Driver(
        Command::new(&kind.driver)
            .args((kind.driver_args)(port))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the WebDriver server"),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    let webdriver = format!("http://127.0.0.1:{port}");
    let browser = until("the WebDriver server accepting a session", || async {
        let mut builder = ClientBuilder::new(connector.clone());
        builder.capabilities(kind.capabilities.as_object().unwrap().clone());
        builder.connect(&webdriver).await.ok()
    })
    .await;
    let shot = |what: &str| format!("dashboard-{}-{what}.png", kind.name);

    // A wrong token gets nothing: the page says so, asks again, shows no queue.
    browser.goto(&format!("{base}/")).await.unwrap();
    sign_in(&browser, "not-the-token").await;
    until("the refusal", || async { text(&browser, "[data-test=unauthorized]").await }).await;
    until("the dialog asking again", || async {
        text(&browser, "#token-message").await.filter(|message| message.contains("refused"))
    })
    .await;
    assert!(browser.find(Locator::Css("[data-test=queues]")).await.is_err(), "no data without the right token");
    shoot(&browser, &shot("wrong-token")).await;

    // The right token: the overview shows the queue with its counts.
    sign_in(&browser, TOKEN).await;
    let row = "[data-queue=orders]";
    shows(&browser, &format!("{row} [data-count=scheduled]"), "2").await;
    shows(&browser, &format!("{row} [data-count=dead]"), "1").await;
    shows(&browser, &format!("{row} [data-count=due]"), "0").await;
    shows(&browser, "[data-queue=hooks] [data-test=push]", "push").await;
    shows(&browser, "[data-queue=hooks] [data-test=rate]", "≤ 20/s").await;
    shows(&browser, "[data-queue=hooks] [data-test=in-flight]", "0 / 3 in flight").await;
    // A mark a reload would wipe: the counts must change under it.
    browser.execute("window.hourglassTestMark = 42;", vec![]).await.unwrap();
    // The charts draw once the server has sampled twice (a second apart).
    until("a line in the throughput chart", || async {
        browser.find(Locator::Css("[data-test=chart-throughput] path")).await.ok()
    })
    .await;
    shoot(&browser, &shot("overview")).await;

    // The nodes: each one's shards, the one answering marked, the age of its
    // heartbeat; and how fresh the counters are.
    shows(&browser, "[data-node=node-a] [data-field=shards]", "0 3 6 9 12 15").await;
    shows(&browser, "[data-node=node-b] [data-field=shard-count]", "10").await;
    shows(&browser, "[data-node=node-a] [data-test=this-node]", "this node").await;
    assert!(browser.find(Locator::Css("[data-node=node-b] [data-test=this-node]")).await.is_err(), "one answers");
    until("node-b's heartbeat, at least 1.5 s ago", || async {
        let age = text(&browser, "[data-node=node-b] [data-field=heartbeat]").await?;
        let seconds: f64 = age.strip_suffix(" s ago")?.parse().ok()?;
        (seconds >= 1.5).then_some(())
    })
    .await;
    until("the counters' freshness", || async {
        let caption = text(&browser, "[data-test=counters-as-of]").await?;
        (caption.starts_with("Counters as of ") && caption.ends_with(" s ago, from every node.")).then_some(())
    })
    .await;
    browser.execute("document.querySelector('[data-test=nodes]').scrollIntoView();", vec![]).await.unwrap();
    shoot(&browser, &shot("nodes")).await;
    browser.execute("window.scrollTo(0, 0);", vec![]).await.unwrap();

    // The queue's dead tasks, then the dead task itself.
    click(&browser, &format!("{row} a")).await;
    click(&browser, "[data-test=state-filter] [data-state=dead]").await;
    click(&browser, &format!("[data-task=\"{dead_id}\"] a")).await;
    shows(&browser, "[data-test=task-state]", "dead").await;
    shows(&browser, "[data-field=\"dead reason\"]", "attempts").await;
    shows(&browser, "[data-field=\"last error\"]", "card declined by the bank (code 51)").await;
    let payload = text(&browser, "[data-test=payload]").await.unwrap();
    assert!(payload.contains("\"card\": \"declined\""), "the payload, pretty-printed: {payload}");
    shoot(&browser, &shot("task")).await;

    // Retry it: the page shows it due, and the overview's counts follow.
    click(&browser, "[data-test=retry]").await;
    shows(&browser, "[data-test=task-state]", "due").await;
    click(&browser, "[data-test=nav-overview]").await;
    shows(&browser, &format!("{row} [data-count=dead]"), "0").await;
    shows(&browser, &format!("{row} [data-count=due]"), "1").await;
    assert_eq!(engine.queue("orders").await.unwrap().dead, 0);

    // Pause and resume the queue from the page; the server agrees.
    click(&browser, &format!("{row} [data-test=pause]")).await;
    until("the paused badge", || async { text(&browser, &format!("{row} [data-test=paused]")).await }).await;
    assert!(engine.queue("orders").await.unwrap().paused, "paused on the server");
    assert!(engine.claim("orders", 10, 30_000, 0).await.unwrap().is_empty(), "a paused queue hands out nothing");
    shoot(&browser, &shot("paused")).await;
    click(&browser, &format!("{row} [data-test=resume]")).await;
    until("the badge gone", || async {
        browser.find(Locator::Css(&format!("{row} [data-test=paused]"))).await.is_err().then_some(())
    })
    .await;
    assert!(!engine.queue("orders").await.unwrap().paused, "resumed on the server");
    let mark = browser.execute("return window.hourglassTestMark;", vec![]).await.unwrap();
    assert_eq!(mark, json!(42), "everything above happened without a reload");

    // Search: by idempotency key, then by id.
    search_for(&browser, "order-1", keyed).await;
    search(&browser, dead_id).await;
    search(&browser, hook_id).await;
    // A task of the queue that pushes names the queue's target.
    shows(&browser, "[data-field=\"push to\"]", "POST https://example.com/hook (the queue's target)").await;

    // A payload of bytes that are not JSON: its size, and a hex dump.
    search(&browser, bytes_id).await;
    let dump = until("the bytes' size and dump", || async {
        text(&browser, "[data-test=payload]").await.filter(|dump| dump.starts_with("312 bytes, not JSON"))
    })
    .await;
    for row in [
        "00000000  89 50 4e 47 0d 0a 1a 0a 00 01 02 03 04 05 06 07  .PNG............",
        "00000020  18 19 1a 1b 1c 1d 1e 1f 20 21 22 23 24 25 26 27  ........ !\"#$%&'",
        "00000130  6f 70 71 72 73 74 75 76",
    ] {
        assert!(dump.lines().any(|line| line.trim_end().starts_with(row)), "the row {row:?} in the dump:\n{dump}");
    }
    assert!(!dump.contains("not shown"), "312 bytes are shown whole:\n{dump}");
    shoot(&browser, &shot("task-bytes")).await;
    // One longer than the dump: its first 4 KiB (256 rows), and what is left.
    search(&browser, long_id).await;
    let dump = until("the long payload's dump", || async {
        text(&browser, "[data-test=payload]").await.filter(|dump| dump.contains("not shown"))
    })
    .await;
    let offset = |line: &str| line.get(..8).is_some_and(|head| head.bytes().all(|b| b.is_ascii_hexdigit()));
    let rows = dump.lines().filter(|line| offset(line));
    assert_eq!(rows.count(), 256, "4096 bytes, 16 a row:\n{dump}");
    assert!(dump.contains("00000ff0  "), "the last row shown:\n{dump}");
    assert!(dump.trim_end().ends_with("… and 904 bytes more, not shown"), "what is left:\n{dump}");
    click(&browser, "[data-test=nav-overview]").await;

    // A phone-sized screen: the overview still shows the queue.
    browser.set_window_size(390, 844).await.unwrap();
    shows(&browser, &format!("{row} [data-count=due]"), "1").await;
    shoot(&browser, &shot("phone")).await;

    // The scoped read-only token: its queue only, and no action anywhere.
    browser.set_window_size(1280, 900).await.unwrap();
    let sign_in_as = format!("sessionStorage.setItem('hourglass.token', '{VIEWER_TOKEN}'); location.hash = '#/';");
    browser.execute(&sign_in_as, vec![]).await.unwrap();
    browser.refresh().await.unwrap();
    shows(&browser, "[data-test=token-name]", "viewer").await;
    until("the charts' place, saying why they are not shown", || async {
        text(&browser, "[data-test=charts-hidden]").await.filter(|t| t.contains("add up every queue"))
    })
    .await;
    shows(&browser, "[data-test=read-only]", "read-only").await;
    shows(&browser, &format!("{row} [data-count=due]"), "1").await;
    assert!(browser.find(Locator::Css("[data-queue=hooks]")).await.is_err(), "a queue it does not read is not shown");
    assert!(browser.find(Locator::Css("[data-test=nodes]")).await.is_err(), "no nodes: they hold every queue");
    assert!(browser.find(Locator::Css("[data-test=pause]")).await.is_err(), "no pause button");
    shoot(&browser, &shot("scoped-read-only")).await;
    click(&browser, &format!("{row} a")).await;
    click(&browser, &format!("[data-task=\"{dead_id}\"] a")).await;
    shows(&browser, "[data-test=task-state]", "due").await;
    for button in ["cancel", "retry", "run-now", "delete-dead", "pause"] {
        let found = browser.find(Locator::Css(&format!("[data-test={button}]"))).await;
        assert!(found.is_err(), "a read-only token sees no {button} button");
    }
    shoot(&browser, &shot("scoped-read-only-task")).await;

    browser.close().await.unwrap();
    let _ = stop.send(());
    server.await.unwrap().unwrap();
    engine.close();
    tokio::task::spawn_blocking(move || timers.join()).await.unwrap().unwrap();
    println!("browser: the dashboard passed in {}", kind.name);
}
