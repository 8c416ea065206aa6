//! HTTPS: a certificate chain and its key read from PEM files, served with
//! rustls (the ring provider, as the push client's), HTTP/2 and HTTP/1.1
//! offered over ALPN, and reloaded on demand without dropping a connection.
//!
//! The server's configuration is built once; its certificate comes from a
//! resolver that hands every handshake the key pair of the moment, held in an
//! [`ArcSwap`]. [`Tls::reload`] reads the files again and swaps the pair in
//! only if both read and match: a connection already open keeps the
//! certificate it was opened with, a new one gets the new pair, and a bad
//! file leaves the old pair in place. A reload also forgets the sessions
//! clients could resume: a resumed session is not shown a certificate, so
//! one begun under the old pair would otherwise go on under it.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio_rustls::rustls::crypto::{ring, CryptoProvider};
use tokio_rustls::rustls::pki_types::pem::{self, PemObject};
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert, ServerSessionMemoryCache, StoresServerSessions};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

/// The protocols offered over ALPN, most preferred first.
const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];
/// Sessions kept for resumption: rustls's default.
const SESSIONS_MAX: usize = 256;

/// A certificate and key for HTTPS, from two PEM files, that can be read
/// again. Cheap to clone: clones share the pair, and a reload through any
/// of them is seen by all.
#[derive(Clone)]
pub struct Tls {
    resolver: Arc<Resolver>,
    acceptor: TlsAcceptor,
}

/// Where the pair is read from, and the pair of the moment.
struct Resolver {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    current: ArcSwap<CertifiedKey>,
    sessions: Arc<Sessions>,
}

/// The sessions clients may resume, begun under the pair of the moment.
#[derive(Debug)]
struct Sessions(ArcSwap<ServerSessionMemoryCache>);

impl StoresServerSessions for Sessions {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        self.0.load().put(key, value)
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.0.load().get(key)
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.0.load().take(key)
    }

    fn can_cache(&self) -> bool {
        true
    }
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the key's bytes: only where it is.
        f.debug_struct("Resolver").field("cert", &self.cert).field("key", &self.key).finish_non_exhaustive()
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls").field("cert", &self.resolver.cert).field("key", &self.resolver.key).finish()
    }
}

/// Two handles are equal if they share their pair.
impl PartialEq for Tls {
    fn eq(&self, other: &Tls) -> bool {
        Arc::ptr_eq(&self.resolver, &other.resolver)
    }
}

impl Eq for Tls {}

/// Why a certificate and key cannot be used. Names the file; never shows
/// the key.
#[derive(Debug)]
#[non_exhaustive]
pub enum TlsError {
    /// A file cannot be read, or is not PEM.
    Read {
        /// `certificate` or `key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The certificate file holds no `CERTIFICATE` block.
    NoCertificate(PathBuf),
    /// The key file holds no private key (PKCS#8, PKCS#1 or SEC1).
    NoKey(PathBuf),
    /// The key cannot be used, or does not match the certificate.
    Rejected {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// Why, in rustls's words.
        source: tokio_rustls::rustls::Error,
    },
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::Read { what, path, source } => {
                write!(f, "cannot read the TLS {what} in {}: {source}", path.display())
            }
            TlsError::NoCertificate(path) => write!(f, "no PEM certificate in {}", path.display()),
            TlsError::NoKey(path) => write!(f, "no PEM private key in {}", path.display()),
            TlsError::Rejected { cert, key, source } => {
                write!(f, "the key in {} does not fit the certificate in {}: {source}", key.display(), cert.display())
            }
        }
    }
}

impl std::error::Error for TlsError {}

impl Tls {
    /// Reads the certificate chain in `cert` (PEM, the server's certificate
    /// first) and the private key in `key` (PEM).
    ///
    /// # Errors
    /// A file that cannot be read or holds no certificate or key, or a key
    /// that does not match the certificate.
    pub fn load(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Result<Tls, TlsError> {
        let (cert, key) = (cert.into(), key.into());
        let provider = Arc::new(ring::default_provider());
        let pair = read_pair(&cert, &key, &provider)?;
        let sessions = Arc::new(Sessions(ArcSwap::new(ServerSessionMemoryCache::new(SESSIONS_MAX))));
        let current = ArcSwap::from_pointee(pair);
        let resolver =
            Arc::new(Resolver { cert, key, provider: provider.clone(), current, sessions: sessions.clone() });
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_no_client_auth()
            .with_cert_resolver(resolver.clone());
        config.alpn_protocols = ALPN.iter().map(|protocol| protocol.to_vec()).collect();
        config.session_storage = sessions;
        Ok(Tls { resolver, acceptor: TlsAcceptor::from(Arc::new(config)) })
    }

    /// Reads the files again; from now on new connections get the new
    /// pair, and no session begun before is resumed. Connections already
    /// open keep theirs.
    ///
    /// # Errors
    /// As [`Tls::load`]; the pair in use is then kept.
    pub fn reload(&self) -> Result<(), TlsError> {
        let resolver = &self.resolver;
        let pair = read_pair(&resolver.cert, &resolver.key, &resolver.provider)?;
        resolver.current.store(Arc::new(pair));
        resolver.sessions.0.store(ServerSessionMemoryCache::new(SESSIONS_MAX));
        Ok(())
    }

    /// The certificate file, as given.
    pub fn cert_path(&self) -> &Path {
        &self.resolver.cert
    }

    /// What accepts connections with the pair of the moment.
    pub(crate) fn acceptor(&self) -> &TlsAcceptor {
        &self.acceptor
    }
}

/// The chain in `cert` and the key in `key`, checked to fit each other.
fn read_pair(cert: &Path, key: &Path, provider: &CryptoProvider) -> Result<CertifiedKey, TlsError> {
    fn read<'a>(what: &'static str, path: &'a Path) -> impl Fn(pem::Error) -> TlsError + 'a {
        move |error| TlsError::Read { what, path: path.to_owned(), source: pem_to_io(error) }
    }
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(read("certificate", cert))?
        .collect::<Result<_, _>>()
        .map_err(read("certificate", cert))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate(cert.to_owned()));
    }
    let private = match PrivateKeyDer::from_pem_file(key) {
        Ok(private) => private,
        Err(pem::Error::NoItemsFound) => return Err(TlsError::NoKey(key.to_owned())),
        Err(error) => return Err(read("key", key)(error)),
    };
    CertifiedKey::from_der(chain, private, provider).map_err(|source| TlsError::Rejected {
        cert: cert.to_owned(),
        key: key.to_owned(),
        source,
    })
}

/// A PEM error as an I/O error, the file's own when it is one.
fn pem_to_io(error: pem::Error) -> io::Error {
    match error {
        pem::Error::Io(error) => error,
        other => io::Error::new(io::ErrorKind::InvalidData, other.to_string()),
    }
}
