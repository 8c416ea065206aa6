//! The client and how it sends a request and reads the answer; the routes
//! are methods in the files beside this one.

use std::sync::Arc;

use reqwest::{Method, RequestBuilder, StatusCode};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::Error;
use hourglass_wire::ErrorBody;

/// Bytes of an unreadable answer kept in [`Error::Decode`].
const DECODE_BODY_BYTES_MAX: usize = 512;

/// A client of one server: cheap to clone (clones share connections), safe
/// to use from many tasks at once.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: Arc<str>,
    token: Option<Arc<str>>,
}

/// The answer to a request that makes or replaces something: the value, and
/// whether it is new (201) or was there already (200: a task whose key named
/// a live task, a schedule replaced).
#[derive(Debug, Clone)]
pub struct Stored<T> {
    /// The answer.
    pub value: T,
    /// Whether it is new.
    pub created: bool,
}

impl Client {
    /// A client of the server at `base_url` (such as `http://127.0.0.1:7700`),
    /// sending `token` as a bearer token when given.
    pub fn new(base_url: impl Into<String>, token: Option<String>) -> Client {
        Client::with_http(reqwest::Client::new(), base_url, token)
    }

    /// A client of the server at `base_url` made with more than a token: a
    /// timeout, the authorities of an HTTPS server.
    pub fn builder(base_url: impl Into<String>) -> crate::ClientBuilder {
        crate::ClientBuilder::new(base_url)
    }

    /// The same on an HTTP client of the caller's (with its own timeouts, say).
    pub fn with_http(http: reqwest::Client, base_url: impl Into<String>, token: Option<String>) -> Client {
        let base = base_url.into().trim_end_matches('/').into();
        Client { http, base, token: token.map(Into::into) }
    }

    /// The server's address, as given.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// Whether requests carry a token.
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// A request to `path` (below the base URL).
    pub(crate) fn request(&self, method: Method, path: &str) -> (String, RequestBuilder) {
        let url = format!("{}{path}", self.base);
        let mut request = self.http.request(method, &url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        (url, request)
    }

    /// Sends `request`: the answer's body if its status is a success, else
    /// the server's error.
    pub(crate) async fn send(&self, url: &str, request: RequestBuilder) -> Result<(StatusCode, Vec<u8>), Error> {
        let unreachable = |source| Error::Unreachable { url: url.to_owned(), source };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let body = response.bytes().await.map_err(unreachable)?.to_vec();
        if status.is_success() {
            return Ok((status, body));
        }
        let ErrorBody { error } = decode(url, status, &body)?;
        Err(Error::Api { status, code: error.code, message: error.message })
    }

    /// A request without a body whose answer is a `T`.
    pub(crate) async fn get_json<T: DeserializeOwned>(&self, method: Method, path: &str) -> Result<T, Error> {
        let (url, request) = self.request(method, path);
        let (status, body) = self.send(&url, request).await?;
        decode(&url, status, &body)
    }

    /// A request with the JSON `body` whose answer is a `T`, and whether
    /// what it stored is new (201).
    pub(crate) async fn post<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: &B,
    ) -> Result<Stored<T>, Error> {
        let (url, request) = self.request(method, path);
        let (status, answer) = self.send(&url, request.json(body)).await?;
        Ok(Stored { value: decode(&url, status, &answer)?, created: status == StatusCode::CREATED })
    }

    /// A request with the query `query` whose answer is a `T`.
    pub(crate) async fn query<Q: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        path: &str,
        query: &Q,
    ) -> Result<T, Error> {
        let (url, request) = self.request(Method::GET, path);
        let (status, body) = self.send(&url, request.query(query)).await?;
        decode(&url, status, &body)
    }

    /// A request whose answer is 204, no content.
    pub(crate) async fn no_content(&self, method: Method, path: &str) -> Result<(), Error> {
        let (url, request) = self.request(method, path);
        self.send(&url, request).await.map(drop)
    }
}

/// `body` read as a `T`.
fn decode<T: DeserializeOwned>(url: &str, status: StatusCode, body: &[u8]) -> Result<T, Error> {
    serde_json::from_slice(body).map_err(|source| Error::Decode {
        url: url.to_owned(),
        status,
        body: String::from_utf8_lossy(&body[..body.len().min(DECODE_BODY_BYTES_MAX)]).into_owned(),
        source,
    })
}
