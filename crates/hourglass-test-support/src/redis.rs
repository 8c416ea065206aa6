//! Redis servers of the tests' own: each on a free port, in a directory of
//! its own, with `appendonly yes` and `appendfsync always`, killed when
//! dropped; in clear, or over TLS only with a certificate an
//! [`Authority`] of the test's signed. Never the shared instance on 6379.
//! Without `redis-server` (and `redis-cli` for a Cluster) a test skips, and
//! fails under `CI=true`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::certs::{Authority, LOCAL_NAMES};
use crate::{free_port, required, within};

/// How long a server may take to answer once started.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// One `redis-server` process (or none, while it is stopped).
pub struct Server {
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
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
        server.restart();
        Some(server)
    }

    /// Starts a server that requires `password` (`requirepass`); `None`
    /// without `redis-server`. Its [`url`](Server::url) carries the password.
    pub fn with_password(password: &str) -> Option<Server> {
        let mut server = Server::not_started()?;
        server.args = vec!["--requirepass".into(), password.into()];
        server.auth = Some((None, password.into()));
        server.restart();
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
        server.restart();
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
        server.restart();
        Some(server)
    }

    /// From its next start, TLS only, with a certificate `authority` signed.
    fn serve_tls(&mut self, authority: &Authority) {
        let (cert, key) = authority.issue(&LOCAL_NAMES, "redis").write(self.dir.path(), "redis");
        let ca = authority.write(self.dir.path(), "ca.pem");
        let port = self.port.to_string();
        // The last `port` wins: no port in clear.
        let args = ["--port", "0", "--tls-port", &port, "--tls-auth-clients", "no"].map(String::from);
        self.args.extend(args);
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
    pub fn restart(&mut self) {
        self.kill();
        self.child = Some(spawn(self.dir.path(), self.port, &self.args));
        self.wait_until_up();
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

    fn wait_until_up(&self) {
        let what = format!("redis-server on port {} answers PING", self.port);
        within(START_TIMEOUT, &what, || self.cli(&["PING"]).trim() == "PONG");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

fn spawn(dir: &Path, port: u16, extra: &[String]) -> Child {
    Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
        .arg(dir)
        .args(["--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start redis-server")
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
        cluster.start_now();
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
        cluster.start_now();
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
            let bus = free_port().to_string();
            master.args = ["--cluster-enabled", "yes", "--cluster-node-timeout", "2000", "--cluster-port", &bus]
                .map(String::from)
                .to_vec();
            masters.push(master);
        }
        Some(Cluster { masters })
    }

    /// Starts the masters and joins them; returns once the Cluster is ok.
    pub fn start_now(&mut self) {
        for master in &mut self.masters {
            master.restart();
        }
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
