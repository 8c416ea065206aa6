//! How a [`Client`] is made with more than a URL and a token: a timeout,
//! and (with the `tls` feature) the authorities an HTTPS server's
//! certificate may be signed by.

use std::time::Duration;

use crate::client::Client;
use crate::error::Error;

/// Makes a [`Client`]: [`Client::builder`].
///
/// ```no_run
/// # fn demo() -> Result<(), hourglass_client::Error> {
/// # #[cfg(feature = "tls")] {
/// let authority = std::fs::read("ca.pem").expect("the authority's certificate");
/// let client = hourglass_client::Client::builder("https://hourglass.internal:7700")
///     .token("s3cret")
///     .root_certificates_pem(&authority)?
///     .build()?;
/// # }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ClientBuilder {
    base: String,
    token: Option<String>,
    http: reqwest::ClientBuilder,
}

impl ClientBuilder {
    pub(crate) fn new(base_url: impl Into<String>) -> ClientBuilder {
        ClientBuilder { base: base_url.into(), token: None, http: reqwest::Client::builder() }
    }

    /// Sends `token` as a bearer token.
    pub fn token(self, token: impl Into<String>) -> ClientBuilder {
        ClientBuilder { token: Some(token.into()), ..self }
    }

    /// Gives up a request after `timeout` (make it longer than the claims'
    /// `wait_ms`).
    pub fn timeout(self, timeout: Duration) -> ClientBuilder {
        ClientBuilder { http: self.http.timeout(timeout), ..self }
    }

    /// Trusts the certificate authorities in `pem` (one or more
    /// `CERTIFICATE` blocks) for an `https://` server, besides the
    /// well-known ones (Mozilla's list, built in).
    ///
    /// # Errors
    /// [`Error::Build`] if `pem` holds no certificate that reads.
    #[cfg(feature = "tls")]
    pub fn root_certificates_pem(self, pem: &[u8]) -> Result<ClientBuilder, Error> {
        let certificates = reqwest::Certificate::from_pem_bundle(pem).map_err(|source| Error::Build { source })?;
        let http = certificates.into_iter().fold(self.http, reqwest::ClientBuilder::add_root_certificate);
        Ok(ClientBuilder { http, ..self })
    }

    /// The client.
    ///
    /// # Errors
    /// [`Error::Build`] if the HTTP client cannot be made.
    pub fn build(self) -> Result<Client, Error> {
        let http = self.http.build().map_err(|source| Error::Build { source })?;
        Ok(Client::with_http(http, self.base, self.token))
    }
}
