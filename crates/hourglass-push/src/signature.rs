//! Signatures: a receiver learns that a request came from this hourglass,
//! unchanged, and recently.
//!
//! `Hourglass-Signature: t=<Unix ms>,v1=<hex>[,v1=<hex>...]`, one `v1` per
//! signing key, each the HMAC-SHA256 under that key of `<t>.` followed by the
//! body's bytes, in lowercase hex. A receiver accepts a request when any
//! `v1` matches under a key it holds and `t` is recent, so listing the old
//! and the new key while receivers move from one to the other rotates keys
//! without a gap (QStash's current and next key; Stripe's `t=`, `v1=`).

use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::limits::{SIGNING_KEYS_MAX, SIGNING_KEY_BYTES_MAX, SIGNING_KEY_BYTES_MIN};

/// `Hourglass-Signature`, the header that carries the signature.
pub const SIGNATURE_HEADER: reqwest::header::HeaderName =
    reqwest::header::HeaderName::from_static("hourglass-signature");

type HmacSha256 = Hmac<Sha256>;

/// One signing key: a secret. Its `Debug` shows no byte of it, and nothing
/// in this crate logs it.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningKey(Box<[u8]>);

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningKey(<redacted>)")
    }
}

/// The keys a push signs with, in order: none, one, or an old and a new
/// one while receivers rotate.
///
/// ```
/// use hourglass_push::SigningKeys;
///
/// let keys = SigningKeys::parse_list("old-key-0123456789,new-key-0123456789")?;
/// let header = keys.header_value(1_700_000_000_000, br#"{"order":42}"#).unwrap();
/// assert!(header.starts_with("t=1700000000000,v1="));
/// assert_eq!(header.matches(",v1=").count(), 2);
/// assert!(keys.verify(&header, br#"{"order":42}"#, 1_700_000_000_500, 300_000).is_ok());
/// assert_eq!(format!("{keys:?}"), "SigningKeys([SigningKey(<redacted>), SigningKey(<redacted>)])");
/// # Ok::<(), hourglass_push::KeyError>(())
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SigningKeys(Vec<SigningKey>);

impl fmt::Debug for SigningKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SigningKeys").field(&self.0).finish()
    }
}

/// Why a signing key was refused. The message never shows the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// Shorter than [`SIGNING_KEY_BYTES_MIN`] or longer than [`SIGNING_KEY_BYTES_MAX`].
    Length(usize),
    /// More than [`SIGNING_KEYS_MAX`] keys.
    TooMany,
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Length(n) => write!(
                f,
                "a signing key of {n} bytes: keys are {SIGNING_KEY_BYTES_MIN} to {SIGNING_KEY_BYTES_MAX} bytes"
            ),
            KeyError::TooMany => write!(f, "more than {SIGNING_KEYS_MAX} signing keys"),
        }
    }
}

impl std::error::Error for KeyError {}

/// Why a signature did not verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum VerifyError {
    /// The header is not `t=<ms>,v1=<hex>...`.
    Malformed,
    /// `t` is further from now than the tolerance: a replay, or a clock off.
    Stale,
    /// No `v1` matches under any key.
    NoMatch,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            VerifyError::Malformed => "the signature header is not t=<ms>,v1=<hex>",
            VerifyError::Stale => "the signature's time is outside the tolerance",
            VerifyError::NoMatch => "no signature matches a key",
        })
    }
}

impl std::error::Error for VerifyError {}

impl SigningKey {
    /// A key of `bytes` ([`SIGNING_KEY_BYTES_MIN`] to [`SIGNING_KEY_BYTES_MAX`]).
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<SigningKey, KeyError> {
        let bytes = bytes.into();
        if !(SIGNING_KEY_BYTES_MIN..=SIGNING_KEY_BYTES_MAX).contains(&bytes.len()) {
            return Err(KeyError::Length(bytes.len()));
        }
        Ok(SigningKey(bytes.into_boxed_slice()))
    }

    fn mac(&self, t_ms: u64, body: &[u8]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(t_ms.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }

    /// The hex HMAC-SHA256 under this key of `<t_ms>.` and `body`.
    pub fn sign(&self, t_ms: u64, body: &[u8]) -> String {
        hex::encode(self.mac(t_ms, body).finalize().into_bytes())
    }
}

/// A key from its text's bytes: what a command-line flag or an environment
/// variable gives. (A command line had better check keys itself than hand
/// this to its parser, whose errors may quote the refused value.)
impl std::str::FromStr for SigningKey {
    type Err = KeyError;

    fn from_str(key: &str) -> Result<SigningKey, KeyError> {
        SigningKey::new(key)
    }
}

impl SigningKeys {
    /// No keys: requests go unsigned.
    pub fn none() -> SigningKeys {
        SigningKeys::default()
    }

    /// `keys`, in order.
    pub fn new(keys: impl IntoIterator<Item = SigningKey>) -> Result<SigningKeys, KeyError> {
        let mut all = SigningKeys::none();
        for key in keys {
            all.push(key)?;
        }
        Ok(all)
    }

    /// Adds `key` after those there.
    pub fn push(&mut self, key: SigningKey) -> Result<(), KeyError> {
        if self.0.len() >= SIGNING_KEYS_MAX {
            return Err(KeyError::TooMany);
        }
        self.0.push(key);
        Ok(())
    }

    /// Keys from a comma-separated list (an environment variable's form):
    /// each key is its text's bytes, spaces around it trimmed, empty items
    /// skipped.
    pub fn parse_list(list: &str) -> Result<SigningKeys, KeyError> {
        let keys = list.split(',').map(str::trim).filter(|k| !k.is_empty()).map(SigningKey::new);
        SigningKeys::new(keys.collect::<Result<Vec<_>, _>>()?)
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The [`SIGNATURE_HEADER`]'s value for `body` sent at `t_ms`, or `None`
    /// without keys.
    pub fn header_value(&self, t_ms: u64, body: &[u8]) -> Option<String> {
        if self.0.is_empty() {
            return None;
        }
        let mut value = format!("t={t_ms}");
        for key in &self.0 {
            value.push_str(",v1=");
            value.push_str(&key.sign(t_ms, body));
        }
        Some(value)
    }

    /// Checks a [`SIGNATURE_HEADER`] value as a receiver would: some `v1`
    /// matches `body` under one of these keys (compared in constant time),
    /// and `t` is within `tolerance_ms` of `now_ms`.
    pub fn verify(&self, header: &str, body: &[u8], now_ms: u64, tolerance_ms: u64) -> Result<(), VerifyError> {
        let mut parts = header.split(',');
        let t_ms: u64 = parts
            .next()
            .and_then(|t| t.trim().strip_prefix("t="))
            .and_then(|t| t.parse().ok())
            .ok_or(VerifyError::Malformed)?;
        if now_ms.abs_diff(t_ms) > tolerance_ms {
            return Err(VerifyError::Stale);
        }
        let mut any = false;
        for part in parts {
            let Some(hex) = part.trim().strip_prefix("v1=") else { continue };
            any = true;
            let Ok(signature) = hex::decode(hex) else { continue };
            if self.0.iter().any(|key| key.mac(t_ms, body).verify_slice(&signature).is_ok()) {
                return Ok(());
            }
        }
        Err(if any { VerifyError::NoMatch } else { VerifyError::Malformed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &[u8] = br#"{"order":42}"#;

    fn keys(list: &str) -> SigningKeys {
        SigningKeys::parse_list(list).unwrap()
    }

    #[test]
    fn a_signature_is_the_rfc_4231_hmac_of_t_dot_body() {
        // RFC 4231, test case 2: the MAC itself is HMAC-SHA256.
        let mut mac = HmacSha256::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(mac.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // And the push's input is `<t>.` then the body, byte for byte.
        let key = SigningKey::new("0123456789abcdef").unwrap();
        let mut mac = HmacSha256::new_from_slice(b"0123456789abcdef").unwrap();
        mac.update(b"1700000000000.{\"order\":42}");
        assert_eq!(key.sign(1_700_000_000_000, BODY), hex::encode(mac.finalize().into_bytes()));
    }

    #[test]
    fn one_v1_per_key_in_order_and_none_without_keys() {
        let both = keys("old-0123456789abcdef, new-0123456789abcdef,");
        assert_eq!(both.len(), 2);
        let header = both.header_value(5, BODY).unwrap();
        let old = SigningKey::new("old-0123456789abcdef").unwrap().sign(5, BODY);
        let new = SigningKey::new("new-0123456789abcdef").unwrap().sign(5, BODY);
        assert_eq!(header, format!("t=5,v1={old},v1={new}"));
        assert_eq!(SigningKeys::none().header_value(5, BODY), None);
    }

    #[test]
    fn a_receiver_with_either_key_verifies_during_a_rotation() {
        let sender = keys("old-0123456789abcdef,new-0123456789abcdef");
        let header = sender.header_value(1_000, BODY).unwrap();
        assert_eq!(keys("old-0123456789abcdef").verify(&header, BODY, 1_000, 0), Ok(()));
        assert_eq!(keys("new-0123456789abcdef").verify(&header, BODY, 1_000, 0), Ok(()));
        assert_eq!(keys("other-0123456789abcd").verify(&header, BODY, 1_000, 0), Err(VerifyError::NoMatch));
        assert_eq!(keys("old-0123456789abcdef").verify(&header, b"{}", 1_000, 0), Err(VerifyError::NoMatch));
        assert_eq!(keys("old-0123456789abcdef").verify(&header, BODY, 2_001, 1_000), Err(VerifyError::Stale));
        for bad in ["", "v1=00", "t=x,v1=00", "t=1000", "t=1000,v2=00"] {
            assert_eq!(sender.verify(bad, BODY, 1_000, 0), Err(VerifyError::Malformed), "{bad:?}");
        }
    }

    #[test]
    fn keys_are_bounded_and_never_shown() {
        assert_eq!(SigningKey::new("short").unwrap_err(), KeyError::Length(5));
        assert_eq!(
            SigningKey::new(vec![b'k'; SIGNING_KEY_BYTES_MAX + 1]).unwrap_err().to_string(),
            format!(
                "a signing key of {} bytes: keys are {SIGNING_KEY_BYTES_MIN} to {SIGNING_KEY_BYTES_MAX} bytes",
                SIGNING_KEY_BYTES_MAX + 1
            )
        );
        let many = vec!["k".repeat(SIGNING_KEY_BYTES_MIN); SIGNING_KEYS_MAX + 1].join(",");
        assert_eq!(SigningKeys::parse_list(&many).unwrap_err(), KeyError::TooMany);
        let flags: Vec<SigningKey> = ["flag-key-0123456789", "other-key-0123456789"].map(|k| k.parse().unwrap()).into();
        assert_eq!(SigningKeys::new(flags).unwrap(), keys("flag-key-0123456789,other-key-0123456789"));
        assert_eq!("short".parse::<SigningKey>().unwrap_err(), KeyError::Length(5));
        let secret = "very-secret-key-material";
        let shown = format!("{:?} {:?}", keys(secret), SigningKey::new(secret).unwrap());
        assert!(!shown.contains("secret") && !shown.contains("very"), "{shown}");
    }
}
