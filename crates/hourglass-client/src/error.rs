//! What can go wrong with a request, typed: the server refused it or failed
//! ([`Error::Api`], with the server's stable code), it never got there or
//! its answer never came back ([`Error::Unreachable`]), or the answer is not
//! what the API sends ([`Error::Decode`]).

use std::fmt;

use reqwest::StatusCode;

/// A request that did not get the answer it asked for.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The server answered with an error: `{"error": {"code", "message"}}`.
    Api {
        /// The answer's status: 4xx for the request's errors, 5xx for the server's.
        status: StatusCode,
        /// The server's stable code: `not_found`, `stale_lease`, `invalid`...
        code: String,
        /// What went wrong, for a person.
        message: String,
    },
    /// The request was not sent, or its answer not received: nothing
    /// listens at the address, the connection broke, the server's
    /// certificate is not trusted, or the URL is `https://` and this client
    /// is built without its `tls` feature.
    Unreachable {
        /// The request's URL.
        url: String,
        /// Why.
        source: reqwest::Error,
    },
    /// The answer is not the JSON the API sends for this request.
    Decode {
        /// The request's URL.
        url: String,
        /// The answer's status.
        status: StatusCode,
        /// The answer's first bytes, as text.
        body: String,
        /// Why it does not read.
        source: serde_json::Error,
    },
    /// The client could not be made ([`ClientBuilder`](crate::ClientBuilder)):
    /// a certificate authority's PEM that does not read, say.
    Build {
        /// Why.
        source: reqwest::Error,
    },
}

impl Error {
    /// The server's code for an [`Api`](Error::Api) error, such as
    /// `not_found` or `stale_lease`; `None` for the others.
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Api { code, .. } => Some(code),
            Error::Unreachable { .. } | Error::Decode { .. } | Error::Build { .. } => None,
        }
    }

    /// The answer's status, if one came.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            Error::Api { status, .. } | Error::Decode { status, .. } => Some(*status),
            Error::Unreachable { .. } | Error::Build { .. } => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Api { status, code, message } => write!(f, "{} {code}: {message}", status.as_u16()),
            Error::Unreachable { url, .. } => write!(f, "cannot reach {url}"),
            Error::Decode { url, status, body, .. } => {
                write!(f, "{url} answered {} with what is not the API's JSON: {body}", status.as_u16())
            }
            Error::Build { source } => write!(f, "cannot make the HTTP client: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Api { .. } => None,
            Error::Unreachable { source, .. } | Error::Build { source } => Some(source),
            Error::Decode { source, .. } => Some(source),
        }
    }
}
