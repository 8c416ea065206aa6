//! Connections to one Redis or to a Redis Cluster, behind one type, in
//! clear or over TLS.

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::io::tcp::TcpSettings;
use redis::{Cmd, IntoConnectionInfo, Pipeline, RedisFuture, TlsCertificates, Value};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

use crate::error::ConnectError;

/// Where the tasks are: one Redis, or a Redis Cluster, in clear or over TLS
/// (`rediss://`, `rediss+cluster://`). Either may carry a user and password
/// (`redis://[USER]:PASSWORD@HOST:PORT`); they are shown (`Display`,
/// `Debug`, errors) with the password as `***`.
#[derive(Clone, PartialEq, Eq)]
pub enum Target {
    /// `redis://[[USER]:PASSWORD@]HOST:PORT[/DB]`, or `rediss://` the same
    /// over TLS.
    One(String),
    /// `redis+cluster://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]` (or
    /// `rediss+cluster://` over TLS): any of the Cluster's nodes, each given
    /// the same user and password, held as one URL a node
    /// (`redis://...`, `rediss://...`).
    Cluster(Vec<String>),
}

impl Target {
    /// Whether its connections are over TLS.
    pub fn is_tls(&self) -> bool {
        match self {
            Target::One(url) => url.starts_with("rediss://"),
            Target::Cluster(nodes) => nodes.iter().any(|node| node.starts_with("rediss://")),
        }
    }
}

/// Certificate authorities to check a Redis over TLS against, instead of the
/// system's: one or more PEM `CERTIFICATE` blocks.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisCa {
    pem: Arc<[u8]>,
    /// Where it was read from, for messages.
    from: String,
}

impl fmt::Debug for RedisCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RedisCa({})", self.from)
    }
}

impl RedisCa {
    /// The authorities in `pem`, read from `from` (a file's name, say).
    ///
    /// # Errors
    /// [`ConnectError::InvalidOption`] if `pem` holds no certificate, or one
    /// that does not read.
    pub fn from_pem(pem: Vec<u8>, from: impl Into<String>) -> Result<RedisCa, ConnectError> {
        let from = from.into();
        let read: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(&pem).collect();
        match read {
            Ok(certificates) if !certificates.is_empty() => Ok(RedisCa { pem: pem.into(), from }),
            Ok(_) => Err(ConnectError::InvalidOption(format!("no PEM certificate in {from}"))),
            Err(error) => Err(ConnectError::InvalidOption(format!("cannot read the certificates in {from}: {error}"))),
        }
    }

    /// The authorities in the PEM file at `path`.
    ///
    /// # Errors
    /// [`ConnectError::InvalidOption`] if the file cannot be read or holds no
    /// certificate that reads.
    pub fn read(path: &Path) -> Result<RedisCa, ConnectError> {
        let from = path.display().to_string();
        let pem =
            std::fs::read(path).map_err(|error| ConnectError::InvalidOption(format!("cannot read {from}: {error}")))?;
        RedisCa::from_pem(pem, from)
    }

    fn certificates(&self) -> TlsCertificates {
        TlsCertificates { client_tls: None, root_cert: Some(self.pem.to_vec()) }
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Target({self})")
    }
}

/// `[USER]:PASSWORD@` at the start of `authority` (what follows `scheme://`),
/// and the rest.
fn split_userinfo(authority: &str) -> (Option<&str>, &str) {
    let end = authority.find('/').unwrap_or(authority.len());
    match authority[..end].rfind('@') {
        Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
        None => (None, authority),
    }
}

/// `userinfo` with its password, if any, as `***`.
fn redacted(userinfo: &str) -> String {
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:***@"),
        None => format!("{userinfo}@"),
    }
}

/// `url` (`scheme://...`) with its password, if any, as `***`.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    match split_userinfo(rest) {
        (Some(userinfo), rest) => format!("{scheme}://{}{rest}", redacted(userinfo)),
        (None, _) => url.to_owned(),
    }
}

impl FromStr for Target {
    type Err = String;

    fn from_str(url: &str) -> Result<Target, String> {
        let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
        match scheme {
            "redis+cluster" | "rediss+cluster" => {
                let node_scheme = scheme.trim_end_matches("+cluster");
                let (userinfo, nodes) = split_userinfo(rest);
                let auth = userinfo.map(|userinfo| format!("{userinfo}@")).unwrap_or_default();
                let nodes: Vec<String> = nodes
                    .split(',')
                    .filter(|node| !node.is_empty())
                    .map(|node| format!("{node_scheme}://{auth}{node}"))
                    .collect();
                if nodes.is_empty() {
                    return Err(format!("{scheme}:// names at least one HOST:PORT"));
                }
                Ok(Target::Cluster(nodes))
            }
            "redis" | "rediss" => {
                redis::Client::open(url).map_err(|e| format!("{}: {e}", redact(url)))?;
                Ok(Target::One(url.to_owned()))
            }
            _ => Err(format!(
                "{}: a store is redis://HOST:PORT[/DB] or redis+cluster://HOST:PORT[,HOST:PORT...] \
                 (rediss:// and rediss+cluster:// over TLS)",
                redact(url)
            )),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::One(url) => f.write_str(&redact(url)),
            Target::Cluster(nodes) => {
                let (mut scheme, mut auth) = ("redis", String::new());
                let nodes: Vec<&str> = nodes
                    .iter()
                    .map(|node| {
                        let (node_scheme, node) = node.split_once("://").unwrap_or(("redis", node));
                        let (userinfo, node) = split_userinfo(node);
                        (scheme, auth) = (node_scheme, userinfo.map(redacted).unwrap_or_default());
                        node
                    })
                    .collect();
                write!(f, "{scheme}+cluster://{auth}{}", nodes.join(","))
            }
        }
    }
}

/// A connection that reconnects by itself: cheap to clone, shared by every
/// request (commands from many tasks are pipelined on it).
#[derive(Clone)]
pub(crate) enum Conn {
    One(ConnectionManager),
    Cluster(ClusterConnection),
}

/// How long a command may wait for its reply: past it, the request fails
/// with a storage error whose change may or may not have been made (redis-rs's
/// default, 500 ms, failed acks while Redis ran the scripts that filed 100,000
/// tasks due at once).
pub const REPLY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Attempts to connect again after one fails, within one request: none. A
/// request while Redis is away fails at once (the server answers 503
/// `store_unavailable`) rather than waiting out a backoff; the next request,
/// or the membership's heartbeat, tries again.
const RECONNECT_RETRIES: usize = 0;

/// Every connection sends at once (`TCP_NODELAY`): redis-rs leaves Nagle's
/// algorithm on, which held small writes behind delayed acks and made a
/// delivery through the timers 19 ms late at the median (BENCHMARKS.md).
fn tcp() -> TcpSettings {
    TcpSettings::default().set_nodelay(true)
}

/// A client of the Redis at `url`, sending at once; over TLS (`rediss://`),
/// checked against `ca` if given, else the system's authorities.
pub(crate) fn client(url: &str, ca: Option<&RedisCa>) -> redis::RedisResult<redis::Client> {
    let info = url.into_connection_info()?.set_tcp_settings(tcp());
    match ca {
        Some(ca) if url.starts_with("rediss://") => redis::Client::build_with_tls(info, ca.certificates()),
        _ => redis::Client::open(info),
    }
}

impl Conn {
    pub(crate) async fn open(target: &Target, ca: Option<&RedisCa>) -> redis::RedisResult<Conn> {
        match target {
            Target::One(url) => {
                let config = ConnectionManagerConfig::new()
                    .set_response_timeout(Some(REPLY_TIMEOUT))
                    .set_number_of_retries(RECONNECT_RETRIES);
                Ok(Conn::One(client(url, ca)?.get_connection_manager_with_config(config).await?))
            }
            Target::Cluster(nodes) => {
                let mut builder = redis::cluster::ClusterClient::builder(nodes.iter().map(String::as_str))
                    .tcp_settings(tcp())
                    .response_timeout(REPLY_TIMEOUT);
                if let Some(ca) = ca.filter(|_| target.is_tls()) {
                    builder = builder.certs(ca.certificates());
                }
                Ok(Conn::Cluster(builder.build()?.get_async_connection().await?))
            }
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::One(conn) => conn.req_packed_command(cmd),
            Conn::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::One(conn) => conn.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::One(conn) => conn.get_db(),
            Conn::Cluster(conn) => conn.get_db(),
        }
    }
}

/// The URLs to subscribe through: one Redis, or every node of a Cluster given
/// (a message published on any node of a Cluster reaches every node's
/// subscribers, so one subscription suffices; the others are spares).
pub(crate) fn subscribe_urls(target: &Target) -> Vec<String> {
    match target {
        Target::One(url) => vec![url.clone()],
        Target::Cluster(nodes) => nodes.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_read_from_urls() {
        assert_eq!("redis://127.0.0.1:6380/2".parse(), Ok(Target::One("redis://127.0.0.1:6380/2".into())));
        assert_eq!(
            "redis+cluster://a:1,b:2".parse(),
            Ok(Target::Cluster(vec!["redis://a:1".into(), "redis://b:2".into()]))
        );
        assert!("redis+cluster://".parse::<Target>().is_err());
        assert!("postgres://x".parse::<Target>().unwrap_err().contains("redis://HOST:PORT"));
        let cluster: Target = "redis+cluster://a:1,b:2".parse().unwrap();
        assert_eq!(cluster.to_string(), "redis+cluster://a:1,b:2");
        assert!(!cluster.is_tls());
    }

    #[test]
    fn targets_over_tls() {
        let one: Target = "rediss://app:s3cret@h:6380/1".parse().unwrap();
        assert_eq!(one, Target::One("rediss://app:s3cret@h:6380/1".into()));
        assert!(one.is_tls());
        assert_eq!(one.to_string(), "rediss://app:***@h:6380/1");
        let cluster: Target = "rediss+cluster://app:s3cret@a:1,b:2".parse().unwrap();
        assert_eq!(cluster, Target::Cluster(vec!["rediss://app:s3cret@a:1".into(), "rediss://app:s3cret@b:2".into()]));
        assert!(cluster.is_tls());
        assert_eq!(cluster.to_string(), "rediss+cluster://app:***@a:1,b:2");
        assert!(!format!("{cluster:?}").contains("s3cret"));
        assert_eq!(
            "rediss+cluster://".parse::<Target>().unwrap_err(),
            "rediss+cluster:// names at least one HOST:PORT"
        );
    }

    #[test]
    fn an_authority_is_checked_when_read() {
        let refused = RedisCa::from_pem(b"not a certificate".to_vec(), "ca.pem").unwrap_err().to_string();
        assert_eq!(refused, "no PEM certificate in ca.pem");
        let broken = b"-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n".to_vec();
        assert!(RedisCa::from_pem(broken, "ca.pem")
            .unwrap_err()
            .to_string()
            .starts_with("cannot read the certificates in ca.pem"));
        let missing = RedisCa::read(Path::new("/nonexistent/ca.pem")).unwrap_err().to_string();
        assert!(missing.starts_with("cannot read /nonexistent/ca.pem: "), "{missing}");
    }

    #[test]
    fn passwords_are_never_shown() {
        let one: Target = "redis://app:s3cret@127.0.0.1:6380/2".parse().unwrap();
        assert_eq!(one, Target::One("redis://app:s3cret@127.0.0.1:6380/2".into()));
        assert_eq!(one.to_string(), "redis://app:***@127.0.0.1:6380/2");
        assert!(!format!("{one:?}").contains("s3cret"));
        let default_user: Target = "redis://:s3cret@h:1".parse().unwrap();
        assert_eq!(default_user.to_string(), "redis://:***@h:1");
        let cluster: Target = "redis+cluster://app:s3cret@a:1,b:2".parse().unwrap();
        assert_eq!(cluster, Target::Cluster(vec!["redis://app:s3cret@a:1".into(), "redis://app:s3cret@b:2".into()]));
        assert_eq!(cluster.to_string(), "redis+cluster://app:***@a:1,b:2");
        let refused = "postgres://app:s3cret@h:1".parse::<Target>().unwrap_err();
        assert!(!refused.contains("s3cret"), "{refused}");
    }
}
