//! Certificates of the tests' own, made with rcgen: an authority, and
//! server certificates it signs for `localhost` and `127.0.0.1` (or other
//! names), as PEM text and files, for HTTPS servers and a Redis over TLS.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};

/// The names a server certificate is for, unless told: what tests connect to.
pub const LOCAL_NAMES: [&str; 2] = ["localhost", "127.0.0.1"];

/// A certificate authority that exists only for a test.
pub struct Authority {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate an [`Authority`] signed, with its private key.
pub struct Issued {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its private key, PEM (PKCS#8).
    pub key_pem: String,
    /// The certificate, DER: what a client sees of it.
    pub der: Vec<u8>,
}

impl Authority {
    /// A new authority named `name`.
    pub fn new(name: &str) -> Authority {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("an authority's parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().expect("a key");
        Authority { issuer: CertifiedIssuer::self_signed(params, key).expect("a self-signed authority") }
    }

    /// Its certificate, PEM: what a client trusts.
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A server certificate for `names` (DNS names or IP addresses), whose
    /// subject's common name is `common_name`, good for a client too.
    pub fn issue(&self, names: &[&str], common_name: &str) -> Issued {
        let names: Vec<String> = names.iter().map(|name| name.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("a certificate's parameters");
        params.distinguished_name.push(DnType::CommonName, common_name);
        // A client's too: a Redis Cluster's nodes over TLS are each other's clients.
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().expect("a key");
        let cert = params.signed_by(&key, &self.issuer).expect("a signed certificate");
        Issued { cert_pem: cert.pem(), key_pem: key.serialize_pem(), der: cert.der().to_vec() }
    }

    /// Writes its certificate to `dir/NAME` and returns the path.
    pub fn write(&self, dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, self.pem()).expect("write the authority's certificate");
        path
    }
}

impl Issued {
    /// Writes the certificate to `cert` and the key to `key`, replacing
    /// what was there (each file whole, by a rename, so that a reader never
    /// sees half of one).
    pub fn write_to(&self, cert: &Path, key: &Path) {
        for (path, text) in [(cert, &self.cert_pem), (key, &self.key_pem)] {
            let partial = path.with_extension("partial");
            std::fs::write(&partial, text).expect("write a PEM file");
            std::fs::rename(&partial, path).expect("move a PEM file into place");
        }
    }

    /// Writes it to `dir/STEM.pem` and `dir/STEM.key` and returns the two
    /// paths.
    pub fn write(&self, dir: &Path, stem: &str) -> (PathBuf, PathBuf) {
        let (cert, key) = (dir.join(format!("{stem}.pem")), dir.join(format!("{stem}.key")));
        self.write_to(&cert, &key);
        (cert, key)
    }
}
