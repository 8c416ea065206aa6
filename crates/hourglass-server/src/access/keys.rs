//! The tokens a server knows, and who a request's bearer token is.
//!
//! Tokens are kept as SHA-256 digests only. A presented token is hashed,
//! looked up by digest, and the digest found compared again in constant
//! time; `--token` is compared the same way. A hash map's lookup time
//! depends on the digest, not on the token, so it tells a guesser nothing
//! about how close a guess was. No token, presented or known, is ever
//! logged: only names.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use sha2::{Digest as _, Sha256};

use super::file::{self, Digest, TokenFileError, TokenSet, OPEN_NAME, ROOT_NAME};
use super::Grant;

/// The tokens of a server: `--token` (admin on every queue), the
/// `--tokens` file, both or neither (then every request is admin).
pub struct Keys {
    /// `--token`'s digest, and its grant.
    root: Option<(Digest, Arc<Grant>)>,
    /// The file, and its tokens as last read whole.
    file: Option<(PathBuf, RwLock<Arc<TokenSet>>)>,
    /// The grant of every request when no token is required.
    open: Arc<Grant>,
    /// Names the file must hold, at start and at every reload (the
    /// beanstalkd front's token).
    names_required: Vec<String>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys")
            .field("token", &self.root.as_ref().map(|_| "***"))
            .field("tokens_file", &self.file.as_ref().map(|(path, _)| path))
            .finish()
    }
}

impl Keys {
    /// No token required: every request may do everything.
    pub fn open() -> Keys {
        Keys { root: None, file: None, open: Arc::new(Grant::admin(OPEN_NAME)), names_required: Vec::new() }
    }

    /// `token`, if given, is admin on every queue; `tokens_file`, if given,
    /// is read now, whole or not at all.
    ///
    /// # Errors
    /// The file cannot be read, or is not a valid token file: the error names
    /// the file and the line.
    pub fn new(token: Option<&str>, tokens_file: Option<&Path>) -> Result<Keys, TokenFileError> {
        let mut keys = Keys::open();
        keys.root = token.map(|token| (digest(token), Arc::new(Grant::admin(ROOT_NAME))));
        if let Some(path) = tokens_file {
            let set = file::read(path)?;
            keys.file = Some((path.to_owned(), RwLock::new(Arc::new(set))));
        }
        Ok(keys)
    }

    /// The file must hold a token named `name`, now and after every
    /// reload: a file without it is refused as a malformed one is.
    ///
    /// # Errors
    /// The file, as read, has no token of that name (or there is no file).
    pub fn requiring(mut self, name: &str) -> Result<Keys, TokenFileError> {
        let path = self.file().map(Path::to_owned).unwrap_or_default();
        let set = self.set().unwrap_or_default();
        self.names_required.push(name.to_owned());
        self.check_names(&path, &set)?;
        Ok(self)
    }

    /// `Ok` if `set` holds every name required.
    fn check_names(&self, path: &Path, set: &TokenSet) -> Result<(), TokenFileError> {
        match self.names_required.iter().find(|name| !set.by_name.contains_key(name.as_str())) {
            None => Ok(()),
            Some(name) => Err(TokenFileError {
                path: path.to_owned(),
                line: None,
                message: format!("has no token named {name:?}, which the beanstalkd front's --beanstalk-token names"),
            }),
        }
    }

    /// Whether requests must carry a token.
    pub fn required(&self) -> bool {
        self.root.is_some() || self.file.is_some()
    }

    /// The file's tokens now.
    fn set(&self) -> Option<Arc<TokenSet>> {
        self.file.as_ref().map(|(_, set)| set.read().clone())
    }

    /// How many tokens the file holds now (0 without one).
    pub fn file_tokens(&self) -> usize {
        self.set().map_or(0, |set| set.by_digest.len())
    }

    /// Reads the file again: the new tokens replace the old at once, for
    /// the requests that follow; a file that does not read leaves the old
    /// ones in place. Connections are not touched. Returns how many tokens
    /// the file now holds.
    ///
    /// # Errors
    /// The file does not read; nothing changed.
    pub fn reload(&self) -> Result<usize, TokenFileError> {
        let Some((path, set)) = &self.file else { return Ok(0) };
        let new = file::read(path)?;
        self.check_names(path, &new)?;
        let count = new.by_digest.len();
        *set.write() = Arc::new(new);
        Ok(count)
    }

    /// The grant of the bearer `token` presented, if it is known (or none is
    /// required).
    pub fn identify(&self, token: Option<&str>) -> Option<Arc<Grant>> {
        if !self.required() {
            return Some(self.open.clone());
        }
        let given = digest(token?);
        if let Some((root, grant)) = &self.root {
            if constant_time_eq(&given, root) {
                return Some(grant.clone());
            }
        }
        let set = self.set()?;
        let (found, grant) = set.by_digest.get_key_value(&given)?;
        constant_time_eq(&given, found).then(|| grant.clone())
    }

    /// The file's token named `name`, as it is now: for the beanstalkd
    /// front, which has no authentication of its own.
    pub fn named(&self, name: &str) -> Option<Arc<Grant>> {
        self.set()?.by_name.get(name).cloned()
    }

    /// The file, if any.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_ref().map(|(path, _)| path.as_path())
    }
}

/// Reloads `keys`' file at every SIGHUP that `hangups` receives, for as
/// long as the server runs: a file refused is logged with why, and the
/// tokens before it stay.
///
/// `hangups` is made by the caller before the file is first read: a SIGHUP
/// that came between the read and the stream's making would otherwise be
/// lost (the file's change with it), or, before any stream, end the process.
#[cfg(unix)]
pub async fn reload_on_hangup(keys: Arc<Keys>, mut hangups: tokio::signal::unix::Signal) {
    let Some(path) = keys.file().map(Path::to_owned) else { return };
    while hangups.recv().await.is_some() {
        match keys.reload() {
            Ok(tokens) => tracing::info!(file = %path.display(), tokens, "token file reloaded"),
            Err(error) => tracing::error!(%error, "token file refused on reload; the tokens before it stay"),
        }
    }
}

/// The bearer token of a request's headers, if any.
pub(crate) fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
}

/// A token's SHA-256.
fn digest(token: &str) -> Digest {
    Sha256::digest(token.as_bytes()).into()
}

/// Compares without an early exit, so the time taken does not tell how much
/// of a guess was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Permission;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
    }

    #[test]
    fn tokens_are_known_by_their_digest_and_reloaded_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.toml");
        let write = |name: &str, token: &str| {
            let text = format!(
                "[[token]]\nname = \"{name}\"\nsha256 = \"{}\"\nqueues = [\"a-*\"]\ncan = [\"read\"]\n",
                hex::encode(digest(token))
            );
            std::fs::write(&path, text).unwrap();
        };
        write("reader", "s3cret");
        let keys = Keys::new(Some("root"), Some(&path)).unwrap();
        assert!(keys.identify(None).is_none() && keys.identify(Some("nope")).is_none());
        assert!(keys.identify(Some("root")).unwrap().everywhere(Permission::Admin));
        let reader = keys.identify(Some("s3cret")).unwrap();
        assert_eq!(reader.name(), "reader");
        assert!(reader.allows(Permission::Read, "a-1") && !reader.allows(Permission::Read, "b"));
        assert!(keys.named("reader").is_some() && keys.named("root").is_none());

        write("rotated", "n3w");
        assert_eq!(keys.reload().unwrap(), 1);
        assert!(keys.identify(Some("s3cret")).is_none(), "the old token is gone");
        assert_eq!(keys.identify(Some("n3w")).unwrap().name(), "rotated");

        std::fs::write(&path, "[[token]]\nname = 5\n").unwrap();
        let error = keys.reload().unwrap_err();
        assert_eq!(error.line, Some(2), "{error}");
        assert_eq!(keys.identify(Some("n3w")).unwrap().name(), "rotated", "a refused file changes nothing");
        write("reader", "s3cret");
        keys.reload().unwrap();
        let keys = keys.requiring("reader").unwrap();
        write("renamed", "s3cret");
        let error = keys.reload().unwrap_err();
        assert!(error.message.contains("no token named \"reader\""), "{error}");
        assert!(keys.named("reader").is_some(), "kept out: the tokens before it stay");
        assert!(Keys::new(None, Some(&path)).unwrap().requiring("nobody").is_err());
        assert!(format!("{keys:?}").contains("***") && !format!("{keys:?}").contains("root\""));
    }

    #[test]
    fn without_tokens_every_request_is_admin() {
        let keys = Keys::open();
        assert!(!keys.required());
        assert!(keys.identify(None).unwrap().everywhere(Permission::Admin));
    }
}
