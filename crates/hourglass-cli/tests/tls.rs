//! HTTPS through the binary (`--tls-cert`, `--tls-key`), with certificates
//! an authority of the test's own signed: a round trip with curl and with
//! the Rust client, HTTP/2 over ALPN, SIGHUP swapping the certificate while
//! clients keep asking (counts printed), a handshake that never ends held to
//! the header deadline and the connection limit, and the flags' errors.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hourglass_client::wire::{ClaimRequest, NewTask};
use hourglass_client::Client;
use hourglass_test_support::certs::{Authority, Issued, LOCAL_NAMES};
use hourglass_test_support::hourglass::{Hourglass, Serve};
use hourglass_test_support::{required, within_async};
use serde_json::value::to_raw_value;

use crate::slow_clients::{closed_by_server, half_send};
use crate::{serve, serve_to_end};

/// How long a request may take before the test calls it failed: far past
/// anything a loaded machine needs.
const PATIENCE: Duration = Duration::from_secs(30);

/// A server's certificate files and the authority that signed them.
struct Certs {
    dir: tempfile::TempDir,
    authority: Authority,
    first: Issued,
    cert: PathBuf,
    key: PathBuf,
}

impl Certs {
    fn new() -> Certs {
        let dir = tempfile::tempdir().unwrap();
        let authority = Authority::new("hourglass test authority");
        let first = authority.issue(&LOCAL_NAMES, "hourglass first");
        let (cert, key) = first.write(dir.path(), "server");
        Certs { dir, authority, first, cert, key }
    }

    /// `hourglass serve` over HTTPS with these files.
    fn serve(&self) -> Serve {
        serve().data(self.dir.path().join("data")).tls(&self.cert, &self.key, &self.authority.pem())
    }

    /// The authority's certificate in a file, for curl.
    fn ca_file(&self) -> PathBuf {
        self.authority.write(self.dir.path(), "ca.pem")
    }

    /// An HTTP client that trusts the authority and reports the server's
    /// certificate with each answer.
    fn http(&self) -> reqwest::ClientBuilder {
        let authority = reqwest::Certificate::from_pem(self.authority.pem().as_bytes()).unwrap();
        reqwest::Client::builder().add_root_certificate(authority).tls_info(true).timeout(PATIENCE)
    }
}

/// `curl` with `args` against `server`'s `path`: its standard output.
fn curl(server: &Hourglass, ca: &std::path::Path, path: &str, args: &[&str]) -> String {
    let output = Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "30", "--cacert"])
        .arg(ca)
        .args(args)
        .arg(format!("{}{path}", server.url()))
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "curl {args:?}: {:?}\n{text}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_round_trip_with_curl_and_with_the_rust_client() {
    if !required("curl", &["--version"]) {
        return;
    }
    let certs = Certs::new();
    let server = certs.serve().start();
    assert!(server.url().starts_with("https://127.0.0.1:"), "{}", server.url());
    let ca = certs.ca_file();

    // curl: an enqueue over HTTP/2 (offered over ALPN), a read over HTTP/1.1.
    let enqueued = curl(
        &server,
        &ca,
        "/v1/queues/secure/tasks",
        &[
            "--http2",
            "-H",
            "content-type: application/json",
            "-d",
            r#"{"payload":"by curl"}"#,
            "-w",
            "\n%{http_code} %{http_version}",
        ],
    );
    assert!(enqueued.ends_with("\n201 2"), "HTTP/2 and 201: {enqueued}");
    let read = curl(&server, &ca, "/v1/queues/secure", &["--http1.1", "-w", "\n%{http_code} %{http_version}"]);
    assert!(read.ends_with("\n200 1.1"), "HTTP/1.1 and 200: {read}");
    println!("curl: {}; {}", enqueued.lines().last().unwrap(), read.lines().last().unwrap());

    // The Rust client, trusting the authority.
    let client = Client::builder(server.url())
        .timeout(PATIENCE)
        .root_certificates_pem(certs.authority.pem().as_bytes())
        .unwrap()
        .build()
        .unwrap();
    let payload = to_raw_value(&"by the Rust client").unwrap();
    client.enqueue("secure", &NewTask::new(payload)).await.unwrap();
    let claimed = client.claim("secure", &ClaimRequest { max: Some(10), ..ClaimRequest::default() }).await.unwrap();
    let payloads: Vec<&str> =
        claimed.tasks.iter().map(|task| task.payload.as_deref().map_or("", serde_json::value::RawValue::get)).collect();
    assert_eq!(payloads, [r#""by curl""#, r#""by the Rust client""#]);
    for task in claimed.tasks {
        client.ack(task.id, task.lease).await.unwrap();
    }

    // Without the authority, neither trusts the server.
    let stranger = Client::builder(server.url()).timeout(PATIENCE).build().unwrap();
    let refused = stranger.healthz().await.unwrap_err();
    let chain = format!("{:?}", causes(&refused));
    assert!(chain.contains("UnknownIssuer"), "{chain}");
    let status = Command::new("curl").args(["--silent", "--max-time", "30"]).arg(server.url()).status().unwrap();
    assert_eq!(status.code(), Some(60), "curl refuses a certificate it cannot check");
}

/// `error` and its causes, as text.
fn causes(error: &(dyn std::error::Error + 'static)) -> Vec<String> {
    std::iter::successors(Some(error), |&error| error.source()).map(ToString::to_string).collect()
}

/// Clients of each kind asking at once while the certificate is replaced.
const CLIENTS_OF_EACH_KIND: usize = 4;

/// Answers one kind of client had: which certificate each saw, and the
/// requests that failed.
#[derive(Default)]
struct Tally {
    first: AtomicU64,
    second: AtomicU64,
    other: AtomicU64,
    failed: Mutex<Vec<String>>,
}

impl Tally {
    fn counts(&self) -> (u64, u64, u64) {
        (self.first.load(Ordering::Relaxed), self.second.load(Ordering::Relaxed), self.other.load(Ordering::Relaxed))
    }
}

/// Enqueues on `http` one after another until `stop`, counting in `tally`
/// which certificate (`first` or `second`) each answer came over.
async fn keep_asking(
    http: reqwest::Client,
    url: String,
    certs: [Vec<u8>; 2],
    tally: Arc<Tally>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    while !*stop.borrow() {
        let sent = http.post(&url).header("content-type", "application/json").body(r#"{"payload":1}"#).send().await;
        match sent {
            Ok(response) if response.status() == reqwest::StatusCode::CREATED => {
                let seen =
                    response.extensions().get::<reqwest::tls::TlsInfo>().and_then(|info| info.peer_certificate());
                let counter = match seen {
                    Some(der) if der == certs[0] => &tally.first,
                    Some(der) if der == certs[1] => &tally.second,
                    _ => &tally.other,
                };
                counter.fetch_add(1, Ordering::Relaxed);
            }
            Ok(response) => tally.failed.lock().unwrap().push(format!("answered {}", response.status())),
            Err(error) => tally.failed.lock().unwrap().push(format!("{:?}", causes(&error))),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_swaps_the_certificate_while_clients_ask_and_no_request_fails() {
    let certs = Certs::new();
    let server = certs.serve().start();
    let second = certs.authority.issue(&LOCAL_NAMES, "hourglass second");
    let url = format!("{}/v1/queues/reload/tasks", server.url());
    let ders = [certs.first.der.clone(), second.der.clone()];
    let (stop, stopping) = tokio::sync::watch::channel(false);
    // Clients each on one kept-alive connection, and clients on a new connection a request.
    let (kept, fresh) = (Arc::new(Tally::default()), Arc::new(Tally::default()));
    let mut clients = Vec::new();
    for _ in 0..CLIENTS_OF_EACH_KIND {
        let kept_alive = certs.http().build().unwrap();
        let one_each = certs.http().pool_max_idle_per_host(0).build().unwrap();
        clients.push(tokio::spawn(keep_asking(kept_alive, url.clone(), ders.clone(), kept.clone(), stopping.clone())));
        clients.push(tokio::spawn(keep_asking(one_each, url.clone(), ders.clone(), fresh.clone(), stopping.clone())));
    }
    within_async(PATIENCE, "both clients are answered with the first certificate", async || {
        kept.counts().0 >= 50 && fresh.counts().0 >= 50
    })
    .await;

    second.write_to(&certs.cert, &certs.key);
    let reloading = Instant::now();
    server.signal("HUP");
    within_async(PATIENCE, "a new connection gets the second certificate", async || fresh.counts().1 >= 1).await;
    let swapped_after = reloading.elapsed();
    let before = (kept.counts().0, fresh.counts().1);
    within_async(PATIENCE, "both clients go on being answered", async || {
        kept.counts().0 >= before.0 + 100 && fresh.counts().1 >= before.1 + 100
    })
    .await;

    // A file that does not read is kept out: the second pair stays.
    std::fs::write(&certs.cert, "not a certificate").unwrap();
    server.signal("HUP");
    within_async(PATIENCE, "the refused reload is logged", async || {
        server.stderr().contains("kept the TLS certificate in use")
    })
    .await;
    let before = fresh.counts().1;
    within_async(PATIENCE, "new connections still get the second certificate", async || {
        fresh.counts().1 >= before + 100
    })
    .await;
    assert!(
        server.stderr().contains(&format!("no PEM certificate in {}", certs.cert.display())),
        "{}",
        server.stderr()
    );

    stop.send(true).unwrap();
    for client in clients {
        client.await.unwrap();
    }
    let (kept_first, kept_second, kept_other) = kept.counts();
    let (fresh_first, fresh_second, fresh_other) = fresh.counts();
    println!(
        "{CLIENTS_OF_EACH_KIND} kept-alive connections: {kept_first} answers over the first certificate, \
         {kept_second} over the second; {CLIENTS_OF_EACH_KIND} clients on a connection a request: {fresh_first} \
         over the first, {fresh_second} over the second; \
         the second served {swapped_after:?} after SIGHUP"
    );
    let failed = [kept.failed.lock().unwrap().clone(), fresh.failed.lock().unwrap().clone()].concat();
    assert!(failed.is_empty(), "no request fails because of a reload: {failed:?}");
    assert_eq!((kept_other, fresh_other), (0, 0), "every answer came over one of the two certificates");
    assert_eq!(
        kept_second, 0,
        "the connections opened before the reload were never dropped (they kept their certificate)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_never_finished_holds_a_slot_until_the_header_deadline() {
    const LIMIT: usize = 3;
    let certs = Certs::new();
    let server = certs
        .serve()
        .args(["--max-connections", &LIMIT.to_string(), "--header-timeout", "2s", "--idle-timeout", "10m"])
        .start();
    // Every slot taken by clients that open TCP and never finish (or start) a handshake.
    let mut held = Vec::new();
    for n in 0..LIMIT {
        let first: &[u8] = if n % 2 == 0 { b"" } else { b"\x16\x03\x01\x02\x00\x01" };
        held.push(half_send(server.addr(), first).await);
    }
    let asked = Instant::now();
    let http = certs.http().build().unwrap();
    let answer = http.get(format!("{}/healthz", server.url())).send().await.expect("answered once a slot is free");
    assert_eq!(answer.status(), 200);
    let waited = asked.elapsed();
    // Dropped at the header deadline, long before the idle timeout.
    let deadline = Instant::now() + Duration::from_secs(60);
    for stream in held {
        closed_by_server(stream, deadline).await;
    }
    println!("with {LIMIT} handshakes never finished, a new request was answered after {waited:?} (header timeout 2s)");
}

#[test]
fn the_two_flags_come_together_and_a_pair_that_does_not_fit_is_refused() {
    let certs = Certs::new();
    let data = certs.dir.path().join("data");
    let run = |args: &[&std::ffi::OsStr]| serve_to_end([&["--data".as_ref(), data.as_os_str()], args].concat());
    let (code, stderr) = run(&["--tls-cert".as_ref(), certs.cert.as_os_str()]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--tls-key <FILE>"), "names the missing flag: {stderr}");
    let (code, stderr) = run(&["--tls-key".as_ref(), certs.key.as_os_str()]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--tls-cert <FILE>"), "names the missing flag: {stderr}");

    let other = certs.authority.issue(&LOCAL_NAMES, "another");
    let (other_cert, _) = other.write(certs.dir.path(), "other");
    let (code, stderr) =
        run(&["--tls-cert".as_ref(), other_cert.as_os_str(), "--tls-key".as_ref(), certs.key.as_os_str()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("does not fit the certificate"), "{stderr}");
    assert!(!stderr.contains("PRIVATE KEY"), "the key is never shown: {stderr}");
}
