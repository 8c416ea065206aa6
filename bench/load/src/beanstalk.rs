//! A minimal client of beanstalkd's text protocol, for beanstalkd itself or
//! hourglass's front: `use`, `watch`, `put`, `reserve-with-timeout`,
//! `delete`, one connection, one command at a time.

use anyhow::{bail, Context};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Every put's priority: the most urgent.
const PRIORITY: u32 = 0;
/// Every job's time to run once reserved, in seconds.
const TTR_S: u32 = 60;

/// One connection.
pub struct Beanstalk {
    reader: BufReader<TcpStream>,
}

impl Beanstalk {
    /// Connects to `addr` (`HOST:PORT`).
    pub async fn connect(addr: &str) -> anyhow::Result<Beanstalk> {
        let stream = TcpStream::connect(addr).await.with_context(|| format!("cannot reach beanstalkd at {addr}"))?;
        stream.set_nodelay(true)?;
        Ok(Beanstalk { reader: BufReader::new(stream) })
    }

    /// Connects and `use`s `tube`: a producer.
    pub async fn using(addr: &str, tube: &str) -> anyhow::Result<Beanstalk> {
        let mut conn = Beanstalk::connect(addr).await?;
        conn.command(&format!("use {tube}"), "USING").await?;
        Ok(conn)
    }

    /// Connects and watches `tube` alone: a consumer.
    pub async fn watching(addr: &str, tube: &str) -> anyhow::Result<Beanstalk> {
        let mut conn = Beanstalk::connect(addr).await?;
        conn.command(&format!("watch {tube}"), "WATCHING").await?;
        conn.command("ignore default", "WATCHING").await?;
        Ok(conn)
    }

    async fn line(&mut self) -> anyhow::Result<String> {
        let mut line = String::new();
        if self.reader.read_line(&mut line).await? == 0 {
            bail!("beanstalkd closed the connection");
        }
        Ok(line.trim_end().to_owned())
    }

    /// Sends `command`; its reply, which must start with `expect`.
    pub async fn command(&mut self, command: &str, expect: &str) -> anyhow::Result<String> {
        self.reader.get_mut().write_all(format!("{command}\r\n").as_bytes()).await?;
        let reply = self.line().await?;
        if !reply.starts_with(expect) {
            bail!("beanstalkd answered {reply:?} to {command:?}");
        }
        Ok(reply)
    }

    /// Puts a job due `delay_s` from now; its id.
    pub async fn put(&mut self, delay_s: u64, body: &[u8]) -> anyhow::Result<u64> {
        let mut request = format!("put {PRIORITY} {delay_s} {TTR_S} {}\r\n", body.len()).into_bytes();
        request.extend_from_slice(body);
        request.extend_from_slice(b"\r\n");
        self.reader.get_mut().write_all(&request).await?;
        let reply = self.line().await?;
        match reply.strip_prefix("INSERTED ").map(str::parse) {
            Some(Ok(id)) => Ok(id),
            _ => bail!("beanstalkd answered {reply:?} to put"),
        }
    }

    /// Deletes job `id`.
    pub async fn delete(&mut self, id: u64) -> anyhow::Result<()> {
        self.command(&format!("delete {id}"), "DELETED").await.map(drop)
    }

    /// Reserves a job, waiting up to `timeout_s`: its id and body, or `None`.
    pub async fn reserve(&mut self, timeout_s: u64) -> anyhow::Result<Option<(u64, Vec<u8>)>> {
        self.reader.get_mut().write_all(format!("reserve-with-timeout {timeout_s}\r\n").as_bytes()).await?;
        let reply = self.line().await?;
        if reply.starts_with("TIMED_OUT") || reply.starts_with("DEADLINE_SOON") {
            return Ok(None);
        }
        let mut parts = reply.split(' ');
        let (Some("RESERVED"), Some(id), Some(len)) = (parts.next(), parts.next(), parts.next()) else {
            bail!("beanstalkd answered {reply:?} to reserve");
        };
        let (id, len): (u64, usize) = (id.parse()?, len.parse()?);
        let mut body = vec![0; len + 2];
        self.reader.read_exact(&mut body).await?;
        body.truncate(len);
        Ok(Some((id, body)))
    }
}
