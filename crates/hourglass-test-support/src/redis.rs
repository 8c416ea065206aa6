//! Redis servers of the tests' own: each on a free port, in a directory of
//! its own, with `appendonly yes` and `appendfsync always`, killed when
//! dropped; in clear, or over TLS only with a certificate an
//! [`Authority`] of the test's signed. Never the shared instance on 6379.
//! Without `redis-server` (and `redis-cli` for a Cluster) a test skips, and
//! fails under `CI=true`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::certs::{Authority, LOCAL_NAMES};
use crate::{free_port, required, within};

/// How long a server may take to answer once started.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// Times a first start moves to new ports when another process took one
/// between [`free_port`] and the server's bind (suites run side by side).
const START_TRIES: usize = 5;

/// One `redis-server` process (or none, while it is stopped).
pub struct Server {
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
    /// A Cluster master's bus port.
    bus: Option<u16>,
    /// Whether the port is its TLS port (and none is in clear).
    tls_only: bool,
    child: Option<Child>,
    dir: tempfile::TempDir,
    /// `redis-server`'s arguments past the port and the directory.
    args: Vec<String>,
    /// The user (none: the default user) and password clients must give.
    auth: Option<(Option<String>, String)>,
    /// Over TLS only: the authority's certificate, for `redis-cli`.
    tls: Option<PathBuf>,
}

impl Server {
    /// Starts a server; `None` (the test skips) without `redis-server`.
    pub fn start() -> Option<Server> {
        Server::with_args(&[])
    }

    /// A server's port and directory, not started yet ([`Server::restart`]
    /// starts it): for a client started before its Redis. `None` (the test
    /// skips) without `redis-server`.
    pub fn not_started() -> Option<Server> {
        if !required("redis-server", &["--version"]) {
            return None;
        }
        Some(Server {
            port: free_port(),
            bus: None,
            tls_only: false,
            child: None,
            dir: tempfile::tempdir().unwrap(),
            args: Vec::new(),
            auth: None,
            tls: None,
        })
    }

    fn with_args(extra: &[&str]) -> Option<Server> {
        let mut server = Server::not_started()?;
        server.args = extra.iter().map(|arg| arg.to_string()).collect();
        server.start_first();
        Some(server)
    }

    /// Starts a server that requires `password` (`requirepass`); `None`
    /// without `redis-server`. Its [`url`](Server::url) carries the password.
    pub fn with_password(password: &str) -> Option<Server> {
        let mut server = Server::not_started()?;
        server.args = vec!["--requirepass".into(), password.into()];
        server.auth = Some((None, password.into()));
        server.start_first();
        Some(server)
    }

    /// Starts a server whose only user is the ACL user `user` with
    /// `password`, allowed every key, channel and command (the default user
    /// is off); `None` without `redis-server`. Its [`url`](Server::url)
    /// carries both.
    pub fn with_acl_user(user: &str, password: &str) -> Option<Server> {
        let mut server = Server::not_started()?;
        let secret = format!(">{password}");
        // Each word of a rule an argument of its own: redis-server quotes an argument with spaces.
        server.args =
            ["--user", user, "on", &secret, "~*", "&*", "+@all", "--user", "default", "off"].map(String::from).to_vec();
        server.auth = Some((Some(user.into()), password.into()));
        server.start_first();
        Some(server)
    }

    /// Starts a server that speaks TLS only (its port is the TLS port),
    /// with a certificate for `127.0.0.1` and `localhost` that `authority`
    /// signed, and with `password` if given; `None` without `redis-server`.
    /// Its [`url`](Server::url) is `rediss://`.
    pub fn with_tls(authority: &Authority, password: Option<&str>) -> Option<Server> {
        let mut server = Server::not_started()?;
        server.serve_tls(authority);
        if let Some(password) = password {
            server.args.extend(["--requirepass".into(), password.into()]);
            server.auth = Some((None, password.into()));
        }
        server.start_first();
        Some(server)
    }

    /// From its next start, TLS only, with a certificate `authority` signed.
    fn serve_tls(&mut self, authority: &Authority) {
        let (cert, key) = authority.issue(&LOCAL_NAMES, "redis").write(self.dir.path(), "redis");
        let ca = authority.write(self.dir.path(), "ca.pem");
        self.tls_only = true;
        self.args.extend(["--tls-auth-clients", "no"].map(String::from));
        for (flag, path) in [("--tls-cert-file", &cert), ("--tls-key-file", &key), ("--tls-ca-cert-file", &ca)] {
            self.args.extend([flag.to_owned(), path.display().to_string()]);
        }
        self.tls = Some(ca);
    }

    /// Its address as `--store` takes it (`rediss://` over TLS), with the
    /// user and password it requires, if any.
    pub fn url(&self) -> String {
        let auth = match &self.auth {
            None => String::new(),
            Some((user, password)) => format!("{}:{password}@", user.as_deref().unwrap_or("")),
        };
        let scheme = if self.tls.is_some() { "rediss" } else { "redis" };
        format!("{scheme}://{auth}127.0.0.1:{}", self.port)
    }

    /// `kill -9`, then a new process on the same port and directory: what
    /// its append-only file kept is what it has.
    pub fn kill_and_restart(&mut self) {
        self.kill();
        self.restart();
    }

    /// `kill -9`; nothing listens on its port until [`Server::restart`].
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// A new process on the same port and directory (the first, for a
    /// server [not started](Server::not_started)), once the last is killed;
    /// returns once it answers.
    ///
    /// A Cluster master's bus port, which no client is told, moves to a new
    /// one if another process took it meanwhile (Redis then says "Failed
    /// listening on port N (cluster)"); its client port stays.
    pub fn restart(&mut self) {
        for attempt in 1..=START_TRIES {
            self.kill();
            self.spawn();
            match self.wait_until_up() {
                Ok(()) => return,
                Err(log) if attempt < START_TRIES && self.bus.is_some() && log.contains("(cluster), aborting") => {
                    self.bus = Some(free_port());
                }
                Err(log) => panic!("redis-server on port {} exited:\n{log}", self.port),
            }
        }
    }

    /// Starts it for the first time, its port known to no one yet: if
    /// another process took the port (or the bus's) since it was chosen,
    /// on new ones.
    fn start_first(&mut self) {
        for _ in 1..START_TRIES {
            self.spawn();
            match self.wait_until_up() {
                Ok(()) => return,
                Err(log) if log.contains("Address already in use") => self.choose_ports(),
                Err(log) => panic!("redis-server on port {} exited:\n{log}", self.port),
            }
        }
        self.restart();
    }

    /// New free ports, for a server not answering on its own.
    fn choose_ports(&mut self) {
        self.kill();
        self.port = free_port();
        self.bus = self.bus.map(|_| free_port());
    }

    /// `redis-cli` with these arguments against this server; its output.
    pub fn cli(&self, args: &[&str]) -> String {
        let mut all: Vec<&str> = Vec::new();
        if let Some(ca) = &self.tls {
            all.extend(["--tls", "--cacert", ca.to_str().expect("a UTF-8 path")]);
        }
        if let Some((user, password)) = &self.auth {
            if let Some(user) = user {
                all.extend(["--user", user.as_str()]);
            }
            all.extend(["--pass", password.as_str(), "--no-auth-warning"]);
        }
        all.extend(args);
        cli(self.port, &all)
    }

    /// Waits until it answers (it, not another process that has its port);
    /// `Err` with its log if it exited first.
    fn wait_until_up(&mut self) -> Result<(), String> {
        let what = format!("redis-server on port {} answers", self.port);
        let pid = self.child.as_ref().map(|child| format!("process_id:{}", child.id()));
        let mut exited = false;
        within(START_TIMEOUT, &what, || {
            exited = self.child.as_mut().is_some_and(|child| child.try_wait().is_ok_and(|status| status.is_some()));
            exited || self.cli(&["INFO", "server"]).lines().any(|line| Some(line.trim()) == pid.as_deref())
        });
        match exited {
            false => Ok(()),
            true => {
                self.child = None;
                Err(std::fs::read_to_string(self.log()).unwrap_or_default())
            }
        }
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("redis-server.log")
    }

    fn spawn(&mut self) {
        let port = self.port.to_string();
        // TLS only: no port in clear.
        let ports = match self.tls_only {
            true => vec!["--port", "0", "--tls-port", &port],
            false => vec!["--port", &port],
        };
        let bus = self.bus.iter().flat_map(|bus| ["--cluster-port".to_owned(), bus.to_string()]);
        let log = std::fs::File::create(self.log()).expect("create redis-server's log");
        let child = Command::new("redis-server")
            .args(ports)
            .args(["--bind", "127.0.0.1", "--dir"])
            .arg(self.dir.path())
            .args(["--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no"])
            .args(bus)
            .args(&self.args)
            .stdout(log)
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stderr(Stdio::null())
        .output()
        .expect("run redis-cli");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A Redis Cluster of three masters, no replicas, made by `redis-cli
/// --cluster create`.
pub struct Cluster {
    /// The three masters.
    pub masters: Vec<Server>,
}

impl Cluster {
    /// Starts and joins three masters; `None` (the test skips) without
    /// `redis-server` and `redis-cli`.
    pub fn start() -> Option<Cluster> {
        let mut cluster = Cluster::not_started()?;
        cluster.start_first();
        Some(cluster)
    }

    /// The same over TLS only, clients and the cluster bus: each master
    /// with a certificate `authority` signed. Its [`url`](Cluster::url) is
    /// `rediss+cluster://`.
    pub fn with_tls(authority: &Authority) -> Option<Cluster> {
        let mut cluster = Cluster::not_started()?;
        for master in &mut cluster.masters {
            master.serve_tls(authority);
            master.args.extend(["--tls-cluster", "yes", "--tls-replication", "yes"].map(String::from));
        }
        cluster.start_first();
        Some(cluster)
    }

    /// Three masters' ports and directories, not started yet
    /// ([`Cluster::start_now`] starts and joins them): for a client started
    /// before its Cluster. `None` (the test skips) without `redis-server`
    /// and `redis-cli`.
    pub fn not_started() -> Option<Cluster> {
        if !required("redis-cli", &["--version"]) {
            return None;
        }
        let mut masters = Vec::new();
        for _ in 0..3 {
            let mut master = Server::not_started()?;
            // The bus on a port of its own: the default, the port plus
            // 10,000, is refused past 55,535, where free ports may be.
            master.bus = Some(free_port());
            master.args = ["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"].map(String::from).to_vec();
            masters.push(master);
        }
        Some(Cluster { masters })
    }

    /// Starts the masters on the ports they were given and joins them;
    /// returns once the Cluster is ok.
    pub fn start_now(&mut self) {
        for master in &mut self.masters {
            master.restart();
        }
        self.join();
    }

    /// [`Cluster::start_now`], each master moved to new ports if another
    /// process took its own: for a Cluster whose ports no one knows yet.
    fn start_first(&mut self) {
        for master in &mut self.masters {
            master.start_first();
        }
        self.join();
    }

    fn join(&mut self) {
        let nodes: Vec<String> = self.masters.iter().map(|m| format!("127.0.0.1:{}", m.port)).collect();
        let mut create = vec!["--cluster", "create"];
        create.extend(nodes.iter().map(String::as_str));
        create.extend(["--cluster-replicas", "0", "--cluster-yes"]);
        let out = self.masters[0].cli(&create);
        assert!(out.contains("[OK]"), "redis-cli --cluster create failed:\n{out}");
        within(START_TIMEOUT, "the cluster's state is ok on every master", || {
            self.masters.iter().all(|m| m.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok"))
        });
    }

    /// Its address as `--store` takes it.
    pub fn url(&self) -> String {
        let nodes: Vec<String> = self.masters.iter().map(|m| format!("127.0.0.1:{}", m.port)).collect();
        let scheme = if self.masters.iter().any(|m| m.tls.is_some()) { "rediss" } else { "redis" };
        format!("{scheme}+cluster://{}", nodes.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port taken by another Redis between its choice and the bind (as
    /// suites run side by side): the first start moves to a new one, and the
    /// server that answers is this one, not the other.
    #[test]
    fn a_first_start_moves_off_a_port_another_redis_took() {
        let Some(other) = Server::start() else { return };
        let mut server = Server::not_started().unwrap();
        server.port = other.port;
        server.args = vec!["--requirepass".into(), "this-one".into()];
        server.auth = Some((None, "this-one".into()));
        server.start_first();
        println!("port {} was taken; the server started on {}", other.port, server.port);
        assert_ne!(server.port, other.port);
        assert_eq!(server.cli(&["PING"]).trim(), "PONG");
    }

    /// A Cluster master whose bus port another process took before it
    /// started (a Cluster started after its client, as suites run side by
    /// side) moves its bus, which no client is told, and keeps its port.
    #[test]
    fn a_restart_moves_a_cluster_master_s_bus_off_a_port_another_redis_took() {
        let Some(other) = Server::start() else { return };
        let Some(mut cluster) = Cluster::not_started() else { return };
        let master = &mut cluster.masters[0];
        let port = master.port;
        master.bus = Some(other.port);
        master.restart();
        println!("bus port {} was taken; the master's bus is on {:?}", other.port, master.bus);
        assert_ne!(master.bus, Some(other.port));
        assert_eq!(master.port, port, "the port its clients were told");
        assert_eq!(master.cli(&["PING"]).trim(), "PONG");
    }

    /// A server that cannot start on the port it was given (a restart) is
    /// named with its log, not taken for the process that has the port.
    #[test]
    fn a_restart_on_a_taken_port_fails_with_the_server_s_log() {
        let Some(other) = Server::start() else { return };
        let mut server = Server::not_started().unwrap();
        server.port = other.port;
        let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| server.restart())).unwrap_err();
        let message = failed.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(message.contains("Address already in use"), "{message}");
    }
}
