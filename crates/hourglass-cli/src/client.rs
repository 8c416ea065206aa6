//! A small client for the HTTP API: the server's error messages become the
//! command's error messages.

use anyhow::{anyhow, Context};
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::ServerArgs;

/// Requests to one server.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Client {
    pub fn new(server: &ServerArgs) -> anyhow::Result<Client> {
        let http = reqwest::Client::builder().build().context("cannot build the HTTP client")?;
        Ok(Client { http, base: server.server.trim_end_matches('/').to_owned(), token: server.token.clone() })
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.send(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.send(Method::POST, path, Some(body)).await
    }

    pub async fn put(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.send(Method::PUT, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> anyhow::Result<Value> {
        self.send(Method::DELETE, path, None).await
    }

    /// Sends a request; a 4xx or 5xx becomes an error carrying the server's message.
    pub async fn send(&self, method: Method, path: &str, body: Option<&Value>) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.base);
        let mut request = self.http.request(method.clone(), &url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.with_context(|| {
            format!(
                "cannot reach {url}: is `hourglass serve` running there? (--server or HOURGLASS_SERVER names another)"
            )
        })?;
        let status = response.status();
        let text = response.text().await.with_context(|| format!("{method} {url}: cannot read the response"))?;
        if status == StatusCode::NO_CONTENT || text.is_empty() {
            return if status.is_success() { Ok(Value::Null) } else { Err(anyhow!("{method} {path}: {status}")) };
        }
        let value: Value = serde_json::from_str(&text).with_context(|| format!("{method} {path}: not JSON: {text}"))?;
        if status.is_success() {
            Ok(value)
        } else {
            let message = value["error"]["message"].as_str().unwrap_or(&text);
            let code = value["error"]["code"].as_str().unwrap_or("error");
            let hint = match status {
                StatusCode::UNAUTHORIZED if self.token.is_none() => {
                    " (the server needs a token: give --token or set HOURGLASS_TOKEN)"
                }
                StatusCode::UNAUTHORIZED => " (the server refused this token)",
                _ => "",
            };
            Err(anyhow!("{method} {path}: {status} {code}: {message}{hint}"))
        }
    }
}
