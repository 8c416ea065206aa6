//! `hourglass serve` as a process of the test's own: started on a port the
//! system picks (it prints the addresses it bound: `http ADDR` or `https
//! ADDR`, `beanstalk ADDR`), ready once `/healthz` answers (over TLS with
//! [`Serve::tls`]), killed with SIGKILL or stopped with
//! SIGTERM, restarted on the same data, and killed when dropped. A server
//! that does not come up in time, or exits while starting, fails the test
//! with the end of what it wrote on stderr.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::wait::{holds_within, within};

/// How long a start may take, from spawning to `/healthz` answering: a
/// recovery of a few thousand tasks on a loaded machine, with room to spare.
pub const START_WITHIN: Duration = Duration::from_secs(30);
/// How long a stop (SIGTERM) may take to exit.
pub const STOP_WITHIN: Duration = Duration::from_secs(30);
/// Bytes of the server's stderr kept for a failure's message.
const STDERR_BYTES_KEPT: usize = 8 * 1024;

/// What starts a server: the binary, and `serve`'s arguments.
///
/// ```no_run
/// use hourglass_test_support::hourglass::Serve;
///
/// let data = tempfile::tempdir().unwrap();
/// // In a test of the CLI crate: env!("CARGO_BIN_EXE_hourglass").
/// let server = Serve::new("target/debug/hourglass").data(data.path()).beanstalk().start();
/// println!("{} and beanstalk on {}", server.url(), server.beanstalk_port());
/// ```
#[derive(Debug, Clone)]
pub struct Serve {
    program: PathBuf,
    listen: String,
    args: Vec<OsString>,
    beanstalk: bool,
    /// With `--tls-cert`: how to check it answers.
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl Serve {
    /// `program serve --listen 127.0.0.1:0`.
    pub fn new(program: impl AsRef<Path>) -> Serve {
        Serve {
            program: program.as_ref().to_owned(),
            listen: "127.0.0.1:0".to_owned(),
            args: Vec::new(),
            beanstalk: false,
            tls: None,
        }
    }

    /// Listening on `address` rather than a port the system picks: a
    /// [restart](Hourglass::restart) then keeps the address, for a client
    /// that must find the server again.
    pub fn listen(self, address: impl Into<String>) -> Serve {
        Serve { listen: address.into(), ..self }
    }

    /// With `--data dir`.
    pub fn data(self, dir: impl AsRef<Path>) -> Serve {
        self.arg("--data").arg(dir.as_ref())
    }

    /// With the beanstalkd front on a port the system picks
    /// (`--beanstalk 127.0.0.1:0`).
    pub fn beanstalk(self) -> Serve {
        Serve { beanstalk: true, ..self.arg("--beanstalk").arg("127.0.0.1:0") }
    }

    /// Serving HTTPS with `--tls-cert cert --tls-key key`, a certificate
    /// for `127.0.0.1` that `authority_pem` signed; [`Hourglass::url`] is
    /// then `https://`.
    pub fn tls(self, cert: impl AsRef<Path>, key: impl AsRef<Path>, authority_pem: &str) -> Serve {
        let tls = Some(client_config(authority_pem));
        Serve { tls, ..self.arg("--tls-cert").arg(cert.as_ref()).arg("--tls-key").arg(key.as_ref()) }
    }

    /// With one more argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Serve {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// With more arguments.
    pub fn args<A: AsRef<OsStr>>(self, args: impl IntoIterator<Item = A>) -> Serve {
        args.into_iter().fold(self, Serve::arg)
    }

    /// Starts it and waits until it answers; panics if it does not within
    /// [`START_WITHIN`].
    pub fn start(self) -> Hourglass {
        let process = Process::spawn(&self);
        Hourglass { serve: self, process: Some(process) }
    }
}

/// A running `hourglass serve`, killed when dropped.
#[derive(Debug)]
pub struct Hourglass {
    serve: Serve,
    process: Option<Process>,
}

impl Hourglass {
    /// Its HTTP address, `HOST:PORT`.
    pub fn addr(&self) -> &str {
        &self.running().http
    }

    /// Its base URL, `http://HOST:PORT` (`https://` with [`Serve::tls`]).
    pub fn url(&self) -> String {
        let scheme = if self.serve.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr())
    }

    /// The beanstalkd front's port (started with [`Serve::beanstalk`]).
    pub fn beanstalk_port(&self) -> u16 {
        let address = self.running().beanstalk.as_deref().expect("started with Serve::beanstalk");
        address.rsplit(':').next().and_then(|port| port.parse().ok()).expect("a port in the beanstalk address")
    }

    /// What it wrote on stderr so far (its logs): the last few KiB.
    pub fn stderr(&self) -> String {
        self.running().stderr.text()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.running().child.id()
    }

    /// Sends `signal` (`STOP`, `CONT`, `TERM`...) with `kill`.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill").arg(format!("-{signal}")).arg(self.pid().to_string()).status();
        assert!(status.is_ok_and(|s| s.success()), "kill -{signal} {}", self.pid());
    }

    /// `kill -9`: no chance to finish anything.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            let _ = process.child.kill();
            let _ = process.child.wait();
        }
    }

    /// SIGTERM, then its exit status; panics if it has not exited within
    /// [`STOP_WITHIN`].
    pub fn terminate(&mut self) -> ExitStatus {
        self.signal("TERM");
        self.exited()
    }

    /// Its exit status once it exits (after a signal, say); panics if it
    /// has not within [`STOP_WITHIN`].
    pub fn exited(&mut self) -> ExitStatus {
        let child = &mut self.process.as_mut().expect("running").child;
        let mut exit = None;
        // Still ours if it does not exit: dropping us kills it.
        within(STOP_WITHIN, "hourglass exits", || {
            exit = child.try_wait().expect("the server's status");
            exit.is_some()
        });
        self.process = None;
        exit.expect("exited")
    }

    /// A new process with the same arguments (the same data), after killing
    /// this one if it still runs. Its addresses are new, unless it was given
    /// one ([`Serve::listen`]).
    pub fn restart(&mut self) {
        self.kill();
        self.process = Some(Process::spawn(&self.serve));
    }

    fn running(&self) -> &Process {
        self.process.as_ref().expect("the server is running (killed, not restarted?)")
    }
}

impl Drop for Hourglass {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One process and what it printed.
#[derive(Debug)]
struct Process {
    child: Child,
    http: String,
    beanstalk: Option<String>,
    stderr: Stderr,
}

impl Process {
    fn spawn(serve: &Serve) -> Process {
        let started = Instant::now();
        let mut child = Command::new(&serve.program)
            .args(["serve", "--listen", &serve.listen])
            .args(&serve.args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", serve.program.display()));
        let mut stderr = Stderr::keep(child.stderr.take().expect("stderr piped"));
        let lines = read_lines(child.stdout.take().expect("stdout piped"));
        let mut printed = |label: &str| match address(&lines, label, started) {
            Ok(address) => address,
            Err(why) => stderr.fail(&mut child, &why),
        };
        let http = printed(if serve.tls.is_some() { "https" } else { "http" });
        let beanstalk = serve.beanstalk.then(|| printed("beanstalk"));
        let mut exited = None;
        let answering = holds_within(START_WITHIN.saturating_sub(started.elapsed()), || {
            exited = child.try_wait().ok().flatten();
            exited.is_some()
                || match &serve.tls {
                    None => answers_http(connect(&http), &http),
                    Some(config) => answers_http(tls_stream(config, &http), &http),
                }
        });
        match exited {
            Some(status) => stderr.fail(&mut child, &format!("hourglass exited while starting ({status})")),
            None if !answering => {
                stderr.fail(&mut child, &format!("hourglass did not answer /healthz on {http} within {START_WITHIN:?}"))
            }
            None => Process { child, http, beanstalk, stderr },
        }
    }
}

/// The address on the line `LABEL ADDR` of `lines`, or why there is none.
fn address(lines: &Receiver<String>, label: &str, started: Instant) -> Result<String, String> {
    let prefix = format!("{label} ");
    loop {
        match lines.recv_timeout(START_WITHIN.saturating_sub(started.elapsed())) {
            Ok(line) => {
                if let Some(address) = line.strip_prefix(&prefix) {
                    return Ok(address.to_owned());
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                return Err(format!("hourglass printed no `{label} ADDR` within {START_WITHIN:?}"))
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(format!("hourglass exited before printing `{label} ADDR`"))
            }
        }
    }
}

/// Whether an HTTP server answers `GET /healthz` on `stream` (connected to
/// `address`), whatever the status (with `--token` it is 401: still up).
fn answers_http(stream: std::io::Result<impl Read + Write>, address: &str) -> bool {
    let Ok(mut stream) = stream else { return false };
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    let mut head = [0; 12];
    stream.write_all(request.as_bytes()).is_ok()
        && stream.read_exact(&mut head).is_ok()
        && head.starts_with(b"HTTP/1.1 ")
}

/// A connection to `address` whose reads give up after a second.
fn connect(address: &str) -> std::io::Result<TcpStream> {
    let stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(1)))?;
    Ok(stream)
}

/// A TLS client that trusts `authority_pem` only.
fn client_config(authority_pem: &str) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(authority_pem.as_bytes()) {
        roots.add(cert.expect("the authority's PEM")).expect("the authority's certificate");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring's protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

/// A TLS connection to `address` (`HOST:PORT`, the host the certificate's).
fn tls_stream(
    config: &Arc<rustls::ClientConfig>,
    address: &str,
) -> std::io::Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>> {
    let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
    let name = rustls::pki_types::ServerName::try_from(host.to_owned()).map_err(std::io::Error::other)?;
    let connection = rustls::ClientConnection::new(config.clone(), name).map_err(std::io::Error::other)?;
    Ok(rustls::StreamOwned::new(connection, connect(address)?))
}

/// Lines of `stdout`, read on a thread of their own (so that reading them has
/// a deadline) until it closes: once nobody listens, they are read and
/// dropped, so that the server never writes to a closed pipe.
fn read_lines(stdout: impl Read + Send + 'static) -> Receiver<String> {
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let _ = send.send(line);
        }
    });
    lines
}

/// The last [`STDERR_BYTES_KEPT`] bytes a process wrote on stderr, read on
/// a thread of their own until it closes (so that the server never blocks on
/// a full pipe).
#[derive(Debug)]
struct Stderr {
    tail: Arc<Mutex<Vec<u8>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Stderr {
    fn keep(mut stderr: impl Read + Send + 'static) -> Stderr {
        let tail = Arc::new(Mutex::new(Vec::new()));
        let kept = tail.clone();
        let reader = std::thread::spawn(move || {
            let mut buffer = [0; 4096];
            while let Ok(n @ 1..) = stderr.read(&mut buffer) {
                let mut tail = kept.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                tail.extend_from_slice(&buffer[..n]);
                let excess = tail.len().saturating_sub(STDERR_BYTES_KEPT);
                tail.drain(..excess);
            }
        });
        Stderr { tail, reader: Some(reader) }
    }

    /// The end of what it wrote so far.
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.tail.lock().unwrap_or_else(|poisoned| poisoned.into_inner())).into_owned()
    }

    /// Kills `child` and panics with `why` and the end of what it wrote.
    fn fail(&mut self, child: &mut Child, why: &str) -> ! {
        let _ = child.kill();
        let _ = child.wait();
        // Its stderr closed with it: everything it wrote is in.
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        panic!("{why}; its stderr ended with:\n{}", self.text());
    }
}
