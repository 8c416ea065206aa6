//! The real beanstalkd, for tests that hold hourglass's front to it: on a
//! free port, in a directory of its own (its binlog, `-b`), accepting
//! connections before [`Beanstalkd::start`] returns, killed when dropped.
//! Without `beanstalkd` a test skips, and fails under `CI=true`.

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::{free_port, required, within};

/// How long beanstalkd may take to accept connections once started.
const START_WITHIN: Duration = Duration::from_secs(20);

/// One `beanstalkd` process.
#[derive(Debug)]
pub struct Beanstalkd {
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Beanstalkd {
    /// Starts one; `None` (the test skips) without `beanstalkd`.
    pub fn start() -> Option<Beanstalkd> {
        if !required("beanstalkd", &["-v"]) {
            return None;
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        let port = free_port();
        let child = Command::new("beanstalkd")
            .args(["-l", "127.0.0.1", "-p", &port.to_string(), "-b"])
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start beanstalkd");
        let server = Beanstalkd { port, child, _dir: dir };
        let what = format!("beanstalkd accepts connections on port {port}");
        within(START_WITHIN, &what, || TcpStream::connect(("127.0.0.1", port)).is_ok());
        Some(server)
    }
}

impl Drop for Beanstalkd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
