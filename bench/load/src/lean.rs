//! A lean HTTP/1.1 transport for the producers: one keep-alive connection,
//! each request written in one go, the reply's status and length read and
//! its body checked only for errors. It is the HTTP twin of the beanstalkd
//! client, so that `hourglass-load` measures the servers: with reqwest, the
//! load generator used as much CPU as the server it loaded (BENCHMARKS.md).
//! The bodies are the wire crate's types, serialized: the format is spelled
//! there, not here.

use std::io::Write as _;

use anyhow::{bail, Context};
use serde::Serialize;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Longest reply head (status line and headers) read.
const HEAD_BYTES_MAX: usize = 16 * 1024;
/// Largest reply body read.
const BODY_BYTES_MAX: usize = 16 * 1024 * 1024;

/// One keep-alive connection to a hourglass server.
pub struct Http1 {
    reader: BufReader<TcpStream>,
    /// `Host` and, with a token, `Authorization` lines, ready to send.
    fixed_headers: String,
    /// The request being written, head and body.
    request: Vec<u8>,
    /// Its body, serialized first for its length.
    json: Vec<u8>,
    line: String,
    /// The reply's body.
    body: Vec<u8>,
}

impl Http1 {
    /// Connects to `base` (`http://HOST:PORT`).
    pub async fn connect(base: &str, token: Option<&str>) -> anyhow::Result<Http1> {
        let Some(authority) = base.strip_prefix("http://") else {
            bail!("the lean HTTP client speaks plain http:// only (got {base}); use --http-client reqwest");
        };
        let authority = authority.trim_end_matches('/');
        let stream =
            TcpStream::connect(authority).await.with_context(|| format!("cannot reach the server at {authority}"))?;
        stream.set_nodelay(true)?;
        let mut fixed_headers = format!("Host: {authority}\r\n");
        if let Some(token) = token {
            fixed_headers.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        Ok(Http1 {
            reader: BufReader::new(stream),
            fixed_headers,
            request: Vec::new(),
            json: Vec::new(),
            line: String::new(),
            body: Vec::new(),
        })
    }

    /// POSTs `body` as JSON to `path` and waits for the reply; a reply other
    /// than 2xx is an error carrying its body.
    pub async fn post(&mut self, path: &str, body: &impl Serialize) -> anyhow::Result<()> {
        self.json.clear();
        serde_json::to_writer(&mut self.json, body)?;
        self.request.clear();
        write!(
            self.request,
            "POST {path} HTTP/1.1\r\n{}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.fixed_headers,
            self.json.len()
        )?;
        self.request.extend_from_slice(&self.json);
        self.reader.get_mut().write_all(&self.request).await?;
        let (status, length) = self.read_head().await.with_context(|| format!("POST {path}"))?;
        if length > BODY_BYTES_MAX {
            bail!("POST {path}: a reply of {length} bytes is over the {BODY_BYTES_MAX} this client reads");
        }
        self.body.resize(length, 0);
        self.reader.read_exact(&mut self.body).await?;
        if !(200..300).contains(&status) {
            bail!("POST {path}: {status}: {}", String::from_utf8_lossy(&self.body));
        }
        Ok(())
    }

    /// Reads the status line and headers; returns the status and the body's length.
    async fn read_head(&mut self) -> anyhow::Result<(u16, usize)> {
        let (mut status, mut length, mut read) = (None, None, 0);
        loop {
            self.line.clear();
            let n = self.reader.read_line(&mut self.line).await?;
            read += n;
            if n == 0 {
                bail!("the server closed the connection");
            }
            if read > HEAD_BYTES_MAX {
                bail!("a reply head of over {HEAD_BYTES_MAX} bytes");
            }
            let line = self.line.trim_end();
            if line.is_empty() {
                break;
            }
            if status.is_none() {
                let code = line.strip_prefix("HTTP/1.1 ").and_then(|rest| rest.get(..3)?.parse().ok());
                status = Some(code.with_context(|| format!("not an HTTP/1.1 status line: {line:?}"))?);
            } else if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = Some(value.trim().parse::<usize>().context("a bad Content-Length")?);
                } else if name.eq_ignore_ascii_case("transfer-encoding") {
                    bail!("a chunked reply, which the lean client does not read");
                }
            }
        }
        Ok((status.context("no status line")?, length.unwrap_or(0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hourglass_client::wire::{ClaimRequest, NewTask};
    use serde_json::value::RawValue;
    use tokio::net::TcpListener;

    /// A server that reads one request head and body, then answers `reply`.
    async fn answering(replies: Vec<&'static str>) -> (String, tokio::task::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let mut reader = BufReader::new(stream);
            let mut requests = Vec::new();
            for reply in replies {
                let mut head = String::new();
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).await.unwrap();
                    if let Some(value) = line.strip_prefix("Content-Length: ") {
                        length = value.trim().parse().unwrap();
                    }
                    head.push_str(&line);
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).await.unwrap();
                requests.push(head + &String::from_utf8(body).unwrap());
                reader.get_mut().write_all(reply.as_bytes()).await.unwrap();
            }
            requests
        });
        (base, server)
    }

    #[tokio::test]
    async fn posts_on_one_connection_and_reads_replies() {
        let (base, server) = answering(vec![
            "HTTP/1.1 201 Created\r\ncontent-length: 9\r\n\r\n{\"id\":1}\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 400 Bad Request\r\ncontent-length: 13\r\n\r\n{\"error\":\"x\"}",
        ])
        .await;
        let mut conn = Http1::connect(&base, Some("secret")).await.unwrap();
        let task = NewTask::new(RawValue::from_string("1".into()).unwrap());
        conn.post("/v1/queues/q/tasks", &task).await.unwrap();
        conn.post("/v1/queues/q/tasks", &task).await.unwrap();
        let error = conn.post("/v1/queues/q/tasks", &task).await.unwrap_err().to_string();
        assert!(error.contains("400") && error.contains("error"), "{error}");
        let requests = server.await.unwrap();
        assert!(requests[0].starts_with("POST /v1/queues/q/tasks HTTP/1.1\r\n"));
        assert!(requests[0].contains("Authorization: Bearer secret\r\n"));
        assert!(requests[0].ends_with("\r\n\r\n{\"payload\":1}"));
    }

    #[tokio::test]
    async fn refuses_what_it_does_not_read() {
        let (base, _server) = answering(vec!["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"]).await;
        let mut conn = Http1::connect(&base, None).await.unwrap();
        assert!(format!("{:#}", conn.post("/", &ClaimRequest::default()).await.unwrap_err()).contains("chunked"));
        let (base, _server) = answering(vec!["SMTP ready\r\n\r\n"]).await;
        let mut conn = Http1::connect(&base, None).await.unwrap();
        assert!(format!("{:#}", conn.post("/", &ClaimRequest::default()).await.unwrap_err()).contains("status line"));
        assert!(Http1::connect("https://example.invalid", None)
            .await
            .err()
            .expect("refused")
            .to_string()
            .contains("http://"));
    }
}
