//! HTTPS in `hourglass serve`: its flags, and SIGHUP reading the
//! certificate again.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use hourglass_server::Tls;

#[derive(Args, Debug)]
pub struct TlsArgs {
    /// Serve HTTPS (HTTP/2 and HTTP/1.1, offered over ALPN) with the
    /// certificate chain in this PEM file, the server's certificate first.
    /// Needs --tls-key. SIGHUP reads both files again: new connections get
    /// the new certificate, open ones keep theirs, and files that do not
    /// read or match are refused (logged) and the old pair kept. The
    /// beanstalkd front stays plain TCP.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert, in a PEM file (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

impl TlsArgs {
    /// Whether HTTPS was asked for.
    pub fn given(&self) -> bool {
        self.tls_cert.is_some()
    }

    /// The certificate and key, if given, read and checked.
    pub fn load(&self) -> anyhow::Result<Option<Tls>> {
        let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) else { return Ok(None) };
        Tls::load(cert, key).map(Some).context("--tls-cert, --tls-key")
    }
}

/// Reads `tls`'s files again on every SIGHUP that `hangups` receives, for
/// as long as the process runs; a pair that cannot be used is logged and
/// the old one kept. `hangups` is made before the files are first read (see
/// [`hangups`]).
#[cfg(unix)]
pub fn reload_on_hangup(tls: Tls, mut hangups: tokio::signal::unix::Signal) {
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            match tls.reload() {
                Ok(()) => tracing::info!(cert = %tls.cert_path().display(), "reloaded the TLS certificate"),
                Err(error) => {
                    tracing::error!(%error, "kept the TLS certificate in use: the new one cannot be used")
                }
            }
        }
    });
}

/// A stream of SIGHUPs, made before the files it reloads are first read:
/// a SIGHUP between the read and the stream's making would be lost (and
/// with it the change the operator announced), or, before any stream, end
/// the process, as SIGHUP's default is.
#[cfg(unix)]
pub fn hangups() -> anyhow::Result<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).context("cannot listen for SIGHUP")
}
