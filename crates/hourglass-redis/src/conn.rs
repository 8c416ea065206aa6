//! Connections to one Redis or to a Redis Cluster, behind one type.

use std::fmt;
use std::str::FromStr;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::io::tcp::TcpSettings;
use redis::{Cmd, IntoConnectionInfo, Pipeline, RedisFuture, Value};

/// Where the tasks are: one Redis, or a Redis Cluster. Either may carry a
/// user and password (`redis://[USER]:PASSWORD@HOST:PORT`); they are shown
/// (`Display`, `Debug`, errors) with the password as `***`.
#[derive(Clone, PartialEq, Eq)]
pub enum Target {
    /// `redis://[[USER]:PASSWORD@]HOST:PORT[/DB]`.
    One(String),
    /// `redis+cluster://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]`: any of
    /// the Cluster's nodes, each given the same user and password.
    Cluster(Vec<String>),
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
        if let Some(nodes) = url.strip_prefix("redis+cluster://") {
            let (userinfo, nodes) = split_userinfo(nodes);
            let auth = userinfo.map(|userinfo| format!("{userinfo}@")).unwrap_or_default();
            let nodes: Vec<String> =
                nodes.split(',').filter(|node| !node.is_empty()).map(|node| format!("redis://{auth}{node}")).collect();
            if nodes.is_empty() {
                return Err("redis+cluster:// names at least one HOST:PORT".into());
            }
            Ok(Target::Cluster(nodes))
        } else if url.starts_with("redis://") {
            redis::Client::open(url).map_err(|e| format!("{}: {e}", redact(url)))?;
            Ok(Target::One(url.to_owned()))
        } else {
            Err(format!(
                "{}: a store is redis://HOST:PORT[/DB] or redis+cluster://HOST:PORT[,HOST:PORT...]",
                redact(url)
            ))
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::One(url) => f.write_str(&redact(url)),
            Target::Cluster(nodes) => {
                let mut auth = String::new();
                let nodes: Vec<&str> = nodes
                    .iter()
                    .map(|node| {
                        let (userinfo, node) = split_userinfo(node.trim_start_matches("redis://"));
                        auth = userinfo.map(redacted).unwrap_or_default();
                        node
                    })
                    .collect();
                write!(f, "redis+cluster://{auth}{}", nodes.join(","))
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

/// A client of the Redis at `url`, sending at once.
pub(crate) fn client(url: &str) -> redis::RedisResult<redis::Client> {
    redis::Client::open(url.into_connection_info()?.set_tcp_settings(tcp()))
}

impl Conn {
    pub(crate) async fn open(target: &Target) -> redis::RedisResult<Conn> {
        match target {
            Target::One(url) => {
                let config = ConnectionManagerConfig::new()
                    .set_response_timeout(Some(REPLY_TIMEOUT))
                    .set_number_of_retries(RECONNECT_RETRIES);
                Ok(Conn::One(client(url)?.get_connection_manager_with_config(config).await?))
            }
            Target::Cluster(nodes) => {
                let client = redis::cluster::ClusterClient::builder(nodes.iter().map(String::as_str))
                    .tcp_settings(tcp())
                    .response_timeout(REPLY_TIMEOUT)
                    .build()?;
                Ok(Conn::Cluster(client.get_async_connection().await?))
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
